"""numba-cuda kernels on ptxvk's libcuda.so.1.

    LD_LIBRARY_PATH=$(libcuda/build-libcuda.sh) python libcuda/tests/clients/numba_smoke.py

Needs numba-cuda and nvidia-nvvm (libnvvm) installed, and not
nvidia-nvjitlink (with it numba links cubins, which this driver cannot run).
Exits non-zero on the first mismatch; prints one line per check.
"""
import math
import os
import sys
import tempfile

import numpy as np
from numba import cuda, float32, int32


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def block_sum(x, out):
    tmp = cuda.shared.array(256, dtype=float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    tmp[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = 128
    while s > 0:
        if t < s:
            tmp[t] += tmp[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.add(out, 0, tmp[0])


@cuda.jit
def histogram(x, bins):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(bins, x[i] % bins.size, 1)


@cuda.jit(device=True)
def poly(v):
    return v * v + 2.0 * v + 1.0


@cuda.jit
def apply_poly_2d(a, out):
    r, c = cuda.grid(2)
    if r < a.shape[0] and c < a.shape[1]:
        out[r, c] = poly(a[r, c]) + math.sqrt(abs(a[r, c]))


@cuda.jit
def say(x):
    i = cuda.grid(1)
    if i < x.size:
        print("elem", i, x[i], -3)


def captured_stdout(run):
    """What `run()` writes to file descriptor 1 (kernel output goes there, not to sys.stdout)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 1)
        try:
            run()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        f.seek(0)
        return f.read().decode()


def check(name, ok):
    print("%-28s %s" % (name, "ok" if ok else "FAILED"))
    if not ok:
        sys.exit(1)


def main():
    dev = cuda.get_current_device()
    print("device:", dev.name, "cc", dev.compute_capability)
    n = 100_003
    rng = np.random.default_rng(7)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = cuda.device_array_like(x)
    saxpy[(n + 255) // 256, 256](np.float32(2.5), cuda.to_device(x), cuda.to_device(y), out)
    check("saxpy", np.allclose(out.copy_to_host(), 2.5 * x + y, rtol=1e-6, atol=1e-6))

    total = cuda.to_device(np.zeros(1, np.float32))
    ones = np.ones(n, np.float32)
    block_sum[(n + 255) // 256, 256](cuda.to_device(ones), total)
    check("shared-memory reduction", total.copy_to_host()[0] == n)

    data = rng.integers(0, 1000, 50_000).astype(np.int32)
    bins = cuda.to_device(np.zeros(16, np.int32))
    histogram[(data.size + 127) // 128, 128](cuda.to_device(data), bins)
    check("atomic histogram", (bins.copy_to_host() == np.bincount(data % 16, minlength=16)).all())

    a = rng.standard_normal((70, 90)).astype(np.float32)
    o = cuda.device_array_like(a)
    apply_poly_2d[(5, 6), (16, 16)](cuda.to_device(a), o)
    check("2-D grid, device function", np.allclose(o.copy_to_host(), a * a + 2 * a + 1 + np.sqrt(np.abs(a)), rtol=1e-5, atol=1e-5))

    stream = cuda.stream()
    dx = cuda.to_device(x, stream=stream)
    saxpy[(n + 255) // 256, 256, stream](np.float32(-1.0), dx, dx, dx)
    stream.synchronize()
    check("stream launch", np.allclose(dx.copy_to_host(), np.zeros_like(x)))
    v = np.array([0.5, -1.25, 3.0, 1e-3, 7.0], np.float32)
    dv = cuda.to_device(v)
    text = captured_stdout(lambda: (say[1, 8](dv), cuda.synchronize()))
    want = sorted("elem %d %f -3\n" % (i, float(e)) for i, e in enumerate(v))
    got = sorted(text.splitlines(keepends=True))
    if got != want:
        print("print() output:", repr(text), "expected (any order):", want)
    check("print() in a kernel", got == want)
    print("numba smoke: all passed")


if __name__ == "__main__":
    main()
