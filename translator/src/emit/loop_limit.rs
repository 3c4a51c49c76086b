//! Loop-limit detection ([`crate::Options::loop_limit`], for llvmpipe).
//!
//! llvmpipe (lavapipe) ends loops with a "loop limiter": one counter per
//! shader invocation (an 8-lane vector), set to 65535 at the start of the
//! shader, decremented at the end of every vector iteration of every loop;
//! at 0 every loop exits, whatever its condition, and the kernel goes on in
//! the wrong place (docs/cooperative.md). Rather than compute wrong results
//! silently, a module translated with the option counts loop iterations the
//! same way and fails the launch when a loop would go on after the budget is
//! spent. The driver decrements at the end of every vector iteration (the
//! last one too, where every lane leaves) and goes round again only while
//! the budget is above 0; so measured, one loop of 65535 iterations is whole
//! and one of 65536 is cut short, and 256 x 255 nested iterations are whole
//! (the 65536th decrement comes where every lane leaves).
//!
//! - a `Private` u32 counter per invocation (visible to every function, so
//!   loops in callees count too), 0 at the start;
//! - [`check`], where a lane is about to take a back-edge: the counter adds
//!   1, and at [`LIMIT`] sets [`crate::abi::printf::TRAP_LOOP_LIMIT`] in the
//!   trap word (llvmpipe ends the loop itself; the runtime fails the launch);
//! - [`merged`], at each loop's merge block: the counter becomes its
//!   subgroup maximum plus 1 (the iteration every lane leaves in); the
//!   driver runs a vector iteration while any lane loops, so lanes that left
//!   early catch up with the others.
//!
//! Gaps (the count can be lower than the driver's, never higher): lanes of
//! one vector that run different loops (two arms of a divergent `if`) each
//! count only their own, while llvmpipe runs both arms one after the other
//! and counts both; a loop in an arm no lane of the vector takes may cost
//! the driver one iteration, which nobody counts.

use super::func::{internal1, set_trap_word};
use super::Emitter;
use crate::diag::Diagnostic;
use rspirv::spirv::{self, Capability, GroupOperation, Scope, SelectionControl, StorageClass, Word};

/// Loop iterations an invocation may run in all (llvmpipe's `LP_MAX_TGSI_LOOP_ITERATIONS`).
pub(crate) const LIMIT: u32 = crate::abi::printf::LOOP_LIMIT;

/// The module's counter variable, when the option is on (created before any function).
pub(crate) fn counter(e: &mut Emitter) -> Option<Word> {
    if !e.opts.loop_limit {
        return None;
    }
    let u32t = e.t_int(32);
    let pt = e.t_ptr(StorageClass::Private, u32t);
    let zero = e.c_u32(0);
    Some(e.b.variable(pt, None, StorageClass::Private, Some(zero)))
}

/// The `OpLoopMerge` of a counted loop (one with [`check`] and [`merged`]).
pub(crate) fn loop_merge(e: &mut Emitter, merge: Word, cont: Word) -> Result<(), Diagnostic> {
    e.b.loop_merge(merge, cont, spirv::LoopControl::NONE, []).map_err(internal1)
}

/// Where a lane takes a back-edge (when `again` is true, if given): count
/// the iteration, and trap when the budget is spent. Ends the current block
/// and goes on in a new one, so it must not be where a phi names the
/// current block.
pub(crate) fn check(e: &mut Emitter, again: Option<Word>) -> Result<(), Diagnostic> {
    let Some(var) = e.loop_counter else {
        return Ok(());
    };
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let one = e.c_u32(1);
    let inc = match again {
        Some(a) => {
            let zero = e.c_u32(0);
            e.b.select(u32t, None, a, one, zero).map_err(internal1)?
        }
        None => one,
    };
    let n = e.b.load(u32t, None, var, None, []).map_err(internal1)?;
    let n = e.b.i_add(u32t, None, n, inc).map_err(internal1)?;
    e.b.store(var, n, None, []).map_err(internal1)?;
    let limit = e.c_u32(LIMIT);
    let mut spent = e.b.u_greater_than_equal(bt, None, n, limit).map_err(internal1)?;
    if let Some(a) = again {
        spent = e.b.logical_and(bt, None, spent, a).map_err(internal1)?;
    }
    let yes = e.b.id();
    let next = e.b.id();
    e.b.selection_merge(next, SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(spent, yes, next, []).map_err(internal1)?;
    e.b.begin_block(Some(yes)).map_err(internal1)?;
    set_trap_word(e, crate::abi::printf::TRAP_LOOP_LIMIT)?;
    e.b.branch(next).map_err(internal1)?;
    e.b.begin_block(Some(next)).map_err(internal1)?;
    Ok(())
}

/// At a loop's merge block: the counter becomes the subgroup's maximum plus
/// 1 (the last iteration).
pub(crate) fn merged(e: &mut Emitter) -> Result<(), Diagnostic> {
    let Some(var) = e.loop_counter else {
        return Ok(());
    };
    e.cap(Capability::GroupNonUniform);
    e.cap(Capability::GroupNonUniformArithmetic);
    let u32t = e.t_int(32);
    let scope = e.c_u32(Scope::Subgroup as u32);
    let n = e.b.load(u32t, None, var, None, []).map_err(internal1)?;
    let m = e.b.group_non_uniform_u_max(u32t, None, scope, GroupOperation::Reduce, n, None).map_err(internal1)?;
    let one = e.c_u32(1);
    let m = e.b.i_add(u32t, None, m, one).map_err(internal1)?;
    e.b.store(var, m, None, []).map_err(internal1)?;
    Ok(())
}
