//! Front-end and translation throughput on a large PTX file: parse to the
//! AST, parse and check (decoding every instruction, as `ptx2spv
//! --parse-only`), and full translation, each with its peak memory; and
//! `ptxas -O3` on the same file when a `ptxas` is found ([`find_ptxas`]); and
//! parse + check throughput over the PTX corpus ([`corpus_throughput`]).
//!
//! The file is generated: the repository's fixture kernels, copied with
//! their entry names made unique, to [`BIG_BYTES`].

use std::error::Error;
use std::path::{Path, PathBuf};
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
        // The kernel up to its closing brace (the first in column 0): not
        // the `.file` and `.section .debug_*` directives after it in `-G`
        // output, which may appear only once in a module (`ptxas` rejects
        // the copies).
        let end = text[entry..].find("\n}").map_or(text.len(), |e| entry + e + 2);
        kernels.push((text[entry..end].to_string(), text[name_start..name_end].to_string()));
    }
    let mut out = String::with_capacity(bytes + (64 << 10));
    // `.loc 1 ...` of the `-G` kernel needs a file 1.
    out.push_str(".version 8.0\n.target sm_80\n.address_size 64\n.file 1 \"big.cu\"\n\n");
    let mut i = 0;
    while out.len() < bytes {
        let (body, name) = &kernels[i % kernels.len()];
        out.push_str(&body.replace(name.as_str(), &format!("{name}_{i}")));
        out.push('\n');
        i += 1;
    }
    Ok(out)
}

/// A field of `/proc/self/status` in kB (`VmRSS:`, `VmHWM:`).
pub fn status_kb(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
}

/// The CPU time this thread has run (user and kernel, nanoseconds; Linux's
/// `/proc/thread-self/schedstat`): unlike the wall time, it does not count
/// the time spent waiting for a core on a loaded machine.
fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

/// What [`measure`] measured: wall time, CPU time, peak memory growth.
struct Measured {
    wall: Duration,
    cpu: Option<Duration>,
    mem: Option<u64>,
}

/// Time of `f` and how far it raised the peak resident set (bytes).
fn measure<T>(f: impl FnOnce() -> T) -> (T, Measured) {
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_kb("VmRSS:");
    let cpu_before = cpu_ns();
    let start = Instant::now();
    let out = f();
    let wall = start.elapsed();
    let cpu = match (cpu_before, cpu_ns()) {
        (Some(a), Some(b)) => Some(Duration::from_nanos(b.saturating_sub(a))),
        _ => None,
    };
    let mem = match (reset, before, status_kb("VmHWM:")) {
        (true, Some(b), Some(p)) => Some(p.saturating_sub(b) * 1024),
        _ => None,
    };
    (out, Measured { wall, cpu, mem })
}

fn report(what: &str, bytes: usize, t: Duration, mem: Option<u64>) {
    report_cpu(what, bytes, &Measured { wall: t, cpu: None, mem });
}

fn report_cpu(what: &str, bytes: usize, m: &Measured) {
    let mbs = bytes as f64 / m.wall.as_secs_f64() / 1e6;
    let mem = m.mem.map_or("peak memory unknown".to_string(), |m| {
        format!("peak +{} MiB ({:.1}x input)", m >> 20, m as f64 / bytes as f64)
    });
    let cpu = m.cpu.map_or(String::new(), |c| format!("  (CPU time {:.1} MB/s)", bytes as f64 / c.as_secs_f64() / 1e6));
    println!("  {what:<28} {:>8.3} s  {mbs:>7.1} MB/s  {mem}{cpu}", m.wall.as_secs_f64());
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
    ptxas(&src, Duration::from_secs_f64(translate_time.unwrap_or(0.0)))?;
    corpus_throughput()
}

/// One step of [`run`], in this process.
pub fn measure_step(step: &str) -> Result<(), Box<dyn Error>> {
    let src = big_ptx(BIG_BYTES)?;
    let n = src.len();
    match step {
        "parse" => {
            let (r, m) = measure(|| ptxvk_translator::parse::run(&src).map(|m| m.items.len()));
            r.map_err(|d| format!("parse: {d:?}"))?;
            report_cpu("parse (AST)", n, &m);
        }
        "check" => {
            let (r, m) = measure(|| ptxvk_translator::check_syntax(&src, "big.ptx"));
            r.map_err(|d| d.to_string())?;
            report_cpu("parse + check (--parse-only)", n, &m);
        }
        _ => {
            let options = ptxvk_translator::Options::default();
            let (r, m) = measure(|| ptxvk_translator::translate(&src, "big.ptx", &options).map(|t| t.spirv.len()));
            let words = r.map_err(|d| d.to_string())?;
            report_cpu("full translation", n, &m);
            println!("  ({} bytes of SPIR-V)", words * 4);
            println!("#time {}", m.wall.as_secs_f64());
        }
    }
    Ok(())
}

/// Where `ptxas` is: `$PTXAS`, else on the `PATH`, else in a pip wheel
/// (`nvidia-cuda-nvcc`: `site-packages/nvidia/{cu13,cu12,cuda_nvcc}/bin`)
/// of the active virtual environment, of `/tmp/venv-nvcc`, of the clients'
/// environment (`$PTXVK_CLIENT_VENV`, default `/tmp/ptxvk-client-venv`,
/// which `scripts/test.sh` makes) or of the user's or the system's Python,
/// else in `/usr/local/cuda/bin`.
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(PathBuf::from(p));
    }
    let is_file = |p: &Path| p.is_file();
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(p) = std::env::split_paths(&path).map(|d| d.join("ptxas")).find(|p| is_file(p)) {
            return Some(p);
        }
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        roots.push(PathBuf::from(v));
    }
    roots.push(PathBuf::from("/tmp/venv-nvcc"));
    roots.push(std::env::var_os("PTXVK_CLIENT_VENV").map_or_else(|| "/tmp/ptxvk-client-venv".into(), PathBuf::from));
    if let Some(h) = std::env::var_os("HOME") {
        roots.push(Path::new(&h).join(".local"));
    }
    roots.extend(["/usr/local", "/usr"].map(PathBuf::from));
    for root in roots {
        let Ok(entries) = std::fs::read_dir(root.join("lib")) else { continue };
        let mut pythons: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("python3")))
            .collect();
        pythons.sort();
        for py in pythons.iter().rev() {
            for pkg in ["site-packages", "dist-packages"] {
                for wheel in ["cu13", "cu12", "cuda_nvcc"] {
                    let p = py.join(pkg).join("nvidia").join(wheel).join("bin/ptxas");
                    if is_file(&p) {
                        return Some(p);
                    }
                }
            }
        }
    }
    Some(PathBuf::from("/usr/local/cuda/bin/ptxas")).filter(|p| is_file(p))
}

/// `ptxas -O3` on the same file, when one is found ([`find_ptxas`]), and
/// the ratio of the two throughputs.
fn ptxas(src: &str, ours: Duration) -> Result<(), Box<dyn Error>> {
    let Some(exe) = find_ptxas() else {
        println!("  ptxas not found ($PTXAS, PATH, pip wheel nvidia-cuda-nvcc): no comparison");
        return Ok(());
    };
    let path = std::env::temp_dir().join(format!("ptxvk-bench-{}.ptx", std::process::id()));
    std::fs::write(&path, src)?;
    let start = Instant::now();
    let out = std::process::Command::new(&exe).args(["-O3", "-arch=sm_80", "-o", "/dev/null"]).arg(&path).output();
    let t = start.elapsed();
    let _ = std::fs::remove_file(&path);
    match out {
        Ok(o) if o.status.success() => {
            report("ptxas -O3 (for scale)", src.len(), t, None);
            println!("  ({})", exe.display());
            let ratio = t.as_secs_f64() / ours.as_secs_f64();
            println!("  full-translation throughput / ptxas -O3 throughput: {ratio:.1}x");
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            println!("  ptxas -O3 failed ({}): {}", o.status, err.lines().take(3).collect::<Vec<_>>().join(" | "));
        }
        Err(e) => println!("  cannot run {}: {e}", exe.display()),
    }
    Ok(())
}

/// Parse + check throughput over the PTX corpus (`tests/corpus/ptx`, many
/// small and medium files, as a driver sees them): every file once, the
/// whole pass repeated for at least half a second.
pub fn corpus_throughput() -> Result<(), Box<dyn Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/ptx");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "ptx") {
            files.push((
                path.file_name().unwrap_or_default().to_string_lossy().into_owned(),
                std::fs::read_to_string(&path)?,
            ));
        }
    }
    let bytes: usize = files.iter().map(|(_, s)| s.len()).sum();
    let start = Instant::now();
    let mut rounds = 0u32;
    while rounds == 0 || start.elapsed() < Duration::from_millis(500) {
        for (name, src) in &files {
            ptxvk_translator::check_syntax(std::hint::black_box(src), name).map_err(|d| d.to_string())?;
        }
        rounds += 1;
    }
    let t = start.elapsed() / rounds;
    println!("corpus: {} files, {bytes} bytes of PTX (tests/corpus/ptx)", files.len());
    report("parse + check, per pass", bytes, t, None);
    Ok(())
}
