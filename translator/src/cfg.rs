//! Pass 2: a function body → control-flow graph of basic blocks.
//!
//! # Invariants of [`Cfg`]
//! - `blocks[0]` is the entry block.
//! - Every block ends in exactly one [`Terminator`]; instructions inside a
//!   block never transfer control (`bra`, `ret`, `exit` become terminators;
//!   a guarded `ret`/`exit` becomes a conditional branch to a block that
//!   returns).
//! - Blocks unreachable from the entry are removed, and successors refer to
//!   blocks by index.
//! - Labels are resolved; a `bra` to an unknown label is a diagnostic.

use crate::ast::{Instruction, Operand, Statement};
use crate::diag::{Diagnostic, Span};
use std::borrow::Cow;
use std::collections::HashMap;

/// Index of a basic block.
pub type BlockId = usize;

/// How a basic block ends.
///
/// Names are borrowed from the function body (or, for registers the
/// passes make, owned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Terminator<'a> {
    /// Unconditional jump.
    Branch(BlockId),
    /// `@p bra` (or `@!p bra` with `negated`): to `taken` when the guard
    /// holds, otherwise to `fallthrough`.
    CondBranch {
        /// Predicate register name.
        pred: &'a str,
        /// `@!p`.
        negated: bool,
        /// Target when the guard holds.
        taken: BlockId,
        /// Target otherwise.
        fallthrough: BlockId,
    },
    /// `ret` or `exit` (or falling off the end of the body).
    Return,
    /// Made by [`crate::reducible`] and [`crate::progress`]: to `taken`
    /// when the 32-bit register `reg` equals `value` (or, with `below`, is
    /// less than it, unsigned), otherwise to `fallthrough`.
    Dispatch {
        /// A register the pass declares (or `brx.idx`'s index register).
        reg: Cow<'a, str>,
        /// The value tested.
        value: u32,
        /// Test `reg < value` instead of `reg == value`.
        below: bool,
        /// Target when equal (below).
        taken: BlockId,
        /// Target otherwise.
        fallthrough: BlockId,
    },
}

/// A basic block.
#[derive(Clone, Debug)]
pub struct BasicBlock<'a> {
    /// Label naming the block, if any.
    pub label: Option<&'a str>,
    /// Straight-line instructions.
    pub insts: Vec<&'a Instruction>,
    /// How the block ends.
    pub term: Terminator<'a>,
    /// Span of the terminating instruction (or of the label).
    pub term_span: Span,
    /// Made by [`crate::reducible`]: set a 32-bit register to a value
    /// before the instructions.
    pub assign: Option<(Cow<'a, str>, u32)>,
}

/// A function's control-flow graph.
#[derive(Clone, Debug)]
pub struct Cfg<'a> {
    /// Blocks; `blocks[0]` is the entry.
    pub blocks: Vec<BasicBlock<'a>>,
}

/// The successors of a block (at most two; a slice through `Deref`, no
/// allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Succs {
    ids: [BlockId; 2],
    len: usize,
}

impl std::ops::Deref for Succs {
    type Target = [BlockId];
    fn deref(&self) -> &[BlockId] {
        &self.ids[..self.len]
    }
}

impl IntoIterator for Succs {
    type Item = BlockId;
    type IntoIter = std::iter::Take<std::array::IntoIter<BlockId, 2>>;
    fn into_iter(self) -> Self::IntoIter {
        self.ids.into_iter().take(self.len)
    }
}

impl<'s> IntoIterator for &'s Succs {
    type Item = &'s BlockId;
    type IntoIter = std::slice::Iter<'s, BlockId>;
    fn into_iter(self) -> Self::IntoIter {
        self.ids[..self.len].iter()
    }
}

impl Cfg<'_> {
    /// Successors of a block.
    pub fn successors(&self, b: BlockId) -> Succs {
        match &self.blocks[b].term {
            Terminator::Branch(t) => Succs { ids: [*t, 0], len: 1 },
            Terminator::CondBranch { taken, fallthrough, .. } | Terminator::Dispatch { taken, fallthrough, .. } => {
                if taken == fallthrough {
                    Succs { ids: [*taken, 0], len: 1 }
                } else {
                    Succs { ids: [*taken, *fallthrough], len: 2 }
                }
            }
            Terminator::Return => Succs { ids: [0, 0], len: 0 },
        }
    }
}

enum Pending<'a> {
    Branch(&'a str, Span),
    /// `brx.idx index, list` (with an optional guard).
    Indexed(Option<(&'a str, bool)>, &'a str, &'a str, Span),
    CondBranch(&'a str, bool, &'a str, Span),
    Return,
    CondReturn(&'a str, bool, Span, Option<u32>),
    Exit(Span, u32),
}

/// Flatten nested blocks into a statement list of instructions and labels.
fn flatten<'a>(stmts: &'a [Statement], out: &mut Vec<&'a Statement>) {
    for s in stmts {
        match s {
            Statement::Block(inner) => flatten(inner, out),
            _ => out.push(s),
        }
    }
}

fn is_control(i: &Instruction) -> bool {
    matches!(i.opcode.as_str(), "bra" | "brx" | "ret" | "exit" | "trap")
}

/// Build the CFG of a function body.
/// The pseudo-register an `exit` inside a `.func` sets (through
/// [`BasicBlock::assign`]) before returning, so that callers stop too.
pub const EXITED: &str = "%__exited";

/// The value [`EXITED`] gets from `trap`: the thread ends and the launch is
/// reported as failed (see [`crate::abi::ModuleInfo::trap_offset`]).
pub const TRAPPED: u32 = 2;

/// Build the CFG of a function body. In a `.func` (`in_func`), `exit` sets
/// [`EXITED`] and returns.
pub fn run<'a>(body: &'a [Statement], in_func: bool) -> Result<Cfg<'a>, Diagnostic> {
    let mut flat = Vec::new();
    flatten(body, &mut flat);

    // First, split into raw blocks with symbolic successors.
    struct Raw<'a> {
        label: Option<&'a str>,
        insts: Vec<&'a Instruction>,
        end: Option<Pending<'a>>,
        span: Span,
    }
    let mut raws: Vec<Raw> = vec![Raw { label: None, insts: Vec::new(), end: None, span: Span::default() }];
    for &s in &flat {
        match s {
            Statement::Label(span, name) => {
                raws.push(Raw { label: Some(&**name), insts: Vec::new(), end: None, span: *span });
            }
            Statement::Inst(i) if is_control(i) => {
                let end = match i.opcode.as_str() {
                    "brx" => {
                        let (Some(Operand::Name { name: idx, .. }), Some(Operand::Name { name: list, .. })) =
                            (i.operands.first(), i.operands.get(1))
                        else {
                            return Err(Diagnostic::error(
                                i.span,
                                "'brx.idx' needs an index register and a .branchtargets list",
                            ));
                        };
                        Pending::Indexed(i.guard.as_ref().map(|g| (&*g.name, g.negated)), idx, list, i.span)
                    }
                    "bra" => {
                        let target = match i.operands.first() {
                            Some(Operand::Name { name, .. }) => &**name,
                            _ => {
                                return Err(Diagnostic::error(
                                    i.span,
                                    "'bra' needs a label operand (use 'brx.idx' for jump tables)",
                                ))
                            }
                        };
                        match &i.guard {
                            Some(g) => Pending::CondBranch(&g.name, g.negated, target, i.span),
                            None => Pending::Branch(target, i.span),
                        }
                    }
                    "trap" => match &i.guard {
                        Some(g) => Pending::CondReturn(&g.name, g.negated, i.span, Some(TRAPPED)),
                        None => Pending::Exit(i.span, TRAPPED),
                    },
                    op => match &i.guard {
                        Some(g) => {
                            Pending::CondReturn(&g.name, g.negated, i.span, (in_func && op == "exit").then_some(1))
                        }
                        None if in_func && op == "exit" => Pending::Exit(i.span, 1),
                        None => Pending::Return,
                    },
                };
                if let Some(last) = raws.last_mut() {
                    last.end = Some(end);
                    last.span = i.span;
                }
                // A new block starts after every control instruction; after an
                // unconditional one it is unreachable unless labelled.
                raws.push(Raw { label: None, insts: Vec::new(), end: None, span: i.span });
            }
            Statement::Inst(i) => {
                if let Some(last) = raws.last_mut() {
                    last.insts.push(i);
                }
            }
            _ => {}
        }
    }

    let mut lists: HashMap<&str, &Vec<String>> = HashMap::new();
    for st in &flat {
        if let Statement::TargetList { name, calls: false, targets, .. } = st {
            lists.insert(name.as_str(), targets);
        }
    }
    let mut by_label: crate::fxhash::FxHashMap<&str, usize> = Default::default();
    for (idx, r) in raws.iter().enumerate() {
        if let Some(l) = r.label {
            by_label.insert(l, idx);
        }
    }
    let n = raws.len();
    // Extra blocks for conditional returns: index n + k.
    let mut blocks: Vec<BasicBlock> = Vec::with_capacity(n + 4);
    let mut extra: Vec<BasicBlock> = Vec::new();
    for (idx, r) in raws.into_iter().enumerate() {
        let next = idx + 1;
        let lookup = |name: &str, span: Span| -> Result<usize, Diagnostic> {
            by_label
                .get(name)
                .copied()
                .ok_or_else(|| Diagnostic::error(span, format!("branch to undefined label '{name}'")))
        };
        let term = match &r.end {
            None => {
                if next < n {
                    Terminator::Branch(next)
                } else {
                    Terminator::Return
                }
            }
            Some(Pending::Branch(t, span)) => Terminator::Branch(lookup(t, *span)?),
            Some(Pending::CondBranch(p, neg, t, span)) => Terminator::CondBranch {
                pred: p,
                negated: *neg,
                taken: lookup(t, *span)?,
                fallthrough: if next < n { next } else { usize::MAX },
            },
            Some(Pending::Return) => Terminator::Return,
            Some(Pending::Indexed(guard, idx, list, span)) => {
                let Some(targets) = lists.get(list) else {
                    return Err(Diagnostic::error(
                        *span,
                        format!("'{list}' is not a .branchtargets list of this function"),
                    ));
                };
                let mut ids = Vec::new();
                for t in targets.iter() {
                    ids.push(lookup(t, *span)?);
                }
                let Some((&last, rest)) = ids.split_last() else {
                    return Err(Diagnostic::error(*span, format!("'{list}' is empty")));
                };
                // idx == 0 ? t0 : (idx == 1 ? t1 : ... t_last)
                let mut next_target = last;
                for (k, &t) in rest.iter().enumerate().rev() {
                    let id = n + extra.len();
                    extra.push(BasicBlock {
                        label: None,
                        insts: Vec::new(),
                        term: Terminator::Dispatch {
                            reg: Cow::Borrowed(idx),
                            value: k as u32,
                            below: false,
                            taken: t,
                            fallthrough: next_target,
                        },
                        term_span: *span,
                        assign: None,
                    });
                    next_target = id;
                }
                match guard {
                    None => Terminator::Branch(next_target),
                    Some((p, neg)) => Terminator::CondBranch {
                        pred: p,
                        negated: *neg,
                        taken: next_target,
                        fallthrough: if next < n { next } else { usize::MAX },
                    },
                }
            }
            Some(Pending::Exit(span, value)) => {
                let ret_block = n + extra.len();
                extra.push(BasicBlock {
                    label: None,
                    insts: Vec::new(),
                    term: Terminator::Return,
                    term_span: *span,
                    assign: Some((Cow::Borrowed(EXITED), *value)),
                });
                Terminator::Branch(ret_block)
            }
            Some(Pending::CondReturn(p, neg, span, exit)) => {
                let ret_block = n + extra.len();
                extra.push(BasicBlock {
                    label: None,
                    insts: Vec::new(),
                    term: Terminator::Return,
                    term_span: *span,
                    assign: exit.map(|v| (Cow::Borrowed(EXITED), v)),
                });
                Terminator::CondBranch {
                    pred: p,
                    negated: *neg,
                    taken: ret_block,
                    fallthrough: if next < n { next } else { usize::MAX },
                }
            }
        };
        blocks.push(BasicBlock { label: r.label, insts: r.insts, term, term_span: r.span, assign: None });
    }
    blocks.extend(extra);
    // A fallthrough past the last block (conditional branch at the very end) returns.
    let total = blocks.len();
    let mut need_tail = false;
    for b in &blocks {
        if let Terminator::CondBranch { fallthrough, taken, .. } = &b.term {
            if *fallthrough >= total || *taken >= total {
                need_tail = true;
            }
        }
    }
    if need_tail {
        // Every out-of-range successor is redirected to one returning block.
        let tail = blocks.len();
        blocks.push(BasicBlock {
            label: None,
            insts: Vec::new(),
            term: Terminator::Return,
            term_span: Span::default(),
            assign: None,
        });
        for b in blocks.iter_mut() {
            if let Terminator::CondBranch { fallthrough, taken, .. } = &mut b.term {
                if *fallthrough >= tail {
                    *fallthrough = tail;
                }
                if *taken >= tail {
                    *taken = tail;
                }
            }
        }
    }

    // Remove unreachable blocks and renumber.
    let cfg = Cfg { blocks };
    let mut reach = vec![false; cfg.blocks.len()];
    let mut stack = vec![0usize];
    while let Some(b) = stack.pop() {
        if reach[b] {
            continue;
        }
        reach[b] = true;
        stack.extend(cfg.successors(b));
    }
    let mut remap = vec![usize::MAX; cfg.blocks.len()];
    let mut out = Vec::with_capacity(cfg.blocks.len());
    for (i, b) in cfg.blocks.into_iter().enumerate() {
        if reach[i] {
            remap[i] = out.len();
            out.push(b);
        }
    }
    for b in out.iter_mut() {
        match &mut b.term {
            Terminator::Branch(t) => *t = remap[*t],
            Terminator::CondBranch { taken, fallthrough, .. } | Terminator::Dispatch { taken, fallthrough, .. } => {
                *taken = remap[*taken];
                *fallthrough = remap[*fallthrough];
            }
            Terminator::Return => {}
        }
    }
    Ok(Cfg { blocks: out })
}
