//! Loop-limit detection on llvmpipe (`Options::loop_limit`): a thread that
//! runs more loop iterations than lavapipe's loop limiter allows (65535 in
//! all per invocation) fails the launch with an error instead of computing
//! wrong results; right below the limit the results are right. Kernels:
//! `tests/fixtures/loop_limit.ptx`. On other devices the limit does not
//! exist and every launch succeeds.

mod common;

use common::context;
use ptxvk_runtime::{Context, Error};

const POISON: u32 = 0xABAB_ABAB;
const THREADS: usize = 32;

/// Launch `entry` with two u32 parameters on one block of 32 threads;
/// the launch's result and `out`.
fn run(ctx: &Context, entry: &str, a: u32, b: u32) -> (Result<(), Error>, Vec<u32>) {
    let m = ctx.load_module(include_str!("../../tests/fixtures/loop_limit.ptx"), "loop_limit.ptx").unwrap();
    let f = m.function(entry).unwrap();
    let d = ctx.alloc(THREADS as u64 * 4).unwrap();
    ctx.memset_d32(d, POISON, THREADS as u64).unwrap();
    let params = f.pack_params(&[&d.to_le_bytes(), &a.to_le_bytes(), &b.to_le_bytes()]).unwrap();
    let r = ctx.launch(&f, [1, 1, 1], [THREADS as u32, 1, 1], 0, &params).and_then(|_| ctx.synchronize());
    let mut bytes = vec![0u8; THREADS * 4];
    // A failed context refuses copies; the output is then not looked at.
    let out = if ctx.copy_dtoh(&mut bytes, d).is_ok() {
        bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    } else {
        Vec::new()
    };
    (r, out)
}

/// Print what each case does (`cargo test -p ptxvk-runtime --test loop_limit explore -- --ignored --nocapture`,
/// with and without `PTXVK_LOOP_LIMIT=0`).
#[test]
#[ignore]
fn explore() {
    let cases: &[(&str, u32, u32)] = &[
        ("single", 65534, 0),
        ("single", 65535, 0),
        ("single", 65536, 0),
        ("single", 65530, 1),
        ("single", 65529, 1),
        ("sequential", 100, 100),
        ("sequential", 20000, 20000),
        ("sequential", 30000, 100),
        ("sequential", 100, 30000),
        ("sequential", 60000, 1),
        ("sequential", 1, 60000),
        ("sequential", 32767, 32768),
        ("sequential", 32768, 32768),
        ("sequential", 32767, 32767),
        ("nested", 255, 255),
        ("nested", 256, 255),
        ("nested", 256, 256),
        ("divergent", 40000, 25535),
        ("divergent", 40000, 25534),
        ("divergent", 40000, 30000),
    ];
    for &(entry, a, b) in cases {
        let ctx = context();
        let (r, out) = run(&ctx, entry, a, b);
        let head: Vec<u32> = out.iter().take(8).copied().collect();
        println!("{entry} {a} {b}: {:?} {head:?}", r.map_err(|e| e.to_string()));
    }
}
