//! The cost of lock step for legacy warp-synchronous code on the emulated
//! warp path: `sort_segments` of `tests/fixtures/warp_synchronous_global.cu`
//! (each warp bitonic-sorts its own 256 elements of a global array with plain
//! loads and stores and no `__syncwarp`, as CuPy's `partition_kernel` does),
//! translated as usual (the workgroup meets before each global load after a
//! store and each store after an access, `translator/src/emit/lockstep.rs`)
//! against the same PTX translated with `PTXVK_LOCKSTEP=0` (the baseline:
//! no meetings, and wrong results when a warp spans several subgroups, as on
//! lavapipe). First launch (pipeline compile included) and the median of
//! [`super::RUNS`] runs, each on the same random input; the lock-step
//! output is checked against the host's sort.
//!
//! Second, the price of the write-after-read points in code that needs none:
//! `reduce_tpl<float, 256>` of `tests/corpus/src/templates.cu`, a tree
//! reduction with `__syncthreads()` after each level, whose `s[t] += s[t + k]`
//! stores after shared loads and so gets a meeting per level (the analysis
//! does not see that the lanes that store and the lanes whose elements are
//! read are disjoint). Its output is checked against the same tree on the
//! host, bit for bit.

use std::error::Error;
use std::time::{Duration, Instant};

use ptxvk_runtime::Context;

use super::{median, RUNS};

/// `nvcc -ptx -arch=sm_80 -O3 warp_synchronous_global.cu`.
const PTX: &str = include_str!("../../tests/fixtures/warp_synchronous_global.ptx");
/// Elements each warp sorts.
const SEGMENT: usize = 256;
/// Segments (warps): 64 blocks of 8 warps.
const SEGMENTS: usize = 512;
/// Threads per block.
const BLOCK: u32 = 256;

/// Prints the first launch and run times with lock step and without, each
/// with whether its results were right, and their ratios.
fn report(on: (Duration, Duration, bool), off: (Duration, Duration, bool)) {
    println!(
        "  with lock step    first launch {:7.3} s, run {:8.3} ms{}",
        on.0.as_secs_f64(),
        on.1.as_secs_f64() * 1e3,
        if on.2 { "" } else { "  WRONG RESULTS" }
    );
    println!(
        "  PTXVK_LOCKSTEP=0  first launch {:7.3} s, run {:8.3} ms  (results {})",
        off.0.as_secs_f64(),
        off.1.as_secs_f64() * 1e3,
        if off.2 { "right" } else { "wrong" }
    );
    println!(
        "  ratio with / without: first launch {:5.2}, run {:5.2}",
        on.0.as_secs_f64() / off.0.as_secs_f64(),
        on.1.as_secs_f64() / off.1.as_secs_f64()
    );
}

/// `nvcc -ptx -arch=sm_80 -O3 templates.cu` (`tests/corpus/src/templates.cu`).
const TEMPLATES_PTX: &str = include_str!("../../tests/corpus/ptx/templates.sm_80.O3.ptx");
/// `reduce_tpl<float, 256>`.
const REDUCE: &str = "_Z10reduce_tplIfLi256EEvPKT_PS0_i";
/// Blocks of the tree reduction (256 floats each).
const REDUCE_BLOCKS: usize = 16384;

/// Loads `src` as translated now (`lockstep`, or with `PTXVK_LOCKSTEP=0`).
fn load(ctx: &Context, src: &str, name: &str, lockstep: bool) -> Result<ptxvk_runtime::Module, Box<dyn Error>> {
    if lockstep {
        std::env::remove_var(ptxvk_runtime::instance::LOCKSTEP_ENV);
    } else {
        std::env::set_var(ptxvk_runtime::instance::LOCKSTEP_ENV, "0");
    }
    let loaded = ctx.load_module(src, name);
    std::env::remove_var(ptxvk_runtime::instance::LOCKSTEP_ENV);
    Ok(loaded?)
}

/// First launch and median run time of `reduce_tpl<float, 256>` over
/// `input`, and the block sums of the first run.
fn measure_reduce(
    ctx: &Context,
    input: &[f32],
    lockstep: bool,
) -> Result<(Duration, Duration, Vec<u32>), Box<dyn Error>> {
    let m = load(ctx, TEMPLATES_PTX, "templates.sm_80.O3.ptx", lockstep)?;
    let f = m.function(REDUCE).ok_or("missing kernel reduce_tpl<float, 256>")?;
    let bytes: Vec<u8> = input.iter().flat_map(|x| x.to_le_bytes()).collect();
    let din = ctx.alloc(bytes.len() as u64)?;
    let dout = ctx.alloc((REDUCE_BLOCKS * 4) as u64)?;
    ctx.copy_htod(din, &bytes)?;
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(input.len() as i32).to_le_bytes()])?;
    let launch = || -> Result<Duration, Box<dyn Error>> {
        let start = Instant::now();
        ctx.launch(&f, [REDUCE_BLOCKS as u32, 1, 1], [256, 1, 1], 0, &params)?;
        ctx.synchronize()?;
        Ok(start.elapsed())
    };
    ctx.copy_htod(dout, &vec![0xa5u8; REDUCE_BLOCKS * 4])?;
    let first = launch()?;
    let mut output = vec![0u8; REDUCE_BLOCKS * 4];
    ctx.copy_dtoh(&mut output, dout)?;
    let runs = (0..RUNS).map(|_| launch()).collect::<Result<Vec<_>, _>>()?;
    ctx.free(din)?;
    ctx.free(dout)?;
    let sums = output.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok((first, median(runs), sums))
}

/// The tree reduction's block sums on the host, in the kernel's order.
fn host_tree_sums(input: &[f32]) -> Vec<u32> {
    input
        .chunks(256)
        .map(|block| {
            let mut s = block.to_vec();
            let mut k = 128;
            while k > 0 {
                for t in 0..k {
                    s[t] += s[t + k];
                }
                k /= 2;
            }
            s[0].to_bits()
        })
        .collect()
}

/// The tree reduction with and without the write-after-read points;
/// `Ok(false)` when a result is wrong.
fn tree_reduction(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let input: Vec<f32> = (0..REDUCE_BLOCKS * 256)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            ((seed >> 40) as f32) / 16_777_216.0 - 0.5
        })
        .collect();
    println!(
        "lock step where none is needed: reduce_tpl<float, 256> over {REDUCE_BLOCKS} blocks, median of {RUNS} runs"
    );
    let want = host_tree_sums(&input);
    let (first_on, run_on, out_on) = measure_reduce(ctx, &input, true)?;
    let (first_off, run_off, out_off) = measure_reduce(ctx, &input, false)?;
    let ok = out_on == want;
    report((first_on, run_on, ok), (first_off, run_off, out_off == want));
    Ok(ok)
}

/// First launch and median run time of `sort_segments` as translated now
/// (`lockstep`, or with `PTXVK_LOCKSTEP=0`), and its output of the first run.
fn measure(ctx: &Context, input: &[u8], lockstep: bool) -> Result<(Duration, Duration, Vec<u8>), Box<dyn Error>> {
    let m = load(ctx, PTX, "warp_synchronous_global.ptx", lockstep)?;
    let f = m.function("sort_segments").ok_or("missing kernel sort_segments")?;
    let d = ctx.alloc(input.len() as u64)?;
    let n = (SEGMENT * SEGMENTS) as u64;
    let params = f.pack_params(&[&d.to_le_bytes(), &n.to_le_bytes(), &(SEGMENT as u64).to_le_bytes()])?;
    let grid = [(SEGMENTS * 32) as u32 / BLOCK, 1, 1];
    let launch = || -> Result<Duration, Box<dyn Error>> {
        ctx.copy_htod(d, input)?;
        let start = Instant::now();
        ctx.launch(&f, grid, [BLOCK, 1, 1], 0, &params)?;
        ctx.synchronize()?;
        Ok(start.elapsed())
    };
    let first = launch()?;
    let mut output = vec![0u8; input.len()];
    ctx.copy_dtoh(&mut output, d)?;
    let runs = (0..RUNS).map(|_| launch()).collect::<Result<Vec<_>, _>>()?;
    ctx.free(d)?;
    Ok((first, median(runs), output))
}

/// Whether `output` holds each segment of `input` sorted.
fn sorted_segments(input: &[u8], output: &[u8]) -> bool {
    let words = |b: &[u8]| b.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<_>>();
    let (i, o) = (words(input), words(output));
    i.chunks(SEGMENT).zip(o.chunks(SEGMENT)).all(|(x, y)| {
        let mut want = x.to_vec();
        want.sort_unstable();
        want == y
    })
}

/// Runs the benchmark; `Ok(false)` when the lock-step output is wrong.
pub fn run(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let input: Vec<u8> = (0..SEGMENT * SEGMENTS)
        .flat_map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            ((seed >> 32) as i32).to_le_bytes()
        })
        .collect();
    println!(
        "lock step: {SEGMENTS} warps each sorting {SEGMENT} i32 in global memory (CuPy's partition pattern), \
         median of {RUNS} runs"
    );
    let (first_on, run_on, out_on) = measure(ctx, &input, true)?;
    let (first_off, run_off, out_off) = measure(ctx, &input, false)?;
    let ok = sorted_segments(&input, &out_on);
    report((first_on, run_on, ok), (first_off, run_off, sorted_segments(&input, &out_off)));
    Ok(tree_reduction(ctx)? && ok)
}
