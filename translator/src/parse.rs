//! Pass 1: PTX text → [`crate::ast::Module`] with spans, using the `pest` grammar in
//! `ptx.pest`.

use crate::ast::*;
use crate::diag::{Diagnostic, Span};
use pest::iterators::Pair;
use pest::Parser;

#[derive(pest_derive::Parser)]
#[grammar = "ptx.pest"]
struct PtxParser;

type P<'a> = Pair<'a, Rule>;

fn span_of(p: &P) -> Span {
    let s = p.as_span();
    Span { start: s.start() as u32, end: s.end() as u32 }
}

/// Parse a PTX module.
pub fn run(source: &str) -> Result<Module, Vec<Diagnostic>> {
    if source.len() > u32::MAX as usize / 2 {
        return Err(vec![Diagnostic::error(Span::default(), "input too large (over 2 GiB)")]);
    }
    if let Some(d) = nesting_check(source) {
        return Err(vec![d]);
    }
    let mut pairs = match PtxParser::parse(Rule::module, source) {
        Ok(p) => p,
        Err(e) => return Err(vec![convert_error(source, e)]),
    };
    let mut errors = Vec::new();
    let mut module = Module { address_size: 64, ..Default::default() };
    let Some(root) = pairs.next() else {
        return Err(vec![Diagnostic::error(Span::default(), "empty parse")]);
    };
    for item in root.into_inner() {
        match item.as_rule() {
            Rule::version => {
                let span = span_of(&item);
                let text = item.into_inner().as_str().to_string();
                let mut it = text.split('.');
                let major = it.next().and_then(|s| s.parse().ok());
                let minor = it.next().and_then(|s| s.parse().ok());
                match (major, minor) {
                    (Some(a), Some(b)) => module.version = Some((a, b)),
                    _ => errors.push(Diagnostic::error(span, format!("bad .version '{text}'"))),
                }
            }
            Rule::target => {
                module.target = item.into_inner().map(|p| p.as_str().to_string()).collect();
            }
            Rule::address_size => {
                let span = span_of(&item);
                let v = item.into_inner().next().map(|p| parse_int(p.as_str()));
                match v {
                    Some(Some(32)) => module.address_size = 32,
                    Some(Some(64)) => module.address_size = 64,
                    _ => errors.push(Diagnostic::error(span, ".address_size must be 32 or 64")),
                }
            }
            Rule::function => match function(item) {
                Ok(f) => module.items.push(ModuleItem::Function(f)),
                Err(e) => errors.push(e),
            },
            Rule::module_var => match module_var(item) {
                Ok(v) => module.items.push(ModuleItem::Variable(v)),
                Err(e) => errors.push(e),
            },
            _ => {} // .file, .section, .loc, .pragma, EOI
        }
    }
    if errors.is_empty() {
        Ok(module)
    } else {
        Err(errors)
    }
}

/// Deepest `{`/`(`/`[` nesting accepted; PTX needs a handful of levels, and
/// the recursive-descent parser must not exhaust the stack on hostile input.
pub const MAX_NESTING: usize = 200;

/// Reject input nested deeper than [`MAX_NESTING`], skipping comments and strings.
fn nesting_check(source: &str) -> Option<Diagnostic> {
    let b = source.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'{' | b'(' | b'[' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(Diagnostic::error(
                        Span { start: i as u32, end: i as u32 + 1 },
                        format!("nesting deeper than {MAX_NESTING} levels"),
                    ));
                }
            }
            b'}' | b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

fn convert_error(source: &str, e: pest::error::Error<Rule>) -> Diagnostic {
    let pos = match e.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((s, _)) => s,
    };
    // Point at the start of the offending token rather than at whitespace.
    let mut start = pos.min(source.len());
    let bytes = source.as_bytes();
    while start < bytes.len() && (bytes[start] == b' ' || bytes[start] == b'\t') {
        start += 1;
    }
    let mut end = start;
    while end < bytes.len() && !bytes[end].is_ascii_whitespace() && bytes[end] != b';' {
        end += 1;
    }
    let found = &source[start..end.max(start)];
    let expected = match &e.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => {
            let names: Vec<String> = positives.iter().filter_map(rule_description).collect();
            if names.is_empty() {
                String::new()
            } else {
                let mut n = names;
                n.sort();
                n.dedup();
                format!("expected {}", n.join(", "))
            }
        }
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    let msg = if found.is_empty() {
        format!("syntax error: {}", if expected.is_empty() { "unexpected end of input".into() } else { expected })
    } else if expected.is_empty() {
        format!("syntax error at '{found}'")
    } else {
        format!("syntax error at '{found}': {expected}")
    };
    Diagnostic::error(Span { start: start as u32, end: end.max(start + 1) as u32 }, msg)
}

fn rule_description(r: &Rule) -> Option<String> {
    Some(
        match r {
            Rule::EOI => "end of input",
            Rule::operand | Rule::reg_operand => "an operand",
            Rule::ident => "a name",
            Rule::integer | Rule::neg_integer => "an integer",
            Rule::instruction | Rule::opcode => "an instruction",
            Rule::label => "a label",
            Rule::var_decl | Rule::state_space => "a declaration",
            Rule::function | Rule::function_kind => "a function",
            Rule::module_var | Rule::linkage => "a module-scope declaration",
            Rule::body => "'{'",
            Rule::param_decl => "a parameter",
            Rule::decl_attr | Rule::attr_word => "a type or attribute",
            Rule::var_name => "a variable name",
            Rule::version => ".version",
            Rule::target => ".target",
            Rule::address_size => ".address_size",
            Rule::initializer => "an initializer",
            _ => return None,
        }
        .to_string(),
    )
}

/// Parse an integer literal (decimal, hex, octal, binary; optional `U`).
pub fn parse_int(s: &str) -> Option<i128> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let s = s.strip_suffix('U').unwrap_or(s);
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()? as i128
    } else if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        u64::from_str_radix(b, 2).ok()? as i128
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()? as i128
    } else {
        s.parse::<u64>().ok()? as i128
    };
    Some(if neg { -v } else { v })
}

fn parse_float(s: &str) -> Option<FloatImm> {
    if let Some(h) = s.strip_prefix("0f").or_else(|| s.strip_prefix("0F")) {
        return u32::from_str_radix(h, 16).ok().map(FloatImm::F32Bits);
    }
    if let Some(h) = s.strip_prefix("0d").or_else(|| s.strip_prefix("0D")) {
        return u64::from_str_radix(h, 16).ok().map(FloatImm::F64Bits);
    }
    s.parse::<f64>().ok().map(FloatImm::Decimal)
}

fn int_of(p: &P) -> Result<i128, Diagnostic> {
    parse_int(p.as_str())
        .ok_or_else(|| Diagnostic::error(span_of(p), format!("integer literal '{}' out of range", p.as_str())))
}

fn u32_of(p: &P) -> Result<u32, Diagnostic> {
    let v = int_of(p)?;
    u32::try_from(v).map_err(|_| Diagnostic::error(span_of(p), format!("value {} out of range", p.as_str())))
}

fn linkage_of(s: &str) -> Linkage {
    match s {
        ".extern" => Linkage::Extern,
        ".weak" => Linkage::Weak,
        ".common" => Linkage::Common,
        _ => Linkage::Visible,
    }
}

fn function(p: P) -> Result<Function, Diagnostic> {
    let span = span_of(&p);
    let mut f = Function {
        span,
        linkage: Vec::new(),
        kind: FunctionKind::Func,
        name: String::new(),
        returns: Vec::new(),
        params: Vec::new(),
        perf: Vec::new(),
        body: None,
    };
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::linkage => f.linkage.push(linkage_of(item.as_str())),
            Rule::function_kind => {
                f.kind = if item.as_str() == ".entry" { FunctionKind::Entry } else { FunctionKind::Func }
            }
            Rule::return_params => {
                for d in item.into_inner() {
                    f.returns.push(param_decl(d)?);
                }
            }
            Rule::ident => f.name = item.as_str().to_string(),
            Rule::params => {
                for d in item.into_inner() {
                    f.params.push(param_decl(d)?);
                }
            }
            Rule::perf_directive => f.perf.push(perf_directive(item)?),
            Rule::body => f.body = Some(body(item)?),
            _ => {}
        }
    }
    Ok(f)
}

fn perf_directive(p: P) -> Result<PerfDirective, Diagnostic> {
    let text = p.as_str();
    let mut inner = p.into_inner();
    let Some(first) = inner.next() else {
        return Ok(if text.starts_with(".noreturn") {
            PerfDirective::NoReturn
        } else {
            PerfDirective::ExplicitCluster
        });
    };
    if first.as_rule() == Rule::pragma {
        return Ok(PerfDirective::Pragma(first.into_inner().map(|s| unquote(s.as_str())).collect()));
    }
    let name = first.as_str().to_string();
    let mut nums = Vec::new();
    for n in inner {
        nums.push(u32_of(&n)?);
    }
    let one = nums.first().copied().unwrap_or(0);
    Ok(match name.as_str() {
        ".maxntid" => PerfDirective::MaxNtid(nums),
        ".reqntid" => PerfDirective::ReqNtid(nums),
        ".minnctapersm" => PerfDirective::MinNctaPerSm(one),
        ".maxnctapersm" => PerfDirective::MaxNctaPerSm(one),
        ".maxnreg" => PerfDirective::MaxNreg(one),
        ".maxclusterrank" => PerfDirective::MaxClusterRank(one),
        _ => PerfDirective::ReqNctaPerCluster(nums),
    })
}

fn unquote(s: &str) -> String {
    s.trim_matches('"').to_string()
}

fn param_decl(p: P) -> Result<VarDecl, Diagnostic> {
    let span = span_of(&p);
    let mut inner = p.into_inner();
    let space = match inner.next().map(|s| s.as_str()) {
        Some(".reg") => StateSpace::Reg,
        _ => StateSpace::Param,
    };
    decl_rest(span, Vec::new(), space, inner)
}

fn module_var(p: P) -> Result<VarDecl, Diagnostic> {
    let mut linkage = Vec::new();
    let mut decl = None;
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::linkage => linkage.push(linkage_of(item.as_str())),
            Rule::var_decl => decl = Some(var_decl(item)?),
            _ => {}
        }
    }
    let mut d = decl.ok_or_else(|| Diagnostic::error(Span::default(), "internal: missing declaration"))?;
    d.linkage = linkage;
    Ok(d)
}

fn space_of(s: &str) -> StateSpace {
    match s {
        ".reg" => StateSpace::Reg,
        ".sreg" => StateSpace::SReg,
        ".const" => StateSpace::Const,
        ".global" => StateSpace::Global,
        ".local" => StateSpace::Local,
        ".param" => StateSpace::Param,
        ".shared" => StateSpace::Shared,
        _ => StateSpace::Tex,
    }
}

fn var_decl(p: P) -> Result<VarDecl, Diagnostic> {
    let span = span_of(&p);
    let mut inner = p.into_inner();
    let space = inner.next().map(|s| space_of(s.as_str())).unwrap_or(StateSpace::Reg);
    decl_rest(span, Vec::new(), space, inner)
}

fn decl_rest<'a>(
    span: Span,
    linkage: Vec<Linkage>,
    space: StateSpace,
    inner: impl Iterator<Item = P<'a>>,
) -> Result<VarDecl, Diagnostic> {
    let mut d = VarDecl {
        span,
        linkage,
        space,
        align: None,
        vector: None,
        ty: ScalarType::B8,
        ptr: None,
        other_attrs: Vec::new(),
        names: Vec::new(),
        init: None,
    };
    let mut have_type = false;
    let mut after_ptr = false;
    for item in inner {
        match item.as_rule() {
            Rule::decl_attr => {
                let Some(a) = item.into_inner().next() else { continue };
                if a.as_rule() == Rule::align {
                    let n = a.into_inner().next().map(|n| u32_of(&n)).transpose()?.unwrap_or(1);
                    if after_ptr {
                        if let Some(p) = &mut d.ptr {
                            p.1 = Some(n);
                        }
                    } else {
                        d.align = Some(n);
                    }
                    continue;
                }
                let aspan = span_of(&a);
                let word = &a.as_str()[1..];
                if let Some(t) = ScalarType::from_name(word) {
                    d.ty = t;
                    have_type = true;
                } else if word == "ptr" {
                    d.ptr = Some((None, None));
                    after_ptr = true;
                } else if let Some(n) = word.strip_prefix('v').and_then(|n| n.parse::<u32>().ok()) {
                    if !matches!(n, 2 | 4 | 8) {
                        return Err(Diagnostic::error(aspan, format!("invalid vector size .v{n}")));
                    }
                    d.vector = Some(n);
                } else if after_ptr && matches!(word, "global" | "shared" | "const" | "local") {
                    if let Some(p) = &mut d.ptr {
                        p.0 = Some(space_of(a.as_str()));
                    }
                } else if matches!(word, "texref" | "samplerref" | "surfref") {
                    d.ty = ScalarType::B64;
                    have_type = true;
                    d.other_attrs.push(word.to_string());
                } else {
                    d.other_attrs.push(word.to_string());
                }
            }
            Rule::var_name => d.names.push(var_name(item)?),
            Rule::initializer => d.init = Some(initializer(item)?),
            _ => {}
        }
    }
    if !have_type {
        return Err(Diagnostic::error(span, "declaration without a type"));
    }
    Ok(d)
}

fn var_name(p: P) -> Result<VarName, Diagnostic> {
    let span = span_of(&p);
    let mut v = VarName { span, name: String::new(), count: None, dims: Vec::new() };
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::ident => v.name = item.as_str().to_string(),
            Rule::reg_count => {
                if let Some(n) = item.into_inner().next() {
                    v.count = Some(u32_of(&n)?);
                }
            }
            Rule::array_dim => {
                let n = item.into_inner().next();
                match n {
                    Some(n) => {
                        let x = int_of(&n)?;
                        let x = u64::try_from(x).map_err(|_| Diagnostic::error(span_of(&n), "negative array size"))?;
                        v.dims.push(Some(x));
                    }
                    None => v.dims.push(None),
                }
            }
            _ => {}
        }
    }
    Ok(v)
}

fn initializer(p: P) -> Result<Initializer, Diagnostic> {
    let span = span_of(&p);
    let Some(inner) = p.into_inner().next() else {
        return Err(Diagnostic::error(span, "empty initializer"));
    };
    match inner.as_rule() {
        Rule::init_list => {
            let mut items = Vec::new();
            for i in inner.into_inner() {
                items.push(initializer(i)?);
            }
            Ok(Initializer::List(span, items))
        }
        _ => init_expr(inner),
    }
}

fn init_expr(p: P) -> Result<Initializer, Diagnostic> {
    let span = span_of(&p);
    let mut terms = Vec::new();
    let mut sign = InitSign::Plus;
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::init_op => sign = if item.as_str() == "-" { InitSign::Minus } else { InitSign::Plus },
            Rule::init_term => {
                let Some(t) = item.into_inner().next() else { continue };
                let term = match t.as_rule() {
                    Rule::generic_addr => {
                        InitTerm::Generic(t.into_inner().next().map(|i| i.as_str().to_string()).unwrap_or_default())
                    }
                    Rule::mask_expr => {
                        let Some(e) = t.into_inner().next() else { continue };
                        InitTerm::Mask(Box::new(init_expr(e)?))
                    }
                    Rule::float_literal => match parse_float(t.as_str()) {
                        Some(FloatImm::F32Bits(b)) => InitTerm::Float(f32::from_bits(b) as f64, Some(b)),
                        Some(FloatImm::F64Bits(b)) => InitTerm::Float(f64::from_bits(b), None),
                        Some(FloatImm::Decimal(v)) => InitTerm::Float(v, None),
                        None => return Err(Diagnostic::error(span_of(&t), "bad float literal")),
                    },
                    Rule::integer | Rule::neg_integer => InitTerm::Int(int_of(&t)?),
                    _ => InitTerm::Symbol(t.as_str().to_string()),
                };
                terms.push((sign, term));
                sign = InitSign::Plus;
            }
            _ => {}
        }
    }
    Ok(Initializer::Expr(span, terms))
}

fn body(p: P) -> Result<Vec<Statement>, Diagnostic> {
    let mut out = Vec::new();
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::label => {
                let span = span_of(&item);
                let name = item.into_inner().next().map(|i| i.as_str().to_string()).unwrap_or_default();
                out.push(Statement::Label(span, name));
            }
            Rule::var_decl => out.push(Statement::Decl(var_decl(item)?)),
            Rule::body => out.push(Statement::Block(body(item)?)),
            Rule::instruction => out.push(Statement::Inst(instruction(item)?)),
            Rule::target_list => {
                let span = span_of(&item);
                let mut name = String::new();
                let mut calls = false;
                let mut targets = Vec::new();
                for (k, t) in item.into_inner().enumerate() {
                    match t.as_rule() {
                        Rule::target_kind => calls = t.as_str() == ".calltargets",
                        _ if k == 0 => name = t.as_str().to_string(),
                        _ => targets.push(t.as_str().to_string()),
                    }
                }
                out.push(Statement::TargetList { span, name, calls, targets });
            }
            Rule::prototype => {
                let span = span_of(&item);
                let mut it = item.into_inner();
                let name = it.next().map(|i| i.as_str().to_string()).unwrap_or_default();
                let rest = it.next().map(|i| i.as_str().to_string()).unwrap_or_default();
                out.push(Statement::Prototype(span, name, rest));
            }
            _ => {}
        }
    }
    Ok(out)
}

fn instruction(p: P) -> Result<Instruction, Diagnostic> {
    let span = span_of(&p);
    let mut inst = Instruction {
        span,
        guard: None,
        opcode_span: span,
        opcode: String::new(),
        modifiers: Vec::new(),
        operands: Vec::new(),
    };
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::guard => {
                let gspan = span_of(&item);
                let mut negated = false;
                let mut name = String::new();
                for g in item.into_inner() {
                    match g.as_rule() {
                        Rule::not => negated = true,
                        _ => name = g.as_str().to_string(),
                    }
                }
                inst.guard = Some(Guard { span: gspan, negated, name });
            }
            Rule::opcode => {
                inst.opcode_span = span_of(&item);
                let mut parts = item.as_str().split('.');
                inst.opcode = parts.next().unwrap_or("").to_string();
                inst.modifiers = parts.map(|s| s.to_string()).collect();
            }
            Rule::operand => inst.operands.push(operand(item)?),
            _ => {}
        }
    }
    Ok(inst)
}

fn operand(p: P) -> Result<Operand, Diagnostic> {
    let span = span_of(&p);
    let mut inner = p.into_inner();
    let Some(first) = inner.next() else {
        return Err(Diagnostic::error(span, "empty operand"));
    };
    Ok(match first.as_rule() {
        Rule::not => {
            let Some(r) = inner.next() else { return Err(Diagnostic::error(span, "'!' without an operand")) };
            Operand::Not(span, Box::new(reg_operand(r)))
        }
        Rule::reg_operand => reg_operand(first),
        Rule::integer | Rule::neg_integer => Operand::Int(span, int_of(&first)?),
        Rule::float_literal => match parse_float(first.as_str()) {
            Some(f) => Operand::Float(span, f),
            None => return Err(Diagnostic::error(span, "bad float literal")),
        },
        Rule::sink => Operand::Sink(span),
        Rule::pred_pair => {
            let mut it = first.into_inner();
            match (it.next(), it.next()) {
                (Some(a), Some(b)) => Operand::Pair(span, Box::new(reg_operand(a)), Box::new(reg_operand(b))),
                _ => return Err(Diagnostic::error(span, "bad predicate pair")),
            }
        }
        Rule::vector_operand => {
            let mut v = Vec::new();
            for o in first.into_inner() {
                v.push(operand(o)?);
            }
            Operand::Vector(span, v)
        }
        Rule::paren_list => {
            let mut v = Vec::new();
            for o in first.into_inner() {
                v.push(operand(o)?);
            }
            Operand::List(span, v)
        }
        Rule::address => {
            let mut parts = first.into_inner();
            let Some(expr) = parts.next() else { return Err(Diagnostic::error(span, "empty address")) };
            let a = address(expr)?;
            match parts.next() {
                // `[tensorMap, {c0, ...}]`
                Some(coords) => {
                    let mut v = Vec::new();
                    for o in coords.into_inner() {
                        v.push(operand(o)?);
                    }
                    Operand::TensorAddress(span, a, v)
                }
                None => Operand::Address(span, a),
            }
        }
        _ => return Err(Diagnostic::error(span, "unexpected operand")),
    })
}

fn reg_operand(p: P) -> Operand {
    let span = span_of(&p);
    let mut name = String::new();
    let mut component = None;
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::ident => name = item.as_str().to_string(),
            Rule::component => component = item.as_str().as_bytes().get(1).copied(),
            _ => {}
        }
    }
    Operand::Name { span, name, component }
}

fn address(p: P) -> Result<Address, Diagnostic> {
    let span = span_of(&p);
    let mut base = None;
    let mut offset: i64 = 0;
    let mut sign = 1i64;
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::reg_operand => {
                if base.is_some() {
                    return Err(Diagnostic::error(span_of(&item), "an address may add only constants to its base"));
                }
                let s = span_of(&item);
                base = Some((s, item.as_str().to_string()));
            }
            Rule::address_op => sign = if item.as_str() == "-" { -1 } else { 1 },
            Rule::integer | Rule::neg_integer => {
                let v = int_of(&item)?;
                let v = i64::try_from(v)
                    .or_else(|_| u64::try_from(v).map(|u| u as i64))
                    .map_err(|_| Diagnostic::error(span_of(&item), "address offset out of range"))?;
                offset = offset.wrapping_add(sign.wrapping_mul(v));
                sign = 1;
            }
            _ => {}
        }
    }
    let _ = span;
    Ok(Address { base, offset })
}
