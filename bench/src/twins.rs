//! ptxvk against hand-written compute shaders (issue 20's table): each
//! workload of `bench/twins/twins.cu` (nvcc's PTX, through the runtime)
//! runs back to back with its twin written in GLSL (`bench/twins/*.comp`,
//! checked in as SPIR-V, dispatched with plain `ash` by
//! [`crate::handwritten`]): same computation, tiling and vector widths.
//! Each ratio is hand-written time / ptxvk time (1.0 is parity, higher is
//! better for ptxvk).
//!
//! To show where the time goes, each ptxvk kernel also runs translated
//! with costly lowerings switched off (for measurement only: some of these
//! are wrong on this driver): without the fault checks; without them and
//! one more each of the exact `fma` emulation, the loop workarounds for
//! llvmpipe's loop limiter, the zero-operand workaround, the warp
//! emulation; and with all of them off. (The checks cost the most on
//! lavapipe; measured on top of them, the others would not show.)
//!
//! The warp emulation (warps exchanging values through workgroup memory
//! and barriers, in workgroup-uniform control flow: the only correct path
//! on a device whose subgroups are narrower than a warp, such as
//! lavapipe's 8 lanes) is switched off by translating for the slice path
//! instead: each warp operation is one subgroup operation, as on a device
//! with 32- or 64-lane subgroups. On 8-lane subgroups that reads lanes
//! outside the subgroup, so the results are wrong and only the time
//! counts. On a device that runs warps natively the column equals the one
//! before it.
//!
//! Every output buffer is poisoned before the first run. The default
//! translation must give the host's result bit for bit (the host computes
//! in the CUDA source's order, `fma` fused); the hand-written shaders and
//! the variants within a relative 1e-4 (GLSL's `fma` need not be fused).

use std::cmp::Ordering;
use std::error::Error;
use std::time::Duration;

use ptxvk_runtime::{Context, DeviceSelector, FaultMode, Function, Module};
use ptxvk_translator::{Options, WarpPath};

use crate::handwritten::{self, Gpu, Kernel};
use crate::{median, time};

/// `nvcc -ptx -arch=sm_80 -O3 twins.cu -o twins.ptx` (nvcc 13.5).
const PTX: &str = include_str!("../twins/twins.ptx");

/// Timed runs per path and workload (the median is reported).
const RUNS: usize = 7;
/// Round trips timed for the launch row (the median is reported).
const ROUND_TRIPS: usize = 400;
/// Bytes every output buffer is filled with before the first run (a NaN).
const POISON: u8 = 0xff;

/// Result type of this benchmark.
type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// One workload: the kernel's buffers and parameters, the shader's
/// dispatch, and the result the host computes.
struct Workload {
    /// Row label.
    name: &'static str,
    /// Entry in `twins.ptx`.
    kernel: &'static str,
    /// The hand-written twin's SPIR-V.
    spirv: &'static [u8],
    /// The same twin through buffer device addresses (`*_bda.comp`: the
    /// buffers' addresses as u64 push constants before `push`, 64-bit
    /// address arithmetic as in ptxvk's translations), where there is one.
    bda_spirv: Option<&'static [u8]>,
    /// Buffer contents in binding order (`None`: an output, poisoned).
    buffers: Vec<Buffer>,
    /// The CUDA kernel's parameters, given the buffers' device addresses.
    params: fn(&[u64]) -> Vec<Vec<u8>>,
    /// CUDA grid and block.
    grid: [u32; 3],
    block: [u32; 3],
    /// The shader's push constants and workgroup counts.
    push: Vec<u8>,
    groups: [u32; 3],
    /// Which buffer holds the result, and the result the host computes.
    output: usize,
    want: Vec<f32>,
}

/// A buffer's initial contents.
enum Buffer {
    Input(Vec<f32>),
    Output(usize),
}

impl Buffer {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Buffer::Input(v) => v.iter().flat_map(|f| f.to_le_bytes()).collect(),
            Buffer::Output(len) => vec![POISON; len * 4],
        }
    }
}

/// Deterministic values in [0, 1) (positive: sums never cancel, so a
/// relative tolerance means something).
fn random(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 24) as f32
        })
        .collect()
}

fn le(values: &[&[u8]]) -> Vec<Vec<u8>> {
    values.iter().map(|v| v.to_vec()).collect()
}

fn saxpy() -> Workload {
    const N: usize = 16 << 20;
    const A: f32 = 1.7;
    let (x, y) = (random(N, 1), random(N, 2));
    let want = x.iter().zip(&y).map(|(&x, &y)| A.mul_add(x, y)).collect();
    let groups = (N / 256) as u32;
    Workload {
        name: "saxpy, 16M floats",
        kernel: "saxpy",
        spirv: include_bytes!("../twins/saxpy.spv"),
        bda_spirv: Some(include_bytes!("../twins/saxpy_bda.spv")),
        buffers: vec![Buffer::Input(x), Buffer::Input(y)],
        params: |a| le(&[&(N as i32).to_le_bytes(), &A.to_le_bytes(), &a[0].to_le_bytes(), &a[1].to_le_bytes()]),
        grid: [groups, 1, 1],
        block: [256, 1, 1],
        push: [(N as u32).to_le_bytes(), A.to_le_bytes()].concat(),
        groups: [256, groups / 256, 1],
        output: 1,
        want,
    }
}

fn reduce_sum() -> Workload {
    const N: usize = 16 << 20;
    const BLOCKS: usize = 1024;
    let x = random(N, 3);
    // The CUDA source's order: a grid-stride sum per thread, then
    // `__shfl_down_sync` trees (a lane past the warp reads itself).
    let shuffle_tree = |mut s: Vec<f32>, first: usize| {
        let mut o = first;
        while o > 0 {
            s = (0..32).map(|l| s[l] + if l + o < 32 { s[l + o] } else { s[l] }).collect();
            o >>= 1;
        }
        s[0]
    };
    let want = (0..BLOCKS)
        .map(|b| {
            let sums: Vec<f32> = (0..256)
                .map(|t| {
                    let mut s = 0.0f32;
                    let mut i = b * 256 + t;
                    while i < N {
                        s += x[i];
                        i += BLOCKS * 256;
                    }
                    s
                })
                .collect();
            let warps: Vec<f32> = sums.chunks(32).map(|w| shuffle_tree(w.to_vec(), 16)).collect();
            let lanes = (0..32).map(|l| if l < 8 { warps[l] } else { 0.0 }).collect();
            shuffle_tree(lanes, 4)
        })
        .collect();
    Workload {
        name: "reduction, 16M floats",
        kernel: "reduce_sum",
        spirv: include_bytes!("../twins/reduce_sum.spv"),
        bda_spirv: None,
        buffers: vec![Buffer::Input(x), Buffer::Output(BLOCKS)],
        params: |a| le(&[&(N as i32).to_le_bytes(), &a[0].to_le_bytes(), &a[1].to_le_bytes()]),
        grid: [BLOCKS as u32, 1, 1],
        block: [256, 1, 1],
        push: (N as u32).to_le_bytes().to_vec(),
        groups: [BLOCKS as u32, 1, 1],
        output: 1,
        want,
    }
}

fn sgemm() -> Workload {
    const N: usize = 512;
    let (a, b) = (random(N * N, 4), random(N * N, 5));
    let mut want = vec![0.0f32; N * N];
    for row in 0..N {
        for col in 0..N {
            let mut acc = 0.0f32;
            for k in 0..N {
                acc = a[row * N + k].mul_add(b[k * N + col], acc);
            }
            want[row * N + col] = acc;
        }
    }
    let tiles = (N / 16) as u32;
    Workload {
        name: "SGEMM 512^3, 16x16 shared tiles",
        kernel: "sgemm",
        spirv: include_bytes!("../twins/sgemm.spv"),
        bda_spirv: None,
        buffers: vec![Buffer::Input(a), Buffer::Input(b), Buffer::Output(N * N)],
        params: |a| le(&[&(N as i32).to_le_bytes(), &a[0].to_le_bytes(), &a[1].to_le_bytes(), &a[2].to_le_bytes()]),
        grid: [tiles, tiles, 1],
        block: [16, 16, 1],
        push: (N as u32).to_le_bytes().to_vec(),
        groups: [tiles, tiles, 1],
        output: 2,
        want,
    }
}

fn transpose() -> Workload {
    const N: usize = 4096;
    let input = random(N * N, 6);
    let mut want = vec![0.0f32; N * N];
    for y in 0..N {
        for x in 0..N {
            want[x * N + y] = input[y * N + x];
        }
    }
    let tiles = (N / 32) as u32;
    Workload {
        name: "transpose 4096^2, padded shared tile",
        kernel: "transpose",
        spirv: include_bytes!("../twins/transpose.spv"),
        bda_spirv: None,
        buffers: vec![Buffer::Input(input), Buffer::Output(N * N)],
        params: |a| le(&[&(N as i32).to_le_bytes(), &a[0].to_le_bytes(), &a[1].to_le_bytes()]),
        grid: [tiles, tiles, 1],
        block: [32, 8, 1],
        push: (N as u32).to_le_bytes().to_vec(),
        groups: [tiles, tiles, 1],
        output: 1,
        want,
    }
}

/// The stencil's weights (positive, in [0, 1)).
fn stencil_weights() -> Vec<f32> {
    random(9, 7)
}

fn stencil() -> Workload {
    const N: usize = 4096;
    let input = random(N * N, 8);
    let w = stencil_weights();
    let mut want = vec![0.0f32; N * N];
    for y in 0..N {
        for x in 0..N {
            let mut acc = 0.0f32;
            for dy in 0..3 {
                let yy = (y + dy).saturating_sub(1).min(N - 1);
                for dx in 0..3 {
                    let xx = (x + dx).saturating_sub(1).min(N - 1);
                    acc = w[dy * 3 + dx].mul_add(input[yy * N + xx], acc);
                }
            }
            want[y * N + x] = acc;
        }
    }
    let push = [(N as u32).to_le_bytes().to_vec(), w.iter().flat_map(|f| f.to_le_bytes()).collect()].concat();
    Workload {
        name: "3x3 stencil 4096^2, 8 rows a thread",
        kernel: "stencil3x3",
        spirv: include_bytes!("../twins/stencil3x3.spv"),
        bda_spirv: None,
        buffers: vec![Buffer::Input(input), Buffer::Output(N * N)],
        params: |a| {
            let w: Vec<u8> = stencil_weights().iter().flat_map(|f| f.to_le_bytes()).collect();
            le(&[&(N as i32).to_le_bytes(), &w, &a[0].to_le_bytes(), &a[1].to_le_bytes()])
        },
        grid: [(N / 32) as u32, (N / 64) as u32, 1],
        block: [32, 8, 1],
        push,
        groups: [(N / 32) as u32, (N / 64) as u32, 1],
        output: 1,
        want,
    }
}

/// A translation of the PTX: the context it runs in and how its options
/// differ from that context's defaults.
struct Variant {
    /// Column label (at most 12 characters).
    label: &'static str,
    /// Runs in the context without fault checks.
    unchecked: bool,
    /// Must give the host's result bit for bit.
    exact: bool,
    change: fn(&mut Options),
}

/// The default translation, then without the fault checks (the largest
/// cost on lavapipe, which would hide the others), then without the checks
/// and one more lowering each, then without all of them.
fn variants() -> Vec<Variant> {
    fn loops(o: &mut Options) {
        o.unroll_loops = 0;
        o.unroll_spin_loops = 0;
        o.loop_limit = false;
        o.loop_live_outs_in_memory = false;
        o.block_order_threads = 0;
    }
    /// Warp operations as single subgroup operations where they are
    /// emulated (see the module docs; wrong results on narrow subgroups).
    fn warps(o: &mut Options) {
        if o.warp_path == WarpPath::Emulated {
            o.warp_path = WarpPath::Slice;
        }
    }
    vec![
        Variant { label: "default", unchecked: false, exact: true, change: |_| {} },
        Variant { label: "no checks", unchecked: true, exact: true, change: |_| {} },
        Variant { label: "+driver fma", unchecked: true, exact: false, change: |o| o.emulate_fma = false },
        Variant { label: "+no loop fix", unchecked: true, exact: false, change: loops },
        Variant { label: "+no zero-op", unchecked: true, exact: false, change: |o| o.zero_operand_workaround = false },
        Variant { label: "+no warp emu", unchecked: true, exact: false, change: warps },
        Variant {
            label: "all off",
            unchecked: true,
            exact: false,
            change: |o| {
                o.emulate_fma = false;
                o.zero_operand_workaround = false;
                loops(o);
                warps(o);
            },
        },
    ]
}

/// The two contexts: the default one and one without fault checks.
struct Contexts<'a> {
    checked: &'a Context,
    unchecked: Context,
}

impl Contexts<'_> {
    fn of(&self, v: &Variant) -> &Context {
        if v.unchecked {
            &self.unchecked
        } else {
            self.checked
        }
    }

    /// The PTX as `v` translates it, loaded in its context (once per
    /// variant; every workload takes its kernel from it).
    fn load(&self, v: &Variant) -> Result<Module> {
        let ctx = self.of(v);
        let mut options = ctx.translate_options();
        (v.change)(&mut options);
        let t = ptxvk_translator::translate(PTX, "twins.ptx", &options).map_err(|d| d.to_string())?;
        Ok(ctx.load_spirv(&t.spirv, t.info)?)
    }
}

/// `kernel` of a loaded translation.
fn function(module: &Module, kernel: &str) -> Result<Function> {
    Ok(module.function(kernel).ok_or_else(|| format!("twins.ptx has no {kernel}"))?)
}

/// One workload through one variant: its buffers on the device.
struct Launch<'a> {
    ctx: &'a Context,
    f: Function,
    grid: [u32; 3],
    block: [u32; 3],
    params: Vec<u8>,
    addrs: Vec<u64>,
}

impl Launch<'_> {
    fn run(&self) -> Result<()> {
        self.ctx.launch(&self.f, self.grid, self.block, 0, &self.params)?;
        self.ctx.synchronize()?;
        Ok(())
    }
}

impl Drop for Launch<'_> {
    fn drop(&mut self) {
        for &a in &self.addrs {
            let _ = self.ctx.free(a);
        }
    }
}

/// The output as floats.
fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Elements of `got` that differ from `want`: bitwise (`exact`), or by
/// more than a relative 1e-4 (NaN, the poison, always differs).
fn mismatches(got: &[f32], want: &[f32], exact: bool) -> usize {
    got.iter()
        .zip(want)
        .filter(|(&g, &w)| {
            if exact {
                g.to_bits() != w.to_bits()
            } else {
                // NaN (the poison) compares with nothing: a mismatch.
                let tolerance = 1e-4 * w.abs().max(1e-6);
                !matches!((g - w).abs().partial_cmp(&tolerance), Some(Ordering::Less | Ordering::Equal))
            }
        })
        .count()
}

/// Device buffers of the hand-written path holding `contents`, in order.
fn uploaded(gpu: &Gpu, contents: &[Vec<u8>]) -> Result<Vec<handwritten::Buffer>> {
    let buffers = contents.iter().map(|c| gpu.buffer(c.len() as u64)).collect::<Result<Vec<_>>>()?;
    for (b, c) in buffers.iter().zip(contents) {
        gpu.upload(b, c)?;
    }
    Ok(buffers)
}

/// Runs one workload: every variant and the shader, checked, then timed
/// interleaved. Returns the medians (shader first, then the variants') and
/// whether every output was right.
fn measure(
    ctxs: &Contexts,
    gpu: &Gpu,
    w: &Workload,
    variants: &[Variant],
    modules: &[Module],
) -> Result<(Vec<Duration>, Option<Duration>, bool)> {
    let mut ok = true;
    let contents: Vec<Vec<u8>> = w.buffers.iter().map(Buffer::bytes).collect();
    let out_bytes = w.want.len() * 4;

    // The hand-written shader.
    let buffers = uploaded(gpu, &contents)?;
    let shader: Kernel = gpu.kernel(w.spirv, &buffers.iter().collect::<Vec<_>>(), &w.push, w.groups)?;
    shader.run()?;
    let bad = mismatches(&floats(&gpu.download(&buffers[w.output], out_bytes)?), &w.want, false);
    if bad > 0 {
        println!("    hand-written shader: {bad} of {} elements wrong", w.want.len());
        ok = false;
    }
    // The same shader through device addresses, on buffers of its own.
    let bda = match w.bda_spirv {
        Some(spirv) => {
            let buffers = uploaded(gpu, &contents)?;
            let mut push: Vec<u8> = buffers.iter().flat_map(|b| b.address().to_le_bytes()).collect();
            push.extend_from_slice(&w.push);
            let kernel = gpu.kernel(spirv, &[], &push, w.groups)?;
            kernel.run()?;
            let bad = mismatches(&floats(&gpu.download(&buffers[w.output], out_bytes)?), &w.want, false);
            if bad > 0 {
                println!("    hand-written shader through device addresses: {bad} of {} elements wrong", w.want.len());
                ok = false;
            }
            Some((kernel, buffers))
        }
        None => None,
    };

    // ptxvk, each variant.
    let mut launches = Vec::new();
    for (v, module) in variants.iter().zip(modules) {
        let ctx = ctxs.of(v);
        let f = function(module, w.kernel)?;
        let mut addrs = Vec::new();
        for c in &contents {
            let a = ctx.alloc(c.len() as u64)?;
            addrs.push(a);
            ctx.copy_htod(a, c)?;
        }
        let params = (w.params)(&addrs);
        let params = f.pack_params(&params.iter().map(Vec::as_slice).collect::<Vec<_>>())?;
        let launch = Launch { ctx, f, grid: w.grid, block: w.block, params, addrs };
        launch.run()?;
        let mut out = vec![0u8; out_bytes];
        ctx.copy_dtoh(&mut out, launch.addrs[w.output])?;
        let exact = v.exact;
        let bad = mismatches(&floats(&out), &w.want, exact);
        if bad > 0 {
            let how = if exact { "differ from the host's bits" } else { "off by more than 1e-4" };
            println!("    ptxvk ({}): {bad} of {} elements {how}", v.label, w.want.len());
            ok &= !exact;
        }
        launches.push(launch);
    }

    // Timed runs, interleaved so that a change of load affects every path alike.
    let mut times = vec![Vec::new(); launches.len() + 1];
    let mut bda_times = Vec::new();
    for _ in 0..RUNS {
        times[0].push(time(|| shader.run())?);
        if let Some((kernel, _)) = &bda {
            bda_times.push(time(|| kernel.run())?);
        }
        for (t, l) in times[1..].iter_mut().zip(&launches) {
            t.push(time(|| l.run())?);
        }
    }
    let bda = (!bda_times.is_empty()).then(|| median(bda_times));
    Ok((times.into_iter().map(median).collect(), bda, ok))
}

/// The launch round trip of an empty kernel: ptxvk's launch + synchronise
/// against submitting the pre-recorded dispatch and waiting.
fn round_trip(ctxs: &Contexts, gpu: &Gpu, variants: &[Variant], modules: &[Module]) -> Result<Vec<Duration>> {
    let shader = gpu.kernel(include_bytes!("../twins/empty.spv"), &[], &[], [1, 1, 1])?;
    let mut launches = Vec::new();
    for (v, module) in variants.iter().zip(modules) {
        let f = function(module, "empty")?;
        let params = f.pack_params(&[])?;
        let launch = Launch { ctx: ctxs.of(v), f, grid: [1, 1, 1], block: [32, 1, 1], params, addrs: Vec::new() };
        launch.run()?;
        launches.push(launch);
    }
    shader.run()?;
    let mut times = vec![Vec::new(); launches.len() + 1];
    for _ in 0..ROUND_TRIPS {
        times[0].push(time(|| shader.run())?);
        for (t, l) in times[1..].iter_mut().zip(&launches) {
            t.push(time(|| l.run())?);
        }
    }
    Ok(times.into_iter().map(median).collect())
}

/// Runs the table; `Ok(false)` when an output is wrong.
pub fn run(ctx: &Context) -> Result<bool> {
    run_only(ctx, None)
}

/// Runs the rows whose kernel name contains `only` (every row: `None`).
pub fn run_only(ctx: &Context, only: Option<&str>) -> Result<bool> {
    let wanted = |kernel: &str| only.map_or(true, |o| kernel.contains(o));
    let unchecked = Context::with_fault_mode(DeviceSelector::Default, Some(FaultMode::Off))?;
    let ctxs = Contexts { checked: ctx, unchecked };
    let gpu = Gpu::new(ctx.info().uuid)?;
    let variants = variants();
    let modules = variants.iter().map(|v| ctxs.load(v)).collect::<Result<Vec<_>>>()?;
    println!(
        "ptxvk against hand-written compute shaders ({}; median of {RUNS} runs, {ROUND_TRIPS} round trips); \
         ratio = hand-written time / ptxvk time",
        ctx.info().name
    );
    if ctx.info().warp_path == WarpPath::Emulated {
        println!(
            "  (warps are emulated on this device: +no warp emu and all off translate each warp operation as one \
             subgroup operation instead, which reads lanes outside its {}-lane subgroups: wrong results, time only)",
            ctx.info().subgroup_size
        );
    }
    println!(
        "  columns: the shader's time, ptxvk's (default translation), then the ratio for the default \
         translation, without the fault checks (no checks), and without them and one more lowering each: \
         +driver fma (no exact fma emulation), +no loop fix (no loop unrolling, limit checks, live-outs in \
         memory or block order), +no zero-op (no zero-operand workaround), +no warp emu (warp operations as \
         subgroup operations); all off: none of these"
    );
    let mut header = format!("  {:<38} {:>10} {:>10}", "workload", "shader ms", "ptxvk ms");
    for v in &variants {
        header += &format!(" {:>12}", v.label);
    }
    println!("{header}");
    let mut ok = true;
    let mut bda_rows = Vec::new();
    let mut ratios = vec![Vec::new(); variants.len()];
    let mut row = |name: &str, t: &[Duration]| {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut line = format!("  {name:<38} {:>10.3} {:>10.3}", ms(t[0]), ms(t[1]));
        for (r, v) in ratios.iter_mut().zip(&t[1..]) {
            let ratio = t[0].as_secs_f64() / v.as_secs_f64();
            r.push(ratio);
            line += &format!(" {ratio:>12.2}");
        }
        println!("{line}");
    };
    for (kernel, make) in [
        ("saxpy", saxpy as fn() -> Workload),
        ("reduce_sum", reduce_sum),
        ("sgemm", sgemm),
        ("transpose", transpose),
        ("stencil3x3", stencil),
    ] {
        if !wanted(kernel) {
            continue;
        }
        let w = make();
        let (t, bda, right) = measure(&ctxs, &gpu, &w, &variants, &modules)?;
        ok &= right;
        row(w.name, &t);
        if let Some(b) = bda {
            bda_rows.push((w.name, t[0].as_secs_f64() / b.as_secs_f64()));
        }
    }
    if wanted("empty") {
        let t = round_trip(&ctxs, &gpu, &variants, &modules)?;
        row("launch + synchronise, empty kernel", &t);
    }
    let geo = |r: &[f64]| (r.iter().map(|x| x.ln()).sum::<f64>() / r.len() as f64).exp();
    let mut line = format!("  {:<38} {:>10} {:>10}", "geometric mean of the ratios", "", "");
    for r in &ratios {
        line += &format!(" {:>12.2}", geo(r));
    }
    println!("{line}");
    for (name, ratio) in bda_rows {
        println!(
            "  {name}: the hand-written shader through buffer device addresses (64-bit address \
             arithmetic, as ptxvk emits) runs at {ratio:.2} of its speed with descriptors"
        );
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    /// The checked-in shaders pass `spirv-val` for Vulkan 1.2 (skipped
    /// when it is not installed).
    #[test]
    fn shaders_validate() {
        let shaders: [(&str, &[u8]); 7] = [
            ("saxpy", include_bytes!("../twins/saxpy.spv")),
            ("saxpy_bda", include_bytes!("../twins/saxpy_bda.spv")),
            ("reduce_sum", include_bytes!("../twins/reduce_sum.spv")),
            ("sgemm", include_bytes!("../twins/sgemm.spv")),
            ("transpose", include_bytes!("../twins/transpose.spv")),
            ("stencil3x3", include_bytes!("../twins/stencil3x3.spv")),
            ("empty", include_bytes!("../twins/empty.spv")),
        ];
        for (name, words) in shaders {
            let path = std::env::temp_dir().join(format!("ptxvk-bench-twin-{name}-{}.spv", std::process::id()));
            std::fs::write(&path, words).unwrap();
            let out = std::process::Command::new("spirv-val").args(["--target-env", "vulkan1.2"]).arg(&path).output();
            let _ = std::fs::remove_file(&path);
            match out {
                Ok(out) => assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr)),
                Err(e) => eprintln!("spirv-val not run: {e}"),
            }
        }
    }

    /// The host's reduction equals a plain sum to within rounding (the
    /// shuffle-tree model is not off by whole elements).
    #[test]
    fn reduction_reference_sums_everything() {
        let w = super::reduce_sum();
        let super::Buffer::Input(x) = &w.buffers[0] else { panic!("input expected") };
        let total: f64 = x.iter().map(|&v| v as f64).sum();
        let partials: f64 = w.want.iter().map(|&v| v as f64).sum();
        assert!((total - partials).abs() < 1e-5 * total, "{total} vs {partials}");
    }
}
