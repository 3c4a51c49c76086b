//! Function bodies and parameter lists, scanned by hand.
//!
//! The grammar takes a function body as one token (balanced braces,
//! comments stepped over) and a parameter list as another; this module
//! splits them into statements and declarations. The common statements are
//! scanned here: labels, `.reg`/`.local`/`.shared`/... declarations without
//! initializers, `.loc`, nested `{}` blocks, and instructions (delimited
//! here, scanned by [`super::inst`]). Anything else — a statement the
//! scanner does not accept, an initializer, `.pragma`, a `.callprototype`
//! or `.branchtargets` list — is handed to the grammar's `stmt` rule on
//! just that statement's text (offsets kept), which builds it or gives the
//! diagnostic the grammar gives. A statement in error is skipped up to its
//! `;` (never across a brace) and scanning goes on, so one pass reports
//! every bad statement of a body. A parameter list the scanner does not
//! accept is parsed by the grammar's `param_list` rule in the same way.

use super::{
    apply_word, convert_error, instruction, labelled, param_decl, parse_int, var_decl, with_base, Origin, PtxParser,
    Rule, MAX_NESTING, MAX_SYNTAX_ERRORS,
};
use crate::ast::{StateSpace, Statement, VarDecl, VarName};
use crate::diag::{Diagnostic, Span};
use pest::Parser;

/// The statements of a body token (`{ ... }`) that starts at byte `base`
/// of the source; bad statements are reported in `errors` and left out.
pub(super) fn statements(text: &str, base: u32, errors: &mut Vec<Diagnostic>) -> Vec<Statement> {
    let mut c = Cursor { text, b: text.as_bytes(), pos: 1, base, origin: Origin::of(text) };
    // About one statement per `;` or label `:` (fewer for nested blocks):
    // no regrowing of a large vector.
    let guess = memchr::memchr2_iter(b';', b':', text.as_bytes()).count() + 1;
    let out = c.block(Vec::with_capacity(guess), errors);
    if c.pos < text.len() {
        // A `}` the scanner took for the body's end (one inside a string).
        let d = Diagnostic::error(c.span(c.pos - 1, c.pos), "syntax error at '}': unbalanced braces in the body");
        push_error(errors, d);
    }
    out
}

/// The declarations of a parameter-list token (`( ... )`) that starts at
/// byte `base` of the source.
pub(super) fn params(text: &str, base: u32) -> Result<Vec<VarDecl>, Diagnostic> {
    let mut c = Cursor { text, b: text.as_bytes(), pos: 1, base, origin: Origin::of(text) };
    if let Some(v) = c.param_list() {
        return Ok(v);
    }
    match PtxParser::parse(Rule::param_list, text) {
        Ok(mut pairs) => with_base(base, || {
            let Some(list) = pairs.next() else { return Ok(Vec::new()) };
            list.into_inner().map(param_decl).collect()
        }),
        Err(e) => Err(shift(convert_error(text, e), base)),
    }
}

fn shift(mut d: Diagnostic, by: u32) -> Diagnostic {
    d.span.start += by;
    d.span.end += by;
    d
}

fn push_error(errors: &mut Vec<Diagnostic>, d: Diagnostic) {
    if errors.len() < MAX_SYNTAX_ERRORS {
        errors.push(d);
    }
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c == b'%'
}

fn is_word_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn space_named(s: &str) -> Option<StateSpace> {
    Some(match s {
        ".reg" => StateSpace::Reg,
        ".sreg" => StateSpace::SReg,
        ".const" => StateSpace::Const,
        ".global" => StateSpace::Global,
        ".local" => StateSpace::Local,
        ".param" => StateSpace::Param,
        ".shared" => StateSpace::Shared,
        ".tex" => StateSpace::Tex,
        _ => return None,
    })
}

struct Cursor<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
    base: u32,
    /// Where `text` lies in the shared copy of the source.
    origin: Origin,
}

impl<'a> Cursor<'a> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span { start: self.base + start as u32, end: self.base + end as u32 }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Whitespace and comments (an unterminated `/*` is left in place).
    #[inline(always)]
    fn ws(&mut self) {
        if self.b.get(self.pos).is_some_and(|&c| c > b' ' && c != b'/') {
            return;
        }
        self.ws_slow();
    }

    #[inline(never)]
    fn ws_slow(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b'/' if self.b.get(self.pos + 1) == Some(&b'/') => {
                    self.pos =
                        self.b[self.pos..].iter().position(|&c| c == b'\n').map_or(self.b.len(), |k| self.pos + k);
                }
                b'/' if self.b.get(self.pos + 1) == Some(&b'*') => match self.text[self.pos + 2..].find("*/") {
                    Some(k) => self.pos += 2 + k + 2,
                    None => return,
                },
                _ => return,
            }
        }
    }

    /// End of the run of word characters from `from`.
    fn word_end(&self, mut from: usize) -> usize {
        while from < self.b.len() && is_word_char(self.b[from]) {
            from += 1;
        }
        from
    }

    fn ident(&mut self) -> Option<&'a str> {
        let start = self.pos;
        if !self.peek().is_some_and(is_ident_start) {
            return None;
        }
        self.pos = super::inst::ident_end(self.b, self.pos + 1);
        Some(&self.text[start..self.pos])
    }

    /// An unsigned integer literal (the grammar's `integer`).
    fn int(&mut self) -> Option<i128> {
        let start = self.pos;
        if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
            return None;
        }
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
            self.pos += 1;
        }
        parse_int(&self.text[start..self.pos])
    }

    fn u32(&mut self) -> Option<u32> {
        self.int().and_then(|v| u32::try_from(v).ok())
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek() == Some(c)).then(|| self.pos += 1)
    }

    /// A declaration without an initializer, from its state space to its
    /// last name (`.reg .b32 %r<4>`, `.param .align 8 .b8 p[16]`); `None`
    /// (position unspecified) for anything else, which the grammar then
    /// parses. `param`: a parameter (`.param` or `.reg`, one name).
    fn decl(&mut self, param: bool) -> Option<VarDecl> {
        let start = self.pos;
        let space_end = self.word_end(start + 1);
        let space = space_named(&self.text[start..space_end])?;
        if param && !matches!(space, StateSpace::Param | StateSpace::Reg) {
            return None;
        }
        self.pos = space_end;
        let mut d = VarDecl {
            span: Span::default(),
            linkage: Vec::new(),
            space,
            align: None,
            vector: None,
            ty: crate::ast::ScalarType::B8,
            ptr: None,
            other_attrs: Vec::new(),
            names: Vec::with_capacity(1),
            init: None,
        };
        let (mut have_type, mut after_ptr) = (false, false);
        loop {
            self.ws();
            if self.peek() != Some(b'.') {
                break;
            }
            let w = self.pos;
            let mut e = w + 1;
            loop {
                if e < self.b.len() && is_word_char(self.b[e]) {
                    e += 1;
                } else if self.b.get(e..e + 2) == Some(b"::") {
                    e += 2;
                } else {
                    break;
                }
            }
            let word = &self.text[w..e];
            self.pos = e;
            if word == ".align" {
                self.ws();
                let n = self.u32()?;
                match &mut d.ptr {
                    Some(p) if after_ptr => p.1 = Some(n),
                    _ if after_ptr => {}
                    _ => d.align = Some(n),
                }
            } else if word.len() < 2 || word.starts_with(".align") || word == ".attribute" {
                return None;
            } else {
                apply_word(&mut d, word, self.span(w, e), &mut have_type, &mut after_ptr).ok()?;
            }
        }
        if !have_type {
            return None;
        }
        loop {
            let n_start = self.pos;
            let name = self.ident()?;
            let mut v = VarName { span: Span::default(), name: name.to_string(), count: None, dims: Vec::new() };
            let mut end = self.pos;
            self.ws();
            if self.peek() == Some(b'<') {
                self.pos += 1;
                self.ws();
                v.count = Some(self.u32()?);
                self.expect(b'>')?;
                end = self.pos;
            } else {
                while self.peek() == Some(b'[') {
                    self.pos += 1;
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        v.dims.push(None);
                    } else {
                        let x = self.int()?;
                        v.dims.push(Some(u64::try_from(x).ok()?));
                        self.expect(b']')?;
                    }
                    end = self.pos;
                    self.ws();
                }
            }
            v.span = self.span(n_start, end);
            d.names.push(v);
            d.span = self.span(start, end);
            self.ws();
            if param || self.peek() != Some(b',') {
                return Some(d);
            }
            self.pos += 1;
            self.ws();
        }
    }

    /// `( decl, decl, ... )`, from after the `(`.
    fn param_list(&mut self) -> Option<Vec<VarDecl>> {
        let mut out = Vec::new();
        self.ws();
        if self.peek() == Some(b')') {
            self.pos += 1;
        } else {
            loop {
                if self.peek() != Some(b'.') {
                    return None;
                }
                out.push(self.decl(true)?);
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        self.ws();
                    }
                    Some(b')') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        (self.pos == self.b.len()).then_some(out)
    }

    /// The statements up to the `}` that closes the block (consumed).
    fn block(&mut self, mut out: Vec<Statement>, errors: &mut Vec<Diagnostic>) -> Vec<Statement> {
        loop {
            self.ws();
            let start = self.pos;
            let Some(c) = self.peek() else { return out };
            match c {
                b'}' => {
                    self.pos += 1;
                    return out;
                }
                b'{' => {
                    self.pos += 1;
                    let inner = self.block(Vec::new(), errors);
                    out.push(Statement::Block(inner));
                }
                b'.' => {
                    let word_end = self.word_end(start + 1);
                    let word = &self.text[start..word_end];
                    if word == ".loc" {
                        self.pos = self.b[start..].iter().position(|&c| c == b'\n').map_or(self.b.len(), |k| start + k);
                    } else if space_named(word).is_some() {
                        match self.decl(false) {
                            Some(d) if self.peek() == Some(b';') => {
                                self.pos += 1;
                                out.push(Statement::Decl(d));
                            }
                            _ => {
                                self.pos = start;
                                self.by_grammar(&mut out, errors);
                            }
                        }
                    } else {
                        self.by_grammar(&mut out, errors);
                    }
                }
                b'@' => self.instruction(&mut out, errors),
                c if is_ident_start(c) => {
                    let name = self.ident().unwrap_or_default();
                    self.ws();
                    if self.peek() == Some(b':') {
                        self.pos += 1;
                        let colon = self.pos;
                        self.ws();
                        let rest = &self.text[self.pos..];
                        if rest.starts_with(".callprototype")
                            || rest.starts_with(".branchtargets")
                            || rest.starts_with(".calltargets")
                        {
                            self.pos = start;
                            self.by_grammar(&mut out, errors);
                        } else {
                            self.pos = colon;
                            out.push(Statement::Label(
                                self.span(start, colon),
                                self.origin.str(start, start + name.len()),
                            ));
                        }
                    } else if c.is_ascii_alphabetic() {
                        self.pos = start;
                        self.instruction(&mut out, errors);
                    } else {
                        self.pos = start;
                        self.by_grammar(&mut out, errors);
                    }
                }
                _ => self.by_grammar(&mut out, errors),
            }
        }
    }

    /// An instruction statement from the current position: its text runs
    /// to the `;`, stepping over `{...}` vectors (the grammar's
    /// `instruction` token).
    fn instruction(&mut self, out: &mut Vec<Statement>, errors: &mut Vec<Diagnostic>) {
        let start = self.pos;
        let mut i = start;
        let mut in_vector = false;
        let end = loop {
            match memchr::memchr3(b';', b'{', b'}', &self.b[i..]) {
                Some(k) => {
                    i += k;
                    match self.b[i] {
                        b';' if !in_vector => break Some(i),
                        b'{' if !in_vector => in_vector = true,
                        b'}' if in_vector => in_vector = false,
                        _ => break None,
                    }
                    i += 1;
                }
                None => break None,
            }
        };
        let Some(end) = end else {
            self.by_grammar(out, errors);
            return;
        };
        self.pos = end + 1;
        match super::inst::scan_into(
            &self.text[start..end],
            self.base + start as u32,
            &self.origin.copy,
            self.origin.off + start,
            out,
        ) {
            Ok(()) => {}
            Err(e) => push_error(errors, e),
        }
    }

    /// The statement at the current position, by the grammar's `stmt`
    /// rule: built when it parses, reported (and skipped up to its `;`,
    /// not across a brace) when it does not.
    fn by_grammar(&mut self, out: &mut Vec<Statement>, errors: &mut Vec<Diagnostic>) {
        let start = self.pos;
        let mut end = start;
        while end < self.b.len() && !matches!(self.b[end], b';' | b'{' | b'}') {
            if self.b[end] == b'"' {
                // Step over a string (`.pragma "...";`).
                end += 1;
                while end < self.b.len() && self.b[end] != b'"' {
                    end += if self.b[end] == b'\\' { 2 } else { 1 };
                }
                end = end.min(self.b.len() - 1);
            }
            end += 1;
        }
        if end < self.b.len() && self.b[end] == b';' {
            end += 1;
        }
        if end == start {
            // A brace is never handed here; step over one character.
            end = start + self.text[start..].chars().next().map_or(1, char::len_utf8);
        }
        let text = &self.text[start..end];
        let at = self.base + start as u32;
        // The grammar recurses on brackets (`mask(...)` in initializers).
        let mut depth = 0usize;
        for (k, c) in text.bytes().enumerate() {
            match c {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth > MAX_NESTING {
                let d = Diagnostic::error(
                    Span { start: at + k as u32, end: at + k as u32 + 1 },
                    format!("nesting deeper than {MAX_NESTING} levels"),
                );
                push_error(errors, d);
                self.pos = end;
                return;
            }
        }
        match PtxParser::parse(Rule::stmt, text) {
            Ok(mut pairs) => {
                let Some(st) = pairs.next() else {
                    self.pos = end;
                    return;
                };
                self.pos = start + st.as_span().end().max(1);
                with_base(at, || {
                    for item in st.into_inner() {
                        match item.as_rule() {
                            Rule::labelled => out.push(labelled(item)),
                            Rule::var_decl => match var_decl(item) {
                                Ok(d) => out.push(Statement::Decl(d)),
                                Err(e) => push_error(errors, e),
                            },
                            Rule::instruction => match instruction(item) {
                                Ok(i) => out.push(Statement::Inst(i)),
                                Err(e) => push_error(errors, e),
                            },
                            _ => {}
                        }
                    }
                });
            }
            Err(e) => {
                push_error(errors, shift(convert_error(text, e), at));
                self.pos = end;
            }
        }
    }
}
