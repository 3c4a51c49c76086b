//! Blocks that wait on earlier blocks (`tests/fixtures/block_chain.cu`: a
//! chained scan in which block `b` polls block `b - 1`'s flag, as CUB's
//! decoupled look-back does). On llvmpipe the runtime translates with
//! `Options::block_order_threads`, so each worker thread runs its blocks in
//! grid order; without it the second worker's first block waits for the
//! whole first half of the grid.

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload_u32, Lcg};
use ptxvk_runtime::{Context, Error, Function};

const PTX: &str = include_str!("../../tests/fixtures/block_chain.ptx");
const THREADS: u32 = 256;

/// The tests of this file run one at a time: the block order keeps waits
/// short only while llvmpipe's worker threads each get a core, and
/// `without_the_order_a_long_wait_fails_loudly_never_silently` keeps every
/// core busy polling until the loop limit (run beside it on 2 cores,
/// `blocks_waiting_on_earlier_blocks_finish` hit the limit in CI).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Entry `name` of `ptx` translated with `options` and loaded in `ctx`.
fn kernel(ctx: &Context, ptx: &str, file: &str, options: &ptxvk_translator::Options, name: &str) -> Function {
    let t = ptxvk_translator::translate(ptx, file, options).unwrap_or_else(|d| panic!("{d}"));
    let m = ctx.load_spirv(&t.spirv, t.info).unwrap();
    m.function(name).unwrap()
}

/// Runs `chained_scan` over `blocks` tiles of `tile` elements, translated
/// with `block_order_threads` (None: the runtime's choice) and without
/// unrolling spin loops when `!spin_unrolled` (so that only the order makes
/// the waits short); the launch's result. Every block's prefix is checked
/// when it succeeded.
fn chained_scan(
    ctx: &Context,
    blocks: u32,
    tile: u32,
    block_order_threads: Option<u32>,
    spin_unrolled: bool,
) -> Result<(), Error> {
    let mut options = ctx.translate_options();
    if let Some(n) = block_order_threads {
        options.block_order_threads = n;
    }
    if !spin_unrolled {
        options.unroll_spin_loops = 0;
    }
    let f = kernel(ctx, PTX, "block_chain.ptx", &options, "chained_scan");
    let n = (blocks * tile) as usize;
    let mut rng = Lcg(0x5eed_0b10c);
    let input: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let d_in = upload_u32(ctx, &input);
    let d_prefix = poisoned(ctx, blocks as usize);
    let d_flags = upload_u32(ctx, &vec![0; blocks as usize]);
    let d_out = poisoned(ctx, blocks as usize);
    let params = f
        .pack_params(&[
            &d_in.to_le_bytes(),
            &d_prefix.to_le_bytes(),
            &d_flags.to_le_bytes(),
            &d_out.to_le_bytes(),
            &tile.to_le_bytes(),
        ])
        .unwrap();
    ctx.launch(&f, [blocks, 1, 1], [THREADS, 1, 1], 0, &params)?;
    ctx.synchronize()?;
    // Host reference: each tile's sum of (x * 2654435761) >> 7, then the
    // exclusive (out) and inclusive (tile_prefix) running sums.
    let mut before = 0u32;
    let (out, prefix) = (download_u32(ctx, d_out, blocks as usize), download_u32(ctx, d_prefix, blocks as usize));
    for b in 0..blocks as usize {
        let tile = tile as usize;
        let sum =
            input[b * tile..(b + 1) * tile].iter().fold(0u32, |s, &x| s.wrapping_add(x.wrapping_mul(2654435761) >> 7));
        assert_eq!(out[b], before, "block {b}: prefix before it");
        before = before.wrapping_add(sum);
        assert_eq!(prefix[b], before, "block {b}: inclusive prefix");
    }
    Ok(())
}

#[test]
fn blocks_waiting_on_earlier_blocks_finish() {
    let _one_at_a_time = serial();
    let ctx = context();
    // 2,048 blocks: with llvmpipe's contiguous runs the block after the
    // first run would poll for the whole run.
    chained_scan(&ctx, 2048, 1024, None, true).unwrap_or_else(|e| panic!("{e}"));
    // The order alone keeps the waits short: spin loops not unrolled. A
    // wait then has 65535 polls, and an llvmpipe thread descheduled for
    // longer (a loaded machine; it happened in a CI run) ends it at the
    // loop limiter: loudly, as it must. Such a run is repeated, at most
    // twice, in a fresh context; a wrong prefix fails at once.
    let mut tries = 0;
    loop {
        let fresh = context();
        match chained_scan(&fresh, 2048, 1024, None, false) {
            Ok(()) => break,
            Err(Error::LaunchFailed(m)) if m.contains("loop limit") && tries < 2 => {
                eprintln!("spin loops as they are: {m}; again");
                tries += 1;
            }
            Err(e) => panic!("spin loops as they are: {e}"),
        }
    }
    // Grids smaller than, equal to and just past a multiple of the thread
    // count (the blocks left over run one by one at the end).
    for blocks in [1, 2, 3, 7, 16, 17, 33] {
        chained_scan(&ctx, blocks, 256, None, true).unwrap_or_else(|e| panic!("{blocks} blocks: {e}"));
    }
    assert_clean(&ctx);
}

#[test]
fn every_thread_count_is_a_permutation_of_the_grid() {
    // A wrong guess of llvmpipe's thread count only costs order: the
    // blocks are still each run once (checked on a grid with no waits
    // that llvmpipe's split could turn into a long one: 3 blocks).
    // Spin loops are not unrolled here, so a wait has 65535 polls: a worker
    // descheduled for longer (a loaded machine; a clean-clone CI run hit it
    // with 16 threads) ends it at the loop limiter, loudly. Such a run is
    // repeated, at most twice, in a fresh context; a wrong prefix fails at
    // once (`chained_scan` asserts them).
    let _one_at_a_time = serial();
    for threads in [2, 3, 5, 16] {
        let mut tries = 0;
        loop {
            let ctx = context();
            match chained_scan(&ctx, 3, 256, Some(threads), false) {
                Ok(()) => {
                    assert_clean(&ctx);
                    break;
                }
                Err(Error::LaunchFailed(m)) if m.contains("loop limit") && tries < 2 => {
                    eprintln!("{threads} threads: {m}; again");
                    tries += 1;
                }
                Err(e) => panic!("{threads} threads: {e}"),
            }
        }
    }
}

#[test]
fn without_the_order_a_long_wait_fails_loudly_never_silently() {
    // With %ctaid left as the workgroup id (and spin loops as they are),
    // the wait can outlast llvmpipe's loop limiter when it runs the grid on
    // two or more threads: the launch must then fail, not return wrong
    // prefixes (`chained_scan` checks every prefix when it succeeds). This
    // is what the block order is for. Whether it does outlast the limiter
    // is a matter of time: since each step of the spin region yields to the
    // block's other subgroups (`progress.rs`, on lavapipe), a step takes
    // long enough that the waits may end within the budget.
    let _one_at_a_time = serial();
    let ctx = context();
    match chained_scan(&ctx, 2048, 1024, Some(0), false) {
        Ok(()) => eprintln!("the chained blocks ran out of order within the loop budget, with the right prefixes"),
        Err(Error::LaunchFailed(m)) => assert!(m.contains("loop limit"), "{m}"),
        Err(e) => panic!("{e}"),
    }
}

/// A kernel that may wait (a loop polls a flag with `ld.volatile`, so
/// `%ctaid` is the block's ticket in start order; the flag is set) writes, from every thread, its `%ctaid`
/// into its own slot; each block's slot index is its `%ctaid`.
const TICKETS: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry ids(.param .u64 out, .param .u64 flag)
{
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [flag];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
$W:
    ld.volatile.global.u32 %r10, [%rd2];
    setp.eq.u32 %p1, %r10, 0;
    @%p1 bra $W;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ctaid.y;
    mov.u32 %r3, %ctaid.z;
    mov.u32 %r4, %nctaid.x;
    mov.u32 %r5, %nctaid.y;
    mad.lo.u32 %r6, %r3, %r5, %r2;
    mad.lo.u32 %r6, %r6, %r4, %r1;
    mov.u32 %r7, %ntid.x;
    mov.u32 %r8, %tid.x;
    mad.lo.u32 %r9, %r6, %r7, %r8;
    mul.wide.u32 %rd3, %r9, 16;
    add.s64 %rd4, %rd1, %rd3;
    add.u32 %r10, %r10, %r1;
    st.global.v4.u32 [%rd4], {%r10, %r2, %r3, %r8};
    ret;
}
"#;

#[test]
fn tickets_give_every_block_one_id_seen_by_all_its_threads() {
    let _one_at_a_time = serial();
    let ctx = context();
    // Two workers at least, whatever the machine: the start order is used.
    let mut options = ctx.translate_options();
    options.block_order_threads = options.block_order_threads.max(2);
    let f = kernel(&ctx, TICKETS, "tickets.ptx", &options, "ids");
    let flag = upload_u32(&ctx, &[0x1000]);
    // 1-, 2- and 3-dimensional grids, blocks of one and several subgroups,
    // launched back to back (the counter is back at 0 after each dispatch).
    for (grid, threads) in [([37, 1, 1], 256), ([5, 7, 3], 96), ([1, 1, 1], 8), ([64, 2, 1], 32)] {
        let blocks = (grid[0] * grid[1] * grid[2]) as usize;
        let n = blocks * threads as usize;
        let out = poisoned(&ctx, 4 * n);
        let params = f.pack_params(&[&out.to_le_bytes(), &flag.to_le_bytes()]).unwrap();
        ctx.launch(&f, grid, [threads, 1, 1], 0, &params).unwrap_or_else(|e| panic!("{e}"));
        ctx.launch(&f, grid, [threads, 1, 1], 0, &params).unwrap_or_else(|e| panic!("{e}"));
        ctx.synchronize().unwrap_or_else(|e| panic!("{e}"));
        let got = download_u32(&ctx, out, 4 * n);
        for b in 0..blocks {
            let (x, y, z) = (b as u32 % grid[0], (b as u32 / grid[0]) % grid[1], b as u32 / (grid[0] * grid[1]));
            for t in 0..threads as usize {
                let w = &got[4 * (b * threads as usize + t)..][..4];
                assert_eq!(w, [0x1000 + x, y, z, t as u32], "grid {grid:?}: block ({x}, {y}, {z}) thread {t}");
            }
        }
    }
    assert_clean(&ctx);
}

/// CUB's wait for a tile's status in its decoupled look-back, as NVRTC lays
/// it out (Warp 1.19's scans): entered in the middle, a warp vote as the
/// exit test, two arms (`membar.cta` or `nanosleep`) that meet again at the
/// poll. Here it also counts its polls and gives up after `limit`, so
/// that the test needs no second block: every thread writes its count.
const CUB_WAIT: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry wait_count(.param .u64 flag, .param .u64 out, .param .u32 limit)
{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [flag];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r21, [limit];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    setp.eq.s32 %p2, %r1, 1000;
    mov.u32 %r20, 0;
    mov.u32 %r3, -1;
    mov.u32 %r4, 350;
    ld.relaxed.gpu.v2.u32 {%r5, %r6}, [%rd1];
    bra.uni $H;
$L:
    ld.relaxed.gpu.v2.u32 {%r5, %r6}, [%rd1];
$H:
    setp.eq.s32 %p3, %r5, 0;
    setp.lt.u32 %p4, %r20, %r21;
    and.pred %p3, %p3, %p4;
    vote.sync.any.pred %p5, %p3, %r3;
    @%p5 bra $W;
    bra.uni $X;
$W:
    add.u32 %r20, %r20, 1;
    @%p2 bra $M;
    bra.uni $N;
$M:
    membar.cta;
    bra.uni $L;
$N:
    nanosleep.u32 %r4;
    bra.uni $L;
$X:
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd3, %rd2, %rd3;
    st.global.u32 [%rd3], %r20;
    ret;
}
"#;

#[test]
fn a_warp_voting_wait_outlasts_the_loop_limiter() {
    // 200,000 polls, three times llvmpipe's 65,535 loop iterations: the
    // translator copies the wait 16 times per iteration (`spin.rs`,
    // collective spin regions). Without the copies the launch fails
    // loudly at the limit.
    let _one_at_a_time = serial();
    let limit = 200_000u32;
    for unrolled in [true, false] {
        let ctx = context();
        let mut options = ctx.translate_options();
        if !unrolled {
            options.unroll_spin_loops = 0;
        }
        let f = kernel(&ctx, CUB_WAIT, "cub_wait.ptx", &options, "wait_count");
        let flag = upload_u32(&ctx, &[0, 0]);
        let out = poisoned(&ctx, 64);
        let params = f.pack_params(&[&flag.to_le_bytes(), &out.to_le_bytes(), &limit.to_le_bytes()]).unwrap();
        let r = ctx.launch(&f, [1, 1, 1], [64, 1, 1], 0, &params).and_then(|_| ctx.synchronize());
        match (unrolled, r) {
            (true, Ok(())) => assert_eq!(download_u32(&ctx, out, 64), vec![limit; 64]),
            (false, Err(Error::LaunchFailed(m))) if options.loop_limit => assert!(m.contains("loop limit"), "{m}"),
            (false, Ok(())) if !options.loop_limit => {}
            (u, r) => panic!("unrolled {u}: {r:?}"),
        }
    }
}

/// The same wait on a 16-byte `{status, value}` pair (CUB's look-back for
/// 8-byte values, `ld.relaxed.gpu.v2.u64`): such a load is seen whole
/// through the module's sequence locks (`emit/vector16.rs`) and has no loop
/// of its own, so 200,000 polls pass the limiter as the 8-byte ones do.
/// When the load waited in a lock's loop, each poll was also one of the
/// 65,535 iterations and the wait ended at the loop limit (about 62,000
/// polls; Warp's `float64` scans failed that way on a loaded machine).
#[test]
fn a_warp_voting_wait_on_16_bytes_outlasts_the_loop_limiter() {
    let _one_at_a_time = serial();
    let limit = 200_000u32;
    let ptx = CUB_WAIT
        .replace("ld.relaxed.gpu.v2.u32 {%r5, %r6}, [%rd1];", "ld.relaxed.gpu.v2.u64 {%rd5, %rd6}, [%rd1];")
        .replace("setp.eq.s32 %p3, %r5, 0;", "setp.eq.s64 %p3, %rd5, 0;");
    assert!(ptx.matches("v2.u64").count() == 2 && ptx.contains("%rd5, 0"));
    let ctx = context();
    let options = ctx.translate_options();
    let f = kernel(&ctx, &ptx, "cub_wait16.ptx", &options, "wait_count");
    let flag = upload_u32(&ctx, &[0, 0, 0, 0]);
    let out = poisoned(&ctx, 64);
    let params = f.pack_params(&[&flag.to_le_bytes(), &out.to_le_bytes(), &limit.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [64, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    assert_eq!(download_u32(&ctx, out, 64), vec![limit; 64]);
    assert_clean(&ctx);
}
