//! The rest of the driver API that clients use: entry-point resolution,
//! primary contexts and the context stack, limits, threads, streams and
//! events, host memory, unified copies, 2D/3D copies, pointer attributes,
//! with their error codes.

mod common;

use std::ffi::{c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{api, check, code, init, Api, Ctx, Handle};

fn bogus() -> Handle {
    0xdead_beef_usize as Handle
}

fn proc_address(api: &Api, name: &CStr, version: c_int, flags: u64) -> (u32, *mut c_void, c_int) {
    let mut f: *mut c_void = std::ptr::null_mut();
    let mut status: c_int = -1;
    let rc = cu!(api.cuGetProcAddress_v2(name.as_ptr(), &mut f, version, flags, &mut status));
    (rc, f, status)
}

#[test]
fn get_proc_address() {
    let api = api();
    // Works before and after cuInit.
    let (rc, f, status) = proc_address(api, c"cuInit", 2000, 0);
    assert_eq!((rc, status), (code::SUCCESS, 0));
    assert!(!f.is_null());
    let api = init();
    // Versions pick the symbol: cuMemAlloc 3.2+ is cuMemAlloc_v2 (64-bit sizes).
    let (rc, v2, _) = proc_address(api, c"cuMemAlloc", 12000, 0);
    assert_eq!(rc, code::SUCCESS);
    assert_eq!(v2, api.cuMemAlloc_v2 as *mut c_void);
    let (_, v1, _) = proc_address(api, c"cuMemAlloc", 3000, 0);
    assert!(!v1.is_null() && v1 != v2, "the 32-bit cuMemAlloc is a different symbol");
    // The per-thread default stream variant when asked for.
    let (rc, ptds, _) = proc_address(api, c"cuMemcpyHtoD", 12000, 2);
    assert_eq!(rc, code::SUCCESS);
    let (_, legacy, _) = proc_address(api, c"cuMemcpyHtoD", 12000, 1);
    assert_eq!(legacy, api.cuMemcpyHtoD_v2 as *mut c_void);
    assert!(!ptds.is_null() && ptds != legacy);
    // Unknown names and names too new for the version asked for.
    let (rc, f, status) = proc_address(api, c"cuNoSuchFunction", 12000, 0);
    assert_eq!((rc, f, status), (code::NOT_FOUND, std::ptr::null_mut(), 1));
    let (rc, f, status) = proc_address(api, c"cuLibraryLoadData", 11080, 0);
    assert_eq!((rc, f, status), (code::NOT_FOUND, std::ptr::null_mut(), 2));
    // Bad arguments.
    let mut f: *mut c_void = std::ptr::null_mut();
    let null_status: *mut c_int = std::ptr::null_mut();
    assert_eq!(cu!(api.cuGetProcAddress_v2(std::ptr::null(), &mut f, 12000, 0, null_status)), code::INVALID_VALUE);
    let null_pfn: *mut *mut c_void = std::ptr::null_mut();
    assert_eq!(cu!(api.cuGetProcAddress_v2(c"cuInit".as_ptr(), null_pfn, 12000, 0, null_status)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuGetProcAddress_v2(c"cuInit".as_ptr(), &mut f, 12000, 8, null_status)), code::INVALID_VALUE);
    // The CUDA 11.3 form.
    assert_eq!(cu!(api.cuGetProcAddress(c"cuCtxSynchronize".as_ptr(), &mut f, 12000, 0)), code::SUCCESS);
    assert_eq!(f, api.cuCtxSynchronize as *mut c_void);

    // A function cuda.h declares but the library does not implement resolves
    // to a stub that says CUDA_ERROR_NOT_SUPPORTED.
    let (rc, f, _) = proc_address(api, c"cuArrayGetPlane", 12000, 0);
    assert_eq!(rc, code::SUCCESS);
    // SAFETY: the stub takes any arguments and touches none of them.
    let stub: unsafe extern "C" fn() -> u32 = unsafe { std::mem::transmute(f) };
    // SAFETY: as above.
    assert_eq!(unsafe { stub() }, code::NOT_SUPPORTED);
    // Graphs are implemented: the name resolves to the exported function.
    let (rc, f, _) = proc_address(api, c"cuGraphCreate", 12000, 0);
    assert_eq!((rc, f), (code::SUCCESS, api.cuGraphCreate as *mut c_void));
}

/// Set in the child process that [`primary_context_lifecycle`] runs itself
/// in.
const LIFECYCLE_CHILD: &str = "PTXVK_LIFECYCLE_CHILD";

/// The primary context's lifecycle, checked in a child process of its own:
/// the primary context is process-wide, and the check that a reset freed an
/// allocation frees its stale address, which another test's `cuMemAlloc` in
/// the same process may already have been given again (as on NVIDIA's
/// driver, addresses are reused at once).
#[test]
fn primary_context_lifecycle() {
    match common::in_own_process("primary_context_lifecycle", LIFECYCLE_CHILD) {
        None => primary_context_lifecycle_alone(),
        Some((stdout, stderr)) => assert!(stdout.contains("1 passed"), "the child ran no test:\n{stdout}\n{stderr}"),
    }
}

fn primary_context_lifecycle_alone() {
    let api = init();
    std::thread::spawn(move || {
        let (mut flags, mut active) = (99u32, 99);
        check(api, cu!(api.cuDevicePrimaryCtxGetState(0, &mut flags, &mut active)), "state");
        let was_active = active;
        check(api, cu!(api.cuDevicePrimaryCtxSetFlags_v2(0, 4)), "set flags (blocking sync)");
        assert_eq!(cu!(api.cuDevicePrimaryCtxSetFlags_v2(0, 0x1000)), code::INVALID_VALUE);
        assert_eq!(cu!(api.cuDevicePrimaryCtxSetFlags_v2(9, 0)), code::INVALID_DEVICE);
        let mut a: Handle = std::ptr::null_mut();
        let mut b: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuDevicePrimaryCtxRetain(&mut a, 0)), "retain");
        check(api, cu!(api.cuDevicePrimaryCtxRetain(&mut b, 0)), "retain again");
        assert_eq!(a, b, "one primary context per device");
        check(api, cu!(api.cuDevicePrimaryCtxGetState(0, &mut flags, &mut active)), "state");
        assert_eq!((flags, active), (4, 1));
        check(api, cu!(api.cuCtxSetCurrent(a)), "set current");
        let mut f = 0u32;
        check(api, cu!(api.cuCtxGetFlags(&mut f)), "ctx flags");
        assert_eq!(f, 4);
        check(api, cu!(api.cuCtxSetFlags(1)), "cuCtxSetFlags");
        check(api, cu!(api.cuCtxGetFlags(&mut f)), "ctx flags");
        assert_eq!(f, 1);
        let mut d = 0u64;
        check(api, cu!(api.cuMemAlloc_v2(&mut d, 64)), "alloc in primary");
        // Reset frees its allocations; the handle stays usable while retained.
        check(api, cu!(api.cuDevicePrimaryCtxReset_v2(0)), "reset");
        assert_eq!(cu!(api.cuMemFree_v2(d)), code::INVALID_VALUE, "freed by reset");
        check(api, cu!(api.cuDevicePrimaryCtxRelease_v2(0)), "release");
        check(api, cu!(api.cuDevicePrimaryCtxRelease_v2(0)), "release");
        if was_active == 0 {
            check(api, cu!(api.cuDevicePrimaryCtxGetState(0, &mut flags, &mut active)), "state");
            assert_eq!(active, 0, "inactive after the last release");
            assert_eq!(cu!(api.cuDevicePrimaryCtxRelease_v2(0)), code::INVALID_CONTEXT, "over-release");
            assert_eq!(cu!(api.cuCtxSynchronize()), code::CONTEXT_IS_DESTROYED, "destroyed while current");
        }
        check(api, cu!(api.cuDevicePrimaryCtxSetFlags_v2(0, 0)), "flags back");
        let null_u: *mut c_uint = std::ptr::null_mut();
        assert_eq!(cu!(api.cuDevicePrimaryCtxGetState(0, null_u, &mut active)), code::INVALID_VALUE);
    })
    .join()
    .unwrap();
}

#[test]
fn context_stack_limits_and_queries() {
    let api = init();
    std::thread::spawn(move || {
        let ctx = Ctx::new(api);
        let mut version = 0u32;
        check(api, cu!(api.cuCtxGetApiVersion(ctx.handle, &mut version)), "api version");
        assert_eq!(version, 3020);
        assert_eq!(cu!(api.cuCtxGetApiVersion(bogus(), &mut version)), code::INVALID_CONTEXT);
        let (mut id1, mut id2) = (0u64, 0u64);
        check(api, cu!(api.cuCtxGetId(ctx.handle, &mut id1)), "id");
        let other = Ctx::new(api);
        check(api, cu!(api.cuCtxGetId(std::ptr::null_mut(), &mut id2)), "id of current");
        assert_ne!(id1, id2);
        let mut dev = -1;
        check(api, cu!(api.cuCtxGetDevice_v2(&mut dev, ctx.handle)), "cuCtxGetDevice_v2");
        assert_eq!(dev, 0);
        check(api, cu!(api.cuCtxSynchronize_v2(ctx.handle)), "cuCtxSynchronize_v2");
        // Stack: other is on top of ctx.
        let mut top: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuCtxPopCurrent_v2(&mut top)), "pop");
        assert_eq!(top, other.handle);
        check(api, cu!(api.cuCtxGetCurrent(&mut top)), "current");
        assert_eq!(top, ctx.handle);
        check(api, cu!(api.cuCtxPushCurrent_v2(other.handle)), "push");
        drop(other);
        check(api, cu!(api.cuCtxGetCurrent(&mut top)), "current after destroying the top");
        assert_eq!(top, ctx.handle);

        // Limits.
        let mut v = 0usize;
        for (limit, default) in [(0, 1024), (1, 1 << 20), (2, 8 << 20)] {
            check(api, cu!(api.cuCtxGetLimit(&mut v, limit)), "cuCtxGetLimit");
            assert_eq!(v, default, "limit {limit}");
        }
        check(api, cu!(api.cuCtxSetLimit(0, 4096)), "set stack size");
        check(api, cu!(api.cuCtxGetLimit(&mut v, 0)), "get");
        assert_eq!(v, 4096);
        assert_eq!(cu!(api.cuCtxSetLimit(5, 4096)), code::INVALID_VALUE, "L2 fetch granularity > 128");
        // CU_LIMIT_SHMEM_SIZE is for CUDA-in-graphics contexts; none is one
        // (CU_LIMIT_CIG_ENABLED reads 0, and cannot be set).
        assert_eq!(cu!(api.cuCtxGetLimit(&mut v, 7)), code::UNSUPPORTED_LIMIT);
        v = 9;
        check(api, cu!(api.cuCtxGetLimit(&mut v, 8)), "CU_LIMIT_CIG_ENABLED");
        assert_eq!(v, 0);
        assert_eq!(cu!(api.cuCtxSetLimit(8, 1)), code::INVALID_VALUE);
        // No stream belongs to a green context.
        let mut green: Handle = 1 as Handle;
        check(api, cu!(api.cuStreamGetGreenCtx(std::ptr::null_mut(), &mut green)), "cuStreamGetGreenCtx");
        assert!(green.is_null());
        assert_eq!(cu!(api.cuCtxGetLimit(&mut v, 77)), code::INVALID_VALUE);
        assert_eq!(cu!(api.cuCtxGetLimit(std::ptr::null_mut(), 0)), code::INVALID_VALUE);
        let mut cfg = -1;
        check(api, cu!(api.cuCtxSetCacheConfig(2)), "cache config");
        check(api, cu!(api.cuCtxGetCacheConfig(&mut cfg)), "cache config");
        assert_eq!(cfg, 2);
        assert_eq!(cu!(api.cuCtxSetCacheConfig(7)), code::INVALID_VALUE);
        let (mut least, mut greatest) = (9, 9);
        check(api, cu!(api.cuCtxGetStreamPriorityRange(&mut least, &mut greatest)), "priority range");
        assert_eq!((least, greatest), (0, 0));
        let mut props = [0 as c_int; 14];
        check(api, cu!(api.cuDeviceGetProperties(&mut props, 0)), "cuDeviceGetProperties");
        assert_eq!(props[9], 32, "SIMDWidth");
        let mut peer = 9;
        check(api, cu!(api.cuDeviceCanAccessPeer(&mut peer, 0, 0)), "can access peer");
        assert_eq!(peer, 0);
        // cuCtxCreate_v4 with NULL parameters is cuCtxCreate_v2.
        let mut c4: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuCtxCreate_v4(&mut c4, std::ptr::null(), 0, 0)), "cuCtxCreate_v4");
        check(api, cu!(api.cuCtxDestroy_v2(c4)), "destroy");
        drop(ctx);
        // Nothing current any more.
        assert_eq!(cu!(api.cuCtxGetLimit(&mut v, 0)), code::INVALID_CONTEXT);
    })
    .join()
    .unwrap();
}

/// Each host thread has its own current context; the API is usable from
/// several threads at once.
#[test]
fn contexts_are_per_thread() {
    let api = init();
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            std::thread::spawn(move || {
                let ctx = Ctx::new(api);
                for round in 0..5u32 {
                    let mut d = 0u64;
                    check(api, cu!(api.cuMemAlloc_v2(&mut d, 4096)), "alloc");
                    let value = t * 1000 + round;
                    check(api, cu!(api.cuMemsetD32_v2(d, value, 1024)), "memset");
                    let mut out = vec![0u32; 1024];
                    check(api, cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), d, 4096)), "DtoH");
                    assert!(out.iter().all(|&x| x == value));
                    let mut cur: Handle = std::ptr::null_mut();
                    check(api, cu!(api.cuCtxGetCurrent(&mut cur)), "current");
                    assert_eq!(cur, ctx.handle, "another thread's context leaked in");
                    check(api, cu!(api.cuMemFree_v2(d)), "free");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

type HostFn = unsafe extern "C" fn(*mut c_void);
type StreamCb = unsafe extern "C" fn(Handle, u32, *mut c_void);

static HOST_CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn host_fn(user: *mut c_void) {
    HOST_CALLS.fetch_add(user as usize, Ordering::SeqCst);
}

unsafe extern "C" fn stream_cb(_stream: Handle, status: u32, user: *mut c_void) {
    assert_eq!(status, 0);
    HOST_CALLS.fetch_add(user as usize, Ordering::SeqCst);
}

#[test]
fn streams_events_callbacks() {
    let api = init();
    let _ctx = Ctx::new(api);
    let mut s: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut s, 1)), "stream");
    let mut flags = 0;
    check(api, cu!(api.cuStreamGetFlags(s, &mut flags)), "flags");
    assert_eq!(flags, 1);
    let mut sctx: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamGetCtx(s, &mut sctx)), "stream ctx");
    assert_eq!(sctx, _ctx.handle);
    assert_eq!(cu!(api.cuStreamCreate(&mut s, 4)), code::INVALID_VALUE, "bad flags");
    // Nothing was queued on it: finished, whatever other tests queue on the
    // device's one queue meanwhile.
    check(api, cu!(api.cuStreamQuery(s)), "query of a fresh stream");

    let (mut e0, mut e1, mut nt) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    check(api, cu!(api.cuEventCreate(&mut e0, 0)), "event");
    check(api, cu!(api.cuEventCreate(&mut e1, 0)), "event");
    check(api, cu!(api.cuEventCreate(&mut nt, 2)), "event without timing");
    assert_eq!(cu!(api.cuEventCreate(&mut nt, 0x100)), code::INVALID_VALUE);
    let mut ms = -1.0f32;
    assert_eq!(cu!(api.cuEventElapsedTime(&mut ms, e0, e1)), code::INVALID_HANDLE, "not recorded");
    check(api, cu!(api.cuEventRecord(e0, s)), "record");
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, 1 << 20)), "alloc");
    check(api, cu!(api.cuMemsetD8_v2(d, 7, 1 << 20)), "memset");
    check(api, cu!(api.cuEventRecord(e1, s)), "record");
    check(api, cu!(api.cuEventSynchronize(e1)), "sync");
    check(api, cu!(api.cuEventQuery(e1)), "query");
    check(api, cu!(api.cuEventElapsedTime(&mut ms, e0, e1)), "elapsed");
    assert!(ms >= 0.0);
    check(api, cu!(api.cuEventRecord(nt, std::ptr::null_mut())), "record on the null stream");
    assert_eq!(cu!(api.cuEventElapsedTime(&mut ms, e0, nt)), code::INVALID_HANDLE, "timing disabled");
    assert_eq!(cu!(api.cuEventElapsedTime(std::ptr::null_mut(), e0, e1)), code::INVALID_VALUE);
    check(api, cu!(api.cuStreamWaitEvent(s, e1, 0)), "wait event");
    assert_eq!(cu!(api.cuStreamWaitEvent(s, bogus(), 0)), code::INVALID_HANDLE);
    assert_eq!(cu!(api.cuEventRecord(bogus(), s)), code::INVALID_HANDLE);

    HOST_CALLS.store(0, Ordering::SeqCst);
    let hf: HostFn = host_fn;
    let cb: StreamCb = stream_cb;
    check(api, cu!(api.cuLaunchHostFunc(s, Some(hf), 5usize as *mut c_void)), "host func");
    check(api, cu!(api.cuStreamAddCallback(s, Some(cb), 7usize as *mut c_void, 0)), "callback");
    check(api, cu!(api.cuStreamSynchronize(s)), "sync");
    assert_eq!(HOST_CALLS.load(Ordering::SeqCst), 12);
    assert_eq!(cu!(api.cuLaunchHostFunc(s, None, std::ptr::null_mut())), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuStreamAddCallback(s, Some(cb), std::ptr::null_mut(), 1)), code::INVALID_VALUE);

    for e in [e0, e1, nt] {
        check(api, cu!(api.cuEventDestroy_v2(e)), "destroy event");
    }
    assert_eq!(cu!(api.cuEventDestroy_v2(e0)), code::INVALID_HANDLE, "double destroy");
    check(api, cu!(api.cuStreamDestroy_v2(s)), "destroy stream");
    assert_eq!(cu!(api.cuStreamQuery(s)), code::INVALID_HANDLE, "destroyed stream");
    check(api, cu!(api.cuMemFree_v2(d)), "free");
}

/// Polls `cuStreamQuery` until it stops answering `CUDA_ERROR_NOT_READY`.
fn poll_stream(api: &Api, s: Handle) -> u32 {
    let mut q = cu!(api.cuStreamQuery(s));
    for _ in 0..200_000 {
        if q != code::NOT_READY {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
        q = cu!(api.cuStreamQuery(s));
    }
    q
}

#[test]
fn stream_queries_answer_for_their_own_work() {
    let api = init();
    let _ctx = Ctx::new(api);
    let (mut a, mut b): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
    check(api, cu!(api.cuStreamCreate(&mut a, 1)), "stream a");
    check(api, cu!(api.cuStreamCreate(&mut b, 1)), "stream b");
    let words = 4usize << 20;
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, words * 4)), "alloc");
    let mut seed = 0x9e37_79b9_u32;
    let mut fills = Vec::new();
    for _ in 0..8 {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        fills.push(seed);
        check(api, cu!(api.cuMemsetD32Async(d, seed, words, a)), "memset on a");
    }
    // b has no work of its own: ready while a's work is still queued.
    check(api, cu!(api.cuStreamQuery(b)), "query of the idle stream b");
    let (mut ea, mut eb) = (std::ptr::null_mut(), std::ptr::null_mut());
    check(api, cu!(api.cuEventCreate(&mut ea, 2)), "event");
    check(api, cu!(api.cuEventCreate(&mut eb, 2)), "event");
    check(api, cu!(api.cuEventRecord(eb, b)), "record on b");
    check(api, cu!(api.cuEventQuery(eb)), "an event on the idle stream b");
    // Once b waits for a's event, b is ready only after a's work.
    check(api, cu!(api.cuEventRecord(ea, a)), "record on a");
    check(api, cu!(api.cuStreamWaitEvent(b, ea, 0)), "b waits for a");
    check(api, poll_stream(api, b), "query of b after waiting for a");
    check(api, cu!(api.cuStreamQuery(a)), "a finished before b");
    check(api, cu!(api.cuEventQuery(ea)), "a's event");
    let mut back = vec![0u32; words];
    check(api, cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), d, words * 4)), "read back");
    let last = fills.last().copied().unwrap_or_default();
    assert!(back.iter().all(|&w| w == last), "the last fill of a");
    // A stream's query answers for its last work: poll it to the end.
    check(api, cu!(api.cuMemsetD32Async(d, 5, words, b)), "memset on b");
    check(api, poll_stream(api, b), "b's own work");
    check(api, cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), d, 16)), "read back");
    assert_eq!(&back[..4], &[5; 4]);
    for e in [ea, eb] {
        check(api, cu!(api.cuEventDestroy_v2(e)), "destroy event");
    }
    for s in [a, b] {
        check(api, cu!(api.cuStreamDestroy_v2(s)), "destroy stream");
    }
    check(api, cu!(api.cuMemFree_v2(d)), "free");
}

#[test]
fn host_memory_and_pointer_attributes() {
    let api = init();
    let ctx = Ctx::new(api);
    let mut p: *mut c_void = std::ptr::null_mut();
    check(api, cu!(api.cuMemAllocHost_v2(&mut p, 10_000)), "cuMemAllocHost");
    assert_eq!(p as usize % 4096, 0);
    // SAFETY: 10,000 writable bytes were just allocated.
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0x5a, 10_000) };
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, 10_000)), "alloc");
    check(api, cu!(api.cuMemcpy(d, p as u64, 10_000)), "cuMemcpy host->device");
    let mut back = vec![0u8; 10_000];
    check(api, cu!(api.cuMemcpy(back.as_mut_ptr() as u64, d, 10_000)), "cuMemcpy device->host");
    assert!(back.iter().all(|&b| b == 0x5a));

    // Pointer attributes: device memory, page-locked host memory, unknown.
    let mut mem_type = 0u32;
    check(api, cu!(api.cuPointerGetAttribute((&mut mem_type as *mut u32).cast(), 2, d + 16)), "memory type");
    assert_eq!(mem_type, 2, "CU_MEMORYTYPE_DEVICE");
    let mut owner: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuPointerGetAttribute((&mut owner as *mut Handle).cast(), 1, d)), "context");
    assert_eq!(owner, ctx.handle);
    let mut start = 0u64;
    check(api, cu!(api.cuPointerGetAttribute((&mut start as *mut u64).cast(), 11, d + 100)), "range start");
    assert_eq!(start, d);
    check(api, cu!(api.cuPointerGetAttribute((&mut mem_type as *mut u32).cast(), 2, p as u64)), "host type");
    assert_eq!(mem_type, 1, "CU_MEMORYTYPE_HOST");
    let local = 0u64;
    let unknown = &local as *const u64 as u64;
    assert_eq!(cu!(api.cuPointerGetAttribute((&mut mem_type as *mut u32).cast(), 2, unknown)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuPointerGetAttribute(std::ptr::null_mut(), 2, d)), code::INVALID_VALUE);
    let attrs = [2 as c_int, 9];
    let (mut t, mut ordinal) = (77u32, 77 as c_int);
    let mut outs: [*mut c_void; 2] = [(&mut t as *mut u32).cast(), (&mut ordinal as *mut c_int).cast()];
    check(api, cu!(api.cuPointerGetAttributes(2, attrs.as_ptr(), outs.as_mut_ptr(), d)), "attributes");
    assert_eq!((t, ordinal), (2, 0));
    check(api, cu!(api.cuPointerGetAttributes(1, attrs.as_ptr(), outs.as_mut_ptr(), unknown)), "unknown pointer");
    assert_eq!(t, 0, "unregistered memory has memory type 0");
    let (mut base, mut size) = (0u64, 0usize);
    check(api, cu!(api.cuMemGetAddressRange_v2(&mut base, &mut size, d + 5)), "address range");
    assert_eq!((base, size), (d, 10_000));

    // Freeing: only what cuMemHostAlloc gave out, once.
    check(api, cu!(api.cuMemFreeHost(p)), "cuMemFreeHost");
    assert_eq!(cu!(api.cuMemFreeHost(p)), code::INVALID_VALUE, "double free");
    assert_eq!(cu!(api.cuMemAllocHost_v2(&mut p, 0)), code::INVALID_VALUE);
    check(api, cu!(api.cuMemHostAlloc(&mut p, 64, 1)), "portable");
    check(api, cu!(api.cuMemFreeHost(p)), "free");

    // Mapped memory: the device writes through its device address, the host
    // reads through its host address.
    check(api, cu!(api.cuMemHostAlloc(&mut p, 4096, 2)), "DEVICEMAP");
    let mut dp = 0u64;
    // SAFETY: offset inside the 4096-byte allocation.
    let inner = unsafe { p.cast::<u8>().add(1024) }.cast::<c_void>();
    check(api, cu!(api.cuMemHostGetDevicePointer_v2(&mut dp, inner, 0)), "device pointer");
    check(api, cu!(api.cuMemsetD32_v2(dp, 0x1234_5678, 16)), "memset through the mapping");
    check(api, cu!(api.cuCtxSynchronize()), "sync");
    // SAFETY: 64 bytes at offset 1024 of the live allocation, written by the device and synchronised.
    let seen = unsafe { std::slice::from_raw_parts(inner.cast::<u32>(), 16) };
    assert!(seen.iter().all(|&w| w == 0x1234_5678), "{seen:x?}");
    let mut dev_ptr = 0u64;
    check(api, cu!(api.cuPointerGetAttribute((&mut dev_ptr as *mut u64).cast(), 3, p as u64)), "DEVICE_POINTER");
    assert_eq!(dev_ptr + 1024, dp);
    assert_eq!(cu!(api.cuMemHostGetDevicePointer_v2(&mut dp, p, 1)), code::INVALID_VALUE, "flags must be 0");
    check(api, cu!(api.cuMemFreeHost(p)), "free mapped");

    // Registration.
    let mut buf = vec![0u8; 8192];
    let b = buf.as_mut_ptr().cast::<c_void>();
    check(api, cu!(api.cuMemHostRegister_v2(b, 8192, 0)), "register");
    // SAFETY: offset inside `buf`.
    let inner = unsafe { b.cast::<u8>().add(100) }.cast::<c_void>();
    assert_eq!(cu!(api.cuMemHostRegister_v2(inner, 10, 0)), code::HOST_MEMORY_ALREADY_REGISTERED);
    assert_eq!(cu!(api.cuMemHostUnregister(inner)), code::HOST_MEMORY_NOT_REGISTERED);
    check(api, cu!(api.cuMemHostUnregister(b)), "unregister");
    assert_eq!(cu!(api.cuMemHostUnregister(b)), code::HOST_MEMORY_NOT_REGISTERED);
    assert_eq!(cu!(api.cuMemHostRegister_v2(std::ptr::null_mut(), 8, 0)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuMemHostGetDevicePointer_v2(&mut dp, b, 0)), code::INVALID_VALUE, "not mapped");
    let mut managed = -1;
    check(api, cu!(api.cuDeviceGetAttribute(&mut managed, 83, 0)), "MANAGED_MEMORY");
    assert_eq!(cu!(api.cuMemAllocManaged(&mut dp, 64, 3)), code::INVALID_VALUE, "bad flags");
    if managed == 1 {
        check(api, cu!(api.cuMemAllocManaged(&mut dp, 64, 1)), "managed");
        // CU_POINTER_ATTRIBUTE_IS_MANAGED (8): Warp's memory kinds read it.
        let mut is_managed = 7u8;
        check(api, cu!(api.cuPointerGetAttribute((&mut is_managed as *mut u8).cast(), 8, dp + 8)), "IS_MANAGED");
        assert_eq!(is_managed, 1, "managed memory");
        check(api, cu!(api.cuPointerGetAttribute((&mut is_managed as *mut u8).cast(), 8, d)), "IS_MANAGED");
        assert_eq!(is_managed, 0, "cuMemAlloc memory");
        // CU_POINTER_ATTRIBUTE_HOST_POINTER (4): managed memory is at the same host address.
        let mut host: *mut c_void = std::ptr::null_mut();
        check(api, cu!(api.cuPointerGetAttribute((&mut host as *mut *mut c_void).cast(), 4, dp + 8)), "HOST_POINTER");
        assert_eq!(host as u64, dp + 8);
        check(api, cu!(api.cuMemFree_v2(dp)), "free managed");
    } else {
        assert_eq!(cu!(api.cuMemAllocManaged(&mut dp, 64, 1)), code::NOT_SUPPORTED);
    }
    check(api, cu!(api.cuMemFree_v2(d)), "free");
}

/// `CUDA_MEMCPY2D` and `CUDA_MEMCPY3D` as `cuda.h` lays them out.
#[repr(C)]
#[derive(Default)]
struct Memcpy2D {
    src_x: usize,
    src_y: usize,
    src_type: u32,
    src_host: usize,
    src_device: u64,
    src_array: usize,
    src_pitch: usize,
    dst_x: usize,
    dst_y: usize,
    dst_type: u32,
    dst_host: usize,
    dst_device: u64,
    dst_array: usize,
    dst_pitch: usize,
    width: usize,
    height: usize,
}

#[repr(C)]
#[derive(Default)]
struct Memcpy3D {
    src_x: usize,
    src_y: usize,
    src_z: usize,
    src_lod: usize,
    src_type: u32,
    src_host: usize,
    src_device: u64,
    src_array: usize,
    reserved0: usize,
    src_pitch: usize,
    src_height: usize,
    dst_x: usize,
    dst_y: usize,
    dst_z: usize,
    dst_lod: usize,
    dst_type: u32,
    dst_host: usize,
    dst_device: u64,
    dst_array: usize,
    reserved1: usize,
    dst_pitch: usize,
    dst_height: usize,
    width: usize,
    height: usize,
    depth: usize,
}

#[test]
fn pitched_2d_and_3d_copies() {
    let api = init();
    let _ctx = Ctx::new(api);
    let (w, h) = (100usize, 37usize);
    let (mut d, mut pitch) = (0u64, 0usize);
    check(api, cu!(api.cuMemAllocPitch_v2(&mut d, &mut pitch, w, h, 4)), "cuMemAllocPitch");
    assert!(pitch >= w && pitch % 256 == 0);
    assert_eq!(cu!(api.cuMemAllocPitch_v2(&mut d, &mut pitch, w, h, 3)), code::INVALID_VALUE, "element size 3");
    check(api, cu!(api.cuMemsetD2D32_v2(d, pitch, 0xffff_ffff, pitch / 4, h)), "memset 2D");
    let host: Vec<u8> = (0..w * h).map(|i| (i % 251) as u8).collect();
    // Host (packed) -> device (pitched), then back with a 3-byte offset.
    let up = Memcpy2D {
        src_type: 1,
        src_host: host.as_ptr() as usize,
        src_pitch: w,
        dst_type: 2,
        dst_device: d,
        dst_pitch: pitch,
        width: w,
        height: h,
        ..Default::default()
    };
    check(api, cu!(api.cuMemcpy2D_v2((&up as *const Memcpy2D).cast())), "2D up");
    let mut back = vec![0u8; w * h];
    let down = Memcpy2D {
        src_type: 4, // unified: a device pointer
        src_device: d,
        src_pitch: pitch,
        src_x: 3,
        dst_type: 1,
        dst_host: back.as_mut_ptr() as usize,
        dst_pitch: w,
        width: w - 3,
        height: h,
        ..Default::default()
    };
    check(api, cu!(api.cuMemcpy2D_v2((&down as *const Memcpy2D).cast())), "2D down");
    for y in 0..h {
        assert_eq!(&back[y * w..y * w + w - 3], &host[y * w + 3..y * w + w], "row {y}");
    }
    // The padding the upload skipped is still the memset value.
    let mut row = vec![0u8; pitch];
    check(api, cu!(api.cuMemcpyDtoH_v2(row.as_mut_ptr().cast(), d, pitch)), "row 0");
    assert!(row[w..].iter().all(|&b| b == 0xff));
    // A CUDA-array endpoint whose handle is no live array (arrays work:
    // libcuda/tests/textures.rs).
    let bad = Memcpy2D { src_type: 3, ..up };
    assert_eq!(cu!(api.cuMemcpy2D_v2((&bad as *const Memcpy2D).cast())), code::INVALID_HANDLE, "not an array");
    let bad = Memcpy2D { src_type: 9, ..down };
    assert_eq!(cu!(api.cuMemcpy2D_v2((&bad as *const Memcpy2D).cast())), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuMemcpy2D_v2(std::ptr::null())), code::INVALID_VALUE);

    // 3D: a 4 x 5 x 6 box of a 8 x 7 x 6 device volume, device -> device -> host.
    let (vw, vh, vd) = (8usize, 7usize, 6usize);
    let vol: Vec<u8> = (0..vw * vh * vd).map(|i| (i * 7 % 256) as u8).collect();
    let (mut a, mut b) = (0u64, 0u64);
    check(api, cu!(api.cuMemAlloc_v2(&mut a, vol.len())), "alloc");
    check(api, cu!(api.cuMemAlloc_v2(&mut b, 4 * 5 * 6)), "alloc");
    check(api, cu!(api.cuMemcpyHtoD_v2(a, vol.as_ptr().cast(), vol.len())), "HtoD");
    let c3 = Memcpy3D {
        src_type: 2,
        src_device: a,
        src_x: 2,
        src_y: 1,
        src_pitch: vw,
        src_height: vh,
        dst_type: 2,
        dst_device: b,
        dst_pitch: 4,
        dst_height: 5,
        width: 4,
        height: 5,
        depth: 6,
        ..Default::default()
    };
    check(api, cu!(api.cuMemcpy3D_v2((&c3 as *const Memcpy3D).cast())), "3D");
    let mut out = vec![0u8; 4 * 5 * 6];
    check(api, cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), b, out.len())), "DtoH");
    for z in 0..6 {
        for y in 0..5 {
            for x in 0..4 {
                assert_eq!(out[(z * 5 + y) * 4 + x], vol[(z * vh + y + 1) * vw + x + 2], "({x},{y},{z})");
            }
        }
    }
    let bad = Memcpy3D { reserved0: 1, ..c3 };
    assert_eq!(cu!(api.cuMemcpy3D_v2((&bad as *const Memcpy3D).cast())), code::INVALID_VALUE);
    for p in [d, a, b] {
        check(api, cu!(api.cuMemFree_v2(p)), "free");
    }
}

#[test]
fn wrong_context_and_bad_handles() {
    let api = init();
    std::thread::spawn(move || {
        // Nothing current on a fresh thread.
        let mut d = 0u64;
        assert_eq!(cu!(api.cuMemAlloc_v2(&mut d, 16)), code::INVALID_CONTEXT);
        let mut s: Handle = std::ptr::null_mut();
        assert_eq!(cu!(api.cuStreamCreate(&mut s, 0)), code::INVALID_CONTEXT);
        let mut e: Handle = std::ptr::null_mut();
        assert_eq!(cu!(api.cuEventCreate(&mut e, 0)), code::INVALID_CONTEXT);
        let mut l: Handle = std::ptr::null_mut();
        let null_opts: *const c_int = std::ptr::null();
        assert_eq!(cu!(api.cuLinkCreate_v2(0, null_opts, std::ptr::null_mut(), &mut l)), code::INVALID_CONTEXT);
        let mut p: *mut c_void = std::ptr::null_mut();
        assert_eq!(cu!(api.cuMemAllocHost_v2(&mut p, 16)), code::INVALID_CONTEXT);
        // Handles of the wrong kind.
        let ctx = Ctx::new(api);
        let mut f: Handle = std::ptr::null_mut();
        assert_eq!(cu!(api.cuKernelGetFunction(&mut f, ctx.handle)), code::INVALID_HANDLE);
        assert_eq!(cu!(api.cuLibraryUnload(ctx.handle)), code::INVALID_HANDLE);
        assert_eq!(cu!(api.cuEventQuery(ctx.handle)), code::INVALID_HANDLE);
        assert_eq!(cu!(api.cuLinkDestroy(bogus())), code::INVALID_HANDLE);
        let mut v = 0;
        assert_eq!(cu!(api.cuFuncGetAttribute(&mut v, 0, bogus())), code::INVALID_HANDLE);
        assert_eq!(cu!(api.cuCtxSynchronize_v2(bogus())), code::INVALID_CONTEXT);
        // Freed memory.
        check(api, cu!(api.cuMemAlloc_v2(&mut d, 64)), "alloc");
        check(api, cu!(api.cuMemFree_v2(d)), "free");
        let x = 0u32;
        assert_ne!(cu!(api.cuMemcpyHtoD_v2(d, (&x as *const u32).cast(), 4)), code::SUCCESS, "copy to freed memory");
        let mut mt = 0u32;
        assert_eq!(cu!(api.cuPointerGetAttribute((&mut mt as *mut u32).cast(), 2, d)), code::INVALID_VALUE);
    })
    .join()
    .unwrap();
}

/// `cuMemcpyPeer(Async)` between two contexts of the device (they share its
/// memory): the bytes arrive, on the stream in order behind a memset queued
/// before; a NULL or destroyed context is refused.
#[test]
fn peer_copies_between_contexts() {
    let api = init();
    let a = Ctx::new(api);
    let mut b: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuCtxCreate_v2(&mut b, 0, 0)), "second context");
    let n = 3 * 4096 + 12;
    let mut rng = common::Lcg(0x9e37);
    let data: Vec<u8> = (0..n).map(|_| rng.next_u32() as u8).collect();
    // `src` in context b, `dst` in context a (current: a).
    check(api, cu!(api.cuCtxSetCurrent(b)), "b current");
    let mut src = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut src, n)), "alloc in b");
    check(api, cu!(api.cuMemcpyHtoD_v2(src, data.as_ptr().cast(), n)), "fill src");
    check(api, cu!(api.cuCtxSetCurrent(a.handle)), "a current");
    let (mut dst, mut dst2) = (0u64, 0u64);
    check(api, cu!(api.cuMemAlloc_v2(&mut dst, n)), "alloc in a");
    check(api, cu!(api.cuMemAlloc_v2(&mut dst2, n)), "alloc in a");
    check(api, cu!(api.cuMemsetD8_v2(dst, 0xAB, n)), "poison");
    check(api, cu!(api.cuMemcpyPeer(dst, a.handle, src, b, n)), "cuMemcpyPeer");
    let mut back = vec![0u8; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dst, n)), "read back");
    assert!(back == data, "cuMemcpyPeer copied other bytes");

    let mut stream: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut stream, 1)), "stream");
    check(api, cu!(api.cuMemsetD32Async(dst2, 0x1234_5678, n / 4, stream)), "queued memset");
    check(api, cu!(api.cuMemcpyPeerAsync(dst2 + 8, a.handle, src + 8, b, n - 20, stream)), "cuMemcpyPeerAsync");
    check(api, cu!(api.cuStreamSynchronize(stream)), "synchronize");
    check(api, cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dst2, n)), "read back");
    let fill = 0x1234_5678u32.to_ne_bytes();
    for (i, &byte) in back.iter().enumerate() {
        let want = if (8..n - 12).contains(&i) { data[i] } else { fill[i % 4] };
        assert_eq!(byte, want, "byte {i} after the async peer copy");
    }

    assert_eq!(cu!(api.cuMemcpyPeer(dst, std::ptr::null_mut(), src, b, 4)), code::INVALID_CONTEXT, "NULL context");
    check(api, cu!(api.cuStreamDestroy_v2(stream)), "stream destroy");
    check(api, cu!(api.cuCtxSetCurrent(b)), "b current");
    check(api, cu!(api.cuMemFree_v2(src)), "free src");
    check(api, cu!(api.cuCtxSetCurrent(a.handle)), "a current");
    check(api, cu!(api.cuCtxDestroy_v2(b)), "destroy b");
    assert_ne!(cu!(api.cuMemcpyPeer(dst, a.handle, dst2, b, 4)), code::SUCCESS, "destroyed context");
    check(api, cu!(api.cuMemFree_v2(dst)), "free");
    check(api, cu!(api.cuMemFree_v2(dst2)), "free");
}

/// Synchronous copies from and to page-locked host memory return once the
/// copy is done, as CUDA's "API synchronization behavior" says, also where
/// lavapipe maps that memory at its host address and the copy runs as a
/// device-to-device one: the host overwrites the source right after each
/// copy returns (with other work queued before it, so an early return would
/// copy the new bytes), and reads a destination right after.
#[test]
fn synchronous_copies_with_page_locked_memory_are_done_on_return() {
    let api = init();
    let _ctx = Ctx::new(api);
    let n = 16usize << 20;
    let mut p: *mut c_void = std::ptr::null_mut();
    check(api, cu!(api.cuMemAllocHost_v2(&mut p, n)), "cuMemAllocHost");
    let (mut d, mut busy) = (0u64, 0u64);
    check(api, cu!(api.cuMemAlloc_v2(&mut d, n)), "alloc");
    check(api, cu!(api.cuMemAlloc_v2(&mut busy, n)), "alloc");
    let mut mapped = 0u64;
    check(api, cu!(api.cuMemHostGetDevicePointer_v2(&mut mapped, p, 0)), "device pointer");
    let host = p as usize;
    let tail = |api: &Api| {
        let mut out = [0u8; 16];
        check(api, cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), d + (n - 16) as u64, 16)), "read back");
        out
    };
    let queue_work = |api: &Api| {
        for v in 1..4 {
            check(api, cu!(api.cuMemsetD8_v2(busy, v, n)), "queued memset");
            check(api, cu!(api.cuMemcpyDtoD_v2(d, busy, n)), "queued copy");
        }
    };
    let up_2d = Memcpy2D {
        src_type: 1,
        src_host: host,
        src_pitch: n / 64,
        dst_type: 2,
        dst_device: d,
        dst_pitch: n / 64,
        width: n / 64,
        height: 64,
        ..Memcpy2D::default()
    };
    let uploads: [(&str, &dyn Fn() -> u32); 4] = [
        ("cuMemcpyHtoD", &|| cu!(api.cuMemcpyHtoD_v2(d, p, n))),
        ("cuMemcpy", &|| cu!(api.cuMemcpy(d, host as u64, n))),
        ("cuMemcpyDtoD from the mapped pointer", &|| cu!(api.cuMemcpyDtoD_v2(d, mapped, n))),
        ("cuMemcpy2D", &|| cu!(api.cuMemcpy2D_v2((&up_2d as *const Memcpy2D).cast()))),
    ];
    for (what, copy) in uploads {
        queue_work(api);
        // SAFETY: `p` holds `n` writable bytes.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0x11, n) };
        check(api, copy(), what);
        // SAFETY: as above.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0x22, n) };
        check(api, cu!(api.cuCtxSynchronize()), "synchronize");
        assert_eq!(tail(api), [0x11; 16], "{what} copied bytes written after it returned");
    }
    let down_2d = Memcpy2D {
        src_type: 2,
        src_device: busy,
        src_pitch: n / 64,
        dst_type: 1,
        dst_host: host,
        dst_pitch: n / 64,
        width: n / 64,
        height: 64,
        ..Memcpy2D::default()
    };
    let downloads: [(&str, &dyn Fn() -> u32); 2] = [
        ("cuMemcpyDtoH", &|| cu!(api.cuMemcpyDtoH_v2(p, busy, n))),
        ("cuMemcpy2D", &|| cu!(api.cuMemcpy2D_v2((&down_2d as *const Memcpy2D).cast()))),
    ];
    for (i, (what, copy)) in downloads.into_iter().enumerate() {
        let v = 0x40 + i as u8;
        check(api, cu!(api.cuMemsetD8_v2(d, 0, n)), "queued memset");
        check(api, cu!(api.cuMemsetD8_v2(busy, v, n)), "queued memset");
        check(api, copy(), what);
        // SAFETY: `p` holds `n` readable bytes.
        let last = unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(n - 16), 16) };
        assert_eq!(last, [v; 16], "{what} returned before the copy was done");
    }
    check(api, cu!(api.cuMemFreeHost(p)), "free host");
    for x in [d, busy] {
        check(api, cu!(api.cuMemFree_v2(x)), "free");
    }
}
