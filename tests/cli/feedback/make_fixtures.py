# Makes mixed.npz for tests/cli/feedback.txt: tensors whose bits a result
# file must carry exactly (f64 and f32 edge values, integer extremes,
# scalars, zero-size shapes).  Run with NumPy: /usr/bin/python3 make_fixtures.py
import numpy as np

rng = np.random.default_rng(22)
f64 = np.concatenate([rng.standard_normal(6) * 10.0 ** rng.integers(-300, 300, 6),
                      [0.0, -0.0, 5e-324, 1.7976931348623157e308, np.nan, np.inf, -np.inf, 0.1]])
f32 = np.concatenate([rng.standard_normal(6).astype(np.float32) * np.float32(1e-30),
                      np.array([1.4e-45, 3.4028235e38, -0.0, np.nan, np.inf, 0.1], np.float32)]).astype(np.float32)
np.savez("mixed.npz",
         a=f64.reshape(2, 7), b=f32.reshape(3, 4),
         c=np.array([-2**31, 2**31 - 1, 0, -1], np.int32),
         d=np.array([-2**63, 2**63 - 1, 0, 7], np.int64).reshape(2, 1, 2),
         e=np.float64(-2.5), f=np.zeros((0, 3), np.float32), g=np.zeros((2, 0), np.int64))
