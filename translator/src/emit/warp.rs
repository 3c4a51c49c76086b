//! Warp operations: 32-lane warps on every subgroup size.
//!
//! A warp is 32 consecutive threads of the linear thread index, whatever the
//! device's subgroup size (see `shared/DESIGN.md`, "Launch geometry"). Every
//! warp instruction is built from three primitives, implemented once per
//! [`WarpPath`]:
//!
//! | primitive | native (subgroup = 32) | slice (subgroup = 32·k) | emulated (any subgroup) |
//! |---|---|---|---|
//! | linear thread index | `SubgroupId·32 + SubgroupLocalInvocationId` | `SubgroupId·SubgroupSize + SubgroupLocalInvocationId` | `LocalInvocationIndex` |
//! | [`share`] a value, [`read`] lane `i`'s | `OpGroupNonUniformShuffle` to lane `i` | shuffle to `slice base + i` | store to scratch, workgroup barrier, load |
//! | [`ballot`] | `OpGroupNonUniformBallot` | its 32 bits of the slice | each lane's bit XORed into its warp's scratch word, workgroup barrier, load, XOR with the word's previous value ([`Rotation`]) |
//!
//! On the native and slice paths the linear index comes from the subgroup
//! built-ins, so a warp is a subgroup (slice) even where the driver orders
//! invocations differently; the runtime requests full subgroups.
//!
//! On the emulated path the warp instructions are collective (see
//! [`super::uniform::is_collective`]): the function runs in
//! workgroup-uniform mode, every invocation executes every warp instruction,
//! and `active` (the invocation's state is active and its guard holds) says
//! which lanes take part. An exchange uses one of two buffers of
//! [`Emitter::exchange_words`] words per invocation in the scratch array
//! (after the vote slots; word `j` of every invocation together), alternating
//! by a private counter that is the same in every invocation, so one barrier
//! per exchange suffices: buffer `k % 2` is rewritten by exchange `k + 2`,
//! after every invocation passed exchange `k + 1`'s barrier and so finished
//! reading exchange `k` (an instruction that reads two exchanges at once,
//! `match.b64`, adds a barrier after its reads). Instructions that look at all 32 lanes (votes,
//! `match`, `redux`) read the 32 shared values in straight-line code.
//!
//! Semantics follow the PTX ISA: `shfl` computes its source lane and
//! predicate from the `c` operand's clamp and segment mask; a lane that reads
//! from an inactive lane gets that lane's stale register value (CUDA leaves
//! it undefined); votes, `match`, `redux` and `elect` consider the lanes that
//! are active and in `membermask`; `activemask` is the ballot of active lanes
//! (in uniform mode, exactly the lanes that took the same branches).

use super::barrier::Rotation;
use super::func::{internal1, Fx};
use super::inst::glsl;
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, Operand, ScalarType};
use crate::diag::{Diagnostic, Span};
use crate::WarpPath;
use rspirv::dr::Operand as SOp;
use rspirv::spirv::{self, Capability, Scope, StorageClass, Word};

/// Module-scope variables of warp and uniform-mode emission (created before
/// any function, since a variable created inside one lands in it).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Globals {
    /// The workgroup votes' slots (see [`super::barrier`]).
    pub votes: Option<Rotation>,
    /// `Private` u32: warp exchanges so far (selects the exchange buffer).
    pub exchanges: Option<Word>,
    /// The slots of the emulated ballots' first words.
    pub ballots: Option<Rotation>,
    /// The slots of the emulated two-condition ballots' second words.
    pub ballots2: Option<Rotation>,
    /// `SubgroupId` input (native and slice paths).
    pub subgroup_id: Option<Word>,
    /// `SubgroupLocalInvocationId` input (native and slice paths).
    pub subgroup_local_id: Option<Word>,
    /// `SubgroupSize` input (slice path).
    pub subgroup_size: Option<Word>,
}

impl Globals {
    /// Create what the module needs: counters when some function runs in
    /// uniform mode, subgroup built-ins on the native and slice paths.
    pub fn new(e: &mut Emitter, uniform: bool) -> Globals {
        let mut g = Globals::default();
        let u32t = e.t_int(32);
        let path = e.opts.warp_path;
        if uniform {
            let pp = e.t_ptr(StorageClass::Private, u32t);
            let zero = e.c_u32(0);
            g.votes = Some(Rotation::new(e));
            if path == WarpPath::Emulated {
                g.exchanges = Some(e.b.variable(pp, None, StorageClass::Private, Some(zero)));
                g.ballots = Some(Rotation::new(e));
                g.ballots2 = Some(Rotation::new(e));
            }
        }
        if path != WarpPath::Emulated {
            e.cap(Capability::GroupNonUniform);
            let pi = e.t_ptr(StorageClass::Input, u32t);
            let builtin = |e: &mut Emitter, b: spirv::BuiltIn| {
                let v = e.b.variable(pi, None, StorageClass::Input, None);
                e.b.decorate(v, spirv::Decoration::BuiltIn, [SOp::BuiltIn(b)]);
                v
            };
            g.subgroup_id = Some(builtin(e, spirv::BuiltIn::SubgroupId));
            g.subgroup_local_id = Some(builtin(e, spirv::BuiltIn::SubgroupLocalInvocationId));
            if path == WarpPath::Slice {
                g.subgroup_size = Some(builtin(e, spirv::BuiltIn::SubgroupSize));
            }
        }
        g
    }

    /// The variables, for entry point interfaces.
    pub fn interface(&self) -> Vec<Word> {
        let rotations = [self.votes, self.ballots, self.ballots2].into_iter().flatten().flat_map(|r| r.interface());
        [self.exchanges, self.subgroup_id, self.subgroup_local_id, self.subgroup_size]
            .into_iter()
            .flatten()
            .chain(rotations)
            .collect()
    }
}

fn missing(what: &str) -> Diagnostic {
    Diagnostic::error(Span::default(), format!("internal error: {what} missing"))
}

fn load_input(e: &mut Emitter, v: Option<Word>, what: &str) -> Result<Word, Diagnostic> {
    let v = v.ok_or_else(|| missing(what))?;
    let u32t = e.t_int(32);
    e.b.load(u32t, None, v, None, []).map_err(internal1)
}

/// The linear thread index of the current invocation (see the module docs).
pub(crate) fn linear_index(e: &mut Emitter) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    match e.opts.warp_path {
        WarpPath::Emulated => e.b.load(u32t, None, e.local_index, None, []).map_err(internal1),
        path => {
            let id = load_input(e, e.warp.subgroup_id, "SubgroupId")?;
            let local = load_input(e, e.warp.subgroup_local_id, "SubgroupLocalInvocationId")?;
            let size = if path == WarpPath::Native {
                e.c_u32(32)
            } else {
                load_input(e, e.warp.subgroup_size, "SubgroupSize")?
            };
            let base = e.b.i_mul(u32t, None, id, size).map_err(internal1)?;
            e.b.i_add(u32t, None, base, local).map_err(internal1)
        }
    }
}

/// The lane of the current invocation (`%laneid`).
fn lane(e: &mut Emitter, fx: &Fx) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let m = e.c_u32(31);
    e.b.bitwise_and(u32t, None, fx.linear, m).map_err(internal1)
}

/// Values of one 32-bit register shared across a warp (see [`share`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Lanes {
    /// In scratch memory: the index of lane 0's word.
    Scratch(Word),
    /// In a subgroup: the value and the subgroup lane of the warp's lane 0.
    Subgroup { value: Word, base: Word },
}

fn subgroup_scope(e: &mut Emitter) -> Word {
    e.c_u32(Scope::Subgroup as u32)
}

/// Make every lane's `value` (u32) readable by the lanes of its warp. On the
/// emulated path every invocation of the workgroup must execute it.
pub(crate) fn share(e: &mut Emitter, fx: &Fx, value: Word) -> Result<Lanes, Diagnostic> {
    Ok(share_many(e, fx, &[value])?[0])
}

/// [`share`] several values at once: on the emulated path one exchange (one
/// barrier) for all of them, buffer word `j` holding value `j` (at most
/// [`Emitter::exchange_words`] values).
pub(crate) fn share_many(e: &mut Emitter, fx: &Fx, values: &[Word]) -> Result<Vec<Lanes>, Diagnostic> {
    let u32t = e.t_int(32);
    match e.opts.warp_path {
        WarpPath::Emulated => {
            if values.len() as u32 > e.exchange_words {
                return Err(missing("exchange words for this warp instruction"));
            }
            let counter = e.warp.exchanges.ok_or_else(|| missing("exchange counter"))?;
            let k = e.b.load(u32t, None, counter, None, []).map_err(internal1)?;
            let one = e.c_u32(1);
            let k1 = e.b.i_add(u32t, None, k, one).map_err(internal1)?;
            e.b.store(counter, k1, None, []).map_err(internal1)?;
            let bit = e.b.bitwise_and(u32t, None, k, one).map_err(internal1)?;
            let words = e.c_u32(e.exchange_words);
            let size = e.b.i_mul(u32t, None, words, e.spec_wg_x).map_err(internal1)?;
            let buf = e.b.i_mul(u32t, None, bit, size).map_err(internal1)?;
            let votes = e.c_u32(super::uniform::VOTE_WORDS);
            let off = e.b.i_add(u32t, None, buf, votes).map_err(internal1)?;
            let not31 = e.c_u32(!31);
            let warp = e.b.bitwise_and(u32t, None, fx.linear, not31).map_err(internal1)?;
            let mut bases = Vec::new();
            for (j, &value) in values.iter().enumerate() {
                let jc = e.c_u32(j as u32);
                let col = e.b.i_mul(u32t, None, jc, e.spec_wg_x).map_err(internal1)?;
                let start = e.b.i_add(u32t, None, off, col).map_err(internal1)?;
                let mine = e.b.i_add(u32t, None, start, fx.linear).map_err(internal1)?;
                let p = super::barrier::scratch_ptr(e, fx, mine)?;
                e.b.store(p, value, None, []).map_err(internal1)?;
                bases.push(e.b.i_add(u32t, None, start, warp).map_err(internal1)?);
            }
            super::barrier::scratch_barrier(e)?;
            Ok(bases.into_iter().map(Lanes::Scratch).collect())
        }
        WarpPath::Native => Ok(values.iter().map(|&value| Lanes::Subgroup { value, base: e.c_u32(0) }).collect()),
        WarpPath::Slice => {
            let local = load_input(e, e.warp.subgroup_local_id, "SubgroupLocalInvocationId")?;
            let not31 = e.c_u32(!31);
            let base = e.b.bitwise_and(u32t, None, local, not31).map_err(internal1)?;
            Ok(values.iter().map(|&value| Lanes::Subgroup { value, base }).collect())
        }
    }
}

/// Lane `i`'s shared value (`i` in 0..32).
pub(crate) fn read(e: &mut Emitter, fx: &Fx, lanes: Lanes, i: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    match lanes {
        Lanes::Scratch(base) => {
            let idx = e.b.i_add(u32t, None, base, i).map_err(internal1)?;
            let p = super::barrier::scratch_ptr(e, fx, idx)?;
            e.b.load(u32t, None, p, None, []).map_err(internal1)
        }
        Lanes::Subgroup { value, base } => {
            e.cap(Capability::GroupNonUniformShuffle);
            let id = e.b.i_add(u32t, None, base, i).map_err(internal1)?;
            let scope = subgroup_scope(e);
            e.b.group_non_uniform_shuffle(u32t, None, scope, value, id).map_err(internal1)
        }
    }
}

/// A function-local variable (declared in the function's first block).
pub(crate) fn func_var(e: &mut Emitter, ty: Word) -> Result<Word, Diagnostic> {
    let pt = e.t_ptr(StorageClass::Function, ty);
    e.b.entry_variable(pt, None).map_err(internal1)
}

/// The body of [`fold_lanes`]: lane index and current accumulators in, new
/// accumulators out (straight-line code).
type FoldFn<'f> = dyn FnMut(&mut Emitter, &Fx, Word, &[Word]) -> Result<Vec<Word>, Diagnostic> + 'f;

/// The 32 lanes of the warp folded into u32 accumulators that start at
/// `init`, lane 0 first; returns their final values. Straight-line code:
/// `body` runs once per lane with the lane index as a constant. A loop
/// here (as before) made llvmpipe's compile time grow with the square of a
/// kernel's warp votes (CUB's radix sort has hundreds): each loop, with
/// its loop-limit count, became blocks that its coroutine split over every
/// barrier; unrolled, the lane index folds into the shifts.
fn fold_lanes(e: &mut Emitter, fx: &Fx, init: &[Word], body: &mut FoldFn) -> Result<Vec<Word>, Diagnostic> {
    let mut acc = init.to_vec();
    for lane in 0..32 {
        let i = e.c_u32(lane);
        acc = body(e, fx, i, &acc)?;
    }
    Ok(acc)
}

/// `1 << i` if `cond`, else 0.
fn bit_if(e: &mut Emitter, cond: Word, i: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let one = e.c_u32(1);
    let zero = e.c_u32(0);
    let b = e.b.shift_left_logical(u32t, None, one, i).map_err(internal1)?;
    e.b.select(u32t, None, cond, b, zero).map_err(internal1)
}

/// Whether bit `i` of `mask` is set.
fn bit_set(e: &mut Emitter, mask: Word, i: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let one = e.c_u32(1);
    let zero = e.c_u32(0);
    let s = e.b.shift_right_logical(u32t, None, mask, i).map_err(internal1)?;
    let b = e.b.bitwise_and(u32t, None, s, one).map_err(internal1)?;
    e.b.i_not_equal(bt, None, b, zero).map_err(internal1)
}

/// Scratch words of the emulated ballots, after the exchange buffers: two
/// regions (first words, second words) of [`BALLOT_SLOTS`] slots of
/// [`BALLOT_WARPS`] warps' words.
pub(crate) const BALLOT_WORDS: u32 = 2 * BALLOT_SLOTS * BALLOT_WARPS;
/// Ballot slots used in turn.
const BALLOT_SLOTS: u32 = Rotation::SLOTS;
/// Warps of the largest block (1024 threads).
const BALLOT_WARPS: u32 = 32;

/// Scratch index of the current warp's word in slot `slot` (u32) of ballot
/// region `region` (0: first words, 1: second words).
fn ballot_word(e: &mut Emitter, fx: &Fx, region: u32, slot: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    // After the vote slots and the two exchange buffers.
    let per = e.c_u32(2 * e.exchange_words);
    let exchange = e.b.i_mul(u32t, None, per, e.spec_wg_x).map_err(internal1)?;
    let votes = e.c_u32(super::uniform::VOTE_WORDS + region * BALLOT_SLOTS * BALLOT_WARPS);
    let base = e.b.i_add(u32t, None, exchange, votes).map_err(internal1)?;
    let stride = e.c_u32(BALLOT_WARPS);
    let at = e.b.i_mul(u32t, None, slot, stride).map_err(internal1)?;
    let base = e.b.i_add(u32t, None, base, at).map_err(internal1)?;
    let five = e.c_u32(5);
    let warp = e.b.shift_right_logical(u32t, None, fx.linear, five).map_err(internal1)?;
    e.b.i_add(u32t, None, base, warp).map_err(internal1)
}

/// Clears the current warp's words of every ballot slot (at the start of a
/// uniform entry, before its first barrier).
pub(crate) fn init_ballots(e: &mut Emitter, fx: &Fx) -> Result<(), Diagnostic> {
    // The module's scratch has ballot slots only when it has exchange
    // buffers (emulated warp operations, see `uniform::tree_scratch_words`):
    // a kernel with only barriers and votes has the vote words alone, and a
    // store past them would land outside the Workgroup array (on llvmpipe,
    // in the heap).
    if e.warp.ballots.is_none() || e.module_scratch.0 == 0 {
        return Ok(());
    }
    let zero = e.c_u32(0);
    let scope = e.c_u32(Scope::Workgroup as u32);
    for region in 0..2 {
        for slot in 0..BALLOT_SLOTS {
            let slot = e.c_u32(slot);
            let w = ballot_word(e, fx, region, slot)?;
            let p = super::barrier::scratch_ptr(e, fx, w)?;
            e.b.atomic_store(p, scope, zero, zero).map_err(internal1)?;
        }
    }
    Ok(())
}

/// The warp's ballots of `conds` (one or two conditions): bit `l` of each
/// result is lane `l`'s condition. On the emulated path one barrier: each
/// lane XORs its bit of condition `i` into its warp's word of region `i`'s
/// current slot, reads the word after the barrier, and XORs it with the
/// value it read from that slot the time before (a [`Rotation`] per
/// region; every ballot that uses a region has a barrier). A
/// one-condition ballot costs two scratch accesses and none in the second
/// region: llvmpipe compiles each access as a loop over the lanes, and a
/// kernel's compile time grows with the square of their number (reading
/// all 32 lanes' words instead grew with the square of a kernel's
/// ballots).
fn ballot_n(e: &mut Emitter, fx: &Fx, conds: &[Word]) -> Result<Vec<Word>, Diagnostic> {
    if e.opts.warp_path != WarpPath::Emulated {
        return conds.iter().map(|&c| ballot(e, fx, c)).collect();
    }
    let u32t = e.t_int(32);
    let rotations = [
        e.warp.ballots.ok_or_else(|| missing("ballot slots"))?,
        e.warp.ballots2.ok_or_else(|| missing("ballot slots"))?,
    ];
    let mut taken = Vec::new();
    for (region, rot) in rotations.iter().enumerate().take(conds.len()) {
        let (slot, odd) = rot.take(e)?;
        taken.push((*rot, ballot_word(e, fx, region as u32, slot)?, odd));
    }
    let l = lane(e, fx)?;
    let scope = e.c_u32(Scope::Workgroup as u32);
    let relaxed = e.c_u32(0);
    for (&(_, w, _), &c) in taken.iter().zip(conds) {
        let bit = bit_if(e, c, l)?;
        let p = super::barrier::scratch_ptr(e, fx, w)?;
        e.b.atomic_xor(u32t, None, p, scope, relaxed, bit).map_err(internal1)?;
    }
    super::barrier::scratch_barrier(e)?;
    let mut out = Vec::new();
    for (rot, w, odd) in taken {
        let p = super::barrier::scratch_ptr(e, fx, w)?;
        let v = e.b.load(u32t, None, p, None, []).map_err(internal1)?;
        out.push(rot.finish(e, odd, v, true)?);
    }
    Ok(out)
}

/// The warp's ballots of two conditions (see [`ballot_n`]).
fn ballot2(e: &mut Emitter, fx: &Fx, c1: Word, c2: Word) -> Result<(Word, Word), Diagnostic> {
    match ballot_n(e, fx, &[c1, c2])?.as_slice() {
        &[a, b] => Ok((a, b)),
        _ => Err(missing("second ballot")),
    }
}

/// The warp's ballot of `cond` (bit `l` is lane `l`'s condition).
pub(crate) fn ballot(e: &mut Emitter, fx: &Fx, cond: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    match e.opts.warp_path {
        WarpPath::Emulated => ballot_n(e, fx, &[cond])?.pop().ok_or_else(|| missing("ballot")),
        path => {
            e.cap(Capability::GroupNonUniformBallot);
            let v4 = e.ty(super::TyKey::Vec(u32t, 4));
            let scope = subgroup_scope(e);
            let b = e.b.group_non_uniform_ballot(v4, None, scope, cond).map_err(internal1)?;
            if path == WarpPath::Native {
                e.b.composite_extract(u32t, None, b, [0]).map_err(internal1)
            } else {
                let local = load_input(e, e.warp.subgroup_local_id, "SubgroupLocalInvocationId")?;
                let five = e.c_u32(5);
                let which = e.b.shift_right_logical(u32t, None, local, five).map_err(internal1)?;
                e.b.vector_extract_dynamic(u32t, None, b, which).map_err(internal1)
            }
        }
    }
}

/// Store `v` to `op` where `active` holds (`active` may be the constant true).
pub(crate) fn set_if(
    e: &mut Emitter,
    fx: &mut Fx,
    active: Word,
    op: &Operand,
    v: Word,
    k: K,
) -> Result<(), Diagnostic> {
    // `_` (also inside `d|p`, where the grammar reads it as a name) discards.
    if matches!(op, Operand::Sink(_)) || matches!(op, Operand::Name { name, .. } if name == "_") {
        return Ok(());
    }
    if active == e.c_bool(true) {
        return set(e, fx, op, v, k, false);
    }
    let yes = e.b.id();
    let merge = e.b.id();
    e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(active, yes, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(yes)).map_err(internal1)?;
    let r = set(e, fx, op, v, k, false);
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    r
}

/// A destination that may carry a predicate (`d|p`).
fn split_dest(op: &Operand) -> (&Operand, Option<&Operand>) {
    match op {
        Operand::Pair(_, d, p) => (d, Some(p)),
        d => (d, None),
    }
}

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    let extra = if why.is_empty() { String::new() } else { format!(" ({why})") };
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}'{extra}", inst.mnemonic()))
}

fn wrong_operands(inst: &Instruction, want: &str) -> Diagnostic {
    Diagnostic::error(inst.span, format!("'{}' takes {want}", inst.mnemonic()))
}

/// Emit a warp instruction. `active` is whether this lane takes part (its
/// guard and, in uniform mode, its state); outside uniform mode it is the
/// constant true and the instruction runs in whatever control flow it is in.
pub(crate) fn emit(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    match inst.opcode.as_str() {
        "shfl" => shfl(e, fx, inst, active),
        "vote" => vote(e, fx, inst, active),
        "activemask" => {
            let [d] = inst.operands.as_slice() else {
                return Err(wrong_operands(inst, "one destination"));
            };
            let b = ballot(e, fx, active)?;
            set_if(e, fx, active, d, b, K::Int(32))
        }
        "match" => match_sync(e, fx, inst, active),
        "redux" => redux(e, fx, inst, active),
        "elect" => elect(e, fx, inst, active),
        "bar" if inst.has("warp") => warp_sync(e, inst, active),
        "mma" | "ldmatrix" | "stmatrix" | "movmatrix" => super::mma::emit(e, fx, inst, active),
        "wgmma" => super::wgmma::emit(e, fx, inst, active),
        "wmma" => super::wmma::emit(e, fx, inst, active),
        _ => Err(unsupported(inst, "")),
    }
}

/// `bar.warp.sync membermask`.
fn warp_sync(e: &mut Emitter, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    if inst.operands.len() != 1 {
        return Err(wrong_operands(inst, "a member mask"));
    }
    super::race::warp_barrier(e, active)?;
    if e.opts.warp_path == WarpPath::Emulated {
        // In uniform mode: a warp spans several subgroups.
        return super::barrier::workgroup_barrier(e);
    }
    use spirv::MemorySemantics as M;
    let sg = subgroup_scope(e);
    let wg = e.c_u32(Scope::Workgroup as u32);
    let sem = e.c_u32((M::ACQUIRE_RELEASE | M::WORKGROUP_MEMORY | M::UNIFORM_MEMORY).bits());
    e.b.control_barrier(sg, wg, sem).map_err(internal1)
}

/// `shfl.sync.mode.b32 d{|p}, a, b, c, membermask` and the legacy
/// `shfl.mode.b32 d{|p}, a, b, c`.
fn shfl(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    let (d, a, b, c) = match (inst.operands.as_slice(), inst.has("sync")) {
        ([d, a, b, c, _], true) | ([d, a, b, c], false) => (d, a, b, c),
        _ => return Err(wrong_operands(inst, "d{|p}, a, b, c and (with .sync) a member mask")),
    };
    let mode = ["up", "down", "bfly", "idx"]
        .into_iter()
        .find(|m| inst.has(m))
        .ok_or_else(|| unsupported(inst, "needs .up, .down, .bfly or .idx"))?;
    let (dst, pdst) = split_dest(d);
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let va = get(e, fx, a, K::Int(32), false)?;
    let vb = get(e, fx, b, K::Int(32), false)?;
    let vc = get(e, fx, c, K::Int(32), false)?;
    let lanes = share(e, fx, va)?;
    let lane = lane(e, fx)?;
    let c31 = e.c_u32(31);
    let c8 = e.c_u32(8);
    let bval = e.b.bitwise_and(u32t, None, vb, c31).map_err(internal1)?;
    let cval = e.b.bitwise_and(u32t, None, vc, c31).map_err(internal1)?;
    let seg = e.b.shift_right_logical(u32t, None, vc, c8).map_err(internal1)?;
    let seg = e.b.bitwise_and(u32t, None, seg, c31).map_err(internal1)?;
    let not_seg = e.b.not(u32t, None, seg).map_err(internal1)?;
    let min_lane = e.b.bitwise_and(u32t, None, lane, seg).map_err(internal1)?;
    let hi = e.b.bitwise_and(u32t, None, cval, not_seg).map_err(internal1)?;
    let max_lane = e.b.bitwise_or(u32t, None, min_lane, hi).map_err(internal1)?;
    let (j, pval) = match mode {
        "up" => {
            let j = e.b.i_sub(u32t, None, lane, bval).map_err(internal1)?;
            (j, e.b.s_greater_than_equal(bt, None, j, max_lane).map_err(internal1)?)
        }
        "down" => {
            let j = e.b.i_add(u32t, None, lane, bval).map_err(internal1)?;
            (j, e.b.u_less_than_equal(bt, None, j, max_lane).map_err(internal1)?)
        }
        "bfly" => {
            let j = e.b.bitwise_xor(u32t, None, lane, bval).map_err(internal1)?;
            (j, e.b.u_less_than_equal(bt, None, j, max_lane).map_err(internal1)?)
        }
        _ => {
            let off = e.b.bitwise_and(u32t, None, bval, not_seg).map_err(internal1)?;
            let j = e.b.bitwise_or(u32t, None, min_lane, off).map_err(internal1)?;
            (j, e.b.u_less_than_equal(bt, None, j, max_lane).map_err(internal1)?)
        }
    };
    let src = e.b.select(u32t, None, pval, j, lane).map_err(internal1)?;
    let v = read(e, fx, lanes, src)?;
    set_if(e, fx, active, dst, v, K::Int(32))?;
    if let Some(p) = pdst {
        set_if(e, fx, active, p, pval, K::Pred)?;
    }
    Ok(())
}

/// The member mask operand, or all lanes for the legacy forms.
fn member_mask(e: &mut Emitter, fx: &mut Fx, op: Option<&Operand>) -> Result<Word, Diagnostic> {
    match op {
        Some(m) => get(e, fx, m, K::Int(32), false),
        None => Ok(e.c_u32(u32::MAX)),
    }
}

/// `vote.sync.{all,any,uni}.pred d, {!}a, membermask`,
/// `vote.sync.ballot.b32 d, {!}a, membermask`, and the legacy forms without
/// `.sync` and the member mask.
fn vote(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    let (d, a, m) = match (inst.operands.as_slice(), inst.has("sync")) {
        ([d, a, m], true) => (d, a, Some(m)),
        ([d, a], false) => (d, a, None),
        _ => return Err(wrong_operands(inst, "d, {!}a and (with .sync) a member mask")),
    };
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let va = get(e, fx, a, K::Pred, false)?;
    let mask = member_mask(e, fx, m)?;
    let t = e.b.logical_and(bt, None, active, va).map_err(internal1)?;
    let zero = e.c_u32(0);
    // `ballot` and `any` look only at the lanes whose condition holds: one
    // ballot; `all` and `uni` also at the active ones.
    if inst.has("ballot") || inst.has("any") {
        let yes = ballot(e, fx, t)?;
        let set_bits = e.b.bitwise_and(u32t, None, yes, mask).map_err(internal1)?;
        let (r, k) = if inst.has("ballot") {
            (set_bits, K::Int(32))
        } else {
            (e.b.i_not_equal(bt, None, set_bits, zero).map_err(internal1)?, K::Pred)
        };
        return set_if(e, fx, active, d, r, k);
    }
    let uni = inst.has("uni");
    if !uni && !inst.has("all") {
        return Err(unsupported(inst, "needs .all, .any, .uni or .ballot"));
    }
    let (act, yes) = ballot2(e, fx, active, t)?;
    let members = e.b.bitwise_and(u32t, None, act, mask).map_err(internal1)?;
    let set_bits = e.b.bitwise_and(u32t, None, yes, mask).map_err(internal1)?;
    let all = e.b.i_equal(bt, None, set_bits, members).map_err(internal1)?;
    let r = if uni {
        let none = e.b.i_equal(bt, None, set_bits, zero).map_err(internal1)?;
        e.b.logical_or(bt, None, all, none).map_err(internal1)?
    } else {
        all
    };
    set_if(e, fx, active, d, r, K::Pred)
}

/// `match.any.sync.b{32,64} d, a, membermask` and
/// `match.all.sync.b{32,64} d{|p}, a, membermask`.
fn match_sync(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    let [d, a, m] = inst.operands.as_slice() else {
        return Err(wrong_operands(inst, "d{|p}, a and a member mask"));
    };
    let all = inst.has("all");
    if !all && !inst.has("any") {
        return Err(unsupported(inst, "needs .any or .all"));
    }
    let bits = if inst.has("b64") {
        64
    } else if inst.has("b32") {
        32
    } else {
        return Err(unsupported(inst, "needs .b32 or .b64"));
    };
    let (dst, pdst) = split_dest(d);
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let key = get(e, fx, a, K::Int(bits), false)?;
    let mask = member_mask(e, fx, Some(m))?;
    let act = ballot(e, fx, active)?;
    let members = e.b.bitwise_and(u32t, None, act, mask).map_err(internal1)?;
    let (lo, hi) = if bits == 64 {
        let u64t = e.t_int(64);
        let lo = e.b.u_convert(u32t, None, key).map_err(internal1)?;
        let c32 = e.c_int(64, 32);
        let h = e.b.shift_right_logical(u64t, None, key, c32).map_err(internal1)?;
        (lo, Some(e.b.u_convert(u32t, None, h).map_err(internal1)?))
    } else {
        (key, None)
    };
    let lanes_lo = share(e, fx, lo)?;
    let lanes_hi = match hi {
        Some(h) => Some(share(e, fx, h)?),
        None => None,
    };
    let zero = e.c_u32(0);
    let same = fold_lanes(e, fx, &[zero], &mut |e, fx, i, acc| {
        let u32t = e.t_int(32);
        let bt = e.t_bool();
        let x = read(e, fx, lanes_lo, i)?;
        let mut eq = e.b.i_equal(bt, None, x, lo).map_err(internal1)?;
        if let (Some(lh), Some(h)) = (lanes_hi, hi) {
            let y = read(e, fx, lh, i)?;
            let eq_hi = e.b.i_equal(bt, None, y, h).map_err(internal1)?;
            eq = e.b.logical_and(bt, None, eq, eq_hi).map_err(internal1)?;
        }
        let member = bit_set(e, members, i)?;
        let hit = e.b.logical_and(bt, None, eq, member).map_err(internal1)?;
        let b = bit_if(e, hit, i)?;
        Ok(vec![e.b.bitwise_or(u32t, None, acc[0], b).map_err(internal1)?])
    })?[0];
    if hi.is_some() && e.opts.warp_path == WarpPath::Emulated {
        // Two exchanges were read after the second one's barrier: the next
        // exchange must not rewrite the first buffer before everyone is done.
        super::barrier::scratch_barrier(e)?;
    }
    if !all {
        return set_if(e, fx, active, dst, same, K::Int(32));
    }
    let uniform = e.b.i_equal(bt, None, same, members).map_err(internal1)?;
    let r = e.b.select(u32t, None, uniform, members, zero).map_err(internal1)?;
    set_if(e, fx, active, dst, r, K::Int(32))?;
    if let Some(p) = pdst {
        set_if(e, fx, active, p, uniform, K::Pred)?;
    }
    Ok(())
}

/// `redux.sync.{add,min,max}.{u32,s32} d, a, membermask` and
/// `redux.sync.{and,or,xor}.b32 d, a, membermask`.
fn redux(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    let [d, a, m] = inst.operands.as_slice() else {
        return Err(wrong_operands(inst, "d, a and a member mask"));
    };
    let ty = inst.modifiers.iter().filter_map(|m| ScalarType::from_name(m)).next_back();
    let signed = match ty {
        Some(ScalarType::S32) => true,
        Some(ScalarType::U32 | ScalarType::B32) => false,
        _ => return Err(unsupported(inst, "only .u32, .s32 and .b32 reductions are supported")),
    };
    let op = ["add", "min", "max", "and", "or", "xor"]
        .into_iter()
        .find(|o| inst.has(o))
        .ok_or_else(|| unsupported(inst, "needs .add, .min, .max, .and, .or or .xor"))?;
    let identity: u32 = match (op, signed) {
        ("min", false) | ("and", _) => u32::MAX,
        ("min", true) => i32::MAX as u32,
        ("max", true) => i32::MIN as u32,
        _ => 0,
    };
    let u32t = e.t_int(32);
    let x = get(e, fx, a, K::Int(32), signed)?;
    let mask = member_mask(e, fx, Some(m))?;
    let act = ballot(e, fx, active)?;
    let members = e.b.bitwise_and(u32t, None, act, mask).map_err(internal1)?;
    let lanes = share(e, fx, x)?;
    let init = e.c_u32(identity);
    let r = fold_lanes(e, fx, &[init], &mut |e, fx, i, acc| {
        let u32t = e.t_int(32);
        let v = read(e, fx, lanes, i)?;
        let acc = acc[0];
        let n = match op {
            "add" => e.b.i_add(u32t, None, acc, v).map_err(internal1)?,
            "and" => e.b.bitwise_and(u32t, None, acc, v).map_err(internal1)?,
            "or" => e.b.bitwise_or(u32t, None, acc, v).map_err(internal1)?,
            "xor" => e.b.bitwise_xor(u32t, None, acc, v).map_err(internal1)?,
            "min" => super::inst::ext(e, u32t, if signed { glsl::SMIN } else { glsl::UMIN }, &[acc, v])?,
            _ => super::inst::ext(e, u32t, if signed { glsl::SMAX } else { glsl::UMAX }, &[acc, v])?,
        };
        let member = bit_set(e, members, i)?;
        Ok(vec![e.b.select(u32t, None, member, n, acc).map_err(internal1)?])
    })?[0];
    set_if(e, fx, active, d, r, K::Int(32))
}

/// `elect.sync d|p, membermask`: the lowest active lane in the mask is elected.
fn elect(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    let [dp, m] = inst.operands.as_slice() else {
        return Err(wrong_operands(inst, "d|p and a member mask"));
    };
    let (dst, pdst) = split_dest(dp);
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let mask = member_mask(e, fx, Some(m))?;
    let act = ballot(e, fx, active)?;
    let members = e.b.bitwise_and(u32t, None, act, mask).map_err(internal1)?;
    let leader = super::inst::ext(e, u32t, glsl::FIND_ILSB, &[members])?;
    let lane = lane(e, fx)?;
    let me = e.b.i_equal(bt, None, lane, leader).map_err(internal1)?;
    set_if(e, fx, active, dst, leader, K::Int(32))?;
    if let Some(p) = pdst {
        set_if(e, fx, active, p, me, K::Pred)?;
    }
    Ok(())
}
