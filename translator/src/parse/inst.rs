//! The instruction scanner: the text of one instruction statement
//! (`@!%p1 ld.global.v2.f32 {%f1, %f2}, [%rd1+8]`, without its `;`) into an
//! [`Instruction`].
//!
//! The pest grammar delimits instruction statements (one atomic token each,
//! found with a memchr skip); their insides are scanned here by hand,
//! because nine tenths of a PTX file are instructions and a pest rule per
//! operand costs more than everything else in the front end together. The
//! accepted syntax is the ISA's generic instruction form:
//!
//! ```text
//! instruction := ('@' '!'? ident)? opcode (operand (',' operand)*)?
//! opcode      := alpha (alnum | '_')* ('.' (alnum | '_' | ':')+)*
//! operand     := '_' ('|' ident)?                      sink
//!              | ident ('.' component | '.' selector)? ('|' ident | ('+'|'-') int)?
//!              | ident '[' int (('+'|'-') int)* ']'    array element
//!              | '[' (ident | int) (('+'|'-') (int | ident))* ']' ('.unified')?
//!              | '[' address ',' '{' operand (',' operand)* '}' ']'   tensor address
//!              | '[' operand (',' operand)+ ']'          texture coordinates with a sampler
//!              | '{' operand (',' operand)* '}' ('|' ident)?
//!              | '(' (operand (',' operand)*)? ')'
//!              | '!' ident | '-' ident | float | int
//! ```
//!
//! Whitespace and comments may appear between tokens. Errors name the
//! offending token and what was expected, with its span.

use super::{parse_float, parse_int};
use crate::ast::{Address, Guard, Instruction, Modifiers, Operand, Operands, Statement, Str};
use crate::diag::{Diagnostic, Span};
use std::sync::Arc;

/// Scan one instruction; `text` starts at byte `base` of the source.
/// Names are taken from `copy`, a copy of the source in which `text` starts
/// at byte `off` (see [`super::Origin`]).
pub(super) fn scan(text: &str, base: u32, copy: &Arc<String>, off: usize) -> Result<Instruction, Diagnostic> {
    let mut out = Vec::with_capacity(1);
    scan_into(text, base, copy, off, &mut out)?;
    match out.pop() {
        Some(Statement::Inst(i)) => Ok(i),
        _ => Err(Diagnostic::error(Span { start: base, end: base + 1 }, "internal error: no instruction scanned")),
    }
}

/// [`scan`], pushing the instruction to `out` (built in place there, not
/// moved through return values: an instruction is 300 bytes).
pub(super) fn scan_into(
    text: &str,
    base: u32,
    copy: &Arc<String>,
    off: usize,
    out: &mut Vec<Statement>,
) -> Result<(), Diagnostic> {
    let mut s = Scanner { b: text.as_bytes(), text, pos: 0, base, depth: 0, copy, off };
    s.instruction(out)
}

struct Scanner<'a> {
    b: &'a [u8],
    text: &'a str,
    pos: usize,
    base: u32,
    /// Brackets open around the current operand (at most
    /// [`super::MAX_NESTING`]: the scanner recurses on them).
    depth: usize,
    /// Where `text` lies in the shared copy of the source.
    copy: &'a Arc<String>,
    off: usize,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c == b'%'
}

fn is_ident_char(c: u8) -> bool {
    IDENT_CHAR[c as usize]
}

/// The bytes of a name after its first: ASCII letters, digits, `_`, `$`.
pub(super) static IDENT_CHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
        c += 1;
    }
    t
};

/// The end of the run of name characters in `b` from `from`.
pub(super) fn ident_end(b: &[u8], from: usize) -> usize {
    b[from..].iter().position(|&c| !IDENT_CHAR[c as usize]).map_or(b.len(), |k| from + k)
}

impl<'a> Scanner<'a> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span { start: self.base + start as u32, end: self.base + end as u32 }
    }

    /// `text[start..end]`, shared with the source.
    fn str(&self, start: usize, end: usize) -> Str {
        Str::slice(self.copy, self.off + start, self.off + end)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Whitespace and comments; the common case, none or one space before
    /// a name, inline.
    #[inline(always)]
    fn ws(&mut self) {
        match self.b.get(self.pos) {
            Some(&c) if c > b' ' && c != b'/' => {}
            Some(b' ') if self.b.get(self.pos + 1).is_some_and(|&c| c > b' ' && c != b'/') => self.pos += 1,
            None => {}
            _ => self.ws_slow(),
        }
    }

    #[inline(never)]
    fn ws_slow(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b'/' if self.b.get(self.pos + 1) == Some(&b'/') => {
                    while self.pos < self.b.len() && self.b[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                b'/' if self.b.get(self.pos + 1) == Some(&b'*') => match self.text[self.pos + 2..].find("*/") {
                    Some(k) => self.pos += 2 + k + 2,
                    None => self.pos = self.b.len(),
                },
                _ => break,
            }
        }
    }

    /// An error at the current token, saying what was expected.
    fn expected(&self, what: &str) -> Diagnostic {
        let start = self.pos;
        let mut end = start;
        while end < self.b.len() && !self.b[end].is_ascii_whitespace() && !matches!(self.b[end], b',' | b';') {
            end += 1;
        }
        if end == start && end < self.b.len() {
            end += 1;
        }
        // Keep the end on a character boundary.
        while end < self.b.len() && !self.text.is_char_boundary(end) {
            end += 1;
        }
        let found = &self.text[start..end];
        let msg = if found.is_empty() {
            format!("syntax error: expected {what}")
        } else {
            format!("syntax error at '{found}': expected {what}")
        };
        Diagnostic::error(self.span(start, end.max(start + 1)), msg)
    }

    fn ident(&mut self) -> Option<Str> {
        let start = self.pos;
        if !self.peek().is_some_and(is_ident_start) {
            return None;
        }
        self.pos = ident_end(self.b, self.pos + 1);
        Some(self.str(start, self.pos))
    }

    fn instruction(&mut self, out: &mut Vec<Statement>) -> Result<(), Diagnostic> {
        self.ws();
        let start = self.pos;
        let mut guard = None;
        if self.peek() == Some(b'@') {
            self.pos += 1;
            self.ws();
            let negated = self.peek() == Some(b'!');
            if negated {
                self.pos += 1;
                self.ws();
            }
            let Some(name) = self.ident() else { return Err(self.expected("a predicate after '@'")) };
            guard = Some(Guard { span: self.span(start, self.pos), negated, name });
            self.ws();
        }
        let op_start = self.pos;
        if !self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            return Err(self.expected("an instruction"));
        }
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
            self.pos += 1;
        }
        let opcode = self.str(op_start, self.pos);
        let mut modifiers = Modifiers::new();
        while self.peek() == Some(b'.') {
            let m_start = self.pos + 1;
            self.pos += 1;
            while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':') {
                self.pos += 1;
            }
            if self.pos == m_start {
                return Err(self.expected("a modifier after '.'"));
            }
            modifiers.push(self.str(m_start, self.pos));
        }
        let opcode_span = self.span(op_start, self.pos);
        let mut end = self.pos;
        if self.peek().is_some_and(|c| !c.is_ascii_whitespace() && c != b'/') {
            return Err(self.expected("whitespace after the opcode"));
        }
        self.ws();
        let mut operands = Operands::new();
        if self.pos < self.b.len() {
            loop {
                operands.push(self.operand()?);
                end = self.pos;
                self.ws();
                match self.peek() {
                    None => break,
                    Some(b',') => {
                        self.pos += 1;
                        self.ws();
                    }
                    Some(_) => return Err(self.expected("',' or ';'")),
                }
            }
        }
        let span = self.span(start, end);
        out.push(Statement::Inst(Instruction { span, guard, opcode_span, opcode, modifiers, operands, decoded: None }));
        Ok(())
    }

    /// A list of operands up to `close`; the opening bracket is consumed.
    fn list(&mut self, close: u8, allow_empty: bool) -> Result<Vec<Operand>, Diagnostic> {
        self.depth += 1;
        let r = self.list_items(close, allow_empty);
        self.depth -= 1;
        r
    }

    fn list_items(&mut self, close: u8, allow_empty: bool) -> Result<Vec<Operand>, Diagnostic> {
        if self.depth > super::MAX_NESTING {
            let msg = format!("nesting deeper than {} levels", super::MAX_NESTING);
            return Err(Diagnostic::error(self.span(self.pos.saturating_sub(1), self.pos), msg));
        }
        let mut v = Vec::new();
        self.ws();
        if allow_empty && self.peek() == Some(close) {
            self.pos += 1;
            return Ok(v);
        }
        loop {
            v.push(self.operand()?);
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(v);
                }
                _ => return Err(self.expected(&format!("',' or '{}'", close as char))),
            }
        }
    }

    fn operand(&mut self) -> Result<Operand, Diagnostic> {
        let start = self.pos;
        let Some(c) = self.peek() else { return Err(self.expected("an operand")) };
        let op = match c {
            b'_' if !self.b.get(self.pos + 1).is_some_and(|&c| is_ident_char(c)) => {
                self.pos += 1;
                // `_|p` (`lop3.BoolOp` with the word result discarded,
                // `elect.sync _|p, mask`).
                return self.pair_tail(start, Operand::Sink(self.span(start, self.pos)));
            }
            c if is_ident_start(c) => return self.name_operand(),
            b'[' => return self.bracket(),
            b'{' => {
                self.pos += 1;
                let v = self.list(b'}', false)?;
                let vec = Operand::Vector(self.span(start, self.pos), v);
                return self.pair_tail(start, vec);
            }
            b'(' => {
                self.pos += 1;
                let v = self.list(b')', true)?;
                Operand::List(self.span(start, self.pos), v)
            }
            b'!' => {
                self.pos += 1;
                self.ws();
                let inner = self.pos;
                if !self.peek().is_some_and(is_ident_start) {
                    return Err(self.expected("a predicate after '!'"));
                }
                let op = self.name_only(inner)?;
                Operand::Not(self.span(start, self.pos), Box::new(op))
            }
            b'-' if self.b.get(self.pos + 1).is_some_and(|&c| !c.is_ascii_digit()) => {
                self.pos += 1;
                self.ws();
                let inner = self.pos;
                if !self.peek().is_some_and(is_ident_start) {
                    return Err(self.expected("a register after '-'"));
                }
                let op = self.name_only(inner)?;
                Operand::Neg(self.span(start, self.pos), Box::new(op))
            }
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return Err(self.expected("an operand")),
        };
        Ok(op)
    }

    /// A name with an optional component or selector, no tails.
    fn name_only(&mut self, start: usize) -> Result<Operand, Diagnostic> {
        let Some(name) = self.ident() else { return Err(self.expected("a name")) };
        if self.peek() == Some(b'.') {
            let s = self.pos + 1;
            let mut e = s;
            while e < self.b.len() && is_ident_char(self.b[e]) {
                e += 1;
            }
            let suffix = &self.text[s..e];
            let component = match suffix {
                // Colour names are aliases of the vector components (6.4.3).
                "x" | "r" => Some(b'x'),
                "y" | "g" => Some(b'y'),
                "z" | "b" => Some(b'z'),
                "w" | "a" => Some(b'w'),
                _ => None,
            };
            let selector = suffix.len() > 1
                && matches!(suffix.as_bytes()[0], b'b' | b'h')
                && suffix[1..].bytes().all(|c| c.is_ascii_digit());
            if component.is_some() || selector {
                self.pos = e;
                let span = self.span(start, self.pos);
                return Ok(if selector {
                    let base = Operand::Name { span, name, component: None };
                    Operand::Select { span, base: Box::new(base), selector: self.str(s, e) }
                } else {
                    Operand::Name { span, name, component }
                });
            }
            return Err(self.expected("a vector component (.x, .y, .z, .w) or a selector"));
        }
        Ok(Operand::Name { span: self.span(start, self.pos), name, component: None })
    }

    fn name_operand(&mut self) -> Result<Operand, Diagnostic> {
        let start = self.pos;
        let op = self.name_only(start)?;
        // `var+4` / `var-4`.
        let save = self.pos;
        self.ws();
        match self.peek() {
            Some(sign @ (b'+' | b'-')) => {
                self.pos += 1;
                self.ws();
                let n = self.int_literal()?;
                let n = if sign == b'-' { n.wrapping_neg() } else { n };
                let Operand::Name { name, component: None, .. } = op else {
                    return Err(Diagnostic::error(
                        self.span(start, self.pos),
                        "only a variable name may take an offset",
                    ));
                };
                Ok(Operand::SymbolOffset(self.span(start, self.pos), name, n))
            }
            Some(b'|') => {
                self.pos = save;
                self.pair_tail(start, op)
            }
            // `var[imm]`: an array element (6.4.2, "Arrays as Operands").
            Some(b'[') => {
                let Operand::Name { name, component: None, .. } = op else {
                    return Err(Diagnostic::error(self.span(start, self.pos), "only a variable may be indexed"));
                };
                self.pos += 1;
                self.ws();
                let mut index = self.int_literal()?;
                loop {
                    self.ws();
                    match self.peek() {
                        Some(b']') => break,
                        Some(sign @ (b'+' | b'-')) => {
                            self.pos += 1;
                            self.ws();
                            let n = self.int_literal()?;
                            index = if sign == b'-' { index.wrapping_sub(n) } else { index.wrapping_add(n) };
                        }
                        _ => return Err(self.expected("']' after an array index")),
                    }
                }
                self.pos += 1;
                Ok(Operand::ArrayElement(self.span(start, self.pos), name, index))
            }
            _ => {
                self.pos = save;
                Ok(op)
            }
        }
    }

    /// `p|q`: the operand so far becomes the first of a pair.
    fn pair_tail(&mut self, start: usize, first: Operand) -> Result<Operand, Diagnostic> {
        let save = self.pos;
        self.ws();
        if self.peek() != Some(b'|') {
            self.pos = save;
            return Ok(first);
        }
        self.pos += 1;
        self.ws();
        let q_start = self.pos;
        let Some(q) = self.ident() else { return Err(self.expected("a predicate after '|'")) };
        let q = Operand::Name { span: self.span(q_start, self.pos), name: q, component: None };
        Ok(Operand::Pair(self.span(start, self.pos), Box::new(first), Box::new(q)))
    }

    /// An integer literal with an optional leading '-', as a wrapping i64.
    fn int_literal(&mut self) -> Result<i64, Diagnostic> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
            self.pos += 1;
        }
        let text = &self.text[start..self.pos];
        let span = self.span(start, self.pos.max(start + 1));
        let v = parse_int(text).ok_or_else(|| Diagnostic::error(span, format!("bad integer literal '{text}'")))?;
        i64::try_from(v)
            .or_else(|_| u64::try_from(v).map(|u| u as i64))
            .map_err(|_| Diagnostic::error(span, format!("integer literal '{text}' out of range")))
    }

    /// An integer or floating-point constant.
    fn number(&mut self) -> Result<Operand, Diagnostic> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == b'.') {
            self.pos += 1;
        }
        // Exponent signs: `1.5e-3`.
        while matches!(self.peek(), Some(b'+' | b'-'))
            && matches!(self.b[self.pos - 1], b'e' | b'E')
            && !self.text[start..].starts_with("0x")
            && !self.text[start..].starts_with("0X")
        {
            self.pos += 1;
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1;
            }
        }
        let text = &self.text[start..self.pos];
        let span = self.span(start, self.pos);
        let unsigned = text.strip_prefix('-').unwrap_or(text);
        let float_bits = |p: &str, n: usize| {
            unsigned.len() == 2 + n && (unsigned.starts_with(p) || unsigned.starts_with(&p.to_ascii_uppercase()))
        };
        let is_float = float_bits("0f", 8)
            || float_bits("0d", 16)
            || (!unsigned.starts_with("0x")
                && !unsigned.starts_with("0X")
                && (unsigned.contains('.') || unsigned.contains(['e', 'E'])));
        if is_float {
            if text.starts_with('-') && (float_bits("0f", 8) || float_bits("0d", 16)) {
                return Err(Diagnostic::error(span, format!("bad float literal '{text}'")));
            }
            return match parse_float(text) {
                Some(f) => Ok(Operand::Float(span, f)),
                None => Err(Diagnostic::error(span, format!("bad float literal '{text}'"))),
            };
        }
        match parse_int(text) {
            Some(v) => Ok(Operand::Int(span, v)),
            None => Err(Diagnostic::error(span, format!("bad integer literal '{text}'"))),
        }
    }

    /// `[base+off]` (an address), `[tensorMap, {c0, c1}]` (a tensor address,
    /// also texture and surface coordinates) or `[a, b, ...]` (a list).
    fn bracket(&mut self) -> Result<Operand, Diagnostic> {
        let start = self.pos;
        self.pos += 1;
        self.ws();
        match self.address_body()? {
            (addr, false) => {
                let mut op = Operand::Address(self.span(start, self.pos), addr);
                if self.text[self.pos..].starts_with(".unified")
                    && !self.b.get(self.pos + 8).is_some_and(|&c| is_ident_char(c))
                {
                    self.pos += 8;
                    op = Operand::Select {
                        span: self.span(start, self.pos),
                        base: Box::new(op),
                        selector: self.str(self.pos - 7, self.pos),
                    };
                }
                return Ok(op);
            }
            (addr, true) => {
                // `[a, {..}]`: an address and coordinates.
                let save = self.pos;
                self.pos += 1;
                self.ws();
                if self.peek() == Some(b'{') {
                    self.pos += 1;
                    let coords = self.list(b'}', false)?;
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        return Ok(Operand::TensorAddress(self.span(start, self.pos), Box::new(addr), coords));
                    }
                }
                self.pos = save;
            }
        }
        self.pos = start + 1;
        let v = self.list(b']', false)?;
        if v.len() < 2 {
            return Err(Diagnostic::error(self.span(start, self.pos), "expected an address or a list of two or more"));
        }
        Ok(Operand::Bracket(self.span(start, self.pos), v))
    }

    /// The inside of `[...]` up to `]` (consumed) or a `,` (not consumed):
    /// the address and whether a comma follows it.
    fn address_body(&mut self) -> Result<(Address, bool), Diagnostic> {
        let mut base = None;
        let mut offset: i64 = 0;
        let first = self.pos;
        match self.peek() {
            Some(c) if is_ident_start(c) => {
                let name = self.ident().unwrap_or_default();
                base = Some((self.span(first, self.pos), name));
            }
            Some(b'-' | b'0'..=b'9') => offset = self.int_literal()?,
            _ => return Err(self.expected("an address")),
        }
        loop {
            self.ws();
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    return Ok((Address { base, offset }, false));
                }
                Some(b',') => return Ok((Address { base, offset }, true)),
                Some(sign @ (b'+' | b'-')) => {
                    self.pos += 1;
                    self.ws();
                    let at = self.pos;
                    match self.peek() {
                        Some(c) if is_ident_start(c) => {
                            let name = self.ident().unwrap_or_default();
                            let span = self.span(at, self.pos);
                            if base.is_some() {
                                return Err(Diagnostic::error(span, "an address may add only constants to its base"));
                            }
                            if sign == b'-' {
                                return Err(Diagnostic::error(span, "an address cannot subtract a register"));
                            }
                            base = Some((span, name));
                        }
                        Some(b'-' | b'0'..=b'9') => {
                            let v = self.int_literal()?;
                            offset = offset.wrapping_add(if sign == b'-' { v.wrapping_neg() } else { v });
                        }
                        _ => return Err(self.expected("a constant offset")),
                    }
                }
                _ => return Err(self.expected("'+', '-' or ']'")),
            }
        }
    }
}
