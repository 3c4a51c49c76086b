//! Forward progress of the diverged threads of a warp (issue 21, item 1):
//! nvcc's `tests/fixtures/forward_progress.cu`, spin locks that the lanes
//! of one warp contend for (global and shared, exchange and compare-and-
//! swap, nested, between a `match.any` election and a `__syncwarp` as in
//! Taichi's pointer SNodes) and a flag one lane waits for while another
//! sets it. Without the translator's interleaving (`progress.rs`) each of
//! these livelocks on lavapipe (the launch fails at the loop limiter).
//! Random inputs, poisoned outputs, exact checks of what the locks protect.

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload_u32, Lcg, POISON};
use ptxvk_runtime::Context;

const PTX: &str = include_str!("../../tests/fixtures/forward_progress.ptx");
/// The same source through `nvcc -G`: every atomic is a call.
const PTX_DEBUG: &str = include_str!("../../tests/fixtures/forward_progress_debug.ptx");

fn launch(ctx: &Context, kernel: &str, grid: u32, block: u32, params: &[&[u8]]) {
    launch_ptx(ctx, PTX, kernel, grid, block, params)
}

fn launch_ptx(ctx: &Context, ptx: &str, kernel: &str, grid: u32, block: u32, params: &[&[u8]]) {
    let m = ctx.load_module(ptx, "forward_progress.ptx").expect("load forward_progress.ptx");
    let f = m.function(kernel).unwrap();
    let packed = f.pack_params(params).unwrap();
    ctx.launch(&f, [grid, 1, 1], [block, 1, 1], 0, &packed).unwrap();
    ctx.synchronize().unwrap_or_else(|e| panic!("{kernel}: {e}"));
}

fn zeros(ctx: &Context, words: usize) -> u64 {
    upload_u32(ctx, &vec![0; words])
}

#[test]
fn global_spin_lock_excludes_lanes_of_one_warp() {
    locked_append(PTX);
}

/// The same lock in nvcc's debug build, where the spin loop tests what a
/// call of `atomicExch` (a function) returns: without following the call
/// the loop was no spin loop, and the warp livelocked.
#[test]
fn spin_lock_in_a_debug_build() {
    locked_append(PTX_DEBUG);
}

fn locked_append(ptx: &str) {
    let ctx = context();
    let n = 1000usize; // 8 blocks of 128, the last one partly idle
    let lock = zeros(&ctx, 1);
    let counter = zeros(&ctx, 1);
    let log = poisoned(&ctx, n + 8);
    launch_ptx(
        &ctx,
        ptx,
        "locked_append",
        8,
        128,
        &[&lock.to_le_bytes(), &counter.to_le_bytes(), &log.to_le_bytes(), &(n as i32).to_le_bytes()],
    );
    assert_eq!(download_u32(&ctx, counter, 1)[0] as usize, n, "counter");
    assert_eq!(download_u32(&ctx, lock, 1)[0], 0, "lock released");
    let got = download_u32(&ctx, log, n + 8);
    assert!(got[n..].iter().all(|&w| w == POISON), "wrote past the log");
    let mut seen = vec![false; n];
    for (k, &i) in got[..n].iter().enumerate() {
        assert!((i as usize) < n, "log[{k}] = {i:#x}");
        assert!(!seen[i as usize], "thread {i} logged twice");
        seen[i as usize] = true;
    }
    assert_clean(&ctx);
}

#[test]
fn shared_compare_and_swap_lock() {
    let ctx = context();
    let (blocks, block) = (6usize, 96usize);
    let n = blocks * block - 17;
    let mut g = Lcg(21);
    let values: Vec<u32> = (0..n).map(|_| g.next_u32() >> 3).collect();
    let din = upload_u32(&ctx, &values);
    let dout = poisoned(&ctx, blocks * 16 + 8);
    launch(
        &ctx,
        "shared_locked_histogram",
        blocks as u32,
        block as u32,
        &[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()],
    );
    let got = download_u32(&ctx, dout, blocks * 16 + 8);
    assert!(got[blocks * 16..].iter().all(|&w| w == POISON), "wrote past the histograms");
    for b in 0..blocks {
        let mut want = [0u32; 16];
        for v in &values[b * block..((b + 1) * block).min(n)] {
            want[(v & 15) as usize] += 1;
        }
        assert_eq!(&got[b * 16..(b + 1) * 16], &want, "block {b}");
    }
    assert_clean(&ctx);
}

/// The cells `activate_cells` and `activate_cells_with_calls` leave: every
/// key's cell holds a slot of its own, the slots are 0..(distinct keys - 1)
/// and `next` counts them; cells of no key stay -1.
fn check_cells(ctx: &Context, keys: &[u32], cells: u64, next: u64, keys_range: usize) {
    let mut present = vec![false; keys_range];
    keys.iter().for_each(|&k| present[k as usize] = true);
    let distinct = present.iter().filter(|&&p| p).count();
    let got = download_u32(ctx, cells, keys_range);
    assert_eq!(download_u32(ctx, next, 1)[0] as usize, distinct, "slots handed out");
    let mut slot_taken = vec![false; distinct];
    for (k, &c) in got.iter().enumerate() {
        if !present[k] {
            assert_eq!(c, u32::MAX, "cell {k} activated without a key");
            continue;
        }
        assert!((c as usize) < distinct, "cell {k} = {c:#x}");
        assert!(!slot_taken[c as usize], "slot {c} given twice");
        slot_taken[c as usize] = true;
    }
}

#[test]
fn nested_locks_after_a_match_any_election() {
    let ctx = context();
    let (n, keys_range) = (2048usize, 300usize);
    let mut g = Lcg(7);
    let keys: Vec<u32> = (0..n).map(|_| g.next_u32() % keys_range as u32).collect();
    let cells = upload_u32(&ctx, &vec![u32::MAX; keys_range]);
    let (alloc_lock, slot_lock, next) = (zeros(&ctx, 1), zeros(&ctx, 1), zeros(&ctx, 1));
    let dkeys = upload_u32(&ctx, &keys);
    launch(
        &ctx,
        "activate_cells",
        16,
        128,
        &[
            &cells.to_le_bytes(),
            &alloc_lock.to_le_bytes(),
            &slot_lock.to_le_bytes(),
            &next.to_le_bytes(),
            &dkeys.to_le_bytes(),
            &(n as i32).to_le_bytes(),
        ],
    );
    check_cells(&ctx, &keys, cells, next, keys_range);
    assert_eq!(download_u32(&ctx, alloc_lock, 1)[0] | download_u32(&ctx, slot_lock, 1)[0], 0, "locks released");
    assert_clean(&ctx);
}

/// `activate_cells` as Taichi's runtime has it (`activate_cells_with_calls`):
/// a grid-stride loop, an assertion function with a lock of its own called
/// outside and inside the locks, the slot taken in a function of its own.
/// Spin loops in the callees and in the kernel, calls inside critical
/// sections.
#[test]
fn nested_locks_with_calls_inside() {
    let ctx = context();
    let (n, keys_range) = (5000usize, 700usize);
    let mut g = Lcg(11);
    let keys: Vec<u32> = (0..n).map(|_| g.next_u32() % keys_range as u32).collect();
    let cells = upload_u32(&ctx, &vec![u32::MAX; keys_range]);
    let (locks, next, assert_state) = (zeros(&ctx, 2), zeros(&ctx, 1), zeros(&ctx, 2));
    let dkeys = upload_u32(&ctx, &keys);
    launch(
        &ctx,
        "activate_cells_with_calls",
        4,
        128,
        &[
            &cells.to_le_bytes(),
            &locks.to_le_bytes(),
            &next.to_le_bytes(),
            &dkeys.to_le_bytes(),
            &(n as i32).to_le_bytes(),
            &assert_state.to_le_bytes(),
        ],
    );
    check_cells(&ctx, &keys, cells, next, keys_range);
    assert_eq!(download_u32(&ctx, locks, 2), [0, 0], "locks released");
    assert_eq!(download_u32(&ctx, assert_state, 2), [0, 0], "no assertion failed");
    assert_clean(&ctx);
}

#[test]
fn flag_set_by_a_later_lane() {
    let ctx = context();
    let groups = 200usize;
    let mut g = Lcg(3);
    let input: Vec<u32> = (0..groups).map(|_| g.next_u32() >> 4).collect();
    let din = upload_u32(&ctx, &input);
    let data = poisoned(&ctx, groups);
    let flags = zeros(&ctx, groups);
    let dout = poisoned(&ctx, groups + 8);
    launch(
        &ctx,
        "flag_handoff",
        (groups * 4).div_ceil(64) as u32,
        64,
        &[
            &din.to_le_bytes(),
            &data.to_le_bytes(),
            &flags.to_le_bytes(),
            &dout.to_le_bytes(),
            &(groups as i32).to_le_bytes(),
        ],
    );
    let got = download_u32(&ctx, dout, groups + 8);
    assert!(got[groups..].iter().all(|&w| w == POISON), "wrote past the output");
    for (k, &x) in input.iter().enumerate() {
        assert_eq!(got[k], x.wrapping_mul(3).wrapping_add(1), "group {k}");
    }
    assert_clean(&ctx);
}

/// Lanes in pairs that wait for each other from the two arms of one branch
/// (`crossed_handoff`): the odd lane publishes and then waits, the even one
/// waits and then publishes. The code before each wait that the wait cannot
/// reach is left out of the interleaved region, but not an arm that holds
/// the other wait: both arms must run side by side. Then on the debug
/// build, whose waits lie behind more blocks.
#[test]
fn lanes_waiting_for_each_other_from_both_arms() {
    let ctx = context();
    for ptx in [PTX, PTX_DEBUG] {
        let n = 2 * 301usize;
        let mut g = Lcg(77);
        let input: Vec<u32> = (0..n).map(|_| g.next_u32() >> 8).collect();
        let din = upload_u32(&ctx, &input);
        let flags = zeros(&ctx, n);
        let dout = poisoned(&ctx, n + 8);
        launch_ptx(
            &ctx,
            ptx,
            "crossed_handoff",
            n.div_ceil(96) as u32,
            96,
            &[&din.to_le_bytes(), &flags.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()],
        );
        let got = download_u32(&ctx, dout, n + 8);
        assert!(got[n..].iter().all(|&w| w == POISON), "wrote past the output");
        for p in (0..n).step_by(2) {
            let (even, odd) = (input[p] | 1, input[p + 1] | 1);
            assert_eq!(got[p], odd.wrapping_mul(2).wrapping_add(even), "even lane {p}");
            assert_eq!(got[p + 1], even.wrapping_add(odd), "odd lane {}", p + 1);
        }
    }
    assert_clean(&ctx);
}

/// The first warp of each block waits, without a barrier, for values the
/// block's last warp publishes with flags (`warp_handoff`). A warp comes
/// after the waiting one in the block, and on lavapipe the subgroups of a
/// workgroup run one after another between barriers: each iteration of the
/// waiting region yields to them (`progress.rs`, "Between subgroups"). Block
/// sizes of 2, 3 and 4 warps, so the middle warps' own code runs too.
#[test]
fn flag_set_by_a_later_warp_of_the_block() {
    let ctx = context();
    for warps in [2usize, 3, 4] {
        let blocks = 5usize;
        let block = warps * 32;
        let mut g = Lcg(41 + warps as u64);
        let input: Vec<u32> = (0..blocks * 32).map(|_| g.next_u32() >> 4).collect();
        let din = upload_u32(&ctx, &input);
        let data = poisoned(&ctx, blocks * 32);
        let flags = zeros(&ctx, blocks * 32);
        let dout = poisoned(&ctx, blocks * block + 8);
        launch(
            &ctx,
            "warp_handoff",
            blocks as u32,
            block as u32,
            &[&din.to_le_bytes(), &data.to_le_bytes(), &flags.to_le_bytes(), &dout.to_le_bytes()],
        );
        let got = download_u32(&ctx, dout, blocks * block + 8);
        assert!(got[blocks * block..].iter().all(|&w| w == POISON), "{warps} warps: wrote past the output");
        for b in 0..blocks {
            for t in 0..block {
                let (warp, lane) = (t / 32, t % 32);
                let x = input[b * 32 + lane];
                let want = if warp == 0 {
                    x.wrapping_mul(3).wrapping_add(lane as u32).wrapping_add(1)
                } else if warp == warps - 1 {
                    u32::MAX
                } else {
                    x ^ warp as u32
                };
                assert_eq!(got[b * block + t], want, "{warps} warps: block {b} thread {t}");
            }
        }
    }
    assert_clean(&ctx);
}

/// Two flag handoffs with a branch between them whose one arm has block
/// barriers (even blocks) and whose other arm stores (odd blocks)
/// (`two_handoffs`). The second wait's region and the first's both reach
/// the arm without barriers; when both took it, the two dispatch loops
/// became one tangle and lanes of the even blocks left the first wait
/// with wrong values. Found by the differential tester with every loop
/// interleaved.
#[test]
fn two_waits_around_a_block_barrier() {
    let ctx = context();
    let (blocks, block) = (6usize, 64usize);
    let n = blocks * block;
    let mut g = Lcg(77);
    let input: Vec<u32> = (0..n).map(|_| g.next_u32() >> 4).collect();
    let din = upload_u32(&ctx, &input);
    let data = poisoned(&ctx, n / 2);
    let flags = zeros(&ctx, n / 2);
    let side = poisoned(&ctx, n);
    let dout = poisoned(&ctx, n + 8);
    let params =
        [&din.to_le_bytes(), &data.to_le_bytes(), &flags.to_le_bytes(), &side.to_le_bytes(), &dout.to_le_bytes()];
    launch(&ctx, "two_handoffs", blocks as u32, block as u32, &params.map(|p| &p[..]));
    // The reference, phase by phase.
    let handoff = |v: &[u32], k: u32| -> Vec<u32> {
        (0..n).map(|i| if i % 4 == 0 { v[i].wrapping_add(v[i + 3].wrapping_mul(k)) } else { v[i] }).collect()
    };
    let v1 = handoff(&input, 3);
    let v2: Vec<u32> = (0..n)
        .map(|i| {
            let (b, t) = (i / block, i % block);
            if b % 2 == 0 {
                v1[i] ^ v1[b * block + (t + 1) % block]
            } else {
                v1[i].wrapping_mul(5).wrapping_add(1)
            }
        })
        .collect();
    let v3 = handoff(&v2, 7);
    let got = download_u32(&ctx, dout, n + 8);
    assert!(got[n..].iter().all(|&w| w == POISON), "wrote past the output");
    let got_side = download_u32(&ctx, side, n);
    for i in 0..n {
        assert_eq!(got[i], v3[i], "thread {i}");
        let want_side = if (i / block) % 2 == 1 { v2[i] } else { POISON };
        assert_eq!(got_side[i], want_side, "side, thread {i}");
    }
    assert_clean(&ctx);
}

#[test]
fn lock_free_compare_and_swap_loops_still_right() {
    let ctx = context();
    let n = 700usize;
    let mut g = Lcg(33);
    let floats: Vec<f32> = (0..n).map(|_| (g.next_u32() >> 8) as f32 / 4096.0 - 1000.0).collect();
    let din = upload_u32(&ctx, &floats.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
    let best = upload_u32(&ctx, &[(-1.0e30f32).to_bits()]);
    launch(&ctx, "cas_float_max", 6, 128, &[&din.to_le_bytes(), &best.to_le_bytes(), &(n as i32).to_le_bytes()]);
    let want = floats.iter().cloned().fold(f32::MIN, f32::max);
    assert_eq!(f32::from_bits(download_u32(&ctx, best, 1)[0]), want, "maximum");
    // Small integers in doubles: every order of the additions gives the same sum.
    let doubles: Vec<f64> = (0..n).map(|_| (g.next_u32() % 1000) as f64).collect();
    let words: Vec<u32> = doubles
        .iter()
        .flat_map(|d| {
            let b = d.to_bits();
            [b as u32, (b >> 32) as u32]
        })
        .collect();
    let dd = upload_u32(&ctx, &words);
    let sum = zeros(&ctx, 2);
    launch(&ctx, "cas_double_add", 6, 128, &[&dd.to_le_bytes(), &sum.to_le_bytes(), &(n as i32).to_le_bytes()]);
    let s = download_u32(&ctx, sum, 2);
    assert_eq!(f64::from_bits(s[0] as u64 | (s[1] as u64) << 32), doubles.iter().sum::<f64>(), "sum");
    assert_clean(&ctx);
}

/// Every lane of each warp takes a ticket under a lock that a function of
/// its own (`take_ticket`, not inlined) takes and releases
/// (`tickets_from_a_callee`). The critical section and the return follow the
/// spin loop in the callee; when the interleaving left the returning block
/// after the dispatch loop, the lane holding the lock waited there for the
/// spinning ones and the warp livelocked (the launch failed at the loop
/// limiter).
#[test]
fn lock_in_a_callee_contended_by_lanes_of_a_warp() {
    let ctx = context();
    let n = 700usize; // 6 blocks of 128, the last one partly idle
    let lock = zeros(&ctx, 1);
    let next = zeros(&ctx, 1);
    let tickets = poisoned(&ctx, n + 8);
    launch(
        &ctx,
        "tickets_from_a_callee",
        n.div_ceil(128) as u32,
        128,
        &[&lock.to_le_bytes(), &next.to_le_bytes(), &tickets.to_le_bytes(), &(n as i32).to_le_bytes()],
    );
    assert_eq!(download_u32(&ctx, next, 1)[0] as usize, n, "tickets handed out");
    assert_eq!(download_u32(&ctx, lock, 1)[0], 0, "lock released");
    let got = download_u32(&ctx, tickets, n + 8);
    assert!(got[n..].iter().all(|&w| w == POISON), "wrote past the tickets");
    let mut seen = vec![false; n];
    for (i, &t) in got[..n].iter().enumerate() {
        assert!((t as usize) < n, "thread {i}: ticket {t:#x}");
        assert!(!seen[t as usize], "ticket {t} given twice");
        seen[t as usize] = true;
    }
    assert_clean(&ctx);
}

/// The result of `bounded_wait` for `waiters` threads of one block polling
/// a flag nobody sets at most `rounds` times: the polls each made, or the
/// launch's error.
/// A context of its own: a failed launch leaves its context unusable.
fn bounded_wait(block: u32, waiters: u32, rounds: u32) -> Result<Vec<u32>, ptxvk_runtime::Error> {
    let ctx = &context();
    let m = ctx.load_module(PTX, "forward_progress.ptx").expect("load forward_progress.ptx");
    let f = m.function("bounded_wait").unwrap();
    let flag = zeros(ctx, 1);
    let polls = poisoned(ctx, block as usize);
    let packed = f
        .pack_params(&[&flag.to_le_bytes(), &polls.to_le_bytes(), &waiters.to_le_bytes(), &rounds.to_le_bytes()])
        .unwrap();
    ctx.launch(&f, [1, 1, 1], [block, 1, 1], 0, &packed).unwrap();
    ctx.synchronize()?;
    let got = download_u32(ctx, polls, block as usize);
    assert_clean(ctx);
    Ok(got)
}

/// A wait that outlasts lavapipe's loop budget fails the launch; it never
/// ends with its outputs unwritten. The wait sits in a branch, and
/// llvmpipe's limiter ended its dispatch loop at half the iterations the
/// translator counted (it also counts the one-pass loop inside each
/// iteration): the launch reported success with every output still
/// poisoned. Shorter waits give their exact count.
#[test]
fn a_wait_past_the_loop_budget_fails_loudly() {
    for (block, waiters) in [(8u32, 5u32), (64, 40)] {
        let got = bounded_wait(block, waiters, 1000).unwrap_or_else(|e| panic!("1000 polls: {e}"));
        for (i, &k) in got.iter().enumerate() {
            assert_eq!(k, if (i as u32) < waiters { 1000 } else { POISON }, "1000 polls, thread {i}");
        }
        for rounds in [40_000u32, 2_000_000] {
            match bounded_wait(block, waiters, rounds) {
                Ok(got) => {
                    for (i, &k) in got.iter().enumerate() {
                        assert_eq!(k, if (i as u32) < waiters { rounds } else { POISON }, "{rounds} polls, thread {i}");
                    }
                }
                Err(ptxvk_runtime::Error::LaunchFailed(m)) => assert!(m.contains("loop limit"), "{m}"),
                Err(e) => panic!("{rounds} polls: {e}"),
            }
        }
    }
}
