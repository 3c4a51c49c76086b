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
//! Only drivers that need it get it ([`crate::Options::zero_operand_workaround`]).

use super::Emitter;
use rspirv::dr::{Instruction, Operand};
use rspirv::spirv::{Op, Word};
use std::collections::HashMap;

/// Replaces every use of a float `+0.0` constant inside functions by an
/// opaque zero of the same type (see the module docs).
pub(crate) fn hide_zero_constants(e: &mut Emitter) {
    let m = e.b.module_ref();
    let float_types: HashMap<Word, u32> = m
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypeFloat)
        .filter_map(|i| match (i.result_id, i.operands.first()) {
            (Some(id), Some(Operand::LiteralBit32(w))) => Some((id, *w)),
            _ => None,
        })
        .collect();
    // +0.0 constant id -> its float type.
    let zeros: HashMap<Word, Word> = m
        .types_global_values
        .iter()
        .filter_map(|i| {
            let (id, ty) = (i.result_id?, i.result_type?);
            let zero = match i.class.opcode {
                Op::ConstantNull => true,
                Op::Constant => matches!(i.operands.first(), Some(Operand::LiteralBit32(0) | Operand::LiteralBit64(0))),
                _ => false,
            };
            (zero && float_types.contains_key(&ty)).then_some((id, ty))
        })
        .collect();
    if zeros.is_empty() {
        return;
    }
    let u32t = e.t_int(32);
    let c31 = e.c_u32(31);
    let index_var = e.local_index;
    let mut functions = std::mem::take(&mut e.b.module_mut().functions);
    for f in &mut functions {
        let uses_zero = |i: &Instruction| {
            i.class.opcode != Op::Variable
                && i.operands.iter().any(|o| matches!(o, Operand::IdRef(id) if zeros.contains_key(id)))
        };
        if !f.blocks.iter().flat_map(|b| b.instructions.iter()).any(uses_zero) {
            continue;
        }
        // Opaque zeros: index >> 31 as an integer, then one conversion per
        // float type used.
        let (idx, bit) = (e.b.id(), e.b.id());
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
                    let Operand::IdRef(id) = o else { continue };
                    let Some(&ty) = zeros.get(id) else { continue };
                    let z = *opaque.entry(ty).or_insert_with(|| {
                        let z = e.b.id();
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
    e.b.module_mut().functions = functions;
}
