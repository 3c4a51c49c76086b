//! Ampere asynchronous copies: `cp.async` global → shared and its groups.
//!
//! The copy is performed when the instruction executes, which is one valid
//! schedule of an asynchronous copy: the data is in shared memory before any
//! `cp.async.wait_group`/`wait_all` returns, and — as on NVIDIA hardware —
//! other threads see it only after their own synchronisation (`bar.sync`).
//! `commit_group` and the waits therefore have nothing left to do. Bytes from
//! `src-size` up to `cp-size` are zero-filled, and no byte at or beyond
//! `src-size` is read from global memory.

use super::fault::{Access, Site};
use super::func::{internal1, Fx};
use super::mem::{self, Addr, Space};
use super::values::{get, K};
use super::Emitter;
use crate::ast::{Instruction, Operand};
use crate::diag::Diagnostic;
use rspirv::spirv::{self, Word};

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}' ({why})", inst.mnemonic()))
}

/// `cp.async...`.
pub(crate) fn cp_async(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let m = &inst.modifiers;
    if m.first().map(|s| s.as_str()) != Some("async") {
        return Err(unsupported(inst, "only cp.async is supported"));
    }
    match m.get(1).map(|s| s.as_str()) {
        Some("commit_group") | Some("wait_group") | Some("wait_all") => return Ok(()),
        Some("ca") | Some("cg") => {}
        Some("bulk") => return Err(unsupported(inst, "bulk and tensor copies are not supported yet")),
        Some("mbarrier") => return Err(unsupported(inst, "mbarrier completion is not supported yet")),
        _ => return Err(unsupported(inst, "unknown cp.async form")),
    }
    let ops = inst.operands.as_slice();
    let (Some(Operand::Address(_, dst)), Some(Operand::Address(_, src)), Some(Operand::Int(_, size))) =
        (ops.first(), ops.get(1), ops.get(2))
    else {
        return Err(Diagnostic::error(inst.span, "cp.async expects [dst], [src], cp-size{, src-size}"));
    };
    let cp_size = *size as u32;
    if !matches!(cp_size, 4 | 8 | 16) {
        return Err(Diagnostic::error(ops[2].span(), "cp.async cp-size must be 4, 8 or 16"));
    }
    // The optional fourth operand is src-size (an integer) or ignore-src (a predicate).
    enum SrcSize {
        Const(u32),
        Dynamic(Word),
    }
    let src_size = match ops.get(3) {
        None => SrcSize::Const(cp_size),
        Some(Operand::Int(_, v)) => SrcSize::Const((*v as u32).min(cp_size)),
        Some(op @ Operand::Name { name, .. }) => {
            let is_pred = fx.regs.get(name.as_str()).is_some_and(|(_, k)| *k == K::Pred);
            if is_pred {
                // ignore-src: when true, the source is not read and zeros are written.
                let p = get(e, fx, op, K::Pred, false)?;
                let u32t = e.t_int(32);
                let z = e.c_u32(0);
                let full = e.c_u32(cp_size);
                SrcSize::Dynamic(e.b.select(u32t, None, p, z, full).map_err(internal1)?)
            } else {
                SrcSize::Dynamic(get(e, fx, op, K::Int(32), false)?)
            }
        }
        Some(other) => return Err(Diagnostic::error(other.span(), "bad src-size operand")),
    };
    let d = mem::resolve(e, fx, Space::Shared, dst, inst.span)?;
    let s = mem::resolve(e, fx, Space::Global, src, inst.span)?;
    for j in 0..cp_size / 4 {
        let dj = mem::advance(e, d, j * 4)?;
        let sj = mem::advance(e, s, j * 4)?;
        let word = match src_size {
            SrcSize::Const(n) if n >= (j + 1) * 4 => {
                let site =
                    Site { span: inst.span, access: Access::Read, bytes: 4, align: if j == 0 { cp_size } else { 4 } };
                mem::load_checked(e, fx, sj, K::Int(32), false, site)?
            }
            SrcSize::Const(n) if n <= j * 4 => e.c_u32(0),
            SrcSize::Const(n) => {
                let mut acc = e.c_u32(0);
                for k in 0..(n - j * 4) {
                    let b = byte(e, fx, sj, k)?;
                    acc = or_shifted(e, acc, b, k)?;
                }
                acc
            }
            SrcSize::Dynamic(n) => dynamic_word(e, fx, sj, n, j)?,
        };
        let site = Site { span: inst.span, access: Access::Write, bytes: 4, align: if j == 0 { cp_size } else { 4 } };
        mem::store_checked(e, fx, dj, word, K::Int(32), false, site)?;
    }
    Ok(())
}

/// Byte `k` of the word at `a`, as a u32.
fn byte(e: &mut Emitter, fx: &Fx, a: Addr, k: u32) -> Result<Word, Diagnostic> {
    let ak = mem::advance(e, a, k)?;
    let b = mem::load(e, fx, ak, K::Int(8), false)?;
    e.convert(b, K::Int(8), K::Int(32), false)
}

fn or_shifted(e: &mut Emitter, acc: Word, b: Word, k: u32) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let sh = e.c_u32(k * 8);
    let v = e.b.shift_left_logical(u32t, None, b, sh).map_err(internal1)?;
    e.b.bitwise_or(u32t, None, acc, v).map_err(internal1)
}

/// Word `j` of a copy whose source size `n` is known only at run time: each
/// byte below `n` is read (under a branch, so nothing beyond is touched).
fn dynamic_word(e: &mut Emitter, fx: &Fx, a: Addr, n: Word, j: u32) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let mut acc = e.c_u32(0);
    for k in 0..4 {
        let pos = e.c_u32(j * 4 + k);
        let inside = e.b.u_less_than(bt, None, pos, n).map_err(internal1)?;
        let yes = e.b.id();
        let merge = e.b.id();
        let from = e.current_label()?;
        e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
        e.b.branch_conditional(inside, yes, merge, []).map_err(internal1)?;
        e.b.begin_block(Some(yes)).map_err(internal1)?;
        let b = byte(e, fx, a, k)?;
        let with = or_shifted(e, acc, b, k)?;
        let end = e.current_label()?;
        e.b.branch(merge).map_err(internal1)?;
        e.b.begin_block(Some(merge)).map_err(internal1)?;
        acc = e.b.phi(u32t, None, [(with, end), (acc, from)]).map_err(internal1)?;
    }
    Ok(acc)
}
