//! Vector accesses as NVIDIA's GPUs perform them: an aligned 8-byte vector
//! store is seen whole by a concurrent vector load (nvcc's
//! `tests/fixtures/vector_atomicity.cu`). CUB's decoupled look-back scan
//! publishes each tile's `{status, value}` pair with one
//! `st.relaxed.gpu.v2.u32`; split into two 32-bit stores, a reader could
//! take a tile's new status with its old value, and Thrust's scans came
//! out wrong without an error in about one run in twenty on lavapipe.
//!
//! Even blocks store pairs `{x, !x}` over and over, odd blocks load the
//! same slots at the same time and count the pairs they saw torn, and the
//! pairs they saw in the middle of the writes (to show that the two ran
//! together; with two or more CPUs llvmpipe runs blocks in parallel). The
//! 16-byte form (CUB's `{status, value}` pairs of 8-byte values,
//! `.v2.u64`) has no single Vulkan access and goes through the module's
//! sequence locks (`translator/src/emit/vector16.rs`: writers take a slot,
//! readers never wait): a reader must see `{f, 3f}`, a pair that was
//! written, never halves of two. The writers here rewrite their pairs
//! without pause, the hardest case for the readers' tries.

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload};
use ptxvk_runtime::{Context, Error};

const PTX: &str = include_str!("../../tests/fixtures/vector_atomicity.ptx");
const BLOCK: usize = 64;
const PAIRS: usize = 8; // writer/reader block pairs
const ROUNDS: i32 = 10_000;

/// Runs `kernel` on slots holding `init` and returns, per reader thread,
/// (torn, middle); `None` when the launch failed at lavapipe's loop
/// limiter (see [`check`]).
fn race(ctx: &Context, kernel: &str, init: &[u8]) -> Option<Vec<(u32, u32)>> {
    let m = ctx.load_module(PTX, "vector_atomicity.ptx").expect("load vector_atomicity.ptx");
    let f = m.function(kernel).unwrap();
    let threads = 2 * PAIRS * BLOCK;
    let slots = upload(ctx, init);
    let torn = poisoned(ctx, threads);
    let middle = poisoned(ctx, threads);
    let packed = f
        .pack_params(&[&slots.to_le_bytes(), &torn.to_le_bytes(), &middle.to_le_bytes(), &ROUNDS.to_le_bytes()])
        .unwrap();
    ctx.launch(&f, [2 * PAIRS as u32, 1, 1], [BLOCK as u32, 1, 1], 0, &packed).unwrap();
    match ctx.synchronize() {
        Ok(()) => {}
        Err(Error::LaunchFailed(m)) if m.contains("loop limit") => {
            eprintln!("{kernel}: {m}");
            return None;
        }
        Err(e) => panic!("{kernel}: {e}"),
    }
    let torn = download_u32(ctx, torn, threads);
    let middle = download_u32(ctx, middle, threads);
    assert_clean(ctx);
    let mut readers = Vec::new();
    for b in 0..2 * PAIRS {
        for t in 0..BLOCK {
            let i = b * BLOCK + t;
            if b % 2 == 0 {
                assert_eq!((torn[i], middle[i]), (0, 0), "{kernel}: writer {i}");
            } else {
                assert!(middle[i] <= ROUNDS as u32, "{kernel}: reader {i} middle {:#x}", middle[i]);
                readers.push((torn[i], middle[i]));
            }
        }
    }
    Some(readers)
}

fn pair_slots() -> Vec<u8> {
    (0..PAIRS * BLOCK).flat_map(|_| [0u32, !0u32]).flat_map(u32::to_le_bytes).collect()
}

/// Runs `kernel` until its readers saw stores in progress (blocks of one
/// launch need not run at the same time), at most five times, and checks
/// that no reader saw a torn vector in any run. A run may also fail loudly
/// at lavapipe's loop limiter: a 16-byte store waits for its slot, and a
/// holder that the OS deschedules (a loaded machine) makes the waiter
/// spend its 65535 iterations; such runs are repeated too.
fn check(kernel: &str, init: &[u8]) {
    let parallel = std::thread::available_parallelism().map_or(1, |n| n.get()) > 1;
    for attempt in 0..5 {
        let ctx = context();
        let Some(readers) = race(&ctx, kernel, init) else { continue };
        let torn: u64 = readers.iter().map(|r| u64::from(r.0)).sum();
        let middle: u64 = readers.iter().map(|r| u64::from(r.1)).sum();
        eprintln!("{kernel}: {torn} torn, {middle} in the middle of the writes, {} readers", readers.len());
        assert_eq!(torn, 0, "{kernel}: readers saw torn vectors");
        if middle > 0 || !parallel {
            return;
        }
        eprintln!("{kernel}: run {attempt}: writers and readers did not overlap; again");
    }
    // With one CPU llvmpipe runs the blocks one after another and the test
    // proves nothing; with more, this many runs without overlap is a fault.
    panic!("{kernel}: no run completed with readers seeing stores in progress");
}

/// One test, the forms one after another: run beside each other they
/// would share the CPUs, and the blocks of one launch less often overlap.
#[test]
fn vectors_are_seen_whole() {
    for kernel in ["pair_race_relaxed", "pair_race_volatile", "pair_race_cg"] {
        check(kernel, &pair_slots());
    }
    check("flag_value_race", &vec![0u8; PAIRS * BLOCK * 16]);
}
