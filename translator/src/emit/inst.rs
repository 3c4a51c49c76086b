//! Per-instruction emission: decodes an instruction's opcode and modifiers
//! and emits its SPIR-V. Memory instructions live in [`super::mem`],
//! floating-point helpers in [`super::float`].

use super::float;
use super::func::{internal1, Fx};
use super::mem;
use super::values::{get, kind_of, pred, set, K};
use super::Emitter;
use crate::ast::{Instruction, Operand, ScalarType};
use crate::diag::Diagnostic;
use rspirv::spirv::{self, Op, Word};

/// GLSL.std.450 instruction numbers used here.
pub(crate) mod glsl {
    pub const ROUND_EVEN: u32 = 2;
    pub const TRUNC: u32 = 3;
    pub const FABS: u32 = 4;
    pub const SABS: u32 = 5;
    pub const FLOOR: u32 = 8;
    pub const CEIL: u32 = 9;
    pub const EXP2: u32 = 29;
    pub const SQRT: u32 = 31;
    pub const INVERSE_SQRT: u32 = 32;
    pub const UMIN: u32 = 38;
    pub const SMIN: u32 = 39;
    pub const UMAX: u32 = 41;
    pub const SMAX: u32 = 42;
    pub const FCLAMP: u32 = 43;
    pub const FMA: u32 = 50;
    pub const FIND_ILSB: u32 = 73;
    pub const FIND_UMSB: u32 = 75;
    pub const FIND_SMSB: u32 = 74;
    pub const LDEXP: u32 = 53;
    pub const FMIN: u32 = 37;
    pub const FMAX: u32 = 40;
}

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    let extra = if why.is_empty() { String::new() } else { format!(" ({why})") };
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}'{extra}", inst.mnemonic()))
}

/// The last type modifier of an instruction.
pub(crate) fn last_type(inst: &Instruction) -> Result<ScalarType, Diagnostic> {
    inst.modifiers
        .iter()
        .rev()
        .find_map(|m| ScalarType::from_name(m))
        .ok_or_else(|| Diagnostic::error(inst.opcode_span, format!("'{}' needs a type modifier", inst.mnemonic())))
}

fn operands<const N: usize>(inst: &Instruction) -> Result<&[Operand; N], Diagnostic> {
    inst.operands.as_slice().try_into().map_err(|_| {
        Diagnostic::error(
            inst.span,
            format!("'{}' expects {N} operands, found {}", inst.mnemonic(), inst.operands.len()),
        )
    })
}

pub(crate) fn ext(e: &mut Emitter, t: Word, inst: u32, args: &[Word]) -> Result<Word, Diagnostic> {
    let glsl = e.glsl;
    e.b.ext_inst_ids(t, glsl, inst, args).map_err(internal1)
}

pub(crate) fn op2(e: &mut Emitter, op: Op, t: Word, a: Word, b: Word) -> Result<Word, Diagnostic> {
    e.b.op(op, t, None, &[a, b]).map_err(internal1)
}

pub(crate) fn op1(e: &mut Emitter, op: Op, t: Word, a: Word) -> Result<Word, Diagnostic> {
    e.b.op(op, t, None, &[a]).map_err(internal1)
}

/// Emit one instruction (with its guard, if any).
pub(crate) fn emit(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    // The resume pass's record accesses are not the user's (see `fault`).
    e.internal_access = crate::resume::is_internal_access(inst);
    emit_guarded(e, fx, inst).map_err(|mut d| {
        if d.span == crate::diag::Span::default() {
            d.span = inst.span;
        }
        d
    })
}

fn emit_guarded(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let Some(g) = &inst.guard else {
        return emit_unguarded(e, fx, inst);
    };
    let c = pred(e, fx, &g.name, g.negated, g.span)?;
    let then = e.b.id();
    let merge = e.b.id();
    e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(c, then, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(then)).map_err(internal1)?;
    let r = emit_unguarded(e, fx, inst);
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    r
}

fn emit_unguarded(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    match inst.opcode.as_str() {
        "mov" => mov(e, fx, inst),
        "ld" | "ldu" => {
            let t = last_type(inst)?;
            mem::ld(e, fx, inst, t)
        }
        "st" => {
            let t = last_type(inst)?;
            mem::st(e, fx, inst, t)
        }
        "atom" => {
            let t = last_type(inst)?;
            mem::atom(e, fx, inst, t, true)
        }
        "red" => {
            let t = last_type(inst)?;
            mem::atom(e, fx, inst, t, false)
        }
        "cp" => super::async_copy::cp_async(e, fx, inst),
        "alloca" => super::stack::alloca(e, fx, inst),
        "stacksave" => super::stack::stacksave(e, fx, inst),
        "stackrestore" => super::stack::stackrestore(e, fx, inst),
        "cvta" => cvta(e, fx, inst),
        "isspacep" => isspacep(e, fx, inst),
        _ if super::carry::handles(inst) => {
            let t = last_type(inst)?;
            super::carry::emit(e, fx, inst, t)
        }
        _ if super::bits::handles(inst) => {
            let t = last_type(inst).unwrap_or(ScalarType::B32);
            super::bits::emit(e, fx, inst, t)
        }
        "add" | "sub" | "min" | "max" if inst.has("u16x2") || inst.has("s16x2") => {
            super::bits::packed16(e, fx, inst, inst.has("s16x2"))
        }
        "testp" => {
            let t = last_type(inst)?;
            float::testp(e, fx, inst, t)
        }
        "set" | "slct" => super::compare::emit(e, fx, inst),
        "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor" | "shl" | "shr" | "copysign" => {
            let t = last_type(inst)?;
            if t.is_float() || float::is_half(t) || t == ScalarType::F32x2 {
                float::binary(e, fx, inst, t)
            } else {
                int_binary(e, fx, inst, t)
            }
        }
        "mad" | "fma" => {
            let t = last_type(inst)?;
            if t.is_float() || float::is_half(t) || t == ScalarType::F32x2 {
                float::fma(e, fx, inst, t)
            } else if inst.opcode == "mad" {
                int_mad(e, fx, inst, t)
            } else {
                Err(unsupported(inst, ""))
            }
        }
        "abs" | "neg" | "not" | "cnot" | "popc" | "clz" | "brev" | "bfind" => {
            let t = last_type(inst)?;
            if t.is_float() || float::is_half(t) {
                float::unary(e, fx, inst, t)
            } else {
                int_unary(e, fx, inst, t)
            }
        }
        "sqrt" | "rcp" | "rsqrt" | "sin" | "cos" | "lg2" | "ex2" | "tanh" => {
            let t = last_type(inst)?;
            float::unary(e, fx, inst, t)
        }
        "setp" => setp(e, fx, inst),
        "selp" => selp(e, fx, inst),
        "cvt" => super::cvt::cvt(e, fx, inst),
        "bar" if inst.has("warp") => {
            let t = e.c_bool(true);
            super::warp::emit(e, fx, inst, t)
        }
        "bar" | "barrier" => {
            Err(Diagnostic::error(inst.span, "internal error: a block barrier outside workgroup-uniform control flow"))
        }
        "membar" | "fence" if !e.opts.memory_semantics => Ok(()),
        "membar" | "fence" => {
            let scope = mem::scope_of(inst, spirv::Scope::Device);
            let scope = if inst.has("cta") { spirv::Scope::Workgroup } else { scope };
            let s = e.c_u32(scope as u32);
            use spirv::MemorySemantics as M;
            let sem = e.c_u32((M::ACQUIRE_RELEASE | M::UNIFORM_MEMORY | M::WORKGROUP_MEMORY).bits());
            e.b.memory_barrier(s, sem).map_err(internal1)
        }
        // `createpolicy` makes an L2 cache policy, an opaque 64-bit value
        // that only the `.L2::cache_hint` forms of `ld`/`st` read; they
        // ignore it (a hint changes no result), so any value serves: 0.
        "createpolicy" => {
            let Some(d) = inst.operands.first() else {
                return Err(Diagnostic::error(inst.span, "'createpolicy' expects a destination"));
            };
            let z = e.c_int(64, 0);
            super::values::set(e, fx, d, z, K::Int(64), false)
        }
        "prefetch" | "prefetchu" | "nanosleep" | "pmevent" | "discard" | "applypriority" => Ok(()),
        // Programmatic dependent launch: `.wait` waits until the grids this
        // one depends on have completed and their memory is visible, and
        // `.launch_dependents` lets dependent grids start early. The runtime
        // never starts a grid before the previous work of its stream has
        // completed (with a memory barrier in between), so the wait is
        // already satisfied and the early start is a hint it does not take.
        "griddepcontrol" => Ok(()),
        "trap" | "brkpt" => Err(unsupported(inst, "kernel traps are not supported yet")),
        "call" => super::call::call(e, fx, inst, None),
        "shfl" | "vote" | "match" | "redux" | "activemask" | "elect" | "mma" | "ldmatrix" | "stmatrix"
        | "movmatrix" | "wgmma" | "wmma" => {
            let t = e.c_bool(true);
            super::warp::emit(e, fx, inst, t)
        }
        _ => Err(unsupported(inst, "")),
    }
}

fn mov(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let t = last_type(inst)?;
    let [d, a] = operands::<2>(inst)?;
    let k = kind_of(t);
    let bits = t.size() * 8;
    match (d, a) {
        (Operand::Vector(_, parts), src) => {
            // Unpack: mov.b64 {lo, hi}, x
            let n = parts.len() as u32;
            let pb = bits / n.max(1);
            let v = get(e, fx, src, K::Int(bits), false)?;
            let it = e.t_int(bits);
            for (i, p) in parts.iter().enumerate() {
                let sh = e.c_int(bits, (i as u32 * pb) as u64);
                let s = e.b.shift_right_logical(it, None, v, sh).map_err(internal1)?;
                let piece = e.convert(s, K::Int(bits), K::Int(pb), false)?;
                set(e, fx, p, piece, K::Int(pb), false)?;
            }
            Ok(())
        }
        (dst, Operand::Vector(_, parts)) => {
            let n = parts.len() as u32;
            let pb = bits / n.max(1);
            let it = e.t_int(bits);
            let mut acc = e.c_int(bits, 0);
            for (i, p) in parts.iter().enumerate() {
                let v = get(e, fx, p, K::Int(pb), false)?;
                let w = e.convert(v, K::Int(pb), K::Int(bits), false)?;
                let sh = e.c_int(bits, (i as u32 * pb) as u64);
                let s = e.b.shift_left_logical(it, None, w, sh).map_err(internal1)?;
                acc = e.b.bitwise_or(it, None, acc, s).map_err(internal1)?;
            }
            set(e, fx, dst, acc, K::Int(bits), false)
        }
        (dst, src) => {
            let v = get(e, fx, src, k, t.is_signed())?;
            set(e, fx, dst, v, k, t.is_signed())
        }
    }
}

fn cvta(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let t = last_type(inst)?;
    let [d, a] = operands::<2>(inst)?;
    let space = mem::space_of(inst)?;
    let to = inst.has("to");
    let k = kind_of(t);
    match space {
        // .global and .const addresses are generic addresses unchanged.
        mem::Space::Global | mem::Space::Const => {
            let v = get(e, fx, a, k, false)?;
            set(e, fx, d, v, k, false)
        }
        mem::Space::Shared | mem::Space::Local => {
            if t.size() != 8 {
                return Err(unsupported(
                    inst,
                    "32-bit generic addresses need .address_size 32, which is not supported",
                ));
            }
            let window = if space == mem::Space::Shared { crate::abi::SHARED_WINDOW } else { crate::abi::LOCAL_WINDOW };
            let v = get(e, fx, a, K::Int(64), false)?;
            let r = window_convert(e, v, window, to)?;
            set(e, fx, d, r, K::Int(64), false)
        }
        // Kernel parameters whose address is taken live in the parameter
        // buffer, at a device address; a .func's .param variables are local.
        mem::Space::Param if fx.returns.is_none() => {
            let v = get(e, fx, a, k, false)?;
            set(e, fx, d, v, k, false)
        }
        mem::Space::Param => {
            let v = get(e, fx, a, K::Int(64), false)?;
            let r = window_convert(e, v, crate::abi::LOCAL_WINDOW, to)?;
            set(e, fx, d, r, K::Int(64), false)
        }
        _ => Err(unsupported(inst, "")),
    }
}

/// `cvta.to` (strip the window tag: generic → state-space offset) or `cvta`
/// (add it: offset → generic).
fn window_convert(e: &mut Emitter, v: Word, window: u64, to: bool) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    if to {
        let m = e.c_int(64, !crate::abi::WINDOW_MASK);
        e.b.bitwise_and(u64t, None, v, m).map_err(internal1)
    } else {
        let m = e.c_int(64, 0xFFFF_FFFF);
        let off = e.b.bitwise_and(u64t, None, v, m).map_err(internal1)?;
        let w = e.c_int(64, window);
        e.b.bitwise_or(u64t, None, off, w).map_err(internal1)
    }
}

fn isspacep(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let [d, a] = operands::<2>(inst)?;
    let space = mem::space_of(inst)?;
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let v = get(e, fx, a, K::Int(64), false)?;
    let m = e.c_int(64, crate::abi::WINDOW_MASK);
    let tag = e.b.bitwise_and(u64t, None, v, m).map_err(internal1)?;
    let sw = e.c_int(64, crate::abi::SHARED_WINDOW);
    let lw = e.c_int(64, crate::abi::LOCAL_WINDOW);
    let is_shared = e.b.i_equal(bt, None, tag, sw).map_err(internal1)?;
    let is_local = e.b.i_equal(bt, None, tag, lw).map_err(internal1)?;
    let r = match space {
        mem::Space::Shared => is_shared,
        mem::Space::Local => is_local,
        mem::Space::Global => {
            let either = e.b.logical_or(bt, None, is_shared, is_local).map_err(internal1)?;
            e.b.logical_not(bt, None, either).map_err(internal1)?
        }
        mem::Space::Const => e.c_bool(false),
        _ => return Err(unsupported(inst, "")),
    };
    set(e, fx, d, r, K::Pred, false)
}

fn signed_op(t: ScalarType, s: Op, u: Op) -> Op {
    if t.is_signed() {
        s
    } else {
        u
    }
}

fn int_binary(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let [d, a, b] = operands::<3>(inst)?;
    if t == ScalarType::Pred {
        let va = get(e, fx, a, K::Pred, false)?;
        let vb = get(e, fx, b, K::Pred, false)?;
        let bt = e.t_bool();
        let op = match inst.opcode.as_str() {
            "and" => Op::LogicalAnd,
            "or" => Op::LogicalOr,
            "xor" => Op::LogicalNotEqual,
            _ => return Err(unsupported(inst, "")),
        };
        let r = op2(e, op, bt, va, vb)?;
        return set(e, fx, d, r, K::Pred, false);
    }
    if inst.has("cc") || inst.has("f16x2") || inst.modifiers.iter().any(|m| m.ends_with("x2")) {
        return Err(unsupported(inst, "carry and packed forms are not supported yet"));
    }
    let bits = t.size() * 8;
    let k = K::Int(bits);
    let it = e.t_int(bits);
    let signed = t.is_signed();
    let opcode = inst.opcode.as_str();
    let wide = inst.has("wide");
    let hi = inst.has("hi");
    if opcode == "shl" || opcode == "shr" {
        let va = get(e, fx, a, k, signed)?;
        let amt = get(e, fx, b, K::Int(32), false)?;
        return shift(e, fx, d, va, amt, bits, opcode == "shl", signed && opcode == "shr");
    }
    let mut va = get(e, fx, a, k, signed)?;
    let mut vb = get(e, fx, b, k, signed)?;
    if opcode == "and" && e.opts.zero_operand_workaround {
        // Constant masks hidden from llvmpipe (see `zero::launder_int`).
        if matches!(a, Operand::Int(..)) {
            va = super::zero::launder_int(e, va, bits)?;
        }
        if matches!(b, Operand::Int(..)) {
            vb = super::zero::launder_int(e, vb, bits)?;
        }
    }
    let r = match opcode {
        "add" | "sub" if inst.has("sat") => {
            if t != ScalarType::S32 {
                return Err(unsupported(inst, ""));
            }
            let t64 = e.t_int(64);
            let _ = t64;
            let wa = e.sext(va, 32, 64)?;
            let wb = e.sext(vb, 32, 64)?;
            let s = op2(e, if opcode == "add" { Op::IAdd } else { Op::ISub }, t64, wa, wb)?;
            let lo = e.c_int(64, i32::MIN as i64 as u64);
            let hi = e.c_int(64, i32::MAX as u64);
            let c = ext(e, t64, glsl::SMAX, &[s, lo])?;
            let c = ext(e, t64, glsl::SMIN, &[c, hi])?;
            e.b.u_convert(it, None, c).map_err(internal1)?
        }
        "add" => e.b.i_add(it, None, va, vb).map_err(internal1)?,
        "sub" => e.b.i_sub(it, None, va, vb).map_err(internal1)?,
        "mul" if wide => {
            let w2 = e.t_int(bits * 2);
            let (wa, wb) = if signed {
                (e.sext(va, bits, bits * 2)?, e.sext(vb, bits, bits * 2)?)
            } else {
                (e.b.u_convert(w2, None, va).map_err(internal1)?, e.b.u_convert(w2, None, vb).map_err(internal1)?)
            };
            let r = e.b.i_mul(w2, None, wa, wb).map_err(internal1)?;
            return set(e, fx, d, r, K::Int(bits * 2), signed);
        }
        "mul" if hi => mul_hi(e, va, vb, bits, signed)?,
        "mul" => e.b.i_mul(it, None, va, vb).map_err(internal1)?,
        "div" | "rem" => div_rem(e, va, vb, bits, signed, opcode == "div")?,
        "min" | "max" => {
            let f = match (opcode, signed) {
                ("min", true) => glsl::SMIN,
                ("min", false) => glsl::UMIN,
                ("max", true) => glsl::SMAX,
                _ => glsl::UMAX,
            };
            let r = ext(e, it, f, &[va, vb])?;
            if inst.has("relu") {
                if !signed {
                    return Err(unsupported(inst, ".relu is for signed types"));
                }
                let z = e.c_int(bits, 0);
                ext(e, it, glsl::SMAX, &[r, z])?
            } else {
                r
            }
        }
        "and" => e.b.bitwise_and(it, None, va, vb).map_err(internal1)?,
        "or" => e.b.bitwise_or(it, None, va, vb).map_err(internal1)?,
        "xor" => e.b.bitwise_xor(it, None, va, vb).map_err(internal1)?,
        _ => return Err(unsupported(inst, "")),
    };
    set(e, fx, d, r, k, signed)
}

#[allow(clippy::too_many_arguments)]
fn shift(
    e: &mut Emitter,
    fx: &mut Fx,
    d: &Operand,
    va: Word,
    amt: Word,
    bits: u32,
    left: bool,
    arith: bool,
) -> Result<(), Diagnostic> {
    // PTX clamps shift amounts above the width; SPIR-V leaves them undefined.
    let it = e.t_int(bits);
    let u32t = e.t_int(32);
    let maxs = e.c_u32(bits - 1);
    let clamped = ext(e, u32t, glsl::UMIN, &[amt, maxs])?;
    let bt = e.t_bool();
    let big = e.b.u_greater_than(bt, None, amt, maxs).map_err(internal1)?;
    let r = if left {
        let s = e.b.shift_left_logical(it, None, va, clamped).map_err(internal1)?;
        let z = e.c_int(bits, 0);
        e.b.select(it, None, big, z, s).map_err(internal1)?
    } else if arith {
        // Shifting by width-1 already gives the sign fill.
        e.b.shift_right_arithmetic(it, None, va, clamped).map_err(internal1)?
    } else {
        let s = e.b.shift_right_logical(it, None, va, clamped).map_err(internal1)?;
        let z = e.c_int(bits, 0);
        e.b.select(it, None, big, z, s).map_err(internal1)?
    };
    set(e, fx, d, r, K::Int(bits), arith)
}

fn mul_hi(e: &mut Emitter, va: Word, vb: Word, bits: u32, signed: bool) -> Result<Word, Diagnostic> {
    let it = e.t_int(bits);
    let st = e.ty(super::TyKey::Struct(vec![it, it]));
    let r = if signed {
        e.b.s_mul_extended(st, None, va, vb).map_err(internal1)?
    } else {
        e.b.u_mul_extended(st, None, va, vb).map_err(internal1)?
    };
    e.b.composite_extract(it, None, r, [1]).map_err(internal1)
}

/// Division and remainder with NVIDIA's results where SPIR-V's are undefined.
///
/// Division by zero gives all ones for both `div` and `rem`, signed or not:
/// "in the case of division by zero, the integer division operators on
/// NVIDIA GPUs return a result with all bits set to 1 ... the same applies
/// to the modulo operator" (N. Juffa, NVIDIA, answer 12965050 on Stack
/// Overflow, 2012). `MIN / -1` wraps to `MIN` and `MIN % -1` is 0 (the
/// two's complement results of the hardware's unsigned division with sign
/// fix-up).
fn div_rem(e: &mut Emitter, va: Word, vb: Word, bits: u32, signed: bool, div: bool) -> Result<Word, Diagnostic> {
    let it = e.t_int(bits);
    let bt = e.t_bool();
    let zero = e.c_int(bits, 0);
    let one = e.c_int(bits, 1);
    let ones = e.c_int(bits, u64::MAX);
    let is0 = e.b.i_equal(bt, None, vb, zero).map_err(internal1)?;
    if !signed {
        let safe = e.b.select(it, None, is0, one, vb).map_err(internal1)?;
        let r = if div {
            e.b.u_div(it, None, va, safe).map_err(internal1)?
        } else {
            e.b.u_mod(it, None, va, safe).map_err(internal1)?
        };
        return e.b.select(it, None, is0, ones, r).map_err(internal1);
    }
    let is_m1 = e.b.i_equal(bt, None, vb, ones).map_err(internal1)?;
    let special = e.b.logical_or(bt, None, is0, is_m1).map_err(internal1)?;
    let safe = e.b.select(it, None, special, one, vb).map_err(internal1)?;
    let r = if div {
        let q = e.b.s_div(it, None, va, safe).map_err(internal1)?;
        let neg = e.b.s_negate(it, None, va).map_err(internal1)?;
        e.b.select(it, None, is_m1, neg, q).map_err(internal1)?
    } else {
        let r = e.b.s_rem(it, None, va, safe).map_err(internal1)?;
        e.b.select(it, None, is_m1, zero, r).map_err(internal1)?
    };
    e.b.select(it, None, is0, ones, r).map_err(internal1)
}

fn int_mad(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let [d, a, b, c] = operands::<4>(inst)?;
    if inst.has("cc") || inst.has("sat") {
        return Err(unsupported(inst, "carry and saturating forms are not supported yet"));
    }
    let bits = t.size() * 8;
    let signed = t.is_signed();
    let k = K::Int(bits);
    let va = get(e, fx, a, k, signed)?;
    let vb = get(e, fx, b, k, signed)?;
    if inst.has("wide") {
        let w2 = e.t_int(bits * 2);
        let (wa, wb) = if signed {
            (e.sext(va, bits, bits * 2)?, e.sext(vb, bits, bits * 2)?)
        } else {
            (e.b.u_convert(w2, None, va).map_err(internal1)?, e.b.u_convert(w2, None, vb).map_err(internal1)?)
        };
        let p = e.b.i_mul(w2, None, wa, wb).map_err(internal1)?;
        let vc = get(e, fx, c, K::Int(bits * 2), signed)?;
        let r = e.b.i_add(w2, None, p, vc).map_err(internal1)?;
        return set(e, fx, d, r, K::Int(bits * 2), signed);
    }
    let it = e.t_int(bits);
    let p = if inst.has("hi") {
        mul_hi(e, va, vb, bits, signed)?
    } else {
        e.b.i_mul(it, None, va, vb).map_err(internal1)?
    };
    let vc = get(e, fx, c, k, signed)?;
    let r = e.b.i_add(it, None, p, vc).map_err(internal1)?;
    set(e, fx, d, r, k, signed)
}

fn int_unary(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let [d, a] = operands::<2>(inst)?;
    if t == ScalarType::Pred {
        if inst.opcode != "not" {
            return Err(unsupported(inst, ""));
        }
        let v = get(e, fx, a, K::Pred, false)?;
        let bt = e.t_bool();
        let r = e.b.logical_not(bt, None, v).map_err(internal1)?;
        return set(e, fx, d, r, K::Pred, false);
    }
    let bits = t.size() * 8;
    let k = K::Int(bits);
    let it = e.t_int(bits);
    let u32t = e.t_int(32);
    let signed = t.is_signed();
    let v = get(e, fx, a, k, signed)?;
    let (r, rk) = match inst.opcode.as_str() {
        "not" => (e.b.not(it, None, v).map_err(internal1)?, k),
        "neg" => (e.b.s_negate(it, None, v).map_err(internal1)?, k),
        "abs" => {
            let z = e.c_int(bits, 0);
            let bt = e.t_bool();
            let neg = e.b.s_less_than(bt, None, v, z).map_err(internal1)?;
            let n = e.b.s_negate(it, None, v).map_err(internal1)?;
            (e.b.select(it, None, neg, n, v).map_err(internal1)?, k)
        }
        "bfind" if bits == 64 => (super::bits::bfind64(e, v, signed, inst.has("shiftamt"))?, K::Int(32)),
        "cnot" => {
            let bt = e.t_bool();
            let z = e.c_int(bits, 0);
            let one = e.c_int(bits, 1);
            let is0 = e.b.i_equal(bt, None, v, z).map_err(internal1)?;
            (e.b.select(it, None, is0, one, z).map_err(internal1)?, k)
        }
        "popc" | "clz" | "brev" | "bfind" if bits == 32 => match inst.opcode.as_str() {
            "popc" => (e.b.bit_count(u32t, None, v).map_err(internal1)?, K::Int(32)),
            "brev" => (e.b.bit_reverse(u32t, None, v).map_err(internal1)?, K::Int(32)),
            "clz" => {
                let msb = ext(e, u32t, glsl::FIND_UMSB, &[v])?;
                let c31 = e.c_u32(31);
                let r = e.b.i_sub(u32t, None, c31, msb).map_err(internal1)?;
                let bt = e.t_bool();
                let z = e.c_u32(0);
                let is0 = e.b.i_equal(bt, None, v, z).map_err(internal1)?;
                let c32 = e.c_u32(32);
                (e.b.select(u32t, None, is0, c32, r).map_err(internal1)?, K::Int(32))
            }
            _ => {
                // FindUMsb/FindSMsb return -1 when no bit is found, as bfind does.
                let msb = ext(e, u32t, if signed { glsl::FIND_SMSB } else { glsl::FIND_UMSB }, &[v])?;
                if inst.has("shiftamt") {
                    let c31 = e.c_u32(31);
                    let r = e.b.i_sub(u32t, None, c31, msb).map_err(internal1)?;
                    let bt = e.t_bool();
                    let m1 = e.c_u32(u32::MAX);
                    let none = e.b.i_equal(bt, None, msb, m1).map_err(internal1)?;
                    (e.b.select(u32t, None, none, m1, r).map_err(internal1)?, K::Int(32))
                } else {
                    (msb, K::Int(32))
                }
            }
        },
        "popc" | "clz" | "brev" if bits == 64 => {
            let lo = e.b.u_convert(u32t, None, v).map_err(internal1)?;
            let c32 = e.c_int(64, 32);
            let hs = e.b.shift_right_logical(it, None, v, c32).map_err(internal1)?;
            let hi = e.b.u_convert(u32t, None, hs).map_err(internal1)?;
            match inst.opcode.as_str() {
                "popc" => {
                    let a = e.b.bit_count(u32t, None, lo).map_err(internal1)?;
                    let b = e.b.bit_count(u32t, None, hi).map_err(internal1)?;
                    (e.b.i_add(u32t, None, a, b).map_err(internal1)?, K::Int(32))
                }
                "brev" => {
                    let a = e.b.bit_reverse(u32t, None, lo).map_err(internal1)?;
                    let b = e.b.bit_reverse(u32t, None, hi).map_err(internal1)?;
                    (e.make_u64(b, a)?, K::Int(64))
                }
                _ => {
                    let bt = e.t_bool();
                    let c31 = e.c_u32(31);
                    let z = e.c_u32(0);
                    let c32 = e.c_u32(32);
                    let mh = ext(e, u32t, glsl::FIND_UMSB, &[hi])?;
                    let ml = ext(e, u32t, glsl::FIND_UMSB, &[lo])?;
                    let zh = e.b.i_sub(u32t, None, c31, mh).map_err(internal1)?;
                    let zl = e.b.i_sub(u32t, None, c31, ml).map_err(internal1)?;
                    let zl = e.b.i_add(u32t, None, zl, c32).map_err(internal1)?;
                    let lo0 = e.b.i_equal(bt, None, lo, z).map_err(internal1)?;
                    let c64 = e.c_u32(64);
                    let zl = e.b.select(u32t, None, lo0, c64, zl).map_err(internal1)?;
                    let hi0 = e.b.i_equal(bt, None, hi, z).map_err(internal1)?;
                    (e.b.select(u32t, None, hi0, zl, zh).map_err(internal1)?, K::Int(32))
                }
            }
        }
        _ => return Err(unsupported(inst, "")),
    };
    set(e, fx, d, r, rk, signed)
}

/// The SPIR-V comparison for a PTX comparison operator.
pub(crate) fn compare(e: &mut Emitter, cmp: &str, t: ScalarType, a: Word, b: Word) -> Result<Option<Word>, Diagnostic> {
    let bt = e.t_bool();
    let s = t.is_signed();
    let op = if t.is_float() {
        match cmp {
            "eq" => Op::FOrdEqual,
            "ne" => Op::FOrdNotEqual,
            "lt" => Op::FOrdLessThan,
            "le" => Op::FOrdLessThanEqual,
            "gt" => Op::FOrdGreaterThan,
            "ge" => Op::FOrdGreaterThanEqual,
            "equ" => Op::FUnordEqual,
            "neu" => Op::FUnordNotEqual,
            "ltu" => Op::FUnordLessThan,
            "leu" => Op::FUnordLessThanEqual,
            "gtu" => Op::FUnordGreaterThan,
            "geu" => Op::FUnordGreaterThanEqual,
            "num" | "nan" => {
                let na = op1(e, Op::IsNan, bt, a)?;
                let nb = op1(e, Op::IsNan, bt, b)?;
                let any = e.b.logical_or(bt, None, na, nb).map_err(internal1)?;
                return Ok(Some(if cmp == "nan" { any } else { e.b.logical_not(bt, None, any).map_err(internal1)? }));
            }
            _ => return Ok(None),
        }
    } else if t == ScalarType::Pred {
        match cmp {
            "eq" => Op::LogicalEqual,
            "ne" => Op::LogicalNotEqual,
            _ => return Ok(None),
        }
    } else {
        match cmp {
            "eq" => Op::IEqual,
            "ne" => Op::INotEqual,
            "lt" => signed_op(t, Op::SLessThan, Op::ULessThan),
            "le" => signed_op(t, Op::SLessThanEqual, Op::ULessThanEqual),
            "gt" => signed_op(t, Op::SGreaterThan, Op::UGreaterThan),
            "ge" => signed_op(t, Op::SGreaterThanEqual, Op::UGreaterThanEqual),
            "lo" => Op::ULessThan,
            "ls" => Op::ULessThanEqual,
            "hi" => Op::UGreaterThan,
            "hs" => Op::UGreaterThanEqual,
            _ => return Ok(None),
        }
    };
    let _ = s;
    Ok(Some(op2(e, op, bt, a, b)?))
}

pub(crate) const CMPS: [&str; 22] = [
    "eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan",
    "", "", "", "",
];

fn setp(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let t = last_type(inst)?;
    let cmp = inst
        .modifiers
        .iter()
        .find(|m| CMPS.contains(&m.as_str()) && !m.is_empty())
        .ok_or_else(|| Diagnostic::error(inst.opcode_span, "setp needs a comparison operator"))?
        .clone();
    if float::is_half(t) {
        return super::half::setp(e, fx, inst, t, &cmp);
    }
    let bool_op = ["and", "or", "xor"].into_iter().find(|b| inst.has(b));
    let ops = inst.operands.as_slice();
    let (dst, a, b, c) = match (ops, bool_op) {
        ([d, a, b], None) => (d, a, b, None),
        ([d, a, b, c], Some(_)) => (d, a, b, Some(c)),
        _ => return Err(Diagnostic::error(inst.span, format!("wrong operands for '{}'", inst.mnemonic()))),
    };
    let k = kind_of(t);
    let mut va = get(e, fx, a, k, t.is_signed())?;
    let mut vb = get(e, fx, b, k, t.is_signed())?;
    if inst.has("ftz") && t == ScalarType::F32 {
        va = float::flush(e, va, 32)?;
        vb = float::flush(e, vb, 32)?;
    }
    let Some(mut r) = compare(e, &cmp, t, va, vb)? else {
        return Err(unsupported(inst, "comparison not valid for this type"));
    };
    let bt = e.t_bool();
    let mut q = e.b.logical_not(bt, None, r).map_err(internal1)?;
    if let (Some(op), Some(c)) = (bool_op, c) {
        let vc = get(e, fx, c, K::Pred, false)?;
        let o = match op {
            "and" => Op::LogicalAnd,
            "or" => Op::LogicalOr,
            _ => Op::LogicalNotEqual,
        };
        r = op2(e, o, bt, r, vc)?;
        q = op2(e, o, bt, q, vc)?;
    }
    match dst {
        Operand::Pair(_, p, qd) => {
            set(e, fx, p, r, K::Pred, false)?;
            set(e, fx, qd, q, K::Pred, false)
        }
        p => set(e, fx, p, r, K::Pred, false),
    }
}

fn selp(e: &mut Emitter, fx: &mut Fx, inst: &Instruction) -> Result<(), Diagnostic> {
    let t = last_type(inst)?;
    let [d, a, b, c] = operands::<4>(inst)?;
    let k = kind_of(t);
    let va = get(e, fx, a, k, t.is_signed())?;
    let vb = get(e, fx, b, k, t.is_signed())?;
    let vc = get(e, fx, c, K::Pred, false)?;
    let ty = e.kty(k);
    let r = e.b.select(ty, None, vc, va, vb).map_err(internal1)?;
    set(e, fx, d, r, k, t.is_signed())
}
