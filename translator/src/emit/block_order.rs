//! The order in which llvmpipe runs a grid's blocks
//! ([`crate::Options::block_order_threads`]).
//!
//! llvmpipe (lavapipe) runs a dispatch of `N` workgroups on `T` worker
//! threads by cutting it into `T` contiguous runs of `N / T` workgroups in
//! linear order (`x` fastest), the `N % T` left over one by one at the end;
//! each idle worker takes the next run (Mesa's `lp_cs_tpool.c`). CUDA
//! promises no order either, but code that waits on an earlier block (CUB's
//! decoupled look-back scans, ticket locks, stream compaction) relies on
//! NVIDIA's hardware starting blocks in order; under llvmpipe's split the
//! first block of the second run waits for the whole first run, and its
//! wait ends at llvmpipe's loop limiter (the launch fails).
//!
//! With the option at `T >= 2`, in modules whose kernels may wait on
//! another block (a loop that polls, [`may_wait`]), `%ctaid` is not the
//! Vulkan workgroup id but the block's *ticket*: the number of blocks of its dispatch that started
//! before it ([`take_ticket`], one atomic add per block on a module data
//! word), delinearized over the dispatch's extent. A block then only ever
//! waits for blocks that started before it, which run on other workers or
//! have finished, as on a GPU, whichever worker takes which run.
//!
//! An earlier form permuted the workgroup id statically, to block
//! `(p mod q) T + p / q` for workgroup `p < qT` (`q = N / T`), assuming that
//! worker `t` runs run `t`. But a worker takes whichever run is next
//! (`lp_cs_tpool_worker`), so when one worker is slow to wake (a loaded
//! machine) the other may take run 0 and spin, its blocks waiting on run
//! 1's, until the late worker starts run 1. Entries that the resume pass
//! rewrote still use that permutation: their resume rounds dispatch the
//! grid again and must see each block's `%ctaid` again, which a ticket
//! (taken anew) would not give.
//!
//! The index is 32-bit, as llvmpipe's own count of a dispatch's workgroups.

use super::func::{internal1, Fx};
use super::values::K;
use super::{Emitter, TyKey};
use crate::diag::Diagnostic;
use rspirv::spirv::{Op, StorageClass, Word};

/// Workgroup words accounted for the block ticket's one word
/// ([`crate::abi::EntryInfo::block_ticket_words`]): the validation layer's
/// sum of a module's Workgroup variables came to 16 bytes more than their
/// sizes with one (`shared_spill`'s spilled 48 KiB kernels, 32,772 of 32,768
/// bytes).
pub(crate) const TICKET_WORDS: u32 = 16;

/// Decides whether `%ctaid` follows the start order and declares the
/// block's id in that order, a private `uvec3` that every entry computes
/// once at its start ([`init`]), and the Workgroup word that passes the
/// ticket to the block's invocations, when the order is on and the module
/// reads `%ctaid` or checks races (the ticket and its delinearization cost
/// an atomic and three integer divisions, which llvmpipe runs lane by lane;
/// a kernel reads `%ctaid` once per component and often again in called
/// functions). Whether the module needs the ticket counter's module data
/// word.
///
/// The order is on only when the module `polls` in a loop
/// ([`may_wait`]): a block can wait for another only by reading memory
/// the other writes ([`may_poll`]), through an instruction the compiler may
/// not hoist out of the wait, again and again. Everywhere else the order
/// cannot change a result (CUDA promises none), and the divisions cost
/// 10-20% of a memory-bound kernel on lavapipe (`ptxvk-bench twins`).
pub(crate) fn declare(e: &mut Emitter, reads_ctaid: bool, polls: bool) -> bool {
    e.block_order_threads = if polls { e.opts.block_order_threads } else { 0 };
    if e.block_order_threads < 2 || !(reads_ctaid || e.race.is_some()) {
        return false;
    }
    let u32t = e.t_int(32);
    let v3 = e.ty(TyKey::Vec(u32t, 3));
    let p = e.t_ptr(StorageClass::Private, v3);
    e.block_id = Some(e.b.variable(p, None, StorageClass::Private, None));
    let pw = e.t_ptr(StorageClass::Workgroup, u32t);
    e.block_ticket = Some(e.b.variable(pw, None, StorageClass::Workgroup, None));
    true
}

/// Whether `i` could be how a thread waits for another block: a load
/// another thread's store must reach (`.volatile`, `.relaxed`, `.acquire`,
/// or the `.cv`/`.cg` cache operators of older CUB's tile-status reads), an
/// atomic, a fence or `membar` (which keeps plain loads in a loop), an
/// mbarrier operation or `nanosleep` (a back-off), except loads and atomics
/// on `.shared` memory. Conservative: a kernel with any of these keeps the
/// order.
pub(crate) fn may_poll(i: &crate::ast::Instruction) -> bool {
    // Shared memory is the block's own: no other block writes it.
    if i.has("shared") && matches!(i.opcode.as_str(), "atom" | "ld" | "ldu") {
        return false;
    }
    match i.opcode.as_str() {
        "atom" | "membar" | "fence" | "mbarrier" | "nanosleep" => true,
        "ld" | "ldu" => ["volatile", "relaxed", "acquire", "cv", "cg", "mmio"].iter().any(|m| i.has(m)),
        _ => false,
    }
}

/// Whether a thread of `module` could wait for another block: only in a
/// loop, so only where an instruction that [`may_poll`] (not one of the
/// resume pass's own accesses), or a call of a function that polls
/// (itself or through its calls), lies on a cycle of its function's
/// control-flow graph, or a polling function is recursive. An atomic
/// counter, a histogram's `atom.add` or a fence outside any loop waits for
/// nothing, and its kernel keeps the workgroup order, which costs nothing
/// (the ticket costs about 1.8 µs per block on lavapipe). An indirect call
/// counts as a call of a polling function when the module has one.
/// Conservative where a body does not form a graph (the emitter reports
/// that): it may wait.
pub(crate) fn may_wait(module: &crate::ast::Module) -> bool {
    use crate::ast::{Instruction, ModuleItem, Statement};
    fn walk<'a>(stmts: &'a [Statement], out: &mut Vec<&'a Instruction>) {
        for s in stmts {
            match s {
                Statement::Inst(i) => out.push(i),
                Statement::Block(b) => walk(b, out),
                _ => {}
            }
        }
    }
    let polls = |i: &Instruction| may_poll(i) && !crate::resume::is_internal_access(i);
    // Every function with a body: itself, its instructions, its direct callees.
    let funcs: Vec<_> = module
        .items
        .iter()
        .filter_map(|i| match i {
            ModuleItem::Function(f) => f.body.as_deref().map(|b| {
                let mut insts = Vec::new();
                walk(b, &mut insts);
                let callees: Vec<&str> = insts.iter().filter_map(|i| i.direct_callee()).collect();
                (f, b, insts, callees)
            }),
            _ => None,
        })
        .collect();
    let polling = crate::progress::functions_with(
        &mut funcs.iter().map(|(f, _, insts, callees)| (f.name.as_str(), insts.clone(), callees.clone())),
        &polls,
    );
    if polling.is_empty() {
        return false;
    }
    let index: std::collections::HashMap<&str, usize> =
        funcs.iter().enumerate().map(|(k, (f, ..))| (f.name.as_str(), k)).collect();
    let calls_polling = |i: &Instruction| {
        i.opcode == "call"
            && match i.direct_callee() {
                // A declaration without a body (vprintf, malloc) is not in
                // the set: no wait of the module's own.
                Some(name) => polling.contains(name),
                // An indirect call.
                None => true,
            }
    };
    // Recursion through a polling function.
    let callees: Vec<Vec<usize>> =
        funcs.iter().map(|(.., cs)| cs.iter().filter_map(|c| index.get(c).copied()).collect()).collect();
    let cycles = crate::reducible::strongly_connected(funcs.len(), 0..funcs.len(), |v, i| callees[v].get(i).copied());
    let polls_at = |k: usize| polling.contains(funcs[k].0.name.as_str());
    if cycles.iter().any(|c| c.iter().any(|&k| polls_at(k)) && (c.len() > 1 || callees[c[0]].contains(&c[0]))) {
        return true;
    }
    funcs.iter().enumerate().any(|(k, (f, body, ..))| {
        if !polls_at(k) {
            return false;
        }
        let scoped = super::scoped_body(f, body);
        let Ok(cfg) = crate::cfg::run(&scoped, f.kind == crate::ast::FunctionKind::Func) else { return true };
        let n = cfg.blocks.len();
        let sccs = crate::reducible::strongly_connected(n, 0..n, |v, i| cfg.successors(v).iter().copied().nth(i));
        sccs.iter().any(|c| {
            let cyclic = c.len() > 1 || cfg.successors(c[0]).contains(&c[0]);
            cyclic && c.iter().any(|&b| cfg.blocks[b].insts.iter().any(|i| polls(i) || calls_polling(i)))
        })
    })
}

/// At the start of an entry: the block's workgroup id in start order (a
/// ticket, see the module docs), or, in an entry that `resumes` (whose
/// resume rounds must see the same `%ctaid` again), the permuted one.
pub(crate) fn init(e: &mut Emitter, resumes: bool) -> Result<(), Diagnostic> {
    let Some(var) = e.block_id else { return Ok(()) };
    let c = match (e.block_ticket, e.block_ticket_offset, resumes) {
        (Some(ticket), Some(off), false) => {
            let (p, n) = take_ticket(e, ticket, off)?;
            delinearized(e, p, n)?
        }
        _ => {
            let c = workgroup_id(e)?;
            permuted(e, c, e.block_order_threads)?
        }
    };
    let u32t = e.t_int(32);
    let v3 = e.ty(TyKey::Vec(u32t, 3));
    let v = e.b.composite_construct(v3, None, c).map_err(internal1)?;
    e.b.store(var, v, None, []).map_err(internal1)
}

/// The block's index in the order in which its dispatch's blocks start:
/// invocation 0 takes the next value of the module's ticket counter
/// (module data at `off`) and leaves it in the Workgroup word `ticket`, where
/// every invocation reads it. llvmpipe runs a workgroup's subgroups one
/// after another on one thread, starting with the one that holds
/// invocation 0, each until its first barrier: the others read the word
/// after it was written, with no barrier of the translator's own. The block
/// that takes the dispatch's last ticket takes the dispatch's count back
/// off the counter, which is then 0 again for the next dispatch (llvmpipe
/// runs one dispatch at a time, each to its end).
fn take_ticket(e: &mut Emitter, ticket: Word, off: u64) -> Result<(Word, [Word; 3]), Diagnostic> {
    let Some(base) = e.module_data_address()? else {
        return Err(Diagnostic::error(Default::default(), "internal error: no module data for the block ticket"));
    };
    let u32t = e.t_int(32);
    let n = num_workgroups(e)?;
    let nxy = e.bin_u32(Op::IMul, n[0], n[1])?;
    let total = e.bin_u32(Op::IMul, nxy, n[2])?;
    let li = e.b.load(u32t, None, e.local_index, None, []).map_err(internal1)?;
    let zero = e.c_u32(0);
    let bt = e.t_bool();
    let first = e.b.i_equal(bt, None, li, zero).map_err(internal1)?;
    let device = e.c_u32(rspirv::spirv::Scope::Device as u32);
    let workgroup = e.c_u32(rspirv::spirv::Scope::Workgroup as u32);
    let relaxed = e.c_u32(0);
    super::grid::if_then(e, first, |e| {
        let a = super::printf::add64(e, base, off)?;
        let counter = super::mem::psb_ptr(e, K::Int(32), a)?;
        let one = e.c_u32(1);
        let t = e.b.atomic_i_add(u32t, None, counter, device, relaxed, one).map_err(internal1)?;
        let next = e.bin_u32(Op::IAdd, t, one)?;
        let last = e.b.i_equal(bt, None, next, total).map_err(internal1)?;
        super::grid::if_then(e, last, |e| {
            e.b.atomic_i_sub(u32t, None, counter, device, relaxed, total).map_err(internal1)?;
            Ok(())
        })?;
        e.b.atomic_exchange(u32t, None, ticket, workgroup, relaxed, t).map_err(internal1)?;
        Ok(())
    })?;
    // A read-modify-write, not a load: llvmpipe's compiler forwards a load
    // from the last store on its path, and this lane's path skipped it.
    // Where subgroup ballots are offered (`uniform_params`), one lane per
    // subgroup reads and broadcasts it: llvmpipe runs an atomic lane by lane,
    // and a value it sees is the same in every lane is kept scalar, so the
    // divisions below run once, not per lane (together 2.5 times the time of
    // a 16M-element saxpy without checks when every lane read and divided).
    let t = match e.block_id.filter(|_| e.opts.uniform_params) {
        Some(id) => {
            e.cap(rspirv::spirv::Capability::GroupNonUniform);
            e.cap(rspirv::spirv::Capability::GroupNonUniformBallot);
            let subgroup = e.c_u32(rspirv::spirv::Scope::Subgroup as u32);
            let elected = e.b.op(Op::GroupNonUniformElect, bt, None, &[subgroup]).map_err(internal1)?;
            // The block id's x component, written again at the end of `init`,
            // holds the elected lane's read.
            let pu = e.t_ptr(StorageClass::Private, u32t);
            let slot = e.b.access_chain(pu, None, id, [zero]).map_err(internal1)?;
            super::grid::if_then(e, elected, |e| {
                let v = e.b.atomic_or(u32t, None, ticket, workgroup, relaxed, zero).map_err(internal1)?;
                e.b.store(slot, v, None, []).map_err(internal1)
            })?;
            let v = e.b.load(u32t, None, slot, None, []).map_err(internal1)?;
            e.b.group_non_uniform_broadcast_first(u32t, None, subgroup, v).map_err(internal1)?
        }
        None => e.b.atomic_or(u32t, None, ticket, workgroup, relaxed, zero).map_err(internal1)?,
    };
    // In range whatever the counter held.
    Ok((e.bin_u32(Op::UMod, t, total)?, n))
}

/// Linear block index `l` of a dispatch of `n` blocks as (x, y, z).
fn delinearized(e: &mut Emitter, l: Word, n: [Word; 3]) -> Result<[Word; 3], Diagnostic> {
    let nxy = e.bin_u32(Op::IMul, n[0], n[1])?;
    let x = e.bin_u32(Op::UMod, l, n[0])?;
    let yz = e.bin_u32(Op::UDiv, l, n[0])?;
    let y = e.bin_u32(Op::UMod, yz, n[1])?;
    let z = e.bin_u32(Op::UDiv, l, nxy)?;
    Ok([x, y, z])
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
    let n = num_workgroups(e)?;
    let zy = e.bin_u32(Op::IMul, id[2], n[1])?;
    let zy = e.bin_u32(Op::IAdd, zy, id[1])?;
    let p = e.bin_u32(Op::IMul, zy, n[0])?;
    let p = e.bin_u32(Op::IAdd, p, id[0])?;
    Ok((p, n))
}

/// The dispatch's `NumWorkgroups`, by component.
fn num_workgroups(e: &mut Emitter) -> Result<[Word; 3], Diagnostic> {
    let u32t = e.t_int(32);
    let v3 = e.ty(TyKey::Vec(u32t, 3));
    let n = e.b.load(v3, None, e.num_workgroups, None, []).map_err(internal1)?;
    components(e, n)
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
    delinearized(e, l, [nx, ny, nz])
}
