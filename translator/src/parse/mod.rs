//! Pass 1: PTX text → [`crate::ast::Module`] with spans, using the `pest` grammar in
//! `ptx.pest` for the module's structure and the scanner in `inst` for
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
use std::cell::{Cell, RefCell};
use std::sync::Arc;

mod body;
mod inst;

#[derive(pest_derive::Parser)]
#[grammar = "ptx.pest"]
struct PtxParser;

type P<'a> = Pair<'a, Rule>;

thread_local! {
    /// Offset of the chunk being built in the whole source.
    static BASE: Cell<u32> = const { Cell::new(0) };
    /// The [`Skeleton`] shifts of the chunk being built (empty while text
    /// parsed on its own is built).
    static SHIFTS: RefCell<Vec<(u32, u32)>> = const { RefCell::new(Vec::new()) };
    /// The source being parsed: the address range of the caller's text and
    /// the shared copy of it that the AST's names are ranges of.
    static SOURCE: RefCell<Option<(usize, usize, Arc<String>)>> = const { RefCell::new(None) };
}

/// Where a text being scanned lies in a shared copy of it (`text[i]` is
/// `copy[off + i]`), so that its names are [`Str`] ranges of the copy
/// rather than allocations of their own.
struct Origin {
    copy: Arc<String>,
    off: usize,
}

impl Origin {
    /// The origin of `text`: the copy of the source when `text` is part of
    /// the source being parsed (its addresses lie in the source's), else a
    /// copy of `text` (text made while recovering from errors).
    fn of(text: &str) -> Origin {
        let p = text.as_ptr() as usize;
        let found = SOURCE.with(|s| {
            let s = s.borrow();
            let (lo, hi, copy) = s.as_ref()?;
            (p >= *lo && p + text.len() <= *hi).then(|| Origin { copy: copy.clone(), off: p - lo })
        });
        found.unwrap_or_else(|| Origin { copy: Arc::new(text.to_string()), off: 0 })
    }

    /// `text[start..end]` as a [`Str`].
    fn str(&self, start: usize, end: usize) -> Str {
        Str::slice(&self.copy, self.off + start, self.off + end)
    }
}

/// Run `f` with the spans of pairs taken from byte `base` of the source
/// (for text parsed on its own: a chunk, a statement, a parameter list).
fn with_base<T>(base: u32, f: impl FnOnce() -> T) -> T {
    let shifts = SHIFTS.with(|s| std::mem::take(&mut *s.borrow_mut()));
    let out = with_base_keeping_shifts(base, f);
    SHIFTS.with(|s| *s.borrow_mut() = shifts);
    out
}

fn with_base_keeping_shifts<T>(base: u32, f: impl FnOnce() -> T) -> T {
    let old = BASE.with(|b| b.replace(base));
    let out = f();
    BASE.with(|b| b.set(old));
    out
}

fn span_of(p: &P) -> Span {
    let s = p.as_span();
    let base = BASE.with(Cell::get);
    let (start, end) = SHIFTS.with(|sh| {
        let sh = sh.borrow();
        (unskeleton(&sh, s.start() as u32), unskeleton(&sh, s.end() as u32))
    });
    Span { start: base + start, end: base + end }
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
    let lo = source.as_ptr() as usize;
    let this = Some((lo, lo + source.len(), Arc::new(source.to_string())));
    let outer = SOURCE.with(|s| s.replace(this));
    let out = parse_source(source);
    SOURCE.with(|s| s.replace(outer));
    out
}

fn parse_source(source: &str) -> (Option<Module>, Vec<Diagnostic>) {
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
    for c in chunks {
        let text = &source[c.start..c.end];
        if !parse_chunk(text, c.start as u32, &c.bodies, &mut module, &mut errors, &mut work, budget) {
            complete = false;
        }
        if errors.len() >= MAX_SYNTAX_ERRORS {
            return (None, errors);
        }
    }
    (complete.then_some(module), errors)
}

/// A chunk of the source: its byte range and the ranges of the function
/// bodies, parameter lists and `.section` contents in it (from `{` to after
/// `}`, from `(` to after `)`, relative to the chunk).
struct Chunk {
    start: usize,
    end: usize,
    bodies: Vec<(usize, usize)>,
}

/// The text pest parses for a chunk: the chunk with every function body
/// and parameter list collapsed to `{}` and `()` (both are scanned by
/// hand, [`body`], so pest need not step over them, nor index their lines:
/// pest builds a line index of all the text it parses) and every
/// `.section`'s contents left out, and where its positions lie in the
/// chunk.
struct Skeleton {
    text: String,
    /// `(p, d)`: skeleton positions from `p` on lie `d` bytes further in the
    /// chunk (one entry per collapsed body, at its `}`).
    shifts: Vec<(u32, u32)>,
}

impl Skeleton {
    fn new(chunk: &str, bodies: &[(usize, usize)]) -> Skeleton {
        let collapsed: usize = bodies.iter().map(|&(open, end)| end.saturating_sub(open)).sum();
        let mut text = String::with_capacity(chunk.len().saturating_sub(collapsed) + 2 * bodies.len());
        let mut shifts = Vec::with_capacity(bodies.len());
        let mut prev = 0;
        for &(open, end) in bodies {
            // Never cut inside a character (bodies are found at ASCII braces).
            if open < prev || end > chunk.len() || !chunk.is_char_boundary(open) || !chunk.is_char_boundary(end) {
                continue;
            }
            text.push_str(&chunk[prev..=open]);
            shifts.push((text.len() as u32, (end - 1 - text.len()) as u32));
            text.push(chunk.as_bytes()[end - 1] as char);
            prev = end;
        }
        text.push_str(&chunk[prev..]);
        Skeleton { text, shifts }
    }
}

/// Where skeleton position `p` lies in the chunk (see [`Skeleton`]).
fn unskeleton(shifts: &[(u32, u32)], p: u32) -> u32 {
    let i = shifts.partition_point(|&(at, _)| at <= p);
    if i == 0 {
        p
    } else {
        p + shifts[i - 1].1
    }
}

/// Parse one chunk into `module`, recovering from syntax errors; `false`
/// when it never parsed.
fn parse_chunk(
    chunk: &str,
    base: u32,
    bodies: &[(usize, usize)],
    module: &mut Module,
    errors: &mut Vec<Diagnostic>,
    work: &mut usize,
    budget: usize,
) -> bool {
    let mut patched: Option<String> = None;
    loop {
        let text = patched.as_deref().unwrap_or(chunk);
        let skel = Skeleton::new(text, bodies);
        *work += skel.text.len();
        match PtxParser::parse(Rule::module, &skel.text) {
            Ok(pairs) => {
                SHIFTS.with(|s| *s.borrow_mut() = skel.shifts);
                with_base_keeping_shifts(base, || build(pairs, module, errors, text));
                SHIFTS.with(|s| s.borrow_mut().clear());
                return true;
            }
            Err(e) => {
                let pos = match e.location {
                    pest::error::InputLocation::Pos(p) => p,
                    pest::error::InputLocation::Span((s, _)) => s,
                };
                let at = unskeleton(&skel.shifts, pos as u32) as usize;
                let mut d = error_at(text, at, &e.variant);
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

/// Bytes [`chunks`] looks at at depth 0 (`[0]`) and inside brackets
/// (`[1]`); the others are stepped over in a tight loop.
static SPECIAL: [[bool; 256]; 2] = {
    let mut t = [[false; 256]; 2];
    let mut i = 0;
    let all = b"/\"{}()[];.";
    while i < all.len() {
        t[0][all[i] as usize] = true;
        // `;` and `.` matter at depth 0 only.
        t[1][all[i] as usize] = i < 8;
        i += 1;
    }
    t
};

/// The kind of a module-level item, as [`chunks`] sees it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Item {
    Function,
    Section,
    File,
    Other,
}

/// The range of the name before the `(` at `b[i]`, when there is one: the
/// `(` opens a function's parameter list (after `.func`, it opens the
/// return parameters).
fn name_before(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    while j > 0 && b[j - 1].is_ascii_whitespace() {
        j -= 1;
    }
    let end = j;
    while j > 0 && (b[j - 1].is_ascii_alphanumeric() || matches!(b[j - 1], b'_' | b'$' | b'%')) {
        j -= 1;
    }
    (j < end && (j == 0 || b[j - 1] != b'.')).then_some((j, end))
}

/// Whether `b[i..]` starts with the word `w` (not followed by a name character).
fn word_at(b: &[u8], i: usize, w: &[u8]) -> bool {
    b[i..].starts_with(w) && !b.get(i + w.len()).is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$')
}

/// Cut the source at top-level item boundaries into chunks of at least
/// [`CHUNK_BYTES`], finding the function bodies and parameter lists in
/// them (in an item with an `.entry` or `.func` word, a `{` at depth 0, and
/// a `(` at depth 0 after a name, not after `.func`) and the contents of
/// `.section`s (which the tree does not keep); reject nesting deeper
/// than [`MAX_NESTING`]. Comments and strings are skipped.
fn chunks(source: &str) -> Result<Vec<Chunk>, Diagnostic> {
    let b = source.as_bytes();
    let mut out = Vec::new();
    let mut chunk = Chunk { start: 0, end: 0, bodies: Vec::new() };
    let mut depth = 0usize;
    // What the item at depth 0 is.
    let mut item = Item::Other;
    let mut body_open = None;
    // Inside a function body only braces and comments matter here (the
    // body scanners bound the nesting of brackets in statements), found
    // with memchr.
    let mut in_body = false;
    let mut i = 0;
    while i < b.len() {
        if in_body {
            match memchr::memchr3(b'{', b'}', b'/', &b[i..]) {
                Some(k) => i += k,
                None => break,
            }
        }
        let special = &SPECIAL[usize::from(depth > 0)];
        while i < b.len() && !special[b[i] as usize] {
            i += 1;
        }
        if i == b.len() {
            break;
        }
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
            b'"' if !in_body => {
                let open = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if depth == 0 && item == Item::File && i < b.len() && i - open > 8 {
                    chunk.bodies.push((open - chunk.start, i + 1 - chunk.start));
                }
            }
            b'.' if depth == 0 && (word_at(b, i, b".entry") || word_at(b, i, b".func")) => item = Item::Function,
            b'.' if depth == 0 && word_at(b, i, b".section") => item = Item::Section,
            b'.' if depth == 0 && word_at(b, i, b".file") => item = Item::File,
            b'{' | b'(' | b'[' => {
                let collapse = match item {
                    Item::Function if b[i] == b'(' => match name_before(b, i) {
                        Some((start, end)) => {
                            if end - start > 8 && start >= chunk.start {
                                chunk.bodies.push((start - chunk.start, end - chunk.start));
                            }
                            true
                        }
                        None => false,
                    },
                    Item::Function | Item::Section => b[i] == b'{',
                    _ => false,
                };
                if depth == 0 && collapse {
                    body_open = Some(i);
                    in_body = b[i] == b'{' && item == Item::Function;
                }
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
                if depth == 0 {
                    in_body = false;
                    if let Some(open) = body_open.take() {
                        if (b[open], b[i]) == (b'{', b'}') || (b[open], b[i]) == (b'(', b')') {
                            chunk.bodies.push((open - chunk.start, i + 1 - chunk.start));
                        }
                    }
                    if b[i] == b'}' {
                        item = Item::Other;
                    }
                }
                // A function body ends its item; an initializer's `}` is
                // followed by the declaration's `;`.
                let next = b[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
                if depth == 0 && b[i] == b'}' && next != Some(&b';') && i + 1 - chunk.start >= CHUNK_BYTES {
                    chunk.end = i + 1;
                    let next_start = i + 1;
                    out.push(std::mem::replace(&mut chunk, Chunk { start: next_start, end: 0, bodies: Vec::new() }));
                }
            }
            b';' if depth == 0 => {
                item = Item::Other;
                if i + 1 - chunk.start >= CHUNK_BYTES {
                    chunk.end = i + 1;
                    let next_start = i + 1;
                    out.push(std::mem::replace(&mut chunk, Chunk { start: next_start, end: 0, bodies: Vec::new() }));
                }
            }
            _ => {}
        }
        i += 1;
    }
    if chunk.start < b.len() || out.is_empty() {
        chunk.end = b.len();
        out.push(chunk);
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
/// `chunk`: the chunk's text (pest parsed its [`Skeleton`]).
fn build(mut pairs: pest::iterators::Pairs<'_, Rule>, module: &mut Module, errors: &mut Vec<Diagnostic>, chunk: &str) {
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
            Rule::function => match function(item, errors, chunk) {
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
    error_at(source, pos, &e.variant)
}

/// A syntax error at byte `pos` of `source`, naming what was expected.
fn error_at(source: &str, pos: usize, variant: &pest::error::ErrorVariant<Rule>) -> Diagnostic {
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
    let expected = match variant {
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
            Rule::stmt => "'{', a declaration, a label, an instruction",
            Rule::params | Rule::param_list => "a parameter list",
            Rule::param_decl => "a parameter",
            Rule::decl_attr | Rule::attr_word => "a type or attribute",
            Rule::var_name => "a variable name",
            Rule::version => ".version",
            Rule::target => ".target",
            Rule::address_size => ".address_size",
            Rule::init_fields | Rule::init_list | Rule::init_num | Rule::init_expr => "an initializer",
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

fn function(p: P, errors: &mut Vec<Diagnostic>, chunk: &str) -> Result<Function, Diagnostic> {
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
            Rule::ident => f.name = original(chunk, &item).to_string(),
            Rule::params => {
                f.params = body::params(original(chunk, &item), span_of(&item).start)?;
            }
            Rule::perf_directive => f.perf.push(perf_directive(item)?),
            Rule::body => {
                f.body = Some(body::statements(original(chunk, &item), span_of(&item).start, errors));
            }
            _ => {}
        }
    }
    Ok(f)
}

/// The text of a pair in the chunk (pest parsed the [`Skeleton`], where
/// bodies, parameter lists and long names are collapsed).
fn original<'c>(chunk: &'c str, p: &P<'c>) -> &'c str {
    let at = span_of(p);
    let base = BASE.with(Cell::get);
    chunk.get(at.start.wrapping_sub(base) as usize..at.end.wrapping_sub(base) as usize).unwrap_or(p.as_str())
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
                apply_word(&mut d, a.as_str(), span_of(&a), &mut have_type, &mut after_ptr)?;
            }
            Rule::var_name => d.names.push(var_name(item)?),
            Rule::init_fields | Rule::init_list | Rule::init_num | Rule::init_expr => d.init = Some(initializer(item)?),
            _ => {}
        }
    }
    if !have_type {
        return Err(Diagnostic::error(span, "declaration without a type"));
    }
    Ok(d)
}

/// Apply a declaration's attribute word (`.u32`, `.v4`, `.ptr`, `.global`
/// after `.ptr`, ...; `word` with its dot) to `d`.
fn apply_word(
    d: &mut VarDecl,
    word_dot: &str,
    aspan: Span,
    have_type: &mut bool,
    after_ptr: &mut bool,
) -> Result<(), Diagnostic> {
    let word = &word_dot[1..];
    if let Some(t) = ScalarType::from_name(word) {
        d.ty = t;
        *have_type = true;
    } else if word == "ptr" {
        d.ptr = Some((None, None));
        *after_ptr = true;
    } else if let Some(n) = word.strip_prefix('v').and_then(|n| n.parse::<u32>().ok()) {
        if !matches!(n, 2 | 4 | 8) {
            return Err(Diagnostic::error(aspan, format!("invalid vector size .v{n}")));
        }
        d.vector = Some(n);
    } else if *after_ptr && matches!(word, "global" | "shared" | "const" | "local") {
        if let Some(p) = &mut d.ptr {
            p.0 = Some(space_of(word_dot));
        }
    } else if matches!(word, "texref" | "samplerref" | "surfref") {
        d.ty = ScalarType::B64;
        *have_type = true;
        d.other_attrs.push(word.to_string());
    } else {
        d.other_attrs.push(word.to_string());
    }
    Ok(())
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
        Rule::init_fields => {
            let mut fields = Vec::new();
            for f in p.into_inner() {
                let mut parts = f.into_inner();
                let name = parts.next().map(|x| x.as_str().to_string()).unwrap_or_default();
                let value = parts.next().map(|x| x.as_str().to_string()).unwrap_or_default();
                fields.push((name, value));
            }
            Ok(Initializer::Fields(span, fields))
        }
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

/// `name:`, or a prototype or target list named `name`.
fn labelled(p: P) -> Statement {
    let span = span_of(&p);
    let mut it = p.into_inner();
    let name = it.next().map(|i| i.as_str().to_string()).unwrap_or_default();
    let Some(tail) = it.next() else { return Statement::Label(span, Str::from(name)) };
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
    let origin = Origin::of(p.as_str());
    inst::scan(p.as_str(), span.start, &origin.copy, origin.off)
}
