#!/usr/bin/python3
"""Writes the input tensors of the examples in this folder.

Run with the Debian NumPy from the repository root or from examples/:

    /usr/bin/python3 examples/make_inputs.py

Values come from a fixed-seed generator and the .npz archives get fixed
member timestamps, so a re-run rewrites byte-identical files.
"""
import io
import os
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def save_npy(name, arr):
    with open(os.path.join(HERE, name), "wb") as f:
        np.lib.format.write_array(f, np.ascontiguousarray(arr), allow_pickle=False)


def save_npz(name, arrays):
    """np.savez layout (stored members KEY.npy) with a fixed date, so the
    bytes do not depend on when the script ran."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for key, arr in arrays.items():
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            member = io.BytesIO()
            np.lib.format.write_array(member, np.require(arr, requirements="C"), allow_pickle=False)
            zf.writestr(info, member.getvalue())
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(buf.getvalue())


def main():
    rng = np.random.default_rng(20240601)
    f32 = np.float32

    # mlp.json: 4 samples, 3 features, 5 hidden units, 3 classes (f32).
    n, d, h, k = 4, 3, 5, 3
    save_npz("mlp_inputs.npz", {
        "x": rng.standard_normal((n, d)).astype(f32),
        "w1": (rng.standard_normal((d, h)) / np.sqrt(d)).astype(f32),
        "b1": (0.1 * rng.standard_normal(h)).astype(f32),
        "w2": (rng.standard_normal((h, k)) / np.sqrt(h)).astype(f32),
        "b2": (0.1 * rng.standard_normal(k)).astype(f32),
    })

    # const_file.json: a fixed linear layer read from files (f64).
    save_npy("weights.npy", rng.standard_normal((3, 2)))
    save_npz("weights.npz", {"w": np.array([0.5, -1.5]), "b": np.array([0.25, 0.75])})
    save_npy("const_file_x.npy", rng.standard_normal((2, 3)))

    # xent.json: a linear classifier, 6 samples, 4 features, 3 classes (f32),
    # with int64 labels. Its own generator, so the files above stay as they are.
    rng = np.random.default_rng(20240607)
    n, d, k = 6, 4, 3
    save_npz("xent_inputs.npz", {
        "x": rng.standard_normal((n, d)).astype(f32),
        "w": (rng.standard_normal((d, k)) / np.sqrt(d)).astype(f32),
        "b": (0.1 * rng.standard_normal(k)).astype(f32),
        "labels": np.array([0, 2, 1, 2, 0, 1], dtype=np.int64),
    })

    # ci-cases/: many inputs for one graph (xent.json), checked by
    # ci-regression.sh against their golden results (which tl writes:
    # bash examples/ci-regression.sh --update).  Their own generator again.
    rng = np.random.default_rng(20261130)
    os.makedirs(os.path.join(HERE, "ci-cases"), exist_ok=True)
    for c in range(8):
        m = 4 + c
        save_npz(os.path.join("ci-cases", "case%d.npz" % c), {
            "x": rng.standard_normal((m, d)).astype(f32),
            "w": (rng.standard_normal((d, k)) / np.sqrt(d)).astype(f32),
            "b": (0.1 * rng.standard_normal(k)).astype(f32),
            "labels": rng.integers(0, k, m).astype(np.int64),
        })


if __name__ == "__main__":
    main()
