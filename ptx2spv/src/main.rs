//! `ptx2spv`: translate PTX to Vulkan SPIR-V.
//!
//! ```text
//! ptx2spv INPUT.ptx -o OUT.spv [--entry NAME] [--target-env vulkan1.2|vulkan1.3]
//!         [--emit spv|spvasm] [--check] [--parse-only] [--list-entries]
//!         [--warp-path native|slice|emulated | --subgroup-size N]
//! ```
//! The warp path says how 32-lane warp operations are built (see
//! `ptxvk_translator::WarpPath`): `emulated` (the default) runs on every
//! device; `native` needs pipelines with full 32-wide subgroups, `slice` full
//! subgroups of a multiple of 32. `--subgroup-size N` picks the path for a
//! device whose pipelines run with full subgroups of N invocations.
//! Input `-` reads stdin. Without `-o`, output goes to stdout unless stdout
//! is a terminal. Diagnostics go to stderr as `file:line:col: error: ...`;
//! the exit status is 0 on success and 1 on any error.
#![forbid(unsafe_code)]

use clap::{Parser, ValueEnum};
use ptxvk_translator::{Diagnostic, Diagnostics, Options, Span, TargetEnv, WarpPath};
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Env {
    #[value(name = "vulkan1.2")]
    Vulkan12,
    #[value(name = "vulkan1.3")]
    Vulkan13,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Warp {
    /// Full 32-wide subgroups: warp operations are subgroup operations.
    Native,
    /// Full subgroups of 64 or 128: a warp is a 32-lane slice.
    Slice,
    /// Any subgroup size: workgroup memory and barriers.
    Emulated,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Emit {
    /// SPIR-V binary.
    Spv,
    /// SPIR-V assembly text (as `spirv-dis` prints it).
    Spvasm,
}

/// Translate NVIDIA PTX to Vulkan SPIR-V.
#[derive(Parser, Debug)]
#[command(name = "ptx2spv", version, about)]
struct Cli {
    /// Input PTX file, or `-` for standard input.
    input: String,
    /// Output file (default: standard output when it is not a terminal).
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Translate only this entry (default: every `.entry` into one module).
    #[arg(long)]
    entry: Option<String>,
    /// Target environment.
    #[arg(long = "target-env", value_enum, default_value = "vulkan1.2")]
    target_env: Env,
    /// Output format.
    #[arg(long, value_enum, default_value = "spv")]
    emit: Emit,
    /// Translate and validate, write nothing.
    #[arg(long)]
    check: bool,
    /// Check syntax only, without lowering.
    #[arg(long = "parse-only")]
    parse_only: bool,
    /// List the module's entries and their parameters, one per line.
    #[arg(long = "list-entries")]
    list_entries: bool,
    /// Emit an exact fused multiply-add emulation (for drivers whose `Fma` is not fused).
    #[arg(long = "emulate-fma", default_value_t = false)]
    emulate_fma: bool,
    /// Use native float32 atomic add (the device has `shaderBufferFloat32AtomicAdd`).
    #[arg(long = "float-atomics", default_value_t = false)]
    float_atomics: bool,
    /// Declare the DenormPreserve execution mode for f32 and f64 (the device
    /// has shaderDenormPreserveFloat32/64).
    #[arg(long = "denorm-preserve", default_value_t = false)]
    denorm_preserve: bool,
    /// Declare the SignedZeroInfNanPreserve execution mode for f16, f32 and
    /// f64 (the device has shaderSignedZeroInfNanPreserveFloat16/32/64).
    #[arg(long = "signed-zero-inf-nan", default_value_t = false)]
    signed_zero_inf_nan: bool,
    /// Hide float +0.0 constants behind an opaque zero, so that llvmpipe
    /// cannot fold x + 0.0 to x or x * 0.0 to 0.0.
    #[arg(long = "zero-operand-workaround", default_value_t = false)]
    zero_operand_workaround: bool,
    /// Round f64 values to integers from floor and ceiling (llvmpipe's
    /// f64 RoundEven and Trunc can return x unchanged for |x| >= 2^24).
    #[arg(long = "exact-f64-rounding", default_value_t = false)]
    exact_f64_rounding: bool,
    /// Use the driver's f64 division and square root as they are for
    /// div.rn, rcp.rn and sqrt.rn of f64 (only for a driver whose results
    /// are correctly rounded, as llvmpipe's are; the runtime probes it).
    #[arg(long = "correct-f64-div-sqrt", default_value_t = false)]
    correct_f64_div_sqrt: bool,
    /// Pass 64-bit kernel parameters through OpGroupNonUniformBroadcastFirst,
    /// so that llvmpipe keeps them in scalar registers (needs subgroup
    /// ballot operations).
    #[arg(long = "uniform-params", default_value_t = false)]
    uniform_params: bool,
    /// Drop memory semantics: relaxed atomics, no code for `membar`/`fence`
    /// (for llvmpipe, which ends invocations that execute memory semantics
    /// while others of the workgroup have diverged or exited).
    #[arg(long = "no-memory-semantics", default_value_t = false)]
    no_memory_semantics: bool,
    /// Copies of each spin-wait loop's body per iteration (for llvmpipe,
    /// whose loop limiter ends long waits; 0 or 1 leaves loops alone).
    #[arg(long = "unroll-spin-loops", default_value_t = 0)]
    unroll_spin_loops: u32,
    /// Most copies of each small innermost loop's body per iteration (for
    /// llvmpipe, whose loop limiter counts back-edges; 0 or 1 leaves loops
    /// alone).
    #[arg(long = "unroll-loops", default_value_t = 0)]
    unroll_loops: u32,
    /// Permute `%ctaid` so that each of this many llvmpipe worker threads
    /// runs its blocks in grid order (0 or 1: `%ctaid` is the workgroup id).
    #[arg(long = "block-order-threads", default_value_t = 0)]
    block_order_threads: u32,
    /// Count loop iterations per invocation and trap when a loop would run
    /// past llvmpipe's loop limiter (65535 iterations in all).
    #[arg(long = "loop-limit", default_value_t = false)]
    loop_limit: bool,
    /// With --loop-limit: entries whose threads are independent save a
    /// thread that nears the loop limiter and go on in resume rounds that
    /// whoever dispatches the kernel runs after it (see the translator's
    /// `resume` pass and `abi::resume`).
    #[arg(long = "resume-loops", default_value_t = false)]
    resume_loops: bool,
    /// Keep registers that a loop writes and code after the loop reads in
    /// memory (for llvmpipe, which recomputes such values for lanes that
    /// left the loop early, from their stale inputs).
    #[arg(long = "loop-live-outs-in-memory", default_value_t = false)]
    loop_live_outs_in_memory: bool,
    /// Fuse `mul` + `add`/`sub` pairs without rounding modifiers into one
    /// fused multiply-add where NVIDIA's ptxas does (`--fmad=false`: keep
    /// every product and sum separately rounded).
    #[arg(long = "fmad", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    fmad: bool,
    /// Print how many `add`/`sub` instructions the contraction rule fuses
    /// and stop.
    #[arg(long = "print-contractions", default_value_t = false)]
    print_contractions: bool,
    /// Bytes of each thread's stack for recursive functions (256 to
    /// 1048576).
    #[arg(long = "recursion-stack-bytes", default_value_t = ptxvk_translator::recursion::STACK_BYTES)]
    recursion_stack_bytes: u32,
    /// Emit `.shared` accesses so that shared memory beyond the device's
    /// Workgroup memory can live in device memory (the spill constants of
    /// the launch ABI; `--shared-spill=false`: Workgroup memory only).
    #[arg(long = "shared-spill", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    shared_spill: bool,
    /// Use what is known of each printf call at translation time (a
    /// string-literal format, arguments in the local depot, an unused
    /// result) to store its record without loops (`--printf-sites=false`:
    /// copy and count at run time).
    #[arg(long = "printf-sites", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    printf_sites: bool,
    /// Send generic accesses through registers that cannot hold a .shared
    /// or .local address (computed from kernel parameters) to global
    /// memory without testing their window (`--generic-to-global=false`:
    /// test every one).
    #[arg(long = "generic-to-global", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    generic_to_global: bool,
    /// Interleave the diverged lanes of a warp around spin loops, so that a
    /// lane spinning on a lock another lane holds lets it run
    /// (`--forward-progress=false`: leave spin loops as they are).
    #[arg(long = "forward-progress", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    forward_progress: bool,
    /// On the emulated warp path, meet at a barrier where the lanes of a warp
    /// may exchange values through `volatile` shared or global memory
    /// without `__syncwarp` (`--lockstep=false`: for measurements only).
    #[arg(long = "lockstep", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    lockstep: bool,
    /// Check every memory access of the kernels before it happens (an
    /// address outside the allocations, or misaligned, fails the launch
    /// instead of reaching memory). The module then needs ptxvk's runtime,
    /// which fills in the fault log (see the README's "Faulting kernels").
    #[arg(long = "fault-checks")]
    fault_checks: bool,
    /// With --fault-checks: also track `.shared` accesses for hazards
    /// between threads (the runtime's racecheck, `PTXVK_RACECHECK=1`).
    #[arg(long = "race-checks", requires = "fault_checks")]
    race_checks: bool,
    /// Interleave around every loop without collectives, not only spin
    /// loops (to test that rewriting; results must not change).
    #[arg(long = "interleave-every-loop", default_value_t = false, hide = true)]
    interleave_every_loop: bool,
    /// The device's maxPushConstantsSize (parameters beyond it go to a buffer).
    #[arg(long = "push-constant-bytes", default_value_t = 128)]
    push_constant_bytes: u32,
    /// How warp operations are implemented (default: emulated, or chosen by --subgroup-size).
    #[arg(long = "warp-path", value_enum, conflicts_with = "subgroup_size")]
    warp_path: Option<Warp>,
    /// The full subgroup size pipelines run with: 32 selects native, 64 or 128 slice, others emulated.
    #[arg(long = "subgroup-size")]
    subgroup_size: Option<u32>,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(1) } else { ExitCode::SUCCESS };
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprint!("{msg}");
            if !msg.ends_with('\n') {
                eprintln!();
            }
            ExitCode::from(1)
        }
    }
}

/// The PTX text of `source`: up to the first NUL when only NULs follow
/// it, as the CUDA driver reads an image (a NUL-terminated string: NVIDIA
/// Warp's kernel cache writes its PTX with the terminator). A NUL followed
/// by anything else is an error at its position.
fn c_string_text(name: &str, mut source: String) -> Result<String, String> {
    let Some(nul) = source.find('\0') else { return Ok(source) };
    if source[nul..].bytes().all(|b| b == 0) {
        source.truncate(nul);
        return Ok(source);
    }
    let at = u32::try_from(nul).unwrap_or(u32::MAX);
    let d = Diagnostic::error(
        Span { start: at, end: at.saturating_add(1) },
        "NUL byte inside the PTX text (the CUDA driver would stop reading here)",
    );
    Err(Diagnostics::single(name, &source, d).to_string())
}

fn run(cli: Cli) -> Result<(), String> {
    let (name, bytes) = if cli.input == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map_err(|e| format!("<stdin>: error: cannot read: {e}"))?;
        ("<stdin>".to_string(), buf)
    } else {
        let data = std::fs::read(&cli.input).map_err(|e| format!("{}: error: cannot read: {e}", cli.input))?;
        (cli.input.clone(), data)
    };
    let source = String::from_utf8(bytes)
        .map_err(|e| format!("{name}: error: input is not UTF-8 text (byte {})", e.utf8_error().valid_up_to()))?;
    let source = c_string_text(&name, source)?;
    if cli.parse_only {
        return ptxvk_translator::check_syntax(&source, &name).map_err(|d| d.to_string());
    }
    if cli.print_contractions {
        let stats = ptxvk_translator::contraction_stats(&source, &name).map_err(|d| d.to_string())?;
        return write_out(&cli, format!("fused {}\n", stats.fused_sites).as_bytes());
    }
    let opts = Options {
        target_env: match cli.target_env {
            Env::Vulkan12 => TargetEnv::Vulkan1_2,
            Env::Vulkan13 => TargetEnv::Vulkan1_3,
        },
        entry: cli.entry.clone(),
        skip_entries: Vec::new(),
        max_push_constant_bytes: cli.push_constant_bytes,
        emulate_fma: cli.emulate_fma,
        float_atomics: cli.float_atomics,
        warp_path: match (cli.warp_path, cli.subgroup_size) {
            (Some(Warp::Native), _) => WarpPath::Native,
            (Some(Warp::Slice), _) => WarpPath::Slice,
            (Some(Warp::Emulated), _) => WarpPath::Emulated,
            (None, size) => WarpPath::for_subgroup_size(size),
        },
        denorm_preserve_f32: cli.denorm_preserve,
        denorm_preserve_f64: cli.denorm_preserve,
        signed_zero_inf_nan_f32: cli.signed_zero_inf_nan,
        signed_zero_inf_nan_f64: cli.signed_zero_inf_nan,
        signed_zero_inf_nan_f16: cli.signed_zero_inf_nan,
        zero_operand_workaround: cli.zero_operand_workaround,
        exact_f64_rounding: cli.exact_f64_rounding,
        correct_f64_div_sqrt: cli.correct_f64_div_sqrt,
        uniform_params: cli.uniform_params,
        printf_sites: cli.printf_sites,
        generic_to_global: cli.generic_to_global,
        memory_semantics: !cli.no_memory_semantics,
        unroll_spin_loops: cli.unroll_spin_loops,
        unroll_loops: cli.unroll_loops,
        block_order_threads: cli.block_order_threads,
        loop_limit: cli.loop_limit,
        resume_loops: cli.resume_loops,
        resume_count: false,
        loop_live_outs_in_memory: cli.loop_live_outs_in_memory,
        contract: cli.fmad,
        recursion_stack_bytes: cli.recursion_stack_bytes,
        shared_spill: cli.shared_spill,
        forward_progress: cli.forward_progress,
        lockstep: cli.lockstep,
        fault_checks: cli.fault_checks,
        race_checks: cli.race_checks,
        interleave_every_loop: cli.interleave_every_loop,
    };
    let t = ptxvk_translator::translate(&source, &name, &opts).map_err(|d| d.to_string())?;
    if cli.list_entries {
        let mut out = String::new();
        for e in &t.info.entries {
            let params: Vec<String> = e.params.iter().map(|p| format!("{}:{}@{}", p.name, p.size, p.offset)).collect();
            out.push_str(&format!("{}({})\n", e.name, params.join(", ")));
        }
        return write_out(&cli, out.as_bytes());
    }
    if cli.check {
        return Ok(());
    }
    let bytes: Vec<u8> = match cli.emit {
        Emit::Spv => t.spirv.iter().flat_map(|w| w.to_le_bytes()).collect(),
        Emit::Spvasm => ptxvk_translator::disassemble(&t.spirv).into_bytes(),
    };
    write_out(&cli, &bytes)
}

fn write_out(cli: &Cli, bytes: &[u8]) -> Result<(), String> {
    match &cli.output {
        Some(p) => std::fs::write(p, bytes).map_err(|e| format!("{}: error: cannot write: {e}", p.display())),
        None => {
            let stdout = std::io::stdout();
            if stdout.is_terminal() && matches!(cli.emit, Emit::Spv) && !cli.list_entries {
                return Err("error: refusing to write binary SPIR-V to a terminal; use -o FILE or --emit spvasm".into());
            }
            let mut lock = stdout.lock();
            lock.write_all(bytes).and_then(|_| lock.flush()).map_err(|e| format!("error: cannot write output: {e}"))
        }
    }
}
