//! TMA copy throughput: the emulated copy engine against plain loads and
//! stores, in the same process on the same device (`bench/tma_copy.cu`).
//!
//! A 2048 x 2048 f32 tensor (16 MiB) is copied box by box (64 x 32 f32 per
//! block) through shared memory, once with `cp.async.bulk.tensor` loads and
//! stores issued by one thread per block (the copy engine then runs in that
//! thread), once with every thread of the block moving its share with
//! `ld.global` / `st.global`. Both are timed as the median of [`RUNS`]
//! launches after a checked warm-up run; the throughput counts the bytes
//! read plus the bytes written.

use std::error::Error;
use std::time::Duration;

use ptxvk_runtime::{Context, Function};
use ptxvk_translator::{TensorMapDesc, TensorMapMode};

use crate::{median, time};

/// `nvcc -arch=sm_90a -O3 -ptx tma_copy.cu` (see `bench/tma_copy.cu`).
const PTX: &str = include_str!("../tma_copy.ptx");
/// Tensor width and height (f32 elements).
const W: u32 = 2048;
const H: u32 = 2048;
/// Box per block (as in `tma_copy.cu`).
const BW: u32 = 64;
const BH: u32 = 32;
/// Threads per block.
const THREADS: u32 = 128;
/// Timed runs per kernel.
const RUNS: usize = 5;

/// A 2-D f32 tensor map over `addr` with the 64 x 32 box.
fn map(addr: u64) -> [u8; 128] {
    let mut d = TensorMapDesc {
        address: addr,
        rank: 2,
        data_type: 7,
        elem_bytes: 4,
        mode: TensorMapMode::Tiled,
        ..Default::default()
    };
    d.dims[..2].copy_from_slice(&[W, H]);
    d.strides[..2].copy_from_slice(&[4, W as u64 * 4]);
    d.box_dim[..2].copy_from_slice(&[BW, BH]);
    d.elem_strides[..2].copy_from_slice(&[1, 1]);
    d.encode()
}

/// Launches `f` over the grid of boxes and waits.
fn launch(ctx: &Context, f: &Function, params: &[u8]) -> Result<(), Box<dyn Error>> {
    ctx.launch(f, [W / BW, H / BH, 1], [THREADS, 1, 1], 0, params)?;
    ctx.synchronize()?;
    Ok(())
}

/// Prints both throughputs and their ratio; `Ok(false)` when a copy is wrong.
pub fn run(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    let bytes = W as u64 * H as u64 * 4;
    let module = ctx.load_module(PTX, "tma_copy.ptx")?;
    let tma = module.function("tma_copy").ok_or("tma_copy.ptx has no tma_copy")?;
    let ldst = module.function("ldst_copy").ok_or("tma_copy.ptx has no ldst_copy")?;
    let mut state = 0x9E37_79B9u32;
    let input: Vec<u8> = (0..bytes)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect();
    let din = ctx.alloc(bytes)?;
    let dout = ctx.alloc(bytes)?;
    ctx.copy_htod(din, &input)?;
    let tma_params = tma.pack_params(&[&map(din), &map(dout)])?;
    let ldst_params = ldst.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(W as i32).to_le_bytes()])?;

    // Warm-up runs, each checked on a poisoned output.
    let mut ok = true;
    let mut out = vec![0u8; bytes as usize];
    for (name, f, params) in [("tma", &tma, &tma_params), ("ld/st", &ldst, &ldst_params)] {
        ctx.memset_d8(dout, 0xA5, bytes)?;
        launch(ctx, f, params)?;
        ctx.copy_dtoh(&mut out, dout)?;
        if out != input {
            println!("  check: the {name} copy differs from its input");
            ok = false;
        }
    }
    let (mut tma_times, mut ldst_times) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        tma_times.push(time(|| launch(ctx, &tma, &tma_params))?);
        ldst_times.push(time(|| launch(ctx, &ldst, &ldst_params))?);
    }
    ctx.free(din)?;
    ctx.free(dout)?;
    let (t_tma, t_ldst) = (median(tma_times), median(ldst_times));
    let rate = |d: Duration| 2.0 * bytes as f64 / d.as_secs_f64() / 1e9;
    println!(
        "tma copy: {W} x {H} f32 ({} MiB) in {BW} x {BH} boxes through shared memory, median of {RUNS} runs",
        bytes >> 20
    );
    println!(
        "  cp.async.bulk.tensor (one issuing thread per block): {:8.2} ms  {:6.2} GB/s",
        t_tma.as_secs_f64() * 1e3,
        rate(t_tma)
    );
    println!(
        "  ld.global/st.global ({THREADS} threads per block):       {:8.2} ms  {:6.2} GB/s",
        t_ldst.as_secs_f64() * 1e3,
        rate(t_ldst)
    );
    println!("  ratio tma/ldst throughput: {:.3}", t_ldst.as_secs_f64() / t_tma.as_secs_f64());
    if ok {
        println!("  check: both copies equal their input");
    }
    Ok(ok)
}
