//! Workgroup-uniform ("SIMT") emission of functions that contain
//! collective instructions.
//!
//! # Why
//! Vulkan requires `OpControlBarrier` to be reached in workgroup-uniform
//! control flow, and the emulated warp path (see [`super::warp`]) needs a
//! barrier inside every warp operation. CUDA code runs both in divergent code
//! all the time: `if (warp == 0) reduce(...)`, `if (i >= n) return;` before
//! `__syncthreads()`, a ballot inside an `if`. On lavapipe a barrier in
//! divergent code even appears to work, but it releases whatever other
//! subgroups wait at *any* barrier, so results depend on timing (see
//! `shared/DESIGN.md`, "Warps on devices whose subgroup is not 32").
//!
//! # What
//! A function that (directly or through a call) contains a *collective*
//! instruction ([`is_collective`]: block barriers on every warp path; warp
//! operations and lock-step points ([`super::lockstep`]) on the emulated
//! path; calls of uniform functions) is emitted
//! with workgroup-uniform control flow, and thread activity becomes data —
//! whole-function if-conversion on the structured regions of
//! [`crate::structurize`], in the spirit of Karrenberg and Hack's
//! whole-function vectorization.
//!
//! Every invocation has a state word `st`:
//! - `0`: active;
//! - the code of a branch target ([`super::func::target_code`], shared with
//!   the `brk` variable of ordinary emission): the invocation took a branch
//!   to that target and waits for the construct that owns it;
//! - a park code (`PARK_BASE + k`): it waits for the other arm of an `if`;
//! - [`RETURNED`]: it returned (or exited, or is a padding invocation).
//!
//! Regions, all emitted in control flow that every invocation follows:
//! - a run of regions without collectives is an *escape region*: ordinary
//!   emission (loops, selections, `brk` re-dispatch) under `if (st == 0)`;
//!   a branch to a target outside it stores the target's code in `st` and
//!   leaves (see [`super::func::escape_region`]);
//! - `Code` with collectives: runs of ordinary instructions under
//!   `if (st == 0)`; each collective instruction is executed by every
//!   invocation, with `st == 0 && guard` as its activity;
//! - `Block`: the body, then invocations waiting for its exit become active;
//! - `If`: active invocations whose condition fails park; the `then` arm
//!   runs; they unpark; the `else` arm runs (each arm ends in a transfer, so
//!   nobody is active after the `If`);
//! - `Loop`: `while (any invocation of the workgroup is active) { body;
//!   invocations that continue become active }` — a workgroup vote
//!   ([`super::barrier::workgroup_count`]) costs one barrier per iteration;
//! - `Br`/`Return` set `st` for the active invocations.
//!
//! A kernel's padding invocations start as [`RETURNED`] instead of returning,
//! so that they take part in every barrier; this also gives CUDA's meaning to
//! `__syncthreads()` after threads have exited. A uniform `.func` is called
//! by every invocation with the caller's activity as an extra `bool`
//! argument; it keeps its own state, so the caller's is untouched, and the
//! caller stores the results only where it is active.
//!
//! `exit` in a `.func` sets the entry's exited flag (see `cfg::EXITED`); after
//! a call the caller parks invocations whose flag is set, so runs of
//! ordinary instructions end after every call.
//!
//! Loop regions come from [`crate::structurize::LoopExits::Outside`]: code
//! after a loop is outside its region, so invocations that leave a loop early
//! wait at its end for the others before they reach a barrier that follows.
//!
//! # Limits
//! Named barriers and thread counts are not distinguished: every `bar.sync`,
//! `bar.arrive` and `bar.red` is a barrier of the whole workgroup (see
//! [`super::barrier`]). A barrier that CUDA threads reach at different
//! program points (for example producer/consumer warps synchronising with
//! `bar.arrive`/`bar.sync` pairs in different branches) is executed once per
//! program point, which orders memory differently than CUDA does.

use super::func::{self, internal1, Fx, Plan, UniformFx};
use super::lockstep::inst_key;
use super::values::pred;
use super::{Emitter, TyKey};
use crate::ast::{Instruction, Operand};
use crate::cfg::Cfg;
use crate::diag::{Diagnostic, Span};
use crate::fxhash::FxHashSet;
use crate::structurize::{Region, Target};
use crate::WarpPath;
use rspirv::spirv::{self, Op, Word};
use std::collections::{BTreeSet, HashMap};

/// State of an invocation that has returned or exited.
pub(crate) const RETURNED: u32 = 0xFFFF_FFFF;
/// First park code of `if` arms.
const PARK_BASE: u32 = 0x8000_0000;

/// Whether `inst` is a warp operation (vote, shuffle, match, reduction,
/// `activemask`, `elect`, `bar.warp.sync`).
pub(crate) fn is_warp_op(inst: &Instruction) -> bool {
    match inst.opcode.as_str() {
        "shfl" | "vote" | "match" | "redux" | "activemask" | "elect" => true,
        "mma" | "ldmatrix" | "stmatrix" | "movmatrix" => true,
        "wmma" => inst.has("mma"),
        // With A in registers it exchanges them within each warp; with .sp
        // the metadata.
        "wgmma" => {
            inst.has("mma_async") && (inst.has("sp") || matches!(inst.operands.get(1), Some(Operand::Vector(..))))
        }
        "bar" => inst.has("warp"),
        _ => false,
    }
}

/// Whether `inst` must be executed by every invocation of the workgroup
/// (in workgroup-uniform control flow) on `path`. `uniform` names the
/// functions that run in uniform mode.
pub(crate) fn is_collective(
    inst: &Instruction,
    path: WarpPath,
    uniform: &BTreeSet<String>,
    lockstep: &FxHashSet<usize>,
) -> bool {
    match inst.opcode.as_str() {
        "bar" | "barrier" if !inst.has("warp") => true,
        _ if is_warp_op(inst) => path == WarpPath::Emulated,
        "ld" | "st" if lockstep.contains(&inst_key(inst)) => path == WarpPath::Emulated,
        "call" => inst.direct_callee().is_some_and(|n| uniform.contains(n) || n == super::grid::SYNCHRONIZE),
        _ => false,
    }
}

/// The functions that run in uniform mode: those with a collective
/// instruction, those named in `seeds` (functions whose spin loops yield,
/// see `progress.rs`), and their callers.
pub(crate) fn functions(
    plans: &HashMap<String, Plan>,
    path: WarpPath,
    lockstep: &FxHashSet<usize>,
    seeds: &BTreeSet<String>,
) -> BTreeSet<String> {
    let none = BTreeSet::new();
    let mut set: BTreeSet<String> = plans
        .iter()
        .filter(|(n, p)| seeds.contains(*n) || p.instructions().any(|i| is_collective(i, path, &none, lockstep)))
        .map(|(n, _)| n.clone())
        .collect();
    loop {
        let more: Vec<String> = plans
            .iter()
            .filter(|(n, p)| !set.contains(*n) && p.callees.iter().any(|c| set.contains(&c.target)))
            .map(|(n, _)| n.clone())
            .collect();
        if more.is_empty() {
            return set;
        }
        set.extend(more);
    }
}

/// Words of the vote slots at the start of the scratch array (see
/// [`super::barrier::Rotation`]).
pub(crate) const VOTE_WORDS: u32 = super::barrier::Rotation::SLOTS;

/// Whether a uniform function takes workgroup votes: a loop with
/// collectives (the loop condition), or `bar.red`.
fn needs_votes(e: &Emitter, plan: &Plan) -> bool {
    fn has_loop(e: &Emitter, cfg: &Cfg, rs: &[Region]) -> bool {
        rs.iter().any(|r| match r {
            Region::Loop { .. } => region_is_collective(e, cfg, r),
            Region::Block { body, .. } => has_loop(e, cfg, body),
            Region::If { then_body, else_body, .. } => has_loop(e, cfg, then_body) || has_loop(e, cfg, else_body),
            _ => false,
        })
    }
    plan.instructions().any(|i| matches!(i.opcode.as_str(), "bar" | "barrier") && i.has("red"))
        || has_loop(e, &plan.cfg, &plan.uniform_regions)
}

/// Scratch words (per invocation, fixed) an entry needs, when it runs in
/// uniform mode: exchange buffers when a warp operation in its call tree is
/// emulated; the vote slots when a function of the tree takes votes (or
/// exchanges, which come after them). `plans` is the entry's call tree.
/// Kernels whose barriers are all in straight-line code and conditionals
/// need none. An entry that needs any gets the module's size
/// ([`module_scratch_words`]): all entries share one scratch array.
pub(crate) fn scratch_words(e: &mut Emitter, plans: &[&Plan], entry: &Plan) -> (u32, u32) {
    if !e.uniform_fns.contains(&entry.func.name) {
        return (0, 0);
    }
    let uniform: Vec<&Plan> = plans.iter().copied().filter(|p| e.uniform_fns.contains(&p.func.name)).collect();
    let (per, fixed) = tree_scratch_words(e, &uniform);
    if per + fixed == 0 {
        (0, 0)
    } else {
        e.module_scratch
    }
}

/// (per invocation, fixed) scratch words of the uniform functions `uniform`:
/// two exchange buffers of [`Emitter::exchange_words`] words per invocation
/// and the ballot slots ([`super::warp::BALLOT_WORDS`]) when one of them has
/// an emulated warp operation, the vote slots when one takes votes or
/// exchanges.
fn tree_scratch_words(e: &Emitter, uniform: &[&Plan]) -> (u32, u32) {
    let exchange = e.opts.warp_path == WarpPath::Emulated && uniform.iter().any(|p| p.instructions().any(is_warp_op));
    let votes = uniform.iter().any(|p| needs_votes(e, p));
    let fixed = match (exchange, votes) {
        (true, _) => VOTE_WORDS + super::warp::BALLOT_WORDS,
        (false, true) => VOTE_WORDS,
        (false, false) => 0,
    };
    (if exchange { 2 * e.exchange_words } else { 0 }, fixed)
}

/// The scratch size of the module: enough for every entry. One Workgroup
/// array serves all entries (the validation layer adds up every Workgroup
/// variable of a module against the device limit).
pub(crate) fn module_scratch_words(e: &Emitter, plans: &HashMap<String, Plan>) -> (u32, u32) {
    let uniform: Vec<&Plan> = plans.values().filter(|p| e.uniform_fns.contains(&p.func.name)).collect();
    tree_scratch_words(e, &uniform)
}

/// The scratch array of an entry: `wg_size * per_invocation + fixed` words.
pub(crate) fn scratch_variable(e: &mut Emitter, per_invocation: u32, fixed: u32) -> Word {
    let u32t = e.t_int(32);
    let fixed_c = e.c_u32(fixed);
    let len = if per_invocation == 0 {
        fixed_c
    } else {
        let per = e.c_u32(per_invocation);
        let wg = e.spec_wg_x;
        let m = spec_op(e, Op::IMul, wg, per);
        spec_op(e, Op::IAdd, m, fixed_c)
    };
    let arr = e.ty(TyKey::Array(u32t, len));
    let pt = e.t_ptr(spirv::StorageClass::Workgroup, arr);
    e.b.variable(pt, None, spirv::StorageClass::Workgroup, None)
}

/// `OpSpecConstantOp` on two 32-bit integer operands (module scope).
fn spec_op(e: &mut Emitter, op: Op, a: Word, b: Word) -> Word {
    let u32t = e.t_int(32);
    e.b.spec_constant_op(u32t, op, &[a, b])
}

/// Initialise the state: for an entry, padding invocations start as
/// [`RETURNED`] (and the vote slots are cleared); for a `.func`, the caller's
/// activity decides.
pub(crate) fn prologue(
    e: &mut Emitter,
    fx: &Fx,
    u: UniformFx,
    is_entry: bool,
    active_in: Option<Word>,
) -> Result<(), Diagnostic> {
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let zero = e.c_u32(0);
    let ret = e.c_u32(RETURNED);
    let parked = if is_entry {
        e.padding_invocation(fx.linear)?
    } else {
        let Some(a) = active_in else {
            return Err(Diagnostic::error(Span::default(), "internal error: uniform function without activity"));
        };
        e.b.logical_not(bt, None, a).map_err(internal1)?
    };
    let v = e.b.select(u32t, None, parked, ret, zero).map_err(internal1)?;
    e.b.store(u.st, v, None, []).map_err(internal1)?;
    if is_entry && fx.scratch_var.is_some() {
        super::warp::init_ballots(e, fx)?;
        super::barrier::init_votes(e, fx)?;
    }
    Ok(())
}

/// Emit the body of a uniform function.
pub(crate) fn emit_body(e: &mut Emitter, fx: &mut Fx, regions: &[Region]) -> Result<(), Diagnostic> {
    seq(e, fx, regions)
}

fn state(fx: &Fx) -> Result<Word, Diagnostic> {
    fx.uniform.map(|u| u.st).ok_or_else(|| Diagnostic::error(Span::default(), "internal error: no uniform state"))
}

/// `st == 0` for the current invocation.
pub(crate) fn is_active(e: &mut Emitter, fx: &Fx) -> Result<Word, Diagnostic> {
    let st = state(fx)?;
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let v = e.b.load(u32t, None, st, None, []).map_err(internal1)?;
    let zero = e.c_u32(0);
    e.b.i_equal(bt, None, v, zero).map_err(internal1)
}

/// `st = (st == from) ? to : st`.
fn transition(e: &mut Emitter, fx: &Fx, from: u32, to: u32) -> Result<(), Diagnostic> {
    let st = state(fx)?;
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let v = e.b.load(u32t, None, st, None, []).map_err(internal1)?;
    let f = e.c_u32(from);
    let t = e.c_u32(to);
    let hit = e.b.i_equal(bt, None, v, f).map_err(internal1)?;
    let n = e.b.select(u32t, None, hit, t, v).map_err(internal1)?;
    e.b.store(st, n, None, []).map_err(internal1)
}

fn region_is_collective(e: &Emitter, cfg: &Cfg, r: &Region) -> bool {
    match r {
        Region::Code(b) => {
            cfg.blocks[*b].insts.iter().any(|i| is_collective(i, e.opts.warp_path, &e.uniform_fns, &e.lockstep))
        }
        Region::Block { body, .. } | Region::Loop { body, .. } => body.iter().any(|r| region_is_collective(e, cfg, r)),
        Region::If { then_body, else_body, .. } => {
            then_body.iter().chain(else_body).any(|r| region_is_collective(e, cfg, r))
        }
        Region::Br(_) | Region::Return => false,
    }
}

fn seq(e: &mut Emitter, fx: &mut Fx, regions: &[Region]) -> Result<(), Diagnostic> {
    let mut i = 0;
    while i < regions.len() {
        if region_is_collective(e, fx.cfg, &regions[i]) {
            region(e, fx, &regions[i])?;
            i += 1;
            continue;
        }
        let start = i;
        while i < regions.len() && !region_is_collective(e, fx.cfg, &regions[i]) {
            i += 1;
        }
        match &regions[start..i] {
            [Region::Br(t)] => {
                let c = func::target_code(fx, *t);
                transition(e, fx, 0, c)?;
            }
            [Region::Return] => transition(e, fx, 0, RETURNED)?,
            run => escape(e, fx, run)?,
        }
    }
    Ok(())
}

/// `if (st == 0) { ordinary emission of run }`.
fn escape(e: &mut Emitter, fx: &mut Fx, run: &[Region]) -> Result<(), Diagnostic> {
    let act = is_active(e, fx)?;
    let yes = e.b.id();
    let merge = e.b.id();
    e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(act, yes, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(yes)).map_err(internal1)?;
    fx.open = true;
    func::escape_region(e, fx, run)?;
    if fx.open {
        e.b.branch(merge).map_err(internal1)?;
    }
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    fx.open = true;
    Ok(())
}

fn region(e: &mut Emitter, fx: &mut Fx, r: &Region) -> Result<(), Diagnostic> {
    match r {
        Region::Code(b) => code(e, fx, *b),
        Region::Block { follower, body } => {
            seq(e, fx, body)?;
            let c = func::target_code(fx, Target::Exit(*follower));
            transition(e, fx, c, 0)
        }
        Region::Loop { header, body } => {
            let head = e.b.id();
            let start = e.b.id();
            let cont = e.b.id();
            let merge = e.b.id();
            super::loop_limit::enter(e)?;
            e.b.branch(head).map_err(internal1)?;
            e.b.begin_block(Some(head)).map_err(internal1)?;
            let act = is_active(e, fx)?;
            let any = super::barrier::workgroup_any(e, fx, act)?;
            super::loop_limit::loop_merge(e, merge, cont)?;
            e.b.branch_conditional(any, start, merge, []).map_err(internal1)?;
            e.b.begin_block(Some(start)).map_err(internal1)?;
            seq(e, fx, body)?;
            let c = func::target_code(fx, Target::Continue(*header));
            transition(e, fx, c, 0)?;
            e.b.branch(cont).map_err(internal1)?;
            e.b.begin_block(Some(cont)).map_err(internal1)?;
            super::loop_limit::check(e, None)?;
            e.b.branch(head).map_err(internal1)?;
            e.b.begin_block(Some(merge)).map_err(internal1)?;
            super::loop_limit::merged(e)?;
            Ok(())
        }
        Region::If { block, then_body, else_body } => {
            let c = func::branch_condition(e, fx, *block)?;
            let Some(u) = fx.uniform.as_mut() else {
                return Err(Diagnostic::error(Span::default(), "internal error: no uniform state"));
            };
            let park = PARK_BASE + u.parks;
            u.parks += 1;
            let st = u.st;
            // Active invocations that do not take the `then` arm park.
            let u32t = e.t_int(32);
            let bt = e.t_bool();
            let v = e.b.load(u32t, None, st, None, []).map_err(internal1)?;
            let zero = e.c_u32(0);
            let act = e.b.i_equal(bt, None, v, zero).map_err(internal1)?;
            let not_c = e.b.logical_not(bt, None, c).map_err(internal1)?;
            let parks = e.b.logical_and(bt, None, act, not_c).map_err(internal1)?;
            let pc = e.c_u32(park);
            let n = e.b.select(u32t, None, parks, pc, v).map_err(internal1)?;
            e.b.store(st, n, None, []).map_err(internal1)?;
            seq(e, fx, then_body)?;
            transition(e, fx, park, 0)?;
            seq(e, fx, else_body)
        }
        Region::Br(t) => {
            let c = func::target_code(fx, *t);
            transition(e, fx, 0, c)
        }
        Region::Return => transition(e, fx, 0, RETURNED),
    }
}

/// A basic block with collective instructions. Runs of ordinary
/// instructions end at collectives and after calls (a callee that runs
/// `exit` parks the invocation, and the next run must see it).
fn code(e: &mut Emitter, fx: &mut Fx, b: usize) -> Result<(), Diagnostic> {
    let insts = fx.cfg.blocks[b].insts.clone();
    let mut run: Vec<&Instruction> = Vec::new();
    let mut assign = fx.cfg.blocks[b].assign.is_some();
    for inst in insts {
        if is_collective(inst, e.opts.warp_path, &e.uniform_fns, &e.lockstep) {
            ordinary(e, fx, b, &run, std::mem::take(&mut assign))?;
            run.clear();
            if let Err(mut d) = collective(e, fx, inst) {
                if d.span == Span::default() {
                    d.span = inst.span;
                }
                fx.errors.push(d);
            }
        } else {
            run.push(inst);
            if inst.opcode == "call" {
                ordinary(e, fx, b, &run, std::mem::take(&mut assign))?;
                run.clear();
            }
        }
    }
    ordinary(e, fx, b, &run, assign)
}

/// Ordinary instructions (after block `b`'s assignment when `assign`), for
/// the active invocations.
fn ordinary(e: &mut Emitter, fx: &mut Fx, b: usize, run: &[&Instruction], assign: bool) -> Result<(), Diagnostic> {
    if run.is_empty() && !assign {
        return Ok(());
    }
    let act = is_active(e, fx)?;
    let yes = e.b.id();
    let merge = e.b.id();
    e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(act, yes, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(yes)).map_err(internal1)?;
    if assign {
        func::block_assign(e, fx, b)?;
    }
    for inst in run {
        if let Err(d) = super::inst::emit(e, fx, inst) {
            fx.errors.push(d);
        }
    }
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    Ok(())
}

/// A collective instruction, executed by every invocation.
fn collective(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let mut active = is_active(e, fx)?;
    if let Some(g) = &inst.guard {
        let c = pred(e, fx, &g.name, g.negated, g.span)?;
        let bt = e.t_bool();
        active = e.b.logical_and(bt, None, active, c).map_err(internal1)?;
    }
    match inst.opcode.as_str() {
        "call" => super::call::call(e, fx, inst, Some(active)),
        "bar" | "barrier" if !inst.has("warp") => super::barrier::emit(e, fx, inst, active),
        "ld" | "st" if e.lockstep.contains(&inst_key(inst)) => {
            // A lock-step point: every lane's earlier accesses happen first.
            super::barrier::workgroup_barrier(e)?;
            super::grid::if_then(e, active, |e| super::inst::emit(e, fx, inst))
        }
        _ => super::warp::emit(e, fx, inst, active),
    }
}
