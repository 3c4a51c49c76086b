//! The descriptor budget of shareable allocations (its own test binary, so
//! its lowered `RLIMIT_NOFILE` stays in this process): allocations past a
//! quarter of the limit still work, from pooled memory that cannot be shared.
#![cfg(unix)]

mod common;

use common::{assert_clean, context, Lcg};
use ptxvk_runtime::Error;

#[test]
fn allocations_past_the_descriptor_budget_are_pooled() {
    // A hard limit of 256 descriptors gives a budget of 64.
    let lim = libc::rlimit { rlim_cur: 256, rlim_max: 256 };
    // SAFETY: a valid limit; this test binary has no other test.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    let ctx = context();
    if !ctx.info().supports_ipc_memory {
        eprintln!("skipped: {} cannot share memory", ctx.info().name);
        return;
    }
    let mut rng = Lcg(0xb0d9e7);
    let mut shareable = 0;
    let mut allocs = Vec::new();
    for i in 0..100u64 {
        let n = 1000 + i * 8;
        let d = ctx.alloc(n).unwrap();
        match ctx.export_memory(d) {
            Ok(e) => {
                assert_eq!(e.size, n);
                shareable += 1;
            }
            Err(Error::InvalidValue(_)) => {}
            Err(e) => panic!("export {i}: {e}"),
        }
        let data = rng.bytes(n as usize);
        ctx.copy_htod(d, &data).unwrap();
        allocs.push((d, data));
    }
    assert_eq!(shareable, 64, "a quarter of the descriptor limit");
    for (d, data) in &allocs {
        let mut back = vec![0u8; data.len()];
        ctx.copy_dtoh(&mut back, *d).unwrap();
        assert!(&back == data);
    }
    for (d, _) in allocs.drain(..32) {
        ctx.free(d).unwrap();
    }
    // Freed shareable memory returns to the budget.
    let d = ctx.alloc(4096).unwrap();
    ctx.export_memory(d).unwrap();
    assert_clean(&ctx);
}
