//! `CUDA_LAUNCH_BLOCKING=1`: a launch returns once its kernel has run, so a
//! kernel that fails makes its own `cuLaunchKernel` fail (NVIDIA's
//! debugging aid; without it the failure shows at the next
//! synchronisation and names every kernel queued since the last one).
//! Each case runs in a child process of its own: the variable is read once
//! per process, and a failed kernel leaves the context unusable.

mod common;

use std::ffi::c_void;

use common::{check, code, init, Api, Ctx, Handle};

/// `CUDA_ERROR_LAUNCH_FAILED`.
const LAUNCH_FAILED: u32 = 719;

/// `fine` stores 7 through its pointer; `boom` stores 9 and traps.
const PTX: &str = "
.version 7.0
.target sm_80
.address_size 64
.visible .entry fine(.param .u64 p)
{
    .reg .u64 %rd<2>;
    .reg .u32 %r<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, 7;
    st.global.u32 [%rd1], %r1;
    ret;
}
.visible .entry boom(.param .u64 p)
{
    .reg .u64 %rd<2>;
    .reg .u32 %r<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, 9;
    st.global.u32 [%rd1], %r1;
    trap;
    ret;
}
";

/// Launches `fine` then `boom` on one word and returns what the two
/// launches and the synchronisation after them gave.
fn launch_both(api: &Api) -> (u32, u32, u32) {
    let image = std::ffi::CString::new(PTX).expect("no NUL");
    let mut module: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast())), "cuModuleLoadData");
    let function = |name: &std::ffi::CStr| {
        let mut f: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuModuleGetFunction(&mut f, module, name.as_ptr())), "cuModuleGetFunction");
        f
    };
    let (fine, boom) = (function(c"fine"), function(c"boom"));
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, 4)), "cuMemAlloc");
    let mut params: [*mut c_void; 1] = [(&mut d as *mut u64).cast()];
    let (null, no_extra): (Handle, *mut *mut c_void) = (std::ptr::null_mut(), std::ptr::null_mut());
    let a = cu!(api.cuLaunchKernel(fine, 1, 1, 1, 1, 1, 1, 0, null, params.as_mut_ptr(), no_extra));
    let b = cu!(api.cuLaunchKernel(boom, 1, 1, 1, 1, 1, 1, 0, null, params.as_mut_ptr(), no_extra));
    let c = cu!(api.cuCtxSynchronize());
    (a, b, c)
}

#[test]
fn a_failing_kernel_fails_its_own_launch_when_launches_block() {
    if let Some((stdout, _)) =
        common::in_own_process("a_failing_kernel_fails_its_own_launch_when_launches_block", "CUDA_LAUNCH_BLOCKING")
    {
        assert!(stdout.contains("#checked"), "child output:\n{stdout}");
        return;
    }
    let api = init();
    let _ctx = Ctx::new(api);
    let (fine, boom, sync) = launch_both(api);
    assert_eq!(fine, code::SUCCESS, "the kernel that does not fail");
    assert_eq!(boom, LAUNCH_FAILED, "the trapping kernel's own launch");
    assert_eq!(sync, LAUNCH_FAILED, "the context stays failed");
    println!("#checked");
}

/// Set in the child process of [`without_it_the_failure_shows_at_the_synchronisation`].
const CHILD: &str = "PTXVK_LAUNCH_ASYNC_CHILD";

#[test]
fn without_it_the_failure_shows_at_the_synchronisation() {
    if let Some((stdout, _)) = common::in_own_process("without_it_the_failure_shows_at_the_synchronisation", CHILD) {
        assert!(stdout.contains("#checked"), "child output:\n{stdout}");
        return;
    }
    if std::env::var_os("CUDA_LAUNCH_BLOCKING").is_some() {
        println!("#checked (CUDA_LAUNCH_BLOCKING is set for the whole run)");
        return;
    }
    let api = init();
    let _ctx = Ctx::new(api);
    let (fine, boom, sync) = launch_both(api);
    assert_eq!((fine, boom), (code::SUCCESS, code::SUCCESS), "launches are queued");
    assert_eq!(sync, LAUNCH_FAILED);
    println!("#checked");
}
