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
//! - each lane keeps the count in a `Private` u32 (visible to every
//!   function, so loops in callees count too); active lanes hold the same
//!   value. [`check`], where a lane is about to take a back-edge, adds 1 and,
//!   at [`LIMIT`], remembers it in a `Private` flag; [`flush`], where the
//!   entry returns, sets [`crate::abi::printf::TRAP_LOOP_LIMIT`] in the trap
//!   word for a lane with the flag (llvmpipe ends the loop itself, and every
//!   later loop of the lane at once; the runtime fails the launch);
//! - the subgroup (llvmpipe's vector) shares its count in a `Workgroup`
//!   array of [`SLOTS`] indexed by `SubgroupId`, set to 0 at the start of
//!   the entry point. [`merged`], at a loop's merge block, raises it to the
//!   largest count of the active lanes plus 1 (the iteration every lane
//!   leaves in) with an atomic maximum, and every lane takes the result
//!   (lanes that left early counted less); [`enter`], before a loop,
//!   raises the lane's count to it. So lanes in the second arm of a
//!   divergent branch see what the first arm's loops cost, as llvmpipe
//!   runs both arms one after the other. The read in [`enter`] is an
//!   atomic read-modify-write: llvmpipe's compiler forwarded a plain or
//!   atomic load from the last store on its own path (the zero at the
//!   start), missing the other arm's store. Each access is made by the
//!   subgroup's first active lane alone ([`by_one_lane`]);
//! - [`branch`], before a two-way branch with loops in its arms: an arm no
//!   lane takes still runs on llvmpipe with an empty mask, one iteration per
//!   loop in it; those are added.
//!
//! - the count can fall behind the driver's: llvmpipe also counts the
//!   one-pass loop constructs its compiler keeps (escape regions in
//!   workgroup-uniform code, such as the dispatch loop of a spin region
//!   that yields, `progress.rs`), which the translator cannot see. So a cut
//!   is also detected where it happens: a lane sets a `Private` *pending*
//!   flag where it takes a back-edge ([`check`]) and clears it in the loop's
//!   header ([`loop_merge`]); a lane that arrives at the merge block still
//!   pending was sent there by the limiter ([`merged`] sets the tripped
//!   flag). The flag is read at an opaque zero index, so that the driver's
//!   compiler, which sees only structured exits, cannot fold the test away.
//!   (Before, a wait in a branch of such a kernel was cut at half the
//!   budget and the launch succeeded with its outputs unwritten.) The flag
//!   says which loop: the resume pass's site number of it, or
//!   [`CUT_OTHER`];
//!   The translator's own retry loops (compare-and-swap atomics, 16-byte
//!   stores) have no flag: their one exit is the loop's test, so the
//!   test's `again` at the merge says the same ([`retry_check`]);
//! - in an entry the resume pass rewrote, a lane cut in one of the pass's
//!   loops (a *site*) saves itself at the loop's merge instead
//!   ([`cut_at_site`], `func.rs`'s `save_if_cut`): it took the back-edge,
//!   so its registers are those of the loop's header, and it goes on there
//!   in the next resume round as if the header's check had stopped it. Only
//!   a lane that cannot be saved (no round left, the records full) fails
//!   the launch. So a count that falls behind the driver's costs a round
//!   instead of the launch (NVIDIA Warp's `fem` lookups, whose early exits
//!   make one-pass constructs that llvmpipe's compiler keeps).
//!
//! Only entries that the resume pass rewrote count ([`counting`]), and of
//! those only the ones where a cut could land where no lane can save
//! itself: in one of the translator's own loops (`printf`'s, an atomic's
//! compare-and-swap) or in a loop that is no site. The pass reads the
//! count to stop a thread before the limiter would. In every
//! other entry the pending flag alone fails the launch, and exactly where
//! the limiter cuts: a cut always happens at a back-edge, so the loop cut
//! first, or (when the budget ran out in a construct without the flag) the
//! next loop the lane goes round in, leaves a lane pending at a merge.
//! `runtime/tests/loop_limit.rs` (65535 iterations run, 65536 fail; nested,
//! one after the other, divergent arms) passes either way. Not counting
//! saves the atomic read and maximum per loop, the subgroup vote per branch
//! around loops and the count per back-edge (the grid-stride loop of
//! `ptxvk-bench twins reduce`, a workgroup-uniform kernel: about 1.1x).
//!
//! The shared counters take `SLOTS` words, accounted in
//! [`crate::abi::EntryInfo::loop_counter_words`], only in entries that may
//! loop ([`may_loop`]), counting or not.
//!
//! Gaps of the count (where it counts): it follows the translator's structured control flow, not
//! what llvmpipe's compiler makes of it. Measured, it is exact for one loop,
//! loops one after the other
//! and nested loops, and one iteration early for the divergent fixture
//! (llvmpipe allowed one more there). Not counted: loops after the point
//! where every lane of the vector has left a loop (`break`) or returned,
//! which llvmpipe still runs once with an empty mask; loops in callees
//! other than `vprintf` called from an arm no lane takes (at most two are
//! counted); warp emulation's internal loops in an arm no lane takes (the
//! translator's other internal loops there are counted, [`idle_loops`]).
//! A branch llvmpipe's compiler finds
//! uniform skips its idle arm, where the count still adds its loops (early,
//! not late). Subgroups narrower than 8 lanes in workgroups of more than
//! 1024 / 8 subgroups would share counters.

use super::func::{internal1, set_trap_word};
use super::values::K;
use super::{Emitter, TyKey};
use crate::diag::{Diagnostic, Span};
use crate::structurize::Region;
use rspirv::dr::Operand as SOp;
use rspirv::spirv::{self, Capability, Scope, StorageClass, Word};

/// Loop iterations an invocation may run in all (llvmpipe's `LP_MAX_TGSI_LOOP_ITERATIONS`).
pub(crate) const LIMIT: u32 = crate::abi::printf::LOOP_LIMIT;

/// Counters per workgroup: one per subgroup (1024 invocations of 8).
pub(crate) const SLOTS: u32 = 128;

/// The pending flag of a lane in a loop that is no resume site (see
/// [`Counter`]'s `pending`).
const CUT_OTHER: u32 = 1;
/// The pending flag of a lane in the loop of resume site `k`: this plus `k`.
const CUT_SITE: u32 = 2;

/// Whether a function may loop: it has loops, or instructions whose code
/// has loops of its own (compare-and-swap atomics, emulated warp operations,
/// calls: printf, malloc, grid synchronisation, other functions).
pub(crate) fn may_loop(p: &super::func::Plan) -> bool {
    const LOOPING: [&str; 7] = ["atom", "red", "shfl", "vote", "match", "redux", "call"];
    loops_in(&p.regions) > 0
        || loops_in(&p.uniform_regions) > 0
        || p.instructions().any(|i| LOOPING.iter().any(|o| i.opcode.starts_with(o)))
}

/// The module's counters, when the option is on (created before any
/// function): a `Workgroup` array with one counter per subgroup, and the
/// `SubgroupId` input. Both go into every entry point's interface.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counter {
    slots: Word,
    subgroup_id: Word,
    /// `Private` u32: the count as this lane knows it.
    lane: Word,
    /// `Private` bool: the lane took a back-edge past the budget.
    tripped: Word,
    /// `Private` `u32[2]`, used at an opaque zero index: not 0 where the
    /// lane took a back-edge and has not yet arrived at the loop's header
    /// (see [`merged`]): [`CUT_SITE`] plus the resume pass's site number
    /// of the loop (`crate::resume`), or [`CUT_OTHER`] for a loop without
    /// one.
    pending: Word,
    /// Whether this entry counts iterations (the resume pass reads the
    /// count, see [`counting`]); otherwise only the pending flag detects
    /// a cut.
    pub(crate) counts: bool,
}

impl Counter {
    /// The same counter, counting (or not) in the entry being emitted.
    pub(crate) fn with_counts(self, counts: bool) -> Counter {
        Counter { counts, ..self }
    }

    /// The variables, for entry point interfaces: all of them, counting or
    /// not (the counters' Workgroup words are accounted in every entry that
    /// may loop, [`crate::abi::EntryInfo::loop_counter_words`]: the
    /// validation layer counts the module's Workgroup variables against the
    /// device's limit, and `shared_spill` plans the rest of the memory).
    pub(crate) fn interface(&self) -> [Word; 5] {
        [self.slots, self.subgroup_id, self.lane, self.tripped, self.pending]
    }
}

pub(crate) fn counter(e: &mut Emitter) -> Option<Counter> {
    if !e.opts.loop_limit {
        return None;
    }
    e.cap(Capability::GroupNonUniform);
    let u32t = e.t_int(32);
    let n = e.c_u32(SLOTS);
    let arr = e.ty(TyKey::Array(u32t, n));
    let pt = e.t_ptr(StorageClass::Workgroup, arr);
    let slots = e.b.variable(pt, None, StorageClass::Workgroup, None);
    let pi = e.t_ptr(StorageClass::Input, u32t);
    let subgroup_id = e.b.variable(pi, None, StorageClass::Input, None);
    e.b.decorate(subgroup_id, spirv::Decoration::BuiltIn, [SOp::BuiltIn(spirv::BuiltIn::SubgroupId)]);
    let pp = e.t_ptr(StorageClass::Private, u32t);
    let zero = e.c_u32(0);
    let lane = e.b.variable(pp, None, StorageClass::Private, Some(zero));
    let bt = e.t_bool();
    let pb = e.t_ptr(StorageClass::Private, bt);
    let no = e.c_bool(false);
    let tripped = e.b.variable(pb, None, StorageClass::Private, Some(no));
    let two = e.c_u32(2);
    let pair = e.ty(TyKey::Array(u32t, two));
    let pp = e.t_ptr(StorageClass::Private, pair);
    let pending = e.b.variable(pp, None, StorageClass::Private, None);
    Some(Counter { slots, subgroup_id, lane, tripped, pending, counts: true })
}

/// Whether an entry whose functions are `all` counts iterations: only where
/// the resume pass rewrote it (it reads the count to stop a thread before
/// the limiter would). Elsewhere the pending flag ([`merged`]) is enough to
/// fail the launch: it sees every cut of a counted loop where it happens,
/// and a lane whose budget ran out in some other loop construct (one that
/// no lane iterates, or an internal one) is cut at the back-edge of the
/// next counted loop it iterates, which the flag sees too. Counting cost
/// the grid-stride loop of `ptxvk-bench twins reduce` (a workgroup-uniform
/// kernel) an atomic maximum and an atomic read per loop, a subgroup vote
/// per branch around loops and the count per iteration.
///
/// And only where a cut could not be recovered, unless `always`
/// ([`crate::Options::resume_count`]): where every loop construct of the
/// entry is a loop of the resume pass (a site) and no instruction's code
/// loops on its own ([`cuts_recoverable`]), a lane the limiter cuts saves
/// itself at the loop's merge (`func.rs`, `save_if_cut`) and goes on in the
/// next round, and the count would only stop it earlier. Measured
/// (`ptxvk-bench loops`, loops of 4 iterations): the count cost such an
/// entry about 1.2x.
pub(crate) fn counting(all: &[&super::func::Plan], always: bool) -> bool {
    all.iter().any(|p| p.func.body.as_deref().is_some_and(crate::resume::rewritten) && (always || !cuts_recoverable(p)))
}

/// Whether every cut of the limiter in `p` (an entry the resume pass
/// rewrote) lands where the lane can save itself: every loop of its
/// regions is one of the pass's sites, and no instruction has a loop of the
/// translator's own that runs with active lanes and that the limiter could
/// cut half way (`printf`'s copy and count of its arguments, an atomic's
/// compare-and-swap loop, the lock of a 16-byte store).
fn cuts_recoverable(p: &super::func::Plan) -> bool {
    fn sites_only(cfg: &crate::cfg::Cfg, regions: &[Region]) -> bool {
        regions.iter().all(|r| match r {
            Region::Loop { header, body } => {
                crate::resume::site_of_header(cfg, *header).is_some() && sites_only(cfg, body)
            }
            Region::Block { body, .. } => sites_only(cfg, body),
            Region::If { then_body, else_body, .. } => sites_only(cfg, then_body) && sites_only(cfg, else_body),
            Region::Code(_) | Region::Br(_) | Region::Return => true,
        })
    }
    let own_loop = |i: &crate::ast::Instruction| {
        i.opcode == "call"
            || (matches!(i.opcode.as_str(), "atom" | "red") && cas_loop(i))
            || super::vector16::has_loop(i)
    };
    p.uniform_regions.is_empty() && sites_only(&p.cfg, &p.regions) && !p.instructions().any(own_loop)
}

/// The lane's pending flag (a pointer; see [`merged`]). The index is an
/// opaque zero, so that the driver's compiler keeps the flag in memory and
/// cannot fold the test in [`merged`] (by the structured control flow it
/// sees, the flag is always false there).
fn pending(e: &mut Emitter, c: Counter) -> Result<Word, Diagnostic> {
    let zero = super::zero::opaque_zero(e, 32)?;
    let u32t = e.t_int(32);
    let pt = e.t_ptr(StorageClass::Private, u32t);
    e.b.access_chain(pt, None, c.pending, [zero]).map_err(internal1)
}

/// The subgroup's counter (a pointer).
fn slot(e: &mut Emitter, c: Counter) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let id = e.b.load(u32t, None, c.subgroup_id, None, []).map_err(internal1)?;
    let mask = e.c_u32(SLOTS - 1);
    let i = e.b.bitwise_and(u32t, None, id, mask).map_err(internal1)?;
    let pt = e.t_ptr(StorageClass::Workgroup, u32t);
    e.b.access_chain(pt, None, c.slots, [i]).map_err(internal1)
}

/// `access(counter)` (an atomic on the subgroup's counter, returning a
/// u32) in the subgroup's first active lane only, its result given to
/// every active lane. The accesses are atomic (relaxed): plain ones let the
/// driver's compiler forward a store on one path of a branch to a load on
/// another, while llvmpipe runs both. And one lane does them: llvmpipe runs
/// a Workgroup atomic lane by lane, each a compare-and-swap loop for the
/// read-modify-writes, and three per lane of every thread with a loop cost
/// a quarter of a resumable entry's time with a loop of one iteration
/// (`ptxvk-bench loops`).
fn by_one_lane(
    e: &mut Emitter,
    c: Counter,
    access: &mut dyn FnMut(&mut Emitter, Word) -> Result<Word, Diagnostic>,
) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let first = first_lane(e)?;
    let v = super::mem::either(e, first, Some(K::Int(32)), "loop count", &mut |e, elected| {
        if !elected {
            return Ok(Some(e.c_u32(0)));
        }
        let p = slot(e, c)?;
        access(e, p).map(Some)
    })?
    .ok_or_else(|| Diagnostic::error(Span::default(), "internal error: loop count"))?;
    // The elected lane is the first active one, whose value this takes.
    let scope = e.c_u32(Scope::Subgroup as u32);
    e.b.group_non_uniform_broadcast_first(u32t, None, scope, v).map_err(internal1)
}

/// `OpGroupNonUniformElect`: true in the subgroup's first active lane.
fn first_lane(e: &mut Emitter) -> Result<Word, Diagnostic> {
    let bt = e.t_bool();
    e.cap(Capability::GroupNonUniformBallot);
    let scope = e.c_u32(Scope::Subgroup as u32);
    e.b.op(spirv::Op::GroupNonUniformElect, bt, None, &[scope]).map_err(internal1)
}

/// The count of the vector (the subgroup's largest lane count; 0 where
/// loops are not counted), for the resume pass (`%__ptxvk_loop_count`,
/// `crate::resume`). A subgroup reduction, so that the driver's compiler
/// sees a uniform value and a uniform branch on it, which it can fold where
/// the count is a constant (0 where the entry does not count). (llvmpipe
/// runs an arm no lane takes masked, uniform or not: measured 2026-12-07.)
pub(crate) fn lane_count(e: &mut Emitter) -> Result<Word, Diagnostic> {
    let Some(c) = e.loop_counter.filter(|c| c.counts) else {
        return Ok(e.c_u32(0));
    };
    let u32t = e.t_int(32);
    let v = e.b.load(u32t, None, c.lane, None, []).map_err(internal1)?;
    e.cap(Capability::GroupNonUniformArithmetic);
    let scope = e.c_u32(Scope::Subgroup as u32);
    let reduce = spirv::GroupOperation::Reduce as u32;
    e.b.op(spirv::Op::GroupNonUniformUMax, u32t, None, &[scope, reduce, v]).map_err(internal1)
}

/// At the start of an entry point: the subgroup's counter is 0. Every lane
/// of a subgroup stores the same value, here and below.
pub(crate) fn init(e: &mut Emitter) -> Result<(), Diagnostic> {
    let Some(c) = e.loop_counter.filter(|c| c.counts) else {
        return Ok(());
    };
    // By the first lane alone, as the accesses of [`by_one_lane`].
    let first = first_lane(e)?;
    super::grid::if_then(e, first, |e| {
        let p = slot(e, c)?;
        let scope = e.c_u32(Scope::Subgroup as u32);
        let sem = e.c_u32(0);
        let zero = e.c_u32(0);
        e.b.atomic_store(p, scope, sem, zero).map_err(internal1)
    })
}

/// Add `n` (a value the same in every active lane) to the lane's count; the new count.
fn add(e: &mut Emitter, c: Counter, n: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let v = e.b.load(u32t, None, c.lane, None, []).map_err(internal1)?;
    let v = e.b.i_add(u32t, None, v, n).map_err(internal1)?;
    e.b.store(c.lane, v, None, []).map_err(internal1)?;
    Ok(v)
}

/// Before a counted loop (where its header is entered from outside): the
/// lane's count catches up with the subgroup's, which lanes in an arm run
/// before this one may have raised. Ends the current block (the access is
/// in a branch, see [`by_one_lane`]): take the label of the loop's
/// preheader after this.
pub(crate) fn enter(e: &mut Emitter) -> Result<(), Diagnostic> {
    let Some(c) = e.loop_counter.filter(|c| c.counts) else {
        return Ok(());
    };
    let u32t = e.t_int(32);
    // A read-modify-write: the driver's compiler forwards a plain (or
    // atomic) load from the last store on its path, which misses a store
    // in the other arm of a branch that llvmpipe ran first.
    let shared = by_one_lane(e, c, &mut |e, p| {
        let scope = e.c_u32(Scope::Subgroup as u32);
        let sem = e.c_u32(0);
        let zero = e.c_u32(0);
        e.b.atomic_or(u32t, None, p, scope, sem, zero).map_err(internal1)
    })?;
    let own = e.b.load(u32t, None, c.lane, None, []).map_err(internal1)?;
    let bt = e.t_bool();
    let ahead = e.b.u_greater_than(bt, None, own, shared).map_err(internal1)?;
    let v = e.b.select(u32t, None, ahead, own, shared).map_err(internal1)?;
    e.b.store(c.lane, v, None, []).map_err(internal1)?;
    Ok(())
}

/// The `OpLoopMerge` of a counted loop (one with [`check`] and [`merged`]),
/// in its header: the lane is no longer pending (see [`merged`]).
pub(crate) fn loop_merge(e: &mut Emitter, merge: Word, cont: Word) -> Result<(), Diagnostic> {
    if let Some(c) = e.loop_counter {
        let p = pending(e, c)?;
        let no = e.c_u32(0);
        e.b.store(p, no, None, []).map_err(internal1)?;
    }
    e.b.loop_merge(merge, cont, spirv::LoopControl::NONE, []).map_err(internal1)
}

/// Where a lane takes a back-edge (when `again` is true, if given): count
/// the subgroup's iteration, and remember when the budget is spent (the
/// trap is set where the entry returns, see [`flush`]).
pub(crate) fn check(e: &mut Emitter, again: Option<Word>) -> Result<(), Diagnostic> {
    check_site(e, again, None)
}

/// [`check`] at the back-edge of the loop of resume site `site` (if
/// given): a lane the limiter cuts there saves itself at the loop's merge
/// ([`cut_at_site`]), so a spent count does not fail the launch by itself.
pub(crate) fn check_site(e: &mut Emitter, again: Option<Word>, site: Option<u32>) -> Result<(), Diagnostic> {
    let Some(c) = e.loop_counter else {
        return Ok(());
    };
    if c.counts {
        count_back_edge(e, c, again, site.is_none())?;
    }
    let p = pending(e, c)?;
    let code = e.c_u32(site.map_or(CUT_OTHER, |k| CUT_SITE + k));
    let v = match again {
        Some(a) => {
            let u32t = e.t_int(32);
            let zero = e.c_u32(0);
            e.b.select(u32t, None, a, code, zero).map_err(internal1)?
        }
        None => code,
    };
    e.b.store(p, v, None, []).map_err(internal1)
}

/// The loop of [`super::mem::retry_loop`] (`do { done = step(); } while
/// (!done)`, its only exit the test in the continue block) needs no
/// pending flag: `again` (`!done`), which its body defines and which
/// dominates the merge, is true at the merge exactly where the driver's
/// limiter ended the loop. What keeps the driver's compiler (which sees
/// only the structured exit, where `done` holds) from folding it is that
/// the loop exits on [`retry_exit`]'s laundered copy of `done`, not on
/// `done`. (The pending flag's opaque-index accesses, three per loop, made
/// a Warp kernel of 121 half-precision atomics, each such a loop, take a
/// third longer to compile.) Call in the body, where a lane is about to
/// go round again when `again` is true.
pub(crate) fn retry_check(e: &mut Emitter, again: Word) -> Result<(), Diagnostic> {
    match e.loop_counter {
        Some(c) if c.counts => count_back_edge(e, c, Some(again), true),
        _ => Ok(()),
    }
}

/// The condition the loop of [`retry_check`] exits on: `done`, OR-ed with
/// an opaque `false` where loops are checked (see there).
pub(crate) fn retry_exit(e: &mut Emitter, done: Word) -> Result<Word, Diagnostic> {
    if e.loop_counter.is_none() {
        return Ok(done);
    }
    let bt = e.t_bool();
    let zero = super::zero::opaque_zero(e, 32)?;
    let c0 = e.c_u32(0);
    let never = e.b.i_not_equal(bt, None, zero, c0).map_err(internal1)?;
    e.b.logical_or(bt, None, done, never).map_err(internal1)
}

/// At the merge of the loop of [`retry_check`]: a lane with `again` still
/// true was sent there by the driver's limiter.
pub(crate) fn retry_merged(e: &mut Emitter, again: Word) -> Result<(), Diagnostic> {
    let Some(c) = e.loop_counter else {
        return Ok(());
    };
    if c.counts {
        count_merged(e, c)?;
    }
    trip_if(e, c, again)
}

/// [`check`]'s counting part.
fn count_back_edge(e: &mut Emitter, c: Counter, again: Option<Word>, trip: bool) -> Result<(), Diagnostic> {
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let one = e.c_u32(1);
    let inc = match again {
        Some(a) => {
            e.cap(Capability::GroupNonUniformVote);
            let scope = e.c_u32(Scope::Subgroup as u32);
            let any = e.b.op(spirv::Op::GroupNonUniformAny, bt, None, &[scope, a]).map_err(internal1)?;
            let zero = e.c_u32(0);
            e.b.select(u32t, None, any, one, zero).map_err(internal1)?
        }
        None => one,
    };
    let n = add(e, c, inc)?;
    let limit = e.c_u32(LIMIT);
    let mut spent = e.b.u_greater_than_equal(bt, None, n, limit).map_err(internal1)?;
    if let Some(a) = again {
        spent = e.b.logical_and(bt, None, spent, a).map_err(internal1)?;
    }
    // Remembered, and reported once where the entry returns ([`flush`]): a
    // test and a trap-word atomic at every back-edge made the grid-stride
    // loop of `ptxvk-bench twins reduce` run 1.3x as long. A lane past the
    // budget still gets there: llvmpipe ends each of its loops at once.
    if !trip {
        return Ok(());
    }
    trip_if(e, c, spent)
}

/// Where an entry returns: a lane that took a back-edge past the budget
/// sets [`crate::abi::printf::TRAP_LOOP_LIMIT`] in the trap word (behind a
/// test the subgroup agrees on, so that the atomic costs nothing where no
/// lane needs it).
pub(crate) fn flush(e: &mut Emitter) -> Result<(), Diagnostic> {
    let Some(c) = e.loop_counter else {
        return Ok(());
    };
    let bt = e.t_bool();
    let tripped = e.b.load(bt, None, c.tripped, None, []).map_err(internal1)?;
    super::fault::when_mine(e, tripped, &mut |e| set_trap_word(e, crate::abi::printf::TRAP_LOOP_LIMIT))
}

/// At a loop's merge block: the subgroup's counter becomes the most any
/// lane counted plus the iteration every lane left in (an atomic maximum:
/// lanes that left early lag behind), and each lane takes it.
pub(crate) fn merged(e: &mut Emitter) -> Result<(), Diagnostic> {
    let Some(c) = e.loop_counter else {
        return Ok(());
    };
    let bt = e.t_bool();
    if c.counts {
        count_merged(e, c)?;
    }
    // A lane still pending took a back-edge and never arrived at the
    // header: the driver's limiter ended the loop (its own count may run
    // ahead of ours: one-pass loops that its compiler keeps count there).
    let u32t = e.t_int(32);
    let p = pending(e, c)?;
    let code = e.b.load(u32t, None, p, None, []).map_err(internal1)?;
    let zero = e.c_u32(0);
    let cut = e.b.i_not_equal(bt, None, code, zero).map_err(internal1)?;
    trip_if(e, c, cut)
}

/// At the merge of the loop of resume site `site`, before [`merged`]:
/// whether the driver's limiter cut this lane's loop (a `bool`, or `None`
/// without a counter). Such a lane's registers are those it took the
/// back-edge with, which are its registers at the loop's header: it can
/// save itself as the header's check would have (`emit/func.rs` runs the
/// site's save code there), and it goes on in the next resume round
/// instead of failing the launch. So a count that falls behind the
/// driver's costs a round, not the launch.
pub(crate) fn cut_at_site(e: &mut Emitter, site: u32) -> Result<Option<Word>, Diagnostic> {
    let Some(c) = e.loop_counter else {
        return Ok(None);
    };
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let p = pending(e, c)?;
    let code = e.b.load(u32t, None, p, None, []).map_err(internal1)?;
    let mine = e.c_u32(CUT_SITE + site);
    Ok(Some(e.b.i_equal(bt, None, code, mine).map_err(internal1)?))
}

/// [`merged`]'s counting part.
fn count_merged(e: &mut Emitter, c: Counter) -> Result<(), Diagnostic> {
    let u32t = e.t_int(32);
    let n = e.b.load(u32t, None, c.lane, None, []).map_err(internal1)?;
    let one = e.c_u32(1);
    let n1 = e.b.i_add(u32t, None, n, one).map_err(internal1)?;
    // Lanes that left the loop early counted less: the most of them.
    e.cap(Capability::GroupNonUniformArithmetic);
    let scope = e.c_u32(Scope::Subgroup as u32);
    let reduce = spirv::GroupOperation::Reduce as u32;
    let n1 = e.b.op(spirv::Op::GroupNonUniformUMax, u32t, None, &[scope, reduce, n1]).map_err(internal1)?;
    let old = by_one_lane(e, c, &mut |e, p| {
        let scope = e.c_u32(Scope::Subgroup as u32);
        let sem = e.c_u32(0);
        e.b.op(spirv::Op::AtomicUMax, u32t, None, &[p, scope, sem, n1]).map_err(internal1)
    })?;
    let bt = e.t_bool();
    let ahead = e.b.u_greater_than(bt, None, n1, old).map_err(internal1)?;
    let m = e.b.select(u32t, None, ahead, n1, old).map_err(internal1)?;
    e.b.store(c.lane, m, None, []).map_err(internal1)
}

/// The lane's tripped flag is also set where `cond` holds.
fn trip_if(e: &mut Emitter, c: Counter, cond: Word) -> Result<(), Diagnostic> {
    let bt = e.t_bool();
    let was = e.b.load(bt, None, c.tripped, None, []).map_err(internal1)?;
    let now = e.b.logical_or(bt, None, was, cond).map_err(internal1)?;
    e.b.store(c.tripped, now, None, []).map_err(internal1)
}

/// Loop constructs in `regions`, nested ones too: what the driver runs at
/// least once each (one vector iteration) when no lane takes the branch
/// they are in, since it runs both arms of a divergent branch.
pub(crate) fn loops_in(regions: &[Region]) -> u32 {
    loops_with(regions, &|_| 0)
}

/// [`loops_in`], plus `code(b)` for each basic block `b` of straight-line code.
fn loops_with(regions: &[Region], code: &dyn Fn(usize) -> u32) -> u32 {
    regions
        .iter()
        .map(|r| match r {
            Region::Code(b) => code(*b),
            Region::Loop { body, .. } => 1 + loops_with(body, code),
            Region::Block { body, .. } => loops_with(body, code),
            Region::If { then_body, else_body, .. } => loops_with(then_body, code) + loops_with(else_body, code),
            _ => 0,
        })
        .sum()
}

/// The loop constructs an arm's code runs once each when no lane takes the
/// arm (see [`branch`]): the PTX loops in `regions` ([`loops_in`]) and the
/// translator's own loops in their instructions' code: `vprintf`'s copy of
/// its arguments and count of its conversions (`printf::loops`), the
/// compare-and-swap loop of an atomic ([`cas_loop`]), a callee's (at most
/// two counted: only resumable entries count, and those call nothing but
/// `vprintf`). Without them the count fell behind llvmpipe's, whose limiter
/// ended the loop of `runtime/tests/long_loops.rs`'s `checked_hash` (a
/// `printf` check in its loop, arguments copied by a loop) at half the
/// count, before the resume pass stopped the thread; ahead, a resumable
/// thread only stops earlier.
fn idle_loops(e: &Emitter, fx: &super::func::Fx, regions: &[Region]) -> u32 {
    let internal = |i: &&crate::ast::Instruction| match i.opcode.as_str() {
        "call" if i.direct_callee() == Some(super::printf::VPRINTF) => super::printf::loops(e, fx, i),
        "call" => 2,
        "atom" | "red" => u32::from(cas_loop(i)),
        _ => 0,
    };
    loops_with(regions, &|b| fx.cfg.blocks.get(b).map_or(0, |b| b.insts.iter().map(internal).sum()))
}

/// Whether an atomic may be a compare-and-swap loop (`mem.rs`): float and
/// half-word ones, `inc`/`dec`, and `cas` below 32 bits (an upper bound:
/// 32-bit float additions are native where the device has them). Integer
/// `add`, `min`, `max`, bitwise ops and `exch` of 32 and 64 bits are native.
fn cas_loop(i: &crate::ast::Instruction) -> bool {
    const LOOPS: [&str; 13] =
        ["f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "b16", "u16", "s16", "b8", "u8", "inc", "dec"];
    i.modifiers.iter().any(|m| LOOPS.contains(&m.as_str()))
}

/// Before a two-way branch on `cond` with arms `then_body` and
/// `else_body`: the driver runs both arms of a divergent branch, an arm no
/// lane takes with an empty mask, which costs each loop in it one
/// iteration ([`idle_loops`]); count those (only where the entry counts).
pub(crate) fn branch(
    e: &mut Emitter,
    fx: &super::func::Fx,
    cond: Word,
    then_body: &[Region],
    else_body: &[Region],
) -> Result<(), Diagnostic> {
    let Some(c) = e.loop_counter.filter(|c| c.counts) else {
        return Ok(());
    };
    let (then_loops, else_loops) = (idle_loops(e, fx, then_body), idle_loops(e, fx, else_body));
    if then_loops + else_loops == 0 {
        return Ok(());
    }
    e.cap(Capability::GroupNonUniformVote);
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let scope = e.c_u32(Scope::Subgroup as u32);
    let not_cond = e.b.logical_not(bt, None, cond).map_err(internal1)?;
    let mut total = e.c_u32(0);
    for (arm, loops) in [(cond, then_loops), (not_cond, else_loops)] {
        if loops == 0 {
            continue;
        }
        let taken = e.b.op(spirv::Op::GroupNonUniformAny, bt, None, &[scope, arm]).map_err(internal1)?;
        let zero = e.c_u32(0);
        let idle = e.c_u32(loops);
        let cost = e.b.select(u32t, None, taken, zero, idle).map_err(internal1)?;
        total = e.b.i_add(u32t, None, total, cost).map_err(internal1)?;
    }
    add(e, c, total).map(|_| ())
}
