//! Floating-point instructions, with the corrections Vulkan needs for PTX's
//! IEEE results: correctly rounded `div.rn`/`sqrt.rn`/`rcp.rn`, and an exact
//! fused multiply-add on drivers that do not fuse `Fma`.
//!
//! - f32 `div.rn`, `sqrt.rn`, `rcp.rn` are computed in f64 and rounded once:
//!   a quotient or root of two f32 values can never lie within 2^-49
//!   (relative) of an f32 rounding boundary, while Vulkan's f64 error bound
//!   is below 2^-50, so the double rounding is exact.
//! - f32 `fma` (emulated): the f64 product of two f32 values is exact; the
//!   sum is rounded to odd in f64 (two-sum error term), then rounded to f32:
//!   round-to-odd at 53 bits followed by rounding to 24 bits is correctly
//!   rounded (Boldo and Melquiond, "Emulation of FMA and correctly rounded
//!   sums: proved algorithms using rounding to odd", 2008).
//! - f64 `fma` (emulated): Dekker's exact product, two-sum with the addend,
//!   a round-to-odd sum of the low parts, and one final rounding (same
//!   paper). Inputs where the exact product would overflow or underflow fall
//!   back to the driver's `Fma`.
//! - f64 `div.rn`/`sqrt.rn` take one Newton correction with an exact
//!   residual from the fused multiply-add.

use super::func::{internal1, Fx};
use super::inst::{ext, glsl, op1, op2};
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, Operand, ScalarType};
use crate::diag::Diagnostic;
use rspirv::spirv::{self, Op, Word};

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    let extra = if why.is_empty() { String::new() } else { format!(" ({why})") };
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}'{extra}", inst.mnemonic()))
}

fn fbits(t: ScalarType, inst: &Instruction) -> Result<u32, Diagnostic> {
    match t {
        ScalarType::F32 => Ok(32),
        ScalarType::F64 => Ok(64),
        _ => Err(unsupported(inst, "half-precision arithmetic is not supported yet")),
    }
}

/// Reject rounding modes other than round-to-nearest-even.
fn nearest_only(inst: &Instruction) -> Result<(), Diagnostic> {
    if ["rz", "rm", "rp"].iter().any(|m| inst.has(m)) {
        return Err(unsupported(inst, "directed rounding is not supported yet"));
    }
    Ok(())
}

/// An arithmetic instruction that must not be contracted with its neighbours.
fn exact(e: &mut Emitter, op: Op, t: Word, a: Word, b: Word) -> Result<Word, Diagnostic> {
    let r = op2(e, op, t, a, b)?;
    e.b.decorate(r, spirv::Decoration::NoContraction, []);
    Ok(r)
}

/// Flush a subnormal f32 to a zero of the same sign (`.ftz`).
pub(crate) fn flush(e: &mut Emitter, v: Word, bits: u32) -> Result<Word, Diagnostic> {
    if bits != 32 {
        return Ok(v);
    }
    let ft = e.t_float(32);
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let a = ext(e, ft, glsl::FABS, &[v])?;
    let min = e.c_f32(f32::MIN_POSITIVE);
    let small = e.b.f_ord_less_than(bt, None, a, min).map_err(internal1)?;
    let bitsv = e.b.bitcast(u32t, None, v).map_err(internal1)?;
    let sign = e.c_u32(0x8000_0000);
    let s = e.b.bitwise_and(u32t, None, bitsv, sign).map_err(internal1)?;
    let z = e.b.bitcast(ft, None, s).map_err(internal1)?;
    e.b.select(ft, None, small, z, v).map_err(internal1)
}

/// Clamp to [0, 1], NaN to 0 (`.sat`).
fn saturate(e: &mut Emitter, v: Word, bits: u32) -> Result<Word, Diagnostic> {
    let ft = e.t_float(bits);
    let bt = e.t_bool();
    let z = e.c_float(bits, 0.0);
    let one = e.c_float(bits, 1.0);
    let c = ext(e, ft, glsl::FCLAMP, &[v, z, one])?;
    let nan = op1(e, Op::IsNan, bt, v)?;
    e.b.select(ft, None, nan, z, c).map_err(internal1)
}

fn finish(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    d: &Operand,
    mut r: Word,
    bits: u32,
) -> Result<(), Diagnostic> {
    if inst.has("ftz") {
        r = flush(e, r, bits)?;
    }
    if inst.has("sat") {
        r = saturate(e, r, bits)?;
    }
    set(e, fx, d, r, K::Float(bits), false)
}

fn src(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, op: &Operand, bits: u32) -> Result<Word, Diagnostic> {
    let v = get(e, fx, op, K::Float(bits), false)?;
    if inst.has("ftz") {
        flush(e, v, bits)
    } else {
        Ok(v)
    }
}

pub(crate) fn binary(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let bits = fbits(t, inst)?;
    let [d, a, b] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects 3 operands", inst.mnemonic())));
    };
    let ft = e.t_float(bits);
    let va = src(e, fx, inst, a, bits)?;
    let vb = src(e, fx, inst, b, bits)?;
    let r = match inst.opcode.as_str() {
        "add" | "sub" | "mul" => {
            nearest_only(inst)?;
            let op = match inst.opcode.as_str() {
                "add" => Op::FAdd,
                "sub" => Op::FSub,
                _ => Op::FMul,
            };
            exact(e, op, ft, va, vb)?
        }
        "div" => {
            if inst.has("approx") || inst.has("full") {
                op2(e, Op::FDiv, ft, va, vb)?
            } else if inst.has("rn") {
                div_rn(e, va, vb, bits)?
            } else {
                return Err(unsupported(inst, "directed rounding is not supported yet"));
            }
        }
        "min" | "max" => {
            if inst.has("NaN") || inst.has("xorsign") {
                return Err(unsupported(inst, ""));
            }
            ext(e, ft, if inst.opcode == "min" { glsl::NMIN } else { glsl::NMAX }, &[va, vb])?
        }
        _ => return Err(unsupported(inst, "")),
    };
    finish(e, fx, inst, d, r, bits)
}

pub(crate) fn div_rn(e: &mut Emitter, a: Word, b: Word, bits: u32) -> Result<Word, Diagnostic> {
    let ft = e.t_float(bits);
    if bits == 32 {
        let dt = e.t_float(64);
        let da = e.b.f_convert(dt, None, a).map_err(internal1)?;
        let db = e.b.f_convert(dt, None, b).map_err(internal1)?;
        let q = exact(e, Op::FDiv, dt, da, db)?;
        return e.b.f_convert(ft, None, q).map_err(internal1);
    }
    let q = exact(e, Op::FDiv, ft, a, b)?;
    // r = a - q*b exactly; q' = q + r/b.
    let nq = e.b.f_negate(ft, None, q).map_err(internal1)?;
    let r = fma_value(e, nq, b, a, 64)?;
    let corr = exact(e, Op::FDiv, ft, r, b)?;
    let q1 = exact(e, Op::FAdd, ft, q, corr)?;
    keep_if_special(e, q, q1, bits)
}

/// Use `refined` unless `base` is zero, infinite or NaN.
fn keep_if_special(e: &mut Emitter, base: Word, refined: Word, bits: u32) -> Result<Word, Diagnostic> {
    let ft = e.t_float(bits);
    let bt = e.t_bool();
    let inf = op1(e, Op::IsInf, bt, base)?;
    let nan = op1(e, Op::IsNan, bt, base)?;
    let z = e.c_float(bits, 0.0);
    let zero = e.b.f_ord_equal(bt, None, base, z).map_err(internal1)?;
    let s = e.b.logical_or(bt, None, inf, nan).map_err(internal1)?;
    let s = e.b.logical_or(bt, None, s, zero).map_err(internal1)?;
    let rnan = op1(e, Op::IsNan, bt, refined)?;
    let s = e.b.logical_or(bt, None, s, rnan).map_err(internal1)?;
    e.b.select(ft, None, s, base, refined).map_err(internal1)
}

fn sqrt_rn(e: &mut Emitter, a: Word, bits: u32) -> Result<Word, Diagnostic> {
    let ft = e.t_float(bits);
    if bits == 32 {
        let dt = e.t_float(64);
        let da = e.b.f_convert(dt, None, a).map_err(internal1)?;
        let s = ext(e, dt, glsl::SQRT, &[da])?;
        return e.b.f_convert(ft, None, s).map_err(internal1);
    }
    let s = ext(e, ft, glsl::SQRT, &[a])?;
    let ns = e.b.f_negate(ft, None, s).map_err(internal1)?;
    let r = fma_value(e, ns, s, a, 64)?;
    let two = e.c_f64(2.0);
    let s2 = exact(e, Op::FMul, ft, s, two)?;
    let corr = exact(e, Op::FDiv, ft, r, s2)?;
    let s1 = exact(e, Op::FAdd, ft, s, corr)?;
    keep_if_special(e, s, s1, bits)
}

pub(crate) fn unary(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let bits = fbits(t, inst)?;
    let [d, a] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects 2 operands", inst.mnemonic())));
    };
    let ft = e.t_float(bits);
    let v = src(e, fx, inst, a, bits)?;
    let approx = inst.has("approx");
    let r = match inst.opcode.as_str() {
        "abs" => ext(e, ft, glsl::FABS, &[v])?,
        "neg" => e.b.f_negate(ft, None, v).map_err(internal1)?,
        "sqrt" if approx => ext(e, ft, glsl::SQRT, &[v])?,
        "sqrt" if inst.has("rn") => sqrt_rn(e, v, bits)?,
        "rcp" if approx => {
            let one = e.c_float(bits, 1.0);
            op2(e, Op::FDiv, ft, one, v)?
        }
        "rcp" if inst.has("rn") => {
            let one = e.c_float(bits, 1.0);
            div_rn(e, one, v, bits)?
        }
        "rsqrt" if approx => ext(e, ft, glsl::INVERSE_SQRT, &[v])?,
        "sin" if approx && bits == 32 => ext(e, ft, glsl::SIN, &[v])?,
        "cos" if approx && bits == 32 => ext(e, ft, glsl::COS, &[v])?,
        "lg2" if approx && bits == 32 => ext(e, ft, glsl::LOG2, &[v])?,
        "ex2" if approx && bits == 32 => ext(e, ft, glsl::EXP2, &[v])?,
        "tanh" if approx && bits == 32 => ext(e, ft, glsl::TANH, &[v])?,
        _ => return Err(unsupported(inst, "")),
    };
    finish(e, fx, inst, d, r, bits)
}

pub(crate) fn fma(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let bits = fbits(t, inst)?;
    nearest_only(inst)?;
    if inst.opcode == "fma" && !inst.has("rn") {
        return Err(Diagnostic::error(inst.opcode_span, "fma requires a rounding modifier (.rn, .rz, .rm, .rp)"));
    }
    let [d, a, b, c] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects 4 operands", inst.mnemonic())));
    };
    let va = src(e, fx, inst, a, bits)?;
    let vb = src(e, fx, inst, b, bits)?;
    let vc = src(e, fx, inst, c, bits)?;
    let r = fma_value(e, va, vb, vc, bits)?;
    finish(e, fx, inst, d, r, bits)
}

/// Correctly rounded `a*b+c`.
pub(crate) fn fma_value(e: &mut Emitter, a: Word, b: Word, c: Word, bits: u32) -> Result<Word, Diagnostic> {
    let ft = e.t_float(bits);
    if !e.opts.emulate_fma {
        return ext(e, ft, glsl::FMA, &[a, b, c]);
    }
    if bits == 32 {
        let dt = e.t_float(64);
        let da = e.b.f_convert(dt, None, a).map_err(internal1)?;
        let db = e.b.f_convert(dt, None, b).map_err(internal1)?;
        let dc = e.b.f_convert(dt, None, c).map_err(internal1)?;
        let p = exact(e, Op::FMul, dt, da, db)?;
        let (s, err) = two_sum(e, p, dc)?;
        let s = round_to_odd(e, s, err)?;
        return e.b.f_convert(ft, None, s).map_err(internal1);
    }
    // f64: Dekker product, then Boldo–Melquiond.
    let (ph, pl) = two_product(e, a, b)?;
    let (uh, ul) = two_sum(e, c, ph)?;
    let (t0, te) = two_sum(e, ul, pl)?;
    let t = round_to_odd(e, t0, te)?;
    let r = exact(e, Op::FAdd, ft, uh, t)?;
    // Fall back where the exact product is not representable as ph + pl.
    let bt = e.t_bool();
    let naive = ext(e, ft, glsl::FMA, &[a, b, c])?;
    let big = e.c_f64(2f64.powi(995));
    let tiny = e.c_f64(2f64.powi(-960));
    let aa = ext(e, ft, glsl::FABS, &[a])?;
    let ab = ext(e, ft, glsl::FABS, &[b])?;
    let ap = ext(e, ft, glsl::FABS, &[ph])?;
    let ok_a = e.b.f_ord_less_than(bt, None, aa, big).map_err(internal1)?;
    let ok_b = e.b.f_ord_less_than(bt, None, ab, big).map_err(internal1)?;
    let ok_p = e.b.f_ord_greater_than(bt, None, ap, tiny).map_err(internal1)?;
    let z = e.c_f64(0.0);
    let p0 = e.b.f_ord_equal(bt, None, ph, z).map_err(internal1)?;
    let ok_p = e.b.logical_or(bt, None, ok_p, p0).map_err(internal1)?;
    let cinf = op1(e, Op::IsInf, bt, c)?;
    let cnan = op1(e, Op::IsNan, bt, c)?;
    let cbad = e.b.logical_or(bt, None, cinf, cnan).map_err(internal1)?;
    let cok = e.b.logical_not(bt, None, cbad).map_err(internal1)?;
    let ok = e.b.logical_and(bt, None, ok_a, ok_b).map_err(internal1)?;
    let ok = e.b.logical_and(bt, None, ok, ok_p).map_err(internal1)?;
    let ok = e.b.logical_and(bt, None, ok, cok).map_err(internal1)?;
    e.b.select(ft, None, ok, r, naive).map_err(internal1)
}

/// Knuth's two-sum: `s = fl(a+b)`, `a + b = s + err` exactly.
fn two_sum(e: &mut Emitter, a: Word, b: Word) -> Result<(Word, Word), Diagnostic> {
    let dt = e.t_float(64);
    let s = exact(e, Op::FAdd, dt, a, b)?;
    let bb = exact(e, Op::FSub, dt, s, a)?;
    let ab = exact(e, Op::FSub, dt, s, bb)?;
    let da = exact(e, Op::FSub, dt, a, ab)?;
    let db = exact(e, Op::FSub, dt, b, bb)?;
    let err = exact(e, Op::FAdd, dt, da, db)?;
    Ok((s, err))
}

/// Dekker's exact product `a*b = ph + pl` (f64).
fn two_product(e: &mut Emitter, a: Word, b: Word) -> Result<(Word, Word), Diagnostic> {
    let dt = e.t_float(64);
    let split = |e: &mut Emitter, x: Word| -> Result<(Word, Word), Diagnostic> {
        let k = e.c_f64(134_217_729.0);
        let c = exact(e, Op::FMul, dt, k, x)?;
        let cx = exact(e, Op::FSub, dt, c, x)?;
        let hi = exact(e, Op::FSub, dt, c, cx)?;
        let lo = exact(e, Op::FSub, dt, x, hi)?;
        Ok((hi, lo))
    };
    let (ah, al) = split(e, a)?;
    let (bh, bl) = split(e, b)?;
    let ph = exact(e, Op::FMul, dt, a, b)?;
    let t1 = exact(e, Op::FMul, dt, ah, bh)?;
    let t1 = exact(e, Op::FSub, dt, t1, ph)?;
    let t2 = exact(e, Op::FMul, dt, ah, bl)?;
    let t1 = exact(e, Op::FAdd, dt, t1, t2)?;
    let t3 = exact(e, Op::FMul, dt, al, bh)?;
    let t1 = exact(e, Op::FAdd, dt, t1, t3)?;
    let t4 = exact(e, Op::FMul, dt, al, bl)?;
    let pl = exact(e, Op::FAdd, dt, t1, t4)?;
    Ok((ph, pl))
}

/// Given `s = fl(x)` and the exact error `err = x - s`, the f64 value of `x`
/// rounded to odd.
fn round_to_odd(e: &mut Emitter, s: Word, err: Word) -> Result<Word, Diagnostic> {
    let dt = e.t_float(64);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let z = e.c_f64(0.0);
    let inexact = e.b.f_ord_not_equal(bt, None, err, z).map_err(internal1)?;
    let sb = e.b.bitcast(u64t, None, s).map_err(internal1)?;
    let one = e.c_int(64, 1);
    let low = e.b.bitwise_and(u64t, None, sb, one).map_err(internal1)?;
    let zero64 = e.c_int(64, 0);
    let even = e.b.i_equal(bt, None, low, zero64).map_err(internal1)?;
    let adjust = e.b.logical_and(bt, None, inexact, even).map_err(internal1)?;
    // Move away from zero when err has the sign of s, towards zero otherwise.
    let s_neg = e.b.f_ord_less_than(bt, None, s, z).map_err(internal1)?;
    let e_neg = e.b.f_ord_less_than(bt, None, err, z).map_err(internal1)?;
    let same = e.b.logical_equal(bt, None, s_neg, e_neg).map_err(internal1)?;
    let up = e.b.i_add(u64t, None, sb, one).map_err(internal1)?;
    let down = e.b.i_sub(u64t, None, sb, one).map_err(internal1)?;
    let moved = e.b.select(u64t, None, same, up, down).map_err(internal1)?;
    let rb = e.b.select(u64t, None, adjust, moved, sb).map_err(internal1)?;
    e.b.bitcast(dt, None, rb).map_err(internal1)
}
