//! Pass: texture and surface instructions → calls of the sampling engine.
//!
//! `tex`, `tld4`, `txq`, `suld.b`, `sust.b`, `sured.b`, `suq` and `istypep`
//! are rewritten, in the AST, into calls of the PTX functions in
//! `shaders/tex.ptx` (the "sampling engine") and plain global loads, stores
//! and reductions; the engine is appended to the module when any of them is
//! used. See `docs/textures.md` for the semantics and
//! [`crate::abi::texture`] for the record a handle points to.
//!
//! Handles: a texture or surface operand is a 64-bit register holding a
//! `CUtexObject`/`CUsurfObject` (the address of its record), a kernel
//! parameter declared `.texref`/`.surfref` (the same, passed by value), or a
//! module variable declared `.texref`/`.surfref` (the legacy references of
//! `cuModuleGetTexRef`), which holds the address of its record: the pass
//! loads it. In independent mode (`[t, s, {c}]`), `s` is a module
//! `.samplerref` whose attributes (its initializer) override the texture's
//! address modes, filter and normalization; `txq` of a sampler is a
//! constant. `suld.p` is refused with a diagnostic.
//!
//! The rewriting keeps the instruction's guard and span on every statement
//! it produces; fresh registers are named `%__ptxvk_tex<N>`.

use crate::ast::*;
use crate::diag::{Diagnostic, Span};
use crate::fxhash::{FxHashMap, FxHashSet};
use crate::tma::{int, operand, Out};

/// The sampling engine's source.
pub const LIBRARY: &str = include_str!("../../shaders/tex.ptx");

/// Prefix of every function of the engine and of the registers this pass creates.
const PREFIX: &str = "__ptxvk_";

/// Rewrite the module's texture and surface instructions; append the engine
/// when one was rewritten.
pub fn run(module: &mut Module) -> Result<(), Vec<Diagnostic>> {
    // Module variables that are texture or surface references, and the
    // samplers of independent mode with their attributes (taken off the
    // declarations: the variables themselves hold no sampler state).
    let mut refs = FxHashSet::default();
    let mut samplers = FxHashMap::default();
    let mut errors = Vec::new();
    for item in &mut module.items {
        if let ModuleItem::Variable(v) = item {
            if is_ref_decl(v) {
                refs.extend(v.names.iter().map(|n| n.name.clone()));
                let init = v.init.take();
                if v.other_attrs.iter().any(|a| a == "samplerref") {
                    match sampler_word(init.as_ref()) {
                        Ok(w) => samplers.extend(v.names.iter().map(|n| (n.name.clone(), w))),
                        Err(d) => errors.push(d),
                    }
                }
            }
        }
    }
    let mut used = false;
    for item in &mut module.items {
        let ModuleItem::Function(f) = item else { continue };
        let Some(body) = f.body.take() else { continue };
        let params: FxHashSet<String> =
            f.params.iter().filter(|p| is_ref_decl(p)).flat_map(|p| p.names.iter().map(|n| n.name.clone())).collect();
        let mut rw = Rewriter {
            next: 0,
            decls: Vec::new(),
            used: false,
            errors: Vec::new(),
            refs: &refs,
            samplers: &samplers,
            params,
        };
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
        crate::tma::append_library(module, LIBRARY, "shaders/tex.ptx", "the texture sampling engine")?;
    }
    Ok(())
}

/// The sampler override word the engine takes (`__ptxvk_tex`'s `%sampler`)
/// for a `.samplerref`'s attributes: bit 31 set, address modes in bits 0-5,
/// the filter mode in bit 8, `force_unnormalized_coords` in bit 20.
/// Unnamed attributes: clamp to edge, nearest, the texture's normalization.
fn sampler_word(init: Option<&Initializer>) -> Result<u32, Diagnostic> {
    let mut w = 1u32 << 31 | 1 | 1 << 2 | 1 << 4;
    let Some(init) = init else { return Ok(w) };
    let Initializer::Fields(span, fields) = init else {
        return Err(Diagnostic::error(init_span(init), "a .samplerref takes { attribute = value, ... }"));
    };
    for (name, value) in fields {
        let bad = || Diagnostic::error(*span, format!("unknown sampler attribute value '{name} = {value}'"));
        match name.as_str() {
            "addr_mode_0" | "addr_mode_1" | "addr_mode_2" => {
                let k = (name.as_bytes()[10] - b'0') as u32 * 2;
                // clamp_ogl (OpenGL's clamp) is taken as clamp to edge.
                let m = match value.as_str() {
                    "wrap" => 0,
                    "clamp_to_edge" | "clamp_ogl" => 1,
                    "mirror" => 2,
                    "clamp_to_border" => 3,
                    _ => return Err(bad()),
                };
                w = (w & !(3 << k)) | m << k;
            }
            "filter_mode" => match value.as_str() {
                "nearest" => w &= !(1 << 8),
                "linear" => w |= 1 << 8,
                _ => return Err(bad()),
            },
            "force_unnormalized_coords" => match value.as_str() {
                "0" => w &= !(1 << 20),
                "1" => w |= 1 << 20,
                _ => return Err(bad()),
            },
            _ => return Err(Diagnostic::error(*span, format!("unknown sampler attribute '{name}'"))),
        }
    }
    Ok(w)
}

fn init_span(i: &Initializer) -> Span {
    match i {
        Initializer::List(s, _) | Initializer::Expr(s, _) | Initializer::Fields(s, _) => *s,
    }
}

/// A `.texref`, `.surfref` or `.samplerref` declaration (or the old `.tex` space).
fn is_ref_decl(v: &VarDecl) -> bool {
    v.space == StateSpace::Tex
        || v.other_attrs.iter().any(|a| matches!(a.as_str(), "texref" | "surfref" | "samplerref"))
}

/// Whether an instruction belongs to this pass.
fn handled(i: &Instruction) -> bool {
    matches!(i.opcode.as_str(), "tex" | "tld4" | "txq" | "suld" | "sust" | "sured" | "suq" | "istypep")
}

/// Per-function rewriting state.
struct Rewriter<'a> {
    next: u32,
    decls: Vec<VarDecl>,
    used: bool,
    errors: Vec<Diagnostic>,
    /// Module-scope reference variables.
    refs: &'a FxHashSet<String>,
    /// Module-scope samplers (independent mode) and their override words.
    samplers: &'a FxHashMap<String, u32>,
    /// This function's reference parameters.
    params: FxHashSet<String>,
}

fn name_op(span: Span, name: &str) -> Operand {
    Operand::Name { span, name: name.into(), component: None }
}

/// `0f...`: an f32 immediate.
fn f32_zero(span: Span) -> Operand {
    Operand::Float(span, FloatImm::F32Bits(0))
}

impl Rewriter<'_> {
    fn block(&mut self, stmts: Vec<Statement>) -> Vec<Statement> {
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            match s {
                Statement::Block(b) => out.push(Statement::Block(self.block(b))),
                Statement::Inst(i) if handled(&i) => match self.rewrite(&i) {
                    Ok(stmts) => {
                        self.used = true;
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
        let name = format!("%{PREFIX}tex{}", self.next);
        self.next += 1;
        self.decls.push(VarDecl::registers(span, ty, &[name.as_str()]));
        name_op(span, &name)
    }

    /// The handle (u64) named by the address part of `op` (`[a]`, `[a, {..}]`).
    fn handle(&mut self, out: &mut Out, op: &Operand) -> Result<Operand, Diagnostic> {
        let a = match op {
            Operand::Address(_, a) => a,
            Operand::TensorAddress(_, a, _) => &**a,
            Operand::Bracket(s, _) => {
                return Err(unsupported(
                    out.orig,
                    *s,
                    "independent texturing mode (a separate sampler) is not supported",
                ))
            }
            other => return Err(Diagnostic::error(other.span(), "expected a texture or surface operand [a, ...]")),
        };
        let Some((bspan, base)) = &a.base else {
            return Err(Diagnostic::error(op.span(), "expected a texture or surface handle"));
        };
        if a.offset != 0 {
            return Err(Diagnostic::error(op.span(), "a texture or surface handle takes no offset"));
        }
        let span = *bspan;
        let h = self.temp(span, ScalarType::U64);
        let addr = Operand::Address(span, Address { base: Some((span, base.clone())), offset: 0 });
        if self.refs.contains(base.as_str()) {
            // A module reference holds the address of its record.
            out.inst("ld", &["global", "u64"], vec![h.clone(), addr]);
        } else if self.params.contains(base.as_str()) {
            out.inst("ld", &["param", "u64"], vec![h.clone(), addr]);
        } else {
            out.inst("mov", &["b64"], vec![h.clone(), name_op(span, base)]);
        }
        self.check_handle(out, span, &h);
        Ok(h)
    }

    /// Checks, in the kernel's own (fault-checked) code, that `h` points to a
    /// texture or surface record: an unbound reference, a destroyed object
    /// or a stray value then fails the launch (with the fault checks, as an
    /// illegal address) instead of the engine reading through it.
    fn check_handle(&mut self, out: &mut Out, span: Span, h: &Operand) {
        let magic = self.temp(span, ScalarType::U32);
        let bad = self.temp(span, ScalarType::Pred);
        // Passing unless the (guarded) load says otherwise.
        out.inst_guarded(None, "mov", &["u32"], vec![magic.clone(), int(span, crate::abi::TEXTURE_MAGIC as i128)]);
        let at = Operand::Address(
            span,
            Address { base: Some((span, name_of(h))), offset: crate::abi::texture::MAGIC as i64 },
        );
        out.inst("ld", &["global", "u32"], vec![magic.clone(), at]);
        out.inst_guarded(
            None,
            "setp",
            &["ne", "u32"],
            vec![bad.clone(), magic.clone(), int(span, crate::abi::TEXTURE_MAGIC as i128)],
        );
        out.inst_guarded(
            None,
            "setp",
            &["ne", "and", "u32"],
            vec![bad.clone(), magic, int(span, crate::abi::SURFACE_MAGIC as i128), bad.clone()],
        );
        out.inst_guarded(Some(Guard { span, negated: false, name: name_of(&bad) }), "trap", &[], vec![]);
    }

    fn rewrite(&mut self, i: &Instruction) -> Result<Vec<Statement>, Diagnostic> {
        let mut out = Out { orig: i, stmts: Vec::new() };
        match i.opcode.as_str() {
            "tex" | "tld4" => self.tex(&mut out)?,
            "txq" | "suq" => self.query(&mut out)?,
            "suld" | "sust" | "sured" => self.surface(&mut out)?,
            "istypep" => self.istypep(&mut out)?,
            _ => return Err(unsupported(i, i.opcode_span, "unknown texture instruction")),
        }
        Ok(out.stmts)
    }

    /// `tex` and `tld4`.
    fn tex(&mut self, out: &mut Out) -> Result<(), Diagnostic> {
        let i = out.orig;
        let s = i.span;
        let gather = i.opcode == "tld4";
        let geom_name = ["1d", "2d", "3d", "a1d", "a2d", "cube", "acube"]
            .iter()
            .position(|g| i.has(g))
            .ok_or_else(|| unsupported(i, i.opcode_span, "this geometry is not supported (2dms, a2dms)"))?;
        let geom = geom_name as i128 + 1;
        // `.v2.f16x2`: the four channels as two packed pairs, rounded to nearest.
        let f16x2 = i.has("f16x2");
        let icoord = i.modifiers.last().map(|m| m.as_str()) == Some("s32");
        let comp = if gather {
            ["r", "g", "b", "a"]
                .iter()
                .position(|c| i.has(c))
                .ok_or_else(|| unsupported(i, i.opcode_span, "missing component"))? as i128
        } else {
            -1
        };
        // Destinations: {d0, d1, d2, d3} or {..}|p.
        let (dst, pred) = match operand(i, 0)? {
            Operand::Pair(_, d, p) => ((**d).clone(), Some((**p).clone())),
            d => (d.clone(), None),
        };
        let Operand::Vector(_, dst) = dst else {
            return Err(Diagnostic::error(dst.span(), "expected a vector destination {d0, d1, d2, d3}"));
        };
        if dst.len() != if f16x2 { 2 } else { 4 } {
            return Err(Diagnostic::error(
                i.span,
                format!("'{}' writes {} registers", i.mnemonic(), if f16x2 { 2 } else { 4 }),
            ));
        }
        let coords_op = operand(i, 1)?;
        // [t, {c}] (unified mode) or [t, s, {c}] (independent mode: the
        // sampler's attributes override the texture's).
        let (cspan, tex_op, coords, sampler) = match coords_op {
            Operand::TensorAddress(cspan, _, coords) => (*cspan, coords_op.clone(), coords.clone(), 0u32),
            Operand::Bracket(sp, parts) => match &parts[..] {
                [t @ Operand::Name { .. }, Operand::Name { span: ss, name: sname, .. }, Operand::Vector(_, c)] => {
                    let Some(&w) = self.samplers.get(sname.as_str()) else {
                        return Err(unsupported(i, *ss, "the sampler is not a module .samplerref variable"));
                    };
                    let a = Operand::Address(t.span(), Address { base: Some((t.span(), name_of(t))), offset: 0 });
                    (*sp, a, c.to_vec(), w)
                }
                _ => return Err(Diagnostic::error(*sp, "expected [texture, sampler, {coordinates}]")),
            },
            o => return Err(Diagnostic::error(o.span(), "expected [texture, {coordinates}]")),
        };
        let cspan = &cspan;
        let h = self.handle(out, &tex_op)?;
        // Coordinates per geometry: a1d {layer, x}, a2d {layer, x, y, _},
        // acube {layer, x, y, z}; the others {x, y, z, _}.
        let layered = matches!(geom, 4 | 5 | 7);
        let (layer, xyz): (Operand, &[Operand]) = if layered {
            let (l, rest) = coords.split_first().ok_or_else(|| Diagnostic::error(*cspan, "missing the layer"))?;
            (l.clone(), rest)
        } else {
            (int(s, 0), &coords[..])
        };
        let n = match geom {
            1 | 4 => 1,
            2 | 5 => 2,
            _ => 3,
        };
        if xyz.len() < n {
            return Err(Diagnostic::error(*cspan, format!("expected {n} coordinates")));
        }
        let zero = if icoord { int(s, 0) } else { f32_zero(s) };
        let c: Vec<Operand> = (0..3).map(|k| if k < n { xyz[k].clone() } else { zero.clone() }).collect();
        // Operands after the address: .level lod; .grad dPdx, dPdy; then the
        // offset vector e and the depth compare f.
        let mut k = 2;
        let (lodmode, lod) = if i.has("level") && icoord {
            // With integer coordinates the LOD is an integer: the level
            // itself (a texel fetch from that level).
            k += 1;
            let f = self.temp(s, ScalarType::F32);
            out.inst("cvt", &["rn", "f32", "s32"], vec![f.clone(), operand(i, 2)?.clone()]);
            (4, f)
        } else if i.has("level") {
            k += 1;
            (1, operand(i, 2)?.clone())
        } else if i.has("base") {
            (3, f32_zero(s))
        } else {
            (0, f32_zero(s))
        };
        let mut grads = vec![f32_zero(s); 6];
        let lodmode = if i.has("grad") {
            for (g, op) in [operand(i, 2)?, operand(i, 3)?].into_iter().enumerate() {
                let Operand::Vector(_, v) = op else {
                    return Err(Diagnostic::error(op.span(), "expected a gradient vector"));
                };
                for (d, x) in v.iter().take(n).enumerate() {
                    grads[3 * g + d] = x.clone();
                }
            }
            k += 2;
            2
        } else {
            lodmode
        };
        let mut offs = vec![int(s, 0), int(s, 0), int(s, 0)];
        if let Some(op) = i.operands.get(k) {
            match op {
                Operand::Vector(_, v) => {
                    for (d, x) in v.iter().take(n).enumerate() {
                        offs[d] = x.clone();
                    }
                    k += 1;
                }
                _ => return Err(unsupported(i, op.span(), "depth compare is not supported")),
            }
        }
        if let Some(op) = i.operands.get(k) {
            return Err(unsupported(i, op.span(), "depth compare is not supported"));
        }
        // Integer destinations of f32 texels and vice versa get the bits as they are.
        let ret_ty = if f16x2 { ScalarType::F32 } else { ScalarType::B32 };
        let rets: Vec<Operand> = (0..4).map(|_| self.temp(s, ret_ty)).collect();
        let mut args = vec![h, int(s, geom), int(s, icoord as i128)];
        args.extend(c);
        args.push(layer);
        args.extend(offs);
        args.push(int(s, lodmode));
        args.push(lod);
        args.extend(grads);
        args.push(int(s, comp));
        args.push(int(s, sampler as i32 as i128));
        out.call(rets.clone(), "tex", args);
        if f16x2 {
            // cvt.rn.f16x2.f32 d, a, b puts a in the upper half: {R, G}, {B, A}.
            for (k, d) in dst.iter().enumerate() {
                if !matches!(d, Operand::Sink(_)) {
                    let (lo, hi) = (rets[2 * k].clone(), rets[2 * k + 1].clone());
                    out.inst("cvt", &["rn", "f16x2", "f32"], vec![d.clone(), hi, lo]);
                }
            }
        } else {
            for (d, r) in dst.iter().zip(rets) {
                if !matches!(d, Operand::Sink(_)) {
                    out.inst("mov", &["b32"], vec![d.clone(), r]);
                }
            }
        }
        if let Some(p) = pred {
            // Every texel is resident.
            out.inst("setp", &["eq", "u32"], vec![p, int(s, 0), int(s, 0)]);
        }
        Ok(())
    }

    /// `txq` and `suq`.
    fn query(&mut self, out: &mut Out) -> Result<(), Diagnostic> {
        let i = out.orig;
        let s = i.span;
        let names = [
            "width",
            "height",
            "depth",
            "channel_data_type",
            "channel_order",
            "normalized_coords",
            "array_size",
            "num_mipmap_levels",
            "num_samples",
            "filter_mode",
            "addr_mode_0",
            "addr_mode_1",
            "addr_mode_2",
            "force_unnormalized_coords",
            "memory_layout",
        ];
        let q =
            names.iter().position(|q| i.has(q)).ok_or_else(|| unsupported(i, i.opcode_span, "unknown query"))? as u32;
        let d = operand(i, 0)?.clone();
        if let Operand::Address(_, Address { base: Some((_, b)), .. }) = operand(i, 1)? {
            if let Some(&w) = self.samplers.get(b.as_str()) {
                // A sampler's attributes are known here.
                let v = match q {
                    9 => w >> 8 & 1,
                    10..=12 => w >> ((q - 10) * 2) & 3,
                    13 => w >> 20 & 1,
                    _ => return Err(unsupported(i, i.opcode_span, "a sampler has no such attribute")),
                };
                out.inst("mov", &["b32"], vec![d, int(s, v as i128)]);
                return Ok(());
            }
        }
        let h = self.handle(out, operand(i, 1)?)?;
        let level = if i.has("level") { operand(i, 2)?.clone() } else { int(s, 0) };
        let r = self.temp(s, ScalarType::B32);
        out.call(vec![r.clone()], "tex_query", vec![h, int(s, q as i128), level]);
        out.inst("mov", &["b32"], vec![d, r]);
        Ok(())
    }

    /// `suld.b`, `sust.b`, `sured.b`.
    fn surface(&mut self, out: &mut Out) -> Result<(), Diagnostic> {
        let i = out.orig;
        let s = i.span;
        let formatted = i.has("p");
        if formatted && i.opcode == "suld" {
            return Err(unsupported(i, i.opcode_span, "formatted surface loads (.p) are not supported"));
        }
        let geom = ["1d", "2d", "3d", "a1d", "a2d"]
            .iter()
            .position(|g| i.has(g))
            .ok_or_else(|| unsupported(i, i.opcode_span, "this geometry is not supported"))?;
        let mode = ["trap", "clamp", "zero"].iter().position(|m| i.has(m)).unwrap_or(0) as i128;
        let ty_name = ["b8", "b16", "b32", "b64", "u32", "s32", "u64", "s64"]
            .iter()
            .copied()
            .find(|t| i.has(t))
            .ok_or_else(|| unsupported(i, i.opcode_span, "missing data type"))?;
        let width: i128 = match ty_name {
            "b8" => 1,
            "b16" => 2,
            "b32" | "u32" | "s32" => 4,
            _ => 8,
        };
        let vec = if i.has("v4") {
            4
        } else if i.has("v2") {
            2
        } else {
            1
        };
        let load = i.opcode == "suld";
        let (addr_op, data_op) = if load { (operand(i, 1)?, operand(i, 0)?) } else { (operand(i, 0)?, operand(i, 1)?) };
        // `{r}`: a one-element vector is the register itself.
        let data_op = match data_op {
            Operand::Vector(_, v) if v.len() == 1 => &v[0],
            d => d,
        };
        let Operand::TensorAddress(cspan, _, coords) = addr_op else {
            return Err(Diagnostic::error(addr_op.span(), "expected [surface, {coordinates}]"));
        };
        let h = self.handle(out, addr_op)?;
        let layered = geom >= 3;
        let n = [1usize, 2, 3, 1, 2][geom];
        let (layer, xyz): (Operand, &[Operand]) = if layered {
            let (l, rest) = coords.split_first().ok_or_else(|| Diagnostic::error(*cspan, "missing the layer"))?;
            (l.clone(), rest)
        } else {
            (int(s, 0), &coords[..])
        };
        if xyz.len() < n {
            return Err(Diagnostic::error(*cspan, format!("expected {n} coordinates")));
        }
        let c: Vec<Operand> = (0..3).map(|k| if k < n { xyz[k].clone() } else { int(s, 0) }).collect();
        if formatted && i.opcode == "sust" {
            // The engine converts and stores each channel.
            let values: Vec<Operand> = match data_op {
                Operand::Vector(_, v) => v.to_vec(),
                d => vec![d.clone()],
            };
            let mut args = vec![h.clone(), int(s, n as i128)];
            args.extend(c);
            args.extend([layer, int(s, mode), int(s, values.len() as i128)]);
            for k in 0..4 {
                args.push(values.get(k).cloned().unwrap_or_else(|| int(s, 0)));
            }
            out.call(vec![], "surf_store_p", args);
            return Ok(());
        }
        let a = self.temp(s, ScalarType::U64);
        let ok = self.temp(s, ScalarType::U32);
        let p = self.temp(s, ScalarType::Pred);
        // %ok is 0 unless the (guarded) call says the access is in range.
        out.inst_guarded(None, "mov", &["u32"], vec![ok.clone(), int(s, 0)]);
        let mut args = vec![h.clone(), int(s, n as i128)];
        args.extend(c);
        args.extend([layer, int(s, width * vec), int(s, mode), int(s, formatted as i128)]);
        out.call(vec![a.clone(), ok.clone()], "surf_addr", args);
        out.inst_guarded(None, "setp", &["ne", "u32"], vec![p.clone(), ok, int(s, 0)]);
        let Operand::Name { name: pname, .. } = &p else { unreachable!("temp is a name") };
        let pg = Some(Guard { span: s, negated: false, name: pname.clone() });
        let addr = Operand::Address(s, Address { base: Some((s, name_of(&a))), offset: 0 });
        let mut mods: Vec<&str> = vec!["global"];
        if vec > 1 {
            mods.push(if vec == 4 { "v4" } else { "v2" });
        }
        match i.opcode.as_str() {
            "suld" => {
                // .zero: out of range reads 0.
                let dsts: Vec<Operand> = match data_op {
                    Operand::Vector(_, v) => v.to_vec(),
                    d => vec![d.clone()],
                };
                let zero_ty = match width {
                    1 | 2 => "b16",
                    4 => "b32",
                    _ => "b64",
                };
                for d in &dsts {
                    if !matches!(d, Operand::Sink(_)) {
                        out.inst("mov", &[zero_ty], vec![d.clone(), int(s, 0)]);
                    }
                }
                mods.push(ty_name);
                out.inst_guarded(pg, "ld", &mods, vec![data_op.clone(), addr]);
            }
            "sust" => {
                mods.push(ty_name);
                out.inst_guarded(pg, "st", &mods, vec![addr, data_op.clone()]);
            }
            _ => {
                let op = ["add", "min", "max", "and", "or"]
                    .iter()
                    .copied()
                    .find(|o| i.has(o))
                    .ok_or_else(|| unsupported(i, i.opcode_span, "missing reduction operation"))?;
                let ty = match (op, ty_name) {
                    ("and" | "or", "u32" | "s32") => "b32",
                    ("and" | "or", "u64" | "s64") => "b64",
                    ("add" | "min" | "max", "b32") => "u32",
                    ("add" | "min" | "max", "b64") => "u64",
                    (_, t) => t,
                };
                if formatted && matches!(op, "min" | "max") && ty_name == "b32" {
                    // `.p`: signed or unsigned as the surface's format says.
                    let signed = self.temp(s, ScalarType::U32);
                    out.call(vec![signed.clone()], "surf_signed", vec![h.clone()]);
                    let ps = self.temp(s, ScalarType::Pred);
                    let pu = self.temp(s, ScalarType::Pred);
                    out.inst_guarded(
                        None,
                        "setp",
                        &["ne", "and", "u32"],
                        vec![ps.clone(), signed.clone(), int(s, 0), p.clone()],
                    );
                    out.inst_guarded(
                        None,
                        "setp",
                        &["eq", "and", "u32"],
                        vec![pu.clone(), signed, int(s, 0), p.clone()],
                    );
                    let g = |q: &Operand| Some(Guard { span: s, negated: false, name: name_of(q) });
                    out.inst_guarded(g(&ps), "red", &["global", op, "s32"], vec![addr.clone(), data_op.clone()]);
                    out.inst_guarded(g(&pu), "red", &["global", op, "u32"], vec![addr, data_op.clone()]);
                    return Ok(());
                }
                out.inst_guarded(pg, "red", &["global", op, ty], vec![addr, data_op.clone()]);
            }
        }
        Ok(())
    }

    /// `istypep.texref/.surfref/.samplerref p, a`: whether `a` is a handle of
    /// that kind (its record carries the kind's magic word).
    fn istypep(&mut self, out: &mut Out) -> Result<(), Diagnostic> {
        let i = out.orig;
        let s = i.span;
        let kind = if i.has("texref") {
            0
        } else if i.has("surfref") {
            1
        } else {
            // Samplers are part of texture objects: no handle is a sampler.
            let p = operand(i, 0)?.clone();
            out.inst("setp", &["ne", "u32"], vec![p, int(s, 0), int(s, 0)]);
            return Ok(());
        };
        let p = operand(i, 0)?.clone();
        let a = operand(i, 1)?.clone();
        let r = self.temp(s, ScalarType::B32);
        out.call(vec![r.clone()], "istype", vec![a, int(s, kind)]);
        out.inst("setp", &["ne", "u32"], vec![p, r, int(s, 0)]);
        Ok(())
    }
}

fn name_of(op: &Operand) -> Str {
    match op {
        Operand::Name { name, .. } => name.clone(),
        _ => Str::new(""),
    }
}

fn unsupported(i: &Instruction, span: Span, why: &str) -> Diagnostic {
    Diagnostic::error(span, format!("unsupported instruction '{}' ({why})", i.mnemonic()))
}
