//! The descriptor budget of shareable allocations (its own test binary, so
//! its lowered `RLIMIT_NOFILE` stays in this process): allocations past a
//! quarter of the limit (in memory objects: chunks that small allocations
//! are carved from, and large allocations) still work, from pooled memory
//! that cannot be shared.
#![cfg(unix)]

mod common;

use common::{assert_clean, context, Lcg};
use ptxvk_runtime::Error;

#[test]
fn allocations_past_the_descriptor_budget_are_pooled() {
    // A hard limit of 48 descriptors gives a budget of 12 memory objects:
    // 12 chunks of 4 largest pieces each, or fewer with allocations that
    // have memory of their own.
    let lim = libc::rlimit { rlim_cur: 48, rlim_max: 48 };
    // SAFETY: a valid limit; this test binary has no other test.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    let ctx = context();
    if !ctx.info().supports_ipc_memory {
        eprintln!("skipped: {} cannot share memory", ctx.info().name);
        return;
    }
    const PIECE: u64 = 16 << 20;
    let mut rng = Lcg(0xb0d9e7);
    let mut shareable = 0;
    let mut allocs = Vec::new();
    // Two allocations of memory of their own (larger than a piece), then
    // largest pieces: 2 + 10 * 4 = 42 exportable.
    for i in 0..60u64 {
        let n = if i < 2 { PIECE + 4096 } else { PIECE - i * 256 };
        let d = ctx.alloc(n).unwrap();
        match ctx.export_memory(d) {
            Ok(e) => {
                assert_eq!(e.size, n);
                shareable += 1;
            }
            Err(Error::InvalidValue(_)) => {}
            Err(e) => panic!("export {i}: {e}"),
        }
        // The first and last bytes of each (the memory is touched lazily).
        let data = rng.bytes(512);
        ctx.copy_htod(d, &data[..256]).unwrap();
        ctx.copy_htod(d + n - 256, &data[256..]).unwrap();
        allocs.push((d, n, data));
    }
    assert_eq!(shareable, 42, "a quarter of the descriptor limit in memory objects");
    for (d, n, data) in &allocs {
        let mut back = vec![0u8; 512];
        ctx.copy_dtoh(&mut back[..256], *d).unwrap();
        ctx.copy_dtoh(&mut back[256..], d + n - 256).unwrap();
        assert!(&back == data);
    }
    for (d, _, _) in allocs.drain(..6) {
        ctx.free(d).unwrap();
    }
    // Freed exportable memory is carved again, and returns to the budget.
    for _ in 0..4 {
        let d = ctx.alloc(4096).unwrap();
        ctx.export_memory(d).unwrap();
    }
    assert_clean(&ctx);
}
