//! Pass: recursive `.func`s through an explicit stack.
//!
//! SPIR-V for Vulkan has no recursion (a static call graph is required), so
//! every strongly connected component of the direct-call graph that is a
//! cycle is rewritten, at the PTX level, into non-recursive functions. Each
//! member `f` of a cycle `S` gets a body of its own, a *machine*, that holds
//! the bodies of all members of `S` and runs `f`'s activation and every
//! activation it causes within `S`:
//!
//! - a per-thread stack, `.local .align 16 .b8 __rc_stack[N]` (N from
//!   [`crate::Options::recursion_stack_bytes`], 16 KiB by default),
//!   holds one *frame* per activation: the caller's frame address, the
//!   return site, the member's parameters, return values and `.local`
//!   variables (so a callee can write through a pointer into its caller's
//!   frame, as nvcc's and NVVM's `%SP`-relative locals do), and a save area
//!   for the registers live across each call;
//! - the member's references to its parameters, returns and `.local`
//!   variables become addresses relative to the frame register
//!   (`[f_param_0+4]` → `[%__rc_fp+20]`, `ld.param` → `ld.local`, `mov %r,
//!   __local_depot0` → `add %r, %__rc_fp, 32`);
//! - a call to a member saves the caller's registers that are live after the
//!   call (a liveness analysis on [`crate::cfg`]'s blocks), pushes a frame
//!   (ending the thread with `trap` when the stack would overflow, as CUDA
//!   reports a stack overflow as a launch failure), copies the arguments into
//!   it and branches to the callee's entry label; its return site restores
//!   the registers and copies the results to the call's destinations;
//! - `ret` pops the frame and branches to a dispatch block that jumps to the
//!   popped return site, or returns from the machine for site 0.
//!
//! The resulting control flow is irreducible in general; the structurizer's
//! [`crate::reducible`] pass makes it reducible without duplicating code.
//! Calls through function pointers are not part of the graph: a cycle
//! through an indirect call is still reported by the emitter.
//!
//! Registers of a member are renamed (`%r1` → `%__rc1_r1`) when the cycle
//! has several members, so that their declarations cannot clash.

use crate::ast::{
    Address, Function, Guard, Instruction, Module, ModuleItem, Operand, ScalarType, StateSpace, Statement, Str,
    VarDecl, VarName,
};
use crate::cfg::{self, Terminator};
use crate::diag::{Diagnostic, Span};
use crate::layout;
use std::collections::{BTreeSet, HashMap, HashSet};

/// Bytes of recursion stack per thread by default (CUDA's default stack
/// limit is 1 KiB).
pub const STACK_BYTES: u32 = 16384;

/// Most bytes of recursion stack per thread.
pub const MAX_STACK_BYTES: u32 = 1 << 20;

/// Frame header: the caller's frame address (8 bytes) and the return site.
const HEADER_BYTES: u64 = 16;

/// Rewrite every recursive cycle of direct calls. Returns the functions it
/// rewrote (the caller then checks them again, which decodes the new
/// instructions).
/// `stack_bytes` is the size of each thread's stack (clamped to 256 ..=
/// [`MAX_STACK_BYTES`], rounded up to 16).
pub fn run(module: &mut Module, stack_bytes: u32) -> Result<HashSet<String>, Diagnostic> {
    let stack_bytes = u64::from(stack_bytes.clamp(256, MAX_STACK_BYTES).div_ceil(16) * 16);
    // Cycles of the direct-call graph, as (name, item index) of their members.
    let cycles: Vec<Vec<(String, usize)>> = {
        let index: HashMap<&str, usize> = module
            .items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item {
                ModuleItem::Function(f) if f.body.is_some() => Some((f.name.as_str(), i)),
                _ => None,
            })
            .collect();
        let mut names: Vec<&str> = index.keys().copied().collect();
        names.sort_unstable();
        let pos: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let edges: Vec<Vec<usize>> = names
            .iter()
            .map(|n| {
                let mut targets = BTreeSet::new();
                if let ModuleItem::Function(f) = &module.items[index[n]] {
                    call_targets(f.body.as_deref().unwrap_or(&[]), &mut targets);
                }
                targets.iter().filter_map(|t| pos.get(t).copied()).collect()
            })
            .collect();
        crate::reducible::strongly_connected(edges.len(), 0..edges.len(), |v, i| edges[v].get(i).copied())
            .into_iter()
            .filter(|c| c.len() > 1 || edges[c[0]].contains(&c[0]))
            .map(|c| c.iter().map(|&k| (names[k].to_string(), index[names[k]])).collect())
            .collect()
    };
    if cycles.is_empty() {
        return Ok(HashSet::new());
    }
    let wide = module.address_size != 32;
    let mut rewritten = HashSet::new();
    for cycle in cycles {
        let funcs: Vec<Function> = cycle
            .iter()
            .filter_map(|&(_, i)| match &module.items[i] {
                ModuleItem::Function(f) => Some(f.clone()),
                _ => None,
            })
            .collect();
        let members = prepare(&funcs, stack_bytes)?;
        for (e, &(_, i)) in cycle.iter().enumerate() {
            let body = machine(&members, e, wide, stack_bytes)?;
            if let ModuleItem::Function(f) = &mut module.items[i] {
                f.body = Some(body);
            }
        }
        rewritten.extend(cycle.into_iter().map(|(name, _)| name));
    }
    Ok(rewritten)
}

/// Names of the functions called directly in a body.
fn call_targets<'a>(stmts: &'a [Statement], out: &mut BTreeSet<&'a str>) {
    for s in stmts {
        match s {
            Statement::Block(inner) => call_targets(inner, out),
            Statement::Inst(i) if i.opcode == "call" => {
                if let Some(t) = callee_name(i) {
                    out.insert(t);
                }
            }
            _ => {}
        }
    }
}

fn callee_name(i: &Instruction) -> Option<&str> {
    match i.call_operands().1 {
        Some(Operand::Name { name, .. }) if !name.starts_with('%') => Some(name.as_str()),
        _ => None,
    }
}

/// A slot of a frame: a parameter, a return value or a `.local` variable.
#[derive(Clone, Debug)]
struct Slot {
    /// The (renamed) name the body uses.
    name: String,
    /// The name in the function's signature (parameters and returns).
    outer: String,
    space: StateSpace,
    ty: ScalarType,
    offset: u64,
    size: u64,
    align: u64,
}

/// One member of a cycle, ready to be placed in a machine.
struct Member {
    name: String,
    span: Span,
    params: Vec<Slot>,
    returns: Vec<Slot>,
    /// Offsets of the parameters, returns and `.local` variables.
    frame: HashMap<String, u64>,
    /// Declarations kept in the machine (renamed; no frame variables).
    decls: Vec<VarDecl>,
    /// The body: labels and instructions, renamed, blocks flattened.
    body: Vec<Statement>,
    /// Registers: name → type (parameterized ranges expanded on lookup).
    regs: Regs,
    /// `.param` variables of the body (call sites): name → (size, align).
    call_params: HashMap<String, (u64, u64)>,
    /// For each call to a member (by body index): the registers live
    /// across it.
    live: HashMap<usize, Vec<(String, ScalarType)>>,
    save_offset: u64,
    frame_size: u64,
}

/// Registers: name → type and vector width (parameterized ranges
/// `%r<N>` expanded on lookup).
#[derive(Default)]
pub(crate) struct Regs {
    names: HashMap<String, (ScalarType, Option<u32>)>,
    ranges: HashMap<String, (u32, ScalarType, Option<u32>)>,
}

impl Regs {
    pub(crate) fn add(&mut self, d: &VarDecl, n: &VarName, name: String) {
        match n.count {
            Some(c) => {
                self.ranges.insert(name, (c, d.ty, d.vector));
            }
            None => {
                self.names.insert(name, (d.ty, d.vector));
            }
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<(ScalarType, Option<u32>)> {
        if let Some(&t) = self.names.get(name) {
            return Some(t);
        }
        let digits = name.len() - name.bytes().rev().take_while(u8::is_ascii_digit).count();
        if digits == name.len() || (name.len() - digits > 1 && name.as_bytes()[digits] == b'0') {
            return None;
        }
        let (prefix, num) = name.split_at(digits);
        let k: u64 = num.parse().ok()?;
        self.ranges.get(prefix).filter(|(c, _, _)| k < u64::from(*c)).map(|&(_, t, v)| (t, v))
    }
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a.max(1)) * a.max(1)
}

/// Flatten nested blocks (the scope pass has made names unique).
fn flatten(stmts: Vec<Statement>, out: &mut Vec<Statement>) {
    for s in stmts {
        match s {
            Statement::Block(inner) => flatten(inner, out),
            s => out.push(s),
        }
    }
}

/// The renaming of one member: every name declared in it (and its labels).
struct Renamer {
    prefix: Option<String>,
    names: HashSet<String>,
    regs: Regs,
}

impl Renamer {
    fn new(prefix: Option<String>) -> Renamer {
        Renamer { prefix, names: HashSet::new(), regs: Regs::default() }
    }

    fn owns(&self, name: &str) -> bool {
        self.names.contains(name) || self.regs.ranges.contains_key(name) || self.regs.get(name).is_some()
    }

    fn apply(&self, name: &str) -> Option<String> {
        let p = self.prefix.as_ref()?;
        if !self.owns(name) {
            return None;
        }
        Some(match name.strip_prefix('%') {
            Some(rest) => format!("%{p}{rest}"),
            None => format!("{p}{name}"),
        })
    }

    fn name(&self, name: &str) -> String {
        self.apply(name).unwrap_or_else(|| name.to_string())
    }

    fn str(&self, s: &mut Str) {
        if let Some(n) = self.apply(s) {
            *s = Str::from(n);
        }
    }

    fn operand(&self, o: &mut Operand) {
        match o {
            Operand::Name { name, .. } | Operand::SymbolOffset(_, name, _) | Operand::ArrayElement(_, name, _) => {
                self.str(name)
            }
            Operand::Address(_, a) => {
                if let Some((_, b)) = &mut a.base {
                    self.str(b);
                }
            }
            Operand::TensorAddress(_, a, v) => {
                if let Some((_, b)) = &mut a.base {
                    self.str(b);
                }
                v.iter_mut().for_each(|x| self.operand(x));
            }
            Operand::Not(_, x) | Operand::Neg(_, x) => self.operand(x),
            Operand::Select { base, .. } => self.operand(base),
            Operand::Pair(_, a, b) => {
                self.operand(a);
                self.operand(b);
            }
            Operand::Vector(_, v) | Operand::List(_, v) | Operand::Bracket(_, v) => {
                v.iter_mut().for_each(|x| self.operand(x))
            }
            Operand::Int(..) | Operand::Float(..) | Operand::Sink(_) => {}
        }
    }
}

/// Collect the declarations and labels of a flattened body.
fn declared(body: &[Statement], r: &mut Renamer) {
    for s in body {
        match s {
            Statement::Decl(d) => {
                for n in &d.names {
                    if d.space == StateSpace::Reg {
                        r.regs.add(d, n, n.name.clone());
                    } else {
                        r.names.insert(n.name.clone());
                    }
                }
            }
            Statement::Label(_, l) => {
                r.names.insert(l.to_string());
            }
            Statement::Prototype(_, n, _) => {
                r.names.insert(n.clone());
            }
            Statement::TargetList { name, .. } => {
                r.names.insert(name.clone());
            }
            _ => {}
        }
    }
}

fn prepare(funcs: &[Function], stack_bytes: u64) -> Result<Vec<Member>, Diagnostic> {
    let several = funcs.len() > 1;
    let mut out = Vec::new();
    for (i, f) in funcs.iter().enumerate() {
        let outer: Vec<&str> =
            f.params.iter().chain(&f.returns).flat_map(|d| d.names.iter().map(|n| n.name.as_str())).collect();
        let scoped = crate::scope::run(f.body.as_deref().unwrap_or(&[]), &outer).into_owned();
        let mut flat = Vec::new();
        flatten(scoped, &mut flat);
        let mut r = Renamer::new(several.then(|| format!("__rc{i}_")));
        declared(&flat, &mut r);
        for d in f.params.iter().chain(&f.returns) {
            for n in &d.names {
                if d.space == StateSpace::Reg {
                    r.regs.add(d, n, n.name.clone());
                } else {
                    r.names.insert(n.name.clone());
                }
            }
        }
        // Rename.
        let mut body = Vec::new();
        let mut decls = Vec::new();
        for mut s in flat {
            match &mut s {
                Statement::Decl(d) => {
                    for n in &mut d.names {
                        n.name = r.name(&n.name);
                    }
                    decls.push(d.clone());
                    continue;
                }
                Statement::Label(_, l) => r.str(l),
                Statement::Prototype(_, n, _) => *n = r.name(n),
                Statement::TargetList { name, targets, .. } => {
                    *name = r.name(name);
                    for t in targets {
                        *t = r.name(t);
                    }
                }
                Statement::Inst(inst) => {
                    if let Some(g) = &mut inst.guard {
                        r.str(&mut g.name);
                    }
                    inst.operands.iter_mut().for_each(|o| r.operand(o));
                }
                Statement::Block(_) => {}
            }
            body.push(s);
        }
        // Registers (renamed), frame slots.
        let mut regs = Regs::default();
        let mut call_params = HashMap::new();
        let mut kept = Vec::new();
        let mut locals = Vec::new();
        for d in decls {
            match d.space {
                StateSpace::Reg => {
                    for n in &d.names {
                        regs.add(&d, n, n.name.clone());
                    }
                    kept.push(d);
                }
                StateSpace::Local => locals.push(d),
                StateSpace::Param => {
                    for n in &d.names {
                        let size = layout::var_size(&d, n)?;
                        call_params.insert(n.name.clone(), (size, u64::from(layout::var_align(&d))));
                    }
                    kept.push(d);
                }
                _ => kept.push(d),
            }
        }
        let mut offset = HEADER_BYTES;
        let mut frame = HashMap::new();
        let mut slots = |decls: &[VarDecl], offset: &mut u64, frame: &mut HashMap<String, u64>| {
            let mut v = Vec::new();
            for d in decls {
                for n in &d.names {
                    let size = layout::var_size(d, n)?;
                    let align = u64::from(layout::var_align(d)).max(if d.space == StateSpace::Reg { 8 } else { 1 });
                    *offset = align_up(*offset, align);
                    let name = r.name(&n.name);
                    if d.space == StateSpace::Reg {
                        if d.vector.is_some() {
                            return Err(Diagnostic::error(
                                n.span,
                                format!("recursion: vector register parameter '{}' is not supported", n.name),
                            ));
                        }
                        regs.add(d, n, name.clone());
                    } else {
                        frame.insert(name.clone(), *offset);
                    }
                    v.push(Slot {
                        name,
                        outer: n.name.clone(),
                        space: d.space,
                        ty: d.ty,
                        offset: *offset,
                        size: size.max(1),
                        align,
                    });
                    *offset += size.max(if d.ty == ScalarType::Pred { 4 } else { 1 });
                }
            }
            Ok::<_, Diagnostic>(v)
        };
        let params = slots(&f.params, &mut offset, &mut frame)?;
        let returns = slots(&f.returns, &mut offset, &mut frame)?;
        let _ = slots(&locals, &mut offset, &mut frame)?;
        out.push(Member {
            name: f.name.clone(),
            span: f.span,
            params,
            returns,
            frame,
            decls: kept,
            body,
            regs,
            call_params,
            live: HashMap::new(),
            save_offset: align_up(offset, 16),
            frame_size: 0,
        });
    }
    let names: HashSet<String> = out.iter().map(|m| m.name.clone()).collect();
    for m in &mut out {
        m.live = liveness(m, &names)?;
        let save: u64 = m.live.values().map(|v| v.iter().map(|(_, t)| save_size(*t)).sum::<u64>()).max().unwrap_or(0);
        m.frame_size = align_up(m.save_offset + save, 16);
        if m.frame_size > stack_bytes {
            return Err(Diagnostic::error(
                m.span,
                format!(
                    "recursion: the frame of '{}' ({} bytes) does not fit the {stack_bytes}-byte stack",
                    m.name, m.frame_size
                ),
            ));
        }
    }
    Ok(out)
}

fn save_size(t: ScalarType) -> u64 {
    if t == ScalarType::B128 {
        16
    } else {
        8
    }
}

/// Register names in an operand.
fn operand_regs<'a>(o: &'a Operand, regs: &Regs, out: &mut Vec<&'a str>) {
    o.for_each_name(&mut |name| {
        if regs.get(name).is_some() {
            out.push(name);
        }
    });
}

/// The registers an instruction certainly writes (a kill) and those it
/// reads. An operand whose role is unknown counts as read; a guarded
/// instruction and a partial write (a selector) kill nothing.
pub(crate) fn defs_uses<'a>(i: &'a Instruction, regs: &Regs) -> (Vec<&'a str>, Vec<&'a str>) {
    let mut defs = Vec::new();
    let mut uses = Vec::new();
    if let Some(g) = &i.guard {
        if regs.get(&g.name).is_some() {
            uses.push(g.name.as_str());
        }
    }
    let outs = i.destinations();
    for (k, o) in i.operands.iter().enumerate() {
        let is_def = k < outs && !matches!(o, Operand::Select { .. });
        if is_def && i.guard.is_none() {
            operand_regs(o, regs, &mut defs);
        } else if !is_def {
            operand_regs(o, regs, &mut uses);
        }
    }
    (defs, uses)
}

/// The registers live on entry to each block of `g` (backward dataflow to a
/// fixed point; `exit_uses`: the registers a `ret` reads).
pub(crate) fn live_in(g: &cfg::Cfg, regs: &Regs, exit_uses: &[&str]) -> Vec<BTreeSet<String>> {
    let n = g.blocks.len();
    let mut live_in: Vec<BTreeSet<String>> = vec![BTreeSet::new(); n];
    let mut changed = true;
    while changed {
        changed = false;
        for b in (0..n).rev() {
            let mut live = live_out(g, &live_in, b);
            transfer(g, b, regs, exit_uses, &mut live, |_, _| {});
            if live.len() != live_in[b].len() {
                live_in[b] = live;
                changed = true;
            }
        }
    }
    live_in
}

/// The registers live at the end of block `b`: those live on entry to its
/// successors.
pub(crate) fn live_out(g: &cfg::Cfg, live_in: &[BTreeSet<String>], b: usize) -> BTreeSet<String> {
    g.successors(b).iter().filter_map(|&s| live_in.get(s)).flatten().cloned().collect()
}

/// Turns `live` (the registers live at the end of block `b`) into those
/// live on its entry, calling `visit` for each instruction, last first, with
/// the registers live after it that it does not define.
pub(crate) fn transfer(
    g: &cfg::Cfg,
    b: usize,
    regs: &Regs,
    exit_uses: &[&str],
    live: &mut BTreeSet<String>,
    mut visit: impl FnMut(&Instruction, &BTreeSet<String>),
) {
    let term: Vec<&str> = match &g.blocks[b].term {
        Terminator::CondBranch { pred, .. } => vec![*pred],
        Terminator::Dispatch { reg, .. } => vec![reg.as_ref()],
        Terminator::Return => exit_uses.to_vec(),
        Terminator::Branch(_) => Vec::new(),
    };
    for u in term {
        if regs.get(u).is_some() {
            live.insert(u.to_string());
        }
    }
    for inst in g.blocks[b].insts.iter().rev() {
        let (defs, uses) = defs_uses(inst, regs);
        for d in &defs {
            live.remove(*d);
        }
        visit(inst, live);
        for u in uses {
            live.insert(u.to_string());
        }
    }
}

/// For each call to a cycle member in `m.body` (by statement index), the
/// registers live after it that it does not define.
fn liveness(m: &Member, members: &HashSet<String>) -> Result<HashMap<usize, Vec<(String, ScalarType)>>, Diagnostic> {
    let g = cfg::run(&m.body, true)?;
    let at: HashMap<*const Instruction, usize> = m
        .body
        .iter()
        .enumerate()
        .filter_map(|(k, s)| match s {
            Statement::Inst(i) => Some((i as *const Instruction, k)),
            _ => None,
        })
        .collect();
    let ret_regs: Vec<&str> =
        m.returns.iter().filter(|s| s.space == StateSpace::Reg).map(|s| s.name.as_str()).collect();
    let live_in = live_in(&g, &m.regs, &ret_regs);
    let mut out = HashMap::new();
    for b in 0..g.blocks.len() {
        let mut live = live_out(&g, &live_in, b);
        transfer(&g, b, &m.regs, &ret_regs, &mut live, |inst, live| {
            if inst.opcode == "call" && callee_name(inst).is_some_and(|c| members.contains(c)) {
                if let Some(&k) = at.get(&(inst as *const Instruction)) {
                    // The call's results are written after the callee
                    // returns (also when the call is guarded: a skipped
                    // call skips the saving too).
                    let mut results = Vec::new();
                    inst.call_operands().0.iter().for_each(|o| operand_regs(o, &m.regs, &mut results));
                    let v: Vec<(String, ScalarType)> = live
                        .iter()
                        .filter(|r| !results.contains(&r.as_str()))
                        .filter_map(|r| m.regs.get(r).map(|(t, _)| (r.clone(), t)))
                        .collect();
                    out.insert(k, v);
                }
            }
        });
    }
    // A vector register cannot be saved.
    for v in out.values() {
        for (r, _) in v {
            if let Some((_, Some(_))) = m.regs.get(r) {
                return Err(Diagnostic::error(
                    m.span,
                    format!("recursion: vector register '{r}' is live across a recursive call (not supported)"),
                ));
            }
        }
    }
    Ok(out)
}

/// Statement builder for one machine.
struct Gen {
    out: Vec<Statement>,
    span: Span,
    wide: bool,
    labels: u32,
}

const FP: &str = "%__rc_fp";
const NFP: &str = "%__rc_nfp";
const LIM: &str = "%__rc_lim";
const SITE: &str = "%__rc_site";
const PRED: &str = "%__rc_p";
const T16: &str = "%__rc_t16";
const T32: &str = "%__rc_t32";
const T64: &str = "%__rc_t64";
const T128: &str = "%__rc_t128";
const ADDR: [&str; 3] = ["%__rc_a0", "%__rc_a1", "%__rc_a2"];
const ADDR32: [&str; 3] = ["%__rc_w0", "%__rc_w1", "%__rc_w2"];
const STACK: &str = "__rc_stack";
const DISPATCH: &str = "__rc_dispatch";

fn bits(t: ScalarType) -> &'static str {
    match t.size() {
        1 => "b8",
        2 => "b16",
        4 => "b32",
        8 => "b64",
        _ => "b128",
    }
}

impl Gen {
    fn name(&self, n: &str) -> Operand {
        Operand::Name { span: self.span, name: Str::from(n), component: None }
    }

    fn imm(&self, v: i128) -> Operand {
        Operand::Int(self.span, v)
    }

    fn addr(&self, base: &str, off: u64) -> Operand {
        Operand::Address(
            self.span,
            Address { base: Some((self.span, Str::from(base))), offset: i64::try_from(off).unwrap_or(i64::MAX) },
        )
    }

    fn at(&self) -> &'static str {
        if self.wide {
            "u64"
        } else {
            "u32"
        }
    }

    fn inst_g(&mut self, guard: Option<(&str, bool)>, opcode: &str, mods: &[&str], ops: Vec<Operand>) {
        self.out.push(Statement::Inst(Instruction {
            span: self.span,
            guard: guard.map(|(n, negated)| Guard { span: self.span, negated, name: Str::from(n) }),
            opcode_span: self.span,
            opcode: Str::from(opcode),
            modifiers: mods.iter().map(|m| Str::from(*m)).collect(),
            operands: ops.into_iter().collect(),
            decoded: None,
        }));
    }

    fn inst(&mut self, opcode: &str, mods: &[&str], ops: Vec<Operand>) {
        self.inst_g(None, opcode, mods, ops);
    }

    fn label(&mut self, l: &str) {
        self.out.push(Statement::Label(self.span, Str::from(l)));
    }

    fn fresh(&mut self, what: &str) -> String {
        self.labels += 1;
        format!("__rc_{what}{}", self.labels)
    }

    fn bra(&mut self, l: &str) {
        let t = self.name(l);
        self.inst("bra", &["uni"], vec![t]);
    }

    /// `d = base + off` in the address type.
    fn add_addr(&mut self, d: &str, base: &str, off: u64) {
        let at = self.at();
        let ops = vec![self.name(d), self.name(base), self.imm(i128::from(off))];
        self.inst("add", &[at], ops);
    }

    /// Copy `size` bytes between two memory locations in chunks.
    fn copy(&mut self, from: (&str, &str, u64), to: (&str, &str, u64), size: u64, align: u64) {
        let w = [8u64, 4, 2, 1].into_iter().find(|w| size.is_multiple_of(*w) && align.is_multiple_of(*w)).unwrap_or(1);
        let (ty, reg) = match w {
            8 => ("b64", T64),
            4 => ("b32", T32),
            2 => ("b16", T16),
            _ => ("b8", T16),
        };
        let mut k = 0;
        while k < size {
            let src = self.addr(from.1, from.2 + k);
            let r = self.name(reg);
            self.inst("ld", &[from.0, ty], vec![r, src]);
            let dst = self.addr(to.1, to.2 + k);
            let r = self.name(reg);
            self.inst("st", &[to.0, ty], vec![dst, r]);
            k += w;
        }
    }

    /// Store register (or immediate) `v` of type `t` at `[base+off]`.
    fn store(&mut self, base: &str, off: u64, v: Operand, t: ScalarType) {
        let dst = self.addr(base, off);
        if t == ScalarType::Pred {
            let t32 = self.name(T32);
            let (one, zero) = (self.imm(1), self.imm(0));
            self.inst("selp", &["u32"], vec![t32, one, zero, v]);
            let t32 = self.name(T32);
            self.inst("st", &["local", "u32"], vec![dst, t32]);
        } else if matches!(v, Operand::Name { .. }) {
            self.inst("st", &["local", bits(t)], vec![dst, v]);
        } else {
            let tmp = match t.size() {
                1 | 2 => T16,
                4 => T32,
                8 => T64,
                _ => T128,
            };
            let mov = match t.size() {
                1 | 2 => "b16",
                4 => "b32",
                8 => "b64",
                _ => "b128",
            };
            let r = self.name(tmp);
            self.inst("mov", &[mov], vec![r, v]);
            let r = self.name(tmp);
            self.inst("st", &["local", bits(t)], vec![dst, r]);
        }
    }

    /// Load register `d` of type `t` from `[base+off]`.
    fn load(&mut self, d: &str, base: &str, off: u64, t: ScalarType) {
        let src = self.addr(base, off);
        if t == ScalarType::Pred {
            let t32 = self.name(T32);
            self.inst("ld", &["local", "u32"], vec![t32, src]);
            let (dd, t32, zero) = (self.name(d), self.name(T32), self.imm(0));
            self.inst("setp", &["ne", "u32"], vec![dd, t32, zero]);
        } else {
            let dd = self.name(d);
            self.inst("ld", &["local", bits(t)], vec![dd, src]);
        }
    }
}

/// Build the machine that runs member `e` of the cycle.
fn machine(members: &[Member], e: usize, wide: bool, stack_bytes: u64) -> Result<Vec<Statement>, Diagnostic> {
    let me = &members[e];
    let mut g = Gen { out: Vec::new(), span: me.span, wide, labels: 0 };
    // Declarations.
    let reg = |ty: ScalarType, names: &[&str], span: Span| VarDecl::registers(span, ty, names);
    let aty = if wide { ScalarType::B64 } else { ScalarType::B32 };
    let mut addr_names = vec![FP, NFP, LIM];
    addr_names.extend(ADDR);
    g.out.push(Statement::Decl(reg(aty, &addr_names, me.span)));
    let mut b32 = vec![SITE, T32];
    if wide {
        b32.extend(ADDR32);
    }
    g.out.push(Statement::Decl(reg(ScalarType::B32, &b32, me.span)));
    g.out.push(Statement::Decl(reg(ScalarType::Pred, &[PRED], me.span)));
    g.out.push(Statement::Decl(reg(ScalarType::B16, &[T16], me.span)));
    g.out.push(Statement::Decl(reg(ScalarType::B64, &[T64], me.span)));
    let uses_128 = members.iter().any(|m| {
        m.live.values().flatten().any(|(_, t)| *t == ScalarType::B128)
            || m.params.iter().chain(&m.returns).any(|s| s.ty == ScalarType::B128)
    });
    if uses_128 {
        g.out.push(Statement::Decl(reg(ScalarType::B128, &[T128], me.span)));
    }
    let mut stack = reg(ScalarType::B8, &[STACK], me.span);
    stack.space = StateSpace::Local;
    stack.align = Some(16);
    stack.names[0].dims = vec![Some(stack_bytes)];
    g.out.push(Statement::Decl(stack));
    let several = members.len() > 1;
    for m in members {
        g.out.extend(m.decls.iter().cloned().map(Statement::Decl));
        // Register parameters and returns live in the body under their
        // renamed names.
        if several {
            for s in m.params.iter().chain(&m.returns).filter(|s| s.space == StateSpace::Reg) {
                g.out.push(Statement::Decl(reg(s.ty, &[s.name.as_str()], m.span)));
            }
        }
    }
    // Prologue: the first frame, at the bottom of the stack.
    let (stk, at) = (g.name(STACK), g.at());
    let fp = g.name(FP);
    g.inst("mov", &[at], vec![fp, stk]);
    g.add_addr(LIM, FP, stack_bytes);
    let (z, site) = (g.imm(0), g.name(SITE));
    g.inst("mov", &["u32"], vec![site, z]);
    let (dst, site) = (g.addr(FP, 8), g.name(SITE));
    g.inst("st", &["local", "u32"], vec![dst, site]);
    for s in &me.params {
        if s.space == StateSpace::Reg {
            let v = g.name(&s.outer);
            g.store(FP, s.offset, v, s.ty);
        } else {
            g.copy(("param", &s.outer, 0), ("local", FP, s.offset), s.size, s.align.min(8));
        }
    }
    g.bra(&entry_label(e));
    // The members' bodies.
    let mut site = 0u32;
    let mut sites: Vec<String> = Vec::new();
    for (i, m) in members.iter().enumerate() {
        g.span = m.span;
        g.label(&entry_label(i));
        for s in m.params.iter().filter(|s| s.space == StateSpace::Reg) {
            g.load(&s.name, FP, s.offset, s.ty);
        }
        for (k, st) in m.body.iter().enumerate() {
            match st {
                Statement::Inst(inst) => {
                    g.span = inst.span;
                    let target = (inst.opcode == "call").then(|| callee_name(inst)).flatten();
                    if let Some(h) = target.and_then(|t| members.iter().position(|x| x.name == t)) {
                        site += 1;
                        let ret = format!("__rc_ret{site}");
                        sites.push(ret.clone());
                        call(
                            &mut g,
                            members,
                            i,
                            h,
                            inst,
                            m.live.get(&k).map_or(&[][..], |v| v.as_slice()),
                            site,
                            &ret,
                        )?;
                    } else if inst.opcode == "ret" {
                        let skip = guard_skip(&mut g, inst);
                        ret_seq(&mut g, m);
                        if let Some(l) = skip {
                            g.label(&l);
                        }
                    } else {
                        rewrite(&mut g, m, inst)?;
                    }
                }
                other => g.out.push(other.clone()),
            }
        }
        g.span = m.span;
        ret_seq(&mut g, m);
    }
    // Dispatch on the popped return site.
    g.label(DISPATCH);
    for (k, l) in sites.iter().enumerate() {
        let (p, s, v) = (g.name(PRED), g.name(SITE), g.imm(k as i128 + 1));
        g.inst("setp", &["eq", "u32"], vec![p, s, v]);
        let t = g.name(l);
        g.inst_g(Some((PRED, false)), "bra", &[], vec![t]);
    }
    for s in &me.returns {
        if s.space == StateSpace::Reg {
            g.load(&s.outer, NFP, s.offset, s.ty);
        } else {
            g.copy(("local", NFP, s.offset), ("param", &s.outer, 0), s.size, s.align.min(8));
        }
    }
    g.inst("ret", &[], vec![]);
    Ok(g.out)
}

fn entry_label(i: usize) -> String {
    format!("__rc_entry{i}")
}

/// For a guarded instruction being expanded: a branch around the expansion
/// (its label is placed after it by the caller).
fn guard_skip(g: &mut Gen, inst: &Instruction) -> Option<String> {
    let guard = inst.guard.as_ref()?;
    let l = g.fresh("skip");
    let t = g.name(&l);
    g.inst_g(Some((guard.name.as_str(), !guard.negated)), "bra", &[], vec![t]);
    Some(l)
}

/// `ret` of member `m`: store register results, pop the frame, dispatch.
fn ret_seq(g: &mut Gen, m: &Member) {
    for s in m.returns.iter().filter(|s| s.space == StateSpace::Reg) {
        let v = g.name(&s.name);
        g.store(FP, s.offset, v, s.ty);
    }
    let at = g.at();
    let (n, f) = (g.name(NFP), g.name(FP));
    g.inst("mov", &[at], vec![n, f]);
    let (f, src) = (g.name(FP), g.addr(NFP, 0));
    g.inst("ld", &["local", at], vec![f, src]);
    let (s, src) = (g.name(SITE), g.addr(NFP, 8));
    g.inst("ld", &["local", "u32"], vec![s, src]);
    g.bra(DISPATCH);
}

/// A call from member `i` to member `h` at return site `site`.
#[allow(clippy::too_many_arguments)]
fn call(
    g: &mut Gen,
    members: &[Member],
    i: usize,
    h: usize,
    inst: &Instruction,
    live: &[(String, ScalarType)],
    site: u32,
    ret: &str,
) -> Result<(), Diagnostic> {
    let (m, callee) = (&members[i], &members[h]);
    let (rets, _, args) = inst.call_operands();
    if args.len() != callee.params.len() || rets.len() != callee.returns.len() {
        return Err(Diagnostic::error(
            inst.span,
            format!(
                "call to '{}' with {} arguments and {} results; it has {} and {}",
                callee.name,
                args.len(),
                rets.len(),
                callee.params.len(),
                callee.returns.len()
            ),
        ));
    }
    let skip = guard_skip(g, inst);
    // Save the live registers in the caller's frame.
    let mut off = m.save_offset;
    for (r, t) in live {
        let v = g.name(r);
        g.store(FP, off, v, *t);
        off += save_size(*t);
    }
    // Push the callee's frame.
    g.add_addr(NFP, FP, m.frame_size);
    g.add_addr(ADDR[0], NFP, callee.frame_size);
    let at = g.at();
    let (p, a, l) = (g.name(PRED), g.name(ADDR[0]), g.name(LIM));
    g.inst("setp", &["gt", at], vec![p, a, l]);
    g.inst_g(Some((PRED, false)), "trap", &[], vec![]);
    let (dst, f) = (g.addr(NFP, 0), g.name(FP));
    g.inst("st", &["local", at], vec![dst, f]);
    let (s, v) = (g.name(SITE), g.imm(i128::from(site)));
    g.inst("mov", &["u32"], vec![s, v]);
    let (dst, s) = (g.addr(NFP, 8), g.name(SITE));
    g.inst("st", &["local", "u32"], vec![dst, s]);
    // A call-site `.param` variable of the caller: (name, size, align).
    let call_param = |o: &Operand| match o {
        Operand::Name { name, .. } => m.call_params.get(name.as_str()).map(|&(s, a)| (name.to_string(), s, a)),
        _ => None,
    };
    for (a, slot) in args.iter().zip(&callee.params) {
        match call_param(a) {
            Some((name, size, align)) => g.copy(
                ("param", &name, 0),
                ("local", NFP, slot.offset),
                size.min(slot.size),
                align.min(slot.align).min(8),
            ),
            None => g.store(NFP, slot.offset, a.clone(), slot.ty),
        }
    }
    let (f, n) = (g.name(FP), g.name(NFP));
    g.inst("mov", &[at], vec![f, n]);
    g.bra(&entry_label(h));
    // The return site: FP is the caller's frame again, NFP the callee's.
    g.label(ret);
    for (r, slot) in rets.iter().zip(&callee.returns) {
        match (call_param(r), r) {
            (Some((name, size, align)), _) => g.copy(
                ("local", NFP, slot.offset),
                ("param", &name, 0),
                size.min(slot.size),
                align.min(slot.align).min(8),
            ),
            (None, Operand::Name { name, .. }) => g.load(name, NFP, slot.offset, slot.ty),
            (None, Operand::Sink(_)) => {}
            (None, other) => return Err(Diagnostic::error(other.span(), "recursion: unexpected call result operand")),
        }
    }
    let mut off = m.save_offset;
    for (r, t) in live {
        g.load(r, FP, off, *t);
        off += save_size(*t);
    }
    if let Some(l) = skip {
        g.label(&l);
    }
    Ok(())
}

/// An instruction of member `m` with its frame variables made
/// frame-relative.
fn rewrite(g: &mut Gen, m: &Member, inst: &Instruction) -> Result<(), Diagnostic> {
    let mut inst = inst.clone();
    inst.decoded = None;
    let mut touched_param = false;
    let mut temps = 0usize;
    let narrow = g.wide && inst.modifiers.iter().any(|x| matches!(x.as_str(), "u32" | "s32" | "b32"));
    let mut pre: Vec<(usize, u64)> = Vec::new();
    for o in inst.operands.iter_mut() {
        match o {
            Operand::Address(_, a) => {
                if let Some((_, b)) = &mut a.base {
                    if let Some(&off) = m.frame.get(b.as_str()) {
                        *b = Str::from(FP);
                        a.offset = a.offset.saturating_add(i64::try_from(off).unwrap_or(i64::MAX));
                        touched_param = true;
                    }
                }
            }
            Operand::Name { .. } | Operand::SymbolOffset(..) => {
                let hit = match &*o {
                    Operand::Name { name, span, .. } => m.frame.get(name.as_str()).map(|&b| (b, 0, *span)),
                    Operand::SymbolOffset(span, name, k) => m.frame.get(name.as_str()).map(|&b| (b, *k, *span)),
                    _ => None,
                };
                let Some((base, extra, span)) = hit else { continue };
                if temps >= ADDR.len() {
                    return Err(Diagnostic::error(span, "recursion: too many frame addresses in one instruction"));
                }
                pre.push((temps, base.wrapping_add_signed(extra)));
                let n = if narrow { ADDR32[temps] } else { ADDR[temps] };
                *o = Operand::Name { span, name: Str::from(n), component: None };
                temps += 1;
            }
            _ => {}
        }
    }
    for (k, off) in pre {
        g.add_addr(ADDR[k], FP, off);
        if narrow {
            let (d, s) = (g.name(ADDR32[k]), g.name(ADDR[k]));
            g.inst("cvt", &["u32", "u64"], vec![d, s]);
        }
    }
    if touched_param {
        for x in inst.modifiers.iter_mut() {
            if x == "param" {
                *x = Str::from("local");
            }
        }
    }
    g.out.push(Statement::Inst(inst));
    Ok(())
}
