//! Who called the driver: the shared object of the first stack frame
//! outside this library.
//!
//! The compute capability the driver reports depends on it (see
//! [`crate::driver::reported_compute_capability`]): NVIDIA's math libraries
//! (cuRAND, cuSOLVER, ...) and the shared CUDA runtime they load choose
//! between their cubins and their PTX by the capability they are told, and
//! must be told one newer than every cubin they ship to choose the PTX,
//! which is all this driver runs; programs that generate code (numba,
//! Triton, Warp, NVRTC users) must be told one whose features the device
//! has. A program and its libraries share one process, so the caller's
//! object is what tells them apart.
//!
//! The stack is walked with glibc's `backtrace` (the unwinder reads the
//! objects' `.eh_frame`, which NVIDIA's C++ libraries, Rust and C compilers
//! emit); each return address is named with `dladdr`. Only the
//! compute-capability queries do this, and clients ask them a few times.

/// The kinds of objects that call the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// One of NVIDIA's libraries that choose their own device code by the
    /// reported capability, or the shared CUDA runtime (`libcudart.so`),
    /// which caches the capability at its start for all its users.
    NvidiaLibrary,
    /// Anything else: a program, a framework, a Python extension, a
    /// statically linked CUDA runtime inside a program.
    Application,
}

/// File-name stems of NVIDIA's libraries that count as [`Caller::NvidiaLibrary`]:
/// the shared CUDA runtime and the CUDA toolkit's math and media libraries,
/// which ship per-architecture cubins next to their PTX and load the one
/// they pick themselves. cuDNN and NCCL are not in the list: their
/// behaviour at a capability newer than the hardware they know was not
/// measured.
const NVIDIA_LIBRARIES: &[&str] = &[
    "libcudart",
    "libcublas",
    "libcublasLt",
    "libnvblas",
    "libcurand",
    "libcufft",
    "libcufftw",
    "libcusparse",
    "libcusolver",
    "libcusolverMg",
    "libnvjpeg",
];

/// NPP's libraries are many (`libnppc`, `libnppial`, ...): matched by prefix.
const NVIDIA_LIBRARY_PREFIXES: &[&str] = &["libnpp"];

/// Classifies a shared object by its path: NVIDIA's libraries are
/// `<stem>.so` or `<stem>.so.<version>` (`libcurand.so.10`), or the same
/// with the 8-hex-digit hash auditwheel adds to the libraries it bundles
/// into a Python wheel (`libcudart-d0da41ae.so.11.0`).
pub fn classify_object(path: &str) -> Caller {
    let file = path.rsplit('/').next().unwrap_or(path);
    let Some((stem, rest)) = file.split_once(".so") else {
        return Caller::Application;
    };
    if !(rest.is_empty() || rest.starts_with('.')) {
        return Caller::Application;
    }
    let stem = match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 8 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => name,
        _ => stem,
    };
    if NVIDIA_LIBRARIES.contains(&stem) || NVIDIA_LIBRARY_PREFIXES.iter().any(|p| stem.starts_with(p)) {
        Caller::NvidiaLibrary
    } else {
        Caller::Application
    }
}

/// The kind of object that called into this library: the first frame of
/// the stack outside it. [`Caller::Application`] when that cannot be told.
pub fn caller() -> Caller {
    caller_object().map_or(Caller::Application, |path| classify_object(&path))
}

/// The path of the shared object (or program) of the first stack frame
/// outside this library, as the dynamic loader names it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn caller_object() -> Option<String> {
    use std::ffi::{c_int, c_void, CStr};

    extern "C" {
        /// glibc's `backtrace(3)`: return addresses of the calling frames.
        fn backtrace(buffer: *mut *mut c_void, size: c_int) -> c_int;
    }
    const DEPTH: usize = 64;

    /// What the dynamic loader knows of the object holding `addr`.
    fn object_of(addr: *const c_void) -> Option<libc::Dl_info> {
        let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
        // SAFETY: `dladdr` only reads the loader's tables and writes `info`.
        if unsafe { libc::dladdr(addr, info.as_mut_ptr()) } == 0 {
            return None;
        }
        // SAFETY: `dladdr` succeeded, so it filled `info`.
        Some(unsafe { info.assume_init() })
    }

    let own_base = object_of(caller_object as *const c_void)?.dli_fbase;
    let mut frames = [std::ptr::null_mut::<c_void>(); DEPTH];
    // SAFETY: `frames` holds `DEPTH` writable pointers.
    let n = unsafe { backtrace(frames.as_mut_ptr(), DEPTH as c_int) };
    let n = usize::try_from(n).unwrap_or(0).min(DEPTH);
    for &ret in &frames[..n] {
        // A return address is the instruction after the call; the byte
        // before it is still in the calling function (a call at the very end
        // of an object would otherwise be named after the next one).
        let at = (ret as usize).wrapping_sub(1) as *const c_void;
        let info = object_of(at)?;
        if info.dli_fbase == own_base {
            continue;
        }
        if info.dli_fname.is_null() {
            return None;
        }
        // SAFETY: a non-null `dli_fname` is the loader's NUL-terminated path
        // of an object that has a live frame on this thread (not unloaded).
        return Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned());
    }
    None
}

/// Other systems and C libraries (no glibc `backtrace`): the caller is not
/// looked up.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn caller_object() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_libraries_by_file_name() {
        for lib in [
            "/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcurand.so.10",
            "/usr/local/cuda/lib64/libcudart.so.13.0.48",
            "libcusolver.so.12",
            "/opt/x/libcublasLt.so.13",
            "/opt/x/libnppial.so.13",
            "libcufft.so",
            "/venv/site-packages/x.libs/libcudart-d0da41ae.so.11.0",
        ] {
            assert_eq!(classify_object(lib), Caller::NvidiaLibrary, "{lib}");
        }
        for app in [
            "/usr/bin/python3.11",
            "/venv/lib/python3.11/site-packages/warp/bin/warp.so",
            "/venv/lib/python3.11/site-packages/numba_cuda/x.cpython-311-x86_64-linux-gnu.so",
            "/tmp/libcurandom.so",
            "/tmp/libcudart_static_user",
            "/tmp/libcudart.sox",
            "/opt/libcudnn.so.9",
            "/x/libcudart-d0da41.so.11",
            "/x/libcudart-zzzzzzzz.so.11",
            "",
        ] {
            assert_eq!(classify_object(app), Caller::Application, "{app}");
        }
    }
}
