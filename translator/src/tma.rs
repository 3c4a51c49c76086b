//! Pass: Hopper asynchronous copies → calls of the emulated copy engine.
//!
//! `mbarrier.*`, `cp.async.bulk*` (bulk and tensor copies, their groups and
//! prefetches), `cp.reduce.async.bulk*` and `cp.async.mbarrier.arrive` are
//! rewritten, in the AST, into calls of the PTX functions in
//! `shaders/tma.ptx` (the "copy engine"), which this pass appends to the
//! module when any of them is used. The rest of the translator then compiles
//! them like any other `.func`. The rewriting keeps the instruction's guard
//! and span on every statement it produces; address operands with an offset
//! and results that need a conversion go through fresh registers named
//! `%__ptxvk_tma<N>`.
//!
//! Semantics (see `shaders/tma.ptx` for the details):
//! - A copy is performed by the issuing thread when it is issued, and its
//!   bytes are completed on the mbarrier at once (a valid schedule of an
//!   asynchronous copy). `cp.async.bulk.commit_group`, `wait_group` and
//!   `wait_group.read` therefore have nothing to wait for and disappear, as
//!   do the prefetches.
//! - Clusters have one CTA: `.shared::cluster` addresses are this CTA's
//!   `.shared` addresses, `.multicast::cluster` copies to this CTA only, and
//!   `.cta_group` is ignored.
//! - `fence.proxy.async`, `fence.proxy.tensormap::generic` and
//!   `fence.mbarrier_init` disappear: the copy engine uses the generic proxy
//!   and mbarriers are ordinary atomics, so they order nothing that program
//!   order does not, and as memory barriers they would be scheduling points
//!   on lavapipe (fatal in the divergent code where they usually sit).
//! - `mbarrier.try_wait` does not suspend: it is `test_wait` (a valid
//!   implementation, since `try_wait` may time out at any moment). A thread
//!   that spins on an mbarrier waits for other threads of its CTA to arrive;
//!   on devices that run a workgroup's subgroups one after another between
//!   barriers (lavapipe) that works only when the arriving threads run
//!   first, as in the usual pattern where one thread arrives with
//!   `expect_tx` and issues the copy before anyone waits. Otherwise lavapipe
//!   does not hang: its loop limiter ends the spin after 65535 polls and the
//!   thread goes on too early (measurements in `shaders/README.md`).
//! - Tensor copy modes: `.tile`, `.tile::gather4`/`.tile::scatter4`,
//!   `.im2col`/`.im2col_no_offs` and the loads `.im2col::w` and
//!   `.im2col::w::128` (whose im2col operand is `{wHalo, wOffset}`).
//! - `cp.reduce.async.bulk` has a global destination or, with cluster size
//!   1, a `.shared::cluster` one (this CTA's shared memory).

use crate::ast::*;
use crate::diag::{Diagnostic, Span};

/// The copy engine's source.
pub const LIBRARY: &str = include_str!("../../shaders/tma.ptx");

/// Prefix of every function of the copy engine and of the registers this pass creates.
const PREFIX: &str = "__ptxvk_";

/// Rewrite the module's asynchronous-copy instructions; append the copy
/// engine when one was rewritten.
pub fn run(module: &mut Module) -> Result<(), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let mut used = false;
    for item in &mut module.items {
        let ModuleItem::Function(f) = item else { continue };
        let Some(body) = f.body.take() else { continue };
        let mut rw = Rewriter { next: 0, decls: Vec::new(), used: false, errors: Vec::new() };
        let mut body = rw.block(body);
        if rw.used {
            used = true;
            let mut all: Vec<Statement> = rw.decls.into_iter().map(Statement::Decl).collect();
            all.append(&mut body);
            body = all;
        }
        errors.append(&mut rw.errors);
        f.body = Some(body);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if used {
        append_library(module, LIBRARY, "shaders/tma.ptx", "the emulated copy engine")?;
    }
    Ok(())
}

/// Append the functions of the PTX library `source` (`file`, naming
/// `what` in diagnostics) to `module`; shared with [`crate::tex`].
pub(crate) fn append_library(module: &mut Module, source: &str, file: &str, what: &str) -> Result<(), Vec<Diagnostic>> {
    let lib = crate::parse::run(source).map_err(|d| {
        d.into_iter()
            .map(|d| Diagnostic::error(Span::default(), format!("internal error in {file}: {}", d.message)))
            .collect::<Vec<_>>()
    })?;
    for item in lib.items {
        if let ModuleItem::Function(f) = item {
            let clash = module.items.iter().any(|i| matches!(i, ModuleItem::Function(g) if g.name == f.name));
            if clash {
                return Err(vec![Diagnostic::error(
                    Span::default(),
                    format!("the module defines '{}', a name reserved for {what}", f.name),
                )]);
            }
            module.items.push(ModuleItem::Function(f));
        }
    }
    Ok(())
}

/// Whether an instruction belongs to this pass.
fn handled(i: &Instruction) -> bool {
    let m = |k: usize| i.modifiers.get(k).map(|s| s.as_str());
    match i.opcode.as_str() {
        "mbarrier" => true,
        "cp" => m(0) == Some("async") && matches!(m(1), Some("bulk") | Some("mbarrier")),
        // fence.proxy.async*, fence.proxy.tensormap::generic*, fence.mbarrier_init*.
        "fence" => matches!(m(0), Some("proxy") | Some("mbarrier_init")),
        _ => false,
    }
}

/// Per-function rewriting state.
struct Rewriter {
    next: u32,
    decls: Vec<VarDecl>,
    used: bool,
    errors: Vec<Diagnostic>,
}

/// Statements produced for one instruction (shared with [`crate::tex`]).
pub(crate) struct Out<'a> {
    pub(crate) orig: &'a Instruction,
    pub(crate) stmts: Vec<Statement>,
}

impl Out<'_> {
    /// Emit `opcode.mods operands` with the original guard and span.
    pub(crate) fn inst(&mut self, opcode: &str, mods: &[&str], operands: Vec<Operand>) {
        let guard = self.orig.guard.clone();
        self.inst_guarded(guard, opcode, mods, operands);
    }

    /// Emit `opcode.mods operands` with guard `guard`.
    pub(crate) fn inst_guarded(&mut self, guard: Option<Guard>, opcode: &str, mods: &[&str], operands: Vec<Operand>) {
        self.stmts.push(Statement::Inst(Instruction {
            span: self.orig.span,
            guard,
            opcode_span: self.orig.opcode_span,
            opcode: opcode.into(),
            modifiers: mods.iter().map(|s| Str::new(s)).collect(),
            operands: operands.into(),
            // Made after the check: not decoded.
            decoded: None,
        }));
    }

    /// `call (rets), name, (args)`.
    pub(crate) fn call(&mut self, rets: Vec<Operand>, name: &str, args: Vec<Operand>) {
        let span = self.orig.span;
        let mut ops = Vec::new();
        if !rets.is_empty() {
            ops.push(Operand::List(span, rets));
        }
        ops.push(Operand::Name { span, name: format!("{PREFIX}{name}").into(), component: None });
        ops.push(Operand::List(span, args));
        self.inst("call", &[], ops);
    }
}

pub(crate) fn int(span: Span, v: i128) -> Operand {
    Operand::Int(span, v)
}

impl Rewriter {
    fn block(&mut self, stmts: Vec<Statement>) -> Vec<Statement> {
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            match s {
                Statement::Block(b) => out.push(Statement::Block(self.block(b))),
                Statement::Inst(i) if handled(&i) || is_reduce(&i) => match self.rewrite(&i) {
                    Ok(stmts) => {
                        self.used |= !stmts.is_empty();
                        out.extend(stmts);
                    }
                    Err(d) => {
                        self.errors.push(d);
                        out.push(Statement::Inst(i));
                    }
                },
                other => out.push(other),
            }
        }
        out
    }

    /// A fresh register of type `ty`.
    fn temp(&mut self, span: Span, ty: ScalarType) -> Operand {
        let name = format!("%{PREFIX}tma{}", self.next);
        self.next += 1;
        self.decls.push(VarDecl::registers(span, ty, &[name.as_str()]));
        Operand::Name { span, name: name.into(), component: None }
    }

    /// The value of address operand `a` as an integer of `ty` (u32 for
    /// shared addresses, u64 for global ones).
    fn addr(&mut self, out: &mut Out, op: &Operand, ty: ScalarType) -> Result<Operand, Diagnostic> {
        let (span, a) = match op {
            Operand::Address(s, a) => (*s, a),
            Operand::TensorAddress(s, a, _) => (*s, &**a),
            other => return Err(Diagnostic::error(other.span(), "expected an address operand [...]")),
        };
        let Some((bspan, base)) = &a.base else {
            return Ok(int(span, a.offset as i128));
        };
        let base = Operand::Name { span: *bspan, name: base.clone(), component: None };
        if a.offset == 0 {
            return Ok(base);
        }
        let t = self.temp(span, ty);
        let name = if ty == ScalarType::U64 { "u64" } else { "u32" };
        out.inst("add", &[name], vec![t.clone(), base, int(span, a.offset as i128)]);
        Ok(t)
    }

    fn rewrite(&mut self, i: &Instruction) -> Result<Vec<Statement>, Diagnostic> {
        let mut out = Out { orig: i, stmts: Vec::new() };
        match i.opcode.as_str() {
            // The copy engine accesses memory through the generic proxy and
            // mbarriers are ordinary atomics, so the proxy fences and the
            // mbarrier-initialisation fence order nothing more than program
            // order already does (a cluster is one CTA). They are dropped:
            // emitted as memory barriers they would be scheduling points on
            // lavapipe, fatal in the divergent code where they usually sit.
            "fence" => {}
            "mbarrier" => self.mbarrier(&mut out)?,
            "cp" if i.modifiers.get(1).map(|s| s.as_str()) == Some("mbarrier") => {
                // cp.async.mbarrier.arrive{.noinc}: the cp.async copies are
                // already complete, so the arrive happens now; without .noinc
                // the pending count is first raised by one, which cancels it.
                if !i.has("arrive") {
                    return Err(unsupported(i, "unknown cp.async.mbarrier form"));
                }
                let a = self.addr(&mut out, operand(i, 0)?, ScalarType::U32)?;
                if i.has("noinc") {
                    let s = i.span;
                    out.call(
                        vec![Operand::Sink(s)],
                        "mbar_update",
                        vec![a, int(s, 1), int(s, 0), int(s, 0), int(s, 0), int(s, 0)],
                    );
                }
            }
            _ if is_reduce(i) => self.bulk(&mut out, true)?,
            _ => self.bulk(&mut out, false)?,
        }
        // Nothing at all when the instruction has nothing left to do.
        Ok(out.stmts)
    }

    fn mbarrier(&mut self, out: &mut Out) -> Result<(), Diagnostic> {
        let i = out.orig;
        let s = i.span;
        let kind = i.modifiers.first().map(|s| s.as_str()).unwrap_or("");
        let nocomplete = int(s, i.has("noComplete") as i128);
        match kind {
            "init" => {
                let a = self.addr(out, operand(i, 0)?, ScalarType::U32)?;
                let count = operand(i, 1)?.clone();
                out.call(vec![], "mbar_init", vec![a, count]);
            }
            "inval" => {
                let a = self.addr(out, operand(i, 0)?, ScalarType::U32)?;
                out.call(vec![], "mbar_inval", vec![a]);
            }
            "arrive" | "arrive_drop" => {
                let state = operand(i, 0)?.clone();
                let a = self.addr(out, operand(i, 1)?, ScalarType::U32)?;
                let (count, tx) = if i.has("expect_tx") {
                    (int(s, 1), operand(i, 2)?.clone())
                } else {
                    (i.operands.get(2).cloned().unwrap_or(int(s, 1)), int(s, 0))
                };
                let drop = if kind == "arrive_drop" { count.clone() } else { int(s, 0) };
                out.call(vec![state], "mbar_update", vec![a, count, tx, int(s, 0), drop, nocomplete]);
            }
            "expect_tx" | "complete_tx" => {
                let a = self.addr(out, operand(i, 0)?, ScalarType::U32)?;
                let tx = operand(i, 1)?.clone();
                let (add, sub) = if kind == "expect_tx" { (tx, int(s, 0)) } else { (int(s, 0), tx) };
                out.call(vec![Operand::Sink(s)], "mbar_update", vec![a, int(s, 0), add, sub, int(s, 0), int(s, 0)]);
            }
            "test_wait" | "try_wait" => {
                let done = operand(i, 0)?.clone();
                let a = self.addr(out, operand(i, 1)?, ScalarType::U32)?;
                let x = operand(i, 2)?.clone();
                let t = self.temp(s, ScalarType::U32);
                let f = if i.has("parity") { "mbar_test_parity" } else { "mbar_test_state" };
                out.call(vec![t.clone()], f, vec![a, x]);
                out.inst("setp", &["ne", "u32"], vec![done, t, int(s, 0)]);
            }
            "pending_count" => {
                let count = operand(i, 0)?.clone();
                let state = operand(i, 1)?.clone();
                out.call(vec![count], "mbar_pending_count", vec![state]);
            }
            _ => return Err(unsupported(i, "unknown mbarrier operation")),
        }
        Ok(())
    }

    /// `cp.async.bulk...` and `cp.reduce.async.bulk...`.
    fn bulk(&mut self, out: &mut Out, reduce: bool) -> Result<(), Diagnostic> {
        let i = out.orig;
        let s = i.span;
        let m: Vec<&str> = i.modifiers.iter().map(|s| s.as_str()).collect();
        // cp.async.bulk.X / cp.reduce.async.bulk.X: the modifiers after "bulk".
        let Some(pos) = m.iter().position(|x| *x == "bulk") else {
            return Err(unsupported(i, "unknown form"));
        };
        let rest = &m[pos + 1..];
        match rest.first().copied() {
            Some("commit_group") | Some("wait_group") | Some("prefetch") => return Ok(()),
            _ => {}
        }
        let tensor = rest.first() == Some(&"tensor");
        let global_at = rest.iter().position(|x| *x == "global");
        let shared_at = rest.iter().position(|x| x.starts_with("shared"));
        let op = reduce_op(i)?;
        if tensor {
            let mode = if i.has("tile::gather4") || i.has("tile::scatter4") {
                1
            } else if i.has("im2col::w::128") {
                4
            } else if i.has("im2col::w") {
                3
            } else if i.has("im2col") || i.has("im2col_no_offs") {
                2
            } else if rest.iter().any(|x| x.starts_with("im2col") || x.starts_with("tile::")) {
                return Err(unsupported(i, "this tensor copy mode is not supported"));
            } else {
                0
            };
            let load = matches!((shared_at, global_at), (Some(a), Some(b)) if a < b);
            if load {
                // [dst], [map, {coords}], [mbar] {, {im2col offsets}} {, ctaMask} {, policy}
                let dst = self.addr(out, operand(i, 0)?, ScalarType::U32)?;
                let (map, coords) = self.tensor(out, operand(i, 1)?)?;
                let mbar = self.addr(out, operand(i, 2)?, ScalarType::U32)?;
                // .im2col: the im2col offsets; .im2col::w{::128}: {wHalo, wOffset}.
                let mut offs = vec![int(s, 0), int(s, 0), int(s, 0)];
                if mode >= 2 {
                    if let Some(Operand::Vector(_, v)) = i.operands.get(3) {
                        for (k, o) in v.iter().take(3).enumerate() {
                            offs[k] = o.clone();
                        }
                    }
                }
                let mut args = vec![dst, map, mbar, int(s, mode)];
                args.extend(coords);
                args.extend(offs);
                out.call(vec![], "tma_load", args);
            } else {
                if mode >= 3 {
                    return Err(unsupported(i, "im2col::w stores are not supported"));
                }
                // [map, {coords}], [src] {, policy}
                let (map, coords) = self.tensor(out, operand(i, 0)?)?;
                let src = self.addr(out, operand(i, 1)?, ScalarType::U32)?;
                let mut args = vec![src, map, int(s, op), int(s, mode)];
                args.extend(coords);
                out.call(vec![], "tma_store", args);
            }
            return Ok(());
        }
        // Non-tensor bulk copies: [dst], [src], size {, [mbar]} {, ...}
        let size = operand(i, 2)?.clone();
        match (shared_at, global_at) {
            (Some(a), Some(b)) if a < b => {
                if reduce {
                    return Err(unsupported(i, "reductions into shared memory are not supported"));
                }
                let dst = self.addr(out, operand(i, 0)?, ScalarType::U32)?;
                let src = self.addr(out, operand(i, 1)?, ScalarType::U64)?;
                let mbar = self.addr(out, operand(i, 3)?, ScalarType::U32)?;
                out.call(vec![], "bulk_g2s", vec![dst, src, size, mbar]);
            }
            (Some(_), Some(_)) => {
                let dst = self.addr(out, operand(i, 0)?, ScalarType::U64)?;
                let src = self.addr(out, operand(i, 1)?, ScalarType::U32)?;
                let (esize, dtype) = if reduce { reduce_type(i)? } else { (8, 4) };
                out.call(vec![], "bulk_s2g", vec![dst, src, size, int(s, op), int(s, esize), int(s, dtype)]);
            }
            (Some(_), None) if rest.iter().filter(|x| x.starts_with("shared")).count() == 2 => {
                let dst = self.addr(out, operand(i, 0)?, ScalarType::U32)?;
                let src = self.addr(out, operand(i, 1)?, ScalarType::U32)?;
                let mbar = self.addr(out, operand(i, 3)?, ScalarType::U32)?;
                if reduce {
                    // .shared::cluster destination (this CTA in a one-CTA cluster).
                    let (esize, dtype) = reduce_type(i)?;
                    if esize < 4 || matches!(dtype, 5 | 7 | 8) || (esize == 8 && op != 1) {
                        return Err(unsupported(i, "no such reduction into shared memory"));
                    }
                    out.call(
                        vec![],
                        "bulk_s2s_reduce",
                        vec![dst, src, size, int(s, op), int(s, esize), int(s, dtype), mbar],
                    );
                    return Ok(());
                }
                out.call(vec![], "bulk_s2s", vec![dst, src, size, mbar]);
            }
            _ => return Err(unsupported(i, "unknown source and destination state spaces")),
        }
        Ok(())
    }

    /// The tensor map address (u64) and five coordinates of `[map, {c...}]`.
    fn tensor(&mut self, out: &mut Out, op: &Operand) -> Result<(Operand, Vec<Operand>), Diagnostic> {
        let Operand::TensorAddress(span, _, coords) = op else {
            return Err(Diagnostic::error(op.span(), "expected a tensor operand [tensorMap, {coordinates}]"));
        };
        if coords.is_empty() || coords.len() > 5 {
            return Err(Diagnostic::error(*span, "a tensor operand has 1 to 5 coordinates"));
        }
        let map = self.addr(out, op, ScalarType::U64)?;
        let mut c: Vec<Operand> = coords.clone();
        c.resize(5, int(*span, 0));
        Ok((map, c))
    }
}

fn is_reduce(i: &Instruction) -> bool {
    i.opcode == "cp" && i.modifiers.first().map(|s| s.as_str()) == Some("reduce")
}

/// The reduction operation code of `cp.reduce...` (0 for a plain copy).
fn reduce_op(i: &Instruction) -> Result<i128, Diagnostic> {
    if !is_reduce(i) {
        return Ok(0);
    }
    let ops = ["add", "min", "max", "inc", "dec", "and", "or", "xor"];
    ops.iter()
        .position(|o| i.has(o))
        .map(|p| p as i128 + 1)
        .ok_or_else(|| unsupported(i, "missing reduction operation"))
}

/// Element size and `CUtensorMapDataType` code of a non-tensor reduction's type.
fn reduce_type(i: &Instruction) -> Result<(i128, i128), Diagnostic> {
    let t = i.modifiers.iter().rev().find_map(|m| ScalarType::from_name(m));
    Ok(match t {
        Some(ScalarType::U32 | ScalarType::B32) => (4, 2),
        Some(ScalarType::S32) => (4, 3),
        Some(ScalarType::U64 | ScalarType::B64) => (8, 4),
        Some(ScalarType::S64) => (8, 5),
        Some(ScalarType::F32) => (4, 7),
        Some(ScalarType::F64) => (8, 8),
        Some(ScalarType::F16) => (2, 6),
        Some(ScalarType::Bf16) => (2, 9),
        _ => return Err(unsupported(i, "reductions of this type are not supported")),
    })
}

pub(crate) fn operand(i: &Instruction, k: usize) -> Result<&Operand, Diagnostic> {
    i.operands
        .get(k)
        .ok_or_else(|| Diagnostic::error(i.span, format!("'{}' needs at least {} operands", i.mnemonic(), k + 1)))
}

fn unsupported(i: &Instruction, why: &str) -> Diagnostic {
    Diagnostic::error(i.opcode_span, format!("unsupported instruction '{}' ({why})", i.mnemonic()))
}
