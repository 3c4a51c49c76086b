//! How costs grow (issue 20 item 4): translation time against module size
//! (generated PTX of 1 KB to 10 MB, [`crate::frontend::big_ptx`]), which
//! must be linear (no quadratic pass), and 100k launches of an empty kernel
//! in windows of 10k, whose time per launch and resident memory must stay
//! flat; and the round trip of one small launch (launch, then wait for it)
//! against the same round trip of a pre-recorded command buffer submitted
//! with plain `ash` (issue 20 item 3: within 1.2x).
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

/// Translation time per size, the launch windows, the round trip;
/// `Ok(false)` when a round trip's result is wrong.
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
        rows.push((start.elapsed().as_secs_f64() / WINDOW as f64, crate::frontend::status_kb("VmRSS:")));
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
    round_trip(ctx)
}

/// Round trips of saxpy over [`SMALL`] floats (one block): the runtime's
/// launch + synchronize against the baseline's submit + wait of a
/// pre-recorded dispatch (`crate::baseline`), interleaved, medians of
/// [`TRIPS`]; both results checked.
pub(crate) fn round_trip(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    println!("launch round trip: saxpy over {SMALL} floats (one block), launch + wait, median of {TRIPS}");
    let x: Vec<f32> = (0..SMALL).map(|i| i as f32 * 0.25).collect();
    let y: Vec<f32> = (0..SMALL).map(|i| 1.0 + i as f32).collect();
    let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|f| f.to_le_bytes()).collect() };
    let m = ctx.load_module(crate::SAXPY_PTX, "saxpy_f32.ptx")?;
    let f = m.function("saxpy_f32").ok_or("no saxpy_f32")?;
    let (dx, dy) = (ctx.alloc(SMALL as u64 * 4)?, ctx.alloc(SMALL as u64 * 4)?);
    ctx.copy_htod(dx, &bytes(&x))?;
    ctx.copy_htod(dy, &bytes(&y))?;
    let n = SMALL as i32;
    let params = f.pack_params(&[&n.to_le_bytes(), &crate::A.to_le_bytes(), &dx.to_le_bytes(), &dy.to_le_bytes()])?;
    let base = crate::baseline::Baseline::new(ctx.info().uuid, SMALL, crate::A)?;
    base.upload(&x, &y)?;
    let ours = || -> Result<(), Box<dyn Error>> {
        ctx.launch(&f, [1, 1, 1], [SMALL, 1, 1], 0, &params)?;
        ctx.synchronize()?;
        Ok(())
    };
    // Warm-up (pipelines compiled), then interleaved timing.
    ours()?;
    base.run()?;
    let (mut a, mut b) = (Vec::with_capacity(TRIPS), Vec::with_capacity(TRIPS));
    for _ in 0..TRIPS {
        let t = Instant::now();
        ours()?;
        a.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        base.run()?;
        b.push(t.elapsed().as_secs_f64());
    }
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (ta, tb) = (a[TRIPS / 2], b[TRIPS / 2]);
    // Both ran 1 + TRIPS times from the same y.
    let mut out = vec![0u8; SMALL as usize * 4];
    ctx.copy_dtoh(&mut out, dy)?;
    let got: Vec<f32> = out.chunks_exact(4).map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
    let want: Vec<f32> =
        (0..SMALL as usize).map(|i| (0..=TRIPS).fold(y[i], |acc, _| crate::A.mul_add(x[i], acc))).collect();
    let base_out = base.download_y()?;
    let ok = got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits())
        && base_out.iter().zip(&want).all(|(g, w)| (g - w).abs() <= w.abs() * 1e-3);
    println!(
        "  runtime {:.1} us, plain ash {:.1} us, runtime / plain ash {:.2}{}",
        ta * 1e6,
        tb * 1e6,
        ta / tb,
        if ok { "" } else { "  (RESULTS WRONG)" }
    );
    Ok(ok)
}

/// Elements of the round-trip saxpy (one block).
const SMALL: u32 = 256;
/// Timed round trips per path.
const TRIPS: usize = 2000;
