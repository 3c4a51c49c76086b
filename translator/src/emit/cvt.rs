//! `cvt`: conversions between integer and floating-point types, with PTX's
//! rounding modifiers and saturation (float → integer saturates, NaN → 0).

use super::float::flush;
use super::func::{internal1, Fx};
use super::inst::{ext, glsl, op1};
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, ScalarType};
use crate::diag::Diagnostic;
use rspirv::spirv::{Op, Word};

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    let extra = if why.is_empty() { String::new() } else { format!(" ({why})") };
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}'{extra}", inst.mnemonic()))
}

fn is_half(t: ScalarType) -> bool {
    matches!(t, ScalarType::F16 | ScalarType::Bf16 | ScalarType::F16x2 | ScalarType::Bf16x2)
}

pub(crate) fn cvt(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let tys: Vec<ScalarType> = inst.modifiers.iter().filter_map(|m| ScalarType::from_name(m)).collect();
    let [dt, st] = tys.as_slice() else {
        return Err(Diagnostic::error(inst.opcode_span, "cvt needs a destination and a source type"));
    };
    let (dt, st) = (*dt, *st);
    let [d, a] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, "cvt expects 2 operands"));
    };
    if is_half(dt) || is_half(st) {
        return Err(unsupported(inst, "half-precision conversions are not supported yet"));
    }
    let irnd = ["rni", "rzi", "rmi", "rpi"].into_iter().find(|m| inst.has(m));
    let frnd = ["rn", "rz", "rm", "rp"].into_iter().find(|m| inst.has(m));
    let sat = inst.has("sat");
    let ftz = inst.has("ftz");
    let dbits = dt.size() * 8;
    let sbits = st.size() * 8;
    match (dt.is_float(), st.is_float()) {
        (false, false) => {
            // Integer to integer: extend or truncate from the source type, then saturate.
            let v = get(e, fx, a, K::Int(sbits), st.is_signed())?;
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
            if matches!(frnd, Some("rz" | "rm" | "rp")) {
                return Err(unsupported(inst, "directed rounding is not supported yet"));
            }
            let v = get(e, fx, a, K::Int(sbits.max(16)), st.is_signed())?;
            let v = if sbits < 16 { e.convert(v, K::Int(16), K::Int(16), false)? } else { v };
            let ft = e.t_float(dbits);
            let mut r = if st.is_signed() { op1(e, Op::ConvertSToF, ft, v)? } else { op1(e, Op::ConvertUToF, ft, v)? };
            if sat {
                r = sat_float(e, r, dbits)?;
            }
            set(e, fx, d, r, K::Float(dbits), false)
        }
        (false, true) => {
            // Float to integer: round, then saturate; NaN gives 0.
            let Some(rnd) = irnd else {
                return Err(Diagnostic::error(
                    inst.opcode_span,
                    "float-to-integer cvt needs an integer rounding modifier (.rni, .rzi, .rmi, .rpi)",
                ));
            };
            let mut v = get(e, fx, a, K::Float(sbits), false)?;
            if ftz {
                v = flush(e, v, sbits)?;
            }
            let ft = e.t_float(sbits);
            let f = round(e, v, rnd, ft)?;
            let r = float_to_int(e, f, sbits, dbits, dt.is_signed())?;
            set(e, fx, d, r, K::Int(dbits), dt.is_signed())
        }
        (true, true) => {
            let mut v = get(e, fx, a, K::Float(sbits), false)?;
            if ftz {
                v = flush(e, v, sbits)?;
            }
            let ft = e.t_float(dbits);
            let mut r = if dbits == sbits {
                match irnd {
                    Some(r) => round(e, v, r, ft)?,
                    None => v,
                }
            } else if dbits > sbits {
                e.b.f_convert(ft, None, v).map_err(internal1)?
            } else {
                if matches!(frnd, Some("rz" | "rm" | "rp")) {
                    return Err(unsupported(inst, "directed rounding is not supported yet"));
                }
                if frnd.is_none() {
                    return Err(Diagnostic::error(inst.opcode_span, "narrowing float cvt needs a rounding modifier"));
                }
                e.b.f_convert(ft, None, v).map_err(internal1)?
            };
            if ftz {
                r = flush(e, r, dbits)?;
            }
            if sat {
                r = sat_float(e, r, dbits)?;
            }
            set(e, fx, d, r, K::Float(dbits), false)
        }
    }
}

fn round(e: &mut Emitter, v: Word, rnd: &str, ft: Word) -> Result<Word, Diagnostic> {
    let f = match rnd {
        "rni" => glsl::ROUND_EVEN,
        "rzi" => glsl::TRUNC,
        "rmi" => glsl::FLOOR,
        _ => glsl::CEIL,
    };
    ext(e, ft, f, &[v])
}

fn sat_float(e: &mut Emitter, v: Word, bits: u32) -> Result<Word, Diagnostic> {
    let ft = e.t_float(bits);
    let bt = e.t_bool();
    let z = e.c_float(bits, 0.0);
    let one = e.c_float(bits, 1.0);
    let c = ext(e, ft, glsl::FCLAMP, &[v, z, one])?;
    let nan = op1(e, Op::IsNan, bt, v)?;
    e.b.select(ft, None, nan, z, c).map_err(internal1)
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
