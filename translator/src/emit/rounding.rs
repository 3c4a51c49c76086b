//! Software floating-point rounding, emitted as integer SPIR-V.
//!
//! Vulkan has no per-instruction rounding modes (only conversions may carry
//! `FPRoundingMode`, and only to 16/32-bit floats with extra capabilities),
//! no half-precision arithmetic without optional features, and no bfloat16
//! or 8-bit floats at all. PTX needs all of them, bit-exact. This module
//! owns one rounding routine, [`round_core`], that turns an exact value
//! given as sign, exponent and a 64-bit significand (plus a sticky bit for
//! anything below it) into the bits of any binary format ([`Fmt`]) in any
//! PTX rounding mode ([`Rnd`]), with IEEE subnormals and overflow and the
//! `.satfinite` rule. Everything else feeds it:
//!
//! - [`round_f64`]: an f64 value to a narrower format. Arithmetic in
//!   f32/f16/bf16 computes in f64 and rounds the f64 result *to odd* first
//!   (see `float.rs`): rounding to odd at 53 bits followed by any rounding to
//!   at most 51 bits is the correct rounding of the exact value (Boldo and
//!   Melquiond, "Emulation of FMA and correctly rounded sums: proved
//!   algorithms using rounding to odd", IEEE TC 2008, theorem 1; it holds
//!   for directed modes as well, since the odd result keeps the exact
//!   value's position relative to every coarser float and whether it was
//!   exact).
//! - [`round_int`]: a 64-bit integer (signed or unsigned) to any format.
//! - f64 results in directed modes do not go through here: they take the
//!   round-to-nearest result and an exact error term and step one ulp
//!   ([`step_toward`]).
//!
//! NaN results are canonical: `0x7fff` (f16, bf16), `0x7fffffff` (f32,
//! which is what NVIDIA GPUs produce for every NaN result: they keep no
//! payloads in single precision), all ones below the sign for the others.

use super::func::internal1;
use super::inst::{ext, glsl};
use super::Emitter;
use crate::ast::Instruction;
use crate::diag::Diagnostic;
use rspirv::spirv::{Op, Word};

/// The result of emitting one value.
pub(crate) type R = Result<Word, Diagnostic>;

/// A PTX rounding mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rnd {
    /// `.rn`: to nearest, ties to even.
    Rn,
    /// `.rz`: toward zero.
    Rz,
    /// `.rm`: toward minus infinity.
    Rm,
    /// `.rp`: toward plus infinity.
    Rp,
    /// `.rna`: to nearest, ties away from zero (`cvt.rna.tf32.f32`).
    Rna,
}

impl Rnd {
    /// The floating-point rounding modifier of an instruction (`.rn .rz .rm
    /// .rp .rna`), if any.
    pub fn of(inst: &Instruction) -> Option<Rnd> {
        inst.modifiers.iter().find_map(|m| match m.as_str() {
            "rn" => Some(Rnd::Rn),
            "rz" => Some(Rnd::Rz),
            "rm" => Some(Rnd::Rm),
            "rp" => Some(Rnd::Rp),
            "rna" => Some(Rnd::Rna),
            _ => None,
        })
    }
}

/// A binary floating-point format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fmt {
    /// Exponent field width.
    pub ebits: u32,
    /// Stored significand width (without the hidden bit).
    pub mbits: u32,
    /// No infinities; the all-ones pattern below the sign is NaN (E4M3).
    pub no_inf: bool,
}

impl Fmt {
    /// IEEE binary64.
    pub const F64: Fmt = Fmt { ebits: 11, mbits: 52, no_inf: false };
    /// IEEE binary32.
    pub const F32: Fmt = Fmt { ebits: 8, mbits: 23, no_inf: false };
    /// IEEE binary16.
    pub const F16: Fmt = Fmt { ebits: 5, mbits: 10, no_inf: false };
    /// bfloat16.
    pub const BF16: Fmt = Fmt { ebits: 8, mbits: 7, no_inf: false };
    /// TensorFloat-32 (kept in f32 layout with the low 13 bits zero by the caller).
    pub const TF32: Fmt = Fmt { ebits: 8, mbits: 10, no_inf: false };
    /// FP8 E4M3 (`e4m3`: no infinities, NaN is `0x7f`).
    pub const E4M3: Fmt = Fmt { ebits: 4, mbits: 3, no_inf: true };
    /// FP8 E5M2 (`e5m2`: IEEE-like).
    pub const E5M2: Fmt = Fmt { ebits: 5, mbits: 2, no_inf: false };

    /// Exponent bias.
    pub fn bias(self) -> i32 {
        (1 << (self.ebits - 1)) - 1
    }
    /// The sign bit.
    pub fn sign(self) -> u64 {
        1u64 << (self.ebits + self.mbits)
    }
    /// The first magnitude that is not finite (infinity, or NaN without infinities).
    pub fn limit(self) -> u64 {
        if self.no_inf {
            self.sign() - 1
        } else {
            ((1u64 << self.ebits) - 1) << self.mbits
        }
    }
    /// Infinity's magnitude (NaN's for formats without infinities).
    pub fn inf(self) -> u64 {
        self.limit()
    }
    /// The largest finite magnitude.
    pub fn max_finite(self) -> u64 {
        self.limit() - 1
    }
    /// The canonical NaN.
    pub fn nan(self) -> u64 {
        self.sign() - 1
    }
}

/// Emit one instruction with the given operands.
pub(crate) fn o(e: &mut Emitter, op: Op, t: Word, args: &[Word]) -> R {
    e.b.op(op, t, None, args).map_err(internal1)
}

/// `c ? a : b`.
pub(crate) fn sel(e: &mut Emitter, t: Word, c: Word, a: Word, b: Word) -> R {
    o(e, Op::Select, t, &[c, a, b])
}

/// Compare with an operation returning bool.
pub(crate) fn cmp(e: &mut Emitter, op: Op, a: Word, b: Word) -> R {
    let bt = e.t_bool();
    o(e, op, bt, &[a, b])
}

/// Logical and/or/not.
pub(crate) fn and(e: &mut Emitter, a: Word, b: Word) -> R {
    let bt = e.t_bool();
    o(e, Op::LogicalAnd, bt, &[a, b])
}
/// Logical or.
pub(crate) fn or(e: &mut Emitter, a: Word, b: Word) -> R {
    let bt = e.t_bool();
    o(e, Op::LogicalOr, bt, &[a, b])
}
/// Logical not.
pub(crate) fn not(e: &mut Emitter, a: Word) -> R {
    let bt = e.t_bool();
    o(e, Op::LogicalNot, bt, &[a])
}

/// Index of the highest set bit of a 64-bit integer as a 32-bit signed value, -1 for 0.
pub(crate) fn msb64(e: &mut Emitter, x: Word) -> R {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let lo = o(e, Op::UConvert, u32t, &[x])?;
    let c32 = e.c_int(64, 32);
    let h = o(e, Op::ShiftRightLogical, u64t, &[x, c32])?;
    let hi = o(e, Op::UConvert, u32t, &[h])?;
    let mh = ext(e, u32t, glsl::FIND_UMSB, &[hi])?;
    let ml = ext(e, u32t, glsl::FIND_UMSB, &[lo])?;
    let c32u = e.c_u32(32);
    let mh = o(e, Op::IAdd, u32t, &[mh, c32u])?;
    let z = e.c_u32(0);
    let hz = cmp(e, Op::IEqual, hi, z)?;
    sel(e, u32t, hz, ml, mh)
}

/// Shift `m` (non-zero) left so that its top bit is bit 63; returns the
/// shifted value and the shift (32-bit). A zero `m` stays zero.
fn normalize(e: &mut Emitter, m: Word) -> Result<(Word, Word), Diagnostic> {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let p = msb64(e, m)?;
    let c63 = e.c_u32(63);
    let lz = o(e, Op::ISub, u32t, &[c63, p])?;
    let lz = ext(e, u32t, glsl::UMIN, &[lz, c63])?;
    let lz64 = o(e, Op::UConvert, u64t, &[lz])?;
    let sig = o(e, Op::ShiftLeftLogical, u64t, &[m, lz64])?;
    Ok((sig, lz))
}

/// Round `(-1)^neg * sig * 2^(exp-63) (+ sticky)` to `fmt` in mode `rnd`.
///
/// `neg` and `sticky` are booleans; `exp` is a signed 32-bit integer (the
/// exponent of the significand's top bit); `sig` is a 64-bit integer with
/// bit 63 set; `sticky` says whether non-zero bits lie below `sig`'s last.
/// Returns the result's bits as a 64-bit integer. Overflow follows the mode
/// (to infinity or the largest finite value), or gives the largest finite
/// value with `satfinite`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn round_core(
    e: &mut Emitter,
    neg: Word,
    exp: Word,
    sig: Word,
    sticky: Word,
    fmt: Fmt,
    rnd: Rnd,
    satfinite: bool,
) -> R {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bias = fmt.bias();
    let m = fmt.mbits;
    // Bits to drop: 63 - m for normal results, more below the normal range.
    let emin = e.c_u32((1 - bias) as u32);
    let diff = o(e, Op::ISub, u32t, &[emin, exp])?;
    let z32 = e.c_u32(0);
    let extra = ext(e, u32t, glsl::SMAX, &[diff, z32])?;
    let d0 = e.c_u32(63 - m);
    let d = o(e, Op::IAdd, u32t, &[d0, extra])?;
    let c64 = e.c_u32(64);
    let c65 = e.c_u32(65);
    let gone = cmp(e, Op::UGreaterThanEqual, d, c65)?;
    let dc = ext(e, u32t, glsl::UMIN, &[d, c64])?;
    let c63 = e.c_u32(63);
    let dk = ext(e, u32t, glsl::UMIN, &[dc, c63])?;
    let dk64 = o(e, Op::UConvert, u64t, &[dk])?;
    let kept = o(e, Op::ShiftRightLogical, u64t, &[sig, dk64])?;
    let z64 = e.c_int(64, 0);
    let all = cmp(e, Op::IEqual, dc, c64)?;
    let kept = sel(e, u64t, all, z64, kept)?;
    let one32 = e.c_u32(1);
    let rs = o(e, Op::ISub, u32t, &[dc, one32])?;
    let rs64 = o(e, Op::UConvert, u64t, &[rs])?;
    let rb = o(e, Op::ShiftRightLogical, u64t, &[sig, rs64])?;
    let one64 = e.c_int(64, 1);
    let rb = o(e, Op::BitwiseAnd, u64t, &[rb, one64])?;
    let rbit = cmp(e, Op::INotEqual, rb, z64)?;
    let f = e.c_bool(false);
    let t = e.c_bool(true);
    let bt = e.t_bool();
    let rbit = sel(e, bt, gone, f, rbit)?;
    let ls = o(e, Op::ISub, u32t, &[c65, dc])?;
    let ls64 = o(e, Op::UConvert, u64t, &[ls])?;
    let below = o(e, Op::ShiftLeftLogical, u64t, &[sig, ls64])?;
    let rest = cmp(e, Op::INotEqual, below, z64)?;
    let bt = e.t_bool();
    let rest = sel(e, bt, gone, t, rest)?;
    let rest = or(e, rest, sticky)?;
    let inexact = or(e, rbit, rest)?;
    let up = match rnd {
        Rnd::Rn => {
            let lsb = o(e, Op::BitwiseAnd, u64t, &[kept, one64])?;
            let odd = cmp(e, Op::INotEqual, lsb, z64)?;
            let ro = or(e, rest, odd)?;
            and(e, rbit, ro)?
        }
        Rnd::Rna => rbit,
        Rnd::Rz => f,
        Rnd::Rm => and(e, neg, inexact)?,
        Rnd::Rp => {
            let pos = not(e, neg)?;
            and(e, pos, inexact)?
        }
    };
    // Biased exponent field, clamped so that huge exponents still overflow.
    let cb = e.c_u32(bias as u32);
    let be = o(e, Op::IAdd, u32t, &[exp, cb])?;
    let be = ext(e, u32t, glsl::SMAX, &[be, one32])?;
    let top = e.c_u32((1u32 << fmt.ebits) + 1);
    let be = ext(e, u32t, glsl::SMIN, &[be, top])?;
    let be = o(e, Op::ISub, u32t, &[be, one32])?;
    let be64 = o(e, Op::UConvert, u64t, &[be])?;
    let cm = e.c_int(64, m as u64);
    let field = o(e, Op::ShiftLeftLogical, u64t, &[be64, cm])?;
    let mag = o(e, Op::IAdd, u64t, &[field, kept])?;
    let up64 = sel(e, u64t, up, one64, z64)?;
    let mag = o(e, Op::IAdd, u64t, &[mag, up64])?;
    // Overflow.
    let limit = e.c_int(64, fmt.limit());
    let ovf = cmp(e, Op::UGreaterThanEqual, mag, limit)?;
    let maxf = e.c_int(64, fmt.max_finite());
    let inf = e.c_int(64, fmt.inf());
    let ovf_val = if satfinite {
        maxf
    } else {
        match rnd {
            Rnd::Rn | Rnd::Rna => inf,
            Rnd::Rz => maxf,
            Rnd::Rm => sel(e, u64t, neg, inf, maxf)?,
            Rnd::Rp => sel(e, u64t, neg, maxf, inf)?,
        }
    };
    let mag = sel(e, u64t, ovf, ovf_val, mag)?;
    let sb = e.c_int(64, fmt.sign());
    let s = sel(e, u64t, neg, sb, z64)?;
    o(e, Op::BitwiseOr, u64t, &[mag, s])
}

/// Round an f64 value to `fmt`: the result's bits as a 64-bit integer.
///
/// NaN gives the format's canonical NaN; infinities give infinities (the
/// largest finite value with `satfinite`; NaN for formats without
/// infinities); zeros keep their sign.
pub(crate) fn round_f64(e: &mut Emitter, x: Word, fmt: Fmt, rnd: Rnd, satfinite: bool) -> R {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bits = o(e, Op::Bitcast, u64t, &[x])?;
    let z64 = e.c_int(64, 0);
    let c63 = e.c_int(64, 63);
    let sgn = o(e, Op::ShiftRightLogical, u64t, &[bits, c63])?;
    let neg = cmp(e, Op::INotEqual, sgn, z64)?;
    let c52 = e.c_int(64, 52);
    let ef = o(e, Op::ShiftRightLogical, u64t, &[bits, c52])?;
    let c7ff = e.c_int(64, 0x7ff);
    let ef = o(e, Op::BitwiseAnd, u64t, &[ef, c7ff])?;
    let mm = e.c_int(64, (1u64 << 52) - 1);
    let mant = o(e, Op::BitwiseAnd, u64t, &[bits, mm])?;
    let hidden = e.c_int(64, 1u64 << 52);
    let withh = o(e, Op::BitwiseOr, u64t, &[mant, hidden])?;
    let sub = cmp(e, Op::IEqual, ef, z64)?;
    let m53 = sel(e, u64t, sub, mant, withh)?;
    // value = m53 * 2^(max(ef,1) - 1075)
    let ef32 = o(e, Op::UConvert, u32t, &[ef])?;
    let one = e.c_u32(1);
    let ef32 = ext(e, u32t, glsl::UMAX, &[ef32, one])?;
    let (sig, lz) = normalize(e, m53)?;
    let k = e.c_u32((63i32 - 1075) as u32);
    let ex = o(e, Op::IAdd, u32t, &[ef32, k])?;
    let ex = o(e, Op::ISub, u32t, &[ex, lz])?;
    let f = e.c_bool(false);
    let r = round_core(e, neg, ex, sig, f, fmt, rnd, satfinite)?;
    // Special inputs.
    let sb = e.c_int(64, fmt.sign());
    let s = sel(e, u64t, neg, sb, z64)?;
    let is_max = cmp(e, Op::IEqual, ef, c7ff)?;
    let mz = cmp(e, Op::IEqual, mant, z64)?;
    let is_inf = and(e, is_max, mz)?;
    let mnz = not(e, mz)?;
    let is_nan = and(e, is_max, mnz)?;
    let is_zero = and(e, sub, mz)?;
    let inf_mag = if satfinite { fmt.max_finite() } else { fmt.inf() };
    let im = e.c_int(64, inf_mag);
    let inf_v = o(e, Op::BitwiseOr, u64t, &[im, s])?;
    let r = sel(e, u64t, is_zero, s, r)?;
    let r = sel(e, u64t, is_inf, inf_v, r)?;
    let nan = e.c_int(64, fmt.nan());
    sel(e, u64t, is_nan, nan, r)
}

/// Round an f32 value to f16 to nearest, ties to even: the result's bits as
/// a 32-bit integer. The same bits as [`round_f64`] of the value widened
/// to f64 with [`Fmt::F16`] and [`Rnd::Rn`] (NaN gives `0x7fff`), in about
/// 30 32-bit instructions instead of its 64-bit significand arithmetic
/// (about 100): `cvt.rn.f16.f32` is most of what NVIDIA Warp's half
/// precision kernels do, and llvmpipe's compile time grows with the code.
///
/// On the magnitude's bits `a`: at or above `0x477ff000` (65520, the
/// midpoint between f16's largest finite value and 2^16) the result is
/// infinity; from `0x38800000` (2^-14, f16's smallest normal) the exponent
/// is rebiased by subtracting 112 << 23 and the 13 bits below f16's
/// significand are rounded off by adding `0xfff` plus the kept part's
/// lowest bit (a carry into the exponent is the right result); below, the
/// result is the significand with its hidden bit shifted right by
/// `126 - exponent` (at most 31; an f32 subnormal gives 0), rounded to
/// nearest even on the bits shifted out (reaching `0x400`, the smallest
/// normal, where it rounds up to it).
pub(crate) fn f32_to_f16_rn(e: &mut Emitter, x: Word) -> R {
    let u32t = e.t_int(32);
    let c = |e: &mut Emitter, v: u32| e.c_u32(v);
    let bits = o(e, Op::Bitcast, u32t, &[x])?;
    let c16 = c(e, 16);
    let sign = o(e, Op::ShiftRightLogical, u32t, &[bits, c16])?;
    let c8000 = c(e, 0x8000);
    let sign = o(e, Op::BitwiseAnd, u32t, &[sign, c8000])?;
    let abs_mask = c(e, 0x7fff_ffff);
    let a = o(e, Op::BitwiseAnd, u32t, &[bits, abs_mask])?;
    // Normal results.
    let rebias = c(e, 112 << 23);
    let n = o(e, Op::ISub, u32t, &[a, rebias])?;
    let c13 = c(e, 13);
    let kept = o(e, Op::ShiftRightLogical, u32t, &[n, c13])?;
    let one = c(e, 1);
    let odd = o(e, Op::BitwiseAnd, u32t, &[kept, one])?;
    let cfff = c(e, 0xfff);
    let n = o(e, Op::IAdd, u32t, &[n, cfff])?;
    let n = o(e, Op::IAdd, u32t, &[n, odd])?;
    let normal = o(e, Op::ShiftRightLogical, u32t, &[n, c13])?;
    // Subnormal results (and zero).
    let c23 = c(e, 23);
    let exp = o(e, Op::ShiftRightLogical, u32t, &[a, c23])?;
    let c126 = c(e, 126);
    let shift = o(e, Op::ISub, u32t, &[c126, exp])?;
    let c31 = c(e, 31);
    let shift = ext(e, u32t, glsl::UMIN, &[shift, c31])?;
    let mant_mask = c(e, 0x7f_ffff);
    let m = o(e, Op::BitwiseAnd, u32t, &[a, mant_mask])?;
    let hidden = c(e, 0x80_0000);
    let m = o(e, Op::BitwiseOr, u32t, &[m, hidden])?;
    let q = o(e, Op::ShiftRightLogical, u32t, &[m, shift])?;
    let back = o(e, Op::ShiftLeftLogical, u32t, &[q, shift])?;
    let rem = o(e, Op::ISub, u32t, &[m, back])?;
    let s1 = o(e, Op::ISub, u32t, &[shift, one])?;
    let half = o(e, Op::ShiftLeftLogical, u32t, &[one, s1])?;
    let above = cmp(e, Op::UGreaterThan, rem, half)?;
    let tie = cmp(e, Op::IEqual, rem, half)?;
    let q_odd = o(e, Op::BitwiseAnd, u32t, &[q, one])?;
    let z = c(e, 0);
    let q_is_odd = cmp(e, Op::INotEqual, q_odd, z)?;
    let tie_up = and(e, tie, q_is_odd)?;
    let up = or(e, above, tie_up)?;
    let inc = sel(e, u32t, up, one, z)?;
    let sub = o(e, Op::IAdd, u32t, &[q, inc])?;
    // Pick by range, then the sign; NaN last.
    let min_normal = c(e, 0x3880_0000);
    let is_normal = cmp(e, Op::UGreaterThanEqual, a, min_normal)?;
    let r = sel(e, u32t, is_normal, normal, sub)?;
    let overflow = c(e, 0x477f_f000);
    let is_inf = cmp(e, Op::UGreaterThanEqual, a, overflow)?;
    let inf = c(e, 0x7c00);
    let r = sel(e, u32t, is_inf, inf, r)?;
    let r = o(e, Op::BitwiseOr, u32t, &[r, sign])?;
    let f32_inf = c(e, 0x7f80_0000);
    let is_nan = cmp(e, Op::UGreaterThan, a, f32_inf)?;
    let nan = c(e, 0x7fff);
    sel(e, u32t, is_nan, nan, r)
}

/// Round a 64-bit integer (`signed`: two's complement) to `fmt`; zero is +0.
pub(crate) fn round_int(e: &mut Emitter, v: Word, signed: bool, fmt: Fmt, rnd: Rnd) -> R {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let z64 = e.c_int(64, 0);
    let (neg, mag) = if signed {
        let neg = cmp(e, Op::SLessThan, v, z64)?;
        let n = o(e, Op::ISub, u64t, &[z64, v])?;
        (neg, sel(e, u64t, neg, n, v)?)
    } else {
        (e.c_bool(false), v)
    };
    let (sig, lz) = normalize(e, mag)?;
    let c63 = e.c_u32(63);
    let ex = o(e, Op::ISub, u32t, &[c63, lz])?;
    let f = e.c_bool(false);
    let r = round_core(e, neg, ex, sig, f, fmt, rnd, false)?;
    let is0 = cmp(e, Op::IEqual, mag, z64)?;
    sel(e, u64t, is0, z64, r)
}

/// Round an f64 value to f32 in mode `rnd` (the f32 value).
pub(crate) fn f64_to_f32(e: &mut Emitter, x: Word, rnd: Rnd) -> R {
    let bits = round_f64(e, x, Fmt::F32, rnd, false)?;
    let u32t = e.t_int(32);
    let b = o(e, Op::UConvert, u32t, &[bits])?;
    let ft = e.t_float(32);
    o(e, Op::Bitcast, ft, &[b])
}

/// The neighbour of a float `x` (of `bits` width) one ulp toward +inf
/// (`up`) or -inf. Infinities and NaN are returned unchanged.
pub(crate) fn next_float(e: &mut Emitter, x: Word, bits: u32, up: bool) -> R {
    let it = e.t_int(bits);
    let ft = e.t_float(bits);
    let bt = e.t_bool();
    let b = o(e, Op::Bitcast, it, &[x])?;
    let z = e.c_int(bits, 0);
    let sign = e.c_int(bits, 1u64 << (bits - 1));
    let one = e.c_int(bits, 1);
    let neg = cmp(e, Op::UGreaterThanEqual, b, sign)?;
    // Magnitude grows when moving away from zero.
    let grow = if up { not(e, neg)? } else { neg };
    let inc = o(e, Op::IAdd, it, &[b, one])?;
    let dec = o(e, Op::ISub, it, &[b, one])?;
    let moved = sel(e, it, grow, inc, dec)?;
    // From a zero of either sign the neighbour is the smallest subnormal of the direction.
    let mag_mask = e.c_int(bits, (1u64 << (bits - 1)) - 1);
    let mag = o(e, Op::BitwiseAnd, it, &[b, mag_mask])?;
    let is0 = cmp(e, Op::IEqual, mag, z)?;
    let tiny = if up { one } else { o(e, Op::BitwiseOr, it, &[sign, one])? };
    let moved = sel(e, it, is0, tiny, moved)?;
    let r = o(e, Op::Bitcast, ft, &[moved])?;
    let inf = o(e, Op::IsInf, bt, &[x])?;
    let nan = o(e, Op::IsNan, bt, &[x])?;
    let keep = or(e, inf, nan)?;
    sel(e, ft, keep, x, r)
}

/// Directed rounding from a round-to-nearest result `r` and the sign of the
/// exact error `err` (any float whose sign is that of `exact - r`; zero when
/// exact): step one ulp where the mode asks for it. `r` overflowing to an
/// infinity from finite operands (`finite`) becomes the largest finite
/// value where the mode rounds toward zero.
pub(crate) fn step_toward(e: &mut Emitter, r: Word, err: Word, bits: u32, rnd: Rnd, finite: Word) -> R {
    let ft = e.t_float(bits);
    let z = e.c_float(bits, 0.0);
    let r = match rnd {
        Rnd::Rn | Rnd::Rna => return Ok(r),
        Rnd::Rm => {
            let lt = cmp(e, Op::FOrdLessThan, err, z)?;
            let d = next_float(e, r, bits, false)?;
            sel(e, ft, lt, d, r)?
        }
        Rnd::Rp => {
            let gt = cmp(e, Op::FOrdGreaterThan, err, z)?;
            let u = next_float(e, r, bits, true)?;
            sel(e, ft, gt, u, r)?
        }
        Rnd::Rz => {
            let rpos = cmp(e, Op::FOrdGreaterThan, r, z)?;
            let rneg = cmp(e, Op::FOrdLessThan, r, z)?;
            let elt = cmp(e, Op::FOrdLessThan, err, z)?;
            let egt = cmp(e, Op::FOrdGreaterThan, err, z)?;
            let down = and(e, rpos, elt)?;
            let upw = and(e, rneg, egt)?;
            let d = next_float(e, r, bits, false)?;
            let u = next_float(e, r, bits, true)?;
            let r1 = sel(e, ft, down, d, r)?;
            sel(e, ft, upw, u, r1)?
        }
    };
    // Overflow: the nearest result is infinite but the directed one may not be.
    let bt = e.t_bool();
    let inf = o(e, Op::IsInf, bt, &[r])?;
    let ovf = and(e, inf, finite)?;
    let maxv = if bits == 64 { f64::MAX } else { f32::MAX as f64 };
    let pmax = e.c_float(bits, maxv);
    let nmax = e.c_float(bits, -maxv);
    let pos = cmp(e, Op::FOrdGreaterThan, r, z)?;
    let to_max = match rnd {
        Rnd::Rz => e.c_bool(true),
        Rnd::Rm => pos,
        _ => not(e, pos)?,
    };
    let clamp = and(e, ovf, to_max)?;
    let m = sel(e, ft, pos, pmax, nmax)?;
    sel(e, ft, clamp, m, r)
}

/// Whether every value in `vals` (floats of `bits`) is finite.
pub(crate) fn all_finite(e: &mut Emitter, vals: &[Word]) -> R {
    let bt = e.t_bool();
    let mut acc = e.c_bool(true);
    for &v in vals {
        let inf = o(e, Op::IsInf, bt, &[v])?;
        let nan = o(e, Op::IsNan, bt, &[v])?;
        let bad = or(e, inf, nan)?;
        let ok = not(e, bad)?;
        acc = and(e, acc, ok)?;
    }
    Ok(acc)
}

/// The f32 value of f16 bits (in the low 16 bits of a 32-bit integer): exact;
/// NaN payloads are kept (and made quiet).
pub(crate) fn f16_to_f32(e: &mut Emitter, h: Word) -> R {
    let u32t = e.t_int(32);
    let ft = e.t_float(32);
    let c = |e: &mut Emitter, v: u32| e.c_u32(v);
    let m16 = c(e, 0xffff);
    let h = o(e, Op::BitwiseAnd, u32t, &[h, m16])?;
    let c8000 = c(e, 0x8000);
    let s = o(e, Op::BitwiseAnd, u32t, &[h, c8000])?;
    let c16 = c(e, 16);
    let s = o(e, Op::ShiftLeftLogical, u32t, &[s, c16])?;
    let c7fff = c(e, 0x7fff);
    let mag = o(e, Op::BitwiseAnd, u32t, &[h, c7fff])?;
    let c13 = c(e, 13);
    let sh = o(e, Op::ShiftLeftLogical, u32t, &[mag, c13])?;
    // Normal: rebias by 127 - 15.
    let rb = c(e, 112 << 23);
    let normal = o(e, Op::IAdd, u32t, &[sh, rb])?;
    // Inf/NaN: exponent all ones.
    let infb = c(e, 0x7f80_0000);
    let quiet = c(e, 0x0040_0000);
    let special = o(e, Op::BitwiseOr, u32t, &[sh, infb])?;
    let c3ff = c(e, 0x3ff);
    let mant = o(e, Op::BitwiseAnd, u32t, &[h, c3ff])?;
    let z = c(e, 0);
    let has_m = cmp(e, Op::INotEqual, mant, z)?;
    let q = o(e, Op::BitwiseOr, u32t, &[special, quiet])?;
    let special = sel(e, u32t, has_m, q, special)?;
    // Subnormal (and zero): mant * 2^-24, exact in f32.
    let mf = o(e, Op::ConvertUToF, ft, &[mag])?;
    let scale = e.c_f32(2f32.powi(-24));
    let sf = o(e, Op::FMul, ft, &[mf, scale])?;
    let subn = o(e, Op::Bitcast, u32t, &[sf])?;
    let c7c00 = c(e, 0x7c00);
    let c0400 = c(e, 0x0400);
    let is_special = cmp(e, Op::UGreaterThanEqual, mag, c7c00)?;
    let is_sub = cmp(e, Op::ULessThan, mag, c0400)?;
    let r = sel(e, u32t, is_sub, subn, normal)?;
    let r = sel(e, u32t, is_special, special, r)?;
    let r = o(e, Op::BitwiseOr, u32t, &[r, s])?;
    o(e, Op::Bitcast, ft, &[r])
}

/// The f32 value of bf16 bits (low 16 bits of a 32-bit integer): exact.
pub(crate) fn bf16_to_f32(e: &mut Emitter, h: Word) -> R {
    let u32t = e.t_int(32);
    let ft = e.t_float(32);
    let c16 = e.c_u32(16);
    let r = o(e, Op::ShiftLeftLogical, u32t, &[h, c16])?;
    o(e, Op::Bitcast, ft, &[r])
}
