//! `call`: direct calls to `.func`s of the module (and of the undefined
//! system functions: `vprintf` and `__assertfail`, see [`super::printf`];
//! `malloc` and `free`, [`super::heap`]; the cooperative-groups grid
//! sync, [`super::grid`]; `cudaGraphSetConditional`, [`super::graph_cond`]).
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
    let (rets, target, args) = inst.call_operands();
    let Some(target @ Operand::Name { name, span, .. }) = target else {
        return Err(Diagnostic::error(inst.span, "call needs a function name"));
    };
    if fx.regs.contains_key(name.as_str()) {
        return indirect(e, fx, inst, rets, target, args);
    }
    let Some(c) = fx.callees.get(name.as_str()).cloned() else {
        // The system calls behind `printf`, `assert`, `malloc`, `free`, grid
        // sync and conditional graph nodes.
        match name.as_str() {
            super::printf::VPRINTF => return super::printf::vprintf(e, fx, inst, rets, args),
            super::printf::ASSERTFAIL => return super::printf::assertfail(e, fx, inst, rets, args),
            super::heap::MALLOC => return super::heap::malloc(e, fx, inst, rets, args),
            super::heap::FREE => return super::heap::free(e, fx, inst, rets, args),
            super::grid::GET_INTRINSIC_HANDLE => return super::grid::intrinsic_handle(e, fx, inst, rets, args),
            super::grid::SYNCHRONIZE => return super::grid::synchronize(e, fx, inst, rets, args, active),
            super::graph_cond::SET_CONDITIONAL => return super::graph_cond::set_conditional(e, fx, inst, rets, args),
            _ => {}
        }
        return Err(Diagnostic::error(*span, format!("call to '{name}', which has no definition in this module")));
    };
    direct(e, fx, inst, name, &c, rets, args, active)
}

/// A call through a function pointer: compare the pointer with every
/// address-taken function of matching signature and call the one it names.
fn indirect(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    rets: &[Operand],
    target: &Operand,
    args: &[Operand],
) -> Result<(), Diagnostic> {
    let shape = |fs: &[Formal]| -> Vec<(bool, u32)> {
        fs.iter()
            .map(|f| match f {
                Formal::Param { size, .. } => (true, size.div_ceil(4)),
                Formal::Reg { kind, .. } => (false, kind.bits()),
            })
            .collect()
    };
    let mut candidates: Vec<(String, super::func::Callee)> = fx
        .callees
        .iter()
        .filter(|(n, c)| {
            e.address_taken.contains(n.as_str()) && c.params.len() == args.len() && c.returns.len() == rets.len()
        })
        .map(|(n, c)| (n.clone(), c.clone()))
        .collect();
    candidates.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(first) = candidates.first().map(|c| (shape(&c.1.params), shape(&c.1.returns))) {
        candidates.retain(|c| shape(&c.1.params) == first.0 && shape(&c.1.returns) == first.1);
    }
    // A pointer that names none of them (a function of another signature,
    // or no function at all) fails the launch, as a call to a bad address
    // does on NVIDIA's hardware.
    let ptr = get(e, fx, target, super::values::K::Int(64), false)?;
    let bt = e.t_bool();
    let mut matched = e.c_bool(false);
    for (name, c) in candidates {
        let Some(&idx) = e.func_index.get(name.as_str()) else { continue };
        let want = e.c_int(64, crate::abi::FUNCTION_WINDOW | idx as u64);
        let hit = e.b.i_equal(bt, None, ptr, want).map_err(internal1)?;
        matched = e.b.logical_or(bt, None, matched, hit).map_err(internal1)?;
        let yes = e.b.id();
        let merge = e.b.id();
        e.b.selection_merge(merge, rspirv::spirv::SelectionControl::NONE).map_err(internal1)?;
        e.b.branch_conditional(hit, yes, merge, []).map_err(internal1)?;
        e.b.begin_block(Some(yes)).map_err(internal1)?;
        direct(e, fx, inst, &name, &c, rets, args, None)?;
        e.b.branch(merge).map_err(internal1)?;
        e.b.begin_block(Some(merge)).map_err(internal1)?;
    }
    let bad = e.b.id();
    let ok = e.b.id();
    e.b.selection_merge(ok, rspirv::spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(matched, ok, bad, []).map_err(internal1)?;
    e.b.begin_block(Some(bad)).map_err(internal1)?;
    super::func::trap_now(e, fx, ok, crate::abi::printf::TRAP_TRAP)?;
    e.b.begin_block(Some(ok)).map_err(internal1)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn direct(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    name: &str,
    c: &super::func::Callee,
    rets: &[Operand],
    args: &[Operand],
    active: Option<Word>,
) -> Result<(), Diagnostic> {
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
            return Err(Diagnostic::error(
                inst.span,
                format!(
                    "unsupported call of '{name}' through a function pointer: it has barriers or emulated warp \
                     operations, which need every thread of the block to call it"
                ),
            ));
        };
        values.push(a);
    }
    let r = e.b.function_call(c.ret_type, None, c.id, values).map_err(internal1)?;
    // Results only where the caller is active.
    let merge = match active.filter(|_| !c.returns.is_empty()) {
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
    // A callee that ran `exit` ends this function too.
    let Some(flag) = fx.exited_var else {
        return Ok(());
    };
    if let (Some(u), Some(_)) = (fx.uniform, active) {
        // A collective call: every invocation is here; those that exited park.
        let bt = e.t_bool();
        let v = e.b.load(u32t, None, flag, None, []).map_err(internal1)?;
        let z = e.c_u32(0);
        let gone = e.b.i_not_equal(bt, None, v, z).map_err(internal1)?;
        let st = e.b.load(u32t, None, u.st, None, []).map_err(internal1)?;
        let ret = e.c_u32(super::uniform::RETURNED);
        let n = e.b.select(u32t, None, gone, ret, st).map_err(internal1)?;
        e.b.store(u.st, n, None, []).map_err(internal1)?;
    } else {
        let bt = e.t_bool();
        let v = e.b.load(u32t, None, flag, None, []).map_err(internal1)?;
        let z = e.c_u32(0);
        let gone = e.b.i_not_equal(bt, None, v, z).map_err(internal1)?;
        let out = e.b.id();
        let stay = e.b.id();
        e.b.selection_merge(stay, rspirv::spirv::SelectionControl::NONE).map_err(internal1)?;
        e.b.branch_conditional(gone, out, stay, []).map_err(internal1)?;
        e.b.begin_block(Some(out)).map_err(internal1)?;
        super::func::leave(e, fx, stay)?;
        e.b.begin_block(Some(stay)).map_err(internal1)?;
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

pub(crate) fn param_var_offset(fx: &Fx, op: &Operand) -> Result<u32, Diagnostic> {
    match op {
        Operand::Name { name, span, .. } => fx
            .local
            .get(name.as_str())
            .map(|p| p.offset as u32)
            .ok_or_else(|| Diagnostic::error(*span, format!("'{name}' is not a .param variable of this function"))),
        other => Err(Diagnostic::error(other.span(), "expected a .param variable")),
    }
}

/// Which of the system calls `names` (undefined functions the translator
/// lowers itself: `vprintf`, `malloc`, ...) `inst` calls directly, if any.
pub(crate) fn system_call(inst: &Instruction, names: &[&'static str]) -> Option<&'static str> {
    let name = inst.direct_callee()?;
    names.iter().copied().find(|n| *n == name)
}
