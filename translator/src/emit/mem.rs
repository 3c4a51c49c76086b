//! Memory access: addresses in each state space, loads, stores and atomics.

use super::fault::{guard, Access, Site};
use super::func::{internal1, Fx};
use super::values::{get, set, K};
use super::Emitter;
use crate::abi::{ParamPassing, PUSH_HEADER_WORDS};
use crate::ast::{Address, Instruction, Operand, ScalarType};
use crate::diag::{Diagnostic, Span};
use rspirv::dr::Operand as SOp;
use rspirv::spirv::{self, Capability, MemoryAccess, Op, Scope, StorageClass, Word};

/// A resolved address.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Addr {
    /// A 64-bit device address (`.global`, `.const` variables, generic).
    Global(Word),
    /// A byte offset in the entry's `.shared` words.
    Shared(Word),
    /// A byte offset in the function's `.local` words.
    Local(Word),
    /// A constant byte offset in the kernel parameter block.
    Param(u32),
    /// A generic address: global, or tagged shared/local (see [`crate::abi::SHARED_WINDOW`]).
    Generic(Word),
}

/// The module's constants of `.shared` memory beyond Workgroup memory (see
/// [`crate::abi`], "Shared memory beyond Workgroup memory").
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spill {
    /// Spec constant: the spill area's device address (u64).
    address: Word,
    /// Spec constant: its bytes per workgroup (u32).
    pub stride: Word,
    /// Spec constant op: `address != 0`.
    pub on: Word,
    /// Spec constant: the first spilled byte (u32).
    pub hot_bytes: Word,
}

impl Spill {
    /// Declares the spill constants.
    pub(crate) fn new(e: &mut Emitter) -> Spill {
        let u32t = e.t_int(32);
        let u64t = e.t_int(64);
        let bt = e.t_bool();
        let address = e.b.spec_constant_bit64(u64t, 0);
        e.b.decorate(address, spirv::Decoration::SpecId, [SOp::LiteralBit32(crate::abi::SPEC_SHARED_SPILL_ADDRESS)]);
        let stride = e.b.spec_constant_bit32(u32t, 0);
        e.b.decorate(stride, spirv::Decoration::SpecId, [SOp::LiteralBit32(crate::abi::SPEC_SHARED_SPILL_STRIDE)]);
        let zero = e.c_int(64, 0);
        let on = e.b.spec_constant_op(bt, Op::INotEqual, &[address, zero]);
        let hot_bytes = e.b.spec_constant_bit32(u32t, 0);
        e.b.decorate(hot_bytes, spirv::Decoration::SpecId, [SOp::LiteralBit32(crate::abi::SPEC_SHARED_HOT_BYTES)]);
        Spill { address, stride, on, hot_bytes }
    }
}

/// Run `body` on `.shared` byte `off` where it lives in this launch: with
/// `Addr::Shared(off)` (Workgroup memory: `body` accesses the shared words
/// directly) when `off` is below the hot bytes or nothing spills, else with
/// `Addr::Global` of its place in the workgroup's spill area; the results
/// merge with `OpPhi`. Without spilling, one direct call.
fn shared_split(
    e: &mut Emitter,
    fx: &Fx,
    off: Word,
    result: Option<K>,
    body: &mut AccessFn,
) -> Result<Option<Word>, Diagnostic> {
    let Some(s) = e.spill.filter(|_| fx.shared_var.is_some()) else {
        return body(e, fx, Addr::Shared(off));
    };
    let bt = e.t_bool();
    // With no hot part (0) this is `true` and the driver keeps one path.
    let above = e.b.u_less_than_equal(bt, None, s.hot_bytes, off).map_err(internal1)?;
    let spilled = e.b.logical_and(bt, None, s.on, above).map_err(internal1)?;
    either(e, spilled, result, "spilled shared access", &mut |e, far| {
        if far {
            let addr = spill_address(e, s, off)?;
            body(e, fx, Addr::Global(addr))
        } else {
            body(e, fx, Addr::Shared(off))
        }
    })
}

/// The device address of `.shared` byte `off` (at or above the hot bytes)
/// in this workgroup's slot of the spill area.
fn spill_address(e: &mut Emitter, s: Spill, off: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let id = super::block_order::workgroup_id(e)?;
    let (w, _) = super::block_order::linear_workgroup(e, id)?;
    let w = e.b.u_convert(u64t, None, w).map_err(internal1)?;
    let stride = e.b.u_convert(u64t, None, s.stride).map_err(internal1)?;
    let base = e.b.i_mul(u64t, None, w, stride).map_err(internal1)?;
    let base = e.b.i_add(u64t, None, s.address, base).map_err(internal1)?;
    let rel = e.b.i_sub(u32t, None, off, s.hot_bytes).map_err(internal1)?;
    let rel = e.b.u_convert(u64t, None, rel).map_err(internal1)?;
    e.b.i_add(u64t, None, base, rel).map_err(internal1)
}

/// One arm of [`either`]: `true` for the taken branch.
type ArmFn<'f> = dyn FnMut(&mut Emitter, bool) -> Result<Option<Word>, Diagnostic> + 'f;

/// `if (cond) arm(true) else arm(false)` in structured control flow, the
/// two results (of kind `result`, when there is one) merged with `OpPhi`;
/// `what` names the access in an internal error.
pub(crate) fn either(
    e: &mut Emitter,
    cond: Word,
    result: Option<K>,
    what: &str,
    arm: &mut ArmFn,
) -> Result<Option<Word>, Diagnostic> {
    let yes = e.b.id();
    let no = e.b.id();
    let merge = e.b.id();
    e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(cond, yes, no, []).map_err(internal1)?;
    e.b.begin_block(Some(yes)).map_err(internal1)?;
    let r1 = arm(e, true)?;
    let end1 = e.current_label()?;
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(no)).map_err(internal1)?;
    let r2 = arm(e, false)?;
    let end2 = e.current_label()?;
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    match (result, r1, r2) {
        (Some(k), Some(v1), Some(v2)) => {
            let t = e.kty(k);
            Ok(Some(e.b.phi(t, None, [(v1, end1), (v2, end2)]).map_err(internal1)?))
        }
        (None, ..) => Ok(None),
        _ => Err(Diagnostic::error(Span::default(), format!("internal error: {what}"))),
    }
}

/// The state space an instruction names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    Generic,
    Global,
    Const,
    Shared,
    Local,
    Param,
}

pub(crate) fn space_of(inst: &Instruction) -> Result<Space, Diagnostic> {
    for m in &inst.modifiers {
        let s = match m.as_str() {
            "global" => Space::Global,
            "const" => Space::Const,
            "shared" | "shared::cta" | "shared::cluster" => Space::Shared,
            "local" => Space::Local,
            "param" | "param::entry" | "param::func" => Space::Param,
            "tex" => return Err(Diagnostic::error(inst.span, "the .tex state space is not supported")),
            _ => continue,
        };
        return Ok(s);
    }
    Ok(Space::Generic)
}

fn off_u32(e: &mut Emitter, base: Word, off: i64) -> Result<Word, Diagnostic> {
    if off == 0 {
        return Ok(base);
    }
    let u32t = e.t_int(32);
    let c = e.c_u32(off as u32);
    e.b.i_add(u32t, None, base, c).map_err(internal1)
}

/// Resolve `[base+offset]` in `space`.
pub(crate) fn resolve(e: &mut Emitter, fx: &mut Fx, space: Space, a: &Address, span: Span) -> Result<Addr, Diagnostic> {
    let Some((bspan, name)) = &a.base else {
        let off = a.offset;
        return Ok(match space {
            Space::Shared => Addr::Shared(e.c_u32(off as u32)),
            Space::Local => Addr::Local(e.c_u32(off as u32)),
            Space::Param => Addr::Param(off as u32),
            _ => Addr::Global(e.c_int(64, off as u64)),
        });
    };
    // Variables named directly.
    if let Some(p) = fx.params.get(name.as_str()) {
        if !matches!(space, Space::Param | Space::Generic) {
            return Err(Diagnostic::error(*bspan, format!("'{name}' is a kernel parameter, not in this state space")));
        }
        return Ok(Addr::Param((p.offset as i64 + a.offset) as u32));
    }
    if let Some(p) = fx.shared.get(name.as_str()) {
        if !matches!(space, Space::Shared | Space::Generic) {
            return Err(Diagnostic::error(*bspan, format!("'{name}' is a .shared variable")));
        }
        let c = e.c_u32((p.offset as i64 + a.offset) as u32);
        return Ok(Addr::Shared(c));
    }
    if let Some(p) = fx.local.get(name.as_str()) {
        if !matches!(space, Space::Local | Space::Param | Space::Generic) {
            return Err(Diagnostic::error(*bspan, format!("'{name}' is a .local variable")));
        }
        let c = e.c_u32((fx.local_base as i64 + p.offset as i64 + a.offset) as u32);
        return Ok(Addr::Local(c));
    }
    if let Some(&(off, _)) = e.globals.get(name.as_str()) {
        if !matches!(space, Space::Global | Space::Const | Space::Generic) {
            return Err(Diagnostic::error(*bspan, format!("'{name}' is a module variable in .global/.const")));
        }
        let Some(base) = e.module_data_address()? else {
            return Err(Diagnostic::error(span, "internal error: module data address missing"));
        };
        let u64t = e.t_int(64);
        let c = e.c_int(64, (off as i64 + a.offset) as u64);
        return Ok(Addr::Global(e.b.i_add(u64t, None, base, c).map_err(internal1)?));
    }
    // A register holding an address.
    let reg = Operand::Name { span: *bspan, name: name.clone(), component: None };
    match space {
        Space::Shared | Space::Local => {
            let v = get(e, fx, &reg, K::Int(32), false)?;
            let v = off_u32(e, v, a.offset)?;
            Ok(if space == Space::Shared { Addr::Shared(v) } else { Addr::Local(v) })
        }
        Space::Param => {
            if fx.returns.is_some() {
                // In a .func: its .param variables live in local memory.
                let v = get(e, fx, &reg, K::Int(32), false)?;
                Ok(Addr::Local(off_u32(e, v, a.offset)?))
            } else if fx.passing == ParamPassing::Buffer {
                // An entry whose parameter addresses are taken: the buffer's device address.
                let v = get(e, fx, &reg, K::Int(64), false)?;
                let u64t = e.t_int(64);
                let c = e.c_int(64, a.offset as u64);
                Ok(Addr::Global(e.b.i_add(u64t, None, v, c).map_err(internal1)?))
            } else {
                Err(Diagnostic::error(*bspan, "internal error: parameter address in a register"))
            }
        }
        _ => {
            let v = get(e, fx, &reg, K::Int(64), false)?;
            let v = if a.offset != 0 {
                let u64t = e.t_int(64);
                let c = e.c_int(64, a.offset as u64);
                e.b.i_add(u64t, None, v, c).map_err(internal1)?
            } else {
                v
            };
            // A register that cannot hold a .shared or .local address
            // (`windowed.rs`) needs no test of its window.
            let windowed = fx.windowed.as_ref().is_none_or(|w| w.contains(name.as_str()));
            Ok(if space == Space::Generic && windowed { Addr::Generic(v) } else { Addr::Global(v) })
        }
    }
}

/// Advance an address by a constant number of bytes.
pub(crate) fn advance(e: &mut Emitter, a: Addr, by: u32) -> Result<Addr, Diagnostic> {
    if by == 0 {
        return Ok(a);
    }
    Ok(match a {
        Addr::Global(v) => {
            let u64t = e.t_int(64);
            let c = e.c_int(64, by as u64);
            Addr::Global(e.b.i_add(u64t, None, v, c).map_err(internal1)?)
        }
        Addr::Shared(v) => Addr::Shared(off_u32(e, v, by as i64)?),
        Addr::Local(v) => Addr::Local(off_u32(e, v, by as i64)?),
        Addr::Param(o) => Addr::Param(o + by),
        Addr::Generic(v) => {
            let u64t = e.t_int(64);
            let c = e.c_int(64, by as u64);
            Addr::Generic(e.b.i_add(u64t, None, v, c).map_err(internal1)?)
        }
    })
}

/// One access at a resolved address, returning its value if it has one.
pub(crate) type AccessFn<'f> = dyn FnMut(&mut Emitter, &Fx, Addr) -> Result<Option<Word>, Diagnostic> + 'f;

/// Split a generic access by window: run `body` once per state space the
/// address may be in, and merge the results (`OpPhi` when there is a value).
/// `with_local`: whether `.local` is a possible target (atomics never reach it).
pub(crate) fn dispatch(
    e: &mut Emitter,
    fx: &Fx,
    addr: Word,
    result: Option<K>,
    with_local: bool,
    body: &mut AccessFn,
) -> Result<Option<Word>, Diagnostic> {
    let mut windows = Vec::new();
    if fx.shared_var.is_some() {
        windows.push(crate::abi::SHARED_WINDOW);
    }
    if with_local && fx.local_var.is_some() {
        windows.push(crate::abi::LOCAL_WINDOW);
    }
    dispatch_from(e, fx, addr, result, &windows, body)
}

fn dispatch_from(
    e: &mut Emitter,
    fx: &Fx,
    addr: Word,
    result: Option<K>,
    windows: &[u64],
    body: &mut AccessFn,
) -> Result<Option<Word>, Diagnostic> {
    let Some((&w, rest)) = windows.split_first() else {
        return body(e, fx, Addr::Global(addr));
    };
    let u64t = e.t_int(64);
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let mask = e.c_int(64, crate::abi::WINDOW_MASK);
    let tag = e.b.bitwise_and(u64t, None, addr, mask).map_err(internal1)?;
    let want = e.c_int(64, w);
    let hit = e.b.i_equal(bt, None, tag, want).map_err(internal1)?;
    either(e, hit, result, "generic dispatch", &mut |e, hit| {
        if hit {
            let off = e.b.u_convert(u32t, None, addr).map_err(internal1)?;
            let a = if w == crate::abi::SHARED_WINDOW { Addr::Shared(off) } else { Addr::Local(off) };
            body(e, fx, a)
        } else {
            dispatch_from(e, fx, addr, result, rest, body)
        }
    })
}

/// The kind a memory access of PTX type `t` reads or writes.
pub(crate) fn mem_kind(t: ScalarType) -> K {
    match t {
        ScalarType::F32 => K::Float(32),
        ScalarType::F64 => K::Float(64),
        _ => K::Int(t.size() * 8),
    }
}

/// A `PhysicalStorageBuffer` pointer to a value of kind `k` at the device
/// address `addr`.
pub(crate) fn psb_ptr(e: &mut Emitter, k: K, addr: Word) -> Result<Word, Diagnostic> {
    match k.bits() {
        8 => {
            e.cap(Capability::StorageBuffer8BitAccess);
        }
        16 => {
            e.cap(Capability::StorageBuffer16BitAccess);
        }
        _ => {}
    }
    let t = e.kty(k);
    let pt = e.t_ptr(StorageClass::PhysicalStorageBuffer, t);
    e.b.convert_u_to_ptr(pt, None, addr).map_err(internal1)
}

fn word_ptr(e: &mut Emitter, fx: &Fx, sc: StorageClass, index: Word) -> Result<Word, Diagnostic> {
    let var = match sc {
        StorageClass::Workgroup => fx.shared_var,
        _ => fx.local_var,
    };
    let sc = if sc == StorageClass::Workgroup { sc } else { StorageClass::Private };
    let Some(var) = var else {
        return Err(Diagnostic::error(Span::default(), "access to a state space the function does not declare"));
    };
    let u32t = e.t_int(32);
    let pt = e.t_ptr(sc, u32t);
    e.b.access_chain(pt, None, var, [index]).map_err(internal1)
}

fn word_index(e: &mut Emitter, off: Word, plus: u32) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let two = e.c_u32(2);
    let i = e.b.shift_right_logical(u32t, None, off, two).map_err(internal1)?;
    if plus == 0 {
        Ok(i)
    } else {
        let c = e.c_u32(plus);
        e.b.i_add(u32t, None, i, c).map_err(internal1)
    }
}

/// Extract `bits` (8 or 16) from `word` at byte `off & 3`.
fn extract(e: &mut Emitter, word: Word, off: Word, bits: u32) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let three = e.c_u32(3);
    let lo = e.b.bitwise_and(u32t, None, off, three).map_err(internal1)?;
    let sh = e.b.shift_left_logical(u32t, None, lo, three).map_err(internal1)?;
    let v = e.b.shift_right_logical(u32t, None, word, sh).map_err(internal1)?;
    let t = e.t_int(bits);
    e.b.u_convert(t, None, v).map_err(internal1)
}

/// Pointer to 64-bit word `index` of the entry's wide shared memory.
fn wide_ptr(e: &mut Emitter, fx: &Fx, index: Word) -> Result<Word, Diagnostic> {
    let Some(var) = fx.shared_var else {
        return Err(Diagnostic::error(Span::default(), "access to .shared memory the function does not declare"));
    };
    let u64t = e.t_int(64);
    let pt = e.t_ptr(StorageClass::Workgroup, u64t);
    e.b.access_chain(pt, None, var, [index]).map_err(internal1)
}

/// The 64-bit word holding byte `off`, and the bit position of `off` in it.
fn wide_locate(e: &mut Emitter, fx: &Fx, off: Word) -> Result<(Word, Word), Diagnostic> {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let three = e.c_u32(3);
    let seven = e.c_u32(7);
    let i = e.b.shift_right_logical(u32t, None, off, three).map_err(internal1)?;
    let p = wide_ptr(e, fx, i)?;
    let low = e.b.bitwise_and(u32t, None, off, seven).map_err(internal1)?;
    let sh = e.b.shift_left_logical(u32t, None, low, three).map_err(internal1)?;
    let sh = e.b.u_convert(u64t, None, sh).map_err(internal1)?;
    Ok((p, sh))
}

fn load_wide(e: &mut Emitter, fx: &Fx, off: Word, k: K) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let bits = k.bits();
    let (p, sh) = wide_locate(e, fx, off)?;
    let w = e.b.load(u64t, None, p, None, []).map_err(internal1)?;
    let v = if bits == 64 {
        w
    } else {
        let s = e.b.shift_right_logical(u64t, None, w, sh).map_err(internal1)?;
        let t = e.t_int(bits);
        e.b.u_convert(t, None, s).map_err(internal1)?
    };
    e.convert(v, K::Int(bits), k, false)
}

fn store_wide(e: &mut Emitter, fx: &Fx, off: Word, v: Word, k: K) -> Result<(), Diagnostic> {
    let u64t = e.t_int(64);
    let bits = k.bits();
    let v = e.convert(v, k, K::Int(bits), false)?;
    let (p, sh) = wide_locate(e, fx, off)?;
    if bits == 64 {
        return e.b.store(p, v, None, []).map_err(internal1);
    }
    // Other threads may write the rest of the word: update atomically.
    e.cap(Capability::Int64Atomics);
    let wide = e.b.u_convert(u64t, None, v).map_err(internal1)?;
    let val = e.b.shift_left_logical(u64t, None, wide, sh).map_err(internal1)?;
    let m = e.c_int(64, (1u64 << bits) - 1);
    let mask = e.b.shift_left_logical(u64t, None, m, sh).map_err(internal1)?;
    let keep = e.b.not(u64t, None, mask).map_err(internal1)?;
    let scope = e.c_u32(Scope::Workgroup as u32);
    let sem = e.c_u32(0);
    e.b.atomic_and(u64t, None, p, scope, sem, keep).map_err(internal1)?;
    e.b.atomic_or(u64t, None, p, scope, sem, val).map_err(internal1)?;
    Ok(())
}

/// Load `k` from a word-addressed space.
fn load_words(e: &mut Emitter, fx: &Fx, sc: StorageClass, off: Word, k: K) -> Result<Word, Diagnostic> {
    if sc == StorageClass::Workgroup && fx.shared_wide {
        return load_wide(e, fx, off, k);
    }
    let u32t = e.t_int(32);
    let bits = k.bits();
    let i = word_index(e, off, 0)?;
    let p = word_ptr(e, fx, sc, i)?;
    let w = e.b.load(u32t, None, p, None, []).map_err(internal1)?;
    let v = match bits {
        32 => w,
        64 => {
            let i1 = word_index(e, off, 1)?;
            let p1 = word_ptr(e, fx, sc, i1)?;
            let h = e.b.load(u32t, None, p1, None, []).map_err(internal1)?;
            e.make_u64(w, h)?
        }
        _ => return extract(e, w, off, bits),
    };
    e.convert(v, K::Int(bits), k, false)
}

/// Store `v` (kind `k`) to a word-addressed space.
fn store_words(e: &mut Emitter, fx: &Fx, sc: StorageClass, off: Word, v: Word, k: K) -> Result<(), Diagnostic> {
    if sc == StorageClass::Workgroup && fx.shared_wide {
        return store_wide(e, fx, off, v, k);
    }
    let u32t = e.t_int(32);
    let bits = k.bits();
    let v = e.convert(v, k, K::Int(bits), false)?;
    let i = word_index(e, off, 0)?;
    let p = word_ptr(e, fx, sc, i)?;
    match bits {
        32 => e.b.store(p, v, None, []).map_err(internal1),
        64 => {
            let lo = e.b.u_convert(u32t, None, v).map_err(internal1)?;
            let u64t = e.t_int(64);
            let c32 = e.c_int(64, 32);
            let hs = e.b.shift_right_logical(u64t, None, v, c32).map_err(internal1)?;
            let hi = e.b.u_convert(u32t, None, hs).map_err(internal1)?;
            e.b.store(p, lo, None, []).map_err(internal1)?;
            let i1 = word_index(e, off, 1)?;
            let p1 = word_ptr(e, fx, sc, i1)?;
            e.b.store(p1, hi, None, []).map_err(internal1)
        }
        _ => {
            let three = e.c_u32(3);
            let lo = e.b.bitwise_and(u32t, None, off, three).map_err(internal1)?;
            let sh = e.b.shift_left_logical(u32t, None, lo, three).map_err(internal1)?;
            let wide = e.b.u_convert(u32t, None, v).map_err(internal1)?;
            let val = e.b.shift_left_logical(u32t, None, wide, sh).map_err(internal1)?;
            let m = e.c_u32(if bits == 8 { 0xff } else { 0xffff });
            let mask = e.b.shift_left_logical(u32t, None, m, sh).map_err(internal1)?;
            let keep = e.b.not(u32t, None, mask).map_err(internal1)?;
            if sc == StorageClass::Workgroup {
                // Other threads may write the neighbouring bytes: update atomically.
                let scope = e.c_u32(Scope::Workgroup as u32);
                let sem = e.c_u32(0);
                e.b.atomic_and(u32t, None, p, scope, sem, keep).map_err(internal1)?;
                e.b.atomic_or(u32t, None, p, scope, sem, val).map_err(internal1)?;
                Ok(())
            } else {
                let old = e.b.load(u32t, None, p, None, []).map_err(internal1)?;
                let kept = e.b.bitwise_and(u32t, None, old, keep).map_err(internal1)?;
                let new = e.b.bitwise_or(u32t, None, kept, val).map_err(internal1)?;
                e.b.store(p, new, None, []).map_err(internal1)
            }
        }
    }
}

/// Word `i` of the kernel parameter block.
fn param_word(e: &mut Emitter, fx: &Fx, i: u32) -> Result<Word, Diagnostic> {
    match fx.passing {
        ParamPassing::PushConstants => e.push_word(fx, PUSH_HEADER_WORDS + i),
        ParamPassing::Buffer => {
            let base = e.param_buffer_address(fx)?;
            let u64t = e.t_int(64);
            let c = e.c_int(64, i as u64 * 4);
            let a = e.b.i_add(u64t, None, base, c).map_err(internal1)?;
            let p = psb_ptr(e, K::Int(32), a)?;
            let u32t = e.t_int(32);
            e.b.load(u32t, None, p, Some(MemoryAccess::ALIGNED), [SOp::LiteralBit32(4)]).map_err(internal1)
        }
    }
}

fn load_param(e: &mut Emitter, fx: &Fx, off: u32, k: K) -> Result<Word, Diagnostic> {
    let bits = k.bits();
    let w = param_word(e, fx, off / 4)?;
    let v = match bits {
        32 => w,
        64 => {
            let h = param_word(e, fx, off / 4 + 1)?;
            let v = e.make_u64(w, h)?;
            e.uniform_u64(v)?
        }
        _ => {
            let c = e.c_u32(off);
            return extract(e, w, c, bits).and_then(|v| e.convert(v, K::Int(bits), k, false));
        }
    };
    e.convert(v, K::Int(bits), k, false)
}

/// Load a value of kind `k` from `a`.
pub(crate) fn load(e: &mut Emitter, fx: &Fx, a: Addr, k: K, volatile: bool) -> Result<Word, Diagnostic> {
    match a {
        Addr::Global(addr) => {
            let p = psb_ptr(e, k, addr)?;
            let t = e.kty(k);
            let mut ma = MemoryAccess::ALIGNED;
            if volatile {
                ma |= MemoryAccess::VOLATILE;
            }
            e.b.load(t, None, p, Some(ma), [SOp::LiteralBit32(k.bits() / 8)]).map_err(internal1)
        }
        Addr::Shared(off) => {
            let r = shared_split(e, fx, off, Some(k), &mut |e, fx, a| match a {
                Addr::Shared(off) => load_words(e, fx, StorageClass::Workgroup, off, k).map(Some),
                a => load(e, fx, a, k, volatile).map(Some),
            })?;
            r.ok_or_else(|| Diagnostic::error(Span::default(), "internal error: shared load"))
        }
        Addr::Local(off) => load_words(e, fx, StorageClass::Private, off, k),
        Addr::Param(off) => load_param(e, fx, off, k),
        Addr::Generic(addr) => {
            let r = dispatch(e, fx, addr, Some(k), true, &mut |e, fx, a| load(e, fx, a, k, volatile).map(Some))?;
            r.ok_or_else(|| Diagnostic::error(Span::default(), "internal error: generic load"))
        }
    }
}

/// Store `v` of kind `k` to `a`.
pub(crate) fn store(
    e: &mut Emitter,
    fx: &Fx,
    a: Addr,
    v: Word,
    k: K,
    volatile: bool,
    span: Span,
) -> Result<(), Diagnostic> {
    match a {
        Addr::Global(addr) => {
            let p = psb_ptr(e, k, addr)?;
            let mut ma = MemoryAccess::ALIGNED;
            if volatile {
                ma |= MemoryAccess::VOLATILE;
            }
            e.b.store(p, v, Some(ma), [SOp::LiteralBit32(k.bits() / 8)]).map_err(internal1)
        }
        Addr::Shared(off) => {
            shared_split(e, fx, off, None, &mut |e, fx, a| match a {
                Addr::Shared(off) => store_words(e, fx, StorageClass::Workgroup, off, v, k).map(|_| None),
                a => store(e, fx, a, v, k, volatile, span).map(|_| None),
            })?;
            Ok(())
        }
        Addr::Local(off) => store_words(e, fx, StorageClass::Private, off, v, k),
        Addr::Param(_) => Err(Diagnostic::error(span, "stores to kernel parameters are not supported yet")),
        Addr::Generic(addr) => {
            dispatch(e, fx, addr, None, true, &mut |e, fx, a| store(e, fx, a, v, k, volatile, span).map(|_| None))?;
            Ok(())
        }
    }
}

/// [`load`] of a user access: checked first with fault checks on (see [`fault`](super::fault)).
pub(crate) fn load_checked(
    e: &mut Emitter,
    fx: &Fx,
    a: Addr,
    k: K,
    volatile: bool,
    site: Site,
) -> Result<Word, Diagnostic> {
    guard(e, fx, a, site, Some(k), &mut |e, fx, a| load(e, fx, a, k, volatile).map(Some))?
        .ok_or_else(|| Diagnostic::error(site.span, "internal error: checked load"))
}

/// [`store`] of a user access: checked first with fault checks on.
pub(crate) fn store_checked(
    e: &mut Emitter,
    fx: &Fx,
    a: Addr,
    v: Word,
    k: K,
    volatile: bool,
    site: Site,
) -> Result<(), Diagnostic> {
    guard(e, fx, a, site, None, &mut |e, fx, a| store(e, fx, a, v, k, volatile, site.span).map(|_| None))?;
    Ok(())
}

/// The operands of an `ld` or `st` without the 64-bit cache policy that
/// `.L2::cache_hint` adds last (`ld.global.L2::cache_hint.f32 d, [a],
/// policy;`): a hint about the L2 cache, which changes no result.
fn without_cache_policy(inst: &Instruction) -> &[Operand] {
    let ops = inst.operands.as_slice();
    match ops {
        [rest @ .., _] if inst.has("L2::cache_hint") && ops.len() == 3 => rest,
        _ => ops,
    }
}

/// `.volatile`, `.relaxed`, `.acquire`, `.release` or `.cv`: an `ld` or
/// `st` that other threads may be watching (a `volatile` access here).
pub(crate) fn orders_memory(inst: &Instruction) -> bool {
    ["volatile", "relaxed", "acquire", "release", "cv"].iter().any(|m| inst.has(m))
}

/// Element `i` (of `bits` bits) of the 64-bit `w`, as an integer of `bits`.
fn u64_element(e: &mut Emitter, w: Word, i: u32, bits: u32) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let v = if i == 0 {
        w
    } else {
        let sh = e.c_int(64, u64::from(i * bits));
        e.b.shift_right_logical(u64t, None, w, sh).map_err(internal1)?
    };
    let t = e.t_int(bits);
    e.b.u_convert(t, None, v).map_err(internal1)
}

/// The integer `v` of `bits` bits placed as element `i` of a 64-bit word.
fn u64_place(e: &mut Emitter, v: Word, i: u32, bits: u32) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let wide = e.b.u_convert(u64t, None, v).map_err(internal1)?;
    if i == 0 {
        return Ok(wide);
    }
    let sh = e.c_int(64, u64::from(i * bits));
    e.b.shift_left_logical(u64t, None, wide, sh).map_err(internal1)
}

/// `ld` and `ldu`.
///
/// Vector accesses are split so that concurrent readers see what NVIDIA's
/// GPUs give them.
///
/// PTX models a vector access as its elements' accesses in an unspecified
/// order, but NVIDIA's hardware performs an aligned 8- or 16-byte vector
/// access as one transaction, and real code depends on it: CUB's
/// decoupled look-back scan publishes each tile's `{status, value}` pair
/// with one `st.relaxed.gpu.v2.u32` and polls it with
/// `ld.relaxed.gpu.v2.u32`. Split into two 32-bit accesses, a reader could
/// see a tile's new status with its old value, and every later tile's
/// prefix was wrong (Thrust's scans, silently, in about one run in twenty
/// on lavapipe).
///
/// - An 8-byte vector (`.v2.b32`, `.v4.b16`, `.v8.b8`) is one 64-bit
///   access, whatever its qualifiers.
/// - A 16-byte vector has no single Vulkan access. Where it orders memory
///   (`.volatile`, `.relaxed`, `.acquire`, `.release`, `.cv`; CUB's
///   `{status, value}` pairs of 8-byte values are `ld/st.relaxed.gpu.v2.u64`)
///   on a global or generic address, it goes through the module's table of
///   sequence locks ([`super::vector16`]): stores take a slot, loads see
///   every such store whole without waiting. Other 16-byte vectors
///   (`.weak`, `.cg`, shared) are element by element.
pub(crate) fn ld(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let space = space_of(inst)?;
    let [dst, Operand::Address(_, addr)] = without_cache_policy(inst) else {
        return Err(Diagnostic::error(
            inst.span,
            format!("'{}' expects a destination and an address", inst.mnemonic()),
        ));
    };
    let a = resolve(e, fx, space, addr, inst.span)?;
    let volatile = orders_memory(inst);
    let k = mem_kind(t);
    let dsts: Vec<&Operand> = match dst {
        Operand::Vector(_, v) => v.iter().collect(),
        d => vec![d],
    };
    let whole = t.size() * dsts.len() as u32;
    if dsts.len() > 1 && whole == 8 {
        // One 64-bit access (see [`ld`]).
        let site = Site { span: inst.span, access: Access::Read, bytes: 8, align: 8 };
        let w = load_checked(e, fx, a, K::Int(64), volatile, site)?;
        let bits = t.size() * 8;
        for (i, d) in dsts.into_iter().enumerate() {
            if matches!(d, Operand::Sink(_)) {
                continue;
            }
            let v = u64_element(e, w, i as u32, bits)?;
            let v = e.convert(v, K::Int(bits), k, false)?;
            set(e, fx, d, v, k, t.is_signed())?;
        }
        return Ok(());
    }
    let elements = |e: &mut Emitter, fx: &mut Fx| -> Result<(), Diagnostic> {
        for (i, d) in dsts.iter().enumerate() {
            if matches!(d, Operand::Sink(_)) {
                continue;
            }
            let ai = advance(e, a, i as u32 * t.size())?;
            let align = if i == 0 { whole } else { t.size() };
            let site = Site { span: inst.span, access: Access::Read, bytes: t.size(), align };
            let v = load_checked(e, fx, ai, k, volatile, site)?;
            set(e, fx, d, v, k, t.is_signed())?;
        }
        Ok(())
    };
    if !matches!(a, Addr::Global(_) | Addr::Generic(_)) || !super::vector16::needs_vector_lock(inst) {
        return elements(e, fx);
    }
    let t_k = e.kty(k);
    let mut vars = Vec::new();
    for d in &dsts {
        vars.push(match d {
            Operand::Sink(_) => None,
            _ => Some(super::warp::func_var(e, t_k)?),
        });
    }
    super::vector16::load_whole(e, fx, inst, a, k, t.size(), &vars)?;
    for (d, var) in dsts.iter().zip(vars) {
        if let Some(var) = var {
            let v = e.b.load(t_k, None, var, None, []).map_err(internal1)?;
            set(e, fx, d, v, k, t.is_signed())?;
        }
    }
    Ok(())
}

/// `st`.
pub(crate) fn st(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, t: ScalarType) -> Result<(), Diagnostic> {
    let space = space_of(inst)?;
    let [Operand::Address(_, addr), src] = without_cache_policy(inst) else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects an address and a source", inst.mnemonic())));
    };
    let a = resolve(e, fx, space, addr, inst.span)?;
    let volatile = orders_memory(inst);
    let k = mem_kind(t);
    let srcs: Vec<&Operand> = match src {
        Operand::Vector(_, v) => v.iter().collect(),
        s => vec![s],
    };
    let whole = t.size() * srcs.len() as u32;
    if srcs.len() > 1 && whole == 8 {
        // One 64-bit access (see [`ld`]).
        let bits = t.size() * 8;
        let mut w = None;
        for (i, s) in srcs.into_iter().enumerate() {
            let v = get(e, fx, s, k, false)?;
            let v = e.convert(v, k, K::Int(bits), false)?;
            let part = u64_place(e, v, i as u32, bits)?;
            w = Some(match w {
                None => part,
                Some(acc) => {
                    let u64t = e.t_int(64);
                    e.b.bitwise_or(u64t, None, acc, part).map_err(internal1)?
                }
            });
        }
        let w = w.ok_or_else(|| Diagnostic::error(inst.span, "internal error: empty vector"))?;
        let site = Site { span: inst.span, access: Access::Write, bytes: 8, align: 8 };
        return store_checked(e, fx, a, w, K::Int(64), volatile, site);
    }
    let elements = |e: &mut Emitter, fx: &mut Fx| -> Result<(), Diagnostic> {
        for (i, s) in srcs.iter().enumerate() {
            let v = get(e, fx, s, k, false)?;
            let ai = advance(e, a, i as u32 * t.size())?;
            let align = if i == 0 { whole } else { t.size() };
            let site = Site { span: inst.span, access: Access::Write, bytes: t.size(), align };
            store_checked(e, fx, ai, v, k, volatile, site)?;
        }
        Ok(())
    };
    if !matches!(a, Addr::Global(_) | Addr::Generic(_)) || !super::vector16::needs_vector_lock(inst) {
        return elements(e, fx);
    }
    let mut values = Vec::new();
    for s in &srcs {
        values.push(get(e, fx, s, k, false)?);
    }
    super::vector16::store_whole(e, fx, inst, a, k, t.size(), &values)
}

/// Memory scope of an instruction's `.cta`/`.gpu`/`.sys` qualifier.
pub(crate) fn scope_of(inst: &Instruction, default: Scope) -> Scope {
    if inst.has("cta") {
        Scope::Workgroup
    } else if inst.has("gpu") || inst.has("sys") || inst.has("gl") {
        Scope::Device
    } else {
        default
    }
}

/// Memory semantics of an atomic's ordering qualifier.
fn semantics_of(e: &Emitter, inst: &Instruction, sc: StorageClass) -> u32 {
    use spirv::MemorySemantics as S;
    if !e.opts.memory_semantics {
        return 0;
    }
    let order = if inst.has("acquire") {
        S::ACQUIRE
    } else if inst.has("release") {
        S::RELEASE
    } else if inst.has("acq_rel") {
        S::ACQUIRE_RELEASE
    } else {
        return 0;
    };
    let storage = if sc == StorageClass::Workgroup { S::WORKGROUP_MEMORY } else { S::UNIFORM_MEMORY };
    (order | storage).bits()
}

/// The semantics of a compare-and-swap's failure case: SPIR-V forbids
/// release there, so acquire-release becomes acquire and release relaxed.
fn unequal_semantics(bits: u32) -> u32 {
    use spirv::MemorySemantics as S;
    let s = S::from_bits_truncate(bits);
    if s.contains(S::ACQUIRE_RELEASE) {
        ((s - S::ACQUIRE_RELEASE) | S::ACQUIRE).bits()
    } else if s.contains(S::RELEASE) {
        0
    } else {
        bits
    }
}

/// `atom` and `red`.
pub(crate) fn atom(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    t: ScalarType,
    has_result: bool,
) -> Result<(), Diagnostic> {
    let space = space_of(inst)?;
    let ops = inst.operands.as_slice();
    let (dst, rest) = if has_result {
        match ops.split_first() {
            Some((d, r)) => (Some(d), r),
            None => return Err(Diagnostic::error(inst.span, "missing operands")),
        }
    } else {
        (None, ops)
    };
    let Some((Operand::Address(_, addr), vals)) = rest.split_first() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects an address operand", inst.mnemonic())));
    };
    let op = ["add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"]
        .into_iter()
        .find(|o| inst.has(o))
        .ok_or_else(|| {
        Diagnostic::error(inst.opcode_span, format!("unsupported atomic operation in '{}'", inst.mnemonic()))
    })?;
    if inst.modifiers.iter().any(|m| m.starts_with('v') && m.len() == 2) {
        return Err(Diagnostic::error(
            inst.span,
            format!("unsupported instruction '{}': vector atomics", inst.mnemonic()),
        ));
    }
    let a = resolve(e, fx, space, addr, inst.span)?;
    let k = mem_kind(t);
    let bits = k.bits();
    let half = super::half::layout(t).is_some();
    let allowed = match (bits, half) {
        // f16/bf16 (and packed pairs): add, min, max; cas.b16 and exch.b16 as integers.
        (16 | 32, true) => matches!(op, "add" | "min" | "max" | "exch" | "cas"),
        (16, false) => matches!(op, "cas" | "exch"),
        (32 | 64, false) => !matches!(k, K::Float(_)) || matches!(op, "add" | "exch" | "min" | "max"),
        _ => false,
    };
    if !allowed {
        let why = if bits == 128 { " (128-bit atomics have no Vulkan equivalent)" } else { "" };
        return Err(Diagnostic::error(inst.span, format!("unsupported instruction '{}'{why}", inst.mnemonic())));
    }
    let b = vals.first().ok_or_else(|| Diagnostic::error(inst.span, "missing atomic operand"))?;
    let vb = get(e, fx, b, k, false)?;
    let vc = if op == "cas" {
        let c = vals.get(1).ok_or_else(|| Diagnostic::error(inst.span, "atom.cas needs two operands"))?;
        Some(get(e, fx, c, k, false)?)
    } else {
        None
    };
    let site = Site { span: inst.span, access: Access::Atomic, bytes: bits / 8, align: bits / 8 };
    let old_bits = match a {
        Addr::Generic(g) => dispatch(e, fx, g, Some(K::Int(bits)), false, &mut |e, fx, a| {
            guard(e, fx, a, site, Some(K::Int(bits)), &mut |e, fx, a| {
                atom_core(e, fx, inst, a, t, op, vb, vc).map(Some)
            })
        })?
        .ok_or_else(|| Diagnostic::error(inst.span, "internal error: generic atomic"))?,
        a => guard(e, fx, a, site, Some(K::Int(bits)), &mut |e, fx, a| {
            atom_core(e, fx, inst, a, t, op, vb, vc).map(Some)
        })?
        .ok_or_else(|| Diagnostic::error(inst.span, "internal error: checked atomic"))?,
    };
    if let Some(d) = dst {
        let v = e.convert(old_bits, K::Int(bits), k, false)?;
        set(e, fx, d, v, k, t.is_signed())?;
    }
    Ok(())
}

/// One atomic read-modify-write at a resolved address; returns the old value's bits.
#[allow(clippy::too_many_arguments)]
fn atom_core(
    e: &mut Emitter,
    fx: &Fx,
    inst: &Instruction,
    a: Addr,
    t: ScalarType,
    op: &str,
    vb: Word,
    vc: Option<Word>,
) -> Result<Word, Diagnostic> {
    let Addr::Shared(off) = a else {
        return atom_at(e, fx, inst, a, t, op, vb, vc);
    };
    let bits = mem_kind(t).bits();
    shared_split(e, fx, off, Some(K::Int(bits)), &mut |e, fx, a| atom_at(e, fx, inst, a, t, op, vb, vc).map(Some))?
        .ok_or_else(|| Diagnostic::error(inst.span, "internal error: shared atomic"))
}

/// [`atom_core`] with `.shared` addresses in Workgroup memory.
#[allow(clippy::too_many_arguments)]
fn atom_at(
    e: &mut Emitter,
    fx: &Fx,
    inst: &Instruction,
    a: Addr,
    t: ScalarType,
    op: &str,
    vb: Word,
    vc: Option<Word>,
) -> Result<Word, Diagnostic> {
    let k = mem_kind(t);
    let bits = k.bits();
    let signed = t.is_signed();
    let ib = e.convert(vb, k, K::Int(bits), false)?;
    let ic = match vc {
        Some(c) => Some(e.convert(c, k, K::Int(bits), false)?),
        None => None,
    };
    // The memory word the atomic updates, and where the value sits in it.
    let (ptr, sc, word_bits, shift) = match a {
        Addr::Global(addr) if bits >= 32 => {
            (psb_ptr(e, K::Int(bits), addr)?, StorageClass::PhysicalStorageBuffer, bits, None)
        }
        Addr::Global(addr) => {
            // 16-bit atomics update their aligned 32-bit word.
            let u64t = e.t_int(64);
            let u32t = e.t_int(32);
            let m = e.c_int(64, !3u64);
            let word = e.b.bitwise_and(u64t, None, addr, m).map_err(internal1)?;
            let p = psb_ptr(e, K::Int(32), word)?;
            let three = e.c_int(64, 3);
            let low = e.b.bitwise_and(u64t, None, addr, three).map_err(internal1)?;
            let low = e.b.u_convert(u32t, None, low).map_err(internal1)?;
            let c3 = e.c_u32(3);
            let sh = e.b.shift_left_logical(u32t, None, low, c3).map_err(internal1)?;
            (p, StorageClass::PhysicalStorageBuffer, 32, Some(sh))
        }
        Addr::Shared(off) if fx.shared_wide => {
            let u32t = e.t_int(32);
            let three = e.c_u32(3);
            let i = e.b.shift_right_logical(u32t, None, off, three).map_err(internal1)?;
            let p = wide_ptr(e, fx, i)?;
            let shift = if bits == 64 {
                None
            } else {
                let within = e.c_u32(7 & !(bits / 8 - 1));
                let hi = e.b.bitwise_and(u32t, None, off, within).map_err(internal1)?;
                Some(e.b.shift_left_logical(u32t, None, hi, three).map_err(internal1)?)
            };
            (p, StorageClass::Workgroup, 64, shift)
        }
        Addr::Shared(off) => {
            if bits > 32 {
                return Err(Diagnostic::error(
                    inst.span,
                    "internal error: 64-bit shared atomic without wide shared memory",
                ));
            }
            let i = word_index(e, off, 0)?;
            let p = word_ptr(e, fx, StorageClass::Workgroup, i)?;
            let shift = if bits == 32 {
                None
            } else {
                let u32t = e.t_int(32);
                let two = e.c_u32(2);
                let hi = e.b.bitwise_and(u32t, None, off, two).map_err(internal1)?;
                let three = e.c_u32(3);
                Some(e.b.shift_left_logical(u32t, None, hi, three).map_err(internal1)?)
            };
            (p, StorageClass::Workgroup, 32, shift)
        }
        _ => return Err(Diagnostic::error(inst.span, "atomics on this state space are not supported yet")),
    };
    if word_bits == 64 {
        e.cap(Capability::Int64Atomics);
    }
    let default_scope = if sc == StorageClass::Workgroup { Scope::Workgroup } else { Scope::Device };
    let scope = e.c_u32(scope_of(inst, default_scope) as u32);
    let sem = e.c_u32(semantics_of(e, inst, sc));
    let it = e.t_int(bits);
    let half = super::half::layout(t).is_some();
    let native = match (op, k) {
        _ if shift.is_some() => None,
        ("add" | "min" | "max", _) if half => None,
        ("add", K::Int(_)) => Some(Op::AtomicIAdd),
        ("and", _) => Some(Op::AtomicAnd),
        ("or", _) => Some(Op::AtomicOr),
        ("xor", _) => Some(Op::AtomicXor),
        ("exch", _) => Some(Op::AtomicExchange),
        ("min", K::Int(_)) => Some(if signed { Op::AtomicSMin } else { Op::AtomicUMin }),
        ("max", K::Int(_)) => Some(if signed { Op::AtomicSMax } else { Op::AtomicUMax }),
        _ => None,
    };
    if let Some(o) = native {
        return e.b.op(o, it, None, &[ptr, scope, sem, ib]).map_err(internal1);
    }
    if op == "cas" && shift.is_none() && !half {
        let ic = ic.ok_or_else(|| Diagnostic::error(inst.span, "atom.cas needs two operands"))?;
        let unequal = e.c_u32(unequal_semantics(semantics_of(e, inst, sc)));
        return e.b.atomic_compare_exchange(it, None, ptr, scope, sem, unequal, ic, ib).map_err(internal1);
    }
    if op == "add" && k == K::Float(32) && sc == StorageClass::PhysicalStorageBuffer && e.opts_float_atomics() {
        e.cap(Capability::AtomicFloat32AddEXT);
        e.b.extension("SPV_EXT_shader_atomic_float_add");
        let ft = e.t_float(32);
        let fp = e.t_ptr(StorageClass::PhysicalStorageBuffer, ft);
        let Addr::Global(addr) = a else { return Err(unreachable_addr()) };
        let p = e.b.convert_u_to_ptr(fp, None, addr).map_err(internal1)?;
        let r = e.b.op(Op::AtomicFAddEXT, ft, None, &[p, scope, sem, vb]).map_err(internal1)?;
        return e.convert(r, K::Float(32), K::Int(32), false);
    }
    // Compare-and-swap loop on the containing word.
    let wt = e.t_int(word_bits);
    let mut old_value = 0;
    let old_word = cas_loop(e, ptr, scope, semantics_of(e, inst, sc), word_bits, |e, old_word| {
        let old = match shift {
            None => old_word,
            Some(sh) => {
                let sh64 = if word_bits == 32 { sh } else { e.b.u_convert(wt, None, sh).map_err(internal1)? };
                let v = e.b.shift_right_logical(wt, None, old_word, sh64).map_err(internal1)?;
                e.b.u_convert(it, None, v).map_err(internal1)?
            }
        };
        old_value = old;
        let new = rmw_value(e, op, t, old, ib, ic)?;
        match shift {
            None => Ok(new),
            Some(sh) => {
                let sh64 = if word_bits == 32 { sh } else { e.b.u_convert(wt, None, sh).map_err(internal1)? };
                let mask = e.c_int(word_bits, (1u64 << bits) - 1);
                let m = e.b.shift_left_logical(wt, None, mask, sh64).map_err(internal1)?;
                let keep = e.b.not(wt, None, m).map_err(internal1)?;
                let kept = e.b.bitwise_and(wt, None, old_word, keep).map_err(internal1)?;
                let nw = e.b.u_convert(wt, None, new).map_err(internal1)?;
                let placed = e.b.shift_left_logical(wt, None, nw, sh64).map_err(internal1)?;
                e.b.bitwise_or(wt, None, kept, placed).map_err(internal1)
            }
        }
    })?;
    Ok(if shift.is_some() { old_value } else { old_word })
}

/// `add`/`min`/`max` on f16/bf16 (and their packed pairs), correctly
/// rounded: each lane widened exactly, added (f16 in f32, bf16 exactly in
/// f64) and rounded once to the lane's format (`.noftz`: subnormals kept).
fn half_rmw(
    e: &mut Emitter,
    op: &str,
    fmt: super::rounding::Fmt,
    lanes: u32,
    bits: u32,
    old: Word,
    b: Word,
) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let f32t = e.t_float(32);
    let f64t = e.t_float(64);
    let (old32, b32) = if bits == 32 {
        (old, b)
    } else {
        (e.b.u_convert(u32t, None, old).map_err(internal1)?, e.b.u_convert(u32t, None, b).map_err(internal1)?)
    };
    let mut out = Vec::new();
    for i in 0..lanes {
        let x = super::half::lane(e, old32, i)?;
        let y = super::half::lane(e, b32, i)?;
        let xf = super::half::to_f32(e, x, fmt)?;
        let yf = super::half::to_f32(e, y, fmt)?;
        // f16 sums in f32, rounded once to f16 (correctly rounded, see
        // `half::binary`); bf16 sums in f64 (exact), rounded once; a
        // minimum or maximum is exact in f32.
        let f16 = fmt == super::rounding::Fmt::F16;
        let (r, in_f64) = match op {
            "add" if f16 => {
                let s = e.b.f_add(f32t, None, xf, yf).map_err(internal1)?;
                e.b.decorate(s, rspirv::spirv::Decoration::NoContraction, []);
                (s, false)
            }
            "add" => {
                let xd = e.b.f_convert(f64t, None, xf).map_err(internal1)?;
                let yd = e.b.f_convert(f64t, None, yf).map_err(internal1)?;
                let s = e.b.f_add(f64t, None, xd, yd).map_err(internal1)?;
                e.b.decorate(s, rspirv::spirv::Decoration::NoContraction, []);
                (s, true)
            }
            _ => {
                let m = e
                    .b
                    .ext_inst(f32t, None, e.glsl, if op == "min" { 79 } else { 80 }, [SOp::IdRef(xf), SOp::IdRef(yf)])
                    .map_err(internal1)?;
                (m, false)
            }
        };
        if f16 {
            out.push(super::rounding::f32_to_f16_rn(e, r)?);
        } else {
            let r = if in_f64 { r } else { e.b.f_convert(f64t, None, r).map_err(internal1)? };
            let h = super::rounding::round_f64(e, r, fmt, super::rounding::Rnd::Rn, false)?;
            out.push(e.b.u_convert(u32t, None, h).map_err(internal1)?);
        }
    }
    let packed = super::half::pack(e, &out)?;
    if bits == 32 {
        Ok(packed)
    } else {
        let t16 = e.t_int(16);
        e.b.u_convert(t16, None, packed).map_err(internal1)
    }
}

/// The value an atomic operation stores, from the old value (all as
/// integers of the operation's width; float operations bitcast).
fn rmw_value(
    e: &mut Emitter,
    op: &str,
    t: ScalarType,
    old: Word,
    b: Word,
    c: Option<Word>,
) -> Result<Word, Diagnostic> {
    let k = mem_kind(t);
    let bits = k.bits();
    let it = e.t_int(bits);
    let bt = e.t_bool();
    let signed = t.is_signed();
    if let Some((fmt, lanes)) = super::half::layout(t) {
        if matches!(op, "add" | "min" | "max") {
            return half_rmw(e, op, fmt, lanes, bits, old, b);
        }
    }
    Ok(match (op, k) {
        ("exch", _) => b,
        ("cas", _) => {
            let c = c.ok_or_else(|| Diagnostic::error(Span::default(), "atom.cas needs two operands"))?;
            let eq = e.b.i_equal(bt, None, old, b).map_err(internal1)?;
            e.b.select(it, None, eq, c, old).map_err(internal1)?
        }
        ("and", _) => e.b.bitwise_and(it, None, old, b).map_err(internal1)?,
        ("or", _) => e.b.bitwise_or(it, None, old, b).map_err(internal1)?,
        ("xor", _) => e.b.bitwise_xor(it, None, old, b).map_err(internal1)?,
        ("add", K::Int(_)) => e.b.i_add(it, None, old, b).map_err(internal1)?,
        ("min", K::Int(_)) | ("max", K::Int(_)) => {
            let f = match (op, signed) {
                ("min", true) => 39,
                ("min", false) => 38,
                ("max", true) => 42,
                _ => 41,
            };
            e.b.ext_inst(it, None, e.glsl, f, [SOp::IdRef(old), SOp::IdRef(b)]).map_err(internal1)?
        }
        ("inc", _) => {
            let ge = e.b.u_greater_than_equal(bt, None, old, b).map_err(internal1)?;
            let one = e.c_int(bits, 1);
            let inc = e.b.i_add(it, None, old, one).map_err(internal1)?;
            let z = e.c_int(bits, 0);
            e.b.select(it, None, ge, z, inc).map_err(internal1)?
        }
        ("dec", _) => {
            let z = e.c_int(bits, 0);
            let is0 = e.b.i_equal(bt, None, old, z).map_err(internal1)?;
            let gt = e.b.u_greater_than(bt, None, old, b).map_err(internal1)?;
            let wrap = e.b.logical_or(bt, None, is0, gt).map_err(internal1)?;
            let one = e.c_int(bits, 1);
            let dec = e.b.i_sub(it, None, old, one).map_err(internal1)?;
            e.b.select(it, None, wrap, b, dec).map_err(internal1)?
        }
        (_, K::Float(w)) => {
            let ft = e.t_float(w);
            let of = e.b.bitcast(ft, None, old).map_err(internal1)?;
            let bf = e.b.bitcast(ft, None, b).map_err(internal1)?;
            let r = match op {
                "add" => {
                    let r = e.b.f_add(ft, None, of, bf).map_err(internal1)?;
                    e.b.decorate(r, rspirv::spirv::Decoration::NoContraction, []);
                    r
                }
                "min" => e.b.ext_inst(ft, None, e.glsl, 79, [SOp::IdRef(of), SOp::IdRef(bf)]).map_err(internal1)?,
                "max" => e.b.ext_inst(ft, None, e.glsl, 80, [SOp::IdRef(of), SOp::IdRef(bf)]).map_err(internal1)?,
                _ => return Err(Diagnostic::error(Span::default(), format!("atom.{op} is not defined on floats"))),
            };
            e.b.bitcast(it, None, r).map_err(internal1)?
        }
        _ => return Err(Diagnostic::error(Span::default(), format!("internal error: atomic {op}"))),
    })
}

fn unreachable_addr() -> Diagnostic {
    Diagnostic::error(Span::default(), "internal error: address kind")
}

/// `do { old = *p; new = f(old); } while (cas(p, old, new) != old)`; returns `old`.
fn cas_loop(
    e: &mut Emitter,
    ptr: Word,
    scope: Word,
    sem_bits: u32,
    bits: u32,
    f: impl FnOnce(&mut Emitter, Word) -> Result<Word, Diagnostic>,
) -> Result<Word, Diagnostic> {
    let it = e.t_int(bits);
    let bt = e.t_bool();
    let mut old = 0;
    retry_loop(e, |e| {
        // A load cannot release either.
        let load_sem = e.c_u32(unequal_semantics(sem_bits));
        old = e.b.atomic_load(it, None, ptr, scope, load_sem).map_err(internal1)?;
        let new = f(e, old)?;
        let unequal = e.c_u32(unequal_semantics(sem_bits));
        let sem = e.c_u32(sem_bits);
        let got = e.b.atomic_compare_exchange(it, None, ptr, scope, sem, unequal, new, old).map_err(internal1)?;
        e.b.i_equal(bt, None, got, old).map_err(internal1)
    })?;
    Ok(old)
}

/// A counted loop that runs `step` until the `done` it returns (a bool) is
/// true: `do { done = step(); } while (!done)`. Whatever `step` defines is
/// available after the loop (its block dominates the merge).
pub(crate) fn retry_loop(
    e: &mut Emitter,
    step: impl FnOnce(&mut Emitter) -> Result<Word, Diagnostic>,
) -> Result<(), Diagnostic> {
    let bt = e.t_bool();
    let (header, body, cont, merge) = (e.b.id(), e.b.id(), e.b.id(), e.b.id());
    super::loop_limit::enter(e)?;
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(header)).map_err(internal1)?;
    // No pending flag: `again` says at the merge whether the driver's
    // limiter cut the loop (`loop_limit::retry_check`).
    e.b.loop_merge(merge, cont, spirv::LoopControl::NONE, []).map_err(internal1)?;
    e.b.branch(body).map_err(internal1)?;
    e.b.begin_block(Some(body)).map_err(internal1)?;
    let done = step(e)?;
    // Counted in the body: a selection in the continue block (what
    // `check` emits) broke the values lanes leave the loop with on llvmpipe.
    let again = e.b.logical_not(bt, None, done).map_err(internal1)?;
    super::loop_limit::retry_check(e, again)?;
    let exit = super::loop_limit::retry_exit(e, done)?;
    e.b.branch(cont).map_err(internal1)?;
    e.b.begin_block(Some(cont)).map_err(internal1)?;
    e.b.branch_conditional(exit, merge, header, []).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    super::loop_limit::retry_merged(e, again)
}

/// Store word `index` of the function's local words.
pub(crate) fn store_local_word(e: &mut Emitter, fx: &Fx, index: u32, v: Word) -> Result<(), Diagnostic> {
    let i = e.c_u32(fx.local_base / 4 + index);
    let p = word_ptr(e, fx, StorageClass::Private, i)?;
    e.b.store(p, v, None, []).map_err(internal1)
}

/// Load word `index` of the function's local words.
pub(crate) fn load_local_word(e: &mut Emitter, fx: &Fx, index: u32) -> Result<Word, Diagnostic> {
    let i = e.c_u32(fx.local_base / 4 + index);
    let p = word_ptr(e, fx, StorageClass::Private, i)?;
    let u32t = e.t_int(32);
    e.b.load(u32t, None, p, None, []).map_err(internal1)
}
