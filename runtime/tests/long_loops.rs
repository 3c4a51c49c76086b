//! Loops longer than llvmpipe's loop limiter (65535 iterations per
//! invocation in all) run to the end: small innermost loops get 8 copies of
//! their body per counted iteration (`translator/src/unroll.rs`, on by
//! default on llvmpipe). nvcc kernels of `tests/fixtures/long_loops.cu`:
//! a one-block loop, a loop with a branch in its body, a loop with an early
//! exit, a loop in a kernel with block barriers (emitted in
//! workgroup-uniform mode on the emulated warp path), a loop of two blocks
//! of about 20 instructions (NVIDIA Warp's segmented sum); each past 65535
//! iterations per thread, on random inputs, against a host reference, with
//! poisoned outputs. On other devices there is no
//! limit and the same results are expected.

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload, upload_u32, Lcg, POISON};

const PTX: &str = include_str!("../../tests/fixtures/long_loops.ptx");

/// `serial_hash`'s (and `checked_hash`'s) result for thread `t`.
fn serial_hash_of(input: &[u32], t: usize) -> u32 {
    input.iter().fold(2166136261u32.wrapping_add(t as u32), |h, &v| (h ^ v).wrapping_mul(16777619))
}

/// `block_sum`'s result for block `b` of `threads` threads, `total`
/// threads in the grid.
fn block_sum_of(input: &[u32], b: usize, threads: usize, total: usize) -> u32 {
    (0..threads).fold(0u32, |t, k| {
        let s =
            (b * threads + k..input.len()).step_by(total).fold(0u32, |s, i| s.wrapping_mul(31).wrapping_add(input[i]));
        t ^ s.wrapping_add(k as u32)
    })
}

#[test]
fn serial_hash_of_300000_elements() {
    let ctx = context();
    let m = ctx.load_module(PTX, "long_loops.ptx").unwrap();
    let f = m.function("serial_hash").unwrap();
    let n = 300_000usize;
    let mut g = Lcg(11);
    let input: Vec<u32> = (0..n).map(|_| g.next_u32()).collect();
    let din = upload_u32(&ctx, &input);
    let dout = poisoned(&ctx, 32);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let out = download_u32(&ctx, dout, 32);
    for (t, &h) in out.iter().enumerate() {
        let want = serial_hash_of(&input, t);
        assert_eq!(h, want, "thread {t}");
    }
    assert_clean(&ctx);
}

#[test]
fn strided_loop_with_a_branch_of_100000_iterations() {
    let ctx = context();
    let m = ctx.load_module(PTX, "long_loops.ptx").unwrap();
    let f = m.function("strided_branchy").unwrap();
    let (blocks, threads) = (2usize, 32usize);
    let total = blocks * threads;
    // 100,000 iterations for most threads, one fewer for the last 17.
    let n = total * 100_000 - 17;
    let mut g = Lcg(12);
    let input: Vec<u32> = (0..n).map(|_| g.next_u32()).collect();
    let din = upload_u32(&ctx, &input);
    let dout = poisoned(&ctx, n);
    let dodd = poisoned(&ctx, 2 * total);
    let params = f
        .pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &dodd.to_le_bytes(), &(n as i32).to_le_bytes()])
        .unwrap();
    ctx.launch(&f, [blocks as u32, 1, 1], [threads as u32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let out = download_u32(&ctx, dout, n);
    for (i, (&o, &v)) in out.iter().zip(&input).enumerate() {
        let want = if v & 1 == 1 { POISON } else { v.min(0x8000_0000) };
        assert_eq!(o, want, "element {i} (input {v:#x})");
    }
    let odd = download_u32(&ctx, dodd, 2 * total);
    for t in 0..total {
        let (mut sum, mut count) = (0u32, 0u32);
        for &v in input.iter().skip(t).step_by(total) {
            if v & 1 == 1 {
                sum = sum.wrapping_add(v);
                count += 1;
            }
        }
        assert_eq!((odd[2 * t], odd[2 * t + 1]), (sum, count), "thread {t}");
    }
    assert_clean(&ctx);
}

#[test]
fn search_with_an_early_exit_past_the_limit() {
    let ctx = context();
    let m = ctx.load_module(PTX, "long_loops.ptx").unwrap();
    let f = m.function("find_first").unwrap();
    let (threads, len) = (32usize, 200_000usize);
    let key = 0x5eed_1234u32;
    let mut g = Lcg(13);
    let mut input: Vec<u32> = (0..threads * len)
        .map(|_| {
            let v = g.next_u32();
            if v == key {
                v ^ 1
            } else {
                v
            }
        })
        .collect();
    // Where each thread finds the key: not at all, at either end, past the
    // limiter's 65535, and at every offset modulo 8 (each copy of the body).
    let mut want = vec![-1i32; threads];
    for (t, w) in want.iter_mut().enumerate() {
        let at = match t % 4 {
            0 => None,
            1 => Some(0),
            2 => Some(len - 1),
            _ => Some(65_536 + 7 * t + t % 8),
        };
        if let Some(at) = at {
            input[t * len + at] = key;
            // A second occurrence later must not be the answer.
            let later = len - 1 - (t % 3);
            if later > at {
                input[t * len + later] = key;
            }
            *w = at as i32;
        }
    }
    let din = upload_u32(&ctx, &input);
    let dout = poisoned(&ctx, threads);
    let params = f
        .pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &key.to_le_bytes(), &(len as i32).to_le_bytes()])
        .unwrap();
    ctx.launch(&f, [1, 1, 1], [threads as u32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let out: Vec<i32> = download_u32(&ctx, dout, threads).into_iter().map(|v| v as i32).collect();
    assert_eq!(out, want);
    assert_clean(&ctx);
}

#[test]
fn loop_of_100000_iterations_in_a_kernel_with_barriers() {
    let ctx = context();
    let m = ctx.load_module(PTX, "long_loops.ptx").unwrap();
    let f = m.function("block_sum").unwrap();
    let (blocks, threads) = (2usize, 64usize);
    let total = blocks * threads;
    // 100,000 iterations for most threads, one fewer for the last 5.
    let n = total * 100_000 - 5;
    let mut g = Lcg(14);
    let input: Vec<u32> = (0..n).map(|_| g.next_u32()).collect();
    let din = upload_u32(&ctx, &input);
    let dout = poisoned(&ctx, blocks);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [blocks as u32, 1, 1], [threads as u32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap_or_else(|e| panic!("{e}"));
    let out = download_u32(&ctx, dout, blocks);
    for (b, &got) in out.iter().enumerate() {
        assert_eq!(got, block_sum_of(&input, b, threads, total), "block {b}");
    }
    assert_clean(&ctx);
}

/// `checked_hash`: the serial hash with a `printf` check in its loop (as
/// NVIDIA Warp's `wp.expect_eq` compiles; its `fem` lookups loop past the
/// limiter with such checks). The call keeps the loop from being unrolled,
/// so 200,000 iterations need 6 of the 8 resume rounds (about 28,000 per
/// invocation: the loop's back-edge and the `printf` arm that no lane takes
/// count two each), which an entry with a `printf` call and its `.local`
/// argument buffer now gets (`translator/src/resume.rs`). The check fires
/// once per thread, at an input read in a resume round, and prints what
/// it should.
#[test]
fn hash_of_200000_elements_with_a_printf_check() {
    let ctx = context();
    let m = ctx.load_module(PTX, "long_loops.ptx").unwrap();
    let f = m.function("checked_hash").unwrap();
    let n = 200_000usize;
    let mut g = Lcg(16);
    let mut input: Vec<u32> = (0..n).map(|_| g.next_u32().min(0xFFFF_FFFE)).collect();
    // One input the check reports, late enough to be read in a resume round.
    let flagged = 150_000;
    input[flagged] = 0xFFFF_FFFF;
    ctx.capture_printf(true);
    let din = upload_u32(&ctx, &input);
    let dout = poisoned(&ctx, 32);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap_or_else(|e| panic!("{e}"));
    let out = download_u32(&ctx, dout, 32);
    for (t, &h) in out.iter().enumerate() {
        let want = serial_hash_of(&input, t);
        assert_eq!(h, want, "thread {t}");
    }
    // Every thread reads every input: 32 lines, each the same.
    let printed = String::from_utf8(ctx.take_printf_output()).unwrap();
    let line = format!("checked_hash: unexpected input 4294967295 at {flagged}\n");
    assert_eq!(printed, line.repeat(32));
    assert_clean(&ctx);
}

/// `block_sum` of 64 threads, one block, each thread `per_thread`
/// iterations, translated without unrolling (so that llvmpipe's own budget
/// of 65535 is the limit) and without resume rounds (a kernel with a barrier
/// never resumes): the launch's result and block 0's sum against the host's.
fn block_sum_unrolled_off(ctx: &ptxvk_runtime::Context, per_thread: usize) -> (Result<(), ptxvk_runtime::Error>, bool) {
    let options = ptxvk_translator::Options { unroll_loops: 0, ..ctx.translate_options() };
    let t = ptxvk_translator::translate(PTX, "long_loops.ptx", &options).unwrap();
    let m = ctx.load_spirv(&t.spirv, t.info).unwrap();
    let f = m.function("block_sum").unwrap();
    let threads = 64usize;
    let n = threads * per_thread;
    let mut g = Lcg(15);
    let input: Vec<u32> = (0..n).map(|_| g.next_u32()).collect();
    let din = upload_u32(ctx, &input);
    let dout = poisoned(ctx, 1);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    let r = ctx.launch(&f, [1, 1, 1], [threads as u32, 1, 1], 0, &params).and_then(|_| ctx.synchronize());
    if r.is_err() {
        return (r, false);
    }
    (r, download_u32(ctx, dout, 1)[0] == block_sum_of(&input, 0, threads, threads))
}

/// The loop-limit detection in a kernel that is not resumable and runs in
/// workgroup-uniform mode (a barrier after the loop; the detection there is
/// the cut flag alone, no iteration count: `translator/src/emit/loop_limit.rs`):
/// 60,000 iterations per thread plus thread 0's 64 give the host's sum;
/// 70,000 fail the launch with the loop-limit error on llvmpipe instead of
/// summing part of the slice (elsewhere they give the host's sum too).
#[test]
fn past_the_limit_a_kernel_with_barriers_fails_loudly() {
    let ctx = context();
    let (r, right) = block_sum_unrolled_off(&ctx, 60_000);
    r.unwrap_or_else(|e| panic!("60,000 iterations: {e}"));
    assert!(right, "60,000 iterations: wrong sum");
    assert_clean(&ctx);
    let ctx = context();
    let (r, right) = block_sum_unrolled_off(&ctx, 70_000);
    if ctx.info().driver_name != "llvmpipe" {
        r.unwrap_or_else(|e| panic!("70,000 iterations: {e}"));
        assert!(right, "70,000 iterations: wrong sum");
        return;
    }
    match r {
        Err(ptxvk_runtime::Error::LaunchFailed(msg)) => assert!(msg.contains("loop limit of 65535"), "{msg}"),
        other => panic!("70,000 iterations: expected the loop-limit error, got {other:?}"),
    }
}

/// NVIDIA Warp's deterministic scatter-add (`deterministic_reduce_kernel`):
/// the first record of each run of equal destinations sums the run in
/// order, per component. One run of 69,000 records in 3 components is
/// 207,000 iterations of a loop whose body is two blocks of about 20
/// instructions, past 3 x 65535 (the copies such a body got when the
/// unrolling budget was 64 instructions; Warp's test failed there).
#[test]
fn segmented_sum_of_a_run_of_69000_records() {
    let ctx = context();
    let m = ctx.load_module(PTX, "long_loops.ptx").unwrap();
    let f = m.function("segment_sums").unwrap();
    let components = 3usize;
    // Run lengths: one long run, then short ones of 1 to 9 records.
    let mut g = Lcg(15);
    let mut runs = vec![69_000usize];
    while runs.iter().sum::<usize>() < 70_000 {
        runs.push(1 + g.next_u32() as usize % 9);
    }
    let n: usize = runs.iter().sum();
    let mut keys = Vec::with_capacity(n);
    for (dest, &len) in runs.iter().enumerate() {
        for _ in 0..len {
            keys.push(((dest as u64) << 32) | u64::from(keys.len() as u32));
        }
    }
    // A permutation of the records' values.
    let mut indices: Vec<i32> = (0..n as i32).collect();
    for i in (1..n).rev() {
        indices.swap(i, g.next_u32() as usize % (i + 1));
    }
    let values: Vec<f32> = (0..n * components).map(|_| (g.next_u32() >> 8) as f32 / 65536.0 - 128.0).collect();
    let dkeys = upload(&ctx, &keys.iter().flat_map(|k| k.to_le_bytes()).collect::<Vec<u8>>());
    let dindices = upload(&ctx, &indices.iter().flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>());
    let dvalues = upload(&ctx, &values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
    let dout = poisoned(&ctx, runs.len() * components);
    let params = f
        .pack_params(&[
            &dkeys.to_le_bytes(),
            &dindices.to_le_bytes(),
            &dvalues.to_le_bytes(),
            &(n as i32).to_le_bytes(),
            &(components as i32).to_le_bytes(),
            &dout.to_le_bytes(),
        ])
        .unwrap();
    let threads = 256usize;
    ctx.launch(&f, [n.div_ceil(threads) as u32, 1, 1], [threads as u32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap_or_else(|e| panic!("{e}"));
    let out = download_u32(&ctx, dout, runs.len() * components);
    let mut first = 0;
    for (dest, &len) in runs.iter().enumerate() {
        for c in 0..components {
            let value = |r: usize| values[indices[r] as usize * components + c];
            let want = (first + 1..first + len).fold(value(first), |acc, r| acc + value(r));
            assert_eq!(out[dest * components + c], want.to_bits(), "destination {dest}, component {c}");
        }
        first += len;
    }
    assert_clean(&ctx);
}

/// `many_searches`' result for thread `i`.
fn many_searches_of(cols: &[i32], keys: &[i32], i: usize) -> i32 {
    let lower_bound = |key: i32| cols.partition_point(|&c| c < key) as i32;
    let searches =
        (0..40).fold(0i32, |acc, s| acc.wrapping_add((s as i32 + 1).wrapping_mul(lower_bound(keys[40 * i + s]))));
    let below = cols.iter().filter(|&&c| c < keys[40 * i]).count() as i32;
    searches.wrapping_add(below)
}

#[test]
fn forty_searches_and_a_scan_of_300000_elements() {
    // 41 loops in one function (NVIDIA Warp's sparse-matrix kernels have a
    // hundred binary searches): their copies share one budget
    // (`translator/src/unroll.rs`, `MAX_UNROLLED_FUNCTION`), so some loops
    // get fewer copies or none (which ones: `translator/tests/unroll_budget.rs`).
    // The results are right with loops unrolled and not side by side; the
    // serial scan runs 300,000 iterations per thread, past the limiter, on
    // its copies (and resume rounds, where the entry has them).
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/many_searches.ptx"), "many_searches.ptx").unwrap();
    let f = m.function("many_searches").unwrap();
    let (n, row_len) = (64usize, 300_000usize);
    let mut g = Lcg(41);
    // Sorted column indices with repeats and gaps; keys below, inside and
    // above their range.
    let mut cols: Vec<i32> = (0..row_len).map(|_| (g.next_u32() % 1_000_000) as i32).collect();
    cols.sort_unstable();
    let keys: Vec<i32> = (0..40 * n).map(|_| (g.next_u32() % 1_100_000) as i32 - 50_000).collect();
    let dcols = upload_u32(&ctx, &cols.iter().map(|&c| c as u32).collect::<Vec<u32>>());
    let dkeys = upload_u32(&ctx, &keys.iter().map(|&k| k as u32).collect::<Vec<u32>>());
    let dout = poisoned(&ctx, n + 8);
    let params = f
        .pack_params(&[
            &dout.to_le_bytes(),
            &dcols.to_le_bytes(),
            &dkeys.to_le_bytes(),
            &(n as i32).to_le_bytes(),
            &(row_len as i32).to_le_bytes(),
        ])
        .unwrap();
    ctx.launch(&f, [1, 1, 1], [n as u32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap_or_else(|e| panic!("{e}"));
    let out = download_u32(&ctx, dout, n + 8);
    for (i, &got) in out[..n].iter().enumerate() {
        assert_eq!(got as i32, many_searches_of(&cols, &keys, i), "thread {i}");
    }
    assert!(out[n..].iter().all(|&w| w == POISON), "wrote past the end");
    assert_clean(&ctx);
}
