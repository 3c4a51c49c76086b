//! Pass 1: PTX text → [`crate::ast::Module`] with spans, using the `pest` grammar in
//! `ptx.pest` for the module's structure and the scanner in [`inst`] for
//! instruction statements.
//!
//! The input is cut into chunks at top-level item boundaries (after a `;`
//! or a closing `}` at nesting depth 0, once a chunk holds
//! [`CHUNK_BYTES`]) and each chunk is parsed on its own, so pest's token
//! queue never holds more than one chunk (the largest function, at worst),
//! and recovery from a syntax error re-parses one chunk only.

use crate::ast::*;
use crate::diag::{Diagnostic, Span};
use pest::iterators::Pair;
use pest::Parser;
use std::cell::Cell;

mod inst;

#[derive(pest_derive::Parser)]
#[grammar = "ptx.pest"]
struct PtxParser;

type P<'a> = Pair<'a, Rule>;

thread_local! {
    /// Offset of the chunk being built in the whole source.
    static BASE: Cell<u32> = const { Cell::new(0) };
}

fn span_of(p: &P) -> Span {
    let s = p.as_span();
    let base = BASE.with(Cell::get);
    Span { start: base + s.start() as u32, end: base + s.end() as u32 }
}

/// Parse a PTX module; any syntax error is an error.
pub fn run(source: &str) -> Result<Module, Vec<Diagnostic>> {
    match run_recovering(source) {
        (Some(m), errors) if errors.is_empty() => Ok(m),
        (_, errors) => Err(errors),
    }
}

/// Most syntax errors reported for one input (the parser recovers at the
/// next statement after each).
pub const MAX_SYNTAX_ERRORS: usize = 20;

/// Bytes re-parsed while recovering from syntax errors, as a multiple of the
/// input size: recovery re-parses the whole input, so it stops early on
/// large inputs.
const RECOVERY_BUDGET: usize = 8;

/// Parse a PTX module, recovering from syntax errors: the statement that
/// does not parse is blanked out (up to its `;`, without crossing a brace;
/// offsets are kept) and its chunk parsed again, up to [`MAX_SYNTAX_ERRORS`]
/// times. Returns the module (when every chunk parsed in the end) and every
/// error.
pub fn run_recovering(source: &str) -> (Option<Module>, Vec<Diagnostic>) {
    if source.len() > MAX_INPUT {
        let msg = format!("input too large ({} MiB; the limit is {} MiB)", source.len() >> 20, MAX_INPUT >> 20);
        return (None, vec![Diagnostic::error(Span::default(), msg)]);
    }
    let chunks = match chunks(source) {
        Ok(c) => c,
        Err(d) => return (None, vec![d]),
    };
    let mut module = Module { address_size: 64, ..Default::default() };
    let mut errors = Vec::new();
    let mut complete = true;
    let mut work = 0usize;
    let budget = RECOVERY_BUDGET * source.len().max(1 << 20);
    for (start, end) in chunks {
        let text = &source[start..end];
        if !parse_chunk(text, start as u32, &mut module, &mut errors, &mut work, budget) {
            complete = false;
        }
        if errors.len() >= MAX_SYNTAX_ERRORS {
            return (None, errors);
        }
    }
    (complete.then_some(module), errors)
}

/// Parse one chunk into `module`, recovering from syntax errors; `false`
/// when it never parsed.
fn parse_chunk(
    chunk: &str,
    base: u32,
    module: &mut Module,
    errors: &mut Vec<Diagnostic>,
    work: &mut usize,
    budget: usize,
) -> bool {
    let mut patched: Option<String> = None;
    loop {
        let text = patched.as_deref().unwrap_or(chunk);
        *work += text.len();
        match PtxParser::parse(Rule::module, text) {
            Ok(pairs) => {
                BASE.with(|b| b.set(base));
                build(pairs, module, errors);
                BASE.with(|b| b.set(0));
                return true;
            }
            Err(e) => {
                let mut d = convert_error(text, e);
                let at = d.span.start as usize;
                d.span.start += base;
                d.span.end += base;
                errors.push(d);
                if errors.len() >= MAX_SYNTAX_ERRORS || *work > budget {
                    return false;
                }
                let Some((start, end)) = statement_around(text, at) else { return false };
                let mut bytes = text.as_bytes().to_vec();
                for b in &mut bytes[start..end] {
                    if *b != b'\n' {
                        *b = b' ';
                    }
                }
                match String::from_utf8(bytes) {
                    Ok(s) => patched = Some(s),
                    Err(_) => return false,
                }
            }
        }
    }
}

/// Least size of a chunk (bytes), so that small items are parsed together.
pub const CHUNK_BYTES: usize = 256 << 10;

/// Cut the source at top-level item boundaries into chunks of at least
/// [`CHUNK_BYTES`]; reject nesting deeper than [`MAX_NESTING`]. Comments
/// and strings are skipped.
fn chunks(source: &str) -> Result<Vec<(usize, usize)>, Diagnostic> {
    let b = source.as_bytes();
    let mut out = Vec::new();
    let mut chunk_start = 0;
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i += memchr_newline(&b[i..]);
                continue;
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
                    return Err(Diagnostic::error(
                        Span { start: i as u32, end: i as u32 + 1 },
                        format!("nesting deeper than {MAX_NESTING} levels"),
                    ));
                }
            }
            b'}' | b')' | b']' => {
                depth = depth.saturating_sub(1);
                // A function body ends its item; an initializer's `}` is
                // followed by the declaration's `;`.
                let next = b[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
                if depth == 0 && b[i] == b'}' && next != Some(&b';') && i + 1 - chunk_start >= CHUNK_BYTES {
                    out.push((chunk_start, i + 1));
                    chunk_start = i + 1;
                }
            }
            b';' if depth == 0 && i + 1 - chunk_start >= CHUNK_BYTES => {
                out.push((chunk_start, i + 1));
                chunk_start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if chunk_start < b.len() || out.is_empty() {
        out.push((chunk_start, b.len()));
    }
    Ok(out)
}

/// Bytes up to the next newline (or the end).
fn memchr_newline(b: &[u8]) -> usize {
    b.iter().position(|&c| c == b'\n').unwrap_or(b.len())
}

/// Largest input accepted (bytes): spans are 32-bit, and a parse keeps a
/// token tree several times the input size.
pub const MAX_INPUT: usize = 1 << 30;

/// The byte range of the statement containing `at`: from after the previous
/// `;`, `{` or `}` to the next `;` (inclusive), stopping before a brace.
/// `None` when the range is empty (recovery would make no progress).
fn statement_around(text: &str, at: usize) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let at = at.min(b.len());
    let mut start = at;
    while start > 0 && !matches!(b[start - 1], b';' | b'{' | b'}') {
        start -= 1;
    }
    let mut end = at;
    while end < b.len() && !matches!(b[end], b';' | b'{' | b'}') {
        end += 1;
    }
    if end < b.len() && b[end] == b';' {
        end += 1;
    }
    // Nothing but whitespace: no progress possible.
    if b[start..end].iter().all(|c| c.is_ascii_whitespace()) {
        return None;
    }
    Some((start, end))
}

/// Add the items of a parsed chunk to `module`.
fn build(mut pairs: pest::iterators::Pairs<'_, Rule>, module: &mut Module, errors: &mut Vec<Diagnostic>) {
    let Some(root) = pairs.next() else {
        errors.push(Diagnostic::error(Span::default(), "empty parse"));
        return;
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
            Rule::function => match function(item, errors) {
                Ok(f) => module.items.push(ModuleItem::Function(f)),
                Err(e) => errors.push(e),
            },
            Rule::module_var => match module_var(item) {
                Ok(v) => module.items.push(ModuleItem::Variable(v)),
                Err(e) => errors.push(e),
            },
            Rule::alias => {
                let span = span_of(&item);
                let mut it = item.into_inner().map(|p| p.as_str().to_string());
                if let (Some(a), Some(b)) = (it.next(), it.next()) {
                    module.aliases.push((span, a, b));
                }
            }
            _ => {} // .file, .section, .loc, .pragma, EOI
        }
    }
}

/// Deepest `{`/`(`/`[` nesting accepted; PTX needs a handful of levels, and
/// the recursive-descent parser must not exhaust the stack on hostile input.
pub const MAX_NESTING: usize = 200;

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
            Rule::instruction => "an instruction",
            Rule::ident => "a name",
            Rule::integer | Rule::neg_integer => "an integer",
            Rule::labelled => "a label",
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
            Rule::init_list | Rule::init_num | Rule::init_expr => "an initializer",
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

fn function(p: P, errors: &mut Vec<Diagnostic>) -> Result<Function, Diagnostic> {
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
            Rule::body => f.body = Some(body(item, errors)?),
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
        } else if text.starts_with(".blocksareclusters") {
            PerfDirective::BlocksAreClusters
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
        ".abi_preserve" => PerfDirective::AbiPreserve(one),
        ".abi_preserve_control" => PerfDirective::AbiPreserveControl(one),
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
                if a.as_rule() == Rule::attribute {
                    // `.attribute(.managed)` is kept as `attribute(.managed)`.
                    let words: Vec<&str> = a.into_inner().map(|w| w.as_str()).collect();
                    d.other_attrs.push(format!("attribute({})", words.join(",")));
                    continue;
                }
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
            Rule::init_list | Rule::init_num | Rule::init_expr => d.init = Some(initializer(item)?),
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
    match p.as_rule() {
        Rule::init_list => {
            let mut items = Vec::new();
            for i in p.into_inner() {
                items.push(initializer(i)?);
            }
            Ok(Initializer::List(span, items))
        }
        Rule::init_num => {
            let text = p.as_str();
            let term = if is_float_text(text) {
                match parse_float(text) {
                    Some(f) => float_term(f),
                    None => return Err(Diagnostic::error(span, "bad float literal")),
                }
            } else {
                InitTerm::Int(int_of(&p)?)
            };
            Ok(Initializer::Expr(span, vec![(InitSign::Plus, term)]))
        }
        _ => init_expr(p),
    }
}

/// Whether a number is written as a floating-point literal.
fn is_float_text(t: &str) -> bool {
    let u = t.strip_prefix('-').unwrap_or(t);
    u.starts_with("0f")
        || u.starts_with("0F")
        || u.starts_with("0d")
        || u.starts_with("0D")
        || (!u.starts_with("0x") && !u.starts_with("0X") && u.contains(['.', 'e', 'E']))
}

fn float_term(f: FloatImm) -> InitTerm {
    match f {
        FloatImm::F32Bits(b) => InitTerm::Float(f32::from_bits(b) as f64, Some(b)),
        FloatImm::F64Bits(b) => InitTerm::Float(f64::from_bits(b), None),
        FloatImm::Decimal(v) => InitTerm::Float(v, None),
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
                        Some(f) => float_term(f),
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

/// A body's statements; an instruction that does not scan is reported in
/// `errors` and left out, so that the rest is still checked.
fn body(p: P, errors: &mut Vec<Diagnostic>) -> Result<Vec<Statement>, Diagnostic> {
    let mut out = Vec::new();
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::instruction => match instruction(item) {
                Ok(i) => out.push(Statement::Inst(i)),
                Err(e) => {
                    if errors.len() < MAX_SYNTAX_ERRORS {
                        errors.push(e);
                    }
                }
            },
            Rule::labelled => out.push(labelled(item)),
            Rule::var_decl => out.push(Statement::Decl(var_decl(item)?)),
            Rule::body => out.push(Statement::Block(body(item, errors)?)),
            _ => {}
        }
    }
    Ok(out)
}

/// `name:`, or a prototype or target list named `name`.
fn labelled(p: P) -> Statement {
    let span = span_of(&p);
    let mut it = p.into_inner();
    let name = it.next().map(|i| i.as_str().to_string()).unwrap_or_default();
    let Some(tail) = it.next() else { return Statement::Label(span, name) };
    match tail.as_rule() {
        Rule::proto_tail => {
            let rest = tail.into_inner().next().map(|r| r.as_str().trim().to_string()).unwrap_or_default();
            Statement::Prototype(span, name, rest)
        }
        _ => {
            let mut calls = false;
            let mut targets = Vec::new();
            for t in tail.into_inner() {
                match t.as_rule() {
                    Rule::target_kind => calls = t.as_str() == ".calltargets",
                    _ => targets.push(t.as_str().to_string()),
                }
            }
            Statement::TargetList { span, name, calls, targets }
        }
    }
}

fn instruction(p: P) -> Result<Instruction, Diagnostic> {
    let span = span_of(&p);
    inst::scan(p.as_str(), span.start)
}
