//! Half-precision arithmetic: `f16`, `bf16` and the packed `f16x2`/`bf16x2`.
//!
//! Registers hold the raw bits (16-bit integers; packed pairs in 32-bit
//! integers, lane 0 in the low half). Nothing here needs Vulkan's optional
//! `Float16` feature: each lane is widened exactly to f32/f64, the
//! operation is done exactly in f64 and rounded to odd (`float::ro_f64`),
//! and [`rounding::round_f64`] rounds once to the lane's format in the
//! requested mode. Rounding to odd at 53 bits followed by rounding to 11
//! (f16) or 8 (bf16) bits is the correctly rounded result, so every `add`,
//! `sub`, `mul` and `fma` is bit-exact. NaN results are the canonical
//! `0x7fff`.
#![allow(clippy::needless_range_loop)]

use super::float::{self, minmax, ro_f64, Ar};
use super::func::Fx;
use super::inst::{ext, glsl};
use super::rounding::{self, and, cmp, not, o, or, sel, Fmt, Rnd, R};
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, Operand, ScalarType};
use crate::diag::Diagnostic;
use rspirv::spirv::{Op, Word};

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    float::unsupported(inst, why)
}

/// The format and lane count of a half-precision type.
pub(crate) fn layout(t: ScalarType) -> Option<(Fmt, u32)> {
    Some(match t {
        ScalarType::F16 => (Fmt::F16, 1),
        ScalarType::F16x2 => (Fmt::F16, 2),
        ScalarType::Bf16 => (Fmt::BF16, 1),
        ScalarType::Bf16x2 => (Fmt::BF16, 2),
        _ => return None,
    })
}

/// Read a half-precision operand as a 32-bit integer holding its bits.
pub(crate) fn get_bits(e: &mut Emitter, fx: &mut Fx, op: &Operand, lanes: u32) -> R {
    if lanes == 2 {
        return get(e, fx, op, K::Int(32), false);
    }
    let v = get(e, fx, op, K::Int(16), false)?;
    e.convert(v, K::Int(16), K::Int(32), false)
}

/// Lane `i` (16 bits) of `v`, as a 32-bit integer.
pub(crate) fn lane(e: &mut Emitter, v: Word, i: u32) -> R {
    let u32t = e.t_int(32);
    let s = e.c_u32(16 * i);
    let x = o(e, Op::ShiftRightLogical, u32t, &[v, s])?;
    let m = e.c_u32(0xffff);
    o(e, Op::BitwiseAnd, u32t, &[x, m])
}

/// The exact f32 value of the 16-bit pattern `h` of format `fmt`.
pub(crate) fn to_f32(e: &mut Emitter, h: Word, fmt: Fmt) -> R {
    if fmt == Fmt::BF16 {
        rounding::bf16_to_f32(e, h)
    } else {
        rounding::f16_to_f32(e, h)
    }
}

/// Pack 16-bit lanes (32-bit integers) into the destination's width.
pub(crate) fn pack(e: &mut Emitter, lanes: &[Word]) -> R {
    let u32t = e.t_int(32);
    let mut acc = lanes[0];
    if let Some(&hi) = lanes.get(1) {
        let s = e.c_u32(16);
        let h = o(e, Op::ShiftLeftLogical, u32t, &[hi, s])?;
        acc = o(e, Op::BitwiseOr, u32t, &[acc, h])?;
    }
    Ok(acc)
}

/// Store packed lanes (`lanes` of them in a 32-bit integer) to `d`.
pub(crate) fn store(e: &mut Emitter, fx: &mut Fx, d: &Operand, v: Word, lanes: u32) -> Result<(), Diagnostic> {
    if lanes == 2 {
        set(e, fx, d, v, K::Int(32), false)
    } else {
        let h = e.convert(v, K::Int(32), K::Int(16), false)?;
        set(e, fx, d, h, K::Int(16), false)
    }
}

/// Flush a subnormal f32 holding a value of `fmt` (below `fmt`'s normal range) to a signed zero.
fn flush_input(e: &mut Emitter, x: Word, fmt: Fmt) -> R {
    let ft = e.t_float(32);
    let a = ext(e, ft, glsl::FABS, &[x])?;
    let minn = e.c_f32(2f32.powi(1 - fmt.bias()));
    let small = cmp(e, Op::FOrdLessThan, a, minn)?;
    let z = e.c_f32(0.0);
    let sz = float::with_sign(e, z, x, 32)?;
    sel(e, ft, small, sz, x)
}

/// Flush subnormal result bits (16-bit pattern in 32 bits) to a signed zero.
fn flush_bits(e: &mut Emitter, h: Word, fmt: Fmt) -> R {
    let u32t = e.t_int(32);
    let em = e.c_u32((((1u64 << fmt.ebits) - 1) << fmt.mbits) as u32);
    let ex = o(e, Op::BitwiseAnd, u32t, &[h, em])?;
    let z = e.c_u32(0);
    let sub = cmp(e, Op::IEqual, ex, z)?;
    let sb = e.c_u32(fmt.sign() as u32);
    let s = o(e, Op::BitwiseAnd, u32t, &[h, sb])?;
    sel(e, u32t, sub, s, h)
}

/// Round an f64 value to `fmt` bits (as a 32-bit integer), with `.sat`,
/// `.relu` and `.ftz` applied.
fn round_out(e: &mut Emitter, inst: &Instruction, mut r: Word, fmt: Fmt, rnd: Rnd) -> R {
    let dt = e.t_float(64);
    let bt = e.t_bool();
    if inst.has("sat") {
        let z = e.c_f64(0.0);
        let one = e.c_f64(1.0);
        let c = ext(e, dt, glsl::FCLAMP, &[r, z, one])?;
        let nan = o(e, Op::IsNan, bt, &[r])?;
        r = sel(e, dt, nan, z, c)?;
    }
    if inst.has("relu") {
        let z = e.c_f64(0.0);
        let le = cmp(e, Op::FOrdLessThanEqual, r, z)?;
        r = sel(e, dt, le, z, r)?;
    }
    let bits = rounding::round_f64(e, r, fmt, rnd, false)?;
    let u32t = e.t_int(32);
    let h = o(e, Op::UConvert, u32t, &[bits])?;
    if inst.has("ftz") {
        flush_bits(e, h, fmt)
    } else {
        Ok(h)
    }
}

/// The lanes of each source operand as f32 values (flushed with `.ftz`).
fn sources(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    ops: &[Operand],
    fmt: Fmt,
    lanes: u32,
) -> Result<Vec<Vec<Word>>, Diagnostic> {
    let mut out = Vec::new();
    for op in ops {
        let v = get_bits(e, fx, op, lanes)?;
        let mut ls = Vec::new();
        for i in 0..lanes {
            let h = lane(e, v, i)?;
            let f = to_f32(e, h, fmt)?;
            let f = if inst.has("ftz") { flush_input(e, f, fmt)? } else { f };
            ls.push(f);
        }
        out.push(ls);
    }
    Ok(out)
}

fn rnd_of(inst: &Instruction) -> Result<Rnd, Diagnostic> {
    match Rnd::of(inst) {
        None => Ok(Rnd::Rn),
        Some(Rnd::Rna) => Err(unsupported(inst, ".rna is only for cvt")),
        Some(r) => Ok(r),
    }
}

/// `add sub mul min max` on half types.
pub(crate) fn binary(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let Some((fmt, lanes)) = layout(t) else { return Err(unsupported(inst, "")) };
    let [d, a, b] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects 3 operands", inst.mnemonic())));
    };
    let rnd = rnd_of(inst)?;
    let srcs = sources(e, fx, inst, &[a.clone(), b.clone()], fmt, lanes)?;
    let dt = e.t_float(64);
    let ft = e.t_float(32);
    let mut outs = Vec::new();
    for i in 0..lanes as usize {
        let (x, y) = (srcs[0][i], srcs[1][i]);
        let h = match inst.opcode.as_str() {
            op @ ("add" | "sub" | "mul")
                if fmt == Fmt::F16 && rnd == Rnd::Rn && !inst.has("sat") && !inst.has("relu") =>
            {
                // In f32, then to f16: a product of two f16 values is exact
                // in f32, and rounding a sum first to f32's 24 bits, then to
                // f16's 11, is the correct rounding, since 24 >= 2 * 11 + 2
                // (Figueroa, "When is double rounding innocuous?", SIGNUM
                // 1995); no f32 result is subnormal, so llvmpipe's
                // flush-to-zero cannot touch it.
                let op = match op {
                    "add" => Op::FAdd,
                    "sub" => Op::FSub,
                    _ => Op::FMul,
                };
                let r = o(e, op, ft, &[x, y])?;
                e.b.decorate(r, rspirv::spirv::Decoration::NoContraction, []);
                let h = rounding::f32_to_f16_rn(e, r)?;
                if inst.has("ftz") {
                    flush_bits(e, h, fmt)?
                } else {
                    h
                }
            }
            op @ ("add" | "sub" | "mul") => {
                let ar = Ar::of(op).ok_or_else(|| unsupported(inst, ""))?;
                let dx = o(e, Op::FConvert, dt, &[x])?;
                let dy = o(e, Op::FConvert, dt, &[y])?;
                let r = ro_f64(e, ar, dx, dy, dx, rnd)?;
                round_out(e, inst, r, fmt, rnd)?
            }
            "min" | "max" => {
                let is_max = inst.opcode == "max";
                let nan_wins = inst.has("NaN");
                let m = if inst.has("xorsign") {
                    let ax = ext(e, ft, glsl::FABS, &[x])?;
                    let ay = ext(e, ft, glsl::FABS, &[y])?;
                    let m = minmax(e, ax, ay, 32, is_max, nan_wins)?;
                    let u32t = e.t_int(32);
                    let xi = o(e, Op::Bitcast, u32t, &[x])?;
                    let yi = o(e, Op::Bitcast, u32t, &[y])?;
                    let s = o(e, Op::BitwiseXor, u32t, &[xi, yi])?;
                    let sf = o(e, Op::Bitcast, ft, &[s])?;
                    let signed = float::with_sign(e, m, sf, 32)?;
                    let bt = e.t_bool();
                    let nan = o(e, Op::IsNan, bt, &[m])?;
                    sel(e, ft, nan, m, signed)?
                } else {
                    minmax(e, x, y, 32, is_max, nan_wins)?
                };
                let r = o(e, Op::FConvert, dt, &[m])?;
                round_out(e, inst, r, fmt, Rnd::Rn)?
            }
            _ => return Err(unsupported(inst, "")),
        };
        outs.push(h);
    }
    let v = pack(e, &outs)?;
    store(e, fx, d, v, lanes)
}

/// `fma`/`mad` on half types.
pub(crate) fn fma(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let Some((fmt, lanes)) = layout(t) else { return Err(unsupported(inst, "")) };
    let [d, a, b, c] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects 4 operands", inst.mnemonic())));
    };
    let rnd = rnd_of(inst)?;
    let srcs = sources(e, fx, inst, &[a.clone(), b.clone(), c.clone()], fmt, lanes)?;
    let dt = e.t_float(64);
    let mut outs = Vec::new();
    for i in 0..lanes as usize {
        let dx = o(e, Op::FConvert, dt, &[srcs[0][i]])?;
        let dy = o(e, Op::FConvert, dt, &[srcs[1][i]])?;
        let dz = o(e, Op::FConvert, dt, &[srcs[2][i]])?;
        let r = ro_f64(e, Ar::Fma, dx, dy, dz, rnd)?;
        outs.push(round_out(e, inst, r, fmt, rnd)?);
    }
    let v = pack(e, &outs)?;
    store(e, fx, d, v, lanes)
}

/// `abs neg ex2 tanh` on half types.
pub(crate) fn unary(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let Some((fmt, lanes)) = layout(t) else { return Err(unsupported(inst, "")) };
    let [d, a] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects 2 operands", inst.mnemonic())));
    };
    let u32t = e.t_int(32);
    match inst.opcode.as_str() {
        "abs" | "neg" => {
            let v = get_bits(e, fx, a, lanes)?;
            let mut outs = Vec::new();
            for i in 0..lanes {
                let h = lane(e, v, i)?;
                let h = if inst.has("ftz") {
                    let f = to_f32(e, h, fmt)?;
                    let f = flush_input(e, f, fmt)?;
                    let dt = e.t_float(64);
                    let df = o(e, Op::FConvert, dt, &[f])?;
                    let b = rounding::round_f64(e, df, fmt, Rnd::Rn, false)?;
                    let keep_nan = o(e, Op::UConvert, u32t, &[b])?;
                    // round_f64 canonicalizes NaN; keep the input's bits instead.
                    let bt = e.t_bool();
                    let nan = o(e, Op::IsNan, bt, &[f])?;
                    sel(e, u32t, nan, h, keep_nan)?
                } else {
                    h
                };
                let r = if inst.opcode == "abs" {
                    let m = e.c_u32(0x7fff);
                    o(e, Op::BitwiseAnd, u32t, &[h, m])?
                } else {
                    let m = e.c_u32(0x8000);
                    o(e, Op::BitwiseXor, u32t, &[h, m])?
                };
                outs.push(r);
            }
            let v = pack(e, &outs)?;
            store(e, fx, d, v, lanes)
        }
        "ex2" | "tanh" if inst.has("approx") => {
            let srcs = sources(e, fx, inst, std::slice::from_ref(a), fmt, lanes)?;
            let dt = e.t_float(64);
            let mut outs = Vec::new();
            for &x in &srcs[0] {
                let r = if inst.opcode == "ex2" { float::ex2_32(e, x)? } else { float::tanh32(e, x)? };
                let r = o(e, Op::FConvert, dt, &[r])?;
                outs.push(round_out(e, inst, r, fmt, Rnd::Rn)?);
            }
            let v = pack(e, &outs)?;
            store(e, fx, d, v, lanes)
        }
        _ => Err(unsupported(inst, "")),
    }
}

/// Compare two f32 values (`cmp` is a PTX comparison); `None` for an unknown one.
pub(crate) fn compare_f32(e: &mut Emitter, c: &str, a: Word, b: Word) -> Result<Option<Word>, Diagnostic> {
    super::inst::compare(e, c, ScalarType::F32, a, b)
}

/// `setp` on half types: one predicate per lane (`p|q` get lanes 0 and 1
/// for packed types), each combined with `c` by `.and/.or/.xor`.
pub(crate) fn setp(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    t: ScalarType,
    cmp_op: &str,
) -> Result<(), Diagnostic> {
    let Some((fmt, lanes)) = layout(t) else { return Err(unsupported(inst, "")) };
    let bool_op = ["and", "or", "xor"].into_iter().find(|b| inst.has(b));
    let ops = inst.operands.as_slice();
    let (dst, a, b, c) = match (ops, bool_op) {
        ([d, a, b], None) => (d, a, b, None),
        ([d, a, b, c], Some(_)) => (d, a, b, Some(c)),
        _ => return Err(Diagnostic::error(inst.span, format!("wrong operands for '{}'", inst.mnemonic()))),
    };
    let srcs = sources(e, fx, inst, &[a.clone(), b.clone()], fmt, lanes)?;
    let vc = match c {
        Some(c) => Some(get(e, fx, c, K::Pred, false)?),
        None => None,
    };
    let mut preds = Vec::new();
    for i in 0..lanes as usize {
        let Some(mut r) = compare_f32(e, cmp_op, srcs[0][i], srcs[1][i])? else {
            return Err(unsupported(inst, "comparison not valid for this type"));
        };
        if let (Some(op), Some(vc)) = (bool_op, vc) {
            r = match op {
                "and" => and(e, r, vc)?,
                "or" => or(e, r, vc)?,
                _ => cmp(e, Op::LogicalNotEqual, r, vc)?,
            };
        }
        preds.push(r);
    }
    match (dst, lanes) {
        (Operand::Pair(_, p, q), 2) => {
            set(e, fx, p, preds[0], K::Pred, false)?;
            set(e, fx, q, preds[1], K::Pred, false)
        }
        (Operand::Pair(_, p, q), _) => {
            // Scalar: q is the complement (combined with c the same way).
            let r = preds[0];
            set(e, fx, p, r, K::Pred, false)?;
            let Some(mut nr) = compare_f32(e, cmp_op, srcs[0][0], srcs[1][0])? else {
                return Err(unsupported(inst, ""));
            };
            nr = not(e, nr)?;
            if let (Some(op), Some(vc)) = (bool_op, vc) {
                nr = match op {
                    "and" => and(e, nr, vc)?,
                    "or" => or(e, nr, vc)?,
                    _ => cmp(e, Op::LogicalNotEqual, nr, vc)?,
                };
            }
            set(e, fx, q, nr, K::Pred, false)
        }
        (p, 1) => set(e, fx, p, preds[0], K::Pred, false),
        _ => Err(Diagnostic::error(inst.span, "packed setp needs two destinations p|q")),
    }
}
