//! The cost of shared memory beyond the device's Workgroup memory (issue
//! 21): `bench/shared_stencil.cu` (a 5-point stencil over a tile staged in
//! dynamic shared memory, 16 passes with a barrier each) with its tile
//!
//! - in Workgroup memory, translated as always (with the spill test, which
//!   folds away when the pipeline is created);
//! - in Workgroup memory, translated without it (`PTXVK_SHARED_SPILL=0`):
//!   the ratio to the first is what the spill code costs kernels that fit;
//! - in the block's spill area of device memory, all of the block's shared
//!   memory there (llvmpipe's default): what a spilled access costs;
//! - past the device's Workgroup memory with a hot part kept there (the
//!   default elsewhere): every access then tests where its byte lives.
//!
//! All three must write the same bits, and what the host model computes
//! to within f32 rounding.

use std::error::Error;

use ptxvk_runtime::Context;

use crate::{median, time, RUNS};

const PTX: &str = include_str!("../shared_stencil.ptx");
const TILE: usize = 1024;
const HALO: usize = 2;
const PASSES: usize = 16;
const N: usize = 512 * TILE;

fn model(input: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; input.len()];
    for (b, chunk) in out.chunks_mut(TILE).enumerate() {
        let at = |i: isize| {
            let g = (b * TILE) as isize + i - HALO as isize;
            if g >= 0 && (g as usize) < input.len() {
                input[g as usize] as f64
            } else {
                0.0
            }
        };
        let mut a: Vec<f64> = (0..TILE + 2 * HALO).map(|i| at(i as isize)).collect();
        for _ in 0..PASSES {
            let mut next = a.clone();
            for i in HALO..TILE + HALO {
                next[i] = 0.1 * a[i - 2] + 0.2 * a[i - 1] + 0.4 * a[i] + 0.2 * a[i + 1] + 0.1 * a[i + 2];
            }
            a = next;
        }
        for (i, o) in chunk.iter_mut().enumerate() {
            *o = a[i + HALO] as f32;
        }
    }
    out
}

/// Runs the three placements; `Ok(false)` when a result is wrong.
pub fn run(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    let info = ctx.info();
    let input: Vec<f32> = (0..N).map(|i| ((i * 7919 % 1000) as f32) * 0.001 - 0.5).collect();
    let want = model(&input);
    let bytes = (N * 4) as u64;
    let din = ctx.alloc(bytes)?;
    let dout = ctx.alloc(bytes)?;
    ctx.copy_htod(din, &input.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
    let tile_bytes = (2 * (TILE + 2 * HALO) * 4) as u32;
    // Spilled: the tile starts past the device's Workgroup memory.
    let far = info.max_shared_bytes.div_ceil(16) * 4;
    println!(
        "shared memory: {} blocks x {PASSES} stencil passes over a {TILE}-float tile, median of {RUNS} runs \
         (Workgroup memory: {} bytes)",
        N / TILE,
        info.max_shared_bytes
    );
    let mut ok = true;
    let mut times = [0f64; 4];
    let mut first: Option<Vec<u8>> = None;
    let cases = [
        ("in Workgroup memory", false, 0u32, false),
        ("without spill code", true, 0, false),
        ("all spilled", false, far, false),
        ("spilled past a hot part", false, far, true),
    ];
    let keep_hot = ctx.shared_hot_part();
    for (k, (name, no_spill, pad, hot)) in cases.into_iter().enumerate() {
        ctx.set_shared_hot_part(hot);
        // The benchmark has one thread: nothing else reads the environment.
        if no_spill {
            std::env::set_var(ptxvk_runtime::instance::SHARED_SPILL_ENV, "0");
        }
        let m = ctx.load_module(PTX, "shared_stencil.ptx");
        std::env::remove_var(ptxvk_runtime::instance::SHARED_SPILL_ENV);
        let m = m?;
        let f = m.function("stencil").ok_or("missing kernel")?;
        let params = f.pack_params(&[
            &din.to_le_bytes(),
            &dout.to_le_bytes(),
            &(N as i32).to_le_bytes(),
            &(pad as i32).to_le_bytes(),
        ])?;
        let go = || -> Result<(), Box<dyn Error>> {
            ctx.launch(&f, [(N / TILE) as u32, 1, 1], [256, 1, 1], tile_bytes + pad * 4, &params)?;
            ctx.synchronize()?;
            Ok(())
        };
        ctx.memset_d32(dout, 0xABAB_ABAB, N as u64)?;
        go()?;
        let mut out = vec![0u8; bytes as usize];
        ctx.copy_dtoh(&mut out, dout)?;
        let close = out.chunks_exact(4).zip(&want).all(|(c, &w)| {
            let g = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            // Values below 1 in magnitude; 16 passes of 5 rounded terms.
            (g - w).abs() <= 1e-5
        });
        let same = first.as_ref().map_or(true, |f| *f == out);
        first.get_or_insert(out);
        ok &= close && same;
        times[k] = median((0..RUNS).map(|_| time(go)).collect::<Result<Vec<_>, _>>()?).as_secs_f64();
        println!(
            "  {name:<22} {:8.2} ms{}",
            times[k] * 1e3,
            if !close {
                "  WRONG RESULTS"
            } else if !same {
                "  DIFFERENT BITS"
            } else {
                ""
            }
        );
    }
    ctx.set_shared_hot_part(keep_hot);
    println!("  with / without spill code: {:.2}x", times[0] / times[1]);
    println!("  all spilled / in Workgroup memory: {:.2}x", times[2] / times[0]);
    println!("  spilled past a hot part / in Workgroup memory: {:.2}x", times[3] / times[0]);
    ctx.free(din)?;
    ctx.free(dout)?;
    Ok(ok)
}
