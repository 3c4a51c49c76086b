//! Which registers of a function may hold a generic address of `.shared`
//! or `.local` memory ("windowed" addresses, [`crate::abi::SHARED_WINDOW`],
//! [`crate::abi::LOCAL_WINDOW`]).
//!
//! A generic access (`ld`, `st`, `atom` without a state space) is emitted
//! as a test of its address's window with one arm per space
//! ([`super::mem::dispatch`]). Where the address register can only hold a
//! global address the access goes to global memory directly: one memory
//! access instead of three, which matters to llvmpipe, whose compile time
//! grows with the square of a kernel's memory accesses (NVIDIA Warp reads
//! every array through generic pointers loaded from its kernel parameters).
//!
//! A windowed address comes only from `cvta` to generic of `.shared`,
//! `.local` or (in a `.func`) `.param` addresses, from the address of a `.shared` or `.local`
//! variable, or from somewhere this pass does not follow: memory (a kernel
//! may store such an address and load it back), another thread (`shfl`),
//! a caller (a `.func`'s parameters) or a callee (its results). Those
//! registers are tainted, and so is every register computed from a
//! tainted one, through any instruction; the rest, computed by arithmetic
//! from kernel parameters (which the host gives, and the host has no
//! windowed addresses), immediates, special registers and the addresses of
//! module variables, cannot hold one.

use crate::ast::{Instruction, Operand};
use crate::cfg::Cfg;
use crate::fxhash::FxHashSet;

/// Instructions whose results are computed from their operands alone.
const ARITHMETIC: &[&str] = &[
    "add", "sub", "mul", "mad", "mul24", "mad24", "sad", "shl", "shr", "shf", "and", "or", "xor", "not", "cnot",
    "lop3", "cvt", "mov", "selp", "slct", "min", "max", "neg", "abs", "div", "rem", "bfe", "bfi", "prmt", "setp",
    "set", "popc", "clz", "brev", "bfind", "testp", "copysign",
];

/// The registers of a function (with `cfg`) that may hold a windowed
/// address. `kernel_param(name)`: `name` is a kernel parameter (the
/// function is an entry); `windowed_symbol(name)`: `name` is a `.shared` or
/// `.local` variable; `formals`: the `.reg` parameters of a `.func`.
pub(crate) fn run<'a>(
    cfg: &Cfg<'a>,
    kernel_param: &dyn Fn(&str) -> bool,
    windowed_symbol: &dyn Fn(&str) -> bool,
    formals: &[&'a str],
) -> FxHashSet<&'a str> {
    let mut tainted: FxHashSet<&str> = formals.iter().copied().collect();
    let insts: Vec<&Instruction> = cfg.blocks.iter().flat_map(|b| b.insts.iter().copied()).collect();
    // Taint only grows: repeat until a pass adds nothing (loops carry it
    // backwards).
    loop {
        let mut changed = false;
        for i in &insts {
            let outs = i.destinations();
            if outs == 0 {
                continue;
            }
            if clean(i, outs, &tainted, kernel_param, windowed_symbol) {
                continue;
            }
            for o in &i.operands[..outs.min(i.operands.len())] {
                o.for_each_name(&mut |n| {
                    changed |= tainted.insert(n);
                });
            }
        }
        if !changed {
            break;
        }
    }
    tainted
}

/// Whether `i` computes only unwindowed values, given the tainted registers.
fn clean(
    i: &Instruction,
    outs: usize,
    tainted: &FxHashSet<&str>,
    kernel_param: &dyn Fn(&str) -> bool,
    windowed_symbol: &dyn Fn(&str) -> bool,
) -> bool {
    let op = &*i.opcode;
    let source_ok = match op {
        // A kernel parameter's value (the address operand names it).
        "ld" => {
            i.has("param")
                && matches!(i.operands.get(outs), Some(Operand::Address(_, a)) if a.base.as_ref().is_some_and(|(_, b)| kernel_param(b.as_str())))
        }
        // To generic from .shared/.local (and from a `.func`'s .param,
        // which lives in its local words): windowed. From .global/.const,
        // or to a state space's own addresses: not.
        "cvta" => i.has("to") || !(i.has("shared") || i.has("local") || i.has("param")),
        _ => ARITHMETIC.contains(&op),
    };
    if !source_ok {
        return false;
    }
    let mut ok = true;
    if let Some(g) = &i.guard {
        ok &= !tainted.contains(g.name.as_str());
    }
    for o in &i.operands[outs.min(i.operands.len())..] {
        o.for_each_name(&mut |n| ok &= !tainted.contains(n) && !windowed_symbol(n));
    }
    ok
}
