//! Pass on emitted SPIR-V: the part of a module that one entry point needs.
//!
//! A PTX module with many kernels becomes one SPIR-V module with an entry
//! point per kernel (NVIDIA Warp's test modules: 219 kernels, 71 MB of
//! SPIR-V from 4 MB of PTX). A Vulkan driver builds a pipeline from one
//! entry point of a shader module, but it reads the whole module to do so:
//! Mesa's `spirv_to_nir` walks every function and lavapipe hashes every
//! word for its shader cache. Measured on lavapipe (a 25-instruction
//! kernel of Warp's `test_quat.py`, empty caches): its first launch took
//! 0.52 s from the 71 MB module and 0.25 s from a module of that kernel
//! alone, for each of the module's kernels.
//!
//! [`Index::slice`] keeps the module's header, capabilities, extensions,
//! imports and memory model, the one entry point and its execution modes,
//! every type, global variable and specialization constant, the constants
//! that what it keeps may use, and the functions that entry reaches through
//! `OpFunctionCall`, in their order; names and decorations of ids left out
//! go with them. Nothing is renumbered, so the id bound stays. It works on
//! the words alone (no reloading through rspirv). [`Index`] finds the
//! functions and their calls once per module; a slice then reads the
//! global section and the functions it keeps, not the others.
//!
//! Whether a constant is used is decided conservatively: every word of a
//! kept instruction after its opcode that could be an id counts as a use
//! (a literal that happens to equal a constant's id keeps that constant).

use crate::fxhash::FxHashMap;
use rspirv::grammar::OperandKind;
use rspirv::spirv::Op;

/// Words of a SPIR-V module's header.
const HEADER: usize = 5;

/// Where a module's functions are and whom they call.
pub struct Index {
    /// The word where the first function begins (the end of the global
    /// section, which holds everything but function bodies).
    globals_end: usize,
    functions: Vec<Function>,
    by_id: FxHashMap<u32, usize>,
}

/// A function of the module: its id, its words (`OpFunction` to
/// `OpFunctionEnd`) and the functions it calls.
struct Function {
    id: u32,
    start: usize,
    end: usize,
    calls: Vec<u32>,
}

/// The words of `spirv` that the entry point named `entry` needs, as a
/// module of its own (see [`Index::slice`]).
pub fn entry_slice(spirv: &[u32], entry: &str) -> Option<Vec<u32>> {
    Index::new(spirv)?.slice(spirv, entry)
}

impl Index {
    /// The functions of `spirv`; `None` when it is not a module this pass
    /// reads (no header, an instruction of no words or past the end, a
    /// function that does not end, global instructions between functions).
    pub fn new(spirv: &[u32]) -> Option<Index> {
        if spirv.len() < HEADER || spirv[0] != rspirv::spirv::MAGIC_NUMBER {
            return None;
        }
        let mut functions: Vec<Function> = Vec::new();
        let mut open: Option<Function> = None;
        let mut globals_end = spirv.len();
        let mut at = HEADER;
        while at < spirv.len() {
            let len = (spirv[at] >> 16) as usize;
            if len == 0 || at + len > spirv.len() {
                return None;
            }
            let words = &spirv[at..at + len];
            let opcode = words[0] & 0xffff;
            if opcode == Op::Function as u32 {
                if open.is_some() {
                    return None;
                }
                globals_end = globals_end.min(at);
                open = Some(Function { id: *words.get(2)?, start: at, end: at, calls: Vec::new() });
            } else if opcode == Op::FunctionCall as u32 {
                open.as_mut()?.calls.push(*words.get(3)?);
            } else if opcode == Op::FunctionEnd as u32 {
                let mut f = open.take()?;
                f.end = at + len;
                functions.push(f);
            } else if open.is_none() && globals_end < at {
                // Only functions may follow the first function.
                return None;
            }
            at += len;
        }
        if open.is_some() {
            return None;
        }
        let by_id = functions.iter().enumerate().map(|(i, f)| (f.id, i)).collect();
        Some(Index { globals_end, functions, by_id })
    }

    /// The module of the entry point named `entry` (see the module docs);
    /// `None` when `spirv` has no such entry point, or holds an instruction
    /// whose layout the pass does not know in what it keeps, or a
    /// decoration group naming an id left out; the caller then uses the
    /// whole module. `spirv` must be the module `self` was made from.
    pub fn slice(&self, spirv: &[u32], entry: &str) -> Option<Vec<u32>> {
        let globals: Vec<&[u32]> = Instructions { words: spirv, at: HEADER, end: self.globals_end }.collect();
        let target = globals.iter().find_map(|words| {
            let is_entry = words[0] & 0xffff == Op::EntryPoint as u32 && words.len() >= 4;
            (is_entry && literal_string(&words[3..])? == entry.as_bytes()).then(|| words[2])
        })?;
        let keep = self.reachable(target)?;
        let kept_functions = || self.functions.iter().zip(&keep).filter(|(_, k)| **k).map(|(f, _)| f);

        let bound = spirv[3] as usize;
        // Ids a kept instruction may use, and ids defined by what is kept.
        let mut used = Bits::new(bound);
        let mut defined = Bits::new(bound);
        for f in kept_functions() {
            for words in (Instructions { words: spirv, at: f.start, end: f.end }) {
                used.set_all(&words[1..]);
                if let Some(id) = result_id(words)? {
                    defined.set(id);
                }
            }
        }
        // The entry point and its execution modes (`LocalSizeId`) use ids.
        for words in &globals {
            let op = words[0] & 0xffff;
            let mine = (op == Op::EntryPoint as u32 && words[2] == target)
                || ((op == Op::ExecutionMode as u32 || op == Op::ExecutionModeId as u32) && words[1] == target);
            if mine || op == Op::DecorateId as u32 {
                used.set_all(&words[1..]);
            }
        }
        // Backwards through the global section (ids are used after their
        // definition): a constant nothing kept uses goes; everything else
        // stays and uses its operands.
        let mut dropped = vec![false; globals.len()];
        for (words, dropped) in globals.iter().zip(&mut dropped).rev() {
            let op = words[0] & 0xffff;
            if is_annotation(op) || op == Op::EntryPoint as u32 {
                continue;
            }
            let result = result_id(words)?;
            if is_prunable_constant(op) && !result.is_some_and(|id| used.get(id)) {
                *dropped = true;
                continue;
            }
            used.set_all(&words[1..]);
            if let Some(id) = result {
                defined.set(id);
            }
        }

        let mut out = Vec::with_capacity(HEADER + self.globals_end.min(spirv.len()) / 2);
        out.extend_from_slice(&spirv[..HEADER]);
        for (words, dropped) in globals.into_iter().zip(dropped) {
            let op = words[0] & 0xffff;
            let first = words.get(1).copied();
            let copy = if op == Op::EntryPoint as u32 {
                words.get(2) == Some(&target)
            } else if op == Op::ExecutionMode as u32 || op == Op::ExecutionModeId as u32 {
                first == Some(target)
            } else if op == Op::GroupDecorate as u32 || op == Op::GroupMemberDecorate as u32 {
                // Targets (each with a member number for the second) follow the group.
                let step = if op == Op::GroupDecorate as u32 { 1 } else { 2 };
                if !words[2..].iter().step_by(step).all(|&id| defined.get(id)) {
                    return None;
                }
                true
            } else if is_annotation(op) {
                first.is_some_and(|id| defined.get(id))
            } else {
                !dropped
            };
            if copy {
                out.extend_from_slice(words);
            }
        }
        for f in kept_functions() {
            out.extend_from_slice(&spirv[f.start..f.end]);
        }
        Some(out)
    }

    /// Which functions `entry` reaches (itself included); `None` when it
    /// is not a function of the module or calls one that is not.
    fn reachable(&self, entry: u32) -> Option<Vec<bool>> {
        let mut keep = vec![false; self.functions.len()];
        let first = *self.by_id.get(&entry)?;
        keep[first] = true;
        let mut work = vec![first];
        while let Some(f) = work.pop() {
            for callee in &self.functions[f].calls {
                let c = *self.by_id.get(callee)?;
                if !keep[c] {
                    keep[c] = true;
                    work.push(c);
                }
            }
        }
        Some(keep)
    }
}

/// The instructions of `words[at..end]` (checked by [`Index::new`]).
#[derive(Clone)]
struct Instructions<'a> {
    words: &'a [u32],
    at: usize,
    end: usize,
}

impl<'a> Iterator for Instructions<'a> {
    type Item = &'a [u32];
    fn next(&mut self) -> Option<&'a [u32]> {
        if self.at >= self.end {
            return None;
        }
        let len = ((self.words[self.at] >> 16) as usize).max(1);
        let inst = self.words.get(self.at..self.at + len)?;
        self.at += len;
        Some(inst)
    }
}

/// A set of ids below the module's bound.
struct Bits(Vec<u64>);

impl Bits {
    fn new(bound: usize) -> Bits {
        Bits(vec![0; bound.div_ceil(64)])
    }
    fn set(&mut self, id: u32) {
        if let Some(w) = self.0.get_mut(id as usize / 64) {
            *w |= 1 << (id % 64);
        }
    }
    /// Every word that is below the bound.
    fn set_all(&mut self, ids: &[u32]) {
        for &id in ids {
            self.set(id);
        }
    }
    fn get(&self, id: u32) -> bool {
        self.0.get(id as usize / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }
}

/// Debug names and decorations: they name an id (their first operand) and
/// go with it.
fn is_annotation(op: u32) -> bool {
    [
        Op::Name,
        Op::MemberName,
        Op::Decorate,
        Op::MemberDecorate,
        Op::DecorateId,
        Op::DecorateString,
        Op::MemberDecorateString,
        Op::GroupDecorate,
        Op::GroupMemberDecorate,
    ]
    .iter()
    .any(|o| *o as u32 == op)
}

/// Constants a slice may leave out when nothing it keeps uses them
/// (specialization constants stay: the runtime specializes them by id).
fn is_prunable_constant(op: u32) -> bool {
    [Op::Constant, Op::ConstantComposite, Op::ConstantNull, Op::ConstantTrue, Op::ConstantFalse, Op::SpecConstantOp]
        .iter()
        .any(|o| *o as u32 == op)
}

/// The bytes of a SPIR-V literal string (up to its terminating NUL).
fn literal_string(words: &[u32]) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    for w in words {
        for b in w.to_le_bytes() {
            if b == 0 {
                return Some(bytes);
            }
            bytes.push(b);
        }
    }
    None
}

/// The result id of the instruction `words`, if it has one; `None`
/// (outer) for an opcode the grammar does not know.
fn result_id(words: &[u32]) -> Option<Option<u32>> {
    let g = (*crate::emit::zero::grammar().get((words[0] & 0xffff) as usize)?)?;
    let mut kinds = g.operands.iter().map(|o| o.kind);
    Some(match (kinds.next(), kinds.next()) {
        (Some(OperandKind::IdResultType), Some(OperandKind::IdResult)) => Some(*words.get(2)?),
        (Some(OperandKind::IdResult), _) => Some(*words.get(1)?),
        _ => None,
    })
}
