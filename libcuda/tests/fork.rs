//! A child forked after `cuInit` gets `CUDA_ERROR_NOT_INITIALIZED` from every
//! call, `cuInit` included, as from NVIDIA's driver; the parent goes on
//! working. (Its own process: one test, so no other test thread forks.)

mod common;

use std::ffi::c_int;

use common::{check, code, init, Ctx, Handle};

extern "C" {
    fn fork() -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn _exit(status: c_int) -> !;
}

#[test]
fn child_forked_after_cuinit_is_not_initialized() {
    let api = init();
    let ctx = Ctx::new(api);
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, 4096)), "alloc in the parent");
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    check(api, cu!(api.cuMemcpyHtoD_v2(d, pattern.as_ptr().cast(), 4096)), "copy in the parent");

    // SAFETY: the child only calls the library's entry points, which answer
    // from an atomic flag, and leaves with `_exit` (no destructors, no
    // atexit handlers of the parent's state).
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let mut failures = 0;
        let mut n = -1;
        let mut h: Handle = std::ptr::null_mut();
        let mut dptr = 0u64;
        let mut back = [0u8; 16];
        let mut version = 0;
        let calls = [
            cu!(api.cuInit(0)) == code::NOT_INITIALIZED,
            cu!(api.cuDeviceGetCount(&mut n)) == code::NOT_INITIALIZED,
            cu!(api.cuCtxGetCurrent(&mut h)) == code::NOT_INITIALIZED,
            cu!(api.cuMemAlloc_v2(&mut dptr, 16)) == code::NOT_INITIALIZED,
            cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), d, 16)) == code::NOT_INITIALIZED,
            cu!(api.cuCtxSynchronize()) == code::NOT_INITIALIZED,
            // Works before cuInit, so in the child too.
            cu!(api.cuDriverGetVersion(&mut version)) == code::SUCCESS,
        ];
        for (i, ok) in calls.iter().enumerate() {
            if !ok {
                failures |= 1 << i;
            }
        }
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { _exit(failures) };
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is writable.
    let waited = unsafe { waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid, "waitpid");
    // WIFEXITED and WEXITSTATUS.
    assert_eq!(status & 0x7f, 0, "the child was killed by signal {}", status & 0x7f);
    assert_eq!((status >> 8) & 0xff, 0, "calls in the child that did not fail as documented (bit per call)");

    // The parent is unaffected.
    let mut back = vec![0u8; 4096];
    check(api, cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), d, 4096)), "copy back in the parent");
    assert_eq!(back, pattern);
    check(api, cu!(api.cuMemFree_v2(d)), "free");
    drop(ctx);
}
