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
/// the launch's result and `out`. The module is translated without loop
/// unrolling (`Options::unroll_loops`), so the counts below are llvmpipe's
/// own limit; [`unrolled_loops_run_eight_times_longer`] has it on.
fn run(ctx: &Context, entry: &str, a: u32, b: u32) -> (Result<(), Error>, Vec<u32>) {
    run_unrolled(ctx, entry, a, b, 0)
}

/// [`run`] with `unroll` copies of small loop bodies.
fn run_unrolled(ctx: &Context, entry: &str, a: u32, b: u32, unroll: u32) -> (Result<(), Error>, Vec<u32>) {
    // Without resume rounds (`Options::resume_loops`), which these kernels
    // qualify for: see `resumed_loops_run_to_the_end`.
    let options = ptxvk_translator::Options { unroll_loops: unroll, resume_loops: false, ..ctx.translate_options() };
    run_with(ctx, entry, a, b, &options)
}

/// [`run`] with `options`.
fn run_with(
    ctx: &Context,
    entry: &str,
    a: u32,
    b: u32,
    options: &ptxvk_translator::Options,
) -> (Result<(), Error>, Vec<u32>) {
    let t = ptxvk_translator::translate(include_str!("../../tests/fixtures/loop_limit.ptx"), "loop_limit.ptx", options)
        .unwrap();
    let m = ctx.load_spirv(&t.spirv, t.info).unwrap();
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

/// Whether the device is llvmpipe (lavapipe), whose loop limiter this is about.
fn on_llvmpipe(ctx: &Context) -> bool {
    ctx.info().driver_name == "llvmpipe"
}

/// Runs below the limit: the launch succeeds with `out[tid] = want(tid)`.
fn passes(entry: &str, a: u32, b: u32, want: impl Fn(usize) -> u32) {
    let ctx = context();
    let (r, out) = run(&ctx, entry, a, b);
    r.unwrap_or_else(|e| panic!("{entry}({a}, {b}): {e}"));
    for (t, &v) in out.iter().enumerate() {
        assert_eq!(v, want(t), "{entry}({a}, {b}), thread {t}");
    }
}

/// Runs past the limit: on llvmpipe the launch fails with the loop-limit
/// error (without the detection the results are wrong: see `explore`);
/// elsewhere it succeeds with `out[tid] = want(tid)`.
fn fails_on_llvmpipe(entry: &str, a: u32, b: u32, want: impl Fn(usize) -> u32) {
    let ctx = context();
    let llvmpipe = on_llvmpipe(&ctx);
    let (r, out) = run(&ctx, entry, a, b);
    if !llvmpipe {
        r.unwrap_or_else(|e| panic!("{entry}({a}, {b}): {e}"));
        for (t, &v) in out.iter().enumerate() {
            assert_eq!(v, want(t), "{entry}({a}, {b}), thread {t}");
        }
        return;
    }
    match r {
        Err(Error::LaunchFailed(msg)) => assert!(msg.contains("loop limit of 65535"), "{entry}({a}, {b}): {msg}"),
        other => panic!("{entry}({a}, {b}): expected the loop-limit error, got {other:?} with {out:?}"),
    }
    // The context stays failed, as after a trap.
    assert!(ctx.synchronize().is_err());
}

#[test]
fn one_loop_of_65535_iterations_runs_and_65536_fail() {
    passes("single", 65535, 0, |_| 65535);
    fails_on_llvmpipe("single", 65536, 0, |_| 65536);
}

#[test]
fn the_lane_with_the_most_iterations_counts() {
    // Lane t of each 8-lane subgroup runs n + (t & 7) iterations.
    passes("single", 65528, 1, |t| 65528 + (t as u32 & 7));
    fails_on_llvmpipe("single", 65529, 1, |t| 65529 + (t as u32 & 7));
}

#[test]
fn nested_loops_share_the_budget() {
    // 256 x 255 inner iterations and 256 outer ones: the 65536th vector
    // iteration ends where every lane leaves, which llvmpipe allows.
    passes("nested", 256, 255, |_| 256 * 255);
    fails_on_llvmpipe("nested", 256, 256, |_| 256 * 256);
}

#[test]
fn sequential_loops_share_the_budget() {
    // The second loop comes after the first (loop exits are placed outside
    // loop constructs), so n1 + n2 iterations count: 65535 in all run.
    passes("sequential", 32767, 32768, |_| 32767 + 32768);
    fails_on_llvmpipe("sequential", 32768, 32768, |_| 32768 * 2);
}

#[test]
fn divergent_arms_add_up() {
    // Odd lanes loop n1 times, even ones n2 times: llvmpipe runs one loop
    // after the other for the subgroup.
    let want = |n1: u32, n2: u32| move |t: usize| if t % 2 == 1 { n1 } else { n2 };
    passes("divergent", 40000, 25535, want(40000, 25535));
    fails_on_llvmpipe("divergent", 40000, 30000, want(40000, 30000));
}

#[test]
fn a_compare_and_swap_loop_the_limiter_cuts_fails_the_launch() {
    // 32 threads add 1.0 to one half, the low half of out[0], which starts
    // as the poison's low half (each add rounds to half precision in some
    // order; adding 1.0 to values of one sign rounds the same in any order).
    let mut sum = half::f16::from_bits(POISON as u16);
    for _ in 0..THREADS {
        sum += half::f16::ONE;
    }
    let low = |t: usize, n: u32| if t == 0 { (POISON & 0xffff_0000) | sum.to_bits() as u32 } else { n };
    passes("then_atomic", 1000, 0, |t| low(t, 1000));
    // Each 8-lane subgroup's compare-and-swap loop goes round once per lane;
    // after a first loop of 65530 iterations the limiter cuts it: without
    // the detection, adds are lost silently.
    fails_on_llvmpipe("then_atomic", 65530, 0, |t| low(t, 65530));
}

#[test]
fn unrolled_loops_run_eight_times_longer() {
    // With 8 copies of the body per counted iteration (the default on
    // llvmpipe), a loop of 8 x 65535 iterations is whole; one more fails.
    let ctx = context();
    let llvmpipe = on_llvmpipe(&ctx);
    let (r, out) = run_unrolled(&ctx, "single", 8 * 65535, 0, 8);
    r.unwrap();
    assert!(out.iter().all(|&v| v == 8 * 65535), "{out:?}");
    let (r, out) = run_unrolled(&ctx, "single", 8 * 65535 + 1, 0, 8);
    if llvmpipe {
        assert!(matches!(&r, Err(Error::LaunchFailed(m)) if m.contains("loop limit")), "{r:?}");
    } else {
        r.unwrap();
        assert!(out.iter().all(|&v| v == 8 * 65535 + 1), "{out:?}");
    }
    // Iteration counts that leave the unrolled body at every copy.
    for n in (8 * 1000..8 * 1000 + 9).chain([1, 2, 7, 9]) {
        let ctx = context();
        let (r, out) = run_unrolled(&ctx, "single", n, 0, 8);
        r.unwrap();
        assert!(out.iter().all(|&v| v == n), "{n}: {out:?}");
    }
    // Nested loops: the inner one is unrolled, the outer one counts as before.
    let ctx = context();
    let (r, out) = run_unrolled(&ctx, "nested", 2000, 200, 8);
    r.unwrap();
    assert!(out.iter().all(|&v| v == 2000 * 200), "{out:?}");
}

#[test]
fn resumed_loops_run_to_the_end() {
    // With resume rounds (the default on llvmpipe; `translator/src/resume.rs`),
    // a thread that nears the limiter saves itself at a loop header and goes
    // on in a later dispatch: loops of millions of iterations, of lanes
    // with different counts, nested, one after the other and in the arms
    // of a branch, run to the end.
    let ctx = context();
    // Counting the loops' iterations (`Options::resume_count`), as entries
    // with `printf` or compare-and-swap atomics do.
    let options = ptxvk_translator::Options { unroll_loops: 8, resume_count: true, ..ctx.translate_options() };
    assert_eq!(options.resume_loops, on_llvmpipe(&ctx));
    resumed_cases(&options);
}

#[test]
fn loops_the_limiter_cuts_resume_where_they_end() {
    // Without the loop count (the default for these kernels, which have no
    // loop of the translator's own; `Options::resume_count`), no thread
    // saves itself before the limiter: the limiter cuts its loop, and the
    // thread, at the loop's merge with the registers it took the back-edge
    // with, saves itself as the header would have (`emit/func.rs`,
    // `save_if_cut`). That is also what happens where the count falls
    // behind llvmpipe's. The same cases run to the end.
    let ctx = context();
    let options = ptxvk_translator::Options { unroll_loops: 8, ..ctx.translate_options() };
    assert!(!options.resume_count);
    resumed_cases(&options);
    // And without unrolling: every counted iteration is one of the loop's.
    resumed_cases(&ptxvk_translator::Options { unroll_loops: 0, ..options });
}

/// The cases of [`resumed_loops_run_to_the_end`], translated with `options`.
fn resumed_cases(options: &ptxvk_translator::Options) {
    // Without unrolling, a twentieth of the iterations (8 rounds of at most
    // 65535 counted iterations each after the launch's own).
    let scale = if options.unroll_loops == 0 { 20 } else { 1 };
    let cases: [(&str, u32, u32); 6] = [
        ("single", 5_000_000 / scale, 0),
        // Lanes of one vector with 8 different counts: they stop in
        // different rounds.
        ("single", 1_500_000 / scale, 77_777 / scale),
        // An inner loop of 300 iterations (100 not unrolled), unrolled, in
        // an outer loop.
        ("nested", 20_000 / scale, if scale == 1 { 300 } else { 100 }),
        ("sequential", 3_000_000 / scale, 4_000_000 / scale),
        ("divergent", 3_000_000 / scale, 5_000_000 / scale),
        // Short loops stay in the launch's own dispatch.
        ("single", 1000, 3),
    ];
    for (entry, a, b) in cases {
        let ctx = context();
        let (r, out) = run_with(&ctx, entry, a, b, options);
        r.unwrap_or_else(|e| panic!("{entry}({a}, {b}), {options:?}: {e}"));
        for (t, &v) in out.iter().enumerate() {
            // Each kernel's iterations (`tests/fixtures/loop_limit.ptx`).
            let want = match entry {
                "single" => a + (t as u32 & 7) * b,
                "nested" => a * b,
                "sequential" => a + b,
                _ if t & 1 == 1 => a,
                _ => b,
            };
            assert_eq!(v, want, "{entry}({a}, {b}), thread {t}");
        }
    }
}

#[test]
fn past_the_last_resume_round_the_launch_fails() {
    // 8 rounds after the launch by default (`PTXVK_RESUME_ROUNDS`): 9
    // invocations of at most 65,535 counted iterations of 32 copies of this
    // small loop's body (8 unrolled, 4 times more in a resumable entry).
    // More fails loudly, as without rounds.
    let ctx = context();
    if !on_llvmpipe(&ctx) {
        return;
    }
    let options = ptxvk_translator::Options { unroll_loops: 8, ..ctx.translate_options() };
    let (r, _) = run_with(&ctx, "single", 9 * 32 * 65_535 + 1, 0, &options);
    assert!(matches!(&r, Err(Error::LaunchFailed(m)) if m.contains("loop limit")), "{r:?}");
}

#[test]
fn the_error_names_every_kernel_that_may_have_set_it() {
    // Two kernels of one module before one synchronisation, the second past
    // the limit: the module's trap word does not say which one set it, so
    // the error names both (it once named only the first, which had no loop
    // trouble at all: CUB's scan init kernel was blamed for its scan kernel).
    let ctx = context();
    if !on_llvmpipe(&ctx) {
        return;
    }
    let options = ptxvk_translator::Options { unroll_loops: 0, resume_loops: false, ..ctx.translate_options() };
    let t =
        ptxvk_translator::translate(include_str!("../../tests/fixtures/loop_limit.ptx"), "loop_limit.ptx", &options)
            .unwrap();
    let m = ctx.load_spirv(&t.spirv, t.info).unwrap();
    let d = ctx.alloc(THREADS as u64 * 4).unwrap();
    for (entry, a, b) in [("single", 10u32, 0u32), ("sequential", 40000, 40000)] {
        let f = m.function(entry).unwrap();
        let params = f.pack_params(&[&d.to_le_bytes(), &a.to_le_bytes(), &b.to_le_bytes()]).unwrap();
        ctx.launch(&f, [1, 1, 1], [THREADS as u32, 1, 1], 0, &params).unwrap();
    }
    match ctx.synchronize() {
        Err(Error::LaunchFailed(msg)) => {
            assert!(msg.contains("loop limit of 65535"), "{msg}");
            assert!(msg.contains("2 kernels of its module") && msg.contains("single, sequential"), "{msg}");
        }
        other => panic!("expected the loop-limit error, got {other:?}"),
    }
}

/// Print what each case does (`cargo test -p ptxvk-runtime --test loop_limit explore -- --ignored --nocapture`,
/// with and without `PTXVK_LOOP_LIMIT=0`).
#[test]
#[ignore]
fn explore() {
    let cases: &[(&str, u32, u32)] = &[
        ("single", 65535, 0),
        ("single", 65536, 0),
        ("single", 65528, 1),
        ("single", 65529, 1),
        ("sequential", 32767, 32767),
        ("sequential", 32767, 32768),
        ("sequential", 32768, 32768),
        ("nested", 256, 255),
        ("nested", 256, 256),
        ("divergent", 40000, 25535),
        ("divergent", 40000, 25536),
        ("divergent", 40000, 30000),
    ];
    for &(entry, a, b) in cases {
        let ctx = context();
        let (r, out) = run(&ctx, entry, a, b);
        let head: Vec<u32> = out.iter().take(8).copied().collect();
        println!("{entry} {a} {b}: {:?} {head:?}", r.map_err(|e| e.to_string()));
    }
}

/// Time loop-heavy launches (`cargo test --release -p ptxvk-runtime --test loop_limit cost -- --ignored
/// --nocapture`, with and without `PTXVK_LOOP_LIMIT=0`).
#[test]
#[ignore]
fn cost() {
    let ctx = context();
    // A tight loop: 255 x 255 iterations of one add per thread.
    let m = ctx.load_module(include_str!("../../tests/fixtures/loop_limit.ptx"), "loop_limit.ptx").unwrap();
    let f = m.function("nested").unwrap();
    let d = ctx.alloc(256 * 4).unwrap();
    let params = f.pack_params(&[&d.to_le_bytes(), &255u32.to_le_bytes(), &255u32.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [256, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let t = std::time::Instant::now();
    for _ in 0..5 {
        ctx.launch(&f, [8, 1, 1], [256, 1, 1], 0, &params).unwrap();
    }
    ctx.synchronize().unwrap();
    println!("nested 255x255, 5 x 8 x 256 threads: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    // Collatz steps (a data-dependent loop), as in the events test.
    let m = ctx.load_module(include_str!("../../tests/fixtures/data_loop.ptx"), "data_loop.ptx").unwrap();
    let f = m.function("collatz_steps").unwrap();
    let n = 1usize << 16;
    let input: Vec<u8> = (0..n as u32).flat_map(|v| (v | 0x7000_0001).to_le_bytes()).collect();
    let din = ctx.alloc(input.len() as u64).unwrap();
    ctx.copy_htod(din, &input).unwrap();
    let dout = ctx.alloc(input.len() as u64).unwrap();
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as u32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [(n / 256) as u32, 1, 1], [256, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let t = std::time::Instant::now();
    for _ in 0..5 {
        ctx.launch(&f, [(n / 256) as u32, 1, 1], [256, 1, 1], 0, &params).unwrap();
    }
    ctx.synchronize().unwrap();
    println!("collatz_steps, 5 x 65536 threads: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
}

#[test]
fn resumed_registers_keep_their_bits() {
    // Registers of every kind live at the loop header (f16, b16, f16x2,
    // bf16, f64, a predicate, u32, u64) come back bit for bit in each round.
    let ctx = context();
    let options = ptxvk_translator::Options { unroll_loops: 8, ..ctx.translate_options() };
    let t = ptxvk_translator::translate(
        include_str!("../../tests/fixtures/resume_types.ptx"),
        "resume_types.ptx",
        &options,
    )
    .unwrap();
    let m = ctx.load_spirv(&t.spirv, t.info).unwrap();
    let f = m.function("k").unwrap();
    let d = ctx.alloc(32).unwrap();
    ctx.memset_d32(d, POISON, 8).unwrap();
    // 3,000,000 iterations: more than one round on lavapipe.
    let n = 3_000_000u32;
    let params = f.pack_params(&[&d.to_le_bytes(), &n.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [1, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let mut b = [0u8; 32];
    ctx.copy_dtoh(&mut b, d).unwrap();
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    assert_eq!(u16_at(0), 0x3C00, "f16");
    assert_eq!(u32_at(4), 0x4000_3C00, "f16x2");
    assert_eq!(u16_at(8), 0x3F80, "bf16");
    assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 1.0f64.to_bits(), "f64");
    assert_eq!(u32_at(24), 8, "predicate and b16");
    assert_eq!(u32_at(28), n, "the loop's count");
}
