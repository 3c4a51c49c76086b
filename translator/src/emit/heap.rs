//! Device-side `malloc` and `free`: calls of these undefined functions (what
//! nvcc makes of `malloc`/`free`/`new`/`delete` in kernels, and what numba's
//! runtime NRT calls) allocate from the context's device heap; see
//! [`crate::abi::heap`] for its layout and the allocator.

use super::func::{internal1, Fx};
use super::mem::{load, load_local_word, store, store_local_word, Addr};
use super::printf::add64;
use super::values::K;
use super::Emitter;
use crate::abi::heap as hp;
use crate::ast::{Instruction, Operand};
use crate::diag::{Diagnostic, Span};
use rspirv::spirv::{self, Capability, Word};

/// The name of the allocation system call.
pub(crate) const MALLOC: &str = "malloc";
/// The name of the deallocation system call.
pub(crate) const FREE: &str = "free";

/// The 64-bit `.param` argument or result `op` of a system call, as its
/// word offset in the function's local words.
fn param_words(fx: &Fx, op: &Operand) -> Result<u32, Diagnostic> {
    Ok(super::call::param_var_offset(fx, op)? / 4)
}

fn load_param_u64(e: &mut Emitter, fx: &Fx, op: &Operand) -> Result<Word, Diagnostic> {
    let w = param_words(fx, op)?;
    let lo = load_local_word(e, fx, w)?;
    let hi = load_local_word(e, fx, w + 1)?;
    e.make_u64(lo, hi)
}

fn store_param_u64(e: &mut Emitter, fx: &mut Fx, op: &Operand, v: Word) -> Result<(), Diagnostic> {
    let w = param_words(fx, op)?;
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let lo = e.b.u_convert(u32t, None, v).map_err(internal1)?;
    let k32 = e.c_int(64, 32);
    let hi = e.b.shift_right_logical(u64t, None, v, k32).map_err(internal1)?;
    let hi = e.b.u_convert(u32t, None, hi).map_err(internal1)?;
    store_local_word(e, fx, w, lo)?;
    store_local_word(e, fx, w + 1, hi)
}

/// The heap's device address, read from its module data slot (0 when the
/// runtime has not provided one).
fn heap_base(e: &mut Emitter, fx: &Fx, span: Span) -> Result<Word, Diagnostic> {
    let (Some(base), Some(slot)) = (e.module_data_address()?, e.heap_offset) else {
        return Err(Diagnostic::error(span, "internal error: heap slot missing"));
    };
    let slot_addr = add64(e, base, slot)?;
    load(e, fx, Addr::Global(slot_addr), K::Int(64), false)
}

/// Pointer to the 64-bit heap word at `addr` for atomics.
fn word64(e: &mut Emitter, addr: Word) -> Result<Word, Diagnostic> {
    e.cap(Capability::Int64Atomics);
    let u64t = e.t_int(64);
    let pt = e.t_ptr(spirv::StorageClass::PhysicalStorageBuffer, u64t);
    e.b.convert_u_to_ptr(pt, None, addr).map_err(internal1)
}

/// `(scope, semantics)` of the allocator's atomics: device scope,
/// acquire-release on device memory, so that a block's link written before
/// it is pushed on a free list is seen by the thread that pops it (relaxed
/// where [`crate::Options::memory_semantics`] is off).
fn order(e: &mut Emitter) -> (Word, Word) {
    let scope = e.c_u32(spirv::Scope::Device as u32);
    (scope, e.device_semantics(spirv::MemorySemantics::ACQUIRE_RELEASE))
}

/// Acquire-only semantics for the loads that start a compare-and-swap loop.
fn acquire(e: &mut Emitter) -> Word {
    e.device_semantics(spirv::MemorySemantics::ACQUIRE)
}

/// Address of the free-list head of size class `class` (a u32).
fn list_head(e: &mut Emitter, heap: Word, class: Word) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let class64 = e.b.u_convert(u64t, None, class).map_err(internal1)?;
    let eight = e.c_int(64, 8);
    let slot = e.b.i_mul(u64t, None, class64, eight).map_err(internal1)?;
    let lists = add64(e, heap, hp::FREE_LISTS)?;
    e.b.i_add(u64t, None, lists, slot).map_err(internal1)
}

/// The head that replaces `old`: its change counter plus one, and block
/// offset `offset` (a u64 below 2^32).
fn next_head(e: &mut Emitter, old: Word, offset: Word) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let k32 = e.c_int(64, 32);
    let tag = e.b.shift_right_logical(u64t, None, old, k32).map_err(internal1)?;
    let one64 = e.c_int(64, 1);
    let tag = e.b.i_add(u64t, None, tag, one64).map_err(internal1)?;
    let tag = e.b.shift_left_logical(u64t, None, tag, k32).map_err(internal1)?;
    e.b.bitwise_or(u64t, None, tag, offset).map_err(internal1)
}

/// A compare-and-swap retry loop. `step(e, fx)` runs once per attempt and
/// returns `(done, value)`; the loop ends at the first attempt whose `done`
/// is true and yields its `value` (a u64).
fn cas_loop(
    e: &mut Emitter,
    fx: &mut Fx,
    mut step: impl FnMut(&mut Emitter, &mut Fx) -> Result<(Word, Word), Diagnostic>,
) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let f = e.c_bool(false);
    let zero = e.c_int(64, 0);
    let (header, body, cont, merge) = (e.b.id(), e.b.id(), e.b.id(), e.b.id());
    let (ndone, nval) = (e.b.id(), e.b.id());
    super::loop_limit::enter(e)?;
    // After `enter`, which may end the block it began in.
    let pre = e.current_label()?;
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(header)).map_err(internal1)?;
    let done = e.b.phi(bt, None, [(f, pre), (ndone, cont)]).map_err(internal1)?;
    let val = e.b.phi(u64t, None, [(zero, pre), (nval, cont)]).map_err(internal1)?;
    let more = e.b.logical_not(bt, None, done).map_err(internal1)?;
    super::loop_limit::loop_merge(e, merge, cont)?;
    e.b.branch_conditional(more, body, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(body)).map_err(internal1)?;
    let (d, v) = step(e, fx)?;
    super::loop_limit::check(e, None)?;
    e.b.branch(cont).map_err(internal1)?;
    e.b.begin_block(Some(cont)).map_err(internal1)?;
    e.b.copy_object(bt, Some(ndone), d).map_err(internal1)?;
    e.b.copy_object(u64t, Some(nval), v).map_err(internal1)?;
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    super::loop_limit::merged(e)?;
    Ok(val)
}

/// `call (ret), malloc, (size)`: a block of the size class that holds `size`
/// bytes and the block header, from the class's free list or else from the
/// unused end of the heap; NULL when `size` is 0 or the heap is exhausted.
pub(crate) fn malloc(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    rets: &[Operand],
    args: &[Operand],
) -> Result<(), Diagnostic> {
    let ([size_op], [ret]) = (args, rets) else {
        return Err(Diagnostic::error(inst.span, "malloc takes (size) and returns one pointer"));
    };
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let size = load_param_u64(e, fx, size_op)?;
    let heap = heap_base(e, fx, inst.span)?;
    let zero64 = e.c_int(64, 0);
    let zero = e.c_u32(0);

    // Size class: the least c >= MIN_CLASS with 2^c >= size + header.
    let max = e.c_int(64, hp::MAX_REQUEST);
    let have_heap = e.b.i_not_equal(bt, None, heap, zero64).map_err(internal1)?;
    let nonzero = e.b.i_not_equal(bt, None, size, zero64).map_err(internal1)?;
    let small = e.b.u_less_than_equal(bt, None, size, max).map_err(internal1)?;
    let ok = e.b.logical_and(bt, None, have_heap, nonzero).map_err(internal1)?;
    let ok = e.b.logical_and(bt, None, ok, small).map_err(internal1)?;
    let clamped = e.b.select(u64t, None, small, size, max).map_err(internal1)?;
    let clamped = e.b.u_convert(u32t, None, clamped).map_err(internal1)?;
    let hdr_m1 = e.c_u32(hp::BLOCK_HEADER_BYTES - 1);
    let need_m1 = e.b.i_add(u32t, None, clamped, hdr_m1).map_err(internal1)?;
    let msb = e.b.ext_inst(u32t, None, e.glsl, 75, [rspirv::dr::Operand::IdRef(need_m1)]).map_err(internal1)?; // FindUMsb
    let one = e.c_u32(1);
    let class = e.b.i_add(u32t, None, msb, one).map_err(internal1)?;
    let min = e.c_u32(hp::MIN_CLASS);
    let class =
        e.b.ext_inst(u32t, None, e.glsl, 41, [rspirv::dr::Operand::IdRef(class), rspirv::dr::Operand::IdRef(min)])
            .map_err(internal1)?; // UMax
    let bsize = e.b.shift_left_logical(u32t, None, one, class).map_err(internal1)?;

    let body = e.b.id();
    let merge = e.b.id();
    let pre = e.current_label()?;
    e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(ok, body, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(body)).map_err(internal1)?;

    // Pop the class's free list (a tagged head: offset low, counter high).
    let head_addr = list_head(e, heap, class)?;
    let popped = cas_loop(e, fx, |e, fx| {
        let u32t = e.t_int(32);
        let u64t = e.t_int(64);
        let bt = e.t_bool();
        let head = word64(e, head_addr)?;
        let (scope, sem) = order(e);
        let acq = acquire(e);
        let old = e.b.atomic_load(u64t, None, head, scope, acq).map_err(internal1)?;
        let off = e.b.u_convert(u32t, None, old).map_err(internal1)?;
        let zero = e.c_u32(0);
        let empty = e.b.i_equal(bt, None, off, zero).map_err(internal1)?;
        // The next link of the first block (the capacity word when empty:
        // a harmless read, and the swap below then writes `old` back).
        let off64 = e.b.u_convert(u64t, None, off).map_err(internal1)?;
        let blk = e.b.i_add(u64t, None, heap, off64).map_err(internal1)?;
        let next_at = add64(e, blk, hp::NEXT_FIELD)?;
        let next = load(e, fx, Addr::Global(next_at), K::Int(32), true)?;
        let next64 = e.b.u_convert(u64t, None, next).map_err(internal1)?;
        let new = next_head(e, old, next64)?;
        let new = e.b.select(u64t, None, empty, old, new).map_err(internal1)?;
        let acq2 = acquire(e);
        let got = e.b.atomic_compare_exchange(u64t, None, head, scope, sem, acq2, new, old).map_err(internal1)?;
        let won = e.b.i_equal(bt, None, got, old).map_err(internal1)?;
        let done = e.b.logical_or(bt, None, empty, won).map_err(internal1)?;
        let zero64 = e.c_int(64, 0);
        let val = e.b.select(u64t, None, empty, zero64, off64).map_err(internal1)?;
        Ok((done, val))
    })?;

    // Else carve a new block from the unused end.
    let bsize64 = e.b.u_convert(u64t, None, bsize).map_err(internal1)?;
    let got_free = e.b.i_not_equal(bt, None, popped, zero64).map_err(internal1)?;
    let carve = e.b.id();
    let carved_merge = e.b.id();
    let before_carve = e.current_label()?;
    e.b.selection_merge(carved_merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(got_free, carved_merge, carve, []).map_err(internal1)?;
    e.b.begin_block(Some(carve)).map_err(internal1)?;
    let used_addr = add64(e, heap, hp::USED)?;
    let cap_at = add64(e, heap, hp::CAPACITY)?;
    let cap = load(e, fx, Addr::Global(cap_at), K::Int(64), false)?;
    let fresh = cas_loop(e, fx, |e, _fx| {
        let u64t = e.t_int(64);
        let bt = e.t_bool();
        let used = word64(e, used_addr)?;
        let (scope, sem) = order(e);
        let acq = acquire(e);
        let old = e.b.atomic_load(u64t, None, used, scope, acq).map_err(internal1)?;
        let end = e.b.i_add(u64t, None, old, bsize64).map_err(internal1)?;
        let fits = e.b.u_less_than_equal(bt, None, end, cap).map_err(internal1)?;
        let new = e.b.select(u64t, None, fits, end, old).map_err(internal1)?;
        let acq2 = acquire(e);
        let got = e.b.atomic_compare_exchange(u64t, None, used, scope, sem, acq2, new, old).map_err(internal1)?;
        let won = e.b.i_equal(bt, None, got, old).map_err(internal1)?;
        let no_room = e.b.logical_not(bt, None, fits).map_err(internal1)?;
        let done = e.b.logical_or(bt, None, no_room, won).map_err(internal1)?;
        let off = add64(e, old, hp::HEADER_BYTES)?;
        let zero64 = e.c_int(64, 0);
        let val = e.b.select(u64t, None, fits, off, zero64).map_err(internal1)?;
        Ok((done, val))
    })?;
    let after_carve = e.current_label()?;
    e.b.branch(carved_merge).map_err(internal1)?;
    e.b.begin_block(Some(carved_merge)).map_err(internal1)?;
    let off = e.b.phi(u64t, None, [(popped, before_carve), (fresh, after_carve)]).map_err(internal1)?;

    // Write the block header (its class) and hand out the bytes after it.
    let found = e.b.i_not_equal(bt, None, off, zero64).map_err(internal1)?;
    let blk = e.b.i_add(u64t, None, heap, off).map_err(internal1)?;
    let write = e.b.id();
    let written = e.b.id();
    e.b.selection_merge(written, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(found, write, written, []).map_err(internal1)?;
    e.b.begin_block(Some(write)).map_err(internal1)?;
    store(e, fx, Addr::Global(blk), class, K::Int(32), false, inst.span)?;
    e.b.branch(written).map_err(internal1)?;
    e.b.begin_block(Some(written)).map_err(internal1)?;
    let user = add64(e, blk, hp::BLOCK_HEADER_BYTES as u64)?;
    let ptr = e.b.select(u64t, None, found, user, zero64).map_err(internal1)?;
    let last = e.current_label()?;
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    let result = e.b.phi(u64t, None, [(zero64, pre), (ptr, last)]).map_err(internal1)?;
    let _ = zero;
    store_param_u64(e, fx, ret, result)
}

/// `call free, (ptr)`: pushes the block on its class's free list. NULL, and
/// pointers that no `malloc` of this heap returned, are ignored.
pub(crate) fn free(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    rets: &[Operand],
    args: &[Operand],
) -> Result<(), Diagnostic> {
    let ([ptr_op], []) = (args, rets) else {
        return Err(Diagnostic::error(inst.span, "free takes (pointer) and returns nothing"));
    };
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let ptr = load_param_u64(e, fx, ptr_op)?;
    let heap = heap_base(e, fx, inst.span)?;
    let zero64 = e.c_int(64, 0);
    // Inside the heap's blocks: heap + HEADER + block header <= ptr < heap + HEADER + used.
    let have_heap = e.b.i_not_equal(bt, None, heap, zero64).map_err(internal1)?;
    let lo = add64(e, heap, hp::HEADER_BYTES + hp::BLOCK_HEADER_BYTES as u64)?;
    let above = e.b.u_greater_than_equal(bt, None, ptr, lo).map_err(internal1)?;
    let used_at = add64(e, heap, hp::USED)?;
    let used_ptr = word64(e, used_at)?;
    let (scope, _) = order(e);
    let acq = acquire(e);
    let used = e.b.atomic_load(u64t, None, used_ptr, scope, acq).map_err(internal1)?;
    let top = add64(e, heap, hp::HEADER_BYTES)?;
    let top = e.b.i_add(u64t, None, top, used).map_err(internal1)?;
    let below = e.b.u_less_than(bt, None, ptr, top).map_err(internal1)?;
    let ok = e.b.logical_and(bt, None, have_heap, above).map_err(internal1)?;
    let ok = e.b.logical_and(bt, None, ok, below).map_err(internal1)?;
    let body = e.b.id();
    let merge = e.b.id();
    e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(ok, body, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(body)).map_err(internal1)?;
    let blk = add64(e, ptr, (hp::BLOCK_HEADER_BYTES as u64).wrapping_neg())?;
    let off = e.b.i_sub(u64t, None, blk, heap).map_err(internal1)?;
    let off32 = e.b.u_convert(u32t, None, off).map_err(internal1)?;
    let class = load(e, fx, Addr::Global(blk), K::Int(32), true)?;
    let min = e.c_u32(hp::MIN_CLASS);
    let maxc = e.c_u32(hp::MAX_CLASS);
    let c_lo = e.b.u_greater_than_equal(bt, None, class, min).map_err(internal1)?;
    let c_hi = e.b.u_less_than_equal(bt, None, class, maxc).map_err(internal1)?;
    let valid = e.b.logical_and(bt, None, c_lo, c_hi).map_err(internal1)?;
    let push = e.b.id();
    let pushed = e.b.id();
    e.b.selection_merge(pushed, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(valid, push, pushed, []).map_err(internal1)?;
    e.b.begin_block(Some(push)).map_err(internal1)?;
    let head_addr = list_head(e, heap, class)?;
    let next_at = add64(e, blk, hp::NEXT_FIELD)?;
    cas_loop(e, fx, |e, fx| {
        let u32t = e.t_int(32);
        let u64t = e.t_int(64);
        let bt = e.t_bool();
        let head = word64(e, head_addr)?;
        let (scope, sem) = order(e);
        let acq = acquire(e);
        let old = e.b.atomic_load(u64t, None, head, scope, acq).map_err(internal1)?;
        let first = e.b.u_convert(u32t, None, old).map_err(internal1)?;
        store(e, fx, Addr::Global(next_at), first, K::Int(32), true, Span::default())?;
        let off64 = e.b.u_convert(u64t, None, off32).map_err(internal1)?;
        let new = next_head(e, old, off64)?;
        let acq2 = acquire(e);
        let got = e.b.atomic_compare_exchange(u64t, None, head, scope, sem, acq2, new, old).map_err(internal1)?;
        let won = e.b.i_equal(bt, None, got, old).map_err(internal1)?;
        let zero64 = e.c_int(64, 0);
        Ok((won, zero64))
    })?;
    e.b.branch(pushed).map_err(internal1)?;
    e.b.begin_block(Some(pushed)).map_err(internal1)?;
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    Ok(())
}
