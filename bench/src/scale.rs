//! How costs grow (issue 20 item 4): translation time against module size
//! (generated PTX of 1 KB to 10 MB, [`crate::frontend::big_ptx`]), which
//! must be linear (no quadratic pass), and 100k launches of an empty kernel
//! in windows of 10k, whose time per launch and resident memory must stay
//! flat.
//!
//! Translation is timed as the median of several repetitions (more for the
//! small sizes); the report gives the time per KB and its ratio to the
//! 1 MB module's.

use std::error::Error;
use std::time::Instant;

use ptxvk_runtime::Context;

/// Module sizes, bytes.
const SIZES: [usize; 5] = [1 << 10, 10 << 10, 100 << 10, 1 << 20, 10 << 20];
/// Launches in all, and per window.
const LAUNCHES: usize = 100_000;
const WINDOW: usize = 10_000;

const EMPTY: &str = ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry empty()\n{\n\tret;\n}\n";

fn rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// Translation time per size, then the launch windows.
pub fn run(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    let options = ctx.translate_options();
    println!("scale: translation time against module size (median of 21, 7, 3 and 3 runs)");
    let mut per_kb = Vec::new();
    for size in SIZES {
        let src = crate::frontend::big_ptx(size)?;
        let reps = if size <= 10 << 10 {
            21
        } else if size <= 100 << 10 {
            7
        } else {
            3
        };
        let mut times = Vec::new();
        let mut words = 0;
        for _ in 0..reps {
            let start = Instant::now();
            let t = ptxvk_translator::translate(&src, "scale.ptx", &options).map_err(|d| d.to_string())?;
            times.push(start.elapsed().as_secs_f64());
            words = t.spirv.len();
        }
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        let kb = src.len() as f64 / 1024.0;
        per_kb.push(t / kb);
        println!(
            "  {:>9} bytes of PTX, {:>4} kernels: {:>9.2} ms, {:>6.1} us per KB, {} KB of SPIR-V",
            src.len(),
            src.matches(".entry").count(),
            t * 1e3,
            t / kb * 1e6,
            words * 4 / 1024
        );
    }
    let mb = per_kb[3];
    let ratios: Vec<String> = SIZES.iter().zip(&per_kb).map(|(s, p)| format!("{} KB {:.2}", s >> 10, p / mb)).collect();
    println!("  time per KB against the 1 MB module's: {}", ratios.join(", "));

    println!("scale: {LAUNCHES} launches of an empty kernel (1 block of 32), synchronised every {WINDOW}");
    let m = ctx.load_module(EMPTY, "empty.ptx")?;
    let f = m.function("empty").ok_or("no entry empty")?;
    let params = f.pack_params(&[])?;
    ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &params)?;
    ctx.synchronize()?;
    let mut rows = Vec::new();
    for _ in 0..LAUNCHES / WINDOW {
        let start = Instant::now();
        for _ in 0..WINDOW {
            ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &params)?;
        }
        ctx.synchronize()?;
        rows.push((start.elapsed().as_secs_f64() / WINDOW as f64, rss_kb()));
    }
    for (i, (t, rss)) in rows.iter().enumerate() {
        let rss = rss.map_or("RSS unknown".to_string(), |k| format!("RSS {} MiB", k >> 10));
        println!("  launches {:>6}..{:>6}: {:>6.2} us per launch, {rss}", i * WINDOW, (i + 1) * WINDOW, t * 1e6);
    }
    let (first, last) = (rows[0], rows[rows.len() - 1]);
    println!("  last window / first window: time per launch {:.2}x", last.0 / first.0);
    if let (Some(a), Some(b)) = (first.1, last.1) {
        println!("  resident memory grew by {} KiB from the first window's end to the last's", b as i64 - a as i64);
    }
    Ok(true)
}
