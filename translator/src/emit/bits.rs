//! Bit-manipulation and small-integer instructions whose PTX results are
//! defined for every input, including field positions, lengths and shift
//! counts at or beyond the width (where SPIR-V's own `BitFieldExtract`,
//! `BitFieldInsert` and shifts are undefined): `bfe`, `bfi`, `prmt` (every
//! mode), `shf`, `bmsk`, `szext`, `fns`, `lop3`, `dp4a`, `dp2a`, `sad`,
//! `mul24`, `mad24`, `bfind` on 64 bits, and the packed `.u16x2`/`.s16x2`
//! forms of `add`/`sub`/`min`/`max`.
//!
//! Every shift emitted here has a count below its operand's width: counts
//! are clamped first and the out-of-range cases are selected explicitly.

use super::func::Fx;
use super::inst::{ext, glsl};
use super::rounding::{and, cmp, msb64, o, or, sel, R};
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, Operand, ScalarType};
use crate::diag::Diagnostic;
use rspirv::spirv::{Op, Word};

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    super::float::unsupported(inst, why)
}

fn operands<const N: usize>(inst: &Instruction) -> Result<&[Operand; N], Diagnostic> {
    inst.operands.as_slice().try_into().map_err(|_| {
        Diagnostic::error(
            inst.span,
            format!("'{}' expects {N} operands, found {}", inst.mnemonic(), inst.operands.len()),
        )
    })
}

/// Whether this module handles the instruction.
pub(crate) fn handles(inst: &Instruction) -> bool {
    matches!(
        inst.opcode.as_str(),
        "bfe"
            | "bfi"
            | "prmt"
            | "shf"
            | "bmsk"
            | "szext"
            | "fns"
            | "lop3"
            | "dp4a"
            | "dp2a"
            | "sad"
            | "mul24"
            | "mad24"
    )
}

/// Emit one of the instructions [`handles`] accepts.
pub(crate) fn emit(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    match inst.opcode.as_str() {
        "bfe" => bfe(e, fx, inst, t),
        "bfi" => bfi(e, fx, inst, t),
        "prmt" => prmt(e, fx, inst),
        "shf" => shf(e, fx, inst),
        "bmsk" => bmsk(e, fx, inst),
        "szext" => szext(e, fx, inst, t),
        "fns" => fns(e, fx, inst),
        "lop3" => lop3(e, fx, inst),
        "dp4a" | "dp2a" => dp(e, fx, inst),
        "sad" => sad(e, fx, inst, t),
        "mul24" | "mad24" => mul24(e, fx, inst, t),
        _ => Err(unsupported(inst, "")),
    }
}

/// `(1 << n) - 1` for `n` in 0..=255 (all ones from `bits` on), as an integer of `bits`.
fn low_mask(e: &mut Emitter, n: Word, bits: u32) -> R {
    let it = e.t_int(bits);
    let u32t = e.t_int(32);
    let w = e.c_u32(bits);
    let full = cmp(e, Op::UGreaterThanEqual, n, w)?;
    let wm = e.c_u32(bits - 1);
    let nc = ext(e, u32t, glsl::UMIN, &[n, wm])?;
    let nw = e.convert(nc, K::Int(32), K::Int(bits), false)?;
    let one = e.c_int(bits, 1);
    let s = o(e, Op::ShiftLeftLogical, it, &[one, nw])?;
    let m = o(e, Op::ISub, it, &[s, one])?;
    let ones = e.c_int(bits, u64::MAX);
    sel(e, it, full, ones, m)
}

/// `x << n` / `x >> n` (logical) with `n` (32-bit) at or beyond the width giving 0.
fn shift_or_zero(e: &mut Emitter, x: Word, n: Word, bits: u32, left: bool) -> R {
    let it = e.t_int(bits);
    let u32t = e.t_int(32);
    let w = e.c_u32(bits);
    let big = cmp(e, Op::UGreaterThanEqual, n, w)?;
    let wm = e.c_u32(bits - 1);
    let nc = ext(e, u32t, glsl::UMIN, &[n, wm])?;
    let nw = e.convert(nc, K::Int(32), K::Int(bits), false)?;
    let s = o(e, if left { Op::ShiftLeftLogical } else { Op::ShiftRightLogical }, it, &[x, nw])?;
    let z = e.c_int(bits, 0);
    sel(e, it, big, z, s)
}

fn byte_of(e: &mut Emitter, v: Word, mask: u32) -> R {
    let u32t = e.t_int(32);
    let m = e.c_u32(mask);
    o(e, Op::BitwiseAnd, u32t, &[v, m])
}

/// `bfe.type d, a, pos, len`: extract `len` bits from `pos` (both taken mod
/// 256), zero- or sign-extended; bits beyond the source's width repeat the
/// sign bit (signed) or are 0.
fn bfe(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let [d, a, b, c] = operands::<4>(inst)?;
    let bits = t.size() * 8;
    if bits != 32 && bits != 64 {
        return Err(unsupported(inst, ""));
    }
    let k = K::Int(bits);
    let it = e.t_int(bits);
    let u32t = e.t_int(32);
    let va = get(e, fx, a, k, false)?;
    let pos = get(e, fx, b, K::Int(32), false)?;
    let len = get(e, fx, c, K::Int(32), false)?;
    let pos = byte_of(e, pos, 0xff)?;
    let len = byte_of(e, len, 0xff)?;
    let x = shift_or_zero(e, va, pos, bits, false)?;
    let m = low_mask(e, len, bits)?;
    let field = o(e, Op::BitwiseAnd, it, &[x, m])?;
    let r = if t.is_signed() {
        // sbit = a[min(pos + len - 1, msb)], 0 when len == 0.
        let one = e.c_u32(1);
        let top = o(e, Op::IAdd, u32t, &[pos, len])?;
        let top = o(e, Op::ISub, u32t, &[top, one])?;
        let msb = e.c_u32(bits - 1);
        let top = ext(e, u32t, glsl::UMIN, &[top, msb])?;
        let tw = e.convert(top, K::Int(32), K::Int(bits), false)?;
        let sh = o(e, Op::ShiftRightLogical, it, &[va, tw])?;
        let onew = e.c_int(bits, 1);
        let sb = o(e, Op::BitwiseAnd, it, &[sh, onew])?;
        let zw = e.c_int(bits, 0);
        let z32 = e.c_u32(0);
        let len0 = cmp(e, Op::IEqual, len, z32)?;
        let sbit = cmp(e, Op::INotEqual, sb, zw)?;
        let nl = super::rounding::not(e, len0)?;
        let sbit = super::rounding::and(e, sbit, nl)?;
        // Valid bits: n = min(len, max(W - pos, 0)).
        let w = e.c_u32(bits);
        let room = o(e, Op::ISub, u32t, &[w, pos])?;
        let over = cmp(e, Op::UGreaterThanEqual, pos, w)?;
        let room = sel(e, u32t, over, z32, room)?;
        let n = ext(e, u32t, glsl::UMIN, &[len, room])?;
        let nm = low_mask(e, n, bits)?;
        let fill = o(e, Op::Not, it, &[nm])?;
        let f2 = o(e, Op::BitwiseOr, it, &[field, fill])?;
        sel(e, it, sbit, f2, field)?
    } else {
        field
    };
    set(e, fx, d, r, k, false)
}

/// `bfi.type f, a, b, pos, len`: insert the low `len` bits of `a` into `b` at `pos`.
fn bfi(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let [d, a, b, c, l] = operands::<5>(inst)?;
    let bits = t.size() * 8;
    if bits != 32 && bits != 64 {
        return Err(unsupported(inst, ""));
    }
    let k = K::Int(bits);
    let it = e.t_int(bits);
    let va = get(e, fx, a, k, false)?;
    let vb = get(e, fx, b, k, false)?;
    let pos = get(e, fx, c, K::Int(32), false)?;
    let len = get(e, fx, l, K::Int(32), false)?;
    let pos = byte_of(e, pos, 0xff)?;
    let len = byte_of(e, len, 0xff)?;
    let m = low_mask(e, len, bits)?;
    let im = shift_or_zero(e, m, pos, bits, true)?;
    let ins = shift_or_zero(e, va, pos, bits, true)?;
    let ins = o(e, Op::BitwiseAnd, it, &[ins, im])?;
    let keep = o(e, Op::Not, it, &[im])?;
    let kb = o(e, Op::BitwiseAnd, it, &[vb, keep])?;
    let r = o(e, Op::BitwiseOr, it, &[kb, ins])?;
    set(e, fx, d, r, k, false)
}

/// Byte selectors (default-mode nibbles, no sign bits) of the special
/// `prmt` modes for `c[1:0]` = 0..3 (PTX ISA, "prmt": d.b3 d.b2 d.b1 d.b0).
fn prmt_mode_selectors(mode: &str) -> Option<[u32; 4]> {
    let t: [[u32; 4]; 4] = match mode {
        "f4e" => [[3, 2, 1, 0], [4, 3, 2, 1], [5, 4, 3, 2], [6, 5, 4, 3]],
        "b4e" => [[5, 6, 7, 0], [6, 7, 0, 1], [7, 0, 1, 2], [0, 1, 2, 3]],
        "rc8" => [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
        "ecl" => [[3, 2, 1, 0], [3, 2, 1, 1], [3, 2, 2, 2], [3, 3, 3, 3]],
        "ecr" => [[0, 0, 0, 0], [1, 1, 1, 0], [2, 2, 1, 0], [3, 2, 1, 0]],
        "rc16" => [[1, 0, 1, 0], [3, 2, 3, 2], [1, 0, 1, 0], [3, 2, 3, 2]],
        _ => return None,
    };
    Some(t.map(|[b3, b2, b1, b0]| b0 | (b1 << 4) | (b2 << 8) | (b3 << 12)))
}

/// `prmt.b32{.mode} d, a, b, c`: pick bytes of `{b, a}`.
fn prmt(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let [d, a, b, c] = operands::<4>(inst)?;
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let va = get(e, fx, a, K::Int(32), false)?;
    let vb = get(e, fx, b, K::Int(32), false)?;
    let vc = get(e, fx, c, K::Int(32), false)?;
    let mode = inst.modifiers.iter().find(|m| prmt_mode_selectors(m).is_some());
    let selector = match mode {
        Some(m) => {
            let Some(tab) = prmt_mode_selectors(m) else { return Err(unsupported(inst, "")) };
            let s = byte_of(e, vc, 3)?;
            let mut r = e.c_u32(tab[3]);
            for i in (0..3).rev() {
                let ci = e.c_u32(i as u32);
                let is = cmp(e, Op::IEqual, s, ci)?;
                let ti = e.c_u32(tab[i]);
                r = sel(e, u32t, is, ti, r)?;
            }
            r
        }
        None => vc,
    };
    let x = e.make_u64(va, vb)?;
    let mut acc = e.c_u32(0);
    for i in 0..4u32 {
        let sh = e.c_u32(4 * i);
        let s = o(e, Op::ShiftRightLogical, u32t, &[selector, sh])?;
        let s = byte_of(e, s, 0xf)?;
        let idx = byte_of(e, s, 7)?;
        let c8 = e.c_u32(8);
        let bsh = o(e, Op::IMul, u32t, &[idx, c8])?;
        let bsh = e.convert(bsh, K::Int(32), K::Int(64), false)?;
        let byte = o(e, Op::ShiftRightLogical, u64t, &[x, bsh])?;
        let byte = o(e, Op::UConvert, u32t, &[byte])?;
        let byte = byte_of(e, byte, 0xff)?;
        let r = if mode.is_none() {
            // Sign replication when selector bit 3 is set.
            let sgn = byte_of(e, s, 8)?;
            let z = e.c_u32(0);
            let rep = cmp(e, Op::INotEqual, sgn, z)?;
            let top = byte_of(e, byte, 0x80)?;
            let neg = cmp(e, Op::INotEqual, top, z)?;
            let ff = e.c_u32(0xff);
            let filled = sel(e, u32t, neg, ff, z)?;
            sel(e, u32t, rep, filled, byte)?
        } else {
            byte
        };
        let osh = e.c_u32(8 * i);
        let r = o(e, Op::ShiftLeftLogical, u32t, &[r, osh])?;
        acc = o(e, Op::BitwiseOr, u32t, &[acc, r])?;
    }
    set(e, fx, d, acc, K::Int(32), false)
}

/// `shf.{l,r}.{clamp,wrap}.b32 d, a, b, c`: funnel shift of `{b, a}`.
fn shf(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let [d, a, b, c] = operands::<4>(inst)?;
    let left = inst.has("l");
    if !left && !inst.has("r") {
        return Err(unsupported(inst, "needs .l or .r"));
    }
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let va = get(e, fx, a, K::Int(32), false)?;
    let vb = get(e, fx, b, K::Int(32), false)?;
    let vc = get(e, fx, c, K::Int(32), false)?;
    let n = if inst.has("wrap") {
        byte_of(e, vc, 31)?
    } else {
        let c32 = e.c_u32(32);
        ext(e, u32t, glsl::UMIN, &[vc, c32])?
    };
    let x = e.make_u64(va, vb)?;
    let n64 = e.convert(n, K::Int(32), K::Int(64), false)?;
    let r = if left {
        let s = o(e, Op::ShiftLeftLogical, u64t, &[x, n64])?;
        let c32 = e.c_int(64, 32);
        let h = o(e, Op::ShiftRightLogical, u64t, &[s, c32])?;
        o(e, Op::UConvert, u32t, &[h])?
    } else {
        let s = o(e, Op::ShiftRightLogical, u64t, &[x, n64])?;
        o(e, Op::UConvert, u32t, &[s])?
    };
    set(e, fx, d, r, K::Int(32), false)
}

/// The position operand of `bmsk`/`szext`: `& 31` with `.wrap`, `min(_, 32)` with `.clamp`.
fn clamp_or_wrap(e: &mut Emitter, inst: &Instruction, v: Word) -> R {
    let u32t = e.t_int(32);
    if inst.has("wrap") {
        byte_of(e, v, 31)
    } else if inst.has("clamp") {
        let c32 = e.c_u32(32);
        ext(e, u32t, glsl::UMIN, &[v, c32])
    } else {
        Err(unsupported(inst, "needs .clamp or .wrap"))
    }
}

/// `bmsk.mode.b32 d, a, b`: `b` ones starting at bit `a`.
fn bmsk(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let [d, a, b] = operands::<3>(inst)?;
    let va = get(e, fx, a, K::Int(32), false)?;
    let vb = get(e, fx, b, K::Int(32), false)?;
    let pos = clamp_or_wrap(e, inst, va)?;
    let len = clamp_or_wrap(e, inst, vb)?;
    let m = low_mask(e, len, 32)?;
    let r = shift_or_zero(e, m, pos, 32, true)?;
    set(e, fx, d, r, K::Int(32), false)
}

/// `szext.mode.type d, a, b`: the low `b` bits of `a`, sign- or zero-extended.
fn szext(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let [d, a, b] = operands::<3>(inst)?;
    let u32t = e.t_int(32);
    let va = get(e, fx, a, K::Int(32), false)?;
    let vb = get(e, fx, b, K::Int(32), false)?;
    let n = clamp_or_wrap(e, inst, vb)?;
    let m = low_mask(e, n, 32)?;
    let low = o(e, Op::BitwiseAnd, u32t, &[va, m])?;
    let r = if t.is_signed() {
        // Sign bit at n - 1 (none for n == 0).
        let z = e.c_u32(0);
        let one = e.c_u32(1);
        let n0 = cmp(e, Op::IEqual, n, z)?;
        let nm1 = o(e, Op::ISub, u32t, &[n, one])?;
        let nm1 = sel(e, u32t, n0, z, nm1)?;
        let sb = o(e, Op::ShiftRightLogical, u32t, &[va, nm1])?;
        let sb = byte_of(e, sb, 1)?;
        let neg = cmp(e, Op::INotEqual, sb, z)?;
        let nn = super::rounding::not(e, n0)?;
        let neg = super::rounding::and(e, neg, nn)?;
        let fill = o(e, Op::Not, u32t, &[m])?;
        let ext_v = o(e, Op::BitwiseOr, u32t, &[low, fill])?;
        sel(e, u32t, neg, ext_v, low)?
    } else {
        low
    };
    set(e, fx, d, r, K::Int(32), t.is_signed())
}

/// `fns.b32 d, mask, base, offset`: the position of the `offset`-th set bit
/// of `mask` counting from `base` (upward for positive offsets, downward for
/// negative ones; offset 0 asks whether bit `base` itself is set), or
/// 0xffffffff when there is none.
fn fns(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let [d, a, b, c] = operands::<4>(inst)?;
    let u32t = e.t_int(32);
    let mask = get(e, fx, a, K::Int(32), false)?;
    let base = get(e, fx, b, K::Int(32), false)?;
    let off = get(e, fx, c, K::Int(32), false)?;
    let base = byte_of(e, base, 31)?;
    let z = e.c_u32(0);
    let none = e.c_u32(u32::MAX);
    // Offset 0: base if set.
    let bit = o(e, Op::ShiftRightLogical, u32t, &[mask, base])?;
    let bit = byte_of(e, bit, 1)?;
    let set0 = cmp(e, Op::INotEqual, bit, z)?;
    let r0 = sel(e, u32t, set0, base, none)?;
    // Upward: bits at and above base, then drop the lowest (n-1) set bits.
    let neg = cmp(e, Op::SLessThan, off, z)?;
    let ones = e.c_u32(u32::MAX);
    let up_mask = o(e, Op::ShiftLeftLogical, u32t, &[ones, base])?;
    let c31 = e.c_u32(31);
    let inv = o(e, Op::ISub, u32t, &[c31, base])?;
    let down_mask = o(e, Op::ShiftRightLogical, u32t, &[ones, inv])?;
    let mut up = o(e, Op::BitwiseAnd, u32t, &[mask, up_mask])?;
    let mut down = o(e, Op::BitwiseAnd, u32t, &[mask, down_mask])?;
    let one = e.c_u32(1);
    let absn = ext(e, u32t, glsl::SABS, &[off])?;
    // Unrolled: clear the lowest (highest) set bit while more remain to skip.
    let mut up_res = none;
    let mut down_res = none;
    for i in 1..=32u32 {
        let ci = e.c_u32(i);
        let is_i = cmp(e, Op::IEqual, absn, ci)?;
        let lsb = ext(e, u32t, glsl::FIND_ILSB, &[up])?;
        let msb = ext(e, u32t, glsl::FIND_UMSB, &[down])?;
        up_res = sel(e, u32t, is_i, lsb, up_res)?;
        down_res = sel(e, u32t, is_i, msb, down_res)?;
        let um1 = o(e, Op::ISub, u32t, &[up, one])?;
        up = o(e, Op::BitwiseAnd, u32t, &[up, um1])?;
        let dz = cmp(e, Op::IEqual, down, z)?;
        let msbc = ext(e, u32t, glsl::UMIN, &[msb, c31])?;
        let top = o(e, Op::ShiftLeftLogical, u32t, &[one, msbc])?;
        let cleared = o(e, Op::BitwiseXor, u32t, &[down, top])?;
        down = sel(e, u32t, dz, down, cleared)?;
    }
    let r = sel(e, u32t, neg, down_res, up_res)?;
    let is0 = cmp(e, Op::IEqual, off, z)?;
    let r = sel(e, u32t, is0, r0, r)?;
    set(e, fx, d, r, K::Int(32), false)
}

/// `lop3.b32 d, a, b, c, immLut`: any three-input bitwise function; with
/// `.and`/`.or` (`lop3.BoolOp.b32 d|p, a, b, c, immLut, q`) also the
/// predicate `p = (d != 0) BoolOp q` (`d` may be the sink `_`).
fn lop3(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let bool_op = ["and", "or"].into_iter().find(|m| inst.has(m));
    let (d, a, b, c, lut, pq) = match (inst.operands.as_slice(), bool_op) {
        ([d, a, b, c, lut], None) => (d, a, b, c, lut, None),
        ([Operand::Pair(_, d, p), a, b, c, lut, q], Some(op)) => (&**d, a, b, c, lut, Some((op, &**p, q))),
        _ => {
            let want = if bool_op.is_some() { "d|p, a, b, c, immLut, q" } else { "d, a, b, c, immLut" };
            return Err(Diagnostic::error(inst.span, format!("'{}' expects operands {want}", inst.mnemonic())));
        }
    };
    let Operand::Int(_, lut) = lut else {
        return Err(unsupported(inst, "the lookup table must be an immediate"));
    };
    let lut = (*lut & 0xff) as u32;
    let u32t = e.t_int(32);
    let va = get(e, fx, a, K::Int(32), false)?;
    let vb = get(e, fx, b, K::Int(32), false)?;
    let vc = get(e, fx, c, K::Int(32), false)?;
    let na = o(e, Op::Not, u32t, &[va])?;
    let nb = o(e, Op::Not, u32t, &[vb])?;
    let nc = o(e, Op::Not, u32t, &[vc])?;
    let mut acc = e.c_u32(0);
    // Bit i of the table is the result for a = i>>2&1, b = i>>1&1, c = i&1
    // (the table is F(0xF0, 0xCC, 0xAA)).
    for i in 0..8u32 {
        if lut & (1 << i) == 0 {
            continue;
        }
        let x = if i & 4 != 0 { va } else { na };
        let y = if i & 2 != 0 { vb } else { nb };
        let z = if i & 1 != 0 { vc } else { nc };
        let t = o(e, Op::BitwiseAnd, u32t, &[x, y])?;
        let t = o(e, Op::BitwiseAnd, u32t, &[t, z])?;
        acc = o(e, Op::BitwiseOr, u32t, &[acc, t])?;
    }
    if let Some((op, p, q)) = pq {
        let z = e.c_u32(0);
        let nz = cmp(e, Op::INotEqual, acc, z)?;
        let vq = get(e, fx, q, K::Pred, false)?;
        let r = if op == "and" { and(e, nz, vq)? } else { or(e, nz, vq)? };
        set(e, fx, p, r, K::Pred, false)?;
    }
    set(e, fx, d, acc, K::Int(32), false)
}

/// Lane `i` of `bits` width of `v` (32-bit), sign- or zero-extended to 32 bits.
fn sub_lane(e: &mut Emitter, v: Word, i: u32, bits: u32, signed: bool) -> R {
    let u32t = e.t_int(32);
    let up = e.c_u32(32 - bits * (i + 1));
    let x = o(e, Op::ShiftLeftLogical, u32t, &[v, up])?;
    let down = e.c_u32(32 - bits);
    o(e, if signed { Op::ShiftRightArithmetic } else { Op::ShiftRightLogical }, u32t, &[x, down])
}

/// `dp4a.atype.btype d, a, b, c` and `dp2a.{lo,hi}.atype.btype d, a, b, c`.
fn dp(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let [d, a, b, c] = operands::<4>(inst)?;
    let tys: Vec<ScalarType> = inst.modifiers.iter().filter_map(|m| ScalarType::from_name(m)).collect();
    let [ta, tb] = tys.as_slice() else {
        return Err(Diagnostic::error(inst.opcode_span, format!("'{}' needs two types", inst.mnemonic())));
    };
    let (sa, sb) = (ta.is_signed(), tb.is_signed());
    let u32t = e.t_int(32);
    let va = get(e, fx, a, K::Int(32), false)?;
    let vb = get(e, fx, b, K::Int(32), false)?;
    let mut acc = get(e, fx, c, K::Int(32), false)?;
    if inst.opcode == "dp4a" {
        for i in 0..4 {
            let x = sub_lane(e, va, i, 8, sa)?;
            let y = sub_lane(e, vb, i, 8, sb)?;
            let p = o(e, Op::IMul, u32t, &[x, y])?;
            acc = o(e, Op::IAdd, u32t, &[acc, p])?;
        }
    } else {
        let base = if inst.has("hi") { 2 } else { 0 };
        for i in 0..2 {
            let x = sub_lane(e, va, i, 16, sa)?;
            let y = sub_lane(e, vb, base + i, 8, sb)?;
            let p = o(e, Op::IMul, u32t, &[x, y])?;
            acc = o(e, Op::IAdd, u32t, &[acc, p])?;
        }
    }
    set(e, fx, d, acc, K::Int(32), false)
}

/// `sad.type d, a, b, c`: `c + |a - b|`.
fn sad(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let [d, a, b, c] = operands::<4>(inst)?;
    let bits = t.size() * 8;
    let k = K::Int(bits);
    let it = e.t_int(bits);
    let s = t.is_signed();
    let va = get(e, fx, a, k, s)?;
    let vb = get(e, fx, b, k, s)?;
    let vc = get(e, fx, c, k, s)?;
    let lt = cmp(e, if s { Op::SLessThan } else { Op::ULessThan }, va, vb)?;
    let d1 = o(e, Op::ISub, it, &[va, vb])?;
    let d2 = o(e, Op::ISub, it, &[vb, va])?;
    let diff = sel(e, it, lt, d2, d1)?;
    let r = o(e, Op::IAdd, it, &[vc, diff])?;
    set(e, fx, d, r, k, s)
}

/// `mul24.{lo,hi}.type d, a, b` and `mad24.{lo,hi}{.sat}.type d, a, b, c`:
/// products of the low 24 bits (sign-extended for `.s32`); `.lo` keeps bits
/// 0..32 of the 48-bit product, `.hi` bits 16..48.
fn mul24(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let s = t.is_signed();
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let ops = inst.operands.as_slice();
    let (d, a, b, c) = match (inst.opcode.as_str(), ops) {
        ("mul24", [d, a, b]) => (d, a, b, None),
        ("mad24", [d, a, b, c]) => (d, a, b, Some(c)),
        _ => return Err(Diagnostic::error(inst.span, format!("wrong operands for '{}'", inst.mnemonic()))),
    };
    let va = get(e, fx, a, K::Int(32), false)?;
    let vb = get(e, fx, b, K::Int(32), false)?;
    let x = sub_lane(e, va, 0, 24, s)?;
    let y = sub_lane(e, vb, 0, 24, s)?;
    let wx = e.convert(x, K::Int(32), K::Int(64), s)?;
    let wy = e.convert(y, K::Int(32), K::Int(64), s)?;
    let p = o(e, Op::IMul, u64t, &[wx, wy])?;
    let hi = inst.has("hi");
    let part = if hi {
        let c16 = e.c_int(64, 16);
        o(e, Op::ShiftRightLogical, u64t, &[p, c16])?
    } else {
        p
    };
    let r = match c {
        None => o(e, Op::UConvert, u32t, &[part])?,
        Some(c) => {
            let vc = get(e, fx, c, K::Int(32), false)?;
            if inst.has("sat") {
                if !(hi && s) {
                    return Err(unsupported(inst, ".sat is only for mad24.hi.s32"));
                }
                // The 32-bit product part plus c, saturated to s32.
                let p32 = o(e, Op::UConvert, u32t, &[part])?;
                let w = e.convert(p32, K::Int(32), K::Int(64), true)?;
                let wc = e.convert(vc, K::Int(32), K::Int(64), true)?;
                let sum = o(e, Op::IAdd, u64t, &[w, wc])?;
                let lo = e.c_int(64, i32::MIN as i64 as u64);
                let hi_c = e.c_int(64, i32::MAX as u64);
                let sum = ext(e, u64t, glsl::SMAX, &[sum, lo])?;
                let sum = ext(e, u64t, glsl::SMIN, &[sum, hi_c])?;
                o(e, Op::UConvert, u32t, &[sum])?
            } else {
                let p32 = o(e, Op::UConvert, u32t, &[part])?;
                o(e, Op::IAdd, u32t, &[p32, vc])?
            }
        }
    };
    set(e, fx, d, r, K::Int(32), s)
}

/// `bfind{.shiftamt}.{u64,s64} d, a`: the position of the most significant
/// non-sign bit, 0xffffffff when there is none.
pub(crate) fn bfind64(e: &mut Emitter, v: Word, signed: bool, shiftamt: bool) -> R {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let x = if signed {
        // For negative values look for the highest 0 bit: complement.
        let z = e.c_int(64, 0);
        let neg = cmp(e, Op::SLessThan, v, z)?;
        let n = o(e, Op::Not, u64t, &[v])?;
        sel(e, u64t, neg, n, v)?
    } else {
        v
    };
    let m = msb64(e, x)?;
    if !shiftamt {
        return Ok(m);
    }
    let c63 = e.c_u32(63);
    let r = o(e, Op::ISub, u32t, &[c63, m])?;
    let m1 = e.c_u32(u32::MAX);
    let none = cmp(e, Op::IEqual, m, m1)?;
    sel(e, u32t, none, m1, r)
}

/// Packed 16-bit `add`/`sub`/`min`/`max` (`.u16x2`, `.s16x2`; `.sat` for
/// add/sub, `.relu` for signed min/max).
pub(crate) fn packed16(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, signed: bool) -> Result<(), Diagnostic> {
    let [d, a, b] = operands::<3>(inst)?;
    let u32t = e.t_int(32);
    let va = get(e, fx, a, K::Int(32), false)?;
    let vb = get(e, fx, b, K::Int(32), false)?;
    let mut lanes = Vec::new();
    for i in 0..2 {
        let x = sub_lane(e, va, i, 16, signed)?;
        let y = sub_lane(e, vb, i, 16, signed)?;
        let r = match inst.opcode.as_str() {
            "add" | "sub" => {
                let r = o(e, if inst.opcode == "add" { Op::IAdd } else { Op::ISub }, u32t, &[x, y])?;
                if inst.has("sat") {
                    let (lo, hi) = if signed { (-32768i32 as u32, 32767u32) } else { (0, 65535) };
                    let lo = e.c_u32(lo);
                    let hi = e.c_u32(hi);
                    let r = ext(e, u32t, glsl::SMAX, &[r, lo])?;
                    ext(e, u32t, glsl::SMIN, &[r, hi])?
                } else {
                    r
                }
            }
            "min" | "max" => {
                let f = match (inst.opcode.as_str(), signed) {
                    ("min", true) => glsl::SMIN,
                    ("min", false) => glsl::UMIN,
                    ("max", true) => glsl::SMAX,
                    _ => glsl::UMAX,
                };
                let r = ext(e, u32t, f, &[x, y])?;
                if inst.has("relu") {
                    let z = e.c_u32(0);
                    ext(e, u32t, glsl::SMAX, &[r, z])?
                } else {
                    r
                }
            }
            _ => return Err(unsupported(inst, "")),
        };
        let m = e.c_u32(0xffff);
        lanes.push(o(e, Op::BitwiseAnd, u32t, &[r, m])?);
    }
    let r = super::half::pack(e, &lanes)?;
    set(e, fx, d, r, K::Int(32), false)
}
