"""Numba CUDA kernels for the PTX corpus (tests/corpus).

Run by scripts/gen-corpus.sh: `python numba_kernels.py OUTDIR` writes one
`numba_<kernel>_<sig>.<cc>.ptx` per kernel, signature and compute capability
with `numba.cuda.compile_ptx` (NVVM; no GPU needed).
"""
import math
import os
import sys

from numba import boolean, cuda, float32, float64, int8, int16, int32, int64, uint8, uint32, uint64
from numba.core.types import float16

CCS = [(7, 5), (8, 0), (9, 0)]


def saxpy(out, a, x, y):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


def elementwise_math(out, x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = x[i]
        out[i] = math.sin(v) + math.cos(v) + math.exp(v) + math.log(abs(v) + 1) + math.sqrt(abs(v)) + math.tanh(v)


def int_ops(out, a, b):
    i = cuda.grid(1)
    if i < a.shape[0]:
        x = a[i]
        y = b[i]
        r = x + y
        r ^= x * y
        if y != 0:
            r += x // y
            r += x % y
        r += (x << 3) | (y >> 2)
        r = max(r, x) - min(y, r)
        out[i] = r


def matmul_2d(c, a, b):
    row, col = cuda.grid(2)
    if row < c.shape[0] and col < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


def shared_reduce(out, x):
    s = cuda.shared.array(256, dtype=float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    step = 128
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(out, 0, s[0])


def atomics(out, x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = x[i]
        cuda.atomic.add(out, 0, v)
        cuda.atomic.max(out, 1, v)
        cuda.atomic.min(out, 2, v)
        cuda.atomic.sub(out, 3, v)
        cuda.atomic.and_(out, 4, v)
        cuda.atomic.or_(out, 5, v)
        cuda.atomic.xor(out, 6, v)
        cuda.atomic.exch(out, 7, v)
        cuda.atomic.compare_and_swap(out[8:], 0, v)


def atomics_float(out, x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i])
        cuda.atomic.max(out, 1, x[i])
        cuda.atomic.min(out, 2, x[i])
        cuda.atomic.nanmax(out, 3, x[i])


def warp_ops(out, x):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0
    m = cuda.activemask()
    b = cuda.ballot_sync(m, v > 0)
    a = cuda.all_sync(m, v != 0)
    y = cuda.any_sync(m, v < 0)
    s = cuda.shfl_sync(m, v, 0) + cuda.shfl_up_sync(m, v, 1) + cuda.shfl_down_sync(m, v, 2) + cuda.shfl_xor_sync(m, v, 4)
    mm = cuda.match_any_sync(m, v)
    cuda.syncwarp(m)
    if i < x.shape[0]:
        out[i] = b + a + y + s + mm + cuda.laneid + cuda.popc(b) + cuda.clz(v) + cuda.ffs(v) + cuda.brev(b)


def grid_stride(out, x):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        out[i] = x[i] * 2 + 1


def local_array(out, x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        buf = cuda.local.array(8, dtype=int32)
        for k in range(8):
            buf[k] = x[(i + k) % x.shape[0]]
        best = buf[0]
        for k in range(1, 8):
            if buf[k] > best:
                best = buf[k]
        out[i] = best


def branchy(out, x):
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    v = x[i]
    if v < -1.0:
        r = -v
    elif v < 0.0:
        r = v * v
    elif v < 1.0:
        r = math.sqrt(v)
    else:
        r = 1.0 / v
    n = 0
    while r > 0.01 and n < 50:
        r *= 0.5
        n += 1
    out[i] = r + n


def stencil_3d(out, x):
    i, j, k = cuda.grid(3)
    if 0 < i < x.shape[0] - 1 and 0 < j < x.shape[1] - 1 and 0 < k < x.shape[2] - 1:
        out[i, j, k] = (x[i - 1, j, k] + x[i + 1, j, k] + x[i, j - 1, k] + x[i, j + 1, k] + x[i, j, k - 1] + x[i, j, k + 1]) / 6


def half_ops(out, a, b):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] * b[i] + a[i] - (a[i] if a[i] > b[i] else b[i])


def fastmath_ops(out, x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = math.exp(x[i]) / (1.0 + math.exp(x[i])) + math.pow(abs(x[i]), 0.3)


def cbrt_fma(out, x, y):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = cuda.fma(x[i], y[i], 1.0) + cuda.cbrt(abs(x[i]))


def scan_shared(out, x):
    s = cuda.shared.array(128, dtype=int64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    off = 1
    while off < 128:
        v = s[t - off] if t >= off else 0
        cuda.syncthreads()
        s[t] += v
        cuda.syncthreads()
        off *= 2
    if i < x.shape[0]:
        out[i] = s[t]


def conversions(out_i, out_f, x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = x[i]
        out_i[i] = int32(v) + int32(int8(v)) + int32(uint8(v)) + int32(int16(v))
        out_f[i] = float32(v) + float32(uint32(v)) + float32(float64(v) * 0.5)


def bool_mask(out, x, mask):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] if mask[i] else -x[i]


KERNELS = [
    (saxpy, "f32", (float32[::1], float32, float32[::1], float32[::1])),
    (saxpy, "f64", (float64[::1], float64, float64[::1], float64[::1])),
    (elementwise_math, "f32", (float32[::1], float32[::1])),
    (elementwise_math, "f64", (float64[::1], float64[::1])),
    (int_ops, "i32", (int32[::1], int32[::1], int32[::1])),
    (int_ops, "u64", (uint64[::1], uint64[::1], uint64[::1])),
    (matmul_2d, "f32", (float32[:, ::1], float32[:, ::1], float32[:, ::1])),
    (shared_reduce, "f32", (float32[::1], float32[::1])),
    (atomics, "i32", (int32[::1], int32[::1])),
    (atomics, "u64", (uint64[::1], uint64[::1])),
    (atomics_float, "f32", (float32[::1], float32[::1])),
    (atomics_float, "f64", (float64[::1], float64[::1])),
    (warp_ops, "i32", (int32[::1], int32[::1])),
    (grid_stride, "i64", (int64[::1], int64[::1])),
    (local_array, "i32", (int32[::1], int32[::1])),
    (branchy, "f64", (float64[::1], float64[::1])),
    (stencil_3d, "f32", (float32[:, :, ::1], float32[:, :, ::1])),
    (half_ops, "f16", (float16[::1], float16[::1], float16[::1])),
    (fastmath_ops, "f32", (float32[::1], float32[::1])),
    (cbrt_fma, "f32", (float32[::1], float32[::1], float32[::1])),
    (scan_shared, "i64", (int64[::1], int64[::1])),
    (conversions, "f64", (int32[::1], float32[::1], float64[::1])),
    (bool_mask, "f32", (float32[::1], float32[::1], boolean[::1])),
]

FASTMATH = {fastmath_ops}


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for fn, sig_name, sig in KERNELS:
        for cc in CCS:
            ptx, _ = cuda.compile_ptx(fn, sig, cc=cc, fastmath=fn in FASTMATH)
            name = f"numba_{fn.__name__}_{sig_name}.sm_{cc[0]}{cc[1]}.ptx"
            with open(os.path.join(out_dir, name), "w") as f:
                f.write(ptx)


if __name__ == "__main__":
    main()
