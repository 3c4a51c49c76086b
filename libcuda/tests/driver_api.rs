//! Driver API behaviour that needs no kernel: error codes, devices,
//! contexts, handles, memory, JIT error logs.

mod common;

use std::ffi::{c_char, c_int, c_void, CStr};

use common::{api, check, code, init, Ctx, Handle};

const CU_JIT_ERROR_LOG_BUFFER: c_int = 5;
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

fn bogus() -> Handle {
    0xdead_beef_usize as Handle
}

#[test]
fn error_names_and_strings() {
    let api = api();
    let name = |rc| {
        let mut s: *const c_char = std::ptr::null();
        let r = cu!(api.cuGetErrorName(rc, &mut s));
        // SAFETY: on success the library returns a static NUL-terminated string.
        (r, (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_str().unwrap().to_string()))
    };
    assert_eq!(name(0), (0, Some("CUDA_SUCCESS".into())));
    assert_eq!(name(1), (0, Some("CUDA_ERROR_INVALID_VALUE".into())));
    assert_eq!(name(201), (0, Some("CUDA_ERROR_INVALID_CONTEXT".into())));
    assert_eq!(name(218), (0, Some("CUDA_ERROR_INVALID_PTX".into())));
    assert_eq!(name(400), (0, Some("CUDA_ERROR_INVALID_HANDLE".into())));
    assert_eq!(name(719), (0, Some("CUDA_ERROR_LAUNCH_FAILED".into())));
    assert_eq!(name(801), (0, Some("CUDA_ERROR_NOT_SUPPORTED".into())));
    assert_eq!(name(999), (0, Some("CUDA_ERROR_UNKNOWN".into())));
    // Not a CUresult: INVALID_VALUE and *pStr = NULL.
    assert_eq!(name(12345), (code::INVALID_VALUE, None));
    assert_eq!(cu!(api.cuGetErrorName(0, std::ptr::null_mut())), code::INVALID_VALUE);

    let mut s: *const c_char = std::ptr::null();
    assert_eq!(cu!(api.cuGetErrorString(0, &mut s)), 0);
    // SAFETY: static NUL-terminated string from the library.
    assert_eq!(unsafe { CStr::from_ptr(s) }.to_str().unwrap(), "no error");
    assert_eq!(cu!(api.cuGetErrorString(2, &mut s)), 0);
    // SAFETY: as above.
    assert_eq!(unsafe { CStr::from_ptr(s) }.to_str().unwrap(), "out of memory");
    assert_eq!(cu!(api.cuGetErrorString(4242, &mut s)), code::INVALID_VALUE);
    assert!(s.is_null());
}

#[test]
fn null_outputs_are_invalid_value() {
    let api = init();
    let null_i = std::ptr::null_mut::<c_int>();
    assert_eq!(cu!(api.cuDriverGetVersion(null_i)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuDeviceGetCount(null_i)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuDeviceGet(null_i, 0)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuDeviceGetAttribute(null_i, 10, 0)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuDeviceGetName(std::ptr::null_mut(), 64, 0)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuDeviceTotalMem_v2(std::ptr::null_mut(), 0)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuDeviceGetUuid(std::ptr::null_mut(), 0)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuCtxCreate_v2(std::ptr::null_mut(), 0, 0)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuCtxGetCurrent(std::ptr::null_mut())), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuDevicePrimaryCtxRetain(std::ptr::null_mut(), 0)), code::INVALID_VALUE);
    let _ctx = Ctx::new(api);
    assert_eq!(cu!(api.cuMemAlloc_v2(std::ptr::null_mut(), 16)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuMemGetInfo_v2(std::ptr::null_mut(), std::ptr::null_mut())), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuCtxGetDevice(null_i)), code::INVALID_VALUE);
    let mut m: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuModuleLoadData(&mut m, std::ptr::null())), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuModuleLoadData(std::ptr::null_mut(), c"x".as_ptr().cast())), code::INVALID_VALUE);
}

#[test]
fn devices_and_attributes() {
    let api = init();
    let mut n = 0;
    check(api, cu!(api.cuDeviceGetCount(&mut n)), "cuDeviceGetCount");
    assert!(n >= 1);
    let mut dev = -1;
    check(api, cu!(api.cuDeviceGet(&mut dev, 0)), "cuDeviceGet");
    assert_eq!(dev, 0);
    assert_eq!(cu!(api.cuDeviceGet(&mut dev, n)), code::INVALID_DEVICE);
    assert_eq!(cu!(api.cuDeviceGet(&mut dev, -1)), code::INVALID_DEVICE);

    let mut name = [0x55 as c_char; 256];
    check(api, cu!(api.cuDeviceGetName(name.as_mut_ptr(), 256, 0)), "cuDeviceGetName");
    // SAFETY: the library NUL-terminates within the 256 bytes.
    let full = unsafe { CStr::from_ptr(name.as_ptr()) }.to_str().unwrap().to_string();
    assert!(!full.is_empty());
    let mut short = [0x55 as c_char; 4];
    check(api, cu!(api.cuDeviceGetName(short.as_mut_ptr(), 4, 0)), "cuDeviceGetName short");
    // SAFETY: NUL-terminated within 4 bytes.
    let cut = unsafe { CStr::from_ptr(short.as_ptr()) }.to_str().unwrap();
    assert_eq!(cut, &full[..full.len().min(3)]);
    assert_eq!(cu!(api.cuDeviceGetName(short.as_mut_ptr(), 0, 0)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuDeviceGetName(short.as_mut_ptr(), 4, 7)), code::INVALID_DEVICE);

    let attr = |a: c_int| {
        let mut v = -12345;
        let rc = cu!(api.cuDeviceGetAttribute(&mut v, a, 0));
        (rc, v)
    };
    assert_eq!(attr(10), (0, 32), "WARP_SIZE");
    // PTXVK_CC changes the answer; its parsing is tested in compute_capability.rs.
    let expected_cc = if std::env::var_os("PTXVK_CC").is_some() { (attr(75).1, attr(76).1) } else { (8, 0) };
    assert_eq!((attr(75).1, attr(76).1), expected_cc, "compute capability");
    let (mut ma, mut mi) = (0, 0);
    check(api, cu!(api.cuDeviceComputeCapability(&mut ma, &mut mi, 0)), "cuDeviceComputeCapability");
    assert_eq!((ma, mi), expected_cc);
    let (rc, threads) = attr(1);
    assert_eq!(rc, 0);
    assert!(threads >= 256 && threads % 32 == 0, "MAX_THREADS_PER_BLOCK {threads}");
    assert!(attr(2).1 >= 256 && attr(3).1 >= 1 && attr(4).1 >= 1, "MAX_BLOCK_DIM");
    assert!(attr(5).1 >= 65535, "MAX_GRID_DIM_X");
    let smem = attr(8).1;
    assert!((16 * 1024..=48 * 1024).contains(&smem), "MAX_SHARED_MEMORY_PER_BLOCK {smem}");
    assert!(attr(97).1 >= smem, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
    assert!(attr(16).1 >= 1, "MULTIPROCESSOR_COUNT");
    assert_eq!(attr(41), (0, 1), "UNIFIED_ADDRESSING");
    let managed = attr(83);
    assert!(managed == (0, 0) || managed == (0, 1), "MANAGED_MEMORY {managed:?}");
    // Unknown attributes.
    assert_eq!(attr(0).0, code::INVALID_VALUE);
    assert_eq!(attr(100_000).0, code::INVALID_VALUE);
    assert_eq!(attr(-3).0, code::INVALID_VALUE);

    let mut total = 0usize;
    check(api, cu!(api.cuDeviceTotalMem_v2(&mut total, 0)), "cuDeviceTotalMem");
    assert!(total > 0);
    let mut uuid = [0u8; 16];
    check(api, cu!(api.cuDeviceGetUuid(&mut uuid, 0)), "cuDeviceGetUuid");
    assert_eq!(cu!(api.cuDeviceGetUuid(&mut uuid, 99)), code::INVALID_DEVICE);
}

#[test]
fn context_stack() {
    let api = init();
    // A fresh thread has no current context.
    let mut cur: Handle = bogus();
    check(api, cu!(api.cuCtxGetCurrent(&mut cur)), "cuCtxGetCurrent");
    assert!(cur.is_null());
    let mut dptr = 0u64;
    assert_eq!(cu!(api.cuMemAlloc_v2(&mut dptr, 64)), code::INVALID_CONTEXT);
    assert_eq!(cu!(api.cuCtxSynchronize()), code::INVALID_CONTEXT);
    let mut dev = -1;
    assert_eq!(cu!(api.cuCtxGetDevice(&mut dev)), code::INVALID_CONTEXT);
    assert_eq!(cu!(api.cuCtxPopCurrent_v2(&mut cur)), code::INVALID_CONTEXT);

    let mut a: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuCtxCreate_v2(&mut a, 0, 0)), "cuCtxCreate a");
    check(api, cu!(api.cuCtxGetCurrent(&mut cur)), "cuCtxGetCurrent");
    assert_eq!(cur, a);
    check(api, cu!(api.cuCtxGetDevice(&mut dev)), "cuCtxGetDevice");
    assert_eq!(dev, 0);
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");

    let mut b: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuCtxCreate_v2(&mut b, 0, 0)), "cuCtxCreate b");
    assert_ne!(a, b);
    check(api, cu!(api.cuCtxGetCurrent(&mut cur)), "cuCtxGetCurrent");
    assert_eq!(cur, b);
    let mut popped: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuCtxPopCurrent_v2(&mut popped)), "pop");
    assert_eq!(popped, b);
    check(api, cu!(api.cuCtxGetCurrent(&mut cur)), "cuCtxGetCurrent");
    assert_eq!(cur, a);
    check(api, cu!(api.cuCtxPushCurrent_v2(b)), "push");
    check(api, cu!(api.cuCtxSetCurrent(a)), "set");
    check(api, cu!(api.cuCtxGetCurrent(&mut cur)), "cuCtxGetCurrent");
    assert_eq!(cur, a);
    // Popping with a NULL output is allowed.
    check(api, cu!(api.cuCtxPopCurrent_v2(std::ptr::null_mut())), "pop to NULL");

    // Bad context handles.
    assert_eq!(cu!(api.cuCtxPushCurrent_v2(bogus())), code::INVALID_CONTEXT);
    assert_eq!(cu!(api.cuCtxSetCurrent(bogus())), code::INVALID_CONTEXT);
    assert_eq!(cu!(api.cuCtxDestroy_v2(bogus())), code::INVALID_CONTEXT);
    assert_eq!(cu!(api.cuCtxDestroy_v2(std::ptr::null_mut())), code::INVALID_CONTEXT);

    check(api, cu!(api.cuCtxDestroy_v2(b)), "destroy b");
    assert_eq!(cu!(api.cuCtxDestroy_v2(b)), code::INVALID_CONTEXT, "double destroy");
    assert_eq!(cu!(api.cuCtxSetCurrent(b)), code::INVALID_CONTEXT);
    check(api, cu!(api.cuCtxDestroy_v2(a)), "destroy a");
    check(api, cu!(api.cuCtxGetCurrent(&mut cur)), "cuCtxGetCurrent");
    assert!(cur.is_null(), "destroying the current context pops it");
}

#[test]
fn primary_context() {
    let api = init();
    let (mut p1, mut p2): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
    check(api, cu!(api.cuDevicePrimaryCtxRetain(&mut p1, 0)), "retain");
    check(api, cu!(api.cuDevicePrimaryCtxRetain(&mut p2, 0)), "retain again");
    assert_eq!(p1, p2);
    assert_eq!(cu!(api.cuDevicePrimaryCtxRetain(&mut p2, 42)), code::INVALID_DEVICE);
    check(api, cu!(api.cuCtxSetCurrent(p1)), "set primary current");
    let mut dptr = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut dptr, 256)), "alloc in primary");
    check(api, cu!(api.cuMemFree_v2(dptr)), "free in primary");
    // A primary context is released, not destroyed.
    assert_eq!(cu!(api.cuCtxDestroy_v2(p1)), code::INVALID_CONTEXT);
    check(api, cu!(api.cuDevicePrimaryCtxRelease_v2(0)), "release");
    check(api, cu!(api.cuDevicePrimaryCtxRelease_v2(0)), "release again");
    assert_eq!(cu!(api.cuDevicePrimaryCtxRelease_v2(0)), code::INVALID_CONTEXT, "over-release");
    // The thread's current context is gone with it.
    assert_eq!(cu!(api.cuMemAlloc_v2(&mut dptr, 256)), code::CONTEXT_IS_DESTROYED);
    check(api, cu!(api.cuCtxSetCurrent(std::ptr::null_mut())), "clear current");
}

#[test]
fn bad_handles() {
    let api = init();
    let _ctx = Ctx::new(api);
    let mut f: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuModuleGetFunction(&mut f, bogus(), c"k".as_ptr().cast())), code::INVALID_HANDLE);
    assert_eq!(cu!(api.cuModuleGetFunction(&mut f, std::ptr::null_mut(), c"k".as_ptr().cast())), code::INVALID_HANDLE);
    assert_eq!(cu!(api.cuModuleUnload(bogus())), code::INVALID_HANDLE);
    let mut d = 0u64;
    let mut sz = 0usize;
    assert_eq!(cu!(api.cuModuleGetGlobal_v2(&mut d, &mut sz, bogus(), c"g".as_ptr().cast())), code::INVALID_HANDLE);
    let mut v = 0;
    assert_eq!(cu!(api.cuFuncGetAttribute(&mut v, 0, bogus())), code::INVALID_HANDLE);
    assert_eq!(cu!(api.cuFuncSetAttribute(bogus(), 8, 0)), code::INVALID_HANDLE);
    let r = cu!(api.cuLaunchKernel(
        bogus(),
        1,
        1,
        1,
        1,
        1,
        1,
        0,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut()
    ));
    assert_eq!(r, code::INVALID_HANDLE);
    assert_eq!(cu!(api.cuStreamSynchronize(bogus())), code::INVALID_HANDLE);
    assert_eq!(cu!(api.cuStreamDestroy_v2(bogus())), code::INVALID_HANDLE);
    // A context handle is not a module handle.
    let mut ctx: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuCtxGetCurrent(&mut ctx)), "cuCtxGetCurrent");
    assert_eq!(cu!(api.cuModuleUnload(ctx)), code::INVALID_HANDLE);

    let mut s: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut s, 0)), "cuStreamCreate");
    check(api, cu!(api.cuStreamSynchronize(s)), "cuStreamSynchronize");
    check(api, cu!(api.cuStreamSynchronize(std::ptr::null_mut())), "null stream");
    check(api, cu!(api.cuStreamDestroy_v2(s)), "cuStreamDestroy");
    assert_eq!(cu!(api.cuStreamSynchronize(s)), code::INVALID_HANDLE);
}

#[test]
fn memory_round_trips() {
    let api = init();
    let _ctx = Ctx::new(api);
    let mut dptr = 0u64;
    assert_eq!(cu!(api.cuMemAlloc_v2(&mut dptr, 0)), code::INVALID_VALUE);
    let n = 4096usize;
    check(api, cu!(api.cuMemAlloc_v2(&mut dptr, n)), "cuMemAlloc");
    assert_ne!(dptr, 0);
    let data: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
    check(api, cu!(api.cuMemcpyHtoD_v2(dptr, data.as_ptr().cast(), n)), "HtoD");
    let mut back = vec![0u8; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dptr, n)), "DtoH");
    assert_eq!(back, data);
    assert_eq!(cu!(api.cuMemcpyHtoD_v2(dptr, std::ptr::null(), 16)), code::INVALID_VALUE);
    check(api, cu!(api.cuMemcpyHtoD_v2(dptr, std::ptr::null(), 0)), "zero-byte copy");

    let mut other = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut other, n)), "cuMemAlloc 2");
    check(api, cu!(api.cuMemcpyDtoD_v2(other, dptr, n)), "DtoD");
    check(api, cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), other, n)), "DtoH 2");
    assert_eq!(back, data);

    check(api, cu!(api.cuMemsetD32_v2(dptr, 0xdeadbeef, n / 4)), "memset32");
    check(api, cu!(api.cuMemsetD16_v2(dptr + 8, 0x1234, 2)), "memset16");
    check(api, cu!(api.cuMemsetD8_v2(dptr + 1, 0x7f, 2)), "memset8");
    check(api, cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dptr, 16)), "DtoH 3");
    assert_eq!(
        &back[..16],
        &[0xef, 0x7f, 0x7f, 0xde, 0xef, 0xbe, 0xad, 0xde, 0x34, 0x12, 0x34, 0x12, 0xef, 0xbe, 0xad, 0xde]
    );
    assert_eq!(cu!(api.cuMemsetD32_v2(dptr + 2, 0, 1)), code::INVALID_VALUE, "misaligned memset32");

    let (mut free, mut total) = (0usize, 0usize);
    check(api, cu!(api.cuMemGetInfo_v2(&mut free, &mut total)), "cuMemGetInfo");
    assert!(free <= total && total > 0);

    assert_eq!(cu!(api.cuMemFree_v2(dptr + 4)), code::INVALID_VALUE, "interior pointer");
    check(api, cu!(api.cuMemFree_v2(dptr)), "free");
    assert_eq!(cu!(api.cuMemFree_v2(dptr)), code::INVALID_VALUE, "double free");
    check(api, cu!(api.cuMemFree_v2(other)), "free 2");
}

/// Loads `image` with an error log of `cap` bytes; returns (rc, log, size written back).
fn load_with_log(api: &common::Api, image: &[u8], cap: usize) -> (u32, String, usize) {
    let mut log = vec![0x55u8; cap.max(1)];
    let options = [CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), cap as *mut c_void];
    let mut module: Handle = std::ptr::null_mut();
    let rc = cu!(api.cuModuleLoadDataEx(&mut module, image.as_ptr().cast(), 2, options.as_ptr(), values.as_mut_ptr()));
    if rc == 0 {
        check(api, cu!(api.cuModuleUnload(module)), "cuModuleUnload");
    }
    let text = CStr::from_bytes_until_nul(&log).map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    (rc, text, values[1] as usize)
}

#[test]
fn bad_ptx_reports_diagnostics_in_the_error_log() {
    let api = init();
    let _ctx = Ctx::new(api);
    let ptx = b".version 9.5\n.target sm_80\n.address_size 64\n\n.visible .entry k()\n{\n\tfrobnicate.u32 %r1;\n\tret;\n}\n\0";
    let (rc, log, size) = load_with_log(api, ptx, 4096);
    assert_eq!(rc, code::INVALID_PTX, "log: {log}");
    assert!(log.contains("<ptx>:"), "log names the source: {log}");
    let has_line_col = log.split("<ptx>:").skip(1).any(|rest| {
        let mut parts = rest.splitn(3, ':');
        let line = parts.next().unwrap_or("");
        let col = parts.next().unwrap_or("");
        line.parse::<u32>().is_ok() && col.parse::<u32>().is_ok()
    });
    assert!(has_line_col, "log has file:line:col: {log}");
    assert_eq!(size, log.len(), "size option updated to the bytes written");

    // A small buffer is truncated and NUL-terminated.
    let (rc, short, size) = load_with_log(api, ptx, 8);
    assert_eq!(rc, code::INVALID_PTX);
    assert_eq!(short.len(), 7);
    assert_eq!(size, 7);
    assert!(log.starts_with(&short));

    // cuModuleLoadData gives the same code without a log.
    let mut module: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuModuleLoadData(&mut module, ptx.as_ptr().cast())), code::INVALID_PTX);
}

#[test]
fn binary_images_are_refused() {
    let api = init();
    let _ctx = Ctx::new(api);
    let elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0";
    let (rc, log, _) = load_with_log(api, elf, 1024);
    assert_eq!(rc, code::INVALID_IMAGE);
    assert!(log.contains("ELF") && log.contains("PTX"), "{log}");
    let fatbin = [0x50u8, 0xED, 0x55, 0xBA, 1, 0, 0x10, 0];
    let (rc, log, _) = load_with_log(api, &fatbin, 1024);
    assert_eq!(rc, code::INVALID_IMAGE);
    assert!(log.contains("fat binary"), "{log}");
    let (rc, _, _) = load_with_log(api, b"   \n\0", 1024);
    assert_eq!(rc, code::INVALID_IMAGE);
    // Options with NULL arrays.
    let mut module: Handle = std::ptr::null_mut();
    let rc = cu!(api.cuModuleLoadDataEx(
        &mut module,
        c".version 9.5".as_ptr().cast(),
        1,
        std::ptr::null(),
        std::ptr::null_mut()
    ));
    assert_eq!(rc, code::INVALID_VALUE);
}

#[test]
fn tensor_map_arguments_are_checked() {
    let api = init();
    let mut map = [0u64; 16];
    let rc = cu!(api.cuTensorMapEncodeTiled(
        map.as_mut_ptr().cast(),
        7,
        1,
        std::ptr::null_mut(),
        std::ptr::null(),
        std::ptr::null(),
        std::ptr::null(),
        std::ptr::null(),
        0,
        0,
        0,
        0
    ));
    assert_eq!(rc, code::INVALID_VALUE); // globalDim is NULL (see tests/tensor_map.rs)
}

#[test]
fn get_proc_address() {
    let api = init();
    let mut f: *mut c_void = std::ptr::null_mut();
    let mut status = -1;
    check(
        api,
        cu!(api.cuGetProcAddress_v2(c"cuMemAlloc".as_ptr().cast(), &mut f, 12000, 0, &mut status)),
        "cuGetProcAddress",
    );
    assert!(!f.is_null());
    assert_eq!(status, 0);
    assert_eq!(f as usize, api.cuMemAlloc_v2 as usize);
    let rc = cu!(api.cuGetProcAddress_v2(c"cuNoSuchFunction".as_ptr().cast(), &mut f, 12000, 0, &mut status));
    assert_eq!(rc, code::NOT_FOUND);
    assert!(f.is_null());
    assert_eq!(status, 1);
}

/// The green-context resource queries (cuSOLVER 12 asks a stream for its SM
/// resource): a device, a context and a stream all have the whole device's
/// multiprocessors (there are no green contexts), as a `CUdevResource` of
/// 144 bytes: type 1 (SM), padding, then smCount, minSmPartitionSize,
/// smCoscheduledAlignment, flags.
#[test]
fn device_context_and_stream_resources_are_the_whole_device() {
    let api = init();
    let ctx = Ctx::new(api);
    let mut sms: c_int = 0;
    check(api, cu!(api.cuDeviceGetAttribute(&mut sms, 16, 0)), "cuDeviceGetAttribute");
    let mut stream: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut stream, 0)), "cuStreamCreate");
    for way in 0..5 {
        // Poisoned, and 16 bytes beyond the struct that must stay as they are.
        let mut r = [0xa5u8; 160];
        let rc = match way {
            0 => cu!(api.cuDeviceGetDevResource(0, r.as_mut_ptr(), 1)),
            1 => cu!(api.cuCtxGetDevResource(ctx.handle, r.as_mut_ptr(), 1)),
            2 => cu!(api.cuCtxGetDevResource(std::ptr::null_mut(), r.as_mut_ptr(), 1)),
            3 => cu!(api.cuStreamGetDevResource(stream, r.as_mut_ptr(), 1)),
            _ => cu!(api.cuStreamGetDevResource(std::ptr::null_mut(), r.as_mut_ptr(), 1)),
        };
        check(api, rc, "get resource");
        let word = |o: usize| u32::from_le_bytes([r[o], r[o + 1], r[o + 2], r[o + 3]]);
        assert_eq!(word(0), 1, "CU_DEV_RESOURCE_TYPE_SM");
        assert!(r[4..96].iter().all(|&b| b == 0), "padding");
        assert_eq!([word(96), word(100), word(104), word(108)], [sms as u32, 1, 1, 0]);
        assert!(r[112..144].iter().all(|&b| b == 0), "the rest of the union and nextResource");
        assert!(r[144..].iter().all(|&b| b == 0xa5), "nothing past the struct");
    }
    let mut r = [0u8; 144];
    assert_eq!(cu!(api.cuDeviceGetDevResource(0, r.as_mut_ptr(), 1000)), 914, "CUDA_ERROR_INVALID_RESOURCE_TYPE");
    assert_eq!(cu!(api.cuStreamGetDevResource(stream, std::ptr::null_mut(), 1)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuDeviceGetDevResource(99, r.as_mut_ptr(), 1)), code::INVALID_DEVICE);
    check(api, cu!(api.cuStreamDestroy_v2(stream)), "cuStreamDestroy");
}
