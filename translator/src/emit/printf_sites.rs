//! What is known of each `vprintf` call of a function before it is
//! emitted: where its argument buffer lies, and whether anything reads the
//! value it returns.
//!
//! nvcc, NVRTC and NVVM pass `printf`'s arguments in a buffer of the
//! caller's local depot (`mov %SPL, __local_depotN; cvta.local %SP, %SPL;
//! add %rd, %SP, k`) and nearly always drop the count it returns. Knowing
//! both at translation time lets [`super::printf::vprintf`] copy the
//! arguments from the local words at constant indices and skip counting the
//! format's conversions: each call then compiles to one atomic and a few
//! stores instead of two loops over generic loads, which made a kernel with
//! hundreds of `printf`s (NVIDIA Warp's `test_array`, 600 calls) take tens
//! of minutes to compile in llvmpipe.
//!
//! Only facts that hold on every path are used: a register or `.param`
//! variable counts when the function writes it exactly once, without a
//! guard, from a chain of `mov`, `cvta.local` and `add` of an immediate
//! that starts at one of the function's `.local` variables.

use crate::ast::{Instruction, Operand};
use crate::cfg::{Cfg, Terminator};
use crate::fxhash::{FxHashMap, FxHashSet};
use crate::layout::Placed;
use std::collections::HashMap;

/// Facts about one `vprintf` call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Site {
    /// Where the argument buffer is.
    pub args: Args,
    /// The format is this byte offset of this module variable.
    pub format: Option<(String, u64)>,
    /// Something may read the value the call returns.
    pub result_read: bool,
}

/// Where a `vprintf` call's argument buffer is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Args {
    /// Not known here.
    #[default]
    Unknown,
    /// A null pointer (a format without conversions).
    Null,
    /// The generic address of byte `offset` of the function's frame (its
    /// local words), inside a `.local` variable that ends `room` bytes
    /// further.
    Local {
        /// Byte offset in the frame.
        offset: u32,
        /// Bytes from there to the end of the variable.
        room: u32,
    },
}

/// The facts of every `vprintf` call of a function, by the call's span start.
#[derive(Debug, Default)]
pub(crate) struct Sites {
    by_call: FxHashMap<u32, Site>,
}

impl Sites {
    /// The facts of `call` (nothing known when it was not analysed).
    pub fn of(&self, call: &Instruction) -> Site {
        self.by_call.get(&call.span.start).cloned().unwrap_or(Site {
            args: Args::Unknown,
            format: None,
            result_read: true,
        })
    }
}

/// Longest `mov`/`cvta`/`add` chain followed back from an argument.
const MAX_CHAIN: usize = 16;

/// A value built from a variable's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value<'a> {
    /// In a `.local` variable of the frame.
    Local {
        /// Byte offset in the frame.
        offset: i64,
        /// Byte offset of the end of the variable it points into.
        end: i64,
        /// Generic (after `cvta.local`) rather than a `.local` offset.
        generic: bool,
    },
    /// In a module variable (`.global`/`.const`: its generic address is
    /// its address).
    Module {
        /// The variable.
        name: &'a str,
        /// Byte offset in it.
        offset: i64,
    },
}

/// Analyse the `vprintf` calls of a function with `cfg`, frame `local` (its
/// `.local` and `.param` variables) and `.reg` return values `returns`
/// (read where it returns).
pub(crate) fn run(cfg: &Cfg<'_>, local: &HashMap<String, Placed>, returns: &[&str], vprintf: &str) -> Sites {
    let all = || cfg.blocks.iter().flat_map(|b| b.insts.iter().copied());
    let calls: Vec<&Instruction> = all().filter(|i| i.opcode == "call" && i.direct_callee() == Some(vprintf)).collect();
    if calls.is_empty() {
        return Sites::default();
    }
    let insts: Vec<&Instruction> = all().collect();
    // Every write of a name: (count, the only writer). A guarded or partial
    // write counts twice (never a single definition).
    let mut defs: FxHashMap<&str, (u32, Option<&Instruction>)> = FxHashMap::default();
    let mut reads: FxHashSet<&str> = returns.iter().copied().collect();
    // Names in operands other than a call's and a `st.param`'s address: a
    // `.param` variable named there may be written through its address.
    let mut mentioned: FxHashSet<&str> = FxHashSet::default();
    let mut param_stores: FxHashMap<&str, (u32, Option<&Operand>)> = FxHashMap::default();
    for b in &cfg.blocks {
        if let Some((reg, _)) = &b.assign {
            defs.entry(reg.as_ref()).or_insert((0, None)).0 += 2;
        }
        match &b.term {
            Terminator::CondBranch { pred, .. } => {
                reads.insert(pred);
            }
            Terminator::Dispatch { reg, .. } => {
                reads.insert(reg.as_ref());
            }
            _ => {}
        }
    }
    for &i in &insts {
        if let Some(g) = &i.guard {
            reads.insert(g.name.as_str());
        }
        let outs = i.destinations();
        for (k, o) in i.operands.iter().enumerate() {
            if k < outs {
                let whole = i.guard.is_none() && matches!(o, Operand::Name { component: None, .. });
                o.for_each_name(&mut |n| {
                    let d = defs.entry(n).or_insert((0, None));
                    d.0 += if whole { 1 } else { 2 };
                    d.1 = Some(i);
                });
            } else if i.opcode == "st" && i.has("param") && k == 0 {
                // The `.param` variable a store writes: a definition of
                // the variable, not a read.
                if let Operand::Address(_, a) = o {
                    if let Some((_, base)) = &a.base {
                        let s = param_stores.entry(base.as_ref()).or_insert((0, None));
                        let whole = a.offset == 0 && i.guard.is_none() && !i.has("v2") && !i.has("v4");
                        s.0 += if whole { 1 } else { 2 };
                        s.1 = i.operands.get(1);
                    }
                }
            } else {
                o.for_each_name(&mut |n| {
                    reads.insert(n);
                });
            }
            let stored_param = i.opcode == "st" && i.has("param") && k == 0;
            if i.opcode != "call" && !stored_param {
                o.for_each_name(&mut |n| {
                    mentioned.insert(n);
                });
            }
        }
    }
    let mut by_call = FxHashMap::default();
    for call in calls {
        let (rets, _, args) = call.call_operands();
        let result_read = match rets.first() {
            None => false,
            Some(Operand::Name { name, .. }) => result_is_read(&insts, name, &reads),
            Some(_) => true,
        };
        let stored = |k: usize| match args.get(k) {
            Some(Operand::Name { name, .. }) if mentioned.contains(name.as_str()) => None,
            Some(Operand::Name { name, .. }) => match param_stores.get(name.as_str()) {
                Some(&(1, Some(src))) => Some(src),
                _ => None,
            },
            _ => None,
        };
        let buffer = match stored(1) {
            Some(Operand::Int(_, 0)) => Args::Null,
            Some(src) => match resolve(src, &defs, local, 0) {
                Some(Value::Local { offset, end, generic: true }) if offset <= end => {
                    match (u32::try_from(offset), u32::try_from(end - offset)) {
                        (Ok(offset), Ok(room)) => Args::Local { offset, room },
                        _ => Args::Unknown,
                    }
                }
                _ => Args::Unknown,
            },
            None => Args::Unknown,
        };
        let format = match stored(0).and_then(|src| resolve(src, &defs, local, 0)) {
            Some(Value::Module { name, offset }) => u64::try_from(offset).ok().map(|o| (name.to_string(), o)),
            _ => None,
        };
        by_call.insert(call.span.start, Site { args: buffer, format, result_read });
    }
    Sites { by_call }
}

/// Whether anything may read the return value `.param` variable `ret`:
/// only `ld.param` from it whose destinations nothing reads does not.
fn result_is_read(insts: &[&Instruction], ret: &str, reads: &FxHashSet<&str>) -> bool {
    for i in insts {
        let loads_it = i.opcode == "ld"
            && i.has("param")
            && matches!(i.operands.get(1), Some(Operand::Address(_, a)) if a.base.as_ref().is_some_and(|(_, b)| b.as_ref() == ret));
        if loads_it {
            let mut read = false;
            if let Some(d) = i.operands.first() {
                d.for_each_name(&mut |n| read |= reads.contains(n));
            }
            if read {
                return true;
            }
            continue;
        }
        if i.opcode == "call" {
            // The call's own result list names it.
            let (rets, _, args) = i.call_operands();
            let mut named = false;
            for a in args {
                a.for_each_name(&mut |n| named |= n == ret);
            }
            if named {
                return true;
            }
            let _ = rets;
            continue;
        }
        let mut named = false;
        for o in i.operands.iter() {
            o.for_each_name(&mut |n| named |= n == ret);
        }
        if named {
            return true;
        }
    }
    false
}

/// The variable address `op` holds on every path, if it is one.
fn resolve<'a>(
    op: &'a Operand,
    defs: &FxHashMap<&str, (u32, Option<&'a Instruction>)>,
    local: &HashMap<String, Placed>,
    depth: usize,
) -> Option<Value<'a>> {
    if depth > MAX_CHAIN {
        return None;
    }
    let Operand::Name { name, component: None, .. } = op else {
        return None;
    };
    match defs.get(name.as_str()) {
        Some(&(1, Some(def))) => resolve_def(def, defs, local, depth + 1),
        Some(_) => None,
        // Never written here: the address of one of the frame's variables,
        // or of a module variable (not a register: every register a
        // function reads it declares, and the caller checks the name).
        None => match local.get(name.as_str()) {
            Some(p) => {
                Some(Value::Local { offset: p.offset as i64, end: p.offset as i64 + p.size as i64, generic: false })
            }
            None if !name.starts_with('%') => Some(Value::Module { name: name.as_str(), offset: 0 }),
            None => None,
        },
    }
}

/// The variable address the only definition `def` writes, if it is one.
fn resolve_def<'a>(
    def: &'a Instruction,
    defs: &FxHashMap<&str, (u32, Option<&'a Instruction>)>,
    local: &HashMap<String, Placed>,
    depth: usize,
) -> Option<Value<'a>> {
    let ops = def.operands.as_slice();
    let wide = def.has("u64") || def.has("s64") || def.has("b64");
    match (&*def.opcode, ops) {
        ("mov", [_, src]) if wide => resolve(src, defs, local, depth),
        ("cvta", [_, src]) if def.has("local") && !def.has("to") && def.has("u64") => {
            match resolve(src, defs, local, depth)? {
                Value::Local { offset, end, generic: false } => Some(Value::Local { offset, end, generic: true }),
                _ => None,
            }
        }
        ("cvta", [_, src]) if (def.has("global") || def.has("const")) && !def.has("to") && def.has("u64") => {
            match resolve(src, defs, local, depth)? {
                m @ Value::Module { .. } => Some(m),
                _ => None,
            }
        }
        ("add", [_, a, b]) if wide => {
            let (base, imm) = match (a, b) {
                (_, Operand::Int(_, v)) => (a, *v),
                (Operand::Int(_, v), _) => (b, *v),
                _ => return None,
            };
            let imm = i64::try_from(imm).ok()?;
            match resolve(base, defs, local, depth)? {
                Value::Local { offset, end, generic } => {
                    Some(Value::Local { offset: offset.checked_add(imm)?, end, generic })
                }
                Value::Module { name, offset } => Some(Value::Module { name, offset: offset.checked_add(imm)? }),
            }
        }
        _ => None,
    }
}
