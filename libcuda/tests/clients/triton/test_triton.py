"""Stock Triton 3.9 on ptxvk's libcuda.so.1 (issue 18): the kernels of
Triton's tutorials, launched with `kernel[grid](...)` exactly as a Triton
user does, with Triton's own launcher. Triton's compiler runs ptxvk's
`ptxas` stand-in (TRITON_PTXAS_PATH, see run.sh), whose output the shim
loads as PTX. No torch: arguments are `devarray.DeviceArray`s (device
memory from the driver API, with `data_ptr()` and `dtype`).

Inputs are random with fixed seeds, outputs are poisoned (0xAB bytes)
before each launch, and every result is compared with numpy within a bound
derived from the arithmetic (not a loose tolerance): float32 sums of n terms
are within n·2^-24·Σ|terms| of the exact sum, plus the final rounding of the
output type.
"""
import os

import numpy as np
import pytest
import triton
import triton.language as tl

from devarray import DeviceArray

CC = int(os.environ.get("PTXVK_CC", "80"))
U32 = 2.0**-24


def f16_half_ulp(x):
    """Half an f16 ulp of |x| (normal range), the error of one rounding to f16."""
    x = np.maximum(np.abs(x), 2.0**-14)
    return 2.0 ** (np.floor(np.log2(x)) - 11)


def tf32(x):
    """f32 values as a tf32 mma sees them: Triton hands mma.tf32 raw f32
    registers (no cvt), and the tensor cores (and ptxvk) use their top 19
    bits, ignoring the low 13 mantissa bits."""
    return (np.asarray(x, np.float32).view(np.uint32) & 0xFFFFE000).view(np.float32)


# --- 01 vector add -----------------------------------------------------------


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def test_vector_add():
    rng = np.random.default_rng(1)
    n = 98_432
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = DeviceArray.poisoned(n, np.float32)
    add_kernel[(triton.cdiv(n, 1024),)](DeviceArray(x), DeviceArray(y), out, n, BLOCK=1024)
    np.testing.assert_array_equal(out.numpy(), x + y)


# --- 02 fused softmax ----------------------------------------------------------


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr,
                   num_stages: tl.constexpr):
    start = tl.program_id(0)
    step = tl.num_programs(0)
    for row in tl.range(start, n_rows, step, num_stages=num_stages):
        offs = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + offs, mask=offs < n_cols, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        den = tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_stride + offs, num / den, mask=offs < n_cols)


@pytest.mark.parametrize("stages", [1, 3])
def test_fused_softmax(stages):
    rng = np.random.default_rng(2)
    rows, cols = 96, 781
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = DeviceArray.poisoned((rows, cols), np.float32)
    block = triton.next_power_of_2(cols)
    softmax_kernel[(24,)](out, DeviceArray(x), cols, cols, rows, cols, BLOCK=block, num_stages=stages, num_warps=8)
    got = out.numpy()
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    # ex2.approx (2 ulp), the sum of cols terms, the division: a few ulp plus the sum's bound.
    bound = ref * (cols * U32 + 8 * U32) + 1e-30
    assert np.all(np.abs(got - ref) <= bound), np.abs(got - ref).max()


# --- 05 layer norm ---------------------------------------------------------------


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


def test_layer_norm():
    rng = np.random.default_rng(5)
    M, N = 64, 1000
    x = (rng.standard_normal((M, N)) * 2 + 0.5).astype(np.float32)
    w = rng.standard_normal(N).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    y = DeviceArray.poisoned((M, N), np.float32)
    mean = DeviceArray.poisoned(M, np.float32)
    rstd = DeviceArray.poisoned(M, np.float32)
    layer_norm_fwd[(M,)](DeviceArray(x), y, DeviceArray(w), DeviceArray(b), mean, rstd, N, N, 1e-5, BLOCK_SIZE=256,
                         num_warps=4)
    x64 = x.astype(np.float64)
    m = x64.mean(axis=1)
    v = ((x64 - m[:, None]) ** 2).mean(axis=1)
    r = 1 / np.sqrt(v + 1e-5)
    assert np.all(np.abs(mean.numpy() - m) <= N * U32 * np.abs(x64).sum(axis=1) / N + 1e-7)
    assert np.all(np.abs(rstd.numpy() - r) <= r * (2 * N * U32 + 4 * U32))
    ref = (x64 - m[:, None]) * r[:, None] * w + b
    scale = (np.abs(x64) + np.abs(m[:, None])) * r[:, None] * np.abs(w) + np.abs(b)
    assert np.all(np.abs(y.numpy() - ref) <= scale * (2 * N * U32 + 8 * U32))


# --- 03 matrix multiplication --------------------------------------------------


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, GROUP_M: tl.constexpr, ALLOW_TF32: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_in_group = GROUP_M * num_pid_n
    group_id = pid // num_in_group
    first_m = group_id * GROUP_M
    gsize = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % num_in_group) % gsize)
    pid_n = (pid % num_in_group) // gsize
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_bn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc, allow_tf32=ALLOW_TF32)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + scm * offs_cm[:, None] + scn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


MATMUL = [
    # (input dtype, output dtype, allow_tf32, M, N, K, BM, BN, BK, warps, stages)
    ("fp16", np.float16, np.float16, False, 192, 160, 200, 64, 64, 32, 4, 3),
    ("fp16-f32out", np.float16, np.float32, False, 128, 96, 80, 64, 32, 32, 4, 2),
    ("tf32", np.float32, np.float32, True, 128, 96, 80, 64, 32, 32, 4, 2),
    ("fp32", np.float32, np.float32, False, 96, 64, 72, 32, 32, 16, 4, 2),
]


@pytest.mark.parametrize("case", MATMUL, ids=[c[0] for c in MATMUL])
def test_matmul(case):
    _, dt, out_dt, allow_tf32, M, N, K, BM, BN, BK, warps, stages = case
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K)).astype(dt)
    b = rng.standard_normal((K, N)).astype(dt)
    c = DeviceArray.poisoned((M, N), out_dt)
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    k = matmul_kernel[grid](DeviceArray(a), DeviceArray(b), c, M, N, K, K, 1, N, 1, N, 1, BM=BM, BN=BN, BK=BK,
                            GROUP_M=4, ALLOW_TF32=allow_tf32, num_warps=warps, num_stages=stages)
    ptx = k.asm["ptx"]
    if dt == np.float16 or allow_tf32:
        assert ("wgmma.mma_async" if CC >= 90 else "mma.sync") in ptx, "expected tensor-core code"
    got = c.numpy().astype(np.float64)
    aa, bb = a.astype(np.float64), b.astype(np.float64)
    if allow_tf32:
        aa, bb = tf32(a).astype(np.float64), tf32(b).astype(np.float64)
    ref = aa @ bb
    bound = K * U32 * (np.abs(aa) @ np.abs(bb))
    if out_dt == np.float16:
        bound = bound + f16_half_ulp(ref) * (1 + 2.0**-10)
    err = np.abs(got - ref)
    assert np.all(err <= bound), f"max error {err.max()}, worst bound ratio {(err / bound).max()}"


# --- reductions, atomics, cumsum -----------------------------------------------


@triton.jit
def row_stats(x_ptr, sum_ptr, max_ptr, argmax_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=float("-inf"))
    tl.store(max_ptr + row, tl.max(x, axis=0))
    tl.store(argmax_ptr + row, tl.argmax(x, axis=0))
    x0 = tl.where(offs < N, x, 0.0)
    tl.store(sum_ptr + row, tl.sum(x0, axis=0))


def test_reductions():
    rng = np.random.default_rng(7)
    M, N = 40, 300
    x = rng.standard_normal((M, N)).astype(np.float32)
    s = DeviceArray.poisoned(M, np.float32)
    mx = DeviceArray.poisoned(M, np.float32)
    am = DeviceArray.poisoned(M, np.int32)
    row_stats[(M,)](DeviceArray(x), s, mx, am, N, BLOCK=512)
    np.testing.assert_array_equal(mx.numpy(), x.max(axis=1))
    np.testing.assert_array_equal(am.numpy(), x.argmax(axis=1))
    ref = x.astype(np.float64).sum(axis=1)
    assert np.all(np.abs(s.numpy() - ref) <= N * U32 * np.abs(x).sum(axis=1))


@triton.jit
def histogram_kernel(x_ptr, hist_ptr, n, BINS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(hist_ptr + x % BINS, 1, mask=mask)


def test_atomics():
    rng = np.random.default_rng(8)
    n, bins = 50_000, 37
    x = rng.integers(0, 1 << 20, n).astype(np.int32)
    hist = DeviceArray(np.zeros(bins, np.int32))
    histogram_kernel[(triton.cdiv(n, 1024),)](DeviceArray(x), hist, n, BINS=bins, BLOCK=1024)
    np.testing.assert_array_equal(hist.numpy(), np.bincount(x % bins, minlength=bins))


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=0)
    tl.store(out_ptr + row * N + offs, tl.cumsum(x, axis=0), mask=offs < N)


def test_cumsum():
    rng = np.random.default_rng(9)
    M, N = 16, 1000
    x = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    out = DeviceArray.poisoned((M, N), np.int32)
    cumsum_kernel[(M,)](DeviceArray(x), out, N, BLOCK=1024)
    np.testing.assert_array_equal(out.numpy(), np.cumsum(x, axis=1).astype(np.int32))


# --- 06 fused attention (forward) ----------------------------------------------


@triton.jit
def attn_fwd(Q, K, V, Out, sm_scale, stride_h, stride_m, N_CTX, HEAD: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_h = tl.program_id(1)
    base = off_h * stride_h
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD)
    q = tl.load(Q + base + offs_m[:, None] * stride_m + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start_n + offs_n)[None, :] * stride_m + offs_d[:, None])
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + base + (start_n + offs_n)[:, None] * stride_m + offs_d[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * stride_m + offs_d[None, :], acc.to(tl.float16))


def test_flash_attention_fp16():
    rng = np.random.default_rng(11)
    H, S, D = 2, 128, 64
    q = (rng.standard_normal((H, S, D)) * 0.5).astype(np.float16)
    k = (rng.standard_normal((H, S, D)) * 0.5).astype(np.float16)
    v = rng.standard_normal((H, S, D)).astype(np.float16)
    out = DeviceArray.poisoned((H, S, D), np.float16)
    scale = 1.0 / np.sqrt(D)
    attn_fwd[(S // 64, H)](DeviceArray(q), DeviceArray(k), DeviceArray(v), out, scale, S * D, D, S, HEAD=D,
                           BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2)
    got = out.numpy().astype(np.float64)
    q64, k64, v64 = q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)
    s = q64 @ k64.transpose(0, 2, 1) * scale
    p = np.exp(s - s.max(axis=2, keepdims=True))
    ref = (p / p.sum(axis=2, keepdims=True)) @ v64
    # P is rounded to f16 before the second product (relative 2^-11 per
    # term), exp2.approx adds 2 ulp: bound the output by that relative error
    # of Σ|p·v| plus the output's f16 rounding.
    pv = (p / p.sum(axis=2, keepdims=True)) @ np.abs(v64)
    bound = pv * (2.0**-11 + S * U32 + 16 * U32) + f16_half_ulp(ref) * 1.01
    err = np.abs(got - ref)
    assert np.all(err <= bound), f"max error {err.max()}, worst ratio {(err / bound).max()}"


# Layouts of the tensor-core operands: Triton picks the shared-memory
# layout (swizzle width from the tile's row bytes, K- or MN-major from the
# strides) and, on sm_90, the wgmma descriptors; each configuration below
# reaches different ones (32/64/128-byte swizzles, M-major A, K-major B).
LAYOUTS = [
    # (name, a column-major, b column-major, BM, BN, BK)
    ("rowA-rowB-k16-n16", False, False, 64, 16, 16),
    ("colA-colB-k64-n32", True, True, 64, 32, 64),
    ("rowA-colB-k32-n64", False, True, 64, 64, 32),
    ("colA-rowB-k16-n32", True, False, 64, 32, 16),
]


@pytest.mark.parametrize("case", LAYOUTS, ids=[c[0] for c in LAYOUTS])
def test_matmul_operand_layouts(case):
    _, a_col, b_col, BM, BN, BK = case
    rng = np.random.default_rng(13)
    M, N, K = 128, 128, 128
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    # Column-major storage: the transpose's rows.
    da = DeviceArray(np.ascontiguousarray(a.T) if a_col else a)
    db = DeviceArray(np.ascontiguousarray(b.T) if b_col else b)
    sam, sak = (1, M) if a_col else (K, 1)
    sbk, sbn = (1, K) if b_col else (N, 1)
    c = DeviceArray.poisoned((M, N), np.float32)
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    matmul_kernel[grid](da, db, c, M, N, K, sam, sak, sbk, sbn, N, 1, BM=BM, BN=BN, BK=BK, GROUP_M=4,
                        ALLOW_TF32=False, num_warps=4, num_stages=2)
    got = c.numpy().astype(np.float64)
    aa, bb = a.astype(np.float64), b.astype(np.float64)
    ref = aa @ bb
    bound = K * U32 * (np.abs(aa) @ np.abs(bb))
    err = np.abs(got - ref)
    assert np.all(err <= bound), f"max error {err.max()}, worst bound ratio {(err / bound).max()}"
