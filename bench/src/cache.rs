//! The persistent cache (issue 20 item 3): the time from loading a module
//! to its first kernel's result in a new process, with nothing cached,
//! with the translation in ptxvk's cache (`PTXVK_CACHE_DIR`), and with the
//! compiled pipeline in the driver's disk cache too (Mesa's
//! `MESA_SHADER_CACHE_DIR` on lavapipe). Each figure comes from a fresh
//! child process (`ptxvk-bench --cache-child`) with its own cache
//! directories; the median of [`ROUNDS`] rounds is reported, and the
//! ratios against the uncached time.
//!
//! The module is the bench's largest PTX, `tests/fixtures/gemm.ptx`; the
//! kernel is its tensor-core GEMM `hgemm_mma` at 128³, checked exactly
//! against the host (small dyadic f16 inputs: every sum is exact in f32).
//! Context creation is not counted. When a `ptxas` is found
//! ([`crate::frontend::find_ptxas`]), `ptxas -O3` on the same file (what
//! NVIDIA's driver runs to JIT it; median of 5) is the scale: the report
//! gives each load and first result as a ratio of its time.

use std::error::Error;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use ptxvk_runtime::{Context, DeviceSelector};

const PTX: &str = include_str!("../../tests/fixtures/gemm.ptx");
const ROUNDS: usize = 3;
const SIZE: usize = 128;

/// The child: loads the module, runs the GEMM once, checks it, and prints
/// `ms <load> <first result>` (milliseconds from the start of the load).
pub fn child() -> Result<bool, Box<dyn Error>> {
    let ctx = Context::new(DeviceSelector::Default)?;
    let n = SIZE;
    let ai: Vec<i32> = (0..n * n).map(|i| (i * 7 % 127) as i32 - 63).collect();
    let bi: Vec<i32> = (0..n * n).map(|i| (i * 13 % 113) as i32 - 56).collect();
    let upload = |bytes: Vec<u8>| -> Result<u64, Box<dyn Error>> {
        let d = ctx.alloc(bytes.len() as u64)?;
        ctx.copy_htod(d, &bytes)?;
        Ok(d)
    };
    let a = upload(ai.iter().flat_map(|&x| crate::gemm::f16_of(x).to_le_bytes()).collect())?;
    let b = upload(bi.iter().flat_map(|&x| crate::gemm::f16_of(x).to_le_bytes()).collect())?;
    let c = ctx.alloc((n * n * 4) as u64)?;
    ctx.memset_d32(c, 0xABAB_ABAB, (n * n) as u64)?;
    ctx.synchronize()?;

    let start = Instant::now();
    let module = ctx.load_module(PTX, "gemm.ptx")?;
    let loaded = start.elapsed();
    let f = module.function("hgemm_mma").ok_or("hgemm_mma missing")?;
    let mut args: Vec<Vec<u8>> = [a, b, c].iter().map(|p| p.to_le_bytes().to_vec()).collect();
    for _ in 0..3 {
        args.push((n as i32).to_le_bytes().to_vec());
    }
    let refs: Vec<&[u8]> = args.iter().map(|x| x.as_slice()).collect();
    let params = f.pack_params(&refs)?;
    ctx.launch(&f, [(n / 64) as u32, (n / 64) as u32, 1], [128, 1, 1], 0, &params)?;
    let mut out = vec![0u8; n * n * 4];
    ctx.copy_dtoh(&mut out, c)?;
    let first = start.elapsed();

    let got: Vec<f32> = out.chunks_exact(4).map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
    let mut ok = true;
    for i in 0..n {
        for j in 0..n {
            let want: f32 = (0..n).map(|k| (ai[i * n + k] * bi[k * n + j]) as f32 / 4096.0).sum();
            ok &= got[i * n + j] == want;
        }
    }
    println!("ms {:.1} {:.1}", loaded.as_secs_f64() * 1e3, first.as_secs_f64() * 1e3);
    Ok(ok)
}

/// One child run with these cache directories: (load ms, first result ms).
fn run_child(ptxvk_cache: &Path, mesa_cache: &Path) -> Result<(f64, f64), Box<dyn Error>> {
    let out = Command::new(std::env::current_exe()?)
        .arg("--cache-child")
        .env("PTXVK_CACHE_DIR", ptxvk_cache)
        .env_remove("PTXVK_CACHE")
        .env("MESA_SHADER_CACHE_DIR", mesa_cache)
        .env_remove("MESA_SHADER_CACHE_DISABLE")
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("the child failed: {text}{}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let line = text.lines().find_map(|l| l.strip_prefix("ms ")).ok_or("no timing from the child")?;
    let mut t = line.split_whitespace().map(str::parse::<f64>);
    match (t.next(), t.next()) {
        (Some(Ok(load)), Some(Ok(first))) => Ok((load, first)),
        _ => Err(format!("bad timing line {line:?}").into()),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the comparison; `Ok(false)` when a child's result was wrong.
pub fn run() -> Result<bool, Box<dyn Error>> {
    println!(
        "persistent cache: gemm.ptx ({} KB) load to first result (hgemm_mma {SIZE}^3) in a new process, median of {ROUNDS}",
        PTX.len() / 1024
    );
    let root = std::env::temp_dir().join(format!("ptxvk-bench-cache-{}", std::process::id()));
    let mut rows: [(Vec<f64>, Vec<f64>); 3] = Default::default();
    for round in 0..ROUNDS {
        let ours = root.join(format!("ptxvk-{round}"));
        let mesa = root.join(format!("mesa-{round}"));
        let mesa_cold = root.join(format!("mesa-cold-{round}"));
        for d in [&ours, &mesa, &mesa_cold] {
            let _ = std::fs::remove_dir_all(d);
            std::fs::create_dir_all(d)?;
        }
        // Nothing cached (this run fills both caches), the translation
        // cached (a new driver cache), everything cached.
        let runs = [(&ours, &mesa), (&ours, &mesa_cold), (&ours, &mesa)];
        for (row, (o, m)) in rows.iter_mut().zip(runs) {
            let (load, first) = run_child(o, m)?;
            row.0.push(load);
            row.1.push(first);
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    let ptxas = ptxas_ms()?;
    let cold = median(rows[0].1.clone());
    for (name, (load, first)) in
        ["nothing cached", "translation cached", "translation and pipeline cached"].iter().zip(rows)
    {
        let (load, first) = (median(load), median(first));
        println!(
            "  {name:<32} load {load:>8.1} ms, first result {first:>8.1} ms, {:>5.1}x faster than nothing cached",
            cold / first
        );
        if let Some(p) = ptxas {
            println!("  {:<32} load / ptxas -O3 {:.3}, first result / ptxas -O3 {:.1}", "", load / p, first / p);
        }
    }
    Ok(true)
}

/// `ptxas -O3 -arch=sm_80` on the module (ms, median of 5), when a
/// `ptxas` is found.
fn ptxas_ms() -> Result<Option<f64>, Box<dyn Error>> {
    let Some(exe) = crate::frontend::find_ptxas() else {
        println!("  ptxas not found ($PTXAS, PATH, pip wheel nvidia-cuda-nvcc): no JIT comparison");
        return Ok(None);
    };
    let path = std::env::temp_dir().join(format!("ptxvk-bench-cache-{}.ptx", std::process::id()));
    std::fs::write(&path, PTX)?;
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let out = Command::new(&exe).args(["-O3", "-arch=sm_80", "-o", "/dev/null"]).arg(&path).output()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        if !out.status.success() {
            let _ = std::fs::remove_file(&path);
            return Err(format!("ptxas -O3 failed: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
    }
    let _ = std::fs::remove_file(&path);
    let t = median(times);
    println!("  ptxas -O3 on the same file: {t:.1} ms ({})", exe.display());
    Ok(Some(t))
}
