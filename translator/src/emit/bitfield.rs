//! Bit-field instructions: `bfe` (extract) and `bfi` (insert), with the PTX
//! ISA's meaning for every position and length (both taken modulo 256);
//! SPIR-V's `OpBitField*` leave fields that run past the width undefined.

use super::func::{internal1, Fx};
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, ScalarType};
use crate::diag::Diagnostic;
use rspirv::spirv::Word;

fn bad(inst: &Instruction, want: &str) -> Diagnostic {
    Diagnostic::error(inst.span, format!("'{}' takes {want}", inst.mnemonic()))
}

/// `pos & 0xff` and `len & 0xff` as u32.
fn pos_len(e: &mut Emitter, pos: Word, len: Word) -> Result<(Word, Word), Diagnostic> {
    let u32t = e.t_int(32);
    let ff = e.c_u32(0xff);
    let p = e.b.bitwise_and(u32t, None, pos, ff).map_err(internal1)?;
    let l = e.b.bitwise_and(u32t, None, len, ff).map_err(internal1)?;
    Ok((p, l))
}

fn umin(e: &mut Emitter, a: Word, b: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    super::inst::ext(e, u32t, super::inst::glsl::UMIN, &[a, b])
}

/// A u32 shift amount as an integer of `bits`.
fn amount(e: &mut Emitter, v: Word, bits: u32) -> Result<Word, Diagnostic> {
    if bits == 32 {
        return Ok(v);
    }
    let t = e.t_int(bits);
    e.b.u_convert(t, None, v).map_err(internal1)
}

/// The low `l` bits set (all bits when `l >= bits`), as an integer of `bits`.
fn low_mask(e: &mut Emitter, l: Word, bits: u32) -> Result<Word, Diagnostic> {
    let t = e.t_int(bits);
    let bt = e.t_bool();
    let top = e.c_u32(bits - 1);
    let sh = umin(e, l, top)?;
    let sh = amount(e, sh, bits)?;
    let one = e.c_int(bits, 1);
    let p = e.b.shift_left_logical(t, None, one, sh).map_err(internal1)?;
    let m = e.b.i_sub(t, None, p, one).map_err(internal1)?;
    let n = e.c_u32(bits);
    let all = e.b.u_greater_than_equal(bt, None, l, n).map_err(internal1)?;
    let ones = e.c_int(bits, u64::MAX);
    e.b.select(t, None, all, ones, m).map_err(internal1)
}

fn width(inst: &Instruction) -> Result<(u32, bool), Diagnostic> {
    let t = inst.modifiers.iter().filter_map(|m| ScalarType::from_name(m)).next_back();
    match t {
        Some(ScalarType::U32 | ScalarType::B32) => Ok((32, false)),
        Some(ScalarType::S32) => Ok((32, true)),
        Some(ScalarType::U64 | ScalarType::B64) => Ok((64, false)),
        Some(ScalarType::S64) => Ok((64, true)),
        _ => Err(Diagnostic::error(inst.opcode_span, format!("'{}' needs a 32- or 64-bit type", inst.mnemonic()))),
    }
}

/// `bfe.type d, a, pos, len`: bits `pos..pos+len` of `a`, zero- or
/// sign-extended (the sign is the field's last bit inside the width).
pub(crate) fn bfe(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let [d, a, b, c] = inst.operands.as_slice() else {
        return Err(bad(inst, "d, a, a position and a length"));
    };
    let (bits, signed) = width(inst)?;
    let k = K::Int(bits);
    let t = e.t_int(bits);
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let va = get(e, fx, a, k, signed)?;
    let vp = get(e, fx, b, K::Int(32), false)?;
    let vl = get(e, fx, c, K::Int(32), false)?;
    let (pos, len) = pos_len(e, vp, vl)?;
    let n = e.c_u32(bits);
    let top = e.c_u32(bits - 1);
    let pos_c = umin(e, pos, n)?;
    let avail = e.b.i_sub(u32t, None, n, pos_c).map_err(internal1)?;
    let l = umin(e, len, avail)?;
    let sh = umin(e, pos_c, top)?;
    let sh = amount(e, sh, bits)?;
    let x = e.b.shift_right_logical(t, None, va, sh).map_err(internal1)?;
    let mask = low_mask(e, l, bits)?;
    let field = e.b.bitwise_and(t, None, x, mask).map_err(internal1)?;
    let r = if signed {
        // Sign bit: a[min(pos + len - 1, msb)], none when len == 0.
        let one32 = e.c_u32(1);
        let end = e.b.i_add(u32t, None, pos, len).map_err(internal1)?;
        let last = e.b.i_sub(u32t, None, end, one32).map_err(internal1)?;
        let si = umin(e, last, top)?;
        let si = amount(e, si, bits)?;
        let s = e.b.shift_right_logical(t, None, va, si).map_err(internal1)?;
        let one = e.c_int(bits, 1);
        let sbit = e.b.bitwise_and(t, None, s, one).map_err(internal1)?;
        let has = e.b.i_equal(bt, None, sbit, one).map_err(internal1)?;
        let zero32 = e.c_u32(0);
        let nonempty = e.b.i_not_equal(bt, None, len, zero32).map_err(internal1)?;
        let neg = e.b.logical_and(bt, None, has, nonempty).map_err(internal1)?;
        let fill = e.b.not(t, None, mask).map_err(internal1)?;
        let filled = e.b.bitwise_or(t, None, field, fill).map_err(internal1)?;
        e.b.select(t, None, neg, filled, field).map_err(internal1)?
    } else {
        field
    };
    set(e, fx, d, r, k, signed)
}

/// `bfi.type f, a, b, pos, len`: `b` with bits `pos..pos+len` (those inside
/// the width) replaced by the low bits of `a`.
pub(crate) fn bfi(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let [f, a, b, c, d] = inst.operands.as_slice() else {
        return Err(bad(inst, "f, a, b, a position and a length"));
    };
    let (bits, _) = width(inst)?;
    let k = K::Int(bits);
    let t = e.t_int(bits);
    let bt = e.t_bool();
    let va = get(e, fx, a, k, false)?;
    let vb = get(e, fx, b, k, false)?;
    let vp = get(e, fx, c, K::Int(32), false)?;
    let vl = get(e, fx, d, K::Int(32), false)?;
    let (pos, len) = pos_len(e, vp, vl)?;
    let n = e.c_u32(bits);
    let top = e.c_u32(bits - 1);
    let outside = e.b.u_greater_than_equal(bt, None, pos, n).map_err(internal1)?;
    let pos_s = umin(e, pos, top)?;
    let mask = low_mask(e, len, bits)?;
    let sh = amount(e, pos_s, bits)?;
    let mask = e.b.shift_left_logical(t, None, mask, sh).map_err(internal1)?;
    let keep = e.b.not(t, None, mask).map_err(internal1)?;
    let kept = e.b.bitwise_and(t, None, vb, keep).map_err(internal1)?;
    let moved = e.b.shift_left_logical(t, None, va, sh).map_err(internal1)?;
    let ins = e.b.bitwise_and(t, None, moved, mask).map_err(internal1)?;
    let r = e.b.bitwise_or(t, None, kept, ins).map_err(internal1)?;
    let r = e.b.select(t, None, outside, vb, r).map_err(internal1)?;
    set(e, fx, f, r, k, false)
}
