//! `alloca`, `stacksave` and `stackrestore`: a per-invocation stack in local
//! memory.
//!
//! An entry whose call tree uses them gets [`STACK_BYTES`] of local memory
//! after all `.local` frames, and a `Private` stack pointer (a byte offset in
//! the local words, like every `.local` address). `alloca` aligns the pointer,
//! returns it and moves it past the allocation; an allocation that does not
//! fit ends the thread with `trap` (the launch fails, as CUDA reports a stack
//! overflow). `stacksave`/`stackrestore` read and set the pointer.

use super::func::{internal1, Fx};
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, Operand};
use crate::diag::Diagnostic;
use rspirv::spirv;

/// Bytes of `alloca` stack per thread.
pub const STACK_BYTES: u32 = 4096;

fn stack(fx: &Fx, inst: &Instruction) -> Result<(u32, u32), Diagnostic> {
    fx.stack.ok_or_else(|| Diagnostic::error(inst.span, "internal error: stack instruction without a stack"))
}

/// `alloca{.local}.u32/.u64 ptr, size{, align}`.
pub(crate) fn alloca(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let (sp, end) = stack(fx, inst)?;
    let (d, size, align) = match inst.operands.as_slice() {
        [d, s] => (d, s, 8u32),
        [d, s, Operand::Int(_, a)] if *a > 0 && (*a as u64).is_power_of_two() && *a <= 4096 => (d, s, *a as u32),
        _ => return Err(Diagnostic::error(inst.span, "alloca expects ptr, size{, power-of-two alignment}")),
    };
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let n = get(e, fx, size, K::Int(32), false)?;
    let cur = e.b.load(u32t, None, sp, None, []).map_err(internal1)?;
    let am = e.c_u32(align - 1);
    let bumped = e.b.i_add(u32t, None, cur, am).map_err(internal1)?;
    let mask = e.c_u32(!(align - 1));
    let base = e.b.bitwise_and(u32t, None, bumped, mask).map_err(internal1)?;
    // Room left, computed without overflow: end - base >= n.
    let endc = e.c_u32(end);
    let room = e.b.i_sub(u32t, None, endc, base).map_err(internal1)?;
    let past = e.b.u_greater_than(bt, None, base, endc).map_err(internal1)?;
    let small = e.b.u_less_than(bt, None, room, n).map_err(internal1)?;
    let overflow = e.b.logical_or(bt, None, past, small).map_err(internal1)?;
    let bad = e.b.id();
    let ok = e.b.id();
    e.b.selection_merge(ok, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(overflow, bad, ok, []).map_err(internal1)?;
    e.b.begin_block(Some(bad)).map_err(internal1)?;
    super::func::trap_now(e, fx, ok, crate::abi::printf::TRAP_TRAP)?;
    e.b.begin_block(Some(ok)).map_err(internal1)?;
    let next = e.b.i_add(u32t, None, base, n).map_err(internal1)?;
    e.b.store(sp, next, None, []).map_err(internal1)?;
    set(e, fx, d, base, K::Int(32), false)
}

/// `stacksave.u32/.u64 d`.
pub(crate) fn stacksave(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let (sp, _) = stack(fx, inst)?;
    let [d] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, "stacksave expects one destination"));
    };
    let u32t = e.t_int(32);
    let v = e.b.load(u32t, None, sp, None, []).map_err(internal1)?;
    set(e, fx, d, v, K::Int(32), false)
}

/// `stackrestore.u32/.u64 a`.
pub(crate) fn stackrestore(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let (sp, _) = stack(fx, inst)?;
    let [a] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, "stackrestore expects one operand"));
    };
    let v = get(e, fx, a, K::Int(32), false)?;
    e.b.store(sp, v, None, []).map_err(internal1)
}
