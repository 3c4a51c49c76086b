//! Calls made before `cuInit` (this file is its own process, so the driver
//! really is uninitialised when it starts).

mod common;

use std::ffi::c_char;

use common::{api, code, Handle};

#[test]
fn calls_before_cuinit() {
    let api = api();
    let mut n = -1;
    assert_eq!(cu!(api.cuDeviceGetCount(&mut n)), code::NOT_INITIALIZED);
    let mut dev = -1;
    assert_eq!(cu!(api.cuDeviceGet(&mut dev, 0)), code::NOT_INITIALIZED);
    let mut ctx: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuCtxCreate_v2(&mut ctx, 0, 0)), code::NOT_INITIALIZED);
    assert_eq!(cu!(api.cuCtxGetCurrent(&mut ctx)), code::NOT_INITIALIZED);
    let mut dptr = 0u64;
    assert_eq!(cu!(api.cuMemAlloc_v2(&mut dptr, 16)), code::NOT_INITIALIZED);
    assert_eq!(cu!(api.cuCtxSynchronize()), code::NOT_INITIALIZED);
    let mut v = 0usize;
    assert_eq!(cu!(api.cuCtxGetLimit(&mut v, 0)), code::NOT_INITIALIZED);
    let mut h: Handle = std::ptr::null_mut();
    let null_opts: *const std::ffi::c_int = std::ptr::null();
    let null_vals: *mut *mut std::ffi::c_void = std::ptr::null_mut();
    assert_eq!(cu!(api.cuLinkCreate_v2(0, null_opts, null_vals, &mut h)), code::NOT_INITIALIZED);
    let ptx = c".version 8.0\n.target sm_80\n.address_size 64\n";
    let rc = cu!(api.cuLibraryLoadData(&mut h, ptx.as_ptr().cast(), null_opts, null_vals, 0, null_opts, null_vals, 0));
    assert_eq!(rc, code::NOT_INITIALIZED);
    assert_eq!(cu!(api.cuEventCreate(&mut h, 0)), code::NOT_INITIALIZED);
    let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
    assert_eq!(cu!(api.cuMemAllocHost_v2(&mut p, 16)), code::NOT_INITIALIZED);
    let mut t = 0u32;
    assert_eq!(cu!(api.cuPointerGetAttribute((&mut t as *mut u32).cast(), 2, 4096)), code::NOT_INITIALIZED);
    assert_eq!(cu!(api.cuKernelGetFunction(&mut h, 0x1000 as Handle)), code::NOT_INITIALIZED);
    // cuGetProcAddress works before cuInit (cudart resolves cuInit through it).
    let mut f: *mut std::ffi::c_void = std::ptr::null_mut();
    assert_eq!(cu!(api.cuGetProcAddress(c"cuInit".as_ptr(), &mut f, 12000, 0)), code::SUCCESS);
    assert!(!f.is_null());

    // These work without cuInit.
    let mut version = 0;
    assert_eq!(cu!(api.cuDriverGetVersion(&mut version)), code::SUCCESS);
    assert!(version >= 12000, "driver version {version}");
    let mut s: *const c_char = std::ptr::null();
    assert_eq!(cu!(api.cuGetErrorName(code::NOT_INITIALIZED, &mut s)), code::SUCCESS);

    // cuInit's flags must be 0; a good call then makes the driver usable.
    assert_eq!(cu!(api.cuInit(1)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuDeviceGetCount(&mut n)), code::NOT_INITIALIZED);
    assert_eq!(cu!(api.cuInit(0)), code::SUCCESS);
    assert_eq!(cu!(api.cuDeviceGetCount(&mut n)), code::SUCCESS);
    assert!(n >= 1);
}
