//! `CUresult` codes, the [`CuError`] type that carries them through `?`, and
//! the guard that turns an entry point's body into a `CUresult` without ever
//! letting a panic cross the C ABI.
//!
//! The numeric values are those of `enum cudaError_enum` in NVIDIA's `cuda.h`;
//! names and descriptions are what `cuGetErrorName` and `cuGetErrorString`
//! hand out.

use std::cell::RefCell;
use std::ffi::CStr;
use std::num::NonZeroU32;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// `CUresult`: 0 is `CUDA_SUCCESS`, anything else an error.
pub type CUresult = u32;

/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: CUresult = 0;

/// A `CUresult` other than `CUDA_SUCCESS`.
///
/// Non-zero by construction, so `Result<(), CuError>` has the size of a
/// `CUresult` and `?` works inside entry points.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct CuError(NonZeroU32);

/// Result of an entry point's implementation.
pub type CuResult<T> = Result<T, CuError>;

macro_rules! error_codes {
    ($( $name:ident = $value:literal, $text:literal; )*) => {
        impl CuError {
            $(
                #[doc = concat!("`", stringify!($name), "` (", stringify!($value), "): ", $text, ".")]
                pub const $name: CuError = match NonZeroU32::new($value) {
                    Some(v) => CuError(v),
                    None => panic!("CUresult error codes are non-zero"),
                };
            )*
        }

        /// `(code, name, description)` for every code this library knows, as
        /// NUL-terminated static strings.
        static ERROR_TABLE: &[(CUresult, &CStr, &CStr)] = &[
            (CUDA_SUCCESS, c"CUDA_SUCCESS", c"no error"),
            $( (
                $value,
                match CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                    Ok(s) => s,
                    Err(_) => panic!("error names contain no NUL"),
                },
                match CStr::from_bytes_with_nul(concat!($text, "\0").as_bytes()) {
                    Ok(s) => s,
                    Err(_) => panic!("error descriptions contain no NUL"),
                },
            ), )*
        ];
    };
}

error_codes! {
    CUDA_ERROR_INVALID_VALUE = 1, "invalid argument";
    CUDA_ERROR_OUT_OF_MEMORY = 2, "out of memory";
    CUDA_ERROR_NOT_INITIALIZED = 3, "initialization error";
    CUDA_ERROR_DEINITIALIZED = 4, "driver shutting down";
    CUDA_ERROR_PROFILER_DISABLED = 5, "profiler disabled while using external profiling tool";
    CUDA_ERROR_PROFILER_NOT_INITIALIZED = 6, "profiler not initialized: call cudaProfilerInitialize()";
    CUDA_ERROR_PROFILER_ALREADY_STARTED = 7, "profiler already started";
    CUDA_ERROR_PROFILER_ALREADY_STOPPED = 8, "profiler already stopped";
    CUDA_ERROR_STUB_LIBRARY = 34, "CUDA driver is a stub library";
    CUDA_ERROR_DEVICE_UNAVAILABLE = 46, "CUDA-capable device(s) is/are busy or unavailable";
    CUDA_ERROR_NO_DEVICE = 100, "no CUDA-capable device is detected";
    CUDA_ERROR_INVALID_DEVICE = 101, "invalid device ordinal";
    CUDA_ERROR_DEVICE_NOT_LICENSED = 102, "device doesn't have valid Grid license";
    CUDA_ERROR_INVALID_IMAGE = 200, "device kernel image is invalid";
    CUDA_ERROR_INVALID_CONTEXT = 201, "invalid device context";
    CUDA_ERROR_CONTEXT_ALREADY_CURRENT = 202, "context already current";
    CUDA_ERROR_MAP_FAILED = 205, "mapping of buffer object failed";
    CUDA_ERROR_UNMAP_FAILED = 206, "unmapping of buffer object failed";
    CUDA_ERROR_ARRAY_IS_MAPPED = 207, "array is mapped";
    CUDA_ERROR_ALREADY_MAPPED = 208, "resource already mapped";
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209, "no kernel image is available for execution on the device";
    CUDA_ERROR_ALREADY_ACQUIRED = 210, "resource already acquired";
    CUDA_ERROR_NOT_MAPPED = 211, "resource not mapped";
    CUDA_ERROR_NOT_MAPPED_AS_ARRAY = 212, "resource not mapped as array";
    CUDA_ERROR_NOT_MAPPED_AS_POINTER = 213, "resource not mapped as pointer";
    CUDA_ERROR_ECC_UNCORRECTABLE = 214, "uncorrectable ECC error encountered";
    CUDA_ERROR_UNSUPPORTED_LIMIT = 215, "limit is not supported on this architecture";
    CUDA_ERROR_CONTEXT_ALREADY_IN_USE = 216, "exclusive-thread device already in use by a different thread";
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217, "peer access is not supported between these two devices";
    CUDA_ERROR_INVALID_PTX = 218, "a PTX JIT compilation failed";
    CUDA_ERROR_INVALID_GRAPHICS_CONTEXT = 219, "invalid OpenGL or DirectX context";
    CUDA_ERROR_NVLINK_UNCORRECTABLE = 220, "uncorrectable NVLink error detected during the execution";
    CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221, "PTX JIT compiler library not found";
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222, "the provided PTX was compiled with an unsupported toolchain";
    CUDA_ERROR_JIT_COMPILATION_DISABLED = 223, "PTX JIT compilation was disabled";
    CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY = 224, "the provided execution affinity is not supported";
    CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC = 225, "the provided PTX contains unsupported call to cudaDeviceSynchronize";
    CUDA_ERROR_INVALID_SOURCE = 300, "device kernel image is invalid";
    CUDA_ERROR_FILE_NOT_FOUND = 301, "file not found";
    CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND = 302, "shared object symbol not found";
    CUDA_ERROR_SHARED_OBJECT_INIT_FAILED = 303, "shared object initialization failed";
    CUDA_ERROR_OPERATING_SYSTEM = 304, "OS call failed or operation not supported on this OS";
    CUDA_ERROR_INVALID_HANDLE = 400, "invalid resource handle";
    CUDA_ERROR_ILLEGAL_STATE = 401, "the operation cannot be performed in the present state";
    CUDA_ERROR_LOSSY_QUERY = 402, "attempted introspection would be semantically lossy";
    CUDA_ERROR_NOT_FOUND = 500, "named symbol not found";
    CUDA_ERROR_NOT_READY = 600, "device not ready";
    CUDA_ERROR_ILLEGAL_ADDRESS = 700, "an illegal memory access was encountered";
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701, "too many resources requested for launch";
    CUDA_ERROR_LAUNCH_TIMEOUT = 702, "the launch timed out and was terminated";
    CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING = 703, "launch uses incompatible texturing mode";
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704, "peer access is already enabled";
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705, "peer access has not been enabled";
    CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE = 708, "cannot set while device is active in this process";
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709, "context is destroyed";
    CUDA_ERROR_ASSERT = 710, "device-side assert triggered";
    CUDA_ERROR_TOO_MANY_PEERS = 711, "peer mapping resources exhausted";
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712, "part or all of the requested memory range is already mapped";
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713, "pointer does not correspond to a registered memory region";
    CUDA_ERROR_HARDWARE_STACK_ERROR = 714, "hardware stack error";
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715, "an illegal instruction was encountered";
    CUDA_ERROR_MISALIGNED_ADDRESS = 716, "misaligned address";
    CUDA_ERROR_INVALID_ADDRESS_SPACE = 717, "operation not supported on global/shared address space";
    CUDA_ERROR_INVALID_PC = 718, "invalid program counter";
    CUDA_ERROR_LAUNCH_FAILED = 719, "unspecified launch failure";
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720, "too many blocks in cooperative launch";
    CUDA_ERROR_NOT_PERMITTED = 800, "operation not permitted";
    CUDA_ERROR_NOT_SUPPORTED = 801, "operation not supported";
    CUDA_ERROR_SYSTEM_NOT_READY = 802, "system not yet initialized";
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803, "system has unsupported display driver / cuda driver combination";
    CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804, "forward compatibility was attempted on non supported HW";
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900, "operation not permitted when stream is capturing";
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901, "operation failed due to a previous error during capture";
    CUDA_ERROR_STREAM_CAPTURE_MERGE = 902, "operation would result in a merge of separate capture sequences";
    CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903, "capture was not ended in the same stream as it began";
    CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904, "capturing stream has unjoined work";
    CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905, "dependency created on uncaptured work in another stream";
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906, "operation would make the legacy stream depend on a capturing blocking stream";
    CUDA_ERROR_CAPTURED_EVENT = 907, "operation not permitted on an event last recorded in a capturing stream";
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908, "attempt to terminate a thread-local capture sequence from another thread";
    CUDA_ERROR_TIMEOUT = 909, "wait operation timed out";
    CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910, "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update";
    CUDA_ERROR_INVALID_CLUSTER_SIZE = 912, "invalid cluster size";
    CUDA_ERROR_INVALID_RESOURCE_TYPE = 914, "invalid resource type";
    CUDA_ERROR_UNKNOWN = 999, "unknown error";
}

impl CuError {
    /// The `CUresult` value.
    /// The error of a non-zero `CUresult` (`None` for `CUDA_SUCCESS`).
    pub fn from_code(code: CUresult) -> Option<CuError> {
        NonZeroU32::new(code).map(CuError)
    }

    pub const fn code(self) -> CUresult {
        self.0.get()
    }

    /// This error, after recording `detail` as the reason (see [`take_detail`]).
    pub fn because(self, detail: impl Into<String>) -> CuError {
        // At process exit (cudart's exit handlers call the driver) this
        // thread's storage may already be gone: the detail is then dropped.
        let _ = DETAIL.try_with(|d| *d.borrow_mut() = Some(detail.into()));
        self
    }
}

impl std::fmt::Debug for CuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match error_name(self.code()) {
            Some(name) => write!(f, "{}", name.to_string_lossy()),
            None => write!(f, "CUresult({})", self.code()),
        }
    }
}

/// `cuGetErrorName`'s answer for `code`, if it is a code this library knows.
pub fn error_name(code: CUresult) -> Option<&'static CStr> {
    ERROR_TABLE.iter().find(|e| e.0 == code).map(|e| e.1)
}

/// `cuGetErrorString`'s answer for `code`, if it is a code this library knows.
pub fn error_string(code: CUresult) -> Option<&'static CStr> {
    ERROR_TABLE.iter().find(|e| e.0 == code).map(|e| e.2)
}

thread_local! {
    /// Why the last failing call on this thread failed, in words.
    static DETAIL: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Takes the reason recorded with [`CuError::because`] on this thread.
pub fn take_detail() -> Option<String> {
    DETAIL.try_with(|d| d.borrow_mut().take()).ok().flatten()
}

impl From<ptxvk_runtime::Error> for CuError {
    /// Maps a runtime error onto the `CUresult` the driver API documents for
    /// the same condition, keeping the runtime's message as the detail.
    fn from(err: ptxvk_runtime::Error) -> CuError {
        use ptxvk_runtime::Error as E;
        let code = match &err {
            E::InvalidValue(_) => CuError::CUDA_ERROR_INVALID_VALUE,
            E::OutOfMemory => CuError::CUDA_ERROR_OUT_OF_MEMORY,
            E::InvalidPtx(_) => CuError::CUDA_ERROR_INVALID_PTX,
            E::NotFound(_) => CuError::CUDA_ERROR_NOT_FOUND,
            E::LaunchOutOfResources(_) => CuError::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
            E::CooperativeLaunchTooLarge(_) => CuError::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
            E::Unsupported(_) => CuError::CUDA_ERROR_NOT_SUPPORTED,
            E::NoDevice => CuError::CUDA_ERROR_NO_DEVICE,
            E::LaunchFailed(_) => CuError::CUDA_ERROR_LAUNCH_FAILED,
            E::Assert(_) => CuError::CUDA_ERROR_ASSERT,
            E::IllegalAddress(_) => CuError::CUDA_ERROR_ILLEGAL_ADDRESS,
            E::MisalignedAddress(_) => CuError::CUDA_ERROR_MISALIGNED_ADDRESS,
            E::Vulkan(_) => CuError::CUDA_ERROR_UNKNOWN,
        };
        code.because(err.to_string())
    }
}

/// The `PTXVK_TRACE` level: 0 reports nothing, 1 every failing call, 2 (or
/// more) every call.
pub fn trace_level() -> u8 {
    static TRACE: OnceLock<u8> = OnceLock::new();
    *TRACE.get_or_init(|| match std::env::var("PTXVK_TRACE") {
        Ok(v) if v.is_empty() || v == "0" => 0,
        Ok(v) => v.trim().parse::<u8>().unwrap_or(1).max(1),
        Err(_) => 0,
    })
}

/// Runs an entry point's body and returns its `CUresult`.
///
/// A panic is caught here (it would be undefined behaviour to unwind into C)
/// and reported as `CUDA_ERROR_UNKNOWN`. With `PTXVK_TRACE=1` in the
/// environment every failing call is reported on stderr with its reason;
/// with `PTXVK_TRACE=2` every successful call is named too. Every failure
/// also goes to the error log ([`crate::logs`]: `cuLogs*`, `CUDA_LOG_FILE`).
pub fn guard(name: &str, body: impl FnOnce() -> CuResult<()>) -> CUresult {
    // Stale detail from an earlier call must not be reported for this one.
    let _ = take_detail();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            if trace_level() >= 2 {
                report(format_args!("ptxvk: {name}: CUDA_SUCCESS"));
            }
            CUDA_SUCCESS
        }
        Ok(Err(err)) => {
            if crate::context::is_sticky(err.code()) {
                crate::context::make_sticky(err);
            }
            let why = take_detail();
            if trace_level() >= 1 {
                match &why {
                    Some(why) => report(format_args!("ptxvk: {name}: {err:?}: {why}")),
                    None => report(format_args!("ptxvk: {name}: {err:?}")),
                }
            }
            // "Not ready" answers a query (cuStreamQuery, cuEventQuery,
            // polled in loops); it reports no misuse, so it is not logged.
            if err != CuError::CUDA_ERROR_NOT_READY {
                crate::logs::record(name, err, why.as_deref());
            }
            err.code()
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            report(format_args!("ptxvk: internal error in {name}: {what} (reported as CUDA_ERROR_UNKNOWN)"));
            crate::logs::record(name, CuError::CUDA_ERROR_UNKNOWN, Some(&format!("internal error: {what}")));
            CuError::CUDA_ERROR_UNKNOWN.code()
        }
    }
}

/// Writes one line to stderr, ignoring failures: `eprintln!` panics when
/// the write fails (a closed pipe), and this runs outside `catch_unwind`.
fn report(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}
