//! Sparse warp-level matrix products: `mma.sp` and `mma.sp::ordered_metadata`
//! (`m16n8kK`, sm_80+), on the warp primitives of [`super::warp`] like the
//! dense [`super::mma`].
//!
//! # Storage
//! A is an M×K matrix with structured sparsity, stored compressed as
//! M×K/2: each row is cut into chunks of `W` columns of which `S` are
//! stored (2:4 for 16- and 8-bit types, 1:2 for tf32, and for 4-bit types
//! two 2-wide pairs of each 8 columns). Each chunk has a 4-bit field of
//! metadata holding two 2-bit indices (bits `[1:0]` for the first stored
//! element or pair, `[3:2]` for the second). tf32 chunks are `0b0100` (the
//! element at position 0) or `0b1110` (position 1): the index of the first
//! element, halved.
//!
//! # Fragments
//! The compressed A has the dense `m16n8k(K/2)` A fragment; B, C and D
//! have the dense `m16n8kK` fragments (the ISA's "Matrix fragments for
//! sparse mma"). The metadata register `e` of one thread per quad (16-bit
//! and tf32 types with the shorter K: `4g + f`), of a pair of threads
//! (`4g + 2f + h`), or of all four threads (8-bit types with K = 64 and
//! 4-bit types with K = 128, where `f` is 0) holds the fields of rows `g`
//! and `g + 8` ([`meta_at`]); `f` is the sparsity selector.
//!
//! # Arithmetic
//! Each D element is C plus the products of the stored elements of its A
//! row with the B elements their metadata selects, in the order of the
//! compressed columns, in the arithmetic of the dense `mma` (see
//! [`super::mma::accumulate`]): the elements that are not stored take no
//! part (a zero of A times an infinite B is not a NaN). Metadata the ISA
//! leaves undefined (two equal indices) selects B rows all the same;
//! `mma.sp` and `mma.sp::ordered_metadata` differ only in which metadata
//! is defined, so they share this code.

use super::func::Fx;
use super::mma::{self, Acc, Elem, Geometry, LaneExpr, Role, Source, Tile};
use super::rounding::{cmp, o, sel, R};
use super::values::{get, K};
use super::warp::{self, Lanes};
use super::Emitter;
use crate::ast::{Instruction, Operand};
use crate::diag::{Diagnostic, Span};
use crate::fxhash::FxHashMap as HashMap;
use rspirv::spirv::{Op, Word};

fn unsupported(inst: &Instruction, why: &str) -> Diagnostic {
    let extra = if why.is_empty() { String::new() } else { format!(" ({why})") };
    Diagnostic::error(inst.opcode_span, format!("unsupported instruction '{}'{extra}", inst.mnemonic()))
}

fn internal(what: &str) -> Diagnostic {
    Diagnostic::error(Span::default(), format!("internal error: {what}"))
}

/// The sparsity pattern of an A type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sparsity {
    /// Columns of A per chunk.
    pub w: u32,
    /// Stored elements per chunk.
    pub s: u32,
}

impl Sparsity {
    pub(crate) fn of(at: Elem) -> Sparsity {
        match at {
            Elem::Tf32 => Sparsity { w: 2, s: 1 },
            Elem::S4 | Elem::U4 => Sparsity { w: 8, s: 4 },
            _ => Sparsity { w: 4, s: 2 },
        }
    }

    /// The positions in its chunk that stored element `slot` may take.
    pub(crate) fn positions(self, slot: u32) -> Vec<u32> {
        match self.w {
            2 => vec![0, 1],
            8 => (0..4).map(|i| 2 * i + (slot & 1)).collect(),
            _ => (0..4).collect(),
        }
    }

    /// The position of stored element `slot` of a chunk, from the chunk's
    /// 4-bit metadata field `nibble` (a u32 in `[0, 16)`).
    pub(crate) fn position(self, e: &mut Emitter, nibble: Word, slot: u32) -> R {
        let u32t = e.t_int(32);
        match self.w {
            2 => mma::field(e, nibble, 1, 1, false),
            8 => {
                let pair = mma::field(e, nibble, 2 * (slot >> 1), 2, false)?;
                let one = e.c_u32(1);
                let twice = o(e, Op::ShiftLeftLogical, u32t, &[pair, one])?;
                let odd = e.c_u32(slot & 1);
                o(e, Op::BitwiseOr, u32t, &[twice, odd])
            }
            _ => mma::field(e, nibble, 2 * slot, 2, false),
        }
    }
}

/// Where the metadata field of row `row` (0..16) and chunk `chunk` lives
/// for selector `f`: the lane whose `e` holds it and the field's bit offset.
///
/// With `g = row % 8` and `hi = row / 8`:
/// - 16-bit and tf32 types, 4 chunks per row (`k16`, tf32 `k8`): lane
///   `4g + f`, bits `16·hi + 4·chunk`;
/// - 8 chunks per row (`k32`, tf32 `k16`): lane `4g + 2f + chunk / 4`,
///   bits `16·hi + 4·(chunk % 4)`;
/// - 8- and 4-bit types, 8 chunks per row (`k32`, 4-bit `k64`): lane
///   `4g + 2f + hi`, bits `4·chunk`;
/// - 16 chunks per row (`k64`, 4-bit `k128`): lane `4g + hi + 2·(chunk / 8)`,
///   bits `4·(chunk % 8)`.
pub(crate) fn meta_at(at: Elem, chunks: u32, f: u32, row: u32, chunk: u32) -> (u32, u32) {
    let (g, hi) = (row % 8, row / 8);
    let wide_rows = matches!(at, Elem::F16 | Elem::Bf16 | Elem::Tf32);
    match (wide_rows, chunks) {
        (true, 4) => (4 * g + f, 16 * hi + 4 * chunk),
        (true, _) => (4 * g + 2 * f + chunk / 4, 16 * hi + 4 * (chunk % 4)),
        (false, 8) => (4 * g + 2 * f + hi, 4 * chunk),
        (false, _) => (4 * g + hi + 2 * (chunk / 8), 4 * (chunk % 8)),
    }
}

/// The largest selector `f` of a shape and A type.
pub(crate) fn max_selector(at: Elem, chunks: u32) -> u32 {
    match (matches!(at, Elem::F16 | Elem::Bf16 | Elem::Tf32), chunks) {
        (true, 4) => 3,
        (true, _) | (false, 8) => 1,
        (false, _) => 0,
    }
}

/// The selector operand: an integer constant.
fn selector(inst: &Instruction, op: &Operand, max: u32) -> Result<u32, Diagnostic> {
    match op {
        Operand::Int(_, v) if (0..=max as i128).contains(v) => Ok(*v as u32),
        Operand::Int(span, v) => Err(Diagnostic::error(
            *span,
            format!("'{}': sparsity selector {v} is out of range for this shape and type (0..={max})", inst.mnemonic()),
        )),
        other => Err(Diagnostic::error(
            other.span(),
            format!("'{}': the sparsity selector must be an integer constant", inst.mnemonic()),
        )),
    }
}

/// `mma.sp{::ordered_metadata}.sync.aligned.m16n8kK.row.col{.satfinite}.dtype.atype.btype.ctype d, a, b, c, e, f`.
pub(crate) fn mma_sp(e: &mut Emitter, fx: &mut Fx, inst: &Instruction, active: Word) -> Result<(), Diagnostic> {
    if inst.modifiers.iter().any(|m| m.as_str().starts_with("kind::")) {
        return Err(unsupported(inst, "sm_100+ kinds are not supported"));
    }
    let Some((m, n, k)) = mma::shape(inst) else { return Err(unsupported(inst, "no shape")) };
    let (dt, at, bt, ct) = mma::dabc_types(inst)?;
    let ks: &[u32] = match at {
        Elem::F16 | Elem::Bf16 => &[16, 32],
        Elem::Tf32 => &[8, 16],
        Elem::S8 | Elem::U8 => &[32, 64],
        Elem::S4 | Elem::U4 => &[64, 128],
        Elem::E4m3 | Elem::E5m2 => &[64],
        Elem::F64 | Elem::B1 => return Err(unsupported(inst, "no sparse form for this type")),
    };
    let valid_acc = match at {
        Elem::F16 => dt == ct && matches!(dt, Acc::F16 | Acc::F32),
        Elem::Bf16 | Elem::Tf32 | Elem::E4m3 | Elem::E5m2 => dt == Acc::F32 && ct == Acc::F32,
        _ => dt == Acc::S32 && ct == Acc::S32,
    };
    let same_family = at.is_int() == bt.is_int()
        && at.bits() == bt.bits()
        && (at == bt || matches!(at, Elem::S8 | Elem::U8 | Elem::S4 | Elem::U4 | Elem::E4m3 | Elem::E5m2));
    if m != 16 || n != 8 || !ks.contains(&k) || !valid_acc || !same_family {
        return Err(unsupported(inst, "bad shape or type combination"));
    }
    if inst.has("satfinite") && !at.is_int() {
        return Err(unsupported(inst, ".satfinite is for integer types"));
    }
    let sp = Sparsity::of(at);
    let chunks = k / sp.w;
    let [d_op, a_op, b_op, c_op, e_op, f_op] = inst.operands.as_slice() else {
        return Err(Diagnostic::error(inst.span, format!("'{}' expects d, a, b, c, e, f", inst.mnemonic())));
    };
    let f = selector(inst, f_op, max_selector(at, chunks))?;
    let per = at.per_reg();
    let geo_a = Geometry::standard(16, 8, k / 2, per);
    let geo_b = Geometry::standard(16, 8, k, per);
    let tile = Tile::new(inst, geo_b, at, bt, ct, dt)?;
    let nd = geo_b.count_role(Role::C);
    let acc_regs = |t: Acc| if t == Acc::F16 { nd / 2 } else { nd };
    let d_regs = mma::fragment(inst, d_op, "D", acc_regs(dt))?;
    let a_regs = mma::fragment(inst, a_op, "A", geo_a.count_role(Role::A))?;
    let b_regs = mma::fragment(inst, b_op, "B", geo_b.count_role(Role::B))?;
    let c_regs = mma::fragment(inst, c_op, "C", acc_regs(ct))?;

    // Host side: for every D element and compressed column, where the A
    // element, its metadata field and each B element it may select live.
    // Once per (type, shape, selector) in a module.
    let key = (at, k, f);
    let plan = match e.mma_sp_plans.get(&key) {
        Some(p) => p.clone(),
        None => {
            let p = std::rc::Rc::new(plan_sparse(at, k, f)?);
            e.mma_sp_plans.insert(key, p.clone());
            p
        }
    };

    // Device side: share A, B and the metadata in one exchange.
    let mut lc = mma::lane_ctx(e, fx)?;
    let mut values = Vec::new();
    for op in a_regs.iter().chain(&b_regs) {
        values.push(get(e, fx, op, K::Int(32), false)?);
    }
    values.push(get(e, fx, e_op, K::Int(32), false)?);
    let lanes = warp::share_many(e, fx, &values)?;
    let (a_lanes, rest) = lanes.split_at(a_regs.len());
    let (b_lanes, meta_lanes) = rest.split_at(b_regs.len());
    let shared = Shared { a: a_lanes, b: b_lanes, meta: meta_lanes[0] };

    let c_vals = mma::read_c(e, fx, ct, &c_regs, nd)?;
    let mut cache = Cache::default();
    let mut d_vals = Vec::new();
    for (j, terms) in plan.iter().enumerate() {
        let mut acc = mma::start_acc(e, &tile, c_vals[j])?;
        for t in terms {
            let a = a_value(e, fx, &mut lc, &shared, &mut cache, at, t.a)?;
            let b = b_value(e, fx, &mut lc, &shared, &mut cache, bt, sp, t)?;
            acc = mma::accumulate(e, &tile, acc, a, b)?;
        }
        d_vals.push(mma::finish_acc(e, &tile, acc)?);
    }
    mma::write_d(e, fx, active, dt, &d_regs, &d_vals)
}

/// The products of every D element of an `mma.sp` of element type `at`, K
/// `k` and sparsity selector `f` (see [`Term`]).
fn plan_sparse(at: Elem, k: u32, f: u32) -> Result<Vec<Vec<Term>>, Diagnostic> {
    let sp = Sparsity::of(at);
    let chunks = k / sp.w;
    let per = at.per_reg();
    let geo_a = Geometry::standard(16, 8, k / 2, per);
    let geo_b = Geometry::standard(16, 8, k, per);
    let nd = geo_b.count_role(Role::C);
    let a_own = geo_a.owners(Role::A);
    let b_own = geo_b.owners(Role::B);
    let mut plan: Vec<Vec<Term>> = Vec::new();
    for j in 0..nd {
        let row = |l: u32| geo_b.coord_role(Role::C, l, j, 0).0;
        let col = |l: u32| geo_b.coord_role(Role::C, l, j, 0).1;
        let mut terms = Vec::new();
        for kc in 0..k / 2 {
            let (chunk, slot) = (kc / sp.s, kc % sp.s);
            let a = mma::locate(&a_own, |l| (row(l), kc))?;
            let meta_lane = LaneExpr::fit(|l| meta_at(at, chunks, f, row(l), chunk).0)
                .ok_or_else(|| internal("mma.sp metadata lane is not linear in the lane"))?;
            let meta_bit = LaneExpr::fit(|l| meta_at(at, chunks, f, row(l), chunk).1)
                .ok_or_else(|| internal("mma.sp metadata offset is not linear in the lane"))?;
            let mut b = Vec::new();
            for p in sp.positions(slot) {
                b.push((p, mma::locate(&b_own, |l| (sp.w * chunk + p, col(l)))?));
            }
            terms.push(Term { a, meta_lane, meta_bit, slot, b });
        }
        plan.push(terms);
    }
    Ok(plan)
}

/// One product of a D element: the A element, its metadata field, and the
/// B element of each position the metadata may give.
pub(crate) struct Term {
    a: Source,
    meta_lane: LaneExpr,
    meta_bit: LaneExpr,
    slot: u32,
    b: Vec<(u32, Source)>,
}

/// The shared registers of A, B and the metadata.
struct Shared<'l> {
    a: &'l [Lanes],
    b: &'l [Lanes],
    meta: Lanes,
}

/// Values already computed in this instruction.
#[derive(Default)]
struct Cache {
    a: HashMap<Source, Word>,
    nibble: HashMap<(LaneExpr, LaneExpr, u32), Word>,
    b: HashMap<Vec<(u32, Source)>, HashMap<Word, Word>>,
}

/// Element `s` of the compressed A.
fn a_value(e: &mut Emitter, fx: &Fx, lc: &mut mma::LaneCtx, sh: &Shared, c: &mut Cache, at: Elem, s: Source) -> R {
    if let Some(&v) = c.a.get(&s) {
        return Ok(v);
    }
    let (lane, reg, elem) = s.parts();
    let (Some(reg), Some(elem)) = (reg.constant(), elem.constant()) else {
        return Err(internal("mma.sp A element depends on the lane"));
    };
    let lw = lc.expr(e, lane)?;
    let lanes = *sh.a.get(reg as usize).ok_or_else(|| internal("mma.sp A register"))?;
    let w = warp::read(e, fx, lanes, lw)?;
    let v = mma::decode(e, at, w, elem)?;
    c.a.insert(s, v);
    Ok(v)
}

/// The B element that stored element `t` multiplies: the one at the
/// position its metadata gives, read from a lane computed at run time.
#[allow(clippy::too_many_arguments)]
fn b_value(
    e: &mut Emitter,
    fx: &Fx,
    lc: &mut mma::LaneCtx,
    sh: &Shared,
    c: &mut Cache,
    bt: Elem,
    sp: Sparsity,
    t: &Term,
) -> R {
    let u32t = e.t_int(32);
    let key = (t.meta_lane, t.meta_bit, t.slot);
    let pos = match c.nibble.get(&key) {
        Some(&p) => p,
        None => {
            let ml = lc.expr(e, t.meta_lane)?;
            let word = warp::read(e, fx, sh.meta, ml)?;
            let bit = lc.expr(e, t.meta_bit)?;
            let shifted = o(e, Op::ShiftRightLogical, u32t, &[word, bit])?;
            let fifteen = e.c_u32(15);
            let nibble = o(e, Op::BitwiseAnd, u32t, &[shifted, fifteen])?;
            let p = sp.position(e, nibble, t.slot)?;
            c.nibble.insert(key, p);
            p
        }
    };
    if let Some(&v) = c.b.get(&t.b).and_then(|m| m.get(&pos)) {
        return Ok(v);
    }
    // The lane, register and element of each candidate, chosen by `pos`.
    let mut lane = None;
    let mut elem = None;
    let mut reg: Option<Word> = None;
    let regs: Vec<u32> =
        t.b.iter()
            .map(|(_, s)| s.parts().1.constant())
            .collect::<Option<_>>()
            .ok_or_else(|| internal("mma.sp B register depends on the lane"))?;
    let one_reg = regs.iter().all(|&r| r == regs[0]);
    for (i, (p, s)) in t.b.iter().enumerate() {
        let (sl, _, se) = s.parts();
        let lw = lc.expr(e, sl)?;
        let ew = lc.expr(e, se)?;
        let rw = e.c_u32(regs[i]);
        let (l, el, r) = match (lane, elem, reg) {
            (Some(l), Some(el), Some(r)) => {
                let pc = e.c_u32(*p);
                let is = cmp(e, Op::IEqual, pos, pc)?;
                (sel(e, u32t, is, lw, l)?, sel(e, u32t, is, ew, el)?, sel(e, u32t, is, rw, r)?)
            }
            _ => (lw, ew, rw),
        };
        lane = Some(l);
        elem = Some(el);
        reg = Some(r);
    }
    let (Some(lane), Some(elem), Some(reg)) = (lane, elem, reg) else {
        return Err(internal("mma.sp without candidates"));
    };
    let word = if one_reg {
        let lanes = *sh.b.get(regs[0] as usize).ok_or_else(|| internal("mma.sp B register"))?;
        warp::read(e, fx, lanes, lane)?
    } else {
        let mut distinct: Vec<u32> = regs.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let mut w = None;
        for r in distinct {
            let lanes = *sh.b.get(r as usize).ok_or_else(|| internal("mma.sp B register"))?;
            let x = warp::read(e, fx, lanes, lane)?;
            w = Some(match w {
                None => x,
                Some(prev) => {
                    let rc = e.c_u32(r);
                    let is = cmp(e, Op::IEqual, reg, rc)?;
                    sel(e, u32t, is, x, prev)?
                }
            });
        }
        w.ok_or_else(|| internal("mma.sp B word"))?
    };
    // Shift the selected element down to element 0.
    let bits = e.c_u32(bt.bits());
    let sh_amt = o(e, Op::IMul, u32t, &[elem, bits])?;
    let x = o(e, Op::ShiftRightLogical, u32t, &[word, sh_amt])?;
    let v = mma::decode(e, bt, x, 0)?;
    c.b.entry(t.b.clone()).or_default().insert(pos, v);
    Ok(v)
}
