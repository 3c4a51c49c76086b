//! Extended-precision integer arithmetic: the carry flag `CC.CF` and the
//! instructions that write or read it (`add.cc`, `addc{.cc}`, `sub.cc`,
//! `subc{.cc}`, `mad{.lo,.hi}.cc`, `madc{.lo,.hi}{.cc}`).
//!
//! PTX has one carry flag per thread. It lives in a `Function` variable
//! (a 32-bit 0 or 1) created the first time a function uses it, at the top
//! of the function's first block and initialized to 0; it is kept in the
//! register map under a name no PTX identifier can have. For subtraction
//! the flag holds the borrow, as PTX defines it: `sub.cc` sets it when
//! `a < b` (unsigned), and `subc` computes `a - (b + CF)`.

use super::func::{internal1, Fx};
use super::rounding::{o, R};
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, ScalarType};
use crate::diag::Diagnostic;

use rspirv::spirv::{self, Op, Word};

/// The register-map key of the carry flag (contains a space: never a PTX name).
const CC_KEY: &str = "CC CF";

/// The carry flag's variable in the current function.
fn cc_var(e: &mut Emitter, fx: &mut Fx) -> Result<Word, Diagnostic> {
    if let Some(&(v, _)) = fx.regs.get(CC_KEY) {
        return Ok(v);
    }
    let u32t = e.t_int(32);
    let pt = e.t_ptr(spirv::StorageClass::Function, u32t);
    let zero = e.c_u32(0);
    let id = e.b.entry_variable(pt, Some(zero)).map_err(internal1)?;
    fx.regs.insert(CC_KEY, (id, K::Int(32)));
    Ok(id)
}

fn load_cf(e: &mut Emitter, fx: &mut Fx, bits: u32) -> R {
    let v = cc_var(e, fx)?;
    let u32t = e.t_int(32);
    let c = e.b.load(u32t, None, v, None, []).map_err(internal1)?;
    e.convert(c, K::Int(32), K::Int(bits), false)
}

fn store_cf(e: &mut Emitter, fx: &mut Fx, c: Word, bits: u32) -> Result<(), Diagnostic> {
    let v = cc_var(e, fx)?;
    let c = e.convert(c, K::Int(bits), K::Int(32), false)?;
    e.b.store(v, c, None, []).map_err(internal1)
}

/// `x + y` (or `x - y`) with the carry (borrow) out, as integers of `bits`.
fn add_carry(e: &mut Emitter, x: Word, y: Word, bits: u32, sub: bool) -> Result<(Word, Word), Diagnostic> {
    let it = e.t_int(bits);
    let st = e.ty(super::TyKey::Struct(vec![it, it]));
    let r = o(e, if sub { Op::ISubBorrow } else { Op::IAddCarry }, st, &[x, y])?;
    let v = e.b.composite_extract(it, None, r, [0]).map_err(internal1)?;
    let c = e.b.composite_extract(it, None, r, [1]).map_err(internal1)?;
    Ok((v, c))
}

/// Whether an instruction belongs here.
pub(crate) fn handles(inst: &Instruction) -> bool {
    match inst.opcode.as_str() {
        "addc" | "subc" | "madc" => true,
        "add" | "sub" | "mad" => inst.has("cc"),
        _ => false,
    }
}

/// Emit one carry instruction.
pub(crate) fn emit(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let bits = match t {
        ScalarType::U32 | ScalarType::S32 | ScalarType::B32 => 32,
        ScalarType::U64 | ScalarType::S64 | ScalarType::B64 => 64,
        _ => return Err(super::float::unsupported(inst, "carry arithmetic is defined on 32- and 64-bit integers")),
    };
    let k = K::Int(bits);
    let it = e.t_int(bits);
    let op = inst.opcode.as_str();
    let with_cin = matches!(op, "addc" | "subc" | "madc");
    let set_cc = inst.has("cc");
    let sub = matches!(op, "sub" | "subc");
    let (d, x, y) = match (op, inst.operands.as_slice()) {
        ("mad" | "madc", [d, a, b, c]) => {
            let va = get(e, fx, a, k, false)?;
            let vb = get(e, fx, b, k, false)?;
            let p = if inst.has("hi") {
                let st = e.ty(super::TyKey::Struct(vec![it, it]));
                let m = o(e, if t.is_signed() { Op::SMulExtended } else { Op::UMulExtended }, st, &[va, vb])?;
                e.b.composite_extract(it, None, m, [1]).map_err(internal1)?
            } else if inst.has("lo") {
                o(e, Op::IMul, it, &[va, vb])?
            } else {
                return Err(super::float::unsupported(inst, "needs .lo or .hi"));
            };
            (d, p, get(e, fx, c, k, false)?)
        }
        ("add" | "addc" | "sub" | "subc", [d, a, b]) => (d, get(e, fx, a, k, false)?, get(e, fx, b, k, false)?),
        _ => {
            return Err(Diagnostic::error(inst.span, format!("wrong operands for '{}'", inst.mnemonic())));
        }
    };
    let (r, c) = add_carry(e, x, y, bits, sub)?;
    let (r, c) = if with_cin {
        let cin = load_cf(e, fx, bits)?;
        let (r2, c2) = add_carry(e, r, cin, bits, sub)?;
        (r2, o(e, Op::BitwiseOr, it, &[c, c2])?)
    } else {
        (r, c)
    };
    if set_cc {
        store_cf(e, fx, c, bits)?;
    }
    set(e, fx, d, r, k, false)
}
