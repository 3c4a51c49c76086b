//! Recursion benchmark: `fib_recursive` (a recursive `__noinline__` device
//! function, run on the translator's explicit stack, `translator/src/
//! recursion.rs`) against `fib_explicit` (the same walk over the call tree
//! with a hand-made stack in a local array), both from `nvcc -O3`
//! (`bench/recursion.cu`). Every thread computes `fib(14 + i % 5)`; the
//! median of [`crate::RUNS`] launches of each is reported with their ratio.

use std::error::Error;

use ptxvk_runtime::Context;

use crate::{median, time, RUNS};

const PTX: &str = include_str!("../recursion.ptx");

/// Threads (one `fib` each).
const THREADS: u32 = 16 * 1024;

fn fib(n: i32) -> i32 {
    let (mut a, mut b) = (0, 1);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

/// Runs both kernels; `Ok(false)` when a result is wrong.
pub fn run(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    let m = ctx.load_module(PTX, "recursion.ptx")?;
    let input: Vec<i32> = (0..THREADS as i32).map(|i| 14 + i % 5).collect();
    let calls: u64 = input.iter().map(|&n| 2 * fib(n + 1) as u64 - 1).sum();
    let bytes = u64::from(THREADS) * 4;
    let din = ctx.alloc(bytes)?;
    let dout = ctx.alloc(bytes)?;
    ctx.copy_htod(din, &input.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
    println!("recursion: fib(14..18) in {THREADS} threads ({calls} calls in all), median of {RUNS} runs");
    let mut ok = true;
    let mut times = [0f64; 2];
    for (k, name) in ["fib_explicit", "fib_recursive"].into_iter().enumerate() {
        let f = m.function(name).ok_or("missing kernel")?;
        let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(THREADS as i32).to_le_bytes()])?;
        let go = || -> Result<(), Box<dyn Error>> {
            ctx.launch(&f, [THREADS / 128, 1, 1], [128, 1, 1], 0, &params)?;
            ctx.synchronize()?;
            Ok(())
        };
        ctx.memset_d32(dout, 0xABAB_ABAB, u64::from(THREADS))?;
        go()?;
        let mut out = vec![0u8; bytes as usize];
        ctx.copy_dtoh(&mut out, dout)?;
        let good =
            out.chunks_exact(4).zip(&input).all(|(c, &n)| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) == fib(n));
        ok &= good;
        times[k] = median((0..RUNS).map(|_| time(go)).collect::<Result<Vec<_>, _>>()?).as_secs_f64();
        println!(
            "  {name:<14} {:8.2} ms  {:6.1} ns per call{}",
            times[k] * 1e3,
            times[k] * 1e9 / calls as f64,
            if good { "" } else { "  WRONG RESULTS" }
        );
    }
    println!("  recursive / explicit stack: {:.2}x", times[1] / times[0]);
    ctx.free(din)?;
    ctx.free(dout)?;
    Ok(ok)
}
