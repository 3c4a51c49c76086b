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
use crate::fxhash::FxHashMap;
use rspirv::binary::Assemble;
use rspirv::dr::{Instruction, Operand};
use rspirv::spirv::{Op, Word};

/// What the rewrite needs from the emitter, taken before the module is
/// assembled.
pub(crate) struct Prepared {
    /// Float `+0.0` constant id -> its float type.
    zeros: FxHashMap<Word, Word>,
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
    let zeros: FxHashMap<Word, Word> = e
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
/// module `words`: one pass over the functions' words, which finds each
/// instruction's id operands from the SPIR-V grammar. An instruction whose
/// operands it cannot lay out for certain (an operand kind it does not
/// know) sends the whole module to [`hide_zero_constants_tree`], which
/// loads the module with rspirv (the same result, several times slower).
pub(crate) fn hide_zero_constants(words: Vec<u32>, p: &Prepared) -> Vec<u32> {
    match hide_in_words(&words, p) {
        Some(out) => out,
        None => hide_zero_constants_tree(words, p),
    }
}

/// The grammar of each core opcode, by opcode.
pub(crate) fn grammar() -> &'static [Option<&'static rspirv::grammar::Instruction<'static>>] {
    static TABLE: std::sync::OnceLock<Vec<Option<&'static rspirv::grammar::Instruction<'static>>>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Vec::new();
        for inst in rspirv::grammar::INSTRUCTION_TABLE.iter() {
            let op = inst.opcode as usize;
            if t.len() <= op {
                t.resize(op + 1, None);
            }
            t[op] = Some(inst);
        }
        t
    })
}

/// The word offsets (from the instruction's first word) of the id operands
/// of the instruction `inst`, appended to `ids`; `None` when its layout is
/// not certain (see [`hide_zero_constants`]).
fn id_operands(inst: &[u32], ids: &mut Vec<usize>) -> Option<()> {
    use rspirv::grammar::{OperandKind as K, OperandQuantifier as Q};
    let g = (*grammar().get((inst[0] & 0xffff) as usize)?)?;
    let len = inst.len();
    let mut pos = 1;
    for operand in g.operands {
        let times = match operand.quantifier {
            Q::One => 1,
            Q::ZeroOrOne => usize::from(pos < len),
            Q::ZeroOrMore => usize::MAX,
        };
        let mut n = 0;
        while n < times && pos < len {
            n += 1;
            match operand.kind {
                K::IdResultType | K::IdResult | K::LiteralInteger | K::LiteralExtInstInteger => pos += 1,
                K::IdRef | K::IdScope | K::IdMemorySemantics => {
                    ids.push(pos);
                    pos += 1;
                }
                K::PairIdRefIdRef => {
                    ids.extend([pos, pos + 1]);
                    pos += 2;
                }
                K::PairIdRefLiteralInteger => {
                    ids.push(pos);
                    pos += 2;
                }
                K::LiteralString => {
                    // Up to and including the word that holds the NUL.
                    while pos < len && inst[pos].to_le_bytes().iter().all(|&b| b != 0) {
                        pos += 1;
                    }
                    pos += 1;
                }
                K::MemoryAccess => {
                    let mask = inst[pos];
                    pos += 1;
                    // Volatile, Aligned (a literal), Nontemporal,
                    // MakePointerAvailable and MakePointerVisible (a scope
                    // id each), NonPrivatePointer; no other bit.
                    if mask & !0x3f != 0 {
                        return None;
                    }
                    if mask & 0x2 != 0 {
                        pos += 1;
                    }
                    for bit in [0x8, 0x10] {
                        if mask & bit != 0 {
                            ids.push(pos);
                            pos += 1;
                        }
                    }
                }
                K::LoopControl => {
                    let mask = inst[pos];
                    pos += 1;
                    // Unroll, DontUnroll, then one literal for each of
                    // DependencyLength .. PartialCount; no other bit.
                    if mask & !0x1ff != 0 {
                        return None;
                    }
                    pos += (mask & 0x1f8).count_ones() as usize;
                }
                K::SelectionControl | K::FunctionControl | K::StorageClass | K::GroupOperation => pos += 1,
                _ => return None,
            }
        }
    }
    (pos == len).then_some(())
}

/// [`hide_zero_constants`] on the words; `None` when an instruction's
/// layout is not certain.
fn hide_in_words(words: &[u32], p: &Prepared) -> Option<Vec<u32>> {
    let (zeros, u32t, c31, index_var) = (&p.zeros, p.u32t, p.c31, p.index_var);
    let lo = zeros.keys().copied().min()?;
    let hi = zeros.keys().copied().max()?;
    let op = |w: u32| w & 0xffff;
    let size = |w: u32| (w >> 16) as usize;
    // The instructions from `at` on: (start, length).
    let walk = |mut at: usize| {
        std::iter::from_fn(move || {
            let n = size(*words.get(at)?);
            if n == 0 || at + n > words.len() {
                return None;
            }
            at += n;
            Some((at - n, n))
        })
    };
    // The header is 5 words; functions start at the first OpFunction.
    let first = walk(5).find(|&(s, _)| op(words[s]) == Op::Function as u32).map_or(words.len(), |(s, _)| s);
    let mut next_id = *words.get(3)?;
    let mut out = Vec::with_capacity(words.len() + words.len() / 64);
    out.extend_from_slice(&words[..first]);
    let mut ids = Vec::new();
    let mut at = first;
    while at < words.len() {
        // One function: from OpFunction to OpFunctionEnd.
        let end = walk(at).find(|&(s, _)| op(words[s]) == Op::FunctionEnd as u32).map(|(s, n)| s + n)?;
        let func = &words[at..end];
        // The float types of the zeros it uses, in order of use, and each
        // instruction's id operands.
        let mut types: Vec<Word> = Vec::new();
        let mut uses = Vec::new();
        let mut pos = 0;
        while pos < func.len() {
            let n = size(func[pos]);
            if n == 0 || pos + n > func.len() {
                return None;
            }
            let inst = &func[pos..pos + n];
            // Only an instruction with a word that could be one of the
            // zeros needs its operands laid out (most have none).
            let candidate = inst[1..].iter().any(|w| (lo..=hi).contains(w) && zeros.contains_key(w));
            if candidate && op(inst[0]) != Op::Variable as u32 {
                ids.clear();
                id_operands(inst, &mut ids)?;
                for &k in &ids {
                    if let Some(&ty) = zeros.get(&inst[k]) {
                        if !types.contains(&ty) {
                            types.push(ty);
                        }
                        uses.push((pos + k, ty));
                    }
                }
            }
            pos += n;
        }
        if types.is_empty() {
            out.extend_from_slice(func);
            at = end;
            continue;
        }
        let (idx, bit) = (next_id, next_id + 1);
        let opaque: Vec<(Word, Word)> = types.iter().enumerate().map(|(i, &ty)| (ty, next_id + 2 + i as u32)).collect();
        next_id += 2 + types.len() as u32;
        let mut func = func.to_vec();
        for (k, ty) in uses {
            func[k] = opaque.iter().find(|(t, _)| *t == ty).map_or(func[k], |&(_, z)| z);
        }
        // The head goes after the first block's label and variables.
        let mut head = vec![(4 << 16) | Op::Load as u32, u32t, idx, index_var];
        head.extend([(5 << 16) | Op::ShiftRightLogical as u32, u32t, bit, idx, c31]);
        for &(ty, z) in &opaque {
            head.extend([(4 << 16) | Op::ConvertUToF as u32, ty, z, bit]);
        }
        let mut pos = 0;
        let mut seen_label = false;
        while pos < func.len() {
            let o = op(func[pos]);
            if seen_label && o != Op::Variable as u32 {
                break;
            }
            seen_label |= o == Op::Label as u32;
            pos += size(func[pos]);
        }
        func.splice(pos..pos, head);
        out.extend_from_slice(&func);
        at = end;
    }
    out[3] = next_id;
    Some(out)
}

/// [`hide_zero_constants`] through rspirv's instruction tree.
pub(crate) fn hide_zero_constants_tree(words: Vec<u32>, p: &Prepared) -> Vec<u32> {
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
        let (idx, bit) = (id(), id());
        let ref_ = |x: Word| Operand::IdRef(x);
        let mut head = vec![
            Instruction::new(Op::Load, Some(u32t), Some(idx), vec![ref_(index_var)]),
            Instruction::new(Op::ShiftRightLogical, Some(u32t), Some(bit), vec![ref_(idx), ref_(c31)]),
        ];
        let mut opaque: FxHashMap<Word, Word> = FxHashMap::default();
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

/// An opaque zero of `bits` (32 or 64) bits: `LocalInvocationIndex >> 31`,
/// computed once per function in its entry block (which dominates every
/// use) and shared by all its uses there.
pub(crate) fn opaque_zero(e: &mut Emitter, bits: u32) -> Result<Word, Diagnostic> {
    let serial = e.b.function_serial();
    if e.opaque_zeros.0 != serial {
        e.opaque_zeros = (serial, [0; 2]);
    }
    let slot = usize::from(bits == 64);
    if e.opaque_zeros.1[slot] != 0 {
        return Ok(e.opaque_zeros.1[slot]);
    }
    let zero32 = match e.opaque_zeros.1[0] {
        0 => {
            let u32t = e.t_int(32);
            let c31 = e.c_u32(31);
            let index = e.b.entry_value(Op::Load, u32t, &[e.local_index]).map_err(internal1)?;
            let zero = e.b.entry_value(Op::ShiftRightLogical, u32t, &[index, c31]).map_err(internal1)?;
            e.opaque_zeros.1[0] = zero;
            zero
        }
        z => z,
    };
    if bits != 64 {
        return Ok(zero32);
    }
    let it = e.t_int(64);
    let zero = e.b.entry_value(Op::UConvert, it, &[zero32]).map_err(internal1)?;
    e.opaque_zeros.1[1] = zero;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The zeros of an assembled module (float `OpConstant`s of value 0),
    /// for the comparison below (the other ids are arbitrary: both rewrites
    /// only copy them).
    fn prepared_from(words: &[u32]) -> Option<Prepared> {
        let m = rspirv::dr::load_words(words).ok()?;
        let floats: Vec<Word> = m
            .types_global_values
            .iter()
            .filter(|i| i.class.opcode == Op::TypeFloat)
            .filter_map(|i| i.result_id)
            .collect();
        let zeros: FxHashMap<Word, Word> = m
            .types_global_values
            .iter()
            .filter(|i| i.class.opcode == Op::Constant)
            .filter(|i| i.result_type.is_some_and(|t| floats.contains(&t)))
            .filter(|i| {
                i.operands.iter().all(|o| match o {
                    Operand::LiteralBit32(v) => *v == 0,
                    Operand::LiteralBit64(v) => *v == 0,
                    _ => false,
                })
            })
            .filter_map(|i| Some((i.result_id?, i.result_type?)))
            .collect();
        (!zeros.is_empty()).then_some(Prepared { zeros, u32t: 0x7fff_0001, c31: 0x7fff_0002, index_var: 0x7fff_0003 })
    }

    /// The word rewrite gives exactly what the rewrite through rspirv's
    /// tree gives, on every fixture and corpus module that translates and
    /// has a float zero, and takes the fallback on none of them.
    #[test]
    fn the_word_rewrite_equals_the_tree_rewrite() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for dir in ["tests/fixtures", "tests/fixtures/warp", "tests/corpus/ptx"] {
            let Ok(rd) = std::fs::read_dir(root.join(dir)) else { continue };
            files.extend(rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "ptx")));
        }
        files.sort();
        let options = crate::Options { fault_checks: true, ..Default::default() };
        let (mut compared, mut rewritten) = (0, 0);
        for f in &files {
            let Ok(src) = std::fs::read_to_string(f) else { continue };
            let Ok(t) = crate::translate(&src, "x.ptx", &options) else { continue };
            let Some(p) = prepared_from(&t.spirv) else { continue };
            let fast = hide_in_words(&t.spirv, &p).unwrap_or_else(|| panic!("{}: fell back", f.display()));
            let tree = hide_zero_constants_tree(t.spirv.clone(), &p);
            assert!(fast == tree, "{}: the rewrites differ", f.display());
            compared += 1;
            rewritten += usize::from(fast != t.spirv);
        }
        assert!(compared >= 100 && rewritten >= 100, "{compared} modules compared, {rewritten} rewritten");
    }
}
