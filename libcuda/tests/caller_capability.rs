//! The compute capability depends on who asks: NVIDIA's libraries (and the
//! shared CUDA runtime) are told `PTXVK_LIBRARY_CC` (13.0 by default), so
//! that they load their PTX rather than their cubins; programs are told
//! `PTXVK_CC` (8.0). The same C function, built as `libcurand.so.10` and as
//! `libclient.so`, calls the driver from each. Its own process: the
//! defaults hold only where neither variable is set.

mod common;

use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::check;

type AttributeCall = unsafe extern "C" fn(*const c_void, *mut c_int, c_int, c_int) -> c_int;
type CapabilityCall = unsafe extern "C" fn(*const c_void, *mut c_int, *mut c_int, c_int) -> c_int;

/// Builds `data/caller.c` as the shared object `dir/name`.
fn build_caller(dir: &Path, name: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/caller.c");
    let out = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O0", "-fno-optimize-sibling-calls", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(status.success(), "{cc} failed to build {}", out.display());
    out
}

/// The capability `cuDeviceGetAttribute` and `cuDeviceComputeCapability`
/// report when called from the shared object at `path`.
fn capability_seen_from(api: &common::Api, path: &Path) -> ((c_int, c_int), (c_int, c_int)) {
    // SAFETY: the object only defines two functions; loading it runs nothing.
    let lib = unsafe { libloading::Library::new(path) }.expect("load the caller object");
    // SAFETY: the symbols are the functions of caller.c with these signatures.
    let (attribute, capability) = unsafe {
        (
            *lib.get::<AttributeCall>(b"ptxvk_test_attribute\0").expect("ptxvk_test_attribute"),
            *lib.get::<CapabilityCall>(b"ptxvk_test_capability\0").expect("ptxvk_test_capability"),
        )
    };
    let (mut major, mut minor) = (-1, -1);
    // SAFETY: the function pointers are the driver's, with the signatures caller.c casts them to.
    unsafe {
        assert_eq!(attribute(api.cuDeviceGetAttribute as *const c_void, &mut major, 75, 0), 0);
        assert_eq!(attribute(api.cuDeviceGetAttribute as *const c_void, &mut minor, 76, 0), 0);
    }
    let (mut a, mut b) = (-1, -1);
    // SAFETY: as above.
    unsafe {
        assert_eq!(capability(api.cuDeviceComputeCapability as *const c_void, &mut a, &mut b, 0), 0);
    }
    ((major, minor), (a, b))
}

#[test]
fn nvidia_libraries_are_told_a_newer_capability_than_programs() {
    assert!(std::env::var_os("PTXVK_CC").is_none() && std::env::var_os("PTXVK_LIBRARY_CC").is_none());
    let api = common::init();
    let (mut major, mut minor) = (-1, -1);
    check(api, cu!(api.cuDeviceGetAttribute(&mut major, 75, 0)), "COMPUTE_CAPABILITY_MAJOR");
    check(api, cu!(api.cuDeviceGetAttribute(&mut minor, 76, 0)), "COMPUTE_CAPABILITY_MINOR");
    assert_eq!((major, minor), (8, 0), "the test program itself");

    let dir = std::env::temp_dir().join(format!("ptxvk-caller-capability-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    let library = build_caller(&dir, "libcurand.so.10");
    let client = build_caller(&dir, "libclient.so");
    let from_library = capability_seen_from(api, &library);
    let from_client = capability_seen_from(api, &client);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(from_library, ((13, 0), (13, 0)), "called from a library named like cuRAND");
    assert_eq!(from_client, ((8, 0), (8, 0)), "called from another shared object");
}
