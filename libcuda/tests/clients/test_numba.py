"""numba-cuda `@cuda.jit` kernels on ptxvk's libcuda.so.1 (run by run.sh).

Every kernel runs on the device the shim picks (lavapipe in CI) and is checked
against numpy on the host. Inputs are random with fixed seeds; outputs are
poisoned first so an element a kernel failed to write is caught.
"""
import cmath
import math

import cffi
import numpy as np
import pytest
from numba import cuda, float32, float64, int32, int64, uint32

RNG_SEED = 20261129


def rng(k=0):
    return np.random.default_rng(RNG_SEED + k)


def poisoned(shape, dtype):
    """A device array full of a value no kernel below computes."""
    host = np.empty(shape, dtype)
    if np.issubdtype(dtype, np.floating):
        host.fill(np.nan)
    else:
        host.fill(np.iinfo(dtype).max - 7)
    return cuda.to_device(host)


# --- device arrays, 1-D grids -------------------------------------------------

@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def test_device_info():
    dev = cuda.get_current_device()
    assert dev.compute_capability >= (7, 0)
    assert dev.WARP_SIZE == 32
    assert dev.MAX_THREADS_PER_BLOCK >= 256
    free, total = cuda.current_context().get_memory_info()
    assert 0 < free <= total


def test_saxpy_f32():
    n = 100_003
    x = rng(1).standard_normal(n).astype(np.float32)
    y = rng(2).standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    saxpy[(n + 255) // 256, 256](np.float32(2.5), cuda.to_device(x), cuda.to_device(y), out)
    # fma or mul+add: both are within one rounding of the exact result.
    np.testing.assert_allclose(out.copy_to_host(), np.float32(2.5) * x + y, rtol=2e-7, atol=1e-6)


def test_saxpy_f64_exact():
    n = 4099
    x = rng(3).standard_normal(n)
    y = rng(4).standard_normal(n)
    out = poisoned(n, np.float64)
    saxpy[(n + 127) // 128, 128](-0.5, cuda.to_device(x), cuda.to_device(y), out)
    # -0.5 * x is exact, so fused or not the result is the rounded sum.
    assert np.array_equal(out.copy_to_host(), -0.5 * x + y)


@cuda.jit
def int_ops(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        x = a[i]
        y = b[i]
        out[i, 0] = x + y
        out[i, 1] = x * y
        out[i, 2] = x // y if y != 0 else 0
        out[i, 3] = x % y if y != 0 else 0
        out[i, 4] = x ^ (y << 3)
        out[i, 5] = x >> 5
        out[i, 6] = min(x, y)
        out[i, 7] = max(x, y)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_integer_ops(dtype):
    n = 3000
    info = np.iinfo(dtype)
    lo, hi = (max(info.min, -(1 << 20)), min(info.max, 1 << 20))
    a = rng(5).integers(lo, hi, n, dtype=dtype)
    b = rng(6).integers(lo, hi, n, dtype=dtype)
    b[::17] = 0
    out = poisoned((n, 8), dtype)
    int_ops[(n + 63) // 64, 64](cuda.to_device(a), cuda.to_device(b), out)
    got = out.copy_to_host()
    with np.errstate(all="ignore"):
        nz = np.where(b != 0, b, 1)
        # Python's floor division and modulo, as numba compiles them.
        exp = [a + b, a * b, np.where(b != 0, a // nz, 0), np.where(b != 0, a % nz, 0),
               a ^ (b << dtype(3)), a >> dtype(5), np.minimum(a, b), np.maximum(a, b)]
    for k, e in enumerate(exp):
        assert np.array_equal(got[:, k], e.astype(dtype)), k


# --- shared memory, barriers, atomics ----------------------------------------

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
        out[cuda.blockIdx.x] = tmp[0]


def test_shared_reduction():
    n = 256 * 37 - 5
    x = rng(7).integers(-1000, 1000, n).astype(np.float32)
    blocks = (n + 255) // 256
    out = poisoned(blocks, np.float32)
    block_sum[blocks, 256](cuda.to_device(x), out)
    padded = np.zeros(blocks * 256, np.float32)
    padded[:n] = x
    # Small integers: every partial sum is exact.
    assert np.array_equal(out.copy_to_host(), padded.reshape(blocks, 256).sum(axis=1))


@cuda.jit
def dyn_shared_reverse(x, out):
    buf = cuda.shared.array(0, dtype=int32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * cuda.blockDim.x
    buf[t] = x[base + t]
    cuda.syncthreads()
    out[base + t] = buf[cuda.blockDim.x - 1 - t]


def test_dynamic_shared():
    bs, blocks = 96, 11
    x = rng(8).integers(-(1 << 30), 1 << 30, bs * blocks).astype(np.int32)
    out = poisoned(bs * blocks, np.int32)
    dyn_shared_reverse[blocks, bs, 0, bs * 4](cuda.to_device(x), out)
    assert np.array_equal(out.copy_to_host(), x.reshape(blocks, bs)[:, ::-1].ravel())


@cuda.jit
def histogram(x, bins):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(bins, x[i] % bins.size, 1)


@cuda.jit
def atomics(x, res):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        cuda.atomic.max(res, 0, v)
        cuda.atomic.min(res, 1, v)
        cuda.atomic.and_(res, 2, v | 0x10000)
        cuda.atomic.or_(res, 3, v & 0xFF)
        cuda.atomic.xor(res, 4, v)
        cuda.atomic.add(res, 5, v & 1)
        cuda.atomic.exch(res, 6, 77)


@cuda.jit
def float_atomics(x, res):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(res, 0, x[i])
        cuda.atomic.max(res, 1, x[i])
        cuda.atomic.min(res, 2, x[i])


@cuda.jit
def cas_counter(flags, out):
    i = cuda.grid(1)
    if i < flags.size:
        # Each thread claims the first free slot with compare-and-swap.
        j = 0
        while cuda.atomic.compare_and_swap(flags[j:j + 1], 0, i + 1) != 0:
            j += 1
        out[i] = j


def test_atomic_histogram():
    data = rng(9).integers(0, 1 << 20, 50_000).astype(np.int32)
    bins = cuda.to_device(np.zeros(16, np.int32))
    histogram[(data.size + 127) // 128, 128](cuda.to_device(data), bins)
    assert np.array_equal(bins.copy_to_host(), np.bincount(data % 16, minlength=16))


def test_integer_atomics():
    x = rng(10).integers(0, 1 << 31, 10_000).astype(np.uint32)
    init = np.array([0, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 0, 0], np.uint32)
    res = cuda.to_device(init)
    atomics[(x.size + 255) // 256, 256](cuda.to_device(x), res)
    got = res.copy_to_host()
    assert got[0] == x.max() and got[1] == x.min()
    assert got[2] == np.bitwise_and.reduce(x | 0x10000)
    assert got[3] == np.bitwise_or.reduce(x & 0xFF)
    assert got[4] == np.bitwise_xor.reduce(x)
    assert got[5] == (x & 1).sum() and got[6] == 77


def test_float_atomics():
    x = rng(11).integers(-4000, 4000, 20_000).astype(np.float64) / 8.0
    res = cuda.to_device(np.array([0.0, -np.inf, np.inf]))
    float_atomics[(x.size + 255) // 256, 256](cuda.to_device(x), res)
    got = res.copy_to_host()
    # Multiples of 1/8 below 2^12: every order of additions is exact.
    assert got[0] == x.sum() and got[1] == x.max() and got[2] == x.min()


def test_compare_and_swap():
    n = 300
    flags = cuda.to_device(np.zeros(n, np.int32))
    out = poisoned(n, np.int32)
    cas_counter[(n + 63) // 64, 64](flags, out)
    slots = out.copy_to_host()
    assert sorted(slots) == list(range(n))
    owners = flags.copy_to_host()
    assert np.array_equal(owners[slots], np.arange(n) + 1)


# --- device functions, math, 2-D and 3-D grids, local arrays ---------------

@cuda.jit(device=True)
def poly(v):
    return v * v + 2.0 * v + 1.0


@cuda.jit
def apply_poly_2d(a, out):
    r, c = cuda.grid(2)
    if r < a.shape[0] and c < a.shape[1]:
        out[r, c] = poly(a[r, c]) + math.sqrt(abs(a[r, c]))


# No explicit signature: one would compile at import and make the primary
# context current before test_cuda_python's context checks run.
@cuda.jit
def escape_time(re0, im0, step, maxit, counts):
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for y in range(y0, counts.shape[0], sy):
        for x in range(x0, counts.shape[1], sx):
            c = complex(re0 + x * step, im0 + y * step)
            z = 0j
            k = 0
            while k < maxit and (z.real * z.real + z.imag * z.imag) <= 4.0:
                z = z * z + c
                k += 1
            counts[y, x] = k


def escape_time_reference(re0, im0, step, maxit, rows, cols):
    """numpy, element for element as the kernel's Python says."""
    c = (re0 + np.arange(cols) * step)[None, :] + 1j * (im0 + np.arange(rows) * step)[:, None]
    z = np.zeros_like(c)
    k = np.zeros(c.shape, np.int32)
    for _ in range(maxit):
        active = (z.real * z.real + z.imag * z.imag) <= 4.0
        if not active.any():
            break
        z[active] = z[active] * z[active] + c[active]
        k[active] += 1
    return k


@pytest.mark.parametrize("grid, block", [((4, 4), (8, 8)), ((5, 4), (8, 8)), ((20, 15), (8, 8)), ((3, 7), (16, 4))])
def test_escape_time_grid_stride(grid, block):
    """Issue 16: nested grid-stride loops around a loop with two exits lost
    the stores of their last iteration on lavapipe."""
    rows, cols, args = 120, 160, (-2.0, -1.2, 0.015, np.int32(200))
    counts = poisoned((rows, cols), np.int32)
    escape_time[grid, block](*args, counts)
    got = counts.copy_to_host()
    want = escape_time_reference(*args, rows, cols)
    assert (got == np.iinfo(np.int32).max - 7).sum() == 0, "elements never written"
    np.testing.assert_array_equal(got, want)
    assert want.min() == 1 and want.max() == 200


def test_device_function_2d_grid():
    a = rng(12).standard_normal((70, 90)).astype(np.float32)
    o = poisoned(a.shape, np.float32)
    apply_poly_2d[(5, 6), (16, 16)](cuda.to_device(a), o)
    np.testing.assert_allclose(o.copy_to_host(), a * a + 2 * a + 1 + np.sqrt(np.abs(a)), rtol=1e-5, atol=1e-5)


@cuda.jit
def grid3d(out):
    x, y, z = cuda.grid(3)
    if x < out.shape[2] and y < out.shape[1] and z < out.shape[0]:
        out[z, y, x] = x + 1000 * y + 1000000 * z


def test_3d_grid():
    out = poisoned((5, 9, 13), np.int32)
    grid3d[(2, 3, 3), (8, 4, 2)](out)
    z, y, x = np.indices((5, 9, 13))
    assert np.array_equal(out.copy_to_host(), x + 1000 * y + 1000000 * z)


@cuda.jit
def math_f64(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = math.sin(v)
        out[i, 1] = math.cos(v)
        out[i, 2] = math.exp(v)
        out[i, 3] = math.log(abs(v) + 1e-3)
        out[i, 4] = math.tanh(v)
        out[i, 5] = math.atan2(v, 0.5)
        out[i, 6] = math.pow(abs(v), 1.5)
        out[i, 7] = math.sqrt(abs(v))
        out[i, 8] = math.floor(v) + math.ceil(v)
        out[i, 9] = math.erf(v)


@cuda.jit
def math_f32(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = math.sin(v)
        out[i, 1] = math.cos(v)
        out[i, 2] = math.exp(v)
        out[i, 3] = math.log(abs(v) + float32(1e-3))
        out[i, 4] = math.tanh(v)
        out[i, 5] = math.atan2(v, float32(0.5))
        out[i, 6] = math.pow(abs(v), float32(1.5))
        out[i, 7] = math.sqrt(abs(v))
        out[i, 8] = math.floor(v) + math.ceil(v)
        out[i, 9] = math.erf(v)


def reference_math(v):
    import math as m
    f = np.vectorize
    return np.stack([np.sin(v), np.cos(v), np.exp(v), np.log(np.abs(v) + 1e-3), np.tanh(v), np.arctan2(v, 0.5),
                     np.abs(v) ** 1.5, np.sqrt(np.abs(v)), np.floor(v) + np.ceil(v), f(m.erf)(v)], axis=1)


def test_math_f64():
    x = rng(13).uniform(-20, 20, 4000)
    out = poisoned((x.size, 10), np.float64)
    math_f64[(x.size + 127) // 128, 128](cuda.to_device(x), out)
    # libdevice's double functions are within a few ulp.
    np.testing.assert_allclose(out.copy_to_host(), reference_math(x), rtol=1e-14, atol=1e-15)


def test_math_f32():
    x = rng(14).uniform(-20, 20, 4000).astype(np.float32)
    out = poisoned((x.size, 10), np.float32)
    math_f32[(x.size + 127) // 128, 128](cuda.to_device(x), out)
    np.testing.assert_allclose(out.copy_to_host(), reference_math(x.astype(np.float64)), rtol=3e-6, atol=3e-6)


@cuda.jit
def local_sort(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        buf = cuda.local.array(16, dtype=int64)
        for k in range(16):
            buf[k] = x[i, k]
        for a in range(16):
            for b in range(15 - a):
                if buf[b] > buf[b + 1]:
                    buf[b], buf[b + 1] = buf[b + 1], buf[b]
        for k in range(16):
            out[i, k] = buf[k]


def test_local_array():
    x = rng(15).integers(-(1 << 40), 1 << 40, (500, 16))
    out = poisoned(x.shape, np.int64)
    local_sort[(500 + 63) // 64, 64](cuda.to_device(x), out)
    assert np.array_equal(out.copy_to_host(), np.sort(x, axis=1))


CONSTS = np.arange(64, dtype=np.float64) * 0.5 - 3.0


@cuda.jit
def use_const(idx, out):
    c = cuda.const.array_like(CONSTS)
    i = cuda.grid(1)
    if i < idx.size:
        out[i] = c[idx[i]] * 2.0


def test_const_array():
    idx = rng(16).integers(0, 64, 1000).astype(np.int32)
    out = poisoned(idx.size, np.float64)
    use_const[8, 128](cuda.to_device(idx), out)
    assert np.array_equal(out.copy_to_host(), CONSTS[idx] * 2.0)


@cuda.jit
def complex_mul(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] * b[i] + 1j


def test_complex():
    a = (rng(17).standard_normal(777) + 1j * rng(18).standard_normal(777)).astype(np.complex128)
    b = (rng(19).standard_normal(777) + 1j * rng(20).standard_normal(777)).astype(np.complex128)
    out = cuda.device_array_like(a)
    complex_mul[7, 128](cuda.to_device(a), cuda.to_device(b), out)
    np.testing.assert_allclose(out.copy_to_host(), a * b + 1j, rtol=1e-15, atol=1e-15)


def same_bits(got, want):
    """Equal values with equal signs of zero, NaN where NaN (any payload)."""
    got, want = np.asarray(got), np.asarray(want)
    nan = np.isnan(want)
    return (np.array_equal(np.isnan(got), nan) and np.array_equal(got[~nan], want[~nan])
            and np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan])))


@cuda.jit
def zero_operands(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = v * 0.0
        out[i, 1] = v + 0.0
        out[i, 2] = 0.0 - v
        out[i, 3] = math.sin(v)
        out[i, 4] = math.tan(v)
        out[i, 5] = math.sinh(v) if abs(v) < 1 else v


SPECIALS = [-0.0, 0.0, -1.0, 1.0, 2.5, -3.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signed_zeros_inf_nan(dtype):
    """IEEE results of arithmetic with a +0.0 literal and of libdevice on
    signed zeros: llvmpipe folds x + 0.0 to x and x * 0.0 to 0.0 unless the
    translator hides the constant, which made sin(-0.0) +0.0 and
    sin(-inf) 0.0 (libdevice's __nv_sinf adds a literal +0.0)."""
    x = np.array(SPECIALS, dtype)
    out = poisoned((x.size, 6), dtype)
    zero_operands[1, 32](cuda.to_device(x), out)
    got = out.copy_to_host()
    zero = dtype(0.0)
    with np.errstate(invalid="ignore"):
        want_exact = [x * zero, x + zero, zero - x]
        want_sin = np.sin(x)
        want_tan = np.tan(x)
    for k, want in enumerate(want_exact):
        assert same_bits(got[:, k], want), (k, x, got[:, k], want)
    # sin/tan/sinh of zeros, tiny values, inf and NaN are exact in libdevice.
    exact = ~np.isfinite(x) | (np.abs(x) < 1e-20)
    assert same_bits(got[exact, 3], want_sin[exact]), (x, got[:, 3])
    assert same_bits(got[exact, 4], want_tan[exact]), (x, got[:, 4])
    assert same_bits(got[np.abs(x) < 1e-20, 5], x[np.abs(x) < 1e-20])
    np.testing.assert_allclose(got[~exact, 3], want_sin[~exact], rtol=1e-6)


@cuda.jit
def complex_funcs(z, out):
    i = cuda.grid(1)
    if i < z.size:
        v = z[i]
        out[i, 0] = cmath.exp(v)
        out[i, 1] = cmath.sin(v)
        out[i, 2] = cmath.cos(v)
        out[i, 3] = cmath.sinh(v)
        out[i, 4] = cmath.cosh(v)
        out[i, 5] = cmath.rect(v.real, v.imag)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_signed_zeros(dtype):
    """numba-cuda's TestCMath cases that failed on llvmpipe: the signs of
    zero parts of exp, sin, cos, sinh, cosh and rect at signed zeros (CPython's
    cmath is the reference, as in numba's own test)."""
    parts = [-0.0, 0.0, 1.0, -1.5]
    z = np.array([complex(a, b) for a in parts for b in parts], dtype)
    out = cuda.device_array((z.size, 6), dtype)
    complex_funcs[1, 32](cuda.to_device(z), out)
    got = out.copy_to_host()
    funcs = [cmath.exp, cmath.sin, cmath.cos, cmath.sinh, cmath.cosh, lambda w: cmath.rect(w.real, w.imag)]
    want = np.array([[f(complex(w)) for f in funcs] for w in z], dtype)
    rtol = 1e-5 if dtype == np.complex64 else 1e-13
    for part in (np.real, np.imag):
        g, w = part(got), part(want)
        zero = w == 0
        assert np.array_equal(g[zero], w[zero]) and np.array_equal(np.signbit(g[zero]), np.signbit(w[zero])), \
            (z, g, w)
        np.testing.assert_allclose(g[~zero], w[~zero], rtol=rtol, atol=0)


# numba-cuda declares a C-ABI function returning void as returning a .b64
# value; the linker puts an adapter between the two modules.
STORE_CABI = cuda.CUSource("""
extern "C" __device__ void store_twice(int *p, int v) { p[0] = v; p[1] = v + 1; }
extern "C" __device__ int plus_seven(int v) { return v + 7; }
""")
store_twice = cuda.declare_device("store_twice", "void(CPointer(int32), int32)", link=STORE_CABI, abi="c")
plus_seven = cuda.declare_device("plus_seven", "int32(int32)", link=STORE_CABI, abi="c")


ffi = cffi.FFI()


@cuda.jit
def call_cabi(x, out):
    i = cuda.grid(1)
    if i < x.size:
        store_twice(ffi.from_buffer(out[2 * i:]), plus_seven(x[i]))


def test_declare_device_c_abi_void():
    """A void C-ABI device function (declared by numba with a return value)
    and an int one, both linked from CUDA C++ source."""
    x = rng(40).integers(-1000, 1000, 300).astype(np.int32)
    out = poisoned(2 * x.size, np.int32)
    call_cabi[(x.size + 63) // 64, 64](cuda.to_device(x), out)
    want = np.stack([x + 7, x + 8], axis=1).reshape(-1)
    assert np.array_equal(out.copy_to_host(), want)


# --- warp intrinsics ---------------------------------------------------------

@cuda.jit
def warp_ops(x, out):
    i = cuda.grid(1)
    lane = cuda.laneid
    v = x[i]
    s = v
    off = 16
    while off > 0:
        s += cuda.shfl_down_sync(0xFFFFFFFF, s, off)
        off //= 2
    out[i, 0] = cuda.shfl_sync(0xFFFFFFFF, s, 0)
    out[i, 1] = cuda.ballot_sync(0xFFFFFFFF, v > 0)
    out[i, 2] = cuda.any_sync(0xFFFFFFFF, v > 900)
    out[i, 3] = cuda.all_sync(0xFFFFFFFF, v > -1001)
    out[i, 4] = cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)
    out[i, 5] = cuda.shfl_up_sync(0xFFFFFFFF, v, 3)
    out[i, 6] = lane


def test_warp_intrinsics():
    n = 32 * 24
    x = rng(21).integers(-1000, 1000, n).astype(np.int32)
    out = poisoned((n, 7), np.uint32)
    warp_ops[n // 128, 128](cuda.to_device(x), out)
    got = out.copy_to_host().astype(np.int64)
    w = x.reshape(-1, 32).astype(np.int64)
    lane = np.tile(np.arange(32), n // 32)
    sums = np.repeat(w.sum(axis=1), 32)
    assert np.array_equal(got[:, 0], sums & 0xFFFFFFFF)
    ballots = np.repeat([sum(1 << k for k in range(32) if r[k] > 0) for r in w], 32)
    assert np.array_equal(got[:, 1], ballots)
    assert np.array_equal(got[:, 2] != 0, np.repeat((w > 900).any(axis=1), 32))
    assert np.array_equal(got[:, 3] != 0, np.repeat((w > -1001).all(axis=1), 32))
    assert np.array_equal(got[:, 4], x[np.arange(n) ^ 1].astype(np.int64) & 0xFFFFFFFF)
    up = np.where(lane >= 3, x[np.maximum(np.arange(n) - 3, 0)], x)
    assert np.array_equal(got[:, 5], up.astype(np.int64) & 0xFFFFFFFF)
    assert np.array_equal(got[:, 6], lane)


# --- streams, events, host memory --------------------------------------------

def test_streams_and_events():
    n = 1 << 16
    x = rng(22).standard_normal(n).astype(np.float32)
    s1, s2 = cuda.stream(), cuda.stream()
    d1 = cuda.to_device(x, stream=s1)
    d2 = cuda.to_device(2 * x, stream=s2)
    start, end = cuda.event(timing=True), cuda.event(timing=True)
    start.record(s1)
    saxpy[n // 256, 256, s1](np.float32(-1.0), d1, d1, d1)
    saxpy[n // 256, 256, s2](np.float32(0.5), d2, d2, d2)
    end.record(s1)
    end.synchronize()
    assert cuda.event_elapsed_time(start, end) >= 0.0
    h1 = d1.copy_to_host(stream=s1)
    h2 = d2.copy_to_host(stream=s2)
    s1.synchronize()
    s2.synchronize()
    assert np.array_equal(h1, np.zeros_like(x))
    np.testing.assert_allclose(h2, 3 * x, rtol=2e-7)


def test_pinned_host_memory():
    n = 10_000
    host = cuda.pinned_array(n, dtype=np.float32)
    host[:] = rng(23).standard_normal(n).astype(np.float32)
    d = cuda.to_device(host)
    out = poisoned(n, np.float32)
    saxpy[(n + 255) // 256, 256](np.float32(1.0), d, d, out)
    back = cuda.pinned_array(n, dtype=np.float32)
    out.copy_to_host(back)
    assert np.array_equal(back, host + host)


def test_mapped_numpy_array():
    """`cuda.mapped` registers an existing numpy array with DEVICEMAP: the
    kernel reads and writes the array's own host memory."""
    n = 7_001
    x = rng(41).standard_normal(n + 3).astype(np.float32)[3:]  # not page aligned
    y = rng(42).standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    with cuda.mapped(x, y, out) as (dx, dy, dout):
        saxpy[(n + 127) // 128, 128](np.float32(-0.5), dx, dy, dout)
        cuda.synchronize()
        np.testing.assert_array_equal(out, np.float32(-0.5) * x + y)
        # The host writes, the device reads the same memory.
        x[:] = 2.0
        saxpy[(n + 127) // 128, 128](np.float32(1.0), dx, dy, dout)
        cuda.synchronize()
    np.testing.assert_array_equal(out, np.float32(2.0) + y)


def test_device_to_device_and_slices():
    x = rng(24).integers(0, 1 << 30, 5000).astype(np.int32)
    d = cuda.to_device(x)
    e = cuda.device_array_like(d)
    e.copy_to_device(d)
    assert np.array_equal(e[100:200].copy_to_host(), x[100:200])
    e[10:20].copy_to_device(np.arange(10, dtype=np.int32))
    exp = x.copy()
    exp[10:20] = np.arange(10)
    assert np.array_equal(e.copy_to_host(), exp)


def test_launch_error_is_reported():
    # More threads per block than any device allows: the launch must fail
    # with CUDA_ERROR_INVALID_VALUE, which numba raises.
    with pytest.raises(Exception):
        saxpy[1, 4096](np.float32(1.0), cuda.to_device(np.ones(1, np.float32)),
                       cuda.to_device(np.ones(1, np.float32)), cuda.device_array(1, np.float32))
        cuda.synchronize()


# --- print() and managed memory ----------------------------------------------

@cuda.jit
def say(x):
    i = cuda.grid(1)
    if i < x.size:
        print("elem", i, x[i], -3)


def test_print_in_a_kernel(capfd):
    """print() lowers to vprintf; the shim writes to file descriptor 1 at the synchronisation."""
    v = np.array([0.5, -1.25, 3.0, 1e-3, 7.0], np.float32)
    dv = cuda.to_device(v)
    capfd.readouterr()
    say[1, 8](dv)
    cuda.synchronize()
    out = capfd.readouterr().out
    want = sorted("elem %d %f -3\n" % (i, float(e)) for i, e in enumerate(v))
    assert sorted(out.splitlines(keepends=True)) == want


def test_managed_memory():
    """cuMemAllocManaged: one pointer for the host and the kernel (lavapipe maps memory at its device address)."""
    if not cuda.get_current_device().MANAGED_MEMORY:
        pytest.skip("the Vulkan driver does not map memory at its device address")
    n = 4099
    x = cuda.managed_array(n, np.float32)
    out = cuda.managed_array(n, np.float32)
    x[:] = rng(31).standard_normal(n).astype(np.float32)
    out[:] = np.nan
    saxpy[(n + 127) // 128, 128](np.float32(2.0), x, x, out)
    cuda.synchronize()
    assert np.array_equal(out, np.float32(2.0) * x + x)


# --- cooperative launch and grid-wide synchronisation -------------------------

@cuda.jit
def grid_rows(m):
    """Row r from row r-1 read backwards: each thread reads what another block
    wrote before the previous grid sync."""
    col = cuda.grid(1)
    g = cuda.cg.this_grid()
    cols = m.shape[1]
    for r in range(1, m.shape[0]):
        if col < cols:
            m[r, col] = m[r - 1, cols - 1 - col] * 3 + col
        g.sync()


@pytest.mark.parametrize("block,rows", [(32, 40), (96, 150), (256, 300)])
def test_grid_sync(block, rows):
    """this_grid().sync() (cudaCGSynchronize, linked from libcudadevrt) at the
    largest cooperative grid the device reports, which must all run at once."""
    sig = (int32[:, ::1],)
    k = cuda.jit(sig)(grid_rows.py_func)
    overload = k.overloads[sig]
    grid = overload.max_cooperative_grid_blocks(block)
    assert grid >= 1
    assert overload.cooperative
    cols = grid * block - 3
    first = rng(40 + block).integers(-1000, 1000, cols, dtype=np.int32)
    host = np.full((rows, cols), np.iinfo(np.int32).max - 7, np.int32)
    host[0] = first
    want = host.copy()
    for r in range(1, rows):
        want[r] = want[r - 1][::-1] * np.int32(3) + np.arange(cols, dtype=np.int32)
    d = cuda.to_device(host)
    k[grid, block](d)
    np.testing.assert_array_equal(d.copy_to_host(), want)


def test_grid_sync_too_large():
    """One block more than max_cooperative_grid_blocks is refused (numba checks
    it against the occupancy and multiprocessor count the driver reports)."""
    sig = (int32[:, ::1],)
    k = cuda.jit(sig)(grid_rows.py_func)
    grid = k.overloads[sig].max_cooperative_grid_blocks(64)
    d = cuda.to_device(np.zeros((2, (grid + 1) * 64), np.int32))
    with pytest.raises(ValueError, match="exceeds the limit"):
        k[grid + 1, 64](d)


# --- processes ------------------------------------------------------------------

def test_fork_after_init_is_detected():
    """A child forked after CUDA initialised cannot use it: the driver answers
    CUDA_ERROR_NOT_INITIALIZED there and numba says why."""
    import concurrent.futures
    import multiprocessing as mp

    from numba.cuda.cudadrv.error import CudaDriverError

    cuda.current_context()
    with concurrent.futures.ProcessPoolExecutor(mp_context=mp.get_context("fork")) as exe:
        future = exe.submit(cuda.to_device, np.arange(4))
    with pytest.raises(CudaDriverError, match="CUDA initialized before forking"):
        future.result()
    # The parent still works.
    x = rng(40).standard_normal(1000).astype(np.float32)
    assert np.array_equal(cuda.to_device(x).copy_to_host(), x)


# --- faulting kernels ------------------------------------------------------------

@cuda.jit
def scatter_by_index(out, idx):
    i = cuda.grid(1)
    if i < idx.size:
        out[idx[i]] = i


def scatter_child(bad):
    """Runs in a spawned process (a faulting kernel fails its context for
    good): scatters with an index table, one entry far out of range when
    `bad`. Returns the error (code and text), or what the kernel wrote."""
    from numba.cuda.cudadrv.driver import CudaAPIError
    n = 256
    idx = np.arange(n, dtype=np.int64)[::-1].copy()
    if bad:
        idx[77] = 1 << 40
    out = cuda.to_device(np.full(n, -1, np.int32))
    try:
        scatter_by_index[2, 128](out, cuda.to_device(idx))
        cuda.synchronize()
    except CudaAPIError as e:
        return (int(e.code), str(e)), None
    return None, out.copy_to_host().tolist()


def test_out_of_range_index_is_an_illegal_address():
    """numba does not check indices: a store through an index 2^40 elements
    past the array is CUDA_ERROR_ILLEGAL_ADDRESS at the synchronisation (as
    on NVIDIA's driver), not a crash of the process; the same kernel with
    good indices runs right in another process. (A new context after the
    fault: libcuda/tests/faults.rs.)"""
    import concurrent.futures
    import multiprocessing as mp

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as exe:
        err, _ = exe.submit(scatter_child, True).result(timeout=600)
    assert err is not None and err[0] == 700, err
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in err[1], err
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as exe:
        err, after = exe.submit(scatter_child, False).result(timeout=600)
    assert err is None and after == list(range(255, -1, -1))


RACECHECK_SCRIPT = """
import numpy as np
from numba import cuda, float32

@cuda.jit
def block_sum(x, out, sync):
    s = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.blockIdx.x * 128 + t]
    cuda.syncthreads()
    step = 64
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        if sync:
            cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = s[0]

x = np.arange(512, dtype=np.float32) % 13
out = cuda.to_device(np.full(4, np.nan, np.float32))
block_sum[4, 128](cuda.to_device(x), out, {sync})
cuda.synchronize()
got = out.copy_to_host()
want = x.reshape(4, 128).sum(axis=1)
print("RESULT", bool(np.all(np.isfinite(got))), bool(np.array_equal(got, want)))
"""


def racecheck_run(sync):
    import os
    import subprocess
    import sys
    env = dict(os.environ, PTXVK_RACECHECK="1")
    p = subprocess.run([sys.executable, "-c", RACECHECK_SCRIPT.format(sync=sync)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout, p.stderr


def test_racecheck_reports_a_missing_syncthreads():
    """PTXVK_RACECHECK=1: a numba block sum whose loop lacks
    cuda.syncthreads() completes and its hazard is reported on standard
    error; the same kernel with the barrier reports nothing and sums right."""
    out, err = racecheck_run(False)
    assert "RESULT True" in out, out + err
    assert "Race reported between" in err, err
    out, err = racecheck_run(True)
    assert "RESULT True True" in out, out + err
    assert "Race reported" not in err, err


# --- IPC: device memory shared with another process ---------------------------

@cuda.jit
def twice_plus_index(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * 2.0 + i


def ipc_handle_bytes(ipch):
    """The 64 bytes of an IpcHandle's CUipcMemHandle. numba pickles them as
    `handle.reserved`, which cuda-bindings 13.4 no longer offers; read them
    from the structure's address instead."""
    import ctypes
    return ctypes.string_at(ipch.handle.getPtr(), 64)


def ipc_handle_from_bytes(raw, size, offset):
    """An IpcHandle as numba's unpickling makes it (base None), from the bytes."""
    import ctypes
    from cuda.bindings import driver as binding
    from numba.cuda.cudadrv.driver import IpcHandle
    h = binding.CUipcMemHandle()
    ctypes.memmove(h.getPtr(), raw, 64)
    return IpcHandle(None, h, size, None, offset=offset)


def ipc_child(raw, size, offset, n, parent_pid):
    """Runs in a spawned process: opens the parent's array, returns what it
    holds, then rewrites it with a kernel."""
    import os
    assert os.getpid() != parent_pid
    ipch = ipc_handle_from_bytes(raw, size, offset)
    darr = ipch.open_array(cuda.current_context(), shape=n, dtype=np.dtype(np.float64))
    seen = darr.copy_to_host()
    twice_plus_index[(n + 127) // 128, 128](darr)
    cuda.synchronize()
    ipch.close()
    return seen


@pytest.mark.parametrize("start", [0, 3])
def test_ipc_array_in_a_child_process(start):
    """cuIpcGetMemHandle here, cuIpcOpenMemHandle in a spawned child that
    reads the array and runs a kernel on it; the parent sees the kernel's
    writes. A slice is shared as its allocation plus an offset."""
    import concurrent.futures
    import multiprocessing as mp
    import os
    n = 1000
    x = rng(50 + start).standard_normal(n + start)
    d = cuda.to_device(x)
    view = d[start:]
    ipch = cuda.current_context().get_ipc_handle(view.gpu_data)
    assert ipch.offset == start * 8
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as exe:
        fut = exe.submit(ipc_child, ipc_handle_bytes(ipch), ipch.size, ipch.offset, n, os.getpid())
        seen = fut.result(timeout=300)
    assert np.array_equal(seen, x[start:])
    want = x.copy()
    want[start:] = x[start:] * 2.0 + np.arange(n)
    assert np.array_equal(d.copy_to_host(), want)


def test_ipc_open_in_the_exporting_process_fails():
    """The driver refuses a handle in the process that made it
    (CUDA_ERROR_INVALID_CONTEXT), as NVIDIA's does."""
    from numba.cuda.cudadrv.driver import CudaAPIError
    d = cuda.to_device(np.arange(16, dtype=np.float64))
    ipch = cuda.current_context().get_ipc_handle(d.gpu_data)
    again = ipc_handle_from_bytes(ipc_handle_bytes(ipch), ipch.size, 0)
    with pytest.raises(CudaAPIError) as err:
        again.open(cuda.current_context())
    assert err.value.code == 201


# Implicit signatures: an explicit one compiles at import, which would make
# the primary context current before the other test files run.
@cuda.jit(device=True)
def fib_rec(n):
    if n < 2:
        return n
    return fib_rec(n - 1) + fib_rec(n - 2)


@cuda.jit(device=True)
def walk_rec(n, acc):
    # Recursion that keeps an array view and a float live across the call.
    if n == 0:
        return 0
    half = acc[n % acc.shape[0]] * 0.5
    below = walk_rec(n - 1, acc)
    acc[n % acc.shape[0]] += half
    return below + n


@cuda.jit
def recursive_kernel(xs, fibs, walks, scratch):
    i = cuda.grid(1)
    if i < xs.shape[0]:
        fibs[i] = fib_rec(xs[i])
        walks[i] = walk_rec(xs[i] + 3, scratch[i])


def test_recursive_device_functions():
    # numba's self-recursive device functions run on the translator's
    # explicit stack; every thread recurses to its own depth.
    n = 70
    xs = rng(31).integers(0, 18, n).astype(np.int64)
    scratch = rng(32).standard_normal((n, 5))
    fibs, walks = poisoned(n, np.int64), poisoned(n, np.int64)
    d_scratch = cuda.to_device(scratch)
    recursive_kernel[3, 32](cuda.to_device(xs), fibs, walks, d_scratch)

    def fib(k):
        return k if k < 2 else fib(k - 1) + fib(k - 2)

    want_scratch = scratch.copy()
    for i in range(n):
        for k in range(1, xs[i] + 4):
            want_scratch[i, k % 5] += scratch[i, k % 5] * 0.5
    np.testing.assert_array_equal(fibs.copy_to_host(), [fib(int(x)) for x in xs])
    np.testing.assert_array_equal(walks.copy_to_host(), [(x + 3) * (x + 4) // 2 for x in xs])
    np.testing.assert_array_equal(d_scratch.copy_to_host(), want_scratch)
