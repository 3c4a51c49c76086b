//! `PTXVK_CC` overrides the reported compute capability. Its own process, so
//! the variable is set before `cuInit` reads it.

mod common;

use common::{check, code, Ctx};

#[test]
fn ptxvk_cc_overrides_compute_capability() {
    // Only test in this process: no other thread reads the environment.
    std::env::set_var("PTXVK_CC", "8.6");
    let api = common::init();
    let (mut ma, mut mi) = (0, 0);
    check(api, cu!(api.cuDeviceGetAttribute(&mut ma, 75, 0)), "COMPUTE_CAPABILITY_MAJOR");
    check(api, cu!(api.cuDeviceGetAttribute(&mut mi, 76, 0)), "COMPUTE_CAPABILITY_MINOR");
    assert_eq!((ma, mi), (8, 6));
    let (mut a, mut b) = (0, 0);
    check(api, cu!(api.cuDeviceComputeCapability(&mut a, &mut b, 0)), "cuDeviceComputeCapability");
    assert_eq!((a, b), (8, 6));
    // An sm_86 part's shared memory: 99 KiB a block may opt in to, 100 KiB per multiprocessor.
    let shared = |attr| {
        let mut v = -1;
        check(api, cu!(api.cuDeviceGetAttribute(&mut v, attr, 0)), "shared memory attribute");
        v
    };
    assert_eq!((shared(8), shared(97), shared(81)), (48 * 1024, 99 * 1024, 100 * 1024));
    // Context flags outside the documented ones are refused.
    let mut ctx: common::Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuCtxCreate_v2(&mut ctx, 0x1000, 0)), code::INVALID_VALUE);
    let _ctx = Ctx::new(api);
}
