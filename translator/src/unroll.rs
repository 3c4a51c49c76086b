//! Unrolling of small innermost loops, for drivers that bound loops
//! ([`crate::Options::unroll_loops`], for llvmpipe).
//!
//! llvmpipe (lavapipe) ends every loop of an invocation once the loops of
//! that invocation have together run 65535 iterations (its loop limiter;
//! `emit/loop_limit.rs` counts the same way and fails the launch rather
//! than let a loop be cut short). A grid-stride loop over a few million
//! elements with a small grid, or a serial scan of a long array, goes past
//! that. The limiter counts back-edges: a loop whose body holds `k` copies
//! of the PTX loop's body runs `k` PTX iterations per counted iteration.
//!
//! [`run`] rewrites the structured regions of a function (not the CFG, so
//! nothing before emission sees a change): in a [`Region::Loop`] whose body
//! has no inner loop, no call and no collective, whose only `continue` is
//! reached through two-way branches alone (not from inside a nested
//! [`Region::Block`]) at the tail of the body, and which is small, the body
//! is repeated `k` times one after the other: in every copy but the last,
//! the `continue` is taken out, which leaves its arm of each enclosing
//! [`Region::If`] open (an open arm goes on after its `If`, see
//! [`Region::If`]), so that the invocations that would go round again run
//! the next copy. The last copy keeps the `continue`. Every exit of a copy
//! is an exit of the same loop, and each copy runs the same instructions in
//! the same order as an iteration did, so nothing changes but the count of
//! back-edges. `k` is at most [`crate::Options::unroll_loops`] and shrinks
//! with the body's size ([`MAX_UNROLLED`] instructions in all, or
//! [`MAX_UNROLLED_WITH_BARRIERS`] in a function with barriers), and the
//! copies of all the loops of a function share [`MAX_UNROLLED_FUNCTION`];
//! a `continue` more than [`MAX_NESTING`] selections deep keeps the loop.
//!
//! The copies follow each other instead of nesting (an earlier form put
//! each copy inside the arm of the previous one's `continue`), so that the
//! selections of `k` copies do not nest `k` deep (llvmpipe keeps a fixed
//! stack of nested conditions) and a copy's values do not pass through the
//! merges of the copies around it. The cost of unrolling on llvmpipe is the
//! same either way. Most of it was explained on 2026-12-06: with two or
//! more loads through a pointer parameter in a loop, llvmpipe's LLVM kept
//! the pointer as a vector and took it apart lane by lane at each load
//! (2.8x the time of a grid-stride sum, where one load per iteration was
//! spared); [`crate::Options::uniform_params`] removes that.

use crate::cfg::Cfg;
use crate::fxhash::FxHashMap;
use crate::structurize::{Region, Target};

/// Most PTX instructions in the body of an unrolled loop, all copies, in
/// a function without barriers: a body of up to 32 instructions gets the
/// full 8 copies. (It was 64: the loop of Warp's deterministic segmented
/// reduction, 20 instructions in two blocks, got 3 copies, and one thread
/// summing 65,536 records of 3 components reached the limiter.)
pub const MAX_UNROLLED: usize = 256;

/// The same in a function with a barrier or a call (which may reach one):
/// llvmpipe compiles a barrier as a coroutine suspension point, and LLVM's
/// coroutine splitting costs grow with the square of the function's memory
/// accesses (`docs/llvmpipe-compile-time.md`). Measured on Warp's
/// `test_deterministic_backward.py` (no caches, one run each, beside other
/// work): with 256 here too, CUB's `DeviceReduceByKeyKernel` compiled in
/// 22.9 s instead of 18.8 s, and the file's pipelines in 32.4 s instead of
/// 25.5 s. A `call` counts as a barrier: the callee may hold one.
pub const MAX_UNROLLED_WITH_BARRIERS: usize = 64;

/// The same in an entry that resumes (`crate::resume`), in weighted
/// instructions (a memory access weighs [`ACCESS_WEIGHT`]): there a thread
/// that nears the limiter saves itself and goes on in a resume round, so
/// copies only cut how many rounds a long loop takes, and each copy costs
/// llvmpipe's compile. A body of up to 5 instructions without accesses
/// (a counting or spinning loop: Warp's `test_graph` spins 2^24 times in a
/// thread) still gets 32 copies. Measured on a kernel of Warp's
/// `test_quat.py` (a grid-stride loop of 25 instructions with 12 global
/// accesses, fault checks on, lavapipe, empty caches): the first launch
/// took 0.50 s with the 10 copies of the unweighted budget of 256, 0.18 s
/// with none.
pub const MAX_UNROLLED_RESUMABLE: usize = 160;

/// What a memory access (`ld`, `st`, `atom`, `red`) counts for in
/// [`MAX_UNROLLED_RESUMABLE`]: it is emitted as an address computation,
/// the fault checks' range search on CPU devices, and the access.
pub const ACCESS_WEIGHT: usize = 4;

/// Most weighted instructions (a memory access weighs [`ACCESS_WEIGHT`])
/// that the copies of all the loops of one function may add together.
/// llvmpipe's compile time grows with the square of a function's memory
/// accesses (`docs/llvmpipe-compile-time.md`), so every copied access costs
/// more the more accesses the function has, while a loop's copies only
/// divide how often its iterations count against the limiter. Loops with
/// the smallest bodies (counting and spinning loops, the likeliest to run
/// long) get their copies first, then in program order, each as many as
/// the rest of the budget allows. Before this budget a kernel of NVIDIA
/// Warp's `test_fsai.py` (136 binary searches, each a loop of 14
/// instructions with one global load, in one function of 14,900 PTX
/// lines) got 8 copies of each search: 2,397 loads from device memory in
/// its SPIR-V, 1,445 without copies; now 1,505 (8 searches keep 8 copies).
/// The budget is per PTX function (nvcc inlines nearly everything). It
/// can leave a long loop of a larger body with fewer copies than before,
/// in a function with many smaller loops: where no resume round carries
/// it on, such a loop then stops at llvmpipe's limiter, and the launch
/// fails loudly (`emit/loop_limit.rs`).
pub const MAX_UNROLLED_FUNCTION: usize = 1024;

/// Most two-way branches the copies of a body may nest in.
pub const MAX_NESTING: usize = 24;

/// Opcodes that keep a loop as it is: collectives and warp operations
/// (costly to emulate, and copying them would multiply that cost), calls,
/// and tensor-core and asynchronous-copy operations.
const KEEPS_LOOP: &[&str] = &[
    "bar",
    "barrier",
    "bra",
    "brx",
    "call",
    "shfl",
    "vote",
    "match",
    "redux",
    "activemask",
    "elect",
    "mma",
    "wmma",
    "wgmma",
    "ldmatrix",
    "stmatrix",
    "mbarrier",
    "cp",
    "griddepcontrol",
    "setmaxnreg",
    "trap",
    "exit",
    "ret",
];

/// The regions with the eligible loops unrolled up to `copies` times, or
/// `None` when no loop changes (`copies` below 2 changes none). `resumes`:
/// the function is an entry that resumes (`crate::resume`), whose threads
/// run at most `THRESHOLD` counted iterations per round: its loops get up to
/// [`crate::resume::RESUME_UNROLL_FACTOR`] times the copies, so fewer
/// rounds, within [`MAX_UNROLLED_RESUMABLE`] weighted instructions.
pub fn run(cfg: &Cfg, regions: &[Region], copies: u32, resumes: bool) -> Option<Vec<Region>> {
    let copies = if resumes { copies.saturating_mul(crate::resume::RESUME_UNROLL_FACTOR) } else { copies };
    if copies < 2 || !regions.iter().any(has_loop) {
        return None;
    }
    let barriers = cfg.blocks.iter().flat_map(|b| &b.insts).any(|i| BARRIER_LIKE.contains(&&*i.opcode));
    let (budget, access_weight) = if resumes {
        (MAX_UNROLLED_RESUMABLE, ACCESS_WEIGHT)
    } else if barriers {
        (MAX_UNROLLED_WITH_BARRIERS, 1)
    } else {
        (MAX_UNROLLED, 1)
    };
    let limits = Limits { copies: copies as usize, budget, access_weight };
    let mut loops = Vec::new();
    candidates(cfg, regions, limits, &mut loops);
    // The function's budget: the smallest bodies first (a stable sort keeps
    // program order among equals).
    loops.sort_by_key(|c| c.cost);
    let mut left = MAX_UNROLLED_FUNCTION;
    let mut factors = FxHashMap::default();
    for c in loops {
        let k = c.copies.min(1 + left / c.cost.max(1));
        if k >= 2 {
            left -= (k - 1) * c.cost;
            factors.insert(c.header, k);
        }
    }
    if factors.is_empty() {
        return None;
    }
    Some(rewrite(cfg, regions, &factors))
}

/// A loop [`factor`] would unroll: its header, the copies it may get and
/// what each copy adds against [`MAX_UNROLLED_FUNCTION`].
struct Candidate {
    header: usize,
    copies: usize,
    cost: usize,
}

/// The loops of `regions` that [`factor`] unrolls, in program order (such a
/// loop holds no other loop; the others are searched inside).
fn candidates(cfg: &Cfg, regions: &[Region], limits: Limits, out: &mut Vec<Candidate>) {
    for r in regions {
        match r {
            Region::Loop { header, body } => match factor(cfg, *header, body, limits) {
                Some((copies, cost)) => out.push(Candidate { header: *header, copies, cost }),
                None => candidates(cfg, body, limits, out),
            },
            Region::Block { body, .. } => candidates(cfg, body, limits, out),
            Region::If { then_body, else_body, .. } => {
                candidates(cfg, then_body, limits, out);
                candidates(cfg, else_body, limits, out);
            }
            Region::Code(_) | Region::Br(_) | Region::Return => {}
        }
    }
}

/// Opcodes that [`ACCESS_WEIGHT`] applies to.
const ACCESSES: &[&str] = &["ld", "ldu", "st", "atom", "red"];

/// Opcodes after which [`MAX_UNROLLED_WITH_BARRIERS`] applies.
const BARRIER_LIKE: &[&str] = &["bar", "barrier", "call"];

/// Most copies of a body, and most instructions in all of them.
#[derive(Clone, Copy)]
struct Limits {
    copies: usize,
    budget: usize,
    /// What a memory access counts for against the budget.
    access_weight: usize,
}

fn has_loop(r: &Region) -> bool {
    match r {
        Region::Loop { .. } => true,
        Region::Block { body, .. } => body.iter().any(has_loop),
        Region::If { then_body, else_body, .. } => then_body.iter().chain(else_body).any(has_loop),
        Region::Code(_) | Region::Br(_) | Region::Return => false,
    }
}

/// `regions` with the loop headed by each key of `factors` unrolled to its
/// value's copies.
fn rewrite(cfg: &Cfg, regions: &[Region], factors: &FxHashMap<usize, usize>) -> Vec<Region> {
    regions
        .iter()
        .map(|r| match r {
            Region::Loop { header, body } => match factors.get(header) {
                Some(&k) => Region::Loop { header: *header, body: unrolled(cfg, *header, body, k) },
                None => Region::Loop { header: *header, body: rewrite(cfg, body, factors) },
            },
            Region::Block { follower, body } => {
                Region::Block { follower: *follower, body: rewrite(cfg, body, factors) }
            }
            Region::If { block, then_body, else_body } => Region::If {
                block: *block,
                then_body: rewrite(cfg, then_body, factors),
                else_body: rewrite(cfg, else_body, factors),
            },
            Region::Code(_) | Region::Br(_) | Region::Return => r.clone(),
        })
        .collect()
}

/// What a loop body holds, for [`factor`].
#[derive(Default)]
struct Scan {
    /// PTX instructions (each block's code and branch), and the memory
    /// accesses among them.
    insts: usize,
    accesses: usize,
    /// `continue`s of the loop reached through `If`s only, and the most
    /// `If`s one of them is nested in.
    continues: usize,
    depth: usize,
    /// Something that keeps the loop as it is.
    blocked: bool,
}

/// How many copies of `body` the loop headed by `header` gets within its
/// own budget, and what a copy adds against [`MAX_UNROLLED_FUNCTION`]
/// (`None`: fewer than 2 copies).
fn factor(cfg: &Cfg, header: usize, body: &[Region], limits: Limits) -> Option<(usize, usize)> {
    let mut s = Scan::default();
    scan(cfg, header, body, 0, false, &mut s);
    if s.blocked || s.continues != 1 {
        return None;
    }
    if s.depth > MAX_NESTING || !continue_at_tail(header, body) {
        return None;
    }
    let weighed = |w: usize| s.insts + s.accesses * (w - 1);
    let k = limits.copies.min(limits.budget / weighed(limits.access_weight).max(1));
    (k >= 2).then_some((k, weighed(ACCESS_WEIGHT)))
}

/// Whether the loop's `continue` ends `regions`: it is their last
/// statement, or in an arm, at the tail, of their last statement (an
/// `If`). Then the code that runs after it in a copy without it is the
/// next copy.
fn continue_at_tail(header: usize, regions: &[Region]) -> bool {
    match regions.last() {
        Some(Region::Br(Target::Continue(h))) => *h == header,
        Some(Region::If { then_body, else_body, .. }) => {
            continue_at_tail(header, then_body) || continue_at_tail(header, else_body)
        }
        _ => false,
    }
}

fn scan(cfg: &Cfg, header: usize, regions: &[Region], depth: usize, in_block: bool, s: &mut Scan) {
    for r in regions {
        match r {
            Region::Code(b) => {
                let blk = &cfg.blocks[*b];
                // The resume pass's save code runs once per round: it does
                // not count against the budget.
                let own = blk.insts.iter().filter(|i| !crate::resume::is_pass_instruction(i));
                s.insts += own.clone().count() + 1;
                s.accesses += own.filter(|i| ACCESSES.contains(&&*i.opcode)).count();
                if blk.insts.iter().any(|i| KEEPS_LOOP.contains(&&*i.opcode)) {
                    s.blocked = true;
                }
            }
            Region::Loop { .. } => s.blocked = true,
            // Every copy may return, as the loop's body did (a `@p ret` in
            // the body; the resume pass's save blocks).
            Region::Return => {}
            Region::Block { body, .. } => scan(cfg, header, body, depth, true, s),
            Region::If { then_body, else_body, .. } => {
                scan(cfg, header, then_body, depth + 1, in_block, s);
                scan(cfg, header, else_body, depth + 1, in_block, s);
            }
            Region::Br(Target::Continue(h)) if *h == header => {
                if in_block {
                    s.blocked = true;
                }
                s.continues += 1;
                s.depth = s.depth.max(depth);
            }
            Region::Br(_) => {}
        }
    }
}

/// `k` copies of `body` one after the other, the `continue` taken out of
/// all but the last. Only the first keeps the resume pass's check of the
/// loop count (`crate::resume`): the count grows once per counted
/// iteration, so one check per iteration sees every value it takes, and
/// the save code is not copied `k` times.
fn unrolled(cfg: &Cfg, header: usize, body: &[Region], k: usize) -> Vec<Region> {
    let open = without_continue(header, body);
    let rest = without_resume_check(cfg, &open);
    let mut out = Vec::with_capacity(open.len() * (k - 1) + body.len());
    out.extend(open.iter().cloned());
    for _ in 2..k {
        out.extend(rest.iter().cloned());
    }
    out.extend(without_resume_check(cfg, body));
    out
}

/// `regions` with each `If` on the resume pass's loop-count check replaced
/// by its arm for a count below the threshold. The check's block, which
/// holds the pass's instructions only (the count's read and comparison),
/// goes with it, and so does the [`Region::Block`] around the check that is
/// left with nothing but its own exit: each of them cost every copy a
/// subgroup reduction and a one-pass loop construct (measured on a
/// grid-stride sum of 16M floats in a resumable entry, lavapipe: the loop
/// took 3.5 times as long as without the count).
fn without_resume_check(cfg: &Cfg, regions: &[Region]) -> Vec<Region> {
    let mut out = Vec::with_capacity(regions.len());
    for r in regions {
        match r {
            Region::If { block, then_body, else_body } => {
                match &cfg.blocks[*block].term {
                    crate::cfg::Terminator::CondBranch { pred, negated, .. }
                        if pred.starts_with(crate::resume::CHECK_PREFIX) =>
                    {
                        if out.last() == Some(&Region::Code(*block))
                            && cfg.blocks[*block].insts.iter().all(|i| crate::resume::is_pass_instruction(i))
                        {
                            out.pop();
                        }
                        // The guard holds with the count below the threshold
                        // only when negated.
                        let below = if *negated { then_body } else { else_body };
                        out.extend(without_resume_check(cfg, below));
                    }
                    _ => out.push(Region::If {
                        block: *block,
                        then_body: without_resume_check(cfg, then_body),
                        else_body: without_resume_check(cfg, else_body),
                    }),
                }
            }
            Region::Block { follower, body } => {
                let mut body = without_resume_check(cfg, body);
                let last_exits = body.last() == Some(&Region::Br(Target::Exit(*follower)));
                if last_exits && !body[..body.len() - 1].iter().any(|r| exits_to(r, *follower)) {
                    // Its only exit ends it: the code goes on at the follower
                    // without the construct.
                    body.pop();
                    out.extend(body);
                } else {
                    out.push(Region::Block { follower: *follower, body });
                }
            }
            _ => out.push(r.clone()),
        }
    }
    out
}

/// Whether `r` holds a `Br(Exit(follower))`.
pub(crate) fn exits_to(r: &Region, follower: usize) -> bool {
    match r {
        Region::Br(Target::Exit(f)) => *f == follower,
        Region::Block { body, .. } | Region::Loop { body, .. } => body.iter().any(|r| exits_to(r, follower)),
        Region::If { then_body, else_body, .. } => then_body.iter().chain(else_body).any(|r| exits_to(r, follower)),
        Region::Code(_) | Region::Br(_) | Region::Return => false,
    }
}

/// `regions` (a copy of the body) without its `continue`: the arm that held
/// it is left open.
fn without_continue(header: usize, regions: &[Region]) -> Vec<Region> {
    regions
        .iter()
        .filter(|r| !matches!(r, Region::Br(Target::Continue(h)) if *h == header))
        .map(|r| match r {
            Region::If { block, then_body, else_body } => Region::If {
                block: *block,
                then_body: without_continue(header, then_body),
                else_body: without_continue(header, else_body),
            },
            _ => r.clone(),
        })
        .collect()
}
