//! Pass: forward progress for the diverged threads of a warp.
//!
//! # Why
//! Since Volta, CUDA guarantees that diverged threads of a warp make
//! progress independently ("independent thread scheduling"): a thread that
//! spins on a lock another thread of its warp holds lets the holder run its
//! critical section and release it. A Vulkan subgroup gives no such
//! guarantee, and SIMD hardware (llvmpipe's 8-wide lanes, AMD's wavefronts)
//! does not give it: the lanes of a subgroup follow one structured path, so
//! lanes that left a spin loop wait at its end for the lanes still
//! spinning, which wait for them. Taichi activates the cells of a pointer
//! SNode that way (one elected lane per cell takes the allocator's lock with
//! an `atom.exch` loop; `tests/fixtures/forward_progress.cu` has the
//! pattern), and so do spin locks and flags that one lane sets for another.
//!
//! # What
//! A *spin loop* is a loop without collectives whose exit test depends on a
//! value another thread changes (see `polls`): `ld.volatile`,
//! `ld.relaxed`/`ld.acquire`, or an `atom.exch`/`atom.cas` (a lock), or an
//! `atom` that only reads (`atom.add` of 0), or what a call of a function
//! that does such reads returns (nvcc `-G` calls `atomicExch` through a
//! function; [`polling_functions`]), compared with something the loop does
//! not compute. A compare-and-swap retry loop compares the old
//! value with the one it expected, which the loop computes: it is
//! lock-free, some lane always succeeds, and it is left as it is.
//!
//! For each spin loop the pass takes the *interleaved region* `R`: the
//! blocks connected to the loop (edges in either direction, so that the
//! other arm of a branch, where the lane that sets a flag may be, is in)
//! without passing a *wall*, a block with a collective instruction
//! ([`run`]'s `is_wall`: block barriers, warp operations, the emulated
//! path's lock-step points, calls of workgroup-uniform functions). No wall
//! may end up inside the new loop, so:
//! - when the spin loop sits inside an outer loop that contains a wall,
//!   `R` stays inside that loop's body, whose header and inner loops with
//!   walls count as walls;
//! - accesses that the spin loop reaches before a wall are not lock-step
//!   points (a lock's critical section is not legacy warp-synchronous code;
//!   [`spin_reach`]; `emit/mod.rs` drops them before choosing the walls);
//!   points before the loop are walls, so `R` starts after them;
//! - of the blocks before and after a wall that lies on a path from `R`
//!   back into `R` (the entry block before a `match.any`, the code after
//!   it), only the spin loop's side stays;
//! - the regions of two spin loops are disjoint: the blocks of the regions
//!   already taken are walls for the next (two waits around a branch with
//!   a `bar.sync` in one arm both reached the other arm, and the two
//!   dispatch loops sharing it became one tangle that computed wrong
//!   values; `runtime/tests/forward_progress.rs`, `two_handoffs`).
//! - the *lead-in*, the blocks of `R` that the spin loop cannot reach (the
//!   code before the wait, such as the thread's index and its bounds test),
//!   is left out when no other spin loop lies in it: a lane runs it before
//!   the dispatch loop's head, where the lanes meet, and waits for nobody
//!   there (`without_lead_in`). With a spin loop in it, a lane there may
//!   wait for a lane in the rest of `R`, and it stays (`crossed_handoff`:
//!   the two arms of a branch each wait for the other).
//!
//! `R` becomes a dispatch loop whose body is a *chain*: the blocks of `R`
//! in reverse postorder of `R`'s own edges (so that an edge that does not
//! close a cycle goes forward), each behind a test of `pc`:
//!
//! ```text
//! head:   (the yield, see below)
//! T_1:    if (pc == 1) { B_1 }         B_i's edges set pc, go on to T_i+1
//! ...
//! T_n:    if (pc == n) { B_n }
//! latch:  if (pc <= n) goto head       a lane that went back, or waits
//!         else: a balanced tree of `pc == x` sends the lane to exit X
//! every edge u -> B_i from outside R     becomes  u -> (pc = i) -> head
//! every edge B_j -> B_i or B_j -> X      becomes  B_j -> (pc = i or x) -> T_j+1
//! ```
//!
//! So in one iteration a lane runs every block its `pc` reaches going
//! forward, and goes round again only where the code goes back (a spin
//! loop's back-edge) or leaves. (The first form sent every edge back to a
//! tree of tests at the loop's head, one block per iteration and lane: a
//! thread whose wait was over at its first poll still took one iteration
//! per block of its path, each running every block of `R` on llvmpipe,
//! which runs the arms no lane takes; `ptxvk-bench waits`: 615 ms against
//! 182 ms with the chain, 21 ms without any of the lowerings for waits.)
//!
//! A block of `R` that returns branches to a new return block outside `R`
//! (an exit like any other): otherwise the structurizer puts the whole
//! block after the loop (a `.func`'s returns meet at its one exit), and a
//! lane that took a lock in a callee would run its critical section only
//! once every lane had left the spin loop (`tickets_from_a_callee`).
//!
//! Each lane keeps its own `pc`; in an iteration every lane runs the blocks
//! its `pc` names, so a lane that holds a lock runs its critical section
//! while the others run their spin block. Lanes leave only through the
//! latch, at the loop's exits, and wait after the loop for the others; lanes that run
//! the same block still run it together. This is the classic transformation
//! of MIMD synchronization into SIMT code (ElTantawy and Aamodt, "MIMD
//! Synchronization on SIMT Architectures", MICRO 2016), applied only where
//! a loop spins.
//!
//! Two details come from llvmpipe. A chain step (`T_i`'s selection, whose
//! paths all meet at `T_i+1`) is a merge for the structurizer, which makes
//! it a one-pass loop construct; llvmpipe's loop limiter would count one
//! per member in every iteration, where the translator's count
//! (`emit/loop_limit.rs`) does not, and cut the loop early. The emitter
//! writes such a step as plain selections instead (`emit/func.rs`,
//! `open_block`). And the steps follow each other, they do not nest: a
//! chain of 60 blocks nested 60 deep passes what llvmpipe's fixed stack of
//! nested conditions handles (a Taichi kernel crashed the process); the
//! exits' tree is balanced for the same reason.
//!
//! # Between subgroups
//! On the emulated warp path (a warp is several subgroups: lavapipe's 8-lane
//! ones) the lanes that wait and the lanes they wait for may lie in
//! different subgroups of the workgroup, and llvmpipe runs those one after
//! another, each until it reaches a barrier: a warp waiting for a later warp
//! of its block (or a lane for a later subgroup of its own warp) would spin
//! alone. There, in kernels with a spin loop and no collective and no call
//! (`emit/mod.rs` picks them), the head starts with a barrier
//! ([`yield_instruction`]) and the kernel runs in workgroup-uniform mode
//! (`emit/uniform.rs`): the dispatch loop then iterates until no invocation
//! of the workgroup is left in `R`, and each iteration every subgroup runs
//! its lanes' blocks, so the lane that sets the flag or frees the lock runs
//! while the others wait. (Giving every function with a spin region the
//! yield, with uniform mode for it and its callers, made Taichi 1.7.4's
//! pointer SNodes compute wrong values; kernels with collectives or calls
//! keep their regions without it.)
//! On the native and slice paths a warp is one subgroup and the hardware
//! runs the subgroups of a workgroup side by side: no barrier is added.
//!
//! # Cost and limits
//! Only functions with a spin loop change, and in them only `R`. Inside `R`
//! each block ends in a store of `pc` and is behind a test of it, code is
//! no longer optimised across blocks, every iteration runs every block's
//! code on llvmpipe (masked), and llvmpipe's loop limiter (65535
//! iterations per invocation, `docs/cooperative.md`) counts one iteration
//! per pass of the chain (the translator counts them too: a launch that
//! runs past it fails). Where it yields, each iteration also costs two
//! workgroup barriers (the yield and the uniform loop's vote), and the
//! whole kernel runs in uniform mode. A lock released after a return to
//! the caller (a spin loop in a `.func` whose caller releases the lock)
//! still livelocks: `R` ends at the function's end. So does a lock held
//! across a collective, a wait between subgroups in a kernel with
//! collectives or calls, and a wait whose setter lies beyond a collective
//! (a `__syncwarp`, an `mma`, a block barrier): in uniform mode the code on
//! the two sides of the collective runs one side after the other, as in
//! warp-specialized producer/consumer pipelines whose consumers meet at
//! `mma`.

use crate::ast::{Instruction, Operand};
use crate::cfg::{BasicBlock, BlockId, Cfg, Terminator};
use crate::diag::Span;
use crate::reducible::{retarget, strongly_connected};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Prefix of the registers the pass introduces (one per region).
pub const PC_PREFIX: &str = "%__progress";

/// The instruction each iteration of a dispatch loop runs on the emulated
/// warp path: a workgroup barrier (`bar.sync 0`), which makes the region's
/// function run in workgroup-uniform mode and yields to the other
/// subgroups of the workgroup (see "Between subgroups" above).
pub fn yield_instruction() -> &'static Instruction {
    static YIELD: std::sync::OnceLock<Instruction> = std::sync::OnceLock::new();
    YIELD.get_or_init(|| Instruction {
        span: Span::default(),
        guard: None,
        opcode_span: Span::default(),
        opcode: crate::short_str::Str::new("bar"),
        modifiers: [crate::short_str::Str::new("sync")].into_iter().collect(),
        operands: [Operand::Int(Span::default(), 0)].into_iter().collect(),
        decoded: None,
    })
}

/// Registers followed backwards from an exit test, at most.
const MAX_SLICE: usize = 64;

/// A loop of the loop nest.
struct Loop {
    header: BlockId,
    blocks: BTreeSet<BlockId>,
    parent: Option<usize>,
    has_wall: bool,
}

/// What makes a loop a spin loop (see `polls`).
pub struct SpinTest<'x> {
    /// Every loop without a wall counts (a test mode: results must not
    /// change).
    pub every_loop: bool,
    /// The functions whose return value may be polled memory
    /// ([`polling_functions`]): a loop that tests what such a call returns
    /// spins (nvcc `-G` calls `atomicExch` through a function).
    pub polling: &'x BTreeSet<String>,
}

/// The functions of `bodies` (name, instructions, direct callees) that
/// read memory other threads write (an `atom`, or an `ld` that polls),
/// themselves or through a call.
pub fn polling_functions<'i>(
    bodies: &mut dyn Iterator<Item = (&'i str, Vec<&'i Instruction>, Vec<&'i str>)>,
) -> BTreeSet<String> {
    functions_with(bodies, &|i| i.opcode == "atom" || is_poll(i, &|_| false) && i.opcode == "ld")
}

/// The functions of `bodies` (name, instructions, direct callees) with an
/// instruction that `has` accepts, themselves or through a call.
pub fn functions_with<'i>(
    bodies: &mut dyn Iterator<Item = (&'i str, Vec<&'i Instruction>, Vec<&'i str>)>,
    has: &dyn Fn(&Instruction) -> bool,
) -> BTreeSet<String> {
    let mut calls: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut set = BTreeSet::new();
    for (name, insts, callees) in bodies {
        if insts.iter().any(|i| has(i)) {
            set.insert(name.to_string());
        }
        calls.push((name, callees));
    }
    loop {
        let more: Vec<String> = calls
            .iter()
            .filter(|(n, cs)| !set.contains(*n) && cs.iter().any(|c| set.contains(*c)))
            .map(|(n, _)| n.to_string())
            .collect();
        if more.is_empty() {
            return set;
        }
        set.extend(more);
    }
}

/// Rewrites the interleaved region of every spin loop of `cfg` (see the
/// module documentation). `is_wall` says whether an instruction is
/// collective. Returns the names of the 32-bit registers it introduced (the
/// caller declares them); none when the function has no spin loop.
pub fn run<'a>(
    cfg: &mut Cfg<'a>,
    is_wall: &dyn Fn(&Instruction) -> bool,
    spin: &SpinTest,
    yield_inst: Option<&'a Instruction>,
) -> Vec<String> {
    let mut regs = Vec::new();
    let regions = regions(cfg, is_wall, spin);
    if regions.is_empty() {
        return regs;
    }
    // The entry must not be inside a region (nothing would set its `pc`):
    // give the function an empty entry block of its own.
    let moved = cfg.blocks.len();
    let old = std::mem::replace(
        &mut cfg.blocks[0],
        BasicBlock {
            label: None,
            insts: Vec::new(),
            term: Terminator::Branch(moved),
            term_span: Span::default(),
            assign: None,
        },
    );
    cfg.blocks.push(old);
    for b in 1..cfg.blocks.len() {
        retarget(&mut cfg.blocks[b].term, 0, moved);
    }
    for region in regions {
        let region: BTreeSet<BlockId> = region.into_iter().map(|b| if b == 0 { moved } else { b }).collect();
        let reg = format!("{PC_PREFIX}{}", regs.len());
        interleave(cfg, &region, &reg, yield_inst);
        regs.push(reg);
    }
    regs
}

/// Gives every wall instruction (`is_wall`) of `cfg` a block of its own,
/// so that the code before and after it in its basic block can join an
/// interleaved region: nvcc puts `unlock(); __syncthreads();` in one block,
/// and with the critical section and the release behind the barrier's
/// wall, the lane holding a lock waited at the spin loop's end for the
/// lanes spinning on it. The first piece keeps the block's number, label
/// and assignment, the last its terminator; the pieces are chained with
/// branches. Returns whether a block was split.
pub fn isolate_walls(cfg: &mut Cfg, is_wall: &dyn Fn(&Instruction) -> bool) -> bool {
    let mut split = false;
    for b in 0..cfg.blocks.len() {
        let insts = &cfg.blocks[b].insts;
        // Cut before and after each wall, where there is code on that side.
        let mut cuts = Vec::new();
        for (k, i) in insts.iter().enumerate() {
            if is_wall(i) {
                if k > 0 && cuts.last() != Some(&k) {
                    cuts.push(k);
                }
                if k + 1 < insts.len() {
                    cuts.push(k + 1);
                }
            }
        }
        if cuts.is_empty() {
            continue;
        }
        split = true;
        let mut rest = std::mem::take(&mut cfg.blocks[b].insts);
        let mut pieces = Vec::new();
        for &c in cuts.iter().rev() {
            pieces.push(rest.split_off(c));
        }
        pieces.reverse();
        cfg.blocks[b].insts = rest;
        let term = std::mem::replace(&mut cfg.blocks[b].term, Terminator::Return);
        let term_span = cfg.blocks[b].term_span;
        let mut prev = b;
        for insts in pieces {
            let next = cfg.blocks.len();
            cfg.blocks.push(BasicBlock { label: None, insts, term: Terminator::Return, term_span, assign: None });
            cfg.blocks[prev].term = Terminator::Branch(next);
            prev = next;
        }
        cfg.blocks[prev].term = term;
    }
    split
}

/// The interleaved regions of `cfg`'s spin loops (disjoint sets of blocks;
/// none when it has no spin loop). With `spin.every_loop`, every loop without a
/// wall counts as a spin loop (to test the rewriting on any code).
pub fn regions(cfg: &Cfg, is_wall: &dyn Fn(&Instruction) -> bool, spin: &SpinTest) -> Vec<BTreeSet<BlockId>> {
    let mut regions: Vec<BTreeSet<BlockId>> = Vec::new();
    if cfg.blocks.is_empty() {
        return regions;
    }
    let walls: BTreeSet<BlockId> =
        (0..cfg.blocks.len()).filter(|&b| cfg.blocks[b].insts.iter().any(|i| is_wall(i))).collect();
    let Some(loops) = loop_nest(cfg, &walls) else {
        return regions;
    };
    for s in 0..loops.len() {
        if !is_spin_loop(cfg, &loops[s], spin) || regions.iter().any(|r| r.contains(&loops[s].header)) {
            continue;
        }
        // The blocks of the regions already taken are walls for this one:
        // regions must be disjoint (each becomes its own dispatch loop, and a
        // block in two would join the two loops into one irreducible
        // tangle, which ran blocks of one region with the lanes of another).
        let taken: BTreeSet<BlockId> = regions.iter().flatten().copied().collect();
        let region = interleaved_region(cfg, &loops, s, &walls, &taken);
        regions.push(without_lead_in(cfg, region, &loops, loops[s].header, spin));
    }
    regions
}

/// `region` without its *lead-in*: the blocks the spin loop (header
/// `header`) cannot reach, where no other spin loop lies. Every edge into the
/// region goes to the dispatch loop's head, so a lane runs the lead-in
/// before the head, where all lanes meet; and a lane there waits for no
/// other (it holds no spin loop), so it always gets to the head. The
/// lead-in then costs nothing in each pass of the chain (llvmpipe runs
/// every member's code in every pass, masked): the code before a wait,
/// which every thread runs once, was run again in each pass by every lane
/// (`ptxvk-bench waits`). A lead-in with a spin loop stays: its lanes may
/// wait for lanes in the rest of the region, which must then run beside them.
fn without_lead_in(
    cfg: &Cfg,
    region: BTreeSet<BlockId>,
    loops: &[Loop],
    header: BlockId,
    spin: &SpinTest,
) -> BTreeSet<BlockId> {
    let mut reached = BTreeSet::new();
    let mut stack = vec![header];
    while let Some(b) = stack.pop() {
        if region.contains(&b) && reached.insert(b) {
            stack.extend(cfg.successors(b));
        }
    }
    let lead_in_spins = loops
        .iter()
        .any(|l| l.blocks.iter().any(|b| region.contains(b) && !reached.contains(b)) && is_spin_loop(cfg, l, spin));
    if lead_in_spins {
        region
    } else {
        reached
    }
}

/// The blocks that a spin loop's lanes may reach before they pass a wall:
/// the spin loops of [`regions`] and what follows them, up to and including
/// the first wall block on each path. Code there may run inside a lock's
/// critical section, where a collective would livelock; lock-step points
/// elsewhere (before every spin loop) are walls like any collective
/// (`emit/lockstep.rs`).
pub fn spin_reach(cfg: &Cfg, is_wall: &dyn Fn(&Instruction) -> bool, spin: &SpinTest) -> BTreeSet<BlockId> {
    let mut reach = BTreeSet::new();
    if cfg.blocks.is_empty() {
        return reach;
    }
    let walls: BTreeSet<BlockId> =
        (0..cfg.blocks.len()).filter(|&b| cfg.blocks[b].insts.iter().any(|i| is_wall(i))).collect();
    let Some(loops) = loop_nest(cfg, &walls) else {
        // Irreducible: `regions` takes no region either.
        return reach;
    };
    let mut work: Vec<BlockId> =
        loops.iter().filter(|l| is_spin_loop(cfg, l, spin)).flat_map(|l| l.blocks.iter().copied()).collect();
    while let Some(b) = work.pop() {
        if !reach.insert(b) || walls.contains(&b) {
            continue;
        }
        work.extend(cfg.successors(b).iter().copied().filter(|s| !reach.contains(s)));
    }
    reach
}

/// The loops of a reducible CFG, outer ones before the loops they contain
/// (`None` if a cycle has several entries).
fn loop_nest(cfg: &Cfg, walls: &BTreeSet<BlockId>) -> Option<Vec<Loop>> {
    let mut out = Vec::new();
    let all: BTreeSet<BlockId> = (0..cfg.blocks.len()).collect();
    let mut work: Vec<(BTreeSet<BlockId>, Option<usize>)> = vec![(all, None)];
    while let Some((nodes, parent)) = work.pop() {
        let sccs = strongly_connected(cfg.blocks.len(), nodes.iter().copied(), |v, i| {
            cfg.successors(v).iter().copied().filter(|s| nodes.contains(s)).nth(i)
        });
        for scc in sccs {
            let cyclic = scc.len() > 1 || cfg.successors(scc[0]).contains(&scc[0]);
            if !cyclic {
                continue;
            }
            let set: BTreeSet<BlockId> = scc.into_iter().collect();
            let mut entries = (0..cfg.blocks.len())
                .filter(|p| !set.contains(p))
                .flat_map(|p| cfg.successors(p).into_iter())
                .filter(|s| set.contains(s))
                .collect::<BTreeSet<_>>()
                .into_iter();
            let header = match (entries.next(), entries.next()) {
                (Some(h), None) => h,
                _ => return None,
            };
            let has_wall = set.iter().any(|b| walls.contains(b));
            out.push(Loop { header, blocks: set.clone(), parent, has_wall });
            let mut inner = set;
            inner.remove(&header);
            work.push((inner, Some(out.len() - 1)));
        }
    }
    Some(out)
}

/// Whether `l` is a spin loop: no wall, and it polls (see [`polls`]), or
/// [`SpinTest::every_loop`] makes every loop one.
fn is_spin_loop(cfg: &Cfg, l: &Loop, spin: &SpinTest) -> bool {
    !l.has_wall && (spin.every_loop || polls(cfg, &l.blocks, spin.polling))
}

/// Whether the loop made of `blocks` is a spin loop: an exit test depends
/// on a polled value compared with something the loop does not compute.
fn polls(cfg: &Cfg, blocks: &BTreeSet<BlockId>, polling: &BTreeSet<String>) -> bool {
    let insts: Vec<&Instruction> = blocks.iter().flat_map(|&b| cfg.blocks[b].insts.iter().copied()).collect();
    // The return parameters of the loop's calls of polling functions.
    let mut polled_returns: BTreeSet<&str> = BTreeSet::new();
    for i in &insts {
        if let (Some(Operand::List(_, rets)), Some(f)) = (i.operands.first(), i.direct_callee()) {
            if polling.contains(f) {
                rets.iter().for_each(|o| {
                    names(o, &mut |n| {
                        polled_returns.insert(n);
                    })
                });
            }
        }
    }
    // Whether the loop computes `r`: it writes it with anything but a `mov`
    // of a constant, a symbol's address or a register it does not write
    // (nvcc materialises a lock's 0 and 1 inside the loop).
    let defined = |r: &str| {
        insts.iter().filter(|i| defines(i, r)).any(|i| {
            let constant = i.opcode == "mov"
                && match i.operands.get(1) {
                    Some(Operand::Int(..)) | Some(Operand::Float(..)) => true,
                    Some(Operand::Name { name, .. }) => {
                        !name.starts_with('%') || !insts.iter().any(|j| defines(j, name))
                    }
                    _ => false,
                };
            !constant
        })
    };
    for &b in blocks {
        let Terminator::CondBranch { pred, taken, fallthrough, .. } = &cfg.blocks[b].term else {
            continue;
        };
        if blocks.contains(taken) && blocks.contains(fallthrough) {
            continue;
        }
        // The registers the exit test depends on, through the loop's code.
        let mut slice: Vec<&str> = vec![pred];
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut polled = false;
        let mut compared_with_invariant = false;
        while let Some(r) = slice.pop() {
            if !seen.insert(r) || seen.len() > MAX_SLICE {
                continue;
            }
            for i in insts.iter().filter(|i| defines(i, r)) {
                polled |= is_poll(i, &defined);
                // What a polling call returned, read from its return parameter.
                if i.opcode == "ld" && i.has("param") {
                    if let Some(a) = i.operands.get(1) {
                        a.for_each_name(&mut |n| polled |= polled_returns.contains(n));
                    }
                }
                let sources: Vec<&Operand> = i.operands.iter().skip(1).collect();
                if matches!(i.opcode.as_str(), "setp" | "set")
                    && sources.iter().take(2).any(|o| match o {
                        Operand::Int(..) | Operand::Float(..) => true,
                        Operand::Name { name, .. } => !defined(name),
                        _ => false,
                    })
                {
                    compared_with_invariant = true;
                }
                if matches!(i.opcode.as_str(), "ld" | "atom") {
                    continue; // what is polled, not where
                }
                for o in sources {
                    names(o, &mut |n| slice.push(n));
                }
            }
        }
        if polled && compared_with_invariant {
            return true;
        }
    }
    false
}

/// Whether `inst` reads memory that other threads write while the loop
/// waits. An `atom.exch` or `atom.cas` counts when what it writes (and, for
/// `cas`, what it compares with) the loop does not compute: a lock that
/// swaps in 1, not a compare-and-swap retry that compares with the value
/// the last try returned (lock-free: some lane always gets through).
fn is_poll(inst: &Instruction, defined: &dyn Fn(&str) -> bool) -> bool {
    let private = inst.has("param") || inst.has("const") || inst.has("local");
    let invariant = |k: usize| match inst.operands.get(k) {
        Some(Operand::Int(..)) | Some(Operand::Float(..)) => true,
        Some(Operand::Name { name, .. }) => !defined(name),
        _ => false,
    };
    match inst.opcode.as_str() {
        "ld" => !private && (inst.has("volatile") || inst.has("relaxed") || inst.has("acquire")),
        "atom" if inst.has("cas") => invariant(2) && invariant(3),
        "atom" if inst.has("exch") => invariant(2),
        "atom" => {
            (inst.has("add") || inst.has("or") || inst.has("xor"))
                && matches!(inst.operands.get(2), Some(Operand::Int(_, 0)))
        }
        _ => false,
    }
}

/// Whether `inst` writes register `r`.
fn defines(inst: &Instruction, r: &str) -> bool {
    let mut hit = false;
    if let Some(d) = inst.operands.first() {
        if !matches!(d, Operand::Address(..)) {
            names(d, &mut |n| hit |= n == r);
        }
    }
    hit
}

/// The register names in an operand.
fn names<'o>(o: &'o Operand, f: &mut dyn FnMut(&'o str)) {
    match o {
        Operand::Name { name, .. } => f(name),
        Operand::Not(_, o) => names(o, f),
        Operand::Vector(_, v) | Operand::List(_, v) | Operand::Bracket(_, v) => v.iter().for_each(|o| names(o, f)),
        Operand::Pair(_, a, b) => {
            names(a, f);
            names(b, f);
        }
        Operand::Select { base, .. } => names(base, f),
        _ => {}
    }
}

/// The blocks interleaved for spin loop `s` (see the module documentation).
fn interleaved_region(
    cfg: &Cfg,
    loops: &[Loop],
    s: usize,
    walls: &BTreeSet<BlockId>,
    taken: &BTreeSet<BlockId>,
) -> BTreeSet<BlockId> {
    // The innermost loop around `s` that contains a wall, if any.
    let mut p = loops[s].parent;
    while let Some(l) = p {
        if loops[l].has_wall {
            break;
        }
        p = loops[l].parent;
    }
    let domain: BTreeSet<BlockId> = match p {
        Some(l) => loops[l].blocks.clone(),
        None => (0..cfg.blocks.len()).collect(),
    };
    let mut excluded: BTreeSet<BlockId> = walls.union(taken).copied().filter(|b| domain.contains(b)).collect();
    if let Some(l) = p {
        excluded.insert(loops[l].header);
    }
    for (q, lp) in loops.iter().enumerate() {
        if Some(q) != p && lp.has_wall && lp.blocks.is_subset(&domain) {
            excluded.extend(lp.blocks.iter().copied());
        }
    }
    // The graph G: the domain's blocks and edges, without the edges back to
    // the header of the loop around (so G has no cycle through a wall).
    let header = p.map(|l| loops[l].header);
    let succs = |b: BlockId| -> Vec<BlockId> {
        cfg.successors(b).iter().copied().filter(|v| domain.contains(v) && Some(*v) != header).collect()
    };
    let mut preds: BTreeMap<BlockId, Vec<BlockId>> = BTreeMap::new();
    for &u in &domain {
        for v in succs(u) {
            preds.entry(v).or_default().push(u);
        }
    }
    let no_preds = Vec::new();
    let pred_of = |b: BlockId| preds.get(&b).unwrap_or(&no_preds).clone();
    // Blocks reachable from `from` in G (through any block), forwards or
    // backwards.
    let reach = |from: &mut dyn Iterator<Item = BlockId>, forward: bool| -> BTreeSet<BlockId> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<BlockId> = from.collect();
        while let Some(b) = stack.pop() {
            if seen.insert(b) {
                stack.extend(if forward { succs(b) } else { pred_of(b) });
            }
        }
        seen
    };
    // The blocks connected to the loop in G, in either direction, without
    // passing a wall.
    let spin = loops[s].header;
    let mut region = BTreeSet::new();
    let mut stack = vec![spin];
    while let Some(b) = stack.pop() {
        if excluded.contains(&b) || !region.insert(b) {
            continue;
        }
        stack.extend(succs(b));
        stack.extend(pred_of(b));
    }
    // No wall may lie on a path from the region back into it (it would be
    // inside the new loop): of the blocks before and after such a wall, keep
    // the side of the spin loop.
    loop {
        let after = reach(&mut region.iter().copied(), true);
        let before = reach(&mut region.iter().copied(), false);
        let Some(&wall) = excluded.iter().find(|x| after.contains(x) && before.contains(x)) else {
            return region;
        };
        let from_wall = reach(&mut std::iter::once(wall), true);
        let drop: BTreeSet<BlockId> =
            if from_wall.contains(&spin) { reach(&mut std::iter::once(wall), false) } else { from_wall };
        region.retain(|b| !drop.contains(b));
        // What stays connected to the loop.
        let mut kept = BTreeSet::new();
        let mut stack = vec![spin];
        while let Some(b) = stack.pop() {
            if region.contains(&b) && kept.insert(b) {
                stack.extend(succs(b));
                stack.extend(pred_of(b));
            }
        }
        region = kept;
    }
}

/// Turns `region` into a dispatch loop on register `reg` (see the module
/// documentation): every edge into a block of the region, and every edge
/// out of it, stores the target's number in `reg` and goes on in the
/// dispatch chain, whose head is then the only entry and whose latch the
/// only exit of the new loop (a region block that only left
/// the region would otherwise end up after the loop, for the structurizer,
/// and run after every lane has left).
fn interleave<'a>(cfg: &mut Cfg<'a>, region: &BTreeSet<BlockId>, reg: &str, yield_inst: Option<&'a Instruction>) {
    // A region block that returns returns through a block of its own after
    // the dispatch loop: otherwise the structurizer would put the whole
    // block after the loop (a `.func`'s returns meet at its one exit), and
    // a lane that left the spin loop would run the block (the critical
    // section after a lock, say) only once every lane had left it.
    let region_with_returns = region.clone();
    for &u in &region_with_returns {
        if matches!(cfg.blocks[u].term, Terminator::Return) {
            let ret = cfg.blocks.len();
            cfg.blocks.push(BasicBlock {
                label: None,
                insts: Vec::new(),
                term: Terminator::Return,
                term_span: cfg.blocks[u].term_span,
                assign: None,
            });
            cfg.blocks[u].term = Terminator::Branch(ret);
        }
    }
    let region = &region_with_returns;
    let before = cfg.blocks.len();
    let members = chain_order(cfg, region);
    let exits: BTreeSet<BlockId> =
        members.iter().flat_map(|&u| cfg.successors(u).into_iter()).filter(|v| !region.contains(v)).collect();
    let exits: Vec<BlockId> = exits.into_iter().collect();
    // Members are numbered in chain order from 1, exits after them.
    let index: BTreeMap<BlockId, u32> =
        members.iter().chain(exits.iter()).enumerate().map(|(i, &b)| (b, i as u32 + 1)).collect();
    let n = members.len() as u32;
    let block = |term: Terminator<'static>, assign: Option<u32>| BasicBlock {
        label: None,
        insts: Vec::new(),
        term,
        term_span: Span::default(),
        assign: assign.map(|v| (Cow::Owned(reg.to_string()), v)),
    };
    let test = |value: u32, below: bool, taken: BlockId, fallthrough: BlockId| {
        block(Terminator::Dispatch { reg: Cow::Owned(reg.to_string()), value, below, taken, fallthrough }, None)
    };
    // The loop: its head (the yield), one test per member in chain order,
    // then the latch, which goes round again while a lane's `pc` names a
    // member and otherwise sends the lane down a balanced tree of tests
    // to its exit.
    let head = cfg.blocks.len();
    cfg.blocks.push(block(Terminator::Return, None));
    cfg.blocks[head].insts.extend(yield_inst);
    let exit_root = if exits.is_empty() { head } else { dispatch_tree(cfg, &exits, n + 1, reg) };
    let latch = cfg.blocks.len();
    cfg.blocks.push(if exits.is_empty() {
        block(Terminator::Branch(head), None)
    } else {
        test(n + 1, true, head, exit_root)
    });
    // The test of member k (numbered k + 1) is block `first_test + k`.
    let first_test = cfg.blocks.len();
    for (k, &m) in members.iter().enumerate() {
        let next = if k + 1 == members.len() { latch } else { first_test + k + 1 };
        cfg.blocks.push(test(k as u32 + 1, false, m, next));
    }
    // Where a lane goes on after the edge out of `u`: the test after `u`'s
    // own for a member (the latch after the last), the head from outside.
    let after = |u: BlockId| -> BlockId {
        match index.get(&u) {
            Some(&k) if k < n => first_test + k as usize,
            Some(&k) if k == n => latch,
            _ => head,
        }
    };
    cfg.blocks[head].term = Terminator::Branch(if members.is_empty() { latch } else { first_test });
    // A setting block per edge: a member's edges go on to the next test of
    // the chain, so that a lane runs every member its `pc` reaches going
    // forward in one iteration, and waits for the next iteration only where
    // it goes back (a spin loop's back-edge) or leaves; edges from outside
    // go to the head, the loop's only entry.
    for u in 0..before {
        let from_inside = region.contains(&u);
        for v in cfg.successors(u) {
            if !(region.contains(&v) || from_inside) {
                continue;
            }
            let Some(&value) = index.get(&v) else { continue };
            cfg.blocks.push(block(Terminator::Branch(after(u)), Some(value)));
            let setter = cfg.blocks.len() - 1;
            retarget(&mut cfg.blocks[u].term, v, setter);
        }
    }
}

/// The blocks of `region` in the order of the dispatch chain: reverse
/// postorder of the region's own edges from its entries (the blocks with a
/// predecessor outside it, or the function's entry), so that an edge that
/// does not close a cycle goes forward in the chain.
fn chain_order(cfg: &Cfg, region: &BTreeSet<BlockId>) -> Vec<BlockId> {
    let mut entries: BTreeSet<BlockId> = region.iter().copied().filter(|&b| b == 0).collect();
    for u in 0..cfg.blocks.len() {
        if !region.contains(&u) {
            entries.extend(cfg.successors(u).into_iter().filter(|v| region.contains(v)));
        }
    }
    let mut seen = BTreeSet::new();
    let mut post = Vec::new();
    for root in entries.iter().copied().chain(region.iter().copied()) {
        if !seen.insert(root) {
            continue;
        }
        let mut stack: Vec<(BlockId, usize)> = vec![(root, 0)];
        while let Some(&mut (b, ref mut i)) = stack.last_mut() {
            let next = cfg.successors(b).into_iter().filter(|v| region.contains(v)).nth(*i);
            *i += 1;
            match next {
                Some(v) if seen.insert(v) => stack.push((v, 0)),
                Some(_) => {}
                None => {
                    post.push(b);
                    stack.pop();
                }
            }
        }
    }
    post.reverse();
    post
}

/// Blocks that send a lane whose `reg` is in `first..first + targets.len()`
/// to `targets[reg - first]`; returns the first block (or the only target).
fn dispatch_tree(cfg: &mut Cfg, targets: &[BlockId], first: u32, reg: &str) -> BlockId {
    let test = |cfg: &mut Cfg, value: u32, below: bool, taken: BlockId, fallthrough: BlockId| {
        cfg.blocks.push(BasicBlock {
            label: None,
            insts: Vec::new(),
            term: Terminator::Dispatch { reg: Cow::Owned(reg.to_string()), value, below, taken, fallthrough },
            term_span: Span::default(),
            assign: None,
        });
        cfg.blocks.len() - 1
    };
    match targets {
        [only] => *only,
        [a, b] => test(cfg, first, false, *a, *b),
        _ => {
            let half = targets.len() / 2;
            let low = dispatch_tree(cfg, &targets[..half], first, reg);
            let high = dispatch_tree(cfg, &targets[half..], first + half as u32, reg);
            test(cfg, first + half as u32, true, low, high)
        }
    }
}
