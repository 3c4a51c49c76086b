//! Pass 3: control-flow graph → structured regions.
//!
//! # Algorithm
//! Ramsey's "Beyond Relooper" (ICFP 2022) translation of a reducible CFG into
//! nested `block`/`loop`/`if` regions, driven by the dominator tree:
//!
//! - a *loop header* (target of a back edge) becomes a [`Region::Loop`];
//!   branching back to it is a `continue`;
//! - a *merge node* (a block with two or more forward predecessors) is placed
//!   right after a [`Region::Block`] that wraps the code of its immediate
//!   dominator; branching to it is a `break` out of that block;
//! - any other successor has its immediate dominator as only forward
//!   predecessor and is emitted inline.
//!
//! Regions are single-entry; every statement sequence ends in a transfer
//! ([`Region::Br`] or [`Region::Return`]). The SPIR-V writer turns `Loop`
//! into a loop construct, and `Block` into selections where every break to
//! its follower ends an arm of its trailing `If`s (`emit/func.rs`,
//! `open_block`), else into a one-pass loop construct; it lowers branches
//! that leave more than one construct with a break-target variable (see
//! `emit`).
//!
//! An irreducible CFG (a cycle with several entries) is reported; splitting
//! nodes to make it reducible is a later step of the control-flow work.
//!
//! # Loop exits
//! Ramsey's placement puts every block a loop header dominates inside the
//! loop region, including the code after the loop ([`LoopExits::Inside`]).
//! The translator uses [`LoopExits::Outside`] instead: each *exit node* (a
//! block outside the natural loop whose immediate dominator is inside it)
//! is placed after the loop, which is wrapped in a [`Region::Block`] per
//! exit; branching to an exit is a `break` out of that block. An exit of
//! several nested loops belongs to the outermost. A loop region then holds
//! only the loop's own blocks, which two consumers need:
//! - workgroup-uniform emission (see `emit::uniform`): a barrier after a
//!   loop must not run for the invocations that left early while others
//!   still iterate;
//! - llvmpipe (Mesa 22.3): with the code after an inner loop inside it (and
//!   the outer loop's latch with it), the kernel of issue 16 (a grid-stride
//!   loop around a loop with two exits) lost the stores of the last outer
//!   iteration for some lanes; with the exits outside, the code after a loop
//!   runs once, after every lane has left (values the loop leaves behind
//!   are handled in `emit/live_out.rs`).

use crate::cfg::{BlockId, Cfg, Terminator};
use crate::diag::{Diagnostic, Span};

/// Where a [`Region::Br`] goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// Leave the [`Region::Block`] whose follower is this block.
    Exit(BlockId),
    /// Start the next iteration of the [`Region::Loop`] headed by this block.
    Continue(BlockId),
}

/// A structured region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Region {
    /// The straight-line instructions of a basic block.
    Code(BlockId),
    /// `block { body }`: `Br(Exit(follower))` inside jumps to its end, where
    /// the code of `follower` comes next.
    Block {
        /// The merge node that follows the block.
        follower: BlockId,
        /// Body.
        body: Vec<Region>,
    },
    /// `loop { body }` headed by `header`.
    Loop {
        /// The loop header.
        header: BlockId,
        /// Body.
        body: Vec<Region>,
    },
    /// Two-way branch on the predicate of `block`'s terminator. The
    /// structurizer ends both arms with a transfer; [`crate::unroll`] may
    /// leave an arm open (empty, or ending in an open `If`), and an open arm
    /// goes on with the code after the `If`.
    If {
        /// The block whose conditional branch this is.
        block: BlockId,
        /// Taken when the guard holds.
        then_body: Vec<Region>,
        /// Taken otherwise.
        else_body: Vec<Region>,
    },
    /// Structured jump.
    Br(Target),
    /// `ret`/`exit`.
    Return,
}

/// Where the code after a loop goes (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LoopExits {
    /// Inside the loop region, under the header's dominator subtree (Ramsey).
    #[default]
    Inside,
    /// After the loop region, in blocks that wrap it.
    Outside,
}

struct Analysis {
    rpo_index: Vec<usize>,
    /// For an exit node: the header of the outermost loop it exits
    /// ([`LoopExits::Outside`] only).
    exit_of: Vec<Option<BlockId>>,
    idom: Vec<usize>,
    is_loop_header: Vec<bool>,
    is_merge: Vec<bool>,
    /// Dominator-tree children, sorted by RPO: those of `b` are
    /// `children[child_start[b]..child_start[b + 1]]`.
    children: Vec<BlockId>,
    child_start: Vec<usize>,
}

impl Analysis {
    fn children(&self, b: BlockId) -> &[BlockId] {
        &self.children[self.child_start[b]..self.child_start[b + 1]]
    }
}

/// Lists per block in one vector (compressed rows): `pairs` are (block,
/// item), pushed in the order wanted within each block's list. Returns the
/// items and each block's start (`n + 1` entries).
fn rows(n: usize, pairs: impl Iterator<Item = (BlockId, BlockId)> + Clone) -> (Vec<BlockId>, Vec<usize>) {
    let mut start = vec![0usize; n + 1];
    for (b, _) in pairs.clone() {
        start[b + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut items = vec![0; start[n]];
    for (b, x) in pairs {
        items[fill[b]] = x;
        fill[b] += 1;
    }
    (items, start)
}

fn analyse(cfg: &Cfg, span_of: &dyn Fn(BlockId) -> Span, exits: LoopExits) -> Result<Analysis, Diagnostic> {
    let n = cfg.blocks.len();
    // Iterative DFS for postorder.
    let mut post = Vec::with_capacity(n);
    let mut state = vec![0u8; n]; // 0 new, 1 on stack, 2 done
    let mut stack: Vec<(BlockId, usize)> = vec![(0, 0)];
    state[0] = 1;
    let succs: Vec<crate::cfg::Succs> = (0..n).map(|b| cfg.successors(b)).collect();
    while let Some((b, i)) = stack.pop() {
        if i < succs[b].len() {
            stack.push((b, i + 1));
            let s = succs[b][i];
            if state[s] == 0 {
                state[s] = 1;
                stack.push((s, 0));
            }
        } else {
            state[b] = 2;
            post.push(b);
        }
    }
    let rpo: Vec<BlockId> = post.iter().rev().copied().collect();
    let mut rpo_index = vec![usize::MAX; n];
    for (i, b) in rpo.iter().enumerate() {
        rpo_index[*b] = i;
    }
    let (pred_list, pred_start) = rows(n, succs.iter().enumerate().flat_map(|(b, ss)| ss.iter().map(move |&s| (s, b))));
    let preds = |b: BlockId| &pred_list[pred_start[b]..pred_start[b + 1]];
    // Cooper, Harvey, Kennedy: "A Simple, Fast Dominance Algorithm".
    let mut idom = vec![usize::MAX; n];
    idom[0] = 0;
    let mut changed = true;
    while changed {
        changed = false;
        for &b in rpo.iter().skip(1) {
            let mut new = usize::MAX;
            for &p in preds(b) {
                if idom[p] == usize::MAX {
                    continue;
                }
                new = if new == usize::MAX {
                    p
                } else {
                    let (mut x, mut y) = (p, new);
                    while x != y {
                        while rpo_index[x] > rpo_index[y] {
                            x = idom[x];
                        }
                        while rpo_index[y] > rpo_index[x] {
                            y = idom[y];
                        }
                    }
                    x
                };
            }
            if new != idom[b] {
                idom[b] = new;
                changed = true;
            }
        }
    }
    let dominates = |a: BlockId, mut b: BlockId| -> bool {
        loop {
            if a == b {
                return true;
            }
            if b == 0 {
                return false;
            }
            b = idom[b];
        }
    };
    let mut is_loop_header = vec![false; n];
    let mut forward_preds = vec![0usize; n];
    for (b, ss) in succs.iter().enumerate() {
        for &s in ss {
            if rpo_index[s] <= rpo_index[b] {
                // Retreating edge: must be a back edge to a dominator.
                if !dominates(s, b) {
                    return Err(Diagnostic::error(
                        span_of(s),
                        "irreducible control flow (a loop with more than one entry) is not supported yet",
                    ));
                }
                is_loop_header[s] = true;
            } else {
                forward_preds[s] += 1;
            }
        }
    }
    let is_merge: Vec<bool> = forward_preds.iter().map(|&c| c >= 2).collect();
    let (children, child_start) = rows(n, rpo.iter().skip(1).map(|&b| (idom[b], b)));
    let mut exit_of = vec![None; n];
    if exits == LoopExits::Outside {
        // Natural loops, outer headers first (a header precedes the loops it encloses in RPO).
        for &h in rpo.iter().filter(|&&h| is_loop_header[h]) {
            let mut in_loop = vec![false; n];
            in_loop[h] = true;
            let mut stack: Vec<BlockId> =
                preds(h).iter().copied().filter(|&p| rpo_index[p] >= rpo_index[h] && dominates(h, p)).collect();
            while let Some(b) = stack.pop() {
                if !in_loop[b] {
                    in_loop[b] = true;
                    stack.extend(preds(b).iter().copied().filter(|&p| rpo_index[p] != usize::MAX));
                }
            }
            for &c in rpo.iter().skip(1) {
                if !in_loop[c] && in_loop[idom[c]] && exit_of[c].is_none() {
                    exit_of[c] = Some(h);
                }
            }
        }
    }
    Ok(Analysis { rpo_index, exit_of, idom, is_loop_header, is_merge, children, child_start })
}

/// Structurize a CFG. `span_of` gives a block's source position for diagnostics.
pub fn run(cfg: &Cfg, span_of: &dyn Fn(BlockId) -> Span) -> Result<Vec<Region>, Diagnostic> {
    run_with(cfg, span_of, LoopExits::Outside)
}

/// Structurize a CFG, placing loop exits as `exits` says.
pub fn run_with(cfg: &Cfg, span_of: &dyn Fn(BlockId) -> Span, exits: LoopExits) -> Result<Vec<Region>, Diagnostic> {
    let a = analyse(cfg, span_of, exits)?;
    let _ = &a.idom;
    let mut out = Vec::new();
    do_tree(cfg, &a, 0, &mut out);
    Ok(out)
}

fn do_tree(cfg: &Cfg, a: &Analysis, x: BlockId, out: &mut Vec<Region>) {
    // Merge children, outermost (highest RPO) first.
    let mut merges: Vec<BlockId> =
        a.children(x).iter().copied().filter(|&c| a.is_merge[c] && a.exit_of[c].is_none()).collect();
    merges.sort_by_key(|&c| std::cmp::Reverse(a.rpo_index[c]));
    if a.is_loop_header[x] {
        let mut exits: Vec<BlockId> = (0..a.exit_of.len()).filter(|&c| a.exit_of[c] == Some(x)).collect();
        exits.sort_by_key(|&c| std::cmp::Reverse(a.rpo_index[c]));
        loop_with_exits(cfg, a, x, &merges, &exits, out);
    } else {
        node_within(cfg, a, x, &merges, out);
    }
}

/// The loop headed by `x`, inside one block per exit node (outermost first).
fn loop_with_exits(cfg: &Cfg, a: &Analysis, x: BlockId, merges: &[BlockId], exits: &[BlockId], out: &mut Vec<Region>) {
    match exits.split_first() {
        Some((&y, rest)) => {
            let mut body = Vec::new();
            loop_with_exits(cfg, a, x, merges, rest, &mut body);
            out.push(Region::Block { follower: y, body });
            do_tree(cfg, a, y, out);
        }
        None => {
            let mut body = Vec::new();
            node_within(cfg, a, x, merges, &mut body);
            out.push(Region::Loop { header: x, body });
        }
    }
}

fn node_within(cfg: &Cfg, a: &Analysis, x: BlockId, merges: &[BlockId], out: &mut Vec<Region>) {
    match merges.split_first() {
        Some((&y, rest)) => {
            let mut body = Vec::new();
            node_within(cfg, a, x, rest, &mut body);
            out.push(Region::Block { follower: y, body });
            do_tree(cfg, a, y, out);
        }
        None => {
            out.push(Region::Code(x));
            match &cfg.blocks[x].term {
                Terminator::Branch(t) => do_branch(cfg, a, x, *t, out),
                Terminator::CondBranch { taken, fallthrough, .. } | Terminator::Dispatch { taken, fallthrough, .. }
                    if taken == fallthrough =>
                {
                    do_branch(cfg, a, x, *taken, out)
                }
                Terminator::CondBranch { taken, fallthrough, .. } | Terminator::Dispatch { taken, fallthrough, .. } => {
                    let mut then_body = Vec::new();
                    do_branch(cfg, a, x, *taken, &mut then_body);
                    let mut else_body = Vec::new();
                    do_branch(cfg, a, x, *fallthrough, &mut else_body);
                    out.push(Region::If { block: x, then_body, else_body });
                }
                Terminator::Return => out.push(Region::Return),
            }
        }
    }
}

fn do_branch(cfg: &Cfg, a: &Analysis, x: BlockId, y: BlockId, out: &mut Vec<Region>) {
    if a.rpo_index[y] <= a.rpo_index[x] {
        out.push(Region::Br(Target::Continue(y)));
    } else if a.is_merge[y] || a.exit_of[y].is_some() {
        out.push(Region::Br(Target::Exit(y)));
    } else {
        do_tree(cfg, a, y, out);
    }
}

/// Render regions as indented text (for golden tests and debugging), naming
/// blocks by their label (or `bN`).
pub fn render(cfg: &Cfg, regions: &[Region]) -> String {
    let mut s = String::new();
    render_into(cfg, regions, 0, &mut s);
    s
}

fn block_name(cfg: &Cfg, b: BlockId) -> String {
    cfg.blocks[b].label.map_or_else(|| format!("b{b}"), str::to_string)
}

fn render_into(cfg: &Cfg, regions: &[Region], depth: usize, s: &mut String) {
    let pad = "  ".repeat(depth);
    for r in regions {
        match r {
            Region::Code(b) => {
                s.push_str(&format!("{pad}code {} ({} insts)\n", block_name(cfg, *b), cfg.blocks[*b].insts.len()))
            }
            Region::Block { follower, body } => {
                s.push_str(&format!("{pad}block -> {}\n", block_name(cfg, *follower)));
                render_into(cfg, body, depth + 1, s);
            }
            Region::Loop { header, body } => {
                s.push_str(&format!("{pad}loop {}\n", block_name(cfg, *header)));
                render_into(cfg, body, depth + 1, s);
            }
            Region::If { block, then_body, else_body } => {
                s.push_str(&format!("{pad}if {}\n", block_name(cfg, *block)));
                render_into(cfg, then_body, depth + 1, s);
                s.push_str(&format!("{pad}else\n"));
                render_into(cfg, else_body, depth + 1, s);
            }
            Region::Br(Target::Exit(b)) => s.push_str(&format!("{pad}break {}\n", block_name(cfg, *b))),
            Region::Br(Target::Continue(b)) => s.push_str(&format!("{pad}continue {}\n", block_name(cfg, *b))),
            Region::Return => s.push_str(&format!("{pad}return\n")),
        }
    }
}
