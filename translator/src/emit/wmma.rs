//! `wmma.load`, `wmma.store` and `wmma.mma` (`nvcuda::wmma`).
//!
//! The ISA leaves a wmma fragment's layout to the implementation and fixes
//! only its register count; programs reach the elements through
//! `wmma.load`/`wmma.store`, or all of them alike (`frag.x[i]`). ptxvk lays a
//! fragment out as a grid of `mma.sync` tiles (see [`super::mma`]):
//!
//! | A/B type | tile | shapes |
//! |---|---|---|
//! | f16, bf16 | `m16n8k16` (`m8n8k16` for `m8n32k16`) | `m16n16k16`, `m32n8k16`, `m8n32k16` |
//! | tf32 | `m16n8k8` | `m16n16k8` |
//! | f64 | `m8n8k4` | `m8n8k4` |
//! | s8, u8 | `m16n8k16` (`m8n8k16`) | `m16n16k16`, `m32n8k16`, `m8n32k16` |
//! | s4, u4 | `m8n8k32` | `m8n8k32` |
//! | b1 | `m8n8k128` | `m8n8k128` |
//!
//! A's registers are its tiles `(mi, ki)` one after another, B's `(ki, ni)`,
//! C's and D's elements `(mi, ni)` (two to a register for f16). Where the ISA
//! gives a fragment more registers than that (f16 A and B: eight, a legacy of
//! sm_70, where elements were held twice), the tiles repeat: register `q`
//! holds what register `q % unique` does. `wmma.mma` is then one `mma` tile
//! per `(mi, ni)` (every shape has one `k` tile), with `mma`'s numerics.
//! `wmma.load`/`wmma.store` move each lane's elements between its registers
//! and memory at `p + (row·stride + col)` (`.row`) or `p + (col·stride + row)`
//! (`.col`), in elements; without `stride`, the matrix's width (`.row`) or
//! height (`.col`). Registers whose elements are contiguous in memory (A
//! `.row`, B `.col`: the `k` run of a register) move as one 32-bit word.

use super::fault::{Access, Site};
use super::func::Fx;
use super::mem::{self, Addr};
use super::mma::{self, Acc, Elem, Geometry, Role, Tile};
use super::rounding::{o, R};
use super::values::{get, set, K};
use super::Emitter;
use crate::ast::{Instruction, Operand};
use crate::diag::Diagnostic;
use rspirv::spirv::{Op, Word};

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    let extra = if why.is_empty() { String::new() } else { format!(" ({why})") };
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}'{extra}", inst.mnemonic()))
}

/// A wmma shape laid out as a grid of mma tiles.
#[derive(Clone, Copy, Debug)]
struct Layout {
    m: u32,
    n: u32,
    k: u32,
    tile: Geometry,
    tm: u32,
    tn: u32,
    tk: u32,
}

impl Layout {
    fn new(elem: Elem, (m, n, k): (u32, u32, u32)) -> Option<Layout> {
        let ok = match elem {
            Elem::F16 | Elem::Bf16 | Elem::S8 | Elem::U8 => {
                matches!((m, n, k), (16, 16, 16) | (32, 8, 16) | (8, 32, 16))
            }
            Elem::Tf32 => (m, n, k) == (16, 16, 8),
            Elem::F64 => (m, n, k) == (8, 8, 4),
            Elem::S4 | Elem::U4 => (m, n, k) == (8, 8, 32),
            Elem::B1 => (m, n, k) == (8, 8, 128),
            Elem::E4m3 | Elem::E5m2 => false,
        };
        if !ok {
            return None;
        }
        let tm = if m == 8 { 8 } else { 16 };
        let tile = Geometry::standard(tm, 8, k, elem.per_reg());
        Some(Layout { m, n, k, tile, tm, tn: 8, tk: k })
    }

    fn tiles(&self, role: Role) -> (u32, u32) {
        match role {
            Role::A => (self.m / self.tm, self.k / self.tk),
            Role::B => (self.k / self.tk, self.n / self.tn),
            Role::C => (self.m / self.tm, self.n / self.tn),
        }
    }

    /// Registers (A, B) or elements (C, D) of one tile per lane.
    fn per_tile(&self, role: Role) -> u32 {
        self.tile.count_role(role)
    }

    /// Distinct registers (A, B) or elements (C, D) of the fragment.
    fn unique(&self, role: Role) -> u32 {
        let (a, b) = self.tiles(role);
        a * b * self.per_tile(role)
    }

    /// Row and column (in the whole matrix) of element `i` of unique
    /// register (or C/D element) `u` of `lane`.
    fn coord(&self, role: Role, lane: u32, u: u32, i: u32) -> (u32, u32) {
        let per = self.per_tile(role);
        let (t, r) = (u / per, u % per);
        let (_, cols) = self.tiles(role);
        let (ti, tj) = (t / cols, t % cols);
        let (row, col) = self.tile.coord_role(role, lane, r, i);
        let (rh, cw) = match role {
            Role::A => (self.tm, self.tk),
            Role::B => (self.tk, self.tn),
            Role::C => (self.tm, self.tn),
        };
        (ti * rh + row, tj * cw + col)
    }

    /// The matrix's (rows, columns).
    fn dims(&self, role: Role) -> (u32, u32) {
        match role {
            Role::A => (self.m, self.k),
            Role::B => (self.k, self.n),
            Role::C => (self.m, self.n),
        }
    }
}

/// The ISA's register count of a fragment.
fn isa_regs(l: &Layout, role: Role, elem: Elem, acc: Acc) -> u32 {
    match role {
        Role::A | Role::B if elem == Elem::F16 => 8,
        Role::A | Role::B => l.unique(role),
        Role::C if acc == Acc::F16 => l.m * l.n / 64,
        Role::C => l.m * l.n / 32,
    }
}

fn shape(inst: &Instruction) -> Option<(u32, u32, u32)> {
    mma::shape(inst)
}

/// Emit a `wmma` instruction (`active`: see [`super::warp::emit`]).
pub(crate) fn emit(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    if inst.has("load") {
        load_store(e, fx, inst, true)
    } else if inst.has("store") {
        load_store(e, fx, inst, false)
    } else if inst.has("mma") {
        wmma_mma(e, fx, inst, active)
    } else {
        Err(unsupported(inst, ""))
    }
}

/// The element type of an A/B fragment or the type of a C/D one.
enum Frag {
    Ab(Elem),
    Acc(Acc),
}

/// `wmma.load.{a,b,c}.sync.aligned.layout.shape{.ss}.type r, [p]{, stride}` and
/// `wmma.store.d.sync.aligned.layout.shape{.ss}.type [p], r{, stride}`.
fn load_store(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, is_load: bool) -> Result<(), Diagnostic> {
    let Some(shape3) = shape(inst) else { return Err(unsupported(inst, "no shape")) };
    let role = if inst.has("a") {
        Role::A
    } else if inst.has("b") {
        Role::B
    } else {
        Role::C
    };
    let ty = inst
        .modifiers
        .iter()
        .rev()
        .map(|m| m.as_str())
        .find(|m| Elem::from_name(m).is_some() || *m == "f32" || *m == "s32");
    let frag = match (role, ty) {
        (Role::C, Some(t)) => Frag::Acc(Acc::from_name(t).ok_or_else(|| unsupported(inst, "type"))?),
        (_, Some(t)) => Frag::Ab(Elem::from_name(t).ok_or_else(|| unsupported(inst, "type"))?),
        _ => return Err(unsupported(inst, "no type")),
    };
    // The A/B element type decides the layout; C/D's from its shape alone
    // (any A/B type with that shape tiles C the same way).
    let (elem, acc) = match frag {
        Frag::Ab(t) => (t, Acc::F32),
        Frag::Acc(Acc::F64) => (Elem::F64, Acc::F64),
        Frag::Acc(Acc::S32) => (if shape3.0 == 8 && shape3.2 != 16 { Elem::S4 } else { Elem::S8 }, Acc::S32),
        Frag::Acc(a) => (Elem::F16, a),
    };
    let elem = match (elem, shape3) {
        (Elem::S4, (8, 8, 128)) => Elem::B1,
        (Elem::F16, (16, 16, 8)) => Elem::Tf32,
        (x, _) => x,
    };
    let Some(l) = Layout::new(elem, shape3) else { return Err(unsupported(inst, "shape and type")) };
    let ops = inst.operands.as_slice();
    let (r_op, a_op, stride_op) = match (is_load, ops) {
        (true, [r, a]) => (r, a, None),
        (true, [r, a, s]) => (r, a, Some(s)),
        (false, [a, r]) => (r, a, None),
        (false, [a, r, s]) => (r, a, Some(s)),
        _ => return Err(Diagnostic::error(inst.span, format!("'{}': wrong operands", inst.mnemonic()))),
    };
    let nregs = isa_regs(&l, role, elem, acc);
    let regs = mma::fragment(inst, r_op, "the fragment", nregs)?;
    let Operand::Address(_, addr) = a_op else {
        return Err(Diagnostic::error(a_op.span(), format!("'{}' needs an address", inst.mnemonic())));
    };
    let space = mem::space_of(inst)?;
    let base = mem::resolve(e, fx, space, addr, inst.span)?;
    let row_major = inst.has("row");
    let (rows, cols) = l.dims(role);
    let u32t = e.t_int(32);
    let stride = match stride_op {
        Some(s) => get(e, fx, s, K::Int(32), false)?,
        None => e.c_u32(if row_major { cols } else { rows }),
    };
    let lc = mma::lane_ctx(e, fx)?;
    // Element bits and per register.
    let (bits, per_reg) = match (role, acc) {
        (Role::C, Acc::F16) => (16, 2),
        (Role::C, Acc::F64) => (64, 1),
        (Role::C, _) => (32, 1),
        _ => (elem.bits(), elem.per_reg()),
    };
    let unique = if role == Role::C { l.unique(Role::C) / per_reg } else { l.unique(role) };
    let reg_kind = if bits == 64 { K::Int(64) } else { K::Int(32) };
    // Element index (in elements) of (row, col), a value from the lane's g and t.
    let index = |e: &mut Emitter, row: Word, col: Word| -> R {
        let (major, minor) = if row_major { (row, col) } else { (col, row) };
        let x = o(e, Op::IMul, u32t, &[major, stride])?;
        o(e, Op::IAdd, u32t, &[x, minor])
    };
    // Values of (row, col) for `lane`, as linear lane expressions.
    let mut lc = lc;
    let coord_word = |e: &mut Emitter, lc: &mut mma::LaneCtx, f: &dyn Fn(u32) -> u32| -> R {
        let x = mma::LaneExpr::fit(f).ok_or_else(|| unsupported(inst, "internal: wmma layout"))?;
        lc.expr(e, x)
    };
    for q in 0..nregs {
        let u = q % unique;
        // For C/D, register u holds elements per_reg·u + i.
        let elem_at = |lane: u32, i: u32| -> (u32, u32) {
            if role == Role::C {
                l.coord(Role::C, lane, per_reg * u + i, 0)
            } else {
                l.coord(role, lane, u, i)
            }
        };
        // Contiguous in memory: element i at index(element 0) + i.
        let lin = |lane: u32, i: u32| {
            let (r, c) = elem_at(lane, i);
            if row_major {
                (r, c)
            } else {
                (c, r)
            }
        };
        let contiguous = (0..32).all(|ln| (1..per_reg).all(|i| lin(ln, i) == (lin(ln, 0).0, lin(ln, 0).1 + i)));
        let reg = regs[q as usize];
        if contiguous {
            let row = coord_word(e, &mut lc, &|ln| elem_at(ln, 0).0)?;
            let col = coord_word(e, &mut lc, &|ln| elem_at(ln, 0).1)?;
            let idx = index(e, row, col)?;
            let a = byte_address(e, base, idx, bits)?;
            let k = reg_kind;
            let bytes = k.bits() / 8;
            if is_load {
                let site = Site { span: inst.span, access: Access::Read, bytes, align: bytes };
                let v = mem::load_checked(e, fx, a, k, false, site)?;
                set(e, fx, reg, v, k, false)?;
            } else {
                let v = get(e, fx, reg, k, false)?;
                let site = Site { span: inst.span, access: Access::Write, bytes, align: bytes };
                mem::store_checked(e, fx, a, v, k, false, site)?;
            }
            continue;
        }
        if bits < 8 {
            return Err(unsupported(inst, "this layout for sub-byte types"));
        }
        // Element by element.
        let mut packed = e.c_u32(0);
        let whole = if is_load { None } else { Some(get(e, fx, reg, K::Int(32), false)?) };
        for i in 0..per_reg {
            let row = coord_word(e, &mut lc, &|ln| elem_at(ln, i).0)?;
            let col = coord_word(e, &mut lc, &|ln| elem_at(ln, i).1)?;
            let idx = index(e, row, col)?;
            let a = byte_address(e, base, idx, bits)?;
            let site = |access| Site { span: inst.span, access, bytes: bits / 8, align: bits / 8 };
            if is_load {
                let v = mem::load_checked(e, fx, a, K::Int(bits), false, site(Access::Read))?;
                let v = o(e, Op::UConvert, u32t, &[v])?;
                let sh = e.c_u32(bits * i);
                let v = o(e, Op::ShiftLeftLogical, u32t, &[v, sh])?;
                packed = o(e, Op::BitwiseOr, u32t, &[packed, v])?;
            } else if let Some(w) = whole {
                let x = mma::field(e, w, bits * i, bits, false)?;
                let it = e.t_int(bits);
                let x = o(e, Op::UConvert, it, &[x])?;
                mem::store_checked(e, fx, a, x, K::Int(bits), false, site(Access::Write))?;
            }
        }
        if is_load {
            set(e, fx, reg, packed, K::Int(32), false)?;
        }
    }
    Ok(())
}

/// `base` plus element index `idx` of `bits`-bit elements, in bytes.
fn byte_address(e: &mut Emitter, base: Addr, idx: Word, bits: u32) -> Result<Addr, Diagnostic> {
    let u32t = e.t_int(32);
    let off = if bits >= 8 {
        let b = e.c_u32(bits / 8);
        o(e, Op::IMul, u32t, &[idx, b])?
    } else {
        let d = e.c_u32(8 / bits);
        o(e, Op::UDiv, u32t, &[idx, d])?
    };
    Ok(match base {
        Addr::Shared(s) => Addr::Shared(o(e, Op::IAdd, u32t, &[s, off])?),
        Addr::Local(s) => Addr::Local(o(e, Op::IAdd, u32t, &[s, off])?),
        Addr::Global(v) | Addr::Generic(v) => {
            let u64t = e.t_int(64);
            let w = o(e, Op::UConvert, u64t, &[off])?;
            let s = o(e, Op::IAdd, u64t, &[v, w])?;
            if matches!(base, Addr::Global(_)) {
                Addr::Global(s)
            } else {
                Addr::Generic(s)
            }
        }
        Addr::Param(_) => return Err(Diagnostic::error(crate::diag::Span::default(), "wmma on kernel parameters")),
    })
}

/// `wmma.mma.sync.aligned.alayout.blayout.shape.dtype{.atype.btype}.ctype{.satfinite} d, a, b, c`.
fn wmma_mma(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    let Some(shape3) = shape(inst) else { return Err(unsupported(inst, "no shape")) };
    let types = mma::type_names(inst);
    let (dt, at, bt, ct) = match types.as_slice() {
        // f16 A and B are implicit: `.dtype.ctype`.
        [d, c] => (Acc::from_name(d), Some(Elem::F16), Some(Elem::F16), Acc::from_name(c)),
        [d, a, b, c] => (Acc::from_name(d), Elem::from_name(a), Elem::from_name(b), Acc::from_name(c)),
        _ => return Err(unsupported(inst, "types")),
    };
    let (Some(dt), Some(at), Some(bt), Some(ct)) = (dt, at, bt, ct) else {
        return Err(unsupported(inst, "types"));
    };
    let Some(l) = Layout::new(at, shape3) else { return Err(unsupported(inst, "shape and type")) };
    let [d_op, a_op, b_op, c_op] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects d, a, b, c", inst.mnemonic())));
    };
    let d = mma::fragment(inst, d_op, "D", isa_regs(&l, Role::C, at, dt))?;
    let a = mma::fragment(inst, a_op, "A", isa_regs(&l, Role::A, at, dt))?;
    let b = mma::fragment(inst, b_op, "B", isa_regs(&l, Role::B, at, dt))?;
    let c = mma::fragment(inst, c_op, "C", isa_regs(&l, Role::C, at, ct))?;
    let tile = Tile::new(inst, l.tile, at, bt, ct, dt)?;
    let (pa, pb, pc) = (l.per_tile(Role::A) as usize, l.per_tile(Role::B) as usize, l.per_tile(Role::C) as usize);
    let acc_regs = |t: Acc| if t == Acc::F16 { pc / 2 } else { pc };
    let (mt, nt) = l.tiles(Role::C);
    let kt = l.tiles(Role::A).1;
    if kt != 1 {
        return Err(unsupported(inst, "internal: more than one k tile"));
    }
    for mi in 0..mt as usize {
        for ni in 0..nt as usize {
            let t = mi * nt as usize + ni;
            let ta = mi; // A tiles (mi, 0)
            let tb = ni; // B tiles (0, ni)
            let dr = &d[t * acc_regs(dt)..(t + 1) * acc_regs(dt)];
            let cr = &c[t * acc_regs(ct)..(t + 1) * acc_regs(ct)];
            mma::mma_tile(e, fx, active, &tile, [dr, &a[ta * pa..(ta + 1) * pa], &b[tb * pb..(tb + 1) * pb], cr])?;
        }
    }
    Ok(())
}
