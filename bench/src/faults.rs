//! The cost of the fault checks (issue 17): the same kernels in four
//! contexts, without checks, with the default checks (every access tested
//! against the memory blocks, lavapipe's default), with the memcheck
//! (every access against the exact allocations) and with the racecheck
//! (the default checks plus every `.shared` access tracked), median of
//! [`RUNS`] runs each, as time ratios to the unchecked run. All four must
//! write the same bits.
//!
//! - saxpy over 16M floats (`bench/saxpy_f32.ptx`): two loads and a store
//!   per thread, memory bound;
//! - the 5-point shared-memory stencil (`bench/shared_stencil.ptx`): global
//!   loads into a tile, 16 passes of shared loads and stores;
//! - SGEMM 512³ with f32 FMA (`tests/fixtures/gemm.ptx`, `sgemm_fma`):
//!   shared-memory tiles, compute bound.

use std::error::Error;

use ptxvk_runtime::{Context, DeviceSelector, FaultMode};

use crate::{median, time, RUNS};

struct Kernel {
    name: &'static str,
    ptx: &'static str,
    entry: &'static str,
    grid: [u32; 3],
    block: u32,
    shared: u32,
    /// Input words (random), output words.
    inputs: Vec<Vec<u32>>,
    out_words: usize,
    /// Parameters after the buffers (inputs, then output), little-endian.
    tail: Vec<Vec<u8>>,
    /// Whether the output comes first in the parameter list.
    out_first: bool,
}

fn words(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| ((i.wrapping_mul(2654435761).wrapping_add(seed) % 2001) as f32 * 0.001 - 1.0).to_bits())
        .collect()
}

fn kernels() -> Vec<Kernel> {
    const SAXPY_N: usize = 16 << 20;
    const TILE: usize = 1024;
    const STENCIL_N: usize = 512 * TILE;
    const G: usize = 512;
    vec![
        Kernel {
            name: "saxpy 16M",
            ptx: crate::SAXPY_PTX,
            entry: "saxpy_f32",
            grid: [(SAXPY_N / 256) as u32, 1, 1],
            block: 256,
            shared: 0,
            inputs: vec![words(SAXPY_N, 1)],
            out_words: SAXPY_N,
            // saxpy_f32(int n, float a, const float *x, float *y): y is in/out.
            tail: vec![],
            out_first: false,
        },
        Kernel {
            name: "shared stencil",
            ptx: include_str!("../shared_stencil.ptx"),
            entry: "stencil",
            grid: [(STENCIL_N / TILE) as u32, 1, 1],
            block: 256,
            shared: (2 * (TILE + 4) * 4) as u32,
            inputs: vec![words(STENCIL_N, 2)],
            out_words: STENCIL_N,
            tail: vec![(STENCIL_N as i32).to_le_bytes().to_vec(), 0i32.to_le_bytes().to_vec()],
            out_first: false,
        },
        Kernel {
            name: "sgemm 512^3 (fma)",
            ptx: include_str!("../../tests/fixtures/gemm.ptx"),
            entry: "sgemm_fma",
            grid: [(G / 64) as u32, (G / 64) as u32, 1],
            block: 256,
            shared: 0,
            inputs: vec![words(G * G, 3), words(G * G, 4)],
            out_words: G * G,
            tail: [G, G, G].iter().map(|&d| (d as i32).to_le_bytes().to_vec()).collect(),
            out_first: false,
        },
    ]
}

/// One kernel in one context: its median time, its first launch's time
/// (pipeline compilation included) and its output.
fn measure(ctx: &Context, k: &Kernel) -> Result<(f64, f64, Vec<u8>), Box<dyn Error>> {
    let m = ctx.load_module(k.ptx, k.entry)?;
    let f = m.function(k.entry).ok_or("missing kernel")?;
    let mut bufs = Vec::new();
    for w in &k.inputs {
        let d = ctx.alloc(w.len() as u64 * 4)?;
        ctx.copy_htod(d, &w.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
        bufs.push(d);
    }
    let is_saxpy = k.entry == "saxpy_f32";
    let out = if is_saxpy { bufs[0] } else { ctx.alloc(k.out_words as u64 * 4)? };
    let mut args: Vec<Vec<u8>> = Vec::new();
    if is_saxpy {
        let x = ctx.alloc(k.out_words as u64 * 4)?;
        ctx.copy_htod(x, &words(k.out_words, 9).iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
        bufs.push(x);
        args.push((k.out_words as i32).to_le_bytes().to_vec());
        args.push(1.7f32.to_le_bytes().to_vec());
        args.push(x.to_le_bytes().to_vec());
        args.push(out.to_le_bytes().to_vec());
    } else {
        if k.out_first {
            args.push(out.to_le_bytes().to_vec());
        }
        args.extend(bufs.iter().map(|b| b.to_le_bytes().to_vec()));
        if !k.out_first {
            args.push(out.to_le_bytes().to_vec());
        }
        args.extend(k.tail.iter().cloned());
    }
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let params = f.pack_params(&refs)?;
    let go = || -> Result<(), Box<dyn Error>> {
        ctx.launch(&f, k.grid, [k.block, 1, 1], k.shared, &params)?;
        ctx.synchronize()?;
        Ok(())
    };
    // Warm-up (the pipeline compiles), then the output of one run from the inputs.
    let first = time(go)?.as_secs_f64();
    if is_saxpy {
        ctx.copy_htod(out, &k.inputs[0].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
    }
    go()?;
    let mut bytes = vec![0u8; k.out_words * 4];
    ctx.copy_dtoh(&mut bytes, out)?;
    let t = median((0..RUNS).map(|_| time(go)).collect::<Result<Vec<_>, _>>()?).as_secs_f64();
    for b in bufs {
        ctx.free(b)?;
    }
    if !is_saxpy {
        ctx.free(out)?;
    }
    Ok((t, first, bytes))
}

/// Runs each kernel in the three modes; `Ok(false)` when outputs differ.
pub fn run() -> Result<bool, Box<dyn Error>> {
    println!("fault checks: time ratios to the unchecked kernel, median of {RUNS} runs");
    let modes =
        [(FaultMode::Off, false), (FaultMode::Checks, false), (FaultMode::Memcheck, false), (FaultMode::Checks, true)];
    let ctxs: Vec<Context> = modes
        .iter()
        .map(|&(m, race)| Context::with_racecheck(DeviceSelector::Default, Some(m), race))
        .collect::<Result<_, _>>()?;
    let mut ok = true;
    for k in kernels() {
        let mut results = Vec::new();
        for ctx in &ctxs {
            results.push(measure(ctx, &k)?);
        }
        let same = results.iter().all(|(_, _, out)| *out == results[0].2);
        ok &= same;
        let (base, first) = (results[0].0, results[0].1);
        println!(
            "  {:<20} off {:8.2} ms   checks {:5.2}x   memcheck {:5.2}x   racecheck {:5.2}x   first launch \
             (compile): off {:7.2} s, checks {:5.2}x, memcheck {:5.2}x, racecheck {:5.2}x{}",
            k.name,
            base * 1e3,
            results[1].0 / base,
            results[2].0 / base,
            results[3].0 / base,
            first,
            results[1].1 / first,
            results[2].1 / first,
            results[3].1 / first,
            if same { "" } else { "  DIFFERENT BITS" }
        );
    }
    Ok(ok)
}
