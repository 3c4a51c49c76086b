//! Float `+0.0` constants hidden from llvmpipe (lavapipe's compiler,
//! gallivm). While it turns NIR into LLVM IR, gallivm's `add` returns the
//! other operand when one operand is the constant `+0.0`, and its `mul` and
//! `div` return `+0.0` when an operand (the dividend) is that constant,
//! whatever the SPIR-V float controls and `NoContraction` say. IEEE 754 (and
//! PTX) disagree in three places: `-0.0 + 0.0 = +0.0`, `x * 0.0` is `-0.0`
//! for negative `x` and NaN for infinite or NaN `x`, and `0.0 / x` is `-0.0`
//! for negative `x` and NaN for zero or NaN `x`. libdevice adds a literal
//! `+0.0` on purpose (`mov.f32 %f31, 0f00000000; fma.rn.f32 %f32, %f8, %f7,
//! %f31` in `__nv_sinf`), so with the folds `sin(-0.0)` is `+0.0` and
//! `sin(-inf)` is `0.0` instead of NaN.
//!
//! NIR propagates constants through registers (function variables) and
//! conversions, so rewriting the instructions that name the constant is not
//! enough. Instead every use of a `+0.0` constant inside a function reads an
//! opaque zero computed at the top of the function: `float(index >> 31)`
//! of the invocation's `LocalInvocationIndex`, which is below 2^31 but not a
//! constant to the compiler (workgroups have at least 32 invocations, so NIR
//! cannot replace the index by 0). LLVM itself folds IEEE-exactly after that.
//!
//! Zeros the driver's compiler derives itself are as bad: gallivm's `div`
//! returns *undef* when the divisor is the constant `+0.0`, and NIR folds
//! `(float)threadIdx.y` to that constant in a launch whose blocks are one
//! thread high (the block shape is a specialization constant), or `a - a`
//! of a known `a` in `nvcc -G` code. The differential tester found it:
//! `x / (float)threadIdx.y` gave `+0.0` (f32) and NaN (f64) instead of
//! infinity. So every float register operand is also *laundered*
//! ([`launder`]): its bits are OR-ed with the opaque zero, which changes no
//! value but leaves the compiler nothing to fold.
//!
//! Only drivers that need it get it ([`crate::Options::zero_operand_workaround`]).

use super::func::internal1;
use super::{Emitter, K};
use crate::diag::Diagnostic;
use rspirv::binary::Assemble;
use rspirv::dr::{Instruction, Operand};
use rspirv::spirv::{Op, Word};
use std::collections::HashMap;

/// What the rewrite needs from the emitter, taken before the module is
/// assembled.
pub(crate) struct Prepared {
    /// Float `+0.0` constant id -> its float type.
    zeros: HashMap<Word, Word>,
    u32t: Word,
    c31: Word,
    /// The `LocalInvocationIndex` input.
    index_var: Word,
}

/// The float `+0.0` constants of the module (every constant goes through
/// the emitter's constant cache), and the `u32` type and the constant 31
/// the rewrite uses (made now, when there are zeros, so that they are
/// declared with the other constants); `None` when there is no such zero.
pub(crate) fn prepare(e: &mut Emitter) -> Option<Prepared> {
    // The float types made so far (the scalar slots of Float(16|32|64)).
    let float_types: Vec<Word> = e.scalars[6..9].iter().copied().filter(|&t| t != 0).collect();
    let zeros: HashMap<Word, Word> = e
        .consts
        .iter()
        .filter(|((t, v), _)| *v == 0 && float_types.contains(t))
        .map(|(&(t, _), &id)| (id, t))
        .collect();
    if zeros.is_empty() {
        return None;
    }
    let u32t = e.t_int(32);
    let c31 = e.c_u32(31);
    Some(Prepared { zeros, u32t, c31, index_var: e.local_index })
}

/// Replaces every use of a float `+0.0` constant inside functions by an
/// opaque zero of the same type (see the module docs), in the assembled
/// module `words` (the module is loaded with rspirv, rewritten and
/// assembled again; only drivers that need the workaround pay for it).
pub(crate) fn hide_zero_constants(words: Vec<u32>, p: &Prepared) -> Vec<u32> {
    let Ok(mut m) = rspirv::dr::load_words(&words) else {
        // Our own output always loads; keep it as it is otherwise.
        return words;
    };
    let Some(header) = m.header.as_mut() else { return words };
    let mut next_id = header.bound;
    let mut id = || {
        let v = next_id;
        next_id += 1;
        v
    };
    let (zeros, u32t, c31, index_var) = (&p.zeros, p.u32t, p.c31, p.index_var);
    for f in &mut m.functions {
        let uses_zero = |i: &Instruction| {
            i.class.opcode != Op::Variable
                && i.operands.iter().any(|o| matches!(o, Operand::IdRef(id) if zeros.contains_key(id)))
        };
        if !f.blocks.iter().flat_map(|b| b.instructions.iter()).any(uses_zero) {
            continue;
        }
        // Opaque zeros: index >> 31 as an integer, then one conversion per
        // float type used.
        let (idx, bit) = (id(), id());
        let ref_ = |x: Word| Operand::IdRef(x);
        let mut head = vec![
            Instruction::new(Op::Load, Some(u32t), Some(idx), vec![ref_(index_var)]),
            Instruction::new(Op::ShiftRightLogical, Some(u32t), Some(bit), vec![ref_(idx), ref_(c31)]),
        ];
        let mut opaque: HashMap<Word, Word> = HashMap::new();
        for b in &mut f.blocks {
            for i in &mut b.instructions {
                if !uses_zero(i) {
                    continue;
                }
                for o in &mut i.operands {
                    let Operand::IdRef(x) = o else { continue };
                    let Some(&ty) = zeros.get(x) else { continue };
                    let z = *opaque.entry(ty).or_insert_with(|| {
                        let z = id();
                        head.push(Instruction::new(Op::ConvertUToF, Some(ty), Some(z), vec![ref_(bit)]));
                        z
                    });
                    *o = Operand::IdRef(z);
                }
            }
        }
        // After the function variables, which must open the first block.
        if let Some(first) = f.blocks.first_mut() {
            let at = first.instructions.iter().take_while(|i| i.class.opcode == Op::Variable).count();
            first.instructions.splice(at..at, head);
        }
    }
    if let Some(h) = m.header.as_mut() {
        h.bound = next_id;
    }
    m.assemble()
}

/// An opaque zero of `bits` (32 or 64) bits: `LocalInvocationIndex >> 31`.
pub(crate) fn opaque_zero(e: &mut Emitter, bits: u32) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let c31 = e.c_u32(31);
    let index = e.b.load(u32t, None, e.local_index, None, []).map_err(internal1)?;
    let zero = e.b.shift_right_logical(u32t, None, index, c31).map_err(internal1)?;
    if bits == 64 {
        let it = e.t_int(64);
        return e.b.u_convert(it, None, zero).map_err(internal1);
    }
    Ok(zero)
}

/// `v` (a float of kind `k`) with its bits OR-ed with an opaque zero (see
/// the module docs); other kinds pass unchanged.
pub(crate) fn launder(e: &mut Emitter, v: Word, k: K) -> Result<Word, Diagnostic> {
    let K::Float(bits @ (32 | 64)) = k else {
        return Ok(v);
    };
    let zero = opaque_zero(e, bits)?;
    let it = e.t_int(bits);
    let ft = e.t_float(bits);
    let i = e.b.bitcast(it, None, v).map_err(internal1)?;
    let i = e.b.bitwise_or(it, None, i, zero).map_err(internal1)?;
    e.b.bitcast(ft, None, i).map_err(internal1)
}

/// An integer `v` of `bits` (32 or 64) bits OR-ed with an opaque zero: for
/// the constant masks of `and`, which llvmpipe miscompiles in
/// `c ? (x & ~m) | (y & m) : x` (the differential tester's seed 1601331:
/// the select returned `x` with `c` true; with either mask or operand not a
/// constant the result is right).
pub(crate) fn launder_int(e: &mut Emitter, v: Word, bits: u32) -> Result<Word, Diagnostic> {
    if bits != 32 && bits != 64 {
        return Ok(v);
    }
    let zero = opaque_zero(e, bits)?;
    let it = e.t_int(bits);
    e.b.bitwise_or(it, None, v, zero).map_err(internal1)
}
