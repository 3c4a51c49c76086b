//! Block-level collectives: `bar`/`barrier` (`.sync`, `.arrive`, `.red`)
//! and the workgroup-wide votes of uniform control flow.
//!
//! Every function that contains one runs in workgroup-uniform mode (see
//! [`super::uniform`]), so each is reached by every invocation of the
//! workgroup and becomes one `OpControlBarrier` with workgroup scope.
//!
//! # Named barriers and thread counts
//! `bar.sync a, b` / `bar.arrive a, b` / `bar.red ... a, b, ...`: the barrier
//! number `a` (0–15) and the thread count `b` are accepted and not
//! distinguished; all are the one workgroup barrier, and `bar.arrive` waits
//! like `bar.sync` (in uniform control flow that cannot deadlock, since every
//! invocation reaches every barrier). Programs whose warps meet at a named
//! barrier from different program points get a different memory ordering
//! than on NVIDIA hardware.
//!
//! # Workgroup votes and slot rotations
//! [`workgroup_count`] sums a value over the workgroup with one barrier,
//! and the emulated ballots of [`super::warp`] OR bits the same way. Both
//! use a [`Rotation`]: two scratch slots used in turn (collective `n` uses
//! slot `n % 2`), numbered by a private counter that is the same in every
//! invocation because control flow is uniform. Nothing clears a slot:
//! every invocation remembers the value it read from each slot last time,
//! and collective `n` adds (or XORs) its contributions to what the slot
//! holds, so the new value minus (XOR) the remembered one is the result.
//! Slot `n % 2` is read after collective `n`'s barrier and written again
//! only by collective `n + 2`, after collective `n + 1`'s barrier, by which
//! time every invocation has read it. Every slot starts at 0 (cleared
//! before the entry's first barrier, [`init_votes`]). A collective thus
//! costs two scratch accesses (the update and the read): llvmpipe compiles
//! each scratch access as a loop over the lanes, and a kernel's compile
//! time grows with the square of their number.

use super::func::{internal1, Fx};
use super::values::{get, K};
use super::Emitter;
use crate::ast::{Instruction, Operand};
use crate::diag::{Diagnostic, Span};
use rspirv::spirv::{MemorySemantics as M, Scope, StorageClass, Word};

/// `OpControlBarrier` for the workgroup, ordering workgroup and device memory
/// (what `__syncthreads()` promises).
pub(crate) fn workgroup_barrier(e: &mut Emitter) -> Result<(), Diagnostic> {
    let wg = e.c_u32(Scope::Workgroup as u32);
    let sem = e.c_u32((M::ACQUIRE_RELEASE | M::WORKGROUP_MEMORY | M::UNIFORM_MEMORY).bits());
    e.b.control_barrier(wg, wg, sem).map_err(internal1)
}

/// `OpControlBarrier` for the workgroup, ordering workgroup memory only (the
/// translator's own scratch exchanges).
pub(crate) fn scratch_barrier(e: &mut Emitter) -> Result<(), Diagnostic> {
    let wg = e.c_u32(Scope::Workgroup as u32);
    let sem = e.c_u32((M::ACQUIRE_RELEASE | M::WORKGROUP_MEMORY).bits());
    e.b.control_barrier(wg, wg, sem).map_err(internal1)
}

/// Pointer to scratch word `index`.
pub(crate) fn scratch_ptr(e: &mut Emitter, fx: &Fx, index: Word) -> Result<Word, Diagnostic> {
    let Some(var) = fx.scratch_var else {
        return Err(Diagnostic::error(Span::default(), "internal error: no scratch memory"));
    };
    let u32t = e.t_int(32);
    let pt = e.t_ptr(StorageClass::Workgroup, u32t);
    e.b.access_chain(pt, None, var, [index]).map_err(internal1)
}

/// Clear the vote slots (at the start of a uniform entry, before its first
/// barrier).
pub(crate) fn init_votes(e: &mut Emitter, fx: &Fx) -> Result<(), Diagnostic> {
    let scope = e.c_u32(Scope::Workgroup as u32);
    let relaxed = e.c_u32(0);
    let zero = e.c_u32(0);
    for i in 0..super::uniform::VOTE_WORDS {
        let w = e.c_u32(i);
        let p = scratch_ptr(e, fx, w)?;
        e.b.atomic_store(p, scope, relaxed, zero).map_err(internal1)?;
    }
    scratch_barrier(e)
}

/// Two scratch slots used in turn by collectives that have one barrier
/// each (see the module docs): the `Private` counter of the collectives so
/// far and the values last read from slot 0 and slot 1.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rotation {
    /// `Private` u32: collectives so far.
    pub counter: Word,
    /// `Private` u32: the value last read from each slot.
    pub last: [Word; 2],
}

impl Rotation {
    /// Slots used in turn.
    pub const SLOTS: u32 = 2;

    /// Create the module-scope `Private` variables.
    pub fn new(e: &mut Emitter) -> Rotation {
        let u32t = e.t_int(32);
        let pp = e.t_ptr(StorageClass::Private, u32t);
        let zero = e.c_u32(0);
        let mut var = || e.b.variable(pp, None, StorageClass::Private, Some(zero));
        Rotation { counter: var(), last: [var(), var()] }
    }

    /// The variables, for entry point interfaces.
    pub fn interface(&self) -> [Word; 3] {
        [self.counter, self.last[0], self.last[1]]
    }

    /// Take the next collective's slot: `(slot, odd)`, the slot number (0
    /// or 1) and whether it is 1.
    pub fn take(&self, e: &mut Emitter) -> Result<(Word, Word), Diagnostic> {
        let u32t = e.t_int(32);
        let bt = e.t_bool();
        let n = e.b.load(u32t, None, self.counter, None, []).map_err(internal1)?;
        let one = e.c_u32(1);
        let n1 = e.b.i_add(u32t, None, n, one).map_err(internal1)?;
        e.b.store(self.counter, n1, None, []).map_err(internal1)?;
        // SLOTS is 2: the slot is the counter's low bit.
        let slot = e.b.bitwise_and(u32t, None, n, one).map_err(internal1)?;
        let zero = e.c_u32(0);
        let odd = e.b.i_not_equal(bt, None, slot, zero).map_err(internal1)?;
        Ok((slot, odd))
    }

    /// The collective's result from `value`, what its slot holds after its
    /// barrier: `value - last` (`xor`: `value ^ last`); `value` becomes the
    /// slot's last value.
    pub fn finish(&self, e: &mut Emitter, odd: Word, value: Word, xor: bool) -> Result<Word, Diagnostic> {
        let u32t = e.t_int(32);
        let l0 = e.b.load(u32t, None, self.last[0], None, []).map_err(internal1)?;
        let l1 = e.b.load(u32t, None, self.last[1], None, []).map_err(internal1)?;
        let last = e.b.select(u32t, None, odd, l1, l0).map_err(internal1)?;
        let r = if xor {
            e.b.bitwise_xor(u32t, None, value, last).map_err(internal1)?
        } else {
            e.b.i_sub(u32t, None, value, last).map_err(internal1)?
        };
        let n0 = e.b.select(u32t, None, odd, l0, value).map_err(internal1)?;
        let n1 = e.b.select(u32t, None, odd, value, l1).map_err(internal1)?;
        e.b.store(self.last[0], n0, None, []).map_err(internal1)?;
        e.b.store(self.last[1], n1, None, []).map_err(internal1)?;
        Ok(r)
    }
}

/// The sum of `value` (u32) over the workgroup; one barrier, no branches.
pub(crate) fn workgroup_count(e: &mut Emitter, fx: &Fx, value: Word) -> Result<Word, Diagnostic> {
    let Some(rot) = e.warp.votes else {
        return Err(Diagnostic::error(Span::default(), "internal error: no vote counter"));
    };
    let u32t = e.t_int(32);
    let (slot, odd) = rot.take(e)?;
    let scope = e.c_u32(Scope::Workgroup as u32);
    let relaxed = e.c_u32(0);
    let ps = scratch_ptr(e, fx, slot)?;
    e.b.atomic_i_add(u32t, None, ps, scope, relaxed, value).map_err(internal1)?;
    scratch_barrier(e)?;
    let ps = scratch_ptr(e, fx, slot)?;
    let v = e.b.load(u32t, None, ps, None, []).map_err(internal1)?;
    rot.finish(e, odd, v, false)
}

/// Whether `cond` holds in any invocation of the workgroup.
pub(crate) fn workgroup_any(e: &mut Emitter, fx: &Fx, cond: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let one = e.c_u32(1);
    let zero = e.c_u32(0);
    let v = e.b.select(u32t, None, cond, one, zero).map_err(internal1)?;
    let n = workgroup_count(e, fx, v)?;
    e.b.i_not_equal(bt, None, n, zero).map_err(internal1)
}

/// `bar`/`barrier` in its `.sync`, `.arrive` and `.red` forms (not
/// `bar.warp.sync`, see [`super::warp`]), executed by every invocation;
/// `active` is the invocation's activity (with its guard).
pub(crate) fn emit(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    // The racecheck's next block epoch (a thread's own count: the barrier
    // orders what every thread did before it against what follows it).
    super::race::block_barrier(e, active)?;
    if inst.has("red") {
        return reduce(e, fx, inst, active);
    }
    let known = ["sync", "arrive", "cta", "aligned"];
    if let Some(m) = inst.modifiers.iter().find(|m| !known.contains(&m.as_str())) {
        return Err(Diagnostic::error(
            inst.opcode_span,
            format!("unsupported instruction '{}' (modifier .{m})", inst.mnemonic()),
        ));
    }
    // `bar.sync a{, b}`: a barrier number (0–15) and an optional thread count.
    if inst.operands.is_empty() || inst.operands.len() > 2 {
        return Err(Diagnostic::error(
            inst.span,
            format!("'{}' takes a barrier number and an optional thread count", inst.mnemonic()),
        ));
    }
    check_barrier_number(&inst.operands[0])?;
    workgroup_barrier(e)
}

fn check_barrier_number(op: &Operand) -> Result<(), Diagnostic> {
    match op {
        Operand::Int(span, v) if !(0..16).contains(v) => {
            Err(Diagnostic::error(*span, format!("barrier number {v} is out of range (0 to 15)")))
        }
        _ => Ok(()),
    }
}

/// `bar.red.popc.u32 d, a{, b}, {!}c` and `bar.red.{and,or}.pred p, a{, b}, {!}c`.
fn reduce(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    let ops = inst.operands.as_slice();
    let (d, a, c) = match ops {
        [d, a, c] | [d, a, _, c] => (d, a, c),
        _ => {
            return Err(Diagnostic::error(
                inst.span,
                format!(
                    "'{}' takes a destination, a barrier number, an optional thread count and a predicate",
                    inst.mnemonic()
                ),
            ))
        }
    };
    check_barrier_number(a)?;
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let cv = get(e, fx, c, K::Pred, false)?;
    // One vote: active invocations in the low half, those with c in the high half.
    let t = e.b.logical_and(bt, None, active, cv).map_err(internal1)?;
    let one = e.c_u32(1);
    let high = e.c_u32(1 << 16);
    let zero = e.c_u32(0);
    let lo = e.b.select(u32t, None, active, one, zero).map_err(internal1)?;
    let hi = e.b.select(u32t, None, t, high, zero).map_err(internal1)?;
    let v = e.b.i_add(u32t, None, lo, hi).map_err(internal1)?;
    let sum = workgroup_count(e, fx, v)?;
    let sixteen = e.c_u32(16);
    let trues = e.b.shift_right_logical(u32t, None, sum, sixteen).map_err(internal1)?;
    let mask = e.c_u32(0xFFFF);
    let total = e.b.bitwise_and(u32t, None, sum, mask).map_err(internal1)?;
    let (r, k) = if inst.has("popc") {
        (trues, K::Int(32))
    } else if inst.has("and") {
        (e.b.i_equal(bt, None, trues, total).map_err(internal1)?, K::Pred)
    } else if inst.has("or") {
        (e.b.i_not_equal(bt, None, trues, zero).map_err(internal1)?, K::Pred)
    } else {
        return Err(Diagnostic::error(
            inst.opcode_span,
            format!("unsupported instruction '{}' (bar.red needs .popc, .and or .or)", inst.mnemonic()),
        ));
    };
    super::warp::set_if(e, fx, active, d, r, k)
}
