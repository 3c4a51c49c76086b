//! ptxvk benchmarks, all in one run:
//!
//! 1. front-end and translation throughput with peak memory on a generated
//!    8 MB PTX file ([`frontend`]), and PTX → SPIR-V translation latency and
//!    throughput on the largest fixture in `tests/fixtures`;
//! 2. saxpy over 16M `f32` (`y = a * x + y`), launched through the runtime
//!    from the PTX `nvcc` emits (`bench/saxpy_f32.ptx`), against the same
//!    computation as a hand-written compute shader dispatched with plain
//!    `ash` (the baseline, [`baseline`]);
//! 3. TMA copy throughput: `cp.async.bulk.tensor` through the emulated copy
//!    engine against a plain `ld.global`/`st.global` copy kernel ([`tma`]);
//! 4. recursive device functions on the translator's explicit stack against
//!    the same walk with a hand-made stack ([`recursion`]);
//! 5. GEMM through tensor-core `mma.sync` (f16) against f32 FMA ([`gemm`]).
//! 6. Shared memory in Workgroup memory against spilled to device memory,
//!    and the spill code's cost where nothing spills ([`shared`]).
//! 7. The first-launch cost of warp votes against shuffles, for kernels
//!    of 25 to 200 of them ([`votes`]).
//! 8. The cost of the fault checks and of the memcheck ([`faults`]).
//! 9. The cost of lock step for legacy warp-synchronous code on the emulated
//!    warp path ([`lockstep`]).
//! 10. The persistent cache: load to first result in a new process with
//!     nothing cached, the translation cached, and the pipeline cached too
//!     ([`cache`]).
//! 11. How translation time grows with module size (1 KB to 10 MB) and
//!     launch time and memory with 100k launches ([`scale`]).
//! 12. The software texture unit: bilinear `tex2D` against the same filter
//!     by hand ([`tex`]).
//! 13. Six workloads (saxpy, reduction, SGEMM, transpose, stencil, the
//!     launch round trip) against their hand-written GLSL twins, with each
//!     costly lowering switched off in turn ([`twins`]).
//! 14. What a spin wait that does not wait costs on lavapipe, with each of
//!     the lowerings for waits switched off in turn ([`waits`]).
//! 15. What the loop lowerings for llvmpipe's limiter (the resume pass, the
//!     loop count) cost a kernel with a short loop ([`loops`]).
//!
//! ```text
//! cargo run --release -p ptxvk-bench
//! ```
//!
//! (`ptxvk-bench tma` runs only the TMA copy benchmark, `ptxvk-bench
//! recursion` only the recursion one, `ptxvk-bench gemm` only the GEMMs,
//! `ptxvk-bench shared` only the shared-memory one, `ptxvk-bench votes` only
//! the votes' compile cost, `ptxvk-bench faults` only the fault checks' cost,
//! `ptxvk-bench lockstep` only the lock-step one, `ptxvk-bench cache` only
//! the persistent cache's (it runs itself as `ptxvk-bench --cache-child`),
//! `ptxvk-bench scale` only the scaling one, `ptxvk-bench tex` only the
//! texture one, `ptxvk-bench twins [KERNEL]` only the hand-written twins' table (the rows
//! whose kernel's name contains KERNEL), `ptxvk-bench waits` only the waits',
//! `ptxvk-bench roundtrip` only the launch round trip (part of the scaling one),
//! `ptxvk-bench loops` only the loop lowerings' cost;
//! `ptxvk-bench --measure parse|check|translate` runs one front-end step;
//! the benchmark runs itself that way to measure each step's peak memory.)
//!
//! Each saxpy path is run once to warm up (lavapipe compiles a pipeline at
//! its first dispatch), then timed as the median of [`RUNS`] runs of
//! "dispatch, wait for completion". The outputs of the warm-up runs, both
//! from the same inputs, are checked against each other and against the CPU.

mod baseline;
mod cache;
mod faults;
mod frontend;
mod gemm;
mod handwritten;
mod lockstep;
mod loops;
mod recursion;
mod scale;
mod shared;
mod tex;
mod tma;
mod twins;
mod votes;
mod waits;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ptxvk_runtime::{Context, DeviceSelector, Function};

/// `nvcc -ptx -arch=sm_80 -O3 saxpy_f32.cu` (see `bench/saxpy_f32.cu`).
const SAXPY_PTX: &str = include_str!("../saxpy_f32.ptx");

/// Elements in the saxpy benchmark.
const N: u32 = 16 * 1024 * 1024;
/// Threads per block.
const BLOCK: u32 = 256;
/// The scalar `a`.
const A: f32 = 1.7;
/// Timed runs per path (the median is reported).
const RUNS: usize = 10;
/// Least time spent repeating the translation.
const TRANSLATE_MIN_TIME: Duration = Duration::from_millis(500);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    // `ptxvk-bench --measure STEP`: one front-end step (see `frontend`).
    if let [_, flag, step] = args.as_slice() {
        if flag == "--measure" {
            return exit(frontend::measure_step(step).map(|()| true));
        }
    }
    // `ptxvk-bench --cache-child`: one run of the cache benchmark, with the
    // caches its parent chose (see `cache`).
    if args.get(1).is_some_and(|a| a == "--cache-child") {
        return exit(cache::child());
    }
    // Before any Vulkan initialisation, and while the program has one
    // thread: lavapipe's on-disk shader cache would make the first dispatch
    // depend on earlier runs.
    std::env::set_var("MESA_SHADER_CACHE_DISABLE", "true");
    // Every figure but the cache's own is of translating anew.
    std::env::set_var("PTXVK_CACHE", "0");
    let on_device = |bench: fn(&Context) -> Result<bool, Box<dyn Error>>| {
        Context::new(DeviceSelector::Default).map_err(|e| e.into()).and_then(|c| bench(&c))
    };
    exit(match args.as_slice() {
        [_, a] if a == "recursion" => on_device(recursion::run),
        [_, a] if a == "gemm" => on_device(gemm::run),
        [_, a] if a == "shared" => on_device(shared::run),
        [_, a] if a == "faults" => faults::run(),
        [_, a] if a == "votes" => on_device(votes::run),
        [_, a] if a == "lockstep" => on_device(lockstep::run),
        [_, a] if a == "tex" => on_device(tex::run),
        [_, a] if a == "twins" => on_device(twins::run),
        [_, a] if a == "waits" => on_device(waits::run),
        [_, a, only] if a == "twins" => {
            Context::new(DeviceSelector::Default).map_err(|e| e.into()).and_then(|c| twins::run_only(&c, Some(only)))
        }
        [_, a] if a == "cache" => cache::run(),
        [_, a] if a == "scale" => on_device(scale::run),
        [_, a] if a == "roundtrip" => on_device(scale::round_trip),
        [_, a] if a == "loops" => on_device(loops::run),
        [_, a] if a == "--f64" => on_device(|c| float_cost(c).map(|()| true)),
        [_, a] if a == "tma" => run(true),
        _ => run(false),
    })
}

/// The exit status of a run (`Ok(false)`: a result was wrong).
fn exit(outcome: Result<bool, Box<dyn Error>>) -> ExitCode {
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("FAILED: outputs do not match");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the benchmarks (only the TMA one with `only_tma`); `Ok(false)` when a result is wrong.
fn run(only_tma: bool) -> Result<bool, Box<dyn Error>> {
    if !only_tma {
        frontend::run()?;
        println!();
    }
    let ctx = Context::new(DeviceSelector::Default)?;
    let info = ctx.info();
    println!("device: {} ({}), {} CPU threads", info.name, info.driver_name, num_threads());
    if only_tma {
        return tma::run(&ctx);
    }

    translation_throughput(&ctx)?;
    println!();
    float_cost(&ctx)?;
    println!();
    let saxpy_ok = saxpy(&ctx)?;
    println!();
    let twins_ok = twins::run(&ctx)?;
    println!();
    let tma_ok = tma::run(&ctx)?;
    println!();
    let recursion_ok = recursion::run(&ctx)?;
    println!();
    let gemm_ok = gemm::run(&ctx)?;
    println!();
    let shared_ok = shared::run(&ctx)?;
    println!();
    let votes_ok = votes::run(&ctx)?;
    println!();
    let lockstep_ok = lockstep::run(&ctx)?;
    println!();
    let tex_ok = tex::run(&ctx)?;
    println!();
    let waits_ok = waits::run(&ctx)?;
    println!();
    let loops_ok = loops::run(&ctx)?;
    println!();
    let faults_ok = faults::run()?;
    println!();
    let scale_ok = scale::run(&ctx)?;
    println!();
    let cache_ok = cache::run()?;
    Ok(saxpy_ok
        && twins_ok
        && tma_ok
        && recursion_ok
        && gemm_ok
        && shared_ok
        && votes_ok
        && lockstep_ok
        && tex_ok
        && waits_ok
        && loops_ok
        && faults_ok
        && scale_ok
        && cache_ok)
}

/// Elements in the float-cost kernels.
const FN: u32 = 1 << 20;

/// The cost of the software float paths: kernels that apply one operation
/// 8 times per element over [`FN`] elements, timed (median of [`RUNS`]) and
/// compared with a native `mul` + `add` of the same type.
fn float_cost(ctx: &Context) -> Result<(), Box<dyn Error>> {
    let ops: [(&str, &str, &str); 7] = [
        ("f64", "mul+add", "mul.rn.f64 v, v, k; add.rn.f64 v, v, k;"),
        ("f64", "fma.rn", "fma.rn.f64 v, v, k, k;"),
        ("f64", "fma.rz", "fma.rz.f64 v, v, k, k;"),
        ("f64", "div.rn", "div.rn.f64 v, k, v;"),
        ("f32", "mul+add", "mul.rn.f32 v, v, k; add.rn.f32 v, v, k;"),
        ("f32", "sin.approx", "sin.approx.f32 v, v;"),
        ("f32", "cos.approx", "cos.approx.f32 v, v;"),
    ];
    println!(
        "float paths: {FN} elements x 8 operations, median of {RUNS} runs (emulate_fma: {})",
        ctx.info().emulate_fma
    );
    let mut base = [0f64; 2];
    for (ty, name, op) in ops {
        let (bytes, k) = if ty == "f64" { (8u32, "0d3ff0000000000001") } else { (4, "0f3f800001") };
        let body: String = (0..8).map(|_| op).collect::<Vec<_>>().join("\n\t");
        let ptx = format!(
            ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n\t\
             .reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\t.reg .{ty} v, k;\n\t\
             mov.{ty} k, {k};\n\tmov.u32 %r1, %ctaid.x;\n\tmov.u32 %r2, %ntid.x;\n\tmov.u32 %r3, %tid.x;\n\t\
             mad.lo.u32 %r1, %r1, %r2, %r3;\n\tld.param.u64 %rd1, [p];\n\tmul.wide.u32 %rd2, %r1, {bytes};\n\t\
             add.s64 %rd1, %rd1, %rd2;\n\tld.global.{ty} v, [%rd1];\n\t{body}\n\tst.global.{ty} [%rd1], v;\n\tret;\n}}\n"
        );
        let m = ctx.load_module(&ptx, "float-cost.ptx")?;
        let f = m.function("k").ok_or("no entry k")?;
        let d = ctx.alloc(FN as u64 * bytes as u64)?;
        let init: Vec<u8> = (0..FN)
            .flat_map(|i| {
                let x = 0.5 + (i % 1000) as f64 / 1000.0;
                if ty == "f64" {
                    x.to_le_bytes().to_vec()
                } else {
                    (x as f32).to_le_bytes().to_vec()
                }
            })
            .collect();
        ctx.copy_htod(d, &init)?;
        let params = f.pack_params(&[&d.to_le_bytes()])?;
        let go = || -> Result<(), Box<dyn Error>> {
            ctx.launch(&f, [FN / BLOCK, 1, 1], [BLOCK, 1, 1], 0, &params)?;
            ctx.synchronize()?;
            Ok(())
        };
        go()?;
        let t = median((0..RUNS).map(|_| time(go)).collect::<Result<Vec<_>, _>>()?).as_secs_f64();
        ctx.free(d)?;
        let slot = usize::from(ty == "f32");
        if name == "mul+add" {
            base[slot] = t;
        }
        println!("  {ty} {name:<11} {:8.2} ms  {:5.2}x {ty} mul+add", t * 1e3, t / base[slot]);
    }
    Ok(())
}

/// Number of host threads (for context: lavapipe runs on the CPU).
fn num_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The largest `.ptx` file in `tests/fixtures`.
fn largest_fixture() -> std::io::Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "ptx") {
            let len = std::fs::metadata(&path)?.len();
            if best.as_ref().map_or(true, |(l, _)| len > *l) {
                best = Some((len, path));
            }
        }
    }
    best.map(|(_, p)| p).ok_or_else(|| std::io::Error::other(format!("no .ptx in {}", dir.display())))
}

/// Prints the translation throughput: the largest fixture translated again
/// and again (with this device's options) for at least [`TRANSLATE_MIN_TIME`].
fn translation_throughput(ctx: &Context) -> Result<(), Box<dyn Error>> {
    let path = largest_fixture()?;
    let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let source = std::fs::read_to_string(&path)?;
    let options = ctx.translate_options();
    let words = ptxvk_translator::translate(&source, &name, &options).map_err(|d| d.to_string())?.spirv.len();

    let start = Instant::now();
    let mut count = 0u64;
    while start.elapsed() < TRANSLATE_MIN_TIME {
        let t = ptxvk_translator::translate(std::hint::black_box(&source), &name, &options);
        std::hint::black_box(t.map_err(|d| d.to_string())?);
        count += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let mb_per_s = source.len() as f64 * count as f64 / secs / 1e6;
    println!("translation: {name} ({} bytes of PTX -> {} bytes of SPIR-V)", source.len(), words * 4);
    println!("  {count} translations in {secs:.2} s: {:.1} us each, {mb_per_s:.2} MB/s", secs / count as f64 * 1e6);
    Ok(())
}

/// Wall time of one call of `f`.
fn time(f: impl FnOnce() -> Result<(), Box<dyn Error>>) -> Result<Duration, Box<dyn Error>> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed())
}

/// Median of a list of timings.
fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Deterministic inputs in [0, 1): positive, so results never cancel and
/// "1 ulp apart" is a meaningful tolerance.
fn inputs() -> (Vec<f32>, Vec<f32>) {
    let mut state = 0x2545_f491_u32;
    let mut next = move || {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 8) as f32 / (1u32 << 24) as f32
    };
    let x: Vec<f32> = (0..N).map(|_| next()).collect();
    let y: Vec<f32> = (0..N).map(|_| next()).collect();
    (x, y)
}

/// Distance in units in the last place between two non-negative floats.
fn ulps(a: f32, b: f32) -> u32 {
    a.to_bits().abs_diff(b.to_bits())
}

/// Saxpy through the runtime, set up once: `x` and `y` on the device and
/// the packed parameters. The buffers are freed on drop.
struct RuntimeSaxpy {
    ctx: Context,
    f: Function,
    params: Vec<u8>,
    dx: u64,
    dy: u64,
}

impl RuntimeSaxpy {
    /// Allocates and uploads `x` and `y`.
    fn new(ctx: &Context, f: Function, x: &[f32], y: &[f32]) -> Result<RuntimeSaxpy, Box<dyn Error>> {
        let bytes = N as u64 * 4;
        let mut s = RuntimeSaxpy { ctx: ctx.clone(), f, params: Vec::new(), dx: 0, dy: 0 };
        s.dx = ctx.alloc(bytes)?;
        s.dy = ctx.alloc(bytes)?;
        ctx.copy_htod(s.dx, &to_bytes(x))?;
        ctx.copy_htod(s.dy, &to_bytes(y))?;
        let n = N as i32;
        s.params = s.f.pack_params(&[&n.to_le_bytes(), &A.to_le_bytes(), &s.dx.to_le_bytes(), &s.dy.to_le_bytes()])?;
        Ok(s)
    }

    /// Launches saxpy and waits for it.
    fn run(&self) -> Result<(), Box<dyn Error>> {
        self.ctx.launch(&self.f, [N.div_ceil(BLOCK), 1, 1], [BLOCK, 1, 1], 0, &self.params)?;
        self.ctx.synchronize()?;
        Ok(())
    }

    /// Reads `y` back.
    fn download_y(&self) -> Result<Vec<f32>, Box<dyn Error>> {
        let mut out = vec![0u8; N as usize * 4];
        self.ctx.copy_dtoh(&mut out, self.dy)?;
        Ok(out.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

impl Drop for RuntimeSaxpy {
    fn drop(&mut self) {
        for d in [self.dx, self.dy] {
            if d != 0 {
                let _ = self.ctx.free(d);
            }
        }
    }
}

/// `f32`s as little-endian bytes.
fn to_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Prints the saxpy comparison; `Ok(false)` when an output is wrong.
fn saxpy(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    let (x, y) = inputs();
    let fused: Vec<f32> = x.iter().zip(&y).map(|(&x, &y)| A.mul_add(x, y)).collect();
    let emulated = ctx.info().emulate_fma;
    let gb = 3.0 * N as f64 * 4.0 / 1e9; // read x, read y, write y
    println!("saxpy: y = {A} * x + y over {N} f32 ({:.0} MB moved per run), median of {RUNS} runs", gb * 1e3);

    // The runtime, from nvcc's PTX (fma.rn.f32).
    let module = ctx.load_module(SAXPY_PTX, "saxpy_f32.ptx")?;
    let f = module.function("saxpy_f32").ok_or("saxpy_f32.ptx has no saxpy_f32")?;
    let runtime = RuntimeSaxpy::new(ctx, f, &x, &y)?;

    // Where the driver's Fma is not fused, the runtime emulates a fused one;
    // then also run the same PTX translated with the driver's Fma, to show
    // what exactness costs.
    let driver_fma = if emulated {
        let mut options = ctx.translate_options();
        options.emulate_fma = false;
        let t = ptxvk_translator::translate(SAXPY_PTX, "saxpy_f32.ptx", &options).map_err(|d| d.to_string())?;
        let module = ctx.load_spirv(&t.spirv, t.info)?;
        let f = module.function("saxpy_f32").ok_or("no saxpy_f32")?;
        Some(RuntimeSaxpy::new(ctx, f, &x, &y)?)
    } else {
        None
    };

    // The baseline: hand-written shader, plain ash, same device.
    let base = baseline::Baseline::new(ctx.info().uuid, N, A)?;
    base.upload(&x, &y)?;

    // Warm-up runs, from the same inputs: their outputs are checked below.
    runtime.run()?;
    let rt_out = runtime.download_y()?;
    let driver_out = match &driver_fma {
        Some(s) => {
            s.run()?;
            Some(s.download_y()?)
        }
        None => None,
    };
    base.run()?;
    let base_out = base.download_y()?;

    // Timed runs, interleaved so that a change of machine load affects every
    // path alike.
    let (mut rt_times, mut driver_times, mut base_times) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        rt_times.push(time(|| runtime.run())?);
        if let Some(s) = &driver_fma {
            driver_times.push(time(|| s.run())?);
        }
        base_times.push(time(|| base.run())?);
    }
    let (rt_time, base_time) = (median(rt_times), median(base_times));
    let driver_time = driver_fma.as_ref().map(|_| median(driver_times));
    let base_name = base.device_name().to_string();
    drop((base, driver_fma, runtime));

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let rate = |d: Duration| gb / d.as_secs_f64();
    let fma_note = if emulated { "fused fma emulated: the driver does not fuse" } else { "driver fma" };
    println!("  runtime (PTX from nvcc, {fma_note}): {:8.2} ms  {:6.2} GB/s", ms(rt_time), rate(rt_time));
    if let Some(t) = driver_time {
        println!("  runtime (same PTX, driver fma, not exact): {:8.2} ms  {:6.2} GB/s", ms(t), rate(t));
    }
    println!(
        "  baseline (GLSL-style shader, plain ash, {base_name}): {:8.2} ms  {:6.2} GB/s",
        ms(base_time),
        rate(base_time)
    );
    println!("  ratio runtime/baseline: {:.2}", rt_time.as_secs_f64() / base_time.as_secs_f64());
    if let Some(t) = driver_time {
        println!("  ratio runtime (driver fma)/baseline: {:.2}", t.as_secs_f64() / base_time.as_secs_f64());
    }

    // Check: the runtime must match a correctly rounded fma bit for bit
    // (PTX fma.rn.f32); the baseline's GLSL fma may be a multiply then an
    // add on drivers that do not fuse, so it must be within 1 ulp of it.
    let rt_wrong = (0..N as usize).filter(|&i| rt_out[i].to_bits() != fused[i].to_bits()).count();
    let base_diff = (0..N as usize).filter(|&i| base_out[i].to_bits() != rt_out[i].to_bits()).count();
    let base_max_ulps = (0..N as usize).map(|i| ulps(base_out[i], rt_out[i])).max().unwrap_or(0);
    let mut ok = true;
    if rt_wrong == 0 {
        println!("  check: runtime output equals the CPU's fused a.mul_add(x, y) bit for bit");
    } else {
        println!("  check: runtime output differs from the CPU's fused a.mul_add(x, y) in {rt_wrong} elements");
        ok = false;
    }
    if base_diff == 0 {
        println!("  check: baseline output equals the runtime's bit for bit");
    } else {
        // Is the baseline exactly "round(a * x) then round(+ y)"?
        let unfused = (0..N as usize).all(|i| base_out[i].to_bits() == (A * x[i] + y[i]).to_bits());
        let why =
            if unfused { "this driver's fma is a multiply then an add" } else { "this driver's fma is not exact" };
        println!(
            "  check: baseline differs from the runtime in {base_diff} of {N} elements, at most {base_max_ulps} ulp \
             (tolerance 1 ulp: {why}, the runtime's fma is fused)"
        );
        ok &= base_max_ulps <= 1;
    }
    if let Some(out) = &driver_out {
        let max = (0..N as usize).map(|i| ulps(out[i], base_out[i])).max().unwrap_or(0);
        println!("  check: runtime with driver fma vs baseline: at most {max} ulp apart");
        ok &= max <= 1;
    }
    println!("{}", if ok { "ok" } else { "MISMATCH" });
    Ok(ok)
}
