//! Lock step for legacy warp-synchronous code on the emulated warp path.
//!
//! # Why
//! Code written before Volta exchanges values between the lanes of a warp
//! through memory without `__syncwarp()`, relying on the 32 lanes running in
//! lock step: every lane's access of one instruction happens before any
//! lane's access of the next. CUDA has not guaranteed it since Volta, but
//! NVIDIA's GPUs run such code as written, and much real code depends on it:
//! - through `volatile` shared memory: the CUDA samples' reductions, GPU
//!   Gems' warp scans, CUB's old `WarpReduce`/`WarpScan`;
//! - through global memory with plain loads and stores: CuPy's
//!   `partition_kernel` and `partition_merge_kernel`, where each warp
//!   bitonic-sorts its own slice of the array in place;
//! - through plain shared memory, a lane overwriting what the other lanes
//!   have just read: NVIDIA Warp's tiled GMRES reads a tile's pivot into
//!   every lane, then lane 0 stores its rotated value over it, with no
//!   barrier between.
//!
//! On the emulated warp path (lavapipe: a 32-lane warp is four 8-lane
//! subgroups) the subgroups of a warp run one after another between
//! barriers, so the first finishes every step before the second starts.
//!
//! # What
//! A *lock-step point* is an `ld` or `st` before which the workgroup meets at
//! a barrier ([`super::uniform`] runs it as a collective instruction), which
//! orders every lane's earlier accesses before every lane's access here:
//! exactly lock step's order. A point is needed only where the order can
//! matter: a load that some path reaches from a store, and a store that some
//! path reaches from any access, with no barrier or warp collective between
//! (two loads never conflict; the first access after a barrier is already
//! ordered). Two analyses, whose points are united:
//! - **shared** ([`maybe_shared`]): in every function with `volatile`
//!   shared accesses or with both `ld.shared` and `st.shared`. Candidates:
//!   `volatile` loads (after a store), `volatile` stores (after any access),
//!   and plain `st.shared` after a load, `volatile` or not (write after
//!   read). Generic stores and atomics count as shared stores. Plain loads
//!   are never points (read after write: code that relies on lock step reads
//!   other lanes' stores through `volatile`, else the compiler may keep them
//!   in registers, and CUB's non-`volatile` loads after a lane's store would
//!   otherwise each cost a meeting). The analysis does not look at
//!   addresses, so a tree reduction's `s[t] += s[t + k]`, whose storing and
//!   read lanes are disjoint, gets a meeting per level: 1.2x the run time of
//!   `reduce_tpl<float, 256>` on lavapipe (`ptxvk-bench lockstep`). The
//!   tensor-map library's functions (`shaders/tma.ptx`) run on one thread
//!   and get no write-after-read points.
//! - **global** ([`exchanges_through_global`]): in functions that split their
//!   threads into warps themselves (a thread index divided by 32 or taken
//!   modulo 32, or `%laneid`/`%warpid`), let that split choose their global
//!   accesses (addresses or branches), and have no block barrier, every
//!   global and generic `ld` and `st` (`ld.global.nc` and `ldu` read memory
//!   no thread writes). Element-wise and grid-stride kernels, whose threads
//!   touch only their own elements, do not split warps and get no point;
//!   kernels with block barriers (CUB, Triton) order their exchanges with
//!   them.
//!
//! Calls count as loads and stores; a `.func` starts as if after both. In a
//! function that makes generic addresses of shared memory (`cvta.shared`:
//! nvcc `-G` code reaches every shared array that way), generic `volatile`
//! `ld` and `st` count as shared ones. Plain generic ones do not: counting
//! them too made a generated `-G` kernel (difftest seed 2024120821818, mode
//! G, no exchange in it) compute wrong values, not diagnosed yet.
//!
//! Accesses that a spin loop reaches before a wall are not points (see
//! [`crate::progress::spin_reach`]): a lock's critical section is not
//! warp-synchronous code. Points before the spin loops stay, and are walls
//! that bound the loops' interleaved regions like any collective (dropping
//! every point of the region, as before, lost the lock step of an exchange
//! just before a polling loop: difftest seed 700070). A function with a spin
//! loop gets no global points at all: its
//! global accesses are ordered by its locks and flags, and a point in a
//! critical section beyond the interleaved region (after a call, say) would
//! be a collective inside the lock, which livelocks or lets lanes read what
//! the holder has not yet written (Taichi's pointer activation).
//!
//! # Limits
//! A `.func` that exchanges through global memory for a caller that split the
//! warps is not covered (NVVM inlines such helpers). Warp-synchronous global
//! exchanges in a kernel that also has block barriers are not covered. Nor
//! are exchanges after a spin loop with no wall between, plain shared loads
//! of other lanes' plain stores (read after write without `volatile`), plain
//! generic stores after loads (write after read in `-G` code), and generic
//! accesses in a `.func` whose caller made the shared address generic.

use super::func::Plan;
use super::uniform::is_warp_op;
use crate::ast::{FunctionKind, Instruction, Operand};
use crate::cfg::BlockId;
use crate::fxhash::FxHashSet;
use std::collections::{BTreeSet, HashMap};

/// Since the last barrier: a load (bit 0), a store (bit 1).
const LOAD: u8 = 1;
/// See [`LOAD`].
const STORE: u8 = 2;
/// Since the last barrier: a plain (not `volatile`) `ld.shared`, which only
/// a later `.shared` store conflicts with (write after read).
const PLAIN_LOAD: u8 = 4;
/// A load that reads other lanes' stores: a `volatile` shared load, a
/// global load.
const READS: Access = Access::Candidate { adds: LOAD, conflicts: STORE };
/// A store that may overwrite what other lanes read or wrote.
const WRITES: Access = Access::Candidate { adds: STORE, conflicts: LOAD | STORE | PLAIN_LOAD };

/// The identity of an instruction in [`points`]' set.
pub(crate) fn inst_key(inst: &Instruction) -> usize {
    inst as *const Instruction as usize
}

/// The memory an analysis follows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Memory {
    /// `.shared`; with `generic`, generic `volatile` `ld` and `st` too (in
    /// functions that make generic addresses of shared memory,
    /// [`makes_generic_shared`]).
    Shared {
        generic: bool,
    },
    Global,
}

/// Whether `inst` names no state space: a generic access.
fn is_generic(inst: &Instruction) -> bool {
    !inst.modifiers.iter().any(|m| {
        matches!(m.as_str(), "global" | "local" | "param" | "const" | "param::entry" | "param::func")
            || m.starts_with("shared")
    })
}

/// Whether `inst` may access shared memory: it names `.shared`, or, with
/// `generic` (its function makes generic shared addresses), it is a generic
/// `volatile` access.
fn maybe_shared(inst: &Instruction, generic: bool) -> bool {
    inst.modifiers.iter().any(|m| m.starts_with("shared")) || (generic && is_generic(inst) && inst.has("volatile"))
}

/// Whether `plan` makes generic addresses of shared memory (`cvta.shared`),
/// so that its generic accesses may be shared ones: nvcc `-G` reaches shared
/// arrays only through them.
fn makes_generic_shared(plan: &Plan) -> bool {
    plan.instructions()
        .any(|i| i.opcode == "cvta" && !i.has("to") && i.modifiers.iter().any(|m| m.starts_with("shared")))
}

/// How an instruction takes part in one analysis.
enum Access {
    /// A candidate point: an access that adds `adds` to the state, and is a
    /// point where the state since the last wall has any of `conflicts`.
    Candidate { adds: u8, conflicts: u8 },
    /// Orders every lane's earlier accesses (a barrier, a warp collective).
    Wall,
    /// Loads ([`LOAD`]) and stores ([`STORE`]) that are not candidates.
    Effect(u8),
}

/// Whether `inst` names a state space other than global and generic ones.
fn other_space(inst: &Instruction, global: bool) -> bool {
    inst.modifiers.iter().any(|m| {
        matches!(m.as_str(), "local" | "param" | "const" | "param::entry" | "param::func")
            || (global && m.starts_with("shared"))
            || (!global && m == "global")
    })
}

fn classify(inst: &Instruction, memory: Memory) -> Access {
    let op = inst.opcode.as_str();
    if is_warp_op(inst) || matches!(op, "bar" | "barrier") {
        return Access::Wall;
    }
    if op == "call" {
        return Access::Effect(LOAD | STORE);
    }
    match memory {
        Memory::Shared { generic } => {
            let maybe_shared = maybe_shared(inst, generic);
            if matches!(op, "ld" | "st") && maybe_shared && inst.has("volatile") {
                return if op == "st" { WRITES } else { READS };
            }
            let shared = maybe_shared;
            match op {
                // Write after read: a lane's store may overwrite what other
                // lanes of the warp read before it (Warp's tiled GMRES reads
                // a broadcast element, then lane 0 overwrites it).
                "st" if shared => Access::Candidate { adds: STORE, conflicts: LOAD | PLAIN_LOAD },
                "ld" if shared => Access::Effect(PLAIN_LOAD),
                "atom" | "red" | "cp" | "mbarrier" if shared => Access::Effect(STORE),
                "st" | "atom" | "red" if !other_space(inst, false) => Access::Effect(STORE),
                _ => Access::Effect(0),
            }
        }
        Memory::Global => {
            let global = !other_space(inst, true);
            match op {
                "ld" if global && !inst.has("nc") => READS,
                "st" if global => WRITES,
                "atom" | "red" if global => Access::Effect(STORE),
                "cp" if inst.has("global") => Access::Effect(STORE),
                _ => Access::Effect(0),
            }
        }
    }
}

/// Where a function spins, for [`points`].
pub(crate) struct Spinning {
    /// Whether it has an interleaved region (see [`crate::progress`]).
    pub any: bool,
    /// The blocks its spin loops reach before a wall
    /// ([`crate::progress::spin_reach`]).
    pub reach: BTreeSet<BlockId>,
}

/// The lock-step points of every function in `plans` (see the module
/// documentation). `spinning` tells where a function spins: accesses in
/// blocks that a spin loop reaches before a wall are not points, and a
/// function with an interleaved region gets no global points. It is asked
/// once, and only for functions that may have points.
pub(crate) fn points(plans: &HashMap<String, Plan>, spinning: &dyn Fn(&Plan) -> Spinning) -> FxHashSet<usize> {
    let mut points = FxHashSet::default();
    for plan in plans.values() {
        let generic = makes_generic_shared(plan);
        let shared = plan
            .instructions()
            .any(|i| matches!(i.opcode.as_str(), "ld" | "st") && i.has("volatile") && maybe_shared(i, generic))
            || reads_then_writes_shared(plan, generic);
        let global = exchanges_through_global(plan);
        if !shared && !global {
            continue;
        }
        let spin = spinning(plan);
        let mut own = FxHashSet::default();
        if shared {
            add_points(plan, Memory::Shared { generic }, &mut own);
        }
        if global && !spin.any {
            add_points(plan, Memory::Global, &mut own);
        }
        for &b in &spin.reach {
            for i in &plan.cfg.blocks[b].insts {
                own.remove(&inst_key(i));
            }
        }
        points.extend(own);
    }
    points
}

/// Whether `plan` has both a plain `ld.shared` and an `st.shared` (or, with
/// `generic`, generic ones), so that a lane's store may overwrite what other
/// lanes of its warp read before it.
/// The tensor-map library's own functions (`shaders/tma.ptx`, `__ptxvk_`
/// names) are run by one thread and rely on no lock step.
fn reads_then_writes_shared(plan: &Plan, generic: bool) -> bool {
    if plan.func.name.starts_with("__ptxvk_") {
        return false;
    }
    let shared = |i: &Instruction, op: &str| i.opcode == op && maybe_shared(i, generic);
    plan.instructions().any(|i| shared(i, "ld")) && plan.instructions().any(|i| shared(i, "st"))
}

/// Adds `plan`'s points for `memory` to `points`: a forward dataflow of
/// [`LOAD`]/[`STORE`] since the last wall.
fn add_points(plan: &Plan, memory: Memory, points: &mut FxHashSet<usize>) {
    let cfg = &plan.cfg;
    let n = cfg.blocks.len();
    let mut into = vec![0u8; n];
    if n > 0 && plan.func.kind != FunctionKind::Entry {
        into[0] = LOAD | STORE;
    }
    let transfer = |state: u8, b: usize, mut points: Option<&mut FxHashSet<usize>>| {
        let mut s = state;
        for inst in &cfg.blocks[b].insts {
            match classify(inst, memory) {
                Access::Candidate { adds, conflicts } => {
                    if s & conflicts != 0 {
                        if let Some(p) = points.as_deref_mut() {
                            p.insert(inst_key(inst));
                        }
                        s = 0;
                    }
                    s |= adds;
                }
                Access::Wall => s = 0,
                Access::Effect(x) => s |= x,
            }
        }
        s
    };
    let mut work: Vec<usize> = (0..n).collect();
    let mut queued = vec![true; n];
    while let Some(b) = work.pop() {
        queued[b] = false;
        let out = transfer(into[b], b, None);
        for t in cfg.successors(b) {
            if out & !into[t] != 0 {
                into[t] |= out;
                if !queued[t] {
                    queued[t] = true;
                    work.push(t);
                }
            }
        }
    }
    for (b, &state) in into.iter().enumerate() {
        transfer(state, b, Some(points));
    }
}

/// Whether `plan` may exchange values between the lanes of a warp through
/// global memory, relying on lock step: it has no block barrier, and it
/// splits its threads into warps itself ([`splits_warps`]).
pub(crate) fn exchanges_through_global(plan: &Plan) -> bool {
    !plan.instructions().any(|i| matches!(i.opcode.as_str(), "bar" | "barrier") && !i.has("warp")) && splits_warps(plan)
}

/// Whether `plan` splits its threads into warps and lets the split decide
/// which global memory a lane touches: the address of a global or generic
/// `ld`/`st`, its guard, or the guard of a branch derives from `%laneid` or
/// `%warpid`, or from a thread index (`%tid`, through moves, conversions,
/// integer arithmetic and comparisons) divided by 32 (`shr` by 5, `div` by
/// 32) or taken modulo 32 (`and` with 31, `rem` by 32): code that gives each
/// warp, and each lane of it, its own part of the data. A lane number used
/// as data (a shift count) does not count.
fn splits_warps(plan: &Plan) -> bool {
    fn name(o: &Operand) -> Option<&str> {
        match o {
            Operand::Name { name, .. } => Some(name.as_str()),
            _ => None,
        }
    }
    let int = |o: &Operand| match o {
        Operand::Int(_, v) => Some(*v),
        _ => None,
    };
    let insts: Vec<&Instruction> = plan.instructions().collect();
    // Registers derived from a thread index, and from a warp split of one.
    let mut thread: FxHashSet<&str> = FxHashSet::default();
    let mut split: FxHashSet<&str> = FxHashSet::default();
    loop {
        let before = (thread.len(), split.len());
        for inst in &insts {
            let op = inst.opcode.as_str();
            if !matches!(
                op,
                "mov"
                    | "cvt"
                    | "add"
                    | "sub"
                    | "mul"
                    | "mad"
                    | "shl"
                    | "shr"
                    | "and"
                    | "or"
                    | "div"
                    | "rem"
                    | "selp"
                    | "setp"
            ) {
                continue;
            }
            let Some((dst, srcs)) = inst.operands.split_first() else {
                continue;
            };
            // `setp`'s `p|q` sets both.
            let dsts: Vec<&str> = match dst {
                Operand::Pair(_, p, q) => [name(p), name(q)].into_iter().flatten().collect(),
                d => name(d).into_iter().collect(),
            };
            let names = || srcs.iter().filter_map(name);
            let last = srcs.last().and_then(int);
            let splits_thread = names().any(|n| n == "%tid" || thread.contains(n))
                && match op {
                    "shr" => last == Some(5),
                    "div" | "rem" => last == Some(32),
                    "and" => srcs.iter().filter_map(int).any(|v| v == 31),
                    _ => false,
                };
            if splits_thread || names().any(|n| n == "%laneid" || n == "%warpid" || split.contains(n)) {
                split.extend(dsts);
            } else if names().any(|n| n == "%tid" || thread.contains(n)) {
                thread.extend(dsts);
            }
        }
        if (thread.len(), split.len()) == before {
            break;
        }
    }
    let branches_by_split = plan.cfg.blocks.iter().any(|b| match &b.term {
        crate::cfg::Terminator::CondBranch { pred, .. } => split.contains(pred),
        _ => false,
    });
    branches_by_split
        || insts.iter().any(|inst| {
            matches!(classify(inst, Memory::Global), Access::Candidate { .. })
                && (inst.guard.as_ref().is_some_and(|g| split.contains(g.name.as_str()))
                    || inst.operands.iter().any(|o| {
                        matches!(o, Operand::Address(_, a)
                            if a.base.as_ref().is_some_and(|(_, b)| split.contains(b.as_str())))
                    }))
        })
}
