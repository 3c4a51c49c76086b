//! `set` (a comparison written as an integer mask or a float 1.0/0.0) and
//! `slct` (select on the sign of a third operand). `setp` stays in
//! [`super::inst`], half-precision comparisons in [`super::half`].

use super::func::Fx;
use super::inst::{compare, CMPS};
use super::rounding::{and, cmp, o, or, sel};
use super::values::{get, kind_of, set, K};
use super::Emitter;
use crate::ast::{Instruction, Operand, ScalarType};
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
    if inst.opcode == "set" && super::half::layout(st).is_some() {
        return set_half(e, fx, inst, dt, st);
    }
    if super::float::is_half(dt) || super::float::is_half(st) {
        let why = if inst.opcode == "slct" {
            "the PTX ISA has no half-precision slct (dtype: b/u/s 16-64, f32, f64)"
        } else {
            "a half-precision set destination needs a half-precision source here"
        };
        return Err(unsupported(inst, why));
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
    let SetForm { c, bool_op, d, a, b, pc } = set_form(inst)?;
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

/// `set` with f16/bf16 (or packed) sources: each lane compared exactly in
/// f32; the result per lane is 1.0/0.0 for a half destination type, all
/// ones/0 for an integer one (per 16-bit lane for packed sources).
fn set_half(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    dt: ScalarType,
    st: ScalarType,
) -> Result<(), Diagnostic> {
    let Some((fmt, lanes)) = super::half::layout(st) else {
        return Err(unsupported(inst, ""));
    };
    if inst.has("ftz") {
        return Err(unsupported(inst, "half-precision set.ftz is not supported yet"));
    }
    let SetForm { c, bool_op, d, a, b, pc } = set_form(inst)?;
    let va = super::half::get_bits(e, fx, a, lanes)?;
    let vb = super::half::get_bits(e, fx, b, lanes)?;
    let vc = match pc {
        Some(p) => Some(get(e, fx, p, K::Pred, false)?),
        None => None,
    };
    let u32t = e.t_int(32);
    let (on, off) = match super::half::layout(dt) {
        Some((dfmt, _)) => (if dfmt == super::rounding::Fmt::BF16 { 0x3f80 } else { 0x3c00 }, 0),
        None if dt.size() * 8 >= 16 && !dt.is_float() => (if lanes == 2 { 0xffff } else { u32::MAX }, 0),
        None => return Err(unsupported(inst, "destination must be a half or an integer type")),
    };
    let mut outs = Vec::new();
    for i in 0..lanes {
        let x = super::half::lane(e, va, i)?;
        let y = super::half::lane(e, vb, i)?;
        let xf = super::half::to_f32(e, x, fmt)?;
        let yf = super::half::to_f32(e, y, fmt)?;
        let Some(mut r) = super::half::compare_f32(e, &c, xf, yf)? else {
            return Err(unsupported(inst, "comparison not valid for this type"));
        };
        if let (Some(op), Some(vc)) = (bool_op, vc) {
            r = match op {
                "and" => and(e, r, vc)?,
                "or" => or(e, r, vc)?,
                _ => cmp(e, Op::LogicalNotEqual, r, vc)?,
            };
        }
        let t = e.c_u32(on);
        let f = e.c_u32(off);
        outs.push(sel(e, u32t, r, t, f)?);
    }
    let v = if lanes == 2 { super::half::pack(e, &outs)? } else { outs[0] };
    let dk = kind_of(dt);
    let v = e.convert(v, K::Int(32), dk, false)?;
    set(e, fx, d, v, dk, false)
}

/// The parts of `set.CmpOp{.BoolOp}.dtype.stype d, a, b{, {!}c}`.
struct SetForm<'i> {
    c: String,
    bool_op: Option<&'static str>,
    d: &'i Operand,
    a: &'i Operand,
    b: &'i Operand,
    pc: Option<&'i Operand>,
}

fn set_form(inst: &Instruction) -> Result<SetForm<'_>, Diagnostic> {
    let c = inst
        .modifiers
        .iter()
        .find(|m| CMPS.contains(&m.as_str()) && !m.is_empty())
        .ok_or_else(|| Diagnostic::error(inst.opcode_span, "set needs a comparison operator"))?
        .to_string();
    let bool_op = ["and", "or", "xor"].into_iter().find(|b| inst.has(b));
    let (d, a, b, pc) = match (inst.operands.as_slice(), bool_op) {
        ([d, a, b], None) => (d, a, b, None),
        ([d, a, b, c], Some(_)) => (d, a, b, Some(c)),
        _ => return Err(Diagnostic::error(inst.span, format!("wrong operands for '{}'", inst.mnemonic()))),
    };
    Ok(SetForm { c, bool_op, d, a, b, pc })
}
