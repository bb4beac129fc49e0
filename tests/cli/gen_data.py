#!/usr/bin/python3
"""Writes the tensor files used by tests/cli/cases.txt and known_bugs.txt.
Run from anywhere with /usr/bin/python3 (numpy); the files are committed."""
import os
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))


def p(name):
    return os.path.join(here, name)


np.savez(p('sumsq_inputs.npz'), x=np.array([1., 2., 3.]))
np.savez(p('matmul_inputs.npz'), a=np.array([[1., 2.]]), b=np.array([[2.], [3.]]))
np.savez_compressed(p('matmul_inputs_z.npz'), a=np.array([[1., 2.]]), b=np.array([[2.], [3.]]))
np.savez(p('a_only.npz'), a=np.array([[1., 2.]]))
np.savez(p('b_only.npz'), b=np.array([[2.], [3.]]))
np.save(p('x123.npy'), np.array([1., 2., 3.]))
np.save(p('x123_f32.npy'), np.array([1., 2., 3.], dtype=np.float32))
np.save(p('x_int32.npy'), np.array([1, 2, 3], dtype=np.int32))
np.save(p('x_be.npy'), np.array([1., 2., 3.], dtype='>f8'))
np.save(p('m_fortran.npy'), np.asfortranarray(np.array([[1., 2., 3.], [4., 5., 6.]])))
np.save(p('seed_12.npy'), np.array([1., 2.]))
np.save(p('seed_f32_2.npy'), np.array([1., 2.], dtype=np.float32))
# a valid header with half of its data
with open(p('x123.npy'), 'rb') as f:
    whole = f.read()
with open(p('truncated.npy'), 'wb') as f:
    f.write(whole[:len(whole) - 12])
with open(p('bad_magic.npy'), 'wb') as f:
    f.write(b'NOTNUMPY-this is not a .npy file\n')
# index tensors (labels)
np.save(p('labels_i64.npy'), np.array([2, 0, 1], dtype=np.int64))
np.save(p('labels_be_i32.npy'), np.array([2, 0, 1], dtype='>i4'))
np.save(p('labels_fortran_i64.npy'), np.asfortranarray(np.array([[0, 1, 2], [2, 1, 0]], dtype=np.int64)))
np.savez(p('take_inputs.npz'), x=np.array([10., 20., 30., 40.]), idx=np.array([3, -1, 0, 3], dtype=np.int32))

# recurrence_40k.json: s <- 0.999 s + 0.001 sin(s), 40000 steps from x = 0.5;
# its value, gradient and second derivative (the hvp along 1) by the
# chain rule's own recurrences, forward (tl's runs the tape backward
# twice): d' = (0.999 + 0.001 cos s) d, h' = (0.999 + 0.001 cos s) h -
# 0.001 sin(s) d^2.  A long recording: its gradient arrays pass 2 MiB.
s, d, h = 0.5, 1.0, 0.0
for _ in range(40000):
    s, d, h = (0.999 * s + 0.001 * np.sin(s), (0.999 + 0.001 * np.cos(s)) * d,
               (0.999 + 0.001 * np.cos(s)) * h - 0.001 * np.sin(s) * d * d)
np.savez(p('recurrence_40k_expected.npz'), **{'y': np.float64(s), 'grad/x': np.float64(d),
                                               'hvp/x': np.float64(h)})
