//! Front-end and translation throughput on a large PTX file: parse to the
//! AST, parse and check (decoding every instruction, as `ptx2spv
//! --parse-only`), and full translation, each with its peak memory; and
//! `ptxas -O3` on the same file when a `ptxas` is on the `PATH`.
//!
//! The file is generated: the repository's fixture kernels, copied with
//! their entry names made unique, to [`BIG_BYTES`].

use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

/// Size of the generated PTX file.
pub const BIG_BYTES: usize = 8 << 20;

/// Fixtures whose kernels translate (single `.entry`, no module variables).
const FIXTURES: [&str; 6] = ["data_loop_debug", "numba_saxpy", "vector_add", "data_loop", "saxpy_f64", "irreducible3"];

/// A PTX module of at least `bytes` bytes made of renamed fixture kernels.
pub fn big_ptx(bytes: usize) -> Result<String, Box<dyn Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut kernels = Vec::new();
    for f in FIXTURES {
        let text = std::fs::read_to_string(dir.join(format!("{f}.ptx")))?;
        let entry = text.find(".visible .entry").ok_or("fixture without an entry")?;
        let name_start = entry + ".visible .entry ".len();
        let name_end = text[name_start..].find('(').map_or(name_start, |e| name_start + e);
        kernels.push((text[entry..].to_string(), text[name_start..name_end].to_string()));
    }
    let mut out = String::with_capacity(bytes + (64 << 10));
    out.push_str(".version 8.0\n.target sm_80\n.address_size 64\n\n");
    let mut i = 0;
    while out.len() < bytes {
        let (body, name) = &kernels[i % kernels.len()];
        out.push_str(&body.replace(name.as_str(), &format!("{name}_{i}")));
        out.push('\n');
        i += 1;
    }
    Ok(out)
}

fn status_kb(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
}

/// Time of `f` and how far it raised the peak resident set (bytes).
fn measure<T>(f: impl FnOnce() -> T) -> (T, Duration, Option<u64>) {
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_kb("VmRSS:");
    let start = Instant::now();
    let out = f();
    let t = start.elapsed();
    let grew = match (reset, before, status_kb("VmHWM:")) {
        (true, Some(b), Some(p)) => Some(p.saturating_sub(b) * 1024),
        _ => None,
    };
    (out, t, grew)
}

fn report(what: &str, bytes: usize, t: Duration, mem: Option<u64>) {
    let mbs = bytes as f64 / t.as_secs_f64() / 1e6;
    let mem = mem.map_or("peak memory unknown".to_string(), |m| {
        format!("peak +{} MiB ({:.1}x input)", m >> 20, m as f64 / bytes as f64)
    });
    println!("  {what:<28} {:>8.3} s  {mbs:>7.1} MB/s  {mem}", t.as_secs_f64());
}

/// The steps measured, each in a process of its own (so that one step's
/// freed memory does not hide the next one's peak).
pub const STEPS: [&str; 3] = ["parse", "check", "translate"];

/// Print the figures, running this program once per step
/// (`ptxvk-bench --measure STEP`).
pub fn run() -> Result<(), Box<dyn Error>> {
    let src = big_ptx(BIG_BYTES)?;
    let entries = src.matches(".entry").count();
    println!("front end: generated PTX, {} bytes, {entries} kernels", src.len());
    let exe = std::env::current_exe()?;
    let mut translate_time = None;
    for step in STEPS {
        let out = std::process::Command::new(&exe).args(["--measure", step]).output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            println!("{line}");
        }
        if !out.status.success() {
            return Err(format!("step {step} failed: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        if step == "translate" {
            translate_time = text.lines().find_map(|l| l.strip_prefix("#time ")?.parse::<f64>().ok());
        }
    }
    ptxas(&src, Duration::from_secs_f64(translate_time.unwrap_or(0.0)))
}

/// One step of [`run`], in this process.
pub fn measure_step(step: &str) -> Result<(), Box<dyn Error>> {
    let src = big_ptx(BIG_BYTES)?;
    let n = src.len();
    match step {
        "parse" => {
            let (r, t, m) = measure(|| ptxvk_translator::parse::run(&src).map(|m| m.items.len()));
            r.map_err(|d| format!("parse: {d:?}"))?;
            report("parse (AST)", n, t, m);
        }
        "check" => {
            let (r, t, m) = measure(|| ptxvk_translator::check_syntax(&src, "big.ptx"));
            r.map_err(|d| d.to_string())?;
            report("parse + check (--parse-only)", n, t, m);
        }
        _ => {
            let options = ptxvk_translator::Options::default();
            let (r, t, m) = measure(|| ptxvk_translator::translate(&src, "big.ptx", &options).map(|t| t.spirv.len()));
            let words = r.map_err(|d| d.to_string())?;
            report("full translation", n, t, m);
            println!("  ({} bytes of SPIR-V)", words * 4);
            println!("#time {}", t.as_secs_f64());
        }
    }
    Ok(())
}

/// `ptxas -O3` on the same file, when one is installed.
fn ptxas(src: &str, ours: Duration) -> Result<(), Box<dyn Error>> {
    let path = std::env::temp_dir().join(format!("ptxvk-bench-{}.ptx", std::process::id()));
    std::fs::write(&path, src)?;
    let start = Instant::now();
    let status = std::process::Command::new("ptxas")
        .args(["-O3", "-arch=sm_80", "-o", "/dev/null"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    let t = start.elapsed();
    let _ = std::fs::remove_file(&path);
    match status {
        Ok(s) if s.success() => {
            report("ptxas -O3 (for scale)", src.len(), t, None);
            println!("  full translation is {:.1}x as fast as ptxas -O3", t.as_secs_f64() / ours.as_secs_f64());
        }
        Ok(s) => println!("  ptxas -O3 failed ({s})"),
        Err(_) => println!("  ptxas not found on PATH (install the nvidia-cuda-nvcc wheel to compare)"),
    }
    Ok(())
}
