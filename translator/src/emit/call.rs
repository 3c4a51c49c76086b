//! `call`: direct calls to `.func`s of the module.
//!
//! `.param` formals are passed by value as arrays of 32-bit words, copied
//! from the caller's `.param` variables (which live in its local words) and
//! stored into the callee's; return values come back in a struct and are
//! stored into the caller's `.param` (or register) destinations.
//!
//! A function that runs in workgroup-uniform mode (see [`super::uniform`])
//! is called by every invocation with the caller's activity as a trailing
//! `bool` argument; its results are stored only where the caller is active.

use super::func::{internal1, Formal, Fx};
use super::mem::{load_local_word, store_local_word};
use super::values::{get, set};
use super::{Emitter, TyKey};
use crate::ast::{Instruction, Operand};
use crate::diag::Diagnostic;
use rspirv::spirv::Word;

/// Emit a `call`. `active` is the caller's activity when the call is a
/// collective one in uniform mode.
pub(crate) fn call(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Option<Word>) -> Result<(), Diagnostic> {
    let ops = inst.operands.as_slice();
    let (rets, rest): (&[Operand], &[Operand]) = match ops.first() {
        Some(Operand::List(_, r)) => (r.as_slice(), &ops[1..]),
        _ => (&[], ops),
    };
    let Some(Operand::Name { name, span, .. }) = rest.first() else {
        return Err(Diagnostic::error(inst.span, "call needs a function name"));
    };
    let args: &[Operand] = match rest.get(1) {
        Some(Operand::List(_, a)) => a.as_slice(),
        _ => &[],
    };
    if fx.regs.contains_key(name.as_str()) {
        return Err(Diagnostic::error(
            *span,
            "unsupported instruction 'call' through a function pointer (indirect calls are not supported yet)",
        ));
    }
    let Some(c) = fx.callees.get(name.as_str()).cloned() else {
        return Err(Diagnostic::error(*span, format!("call to '{name}', which has no definition in this module")));
    };
    if args.len() != c.params.len() || rets.len() != c.returns.len() {
        return Err(Diagnostic::error(
            inst.span,
            format!(
                "call to '{name}' passes {} arguments and {} return values; it takes {} and {}",
                args.len(),
                rets.len(),
                c.params.len(),
                c.returns.len()
            ),
        ));
    }
    let u32t = e.t_int(32);
    let mut values = Vec::new();
    for (formal, arg) in c.params.iter().zip(args) {
        values.push(match formal {
            Formal::Param { size, .. } => {
                let base = param_var_offset(fx, arg)?;
                let n = size.div_ceil(4).max(1);
                let mut words = Vec::new();
                for j in 0..n {
                    words.push(load_local_word(e, fx, base / 4 + j)?);
                }
                let len = e.c_u32(n);
                let at = e.ty(TyKey::Array(u32t, len));
                e.b.composite_construct(at, None, words).map_err(internal1)?
            }
            Formal::Reg { kind, .. } => get(e, fx, arg, *kind, false)?,
        });
    }
    if c.uniform {
        let Some(a) = active else {
            return Err(Diagnostic::error(inst.span, "internal error: uniform function called from ordinary code"));
        };
        values.push(a);
    }
    let r = e.b.function_call(c.ret_type, None, c.id, values).map_err(internal1)?;
    if c.returns.is_empty() {
        return Ok(());
    }
    // Results only where the caller is active.
    let merge = match active {
        Some(a) => {
            let yes = e.b.id();
            let merge = e.b.id();
            e.b.selection_merge(merge, rspirv::spirv::SelectionControl::NONE).map_err(internal1)?;
            e.b.branch_conditional(a, yes, merge, []).map_err(internal1)?;
            e.b.begin_block(Some(yes)).map_err(internal1)?;
            Some(merge)
        }
        None => None,
    };
    for (i, (formal, dst)) in c.returns.iter().zip(rets).enumerate() {
        let member_type: Word = c_member_type(e, formal);
        let m = e.b.composite_extract(member_type, None, r, [i as u32]).map_err(internal1)?;
        match formal {
            Formal::Param { size, .. } => {
                let base = param_var_offset(fx, dst)?;
                for j in 0..size.div_ceil(4).max(1) {
                    let w = e.b.composite_extract(u32t, None, m, [j]).map_err(internal1)?;
                    store_local_word(e, fx, base / 4 + j, w)?;
                }
            }
            Formal::Reg { kind, .. } => set(e, fx, dst, m, *kind, false)?,
        }
    }
    if let Some(merge) = merge {
        e.b.branch(merge).map_err(internal1)?;
        e.b.begin_block(Some(merge)).map_err(internal1)?;
    }
    Ok(())
}

fn c_member_type(e: &mut Emitter, f: &Formal) -> Word {
    match f {
        Formal::Param { size, .. } => {
            let u32t = e.t_int(32);
            let n = e.c_u32(size.div_ceil(4).max(1));
            e.ty(TyKey::Array(u32t, n))
        }
        Formal::Reg { kind, .. } => e.kty(*kind),
    }
}

fn param_var_offset(fx: &Fx, op: &Operand) -> Result<u32, Diagnostic> {
    match op {
        Operand::Name { name, span, .. } => fx
            .local
            .get(name.as_str())
            .map(|p| p.offset as u32)
            .ok_or_else(|| Diagnostic::error(*span, format!("'{name}' is not a .param variable of this function"))),
        other => Err(Diagnostic::error(other.span(), "expected a .param variable")),
    }
}
