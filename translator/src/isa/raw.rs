//! The text layer of the instruction table: `ptx.isa` read into strings,
//! with no knowledge of the generated enums (so that the generator in
//! [`super::gen`] can run on a table whose enums are not generated yet).
//!
//! The format is documented at the top of `ptx.isa`.

/// One `inst` entry of the table.
#[derive(Clone, Debug)]
pub struct RawInst {
    /// The manual's name for the instruction (`cp.async.bulk.tensor`).
    pub name: &'static str,
    /// Least PTX ISA version (`8.0`), as written.
    pub ptx: &'static str,
    /// Least target (`90a`), as written.
    pub sm: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// Line of the `inst` keyword (1-based).
    pub line: usize,
    /// Blocks, separated by `---` in the table.
    pub blocks: Vec<RawBlock>,
}

/// A block: syntax lines sharing modifier groups and type rules.
#[derive(Clone, Debug, Default)]
pub struct RawBlock {
    /// Syntax lines (without the trailing `;`) with their line numbers.
    pub syntax: Vec<(&'static str, usize)>,
    /// Group definitions: names (without the dot) and alternatives, each a
    /// list of modifier words (without dots).
    pub groups: Vec<RawGroup>,
    /// Type rules: operand name and spec text.
    pub types: Vec<(&'static str, &'static str)>,
}

/// A `.name = { ... };` definition.
#[derive(Clone, Debug)]
pub struct RawGroup {
    /// Names defined (`dtype`, `atype` for `.dtype = .atype = {...}`).
    pub names: Vec<String>,
    /// Alternatives, each a sequence of modifier words.
    pub alternatives: Vec<Vec<String>>,
    /// Line of the definition.
    pub line: usize,
}

/// A table error, with its line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableError {
    /// 1-based line in `ptx.isa`.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ptx.isa:{}: {}", self.line, self.message)
    }
}

/// Read the table text.
pub fn parse(text: &'static str) -> (Vec<RawInst>, Vec<TableError>) {
    let mut insts: Vec<RawInst> = Vec::new();
    let mut errors = Vec::new();
    let lines: Vec<&'static str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line_no = i + 1;
        let line = strip_comment(lines[i]).trim();
        i += 1;
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("inst ") {
            match inst_header(rest, line_no) {
                Ok(inst) => insts.push(inst),
                Err(e) => errors.push(e),
            }
            continue;
        }
        let Some(inst) = insts.last_mut() else {
            errors.push(TableError { line: line_no, message: "text before the first 'inst'".into() });
            continue;
        };
        if inst.blocks.is_empty() {
            inst.blocks.push(RawBlock::default());
        }
        if line == "---" {
            inst.blocks.push(RawBlock::default());
            continue;
        }
        let block = inst.blocks.last_mut().expect("a block was pushed above");
        if let Some(rest) = line.strip_prefix("types ") {
            types_line(rest, line_no, block, &mut errors);
            continue;
        }
        if line.starts_with('.') && line.contains('=') {
            // A group definition, possibly continued until its closing brace.
            let mut def = line.to_string();
            while !def.contains('}') && i < lines.len() {
                def.push(' ');
                def.push_str(strip_comment(lines[i]).trim());
                i += 1;
            }
            match group_def(&def, line_no) {
                Ok(g) => block.groups.push(g),
                Err(e) => errors.push(e),
            }
            continue;
        }
        let Some(syntax) = line.strip_suffix(';') else {
            errors.push(TableError { line: line_no, message: format!("syntax line without ';': {line}") });
            continue;
        };
        block.syntax.push((syntax.trim_end(), line_no));
    }
    for inst in &insts {
        if inst.blocks.iter().all(|b| b.syntax.is_empty()) {
            errors.push(TableError { line: inst.line, message: format!("'{}' has no syntax line", inst.name) });
        }
    }
    (insts, errors)
}

fn strip_comment(line: &'static str) -> &'static str {
    match line.find('#') {
        Some(p) => &line[..p],
        None => line,
    }
}

fn inst_header(rest: &'static str, line: usize) -> Result<RawInst, TableError> {
    let err = |m: &str| TableError { line, message: m.to_string() };
    let (head, description) = match rest.find('"') {
        Some(q) => (&rest[..q], rest[q + 1..].trim_end().trim_end_matches('"')),
        None => return Err(err("'inst' line without a quoted description")),
    };
    let mut words = head.split_whitespace();
    let name = words.next().ok_or_else(|| err("'inst' without a name"))?;
    let mut ptx = "";
    let mut sm = "";
    for w in words {
        if let Some(v) = w.strip_prefix("ptx=") {
            ptx = v;
        } else if let Some(v) = w.strip_prefix("sm=") {
            sm = v;
        } else {
            return Err(err(&format!("unknown 'inst' attribute '{w}'")));
        }
    }
    Ok(RawInst { name, ptx, sm, description, line, blocks: Vec::new() })
}

fn types_line(rest: &'static str, line: usize, block: &mut RawBlock, errors: &mut Vec<TableError>) {
    let rest = rest.trim().trim_end_matches(';');
    for item in rest.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        match item.split_once(':') {
            Some((name, spec)) => block.types.push((name.trim(), spec.trim())),
            None => errors.push(TableError { line, message: format!("type rule without ':': {item}") }),
        }
    }
}

fn group_def(def: &str, line: usize) -> Result<RawGroup, TableError> {
    let err = |m: String| TableError { line, message: m };
    let open = def.find('{').ok_or_else(|| err(format!("group definition without '{{': {def}")))?;
    let close = def.rfind('}').ok_or_else(|| err(format!("group definition without '}}': {def}")))?;
    let mut names = Vec::new();
    for n in def[..open].split('=') {
        let n = n.trim();
        if n.is_empty() {
            continue;
        }
        let Some(n) = n.strip_prefix('.') else {
            return Err(err(format!("group name without a dot: {n}")));
        };
        names.push(n.to_string());
    }
    if names.is_empty() {
        return Err(err("group definition without a name".into()));
    }
    let mut alternatives = Vec::new();
    for alt in def[open + 1..close].split(',') {
        let alt = alt.trim();
        if alt.is_empty() {
            continue;
        }
        let Some(body) = alt.strip_prefix('.') else {
            return Err(err(format!("alternative without a dot: {alt}")));
        };
        for expanded in expand_range(body).map_err(err)? {
            let words: Vec<String> = expanded.split('.').map(str::to_string).collect();
            if words.iter().any(|w| w.is_empty() || !w.chars().all(is_word_char)) {
                return Err(err(format!("bad alternative '.{expanded}'")));
            }
            alternatives.push(words);
        }
    }
    if alternatives.is_empty() {
        return Err(err("empty group".into()));
    }
    Ok(RawGroup { names, alternatives, line })
}

/// Characters of a modifier word.
pub fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Expand one `[from:to:step]` range in an alternative
/// (`m64n[8:256:8]k16` → `m64n8k16`, `m64n16k16`, ...).
fn expand_range(s: &str) -> Result<Vec<String>, String> {
    let Some(open) = s.find('[') else { return Ok(vec![s.to_string()]) };
    let close = s[open..].find(']').map(|c| c + open).ok_or_else(|| format!("unclosed range in '{s}'"))?;
    let parts: Vec<u32> = s[open + 1..close]
        .split(':')
        .map(|p| p.trim().parse::<u32>().map_err(|_| format!("bad range in '{s}'")))
        .collect::<Result<_, _>>()?;
    let [from, to, step] = parts.as_slice() else { return Err(format!("a range needs from:to:step in '{s}'")) };
    if *step == 0 || from > to {
        return Err(format!("empty range in '{s}'"));
    }
    let mut out = Vec::new();
    let mut v = *from;
    while v <= *to {
        out.push(format!("{}{}{}", &s[..open], v, &s[close + 1..]));
        v += step;
    }
    Ok(out)
}

/// One element of a syntax line's opcode template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawElem {
    /// `.word` that names no group: a literal modifier (in braces it may
    /// be several words, `{.xorsign.abs}`).
    Fixed(String),
    /// `.group`: one of the group's alternatives.
    Group(&'static str),
    /// `{.a,.b}`: an inline list of alternatives.
    Inline(Vec<String>),
}

/// The opcode part of a syntax line: opcode word and template elements
/// (each with whether it is optional).
pub fn template(mnemonic: &str) -> Result<(String, Vec<(RawElem, bool)>), String> {
    let b = mnemonic.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i] != b'.' && b[i] != b'{' {
        i += 1;
    }
    let opcode = mnemonic[..i].to_string();
    if opcode.is_empty() || !opcode.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("bad opcode in '{mnemonic}'"));
    }
    let mut elems = Vec::new();
    while i < b.len() {
        match b[i] {
            b'.' => {
                let start = i + 1;
                i = start;
                while i < b.len() && is_word_char(b[i] as char) {
                    i += 1;
                }
                if start == i {
                    return Err(format!("empty modifier in '{mnemonic}'"));
                }
                elems.push((RawElem::Fixed(mnemonic[start..i].to_string()), false));
            }
            b'{' => {
                let close =
                    mnemonic[i..].find('}').map(|c| c + i).ok_or_else(|| format!("unclosed '{{' in '{mnemonic}'"))?;
                let inner = &mnemonic[i + 1..close];
                let words: Vec<String> =
                    inner.split(',').map(|w| w.trim().trim_start_matches('.').to_string()).collect();
                if words.iter().any(|w| w.split('.').any(|p| p.is_empty() || !p.chars().all(is_word_char))) {
                    return Err(format!("bad optional modifier '{{{inner}}}' in '{mnemonic}'"));
                }
                if words.len() == 1 {
                    elems.push((RawElem::Fixed(words[0].clone()), true));
                } else {
                    elems.push((RawElem::Inline(words), true));
                }
                i = close + 1;
            }
            _ => return Err(format!("unexpected '{}' in '{mnemonic}'", b[i] as char)),
        }
    }
    Ok((opcode, elems))
}

/// Where an operand may appear and what it looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A register, immediate, symbol or vector (`d`, `a`).
    Plain,
    /// A memory operand `[a]`.
    Memory,
    /// Texture or tensor coordinates `[a, b, c]` with `min..=max` elements.
    Bracket {
        /// Fewest elements.
        min: u8,
        /// Most elements.
        max: u8,
    },
    /// A brace-enclosed vector `{a, b}` of exactly this many elements.
    Vector(u8),
    /// A call list `(a, b)`.
    List,
    /// The literal `_`.
    Sink,
    /// A literal integer (`16` in `cp.async.cg`).
    Literal(i64),
}

/// One operand of a syntax line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawOperand {
    /// The manual's name (`d`, `a`, `cache-policy`).
    pub name: String,
    /// Its shape.
    pub shape: Shape,
    /// `{, x}`: may be left out.
    pub optional: bool,
    /// `p{|q}` (Some(false)) or `p|q` (Some(true)): a predicate pair.
    pub pair: Option<bool>,
    /// `{!}c` or `{-}a`.
    pub negatable: bool,
    /// `a{.asel}` (Some(false)) or `d.dsel` (Some(true)): a selector.
    pub selector: Option<bool>,
    /// `[a]{.unified}`.
    pub unified: bool,
}

/// Parse the operand part of a syntax line.
pub fn operands(text: &str) -> Result<Vec<RawOperand>, String> {
    let s = text.trim();
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= b.len() {
            break;
        }
        if s[i..].starts_with("{,") {
            // `{, x}`: an optional operand.
            let close = matching(s, i).ok_or_else(|| format!("unclosed '{{,' in '{s}'"))?;
            let mut inner = operands(&s[i + 2..close])?;
            for o in &mut inner {
                o.optional = true;
            }
            out.extend(inner);
            i = close + 1;
            skip_ws(&mut i);
            if i < b.len() && b[i] == b',' {
                i += 1;
            }
            continue;
        }
        let (op, next) = operand(s, i)?;
        out.push(op);
        i = next;
        skip_ws(&mut i);
        if i < b.len() && b[i] == b',' {
            i += 1;
        } else if i < b.len() && !s[i..].starts_with("{,") {
            return Err(format!("expected ',' at '{}' in '{s}'", &s[i..]));
        }
    }
    Ok(out)
}

fn matching(s: &str, open: usize) -> Option<usize> {
    let b = s.as_bytes();
    let (o, c) = match b[open] {
        b'{' => (b'{', b'}'),
        b'[' => (b'[', b']'),
        b'(' => (b'(', b')'),
        _ => return None,
    };
    let mut depth = 0;
    for (k, &ch) in b.iter().enumerate().skip(open) {
        if ch == o {
            depth += 1;
        } else if ch == c {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn operand(s: &str, mut i: usize) -> Result<(RawOperand, usize), String> {
    let b = s.as_bytes();
    let mut op = RawOperand {
        name: String::new(),
        shape: Shape::Plain,
        optional: false,
        pair: None,
        negatable: false,
        selector: None,
        unified: false,
    };
    if s[i..].starts_with("{!}") || s[i..].starts_with("{-}") {
        op.negatable = true;
        i += 3;
    }
    match b.get(i) {
        Some(b'[') => {
            let close = matching(s, i).ok_or_else(|| format!("unclosed '[' in '{s}'"))?;
            let inner = &s[i + 1..close];
            let total = inner.split(',').filter(|p| !p.trim().is_empty()).count();
            let optional = inner.matches("{").count();
            let first = inner.split(',').next().unwrap_or("").trim();
            op.name = first.trim_start_matches('{').to_string();
            op.shape = if total == 1 {
                Shape::Memory
            } else {
                Shape::Bracket { min: (total - optional) as u8, max: total as u8 }
            };
            i = close + 1;
            if s[i..].starts_with("{.unified}") {
                op.unified = true;
                i += "{.unified}".len();
            }
        }
        Some(b'(') => {
            let close = matching(s, i).ok_or_else(|| format!("unclosed '(' in '{s}'"))?;
            op.name = s[i + 1..close].trim().to_string();
            op.shape = Shape::List;
            i = close + 1;
        }
        Some(b'{') => {
            let close = matching(s, i).ok_or_else(|| format!("unclosed '{{' in '{s}'"))?;
            let inner = &s[i + 1..close];
            let n = inner.split(',').count();
            op.name = inner.split(',').next().unwrap_or("").trim().to_string();
            op.shape = Shape::Vector(n as u8);
            i = close + 1;
        }
        Some(_) => {
            let start = i;
            while i < b.len() && is_name_char(b[i]) {
                i += 1;
            }
            if start == i {
                return Err(format!("expected an operand at '{}' in '{s}'", &s[start..]));
            }
            op.name = s[start..i].to_string();
            if op.name == "_" {
                op.shape = Shape::Sink;
            } else if let Ok(v) = op.name.parse::<i64>() {
                op.shape = Shape::Literal(v);
            }
        }
        None => return Err(format!("missing operand in '{s}'")),
    }
    // Suffixes: `{|q}`, `|q`, `{.asel}`, `.dsel`.
    loop {
        if s[i..].starts_with("{|") {
            let close = matching(s, i).ok_or_else(|| format!("unclosed '{{|' in '{s}'"))?;
            op.pair = Some(false);
            i = close + 1;
        } else if s[i..].starts_with('|') {
            i += 1;
            while i < b.len() && is_name_char(b[i]) {
                i += 1;
            }
            op.pair = Some(true);
        } else if s[i..].starts_with("{.") {
            let close = matching(s, i).ok_or_else(|| format!("unclosed '{{.' in '{s}'"))?;
            op.selector = Some(false);
            i = close + 1;
        } else if s[i..].starts_with('.') {
            i += 1;
            while i < b.len() && is_name_char(b[i]) {
                i += 1;
            }
            op.selector = Some(true);
        } else {
            break;
        }
    }
    Ok((op, i))
}
