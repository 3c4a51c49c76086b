//! Emission of one `.entry`: declarations, the prologue, and structured regions.

use super::{entry_info, Emitter, TyKey, K};
use crate::abi::{EntryInfo, ParamInfo, ParamPassing};
use crate::ast::{self, ScalarType, StateSpace, Statement};
use crate::cfg::{self, Cfg, Terminator};
use crate::diag::{Diagnostic, Span};
use crate::fxhash::{FxHashMap, FxHashSet};
use crate::layout::{self, Placed};
use crate::structurize::{self, Region, Target};
use rspirv::dr::Operand;
use rspirv::spirv::{self, Word};
use std::collections::{BTreeSet, HashMap};

/// A formal parameter or return value of a `.func`.
#[derive(Clone, Debug)]
pub(crate) enum Formal {
    /// A `.param` formal: bytes at `offset` in the function's local words.
    Param { name: String, offset: u32, size: u32 },
    /// A `.reg` formal, passed by value.
    Reg { name: String, kind: K },
}

impl Formal {
    fn words(size: u32) -> u32 {
        size.div_ceil(4).max(1)
    }
}

/// The names of the `.reg` formals among `formals`.
fn reg_formals(formals: &[Formal]) -> Vec<&str> {
    formals
        .iter()
        .filter_map(|f| match f {
            Formal::Reg { name, .. } => Some(name.as_str()),
            Formal::Param { .. } => None,
        })
        .collect()
}

/// Everything decided about a function before emitting its code.
pub(crate) struct Plan<'a> {
    pub func: &'a ast::Function,
    /// Launch metadata (entries only).
    pub info: Option<EntryInfo>,
    pub static_shared_bytes: u32,
    pub params: Vec<Formal>,
    pub returns: Vec<Formal>,
    /// The calls this function makes: direct ones by the callee's name,
    /// indirect ones by the pointer register's name (`%...`).
    pub callees: Vec<CallSite>,
    /// Whether an `exit` in this `.func` can end the thread.
    pub may_exit: bool,
    /// Whether it uses `alloca`, `stacksave` or `stackrestore`.
    pub uses_stack: bool,
    /// Whether it has 64-bit atomics that may reach `.shared` memory (then
    /// the entry's shared memory is an array of 64-bit words).
    pub wide_atomics: bool,
    pub(crate) shared: HashMap<String, Placed>,
    local: HashMap<String, Placed>,
    local_bytes: u32,
    regs: Regs,
    pub cfg: Cfg<'a>,
    pub regions: Vec<Region>,
    /// The regions for workgroup-uniform emission (loop exits outside loops,
    /// see [`structurize::LoopExits`]), made by [`Plan::plan_uniform`] for
    /// the functions that run in that mode.
    pub uniform_regions: Vec<Region>,
    /// Registers kept in memory (see `live_out.rs`; empty unless
    /// [`crate::Options::loop_live_outs_in_memory`]).
    pub memory_regs: FxHashSet<String>,
}

/// A function's registers: their names one after another in one string
/// (`%r<N>` declares N of them: one allocation per function, not per
/// register), each with its end in `names` and its type.
#[derive(Default)]
struct Regs {
    names: String,
    ends: Vec<(usize, ScalarType)>,
}

impl Regs {
    fn push(&mut self, name: &str, ty: ScalarType) {
        self.names.push_str(name);
        self.ends.push((self.names.len(), ty));
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn iter(&self) -> impl Iterator<Item = (&str, ScalarType)> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&(end, ty)| {
            let name = &self.names[start..end];
            start = end;
            (name, ty)
        })
    }
}

fn collect_decls<'a>(stmts: &'a [Statement], out: &mut Vec<&'a ast::VarDecl>) {
    for s in stmts {
        match s {
            Statement::Decl(d) => out.push(d),
            Statement::Block(b) => collect_decls(b, out),
            _ => {}
        }
    }
}

/// One `call` of a function body: its target and how many arguments and
/// results it passes (an indirect call reaches only the address-taken
/// functions of that many parameters and results).
#[derive(Debug, Clone)]
pub(crate) struct CallSite {
    pub target: String,
    pub span: Span,
    pub args: usize,
    pub rets: usize,
}

/// What [`plan_function`] needs from every instruction of a body, found in
/// one pass.
#[derive(Default)]
struct BodyScan {
    /// The calls.
    calls: Vec<CallSite>,
    /// 64-bit `atom`/`red` on `.shared` or generic addresses.
    wide_shared_atomics: bool,
    /// `alloca`, `stacksave` or `stackrestore`.
    uses_stack: bool,
}

fn scan_body(stmts: &[Statement], out: &mut BodyScan) {
    for s in stmts {
        match s {
            Statement::Inst(i) => match i.opcode.as_str() {
                "call" => {
                    if let (rets, Some(ast::Operand::Name { name, span, .. }), args) = i.call_operands() {
                        out.calls.push(CallSite {
                            target: name.to_string(),
                            span: *span,
                            args: args.len(),
                            rets: rets.len(),
                        });
                    }
                }
                "atom" | "red" => {
                    let wide = i.modifiers.iter().filter_map(|m| ScalarType::from_name(m)).any(|t| t.size() == 8);
                    let other_space =
                        i.modifiers.iter().any(|m| matches!(m.as_str(), "global" | "local" | "param" | "const"));
                    out.wide_shared_atomics |= wide && !other_space;
                }
                "alloca" | "stacksave" | "stackrestore" => out.uses_stack = true,
                _ => {}
            },
            Statement::Block(b) => scan_body(b, out),
            _ => {}
        }
    }
}

/// Whether any of `names` is used as a value (its address taken), rather
/// than only as the base of a `[name+offset]` address.
fn names_used_as_values(stmts: &[Statement], names: &FxHashSet<&str>) -> bool {
    // Register names (most operands) start with `%`: look them up only when
    // a name of the set does too.
    let percent = names.iter().any(|n| n.starts_with('%'));
    fn operand(o: &ast::Operand, names: &FxHashSet<&str>, percent: bool) -> bool {
        match o {
            ast::Operand::Name { name, .. } => (percent || !name.starts_with('%')) && names.contains(name.as_str()),
            ast::Operand::Vector(_, v) | ast::Operand::List(_, v) => v.iter().any(|x| operand(x, names, percent)),
            _ => false,
        }
    }
    fn walk(stmts: &[Statement], names: &FxHashSet<&str>, percent: bool) -> bool {
        stmts.iter().any(|s| match s {
            Statement::Inst(i) => i.operands.iter().any(|o| operand(o, names, percent)),
            Statement::Block(b) => walk(b, names, percent),
            _ => false,
        })
    }
    !names.is_empty() && walk(stmts, names, percent)
}

/// Most registers one function may declare.
pub(crate) const MAX_REGISTERS: usize = 1 << 22;

/// Append `v` in decimal.
fn push_decimal(s: &mut String, mut v: u32) {
    let mut digits = [0u8; 10];
    let mut k = digits.len();
    loop {
        k -= 1;
        digits[k] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    s.extend(digits[k..].iter().map(|&d| char::from(d)));
}

fn expand_regs(d: &ast::VarDecl, regs: &mut Regs) -> Result<(), Diagnostic> {
    if d.vector.is_some() || d.ty == ScalarType::B128 {
        return Err(Diagnostic::error(d.span, "vector and .b128 registers are not supported yet"));
    }
    for n in &d.names {
        match n.count {
            Some(c) => {
                if c as usize + regs.len() > MAX_REGISTERS {
                    return Err(Diagnostic::error(
                        n.span,
                        format!("more than {MAX_REGISTERS} registers in one function"),
                    ));
                }
                regs.ends.reserve(c as usize);
                regs.names.reserve((n.name.len() + 4) * c as usize);
                for i in 0..c {
                    // `format!` costs more than the rest of a register's planning.
                    regs.names.push_str(&n.name);
                    push_decimal(&mut regs.names, i);
                    regs.ends.push((regs.names.len(), d.ty));
                }
            }
            None => {
                if !n.dims.is_empty() {
                    return Err(Diagnostic::error(n.span, "register arrays are not supported"));
                }
                regs.push(&n.name, d.ty)
            }
        }
    }
    Ok(())
}

/// Plan a function whose scopes have been resolved into `body`.
pub(crate) fn plan_function<'a>(
    e: &mut Emitter,
    f: &'a ast::Function,
    body: &'a [Statement],
    module_shared: &[(&'a ast::VarDecl, &'a ast::VarName)],
) -> Result<Plan<'a>, Diagnostic> {
    let is_entry = f.kind == ast::FunctionKind::Entry;
    let mut decls = Vec::new();
    collect_decls(body, &mut decls);
    let mut regs = Regs::default();
    let mut shared_static: Vec<(&ast::VarDecl, &ast::VarName)> = Vec::new();
    let mut shared_dynamic: Vec<(&ast::VarDecl, &ast::VarName)> = Vec::new();
    let mut locals = Vec::new();
    let mut param_vars = Vec::new();
    for &(d, n) in module_shared {
        if n.dims.first() == Some(&None) {
            shared_dynamic.push((d, n));
        } else {
            shared_static.push((d, n));
        }
    }
    // Formals of a .func: .param ones live in local memory, .reg ones are registers.
    let mut formal_params = Vec::new();
    let mut formal_returns = Vec::new();
    if !is_entry {
        for (list, out) in [(&f.params, &mut formal_params), (&f.returns, &mut formal_returns)] {
            for d in list.iter() {
                for n in &d.names {
                    if d.space == StateSpace::Reg {
                        regs.push(&n.name, d.ty);
                        out.push(Formal::Reg { name: n.name.clone(), kind: storage_kind(d.ty) });
                    } else {
                        param_vars.push((d, n));
                        out.push(Formal::Param { name: n.name.clone(), offset: 0, size: 0 });
                    }
                }
            }
        }
    }
    for d in decls {
        match d.space {
            StateSpace::Reg => expand_regs(d, &mut regs)?,
            StateSpace::Shared => {
                for n in &d.names {
                    if n.dims.first() == Some(&None) {
                        shared_dynamic.push((d, n));
                    } else {
                        shared_static.push((d, n));
                    }
                }
            }
            StateSpace::Local => locals.extend(d.names.iter().map(|n| (d, n))),
            StateSpace::Param => param_vars.extend(d.names.iter().map(|n| (d, n))),
            other => {
                return Err(Diagnostic::error(
                    d.span,
                    format!("{} declarations inside a function are not supported yet", other.name()),
                ))
            }
        }
    }
    let (placed, static_end) = layout::place(&shared_static, 0)?;
    let mut shared: HashMap<String, Placed> = placed.into_iter().collect();
    let dyn_base =
        static_end.div_ceil(crate::abi::DYNAMIC_SHARED_ALIGN as u64) * crate::abi::DYNAMIC_SHARED_ALIGN as u64;
    for (d, n) in &shared_dynamic {
        shared.insert(n.name.clone(), Placed { offset: dyn_base, size: 0, ty: d.ty });
    }
    if static_end > u32::MAX as u64 / 2 {
        return Err(Diagnostic::error(f.span, "static .shared memory is too large"));
    }
    // Local words: .local variables, then .param variables (word aligned, so
    // that calls can pass them as whole words).
    let (placed, local_end) = layout::place(&locals, 0)?;
    let mut local: HashMap<String, Placed> = placed.into_iter().collect();
    let mut end = local_end.div_ceil(4) * 4;
    for (d, n) in &param_vars {
        let size = layout::var_size(d, n)?;
        let align = (layout::var_align(d) as u64).max(4);
        end = end.div_ceil(align) * align;
        local.insert(n.name.clone(), Placed { offset: end, size, ty: d.ty });
        end += size.div_ceil(4) * 4;
    }
    if end > 1 << 24 {
        return Err(Diagnostic::error(f.span, ".local memory is too large"));
    }
    for formal in formal_params.iter_mut().chain(formal_returns.iter_mut()) {
        if let Formal::Param { name, offset, size } = formal {
            if let Some(p) = local.get(name.as_str()) {
                *offset = p.offset as u32;
                *size = p.size as u32;
            }
        }
    }
    let info = if is_entry {
        let names: FxHashSet<&str> = f.params.iter().flat_map(|d| d.names.iter().map(|n| n.name.as_str())).collect();
        let addressed = names_used_as_values(body, &names);
        Some(entry_info(f, e.opts, static_end as u32, !shared_dynamic.is_empty(), local_end as u32, addressed)?)
    } else {
        None
    };
    let mut scan = BodyScan::default();
    scan_body(body, &mut scan);
    let BodyScan { calls: callees, wide_shared_atomics: wide_atomics, uses_stack } = scan;
    let mut cfg = cfg::run(body, !is_entry)?;
    fn span_in(cfg: &Cfg, b: usize) -> Span {
        let blk = &cfg.blocks[b];
        blk.insts.first().map(|i| i.span).unwrap_or(blk.term_span)
    }
    // `reducible` changes only a CFG whose entry has predecessors or that
    // is irreducible (which `structurize` reports): try without it first.
    let direct = if crate::reducible::entry_has_predecessor(&cfg) {
        None
    } else {
        structurize::run(&cfg, &|b| span_in(&cfg, b)).ok()
    };
    let regions = match direct {
        Some(regions) => regions,
        None => {
            for r in crate::reducible::run(&mut cfg) {
                regs.push(&r, ScalarType::U32);
            }
            structurize::run(&cfg, &|b| span_in(&cfg, b))?
        }
    };
    let may_exit = cfg.blocks.iter().any(|b| b.assign.as_ref().is_some_and(|(r, _)| r == cfg::EXITED));
    let memory_regs = if e.opts.loop_live_outs_in_memory {
        memory_registers_of(&cfg, &regions, &regs, &formal_returns)
    } else {
        FxHashSet::default()
    };
    Ok(Plan {
        func: f,
        may_exit,
        uses_stack,
        wide_atomics,
        info,
        static_shared_bytes: static_end as u32,
        params: formal_params,
        returns: formal_returns,
        callees,
        shared,
        local,
        local_bytes: end as u32,
        regs,
        cfg,
        regions,
        uniform_regions: Vec::new(),
        memory_regs,
    })
}

/// The registers `live_out.rs` keeps in memory.
fn memory_registers_of(cfg: &Cfg, regions: &[Region], regs: &Regs, returns: &[Formal]) -> FxHashSet<String> {
    let names: FxHashSet<&str> = regs.iter().map(|(n, _)| n).collect();
    let returns: Vec<&str> = returns
        .iter()
        .filter_map(|f| match f {
            Formal::Reg { name, .. } => Some(name.as_str()),
            Formal::Param { .. } => None,
        })
        .collect();
    super::live_out::registers(cfg, regions, &|r| names.contains(r), &returns)
}

impl Plan<'_> {
    /// Rewrite the regions around spin loops so that diverged lanes make
    /// progress independently (see [`crate::progress`]; each step of a
    /// region starts with `yield_inst` when given), and structure the
    /// function again if anything changed.
    /// In a function with a spin loop, gives each wall instruction a basic
    /// block of its own ([`crate::progress::isolate_walls`]), before the
    /// lock-step points and the interleaved regions are chosen.
    pub fn isolate_walls(
        &mut self,
        opts: &crate::Options,
        is_wall: &dyn Fn(&ast::Instruction) -> bool,
        spin: &crate::progress::SpinTest,
    ) -> Result<(), Diagnostic> {
        if crate::progress::regions(&self.cfg, is_wall, spin).is_empty()
            || !crate::progress::isolate_walls(&mut self.cfg, is_wall)
        {
            return Ok(());
        }
        self.restructure(opts)
    }

    /// The regions (and the registers kept in memory) again, after a pass
    /// changed the CFG.
    fn restructure(&mut self, opts: &crate::Options) -> Result<(), Diagnostic> {
        let cfg = &self.cfg;
        let span_in = |b: usize| {
            let blk = &cfg.blocks[b];
            blk.insts.first().map(|i| i.span).unwrap_or(blk.term_span)
        };
        self.regions = structurize::run(cfg, &span_in)?;
        if opts.loop_live_outs_in_memory {
            self.memory_regs = memory_registers_of(&self.cfg, &self.regions, &self.regs, &self.returns);
        }
        Ok(())
    }

    pub fn interleave_spin_loops(
        &mut self,
        opts: &crate::Options,
        is_wall: &dyn Fn(&ast::Instruction) -> bool,
        spin: &crate::progress::SpinTest,
        yield_inst: Option<&'static ast::Instruction>,
    ) -> Result<(), Diagnostic> {
        let added = crate::progress::run(&mut self.cfg, is_wall, spin, yield_inst);
        if added.is_empty() {
            return Ok(());
        }
        for r in &added {
            self.regs.push(r, ScalarType::U32);
        }
        self.restructure(opts)
    }

    /// Make [`Plan::uniform_regions`] (for a function that runs in
    /// workgroup-uniform mode).
    pub fn plan_uniform(&mut self) -> Result<(), Diagnostic> {
        // Every function's regions already have their loop exits outside loops.
        self.uniform_regions = self.regions.clone();
        Ok(())
    }

    /// Bytes of local memory (including `.param` variables).
    pub fn local_bytes(&self) -> u32 {
        self.local_bytes
    }

    /// Every instruction of the body (control transfers excluded).
    pub fn instructions(&self) -> impl Iterator<Item = &ast::Instruction> + '_ {
        self.cfg.blocks.iter().flat_map(|b| b.insts.iter().copied())
    }
}

/// A callable `.func` as seen from call sites of one entry's code.
#[derive(Clone, Debug)]
pub(crate) struct Callee {
    pub id: Word,
    /// Runs in workgroup-uniform mode (see [`super::uniform`]): every
    /// invocation calls it, and a trailing `bool` argument says whether the
    /// caller's invocation is active.
    pub uniform: bool,
    pub params: Vec<Formal>,
    pub returns: Vec<Formal>,
    pub fn_type: Word,
    pub ret_type: Word,
    pub param_types: Vec<Word>,
}

/// The SPIR-V type of a formal: an array of words or a register value.
fn formal_type(e: &mut Emitter, f: &Formal) -> Word {
    match f {
        Formal::Param { size, .. } => {
            let u32t = e.t_int(32);
            let n = e.c_u32(Formal::words(*size));
            e.ty(TyKey::Array(u32t, n))
        }
        Formal::Reg { kind, .. } => e.kty(*kind),
    }
}

/// The signature of a planned `.func`, with a fresh function id.
pub(crate) fn callee(e: &mut Emitter, plan: &Plan) -> Callee {
    let mut param_types: Vec<Word> = plan.params.iter().map(|f| formal_type(e, f)).collect();
    let uniform = e.uniform_fns.contains(&plan.func.name);
    if uniform {
        param_types.push(e.t_bool());
    }
    let ret_type = if plan.returns.is_empty() {
        e.ty(TyKey::Void)
    } else {
        let members: Vec<Word> = plan.returns.iter().map(|f| formal_type(e, f)).collect();
        e.ty(TyKey::Struct(members))
    };
    let fn_type = e.ty(TyKey::Func(ret_type, param_types.clone()));
    Callee {
        id: e.b.id(),
        uniform,
        params: plan.params.clone(),
        returns: plan.returns.clone(),
        fn_type,
        ret_type,
        param_types,
    }
}

/// Per-entry globals shared by the entry and the functions it calls.
#[derive(Clone, Copy)]
pub(crate) struct EntryVars {
    pub push_var: Option<Word>,
    pub shared_var: Option<Word>,
    /// `Private` words holding every function's `.local` frame (per invocation).
    pub local_var: Option<Word>,
    /// Bytes of `local_var` (0 when there is none).
    pub local_total: u32,
    /// `Private` u32 set by `exit` inside a `.func` (see [`cfg::EXITED`]).
    pub exited_var: Option<Word>,
    /// The shared words are 64 bits wide (64-bit shared atomics).
    pub shared_wide: bool,
    /// `alloca` stack: the `Private` stack-pointer variable (a byte offset
    /// in the local words) and the end of the stack area.
    pub stack: Option<(Word, u32)>,
    pub passing: ParamPassing,
    /// The translator's `Workgroup` scratch words (see [`super::uniform`]).
    pub scratch_var: Option<Word>,
}

/// What a structured construct is for: a region's target, or the boundary
/// of an escape region (ordinary code inside a workgroup-uniform function,
/// see [`super::uniform`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Dest {
    /// A [`Target`] of the structured regions.
    To(Target),
    /// Leave the innermost escape region (the target is stored in the
    /// uniform state variable).
    Escape,
}

/// The `brk` code of [`Dest::Escape`].
const ESCAPE_CODE: u32 = 0xFFFF_FFFE;

pub(crate) struct Frame {
    kind: Dest,
    merge: Word,
    cont: Word,
    pending: BTreeSet<Dest>,
}

/// Per-function state of workgroup-uniform mode (see [`super::uniform`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct UniformFx {
    /// The invocation's state: 0 active, else a target code, a park code or
    /// [`super::uniform::RETURNED`].
    pub st: Word,
    /// Park codes handed out so far.
    pub parks: u32,
}

/// Per-function emission state.
pub(crate) struct Fx<'a> {
    pub regs: FxHashMap<&'a str, (Word, K)>,
    pub params: FxHashMap<&'a str, &'a ParamInfo>,
    pub passing: ParamPassing,
    pub shared: &'a HashMap<String, Placed>,
    pub local: &'a HashMap<String, Placed>,
    pub shared_var: Option<Word>,
    pub local_var: Option<Word>,
    /// Bytes of the local words of the entry (every frame and the stack).
    pub local_total: u32,
    /// Byte offset of this function's frame in the local words.
    pub local_base: u32,
    /// See [`EntryVars::exited_var`].
    pub exited_var: Option<Word>,
    /// See [`EntryVars::shared_wide`].
    pub shared_wide: bool,
    /// See [`EntryVars::stack`].
    pub stack: Option<(Word, u32)>,
    pub push_var: Option<Word>,
    pub linear: Word,
    pub brk: Word,
    pub open: bool,
    pub errors: Vec<Diagnostic>,
    frames: Vec<Frame>,
    codes: HashMap<Target, u32>,
    pub cfg: &'a Cfg<'a>,
    /// Workgroup-uniform mode state, when this function runs in it.
    pub uniform: Option<UniformFx>,
    /// The translator's `Workgroup` scratch words, when the entry has them.
    pub scratch_var: Option<Word>,
    /// `None` in an entry; the return values of a `.func`.
    pub returns: Option<(Vec<Formal>, Word)>,
    /// Functions callable from here, by PTX name.
    pub callees: &'a HashMap<String, Callee>,
    /// The PTX name of the function (for fault records).
    pub name: &'a str,
    /// What is known of its `vprintf` calls.
    pub printf_sites: super::printf_sites::Sites,
    /// Registers that may hold a `.shared` or `.local` generic address
    /// (all of them, `None`, without [`crate::Options::generic_to_global`]).
    pub windowed: Option<FxHashSet<&'a str>>,
}

/// Storage kind of a register of PTX type `t`.
pub(crate) fn storage_kind(t: ScalarType) -> K {
    // Registers hold what instructions of their type compute on.
    super::values::kind_of(t)
}

/// Bytes a function's frame takes in the local words: its `.local` and
/// `.param` bytes rounded up to 16, so that every frame starts 16-aligned.
pub(crate) fn frame_bytes(local_bytes: u32) -> u32 {
    local_bytes.div_ceil(16) * 16
}

/// Create the push-constant and shared-memory variables of an entry.
pub(crate) fn entry_vars(e: &mut Emitter, plans: &[&Plan], entry: &Plan) -> EntryVars {
    let u32t = e.t_int(32);
    let info = entry.info.as_ref();
    let push_bytes = info.map(|i| i.push_constant_bytes).unwrap_or(0);
    let push_var = if push_bytes > 0 {
        let n = e.c_u32(push_bytes / 4);
        let arr = e.ty(TyKey::Array(u32t, n));
        // rspirv de-duplicates structs: decorate each block type once.
        let st = e.ty(TyKey::Struct(vec![arr]));
        if e.decorated.insert(st) {
            e.b.decorate(st, spirv::Decoration::Block, []);
            e.b.member_decorate(st, 0, spirv::Decoration::Offset, [Operand::LiteralBit32(0)]);
        }
        let pt = e.t_ptr(spirv::StorageClass::PushConstant, st);
        Some(e.b.variable(pt, None, spirv::StorageClass::PushConstant, None))
    } else {
        None
    };
    let uses_shared = plans.iter().any(|p| !p.shared.is_empty());
    let shared_wide = uses_shared && plans.iter().any(|p| p.wide_atomics);
    // Entries share one Workgroup variable per word width (each lists it in
    // its interface), so that tools which add up every Workgroup variable of
    // a module (the validation layer) see one entry's worth.
    let cached = if shared_wide { e.shared_var_wide } else { e.shared_var_narrow };
    let shared_var = if !uses_shared {
        None
    } else if cached.is_some() {
        cached
    } else if shared_wide {
        let u64t = e.t_int(64);
        let len = e.spec_shared_wide_words;
        let arr = e.b.type_array(u64t, len);
        if e.decorated.insert(arr) {
            e.b.decorate(arr, spirv::Decoration::ArrayStride, [Operand::LiteralBit32(8)]);
        }
        let pt = e.t_ptr(spirv::StorageClass::Workgroup, arr);
        Some(e.b.variable(pt, None, spirv::StorageClass::Workgroup, None))
    } else {
        let len = e.spec_shared_words;
        let arr = e.ty(TyKey::Array(u32t, len));
        let pt = e.t_ptr(spirv::StorageClass::Workgroup, arr);
        Some(e.b.variable(pt, None, spirv::StorageClass::Workgroup, None))
    };
    if shared_wide {
        e.shared_var_wide = shared_var;
    } else if shared_var.is_some() {
        e.shared_var_narrow = shared_var;
    }
    let frames: u32 = plans.iter().map(|p| frame_bytes(p.local_bytes)).sum();
    let uses_stack = plans.iter().any(|p| p.uses_stack);
    let local_total = if uses_stack { frames + super::stack::STACK_BYTES } else { frames };
    let stack = if uses_stack {
        let pt = e.t_ptr(spirv::StorageClass::Private, u32t);
        let base = e.c_u32(frames);
        Some((e.b.variable(pt, None, spirv::StorageClass::Private, Some(base)), local_total))
    } else {
        None
    };
    let local_var = if local_total > 0 {
        // With fault checks, a failing `.local` access goes to spare words
        // past the thread's own (see `fault::guard`).
        let junk = if e.opts.fault_checks { super::fault::LOCAL_JUNK_BYTES } else { 0 };
        let n = e.c_u32((local_total + junk) / 4);
        let arr = e.ty(TyKey::Array(u32t, n));
        let pt = e.t_ptr(spirv::StorageClass::Private, arr);
        Some(e.b.variable(pt, None, spirv::StorageClass::Private, None))
    } else {
        None
    };
    let exited_var = if plans.iter().any(|p| p.may_exit) {
        let pt = e.t_ptr(spirv::StorageClass::Private, u32t);
        let zero = e.c_u32(0);
        Some(e.b.variable(pt, None, spirv::StorageClass::Private, Some(zero)))
    } else {
        None
    };
    let (per_invocation, fixed) = super::uniform::scratch_words(e, plans, entry);
    let scratch_var = if per_invocation + fixed > 0 {
        if e.scratch_var.is_none() {
            e.scratch_var = Some(super::uniform::scratch_variable(e, per_invocation, fixed));
        }
        e.scratch_var
    } else {
        None
    };
    EntryVars {
        push_var,
        shared_var,
        local_var,
        local_total,
        exited_var,
        shared_wide,
        stack,
        passing: info.map(|i| i.param_passing).unwrap_or(ParamPassing::PushConstants),
        scratch_var,
    }
}

/// Emit an entry (`me` is `None`) or one entry's copy of a `.func`.
pub(crate) fn emit_function(
    e: &mut Emitter,
    plan: &Plan,
    vars: EntryVars,
    me: Option<&Callee>,
    callees: &HashMap<String, Callee>,
    local_base: u32,
) -> Result<Word, Vec<Diagnostic>> {
    let u32t = e.t_int(32);
    let (fid, ret_type) = match me {
        None => {
            let void = e.ty(TyKey::Void);
            let fnty = e.ty(TyKey::Func(void, vec![]));
            (e.b.begin_function(void, None, spirv::FunctionControl::NONE, fnty).map_err(internal)?, void)
        }
        Some(c) => {
            e.b.begin_function(c.ret_type, Some(c.id), spirv::FunctionControl::DONT_INLINE, c.fn_type)
                .map_err(internal)?;
            (c.id, c.ret_type)
        }
    };
    let mut incoming = Vec::new();
    if let Some(c) = me {
        for t in &c.param_types {
            incoming.push(e.b.function_parameter(*t).map_err(internal)?);
        }
    }
    e.b.begin_block(None).map_err(internal)?;
    let mut regs = FxHashMap::with_capacity_and_hasher(plan.regs.len() + 1, Default::default());
    let uniform = e.uniform_fns.contains(&plan.func.name);
    // The pointer type and initializer of the previous register's kind
    // (registers of one declaration come one after another).
    let mut last: Option<(K, Word, Option<Word>)> = None;
    let mut memory = Vec::new();
    for (name, t) in plan.regs.iter() {
        let k = storage_kind(t);
        let (pt, init) = match last {
            Some((lk, pt, init)) if lk == k => (pt, init),
            _ => {
                let ty = e.kty(k);
                let pt = e.t_ptr(spirv::StorageClass::Function, ty);
                // In uniform mode inactive invocations compute with registers they
                // never wrote: give them defined values, never undef or poison.
                let init = if uniform { Some(e.zero(k)) } else { None };
                last = Some((k, pt, init));
                (pt, init)
            }
        };
        if plan.memory_regs.contains(name) {
            memory.push((name, k, pt, init));
            continue;
        }
        let v = e.b.variable(pt, None, spirv::StorageClass::Function, init);
        regs.insert(name, (v, k));
    }
    let zero = e.c_u32(0);
    let pu = e.t_ptr(spirv::StorageClass::Function, u32t);
    // `brk` stays promotable (see `live_out.rs`).
    let brk = e.b.variable(pu, None, spirv::StorageClass::Function, Some(zero));
    let st = if uniform { Some(e.b.variable(pu, None, spirv::StorageClass::Function, Some(zero))) } else { None };
    memory_registers(e, &memory, &mut regs).map_err(|d| vec![d])?;
    let linear = super::warp::linear_index(e).map_err(|d| vec![d])?;
    let mut fx = Fx {
        regs,
        params: plan.info.as_ref().map(|i| i.params.iter().map(|p| (p.name.as_str(), p)).collect()).unwrap_or_default(),
        passing: vars.passing,
        shared: &plan.shared,
        local: &plan.local,
        shared_var: vars.shared_var,
        local_var: vars.local_var,
        local_total: vars.local_total,
        exited_var: vars.exited_var,
        stack: vars.stack,
        shared_wide: vars.shared_wide,
        local_base,
        push_var: vars.push_var,
        linear,
        brk,
        open: true,
        errors: Vec::new(),
        frames: Vec::new(),
        codes: HashMap::new(),
        cfg: &plan.cfg,
        returns: me.map(|_| (plan.returns.clone(), ret_type)),
        callees,
        name: &plan.func.name,
        uniform: st.map(|st| UniformFx { st, parks: 0 }),
        scratch_var: vars.scratch_var,
        windowed: e.opts.generic_to_global.then(|| {
            let formals = reg_formals(&plan.params);
            let kernel_params: FxHashSet<&str> =
                plan.info.as_ref().map(|i| i.params.iter().map(|p| p.name.as_str()).collect()).unwrap_or_default();
            super::windowed::run(
                &plan.cfg,
                &|n| kernel_params.contains(n),
                &|n| plan.shared.contains_key(n) || plan.local.contains_key(n),
                &formals,
            )
        }),
        printf_sites: if e.opts.printf_sites {
            let returns = reg_formals(&plan.returns);
            super::printf_sites::run(&plan.cfg, &plan.local, &returns, super::printf::VPRINTF)
        } else {
            super::printf_sites::Sites::default()
        },
    };
    // A uniform `.func` receives its caller's activity as the last argument.
    let active_in = if me.is_some_and(|c| c.uniform) { incoming.pop() } else { None };
    let r = (|| -> Result<(), Diagnostic> {
        if me.is_none() {
            super::values::init_module_data_address(e, &fx)?;
        }
        if let Some(u) = fx.uniform {
            super::uniform::prologue(e, &fx, u, me.is_none(), active_in)?;
        } else if me.is_none() {
            // Padding invocations (beyond the block's thread count) exit at once.
            let pad = e.padding_invocation(linear)?;
            let exit = e.b.id();
            let go = e.b.id();
            e.b.selection_merge(go, spirv::SelectionControl::NONE).map_err(internal1)?;
            e.b.branch_conditional(pad, exit, go, []).map_err(internal1)?;
            e.b.begin_block(Some(exit)).map_err(internal1)?;
            e.b.ret().map_err(internal1)?;
            e.b.begin_block(Some(go)).map_err(internal1)?;
        }
        // Incoming arguments to their homes.
        for (formal, value) in plan.params.iter().zip(incoming) {
            match formal {
                Formal::Param { offset, size, .. } => {
                    for j in 0..Formal::words(*size) {
                        let w = e.b.composite_extract(u32t, None, value, [j]).map_err(internal1)?;
                        super::mem::store_local_word(e, &fx, offset / 4 + j, w)?;
                    }
                }
                Formal::Reg { name, kind } => {
                    if let Some(&(var, _)) = fx.regs.get(name.as_str()) {
                        let _ = kind;
                        e.b.store(var, value, None, []).map_err(internal1)?;
                    }
                }
            }
        }
        // The resume pass rewrote this entry (`crate::resume`).
        let resumes = plan.func.body.as_deref().is_some_and(crate::resume::rewritten);
        if me.is_none() {
            super::loop_limit::init(e)?;
            super::fault::load_cache(e)?;
            super::printf::load_fifo(e)?;
            super::block_order::init(e, resumes)?;
            super::race::init(e, &fx)?;
        }
        if fx.uniform.is_some() {
            // Every invocation reaches the end; the state says how it left.
            // Small loops without collectives are unrolled here too.
            let unrolled = crate::unroll::run(&plan.cfg, &plan.uniform_regions, e.opts.unroll_loops, false);
            super::uniform::emit_body(e, &mut fx, unrolled.as_deref().unwrap_or(&plan.uniform_regions))?;
            emit_return(e, &mut fx)?;
            fx.open = false;
        } else {
            // An entry that resumes gets more copies within its own budget.
            let unrolled = crate::unroll::run(&plan.cfg, &plan.regions, e.opts.unroll_loops, resumes);
            emit_regions(e, &mut fx, unrolled.as_deref().unwrap_or(&plan.regions))?;
        }
        if fx.open {
            e.b.unreachable().map_err(internal1)?;
            fx.open = false;
        }
        Ok(())
    })();
    if let Err(d) = r {
        fx.errors.push(d);
    }
    if !fx.errors.is_empty() {
        // Leave the builder ready for the next function; the module is discarded.
        if e.b.selected_block().is_some() {
            let _ = e.b.unreachable();
        }
        let _ = e.b.end_function();
        return Err(fx.errors);
    }
    e.b.end_function().map_err(internal)?;
    Ok(fid)
}

/// End the function for the current invocation from the middle of a block
/// (after a callee ran `exit`); the caller begins block `stay` next. In a
/// uniform function the invocation parks instead, leaving the enclosing
/// escape region if there is one, else going on to `stay` (ordinary runs end
/// after every call, see [`super::uniform`]).
/// The registers of `memory` (see `live_out.rs`): each a two-element
/// `Function` array, reached through an access chain at an opaque zero
/// index made here, after the function's variables; `regs` maps the
/// register to that pointer. `init` is stored first when given.
fn memory_registers<'n>(
    e: &mut Emitter,
    memory: &[(&'n str, K, Word, Option<Word>)],
    regs: &mut FxHashMap<&'n str, (Word, K)>,
) -> Result<(), Diagnostic> {
    if memory.is_empty() {
        return Ok(());
    }
    let two = e.c_u32(2);
    let opaque_zero = super::zero::opaque_zero(e, 32)?;
    for &(name, k, pt, init) in memory {
        let ty = e.kty(k);
        let arr = e.ty(TyKey::Array(ty, two));
        let pa = e.t_ptr(spirv::StorageClass::Function, arr);
        let var = e.b.entry_variable(pa, None).map_err(internal1)?;
        let p = e.b.access_chain(pt, None, var, [opaque_zero]).map_err(internal1)?;
        if let Some(init) = init {
            e.b.store(p, init, None, []).map_err(internal1)?;
        }
        regs.insert(name, (p, k));
    }
    Ok(())
}

pub(crate) fn leave(e: &mut Emitter, fx: &mut Fx, stay: Word) -> Result<(), Diagnostic> {
    let Some(u) = fx.uniform else {
        return emit_return(e, fx);
    };
    let c = e.c_u32(super::uniform::RETURNED);
    e.b.store(u.st, c, None, []).map_err(internal1)?;
    if fx.frames.iter().any(|f| f.kind == Dest::Escape) {
        branch(e, fx, Dest::Escape, false)?;
    } else {
        e.b.branch(stay).map_err(internal1)?;
    }
    fx.open = true;
    Ok(())
}

/// `ret` of a `.func`: gather the return values.
pub(crate) fn emit_return(e: &mut Emitter, fx: &mut Fx) -> Result<(), Diagnostic> {
    let Some((rets, ret_type)) = fx.returns.clone() else {
        // The entry ends: report a loop cut short and the thread's first fault.
        super::loop_limit::flush(e)?;
        super::fault::flush(e, fx)?;
        super::race::flush(e, fx)?;
        return e.b.ret().map_err(internal1);
    };
    if rets.is_empty() {
        return e.b.ret().map_err(internal1);
    }
    let u32t = e.t_int(32);
    let mut members = Vec::new();
    for r in &rets {
        match r {
            Formal::Param { offset, size, .. } => {
                let mut words = Vec::new();
                for j in 0..Formal::words(*size) {
                    words.push(super::mem::load_local_word(e, fx, offset / 4 + j)?);
                }
                let n = e.c_u32(Formal::words(*size));
                let at = e.ty(TyKey::Array(u32t, n));
                members.push(e.b.composite_construct(at, None, words).map_err(internal1)?);
            }
            Formal::Reg { name, kind } => {
                let Some(&(var, _)) = fx.regs.get(name.as_str()) else {
                    return Err(Diagnostic::error(Span::default(), format!("internal error: return register {name}")));
                };
                let t = e.kty(*kind);
                members.push(e.b.load(t, None, var, None, []).map_err(internal1)?);
            }
        }
    }
    let v = e.b.composite_construct(ret_type, None, members).map_err(internal1)?;
    e.b.ret_value(v).map_err(internal1)
}

fn internal(e: rspirv::dr::Error) -> Vec<Diagnostic> {
    vec![internal1(e)]
}

pub(crate) fn internal1(e: rspirv::dr::Error) -> Diagnostic {
    Diagnostic::error(Span::default(), format!("internal error: SPIR-V builder: {e:?}"))
}

/// Start a fresh block (after a terminator) so that emission can go on.
pub(crate) fn reopen(e: &mut Emitter, fx: &mut Fx) -> Result<(), Diagnostic> {
    let l = e.b.id();
    e.b.begin_block(Some(l)).map_err(internal1)?;
    fx.open = true;
    Ok(())
}

/// Emit regions as ordinary structured control flow.
pub(crate) fn emit_regions(e: &mut Emitter, fx: &mut Fx, regions: &[Region]) -> Result<(), Diagnostic> {
    for r in regions {
        if !fx.open {
            // Code after a transfer is unreachable; keep the module well formed.
            reopen(e, fx)?;
        }
        match r {
            Region::Code(b) => {
                block_assign(e, fx, *b)?;
                let blk = &fx.cfg.blocks[*b];
                for inst in blk.insts.clone() {
                    if !fx.open {
                        reopen(e, fx)?;
                    }
                    if let Err(d) = super::inst::emit(e, fx, inst) {
                        fx.errors.push(d);
                    }
                }
            }
            Region::Block { follower, body } => match open_block(*follower, body) {
                Some(open) => emit_regions(e, fx, &open)?,
                None => construct(e, fx, Dest::To(Target::Exit(*follower)), body)?,
            },
            Region::Loop { header, body } => construct(e, fx, Dest::To(Target::Continue(*header)), body)?,
            Region::If { block, then_body, else_body } => {
                let c = branch_condition(e, fx, *block)?;
                super::loop_limit::branch(e, fx, c, then_body, else_body)?;
                let t = e.b.id();
                let f = e.b.id();
                let m = e.b.id();
                e.b.selection_merge(m, spirv::SelectionControl::NONE).map_err(internal1)?;
                e.b.branch_conditional(c, t, f, []).map_err(internal1)?;
                e.b.begin_block(Some(t)).map_err(internal1)?;
                fx.open = true;
                emit_regions(e, fx, then_body)?;
                fall_through(e, fx, m)?;
                e.b.begin_block(Some(f)).map_err(internal1)?;
                fx.open = true;
                emit_regions(e, fx, else_body)?;
                fall_through(e, fx, m)?;
                e.b.begin_block(Some(m)).map_err(internal1)?;
                fx.open = true;
            }
            Region::Br(t) => branch(e, fx, Dest::To(*t), false)?,
            Region::Return => match fx.uniform {
                // Inside an escape region: park the invocation for good.
                Some(u) => {
                    let c = e.c_u32(super::uniform::RETURNED);
                    e.b.store(u.st, c, None, []).map_err(internal1)?;
                    branch(e, fx, Dest::Escape, false)?;
                }
                None => {
                    emit_return(e, fx)?;
                    fx.open = false;
                }
            },
        }
    }
    Ok(())
}

/// A block region that needs no construct of its own: one whose every
/// branch to its follower ends an arm of its trailing `If`s (or its body),
/// none inside a nested loop or block. Returns `body` with those branches
/// taken out and the `If`s' arms left open (an open arm goes on after its
/// `If`), so that it is emitted as plain selections, not as a one-pass loop
/// construct. `None` where a branch to the follower leaves a nested
/// construct or comes before the end.
///
/// llvmpipe's compiler keeps many one-pass constructs as real loops
/// (removing some): its limiter counts such a loop once per pass, which
/// the translator's count (`emit/loop_limit.rs`) does not see (a dispatch
/// loop's chain, [`crate::progress`], has one per member in every
/// iteration), and each is one more loop for LLVM's loop and machine
/// passes: a Warp backward
/// kernel (`check_special_funcs_float16`) had about 500 of them, most of
/// them `if`/`else` diamonds in its grid-stride loop, and compiled in
/// 483 s with them, 129 s without.
fn open_block(follower: usize, body: &[Region]) -> Option<Vec<Region>> {
    fn opened(regions: &[Region], f: usize) -> Option<Vec<Region>> {
        let Some((last, init)) = regions.split_last() else { return Some(Vec::new()) };
        if init.iter().any(|r| crate::unroll::exits_to(r, f)) {
            return None;
        }
        let mut out = init.to_vec();
        match last {
            Region::Br(Target::Exit(x)) if *x == f => {}
            Region::If { block, then_body, else_body } => out.push(Region::If {
                block: *block,
                then_body: opened(then_body, f)?,
                else_body: opened(else_body, f)?,
            }),
            r if crate::unroll::exits_to(r, f) => return None,
            r => out.push(r.clone()),
        }
        Some(out)
    }
    opened(body, follower)
}

/// The register assignment [`crate::reducible`] or `exit` attached to block `b`.
pub(crate) fn block_assign(e: &mut Emitter, fx: &mut Fx, b: usize) -> Result<(), Diagnostic> {
    let graph = fx.cfg;
    let Some((reg, value)) = &graph.blocks[b].assign else {
        return Ok(());
    };
    let (reg, value) = (&**reg, *value);
    if reg == cfg::EXITED && value == cfg::TRAPPED {
        set_trap_word(e, crate::abi::printf::TRAP_TRAP)?;
    }
    // In an entry there is no exited flag: the return that follows ends the thread.
    let var = if reg == cfg::EXITED {
        fx.exited_var
    } else {
        let Some(&(var, _)) = fx.regs.get(reg) else {
            return Err(Diagnostic::error(Span::default(), "internal error: dispatch register"));
        };
        Some(var)
    };
    if let Some(var) = var {
        let c = e.c_u32(value);
        e.b.store(var, c, None, []).map_err(internal1)?;
    }
    Ok(())
}

/// The condition of the two-way branch that ends block `block`.
pub(crate) fn branch_condition(e: &mut Emitter, fx: &mut Fx, block: usize) -> Result<Word, Diagnostic> {
    let span = fx.cfg.blocks[block].term_span;
    let graph = fx.cfg;
    match &graph.blocks[block].term {
        Terminator::CondBranch { pred, negated, .. } => super::values::pred(e, fx, pred, *negated, span),
        Terminator::Dispatch { reg, value, below, .. } => {
            let op = ast::Operand::Name { span, name: (&**reg).into(), component: None };
            let v = super::values::get(e, fx, &op, K::Int(32), false)?;
            let k = e.c_u32(*value);
            let bt = e.t_bool();
            if *below {
                e.b.u_less_than(bt, None, v, k).map_err(internal1)
            } else {
                e.b.i_equal(bt, None, v, k).map_err(internal1)
            }
        }
        _ => Err(Diagnostic::error(span, "internal error: If without a condition")),
    }
}

/// A trap raised inside an instruction (an `alloca` that overflows, a failed
/// assert): set `bits` in the trap word and end the thread (outside
/// workgroup-uniform mode; inside it the thread goes on and the launch still
/// fails). The current block is terminated; `resume` is where the thread
/// would go on.
pub(crate) fn trap_now(e: &mut Emitter, fx: &mut Fx, resume: Word, bits: u32) -> Result<(), Diagnostic> {
    set_trap_word(e, bits)?;
    if fx.uniform.is_some() {
        return e.b.branch(resume).map_err(internal1);
    }
    if let Some(flag) = fx.exited_var {
        let two = e.c_u32(cfg::TRAPPED);
        e.b.store(flag, two, None, []).map_err(internal1)?;
    }
    emit_return(e, fx)
}

/// `trap`: set `bits` in the module's trap word (the runtime reports the
/// launch failed; see [`crate::abi::printf::TRAP_TRAP`]).
pub(crate) fn set_trap_word(e: &mut Emitter, bits: u32) -> Result<(), Diagnostic> {
    let v = e.c_u32(bits);
    or_trap_word(e, v)
}

/// [`set_trap_word`] with the bits computed at run time (`bits`, a u32 value).
pub(crate) fn or_trap_word(e: &mut Emitter, bits: Word) -> Result<(), Diagnostic> {
    let (Some(base), Some(off)) = (e.module_data_address()?, e.trap_offset) else {
        return Err(Diagnostic::error(Span::default(), "internal error: trap word missing"));
    };
    let u64t = e.t_int(64);
    let u32t = e.t_int(32);
    let c = e.c_int(64, off);
    let a = e.b.i_add(u64t, None, base, c).map_err(internal1)?;
    let pt = e.t_ptr(spirv::StorageClass::PhysicalStorageBuffer, u32t);
    let p = e.b.convert_u_to_ptr(pt, None, a).map_err(internal1)?;
    let scope = e.c_u32(spirv::Scope::Device as u32);
    let sem = e.c_u32(0);
    e.b.atomic_or(u32t, None, p, scope, sem, bits).map_err(internal1)?;
    Ok(())
}

/// The end of an arm of an `If`: an arm left open (see
/// [`crate::structurize::Region::If`])
/// goes on at the merge block `m`.
fn fall_through(e: &mut Emitter, fx: &mut Fx, m: Word) -> Result<(), Diagnostic> {
    if fx.open {
        e.b.branch(m).map_err(internal1)?;
        fx.open = false;
    }
    Ok(())
}

/// End the current block with `OpUnreachable` if it is still open.
fn close(e: &mut Emitter, fx: &mut Fx) -> Result<(), Diagnostic> {
    if fx.open {
        e.b.unreachable().map_err(internal1)?;
        fx.open = false;
    }
    Ok(())
}

/// Ordinary emission of `regions` inside a uniform function, for the
/// invocations whose state is 0: a one-pass loop construct that branches
/// out of the regions leave after storing their target in the state.
pub(crate) fn escape_region(e: &mut Emitter, fx: &mut Fx, regions: &[Region]) -> Result<(), Diagnostic> {
    construct(e, fx, Dest::Escape, regions)
}

fn construct(e: &mut Emitter, fx: &mut Fx, kind: Dest, body: &[Region]) -> Result<(), Diagnostic> {
    let header = e.b.id();
    let start = e.b.id();
    let cont = e.b.id();
    let merge = e.b.id();
    if matches!(kind, Dest::To(Target::Continue(_))) {
        super::loop_limit::enter(e)?;
    }
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(header)).map_err(internal1)?;
    let counted = matches!(kind, Dest::To(Target::Continue(_)));
    // The resume pass's site of this loop, in an entry it rewrote.
    let site = match kind {
        Dest::To(Target::Continue(h)) if e.loop_counter.is_some() => crate::resume::site_of_header(fx.cfg, h),
        _ => None,
    };
    if counted {
        super::loop_limit::loop_merge(e, merge, cont)?;
    } else {
        e.b.loop_merge(merge, cont, spirv::LoopControl::NONE, []).map_err(internal1)?;
    }
    e.b.branch(start).map_err(internal1)?;
    e.b.begin_block(Some(start)).map_err(internal1)?;
    fx.open = true;
    fx.frames.push(Frame { kind, merge, cont, pending: BTreeSet::new() });
    emit_regions(e, fx, body)?;
    if kind == Dest::Escape && fx.open {
        // Falling off the end of an escape region: the invocation stays active.
        e.b.branch(merge).map_err(internal1)?;
        fx.open = false;
    }
    close(e, fx)?;
    let frame = fx.frames.pop().ok_or_else(|| Diagnostic::error(Span::default(), "internal error: frame"))?;
    e.b.begin_block(Some(cont)).map_err(internal1)?;
    if counted {
        super::loop_limit::check_site(e, None, site.map(|(k, _)| k))?;
    }
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    fx.open = true;
    if let Some((k, save)) = site {
        save_if_cut(e, fx, k, save)?;
    }
    if counted {
        super::loop_limit::merged(e)?;
    }
    // Re-dispatch branches that leave more than this construct.
    for t in frame.pending {
        let code = dest_code(fx, t);
        let u32t = e.t_int(32);
        let bt = e.t_bool();
        let v = e.b.load(u32t, None, fx.brk, None, []).map_err(internal1)?;
        let c = e.c_u32(code);
        let hit = e.b.i_equal(bt, None, v, c).map_err(internal1)?;
        let act = e.b.id();
        let next = e.b.id();
        e.b.selection_merge(next, spirv::SelectionControl::NONE).map_err(internal1)?;
        e.b.branch_conditional(hit, act, next, []).map_err(internal1)?;
        e.b.begin_block(Some(act)).map_err(internal1)?;
        branch(e, fx, t, true)?;
        e.b.begin_block(Some(next)).map_err(internal1)?;
        fx.open = true;
    }
    Ok(())
}

/// At the merge of the loop of resume site `k` (`crate::resume`): a lane
/// whose loop the driver's limiter cut (`loop_limit::cut_at_site`) runs the
/// site's save code (the instructions of block `save`, which the header's
/// check runs when the loop count nears the limit) and returns when it
/// could save itself; it goes on in the next resume round. When it could
/// not (no round left, or the round's records are full), it goes on to
/// [`super::loop_limit::merged`], which fails the launch. The registers it
/// saves are right here because they are in memory
/// ([`crate::Options::loop_live_outs_in_memory`], on where the resume pass
/// runs): the header's save block, outside the loop, reads every one of
/// them, so `live_out.rs` keeps them there; a value llvmpipe's compiler
/// kept in a register would be whatever the lane last left the loop with
/// through a `break`, which a cut lane never took.
fn save_if_cut(e: &mut Emitter, fx: &mut Fx, k: u32, save: usize) -> Result<(), Diagnostic> {
    let Some(cut) = super::loop_limit::cut_at_site(e, k)? else {
        return Ok(());
    };
    super::grid::if_then(e, cut, |e| {
        fx.open = true;
        let graph = fx.cfg;
        for inst in graph.blocks[save].insts.clone() {
            if !fx.open {
                reopen(e, fx)?;
            }
            if let Err(d) = super::inst::emit(e, fx, inst) {
                fx.errors.push(d);
            }
        }
        // The save block's `@ok ret`: the lane that could not save itself
        // goes on past the `if`.
        let saved = branch_condition(e, fx, save)?;
        let ret = e.b.id();
        let not_saved = e.b.id();
        e.b.selection_merge(not_saved, spirv::SelectionControl::NONE).map_err(internal1)?;
        e.b.branch_conditional(saved, ret, not_saved, []).map_err(internal1)?;
        e.b.begin_block(Some(ret)).map_err(internal1)?;
        emit_return(e, fx)?;
        e.b.begin_block(Some(not_saved)).map_err(internal1)?;
        Ok(())
    })?;
    fx.open = true;
    Ok(())
}

/// The code of a target, in `brk` and in the uniform state (1, 2, ...).
pub(crate) fn target_code(fx: &mut Fx, t: Target) -> u32 {
    let n = fx.codes.len() as u32 + 1;
    *fx.codes.entry(t).or_insert(n)
}

fn dest_code(fx: &mut Fx, d: Dest) -> u32 {
    match d {
        Dest::To(t) => target_code(fx, t),
        Dest::Escape => ESCAPE_CODE,
    }
}

fn branch(e: &mut Emitter, fx: &mut Fx, t: Dest, reset: bool) -> Result<(), Diagnostic> {
    let escape = fx.frames.iter().rposition(|f| f.kind == Dest::Escape);
    let found = fx.frames.iter().rposition(|f| f.kind == t).filter(|&j| !matches!(escape, Some(k) if j < k));
    let (j, t) = match (found, t, escape) {
        (Some(j), _, _) => (j, t),
        // A target outside the escape region: store it in the state and leave.
        (None, Dest::To(target), Some(k)) => {
            let Some(u) = fx.uniform else {
                return Err(Diagnostic::error(Span::default(), "internal error: escape without uniform state"));
            };
            let c = target_code(fx, target);
            let c = e.c_u32(c);
            e.b.store(u.st, c, None, []).map_err(internal1)?;
            (k, Dest::Escape)
        }
        _ => return Err(Diagnostic::error(Span::default(), "internal error: branch target outside its region")),
    };
    let inner = fx.frames.len() - 1;
    if j == inner {
        let zero = e.c_u32(0);
        if reset {
            e.b.store(fx.brk, zero, None, []).map_err(internal1)?;
        }
        let dest = match t {
            Dest::To(Target::Continue(_)) => fx.frames[j].cont,
            Dest::To(Target::Exit(_)) | Dest::Escape => fx.frames[j].merge,
        };
        e.b.branch(dest).map_err(internal1)?;
    } else {
        let code = dest_code(fx, t);
        let c = e.c_u32(code);
        e.b.store(fx.brk, c, None, []).map_err(internal1)?;
        for f in &mut fx.frames[j + 1..] {
            f.pending.insert(t);
        }
        e.b.branch(fx.frames[inner].merge).map_err(internal1)?;
    }
    fx.open = false;
    Ok(())
}
