//! The order in which llvmpipe runs a grid's blocks
//! ([`crate::Options::block_order_threads`]).
//!
//! llvmpipe (lavapipe) runs a dispatch of `N` workgroups on `T` worker
//! threads by handing each thread a contiguous run of `N / T` workgroups in
//! linear order (`x` fastest), the `N % T` left over one by one at the end.
//! So thread 1 starts on workgroup `N / T` while workgroup `N / T - 1` is the
//! last that thread 0 will run. CUDA promises no order either, but code
//! that waits on an earlier block (CUB's decoupled look-back scans, ticket
//! locks, stream compaction) relies on NVIDIA's hardware starting blocks in
//! order; under llvmpipe's split a block waits for a whole run of other
//! blocks, and its wait ends at llvmpipe's loop limiter (the launch fails).
//!
//! With the option at `T >= 2`, `%ctaid` is not the Vulkan workgroup id but
//! a permutation of it that makes each thread's run the blocks `t, t + T,
//! t + 2T, ...`: workgroup `p` (linear in its dispatch) with `p < q T`
//! (`q = N / T`) is block `(p mod q) T + p / q`; the rest keep their index.
//! Every thread then runs its blocks in order and the blocks running at
//! one time are consecutive, as on a GPU; with any other thread count the
//! mapping is still a permutation of the grid, only the order is not that.
//! The index is 32-bit, as llvmpipe's own count of a dispatch's workgroups.

use super::func::{internal1, Fx};
use super::{Emitter, TyKey};
use crate::diag::Diagnostic;
use rspirv::spirv::{Op, StorageClass, Word};

/// Decides whether `%ctaid` is permuted and declares the block's permuted
/// workgroup id, a private `uvec3` that every entry computes once at its
/// start ([`init`]), when the order is on and the module reads `%ctaid` or
/// checks races: the permutation costs four integer divisions, which
/// llvmpipe runs lane by lane, and a kernel reads `%ctaid` once per
/// component and often again in called functions.
///
/// The order is on only when some function of the module `polls`
/// ([`may_poll`]): a block can wait for another only by reading memory
/// the other writes, through an instruction the compiler may not hoist out
/// of the wait. Everywhere else the order cannot change a result (CUDA
/// promises none), and the divisions cost 10-20% of a memory-bound
/// kernel on lavapipe (`ptxvk-bench twins`).
pub(crate) fn declare(e: &mut Emitter, reads_ctaid: bool, polls: bool) {
    e.block_order_threads = if polls { e.opts.block_order_threads } else { 0 };
    if e.block_order_threads < 2 || !(reads_ctaid || e.race.is_some()) {
        return;
    }
    let u32t = e.t_int(32);
    let v3 = e.ty(TyKey::Vec(u32t, 3));
    let p = e.t_ptr(StorageClass::Private, v3);
    e.block_id = Some(e.b.variable(p, None, StorageClass::Private, None));
}

/// Whether `i` could be how a thread waits for another block: a load
/// another thread's store must reach (`.volatile`, `.relaxed`, `.acquire`,
/// or the `.cv`/`.cg` cache operators of older CUB's tile-status reads), an
/// atomic, a fence or `membar` (which keeps plain loads in a loop), an
/// mbarrier operation or `nanosleep` (a back-off). Conservative: a kernel
/// with any of these keeps the order.
pub(crate) fn may_poll(i: &crate::ast::Instruction) -> bool {
    match i.opcode.as_str() {
        "atom" | "membar" | "fence" | "mbarrier" | "nanosleep" => true,
        "ld" | "ldu" => ["volatile", "relaxed", "acquire", "cv", "cg", "mmio"].iter().any(|m| i.has(m)),
        _ => false,
    }
}

/// At the start of an entry: the permuted workgroup id, when declared.
pub(crate) fn init(e: &mut Emitter) -> Result<(), Diagnostic> {
    let Some(var) = e.block_id else { return Ok(()) };
    let c = workgroup_id(e)?;
    let c = permuted(e, c, e.block_order_threads)?;
    let u32t = e.t_int(32);
    let v3 = e.ty(TyKey::Vec(u32t, 3));
    let v = e.b.composite_construct(v3, None, c).map_err(internal1)?;
    e.b.store(var, v, None, []).map_err(internal1)
}

/// The block's `%ctaid` (x, y, z): its workgroup in the dispatch, permuted
/// as the module docs say when the option is on, plus the dispatch's base
/// (push-constant header words 0-2).
pub(crate) fn ctaid(e: &mut Emitter, fx: &Fx) -> Result<[Word; 3], Diagnostic> {
    let u32t = e.t_int(32);
    let threads = e.block_order_threads;
    let mut c = match e.block_id {
        Some(var) => {
            let v3 = e.ty(TyKey::Vec(u32t, 3));
            let v = e.b.load(v3, None, var, None, []).map_err(internal1)?;
            components(e, v)?
        }
        // A fault record of a module that does not read `%ctaid`.
        None if threads >= 2 => {
            let c = workgroup_id(e)?;
            permuted(e, c, threads)?
        }
        None => workgroup_id(e)?,
    };
    for (i, ci) in c.iter_mut().enumerate() {
        let base = e.push_word(fx, i as u32)?;
        *ci = e.bin_u32(Op::IAdd, *ci, base)?;
    }
    Ok(c)
}

/// The three components of a `uvec3`.
fn components(e: &mut Emitter, v: Word) -> Result<[Word; 3], Diagnostic> {
    let u32t = e.t_int(32);
    let mut c = [0; 3];
    for (i, ci) in c.iter_mut().enumerate() {
        *ci = e.b.composite_extract(u32t, None, v, [i as u32]).map_err(internal1)?;
    }
    Ok(c)
}

/// The `WorkgroupId` built-in, by component.
pub(crate) fn workgroup_id(e: &mut Emitter) -> Result<[Word; 3], Diagnostic> {
    let u32t = e.t_int(32);
    let v3 = e.ty(TyKey::Vec(u32t, 3));
    let id = e.b.load(v3, None, e.workgroup_id, None, []).map_err(internal1)?;
    components(e, id)
}

/// Workgroup `id`'s linear index in its dispatch, `x + nx (y + ny z)`, and
/// the dispatch's `NumWorkgroups` by component.
pub(crate) fn linear_workgroup(e: &mut Emitter, id: [Word; 3]) -> Result<(Word, [Word; 3]), Diagnostic> {
    let u32t = e.t_int(32);
    let v3 = e.ty(TyKey::Vec(u32t, 3));
    let n = e.b.load(v3, None, e.num_workgroups, None, []).map_err(internal1)?;
    let n = components(e, n)?;
    let zy = e.bin_u32(Op::IMul, id[2], n[1])?;
    let zy = e.bin_u32(Op::IAdd, zy, id[1])?;
    let p = e.bin_u32(Op::IMul, zy, n[0])?;
    let p = e.bin_u32(Op::IAdd, p, id[0])?;
    Ok((p, n))
}

/// Workgroup `id` of its dispatch as the block that thread order gives it.
fn permuted(e: &mut Emitter, id: [Word; 3], threads: u32) -> Result<[Word; 3], Diagnostic> {
    let u32t = e.t_int(32);
    let (p, [nx, ny, nz]) = linear_workgroup(e, id)?;
    let nxy = e.bin_u32(Op::IMul, nx, ny)?;
    let total = e.bin_u32(Op::IMul, nxy, nz)?;
    let t = e.c_u32(threads);
    let q = e.bin_u32(Op::UDiv, total, t)?;
    let qt = e.bin_u32(Op::IMul, q, t)?;
    let bt = e.t_bool();
    let in_runs = e.b.u_less_than(bt, None, p, qt).map_err(internal1)?;
    // q is 0 when the grid is smaller than the thread count: nothing is in
    // a run then, and the division below must not be by 0.
    let one = e.c_u32(1);
    let zero = e.c_u32(0);
    let q_zero = e.b.i_equal(bt, None, q, zero).map_err(internal1)?;
    let qs = e.b.select(u32t, None, q_zero, one, q).map_err(internal1)?;
    let j = e.bin_u32(Op::UMod, p, qs)?;
    let run = e.bin_u32(Op::UDiv, p, qs)?;
    let l = e.bin_u32(Op::IMul, j, t)?;
    let l = e.bin_u32(Op::IAdd, l, run)?;
    let l = e.b.select(u32t, None, in_runs, l, p).map_err(internal1)?;
    let x = e.bin_u32(Op::UMod, l, nx)?;
    let yz = e.bin_u32(Op::UDiv, l, nx)?;
    let y = e.bin_u32(Op::UMod, yz, ny)?;
    let z = e.bin_u32(Op::UDiv, l, nxy)?;
    Ok([x, y, z])
}
