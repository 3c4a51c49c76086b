//! `cvt`: conversions between every pair of PTX types, with PTX's rounding
//! modifiers (`.rni .rzi .rmi .rpi` to integral values, `.rn .rz .rm .rp
//! .rna` to floats), `.ftz`, `.sat`, `.relu`, `.satfinite`, the packed
//! destinations (`f16x2`, `bf16x2`, `e4m3x2`, `e5m2x2`, `ue8m0x2`), `tf32`,
//! and `cvt.pack`.
//!
//! - float → integer: round to an integral value, then saturate to the
//!   destination's range; NaN gives 0 (PTX ISA, "cvt": "saturation ... NaN
//!   results are converted to 0").
//! - integer → float and narrowing float → float round in software
//!   ([`super::rounding`]) in every mode, so subnormal results do not depend
//!   on the driver's denormal handling (f32 and f64 destinations from 32-bit
//!   integers in `.rn` use the exact-enough native conversion).
//! - half-precision sources are widened exactly to f32 first.

use super::float::flush;
use super::func::{internal1, Fx};
use super::half;
use super::inst::{ext, glsl, op1};
use super::rounding::{self, cmp, o, sel, Fmt, Rnd, R};
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, Operand, ScalarType};
use crate::diag::Diagnostic;
use rspirv::spirv::{Op, Word};

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    let extra = if why.is_empty() { String::new() } else { format!(" ({why})") };
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}'{extra}", inst.mnemonic()))
}

/// A `cvt` type: a PTX scalar type or one of the types only `cvt` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CT {
    S(ScalarType),
    E4m3x2,
    E5m2x2,
    Ue8m0x2,
    Tf32,
}

fn cvt_types(inst: &Instruction) -> Vec<CT> {
    inst.modifiers
        .iter()
        .filter_map(|m| match m.as_str() {
            "e4m3x2" => Some(CT::E4m3x2),
            "e5m2x2" => Some(CT::E5m2x2),
            "ue8m0x2" => Some(CT::Ue8m0x2),
            "tf32" => Some(CT::Tf32),
            _ => ScalarType::from_name(m).map(CT::S),
        })
        .collect()
}

/// The float format of a scalar float type.
fn fmt_of(t: ScalarType) -> Option<Fmt> {
    Some(match t {
        ScalarType::F16 => Fmt::F16,
        ScalarType::Bf16 => Fmt::BF16,
        ScalarType::F32 => Fmt::F32,
        ScalarType::F64 => Fmt::F64,
        _ => return None,
    })
}

/// Read a float operand of type `t` as an f64 value (exact), flushing f32
/// subnormals with `ftz`.
fn float_src_f64(e: &mut Emitter, fx: &mut Fx, a: &Operand, t: ScalarType, ftz: bool) -> R {
    let dt = e.t_float(64);
    match t {
        ScalarType::F64 => get(e, fx, a, K::Float(64), false),
        _ => {
            let f = float_src_f32(e, fx, a, t, ftz)?;
            o(e, Op::FConvert, dt, &[f])
        }
    }
}

/// Read an f16/bf16/f32 operand as an f32 value (exact).
fn float_src_f32(e: &mut Emitter, fx: &mut Fx, a: &Operand, t: ScalarType, ftz: bool) -> R {
    match t {
        ScalarType::F32 => {
            let v = get(e, fx, a, K::Float(32), false)?;
            if ftz {
                flush(e, v, 32)
            } else {
                Ok(v)
            }
        }
        ScalarType::F16 | ScalarType::Bf16 => {
            let v = half::get_bits(e, fx, a, 1)?;
            let fmt = if t == ScalarType::F16 { Fmt::F16 } else { Fmt::BF16 };
            half::to_f32(e, v, fmt)
        }
        _ => Err(Diagnostic::error(a.span(), "internal error: not a float source")),
    }
}

/// `.relu`: negative (and -0) to +0, NaN kept (f64 value).
fn relu64(e: &mut Emitter, v: Word) -> R {
    let dt = e.t_float(64);
    let z = e.c_f64(0.0);
    let le = cmp(e, Op::FOrdLessThanEqual, v, z)?;
    sel(e, dt, le, z, v)
}

/// An f64 value rounded to `fmt` bits as a 32-bit integer (`fmt` narrower than f64).
fn to_bits32(e: &mut Emitter, v: Word, fmt: Fmt, rnd: Rnd, satfinite: bool) -> R {
    let b = rounding::round_f64(e, v, fmt, rnd, satfinite)?;
    let u32t = e.t_int(32);
    o(e, Op::UConvert, u32t, &[b])
}

/// An f32 operand narrowed to `fmt` bits (a 32-bit integer), `.relu` and
/// `.satfinite` applied: f16 to nearest without them through
/// [`rounding::f32_to_f16_rn`] (32-bit), the rest widened to f64 and
/// rounded by [`to_bits32`].
#[allow(clippy::too_many_arguments)]
fn narrow_f32(
    e: &mut Emitter,
    fx: &mut Fx,
    a: &Operand,
    ftz: bool,
    fmt: Fmt,
    rnd: Rnd,
    relu: bool,
    satfinite: bool,
) -> R {
    if fmt == Fmt::F16 && rnd == Rnd::Rn && !relu && !satfinite {
        let v = float_src_f32(e, fx, a, ScalarType::F32, ftz)?;
        return rounding::f32_to_f16_rn(e, v);
    }
    let v = float_src_f64(e, fx, a, ScalarType::F32, ftz)?;
    let v = if relu { relu64(e, v)? } else { v };
    to_bits32(e, v, fmt, rnd, satfinite)
}

/// Write float bits/values of format `fmt` to a destination of type `t`.
fn store_float(e: &mut Emitter, fx: &mut Fx, d: &Operand, v: Word, t: ScalarType) -> Result<(), Diagnostic> {
    match t {
        ScalarType::F16 | ScalarType::Bf16 => half::store(e, fx, d, v, 1),
        ScalarType::F32 => set(e, fx, d, v, K::Float(32), false),
        _ => set(e, fx, d, v, K::Float(64), false),
    }
}

pub(crate) fn cvt(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    if inst.has("pack") {
        return cvt_pack(e, fx, inst);
    }
    let tys = cvt_types(inst);
    let [dt, st] = tys.as_slice() else {
        // The form decoded (`isa::table`), so a type is one this file does
        // not convert yet (the FP4/FP6 and x4 FP8 packings).
        return Err(unsupported(inst, "FP4, FP6 and four-element FP8 packings are not implemented"));
    };
    let irnd = ["rni", "rzi", "rmi", "rpi"].into_iter().find(|m| inst.has(m));
    let frnd = Rnd::of(inst);
    let sat = inst.has("sat");
    let ftz = inst.has("ftz");
    let relu = inst.has("relu");
    let satfinite = inst.has("satfinite");
    let (dt, st) = match (*dt, *st) {
        (CT::S(d), CT::S(s)) => (d, s),
        (d, s) => return cvt_special(e, fx, inst, d, s, frnd, relu, satfinite),
    };
    if matches!(dt, ScalarType::F16x2 | ScalarType::Bf16x2) {
        return cvt_pair(e, fx, inst, dt, st, frnd, relu, satfinite);
    }
    let [d, a] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, "cvt expects 2 operands"));
    };
    let dbits = dt.size() * 8;
    let sbits = st.size() * 8;
    match (dt.is_float(), st.is_float()) {
        (false, false) => {
            // Integer to integer: extend or truncate from the source type, then saturate.
            let v = get(e, fx, a, K::Int(sbits.max(8)), st.is_signed())?;
            let r = if sat {
                let t64 = e.t_int(64);
                let w = e.convert(v, K::Int(sbits), K::Int(64), st.is_signed())?;
                let (lo, hi): (i128, i128) = if dt.is_signed() {
                    (-(1i128 << (dbits - 1)), (1i128 << (dbits - 1)) - 1)
                } else {
                    (0, (1i128 << dbits) - 1)
                };
                let bt = e.t_bool();
                let clo = e.c_int(64, lo as u64);
                let chi = e.c_int(64, hi as u64);
                // Compare in the source's signedness; a bound outside the
                // source's range never applies.
                let f = e.c_bool(false);
                let (lt, gt) = if st.is_signed() {
                    let lt = e.b.s_less_than(bt, None, w, clo).map_err(internal1)?;
                    let gt = if hi <= i64::MAX as i128 {
                        e.b.s_greater_than(bt, None, w, chi).map_err(internal1)?
                    } else {
                        f
                    };
                    (lt, gt)
                } else {
                    let gt = if hi < u64::MAX as i128 {
                        e.b.u_greater_than(bt, None, w, chi).map_err(internal1)?
                    } else {
                        f
                    };
                    (f, gt)
                };
                let w = e.b.select(t64, None, lt, clo, w).map_err(internal1)?;
                let w = e.b.select(t64, None, gt, chi, w).map_err(internal1)?;
                e.convert(w, K::Int(64), K::Int(dbits), false)?
            } else {
                e.convert(v, K::Int(sbits), K::Int(dbits), st.is_signed())?
            };
            set(e, fx, d, r, K::Int(dbits), dt.is_signed())
        }
        (true, false) => {
            // Integer to float.
            let Some(fmt) = fmt_of(dt) else { return Err(unsupported(inst, "")) };
            let rnd = match frnd {
                Some(Rnd::Rna) => return Err(unsupported(inst, ".rna is only for tf32")),
                Some(r) => r,
                None => Rnd::Rn,
            };
            let v = get(e, fx, a, K::Int(sbits.max(16)), st.is_signed())?;
            let v = e.convert(v, K::Int(sbits.max(16)), K::Int(64), st.is_signed())?;
            let bits = rounding::round_int(e, v, st.is_signed(), fmt, rnd)?;
            let r = match dt {
                ScalarType::F64 => {
                    let ft = e.t_float(64);
                    o(e, Op::Bitcast, ft, &[bits])?
                }
                ScalarType::F32 => {
                    let u32t = e.t_int(32);
                    let b = o(e, Op::UConvert, u32t, &[bits])?;
                    let ft = e.t_float(32);
                    o(e, Op::Bitcast, ft, &[b])?
                }
                _ => {
                    let u32t = e.t_int(32);
                    o(e, Op::UConvert, u32t, &[bits])?
                }
            };
            let r = if sat { sat_any(e, r, dt)? } else { r };
            store_float(e, fx, d, r, dt)
        }
        (false, true) => {
            // Float to integer: round, then saturate; NaN gives 0.
            let Some(rnd) = irnd else {
                return Err(Diagnostic::error(
                    inst.opcode_span,
                    "float-to-integer cvt needs an integer rounding modifier (.rni, .rzi, .rmi, .rpi)",
                ));
            };
            let (v, fb) = if st == ScalarType::F64 {
                (get(e, fx, a, K::Float(64), false)?, 64)
            } else {
                (float_src_f32(e, fx, a, st, ftz)?, 32)
            };
            let f = round(e, v, rnd, fb)?;
            let r = float_to_int(e, f, fb, dbits, dt.is_signed())?;
            set(e, fx, d, r, K::Int(dbits), dt.is_signed())
        }
        (true, true) => {
            let Some(fmt) = fmt_of(dt) else { return Err(unsupported(inst, "")) };
            if dt == st || dbits > sbits {
                // Same type (optionally to an integral value) or exact widening.
                let r = if st == ScalarType::F64 {
                    let v = get(e, fx, a, K::Float(64), false)?;
                    match irnd {
                        Some(r) => round(e, v, r, 64)?,
                        None => v,
                    }
                } else {
                    let v = float_src_f32(e, fx, a, st, ftz)?;
                    let v = match irnd {
                        Some(r) => round(e, v, r, 32)?,
                        None => v,
                    };
                    match dt {
                        ScalarType::F64 => {
                            let d64 = e.t_float(64);
                            o(e, Op::FConvert, d64, &[v])?
                        }
                        ScalarType::F32 => {
                            let v = if ftz { flush(e, v, 32)? } else { v };
                            if dt == st {
                                // cvt.f32.f32 canonicalizes NaN like any arithmetic.
                                super::float::canon_nan(e, v, 32)?
                            } else {
                                v
                            }
                        }
                        _ => {
                            // f16/bf16 to the same format: exact (integral values are representable).
                            let dd = e.t_float(64);
                            let w = o(e, Op::FConvert, dd, &[v])?;
                            to_bits32(e, w, fmt, Rnd::Rn, false)?
                        }
                    }
                };
                let r = if sat { sat_any(e, r, dt)? } else { r };
                return store_float(e, fx, d, r, dt);
            }
            // Narrowing (or between f16 and bf16).
            let rnd = match frnd {
                Some(Rnd::Rna) => return Err(unsupported(inst, ".rna is only for tf32")),
                Some(r) => r,
                None if sbits == dbits => Rnd::Rn,
                None => {
                    return Err(Diagnostic::error(inst.opcode_span, "narrowing float cvt needs a rounding modifier"))
                }
            };
            if st == ScalarType::F32 && matches!(dt, ScalarType::F16 | ScalarType::Bf16) {
                let r = narrow_f32(e, fx, a, ftz, fmt, rnd, relu, satfinite)?;
                let r = if sat { sat_any(e, r, dt)? } else { r };
                return store_float(e, fx, d, r, dt);
            }
            let v = float_src_f64(e, fx, a, st, ftz)?;
            let v = if relu { relu64(e, v)? } else { v };
            let r = if dt == ScalarType::F32 {
                let r = rounding::f64_to_f32(e, v, rnd)?;
                if ftz {
                    flush(e, r, 32)?
                } else {
                    r
                }
            } else {
                to_bits32(e, v, fmt, rnd, satfinite)?
            };
            let r = if sat { sat_any(e, r, dt)? } else { r };
            store_float(e, fx, d, r, dt)
        }
    }
}

/// `.sat` on a float result of type `t` (f16/bf16 as 32-bit bits).
fn sat_any(e: &mut Emitter, r: Word, t: ScalarType) -> R {
    match t {
        ScalarType::F32 => super::float::saturate(e, r, 32),
        ScalarType::F64 => super::float::saturate(e, r, 64),
        _ => {
            // Half bits: clamp through f32 (exact both ways).
            let fmt = if t == ScalarType::Bf16 { Fmt::BF16 } else { Fmt::F16 };
            let f = half::to_f32(e, r, fmt)?;
            let s = super::float::saturate(e, f, 32)?;
            let dt = e.t_float(64);
            let w = o(e, Op::FConvert, dt, &[s])?;
            to_bits32(e, w, fmt, Rnd::Rn, false)
        }
    }
}

/// `cvt.rnd{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b`: `a` to the
/// upper half, `b` to the lower.
#[allow(clippy::too_many_arguments)]
fn cvt_pair(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    dt: ScalarType,
    st: ScalarType,
    frnd: Option<Rnd>,
    relu: bool,
    satfinite: bool,
) -> Result<(), Diagnostic> {
    if st != ScalarType::F32 {
        return Err(unsupported(inst, "packed conversions take f32 sources"));
    }
    let fmt = if dt == ScalarType::F16x2 { Fmt::F16 } else { Fmt::BF16 };
    if inst.has("rs") {
        return cvt_pair_rs(e, fx, inst, fmt, relu, satfinite);
    }
    let [d, a, b] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects 3 operands", inst.mnemonic())));
    };
    let rnd = match frnd {
        Some(r @ (Rnd::Rn | Rnd::Rz)) => r,
        _ => return Err(unsupported(inst, "needs .rn or .rz")),
    };
    let mut lanes = Vec::new();
    for op in [b, a] {
        lanes.push(narrow_f32(e, fx, op, false, fmt, rnd, relu, satfinite)?);
    }
    let r = half::pack(e, &lanes)?;
    half::store(e, fx, d, r, 2)
}

/// `cvt.rs{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b, rbits`: stochastic
/// rounding. Per the PTX ISA the result is rounded toward or away from zero
/// by the carry out of adding the random bits to the discarded low bits of
/// the f32 significand: 13 bits for f16 (`rbits[28:16]` for `a`,
/// `rbits[12:0]` for `b`), 16 for bf16 (`rbits[31:16]`, `rbits[15:0]`).
/// That is: add the random bits to the magnitude's bit pattern (a carry
/// may ripple into the exponent), then truncate toward zero. Where a
/// result is subnormal in the destination more bits are discarded and the
/// random bits stay aligned with the f32 significand's lowest bit. A sum
/// at or beyond the destination's overflow threshold (2^16 for f16, the
/// f32 infinity pattern for bf16) is infinity, the largest finite value
/// with `.satfinite`; NaN gives the canonical NaN; `.relu` clamps
/// negative results (and -0) to +0.
fn cvt_pair_rs(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    fmt: Fmt,
    relu: bool,
    satfinite: bool,
) -> Result<(), Diagnostic> {
    let [d, a, b, rb] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects operands d, a, b, rbits", inst.mnemonic())));
    };
    let u32t = e.t_int(32);
    let f32t = e.t_float(32);
    let f64t = e.t_float(64);
    let rbits = get(e, fx, rb, K::Int(32), false)?;
    let (rmask, limit) = if fmt == Fmt::F16 { (0x1fffu32, 0x4780_0000u32) } else { (0xffff, 0x7f80_0000) };
    let mut lanes = Vec::new();
    for (op, shift) in [(b, 0u32), (a, 16)] {
        let x = get(e, fx, op, K::Float(32), false)?;
        let xb = o(e, Op::Bitcast, u32t, &[x])?;
        let sh = e.c_u32(shift);
        let r = o(e, Op::ShiftRightLogical, u32t, &[rbits, sh])?;
        let m = e.c_u32(rmask);
        let r = o(e, Op::BitwiseAnd, u32t, &[r, m])?;
        let sm = e.c_u32(0x8000_0000);
        let sign = o(e, Op::BitwiseAnd, u32t, &[xb, sm])?;
        let am = e.c_u32(0x7fff_ffff);
        let mag = o(e, Op::BitwiseAnd, u32t, &[xb, am])?;
        let sum = o(e, Op::IAdd, u32t, &[mag, r])?;
        let lim = e.c_u32(limit);
        let over = cmp(e, Op::UGreaterThanEqual, sum, lim)?;
        let inf = e.c_u32(0x7f80_0000);
        let sum = sel(e, u32t, over, inf, sum)?;
        let y = o(e, Op::BitwiseOr, u32t, &[sum, sign])?;
        // NaN inputs keep their pattern (the rounding turns them canonical).
        let nan = cmp(e, Op::UGreaterThan, mag, inf)?;
        let y = sel(e, u32t, nan, xb, y)?;
        let yf = o(e, Op::Bitcast, f32t, &[y])?;
        let v = o(e, Op::FConvert, f64t, &[yf])?;
        let v = if relu { relu64(e, v)? } else { v };
        lanes.push(to_bits32(e, v, fmt, Rnd::Rz, satfinite)?);
    }
    let r = half::pack(e, &lanes)?;
    half::store(e, fx, d, r, 2)
}

/// The FP8 and TF32 conversions.
#[allow(clippy::too_many_arguments)]
fn cvt_special(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    dt: CT,
    st: CT,
    frnd: Option<Rnd>,
    relu: bool,
    satfinite: bool,
) -> Result<(), Diagnostic> {
    let u32t = e.t_int(32);
    let f8 = |t: CT| match t {
        CT::E4m3x2 => Some(Fmt::E4M3),
        CT::E5m2x2 => Some(Fmt::E5M2),
        _ => None,
    };
    match (dt, st) {
        (CT::Tf32, CT::S(ScalarType::F32)) => {
            let [d, a] = inst.operands.as_slice() else {
                return Err(Diagnostic::error(inst.span, "cvt expects 2 operands"));
            };
            let Some(rnd) = frnd else { return Err(unsupported(inst, "needs a rounding modifier")) };
            let v = float_src_f64(e, fx, a, ScalarType::F32, false)?;
            let v = if relu { relu64(e, v)? } else { v };
            let b = to_bits32(e, v, Fmt::TF32, rnd, satfinite)?;
            // TF32 in f32 layout: 19 bits at the top of the word. NaN stays f32's canonical NaN.
            let c13 = e.c_u32(13);
            let r = o(e, Op::ShiftLeftLogical, u32t, &[b, c13])?;
            let nanb = e.c_u32(Fmt::TF32.nan() as u32);
            let isnan = cmp(e, Op::IEqual, b, nanb)?;
            let canon = e.c_u32(0x7fff_ffff);
            let r = sel(e, u32t, isnan, canon, r)?;
            set(e, fx, d, r, K::Int(32), false)
        }
        (d8, CT::S(ScalarType::F32)) if f8(d8).is_some() => {
            let [d, a, b] = inst.operands.as_slice() else {
                return Err(Diagnostic::error(inst.span, format!("'{}' expects 3 operands", inst.mnemonic())));
            };
            let Some(fmt) = f8(d8) else { return Err(unsupported(inst, "")) };
            if frnd != Some(Rnd::Rn) || !satfinite {
                return Err(unsupported(inst, "FP8 conversions are .rn.satfinite"));
            }
            let mut lanes = Vec::new();
            for op in [b, a] {
                let v = float_src_f64(e, fx, op, ScalarType::F32, false)?;
                let v = if relu { relu64(e, v)? } else { v };
                lanes.push(to_bits32(e, v, fmt, Rnd::Rn, true)?);
            }
            let r = pack_bytes(e, lanes[0], lanes[1])?;
            half::store(e, fx, d, r, 1)
        }
        (d8, CT::S(t @ (ScalarType::F16x2 | ScalarType::Bf16x2))) if f8(d8).is_some() => {
            // Each half widens exactly, and rounds once to FP8.
            let [d, a] = inst.operands.as_slice() else {
                return Err(Diagnostic::error(inst.span, "cvt expects 2 operands"));
            };
            let Some(fmt) = f8(d8) else { return Err(unsupported(inst, "")) };
            if frnd != Some(Rnd::Rn) || !satfinite {
                return Err(unsupported(inst, "FP8 conversions are .rn.satfinite"));
            }
            let hfmt = if t == ScalarType::F16x2 { Fmt::F16 } else { Fmt::BF16 };
            let v = half::get_bits(e, fx, a, 2)?;
            let f64t = e.t_float(64);
            let mut lanes = Vec::new();
            for i in 0..2 {
                let h = half::lane(e, v, i)?;
                let f = half::to_f32(e, h, hfmt)?;
                let f = o(e, Op::FConvert, f64t, &[f])?;
                let f = if relu { relu64(e, f)? } else { f };
                lanes.push(to_bits32(e, f, fmt, Rnd::Rn, true)?);
            }
            let r = pack_bytes(e, lanes[0], lanes[1])?;
            half::store(e, fx, d, r, 1)
        }
        (CT::Ue8m0x2, s @ CT::S(ScalarType::F32 | ScalarType::Bf16x2)) => {
            let up = match frnd {
                Some(Rnd::Rz) => false,
                Some(Rnd::Rp) => true,
                _ => return Err(unsupported(inst, "conversions to .ue8m0x2 are .rz or .rp")),
            };
            let mut lanes = Vec::new();
            let d = if s == CT::S(ScalarType::F32) {
                let [d, a, b] = inst.operands.as_slice() else {
                    return Err(Diagnostic::error(inst.span, format!("'{}' expects 3 operands", inst.mnemonic())));
                };
                for op in [b, a] {
                    let x = get(e, fx, op, K::Int(32), false)?;
                    let bf = f32_to_bf16_for_e8m0(e, x, up)?;
                    lanes.push(bf16_to_e8m0(e, bf, up, satfinite)?);
                }
                d
            } else {
                let [d, a] = inst.operands.as_slice() else {
                    return Err(Diagnostic::error(inst.span, "cvt expects 2 operands"));
                };
                let v = half::get_bits(e, fx, a, 2)?;
                for i in 0..2 {
                    let h = half::lane(e, v, i)?;
                    lanes.push(bf16_to_e8m0(e, h, up, satfinite)?);
                }
                d
            };
            let r = pack_bytes(e, lanes[0], lanes[1])?;
            half::store(e, fx, d, r, 1)
        }
        (CT::S(ScalarType::Bf16x2), CT::Ue8m0x2) => {
            // 2^(x - 127) exactly: the exponent field, 2^-127 as the bf16
            // subnormal 0x0040, and 0xff as the canonical NaN.
            let [d, a] = inst.operands.as_slice() else {
                return Err(Diagnostic::error(inst.span, "cvt expects 2 operands"));
            };
            if frnd != Some(Rnd::Rn) {
                return Err(unsupported(inst, "conversions from .ue8m0x2 are .rn"));
            }
            let v = half::get_bits(e, fx, a, 1)?;
            let mut lanes = Vec::new();
            for x in byte_lanes(e, v)? {
                let c7 = e.c_u32(7);
                let r = o(e, Op::ShiftLeftLogical, u32t, &[x, c7])?;
                let z = e.c_u32(0);
                let is_zero = cmp(e, Op::IEqual, x, z)?;
                let tiny = e.c_u32(0x0040);
                let r = sel(e, u32t, is_zero, tiny, r)?;
                let ff = e.c_u32(0xff);
                let is_nan = cmp(e, Op::IEqual, x, ff)?;
                let nan = e.c_u32(0x7fff);
                lanes.push(sel(e, u32t, is_nan, nan, r)?);
            }
            let r = half::pack(e, &lanes)?;
            half::store(e, fx, d, r, 2)
        }
        (CT::S(t @ (ScalarType::F16x2 | ScalarType::Bf16x2)), s8) if f8(s8).is_some() => {
            let [d, a] = inst.operands.as_slice() else {
                return Err(Diagnostic::error(inst.span, "cvt expects 2 operands"));
            };
            let Some(fmt) = f8(s8) else { return Err(unsupported(inst, "")) };
            let hfmt = if t == ScalarType::F16x2 { Fmt::F16 } else { Fmt::BF16 };
            let v = half::get_bits(e, fx, a, 1)?;
            let mut lanes = Vec::new();
            for x in byte_lanes(e, v)? {
                let f = fp8_to_f64(e, x, fmt)?;
                let f = if relu { relu64(e, f)? } else { f };
                lanes.push(to_bits32(e, f, hfmt, Rnd::Rn, false)?);
            }
            let r = half::pack(e, &lanes)?;
            half::store(e, fx, d, r, 2)
        }
        _ => Err(unsupported(inst, "")),
    }
}

/// Two bytes (32-bit integers below 256) packed as `hi << 8 | lo`.
fn pack_bytes(e: &mut Emitter, lo: Word, hi: Word) -> R {
    let u32t = e.t_int(32);
    let c8 = e.c_u32(8);
    let hi = o(e, Op::ShiftLeftLogical, u32t, &[hi, c8])?;
    o(e, Op::BitwiseOr, u32t, &[hi, lo])
}

/// The low and the high byte of `v` (a 32-bit integer), each as a 32-bit integer.
fn byte_lanes(e: &mut Emitter, v: Word) -> Result<[Word; 2], Diagnostic> {
    let u32t = e.t_int(32);
    let m = e.c_u32(0xff);
    let lo = o(e, Op::BitwiseAnd, u32t, &[v, m])?;
    let c8 = e.c_u32(8);
    let hi = o(e, Op::ShiftRightLogical, u32t, &[v, c8])?;
    let hi = o(e, Op::BitwiseAnd, u32t, &[hi, m])?;
    Ok([lo, hi])
}

/// The bf16 pattern (sign cleared, in a 32-bit integer) that the
/// conversion of f32 bits `x` to `ue8m0` goes through: `|x|` rounded toward
/// zero (`up` false) or up, and NaN as the canonical 0x7fff. (CUDA's
/// `__nv_cvt_float_to_e8m0` documents the conversion this way; each step
/// rounds in the same direction, so the result is `|x|` rounded once to a
/// power of two.)
fn f32_to_bf16_for_e8m0(e: &mut Emitter, x: Word, up: bool) -> R {
    let u32t = e.t_int(32);
    let absm = e.c_u32(0x7fff_ffff);
    let a = o(e, Op::BitwiseAnd, u32t, &[x, absm])?;
    let c16 = e.c_u32(16);
    let bf = o(e, Op::ShiftRightLogical, u32t, &[a, c16])?;
    let bf = if up {
        let low = e.c_u32(0xffff);
        let l = o(e, Op::BitwiseAnd, u32t, &[a, low])?;
        let z = e.c_u32(0);
        let inexact = cmp(e, Op::INotEqual, l, z)?;
        let infb = e.c_u32(0x7f80_0000);
        let finite = cmp(e, Op::ULessThan, a, infb)?;
        let bump = rounding::and(e, inexact, finite)?;
        let one = e.c_u32(1);
        let b1 = o(e, Op::IAdd, u32t, &[bf, one])?;
        sel(e, u32t, bump, b1, bf)?
    } else {
        bf
    };
    let infb = e.c_u32(0x7f80_0000);
    let is_nan = cmp(e, Op::UGreaterThan, a, infb)?;
    let nan = e.c_u32(0x7fff);
    sel(e, u32t, is_nan, nan, bf)
}

/// `ue8m0` (in a 32-bit integer) of the bf16 pattern `h`: its exponent
/// field (toward zero), plus one when `up` and `|h|` lies strictly between
/// 2^-127 and infinity and is not a power of two; NaN gives 0xff, and with
/// `.satfinite` so does nothing else (infinity and overflow give 0xfe).
fn bf16_to_e8m0(e: &mut Emitter, h: Word, up: bool, satfinite: bool) -> R {
    let u32t = e.t_int(32);
    let c7 = e.c_u32(7);
    let ff = e.c_u32(0xff);
    let ex = o(e, Op::ShiftRightLogical, u32t, &[h, c7])?;
    let mut r = o(e, Op::BitwiseAnd, u32t, &[ex, ff])?;
    let absm = e.c_u32(0x7fff);
    let ab = o(e, Op::BitwiseAnd, u32t, &[h, absm])?;
    let infb = e.c_u32(0x7f80);
    if up {
        let mm = e.c_u32(0x7f);
        let mant = o(e, Op::BitwiseAnd, u32t, &[h, mm])?;
        let z = e.c_u32(0);
        let frac = cmp(e, Op::INotEqual, mant, z)?;
        let min = e.c_u32(0x40);
        let above = cmp(e, Op::UGreaterThan, ab, min)?;
        let finite = cmp(e, Op::ULessThan, ab, infb)?;
        let bump = rounding::and(e, frac, above)?;
        let bump = rounding::and(e, bump, finite)?;
        let one = e.c_u32(1);
        let r1 = o(e, Op::IAdd, u32t, &[r, one])?;
        r = sel(e, u32t, bump, r1, r)?;
    }
    if satfinite {
        let not_nan = cmp(e, Op::ULessThanEqual, ab, infb)?;
        let full = cmp(e, Op::IEqual, r, ff)?;
        let clamp = rounding::and(e, not_nan, full)?;
        let fe = e.c_u32(0xfe);
        r = sel(e, u32t, clamp, fe, r)?;
    }
    Ok(r)
}

/// The exact f64 value of an FP8 pattern (low 8 bits of a 32-bit integer).
pub(crate) fn fp8_to_f64(e: &mut Emitter, x: Word, fmt: Fmt) -> R {
    let u32t = e.t_int(32);
    let dt = e.t_float(64);
    let bt = e.t_bool();
    let m = fmt.mbits;
    let mm = e.c_u32((1 << m) - 1);
    let mant = o(e, Op::BitwiseAnd, u32t, &[x, mm])?;
    let cm = e.c_u32(m);
    let ex = o(e, Op::ShiftRightLogical, u32t, &[x, cm])?;
    let em = e.c_u32((1 << fmt.ebits) - 1);
    let ex = o(e, Op::BitwiseAnd, u32t, &[ex, em])?;
    // value = (ex == 0 ? mant : mant + 2^m) * 2^(max(ex,1) - bias - m)
    let z = e.c_u32(0);
    let sub = cmp(e, Op::IEqual, ex, z)?;
    let hid = e.c_u32(1 << m);
    let full = o(e, Op::BitwiseOr, u32t, &[mant, hid])?;
    let sig = sel(e, u32t, sub, mant, full)?;
    let one = e.c_u32(1);
    let exf = ext(e, u32t, glsl::UMAX, &[ex, one])?;
    let sigf = o(e, Op::ConvertUToF, dt, &[sig])?;
    let k = e.c_u32((fmt.bias() + m as i32) as u32);
    let p = o(e, Op::ISub, u32t, &[exf, k])?;
    let i32t = e.t_int(32);
    let _ = i32t;
    let v = ext(e, dt, glsl::LDEXP, &[sigf, p])?;
    // Sign, NaN and infinity.
    let sb = e.c_u32(0x80);
    let s = o(e, Op::BitwiseAnd, u32t, &[x, sb])?;
    let neg = cmp(e, Op::INotEqual, s, z)?;
    let nv = o(e, Op::FNegate, dt, &[v])?;
    let v = sel(e, dt, neg, nv, v)?;
    let mag = e.c_u32(0x7f);
    let xm = o(e, Op::BitwiseAnd, u32t, &[x, mag])?;
    let nan = e.c_f64(f64::NAN);
    if fmt.no_inf {
        let is_nan = cmp(e, Op::IEqual, xm, mag)?;
        sel(e, dt, is_nan, nan, v)
    } else {
        let infb = e.c_u32(fmt.limit() as u32);
        let is_inf = cmp(e, Op::IEqual, xm, infb)?;
        let is_nan = cmp(e, Op::UGreaterThan, xm, infb)?;
        let inf = e.c_f64(f64::INFINITY);
        let ninf = e.c_f64(f64::NEG_INFINITY);
        let sinf = sel(e, dt, neg, ninf, inf)?;
        let v = sel(e, dt, is_inf, sinf, v)?;
        let _ = bt;
        sel(e, dt, is_nan, nan, v)
    }
}

/// `cvt.pack.sat.{u16,s16,u8,s8}.s32.b32 d, a, b, c`: saturate `a` and `b`
/// and pack them (`a` above `b`); the 8-bit forms put `c`'s low 16 bits above.
fn cvt_pack(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let tys: Vec<ScalarType> = inst.modifiers.iter().filter_map(|m| ScalarType::from_name(m)).collect();
    let Some(&ct) = tys.first() else {
        return Err(Diagnostic::error(inst.opcode_span, "cvt.pack needs types"));
    };
    let [d, a, b, c] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, "cvt.pack expects 4 operands"));
    };
    let u32t = e.t_int(32);
    let bits = ct.size() * 8;
    if bits >= 32 {
        // `.u2`/`.s2`/`.u4`/`.s4` are not scalar types: the first type found is `.s32`.
        return Err(unsupported(inst, "2- and 4-bit packing"));
    }
    let (lo, hi): (i32, i32) =
        if ct.is_signed() { (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) } else { (0, (1 << bits) - 1) };
    let mut parts = Vec::new();
    for op in [a, b] {
        let v = get(e, fx, op, K::Int(32), true)?;
        let l = e.c_u32(lo as u32);
        let h = e.c_u32(hi as u32);
        let v = ext(e, u32t, glsl::SMAX, &[v, l])?;
        let v = ext(e, u32t, glsl::SMIN, &[v, h])?;
        let m = e.c_u32(((1u64 << bits) - 1) as u32);
        parts.push(o(e, Op::BitwiseAnd, u32t, &[v, m])?);
    }
    let sh = e.c_u32(bits);
    let ta = o(e, Op::ShiftLeftLogical, u32t, &[parts[0], sh])?;
    let mut r = o(e, Op::BitwiseOr, u32t, &[ta, parts[1]])?;
    if bits == 8 {
        let vc = get(e, fx, c, K::Int(32), false)?;
        let c16 = e.c_u32(16);
        let cs = o(e, Op::ShiftLeftLogical, u32t, &[vc, c16])?;
        r = o(e, Op::BitwiseOr, u32t, &[cs, r])?;
    }
    set(e, fx, d, r, K::Int(32), false)
}

fn round(e: &mut Emitter, v: Word, rnd: &str, bits: u32) -> Result<Word, Diagnostic> {
    let f = match rnd {
        "rni" => glsl::ROUND_EVEN,
        "rzi" => glsl::TRUNC,
        "rmi" => glsl::FLOOR,
        _ => glsl::CEIL,
    };
    if bits == 64 {
        return super::float::integral_f64(e, v, f);
    }
    let ft = e.t_float(bits);
    ext(e, ft, f, &[v])
}

/// Saturating conversion of an integral float to an integer of `dbits`.
fn float_to_int(e: &mut Emitter, f: Word, fbits: u32, dbits: u32, signed: bool) -> Result<Word, Diagnostic> {
    let bt = e.t_bool();
    let cbits = dbits.max(32);
    let it = e.t_int(cbits);
    let (lo, hi_excl): (f64, f64) = if signed {
        (-(2f64.powi(dbits as i32 - 1)), 2f64.powi(dbits as i32 - 1))
    } else {
        (0.0, 2f64.powi(dbits as i32))
    };
    let min_int: u64 = if signed { (-(1i128 << (dbits - 1))) as u64 } else { 0 };
    let max_int: u64 = if signed { ((1u128 << (dbits - 1)) - 1) as u64 } else { ((1u128 << dbits) - 1) as u64 };
    let clo = e.c_float(fbits, lo);
    let chi = e.c_float(fbits, hi_excl);
    let too_low = e.b.f_ord_less_than(bt, None, f, clo).map_err(internal1)?;
    let too_high = e.b.f_ord_greater_than_equal(bt, None, f, chi).map_err(internal1)?;
    let nan = op1(e, Op::IsNan, bt, f)?;
    let bad = e.b.logical_or(bt, None, too_low, too_high).map_err(internal1)?;
    let bad = e.b.logical_or(bt, None, bad, nan).map_err(internal1)?;
    let z = e.c_float(fbits, 0.0);
    let ft = e.t_float(fbits);
    let safe = e.b.select(ft, None, bad, z, f).map_err(internal1)?;
    let conv = if signed { op1(e, Op::ConvertFToS, it, safe)? } else { op1(e, Op::ConvertFToU, it, safe)? };
    let cmin = e.c_int(cbits, min_int);
    let cmax = e.c_int(cbits, max_int);
    let czero = e.c_int(cbits, 0);
    let r = e.b.select(it, None, too_low, cmin, conv).map_err(internal1)?;
    let r = e.b.select(it, None, too_high, cmax, r).map_err(internal1)?;
    let r = e.b.select(it, None, nan, czero, r).map_err(internal1)?;
    e.convert(r, K::Int(cbits), K::Int(dbits), false)
}
