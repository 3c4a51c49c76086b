"""cuda-python (cuda.bindings.driver) on ptxvk's libcuda.so.1.

    LD_LIBRARY_PATH=$(libcuda/build-libcuda.sh) python libcuda/tests/clients/cuda_python_smoke.py

Needs cuda-python (cuda-bindings) and numpy. Exits non-zero on the first
failed check; prints one line per check.
"""
import ctypes
import os
import sys

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
        raise SystemExit("FAILED: %s" % err)
    return rest[0] if len(rest) == 1 else rest


def check(name, cond):
    print("%-34s %s" % (name, "ok" if cond else "FAILED"))
    if not cond:
        sys.exit(1)


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


def main():
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
    print("cuda-python smoke: all passed")


if __name__ == "__main__":
    main()
