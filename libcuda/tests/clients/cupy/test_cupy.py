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


def _rel(got, want):
    got = np.asarray(got, dtype=np.complex128)
    return float(abs(got - want).max() / max(abs(want).max(), 1e-300))


def test_capability_is_newer_for_nvidia_libraries():
    # Issue 22, item 4: NVIDIA's libraries choose cubins or PTX by the
    # capability they are told; the driver tells them (and the shared CUDA
    # runtime, which asks once for every user) PTXVK_LIBRARY_CC (13.0),
    # newer than their cubins, so they load their PTX. CuPy's own calls
    # (the driver's, and its runtime, linked into CuPy statically) see
    # PTXVK_CC (8.0), which its NVRTC target follows.
    import ctypes
    import os
    import nvidia.cu13
    from cupy.cuda import runtime

    assert cp.cuda.Device(0).compute_capability == "80"
    props = runtime.getDeviceProperties(0)
    assert (props["major"], props["minor"]) == (8, 0)
    shared = ctypes.CDLL(os.path.join(list(nvidia.cu13.__path__)[0], "lib", "libcudart.so.13"))
    major, minor = ctypes.c_int(-1), ctypes.c_int(-1)
    assert shared.cudaDeviceGetAttribute(ctypes.byref(major), 75, 0) == 0
    assert shared.cudaDeviceGetAttribute(ctypes.byref(minor), 76, 0) == 0
    assert (major.value, minor.value) == (13, 0)


def test_cublas_matches_numpy():
    # Issue 22: cuBLAS 13 through CuPy, from the PTX it ships. Level 1
    # (saxpy, sdot) needed the driver's TOOLS_TLS slot 2 and CUDART13 slots
    # 51 and 39; GEMM and gemv pick kernels with PTX (sgemm_largek_lds64,
    # ...) at capability 13.0, cubins only at 8.0.
    from cupy_backends.cuda.libs import cublas
    from cupy.cuda import device
    import cupyx.scipy.linalg as sla

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

    def operands(shape_a, shape_b, dtype):
        a = rng.standard_normal(shape_a)
        b = rng.standard_normal(shape_b)
        if np.dtype(dtype).kind == "c":
            a = a + 1j * rng.standard_normal(shape_a)
            b = b + 1j * rng.standard_normal(shape_b)
        return a.astype(dtype), b.astype(dtype)

    # (m, k, n), type, bound on the error relative to the largest element.
    for (m, k, nn), dtype, tol in [((512, 512, 512), np.float32, 3e-6), ((100, 37, 61), np.float32, 1e-6),
                                   ((200, 300, 150), np.float64, 1e-14), ((70, 50, 40), np.complex64, 2e-6),
                                   ((33, 20, 10), np.complex128, 1e-14)]:
        a, b = operands((m, k), (k, nn), dtype)
        got = (cp.asarray(a) @ cp.asarray(b)).get()
        assert got.dtype == dtype
        err = _rel(got, a.astype(np.complex128) @ b.astype(np.complex128))
        assert err < tol, ((m, k, nn), dtype, err)
    # Transposed operand, batched (strided) GEMM, gemv.
    t = rng.standard_normal((40, 60)).astype(np.float32)
    assert _rel((cp.asarray(t).T @ cp.asarray(t)).get(), t.T.astype(np.float64) @ t) < 1e-6
    a, b = operands((5, 30, 20), (5, 20, 25), np.float32)
    assert _rel(cp.matmul(cp.asarray(a), cp.asarray(b)).get(), np.matmul(a.astype(np.float64), b)) < 1e-6
    m, v = operands((80, 100), (100,), np.float32)
    assert _rel((cp.asarray(m) @ cp.asarray(v)).get(), m.astype(np.float64) @ v) < 1e-6
    # trsm through solve_triangular.
    u = np.triu(rng.standard_normal((50, 50))) + 10 * np.eye(50)
    rhs = rng.standard_normal((50, 4))
    assert _rel(sla.solve_triangular(cp.asarray(u), cp.asarray(rhs)).get(), np.linalg.solve(u, rhs)) < 1e-13


def test_cublas_half_gemm_fails_loudly():
    # cuBLASLt's half-precision GEMM on a device of capability 10.0 or newer
    # hands the driver CUDA Tile IR bytecode, which ptxvk cannot run: the
    # call must fail with an error, never give numbers.
    from cupy_backends.cuda.libs import cublas

    a = cp.asarray(np.random.default_rng(3).standard_normal((128, 128)).astype(np.float16))
    with pytest.raises(cublas.CUBLASError):
        (a @ a).get()


def test_cufft_matches_numpy():
    # Issue 22: cuFFT 12's own CUDA runtime fails at start-up without the
    # driver's {6E163FBE-...} table, whose slot 7 hands it the function of
    # each kernel module it loads. At capability 13.0 its kernels come from
    # its PTX (at 8.0 the 65536-point one was an sm_80 cubin).
    rng = np.random.default_rng(221)
    for n, batch in [(256, 1), (4096, 1), (1000, 3), (17, 2), (65536, 1)]:
        x = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))).astype(np.complex64)
        for ours, theirs in [(cp.fft.fft, np.fft.fft), (cp.fft.ifft, np.fft.ifft)]:
            got = ours(cp.asarray(x)).get()
            want = theirs(x.astype(np.complex128))
            assert got.dtype == np.complex64
            err = _rel(got, want)
            assert err < 2e-6, (n, batch, ours.__name__, err)
    r = rng.standard_normal((4, 512)).astype(np.float32)
    want = np.fft.rfft(r.astype(np.float64))
    got = cp.fft.rfft(cp.asarray(r))
    assert _rel(got.get(), want) < 2e-6
    assert _rel(cp.fft.irfft(got).get(), r.astype(np.float64)) < 2e-6
    z = rng.standard_normal((64, 48)) + 1j * rng.standard_normal((64, 48))
    assert _rel(cp.fft.fft2(cp.asarray(z)).get(), np.fft.fft2(z)) < 1e-14
    c = (rng.standard_normal((8, 12, 10)) + 1j * rng.standard_normal((8, 12, 10))).astype(np.complex64)
    assert _rel(cp.fft.fftn(cp.asarray(c)).get(), np.fft.fftn(c.astype(np.complex128))) < 2e-6


def test_cusolver_matches_numpy():
    # Issue 22: cuSOLVER from its PTX (capability 13.0); cusolverDnSetStream
    # needed cuStreamGetDevResource. getrf/getrs (inv, solve), potrf, gesvd,
    # syevd.
    rng = np.random.default_rng(2207)
    a = rng.standard_normal((48, 48)) + 48 * np.eye(48)
    b = rng.standard_normal((48, 3))
    assert abs(cp.linalg.inv(cp.asarray(a)).get() - np.linalg.inv(a)).max() < 1e-12
    assert abs(cp.linalg.solve(cp.asarray(a), cp.asarray(b)).get() - np.linalg.solve(a, b)).max() < 1e-12
    m = rng.standard_normal((40, 40))
    spd = m @ m.T + 40 * np.eye(40)
    assert _rel(cp.linalg.cholesky(cp.asarray(spd)).get(), np.linalg.cholesky(spd)) < 1e-13
    g = rng.standard_normal((30, 20))
    assert _rel(cp.linalg.svd(cp.asarray(g), compute_uv=False).get(), np.linalg.svd(g, compute_uv=False)) < 1e-13
    sym = m + m.T
    assert _rel(cp.linalg.eigh(cp.asarray(sym))[0].get(), np.linalg.eigvalsh(sym)) < 1e-13


def test_cusparse_matches_numpy():
    # Issue 22: cuSPARSE SpMV and SpMM (CSR) from its PTX.
    import cupyx.scipy.sparse as sparse

    rng = np.random.default_rng(2208)
    d = rng.standard_normal((300, 200))
    d[rng.random((300, 200)) < 0.9] = 0
    v = rng.standard_normal(200)
    assert _rel((sparse.csr_matrix(cp.asarray(d)) @ cp.asarray(v)).get(), d @ v) < 1e-14
    f = rng.standard_normal((100, 80)).astype(np.float32)
    f[rng.random((100, 80)) < 0.8] = 0
    rhs = rng.standard_normal((80, 7)).astype(np.float32)
    assert _rel((sparse.csr_matrix(cp.asarray(f)) @ cp.asarray(rhs)).get(), f.astype(np.float64) @ rhs) < 1e-6


def _curand():
    import ctypes
    import os
    import nvidia.cu13

    lib = ctypes.CDLL(os.path.join(list(nvidia.cu13.__path__)[0], "lib", "libcurand.so.10"))
    return ctypes, lib


# curandRngType_t values (curand.h).
CURAND_GENERATORS = {"XORWOW": 101, "MRG32K3A": 121, "MTGP32": 141, "MT19937": 142, "PHILOX4_32_10": 161,
                     "SOBOL32": 201, "SCRAMBLED_SOBOL32": 202}


@pytest.mark.parametrize("name", sorted(CURAND_GENERATORS))
def test_curand_matches_its_host_generator(name):
    # Issue 22: cuRAND's device generators, from its PTX, against the same
    # generators run on the CPU by cuRAND itself (curandCreateGeneratorHost),
    # an implementation independent of the device code. Raw bits, uniform
    # floats and doubles and Poisson counts must be identical. Normal and
    # log-normal values go through approximate functions on the device
    # (`__sincosf`: sin.approx/cos.approx, whose bits PTX leaves open) and
    # the host's own log and sincos (NVIDIA does not promise identity): they
    # must agree within those functions' accuracy.
    ctypes, lib = _curand()
    kind = CURAND_GENERATORS[name]
    quasi = "SOBOL" in name

    def generator(host):
        g = ctypes.c_void_p()
        create = lib.curandCreateGeneratorHost if host else lib.curandCreateGenerator
        assert create(ctypes.byref(g), kind) == 0
        if quasi:
            assert lib.curandSetQuasiRandomGeneratorDimensions(g, 3) == 0
        else:
            assert lib.curandSetPseudoRandomGeneratorSeed(g, ctypes.c_ulonglong(20261207)) == 0
        return g

    def draw(host, call, args, n, dtype):
        g = generator(host)
        # Outputs poisoned first.
        if host:
            out = np.full(n * np.dtype(dtype).itemsize, 0x5A, dtype=np.uint8).view(dtype)
            ptr = out.ctypes.data
        else:
            dev = cp.full(n * np.dtype(dtype).itemsize, 0xA5, dtype=cp.uint8).view(dtype)
            ptr = dev.data.ptr
        assert getattr(lib, call)(g, ctypes.c_void_p(ptr), ctypes.c_size_t(n), *args) == 0, call
        if not host:
            out = dev.get()
        assert lib.curandDestroyGenerator(g) == 0
        return out

    n = 3 * 4096 if quasi else 20000
    f32, f64 = ctypes.c_float, ctypes.c_double
    exact = [("curandGenerate", (), np.uint32), ("curandGenerateUniform", (), np.float32),
             ("curandGenerateUniformDouble", (), np.float64), ("curandGeneratePoisson", (f64(3.5),), np.uint32)]
    for call, args, dtype in exact:
        got, want = draw(False, call, args, n, dtype), draw(True, call, args, n, dtype)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (name, call, int((got != want).sum()))
    # (call, arguments, type, bound on |got - want| / (1 + |want|)).
    close = [("curandGenerateNormal", (f32(1.5), f32(2.0)), np.float32, 2e-5),
             ("curandGenerateLogNormal", (f32(0.25), f32(0.5)), np.float32, 2e-5),
             ("curandGenerateNormalDouble", (f64(-1.0), f64(3.0)), np.float64, 1e-12)]
    for call, args, dtype, tol in close:
        got, want = draw(False, call, args, n, dtype), draw(True, call, args, n, dtype)
        assert np.isfinite(got).all()
        err = float((abs(got.astype(np.float64) - want) / (1 + abs(want))).max())
        assert err < tol, (name, call, err)
    # The parameters reached the generator: the host's samples have them.
    assert abs(want.mean() + 1.0) < 0.15 and abs(want.std() - 3.0) < 0.15
