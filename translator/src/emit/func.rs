//! Emission of one `.entry`: declarations, the prologue, and structured regions.

use super::{entry_info, Emitter, TyKey, K};
use crate::abi::{EntryInfo, ParamInfo, ParamPassing};
use crate::ast::{self, ScalarType, StateSpace, Statement};
use crate::cfg::{self, Cfg, Terminator};
use crate::diag::{Diagnostic, Span};
use crate::layout::{self, Placed};
use crate::structurize::{self, Region, Target};
use rspirv::dr::Operand;
use rspirv::spirv::{self, Word};
use std::collections::{BTreeSet, HashMap};

/// Everything decided about an entry before emitting its code.
pub(crate) struct Plan<'a> {
    pub func: &'a ast::Function,
    pub info: EntryInfo,
    pub static_shared_bytes: u32,
    shared: HashMap<String, Placed>,
    local: HashMap<String, Placed>,
    local_bytes: u32,
    regs: Vec<(String, ScalarType, Span)>,
    cfg: Cfg<'a>,
    regions: Vec<Region>,
}

fn collect_decls<'a>(stmts: &'a [Statement], out: &mut Vec<&'a ast::VarDecl>) {
    for s in stmts {
        match s {
            Statement::Decl(d) => out.push(d),
            Statement::Block(b) => collect_decls(b, out),
            _ => {}
        }
    }
}

pub(crate) fn plan_entry<'a>(
    _e: &mut Emitter,
    f: &'a ast::Function,
    module_shared: &[(&'a ast::VarDecl, &'a ast::VarName)],
) -> Result<Plan<'a>, Diagnostic> {
    let body = f.body.as_deref().unwrap_or(&[]);
    let mut decls = Vec::new();
    collect_decls(body, &mut decls);
    let mut regs = Vec::new();
    let mut shared_static: Vec<(&ast::VarDecl, &ast::VarName)> = Vec::new();
    let mut shared_dynamic: Vec<(&ast::VarDecl, &ast::VarName)> = Vec::new();
    let mut locals = Vec::new();
    for &(d, n) in module_shared {
        if n.dims.first() == Some(&None) {
            shared_dynamic.push((d, n));
        } else {
            shared_static.push((d, n));
        }
    }
    for d in decls {
        match d.space {
            StateSpace::Reg => {
                if d.vector.is_some() || d.ty == ScalarType::B128 {
                    return Err(Diagnostic::error(d.span, "vector and .b128 registers are not supported yet"));
                }
                for n in &d.names {
                    match n.count {
                        Some(c) => {
                            if c > 4_000_000 {
                                return Err(Diagnostic::error(n.span, "too many registers"));
                            }
                            for i in 0..c {
                                regs.push((format!("{}{}", n.name, i), d.ty, n.span));
                            }
                        }
                        None => {
                            if !n.dims.is_empty() {
                                return Err(Diagnostic::error(n.span, "register arrays are not supported"));
                            }
                            regs.push((n.name.clone(), d.ty, n.span))
                        }
                    }
                }
            }
            StateSpace::Shared => {
                for n in &d.names {
                    if n.dims.first() == Some(&None) {
                        shared_dynamic.push((d, n));
                    } else {
                        shared_static.push((d, n));
                    }
                }
            }
            StateSpace::Local => locals.extend(d.names.iter().map(|n| (d, n))),
            other => {
                return Err(Diagnostic::error(
                    d.span,
                    format!("{} declarations inside a kernel are not supported yet", other.name()),
                ))
            }
        }
    }
    let (placed, static_end) = layout::place(&shared_static, 0)?;
    let mut shared: HashMap<String, Placed> = placed.into_iter().collect();
    let dyn_base =
        static_end.div_ceil(crate::abi::DYNAMIC_SHARED_ALIGN as u64) * crate::abi::DYNAMIC_SHARED_ALIGN as u64;
    for (d, n) in &shared_dynamic {
        shared.insert(n.name.clone(), Placed { offset: dyn_base, size: 0, ty: d.ty });
    }
    if static_end > u32::MAX as u64 / 2 {
        return Err(Diagnostic::error(f.span, "static .shared memory is too large"));
    }
    let (placed, local_end) = layout::place(&locals, 0)?;
    if local_end > 1 << 24 {
        return Err(Diagnostic::error(f.span, ".local memory is too large"));
    }
    let local: HashMap<String, Placed> = placed.into_iter().collect();
    let info = entry_info(f, _e.opts, static_end as u32, !shared_dynamic.is_empty(), local_end as u32)?;
    let cfg = cfg::run(body)?;
    let span_of = |b: usize| -> Span {
        let blk = &cfg.blocks[b];
        blk.insts.first().map(|i| i.span).unwrap_or(blk.term_span)
    };
    let regions = structurize::run(&cfg, &span_of)?;
    Ok(Plan {
        func: f,
        info,
        static_shared_bytes: static_end as u32,
        shared,
        local,
        local_bytes: local_end as u32,
        regs,
        cfg,
        regions,
    })
}

pub(crate) struct Frame {
    kind: Target,
    merge: Word,
    cont: Word,
    pending: BTreeSet<Target>,
}

/// Per-function emission state.
pub(crate) struct Fx<'a> {
    pub regs: HashMap<String, (Word, K)>,
    pub params: HashMap<String, ParamInfo>,
    pub passing: ParamPassing,
    pub shared: HashMap<String, Placed>,
    pub local: HashMap<String, Placed>,
    pub shared_var: Option<Word>,
    pub local_var: Option<Word>,
    pub push_var: Option<Word>,
    pub linear: Word,
    pub brk: Word,
    pub open: bool,
    pub errors: Vec<Diagnostic>,
    frames: Vec<Frame>,
    codes: HashMap<Target, u32>,
    cfg: &'a Cfg<'a>,
}

/// Storage kind of a register of PTX type `t`.
pub(crate) fn storage_kind(t: ScalarType) -> K {
    use ScalarType::*;
    match t {
        Pred => K::Pred,
        F32 => K::Float(32),
        F64 => K::Float(64),
        S8 | U8 | B8 | S16 | U16 | B16 | F16 | Bf16 => K::Int(16),
        S32 | U32 | B32 | F16x2 | Bf16x2 => K::Int(32),
        S64 | U64 | B64 => K::Int(64),
        B128 => K::Int(64),
    }
}

pub(crate) fn emit_entry(e: &mut Emitter, plan: Plan) -> Result<EntryInfo, Vec<Diagnostic>> {
    let u32t = e.t_int(32);
    // Globals first: rspirv puts variables created inside a block into the function.
    let push_var = if plan.info.push_constant_bytes > 0 {
        let n = e.c_u32(plan.info.push_constant_bytes / 4);
        let arr = e.ty(TyKey::Array(u32t, n));
        // rspirv de-duplicates structs: decorate each block type once.
        let st = e.ty(TyKey::Struct(vec![arr]));
        if e.decorated.insert(st) {
            e.b.decorate(st, spirv::Decoration::Block, []);
            e.b.member_decorate(st, 0, spirv::Decoration::Offset, [Operand::LiteralBit32(0)]);
        }
        let pt = e.t_ptr(spirv::StorageClass::PushConstant, st);
        Some(e.b.variable(pt, None, spirv::StorageClass::PushConstant, None))
    } else {
        None
    };
    let uses_shared = !plan.shared.is_empty();
    let shared_var = if uses_shared {
        let len = e.spec_shared_words;
        let arr = e.ty(TyKey::Array(u32t, len));
        let pt = e.t_ptr(spirv::StorageClass::Workgroup, arr);
        Some(e.b.variable(pt, None, spirv::StorageClass::Workgroup, None))
    } else {
        None
    };

    let void = e.ty(TyKey::Void);
    let fnty = e.ty(TyKey::Func(void, vec![]));
    let fid = e.b.begin_function(void, None, spirv::FunctionControl::NONE, fnty).map_err(internal)?;
    e.b.begin_block(None).map_err(internal)?;
    let mut regs = HashMap::new();
    for (name, t, _span) in &plan.regs {
        let k = storage_kind(*t);
        let ty = e.kty(k);
        let pt = e.t_ptr(spirv::StorageClass::Function, ty);
        let v = e.b.variable(pt, None, spirv::StorageClass::Function, None);
        regs.insert(name.clone(), (v, k));
    }
    let zero = e.c_u32(0);
    let pu = e.t_ptr(spirv::StorageClass::Function, u32t);
    let brk = e.b.variable(pu, None, spirv::StorageClass::Function, Some(zero));
    let local_var = if plan.local_bytes > 0 {
        let n = e.c_u32(plan.local_bytes.div_ceil(4));
        let arr = e.ty(TyKey::Array(u32t, n));
        let pt = e.t_ptr(spirv::StorageClass::Function, arr);
        Some(e.b.variable(pt, None, spirv::StorageClass::Function, None))
    } else {
        None
    };
    let linear = e.b.load(u32t, None, e.local_index, None, []).map_err(internal)?;
    let mut fx = Fx {
        regs,
        params: plan.info.params.iter().map(|p| (p.name.clone(), p.clone())).collect(),
        passing: plan.info.param_passing,
        shared: plan.shared,
        local: plan.local,
        shared_var,
        local_var,
        push_var,
        linear,
        brk,
        open: true,
        errors: Vec::new(),
        frames: Vec::new(),
        codes: HashMap::new(),
        cfg: &plan.cfg,
    };
    // Padding invocations (beyond the block's thread count) exit at once.
    let r = (|| -> Result<(), Diagnostic> {
        let [nx, ny, nz] = e.spec_ntid;
        let xy = e.b.i_mul(u32t, None, nx, ny).map_err(internal1)?;
        let n = e.b.i_mul(u32t, None, xy, nz).map_err(internal1)?;
        let bt = e.t_bool();
        let pad = e.b.u_greater_than_equal(bt, None, linear, n).map_err(internal1)?;
        let exit = e.b.id();
        let go = e.b.id();
        e.b.selection_merge(go, spirv::SelectionControl::NONE).map_err(internal1)?;
        e.b.branch_conditional(pad, exit, go, []).map_err(internal1)?;
        e.b.begin_block(Some(exit)).map_err(internal1)?;
        e.b.ret().map_err(internal1)?;
        e.b.begin_block(Some(go)).map_err(internal1)?;
        emit_regions(e, &mut fx, &plan.regions)?;
        if fx.open {
            e.b.unreachable().map_err(internal1)?;
            fx.open = false;
        }
        Ok(())
    })();
    if let Err(d) = r {
        fx.errors.push(d);
    }
    if !fx.errors.is_empty() {
        return Err(fx.errors);
    }
    e.b.end_function().map_err(internal)?;
    let mut iface = vec![e.local_index, e.workgroup_id];
    iface.extend(push_var);
    iface.extend(shared_var);
    e.b.entry_point(spirv::ExecutionModel::GLCompute, fid, plan.func.name.clone(), iface);
    let mut info = plan.info;
    info.static_shared_bytes = plan.static_shared_bytes;
    Ok(info)
}

fn internal(e: rspirv::dr::Error) -> Vec<Diagnostic> {
    vec![internal1(e)]
}

pub(crate) fn internal1(e: rspirv::dr::Error) -> Diagnostic {
    Diagnostic::error(Span::default(), format!("internal error: SPIR-V builder: {e:?}"))
}

/// Start a fresh block (after a terminator) so that emission can go on.
pub(crate) fn reopen(e: &mut Emitter, fx: &mut Fx) -> Result<(), Diagnostic> {
    let l = e.b.id();
    e.b.begin_block(Some(l)).map_err(internal1)?;
    fx.open = true;
    Ok(())
}

fn emit_regions(e: &mut Emitter, fx: &mut Fx, regions: &[Region]) -> Result<(), Diagnostic> {
    for r in regions {
        if !fx.open {
            // Code after a transfer is unreachable; keep the module well formed.
            reopen(e, fx)?;
        }
        match r {
            Region::Code(b) => {
                let blk = &fx.cfg.blocks[*b];
                for inst in blk.insts.clone() {
                    if !fx.open {
                        reopen(e, fx)?;
                    }
                    if let Err(d) = super::inst::emit(e, fx, inst) {
                        fx.errors.push(d);
                    }
                }
            }
            Region::Block { follower, body } => construct(e, fx, Target::Exit(*follower), body)?,
            Region::Loop { header, body } => construct(e, fx, Target::Continue(*header), body)?,
            Region::If { block, then_body, else_body } => {
                let Terminator::CondBranch { pred, negated, .. } = &fx.cfg.blocks[*block].term else {
                    return Err(Diagnostic::error(Span::default(), "internal error: If without a condition"));
                };
                let span = fx.cfg.blocks[*block].term_span;
                let (pred, negated) = (pred.clone(), *negated);
                let c = super::values::pred(e, fx, &pred, negated, span)?;
                let t = e.b.id();
                let f = e.b.id();
                let m = e.b.id();
                e.b.selection_merge(m, spirv::SelectionControl::NONE).map_err(internal1)?;
                e.b.branch_conditional(c, t, f, []).map_err(internal1)?;
                e.b.begin_block(Some(t)).map_err(internal1)?;
                fx.open = true;
                emit_regions(e, fx, then_body)?;
                close(e, fx)?;
                e.b.begin_block(Some(f)).map_err(internal1)?;
                fx.open = true;
                emit_regions(e, fx, else_body)?;
                close(e, fx)?;
                e.b.begin_block(Some(m)).map_err(internal1)?;
                fx.open = true;
            }
            Region::Br(t) => branch(e, fx, *t, false)?,
            Region::Return => {
                e.b.ret().map_err(internal1)?;
                fx.open = false;
            }
        }
    }
    Ok(())
}

/// End the current block with `OpUnreachable` if it is still open.
fn close(e: &mut Emitter, fx: &mut Fx) -> Result<(), Diagnostic> {
    if fx.open {
        e.b.unreachable().map_err(internal1)?;
        fx.open = false;
    }
    Ok(())
}

fn construct(e: &mut Emitter, fx: &mut Fx, kind: Target, body: &[Region]) -> Result<(), Diagnostic> {
    let header = e.b.id();
    let start = e.b.id();
    let cont = e.b.id();
    let merge = e.b.id();
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(header)).map_err(internal1)?;
    e.b.loop_merge(merge, cont, spirv::LoopControl::NONE, []).map_err(internal1)?;
    e.b.branch(start).map_err(internal1)?;
    e.b.begin_block(Some(start)).map_err(internal1)?;
    fx.open = true;
    fx.frames.push(Frame { kind, merge, cont, pending: BTreeSet::new() });
    emit_regions(e, fx, body)?;
    close(e, fx)?;
    let frame = fx.frames.pop().ok_or_else(|| Diagnostic::error(Span::default(), "internal error: frame"))?;
    e.b.begin_block(Some(cont)).map_err(internal1)?;
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    fx.open = true;
    // Re-dispatch branches that leave more than this construct.
    for t in frame.pending {
        let code = target_code(fx, t);
        let u32t = e.t_int(32);
        let bt = e.t_bool();
        let v = e.b.load(u32t, None, fx.brk, None, []).map_err(internal1)?;
        let c = e.c_u32(code);
        let hit = e.b.i_equal(bt, None, v, c).map_err(internal1)?;
        let act = e.b.id();
        let next = e.b.id();
        e.b.selection_merge(next, spirv::SelectionControl::NONE).map_err(internal1)?;
        e.b.branch_conditional(hit, act, next, []).map_err(internal1)?;
        e.b.begin_block(Some(act)).map_err(internal1)?;
        branch(e, fx, t, true)?;
        e.b.begin_block(Some(next)).map_err(internal1)?;
        fx.open = true;
    }
    Ok(())
}

fn target_code(fx: &mut Fx, t: Target) -> u32 {
    let n = fx.codes.len() as u32 + 1;
    *fx.codes.entry(t).or_insert(n)
}

fn branch(e: &mut Emitter, fx: &mut Fx, t: Target, reset: bool) -> Result<(), Diagnostic> {
    let Some(j) = fx.frames.iter().rposition(|f| f.kind == t) else {
        return Err(Diagnostic::error(Span::default(), "internal error: branch target outside its region"));
    };
    let inner = fx.frames.len() - 1;
    if j == inner {
        let zero = e.c_u32(0);
        if reset {
            e.b.store(fx.brk, zero, None, []).map_err(internal1)?;
        }
        let dest = match t {
            Target::Exit(_) => fx.frames[j].merge,
            Target::Continue(_) => fx.frames[j].cont,
        };
        e.b.branch(dest).map_err(internal1)?;
    } else {
        let code = target_code(fx, t);
        let c = e.c_u32(code);
        e.b.store(fx.brk, c, None, []).map_err(internal1)?;
        for f in &mut fx.frames[j + 1..] {
            f.pending.insert(t);
        }
        e.b.branch(fx.frames[inner].merge).map_err(internal1)?;
    }
    fx.open = false;
    Ok(())
}
