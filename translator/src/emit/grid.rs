//! Grid-wide synchronisation (cooperative groups' `this_grid().sync()`).
//!
//! Two lowerings reach the same grid workspace (see [`crate::abi::grid`]),
//! whose address the runtime stores in the module data word at
//! [`crate::abi::ModuleInfo::grid_offset`] before every launch (0 on a launch
//! that is not cooperative):
//! - nvcc inlines `grid.sync()` as PTX that reads the workspace address from
//!   `%envreg1` (high half) and `%envreg2` (low half), traps when it is 0, and
//!   spins on the barrier word itself; [`envreg`] gives those registers;
//! - NVVM front ends (numba-cuda) call the device runtime's
//!   `cudaCGGetIntrinsicHandle(scope)` and `cudaCGSynchronize(handle,
//!   flags)` from NVIDIA's `libcudadevrt`, which cannot be linked here; the
//!   translator lowers those calls itself ([`intrinsic_handle`],
//!   [`synchronize`]).
//!
//! `cudaCGSynchronize` is a collective (every function that calls it runs in
//! workgroup-uniform mode, see [`super::uniform`]): the first
//! [`SPIN_LANES`] invocations of the workgroup read the barrier word; a
//! workgroup barrier; invocation 0 arrives for the block; those invocations
//! spin until the word's top bit differs from what they read; a second
//! workgroup barrier. The arrive adds 1, or `0x8000_0001 - nblocks` in block
//! (0, 0, 0), so that the word gains exactly `0x8000_0000` once every block
//! arrived and its top bit flips then and only then (nvcc's algorithm, so
//! both lowerings can share a launch; the runtime zeroes the word before a
//! launch). The bit cannot flip before the block has arrived, so the value
//! read before the arrive gives the generation to wait out.
//!
//! A spin that ends without the flip (after [`crate::abi::grid::SPIN_ROUNDS`]
//! rounds of [`POLLS`] polls, or when lavapipe's loop limiter ends the loop)
//! sets [`crate::abi::printf::TRAP_GRID_SYNC`] in the trap word: the launch
//! fails instead of returning wrong results silently. A sync on a launch
//! that is not cooperative sets [`crate::abi::printf::TRAP_TRAP`], as the
//! device runtime traps on NVIDIA's hardware.

use super::func::{internal1, set_trap_word, Fx};
use super::mem::{load, store_local_word, Addr};
use super::printf::add64;
use super::values::K;
use super::Emitter;
use crate::abi::grid as gr;
use crate::abi::printf as pf;
use crate::ast::{Instruction, Operand};
use crate::diag::{Diagnostic, Span};
use rspirv::spirv::{self, MemorySemantics as M, SelectionControl, Word};

/// The device runtime's "give me a group handle" entry point.
pub(crate) const GET_INTRINSIC_HANDLE: &str = "cudaCGGetIntrinsicHandle";
/// The device runtime's grid (or multi-grid) barrier.
pub(crate) const SYNCHRONIZE: &str = "cudaCGSynchronize";

/// Polls of the barrier word per round of the spin loop: straight-line code,
/// so that a round lasts longer and lavapipe's loop limiter (65535
/// iterations of all loops of an invocation together) allows a longer wait:
/// about 65535 x 64 x 8 polls, 0.5 s on the 2-CPU test machine; 16 polls
/// were too few there under load (`docs/cooperative.md`).
pub(crate) const POLLS: u32 = 64;

/// Invocations of a workgroup that poll the barrier word: a warp. (On
/// lavapipe, whose 8-lane vectors run a poll for each active lane, more
/// polling lanes make a spin round last longer at the same code size.)
const SPIN_LANES: u32 = 32;

/// `if (cond) { then }` in structured control flow.
pub(crate) fn if_then(
    e: &mut Emitter,
    cond: Word,
    then: impl FnOnce(&mut Emitter) -> Result<(), Diagnostic>,
) -> Result<(), Diagnostic> {
    let yes = e.b.id();
    let merge = e.b.id();
    e.b.selection_merge(merge, SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(cond, yes, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(yes)).map_err(internal1)?;
    then(e)?;
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    Ok(())
}

/// The grid workspace's address from its module data slot (0 on a launch
/// that is not cooperative).
pub(crate) fn workspace(e: &mut Emitter, fx: &Fx, span: Span) -> Result<Word, Diagnostic> {
    let (Some(base), Some(slot)) = (e.module_data_address()?, e.grid_offset) else {
        return Err(Diagnostic::error(span, "internal error: grid workspace slot missing"));
    };
    let slot_addr = add64(e, base, slot)?;
    load(e, fx, Addr::Global(slot_addr), K::Int(64), false)
}

/// `%envreg1` (the workspace address' high half) and `%envreg2` (its low
/// half), which nvcc's cooperative groups read; the other `%envreg`s are
/// not provided.
pub(crate) fn envreg(e: &mut Emitter, fx: &Fx, name: &str, span: Span) -> Result<Option<Word>, Diagnostic> {
    let high = match name {
        "%envreg1" => true,
        "%envreg2" => false,
        _ => return Ok(None),
    };
    let ws = workspace(e, fx, span)?;
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let v = if high {
        let k32 = e.c_int(64, 32);
        e.b.shift_right_logical(u64t, None, ws, k32).map_err(internal1)?
    } else {
        ws
    };
    Ok(Some(e.b.u_convert(u32t, None, v).map_err(internal1)?))
}

/// Stores `words` into the `.param` result `op` of a system call.
fn store_result(e: &mut Emitter, fx: &mut Fx, op: Option<&Operand>, words: &[Word]) -> Result<(), Diagnostic> {
    let Some(op) = op else { return Ok(()) };
    let w = super::call::param_var_offset(fx, op)? / 4;
    for (i, &v) in words.iter().enumerate() {
        store_local_word(e, fx, w + i as u32, v)?;
    }
    Ok(())
}

fn check_shape(inst: &Instruction, name: &str, rets: &[Operand], args: &[Operand], n: usize) -> Result<(), Diagnostic> {
    if rets.len() > 1 || args.len() != n {
        return Err(Diagnostic::error(
            inst.span,
            format!("{name} takes {n} argument(s) and returns one value; this call passes {}", args.len()),
        ));
    }
    Ok(())
}

/// `cudaCGGetIntrinsicHandle(scope)`: the grid workspace's address (the
/// handle of every scope: grid and multi-grid are the same grid here).
pub(crate) fn intrinsic_handle(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    rets: &[Operand],
    args: &[Operand],
) -> Result<(), Diagnostic> {
    check_shape(inst, GET_INTRINSIC_HANDLE, rets, args, 1)?;
    let ws = workspace(e, fx, inst.span)?;
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let lo = e.b.u_convert(u32t, None, ws).map_err(internal1)?;
    let k32 = e.c_int(64, 32);
    let hi = e.b.shift_right_logical(u64t, None, ws, k32).map_err(internal1)?;
    let hi = e.b.u_convert(u32t, None, hi).map_err(internal1)?;
    store_result(e, fx, rets.first(), &[lo, hi])
}

/// `cudaCGSynchronize(handle, flags)`, executed by every invocation of the
/// workgroup (a collective; `active` is the caller's activity, unused: the
/// block arrives once whoever of it is active). Returns 0 (`cudaSuccess`).
pub(crate) fn synchronize(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    rets: &[Operand],
    args: &[Operand],
    active: Option<Word>,
) -> Result<(), Diagnostic> {
    check_shape(inst, SYNCHRONIZE, rets, args, 2)?;
    if active.is_none() || fx.uniform.is_none() {
        return Err(Diagnostic::error(
            inst.span,
            format!("internal error: {SYNCHRONIZE} outside workgroup-uniform control flow"),
        ));
    }
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let zero = e.c_u32(0);
    let one = e.c_u32(1);
    let top = e.c_u32(0x8000_0000);
    let scope = e.c_u32(spirv::Scope::Device as u32);
    let (release, acquire) = (e.device_semantics(M::RELEASE), e.device_semantics(M::ACQUIRE));
    let ws = workspace(e, fx, inst.span)?;
    let zero64 = e.c_int(64, 0);
    let have = e.b.i_not_equal(bt, None, ws, zero64).map_err(internal1)?;
    let word = add64(e, ws, gr::BARRIER)?;
    let pt = e.t_ptr(spirv::StorageClass::PhysicalStorageBuffer, u32t);
    let lanes = e.c_u32(SPIN_LANES);
    let in_spin = e.b.u_less_than(bt, None, fx.linear, lanes).map_err(internal1)?;
    let spinner = e.b.logical_and(bt, None, in_spin, have).map_err(internal1)?;
    let leader = e.b.i_equal(bt, None, fx.linear, zero).map_err(internal1)?;
    // Polls are atomic adds of 0, which no compiler drops.
    let poll = |e: &mut Emitter| -> Result<Word, Diagnostic> {
        let ptr = e.b.convert_u_to_ptr(pt, None, word).map_err(internal1)?;
        e.b.atomic_i_add(u32t, None, ptr, scope, acquire, zero).map_err(internal1)
    };

    // The spinners read the generation bit before the block arrives: the
    // barrier cannot complete before that.
    let before = super::warp::func_var(e, u32t)?;
    if_then(e, spinner, |e| {
        let v = poll(e)?;
        e.b.store(before, v, None, []).map_err(internal1)?;
        Ok(())
    })?;
    super::barrier::workgroup_barrier(e)?;

    // No workspace: not a cooperative launch.
    let lonely = e.b.logical_and(bt, None, leader, have).map_err(internal1)?;
    let no_ws = e.b.logical_not(bt, None, have).map_err(internal1)?;
    let lone = e.b.logical_and(bt, None, leader, no_ws).map_err(internal1)?;
    if_then(e, lone, |e| set_trap_word(e, pf::TRAP_TRAP))?;

    // The leader arrives: 1, or 0x8000_0001 - nblocks in block (0, 0, 0).
    if_then(e, lonely, |e| {
        let mut nblocks = e.c_u32(1);
        let mut first = e.c_bool(true);
        for c in [b'x', b'y', b'z'] {
            let Some((n, _)) = e.special(fx, "%nctaid", Some(c), inst.span)? else {
                return Err(Diagnostic::error(inst.span, "internal error: %nctaid"));
            };
            nblocks = e.b.i_mul(u32t, None, nblocks, n).map_err(internal1)?;
            let Some((id, _)) = e.special(fx, "%ctaid", Some(c), inst.span)? else {
                return Err(Diagnostic::error(inst.span, "internal error: %ctaid"));
            };
            let z = e.b.i_equal(bt, None, id, zero).map_err(internal1)?;
            first = e.b.logical_and(bt, None, first, z).map_err(internal1)?;
        }
        let top1 = e.c_u32(0x8000_0001);
        let big = e.b.i_sub(u32t, None, top1, nblocks).map_err(internal1)?;
        let add = e.b.select(u32t, None, first, big, one).map_err(internal1)?;
        let ptr = e.b.convert_u_to_ptr(pt, None, word).map_err(internal1)?;
        e.b.atomic_i_add(u32t, None, ptr, scope, release, add).map_err(internal1)?;
        Ok(())
    })?;

    // The spinners wait for the generation bit to flip.
    if_then(e, spinner, |e| {
        let b0 = e.b.load(u32t, None, before, None, []).map_err(internal1)?;
        let flipped = |e: &mut Emitter, cur: Word| -> Result<Word, Diagnostic> {
            let x = e.b.bitwise_xor(u32t, None, cur, b0).map_err(internal1)?;
            let t = e.b.bitwise_and(u32t, None, x, top).map_err(internal1)?;
            e.b.i_not_equal(bt, None, t, zero).map_err(internal1)
        };
        let rounds = super::warp::func_var(e, u32t)?;
        e.b.store(rounds, zero, None, []).map_err(internal1)?;
        let header = e.b.id();
        let body = e.b.id();
        let cont = e.b.id();
        let exit = e.b.id();
        super::loop_limit::enter(e)?;
        e.b.branch(header).map_err(internal1)?;
        e.b.begin_block(Some(header)).map_err(internal1)?;
        super::loop_limit::loop_merge(e, exit, cont)?;
        e.b.branch(body).map_err(internal1)?;
        e.b.begin_block(Some(body)).map_err(internal1)?;
        // Once flipped the bit stays until this block arrives again, so only
        // the last poll of a round needs looking at.
        let mut cur = zero;
        for _ in 0..POLLS {
            cur = poll(e)?;
        }
        let done = flipped(e, cur)?;
        let n = e.b.load(u32t, None, rounds, None, []).map_err(internal1)?;
        let n1 = e.b.i_add(u32t, None, n, one).map_err(internal1)?;
        e.b.store(rounds, n1, None, []).map_err(internal1)?;
        let limit = e.c_u32(gr::SPIN_ROUNDS);
        let out = e.b.u_greater_than_equal(bt, None, n1, limit).map_err(internal1)?;
        let leave = e.b.logical_or(bt, None, done, out).map_err(internal1)?;
        e.b.branch_conditional(leave, exit, cont, []).map_err(internal1)?;
        e.b.begin_block(Some(cont)).map_err(internal1)?;
        super::loop_limit::check(e, None)?;
        e.b.branch(header).map_err(internal1)?;
        e.b.begin_block(Some(exit)).map_err(internal1)?;
        super::loop_limit::merged(e)?;
        // However the loop ended (flip, round limit, or a driver's loop
        // limiter), look again: no flip means the grid did not meet.
        let cur = poll(e)?;
        let done = flipped(e, cur)?;
        let late = e.b.logical_not(bt, None, done).map_err(internal1)?;
        if_then(e, late, |e| set_trap_word(e, pf::TRAP_GRID_SYNC))
    })?;

    super::barrier::workgroup_barrier(e)?;
    store_result(e, fx, rets.first(), &[zero])
}
