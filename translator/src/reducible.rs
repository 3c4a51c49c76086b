//! Pass: make any CFG reducible by edge multiplexing.
//!
//! # Algorithm
//! For every strongly connected component (a cycle) with more than one
//! entry block, all edges into its entries — from outside and from inside —
//! are redirected through a new *dispatch* header: each redirected edge
//! passes through a small block that stores the chosen entry's number in a
//! fresh register, and the header branches on that register to the entry.
//! The cycle then has a single entry, and the pass recurses into the cycle
//! without its header to fix nested cycles. This is the edge-multiplexing
//! construction of Bahmann, Reissmann, Jahre and Meyer ("Perfect
//! Reconstructability of Control Flow from Demand Dependence Graphs", 2015),
//! also used by MLIR's CFG-to-SCF lifting and LLVM's FixIrreducible.
//!
//! It was chosen over node splitting because it never duplicates code: the
//! output grows by two small blocks per redirected edge plus one block per
//! extra entry, so its size stays linear in the input, and reducible CFGs
//! (everything nvcc emits without `goto` into loops) pass through untouched.

use crate::cfg::{BasicBlock, BlockId, Cfg, Terminator};
use crate::diag::Span;
use std::borrow::Cow;
use std::collections::BTreeSet;

/// Make `cfg` reducible. Returns the names of the 32-bit registers it
/// introduced (the caller declares them).
pub fn run(cfg: &mut Cfg) -> Vec<String> {
    let mut regs = Vec::new();
    if cfg.blocks.is_empty() {
        return regs;
    }
    // The entry must not be part of a cycle: give it a fresh, empty entry.
    if entry_has_predecessor(cfg) {
        let old = cfg.blocks[0].clone();
        let moved = cfg.blocks.len();
        cfg.blocks.push(old);
        for b in 0..cfg.blocks.len() {
            retarget(&mut cfg.blocks[b].term, 0, moved);
        }
        cfg.blocks[0] = BasicBlock {
            label: None,
            insts: Vec::new(),
            term: Terminator::Branch(moved),
            term_span: Span::default(),
            assign: None,
        };
    }
    let all: BTreeSet<BlockId> = (1..cfg.blocks.len()).collect();
    fix(cfg, &all, &mut regs);
    regs
}

/// Whether a block branches to the entry block (which [`run`] then
/// replaces by a fresh one). Otherwise `run` leaves a reducible CFG as it is.
pub fn entry_has_predecessor(cfg: &Cfg) -> bool {
    (0..cfg.blocks.len()).any(|b| cfg.successors(b).contains(&0))
}

/// Points the edges of `t` that go to `from` at `to`.
pub(crate) fn retarget(t: &mut Terminator, from: BlockId, to: BlockId) {
    match t {
        Terminator::Branch(x) => {
            if *x == from {
                *x = to
            }
        }
        Terminator::CondBranch { taken, fallthrough, .. } | Terminator::Dispatch { taken, fallthrough, .. } => {
            if *taken == from {
                *taken = to;
            }
            if *fallthrough == from {
                *fallthrough = to;
            }
        }
        Terminator::Return => {}
    }
}

fn fix(cfg: &mut Cfg, nodes: &BTreeSet<BlockId>, regs: &mut Vec<String>) {
    for scc in sccs(cfg, nodes) {
        let cyclic = scc.len() > 1 || scc.iter().any(|&b| cfg.successors(b).contains(&b));
        if !cyclic {
            continue;
        }
        let set: BTreeSet<BlockId> = scc.iter().copied().collect();
        let n = cfg.blocks.len();
        let mut entries: BTreeSet<BlockId> = BTreeSet::new();
        for p in 0..n {
            if set.contains(&p) {
                continue;
            }
            for s in cfg.successors(p) {
                if set.contains(&s) {
                    entries.insert(s);
                }
            }
        }
        let mut inner = set.clone();
        let header = if entries.len() <= 1 {
            entries.iter().next().copied().unwrap_or_else(|| *set.iter().next().unwrap_or(&0))
        } else {
            let entries: Vec<BlockId> = entries.into_iter().collect();
            let reg = format!("%__dispatch{}", regs.len());
            regs.push(reg.clone());
            // The dispatch chain: d == 1 ? e1 : (d == 2 ? e2 : ... en).
            let first = cfg.blocks.len();
            let chain = entries.len() - 1;
            for i in 0..chain {
                let fallthrough = if i + 1 < chain { first + i + 1 } else { entries[chain] };
                cfg.blocks.push(BasicBlock {
                    label: None,
                    insts: Vec::new(),
                    term: Terminator::Dispatch {
                        reg: Cow::Owned(reg.clone()),
                        value: i as u32 + 1,
                        below: false,
                        taken: entries[i],
                        fallthrough,
                    },
                    term_span: Span::default(),
                    assign: None,
                });
                inner.insert(first + i);
            }
            // Redirect every edge into an entry through an assigning block.
            for p in 0..first {
                for (k, &h) in entries.iter().enumerate() {
                    if !cfg.successors(p).contains(&h) {
                        continue;
                    }
                    let edge = cfg.blocks.len();
                    cfg.blocks.push(BasicBlock {
                        label: None,
                        insts: Vec::new(),
                        term: Terminator::Branch(first),
                        term_span: Span::default(),
                        assign: Some((Cow::Owned(reg.clone()), k as u32 + 1)),
                    });
                    retarget(&mut cfg.blocks[p].term, h, edge);
                    if set.contains(&p) {
                        inner.insert(edge);
                    }
                }
            }
            first
        };
        inner.remove(&header);
        fix(cfg, &inner, regs);
    }
}

/// Strongly connected components of the subgraph induced by `nodes`
/// (Tarjan's algorithm, iterative).
fn sccs(cfg: &Cfg, nodes: &BTreeSet<BlockId>) -> Vec<Vec<BlockId>> {
    strongly_connected(cfg.blocks.len(), nodes.iter().copied(), |v, i| {
        cfg.successors(v).iter().copied().filter(|s| nodes.contains(s)).nth(i)
    })
}

/// Strongly connected components of a graph of `n` nodes, searched from
/// `roots` in order; `succ(v, i)` is the `i`-th successor of `v` (`None`
/// past the last). Tarjan's algorithm, iterative; each component sorted.
pub(crate) fn strongly_connected(
    n: usize,
    roots: impl IntoIterator<Item = usize>,
    succ: impl Fn(usize, usize) -> Option<usize>,
) -> Vec<Vec<usize>> {
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut counter = 0;
    for root in roots {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&(v, i)) = work.last() {
            if let Some(w) = succ(v, i) {
                if let Some(top) = work.last_mut() {
                    top.1 += 1;
                }
                if index[w] == usize::MAX {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(u, _)) = work.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    comp.sort();
                    out.push(comp);
                }
            }
        }
    }
    out
}
