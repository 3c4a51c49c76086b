//! What the loop lowerings for llvmpipe cost a kernel with a short loop
//! (issue 20): `serial_hash` of `tests/fixtures/long_loops.cu` (each thread
//! hashes the `n` words of a shared input in a loop and stores the hash at
//! its index in the block, the same in every block; independent threads,
//! so the resume pass makes the entry resumable) over 131,072 threads, for
//! loops of 1, 4 and 64 iterations, translated three ways in one process:
//! by default (resumable: the loop count in workgroup memory, the check at
//! each loop header, 4 times the unrolled copies, the resume rounds after
//! each launch), without the resume pass (`PTXVK_RESUME_ROUNDS=0`: only
//! the cut detection), and without any loop-limit code
//! (`PTXVK_LOOP_LIMIT=0`, the baseline; wrong past llvmpipe's limiter, which
//! these loops do not reach). Medians of [`REPS`] launches; every output is
//! poisoned first and checked against the host's hash.

use std::error::Error;
use std::time::Instant;

use ptxvk_runtime::instance::{LOOP_LIMIT_ENV, RESUME_ROUNDS_ENV};
use ptxvk_runtime::Context;

const PTX: &str = include_str!("../../tests/fixtures/long_loops.ptx");
/// Blocks of 256 threads.
const BLOCKS: u32 = 512;
/// Timed launches per configuration.
const REPS: usize = 15;
/// Words of input (the longest loop).
const MAX_N: usize = 64;

/// Sets (or removes) an environment variable for the rest of the process
/// until the guard goes, then puts back what was there.
struct EnvGuard(&'static str, Option<String>);

impl EnvGuard {
    fn set(name: &'static str, value: Option<&str>) -> EnvGuard {
        let old = std::env::var(name).ok();
        match value {
            Some(v) => std::env::set_var(name, v),
            None => std::env::remove_var(name),
        }
        EnvGuard(name, old)
    }
}

impl Drop for EnvGuard {
    fn drop(&mut self) {
        match &self.1 {
            Some(v) => std::env::set_var(self.0, v),
            None => std::env::remove_var(self.0),
        }
    }
}

/// The table; `Ok(false)` when an output is wrong.
pub fn run(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    println!(
        "loops: serial_hash, {} threads, loops of n iterations; ms (median of {REPS}) and ratio to no loop-limit code",
        BLOCKS * 256
    );
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let input: Vec<u32> = (0..MAX_N)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u32
        })
        .collect();
    let din = ctx.alloc((MAX_N * 4) as u64)?;
    ctx.copy_htod(din, &input.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>())?;
    // One word per thread of a block, and words after them that no thread writes.
    let out_words = 256 + 64;
    let dout = ctx.alloc(out_words as u64 * 4)?;
    let configs: [(&str, &'static str, Option<&str>); 3] = [
        ("default", RESUME_ROUNDS_ENV, None),
        ("no resume", RESUME_ROUNDS_ENV, Some("0")),
        ("no loop limit", LOOP_LIMIT_ENV, Some("0")),
    ];
    // Each translation once: the options are read when a module is loaded.
    let mut modules = Vec::with_capacity(configs.len());
    for (_, var, value) in configs {
        let _env = EnvGuard::set(var, value);
        modules.push(ctx.load_module(PTX, "long_loops.ptx")?);
    }
    let mut ok = true;
    println!("  {:>4} {:>16} {:>16} {:>16}", "n", configs[0].0, configs[1].0, configs[2].0);
    for n in [1usize, 4, 64] {
        // The block's hashes, then the poison no thread overwrites.
        let want: Vec<u32> = (0..256u32)
            .map(|t| input[..n].iter().fold(2_166_136_261u32.wrapping_add(t), |h, &v| (h ^ v).wrapping_mul(16_777_619)))
            .chain(std::iter::repeat(u32::MAX).take(out_words - 256))
            .collect();
        let mut times = Vec::new();
        for ((name, var, value), m) in configs.iter().zip(&modules) {
            // Launched with the variable set too: the rounds are read at each launch.
            let _env = EnvGuard::set(var, *value);
            let f = m.function("serial_hash").ok_or("no serial_hash")?;
            let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()])?;
            let mut t = Vec::with_capacity(REPS);
            for rep in 0..=REPS {
                ctx.memset_d8(dout, 0xff, out_words as u64 * 4)?;
                ctx.synchronize()?;
                let start = Instant::now();
                ctx.launch(&f, [BLOCKS, 1, 1], [256, 1, 1], 0, &params)?;
                ctx.synchronize()?;
                // The first launch compiles the pipeline.
                if rep > 0 {
                    t.push(start.elapsed().as_secs_f64());
                }
            }
            let mut out = vec![0u8; out_words * 4];
            ctx.copy_dtoh(&mut out, dout)?;
            let words: Vec<u32> = out.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
            if let Some(i) = (0..out_words).find(|&i| words[i] != want[i]) {
                eprintln!("  n = {n}, {name}: word {i} is {:#x}, not {:#x}", words[i], want[i]);
                ok = false;
            }
            t.sort_by(f64::total_cmp);
            times.push(t[REPS / 2]);
        }
        let base = times[2];
        let cell = |s: f64| format!("{:.2} ({:.2}x)", s * 1e3, s / base);
        println!("  {:>4} {:>16} {:>16} {:>16}", n, cell(times[0]), cell(times[1]), cell(times[2]));
    }
    if !ok {
        println!("  (RESULTS WRONG)");
    }
    Ok(ok)
}
