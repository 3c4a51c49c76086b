//! Warp-level matrix instructions: `mma.sync`, `ldmatrix`, `stmatrix` and
//! `movmatrix`, built on the warp primitives of [`super::warp`] (so they run
//! on every warp path: subgroup shuffles where a warp is a subgroup or a
//! slice of one, workgroup scratch memory where it spans subgroups).
//!
//! # Fragments
//! The PTX ISA fixes which lane holds which matrix element ("Matrix
//! fragments for mma.m16n8k*"). With `g = %laneid >> 2` (the group),
//! `t = %laneid & 3` (the thread in the group), `e` elements per register
//! (f16/bf16 2, tf32 1, 8-bit types 4, 4-bit types 8, b1 32; f64 one per
//! 64-bit register) and `i` the element within a register, the
//! `m16n8kK` and `m8n8kK` shapes of every type share one rule:
//!
//! | operand | register `r`, element `i` → row, column |
//! |---|---|
//! | A (M×K) | `m16`: row `g + 8·(r & 1)`, column `t·e + 4e·(r >> 1) + i`; `m8`: row `g`, column `t·e + 4e·r + i` |
//! | B (K×N) | row `t·e + 4e·r + i`, column `g` |
//! | C, D (M×N) | element `j` (register `j`, or half `j & 1` of f16x2 register `j >> 1`): row `g + 8·(j >> 1)`, column `2t + (j & 1)` |
//!
//! [`Geometry::coord`] is that table. From it the emitter works out, on
//! the host, where each lane finds the A and B elements of its D elements:
//! for a D element `j` and a `k`, the owning register and element are the
//! same in every lane and the owning lane is `c + wg·g + wt·t` for
//! constants (checked over all 32 lanes, an internal error otherwise). Each
//! A and B register is then shared once ([`warp::share`]) and every lane
//! reads the words it needs from it ([`warp::read`]).
//!
//! # Numerics
//! Products of the narrow types (f16, bf16, tf32, e4m3, e5m2) are exact in
//! f32; each lane adds them to its f32 accumulator in `k` order, starting
//! from C, rounding to nearest after each addition. An f16 D is that sum
//! rounded once to f16 (nearest even). f64 accumulates with correctly
//! rounded fused multiply-adds in `k` order. Integer types accumulate
//! exactly: wrapping in 32 bits, or, with `.satfinite`, in 64 bits and
//! clamped to the s32 range. `b1` counts the bits of `a xor b` (`a and b`)
//! over each 32-bit word and adds the counts. NVIDIA's tensor cores sum
//! the exact products of a block with one alignment and truncation, so
//! results of the float types differ from theirs in the last bits; the
//! bound is in `docs/tensor-cores.md`. tf32 operands use the top 19 bits of
//! their register (the low 13 bits are ignored, as the hardware does).

use super::func::{internal1, Fx};
use super::rounding::{cmp, o, sel, Fmt, Rnd, R};
use super::values::{get, K};
use super::warp::{self, set_if, Lanes};
use super::Emitter;
use crate::ast::{Instruction, Operand};
use crate::diag::{Diagnostic, Span};
use crate::fxhash::FxHashMap;
use rspirv::spirv::{Op, Word};

/// The element type of an A or B matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Elem {
    F16,
    Bf16,
    Tf32,
    F64,
    E4m3,
    E5m2,
    S8,
    U8,
    S4,
    U4,
    B1,
}

impl Elem {
    pub(crate) fn from_name(m: &str) -> Option<Elem> {
        Some(match m {
            "f16" => Elem::F16,
            "bf16" => Elem::Bf16,
            "tf32" => Elem::Tf32,
            "f64" => Elem::F64,
            "e4m3" => Elem::E4m3,
            "e5m2" => Elem::E5m2,
            "s8" => Elem::S8,
            "u8" => Elem::U8,
            "s4" => Elem::S4,
            "u4" => Elem::U4,
            "b1" => Elem::B1,
            _ => return None,
        })
    }

    pub(crate) fn bits(self) -> u32 {
        match self {
            Elem::F16 | Elem::Bf16 => 16,
            Elem::Tf32 => 32,
            Elem::F64 => 64,
            Elem::E4m3 | Elem::E5m2 | Elem::S8 | Elem::U8 => 8,
            Elem::S4 | Elem::U4 => 4,
            Elem::B1 => 1,
        }
    }

    /// Elements per register.
    pub(crate) fn per_reg(self) -> u32 {
        if self == Elem::F64 {
            1
        } else {
            32 / self.bits()
        }
    }

    pub(crate) fn is_int(self) -> bool {
        matches!(self, Elem::S8 | Elem::U8 | Elem::S4 | Elem::U4 | Elem::B1)
    }
}

/// The type of the C and D matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acc {
    F16,
    F32,
    F64,
    S32,
}

impl Acc {
    pub(crate) fn from_name(m: &str) -> Option<Acc> {
        Some(match m {
            "f16" => Acc::F16,
            "f32" => Acc::F32,
            "f64" => Acc::F64,
            "s32" => Acc::S32,
            _ => return None,
        })
    }

    /// Register kind of a C/D register.
    fn reg_kind(self) -> K {
        match self {
            Acc::F64 => K::Float(64),
            Acc::F32 => K::Float(32),
            Acc::F16 | Acc::S32 => K::Int(32),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    A,
    B,
    C,
}

/// The shape of an `mma` and the elements per A/B register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Geometry {
    m: u32,
    n: u32,
    k: u32,
    e: u32,
    /// `m8n8k4` with f16 A/B (sm_70's form): four independent products, one
    /// per quad-pair (lanes `4q..4q+3` and `16+4q..16+4q+3`), folded here
    /// into one block-diagonal 32×32 D (quad-pair `q` owns rows and columns
    /// `8q..8q+7`; its A rows and B columns likewise).
    quad: Option<QuadPair>,
}

/// The layouts of the quad-pair form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct QuadPair {
    a_col: bool,
    b_row: bool,
    acc_f16: bool,
}

impl Geometry {
    /// An `m16n8kK`/`m8n8kK` geometry with `e` elements per register.
    pub(crate) fn standard(m: u32, n: u32, k: u32, e: u32) -> Geometry {
        Geometry { m, n, k, e, quad: None }
    }

    pub(crate) fn count_role(&self, role: Role) -> u32 {
        self.count(role)
    }

    pub(crate) fn coord_role(&self, role: Role, lane: u32, r: u32, i: u32) -> (u32, u32) {
        self.coord(role, lane, r, i)
    }

    pub(crate) fn count_a(&self) -> u32 {
        self.count(Role::A)
    }

    pub(crate) fn owners_a(&self) -> Owners {
        self.owners(Role::A)
    }

    /// Registers of A or B per lane, or elements of C/D per lane.
    fn count(&self, role: Role) -> u32 {
        if self.quad.is_some() {
            return if role == Role::C { 8 } else { 2 };
        }
        match role {
            Role::A => self.m * self.k / (32 * self.e),
            Role::B => self.k * self.n / (32 * self.e),
            Role::C => self.m * self.n / 32,
        }
    }

    /// Row and column of element `i` of register `r` in `lane` (for C/D,
    /// `r` is the element index and `i` is 0). See the module docs.
    fn coord(&self, role: Role, lane: u32, r: u32, i: u32) -> (u32, u32) {
        let (g, t, e) = (lane >> 2, lane & 3, self.e);
        if let Some(qp) = self.quad {
            // The ISA's "Matrix fragments for mma.m8n8k4 with .f16".
            let base = 8 * (g & 3);
            let hi = 4 * (lane >> 4);
            let a = 2 * r + i;
            return match role {
                Role::A if qp.a_col => (base + a + hi, t),
                Role::A => (base + t + hi, a),
                Role::B if qp.b_row => (t, base + a + hi),
                Role::B => (a, base + t + hi),
                Role::C if qp.acc_f16 => (base + t + hi, base + r),
                Role::C => (base + (lane & 1) + (r & 2) + hi, base + (r & 4) + (lane & 2) + (r & 1)),
            };
        }
        match role {
            Role::A if self.m == 16 => (g + 8 * (r & 1), t * e + 4 * e * (r >> 1) + i),
            Role::A => (g, t * e + 4 * e * r + i),
            Role::B => (t * e + 4 * e * r + i, g),
            Role::C => (g + 8 * (r >> 1), 2 * t + (r & 1)),
        }
    }

    /// Where every element of A or B lives: (row, column) → (lane, register, element).
    pub(crate) fn owners(&self, role: Role) -> Owners {
        let mut map = Owners::default();
        for lane in 0..32 {
            for r in 0..self.count(role) {
                for i in 0..self.e {
                    map.insert(self.coord(role, lane, r, i), (lane, r, i));
                }
            }
        }
        map
    }
}

/// Where every element of A or B lives: (row, column) to (lane, register,
/// element).
pub(crate) type Owners = crate::fxhash::FxHashMap<(u32, u32), (u32, u32, u32)>;

/// A lane expression `c + Σ w[b]·bit b of the reading lane`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LaneExpr {
    c: i32,
    w: [i32; 5],
}

impl LaneExpr {
    /// `c + wg·g + wt·t` (`g = lane >> 2`, `t = lane & 3`).
    fn gt(c: i32, wg: i32, wt: i32) -> LaneExpr {
        LaneExpr { c, w: [wt, 2 * wt, wg, 2 * wg, 4 * wg] }
    }

    /// Fit `f(lane)` (for all 32 lanes) to the form, if it has it.
    pub(crate) fn fit(f: impl Fn(u32) -> u32) -> Option<LaneExpr> {
        let c = f(0) as i32;
        let mut w = [0; 5];
        for (b, wb) in w.iter_mut().enumerate() {
            *wb = f(1 << b) as i32 - c;
        }
        let x = LaneExpr { c, w };
        (0..32).all(|l| x.eval(l) == f(l) as i32).then_some(x)
    }

    /// The value, when it does not depend on the lane.
    pub(crate) fn constant(&self) -> Option<u32> {
        (self.w == [0; 5]).then_some(self.c as u32)
    }

    fn eval(&self, lane: u32) -> i32 {
        self.c + (0..5).map(|b| self.w[b] * ((lane >> b) & 1) as i32).sum::<i32>()
    }
}

/// Where a lane finds one element of A or B: a lane expression, a register
/// and the element in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Source {
    lane: LaneExpr,
    /// The register; the same in every lane except in the quad-pair form
    /// with a `.col` A or `.row` B, where it depends on the reading lane.
    reg: LaneExpr,
    /// The element in the register (likewise).
    elem: LaneExpr,
}

impl Source {
    /// The lane, register and element expressions.
    pub(crate) fn parts(&self) -> (LaneExpr, LaneExpr, LaneExpr) {
        (self.lane, self.reg, self.elem)
    }
}

fn internal(what: &str) -> Diagnostic {
    Diagnostic::error(Span::default(), format!("internal error: {what}"))
}

/// The source of element (row, col) of `role` for the D element `j` of
/// every lane, where `rc(lane)` gives its coordinates.
pub(crate) fn locate(owners: &Owners, rc: impl Fn(u32) -> (u32, u32)) -> Result<Source, Diagnostic> {
    // Each lane's owner, looked up once (the fits below read each many times).
    let mut own = [(0, 0, 0); 32];
    for (l, o) in own.iter_mut().enumerate() {
        *o = *owners.get(&rc(l as u32)).ok_or_else(|| internal("mma element without owner"))?;
    }
    let fit = |f: &dyn Fn((u32, u32, u32)) -> u32| {
        LaneExpr::fit(|l| f(own[l as usize])).ok_or_else(|| internal("mma fragment source is not linear in the lane"))
    };
    Ok(Source { lane: fit(&|o| o.0)?, reg: fit(&|o| o.1)?, elem: fit(&|o| o.2)? })
}

/// Per-instruction lane values: the lane, `g` and `t`, and lane expressions
/// already computed.
pub(crate) struct LaneCtx {
    pub g: Word,
    pub t: Word,
    lane: Word,
    cache: FxHashMap<LaneExpr, Word>,
}

pub(crate) fn lane_ctx(e: &mut Emitter, fx: &Fx) -> Result<LaneCtx, Diagnostic> {
    let u32t = e.t_int(32);
    let m31 = e.c_u32(31);
    let lane = o(e, Op::BitwiseAnd, u32t, &[fx.linear, m31])?;
    let two = e.c_u32(2);
    let g = o(e, Op::ShiftRightLogical, u32t, &[lane, two])?;
    let three = e.c_u32(3);
    let t = o(e, Op::BitwiseAnd, u32t, &[lane, three])?;
    Ok(LaneCtx { g, t, lane, cache: FxHashMap::default() })
}

impl LaneCtx {
    pub(crate) fn expr(&mut self, e: &mut Emitter, x: LaneExpr) -> R {
        if let Some(&w) = self.cache.get(&x) {
            return Ok(w);
        }
        let u32t = e.t_int(32);
        let mut acc = e.c_u32(x.c as u32);
        let w = x.w;
        let terms: Vec<(i32, Word)> = if w[1] == 2 * w[0] && w[3] == 2 * w[2] && w[4] == 4 * w[2] {
            vec![(w[2], self.g), (w[0], self.t)]
        } else {
            let mut t = Vec::new();
            for (b, &wb) in w.iter().enumerate() {
                if wb != 0 {
                    let sh = e.c_u32(b as u32);
                    let s = o(e, Op::ShiftRightLogical, u32t, &[self.lane, sh])?;
                    let one = e.c_u32(1);
                    t.push((wb, o(e, Op::BitwiseAnd, u32t, &[s, one])?));
                }
            }
            t
        };
        for (wt, v) in terms {
            if wt != 0 {
                let c = e.c_u32(wt as u32);
                let p = o(e, Op::IMul, u32t, &[v, c])?;
                acc = o(e, Op::IAdd, u32t, &[acc, p])?;
            }
        }
        self.cache.insert(x, acc);
        Ok(acc)
    }
}

/// The registers of a fragment operand (a vector, or one register).
fn regs(op: &Operand) -> Vec<&Operand> {
    match op {
        Operand::Vector(_, v) => v.iter().collect(),
        o => vec![o],
    }
}

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    let extra = if why.is_empty() { String::new() } else { format!(" ({why})") };
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}'{extra}", inst.mnemonic()))
}

pub(crate) fn fragment<'o>(
    inst: &Instruction,
    op: &'o Operand,
    what: &str,
    n: u32,
) -> Result<Vec<&'o Operand>, Diagnostic> {
    let r = regs(op);
    if r.len() as u32 != n {
        return Err(Diagnostic::error(
            op.span(),
            format!("'{}' needs {n} registers for {what}, found {}", inst.mnemonic(), r.len()),
        ));
    }
    Ok(r)
}

/// The `mXnYkZ` shape modifier.
pub(crate) fn shape(inst: &Instruction) -> Option<(u32, u32, u32)> {
    inst.modifiers.iter().find_map(|m| {
        let rest = m.as_str().strip_prefix('m')?;
        let (m_, rest) = rest.split_once('n')?;
        let (n_, k_) = rest.split_once('k')?;
        Some((m_.parse().ok()?, n_.parse().ok()?, k_.parse().ok()?))
    })
}

/// Emit a warp matrix instruction (see [`super::warp::emit`] for `active`).
pub(crate) fn emit(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    match inst.opcode.as_str() {
        "mma" => mma(e, fx, inst, active),
        "ldmatrix" => ldmatrix(e, fx, inst, active),
        "stmatrix" => stmatrix(e, fx, inst, active),
        "movmatrix" => movmatrix(e, fx, inst, active),
        _ => Err(unsupported(inst, "")),
    }
}

/// One A or B register as the 32-bit words to share (two for f64, low first).
fn reg_words(e: &mut Emitter, fx: &mut Fx, op: &Operand, wide: bool) -> Result<Vec<Word>, Diagnostic> {
    let u32t = e.t_int(32);
    if !wide {
        return Ok(vec![get(e, fx, op, K::Int(32), false)?]);
    }
    let v = get(e, fx, op, K::Int(64), false)?;
    let lo = o(e, Op::UConvert, u32t, &[v])?;
    let u64t = e.t_int(64);
    let c32 = e.c_int(64, 32);
    let hi = o(e, Op::ShiftRightLogical, u64t, &[v, c32])?;
    let hi = o(e, Op::UConvert, u32t, &[hi])?;
    Ok(vec![lo, hi])
}

/// Words per invocation a warp matrix instruction shares in one exchange
/// (see [`super::warp::share_many`]); 1 for other instructions.
pub(crate) fn exchange_words(inst: &Instruction) -> u32 {
    match inst.opcode.as_str() {
        // Sparse: the compressed A (half the dense registers), B and the metadata.
        "mma" if inst.has("sp") || inst.has("sp::ordered_metadata") => {
            mma_geometry(inst).map_or(1, |(geo, _)| geo.count(Role::A) / 2 + geo.count(Role::B) + 1)
        }
        "mma" => mma_geometry(inst)
            .map_or(1, |(geo, wide)| (geo.count(Role::A) + geo.count(Role::B)) * if wide { 2 } else { 1 }),
        "ldmatrix" => 2,
        // wgmma's A in registers: four per lane in every shape.
        "stmatrix" | "wgmma" => 4,
        // One mma tile at a time: at most four A and two B registers.
        "wmma" => 6,
        _ => 1,
    }
}

/// The geometry of an `mma` and whether its A/B registers are 64-bit.
fn mma_geometry(inst: &Instruction) -> Option<(Geometry, bool)> {
    let (m, n, k) = shape(inst)?;
    let at = inst.modifiers.iter().filter_map(|m| Elem::from_name(m.as_str())).nth(1)?;
    let quad = (m == 8 && k == 4 && at == Elem::F16).then_some(QuadPair { a_col: false, b_row: false, acc_f16: false });
    Some((Geometry { m, n, k, e: at.per_reg(), quad }, at == Elem::F64))
}

/// Read a shared register of lane `lane` (a u32, or for f64 a u64 built from two words).
fn read_reg(e: &mut Emitter, fx: &Fx, lanes: &[Lanes], lane: Word) -> R {
    let lo = warp::read(e, fx, lanes[0], lane)?;
    if lanes.len() == 1 {
        return Ok(lo);
    }
    let hi = warp::read(e, fx, lanes[1], lane)?;
    let u64t = e.t_int(64);
    let lo = o(e, Op::UConvert, u64t, &[lo])?;
    let hi = o(e, Op::UConvert, u64t, &[hi])?;
    let c32 = e.c_int(64, 32);
    let hi = o(e, Op::ShiftLeftLogical, u64t, &[hi, c32])?;
    o(e, Op::BitwiseOr, u64t, &[hi, lo])
}

/// Bits `[at, at + n)` of a 32-bit word, zero- or sign-extended to 32 bits.
pub(crate) fn field(e: &mut Emitter, w: Word, at: u32, n: u32, signed: bool) -> R {
    let u32t = e.t_int(32);
    let off = e.c_u32(at);
    let cnt = e.c_u32(n);
    let op = if signed { Op::BitFieldSExtract } else { Op::BitFieldUExtract };
    o(e, op, u32t, &[w, off, cnt])
}

/// GLSL.std.450 `UnpackHalf2x16`.
const UNPACK_HALF_2X16: u32 = 62;

/// Element `i` of register word `w` as a value to multiply: an f32 (f64 for
/// f64) for float types, an i32 for integer types.
pub(crate) fn decode(e: &mut Emitter, elem: Elem, w: Word, i: u32) -> R {
    let ft = e.t_float(32);
    match elem {
        Elem::F16 => {
            // UnpackHalf2x16 widens exactly (subnormals included) in one
            // instruction, without the Float16 capability.
            let v2 = e.ty(super::TyKey::Vec(ft, 2));
            let both = super::inst::ext(e, v2, UNPACK_HALF_2X16, &[w])?;
            e.b.composite_extract(ft, None, both, [i]).map_err(internal1)
        }
        Elem::Bf16 => {
            // The high half as it is, or the low half shifted up.
            let u32t = e.t_int(32);
            let x = if i == 1 {
                let m = e.c_u32(0xffff_0000);
                o(e, Op::BitwiseAnd, u32t, &[w, m])?
            } else {
                let c16 = e.c_u32(16);
                o(e, Op::ShiftLeftLogical, u32t, &[w, c16])?
            };
            o(e, Op::Bitcast, ft, &[x])
        }
        Elem::Tf32 => {
            // The top 19 bits (sign, exponent, 10 mantissa bits).
            let u32t = e.t_int(32);
            let m = e.c_u32(0xffff_e000);
            let x = o(e, Op::BitwiseAnd, u32t, &[w, m])?;
            o(e, Op::Bitcast, ft, &[x])
        }
        Elem::F64 => {
            let dt = e.t_float(64);
            o(e, Op::Bitcast, dt, &[w])
        }
        Elem::E4m3 | Elem::E5m2 => {
            let x = field(e, w, 8 * i, 8, false)?;
            let fmt = if elem == Elem::E4m3 { Fmt::E4M3 } else { Fmt::E5M2 };
            let d = super::cvt::fp8_to_f64(e, x, fmt)?;
            o(e, Op::FConvert, ft, &[d])
        }
        Elem::S8 | Elem::U8 | Elem::S4 | Elem::U4 => {
            let b = elem.bits();
            field(e, w, b * i, b, matches!(elem, Elem::S8 | Elem::S4))
        }
        Elem::B1 => Err(internal("b1 elements are not decoded")),
    }
}

/// Words of A and B registers that this lane read: (role, register, lane) → word.
pub(crate) type Words = FxHashMap<(Role, LaneExpr, LaneExpr), Word>;

/// Share every A and B register in one exchange and read the words `need`
/// lists (A sources first, then B). A register that depends on the reading
/// lane is read from every register and selected.
fn gather(
    e: &mut Emitter,
    fx: &mut Fx,
    lc: &mut LaneCtx,
    regs: [(Role, &[&Operand], &[Source]); 2],
    wide: bool,
) -> Result<Words, Diagnostic> {
    let mut values = Vec::new();
    let mut at = FxHashMap::default();
    for (role, ops, _) in &regs {
        for (r, op) in ops.iter().enumerate() {
            at.insert((*role, r as u32), values.len());
            values.extend(reg_words(e, fx, op, wide)?);
        }
    }
    let lanes = warp::share_many(e, fx, &values)?;
    let per = if wide { 2 } else { 1 };
    let mut words = Words::default();
    for (role, ops, need) in &regs {
        for s in need.iter() {
            if words.contains_key(&(*role, s.reg, s.lane)) {
                continue;
            }
            let lw = lc.expr(e, s.lane)?;
            let read = |e: &mut Emitter, r: u32| -> R {
                let i = *at.get(&(*role, r)).ok_or_else(|| internal("mma register not shared"))?;
                read_reg(e, fx, &lanes[i..i + per], lw)
            };
            let w = match s.reg.constant() {
                Some(r) => read(e, r)?,
                None => {
                    let which = lc.expr(e, s.reg)?;
                    let mut w = read(e, 0)?;
                    for r in 1..ops.len() as u32 {
                        let x = read(e, r)?;
                        let rc = e.c_u32(r);
                        let is = cmp(e, Op::IEqual, which, rc)?;
                        let t = e.t_int(if wide { 64 } else { 32 });
                        w = sel(e, t, is, x, w)?;
                    }
                    w
                }
            };
            words.insert((*role, s.reg, s.lane), w);
        }
    }
    Ok(words)
}

/// The value of source `s` of `role` (its word read by [`gather`]).
fn element(e: &mut Emitter, lc: &mut LaneCtx, words: &Words, role: Role, elem: Elem, s: Source) -> R {
    let w = *words.get(&(role, s.reg, s.lane)).ok_or_else(|| internal("mma word not read"))?;
    match s.elem.constant() {
        Some(i) => decode(e, elem, w, i),
        None => {
            // Shift the lane-dependent element down to element 0.
            let u32t = e.t_int(32);
            let i = lc.expr(e, s.elem)?;
            let bits = e.c_u32(elem.bits());
            let sh = o(e, Op::IMul, u32t, &[i, bits])?;
            let x = o(e, Op::ShiftRightLogical, u32t, &[w, sh])?;
            decode(e, elem, x, 0)
        }
    }
}

/// Share an A fragment's registers (32-bit) in one exchange and read the
/// words of `need` (for `wgmma` with A in registers).
pub(crate) fn gather_a(
    e: &mut Emitter,
    fx: &mut Fx,
    lc: &mut LaneCtx,
    regs: &[&Operand],
    need: &[Source],
) -> Result<Words, Diagnostic> {
    gather(e, fx, lc, [(Role::A, regs, need), (Role::B, &[], &[])], false)
}

/// The whole word of A source `s` read by [`gather_a`] (b1: 32 elements).
pub(crate) fn source_word(words: &Words, s: Source) -> R {
    words.get(&(Role::A, s.reg, s.lane)).copied().ok_or_else(|| internal("mma word not read"))
}

/// The value of A source `s` read by [`gather_a`].
pub(crate) fn source_value(e: &mut Emitter, lc: &mut LaneCtx, words: &Words, elem: Elem, s: Source) -> R {
    element(e, lc, words, Role::A, elem, s)
}

/// The type modifiers of a matrix instruction, in order (`.dtype.atype.btype.ctype`).
pub(crate) fn type_names(inst: &Instruction) -> Vec<&str> {
    inst.modifiers
        .iter()
        .map(|m| m.as_str())
        .filter(|m| Acc::from_name(m).is_some() || Elem::from_name(m).is_some())
        .collect()
}

/// The `.dtype.atype.btype.ctype` of an `mma` or `mma.sp`.
pub(crate) fn dabc_types(inst: &Instruction) -> Result<(Acc, Elem, Elem, Acc), Diagnostic> {
    let types = type_names(inst);
    let [dn, an, bn, cn] = types.as_slice() else {
        return Err(unsupported(inst, "expects .dtype.atype.btype.ctype"));
    };
    match (Acc::from_name(dn), Elem::from_name(an), Elem::from_name(bn), Acc::from_name(cn)) {
        (Some(dt), Some(at), Some(bt), Some(ct)) => Ok((dt, at, bt, ct)),
        _ => Err(unsupported(inst, "bad type combination")),
    }
}

/// `mma.sync.aligned.shape.row.col{.satfinite}.dtype.atype.btype.ctype{.op.popc} d, a, b, c`.
fn mma(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    if inst.has("sp") || inst.has("sp::ordered_metadata") {
        return super::mma_sp::mma_sp(e, fx, inst, active);
    }
    if inst.modifiers.iter().any(|m| m.as_str().starts_with("kind::") || m.as_str() == "block_scale") {
        return Err(unsupported(inst, "sm_100+ kinds are not supported"));
    }
    let Some((m, n, k)) = shape(inst) else { return Err(unsupported(inst, "no shape")) };
    let (dt, at, bt, ct) = dabc_types(inst)?;
    let quad = (m == 8 && n == 8 && k == 4 && at == Elem::F16).then(|| {
        let layouts: Vec<&str> =
            inst.modifiers.iter().map(|m| m.as_str()).filter(|m| *m == "row" || *m == "col").collect();
        QuadPair {
            a_col: layouts.first() == Some(&"col"),
            b_row: layouts.get(1) == Some(&"row"),
            acc_f16: ct == Acc::F16 && dt == Acc::F16,
        }
    });
    if quad.is_some() && ct != dt {
        // The ISA requires a .f32 D for a .f32 C; an .f16 C with an .f32 D
        // has C and D in different lanes.
        return Err(unsupported(inst, "m8n8k4 with different C and D types"));
    }
    let valid_acc = match at {
        Elem::F64 => dt == Acc::F64 && ct == Acc::F64,
        _ if at.is_int() => dt == Acc::S32 && ct == Acc::S32,
        _ => matches!(dt, Acc::F16 | Acc::F32) && matches!(ct, Acc::F16 | Acc::F32),
    };
    let same_family = at.is_int() == bt.is_int() && (at == Elem::F64) == (bt == Elem::F64) && at.bits() == bt.bits();
    if !valid_acc || !same_family || !(m == 16 || m == 8) || n != 8 {
        return Err(unsupported(inst, "bad shape or type combination"));
    }
    let geo = Geometry { m, n, k, e: at.per_reg(), quad };
    if geo.count(Role::A) == 0 || geo.count(Role::B) == 0 || (quad.is_none() && (m * k) % (32 * geo.e) != 0) {
        return Err(unsupported(inst, "bad shape for the type"));
    }
    let [d_op, a_op, b_op, c_op] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects d, a, b, c", inst.mnemonic())));
    };
    let nd = geo.count(Role::C);
    let acc_regs = |a: Acc| if a == Acc::F16 { nd / 2 } else { nd };
    let d_regs = fragment(inst, d_op, "D", acc_regs(dt))?;
    let a_regs = fragment(inst, a_op, "A", geo.count(Role::A))?;
    let b_regs = fragment(inst, b_op, "B", geo.count(Role::B))?;
    let c_regs = fragment(inst, c_op, "C", acc_regs(ct))?;
    let tile = Tile::new(inst, geo, at, bt, ct, dt)?;
    mma_tile(e, fx, active, &tile, [&d_regs, &a_regs, &b_regs, &c_regs])
}

/// One `mma` product: its geometry and types.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tile {
    pub geo: Geometry,
    pub at: Elem,
    pub bt: Elem,
    pub ct: Acc,
    pub dt: Acc,
    pub satfinite: bool,
    /// b1: `.and` (else `.xor`).
    pub and: bool,
    /// f64: the rounding of each fused multiply-add (`.rn` when absent).
    pub rnd: Rnd,
}

impl Tile {
    /// The tile of `inst`, with its `.satfinite`, `.and` and rounding
    /// modifiers (a rounding other than `.rn` only for f64).
    pub(crate) fn new(
        inst: &Instruction,
        geo: Geometry,
        at: Elem,
        bt: Elem,
        ct: Acc,
        dt: Acc,
    ) -> Result<Tile, Diagnostic> {
        let rnd = match Rnd::of(inst) {
            None | Some(Rnd::Rn) => Rnd::Rn,
            Some(r @ (Rnd::Rz | Rnd::Rm | Rnd::Rp)) if at == Elem::F64 => r,
            Some(_) => return Err(unsupported(inst, "this rounding modifier with these types")),
        };
        Ok(Tile { geo, at, bt, ct, dt, satfinite: inst.has("satfinite"), and: inst.has("and"), rnd })
    }
}

/// The sources of every product of every D element of a tile of shape
/// `geo`: per D element, the (A, B) source of each of its products
/// (`binary`: of each 32-bit word of `b1` elements).
pub(crate) fn plan_tile(geo: Geometry, binary: bool) -> Result<Vec<Vec<(Source, Source)>>, Diagnostic> {
    let a_own = geo.owners(Role::A);
    let b_own = geo.owners(Role::B);
    let step = if binary { 32 } else { 1 };
    let mut plan = Vec::new();
    for j in 0..geo.count(Role::C) {
        let mut terms = Vec::new();
        for kk in (0..geo.k).step_by(step as usize) {
            let sa = locate(&a_own, |l| (geo.coord(Role::C, l, j, 0).0, kk))?;
            let sb = locate(&b_own, |l| (kk, geo.coord(Role::C, l, j, 0).1))?;
            if binary && (sa.elem.constant() != Some(0) || sb.elem.constant() != Some(0)) {
                return Err(internal("b1 word not aligned"));
            }
            terms.push((sa, sb));
        }
        plan.push(terms);
    }
    Ok(plan)
}

/// Emit one product `D = A·B + C` on fragment registers (`d`, `a`, `b`,
/// `c` in that order, each in the tile's register counts).
pub(crate) fn mma_tile(
    e: &mut Emitter,
    fx: &mut Fx,
    active: Word,
    tile: &Tile,
    [d_regs, a_regs, b_regs, c_regs]: [&[&Operand]; 4],
) -> Result<(), Diagnostic> {
    let Tile { geo, at, bt, ct, dt, .. } = *tile;
    let nd = geo.count(Role::C);

    // Host side: the sources of every product of every D element, once per
    // shape in a module (a module of tensor-core kernels has hundreds of
    // `mma`s of a few shapes; computing this for each was most of the
    // translation's time).
    let binary = at == Elem::B1;
    let plan = match e.mma_plans.get(&(geo, binary)) {
        Some(p) => p.clone(),
        None => {
            let p = std::rc::Rc::new(plan_tile(geo, binary)?);
            e.mma_plans.insert((geo, binary), p.clone());
            p
        }
    };

    // Device side: read what this lane needs.
    let mut lc = lane_ctx(e, fx)?;
    let wide = at == Elem::F64;
    let need_a: Vec<Source> = plan.iter().flatten().map(|p| p.0).collect();
    let need_b: Vec<Source> = plan.iter().flatten().map(|p| p.1).collect();
    let words = gather(e, fx, &mut lc, [(Role::A, a_regs, &need_a), (Role::B, b_regs, &need_b)], wide)?;
    let mut values: FxHashMap<(Role, Source), Word> = FxHashMap::default();
    let mut value = |e: &mut Emitter, role: Role, elem: Elem, s: Source| -> R {
        if let Some(&v) = values.get(&(role, s)) {
            return Ok(v);
        }
        let v = if binary {
            *words.get(&(role, s.reg, s.lane)).ok_or_else(|| internal("mma word not read"))?
        } else {
            element(e, &mut lc, &words, role, elem, s)?
        };
        values.insert((role, s), v);
        Ok(v)
    };

    let c_vals = read_c(e, fx, ct, c_regs, nd)?;
    let mut d_vals = Vec::new();
    for (j, terms) in plan.iter().enumerate() {
        let mut acc = start_acc(e, tile, c_vals[j])?;
        for &(sa, sb) in terms {
            let a = value(e, Role::A, at, sa)?;
            let b = value(e, Role::B, bt, sb)?;
            acc = accumulate(e, tile, acc, a, b)?;
        }
        d_vals.push(finish_acc(e, tile, acc)?);
    }
    write_d(e, fx, active, dt, d_regs, &d_vals)
}

/// The `nd` C elements of this lane, as values to accumulate on (f16 C
/// widened to f32).
pub(crate) fn read_c(
    e: &mut Emitter,
    fx: &mut Fx,
    ct: Acc,
    c_regs: &[&Operand],
    nd: u32,
) -> Result<Vec<Word>, Diagnostic> {
    let mut c_vals = Vec::new();
    for j in 0..nd {
        let v = match ct {
            Acc::F16 => {
                let w = get(e, fx, c_regs[(j / 2) as usize], K::Int(32), false)?;
                let h = field(e, w, 16 * (j & 1), 16, false)?;
                super::half::to_f32(e, h, Fmt::F16)?
            }
            Acc::F32 => get(e, fx, c_regs[j as usize], K::Float(32), false)?,
            Acc::F64 => get(e, fx, c_regs[j as usize], K::Float(64), false)?,
            Acc::S32 => get(e, fx, c_regs[j as usize], K::Int(32), false)?,
        };
        c_vals.push(v);
    }
    Ok(c_vals)
}

/// The accumulator a D element starts from: its C value (64-bit for
/// `.satfinite` integer sums).
pub(crate) fn start_acc(e: &mut Emitter, tile: &Tile, c: Word) -> R {
    if tile.satfinite && tile.at.is_int() {
        let u64t = e.t_int(64);
        return o(e, Op::SConvert, u64t, &[c]);
    }
    Ok(c)
}

/// `acc + a·b` in the tile's arithmetic (see the module docs); `a` and `b`
/// are decoded elements, or for b1 whole words.
pub(crate) fn accumulate(e: &mut Emitter, tile: &Tile, acc: Word, a: Word, b: Word) -> R {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let ft = e.t_float(32);
    let at = tile.at;
    Ok(if at == Elem::B1 {
        let x = o(e, if tile.and { Op::BitwiseAnd } else { Op::BitwiseXor }, u32t, &[a, b])?;
        let p = o(e, Op::BitCount, u32t, &[x])?;
        o(e, Op::IAdd, u32t, &[acc, p])?
    } else if at.is_int() {
        let p = o(e, Op::IMul, u32t, &[a, b])?;
        if tile.satfinite {
            let p = o(e, Op::SConvert, u64t, &[p])?;
            o(e, Op::IAdd, u64t, &[acc, p])?
        } else {
            o(e, Op::IAdd, u32t, &[acc, p])?
        }
    } else if at == Elem::F64 && tile.rnd != Rnd::Rn {
        super::float::arith64_directed(e, super::float::Ar::Fma, a, b, acc, tile.rnd)?
    } else if at == Elem::F64 {
        super::float::fma_value(e, a, b, acc, 64)?
    } else {
        // The product of two narrow elements is exact in f32, so a fused
        // and an unfused multiply-add give the same sum, rounded once.
        super::inst::ext(e, ft, super::inst::glsl::FMA, &[a, b, acc])?
    })
}

/// The D value of an accumulator (`.satfinite` sums clamped to s32).
pub(crate) fn finish_acc(e: &mut Emitter, tile: &Tile, acc: Word) -> R {
    if !(tile.satfinite && tile.at.is_int()) {
        return Ok(acc);
    }
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let lo = e.c_int(64, i32::MIN as i64 as u64);
    let hi = e.c_int(64, i32::MAX as u64);
    let below = cmp(e, Op::SLessThan, acc, lo)?;
    let above = cmp(e, Op::SGreaterThan, acc, hi)?;
    let v = sel(e, u64t, below, lo, acc)?;
    let v = sel(e, u64t, above, hi, v)?;
    o(e, Op::UConvert, u32t, &[v])
}

/// Write D elements to the D registers (f16 D rounded to nearest even and packed in pairs).
pub(crate) fn write_d(
    e: &mut Emitter,
    fx: &mut Fx,
    active: Word,
    dt: Acc,
    d_regs: &[&Operand],
    d_vals: &[Word],
) -> Result<(), Diagnostic> {
    let u32t = e.t_int(32);
    for (r, d) in d_regs.iter().enumerate() {
        match dt {
            Acc::F16 => {
                let mut halves = Vec::new();
                for j in [2 * r, 2 * r + 1] {
                    let dt64 = e.t_float(64);
                    let x = o(e, Op::FConvert, dt64, &[d_vals[j]])?;
                    let b = super::rounding::round_f64(e, x, Fmt::F16, Rnd::Rn, false)?;
                    halves.push(o(e, Op::UConvert, u32t, &[b])?);
                }
                let w = super::half::pack(e, &halves)?;
                set_if(e, fx, active, d, w, K::Int(32))?;
            }
            _ => set_if(e, fx, active, d, d_vals[r], dt.reg_kind())?,
        }
    }
    Ok(())
}

/// The address operand of `ldmatrix`/`stmatrix` as words every lane can
/// share: a shared-window offset (one word) or a generic address (two).
fn address_words(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    op: &Operand,
) -> Result<(bool, Vec<Word>), Diagnostic> {
    let Operand::Address(_, addr) = op else {
        return Err(Diagnostic::error(op.span(), format!("'{}' needs an address here", inst.mnemonic())));
    };
    let space = super::mem::space_of(inst)?;
    let a = super::mem::resolve(e, fx, space, addr, inst.span)?;
    let u32t = e.t_int(32);
    match a {
        super::mem::Addr::Shared(off) => Ok((true, vec![off])),
        super::mem::Addr::Generic(v) | super::mem::Addr::Global(v) => {
            let lo = o(e, Op::UConvert, u32t, &[v])?;
            let u64t = e.t_int(64);
            let c32 = e.c_int(64, 32);
            let hi = o(e, Op::ShiftRightLogical, u64t, &[v, c32])?;
            let hi = o(e, Op::UConvert, u32t, &[hi])?;
            Ok((false, vec![lo, hi]))
        }
        _ => Err(Diagnostic::error(inst.span, format!("'{}' needs a shared-memory address", inst.mnemonic()))),
    }
}

/// Rebuild the address of another lane (words read from a share) plus a byte offset.
fn address_at(e: &mut Emitter, shared: bool, words: &[Word], plus: Word) -> Result<super::mem::Addr, Diagnostic> {
    let u32t = e.t_int(32);
    if shared {
        let a = o(e, Op::IAdd, u32t, &[words[0], plus])?;
        return Ok(super::mem::Addr::Shared(a));
    }
    let u64t = e.t_int(64);
    let lo = o(e, Op::UConvert, u64t, &[words[0]])?;
    let hi = o(e, Op::UConvert, u64t, &[words[1]])?;
    let c32 = e.c_int(64, 32);
    let hi = o(e, Op::ShiftLeftLogical, u64t, &[hi, c32])?;
    let v = o(e, Op::BitwiseOr, u64t, &[hi, lo])?;
    let p = o(e, Op::UConvert, u64t, &[plus])?;
    let v = o(e, Op::IAdd, u64t, &[v, p])?;
    Ok(super::mem::Addr::Generic(v))
}

/// The `.x1`/`.x2`/`.x4` count and the checks common to `ldmatrix` and `stmatrix`.
fn matrices(inst: &Instruction) -> Result<u32, Diagnostic> {
    if !inst.has("m8n8") || !inst.has("b16") {
        return Err(unsupported(inst, "only .m8n8 with .b16 is supported"));
    }
    Ok(if inst.has("x4") {
        4
    } else if inst.has("x2") {
        2
    } else {
        1
    })
}

/// `ldmatrix.sync.aligned.m8n8.num{.trans}{.ss}.b16 d, [p]`: lanes `8m..8m+7`
/// give the row addresses of matrix `m`; lane `l` receives, for each matrix,
/// row `l >> 2`, columns `2(l & 3)` and `+1` (with `.trans`, the transpose).
fn ldmatrix(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    let num = matrices(inst)?;
    let [d_op, a_op] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, "'ldmatrix' expects d, [p]"));
    };
    let d_regs = fragment(inst, d_op, "the destination", num)?;
    let trans = inst.has("trans");
    let (shared, words) = address_words(e, fx, inst, a_op)?;
    let lanes = warp::share_many(e, fx, &words)?;
    let mut lc = lane_ctx(e, fx)?;
    let u32t = e.t_int(32);
    for (m, d) in d_regs.iter().enumerate() {
        let m = m as i32;
        let v = if !trans {
            // Row l >> 2 of matrix m, bytes 4(l & 3)..+4.
            let src = lc.expr(e, LaneExpr::gt(8 * m, 1, 0))?;
            let row: Vec<Word> = lanes.iter().map(|l| warp::read(e, fx, *l, src)).collect::<Result<_, _>>()?;
            let four = e.c_u32(4);
            let off = o(e, Op::IMul, u32t, &[lc.t, four])?;
            let a = address_at(e, shared, &row, off)?;
            load_if(e, fx, active, a, K::Int(32), inst.span)?
        } else {
            // Rows 2(l & 3) and +1 of matrix m, bytes 2(l >> 2)..+2.
            let mut halves = Vec::new();
            for j in 0..2 {
                let src = lc.expr(e, LaneExpr::gt(8 * m + j, 0, 2))?;
                let row: Vec<Word> = lanes.iter().map(|l| warp::read(e, fx, *l, src)).collect::<Result<_, _>>()?;
                let two = e.c_u32(2);
                let off = o(e, Op::IMul, u32t, &[lc.g, two])?;
                let a = address_at(e, shared, &row, off)?;
                let h = load_if(e, fx, active, a, K::Int(16), inst.span)?;
                halves.push(o(e, Op::UConvert, u32t, &[h])?);
            }
            super::half::pack(e, &halves)?
        };
        set_if(e, fx, active, d, v, K::Int(32))?;
    }
    Ok(())
}

/// Load from `a` where `active` holds (0 elsewhere: an inactive lane's
/// address words may be anything).
fn load_if(e: &mut Emitter, fx: &Fx, active: Word, a: super::mem::Addr, k: K, span: crate::diag::Span) -> R {
    let bytes = k.bits() / 8;
    let site = super::fault::Site { span, access: super::fault::Access::Read, bytes, align: bytes };
    if active == e.c_bool(true) {
        return super::mem::load_checked(e, fx, a, k, false, site);
    }
    let t = e.kty(k);
    let var = warp::func_var(e, t)?;
    let zero = e.c_int(k.bits(), 0);
    e.b.store(var, zero, None, []).map_err(internal1)?;
    let yes = e.b.id();
    let merge = e.b.id();
    e.b.selection_merge(merge, rspirv::spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(active, yes, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(yes)).map_err(internal1)?;
    let v = super::mem::load_checked(e, fx, a, k, false, site)?;
    e.b.store(var, v, None, []).map_err(internal1)?;
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    e.b.load(t, None, var, None, []).map_err(internal1)
}

/// `stmatrix.sync.aligned.m8n8.num{.trans}{.ss}.b16 [p], r`: the inverse of
/// `ldmatrix`. Lane `8m + i` gives the address of row `i` of matrix `m` and
/// writes that row: words from lanes `4i..4i+3` (with `.trans`, column `i`
/// of the fragment: halves from lanes `4r + (i >> 1)`).
fn stmatrix(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    let num = matrices(inst)?;
    let [a_op, r_op] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, "'stmatrix' expects [p], r"));
    };
    let r_regs = fragment(inst, r_op, "the source", num)?;
    let trans = inst.has("trans");
    let (shared, words) = address_words(e, fx, inst, a_op)?;
    let lc = lane_ctx(e, fx)?;
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    // This lane writes row (lane & 7) of matrix (lane >> 3), if that matrix exists.
    let c8 = e.c_u32(8 * num);
    let writes = o(e, Op::ULessThan, bt, &[lc.lane, c8])?;
    let writes = o(e, Op::LogicalAnd, bt, &[writes, active])?;
    let seven = e.c_u32(7);
    let i = o(e, Op::BitwiseAnd, u32t, &[lc.lane, seven])?;
    let three = e.c_u32(3);
    let mine = o(e, Op::ShiftRightLogical, u32t, &[lc.lane, three])?;
    let mut values = Vec::new();
    for r in &r_regs {
        values.push(get(e, fx, r, K::Int(32), false)?);
    }
    let regs_shared = warp::share_many(e, fx, &values)?;
    for (m, &lanes) in regs_shared.iter().enumerate() {
        let mut row_words = Vec::new();
        if !trans {
            for c in 0..4 {
                let four = e.c_u32(4);
                let base = o(e, Op::IMul, u32t, &[i, four])?;
                let cc = e.c_u32(c);
                let src = o(e, Op::IAdd, u32t, &[base, cc])?;
                row_words.push(warp::read(e, fx, lanes, src)?);
            }
        } else {
            let one = e.c_u32(1);
            let col_lane = o(e, Op::ShiftRightLogical, u32t, &[i, one])?;
            let half = o(e, Op::BitwiseAnd, u32t, &[i, one])?;
            let sixteen = e.c_u32(16);
            let sh = o(e, Op::IMul, u32t, &[half, sixteen])?;
            let mut halves = Vec::new();
            for rr in 0..8 {
                let base = e.c_u32(4 * rr);
                let src = o(e, Op::IAdd, u32t, &[base, col_lane])?;
                let w = warp::read(e, fx, lanes, src)?;
                let x = o(e, Op::ShiftRightLogical, u32t, &[w, sh])?;
                let m16 = e.c_u32(0xffff);
                halves.push(o(e, Op::BitwiseAnd, u32t, &[x, m16])?);
            }
            for p in halves.chunks(2) {
                row_words.push(super::half::pack(e, p)?);
            }
        }
        // Matrix m's row i is written by the lane whose address it is.
        let mc = e.c_u32(m as u32);
        let is_m = o(e, Op::IEqual, bt, &[mine, mc])?;
        let go = o(e, Op::LogicalAnd, bt, &[is_m, writes])?;
        let yes = e.b.id();
        let merge = e.b.id();
        e.b.selection_merge(merge, rspirv::spirv::SelectionControl::NONE).map_err(internal1)?;
        e.b.branch_conditional(go, yes, merge, []).map_err(internal1)?;
        e.b.begin_block(Some(yes)).map_err(internal1)?;
        for (c, w) in row_words.iter().enumerate() {
            let off = e.c_u32(4 * c as u32);
            let a = address_at(e, shared, &words, off)?;
            let site = super::fault::Site { span: inst.span, access: super::fault::Access::Write, bytes: 4, align: 4 };
            super::mem::store_checked(e, fx, a, *w, K::Int(32), false, site)?;
        }
        e.b.branch(merge).map_err(internal1)?;
        e.b.begin_block(Some(merge)).map_err(internal1)?;
    }
    Ok(())
}

/// `movmatrix.sync.aligned.m8n8.trans.b16 d, a`: lane `l` receives row
/// `l >> 2`, columns `2(l & 3)` and `+1` of the transpose, that is elements
/// (`2(l & 3) + j`, `l >> 2`) of the source, held by lane
/// `4(2(l & 3) + j) + (l >> 3)` in half `(l >> 2) & 1`.
fn movmatrix(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    if !inst.has("m8n8") || !inst.has("trans") || !inst.has("b16") {
        return Err(unsupported(inst, ""));
    }
    let [d, a] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, "'movmatrix' expects d, a"));
    };
    let lc = lane_ctx(e, fx)?;
    let v = get(e, fx, a, K::Int(32), false)?;
    let lanes = warp::share(e, fx, v)?;
    let u32t = e.t_int(32);
    let one = e.c_u32(1);
    let g_half = o(e, Op::BitwiseAnd, u32t, &[lc.g, one])?;
    let sixteen = e.c_u32(16);
    let sh = o(e, Op::IMul, u32t, &[g_half, sixteen])?;
    let g_lane = o(e, Op::ShiftRightLogical, u32t, &[lc.g, one])?;
    let eight = e.c_u32(8);
    let t8 = o(e, Op::IMul, u32t, &[lc.t, eight])?;
    let mut halves = Vec::new();
    for j in 0..2 {
        let cj = e.c_u32(4 * j);
        let base = o(e, Op::IAdd, u32t, &[t8, cj])?;
        let src = o(e, Op::IAdd, u32t, &[base, g_lane])?;
        let w = warp::read(e, fx, lanes, src)?;
        let x = o(e, Op::ShiftRightLogical, u32t, &[w, sh])?;
        let m16 = e.c_u32(0xffff);
        halves.push(o(e, Op::BitwiseAnd, u32t, &[x, m16])?);
    }
    let r = super::half::pack(e, &halves)?;
    set_if(e, fx, active, d, r, K::Int(32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of A and B has exactly one owner, and every D element
    /// one lane, for every shape the emitter accepts.
    #[test]
    fn fragments_partition_the_matrices() {
        let shapes = [
            (16, 8, 16, 2),
            (16, 8, 8, 2),
            (16, 8, 4, 1),
            (16, 8, 8, 1),
            (8, 8, 4, 1),
            (16, 8, 16, 1),
            (8, 8, 16, 4),
            (16, 8, 16, 4),
            (16, 8, 32, 4),
            (8, 8, 32, 8),
            (16, 8, 32, 8),
            (16, 8, 64, 8),
            (8, 8, 128, 32),
            (16, 8, 128, 32),
            (16, 8, 256, 32),
        ];
        for (m, n, k, e) in shapes {
            let geo = Geometry { m, n, k, e, quad: None };
            assert_eq!(geo.owners(Role::A).len() as u32, m * k, "A {m}x{n}x{k}");
            assert_eq!(geo.owners(Role::B).len() as u32, k * n, "B {m}x{n}x{k}");
            let mut d = std::collections::HashSet::new();
            for l in 0..32 {
                for j in 0..geo.count(Role::C) {
                    let (r, c) = geo.coord(Role::C, l, j, 0);
                    assert!(r < m && c < n);
                    d.insert((r, c));
                }
            }
            assert_eq!(d.len() as u32, m * n);
            // Every product has a lane-uniform, affine source.
            let a = geo.owners(Role::A);
            let b = geo.owners(Role::B);
            for j in 0..geo.count(Role::C) {
                for kk in 0..k {
                    locate(&a, |l| (geo.coord(Role::C, l, j, 0).0, kk)).unwrap();
                    locate(&b, |l| (kk, geo.coord(Role::C, l, j, 0).1)).unwrap();
                }
            }
        }
    }

    /// The ISA's own formulas for m16n8k16 f16 A (a0..a7).
    #[test]
    fn m16n8k16_a_matches_the_isa() {
        let geo = Geometry { m: 16, n: 8, k: 16, e: 2, quad: None };
        for lane in 0..32 {
            let (g, t) = (lane >> 2, lane % 4);
            for idx in 0..8u32 {
                let row = if idx < 2 || (4..6).contains(&idx) { g } else { g + 8 };
                let col = if idx < 4 { t * 2 + (idx & 1) } else { t * 2 + (idx & 1) + 8 };
                assert_eq!(geo.coord(Role::A, lane, idx / 2, idx % 2), (row, col));
            }
        }
    }
}
