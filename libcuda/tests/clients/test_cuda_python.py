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
    err, _ = cu.cuArrayCreate(cu.CUDA_ARRAY_DESCRIPTOR())
    check("empty array descriptor -> INVALID_VALUE", err == R.CUDA_ERROR_INVALID_VALUE)
    # A CUDA array round trip (textures: libcuda/tests/textures.rs).
    desc = cu.CUDA_ARRAY_DESCRIPTOR()
    desc.Width, desc.Height = 64, 3
    desc.Format = cu.CUarray_format.CU_AD_FORMAT_FLOAT
    desc.NumChannels = 2
    arr = ok(cu.cuArrayCreate(desc))
    data = np.random.default_rng(5).standard_normal(64 * 3 * 2).astype(np.float32)
    ok(cu.cuMemcpyHtoA(arr, 0, data.ctypes.data, data.nbytes))
    back = np.full_like(data, np.nan)
    ok(cu.cuMemcpyAtoH(back.ctypes.data, arr, 0, back.nbytes))
    got = ok(cu.cuArrayGetDescriptor(arr))
    check("CUDA array round trip", np.array_equal(back, data) and (got.Width, got.Height, got.NumChannels) == (64, 3, 2))
    ok(cu.cuArrayDestroy(arr))

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


def test_cuda_core_graph_builder():
    """cuda.core's GraphBuilder: stream capture split into two streams and
    joined (the forked stream is destroyed before the capture ends), a host
    callback, upload, three launches with new inputs."""
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    code = r"""
    extern "C" __global__ void axpy(float a, const float* x, float* y, unsigned n) {
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }
    """
    arch = "".join(str(v) for v in dev.compute_capability)
    prog = Program(code, code_type="c++", options=ProgramOptions(std="c++17", arch="compute_" + arch))
    kernel = prog.compile("ptx").get_kernel("axpy")
    n = 3001
    rng = np.random.default_rng(5)
    x = rng.standard_normal(n).astype(np.float32)
    dx, dy, dz = (dev.allocate(x.nbytes, stream=stream) for _ in range(3))
    s = int(stream.handle)
    ok(cu.cuMemcpyHtoDAsync(int(dx.handle), x.ctypes.data, x.nbytes, s))
    config = LaunchConfig(grid=(n + 127) // 128, block=128)
    calls = []
    builder = dev.create_graph_builder().begin_building("global")
    left, right = builder.split(2)
    launch(left, config, kernel, np.float32(2.0), dx, dy, np.uint32(n))  # y = 2x + y
    # Powers of two: the products are exact, fused or not.
    launch(right, config, kernel, np.float32(4.0), dx, dz, np.uint32(n))  # z = 4x + z
    builder = type(builder).join(left, right)
    launch(builder, config, kernel, np.float32(1.0), dz, dy, np.uint32(n))  # y = z + y
    builder.callback(lambda: calls.append(1))
    graph = builder.end_building().complete()
    graph.upload(stream)
    for r in range(3):
        y = rng.standard_normal(n).astype(np.float32)
        z = rng.standard_normal(n).astype(np.float32)
        ok(cu.cuMemcpyHtoDAsync(int(dy.handle), y.ctypes.data, x.nbytes, s))
        ok(cu.cuMemcpyHtoDAsync(int(dz.handle), z.ctypes.data, x.nbytes, s))
        graph.launch(stream)
        out = np.full(n, np.nan, np.float32)
        ok(cu.cuMemcpyDtoHAsync(out.ctypes.data, int(dy.handle), x.nbytes, s))
        stream.sync()
        want = (np.float32(4) * x + z) + (np.float32(2) * x + y)
        check("graph builder run %d" % r, np.array_equal(out, want) and len(calls) == r + 1)
    graph.close()
    for d in (dx, dy, dz):
        d.close(stream)


def test_cuda_core_graph_definition():
    """cuda.core's GraphDefinition (explicit nodes through cuGraphAddNode and
    friends): memset, kernel, device copy, join, host callback, DOT output."""
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions
    from cuda.core.graph import GraphDefinition

    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    code = r"""
    extern "C" __global__ void axpy(float a, const float* x, float* y, unsigned n) {
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }
    """
    arch = "".join(str(v) for v in dev.compute_capability)
    prog = Program(code, code_type="c++", options=ProgramOptions(std="c++17", arch="compute_" + arch))
    kernel = prog.compile("ptx").get_kernel("axpy")
    n = 2001
    rng = np.random.default_rng(9)
    dx, dy, dz = (dev.allocate(n * 4, stream=stream) for _ in range(3))
    s = int(stream.handle)
    config = LaunchConfig(grid=(n + 127) // 128, block=128)
    calls = []
    g = GraphDefinition()
    zero = g.memset(dy, np.uint32(0), n)  # y = 0
    k = zero.launch(config, kernel, np.float32(2.0), dx, dy, np.uint32(n))  # y = 2x
    copy = k.memcpy(dz, dy, n * 4)  # z = y
    done = copy.join(g.empty())
    done.callback(lambda: calls.append(1))
    check("definition has 6 nodes", len(g.nodes()) == 6)
    graph = g.instantiate()
    for r in range(3):
        x = rng.standard_normal(n).astype(np.float32)
        ok(cu.cuMemcpyHtoDAsync(int(dx.handle), x.ctypes.data, x.nbytes, s))
        poison = np.full(n, np.nan, np.float32)
        ok(cu.cuMemcpyHtoDAsync(int(dz.handle), poison.ctypes.data, x.nbytes, s))
        graph.launch(stream)
        out = np.empty(n, np.float32)
        ok(cu.cuMemcpyDtoHAsync(out.ctypes.data, int(dz.handle), x.nbytes, s))
        stream.sync()
        check("graph definition run %d" % r, np.array_equal(out, np.float32(2) * x) and len(calls) == r + 1)
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ptxvk_graph_definition_%d.dot" % os.getpid())
    g.debug_dot_print(path)
    with open(path) as f:
        dot = f.read()
    os.remove(path)
    check("DOT output names the kernel", "axpy" in dot and dot.count("->") == 5)
    graph.close()
    for d in (dx, dy, dz):
        d.close(stream)


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


def test_graphs():
    """A graph built with cuGraphAdd*Node and the same work captured from a
    stream, each launched several times with new inputs; kernel parameters
    changed in the executable graph."""
    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    with open(PTX, "rb") as f:
        module = ok(cu.cuModuleLoadData(f.read() + b"\0"))
    func = ok(cu.cuModuleGetFunction(module, b"vadd_f32"))
    stream = ok(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))
    n = 4099
    rng = np.random.default_rng(11)
    a = np.zeros(n, np.float32)
    b = np.zeros(n, np.float32)
    out = np.zeros(n, np.float32)
    da, db, dc = (ok(cu.cuMemAlloc(n * 4)) for _ in range(3))

    def kernel_args(count):
        vals = [np.array([int(da)], np.uint64), np.array([int(db)], np.uint64), np.array([int(dc)], np.uint64),
                np.array([count], np.uint32)]
        return vals, np.array([v.ctypes.data for v in vals], np.uint64)

    def node_params(params):
        p = cu.CUDA_KERNEL_NODE_PARAMS()
        p.func = func
        p.gridDimX, p.gridDimY, p.gridDimZ = (n + 127) // 128, 1, 1
        p.blockDimX, p.blockDimY, p.blockDimZ = 128, 1, 1
        p.sharedMemBytes = 0
        p.kernelParams = params.ctypes.data
        return p

    def copy(dst_type, dst, src_type, src):
        c = cu.CUDA_MEMCPY3D()
        c.dstMemoryType, c.srcMemoryType = dst_type, src_type
        if dst_type == cu.CUmemorytype.CU_MEMORYTYPE_HOST:
            c.dstHost = dst
        else:
            c.dstDevice = dst
        if src_type == cu.CUmemorytype.CU_MEMORYTYPE_HOST:
            c.srcHost = src
        else:
            c.srcDevice = src
        c.WidthInBytes, c.Height, c.Depth = n * 4, 1, 1
        return c

    def run(exec_, count, what):
        a[:] = rng.standard_normal(n)
        b[:] = rng.standard_normal(n)
        out[:] = np.float32(-7.5)
        ok(cu.cuMemsetD32(dc, 0x7FC00000, n))
        ok(cu.cuGraphLaunch(exec_, stream))
        ok(cu.cuStreamSynchronize(stream))
        want = (a + b)[:count]
        rest = np.isnan(out[count:]).all()
        check(what, np.array_equal(out[:count], want) and rest)

    host = cu.CUmemorytype.CU_MEMORYTYPE_HOST
    device = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
    graph = ok(cu.cuGraphCreate(0))
    ca = ok(cu.cuGraphAddMemcpyNode(graph, None, 0, copy(device, da, host, a.ctypes.data), ctx))
    cb = ok(cu.cuGraphAddMemcpyNode(graph, None, 0, copy(device, db, host, b.ctypes.data), ctx))
    vals, params = kernel_args(n)
    k = ok(cu.cuGraphAddKernelNode(graph, [ca, cb], 2, node_params(params)))
    del vals, params  # the node holds copies
    ok(cu.cuGraphAddMemcpyNode(graph, [k], 1, copy(host, out.ctypes.data, device, dc), ctx))
    nodes, count = ok(cu.cuGraphGetNodes(graph, 8))
    check("graph has 4 nodes", count == 4)
    check("kernel node type", ok(cu.cuGraphNodeGetType(k)) == cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL)
    exec_ = ok(cu.cuGraphInstantiate(graph, 0))
    for _ in range(3):
        run(exec_, n, "explicit graph: c = a + b")
    vals, params = kernel_args(n // 3)
    ok(cu.cuGraphExecKernelNodeSetParams(exec_, k, node_params(params)))
    run(exec_, n // 3, "exec node params: first third")
    ok(cu.cuGraphExecDestroy(exec_))
    ok(cu.cuGraphDestroy(graph))

    ok(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL))
    status = ok(cu.cuStreamIsCapturing(stream))
    check("stream is capturing", status == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE)
    ok(cu.cuMemcpyHtoDAsync(da, a.ctypes.data, n * 4, stream))
    ok(cu.cuMemcpyHtoDAsync(db, b.ctypes.data, n * 4, stream))
    vals, params = kernel_args(n)
    ok(cu.cuLaunchKernel(func, (n + 127) // 128, 1, 1, 128, 1, 1, 0, stream, params.ctypes.data, 0))
    ok(cu.cuMemcpyDtoHAsync(out.ctypes.data, dc, n * 4, stream))
    err = cu.cuStreamSynchronize(stream)[0]
    check("synchronize while capturing fails", err == R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    err, g = cu.cuStreamEndCapture(stream)
    check("invalidated capture", err == R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)

    ok(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL))
    ok(cu.cuMemcpyHtoDAsync(da, a.ctypes.data, n * 4, stream))
    ok(cu.cuMemcpyHtoDAsync(db, b.ctypes.data, n * 4, stream))
    ok(cu.cuLaunchKernel(func, (n + 127) // 128, 1, 1, 128, 1, 1, 0, stream, params.ctypes.data, 0))
    ok(cu.cuMemcpyDtoHAsync(out.ctypes.data, dc, n * 4, stream))
    info = cu.cuStreamGetCaptureInfo(stream)
    check("capture info", info[0] == R.CUDA_SUCCESS and info[-1] == 1)
    g = ok(cu.cuStreamEndCapture(stream))
    _, count = ok(cu.cuGraphGetNodes(g, 8))
    check("captured graph has 4 nodes", count == 4)
    exec_ = ok(cu.cuGraphInstantiate(g, 0))
    for _ in range(3):
        run(exec_, n, "captured graph: c = a + b")
    ok(cu.cuGraphExecDestroy(exec_))
    ok(cu.cuGraphDestroy(g))
    for d in (da, db, dc):
        ok(cu.cuMemFree(d))
    ok(cu.cuStreamDestroy(stream))
    ok(cu.cuModuleUnload(module))
    ok(cu.cuDevicePrimaryCtxRelease(dev))
