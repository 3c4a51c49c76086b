//! Warpgroup matrix multiply-accumulate (sm_90a): `wgmma.mma_async` and
//! `wgmma.fence`/`commit_group`/`wait_group`.
//!
//! A warpgroup is four consecutive warps; `wgmma.mma_async` computes a
//! 64×N×K product whose D is spread over its 128 threads. It runs here
//! synchronously, at the instruction, so `fence`, `commit_group` and
//! `wait_group` have nothing left to order and emit nothing.
//!
//! # Fragments (CUTLASS's `CLayout_64xN`, the ISA's figures)
//! Warp `w` of the warpgroup owns rows `16w..16w+15`; with `g = lane >> 2`,
//! `t = lane & 3`, D element `i` is at row `16w + g + 8·((i >> 1) & 1)`,
//! column `2t + (i & 1) + 8·(i >> 2)`. An A in registers has, in each warp,
//! the layout of `mma.m16n8kK`'s A (see [`super::mma`]).
//!
//! # Matrices in shared memory
//! A descriptor (64 bits) gives the start address (bits 0–13, `>> 4`), the
//! leading- and stride-dimension byte offsets (LBO bits 16–29, SBO bits
//! 32–45, `>> 4`) and the swizzle mode (bits 62–63: none, 128, 64 or 32
//! bytes). With `e` bytes per element, `T = 16 / e`, a swizzle width `S`
//! and `W = S / 16`, element (`r`, `k`) of a K-major matrix (`r` the row of A
//! or the column of B) is at byte offset
//! - no swizzle: `(r % 8)·16 + (r / 8)·SBO + (k % T)·e + (k / T)·LBO`,
//! - swizzled: `(r % 8)·S + (r / 8)·SBO + k·e`;
//!
//! and element (`m`, `k`) of an MN-major one (`imm-trans` = 1)
//! - no swizzle: `(m % T)·e + (m / T)·SBO + (k % 8)·16 + (k / 8)·LBO`,
//! - swizzled: `(m % WT)·e + (m / WT)·LBO + (k % 8)·S + (k / 8)·SBO`.
//!
//! The swizzle then XORs address bits `[4, 4 + b)` with bits `[7, 7 + b)`
//! (`b` = 3, 2, 1 for 128, 64, 32 bytes) of the shared-memory address; the
//! base-offset field is not needed for that (the XOR uses the address
//! itself). Each lane loads the elements its D elements need.
//!
//! # Numerics
//! As [`super::mma`]: exact products summed in `k` order from D (or from
//! zero when `scale-d` is false), rounding to f32 after each addition;
//! `imm-scale-a`/`imm-scale-b` of -1 negate A or B.

use super::func::Fx;
use super::mma::{self, Acc, Elem, Tile};
use super::rounding::{cmp, o, sel, Rnd, R};
use super::values::{get, K};
use super::Emitter;
use crate::ast::{Instruction, Operand};
use crate::diag::Diagnostic;
use rspirv::spirv::{Op, Word};

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    let extra = if why.is_empty() { String::new() } else { format!(" ({why})") };
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}'{extra}", inst.mnemonic()))
}

/// Emit a `wgmma` instruction.
pub(crate) fn emit(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    if inst.has("fence") || inst.has("commit_group") || inst.has("wait_group") {
        return Ok(());
    }
    if !inst.has("mma_async") {
        return Err(unsupported(inst, ""));
    }
    mma_async(e, fx, inst, active)
}

/// A matrix descriptor's fields, as 32-bit values.
struct Desc {
    start: Word,
    lbo: Word,
    sbo: Word,
    /// Swizzle width in bytes (0: none), a compile-time choice per mode.
    mode: Word,
}

fn descriptor(e: &mut Emitter, fx: &mut Fx, op: &Operand) -> Result<Desc, Diagnostic> {
    let d = get(e, fx, op, K::Int(64), false)?;
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let field = |e: &mut Emitter, at: u32, bits: u32| -> R {
        let sh = e.c_int(64, at as u64);
        let x = o(e, Op::ShiftRightLogical, u64t, &[d, sh])?;
        let x = o(e, Op::UConvert, u32t, &[x])?;
        let m = e.c_u32((1 << bits) - 1);
        o(e, Op::BitwiseAnd, u32t, &[x, m])
    };
    let four = e.c_u32(4);
    let start = field(e, 0, 14)?;
    let start = o(e, Op::ShiftLeftLogical, u32t, &[start, four])?;
    let lbo = field(e, 16, 14)?;
    let lbo = o(e, Op::ShiftLeftLogical, u32t, &[lbo, four])?;
    let sbo = field(e, 32, 14)?;
    let sbo = o(e, Op::ShiftLeftLogical, u32t, &[sbo, four])?;
    let mode = field(e, 62, 2)?;
    Ok(Desc { start, lbo, sbo, mode })
}

/// The shared-memory byte address of element (`r`, `k`) of a matrix with
/// descriptor `d` (`r` the M or N index): see the module docs. `r` is a
/// value, `k` a constant.
fn element_address(e: &mut Emitter, d: &Desc, mn_major: bool, bytes: u32, r: Word, k: u32) -> R {
    let u32t = e.t_int(32);
    let c = |e: &mut Emitter, v: u32| e.c_u32(v);
    let t = 16 / bytes;
    // Per swizzle mode (0 none, 1: 128 B, 2: 64 B, 3: 32 B), then select.
    let mut offs = Vec::new();
    for mode in 0..4u32 {
        let s = [0, 128, 64, 32][mode as usize];
        let off = if !mn_major {
            let c8 = c(e, 8);
            let rm = o(e, Op::UMod, u32t, &[r, c8])?;
            let rd = o(e, Op::UDiv, u32t, &[r, c8])?;
            let row_bytes = c(e, if s == 0 { 16 } else { s });
            let a = o(e, Op::IMul, u32t, &[rm, row_bytes])?;
            let b = o(e, Op::IMul, u32t, &[rd, d.sbo])?;
            let ab = o(e, Op::IAdd, u32t, &[a, b])?;
            if s == 0 {
                let kk = c(e, (k % t) * bytes);
                let kl = c(e, k / t);
                let l = o(e, Op::IMul, u32t, &[kl, d.lbo])?;
                let x = o(e, Op::IAdd, u32t, &[ab, kk])?;
                o(e, Op::IAdd, u32t, &[x, l])?
            } else {
                let kk = c(e, k * bytes);
                o(e, Op::IAdd, u32t, &[ab, kk])?
            }
        } else {
            let wt = if s == 0 { t } else { (s / 16) * t };
            let cw = c(e, wt);
            let rm = o(e, Op::UMod, u32t, &[r, cw])?;
            let rd = o(e, Op::UDiv, u32t, &[r, cw])?;
            let eb = c(e, bytes);
            let a = o(e, Op::IMul, u32t, &[rm, eb])?;
            let (blk, kstride, kblk) = if s == 0 { (d.sbo, 16, d.lbo) } else { (d.lbo, s, d.sbo) };
            let b = o(e, Op::IMul, u32t, &[rd, blk])?;
            let kin = c(e, (k % 8) * kstride);
            let kb = c(e, k / 8);
            let kx = o(e, Op::IMul, u32t, &[kb, kblk])?;
            let x = o(e, Op::IAdd, u32t, &[a, b])?;
            let x = o(e, Op::IAdd, u32t, &[x, kin])?;
            o(e, Op::IAdd, u32t, &[x, kx])?
        };
        let addr = o(e, Op::IAdd, u32t, &[d.start, off])?;
        let addr = if s == 0 {
            addr
        } else {
            // bits [4, 4+b) ^= bits [7, 7+b)
            let mask = c(e, ((s / 16) - 1) << 4);
            let three = c(e, 3);
            let hi = o(e, Op::ShiftRightLogical, u32t, &[addr, three])?;
            let x = o(e, Op::BitwiseAnd, u32t, &[hi, mask])?;
            o(e, Op::BitwiseXor, u32t, &[addr, x])?
        };
        offs.push(addr);
    }
    let mut r = offs[0];
    for (mode, &a) in offs.iter().enumerate().skip(1) {
        let mc = c(e, mode as u32);
        let is = cmp(e, Op::IEqual, d.mode, mc)?;
        r = sel(e, u32t, is, a, r)?;
    }
    Ok(r)
}

/// An element of `elem` loaded from shared byte address `addr`, as a value
/// to multiply (f32 or i32; for b1 a word of 32 elements).
fn load_element(e: &mut Emitter, fx: &Fx, elem: Elem, addr: Word) -> R {
    if elem == Elem::B1 {
        return super::mem::load(e, fx, super::mem::Addr::Shared(addr), K::Int(32), false);
    }
    let bits = elem.bits();
    let v = super::mem::load(e, fx, super::mem::Addr::Shared(addr), K::Int(bits), false)?;
    let u32t = e.t_int(32);
    let w = if bits == 32 { v } else { o(e, Op::UConvert, u32t, &[v])? };
    mma::decode(e, elem, w, 0)
}

/// `wgmma.mma_async{.sp}.sync.aligned.shape.dtype.atype.btype d, a(-desc), b-desc{, sp-meta, sp-sel}, scale-d{, imm-scale-a, imm-scale-b{, imm-trans-a}, imm-trans-b}`
/// (b1: `.s32.b1.b1.and.popc d, a(-desc), b-desc, scale-d`).
///
/// With `.sp`, A is the compressed 64×K/2 matrix (descriptor or registers,
/// laid out as a dense A of that K) and each warp's metadata is that of
/// `mma.sp` with the same K per warp ([`super::mma_sp::meta_at`]); b1
/// elements move as 32-bit words (element `k` is bit `k % 32` of word
/// `k / 32`, byte `k / 8` in memory).
fn mma_async(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    let Some((m, n, k)) = mma::shape(inst) else { return Err(unsupported(inst, "no shape")) };
    let types: Vec<&str> = inst
        .modifiers
        .iter()
        .map(|m| m.as_str())
        .filter(|m| matches!(*m, "f32" | "f16" | "s32") || Elem::from_name(m).is_some())
        .collect();
    let [dn, an, bn] = types.as_slice() else { return Err(unsupported(inst, "expects .dtype.atype.btype")) };
    let (Some(at), Some(bt)) = (Elem::from_name(an), Elem::from_name(bn)) else {
        return Err(unsupported(inst, "bad types"));
    };
    let sparse = inst.has("sp");
    let binary = at == Elem::B1;
    if m != 64 || n % 8 != 0 || n > 256 || at == Elem::F64 || at.bits() != bt.bits() {
        return Err(unsupported(inst, "shape or type"));
    }
    if k != (256 / at.bits()) * if sparse { 2 } else { 1 } {
        return Err(unsupported(inst, "K for the type"));
    }
    if binary && (sparse || !inst.has("and") || !inst.has("popc")) {
        return Err(unsupported(inst, "b1 needs .and.popc, and has no sparse form"));
    }
    let acc_f16 = *dn == "f16";
    let int = at.is_int();
    let ops = inst.operands.as_slice();
    // The index of scale-d: after the metadata and selector with .sp.
    let sd = if sparse { 5 } else { 3 };
    if ops.len() <= sd {
        return Err(Diagnostic::error(
            inst.span,
            format!(
                "'{}' expects d, a, b, {}scale-d, ...",
                inst.mnemonic(),
                if sparse { "sp-meta, sp-sel, " } else { "" }
            ),
        ));
    }
    let (d_op, a_op, b_op, scale_d) = (&ops[0], &ops[1], &ops[2], &ops[sd]);
    let a_regs = matches!(a_op, Operand::Vector(..));
    let imm = |i: usize| -> i128 {
        match ops.get(sd + i) {
            Some(Operand::Int(_, v)) => *v,
            _ => 1,
        }
    };
    let (sa, sb) = if int { (1, 1) } else { (imm(1), imm(2)) };
    // Transposition: only for f16/bf16; `imm-trans-a` is absent with A in registers.
    let (ta, tb) = match (at, a_regs) {
        (Elem::F16 | Elem::Bf16, false) => (imm(3) == 1, imm(4) == 1),
        (Elem::F16 | Elem::Bf16, true) => (false, imm(3) == 1),
        _ => (false, false),
    };
    let nd = n / 2;
    let d_regs = mma::fragment(inst, d_op, "D", if acc_f16 { nd / 2 } else { nd })?;

    let u32t = e.t_int(32);
    let ft = e.t_float(32);
    let mut lc = mma::lane_ctx(e, fx)?;
    // The warp within the warpgroup.
    let five = e.c_u32(5);
    let wi = o(e, Op::ShiftRightLogical, u32t, &[fx.linear, five])?;
    let three = e.c_u32(3);
    let wi = o(e, Op::BitwiseAnd, u32t, &[wi, three])?;
    let sixteen = e.c_u32(16);
    let row0 = o(e, Op::IMul, u32t, &[wi, sixteen])?;
    let row0 = o(e, Op::IAdd, u32t, &[row0, lc.g])?;
    let eight = e.c_u32(8);
    let row1 = o(e, Op::IAdd, u32t, &[row0, eight])?;
    let two = e.c_u32(2);
    let col0 = o(e, Op::IMul, u32t, &[lc.t, two])?;

    // Units of A and B: elements, or for b1 32-bit words.
    let (unit_bytes, per_unit) = if binary { (4, 32) } else { (at.bits() / 8, 1) };
    let ka = if sparse { k / 2 } else { k };
    // A values: a[h][k] for the lane's rows 16w + g + 8h (compressed columns with .sp).
    let mut a_vals: Vec<Vec<Word>> = vec![Vec::new(), Vec::new()];
    if a_regs {
        let geo = mma::Geometry::standard(16, 8, ka, at.per_reg());
        let regs = mma::fragment(inst, a_op, "A", geo.count_a())?;
        let own = geo.owners_a();
        let mut need = Vec::new();
        for h in 0..2 {
            for u in 0..ka / per_unit {
                need.push(mma::locate(&own, |l| ((l >> 2) + 8 * h, u * per_unit))?);
            }
        }
        let words = mma::gather_a(e, fx, &mut lc, &regs, &need)?;
        for h in 0..2 {
            for u in 0..ka / per_unit {
                let s = need[(h * (ka / per_unit) + u) as usize];
                a_vals[h as usize].push(if binary {
                    mma::source_word(&words, s)?
                } else {
                    mma::source_value(e, &mut lc, &words, at, s)?
                });
            }
        }
    } else {
        let da = descriptor(e, fx, a_op)?;
        for (h, row) in [row0, row1].into_iter().enumerate() {
            for u in 0..ka / per_unit {
                let addr = element_address(e, &da, ta, unit_bytes, row, u)?;
                a_vals[h].push(load_element(e, fx, at, addr)?);
            }
        }
    }
    let db = descriptor(e, fx, b_op)?;
    // B values for the lane's columns 2t + c + 8j.
    let mut b_vals: Vec<Vec<Word>> = Vec::new();
    for j in 0..n / 8 {
        for c in 0..2 {
            let off = e.c_u32(8 * j + c);
            let col = o(e, Op::IAdd, u32t, &[col0, off])?;
            let mut v = Vec::new();
            for u in 0..k / per_unit {
                let addr = element_address(e, &db, tb, unit_bytes, col, u)?;
                v.push(load_element(e, fx, bt, addr)?);
            }
            b_vals.push(v);
        }
    }
    // With .sp: where each stored A element's B row is, per row half and
    // compressed column (the same for every column of B).
    let positions = if sparse { Some(sparse_positions(e, fx, &mut lc, inst, at, k, &ops[3], &ops[4])?) } else { None };
    // scale-d: a predicate (or an immediate).
    let keep = match scale_d {
        Operand::Int(_, v) => e.c_bool(*v != 0),
        op => get(e, fx, op, K::Pred, false)?,
    };
    // The arithmetic of `mma` (see `mma::accumulate`): exact products, a
    // fused multiply-add for the floats, exact integers, b1 `and` counts.
    let dt = match *dn {
        "f16" => Acc::F16,
        "s32" => Acc::S32,
        _ => Acc::F32,
    };
    let geo = mma::Geometry::standard(16, 8, k, at.per_reg());
    let tile = Tile { geo, at, bt, ct: dt, dt, satfinite: inst.has("satfinite"), and: true, rnd: Rnd::Rn };
    let c_vals = mma::read_c(e, fx, dt, &d_regs, nd)?;
    let (zero, vt) = if int { (e.c_u32(0), u32t) } else { (e.c_f32(0.0), ft) };
    let mut d_vals = Vec::new();
    for (i, &c) in c_vals.iter().enumerate() {
        let i = i as u32;
        let h = ((i >> 1) & 1) as usize;
        let col = ((i & 1) + 2 * (i >> 2)) as usize;
        let c = sel(e, vt, keep, c, zero)?;
        let mut acc = mma::start_acc(e, &tile, c)?;
        for u in 0..(ka / per_unit) as usize {
            let a = a_vals[h][u];
            let a = if !int && sa * sb < 0 { o(e, Op::FNegate, ft, &[a])? } else { a };
            let b = match &positions {
                None => b_vals[col][u],
                Some(pos) => {
                    // The B element at the position the metadata gives.
                    let (chunk, cands, p) = &pos[h][u];
                    let mut b = b_vals[col][(chunk + cands[0]) as usize];
                    for &q in &cands[1..] {
                        let qc = e.c_u32(q);
                        let is = cmp(e, Op::IEqual, *p, qc)?;
                        let x = b_vals[col][(chunk + q) as usize];
                        b = sel(e, vt, is, x, b)?;
                    }
                    b
                }
            };
            acc = mma::accumulate(e, &tile, acc, a, b)?;
        }
        d_vals.push(mma::finish_acc(e, &tile, acc)?);
    }
    mma::write_d(e, fx, active, dt, &d_regs, &d_vals)
}

/// For each row half `h` and compressed column: the first B row of its
/// chunk, the positions it may take, and the position its metadata gives.
type Positions = Vec<Vec<(u32, Vec<u32>, Word)>>;

/// The metadata of a sparse `wgmma`: each warp's register `sp-meta` laid
/// out as `mma.sp`'s of the same K for the warp's 16 rows, selector `sp-sel`.
#[allow(clippy::too_many_arguments)]
fn sparse_positions(
    e: &mut Emitter,
    fx: &mut Fx,
    lc: &mut mma::LaneCtx,
    inst: &Instruction,
    at: Elem,
    k: u32,
    meta_op: &Operand,
    sel_op: &Operand,
) -> Result<Positions, Diagnostic> {
    use super::mma_sp::{max_selector, meta_at, Sparsity};
    let sp = Sparsity::of(at);
    let chunks = k / sp.w;
    let f = match sel_op {
        Operand::Int(_, v) if (0..=max_selector(at, chunks) as i128).contains(v) => *v as u32,
        other => {
            return Err(Diagnostic::error(
                other.span(),
                format!(
                    "'{}': sp-sel must be an integer constant in 0..={}",
                    inst.mnemonic(),
                    max_selector(at, chunks)
                ),
            ))
        }
    };
    let meta = get(e, fx, meta_op, K::Int(32), false)?;
    let lanes = super::warp::share_many(e, fx, &[meta])?;
    let u32t = e.t_int(32);
    let fifteen = e.c_u32(15);
    let mut out = Vec::new();
    for h in 0..2 {
        let mut row = Vec::new();
        for kc in 0..k / 2 {
            let (chunk, slot) = (kc / sp.s, kc % sp.s);
            let place = |l: u32| meta_at(at, chunks, f, (l >> 2) + 8 * h, chunk);
            let lane = mma::LaneExpr::fit(|l| place(l).0)
                .ok_or_else(|| unsupported(inst, "internal: wgmma.sp metadata lane"))?;
            let bit = mma::LaneExpr::fit(|l| place(l).1)
                .ok_or_else(|| unsupported(inst, "internal: wgmma.sp metadata offset"))?;
            let lw = lc.expr(e, lane)?;
            let word = super::warp::read(e, fx, lanes[0], lw)?;
            let bw = lc.expr(e, bit)?;
            let x = o(e, Op::ShiftRightLogical, u32t, &[word, bw])?;
            let nibble = o(e, Op::BitwiseAnd, u32t, &[x, fifteen])?;
            let p = sp.position(e, nibble, slot)?;
            row.push((sp.w * chunk, sp.positions(slot), p));
        }
        out.push(row);
    }
    Ok(out)
}
