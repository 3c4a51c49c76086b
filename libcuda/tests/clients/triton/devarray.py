"""Device arrays for torch-free Triton launches through the driver API (ctypes)."""
import ctypes
import numpy as np
import triton.language as tl

_cuda = ctypes.CDLL("libcuda.so.1")
_ctx = None


def _check(r, what):
    if r != 0:
        raise RuntimeError(f"{what} failed: CUresult {r}")


def init():
    global _ctx
    if _ctx is not None:
        return
    _check(_cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    _check(_cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    _check(_cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    _check(_cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    _ctx = ctx


_TL = {np.dtype(np.float16): tl.float16, np.dtype(np.float32): tl.float32, np.dtype(np.int32): tl.int32,
       np.dtype(np.float64): tl.float64, np.dtype(np.int64): tl.int64, np.dtype(np.uint8): tl.uint8,
       np.dtype(np.int8): tl.int8, np.dtype(np.bool_): tl.int1}


class DeviceArray:
    """A device copy of a numpy array; `data_ptr()` and `dtype` are what Triton's launcher reads."""

    def __init__(self, host):
        init()
        host = np.ascontiguousarray(host)
        self.shape, self.np_dtype, self.nbytes = host.shape, host.dtype, host.nbytes
        self.dtype = _TL[host.dtype]
        p = ctypes.c_uint64()
        _check(_cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(max(self.nbytes, 4))), "cuMemAlloc")
        self.ptr = p.value
        _check(_cuda.cuMemcpyHtoD_v2(ctypes.c_uint64(self.ptr), host.ctypes.data_as(ctypes.c_void_p),
                                     ctypes.c_size_t(self.nbytes)), "cuMemcpyHtoD")

    @classmethod
    def poisoned(cls, shape, dtype):
        a = np.empty(shape, dtype)
        a.view(np.uint8)[...] = 0xAB
        return cls(a)

    def data_ptr(self):
        return self.ptr

    def numpy(self):
        _check(_cuda.cuCtxSynchronize(), "cuCtxSynchronize")
        out = np.empty(self.shape, self.np_dtype)
        _check(_cuda.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(self.ptr),
                                     ctypes.c_size_t(self.nbytes)), "cuMemcpyDtoH")
        return out

    def __del__(self):
        try:
            _cuda.cuMemFree_v2(ctypes.c_uint64(self.ptr))
        except Exception:
            pass
