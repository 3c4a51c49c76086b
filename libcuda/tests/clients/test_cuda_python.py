"""cuda-python (cuda.bindings.driver) on ptxvk's libcuda.so.1 (run by run.sh).

A cuda-python program as its users write it: every call goes through
cuda.bindings, which resolves the driver's functions with cuGetProcAddress.
"""
import ctypes
import os

import numpy as np
from cuda.bindings import driver as cu

HERE = os.path.dirname(os.path.abspath(__file__))
PTX = os.path.join(HERE, "..", "data", "vadd_f32.ptx")
FATBIN = os.path.join(HERE, "..", "data", "vadd_f32.zstd.fatbin")
R = cu.CUresult


def ok(result):
    """Unpacks (err, *values), failing on an error."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != R.CUDA_SUCCESS:
        raise AssertionError("FAILED: %s" % err)
    return rest[0] if len(rest) == 1 else rest


def check(name, cond):
    print("%-34s %s" % (name, "ok" if cond else "FAILED"))
    assert cond, name


def vadd(func, stream, n):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    da, db, dc = (ok(cu.cuMemAlloc(n * 4)) for _ in range(3))
    ok(cu.cuMemcpyHtoDAsync(da, a.ctypes.data, n * 4, stream))
    ok(cu.cuMemcpyHtoDAsync(db, b.ctypes.data, n * 4, stream))
    args = [np.array([int(da)], np.uint64), np.array([int(db)], np.uint64), np.array([int(dc)], np.uint64),
            np.array([n], np.uint32)]
    params = np.array([x.ctypes.data for x in args], np.uint64)
    ok(cu.cuLaunchKernel(func, (n + 255) // 256, 1, 1, 256, 1, 1, 0, stream, params.ctypes.data, 0))
    c = np.zeros(n, np.float32)
    ok(cu.cuMemcpyDtoHAsync(c.ctypes.data, dc, n * 4, stream))
    ok(cu.cuStreamSynchronize(stream))
    for d in (da, db, dc):
        ok(cu.cuMemFree(d))
    return np.array_equal(c, a + b)


def test_driver_program():
    ok(cu.cuInit(0))
    version = ok(cu.cuDriverGetVersion())
    check("cuDriverGetVersion >= 12000", version >= 12000)
    dev = ok(cu.cuDeviceGet(0))
    name = ok(cu.cuDeviceGetName(256, dev))
    print("device:", name.split(b"\0")[0].decode())
    warp = ok(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev))
    check("warp size 32", warp == 32)

    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    check("primary context is current", int(ok(cu.cuCtxGetCurrent())) == int(ctx))
    stack = ok(cu.cuCtxGetLimit(cu.CUlimit.CU_LIMIT_STACK_SIZE))
    check("cuCtxGetLimit(STACK_SIZE)", stack > 0)

    with open(PTX, "rb") as f:
        ptx = f.read() + b"\0"
    module = ok(cu.cuModuleLoadData(ptx))
    func = ok(cu.cuModuleGetFunction(module, b"vadd_f32"))
    stream = ok(cu.cuStreamCreate(0))
    start = ok(cu.cuEventCreate(0))
    end = ok(cu.cuEventCreate(0))
    ok(cu.cuEventRecord(start, stream))
    check("module kernel on a stream", vadd(func, stream, 10_007))
    ok(cu.cuEventRecord(end, stream))
    ok(cu.cuEventSynchronize(end))
    ms = ok(cu.cuEventElapsedTime(start, end))
    check("cuEventElapsedTime", ms >= 0.0)

    lib = ok(cu.cuLibraryLoadData(ptx, None, None, 0, None, None, 0))
    kernel = ok(cu.cuLibraryGetKernel(lib, b"vadd_f32"))
    kfunc = ok(cu.cuKernelGetFunction(kernel))
    check("library kernel", vadd(kfunc, stream, 4_096))
    regs = ok(cu.cuKernelGetAttribute(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kernel, dev))
    check("cuKernelGetAttribute", regs >= 256)
    ok(cu.cuLibraryUnload(lib))

    with open(FATBIN, "rb") as f:
        fat = f.read()
    fmod = ok(cu.cuModuleLoadData(fat))
    ffunc = ok(cu.cuModuleGetFunction(fmod, b"vadd_f32"))
    check("compressed fat binary", vadd(ffunc, stream, 1_000))

    err, _ = cu.cuModuleGetFunction(module, b"no_such_kernel")
    check("missing kernel -> NOT_FOUND", err == R.CUDA_ERROR_NOT_FOUND)
    err, = cu.cuMemFree(0xDEAD0000)
    check("bad free -> INVALID_VALUE", err == R.CUDA_ERROR_INVALID_VALUE)
    err, = cu.cuStreamSynchronize(cu.CUstream(0xBAD0))
    check("bad stream -> INVALID_HANDLE", err == R.CUDA_ERROR_INVALID_HANDLE)
    err, _ = cu.cuGraphCreate(0)
    check("graphs -> NOT_SUPPORTED", err == R.CUDA_ERROR_NOT_SUPPORTED)

    ok(cu.cuEventDestroy(start))
    ok(cu.cuEventDestroy(end))
    ok(cu.cuStreamDestroy(stream))
    ok(cu.cuModuleUnload(module))
    ok(cu.cuModuleUnload(fmod))
    ok(cu.cuDevicePrimaryCtxRelease(dev))
    # The released primary context stays current until the thread drops it.
    err, _ = cu.cuMemAlloc(16)
    check("released primary context -> CONTEXT_IS_DESTROYED", err == R.CUDA_ERROR_CONTEXT_IS_DESTROYED)
    ok(cu.cuCtxSetCurrent(cu.CUcontext(0)))


def test_nvrtc_program_with_cuda_core():
    """NVRTC compiles CUDA C++ to PTX; cuda.core loads and launches it."""
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    code = r"""
    template <typename T>
    __global__ void scale_clamp(const T* x, T* y, T s, T lo, T hi, unsigned n) {
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            T v = x[i] * s;
            y[i] = v < lo ? lo : (v > hi ? hi : v);
        }
    }
    """
    arch = "".join(str(v) for v in dev.compute_capability)
    prog = Program(code, code_type="c++", options=ProgramOptions(std="c++17", arch="compute_" + arch))
    mod = prog.compile("ptx", name_expressions=("scale_clamp<int>", "scale_clamp<double>"))
    n = 5000
    rng = np.random.default_rng(11)
    for name, dtype, args in (("scale_clamp<int>", np.int32, (np.int32(3), np.int32(-700), np.int32(900))),
                              ("scale_clamp<double>", np.float64, (np.float64(0.5), np.float64(-1.0),
                                                                   np.float64(1.25)))):
        x = (rng.integers(-1000, 1000, n) if dtype == np.int32 else rng.standard_normal(n) * 3).astype(dtype)
        kernel = mod.get_kernel(name)
        dx = dev.allocate(x.nbytes, stream=stream)
        dy = dev.allocate(x.nbytes, stream=stream)
        poison = np.full(n, -99, dtype)
        ok(cu.cuMemcpyHtoDAsync(int(dx.handle), x.ctypes.data, x.nbytes, int(stream.handle)))
        ok(cu.cuMemcpyHtoDAsync(int(dy.handle), poison.ctypes.data, x.nbytes, int(stream.handle)))
        config = LaunchConfig(grid=(n + 127) // 128, block=128)
        launch(stream, config, kernel, dx, dy, *args, np.uint32(n))
        y = np.empty(n, dtype)
        ok(cu.cuMemcpyDtoHAsync(y.ctypes.data, int(dy.handle), x.nbytes, int(stream.handle)))
        stream.sync()
        check("nvrtc + cuda.core " + name, np.array_equal(y, np.clip(x * args[0], args[1], args[2])))
        dx.close(stream)
        dy.close(stream)


def test_occupancy_and_launch_ex():
    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    with open(PTX, "rb") as f:
        module = ok(cu.cuModuleLoadData(f.read() + b"\0"))
    func = ok(cu.cuModuleGetFunction(module, b"vadd_f32"))
    min_grid, block = ok(cu.cuOccupancyMaxPotentialBlockSize(func, None, 0, 0))
    check("cuOccupancyMaxPotentialBlockSize", min_grid >= 1 and block >= 32 and block % 32 == 0)
    blocks = ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(func, 128, 0))
    check("cuOccupancyMaxActiveBlocksPerMultiprocessor", blocks >= 1)

    n = 3001
    rng = np.random.default_rng(5)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    da, db, dc = (ok(cu.cuMemAlloc(n * 4)) for _ in range(3))
    ok(cu.cuMemcpyHtoD(da, a.ctypes.data, n * 4))
    ok(cu.cuMemcpyHtoD(db, b.ctypes.data, n * 4))
    ok(cu.cuMemsetD32(dc, 0x7FC00001, n))
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = (n + 63) // 64, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = 64, 1, 1
    config.sharedMemBytes = 0
    config.hStream = 0
    config.numAttrs = 0
    args = [np.array([int(da)], np.uint64), np.array([int(db)], np.uint64), np.array([int(dc)], np.uint64),
            np.array([n], np.uint32)]
    params = np.array([x.ctypes.data for x in args], np.uint64)
    ok(cu.cuLaunchKernelEx(config, func, params.ctypes.data, 0))
    c = np.empty(n, np.float32)
    ok(cu.cuMemcpyDtoH(c.ctypes.data, dc, n * 4))
    check("cuLaunchKernelEx", np.array_equal(c, a + b))
    kind = ok(cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dc))
    check("cuPointerGetAttribute(MEMORY_TYPE)", kind == int(cu.CUmemorytype.CU_MEMORYTYPE_DEVICE))
    for d in (da, db, dc):
        ok(cu.cuMemFree(d))
    ok(cu.cuModuleUnload(module))
    ok(cu.cuDevicePrimaryCtxRelease(dev))
    ok(cu.cuCtxSetCurrent(cu.CUcontext(0)))
