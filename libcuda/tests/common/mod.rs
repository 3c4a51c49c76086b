//! Loads the built `libcuda.so` through its C ABI, as a program would.
//!
//! Cargo builds the crate's cdylib next to the test binaries
//! (`target/<profile>/libcuda.so`, one folder above `deps/`).
#![allow(dead_code, non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::PathBuf;
use std::sync::OnceLock;

use libloading::Library;

/// `CUresult` values the tests compare against (from `cuda.h`).
pub mod code {
    pub const SUCCESS: u32 = 0;
    pub const INVALID_VALUE: u32 = 1;
    pub const NOT_INITIALIZED: u32 = 3;
    pub const INVALID_DEVICE: u32 = 101;
    pub const OUT_OF_MEMORY: u32 = 2;
    pub const INVALID_IMAGE: u32 = 200;
    pub const INVALID_CONTEXT: u32 = 201;
    pub const CONTEXT_IS_DESTROYED: u32 = 709;
    pub const INVALID_PTX: u32 = 218;
    pub const FILE_NOT_FOUND: u32 = 301;
    pub const INVALID_HANDLE: u32 = 400;
    pub const NOT_READY: u32 = 600;
    pub const UNSUPPORTED_LIMIT: u32 = 215;
    pub const PEER_ACCESS_UNSUPPORTED: u32 = 217;
    pub const HOST_MEMORY_ALREADY_REGISTERED: u32 = 712;
    pub const HOST_MEMORY_NOT_REGISTERED: u32 = 713;
    pub const NO_BINARY_FOR_GPU: u32 = 209;
    pub const NOT_FOUND: u32 = 500;
    pub const NOT_SUPPORTED: u32 = 801;
}

pub type Handle = *mut c_void;

/// `CUipcMemHandle` and `CUipcEventHandle` (64 opaque bytes, passed by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpcHandle {
    pub reserved: [u8; 64],
}

macro_rules! driver_api {
    ($( fn $name:ident($($t:ty),* $(,)?); )*) => {
        /// Entry points of the library under test.
        pub struct Api {
            _lib: Library,
            $( pub $name: unsafe extern "C" fn($($t),*) -> u32, )*
        }

        impl Api {
            fn load(path: &PathBuf) -> Api {
                // SAFETY: loading our own library runs no initialisers with
                // preconditions.
                let lib = unsafe { Library::new(path) }
                    .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()));
                $(
                    // SAFETY: the symbol is the driver API function of that
                    // name, whose C signature the type spells out.
                    let $name = unsafe {
                        *lib.get::<unsafe extern "C" fn($($t),*) -> u32>(
                            concat!(stringify!($name), "\0").as_bytes(),
                        )
                        .unwrap_or_else(|e| panic!("{} not exported: {e}", stringify!($name)))
                    };
                )*
                Api { _lib: lib, $( $name, )* }
            }
        }
    };
}

driver_api! {
    fn cuInit(c_uint);
    fn cuDriverGetVersion(*mut c_int);
    fn cuGetErrorName(u32, *mut *const c_char);
    fn cuGetErrorString(u32, *mut *const c_char);
    fn cuLogsRegisterCallback(Option<unsafe extern "C" fn(*mut c_void, c_int, *mut c_char, usize)>, *mut c_void, *mut *mut c_void);
    fn cuLogsUnregisterCallback(*mut c_void);
    fn cuLogsCurrent(*mut c_uint, c_uint);
    fn cuLogsDumpToFile(*mut c_uint, *const c_char, c_uint);
    fn cuLogsDumpToMemory(*mut c_uint, *mut c_char, *mut usize, c_uint);
    fn cuGetProcAddress_v2(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int);
    fn cuDeviceGet(*mut c_int, c_int);
    fn cuDeviceGetCount(*mut c_int);
    fn cuDeviceGetName(*mut c_char, c_int, c_int);
    fn cuDeviceGetAttribute(*mut c_int, c_int, c_int);
    fn cuDeviceTotalMem_v2(*mut usize, c_int);
    fn cuDeviceGetUuid(*mut [u8; 16], c_int);
    fn cuDeviceComputeCapability(*mut c_int, *mut c_int, c_int);
    fn cuDevicePrimaryCtxRetain(*mut Handle, c_int);
    fn cuDevicePrimaryCtxRelease_v2(c_int);
    fn cuCtxCreate_v2(*mut Handle, c_uint, c_int);
    fn cuCtxDestroy_v2(Handle);
    fn cuCtxGetCurrent(*mut Handle);
    fn cuCtxSetCurrent(Handle);
    fn cuCtxPushCurrent_v2(Handle);
    fn cuCtxPopCurrent_v2(*mut Handle);
    fn cuCtxGetDevice(*mut c_int);
    fn cuCtxSynchronize();
    fn cuModuleLoadData(*mut Handle, *const c_void);
    fn cuModuleLoadDataEx(*mut Handle, *const c_void, c_uint, *const c_int, *mut *mut c_void);
    fn cuModuleUnload(Handle);
    fn cuModuleGetFunction(*mut Handle, Handle, *const c_char);
    fn cuModuleGetGlobal_v2(*mut u64, *mut usize, Handle, *const c_char);
    fn cuFuncGetAttribute(*mut c_int, c_int, Handle);
    fn cuFuncSetAttribute(Handle, c_int, c_int);
    fn cuMemAlloc_v2(*mut u64, usize);
    fn cuMemFree_v2(u64);
    fn cuMemGetInfo_v2(*mut usize, *mut usize);
    fn cuMemcpyHtoD_v2(u64, *const c_void, usize);
    fn cuMemcpyDtoH_v2(*mut c_void, u64, usize);
    fn cuMemcpyDtoD_v2(u64, u64, usize);
    fn cuMemcpyPeer(u64, Handle, u64, Handle, usize);
    fn cuMemcpyPeerAsync(u64, Handle, u64, Handle, usize, Handle);
    fn cuMemsetD8_v2(u64, u8, usize);
    fn cuMemsetD16_v2(u64, u16, usize);
    fn cuMemsetD32_v2(u64, u32, usize);
    fn cuMemsetD32Async(u64, u32, usize, Handle);
    fn cuMemcpyHtoDAsync_v2(u64, *const c_void, usize, Handle);
    fn cuMemcpyDtoHAsync_v2(*mut c_void, u64, usize, Handle);
    fn cuMemAllocAsync(*mut u64, usize, Handle);
    fn cuMemAllocFromPoolAsync(*mut u64, usize, Handle, Handle);
    fn cuMemFreeAsync(u64, Handle);
    fn cuDeviceGetDefaultMemPool(*mut Handle, c_int);
    fn cuDeviceGetMemPool(*mut Handle, c_int);
    fn cuDeviceSetMemPool(c_int, Handle);
    fn cuMemPoolCreate(*mut Handle, *const [u8; 88]);
    fn cuMemPoolDestroy(Handle);
    fn cuMemPoolSetAttribute(Handle, c_int, *mut c_void);
    fn cuMemPoolGetAttribute(Handle, c_int, *mut c_void);
    fn cuMemPoolTrimTo(Handle, usize);
    fn cuMemPoolGetAccess(*mut c_int, Handle, *const [c_int; 2]);
    fn cuLaunchKernel(Handle, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Handle, *mut *mut c_void, *mut *mut c_void);
    fn cuModuleGetLoadingMode(*mut c_int);
    fn cuStreamGetGreenCtx(Handle, *mut Handle);
    fn cuLaunchCooperativeKernel(Handle, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Handle, *mut *mut c_void);
    fn cuStreamCreate(*mut Handle, c_uint);
    fn cuStreamDestroy_v2(Handle);
    fn cuStreamGetId(Handle, *mut u64);
    fn cuDeviceGetDevResource(c_int, *mut u8, c_int);
    fn cuCtxGetDevResource(Handle, *mut u8, c_int);
    fn cuStreamGetDevResource(Handle, *mut u8, c_int);
    fn cuStreamSynchronize(Handle);
    fn cuGetProcAddress(*const c_char, *mut *mut c_void, c_int, u64);
    fn cuGetExportTable(*mut *const c_void, *const [u8; 16]);
    fn cuDevicePrimaryCtxGetState(c_int, *mut c_uint, *mut c_int);
    fn cuDevicePrimaryCtxSetFlags_v2(c_int, c_uint);
    fn cuDevicePrimaryCtxReset_v2(c_int);
    fn cuDeviceGetProperties(*mut [c_int; 14], c_int);
    fn cuDeviceCanAccessPeer(*mut c_int, c_int, c_int);
    fn cuCtxCreate_v4(*mut Handle, *const c_void, c_uint, c_int);
    fn cuCtxGetApiVersion(Handle, *mut c_uint);
    fn cuCtxGetFlags(*mut c_uint);
    fn cuCtxSetFlags(c_uint);
    fn cuCtxGetId(Handle, *mut u64);
    fn cuCtxGetLimit(*mut usize, c_int);
    fn cuCtxSetLimit(c_int, usize);
    fn cuCtxGetCacheConfig(*mut c_int);
    fn cuCtxSetCacheConfig(c_int);
    fn cuCtxGetStreamPriorityRange(*mut c_int, *mut c_int);
    fn cuCtxGetDevice_v2(*mut c_int, Handle);
    fn cuCtxSynchronize_v2(Handle);
    fn cuModuleLoad(*mut Handle, *const c_char);
    fn cuModuleLoadFatBinary(*mut Handle, *const c_void);
    fn cuLinkCreate_v2(c_uint, *const c_int, *mut *mut c_void, *mut Handle);
    fn cuLinkAddData_v2(Handle, c_int, *mut c_void, usize, *const c_char, c_uint, *const c_int, *mut *mut c_void);
    fn cuLinkAddFile_v2(Handle, c_int, *const c_char, c_uint, *const c_int, *mut *mut c_void);
    fn cuLinkComplete(Handle, *mut *mut c_void, *mut usize);
    fn cuLinkDestroy(Handle);
    fn cuLibraryLoadData(*mut Handle, *const c_void, *const c_int, *mut *mut c_void, c_uint, *const c_int, *mut *mut c_void, c_uint);
    fn cuLibraryLoadFromFile(*mut Handle, *const c_char, *const c_int, *mut *mut c_void, c_uint, *const c_int, *mut *mut c_void, c_uint);
    fn cuLibraryUnload(Handle);
    fn cuLibraryGetKernel(*mut Handle, Handle, *const c_char);
    fn cuLibraryGetKernelCount(*mut c_uint, Handle);
    fn cuModuleGetFunctionCount(*mut c_uint, Handle);
    fn cuLibraryGetModule(*mut Handle, Handle);
    fn cuLibraryGetGlobal(*mut u64, *mut usize, Handle, *const c_char);
    fn cuKernelGetFunction(*mut Handle, Handle);
    fn cuKernelGetAttribute(*mut c_int, c_int, Handle, c_int);
    fn cuKernelSetAttribute(c_int, c_int, Handle, c_int);
    fn cuKernelGetName(*mut *const c_char, Handle);
    fn cuFuncSetCacheConfig(Handle, c_int);
    fn cuFuncGetParamInfo(Handle, usize, *mut usize, *mut usize);
    fn cuFuncGetParamCount(Handle, *mut usize);
    fn cuKernelGetParamCount(Handle, *mut usize);
    fn cuLaunchKernelEx(*const c_void, Handle, *mut *mut c_void, *mut *mut c_void);
    fn cuLaunchHostFunc(Handle, Option<unsafe extern "C" fn(*mut c_void)>, *mut c_void);
    fn cuStreamAddCallback(Handle, Option<unsafe extern "C" fn(Handle, u32, *mut c_void)>, *mut c_void, c_uint);
    fn cuStreamWaitEvent(Handle, Handle, c_uint);
    fn cuStreamQuery(Handle);
    fn cuStreamGetFlags(Handle, *mut c_uint);
    fn cuStreamGetCtx(Handle, *mut Handle);
    fn cuEventCreate(*mut Handle, c_uint);
    fn cuEventDestroy_v2(Handle);
    fn cuEventRecord(Handle, Handle);
    fn cuEventQuery(Handle);
    fn cuEventSynchronize(Handle);
    fn cuEventElapsedTime(*mut f32, Handle, Handle);
    fn cuOccupancyMaxActiveBlocksPerMultiprocessor(*mut c_int, Handle, c_int, usize);
    fn cuOccupancyMaxActiveClusters(*mut c_int, Handle, *const c_void);
    fn cuOccupancyMaxPotentialClusterSize(*mut c_int, Handle, *const c_void);
    fn cuOccupancyMaxPotentialBlockSize(*mut c_int, *mut c_int, Handle, Option<unsafe extern "C" fn(c_int) -> usize>, usize, c_int);
    fn cuMemAllocHost_v2(*mut *mut c_void, usize);
    fn cuMemHostAlloc(*mut *mut c_void, usize, c_uint);
    fn cuMemFreeHost(*mut c_void);
    fn cuMemHostRegister_v2(*mut c_void, usize, c_uint);
    fn cuMemHostUnregister(*mut c_void);
    fn cuMemHostGetDevicePointer_v2(*mut u64, *mut c_void, c_uint);
    fn cuMemAllocManaged(*mut u64, usize, c_uint);
    fn cuMemAllocPitch_v2(*mut u64, *mut usize, usize, usize, c_uint);
    fn cuMemGetAddressRange_v2(*mut u64, *mut usize, u64);
    fn cuMemcpy(u64, u64, usize);
    fn cuMemcpy2D_v2(*const c_void);
    fn cuMemcpy3D_v2(*const c_void);
    fn cuArrayCreate_v2(*mut Handle, *const c_void);
    fn cuArray3DCreate_v2(*mut Handle, *const c_void);
    fn cuArray3DGetDescriptor_v2(*mut c_void, Handle);
    fn cuArrayDestroy(Handle);
    fn cuMipmappedArrayCreate(*mut Handle, *const c_void, c_uint);
    fn cuMipmappedArrayGetLevel(*mut Handle, Handle, c_uint);
    fn cuMipmappedArrayDestroy(Handle);
    fn cuMemcpyHtoA_v2(Handle, usize, *const c_void, usize);
    fn cuMemcpyAtoH_v2(*mut c_void, Handle, usize, usize);
    fn cuMemcpyAtoA_v2(Handle, usize, Handle, usize, usize);
    fn cuTexObjectCreate(*mut u64, *const c_void, *const c_void, *const c_void);
    fn cuTexObjectDestroy(u64);
    fn cuTexObjectGetResourceDesc(*mut c_void, u64);
    fn cuTexObjectGetTextureDesc(*mut c_void, u64);
    fn cuSurfObjectCreate(*mut u64, *const c_void);
    fn cuSurfObjectDestroy(u64);
    fn cuModuleGetTexRef(*mut Handle, Handle, *const c_char);
    fn cuModuleGetSurfRef(*mut Handle, Handle, *const c_char);
    fn cuTexRefSetArray(Handle, Handle, c_uint);
    fn cuTexRefSetAddress_v2(*mut usize, Handle, u64, usize);
    fn cuTexRefSetFormat(Handle, c_uint, c_int);
    fn cuTexRefSetAddressMode(Handle, c_int, c_uint);
    fn cuTexRefSetFilterMode(Handle, c_uint);
    fn cuTexRefSetFlags(Handle, c_uint);
    fn cuTexRefGetFilterMode(*mut c_uint, Handle);
    fn cuSurfRefSetArray(Handle, Handle, c_uint);
    fn cuMemsetD2D32_v2(u64, usize, u32, usize, usize);
    fn cuPointerGetAttribute(*mut c_void, c_int, u64);
    fn cuPointerGetAttributes(c_uint, *const c_int, *mut *mut c_void, u64);
    fn cuGraphCreate(*mut Handle, c_uint);
    fn cuGraphDestroy(Handle);
    fn cuGraphClone(*mut Handle, Handle);
    fn cuGraphGetNodes(Handle, *mut Handle, *mut usize);
    fn cuGraphNodeGetType(Handle, *mut c_int);
    fn cuGraphDestroyNode(Handle);
    fn cuGraphInstantiateWithFlags(*mut Handle, Handle, u64);
    fn cuGraphLaunch(Handle, Handle);
    fn cuGraphExecDestroy(Handle);
    fn cuGraphAddMemAllocNode(*mut Handle, Handle, *const Handle, usize, *mut [u8; 120]);
    fn cuGraphAddMemFreeNode(*mut Handle, Handle, *const Handle, usize, u64);
    fn cuGraphMemAllocNodeGetParams(Handle, *mut [u8; 120]);
    fn cuGraphMemFreeNodeGetParams(Handle, *mut u64);
    fn cuDeviceGetGraphMemAttribute(c_int, c_int, *mut c_void);
    fn cuDeviceSetGraphMemAttribute(c_int, c_int, *mut c_void);
    fn cuStreamBeginCapture_v2(Handle, c_int);
    fn cuStreamEndCapture(Handle, *mut Handle);
    fn cuStreamBeginCaptureToGraph(Handle, Handle, *const Handle, *const c_void, usize, c_int);
    fn cuGraphConditionalHandleCreate(*mut u64, Handle, Handle, c_uint, c_uint);
    fn cuGraphAddNode(*mut Handle, Handle, *const Handle, usize, *mut c_void);
    fn cuGraphNodeGetParams(Handle, *mut c_void);
    fn cuIpcGetMemHandle(*mut IpcHandle, u64);
    fn cuIpcOpenMemHandle_v2(*mut u64, IpcHandle, c_uint);
    fn cuIpcCloseMemHandle(u64);
    fn cuIpcGetEventHandle(*mut IpcHandle, Handle);
    fn cuIpcOpenEventHandle(*mut Handle, IpcHandle);
    fn cuTensorMapEncodeTiled(*mut c_void, c_int, u32, *mut c_void, *const u64, *const u64, *const u32, *const u32, c_int, c_int, c_int, c_int);
}

/// Calls a driver entry point: `cu!(api.cuInit(0))`.
///
/// Each argument is evaluated into a local first, so the `unsafe` call only
/// touches values the caller built in safe code.
#[macro_export]
macro_rules! cu {
    ($api:ident . $name:ident ( $($arg:expr),* $(,)? )) => {
        cu!(@bind ($api.$name) [] $($arg,)*)
    };
    (@bind ($f:expr) [$($done:ident)*] $head:expr, $($rest:expr,)*) => {{
        let arg = $head;
        cu!(@bind ($f) [$($done)* arg] $($rest,)*)
    }};
    (@bind ($f:expr) [$($done:ident)*]) => {{
        let entry = $f;
        // SAFETY: every pointer argument the tests pass is NULL, a pointer to
        // a live local of the right type, or deliberately bogus where the
        // test checks that the library rejects it without touching it.
        unsafe { entry($($done),*) }
    }};
}

/// Where Cargo put `libcuda.so` for this test build.
fn library_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let mut dir = exe.parent().map(|p| p.to_path_buf()).unwrap_or_default();
    for _ in 0..3 {
        let candidate = dir.join("libcuda.so");
        if candidate.is_file() {
            return candidate;
        }
        if !dir.pop() {
            break;
        }
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/debug/libcuda.so")
}

/// Runs the test `name` again, alone, in a child process of its own (with
/// `env` set to `1` there) and returns its standard output and error once
/// it passed; `None` inside that child, where the caller runs the test's
/// body. For tests that need the process to themselves (process-wide
/// state such as the primary context, sticky errors, standard output).
pub fn in_own_process(name: &str, env: &str) -> Option<(String, String)> {
    if std::env::var_os(env).is_some() {
        return None;
    }
    let exe = std::env::current_exe().expect("test executable");
    let out = std::process::Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(env, "1")
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{name} failed in its child process:\n{stdout}\n{stderr}");
    Some((stdout, stderr))
}

/// The library, loaded once per test process.
pub fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| Api::load(&library_path()))
}

/// `cuInit(0)`, asserting success.
pub fn init() -> &'static Api {
    let api = api();
    assert_eq!(cu!(api.cuInit(0)), code::SUCCESS, "cuInit");
    api
}

/// The name of a `CUresult`, for assertion messages.
pub fn error_name(api: &Api, rc: u32) -> String {
    let mut s: *const c_char = std::ptr::null();
    if cu!(api.cuGetErrorName(rc, &mut s)) != 0 || s.is_null() {
        return format!("CUresult {rc}");
    }
    // SAFETY: the library returned a static NUL-terminated string.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// Asserts `rc == CUDA_SUCCESS` with a readable message.
#[track_caller]
pub fn check(api: &Api, rc: u32, what: &str) {
    assert_eq!(rc, code::SUCCESS, "{what} failed: {}", error_name(api, rc));
}

/// A context created on this thread and destroyed on drop.
pub struct Ctx {
    pub handle: Handle,
}

impl Ctx {
    pub fn new(api: &Api) -> Ctx {
        let mut handle: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuCtxCreate_v2(&mut handle, 0, 0)), "cuCtxCreate");
        Ctx { handle }
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        let api = api();
        let _ = cu!(api.cuCtxDestroy_v2(self.handle));
    }
}

/// Launches `vadd_f32(a, b, c, n)` (`tests/data/vadd_f32.ptx`) through
/// function handle `f` on `stream`, in blocks of `block` threads covering
/// `n` elements; returns `cuLaunchKernel`'s result.
pub fn launch_vadd(api: &Api, f: Handle, [a, b, c]: [u64; 3], n: usize, block: u32, stream: Handle) -> u32 {
    let (mut a, mut b, mut c, mut n32) = (a, b, c, n as i32);
    let mut params: [*mut c_void; 4] = [
        (&mut a as *mut u64).cast(),
        (&mut b as *mut u64).cast(),
        (&mut c as *mut u64).cast(),
        (&mut n32 as *mut i32).cast(),
    ];
    let grid = n.div_ceil(block as usize) as u32;
    let no_extra: *mut *mut c_void = std::ptr::null_mut();
    cu!(api.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream, params.as_mut_ptr(), no_extra))
}

/// Deterministic pseudo-random numbers (64-bit LCG, Knuth's MMIX constants).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next_u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 32) as u32
    }

    /// A float in [-100, 100).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 / (1u32 << 24) as f32 * 200.0 - 100.0
    }
}

/// Reads a test data file as a NUL-terminated PTX image.
pub fn ptx_image(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
    let mut text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.push(0);
    text
}

/// `CUlaunchConfig` and `CUlaunchAttribute`.
#[repr(C)]
pub struct LaunchConfig {
    pub grid: [c_uint; 3],
    pub block: [c_uint; 3],
    pub shared: c_uint,
    pub stream: Handle,
    pub attrs: *const LaunchAttribute,
    pub num_attrs: c_uint,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct LaunchAttribute {
    pub id: c_int,
    pub pad: [u8; 4],
    pub value: [u64; 8],
}
