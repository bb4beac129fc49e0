#!/usr/bin/python3
"""Writes the files that tests/cli/compare.txt compares and shows, into
this folder.  Run with /usr/bin/python3 (numpy); the outputs are committed
and CI does not run this.

Tolerance edges are computed, not guessed: from a reference value b,
np.nextafter steps to the last value a that the rule
|a - b| <= atol + rtol * |b| accepts, evaluated in float64 (as
numpy.isclose does for f64, and as tl does for f32 too); the "out" file
holds the next value of the dtype, which the rule rejects.  The values
used in compare.txt are printed."""
import json
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))


def p(name):
    return os.path.join(here, name)


def rule(a, b, rtol, atol):
    a, b = np.float64(a), np.float64(b)
    return bool(abs(a - b) <= atol + rtol * abs(b))


def edge(b, rtol, atol, dtype, direction):
    """(last accepted, first rejected) from b in direction +1 or -1."""
    b = dtype(b)
    to = dtype(direction * np.inf)
    a = dtype(np.float64(b) + direction * (atol + rtol * abs(np.float64(b))))
    while not rule(a, b, rtol, atol):
        a = np.nextafter(a, -to)
    while rule(np.nextafter(a, to), b, rtol, atol):
        a = np.nextafter(a, to)
    out = np.nextafter(a, to)
    assert a != b and rule(a, b, rtol, atol) and not rule(out, b, rtol, atol)
    if dtype == np.float64:  # the same answers as numpy itself
        assert np.isclose(a, b, rtol=rtol, atol=atol) and not np.isclose(out, b, rtol=rtol, atol=atol)
    return a, out


def steps(x, n):
    """x moved n steps of its own dtype (n < 0: down)."""
    for _ in range(abs(n)):
        x = np.nextafter(x, x.dtype.type(np.inf if n > 0 else -np.inf))
    return x


def ref():
    return {'y': np.array([1.0, 3.7, -123.456]),
            'grad/x': np.array([[0.5], [3.7]], dtype=np.float32),
            'idx': np.array([0, 5, 2**53 + 1], dtype=np.int64)}


def save(name, **changes):
    r = ref()
    for key, (index, value) in changes.items():
        r[key.replace('__', '/')][index] = value
    np.savez(p(name), **r)


def show(label, *values):
    print(label, ' '.join(repr(float(v)) for v in values))


np.savez(p('ref.npz'), **ref())
np.savez(p('same.npz'), **ref())

# f64, default rtol 1e-7: y[1] = 3.7 moved up to the edge and past it
a, out = edge(3.7, 1e-7, 0.0, np.float64, +1)
save('f64_up_in.npz', y=(1, a))
save('f64_up_out.npz', y=(1, out))
show('f64 up edge of 3.7:', a, out)
# ... and y[2] = -123.456 moved towards zero
a, out = edge(-123.456, 1e-7, 0.0, np.float64, +1)
save('f64_down_in.npz', y=(2, a))
save('f64_down_out.npz', y=(2, out))
show('f64 edge of -123.456 towards 0:', a, out)
# f32, default rtol 1e-5: grad/x[1,0] = 3.7f moved down
a, out = edge(np.float32(3.7), 1e-5, 0.0, np.float32, -1)
save('f32_in.npz', grad__x=((1, 0), a))
save('f32_out.npz', grad__x=((1, 0), out))
show('f32 down edge of 3.7f:', a, out)
# --rtol 0 --atol 1e-3 on y[0] = 1.0, upwards
a, out = edge(1.0, 0.0, 1e-3, np.float64, +1)
save('atol_in.npz', y=(0, a))
save('atol_out.npz', y=(0, out))
show('atol 1e-3 edge of 1.0:', a, out)
# --rtol 1e-3 --atol 1e-6 on grad/x[0,0] = 0.5f, upwards
a, out = edge(np.float32(0.5), 1e-3, 1e-6, np.float32, +1)
save('both_in.npz', grad__x=((0, 0), a))
save('both_out.npz', grad__x=((0, 0), out))
show('rtol 1e-3 atol 1e-6 edge of 0.5f:', a, out)

# ulps, each in its own dtype: y[0] 3 steps up, grad/x[0,0] 3 f32 steps down
save('ulp3.npz', y=(0, steps(np.float64(1.0), 3)), grad__x=((0, 0), steps(np.float32(0.5), -3)))
# across zero: distances 0, 0, 2 (the smallest subnormals of either sign), 1
np.savez(p('zeros_a.npz'), z=np.array([0.0, -0.0, 5e-324, 5e-324]))
np.savez(p('zeros_b.npz'), z=np.array([-0.0, 0.0, -5e-324, 0.0]))
# infinities
np.savez(p('inf_a.npz'), v=np.array([np.inf, -np.inf, 1.0]))
np.savez(p('inf_b.npz'), v=np.array([np.inf, np.inf, 1.0]))
np.savez(p('inf_max.npz'), v=np.array([np.finfo(np.float64).max, -np.inf, 1.0]))
# NaN
np.savez(p('nan_a.npz'), v=np.array([np.nan, 1.0]))
np.savez(p('nan_b.npz'), v=np.array([np.nan, 1.0]))
np.savez(p('nan_c.npz'), v=np.array([1.0, 1.0]))

# keys, dtypes, shapes
r = ref()
del r['idx']
np.savez(p('fewer.npz'), **r)
r = ref()
r['y'] = r['y'].astype(np.float32)
np.savez(p('dtype.npz'), **r)
r = ref()
r['grad/x'] = r['grad/x'].reshape(1, 2)
np.savez(p('shape.npz'), **r)
np.savez(p('y_only.npz'), y=ref()['y'])
np.save(p('y.npy'), ref()['y'])
np.save(p('long.npy'), np.arange(2000.0))  # elided by tl show without --full

# index tensors beyond 2^53, in json: read exactly
np.savez(p('idx.npz'), idx=ref()['idx'])


def tl_json(outputs, grads):
    """tl's json output format, numbers as Python's repr (which is tl's)."""
    def t(a):
        data = [x if np.isfinite(x) else ('nan' if np.isnan(x) else ('inf' if x > 0 else '-inf'))
                for x in a.reshape(-1).tolist()]
        return {'dtype': {'float32': 'f32', 'float64': 'f64', 'int64': 'i64', 'int32': 'i32'}[a.dtype.name],
                'shape': list(a.shape), 'data': data}
    return json.dumps({'device': 'cpu', 'outputs': {k: t(v) for k, v in outputs.items()},
                       'grads': {k: t(v) for k, v in grads.items()}})


with open(p('idx_2p53.json'), 'w') as f:  # 2^53, where the reference has 2^53 + 1
    f.write(tl_json({'idx': np.array([0, 5, 2**53], dtype=np.int64)}, {}) + '\n')
with open(p('idx_exact.json'), 'w') as f:
    f.write(tl_json({'idx': ref()['idx']}, {}) + '\n')

# what tl grad tests/cli/poly.json x='[1,2]' gives: z = [2, 17], grad/x = [4, 32]
np.savez(p('poly_golden.npz'), z=np.array([2.0, 17.0]), **{'grad/x': np.array([4.0, 32.0])})
with open(p('poly_golden.json'), 'w') as f:
    f.write(tl_json({'z': np.array([2.0, 17.0])}, {'x': np.array([4.0, 32.0])}) + '\n')
np.savez(p('poly_off.npz'), z=np.array([2.0, 17.0]), **{'grad/x': np.array([4.0, 32.001])})

# hostile result files
hostile = {
    'nan_spelled.json': '{"outputs": {"y": {"dtype": "f64", "shape": [2], "data": [1, "NaN"]}}}',
    'count.json': '{"outputs": {"y": {"dtype": "f64", "shape": [2, 3], "data": [1, 2, 3]}}}',
    'huge_shape.json': '{"outputs": {"y": {"dtype": "f64", "shape": [4294967296, 4294967296], "data": []}}}',
    'truncated.json': '{"outputs": {"y": {"dtype": "f64", "shape": [1], "data": [1',
    'not_object.json': '{"outputs": {"y": [1, 2, 3]}}',
    'bad_dtype.json': '{"outputs": {"y": {"dtype": "float16", "shape": [1], "data": [1]}}}',
    'no_outputs.json': '{"device": "cpu"}',
    'i64_range.json': '{"outputs": {"i": {"dtype": "i64", "shape": [1], "data": [9223372036854775808]}}}',
    'twice.json': '{"outputs": {"grad/x": {"dtype": "f64", "shape": [], "data": [1]}}, '
                  '"grads": {"x": {"dtype": "f64", "shape": [], "data": [1]}}}',
    'trailing.json': '{"outputs": {}, "grads": {}}\n{"outputs": {}}',
    'empty.json': '',
}
for name, text in hostile.items():
    with open(p('hostile_' + name), 'w') as f:
        f.write(text)
with open(p('ref.npz'), 'rb') as f:
    whole = f.read()
with open(p('hostile_truncated.npz'), 'wb') as f:
    f.write(whole[:len(whole) // 2])
with open(p('hostile_text.txt'), 'w') as f:
    f.write('y = [1, 2, 3]\n')
