//! Tensor cores against FMA (issue 18): the same GEMM, `C = A·B` with f32
//! results, through `mma.sync.m16n8k16` on f16 inputs (`hgemm_mma`:
//! `cp.async` + `ldmatrix` + `mma`, CUTLASS-style) and through f32 FMA
//! (`sgemm_fma`, shared-memory tiling), both from
//! `tests/fixtures/gemm.cu`, at 512 and 1024. Each is run once to warm up
//! (and checked against the host at 512), then timed as the median of
//! [`GEMM_RUNS`] runs; the report is the ratio of the two times on the same
//! device (above 1: the tensor-core path is slower).

use std::error::Error;
use std::time::Instant;

use ptxvk_runtime::Context;

const PTX: &str = include_str!("../../tests/fixtures/gemm.ptx");
/// Timed runs per kernel and size.
const GEMM_RUNS: usize = 3;

/// f16 bits of a small value (exact: multiples of 1/64 below 2 in magnitude).
pub fn f16_of(i: i32) -> u16 {
    let v = (i % 128) as f32 / 64.0;
    if v == 0.0 {
        return 0;
    }
    let s = if v < 0.0 { 0x8000 } else { 0 };
    let a = v.abs();
    let e = a.log2().floor() as i32;
    let m = ((a / 2f32.powi(e) - 1.0) * 1024.0).round() as u16;
    s | (((e + 15) as u16) << 10) | m
}

fn f16_value(h: u16) -> f32 {
    if h & 0x7fff == 0 {
        return 0.0;
    }
    let s = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f32;
    s * (1.0 + m / 1024.0) * 2f32.powi(e - 15)
}

/// Runs both GEMMs; `Ok(false)` when a result is wrong.
pub fn run(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    let module = ctx.load_module(PTX, "gemm.ptx")?;
    let mut ok = true;
    println!(
        "GEMM C = A*B (f32 C), median of {GEMM_RUNS} runs: mma.sync f16 (cp.async + ldmatrix + mma) against f32 FMA"
    );
    for size in [512usize, 1024] {
        let (m, n, k) = (size, size, size);
        let ah: Vec<u16> = (0..m * k).map(|i| f16_of((i * 7 % 251) as i32 - 125)).collect();
        let bh: Vec<u16> = (0..k * n).map(|i| f16_of((i * 13 % 241) as i32 - 120)).collect();
        let af: Vec<f32> = ah.iter().map(|&h| f16_value(h)).collect();
        let bf: Vec<f32> = bh.iter().map(|&h| f16_value(h)).collect();
        let upload = |bytes: Vec<u8>| -> Result<u64, Box<dyn Error>> {
            let d = ctx.alloc(bytes.len() as u64)?;
            ctx.copy_htod(d, &bytes)?;
            Ok(d)
        };
        let a16 = upload(ah.iter().flat_map(|x| x.to_le_bytes()).collect())?;
        let b16 = upload(bh.iter().flat_map(|x| x.to_le_bytes()).collect())?;
        let a32 = upload(af.iter().flat_map(|x| x.to_le_bytes()).collect())?;
        let b32 = upload(bf.iter().flat_map(|x| x.to_le_bytes()).collect())?;
        let c = ctx.alloc((m * n * 4) as u64)?;
        let mut times = Vec::new();
        for (kernel, a, b, block) in [("hgemm_mma", a16, b16, 128u32), ("sgemm_fma", a32, b32, 256)] {
            let f = module.function(kernel).ok_or("gemm kernel missing")?;
            let mut args: Vec<Vec<u8>> = [a, b, c].iter().map(|p| p.to_le_bytes().to_vec()).collect();
            for d in [m, n, k] {
                args.push((d as i32).to_le_bytes().to_vec());
            }
            let refs: Vec<&[u8]> = args.iter().map(|x| x.as_slice()).collect();
            let params = f.pack_params(&refs)?;
            let grid = [(n / 64) as u32, (m / 64) as u32, 1];
            ctx.memset_d32(c, 0xABAB_ABAB, (m * n) as u64)?;
            ctx.launch(&f, grid, [block, 1, 1], 0, &params)?;
            ctx.synchronize()?;
            if size == 512 {
                let mut out = vec![0u8; m * n * 4];
                ctx.copy_dtoh(&mut out, c)?;
                // Every product is a multiple of 2^-12 below 4: the sums are exact in f32.
                for i in (0..m).step_by(37) {
                    for j in 0..n {
                        let want: f32 = (0..k).map(|kk| af[i * k + kk] * bf[kk * n + j]).sum();
                        let at = (i * n + j) * 4;
                        let got = f32::from_le_bytes([out[at], out[at + 1], out[at + 2], out[at + 3]]);
                        if got != want {
                            eprintln!("{kernel}: C[{i}][{j}] = {got}, want {want}");
                            ok = false;
                        }
                    }
                }
            }
            let mut runs = Vec::new();
            for _ in 0..GEMM_RUNS {
                let t = Instant::now();
                ctx.launch(&f, grid, [block, 1, 1], 0, &params)?;
                ctx.synchronize()?;
                runs.push(t.elapsed().as_secs_f64());
            }
            runs.sort_by(f64::total_cmp);
            times.push(runs[GEMM_RUNS / 2]);
        }
        let flops = 2.0 * (m * n * k) as f64;
        println!(
            "  {size}^3: mma {:.1} ms ({:.2} GFLOP/s), fma {:.1} ms ({:.2} GFLOP/s), mma/fma time ratio {:.2}",
            times[0] * 1e3,
            flops / times[0] / 1e9,
            times[1] * 1e3,
            flops / times[1] / 1e9,
            times[0] / times[1]
        );
        for p in [a16, b16, a32, b32, c] {
            ctx.free(p)?;
        }
    }
    Ok(ok)
}
