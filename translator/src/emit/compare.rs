//! `set` (a comparison written as an integer mask or a float 1.0/0.0) and
//! `slct` (select on the sign of a third operand). `setp` stays in
//! [`super::inst`], half-precision comparisons in [`super::half`].

use super::func::Fx;
use super::inst::{compare, CMPS};
use super::rounding::{and, cmp, o, or, sel};
use super::values::{get, kind_of, set, K};
use super::Emitter;
use crate::ast::{Instruction, ScalarType};
use crate::diag::Diagnostic;
use rspirv::spirv::Op;

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    super::float::unsupported(inst, why)
}

/// Emit `set` or `slct`.
pub(crate) fn emit(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let tys: Vec<ScalarType> = inst.modifiers.iter().filter_map(|m| ScalarType::from_name(m)).collect();
    let [dt, st] = tys.as_slice() else {
        return Err(Diagnostic::error(inst.opcode_span, format!("'{}' needs two types", inst.mnemonic())));
    };
    let (dt, st) = (*dt, *st);
    if super::float::is_half(dt) || super::float::is_half(st) {
        return Err(unsupported(inst, "half-precision set/slct are not supported yet"));
    }
    let dk = kind_of(dt);
    let dty = e.kty(dk);
    let ftz = inst.has("ftz");
    if inst.opcode == "slct" {
        let [d, a, b, c] = inst.operands.as_slice() else {
            return Err(Diagnostic::error(inst.span, "slct expects 4 operands"));
        };
        let va = get(e, fx, a, dk, dt.is_signed())?;
        let vb = get(e, fx, b, dk, dt.is_signed())?;
        let ge = if st == ScalarType::F32 {
            let vc = get(e, fx, c, K::Float(32), false)?;
            let vc = if ftz { super::float::flush(e, vc, 32)? } else { vc };
            let z = e.c_f32(0.0);
            cmp(e, Op::FOrdGreaterThanEqual, vc, z)?
        } else {
            let vc = get(e, fx, c, K::Int(32), true)?;
            let z = e.c_u32(0);
            cmp(e, Op::SGreaterThanEqual, vc, z)?
        };
        let r = sel(e, dty, ge, va, vb)?;
        return set(e, fx, d, r, dk, dt.is_signed());
    }
    let c = inst
        .modifiers
        .iter()
        .find(|m| CMPS.contains(&m.as_str()) && !m.is_empty())
        .ok_or_else(|| Diagnostic::error(inst.opcode_span, "set needs a comparison operator"))?
        .clone();
    let bool_op = ["and", "or", "xor"].into_iter().find(|b| inst.has(b));
    let (d, a, b, pc) = match (inst.operands.as_slice(), bool_op) {
        ([d, a, b], None) => (d, a, b, None),
        ([d, a, b, c], Some(_)) => (d, a, b, Some(c)),
        _ => return Err(Diagnostic::error(inst.span, format!("wrong operands for '{}'", inst.mnemonic()))),
    };
    let sk = kind_of(st);
    let mut va = get(e, fx, a, sk, st.is_signed())?;
    let mut vb = get(e, fx, b, sk, st.is_signed())?;
    if ftz && st == ScalarType::F32 {
        va = super::float::flush(e, va, 32)?;
        vb = super::float::flush(e, vb, 32)?;
    }
    let Some(mut r) = compare(e, &c, st, va, vb)? else {
        return Err(unsupported(inst, "comparison not valid for this type"));
    };
    if let (Some(op), Some(pc)) = (bool_op, pc) {
        let vc = get(e, fx, pc, K::Pred, false)?;
        r = match op {
            "and" => and(e, r, vc)?,
            "or" => or(e, r, vc)?,
            _ => cmp(e, Op::LogicalNotEqual, r, vc)?,
        };
    }
    let (t, f) = match dk {
        K::Float(32) => (e.c_f32(1.0), e.c_f32(0.0)),
        K::Int(w) => (e.c_int(w, u64::MAX), e.c_int(w, 0)),
        _ => return Err(unsupported(inst, "destination must be u32, s32 or f32")),
    };
    let v = o(e, Op::Select, dty, &[r, t, f])?;
    set(e, fx, d, v, dk, dt.is_signed())
}
