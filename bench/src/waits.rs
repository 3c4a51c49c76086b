//! What a wait costs when it does not wait: `bounded_wait` of
//! `tests/fixtures/forward_progress.cu` (`while (*flag == 0 && k < rounds)
//! k++;` on a `volatile` flag, then each thread writes its poll count), run
//! with the flag already set, so that every thread polls once and leaves.
//! On a GPU that is one load per thread. On lavapipe the lowerings that let
//! real waits run (`docs/cooperative.md`) are paid in full even then:
//! llvmpipe runs the code of an arm no lane takes, so every copy of an
//! unrolled spin region runs, masked off, each time the loop is entered.
//!
//! Columns: the default translation, then without one of those lowerings
//! each (the block ticket of `emit/block_order.rs`; the spin copies of
//! `spin.rs`, at most 16 (what a loop whose copies need exit tests, as
//! this one, has anyway) and none; the interleaving of `progress.rs`;
//! the loop counting of `emit/loop_limit.rs`), and without all of them (the
//! baseline the ratios are taken against). Median of [`super::RUNS`] runs
//! after a first one (pipeline compile); every thread's count is checked
//! (0) after the first run, the output poisoned before it.

use std::error::Error;
use std::time::{Duration, Instant};

use ptxvk_runtime::Context;
use ptxvk_translator::Options;

use super::{median, RUNS};

/// `nvcc -ptx -arch=sm_80 -O3 forward_progress.cu`.
const PTX: &str = include_str!("../../tests/fixtures/forward_progress.ptx");
/// Threads (all of them wait): 4,096 blocks of 256.
const THREADS: u32 = 1 << 20;
/// Threads per block.
const BLOCK: u32 = 256;

/// A column: its label and how its options differ from the context's.
type Column = (&'static str, fn(&mut Options));

fn columns() -> [Column; 7] {
    fn all_off(o: &mut Options) {
        o.block_order_threads = 0;
        o.unroll_spin_loops = 0;
        o.forward_progress = false;
        o.loop_limit = false;
        o.resume_loops = false;
    }
    [
        ("default", |_| {}),
        ("no ticket", |o| o.block_order_threads = 0),
        ("16 copies", |o| o.unroll_spin_loops = o.unroll_spin_loops.min(16)),
        ("no copies", |o| o.unroll_spin_loops = 0),
        ("no interleave", |o| o.forward_progress = false),
        ("no counting", |o| {
            o.loop_limit = false;
            o.resume_loops = false;
        }),
        ("all off", all_off),
    ]
}

/// First launch and median run of one column; whether every count was 0.
fn measure(ctx: &Context, change: fn(&mut Options)) -> Result<(Duration, Duration, bool), Box<dyn Error>> {
    let mut options = ctx.translate_options();
    change(&mut options);
    let t = ptxvk_translator::translate(PTX, "forward_progress.ptx", &options).map_err(|d| d.to_string())?;
    let m = ctx.load_spirv(&t.spirv, t.info)?;
    let f = m.function("bounded_wait").ok_or("forward_progress.ptx has no bounded_wait")?;
    let flag = ctx.alloc(4)?;
    ctx.copy_htod(flag, &1u32.to_le_bytes())?;
    let polls = ctx.alloc(u64::from(THREADS) * 4)?;
    ctx.memset_d32(polls, 0xa5a5_a5a5, u64::from(THREADS))?;
    let rounds = i32::MAX;
    let params = f.pack_params(&[
        &flag.to_le_bytes(),
        &polls.to_le_bytes(),
        &(THREADS as i32).to_le_bytes(),
        &rounds.to_le_bytes(),
    ])?;
    let launch = || -> Result<Duration, Box<dyn Error>> {
        let start = Instant::now();
        ctx.launch(&f, [THREADS / BLOCK, 1, 1], [BLOCK, 1, 1], 0, &params)?;
        ctx.synchronize()?;
        Ok(start.elapsed())
    };
    let first = launch()?;
    let mut out = vec![0u8; THREADS as usize * 4];
    ctx.copy_dtoh(&mut out, polls)?;
    let right = out.chunks_exact(4).all(|c| c == [0, 0, 0, 0]);
    let runs = (0..RUNS).map(|_| launch()).collect::<Result<Vec<_>, _>>()?;
    ctx.free(flag)?;
    ctx.free(polls)?;
    Ok((first, median(runs), right))
}

/// Prints each column's first launch and run time, and its run time's
/// ratio to the baseline's; `Ok(false)` when a count was wrong.
pub fn run(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    println!("A wait that does not wait: bounded_wait, {THREADS} threads, the flag already set (lavapipe)");
    let mut rows = Vec::new();
    for (label, change) in columns() {
        rows.push((label, measure(ctx, change)?));
    }
    let base = rows.last().map(|(_, (_, run, _))| run.as_secs_f64()).unwrap_or(1.0);
    let mut ok = true;
    for (label, (first, run, right)) in rows {
        ok &= right;
        println!(
            "  {label:<14} first launch {:7.3} s, run {:9.3} ms, {:6.1}x the baseline{}",
            first.as_secs_f64(),
            run.as_secs_f64() * 1e3,
            run.as_secs_f64() / base,
            if right { "" } else { "  WRONG RESULTS" }
        );
    }
    Ok(ok)
}
