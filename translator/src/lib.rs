//! PTX → Vulkan SPIR-V translator.
//!
//! The pipeline is a flat list of passes, one per module (see [`translate`]):
//!
//! 1. [`parse`]: pest grammar (`ptx.pest`) for the module's structure and a
//!    hand-written scanner for instruction statements → [`ast`], every node
//!    with its source [`Span`];
//! 2. [`check`]: every instruction decoded against the ISA table of
//!    [`isa`] (the typed form kept in `Instruction::decoded`), operands
//!    checked against the declarations and chapter 6's type rules;
//! 3. [`recursion`]: each cycle of direct calls → non-recursive functions
//!    that run the cycle's activations on an explicit stack in local memory
//!    (the new instructions are checked and decoded like the user's);
//! 4. [`tma`]: Hopper asynchronous copies (mbarriers, bulk and tensor copies)
//!    → calls of the emulated copy engine in `shaders/tma.ptx`, which it
//!    appends to the module;
//! 5. [`scope`]: nested `{ }` scopes resolved by renaming, so each function
//!    has one flat namespace;
//! 6. [`mod@cfg`]: a function body → basic blocks with explicit terminators
//!    (the intermediate representation control-flow passes work on; its
//!    invariants are documented there);
//! 7. [`reducible`]: irreducible cycles get a single entry (edge multiplexing);
//! 8. [`structurize`]: the CFG → nested `Block`/`Loop`/`If` regions;
//! 9. [`layout`]: byte layouts of parameters and variables;
//! 10. `emit`: regions and instructions → SPIR-V words (its own module writer,
//!     `emit/spv.rs`, with rspirv's types and enums), state spaces
//!     mapped as the launch ABI in [`abi`] says.
//!
//! Errors are [`Diagnostic`]s with spans, rendered once at the boundary
//! ([`Diagnostics`] implements `Display` as `file:line:col: error: ...`).
#![forbid(unsafe_code)]

// pest_derive without its `std` feature (no stack guard per rule call; the
// parser bounds recursion with `parse::MAX_NESTING`) names `::alloc`.
extern crate alloc;

pub mod abi;
pub mod ast;
pub mod cfg;
pub mod check;
pub mod contract;
pub mod diag;
mod emit;
pub mod entry_slice;
mod fxhash;
pub mod isa;
pub mod layout;
pub mod parse;
pub mod progress;
pub mod recursion;
pub mod reducible;
pub mod resume;
pub mod scope;
pub mod short_str;
pub mod spin;
pub mod structurize;
pub mod tex;
pub mod tma;
pub mod unroll;

pub use abi::*;

/// The first line of what the `ptxas` stand-in (`ptx2spv/src/bin/ptxas.rs`)
/// writes in place of a cubin: this mark, then the options that change
/// results (` --fmad=false`), then the PTX on the following lines.
pub const PTXAS_STANDIN_MARK: &str = "// ptxvk ptxas stand-in:";

/// For PTX written by the `ptxas` stand-in, whether `ptxas` was asked to
/// contract (`--fmad`, true unless `--fmad=false`); `None` for other PTX.
pub fn ptxas_standin_fmad(ptx: &str) -> Option<bool> {
    let first = ptx.lines().next()?;
    let options = first.strip_prefix(PTXAS_STANDIN_MARK)?;
    Some(!options.split_whitespace().any(|o| o == "--fmad=false"))
}
pub use diag::{Diagnostic, Diagnostics, Span};

/// The Vulkan environment the SPIR-V targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TargetEnv {
    /// Vulkan 1.2: SPIR-V 1.5.
    #[default]
    Vulkan1_2,
    /// Vulkan 1.3: SPIR-V 1.6.
    Vulkan1_3,
}

/// How 32-lane warp operations are implemented (see `shared/DESIGN.md`,
/// "Warps on devices whose subgroup is not 32", and the module docs of
/// `emit::warp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum WarpPath {
    /// The pipeline runs with full 32-wide subgroups: a warp is a subgroup,
    /// warp operations are `GroupNonUniform*` instructions.
    Native,
    /// The pipeline runs with full subgroups whose size is a multiple of 32
    /// (64, 128): a warp is a 32-lane slice of a subgroup.
    Slice,
    /// Any subgroup size: warps exchange values through workgroup memory and
    /// barriers, in workgroup-uniform control flow. Correct on every device.
    #[default]
    Emulated,
}

impl WarpPath {
    /// The path's name on command lines (`native`, `slice`, `emulated`).
    pub fn name(self) -> &'static str {
        match self {
            WarpPath::Native => "native",
            WarpPath::Slice => "slice",
            WarpPath::Emulated => "emulated",
        }
    }

    /// Parse a command-line name.
    pub fn from_name(s: &str) -> Option<WarpPath> {
        match s {
            "native" => Some(WarpPath::Native),
            "slice" => Some(WarpPath::Slice),
            "emulated" => Some(WarpPath::Emulated),
            _ => None,
        }
    }

    /// The path for a device whose pipelines run with full subgroups of
    /// `subgroup_size` invocations (`None`: sizes are not controlled, or
    /// subgroup operations are missing): native for 32, slice for a
    /// multiple of 32, emulated otherwise.
    pub fn for_subgroup_size(subgroup_size: Option<u32>) -> WarpPath {
        match subgroup_size {
            Some(32) => WarpPath::Native,
            Some(s) if s > 32 && s.is_multiple_of(32) => WarpPath::Slice,
            _ => WarpPath::Emulated,
        }
    }
}

/// Translation options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Target environment.
    pub target_env: TargetEnv,
    /// Translate only this entry (default: every `.entry`).
    pub entry: Option<String>,
    /// Leave these entries out (the runtime's deferred failures: entries
    /// that do not translate, so that the others of the module still load).
    pub skip_entries: Vec<String>,
    /// The device's `maxPushConstantsSize`; parameter blocks that do not fit
    /// after the header go to a parameter buffer.
    pub max_push_constant_bytes: u32,
    /// Emulate a correctly rounded fused multiply-add (for drivers whose
    /// `Fma` is not fused, such as lavapipe).
    pub emulate_fma: bool,
    /// The device has `shaderBufferFloat32AtomicAdd`
    /// (`VK_EXT_shader_atomic_float`); otherwise float atomics use
    /// compare-and-swap loops.
    pub float_atomics: bool,
    /// How warp operations are implemented; the runtime picks it from the
    /// device's subgroup properties.
    pub warp_path: WarpPath,
    /// The device has `shaderDenormPreserveFloat32`: entry points declare
    /// the `DenormPreserve` execution mode for 32-bit floats (PTX keeps f32
    /// subnormals unless `.ftz`). Without it the driver's default applies.
    pub denorm_preserve_f32: bool,
    /// The same for 64-bit floats (`shaderDenormPreserveFloat64`; PTX never
    /// flushes f64 subnormals).
    pub denorm_preserve_f64: bool,
    /// The device has `shaderSignedZeroInfNanPreserveFloat32`: entry points
    /// declare the `SignedZeroInfNanPreserve` execution mode for 32-bit
    /// floats. Without it a driver may assume no operand or result is a
    /// signed zero, infinity or NaN, and fold `x * 0.0` to `0.0` or
    /// `x + 0.0` to `x` (PTX arithmetic is IEEE 754 in every width).
    pub signed_zero_inf_nan_f32: bool,
    /// The same for 64-bit floats (`shaderSignedZeroInfNanPreserveFloat64`).
    pub signed_zero_inf_nan_f64: bool,
    /// The same for 16-bit floats (`shaderSignedZeroInfNanPreserveFloat16`).
    pub signed_zero_inf_nan_f16: bool,
    /// Hide float `+0.0` constants from the driver behind an opaque zero:
    /// llvmpipe (lavapipe) returns `x` for `x + 0.0` and `0.0` for `x * 0.0`
    /// and `0.0 / x` whatever the float controls say (see `emit/zero.rs`).
    pub zero_operand_workaround: bool,
    /// Round f64 values to integers (`cvt.rni`/`cvt.rzi` of f64, and the
    /// range reductions that round in f64) from `Floor` and `Ceil`:
    /// llvmpipe's f64 `RoundEven` and `Trunc` returned `x` unchanged for
    /// every |x| >= 2^24 on an AMD EPYC host (Mesa 22.3, LLVM 15), so
    /// `cvt.rni.f64.f64` of 16777216.5 gave 16777216.5 (`emit/float.rs::integral_f64`).
    pub exact_f64_rounding: bool,
    /// The driver's f64 `OpFDiv` and `Sqrt` round correctly (IEEE 754,
    /// to nearest even, subnormals kept): `div.rn`, `rcp.rn` and
    /// `sqrt.rn` of f64 use them as they are, and the directed modes
    /// start from them. Without it they are computed from the driver's
    /// result with an exact correction (several exact `fma` each: most of
    /// an f64 kernel's code where `fma` is emulated). The runtime turns it
    /// on where its probe finds the driver's results exact (`probe.rs`).
    pub correct_f64_div_sqrt: bool,
    /// Pass each 64-bit kernel parameter, and the addresses the translator
    /// loads for itself that are the same in every invocation (the module
    /// data's, the fault log's and its range table's, the printf FIFO's),
    /// through `OpGroupNonUniformBroadcastFirst` (every invocation has the
    /// same value, so this changes nothing but what the driver's compiler
    /// knows; `docs/llvmpipe-run-time.md`).
    /// For llvmpipe: it builds a 64-bit parameter from two 32-bit push
    /// constant words as a vector, and where it does not see that vector is
    /// one value repeated, each lane of each access through the pointer
    /// takes it apart through the stack (measured: a grid-stride loop with
    /// two loads per iteration, 2.8x the time). Needs subgroup ballot
    /// operations in compute shaders.
    pub uniform_params: bool,
    /// Use what is known of each `printf` call at translation time (a
    /// string-literal format, an argument buffer in the caller's local
    /// depot, a result nothing reads; see `emit/printf_sites.rs`): the call
    /// then stores its record without loops. Off: every call copies its
    /// arguments through a loop over generic loads and counts its format's
    /// conversions at run time (for tests that compare the two).
    pub printf_sites: bool,
    /// Generic accesses through a register that cannot hold a `.shared` or
    /// `.local` address (computed from kernel parameters, not loaded from
    /// memory; see `emit/windowed.rs`) go to global memory without testing
    /// the address's window. Off: every generic access tests it (for tests
    /// that compare the two).
    pub generic_to_global: bool,
    /// Atomics and fences carry their memory semantics (acquire, release,
    /// acquire-release) into SPIR-V. Off for llvmpipe (lavapipe), where an
    /// atomic or barrier with memory semantics, executed while other
    /// invocations of the workgroup have diverged or exited, ends the
    /// invocation; there atomics are relaxed and `membar`/`fence` emit
    /// nothing (llvmpipe's atomics are locked x86 instructions, which order
    /// memory themselves, and a workgroup's subgroups run on one host thread).
    pub memory_semantics: bool,
    /// Copies of the body of each spin-wait loop per iteration (see
    /// [`spin`]); below 2, loops are left as they are. For drivers that end
    /// loops after a number of iterations (llvmpipe: 64).
    pub unroll_spin_loops: u32,
    /// Most copies of the body of each small innermost loop per iteration
    /// (see [`unroll`]); below 2, loops are left as they are. For drivers
    /// that end loops after a number of iterations (llvmpipe: 8, so its
    /// 65535 iterations per invocation become up to 524,280).
    pub unroll_loops: u32,
    /// Worker threads of a driver that runs each thread's share of a
    /// dispatch as one contiguous run of workgroups (llvmpipe); at 2 or
    /// more, `%ctaid` is permuted so that each thread runs its blocks in
    /// grid order, interleaved with the others', as a GPU starts them
    /// (see `emit/block_order.rs`). Below 2, `%ctaid` is the workgroup id.
    pub block_order_threads: u32,
    /// Count loop iterations per invocation and trap (the launch fails)
    /// when a loop would go on after llvmpipe's loop limiter of 65535
    /// iterations ends it (see `emit/loop_limit.rs`).
    pub loop_limit: bool,
    /// With [`Options::loop_limit`]: entries whose threads are independent
    /// (no barrier, warp operation, shared or local memory, or call) save a
    /// thread that nears the loop limiter at a loop header, and go on in
    /// resume rounds the runtime dispatches after the launch (see
    /// [`resume`]): loops of any length, within the rounds.
    pub resume_loops: bool,
    /// With [`Options::resume_loops`]: every entry the pass rewrites counts
    /// its loop iterations (`emit/loop_limit.rs`), so that a thread saves
    /// itself at a loop header before llvmpipe's limiter would cut its loop.
    /// By default only those count where a cut could land in one of the
    /// translator's own loops (`printf`'s, an atomic's compare-and-swap
    /// loop) or in a loop that is no site of the pass; everywhere else a
    /// thread whose loop the limiter cuts saves itself where the loop ends
    /// (`emit/func.rs`, `save_if_cut`), which is also what happens where the
    /// count falls behind the driver's. For measurement and tests
    /// (`PTXVK_RESUME_COUNT=1`).
    pub resume_count: bool,
    /// Keep registers that a loop writes and code outside the loop reads in
    /// memory: llvmpipe (lavapipe) recomputes such values for the lanes that
    /// already left the loop, from their stale inputs (see
    /// `emit/live_out.rs`).
    pub loop_live_outs_in_memory: bool,
    /// Fuse the `mul` + `add`/`sub` pairs without rounding modifiers that
    /// NVIDIA's `ptxas` fuses into one fused multiply-add (see
    /// [`contract`]); off keeps every `mul` and `add` separately rounded,
    /// as nvcc's `--fmad=false` would.
    pub contract: bool,
    /// Bytes of the per-thread stack of recursive functions (see
    /// [`recursion`]); [`recursion::STACK_BYTES`] by default, at most
    /// [`recursion::MAX_STACK_BYTES`].
    pub recursion_stack_bytes: u32,
    /// Emit every `.shared` access so that the part of a block's shared
    /// memory beyond the device's Workgroup memory can live in device memory
    /// (see [`abi`]'s "Shared memory beyond Workgroup memory"); the branch
    /// folds away in launches that fit, at pipeline creation. Off: shared
    /// memory is only ever Workgroup memory.
    pub shared_spill: bool,
    /// Give the diverged threads of a warp independent forward progress
    /// around spin loops (see [`progress`]): a lane spinning on a lock that
    /// another lane of its warp holds lets it run. Off: spin loops are left
    /// as they are (such kernels then livelock on SIMD devices).
    pub forward_progress: bool,
    /// Run legacy warp-synchronous code in lock step on the emulated warp
    /// path (see `emit/lockstep.rs`): meet at a workgroup barrier before the
    /// `volatile` shared and the global accesses where the lanes of a warp
    /// may exchange values. Off, for measurements only: such code computes
    /// wrong results when a warp spans several subgroups.
    pub lockstep: bool,
    /// Treat every loop without a collective as a spin loop for
    /// [`forward_progress`](Options::forward_progress): a test of the
    /// rewriting on any code (results must not change), not for use.
    pub interleave_every_loop: bool,
    /// Check every user memory access before it happens (see
    /// [`abi::fault`]): an address outside the context's allocations, or
    /// outside the block's shared or the thread's local memory, or not
    /// aligned to its size, does not reach memory and fails the launch.
    /// Needs the runtime's fault log; for devices where a bad address takes
    /// the process down (lavapipe runs kernels on host threads).
    pub fault_checks: bool,
    /// With [`fault_checks`](Options::fault_checks): also track every
    /// non-atomic `.shared` access in a shadow of the block's shared memory
    /// and record hazards (two threads touching a byte between barriers,
    /// one of them writing; see "Racecheck" in [`abi::fault`]). Modules
    /// with `mbarrier` are not tracked (their waits order threads in ways
    /// the barrier epochs do not see): [`ModuleInfo::race_checked`] says.
    pub race_checks: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            target_env: TargetEnv::Vulkan1_2,
            entry: None,
            skip_entries: Vec::new(),
            max_push_constant_bytes: 128,
            emulate_fma: true,
            float_atomics: false,
            warp_path: WarpPath::Emulated,
            denorm_preserve_f32: false,
            denorm_preserve_f64: false,
            signed_zero_inf_nan_f32: false,
            signed_zero_inf_nan_f64: false,
            signed_zero_inf_nan_f16: false,
            zero_operand_workaround: false,
            exact_f64_rounding: false,
            correct_f64_div_sqrt: false,
            uniform_params: false,
            printf_sites: true,
            generic_to_global: true,
            memory_semantics: true,
            unroll_spin_loops: 0,
            unroll_loops: 0,
            block_order_threads: 0,
            loop_limit: false,
            resume_loops: false,
            resume_count: false,
            loop_live_outs_in_memory: false,
            contract: true,
            recursion_stack_bytes: recursion::STACK_BYTES,
            shared_spill: true,
            forward_progress: true,
            lockstep: true,
            interleave_every_loop: false,
            fault_checks: false,
            race_checks: false,
        }
    }
}

impl Options {
    /// The lowerings the runtime turns on for llvmpipe (lavapipe) by
    /// default, on top of [`Options::default`]: loop unrolling and limit
    /// detection, resume rounds, block order for 2 worker threads, loop
    /// live-outs in memory, uniform parameters, the zero-operand
    /// workaround, f64 rounding from floor and ceiling, no memory semantics, and the fault checks. For tests
    /// and tools; the runtime builds its options from the device (and
    /// probes it for [`Options::correct_f64_div_sqrt`], left off here).
    pub fn llvmpipe() -> Options {
        Options {
            zero_operand_workaround: true,
            exact_f64_rounding: true,
            memory_semantics: false,
            unroll_spin_loops: 64,
            unroll_loops: 8,
            block_order_threads: 2,
            loop_limit: true,
            resume_loops: true,
            loop_live_outs_in_memory: true,
            uniform_params: true,
            fault_checks: true,
            ..Options::default()
        }
    }
}

/// A translated module.
#[derive(Clone, Debug)]
pub struct Translation {
    /// SPIR-V words.
    pub spirv: Vec<u32>,
    /// Launch metadata.
    pub info: ModuleInfo,
}

/// Translate PTX source text to SPIR-V.
///
/// `file_name` is used only in diagnostics.
pub fn translate(source: &str, file_name: &str, options: &Options) -> Result<Translation, Diagnostics> {
    prepare(source, file_name, options)?.emit(options)
}

/// A module parsed, checked and rewritten by the passes before lowering,
/// ready to be lowered any number of times ([`Prepared::emit`]): the whole
/// module, or one entry at a time (`Options::entry`).
#[derive(Clone, Debug)]
pub struct Prepared {
    module: ast::Module,
    source: String,
    file_name: String,
    /// What lowering needs of the whole module, computed at the first
    /// [`Prepared::emit`] and kept for the next ones (a module emitted one
    /// entry at a time).
    facts: std::sync::OnceLock<emit::Facts>,
}

impl Prepared {
    /// Lower to SPIR-V with `options`. The passes ran with the options
    /// given to [`prepare`]; only the lowering options (`entry`, the warp
    /// path, ...) take effect here.
    pub fn emit(&self, options: &Options) -> Result<Translation, Diagnostics> {
        let (spirv, mut info) = emit::run(&self.module, options, self.facts.get_or_init(|| emit::facts(&self.module)))
            .map_err(|d| Diagnostics::new(&self.file_name, &self.source, d))?;
        locate_fault_sites(&self.source, &mut info.fault_sites);
        info.source_name = self.file_name.clone();
        Ok(Translation { spirv, info })
    }

    /// The names of the module's `.entry` functions that have bodies, in
    /// source order.
    pub fn entry_names(&self) -> Vec<String> {
        self.functions()
            .filter(|f| f.kind == ast::FunctionKind::Entry && f.body.is_some())
            .map(|f| f.name.clone())
            .collect()
    }

    /// The function whose body holds the diagnostic `d` (the last function
    /// header before it): its name and whether it is an `.entry`.
    pub fn function_of(&self, d: &Diagnostic) -> Option<(String, bool)> {
        self.functions()
            .filter(|f| f.body.is_some() && f.span.start <= d.span.start)
            .max_by_key(|f| f.span.start)
            .map(|f| (f.name.clone(), f.kind == ast::FunctionKind::Entry))
    }

    fn functions(&self) -> impl Iterator<Item = &ast::Function> {
        self.module.items.iter().filter_map(|i| match i {
            ast::ModuleItem::Function(f) => Some(f),
            ast::ModuleItem::Variable(_) => None,
        })
    }
}

/// Fill in the line and column of each fault site, and the `file:line` of
/// the nearest `.loc` before it (`.file` names the file).
fn locate_fault_sites(source: &str, sites: &mut [abi::fault::FaultSite]) {
    if sites.is_empty() {
        return;
    }
    // Line starts, `.file` names, and `.loc` positions (byte offset, file, line).
    let mut starts = vec![0usize];
    let mut files: std::collections::HashMap<u64, String> = std::collections::HashMap::new();
    let mut locs: Vec<(usize, u64, u64)> = Vec::new();
    let mut at = 0usize;
    for line in source.split_inclusive('\n') {
        let t = line.trim_start();
        let mut words = t.split(|c: char| c.is_whitespace() || c == ',').filter(|w| !w.is_empty());
        match words.next() {
            Some(".file") => {
                if let (Some(Ok(n)), Some(name)) = (words.next().map(str::parse::<u64>), t.find('"')) {
                    let rest = &t[name + 1..];
                    let name = rest.split('"').next().unwrap_or("");
                    files.insert(n, name.to_string());
                }
            }
            Some(".loc") => {
                if let (Some(Ok(f)), Some(Ok(l))) = (words.next().map(str::parse), words.next().map(str::parse)) {
                    locs.push((at, f, l));
                }
            }
            _ => {}
        }
        at += line.len();
        starts.push(at);
    }
    for s in sites.iter_mut() {
        let pos = s.start as usize;
        let line = starts.partition_point(|&b| b <= pos);
        s.line = line as u32;
        s.column = (pos - starts[line.saturating_sub(1)]) as u32 + 1;
        let i = locs.partition_point(|&(b, _, _)| b <= pos);
        if let Some(&(_, f, l)) = i.checked_sub(1).and_then(|i| locs.get(i)) {
            if l > 0 {
                let file = files.get(&f).map(String::as_str).unwrap_or("?");
                s.source = Some(format!("{file}:{l}"));
            }
        }
    }
}

/// Check the functions a PTX-level pass (`pass`, for the diagnostic)
/// rewrote again, which decodes the instructions it wrote.
fn recheck(
    module: &mut ast::Module,
    rewritten: &std::collections::HashSet<String>,
    pass: &str,
) -> Result<(), Diagnostic> {
    if rewritten.is_empty() {
        return Ok(());
    }
    let errors = check::run_functions(module, |name| rewritten.contains(name));
    match errors.into_iter().next() {
        Some(first) => Err(Diagnostic::error(first.span, format!("internal error in {pass}: {}", first.message))),
        None => Ok(()),
    }
}

/// Parse, check and run the passes that precede lowering ([`translate`]
/// is this, then [`Prepared::emit`]).
pub fn prepare(source: &str, file_name: &str, options: &Options) -> Result<Prepared, Diagnostics> {
    let mut module = front_end(source, file_name)?;
    if options.contract {
        contract_module(&mut module).map_err(|d| Diagnostics::new(file_name, source, vec![d]))?;
    }
    let rewritten = recursion::run(&mut module, options.recursion_stack_bytes)
        .map_err(|d| Diagnostics::new(file_name, source, vec![d]))?;
    recheck(&mut module, &rewritten, "the recursion pass").map_err(|d| Diagnostics::new(file_name, source, vec![d]))?;
    tma::run(&mut module).map_err(|d| Diagnostics::new(file_name, source, d))?;
    tex::run(&mut module).map_err(|d| Diagnostics::new(file_name, source, d))?;
    spin::run(&mut module, options.unroll_spin_loops);
    let resumed = resume::run(&mut module, options.resume_loops && options.loop_limit)
        .map_err(|d| Diagnostics::new(file_name, source, vec![d]))?;
    recheck(&mut module, &resumed, "the resume pass").map_err(|d| Diagnostics::new(file_name, source, vec![d]))?;
    Ok(Prepared {
        module,
        source: source.to_string(),
        file_name: file_name.to_string(),
        facts: std::sync::OnceLock::new(),
    })
}

/// The most ids a SPIR-V module may have (the id bound is one more): the
/// universal limit of the SPIR-V specification ("Universal Limits").
pub const MAX_SPIRV_IDS: u32 = 4_194_303;

/// The id bound of a SPIR-V module (word 3 of its header; 0 when there is no header).
pub fn id_bound(spirv: &[u32]) -> u32 {
    spirv.get(3).copied().unwrap_or(0)
}

/// Run [`contract`] on a checked module and decode what it wrote.
fn contract_module(module: &mut ast::Module) -> Result<contract::Stats, Diagnostic> {
    let (rewritten, stats) = contract::run(module);
    if !rewritten.is_empty() {
        let errors = check::run_functions(module, |name| rewritten.contains(name));
        if let Some(first) = errors.into_iter().next() {
            return Err(Diagnostic::error(
                first.span,
                format!("internal error in the contraction pass: {}", first.message),
            ));
        }
    }
    Ok(stats)
}

/// The multiply-add pairs [`translate`] fuses (see [`contract`]), and the
/// module as PTX-like text after the rewrite is not kept: only the counts.
pub fn contraction_stats(source: &str, file_name: &str) -> Result<contract::Stats, Diagnostics> {
    let mut module = front_end(source, file_name)?;
    contract_module(&mut module).map_err(|d| Diagnostics::new(file_name, source, vec![d]))
}

/// Check syntax, instruction forms and operand types without lowering.
pub fn check_syntax(source: &str, file_name: &str) -> Result<(), Diagnostics> {
    front_end(source, file_name).map(|_| ())
}

/// Parse and check: the module with every instruction decoded, or every
/// error found.
pub fn front_end(source: &str, file_name: &str) -> Result<ast::Module, Diagnostics> {
    let (module, mut errors) = parse::run_recovering(source);
    let Some(mut module) = module else {
        return Err(Diagnostics::new(file_name, source, errors));
    };
    errors.extend(check::run(&mut module));
    if errors.is_empty() {
        Ok(module)
    } else {
        errors.sort_by_key(|d| d.span.start);
        Err(Diagnostics::new(file_name, source, errors))
    }
}

/// Disassemble SPIR-V words to text (rspirv's disassembler).
pub fn disassemble(words: &[u32]) -> String {
    use rspirv::binary::Disassemble;
    let mut loader = rspirv::dr::Loader::new();
    match rspirv::binary::parse_words(words, &mut loader) {
        Ok(()) => loader.module().disassemble(),
        Err(e) => format!("; cannot disassemble: {e}\n"),
    }
}

/// The structured control flow of every function with a body, as text
/// (one `function NAME` header per function, then its region tree).
pub fn structure_dump(source: &str, file_name: &str) -> Result<String, Diagnostics> {
    structure_dump_with(source, file_name, structurize::LoopExits::Outside)
}

/// [`structure_dump`] with loop exits placed as `exits` says (the translator
/// uses [`structurize::LoopExits::Outside`]).
pub fn structure_dump_with(
    source: &str,
    file_name: &str,
    exits: structurize::LoopExits,
) -> Result<String, Diagnostics> {
    let module = parse::run(source).map_err(|d| Diagnostics::new(file_name, source, d))?;
    let mut out = String::new();
    for item in &module.items {
        let ast::ModuleItem::Function(f) = item else { continue };
        let Some(body) = &f.body else { continue };
        let wrap = |d: Diagnostic| Diagnostics::new(file_name, source, vec![d]);
        let mut cfg = cfg::run(body, f.kind == ast::FunctionKind::Func).map_err(wrap)?;
        reducible::run(&mut cfg);
        let span_of = |b: usize| cfg.blocks[b].term_span;
        let regions = structurize::run_with(&cfg, &span_of, exits).map_err(wrap)?;
        out.push_str(&format!("function {}\n", f.name));
        out.push_str(&structurize::render(&cfg, &regions));
    }
    Ok(out)
}
