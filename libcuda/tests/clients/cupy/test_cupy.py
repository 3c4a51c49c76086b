"""CuPy 14.2 through the shim (run.sh sets CUPY_COMPILE_WITH_PTX=1).

Issue 21: `cumsum` through CUB, whose scans need more shared memory than
lavapipe's Workgroup memory, and `partition`'s warp-synchronous kernels. Issue 24: results that depend on multiply-add contraction (NVRTC leaves
`mul` + `sub` pairs without `.rn` that ptxas fuses) and CUB reductions after
another library's load (Thrust's, which used to fail on `griddepcontrol`).
Each test runs in a fresh process where order matters.
"""

import subprocess
import sys

import numpy as np
import pytest

cp = pytest.importorskip("cupy")


def test_remainder_of_the_issue_matches_numpy():
    got = float(cp.remainder(cp.asarray([255.6]), cp.asarray([1.2]))[0])
    assert got == float(np.remainder(255.6, 1.2))
    assert 3.7e-15 < got < 3.8e-15


def test_remainder_matches_numpy_bit_for_bit():
    # With x - floor(x / y) * y fused into one rounding, CuPy's remainder is
    # the exact remainder rounded once, as numpy's fmod-based one: every
    # element is equal (with separate roundings about 8% are).
    rng = np.random.default_rng(24)
    x = rng.uniform(-1e3, 1e3, 4000)
    y = rng.uniform(0.1, 10.0, 4000) * rng.choice([-1.0, 1.0], 4000)
    got = cp.remainder(cp.asarray(x), cp.asarray(y)).get()
    np.testing.assert_array_equal(got, np.remainder(x, y))


def test_fmod_and_unwrap_match_numpy():
    got = cp.fmod(cp.asarray([255.6, -7.5, 1e10]), cp.asarray([1.2, 2.0, 3.3])).get()
    np.testing.assert_array_equal(got, np.fmod([255.6, -7.5, 1e10], [1.2, 2.0, 3.3]))
    p = np.array([0.0, 3.5, 7.1, 12.9, -2.0, 20.0, 255.6])
    np.testing.assert_array_equal(cp.unwrap(cp.asarray(p)).get(), np.unwrap(p))
    rng = np.random.default_rng(7)
    q = np.cumsum(rng.uniform(-4, 4, 500))
    np.testing.assert_allclose(cp.unwrap(cp.asarray(q)).get(), np.unwrap(q), rtol=0, atol=1e-12)


SORT_THEN_SUM = """
import cupy as cp
try:
    cp.sort(cp.arange(10.)[::-1])
except Exception as e:
    print('sort:', type(e).__name__, e)
print(float(cp.arange(6.).sum()), float(cp.arange(1000.).sum()))
"""


def test_cub_sums_after_thrust():
    env = dict(__import__("os").environ, CUPY_ACCELERATORS="cub")
    out = subprocess.run([sys.executable, "-c", SORT_THEN_SUM], capture_output=True, text=True, env=env,
                         timeout=1200)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    assert last == "15.0 499500.0", out.stdout


# Issue 21: CUB's scan asks for 33,808 bytes (f32) and 36,624 bytes (int64)
# of static shared memory per block, more than lavapipe's 32 KiB of
# Workgroup memory; CuPy does not check the launch, so before shared memory
# could spill to device memory cumsum returned garbage.
CUMSUM = """
import numpy as np, cupy as cp
x = np.random.default_rng(7).integers(-1000, 1000, size=100_000).astype(np.int64)
print(np.array_equal(cp.cumsum(cp.asarray(x)).get(), np.cumsum(x)))
y = np.random.default_rng(8).random(50_000).astype(np.float32)
got = cp.cumsum(cp.asarray(y)).get().astype(np.float64)
want = np.cumsum(y, dtype=np.float64)
# A scan groups its f32 sums differently from a serial sum: f32 rounding.
print(float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))) < 1e-5)
"""


def test_cumsum_with_cub_matches_numpy():
    env = dict(__import__("os").environ, CUPY_ACCELERATORS="cub")
    out = subprocess.run([sys.executable, "-c", CUMSUM], capture_output=True, text=True, env=env, timeout=1200)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True"], out.stdout



# Issue 21: Thrust's and CUB's radix sorts (CuPy's sort and argsort) need
# 33 KiB and more of shared memory and compile for minutes on lavapipe
# (docs/llvmpipe-compile-time.md); checked against numpy.
SORT = """
import numpy as np, cupy as cp
rng = np.random.default_rng(21)
y = rng.standard_normal(30_000)
print(np.array_equal(cp.sort(cp.asarray(y)).get(), np.sort(y)))
z = rng.integers(0, 1000, 30_000).astype(np.int32)
print(np.array_equal(cp.sort(cp.asarray(z)).get(), np.sort(z)))
print(np.array_equal(z[cp.argsort(cp.asarray(z)).get()], np.sort(z)))
"""


def test_sort_and_argsort_match_numpy():
    out = subprocess.run([sys.executable, "-c", SORT], capture_output=True, text=True, timeout=3000)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True", "True"], out.stdout


PARTITION = """
import sys, numpy as np, cupy as cp
dtype = np.dtype(sys.argv[1])
x = np.random.default_rng(21).integers(-10**6, 10**6, 20_000).astype(dtype)
for kth in map(int, sys.argv[2:]):
    got = cp.partition(cp.asarray(x), kth).get()
    print(got[kth] == np.partition(x, kth)[kth] and bool((got[:kth] <= got[kth]).all())
          and bool((got[kth + 1:] >= got[kth]).all()) and np.array_equal(np.sort(got), np.sort(x)))
"""


def partition_ok(dtype, *kths):
    args = [sys.executable, "-c", PARTITION, dtype, *map(str, kths)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=3000)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split() == ["True"] * len(kths)


def test_partition_by_sorting_matches_numpy():
    # kth >= 128 on 20,000 elements: CuPy sorts the whole array (Thrust).
    assert partition_ok("int32", 777)


def test_partition_kernel_matches_numpy():
    # kth < 128: CuPy's own partition_kernel and partition_merge_kernel, whose
    # warps bitonic-sort their slices of the array in global memory relying
    # on lock step (issue 21, item 2; translator/src/emit/lockstep.rs).
    assert partition_ok("int32", 0, 1, 5, 100, 127)
    assert partition_ok("float64", 3, 64)


def test_cublas_level1_matches_numpy_and_gemm_fails_loudly():
    # Issue 22: cuBLAS 13 through CuPy. Its level-1 kernels ship as PTX
    # (saxpy, sdot run translated); cuBLASLt found no GEMM algorithm at all
    # until the driver's TOOLS_TLS slot 2 returned a result, and cuBLAS's
    # workspace pool failed without CUDART13 slots 51 and 39. Past them,
    # GEMM and gemv pick kernels that cuBLAS 13 ships only as cubins (NVIDIA
    # machine code): the call must fail with an error, never give numbers.
    from cupy_backends.cuda.libs import cublas
    from cupy.cuda import device

    rng = np.random.default_rng(22)
    n = 3000
    x_h = rng.standard_normal(n).astype(np.float32)
    y_h = rng.standard_normal(n).astype(np.float32)
    x, y = cp.asarray(x_h), cp.asarray(y_h)
    h = device.get_cublas_handle()
    cublas.setPointerMode(h, cublas.CUBLAS_POINTER_MODE_HOST)
    a = np.array(-1.75, dtype=np.float32)
    cublas.saxpy(h, n, a.ctypes.data, x.data.ptr, 1, y.data.ptr, 1)
    want = (np.float32(-1.75) * x_h + y_h).astype(np.float32)
    # One rounded fma or a product then a sum: within an ulp of either.
    np.testing.assert_allclose(y.get(), want, rtol=2e-7, atol=1e-6)
    r = np.full(1, np.nan, dtype=np.float32)
    cublas.sdot(h, n, x.data.ptr, 1, y.data.ptr, 1, r.ctypes.data)
    exact = float(np.dot(x_h.astype(np.float64), y.get().astype(np.float64)))
    assert abs(float(r[0]) - exact) <= 1e-4 * (1 + abs(exact))
    m = cp.asarray(rng.standard_normal((64, 64)).astype(np.float32))
    with pytest.raises(cublas.CUBLASError):
        (m @ m).get()


def test_cufft_matches_numpy():
    # Issue 22: cuFFT 12's own CUDA runtime fails at start-up without the
    # driver's {6E163FBE-...} table, whose slot 7 hands it the function of
    # each kernel module it loads. Its kernels for these sizes ship as PTX.
    rng = np.random.default_rng(221)
    for n, batch in [(256, 1), (4096, 1), (1000, 3), (17, 2)]:
        x = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))).astype(np.complex64)
        for ours, theirs in [(cp.fft.fft, np.fft.fft), (cp.fft.ifft, np.fft.ifft)]:
            got = ours(cp.asarray(x)).get()
            want = theirs(x.astype(np.complex128))
            assert got.dtype == np.complex64
            err = float(abs(got - want).max() / abs(want).max())
            assert err < 2e-6, (n, batch, ours.__name__, err)
    r = rng.standard_normal(512).astype(np.float32)
    want = np.fft.rfft(r.astype(np.float64))
    err = float(abs(cp.fft.rfft(cp.asarray(r)).get() - want).max() / abs(want).max())
    assert err < 2e-6, err
    z = rng.standard_normal((64, 48)) + 1j * rng.standard_normal((64, 48))
    want = np.fft.fft2(z)
    err = float(abs(cp.fft.fft2(cp.asarray(z)).get() - want).max() / abs(want).max())
    assert err < 1e-14, err


def test_cufft_without_ptx_fails_loudly():
    # cuFFT 12.5 ships the kernel of a 65536-point C2C transform as sm_80
    # machine code only: the plan must fail, not compute.
    from cupy.cuda import cufft

    x = cp.asarray(np.ones(65536, dtype=np.complex64))
    with pytest.raises(cufft.CuFFTError):
        cp.fft.fft(x).get()


SOLVER_AND_CURAND = """
import cupy as cp, numpy as np
rng = np.random.default_rng(2207)
a = rng.standard_normal((48, 48)) + 48 * np.eye(48)
b = rng.standard_normal((48, 3))
inv = cp.linalg.inv(cp.asarray(a)).get()
x = cp.linalg.solve(cp.asarray(a), cp.asarray(b)).get()
print('inv', float(abs(inv - np.linalg.inv(a)).max()))
print('solve', float(abs(x - np.linalg.solve(a, b)).max()))
u = cp.random.RandomState(5).uniform(size=100000).get()
print('uniform', float(u.min()), float(u.max()), float(u.mean()), float(u.var()))
"""


def test_cusolver_and_curand_with_their_ptx():
    # Issue 22: cuSOLVER (getrf/getrs through linalg.inv and solve) and
    # cuRAND (the legacy generators) run from the PTX they ship when the
    # driver reports a capability newer than their cubins (at 8.0 the shared
    # cudart hands the driver their sm_80 cubins, which fail loudly).
    # cuSOLVER also needed cuStreamGetDevResource.
    env = dict(__import__("os").environ, PTXVK_CC="13.0")
    out = subprocess.run([sys.executable, "-c", SOLVER_AND_CURAND], capture_output=True, text=True, env=env,
                         timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    got = dict((l.split()[0], [float(v) for v in l.split()[1:]]) for l in out.stdout.splitlines())
    assert got["inv"][0] < 1e-12 and got["solve"][0] < 1e-12, got
    lo, hi, mean, var = got["uniform"]
    assert 0.0 <= lo < 1e-3 and 1 - 1e-3 < hi < 1.0, got
    assert abs(mean - 0.5) < 0.005 and abs(var - 1 / 12) < 0.002, got
