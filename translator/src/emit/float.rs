//! Floating-point instructions in f32 and f64, with the corrections Vulkan
//! needs for PTX's IEEE results: correctly rounded `div`/`sqrt`/`rcp`,
//! directed rounding (`.rz .rm .rp`) for every arithmetic instruction, an
//! exact fused multiply-add on drivers that do not fuse `Fma`, PTX's NaN
//! rules for `min`/`max`, and canonical NaN results in single precision.
//! Half-precision types go to [`super::half`].
//!
//! - f32 `div.rn`, `sqrt.rn`, `rcp.rn` are computed in f64 and rounded once:
//!   a quotient or root of two f32 values can never lie within 2^-49
//!   (relative) of an f32 rounding boundary, while Vulkan's f64 error bound
//!   is below 2^-50, so the double rounding is exact. This holds on every
//!   driver, not only on lavapipe.
//! - f32 in directed modes: `add`/`sub`/`mul`/`fma` compute the exact result
//!   in f64 rounded to odd (f32 products are exact in f64; sums take a
//!   two-sum error term), then [`super::rounding::round_f64`] rounds it to
//!   f32 in the requested mode; `div`/`sqrt`/`rcp` take the correctly
//!   rounded nearest result `q` and the sign of the exact residual
//!   `a - q*b` (`a - q*q`), which f64 holds exactly, and step one ulp where
//!   the mode asks ([`super::rounding::step_toward`]).
//! - f64 in directed modes: the nearest result plus an exact error term
//!   (two-sum; for `mul` and `fma` the emulated fma's, whose scaling keeps
//!   it exact for huge factors and tiny products; for `div` the residual
//!   `a - q*b` from an exact fma, taken at 2^512 times its size for
//!   dividends below 2^-900 so that it cannot round to zero) and the same
//!   one-ulp step.
//! - f32 `fma` (emulated): the f64 product of two f32 values is exact; the
//!   sum is rounded to odd in f64 (two-sum error term), then rounded to f32:
//!   round-to-odd at 53 bits followed by rounding to 24 bits is correctly
//!   rounded (Boldo and Melquiond, "Emulation of FMA and correctly rounded
//!   sums: proved algorithms using rounding to odd", 2008).
//! - f64 `fma` (emulated): Dekker's exact product, two-sum with the addend,
//!   a round-to-odd sum of the low parts, and one final rounding (same
//!   paper). Inputs where the exact product would overflow or underflow are
//!   scaled by powers of two first (see [`fma64_parts`]); zero products and
//!   non-finite operands take `fl(a*b) + c`.
//! - f64 `div.rn`/`sqrt.rn` take one Newton correction with an exact
//!   residual from the fused multiply-add.
//! - NaN: every f32 arithmetic result that is NaN is `0x7fffffff`, the only
//!   NaN NVIDIA GPUs produce in single precision. f64 NaN results are left
//!   as the driver makes them (PTX does not define their payload).
//!   `min`/`max` return the non-NaN operand, a canonical NaN when both are
//!   NaN (any NaN with `.NaN`), and order -0 below +0.

use super::func::{internal1, Fx};
use super::inst::{ext, glsl, op1, op2};
use super::rounding::{self, all_finite, and, cmp, not, o, or, sel, step_toward, Rnd, R};
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, Operand, ScalarType};
use crate::diag::Diagnostic;
use rspirv::spirv::{self, Op, Word};

pub(crate) fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    let extra = if why.is_empty() { String::new() } else { format!(" ({why})") };
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}'{extra}", inst.mnemonic()))
}

/// Whether `t` is a half-precision type (scalar or packed).
pub(crate) fn is_half(t: ScalarType) -> bool {
    matches!(t, ScalarType::F16 | ScalarType::Bf16 | ScalarType::F16x2 | ScalarType::Bf16x2)
}

fn fbits(t: ScalarType, inst: &Instruction) -> Result<u32, Diagnostic> {
    match t {
        ScalarType::F32 => Ok(32),
        ScalarType::F64 => Ok(64),
        _ => Err(unsupported(inst, "not a floating-point type")),
    }
}

/// An arithmetic instruction that must not be contracted with its neighbours.
pub(crate) fn exact(e: &mut Emitter, op: Op, t: Word, a: Word, b: Word) -> Result<Word, Diagnostic> {
    let r = op2(e, op, t, a, b)?;
    e.b.decorate(r, spirv::Decoration::NoContraction, []);
    Ok(r)
}

/// `x` (f64) rounded to an integral value by the GLSL.std.450 instruction
/// `mode` (`RoundEven`, `Trunc`, `Floor` or `Ceil`). With
/// [`crate::Options::exact_f64_rounding`], `RoundEven` and `Trunc` are
/// built from `Floor` and `Ceil` (see there): `x - floor(x)` is exact, a
/// tie goes to the even one of `floor(x)` and `floor(x) + 1`, and the
/// result takes the sign of `x` (so `-0.3` gives `-0.0`). NaN and the
/// infinities pass through `Floor`.
pub(crate) fn integral_f64(e: &mut Emitter, x: Word, mode: u32) -> R {
    let dt = e.t_float(64);
    if !e.opts.exact_f64_rounding || (mode != glsl::ROUND_EVEN && mode != glsl::TRUNC) {
        return ext(e, dt, mode, &[x]);
    }
    let fl = ext(e, dt, glsl::FLOOR, &[x])?;
    let r = if mode == glsl::TRUNC {
        let ce = ext(e, dt, glsl::CEIL, &[x])?;
        let zero = e.c_f64(0.0);
        let neg = cmp(e, Op::FOrdLessThan, x, zero)?;
        sel(e, dt, neg, ce, fl)?
    } else {
        let d = exact(e, Op::FSub, dt, x, fl)?;
        let half = e.c_f64(0.5);
        let up = cmp(e, Op::FOrdGreaterThan, d, half)?;
        let tie = cmp(e, Op::FOrdEqual, d, half)?;
        let h = exact(e, Op::FMul, dt, fl, half)?;
        let hf = ext(e, dt, glsl::FLOOR, &[h])?;
        let odd = cmp(e, Op::FOrdNotEqual, hf, h)?;
        let bt = e.t_bool();
        let tie_odd = o(e, Op::LogicalAnd, bt, &[tie, odd])?;
        let inc = o(e, Op::LogicalOr, bt, &[up, tie_odd])?;
        let one = e.c_f64(1.0);
        let next = exact(e, Op::FAdd, dt, fl, one)?;
        sel(e, dt, inc, next, fl)?
    };
    // The sign of x (the result is 0 or has x's sign).
    with_sign(e, r, x, 64)
}

/// Flush a subnormal f32 or f64 to a zero of the same sign (`.ftz`).
pub(crate) fn flush(e: &mut Emitter, v: Word, bits: u32) -> Result<Word, Diagnostic> {
    let ft = e.t_float(bits);
    let it = e.t_int(bits);
    let a = ext(e, ft, glsl::FABS, &[v])?;
    let min = if bits == 64 { e.c_f64(f64::MIN_POSITIVE) } else { e.c_f32(f32::MIN_POSITIVE) };
    let small = cmp(e, Op::FOrdLessThan, a, min)?;
    let bitsv = o(e, Op::Bitcast, it, &[v])?;
    let sign = e.c_int(bits, 1u64 << (bits - 1));
    let s = o(e, Op::BitwiseAnd, it, &[bitsv, sign])?;
    let z = o(e, Op::Bitcast, ft, &[s])?;
    sel(e, ft, small, z, v)
}

/// Replace any f32 NaN with the canonical `0x7fffffff`; f64 values pass.
pub(crate) fn canon_nan(e: &mut Emitter, v: Word, bits: u32) -> R {
    if bits != 32 {
        return Ok(v);
    }
    let ft = e.t_float(32);
    let bt = e.t_bool();
    let nan = o(e, Op::IsNan, bt, &[v])?;
    let t = e.t_float(32);
    let c = e.constant_bits(t, 32, 0x7fff_ffff);
    sel(e, ft, nan, c, v)
}

/// Clamp to [0, 1], NaN to 0 (`.sat`).
pub(crate) fn saturate(e: &mut Emitter, v: Word, bits: u32) -> Result<Word, Diagnostic> {
    let ft = e.t_float(bits);
    let bt = e.t_bool();
    let z = e.c_float(bits, 0.0);
    let one = e.c_float(bits, 1.0);
    let c = ext(e, ft, glsl::FCLAMP, &[v, z, one])?;
    let nan = op1(e, Op::IsNan, bt, v)?;
    e.b.select(ft, None, nan, z, c).map_err(internal1)
}

/// Store an arithmetic result: `.ftz`, `.sat`, canonical NaN.
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
    r = canon_nan(e, r, bits)?;
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

/// The arithmetic of the exact paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ar {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a * b + c`
    Fma,
}

impl Ar {
    /// The arithmetic of an opcode (`add`, `sub`, `mul`, `fma`/`mad`).
    pub fn of(opcode: &str) -> Option<Ar> {
        Some(match opcode {
            "add" => Ar::Add,
            "sub" => Ar::Sub,
            "mul" => Ar::Mul,
            "fma" | "mad" => Ar::Fma,
            _ => return None,
        })
    }
}

/// `a op b` (`a*b + c` for [`Ar::Fma`]) on f64 values that hold f32, f16 or
/// bf16 values exactly, rounded to odd in f64: the input of
/// [`rounding::round_f64`] for any narrower format and mode. An exact zero
/// sum gets IEEE's sign for the mode (-0 in `.rm` unless both addends are +0).
pub(crate) fn ro_f64(e: &mut Emitter, ar: Ar, a: Word, b: Word, c: Word, rnd: Rnd) -> R {
    let dt = e.t_float(64);
    let (x, y) = match ar {
        Ar::Mul => return exact(e, Op::FMul, dt, a, b),
        Ar::Add => (a, b),
        Ar::Sub => (a, o(e, Op::FNegate, dt, &[b])?),
        Ar::Fma => (exact(e, Op::FMul, dt, a, b)?, c),
    };
    let (s, err) = two_sum(e, x, y)?;
    let r = round_to_odd(e, s, err)?;
    if rnd != Rnd::Rm {
        return Ok(r);
    }
    minus_zero_sum(e, r, x, y)
}

/// In `.rm`, an exact zero sum `x + y` is -0 unless both are +0.
fn minus_zero_sum(e: &mut Emitter, r: Word, x: Word, y: Word) -> R {
    let dt = e.t_float(64);
    let u64t = e.t_int(64);
    let z = e.c_f64(0.0);
    let is0 = cmp(e, Op::FOrdEqual, r, z)?;
    let xb = o(e, Op::Bitcast, u64t, &[x])?;
    let yb = o(e, Op::Bitcast, u64t, &[y])?;
    let both = o(e, Op::BitwiseOr, u64t, &[xb, yb])?;
    let z64 = e.c_int(64, 0);
    let pos = cmp(e, Op::IEqual, both, z64)?;
    let npos = not(e, pos)?;
    let m = and(e, is0, npos)?;
    let mz = e.c_f64(-0.0);
    sel(e, dt, m, mz, r)
}

/// f32 arithmetic in any rounding mode through the exact f64 path.
fn arith32(e: &mut Emitter, ar: Ar, a: Word, b: Word, c: Word, rnd: Rnd) -> R {
    let dt = e.t_float(64);
    let da = o(e, Op::FConvert, dt, &[a])?;
    let db = o(e, Op::FConvert, dt, &[b])?;
    let dc = o(e, Op::FConvert, dt, &[c])?;
    let r = ro_f64(e, ar, da, db, dc, rnd)?;
    rounding::f64_to_f32(e, r, rnd)
}

/// f64 arithmetic in a directed rounding mode: nearest result, exact error, one-ulp step.
pub(crate) fn arith64_directed(e: &mut Emitter, ar: Ar, a: Word, b: Word, c: Word, rnd: Rnd) -> R {
    let dt = e.t_float(64);
    let (r, err, finite) = match ar {
        Ar::Add | Ar::Sub => {
            let y = if ar == Ar::Sub { o(e, Op::FNegate, dt, &[b])? } else { b };
            let (s, err) = two_sum(e, a, y)?;
            let s = if rnd == Rnd::Rm { minus_zero_sum(e, s, a, y)? } else { s };
            (s, err, all_finite(e, &[a, b])?)
        }
        Ar::Mul => {
            // The product plus -0 (which keeps a zero product's sign):
            // the fma's scaling makes the error exact also where Dekker's
            // product alone is not (huge factors, products near or below
            // the subnormal range).
            let mz = e.c_f64(-0.0);
            let (r, dir) = fma64_parts(e, a, b, mz)?;
            (r, dir, all_finite(e, &[a, b])?)
        }
        Ar::Fma => {
            let (r, dir) = fma64_parts(e, a, b, c)?;
            let r = if rnd == Rnd::Rm {
                // Only an exact zero takes -0 (a tiny nonzero result rounded
                // to zero keeps its sign).
                let p = exact(e, Op::FMul, dt, a, b)?;
                let mz = minus_zero_sum(e, r, p, c)?;
                let z = e.c_f64(0.0);
                let exact0 = cmp(e, Op::FOrdEqual, dir, z)?;
                sel(e, dt, exact0, mz, r)?
            } else {
                r
            };
            (r, dir, all_finite(e, &[a, b, c])?)
        }
    };
    step_toward(e, r, err, 64, rnd, finite)
}

/// A float of the sign of `res * b` (for the residual sign of a quotient), 0 when `res` is 0.
fn sign_times(e: &mut Emitter, res: Word, b: Word, bits: u32) -> R {
    let ft = e.t_float(bits);
    let z = e.c_float(bits, 0.0);
    let rn = cmp(e, Op::FOrdLessThan, res, z)?;
    let it = e.t_int(bits);
    let bb = o(e, Op::Bitcast, it, &[b])?;
    let sign = e.c_int(bits, 1u64 << (bits - 1));
    let bs = o(e, Op::BitwiseAnd, it, &[bb, sign])?;
    let zi = e.c_int(bits, 0);
    let bn = cmp(e, Op::INotEqual, bs, zi)?;
    let negv = cmp(e, Op::LogicalNotEqual, rn, bn)?;
    let one = e.c_float(bits, 1.0);
    let m1 = e.c_float(bits, -1.0);
    let s = sel(e, ft, negv, m1, one)?;
    let r0 = cmp(e, Op::FOrdEqual, res, z)?;
    let bt = e.t_bool();
    let rnan = o(e, Op::IsNan, bt, &[res])?;
    let none = or(e, r0, rnan)?;
    sel(e, ft, none, z, s)
}

/// `a / b` in any rounding mode.
pub(crate) fn div_rnd(e: &mut Emitter, a: Word, b: Word, bits: u32, rnd: Rnd) -> R {
    let q = div_rn(e, a, b, bits)?;
    if matches!(rnd, Rnd::Rn | Rnd::Rna) {
        return Ok(q);
    }
    let ft = e.t_float(bits);
    let res = if bits == 32 {
        // a - q*b is exact in f64.
        let dt = e.t_float(64);
        let da = o(e, Op::FConvert, dt, &[a])?;
        let db = o(e, Op::FConvert, dt, &[b])?;
        let dq = o(e, Op::FConvert, dt, &[q])?;
        let p = exact(e, Op::FMul, dt, dq, db)?;
        let r = exact(e, Op::FSub, dt, da, p)?;
        let s = sign_times(e, r, db, 64)?;
        o(e, Op::FConvert, ft, &[s])?
    } else {
        // For a dividend below 2^-900 the residual is taken at 2^512 times
        // its size (q and a scaled exactly): at its own size it can be
        // below half the least subnormal and round to zero, which would
        // call an inexact quotient exact.
        let aa = ext(e, ft, glsl::FABS, &[a])?;
        let small = e.c_f64(2f64.powi(-900));
        let is_small = cmp(e, Op::FOrdLessThan, aa, small)?;
        let one = e.c_f64(1.0);
        let up = e.c_f64(2f64.powi(512));
        let s = sel(e, ft, is_small, up, one)?;
        let qs = exact(e, Op::FMul, ft, q, s)?;
        let a_s = exact(e, Op::FMul, ft, a, s)?;
        let nq = o(e, Op::FNegate, ft, &[qs])?;
        let r = fma_exact64(e, nq, b, a_s)?;
        sign_times(e, r, b, 64)?
    };
    let fin = all_finite(e, &[a, b])?;
    let z = e.c_float(bits, 0.0);
    let b0 = cmp(e, Op::FOrdEqual, b, z)?;
    let bn0 = not(e, b0)?;
    let fin = and(e, fin, bn0)?;
    step_toward(e, q, res, bits, rnd, fin)
}

/// `sqrt(a)` in any rounding mode.
fn sqrt_rnd(e: &mut Emitter, a: Word, bits: u32, rnd: Rnd) -> R {
    if bits == 64 && e.opts.correct_f64_div_sqrt && matches!(rnd, Rnd::Rn | Rnd::Rna) {
        return sqrt_rn(e, a, 64);
    }
    if bits == 64 {
        return scaled_sqrt64(e, a, rnd);
    }
    sqrt_rnd_core(e, a, bits, rnd)
}

/// f64 square roots of very small or very large operands: scale by an even
/// power of two into the middle of the range (exact), take the root there,
/// scale back (exact: square roots are never subnormal). Keeps every
/// residual of the correction steps far from underflow and overflow.
fn scaled_sqrt64(e: &mut Emitter, a: Word, rnd: Rnd) -> R {
    let ft = e.t_float(64);
    let lo = e.c_f64(2f64.powi(-900));
    let hi = e.c_f64(2f64.powi(900));
    let small = cmp(e, Op::FOrdLessThan, a, lo)?;
    let big = cmp(e, Op::FOrdGreaterThan, a, hi)?;
    let one = e.c_f64(1.0);
    let up_in = e.c_f64(2f64.powi(1000));
    let down_in = e.c_f64(2f64.powi(-1000));
    let up_out = e.c_f64(2f64.powi(500));
    let down_out = e.c_f64(2f64.powi(-500));
    let s_in = sel(e, ft, small, up_in, one)?;
    let s_in = sel(e, ft, big, down_in, s_in)?;
    let s_out = sel(e, ft, small, down_out, one)?;
    let s_out = sel(e, ft, big, up_out, s_out)?;
    let a2 = exact(e, Op::FMul, ft, a, s_in)?;
    let q = sqrt_rnd_core(e, a2, 64, rnd)?;
    exact(e, Op::FMul, ft, q, s_out)
}

fn sqrt_rnd_core(e: &mut Emitter, a: Word, bits: u32, rnd: Rnd) -> R {
    let q = sqrt_rn(e, a, bits)?;
    if matches!(rnd, Rnd::Rn | Rnd::Rna) {
        return Ok(q);
    }
    let ft = e.t_float(bits);
    let res = if bits == 32 {
        let dt = e.t_float(64);
        let da = o(e, Op::FConvert, dt, &[a])?;
        let dq = o(e, Op::FConvert, dt, &[q])?;
        let p = exact(e, Op::FMul, dt, dq, dq)?;
        let r = exact(e, Op::FSub, dt, da, p)?;
        let one = e.c_f64(1.0);
        let sg = sign_times(e, r, one, 64)?;
        o(e, Op::FConvert, ft, &[sg])?
    } else {
        let nq = o(e, Op::FNegate, ft, &[q])?;
        fma_exact64(e, nq, q, a)?
    };
    let fin = all_finite(e, &[a])?;
    step_toward(e, q, res, bits, rnd, fin)
}

/// f64 `a*b + c` correctly rounded whatever the driver's `Fma` does.
fn fma_exact64(e: &mut Emitter, a: Word, b: Word, c: Word) -> R {
    if e.opts.emulate_fma {
        fma_value(e, a, b, c, 64)
    } else {
        let ft = e.t_float(64);
        ext(e, ft, glsl::FMA, &[a, b, c])
    }
}

/// PTX `min`/`max` on f32/f64 values: the non-NaN operand when one is NaN,
/// a canonical NaN when both are (or when either is, with `nan_wins`),
/// -0 ordered below +0.
pub(crate) fn minmax(e: &mut Emitter, a: Word, b: Word, bits: u32, is_max: bool, nan_wins: bool) -> R {
    let ft = e.t_float(bits);
    let it = e.t_int(bits);
    let bt = e.t_bool();
    let an = o(e, Op::IsNan, bt, &[a])?;
    let bn = o(e, Op::IsNan, bt, &[b])?;
    let lt = cmp(e, if is_max { Op::FOrdGreaterThan } else { Op::FOrdLessThan }, a, b)?;
    let r = sel(e, ft, lt, a, b)?;
    // Zeros of different signs compare equal; combine their bits.
    let ai = o(e, Op::Bitcast, it, &[a])?;
    let bi = o(e, Op::Bitcast, it, &[b])?;
    let z = e.c_float(bits, 0.0);
    let a0 = cmp(e, Op::FOrdEqual, a, z)?;
    let b0 = cmp(e, Op::FOrdEqual, b, z)?;
    let both0 = and(e, a0, b0)?;
    let zi = o(e, if is_max { Op::BitwiseAnd } else { Op::BitwiseOr }, it, &[ai, bi])?;
    let zf = o(e, Op::Bitcast, ft, &[zi])?;
    let r = sel(e, ft, both0, zf, r)?;
    let canon = if bits == 64 { 0x7fff_ffff_ffff_ffff } else { 0x7fff_ffff };
    let nan = e.constant_bits(ft, bits, canon);
    if nan_wins {
        let any = or(e, an, bn)?;
        return sel(e, ft, any, nan, r);
    }
    let r = sel(e, ft, an, b, r)?;
    let r = sel(e, ft, bn, a, r)?;
    let both = and(e, an, bn)?;
    sel(e, ft, both, nan, r)
}

/// `|x|` with the sign bit of `s` (`bits` wide floats).
pub(crate) fn with_sign(e: &mut Emitter, x: Word, s: Word, bits: u32) -> R {
    let ft = e.t_float(bits);
    let it = e.t_int(bits);
    let xi = o(e, Op::Bitcast, it, &[x])?;
    let si = o(e, Op::Bitcast, it, &[s])?;
    let sign = e.c_int(bits, 1u64 << (bits - 1));
    let mag = e.c_int(bits, (1u64 << (bits - 1)) - 1);
    let xm = o(e, Op::BitwiseAnd, it, &[xi, mag])?;
    let ss = o(e, Op::BitwiseAnd, it, &[si, sign])?;
    let r = o(e, Op::BitwiseOr, it, &[xm, ss])?;
    o(e, Op::Bitcast, ft, &[r])
}

pub(crate) fn binary(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    if is_half(t) {
        return super::half::binary(e, fx, inst, t);
    }
    if t == ScalarType::F32x2 {
        return pair(e, fx, inst);
    }
    let bits = fbits(t, inst)?;
    let [d, a, b] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects 3 operands", inst.mnemonic())));
    };
    let ft = e.t_float(bits);
    let va = src(e, fx, inst, a, bits)?;
    let vb = src(e, fx, inst, b, bits)?;
    let rnd = Rnd::of(inst);
    let r = match inst.opcode.as_str() {
        op @ ("add" | "sub" | "mul") => {
            let ar = Ar::of(op).ok_or_else(|| unsupported(inst, ""))?;
            match rnd {
                Some(Rnd::Rna) => return Err(unsupported(inst, ".rna is only for cvt")),
                r => rounded(e, ar, va, vb, va, bits, r.unwrap_or(Rnd::Rn))?,
            }
        }
        "div" => {
            if inst.has("approx") {
                if bits != 32 {
                    return Err(unsupported(inst, ""));
                }
                // d = a * (1/b) with the reciprocal flushed, as PTX documents it.
                let one = e.c_float(32, 1.0);
                let r = div_rn(e, one, vb, 32)?;
                let r = flush(e, r, 32)?;
                exact(e, Op::FMul, ft, va, r)?
            } else if inst.has("full") {
                // Within div.full's 2 ulp: the correctly rounded quotient.
                div_rn(e, va, vb, bits)?
            } else {
                match rnd {
                    Some(r @ (Rnd::Rn | Rnd::Rz | Rnd::Rm | Rnd::Rp)) => div_rnd(e, va, vb, bits, r)?,
                    _ => return Err(unsupported(inst, "div.f32/f64 needs .approx, .full or a rounding modifier")),
                }
            }
        }
        "min" | "max" => {
            let is_max = inst.opcode == "max";
            let r = if inst.has("xorsign") {
                let aa = ext(e, ft, glsl::FABS, &[va])?;
                let ab = ext(e, ft, glsl::FABS, &[vb])?;
                let m = minmax(e, aa, ab, bits, is_max, inst.has("NaN"))?;
                let it = e.t_int(bits);
                let ai = o(e, Op::Bitcast, it, &[va])?;
                let bi = o(e, Op::Bitcast, it, &[vb])?;
                let x = o(e, Op::BitwiseXor, it, &[ai, bi])?;
                let xf = o(e, Op::Bitcast, ft, &[x])?;
                let signed = with_sign(e, m, xf, bits)?;
                let bt = e.t_bool();
                let nan = o(e, Op::IsNan, bt, &[m])?;
                sel(e, ft, nan, m, signed)?
            } else {
                minmax(e, va, vb, bits, is_max, inst.has("NaN"))?
            };
            let r = if inst.has("ftz") { flush(e, r, bits)? } else { r };
            return set(e, fx, d, r, K::Float(bits), false);
        }
        "copysign" => {
            let r = with_sign(e, vb, va, bits)?;
            return set(e, fx, d, r, K::Float(bits), false);
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
        return rounding::f64_to_f32(e, q, Rnd::Rn);
    }
    if e.opts.correct_f64_div_sqrt {
        return exact(e, Op::FDiv, ft, a, b);
    }
    // Operands far from 1 are scaled by powers of two (exact) so that the
    // correction's residual neither overflows nor underflows; the quotient
    // is scaled back, exactly unless it is subnormal.
    let (a, b, back) = div_scale(e, a, b)?;
    // A quotient below 2^-960 is computed 2^200 higher (the scaled dividend
    // stays below 2^140) so that the correction works on normal numbers.
    let q0 = exact(e, Op::FDiv, ft, a, b)?;
    let aq0 = ext(e, ft, glsl::FABS, &[q0])?;
    let lim = e.c_f64(2f64.powi(-960));
    let low = cmp(e, Op::FOrdLessThan, aq0, lim)?;
    let bfin = all_finite(e, &[b])?;
    let low = and(e, low, bfin)?;
    let one = e.c_f64(1.0);
    let s200 = e.c_f64(2f64.powi(200));
    let t = sel(e, ft, low, s200, one)?;
    let a = exact(e, Op::FMul, ft, a, t)?;
    let back = exact(e, Op::FDiv, ft, back, t)?;
    let q = div_rn_core(e, a, b)?;
    let y = exact(e, Op::FMul, ft, q, back)?;
    // A subnormal quotient rounds a second time when scaled back; that is
    // wrong only when q sits exactly on a midpoint of the subnormal grid,
    // and then the residual's sign tells which neighbour is right.
    let up = exact(e, Op::FDiv, ft, one, back)?;
    let yb = exact(e, Op::FMul, ft, y, up)?;
    let diff = exact(e, Op::FSub, ft, q, yb)?;
    // Half the subnormal spacing at q's scale: 2^-1074 * up / 2.
    let tiny = e.c_f64(f64::from_bits(1));
    let h = e.c_f64(0.5);
    let half = exact(e, Op::FMul, ft, tiny, up)?;
    let half = exact(e, Op::FMul, ft, half, h)?;
    let adiff = ext(e, ft, glsl::FABS, &[diff])?;
    let z = e.c_f64(0.0);
    let tie = cmp(e, Op::FOrdEqual, adiff, half)?;
    let dnz = cmp(e, Op::FOrdNotEqual, diff, z)?;
    let tie = and(e, tie, dnz)?;
    let nq = o(e, Op::FNegate, ft, &[q])?;
    let r = fma_exact64(e, nq, b, a)?;
    let rpos = cmp(e, Op::FOrdGreaterThan, r, z)?;
    let rneg = cmp(e, Op::FOrdLessThan, r, z)?;
    let bpos = cmp(e, Op::FOrdGreaterThan, b, z)?;
    // The exact quotient is above q when r and b have the same sign.
    let above = cmp(e, Op::LogicalEqual, rpos, bpos)?;
    let rnz = or(e, rpos, rneg)?;
    let dpos = cmp(e, Op::FOrdGreaterThan, diff, z)?;
    let same = cmp(e, Op::LogicalEqual, above, dpos)?;
    let rs = and(e, rnz, same)?;
    let flip = and(e, tie, rs)?;
    let far = exact(e, Op::FAdd, ft, q, diff)?;
    let far = exact(e, Op::FMul, ft, far, back)?;
    sel(e, ft, flip, far, y)
}

/// Scale f64 division operands into [2^-900, 2^900] (zeros, infinities and
/// NaN pass); returns the scaled operands and the factor to apply to the quotient.
fn div_scale(e: &mut Emitter, a: Word, b: Word) -> Result<(Word, Word, Word), Diagnostic> {
    let ft = e.t_float(64);
    let one = e.c_f64(1.0);
    let mut scaled = Vec::new();
    let mut factors = Vec::new();
    for x in [a, b] {
        let ax = ext(e, ft, glsl::FABS, &[x])?;
        let big = e.c_f64(2f64.powi(900));
        let small = e.c_f64(2f64.powi(-900));
        let is_big = cmp(e, Op::FOrdGreaterThan, ax, big)?;
        let is_small = cmp(e, Op::FOrdLessThan, ax, small)?;
        let down = e.c_f64(2f64.powi(-200));
        let up = e.c_f64(2f64.powi(200));
        let f = sel(e, ft, is_big, down, one)?;
        let f = sel(e, ft, is_small, up, f)?;
        scaled.push(exact(e, Op::FMul, ft, x, f)?);
        factors.push(f);
    }
    // a*fa / (b*fb) = q * fa/fb: multiply the quotient by fb/fa (exact powers of two).
    let back = exact(e, Op::FDiv, ft, factors[1], factors[0])?;
    Ok((scaled[0], scaled[1], back))
}

/// Correctly rounded f64 `a / b` for operands in range (see [`div_scale`]).
fn div_rn_core(e: &mut Emitter, a: Word, b: Word) -> R {
    let ft = e.t_float(64);
    let q = exact(e, Op::FDiv, ft, a, b)?;
    // r = a - q*b exactly; q' = q + r/b.
    let nq = e.b.f_negate(ft, None, q).map_err(internal1)?;
    let r = fma_exact64(e, nq, b, a)?;
    let corr = exact(e, Op::FDiv, ft, r, b)?;
    let q1 = exact(e, Op::FAdd, ft, q, corr)?;
    let q = keep_if_special(e, q, q1, 64)?;
    div_fixup64(e, a, b, q)
}

/// Make an f64 quotient `q` (within one ulp of `a / b`) correctly rounded:
/// with the exact residual `r = a - q*b`, the true quotient lies above the
/// midpoint `q + u/2` exactly when `r - b*u/2` has the sign of `b` (and
/// below `q - d/2` when `r + b*d/2` has the opposite sign); a quotient of
/// two doubles is never a midpoint, and a correctly rounded fma keeps the
/// sign of these sums.
fn div_fixup64(e: &mut Emitter, a: Word, b: Word, q: Word) -> R {
    let ft = e.t_float(64);
    let up = rounding::next_float(e, q, 64, true)?;
    let down = rounding::next_float(e, q, 64, false)?;
    let half = e.c_f64(0.5);
    let u = exact(e, Op::FSub, ft, up, q)?;
    let u = exact(e, Op::FMul, ft, u, half)?;
    let d = exact(e, Op::FSub, ft, q, down)?;
    let d = exact(e, Op::FMul, ft, d, half)?;
    let nq = o(e, Op::FNegate, ft, &[q])?;
    let r = fma_exact64(e, nq, b, a)?;
    let nb = o(e, Op::FNegate, ft, &[b])?;
    let wu = fma_exact64(e, nb, u, r)?;
    let wd = fma_exact64(e, b, d, r)?;
    let z = e.c_f64(0.0);
    let bpos = cmp(e, Op::FOrdGreaterThan, b, z)?;
    let wu_pos = cmp(e, Op::FOrdGreaterThan, wu, z)?;
    let wu_neg = cmp(e, Op::FOrdLessThan, wu, z)?;
    let wd_pos = cmp(e, Op::FOrdGreaterThan, wd, z)?;
    let wd_neg = cmp(e, Op::FOrdLessThan, wd, z)?;
    let bt = e.t_bool();
    let go_up = o(e, Op::Select, bt, &[bpos, wu_pos, wu_neg])?;
    let go_down = o(e, Op::Select, bt, &[bpos, wd_neg, wd_pos])?;
    let fin = all_finite(e, &[a, b, q])?;
    let qz = cmp(e, Op::FOrdEqual, q, z)?;
    let nqz = not(e, qz)?;
    let ok = and(e, fin, nqz)?;
    let go_up = and(e, go_up, ok)?;
    let go_down = and(e, go_down, ok)?;
    let q = sel(e, ft, go_up, up, q)?;
    sel(e, ft, go_down, down, q)
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
        return rounding::f64_to_f32(e, s, Rnd::Rn);
    }
    let s = ext(e, ft, glsl::SQRT, &[a])?;
    if e.opts.correct_f64_div_sqrt {
        // As the driver computes it: no rewrite may fold it with its
        // neighbours (a compiler could otherwise turn a select around it
        // into a square root of a maximum, or a reciprocal of it into an
        // inverse square root).
        e.b.decorate(s, spirv::Decoration::NoContraction, []);
        return Ok(s);
    }
    let ns = e.b.f_negate(ft, None, s).map_err(internal1)?;
    let r = fma_exact64(e, ns, s, a)?;
    let two = e.c_f64(2.0);
    let s2 = exact(e, Op::FMul, ft, s, two)?;
    let corr = exact(e, Op::FDiv, ft, r, s2)?;
    let s1 = exact(e, Op::FAdd, ft, s, corr)?;
    let q = keep_if_special(e, s, s1, bits)?;
    sqrt_fixup64(e, a, q)
}

/// Make an f64 square root `q` (within one ulp) correctly rounded.
///
/// With `r = a - q^2` (exact, by fma) and `u`/`d` the gaps to the
/// neighbours above/below `q`, every term of `r - q*u` and `r + q*d` is a
/// multiple of `d^2`, so they are exact and compare with the midpoint
/// residual (`±u^2/4`, `±d^2/4`) by sign alone: round up when
/// `r - q*u > 0`, down when `r + q*d <= 0` (with `r < 0`) (a square root is never a
/// midpoint). Skipped where `u^2` would underflow (`a` below 2^-960; callers
/// scale operands into range, see [`scaled_sqrt64`]) and
/// for zeros, infinities and NaN.
fn sqrt_fixup64(e: &mut Emitter, a: Word, q: Word) -> R {
    let ft = e.t_float(64);
    let up = rounding::next_float(e, q, 64, true)?;
    let down = rounding::next_float(e, q, 64, false)?;
    let u = exact(e, Op::FSub, ft, up, q)?;
    let d = exact(e, Op::FSub, ft, q, down)?;
    let nq = o(e, Op::FNegate, ft, &[q])?;
    let r = fma_exact64(e, nq, q, a)?;
    let ru = fma_exact64(e, nq, u, r)?;
    let rd = fma_exact64(e, q, d, r)?;
    let z = e.c_f64(0.0);
    let go_up = cmp(e, Op::FOrdGreaterThan, ru, z)?;
    let go_down = cmp(e, Op::FOrdLessThanEqual, rd, z)?;
    let rneg = cmp(e, Op::FOrdLessThan, r, z)?;
    let go_down = and(e, go_down, rneg)?;
    let lo = e.c_f64(2f64.powi(-960));
    let hi = e.c_f64(f64::MAX);
    let ok_lo = cmp(e, Op::FOrdGreaterThan, a, lo)?;
    let ok_hi = cmp(e, Op::FOrdLessThanEqual, a, hi)?;
    let ok = and(e, ok_lo, ok_hi)?;
    let go_up = and(e, go_up, ok)?;
    let go_down = and(e, go_down, ok)?;
    let q = sel(e, ft, go_up, up, q)?;
    sel(e, ft, go_down, down, q)
}

/// `tanh(x)` in f32 within `tanh.approx.f32`'s relative error (2^-11): an
/// odd polynomial near zero, `1 - 2/(e^2|x| + 1)` elsewhere.
pub(crate) fn tanh32(e: &mut Emitter, x: Word) -> R {
    let ft = e.t_float(32);
    let ax = ext(e, ft, glsl::FABS, &[x])?;
    let x2 = o(e, Op::FMul, ft, &[x, x])?;
    // x + x^3 (-1/3 + x^2 (2/15 - 17/315 x^2))
    let c3 = e.c_f32(-17.0 / 315.0);
    let c2 = e.c_f32(2.0 / 15.0);
    let c1 = e.c_f32(-1.0 / 3.0);
    let p = o(e, Op::FMul, ft, &[x2, c3])?;
    let p = o(e, Op::FAdd, ft, &[p, c2])?;
    let p = o(e, Op::FMul, ft, &[p, x2])?;
    let p = o(e, Op::FAdd, ft, &[p, c1])?;
    let p = o(e, Op::FMul, ft, &[p, x2])?;
    let p = o(e, Op::FMul, ft, &[p, x])?;
    let small = o(e, Op::FAdd, ft, &[x, p])?;
    let two = e.c_f32(2.0);
    let t2 = o(e, Op::FMul, ft, &[ax, two])?;
    // exp(2|x|) = exp2(2|x| * log2(e))
    let l2e = e.c_f32(std::f32::consts::LOG2_E);
    let t2e = o(e, Op::FMul, ft, &[t2, l2e])?;
    let ex = ext(e, ft, glsl::EXP2, &[t2e])?;
    let one = e.c_f32(1.0);
    let den = o(e, Op::FAdd, ft, &[ex, one])?;
    let q = o(e, Op::FDiv, ft, &[two, den])?;
    let big = o(e, Op::FSub, ft, &[one, q])?;
    let big = with_sign(e, big, x, 32)?;
    let lim = e.c_f32(0.25);
    let is_small = cmp(e, Op::FOrdLessThan, ax, lim)?;
    let r = sel(e, ft, is_small, small, big)?;
    // NaN stays NaN.
    let bt = e.t_bool();
    let nan = o(e, Op::IsNan, bt, &[x])?;
    sel(e, ft, nan, x, r)
}

/// `2^x` for f32 `x`, computed in f64 (a degree-12 polynomial of
/// `2^f`, `|f| <= 1/2`, then an exact power-of-two scaling) and rounded
/// once: within 1 ulp, inside `ex2.approx.f32`'s 2 ulp on every driver
/// (Vulkan's own `Exp2` allows `3 + 2|x|` ulp).
pub(crate) fn ex2_32(e: &mut Emitter, x: Word) -> R {
    let dt = e.t_float(64);
    let ft = e.t_float(32);
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let xd = o(e, Op::FConvert, dt, &[x])?;
    let lo = e.c_f64(-200.0);
    let hi = e.c_f64(200.0);
    let xc = ext(e, dt, glsl::FMAX, &[xd, lo])?;
    let xc = ext(e, dt, glsl::FMIN, &[xc, hi])?;
    let n = integral_f64(e, xc, glsl::ROUND_EVEN)?;
    let f = exact(e, Op::FSub, dt, xc, n)?;
    let ln2 = std::f64::consts::LN_2;
    let cl = e.c_f64(ln2);
    let t = exact(e, Op::FMul, dt, f, cl)?;
    // exp(t) by Horner, t in [-0.35, 0.35].
    let mut coef = 1.0f64;
    let mut cs = vec![1.0f64];
    for k in 1..=12 {
        coef /= k as f64;
        cs.push(coef);
    }
    let mut p = e.c_f64(cs[12]);
    for k in (0..12).rev() {
        let c = e.c_f64(cs[k]);
        let m = exact(e, Op::FMul, dt, p, t)?;
        p = exact(e, Op::FAdd, dt, m, c)?;
    }
    let ni = o(e, Op::ConvertFToS, u32t, &[n])?;
    let r = ext(e, dt, glsl::LDEXP, &[p, ni])?;
    let r = rounding::f64_to_f32(e, r, Rnd::Rn)?;
    let nan = o(e, Op::IsNan, bt, &[x])?;
    sel(e, ft, nan, x, r)
}

/// `sin(x)` (`cos(x)` with `cos`) for f32 `x`, computed in f64 and rounded
/// once, independent of the driver's `Sin`/`Cos` (Vulkan only promises
/// 2^-11 absolute error in [-pi, pi]; `sin.approx.f32` promises 2^-20.5 in
/// [-2pi, 2pi] and 2^-14.7 in [-100pi, 100pi]). The argument is reduced by
/// pi/2 in three parts (Cody and Waite): `k*P1` and `k*P2` are exact for
/// |k| < 2^26, which covers every f32 below about 10^8 with an error near
/// 2^-80 in the reduced argument; Taylor polynomials of sin (degree 11)
/// and cos (degree 12) on [-pi/4, pi/4] have truncation errors below
/// 2^-33, and the result is converted to f32 once. Larger arguments get
/// a best-effort result (PTX gives no bound there either).
pub(crate) fn sincos32(e: &mut Emitter, x: Word, cos: bool) -> R {
    let dt = e.t_float(64);
    let ft = e.t_float(32);
    let it = e.t_int(32);
    let xd = o(e, Op::FConvert, dt, &[x])?;
    let two_over_pi = e.c_f64(std::f64::consts::FRAC_2_PI);
    let t = exact(e, Op::FMul, dt, xd, two_over_pi)?;
    let k = integral_f64(e, t, glsl::ROUND_EVEN)?;
    // pi/2 = P1 + P2 + P3, P1 and P2 with 27 significant bits.
    let hp = std::f64::consts::FRAC_PI_2;
    let p1 = f64::from_bits(hp.to_bits() & !((1u64 << 26) - 1));
    let rest = hp - p1;
    let p2 = f64::from_bits(rest.to_bits() & !((1u64 << 26) - 1));
    // The remainder of pi/2 beyond P1 + P2 (pi/2 - P1 - P2 to double precision):
    // 0x3ff921fb54442d18 is pi/2 rounded, its error 6.123233995736766e-17.
    let p3 = (rest - p2) + 6.123_233_995_736_766e-17;
    let mut r = xd;
    for p in [p1, p2, p3] {
        let c = e.c_f64(p);
        let m = exact(e, Op::FMul, dt, k, c)?;
        r = exact(e, Op::FSub, dt, r, m)?;
    }
    let r2 = exact(e, Op::FMul, dt, r, r)?;
    // sin(r) = r (1 - r^2/3! + r^4/5! ...), cos(r) = 1 - r^2/2! + r^4/4! ...
    let poly = |e: &mut Emitter, first: u32| -> R {
        // Coefficients (-1)^i / (first + 2i)! up to degree 12, evaluated by Horner in r^2.
        let mut cs = Vec::new();
        let mut f = 1.0f64;
        for n in 1..=12 {
            f *= n as f64;
            if n >= first && (n - first).is_multiple_of(2) {
                let i = (n - first) / 2;
                cs.push(if i.is_multiple_of(2) { 1.0 / f } else { -1.0 / f });
            }
        }
        if first == 0 {
            cs.insert(0, 1.0);
        }
        let mut p = e.c_f64(cs[cs.len() - 1]);
        for &c in cs.iter().rev().skip(1) {
            let cc = e.c_f64(c);
            let m = exact(e, Op::FMul, dt, p, r2)?;
            p = exact(e, Op::FAdd, dt, m, cc)?;
        }
        Ok(p)
    };
    let ps = poly(e, 1)?;
    let s = exact(e, Op::FMul, dt, ps, r)?;
    let c = poly(e, 0)?;
    // Quadrant k mod 4 (cos: k + 1), from k in f64 (exact below 2^53).
    let quarter = e.c_f64(0.25);
    let four = e.c_f64(4.0);
    let kq = exact(e, Op::FMul, dt, k, quarter)?;
    let kq = ext(e, dt, glsl::FLOOR, &[kq])?;
    let kq = exact(e, Op::FMul, dt, kq, four)?;
    let q = exact(e, Op::FSub, dt, k, kq)?;
    let q = o(e, Op::ConvertFToS, it, &[q])?;
    let q = if cos {
        let one = e.c_u32(1);
        o(e, Op::IAdd, it, &[q, one])?
    } else {
        q
    };
    let three = e.c_u32(3);
    let q = o(e, Op::BitwiseAnd, it, &[q, three])?;
    let one = e.c_u32(1);
    let odd = o(e, Op::BitwiseAnd, it, &[q, one])?;
    let zero = e.c_u32(0);
    let odd = cmp(e, Op::INotEqual, odd, zero)?;
    let two = e.c_u32(2);
    let neg = o(e, Op::BitwiseAnd, it, &[q, two])?;
    let neg = cmp(e, Op::INotEqual, neg, zero)?;
    let v = sel(e, dt, odd, c, s)?;
    let nv = o(e, Op::FNegate, dt, &[v])?;
    let v = sel(e, dt, neg, nv, v)?;
    // Any rounding of the f64 value is far inside the bound.
    let r = o(e, Op::FConvert, ft, &[v])?;
    // sin(±0) = ±0; infinities and NaN give NaN (the reduction makes one).
    if cos {
        return Ok(r);
    }
    let z = e.c_f32(0.0);
    let is0 = cmp(e, Op::FOrdEqual, x, z)?;
    sel(e, ft, is0, x, r)
}

/// `log2(x)` for f32 `x`, computed in f64 (exponent plus an atanh series
/// of the significand in [sqrt(1/2), sqrt(2))) and rounded once: well
/// inside `lg2.approx.f32`'s error bound.
pub(crate) fn lg2_32(e: &mut Emitter, x: Word) -> R {
    let dt = e.t_float(64);
    let ft = e.t_float(32);
    let u64t = e.t_int(64);
    let u32t = e.t_int(32);
    let xd = o(e, Op::FConvert, dt, &[x])?;
    let bits = o(e, Op::Bitcast, u64t, &[xd])?;
    let c52 = e.c_int(64, 52);
    let ex = o(e, Op::ShiftRightLogical, u64t, &[bits, c52])?;
    let m7ff = e.c_int(64, 0x7ff);
    let ex = o(e, Op::BitwiseAnd, u64t, &[ex, m7ff])?;
    let mm = e.c_int(64, (1u64 << 52) - 1);
    let mant = o(e, Op::BitwiseAnd, u64t, &[bits, mm])?;
    let one_bits = e.c_int(64, 1.0f64.to_bits());
    let mb = o(e, Op::BitwiseOr, u64t, &[mant, one_bits])?;
    let m = o(e, Op::Bitcast, dt, &[mb])?;
    let ex32 = o(e, Op::UConvert, u32t, &[ex])?;
    let exf = o(e, Op::ConvertSToF, dt, &[ex32])?;
    let bias = e.c_f64(1023.0);
    let exf = exact(e, Op::FSub, dt, exf, bias)?;
    let sqrt2 = e.c_f64(std::f64::consts::SQRT_2);
    let big = cmp(e, Op::FOrdGreaterThan, m, sqrt2)?;
    let half = e.c_f64(0.5);
    let one = e.c_f64(1.0);
    let mh = exact(e, Op::FMul, dt, m, half)?;
    let m = sel(e, dt, big, mh, m)?;
    let ex1 = exact(e, Op::FAdd, dt, exf, one)?;
    let exf = sel(e, dt, big, ex1, exf)?;
    let num = exact(e, Op::FSub, dt, m, one)?;
    let den = exact(e, Op::FAdd, dt, m, one)?;
    let s = exact(e, Op::FDiv, dt, num, den)?;
    let s2 = exact(e, Op::FMul, dt, s, s)?;
    let mut p = e.c_f64(1.0 / 17.0);
    for k in (0..8).rev() {
        let c = e.c_f64(1.0 / (2 * k + 1) as f64);
        let t = exact(e, Op::FMul, dt, p, s2)?;
        p = exact(e, Op::FAdd, dt, t, c)?;
    }
    let two_s = exact(e, Op::FAdd, dt, s, s)?;
    let ln = exact(e, Op::FMul, dt, two_s, p)?;
    let l2e = e.c_f64(std::f64::consts::LOG2_E);
    let lg = exact(e, Op::FMul, dt, ln, l2e)?;
    let r = exact(e, Op::FAdd, dt, exf, lg)?;
    let r = o(e, Op::FConvert, ft, &[r])?;
    // Specials: negative → NaN, ±0 → -inf, +inf → +inf, NaN → NaN.
    let z = e.c_f32(0.0);
    let is0 = cmp(e, Op::FOrdEqual, x, z)?;
    let neg = cmp(e, Op::FOrdLessThan, x, z)?;
    let bt = e.t_bool();
    let inf = o(e, Op::IsInf, bt, &[x])?;
    let nan = o(e, Op::IsNan, bt, &[x])?;
    let ninf = e.c_f32(f32::NEG_INFINITY);
    let qnan = e.constant_bits(ft, 32, 0x7fff_ffff);
    let r = sel(e, ft, is0, ninf, r)?;
    let r = sel(e, ft, inf, x, r)?;
    let bad = or(e, neg, nan)?;
    sel(e, ft, bad, qnan, r)
}

pub(crate) fn unary(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    if is_half(t) {
        return super::half::unary(e, fx, inst, t);
    }
    let bits = fbits(t, inst)?;
    let [d, a] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects 2 operands", inst.mnemonic())));
    };
    let ft = e.t_float(bits);
    let v = src(e, fx, inst, a, bits)?;
    let approx = inst.has("approx");
    let rnd = Rnd::of(inst);
    let directed = |inst: &Instruction| match rnd {
        Some(r @ (Rnd::Rn | Rnd::Rz | Rnd::Rm | Rnd::Rp)) => Ok(r),
        _ => Err(unsupported(inst, "needs .approx or a rounding modifier")),
    };
    let r = match inst.opcode.as_str() {
        "abs" | "neg" => {
            let it = e.t_int(bits);
            let vi = o(e, Op::Bitcast, it, &[v])?;
            let r = if inst.opcode == "abs" {
                let m = e.c_int(bits, (1u64 << (bits - 1)) - 1);
                o(e, Op::BitwiseAnd, it, &[vi, m])?
            } else {
                let m = e.c_int(bits, 1u64 << (bits - 1));
                o(e, Op::BitwiseXor, it, &[vi, m])?
            };
            let r = o(e, Op::Bitcast, ft, &[r])?;
            let r = if inst.has("ftz") { flush(e, r, bits)? } else { r };
            return set(e, fx, d, r, K::Float(bits), false);
        }
        "sqrt" if approx => sqrt_rnd(e, v, bits, Rnd::Rn)?,
        "sqrt" => {
            let r = directed(inst)?;
            sqrt_rnd(e, v, bits, r)?
        }
        "rcp" if approx && bits == 64 => {
            // rcp.approx.ftz.f64: a reciprocal with subnormal inputs and results flushed.
            let v = flush(e, v, 64)?;
            let one = e.c_f64(1.0);
            let r = op2(e, Op::FDiv, ft, one, v)?;
            flush(e, r, 64)?
        }
        "rcp" if approx => {
            let one = e.c_float(bits, 1.0);
            div_rn(e, one, v, bits)?
        }
        "rcp" => {
            let r = directed(inst)?;
            let one = e.c_float(bits, 1.0);
            div_rnd(e, one, v, bits, r)?
        }
        "rsqrt" if approx && bits == 32 => {
            // 1/sqrt in f64, rounded once: well within rsqrt.approx's error.
            let dt = e.t_float(64);
            let dv = o(e, Op::FConvert, dt, &[v])?;
            let s = ext(e, dt, glsl::SQRT, &[dv])?;
            let one = e.c_f64(1.0);
            let q = op2(e, Op::FDiv, dt, one, s)?;
            o(e, Op::FConvert, ft, &[q])?
        }
        "rsqrt" if approx => {
            let v = if inst.has("ftz") { flush(e, v, 64)? } else { v };
            ext(e, ft, glsl::INVERSE_SQRT, &[v])?
        }
        "sin" if approx && bits == 32 => sincos32(e, v, false)?,
        "cos" if approx && bits == 32 => sincos32(e, v, true)?,
        "lg2" if approx && bits == 32 => lg2_32(e, v)?,
        "ex2" if approx && bits == 32 => ex2_32(e, v)?,
        "tanh" if approx && bits == 32 => tanh32(e, v)?,
        _ => return Err(unsupported(inst, "")),
    };
    finish(e, fx, inst, d, r, bits)
}

pub(crate) fn fma(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    if is_half(t) {
        return super::half::fma(e, fx, inst, t);
    }
    if t == ScalarType::F32x2 {
        return pair(e, fx, inst);
    }
    let bits = fbits(t, inst)?;
    let rnd = Rnd::of(inst);
    if inst.opcode == "fma" && rnd.is_none() {
        return Err(Diagnostic::error(inst.opcode_span, "fma requires a rounding modifier (.rn, .rz, .rm, .rp)"));
    }
    let [d, a, b, c] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects 4 operands", inst.mnemonic())));
    };
    let va = src(e, fx, inst, a, bits)?;
    let vb = src(e, fx, inst, b, bits)?;
    let vc = src(e, fx, inst, c, bits)?;
    let r = match rnd {
        Some(Rnd::Rna) => return Err(unsupported(inst, ".rna is only for cvt")),
        r => rounded(e, Ar::Fma, va, vb, vc, bits, r.unwrap_or(Rnd::Rn))?,
    };
    finish(e, fx, inst, d, r, bits)
}

/// `a op b` (`a*b + c` for [`Ar::Fma`]) in f32 or f64 (`bits`), rounded in
/// mode `rnd` (not `.rna`): to nearest with the driver's operation (the
/// exact `fma` where the driver does not fuse), otherwise through the
/// exact directed-rounding paths.
fn rounded(e: &mut Emitter, ar: Ar, a: Word, b: Word, c: Word, bits: u32, rnd: Rnd) -> R {
    let ft = e.t_float(bits);
    match (ar, rnd) {
        (Ar::Fma, Rnd::Rn) => fma_value(e, a, b, c, bits),
        (Ar::Add, Rnd::Rn) => exact(e, Op::FAdd, ft, a, b),
        (Ar::Sub, Rnd::Rn) => exact(e, Op::FSub, ft, a, b),
        (Ar::Mul, Rnd::Rn) => exact(e, Op::FMul, ft, a, b),
        (ar, r) if bits == 32 => arith32(e, ar, a, b, c, r),
        (ar, r) => arith64_directed(e, ar, a, b, c, r),
    }
}

/// `add`, `sub`, `mul`, `fma` and `mad` on `.f32x2` (PTX 8.6): each operand
/// is a `.b64` register holding two f32 values, element 0 in bits 0-31;
/// each element is computed as the `.f32` instruction with the same
/// rounding modifier and `.ftz` would compute it (`add`/`sub`/`mul` without
/// one round to nearest; `mad.rnd` is `fma.rnd`).
fn pair(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let ar = Ar::of(&inst.opcode).ok_or_else(|| unsupported(inst, ".f32x2 is only for add, sub, mul, fma and mad"))?;
    let rnd = match (Rnd::of(inst), ar) {
        (Some(r @ (Rnd::Rn | Rnd::Rz | Rnd::Rm | Rnd::Rp)), _) => r,
        (None, Ar::Add | Ar::Sub | Ar::Mul) => Rnd::Rn,
        _ => {
            return Err(Diagnostic::error(
                inst.opcode_span,
                format!("'{}' needs a rounding modifier (.rn, .rz, .rm, .rp)", inst.mnemonic()),
            ))
        }
    };
    if inst.has("sat") {
        return Err(unsupported(inst, ""));
    }
    let want = if ar == Ar::Fma { 4 } else { 3 };
    let Some((d, srcs)) = inst.operands.split_first().filter(|_| inst.operands.len() == want) else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects {want} operands", inst.mnemonic())));
    };
    let (u64t, u32t, ft) = (e.t_int(64), e.t_int(32), e.t_float(32));
    let k32 = e.c_int(64, 32);
    // Each source's two elements.
    let mut halves = Vec::new();
    for op in srcs {
        let v = get(e, fx, op, K::Int(64), false)?;
        let hi = o(e, Op::ShiftRightLogical, u64t, &[v, k32])?;
        let mut pair = [0; 2];
        for (slot, w) in pair.iter_mut().zip([v, hi]) {
            let bits = o(e, Op::UConvert, u32t, &[w])?;
            let f = o(e, Op::Bitcast, ft, &[bits])?;
            *slot = if inst.has("ftz") { flush(e, f, 32)? } else { f };
        }
        halves.push(pair);
    }
    let mut out = [0; 2];
    for (i, slot) in out.iter_mut().enumerate() {
        let a = halves[0][i];
        let b = halves[1][i];
        let c = if ar == Ar::Fma { halves[2][i] } else { a };
        let mut r = rounded(e, ar, a, b, c, 32, rnd)?;
        if inst.has("ftz") {
            r = flush(e, r, 32)?;
        }
        let r = canon_nan(e, r, 32)?;
        let bits = o(e, Op::Bitcast, u32t, &[r])?;
        *slot = o(e, Op::UConvert, u64t, &[bits])?;
    }
    let hi = o(e, Op::ShiftLeftLogical, u64t, &[out[1], k32])?;
    let joined = o(e, Op::BitwiseOr, u64t, &[out[0], hi])?;
    set(e, fx, d, joined, K::Int(64), false)
}

/// `testp.op.type p, a`.
pub(crate) fn testp(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let bits = fbits(t, inst)?;
    let [d, a] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, "testp expects 2 operands"));
    };
    let v = get(e, fx, a, K::Float(bits), false)?;
    let bt = e.t_bool();
    let ft = e.t_float(bits);
    let nan = o(e, Op::IsNan, bt, &[v])?;
    let inf = o(e, Op::IsInf, bt, &[v])?;
    let abs = ext(e, ft, glsl::FABS, &[v])?;
    let minn = if bits == 64 { e.c_f64(f64::MIN_POSITIVE) } else { e.c_f32(f32::MIN_POSITIVE) };
    let z = e.c_float(bits, 0.0);
    let r = match inst.modifiers.first().map(|s| s.as_str()) {
        Some("finite") => {
            let bad = or(e, nan, inf)?;
            not(e, bad)?
        }
        Some("infinite") => inf,
        Some("number") => not(e, nan)?,
        Some("notanumber") => nan,
        Some("normal") => {
            let ge = cmp(e, Op::FOrdGreaterThanEqual, abs, minn)?;
            let ni = not(e, inf)?;
            and(e, ge, ni)?
        }
        Some("subnormal") => {
            let lt = cmp(e, Op::FOrdLessThan, abs, minn)?;
            let nz = cmp(e, Op::FOrdNotEqual, abs, z)?;
            and(e, lt, nz)?
        }
        _ => return Err(unsupported(inst, "unknown test")),
    };
    set(e, fx, d, r, K::Pred, false)
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
    Ok(fma64_parts(e, a, b, c)?.0)
}

/// f64 `a*b + c` correctly rounded (Dekker's product, then Boldo–Melquiond),
/// with a float whose sign is that of the exact result minus the rounded one
/// (0 when exact, and on the `fl(a*b) + c` path below, where a directed
/// mode needs no step: that result is exact, NaN or an overflow, which
/// [`rounding::step_toward`] clamps).
///
/// The core ([`fma64_core`]) is exact where Dekker's product is: no operand
/// at or above 2^995 (its split would overflow), a product between 2^-960
/// (below, its low part is not representable) and 2^1000, and an addend
/// below 2^1000 (the sums do not overflow). Elsewhere the operands are
/// scaled by powers of two first, the larger factor `x` of the product
/// alone where it is large:
/// - a product at or above 2^1000, a factor at or above 2^995 or an addend
///   at or above 2^1000 (unless the product is tiny, below): `x * 2^-64`,
///   the addend `* 2^-64`; the result is scaled back exactly (it is not
///   subnormal; an overflow becomes the infinity it should). An addend below 2^-900
///   there is far below the product's last bit (the product is at least
///   2^-79: a zero product takes the path below) and only breaks a tie or
///   gives the error's sign; scaled, its bits could underflow, so it stays
///   as it is, which keeps its sign and keeps it far below.
/// - a product at or below 2^-960: both factors `* 2^500`, the addend
///   `* 2^1000`. Scaling back rounds the result to the subnormal grid a
///   second time; the core's error sign decides it first: below 2^-1023
///   (at most 51 bits left) the scaled result is rounded to odd, which
///   the second rounding then rounds correctly; in `[2^-1023, 2^-1022)`
///   (52 bits) a result on a midpoint of the 52-bit grid moves to the
///   neighbour on the side of the exact value. An addend at or above
///   2^-900 (or a product still below 2^-960 after the scaling) is the
///   result: the product is far below half its ulp.
///
/// A product with a zero factor, non-finite operands and a scaled product
/// at or above 2^1000 (the result overflows) take `fl(a*b) + c`, which is
/// then exact or right (an infinite addend with finite factors is the
/// result).
pub(crate) fn fma64_parts(e: &mut Emitter, a: Word, b: Word, c: Word) -> Result<(Word, Word), Diagnostic> {
    let ft = e.t_float(64);
    let u64t = e.t_int(64);
    let z = e.c_f64(0.0);
    let one = e.c_f64(1.0);
    let inf = e.c_f64(f64::INFINITY);
    let aa = ext(e, ft, glsl::FABS, &[a])?;
    let ab = ext(e, ft, glsl::FABS, &[b])?;
    let ac = ext(e, ft, glsl::FABS, &[c])?;
    let ph = exact(e, Op::FMul, ft, a, b)?;
    let ap = ext(e, ft, glsl::FABS, &[ph])?;
    // x: the larger factor (Dekker's product is symmetric).
    let a_larger = cmp(e, Op::FOrdGreaterThanEqual, aa, ab)?;
    let mx = sel(e, ft, a_larger, aa, ab)?;
    let mn = sel(e, ft, a_larger, ab, aa)?;
    let x = sel(e, ft, a_larger, a, b)?;
    let y = sel(e, ft, a_larger, b, a)?;
    let k995 = e.c_f64(2f64.powi(995));
    let k1000 = e.c_f64(2f64.powi(1000));
    let big_x = cmp(e, Op::FOrdGreaterThanEqual, mx, k995)?;
    let big_p = cmp(e, Op::FOrdGreaterThanEqual, ap, k1000)?;
    let big_c = cmp(e, Op::FOrdGreaterThanEqual, ac, k1000)?;
    let big = or(e, big_x, big_p)?;
    let big = or(e, big, big_c)?;
    let k_960 = e.c_f64(2f64.powi(-960));
    let tiny = cmp(e, Op::FOrdLessThanEqual, ap, k_960)?;
    // Scale factors: x's, y's, the addend's, and back to scale.
    let up = e.c_f64(2f64.powi(500));
    let down = e.c_f64(2f64.powi(-64));
    let fx = sel(e, ft, big, down, one)?;
    let fx = sel(e, ft, tiny, up, fx)?;
    let fy = sel(e, ft, tiny, up, one)?;
    let fc = exact(e, Op::FMul, ft, fx, fy)?;
    let k_900 = e.c_f64(2f64.powi(-900));
    let c_small = cmp(e, Op::FOrdLessThan, ac, k_900)?;
    let keep_c = and(e, big, c_small)?;
    let fcc = sel(e, ft, keep_c, one, fc)?;
    let back_big = e.c_f64(2f64.powi(64));
    let back_tiny = e.c_f64(2f64.powi(-1000));
    let inv = sel(e, ft, big, back_big, one)?;
    let inv = sel(e, ft, tiny, back_tiny, inv)?;
    let sx = exact(e, Op::FMul, ft, x, fx)?;
    let sy = exact(e, Op::FMul, ft, y, fy)?;
    let sc = exact(e, Op::FMul, ft, c, fcc)?;
    let psc = exact(e, Op::FMul, ft, sx, sy)?;
    let (rs, ds) = fma64_core(e, sx, sy, sc)?;
    // Back to scale. A scaled-up result that will be subnormal is first
    // moved one ulp towards the exact value where the second rounding
    // needs it (see above).
    let ars = ext(e, ft, glsl::FABS, &[rs])?;
    let k_23 = e.c_f64(2f64.powi(-23));
    let k_22 = e.c_f64(2f64.powi(-22));
    let lt23 = cmp(e, Op::FOrdLessThan, ars, k_23)?;
    let lt22 = cmp(e, Op::FOrdLessThan, ars, k_22)?;
    let rb = o(e, Op::Bitcast, u64t, &[rs])?;
    let one64 = e.c_int(64, 1);
    let low = o(e, Op::BitwiseAnd, u64t, &[rb, one64])?;
    let zero64 = e.c_int(64, 0);
    let odd = cmp(e, Op::INotEqual, low, zero64)?;
    let even = not(e, odd)?;
    let odd52 = and(e, lt22, odd)?;
    let bt = e.t_bool();
    let want = sel(e, bt, lt23, even, odd52)?;
    let inexact = cmp(e, Op::FOrdNotEqual, ds, z)?;
    let nudge = and(e, tiny, inexact)?;
    let nudge = and(e, nudge, want)?;
    let dneg = cmp(e, Op::FOrdLessThan, ds, z)?;
    let rneg = cmp(e, Op::FOrdLessThan, rs, z)?;
    let away = cmp(e, Op::LogicalEqual, dneg, rneg)?;
    let upb = o(e, Op::IAdd, u64t, &[rb, one64])?;
    let downb = o(e, Op::ISub, u64t, &[rb, one64])?;
    let moved = sel(e, u64t, away, upb, downb)?;
    let nb = sel(e, u64t, nudge, moved, rb)?;
    let rn = o(e, Op::Bitcast, ft, &[nb])?;
    let y_back = exact(e, Op::FMul, ft, rn, inv)?;
    // The error's sign: the scaled result against the one scaled back,
    // or the core's where scaling back was exact.
    let yb = exact(e, Op::FMul, ft, y_back, fc)?;
    let diff = exact(e, Op::FSub, ft, rs, yb)?;
    let d0 = cmp(e, Op::FOrdEqual, diff, z)?;
    let dir = sel(e, ft, d0, ds, diff)?;
    // A tiny product against an addend above 2^-900, or one still below
    // 2^-960 after the scaling (below 2^-1960): the addend, or with a zero
    // addend the product's zero (fl(a*b) is then a zero of its sign); the
    // error has the product's sign.
    let apsc = ext(e, ft, glsl::FABS, &[psc])?;
    let still = cmp(e, Op::FOrdLessThan, apsc, k_960)?;
    let c_large = not(e, c_small)?;
    let cw = or(e, c_large, still)?;
    let cw = and(e, tiny, cw)?;
    let c0 = cmp(e, Op::FOrdEqual, c, z)?;
    let rcw = sel(e, ft, c0, ph, c)?;
    let psign = with_sign(e, one, ph, 64)?;
    let r = sel(e, ft, cw, rcw, y_back)?;
    let dir = sel(e, ft, cw, psign, dir)?;
    // Zero products, non-finite operands, overflow: fl(a*b) + c.
    let in_range = cmp(e, Op::FOrdLessThan, apsc, k1000)?;
    let c_fin = cmp(e, Op::FOrdLessThan, ac, inf)?;
    let ok = and(e, in_range, c_fin)?;
    let nz = cmp(e, Op::FOrdNotEqual, mn, z)?;
    let ok = and(e, ok, nz)?;
    let a_fin = cmp(e, Op::FOrdLessThan, aa, inf)?;
    let b_fin = cmp(e, Op::FOrdLessThan, ab, inf)?;
    let ab_fin = and(e, a_fin, b_fin)?;
    let c_inf = cmp(e, Op::FOrdEqual, ac, inf)?;
    let c_wins = and(e, c_inf, ab_fin)?;
    let sum = exact(e, Op::FAdd, ft, ph, c)?;
    let naive = sel(e, ft, c_wins, c, sum)?;
    let r = sel(e, ft, ok, r, naive)?;
    let dir = sel(e, ft, ok, dir, z)?;
    Ok((r, dir))
}

/// [`fma64_parts`] for operands whose product `ph + pl` is exact.
fn fma64_core(e: &mut Emitter, a: Word, b: Word, c: Word) -> Result<(Word, Word), Diagnostic> {
    let ft = e.t_float(64);
    let (ph, pl) = two_product(e, a, b)?;
    let (uh, ul) = two_sum(e, c, ph)?;
    let (t0, te) = two_sum(e, ul, pl)?;
    let t = round_to_odd(e, t0, te)?;
    let (r, e1) = two_sum(e, uh, t)?;
    // An exact zero takes its sign from the product and the addend (-0 only
    // when both are -0).
    let z0 = e.c_f64(0.0);
    let rz = cmp(e, Op::FOrdEqual, r, z0)?;
    let pc = exact(e, Op::FAdd, ft, ph, c)?;
    let r = sel(e, ft, rz, pc, r)?;
    // The exact value is r + e1 + (t0 + te - t); the last part is below
    // e1's ulp unless e1 is zero.
    let dt0 = exact(e, Op::FSub, ft, t0, t)?;
    let d = exact(e, Op::FAdd, ft, dt0, te)?;
    let e1z = cmp(e, Op::FOrdEqual, e1, z0)?;
    let dir = sel(e, ft, e1z, d, e1)?;
    Ok((r, dir))
}

/// Knuth's two-sum: `s = fl(a+b)`, `a + b = s + err` exactly.
pub(crate) fn two_sum(e: &mut Emitter, a: Word, b: Word) -> Result<(Word, Word), Diagnostic> {
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
pub(crate) fn two_product(e: &mut Emitter, a: Word, b: Word) -> Result<(Word, Word), Diagnostic> {
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
/// rounded to odd: where inexact, `x` truncated (one ulp towards zero from
/// `s` when `s` was rounded away from zero) with its last bit set.
pub(crate) fn round_to_odd(e: &mut Emitter, s: Word, err: Word) -> Result<Word, Diagnostic> {
    let dt = e.t_float(64);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let z = e.c_f64(0.0);
    let inexact = e.b.f_ord_not_equal(bt, None, err, z).map_err(internal1)?;
    let sb = e.b.bitcast(u64t, None, s).map_err(internal1)?;
    let s_neg = e.b.f_ord_less_than(bt, None, s, z).map_err(internal1)?;
    let e_neg = e.b.f_ord_less_than(bt, None, err, z).map_err(internal1)?;
    let toward = e.b.logical_equal(bt, None, s_neg, e_neg).map_err(internal1)?;
    let one = e.c_int(64, 1);
    let zero64 = e.c_int(64, 0);
    let step = e.b.select(u64t, None, toward, zero64, one).map_err(internal1)?;
    let trunc = e.b.i_sub(u64t, None, sb, step).map_err(internal1)?;
    let odd = e.b.bitwise_or(u64t, None, trunc, one).map_err(internal1)?;
    let rb = e.b.select(u64t, None, inexact, odd, sb).map_err(internal1)?;
    e.b.bitcast(dt, None, rb).map_err(internal1)
}
