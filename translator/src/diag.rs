//! Diagnostics: spans and rendered `file:line:col: error: ...` messages.

/// A byte range in the PTX source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// Start byte offset.
    pub start: u32,
    /// End byte offset (exclusive).
    pub end: u32,
}

/// Kind of a diagnostic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The input cannot be translated.
    Error,
    /// A note attached to the translation.
    Warning,
}

/// One diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Severity.
    pub severity: Severity,
    /// Where.
    pub span: Span,
    /// What.
    pub message: String,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(span: Span, message: impl Into<String>) -> Self {
        Diagnostic { severity: Severity::Error, span, message: message.into() }
    }
}

/// Most diagnostics reported for one input.
pub const MAX_DIAGNOSTICS: usize = 100;

/// Diagnostics of one translation, with the source needed to render them.
#[derive(Clone, Debug)]
pub struct Diagnostics {
    /// File name used in the rendered text.
    pub file_name: String,
    /// The diagnostics.
    pub items: Vec<Diagnostic>,
    line_starts: Vec<u32>,
    source_lines: Vec<String>,
}

impl Diagnostics {
    /// Diagnostics for `source`.
    pub fn new(file_name: &str, source: &str, mut items: Vec<Diagnostic>) -> Self {
        items.truncate(MAX_DIAGNOSTICS);
        let mut line_starts = vec![0u32];
        for (i, b) in source.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i as u32 + 1);
            }
        }
        let mut source_lines = Vec::new();
        for d in &items {
            let (line, _) = locate(&line_starts, d.span.start);
            let start = line_starts[line] as usize;
            let end = line_starts.get(line + 1).map(|&e| e as usize).unwrap_or(source.len());
            let text = source.get(start.min(source.len())..end.min(source.len())).unwrap_or("");
            source_lines.push(text.trim_end_matches(['\n', '\r']).to_string());
        }
        Diagnostics { file_name: file_name.to_string(), items, line_starts, source_lines }
    }

    /// A single diagnostic.
    pub fn single(file_name: &str, source: &str, d: Diagnostic) -> Self {
        Self::new(file_name, source, vec![d])
    }

    /// 1-based line and column of the first diagnostic.
    pub fn first_location(&self) -> Option<(usize, usize)> {
        self.items.first().map(|d| {
            let (l, c) = locate(&self.line_starts, d.span.start);
            (l + 1, c + 1)
        })
    }
}

fn locate(line_starts: &[u32], offset: u32) -> (usize, usize) {
    let line = match line_starts.binary_search(&offset) {
        Ok(i) => i,
        Err(i) => i.saturating_sub(1),
    };
    (line, (offset - line_starts[line]) as usize)
}

impl std::fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (d, text) in self.items.iter().zip(&self.source_lines) {
            let (line, col) = locate(&self.line_starts, d.span.start);
            let kind = match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            writeln!(f, "{}:{}:{}: {}: {}", self.file_name, line + 1, col + 1, kind, d.message)?;
            let text = text.replace('\t', " ");
            writeln!(f, "{text}")?;
            let width =
                ((d.span.end.saturating_sub(d.span.start)) as usize).clamp(1, text.len().saturating_sub(col).max(1));
            writeln!(f, "{}{}", " ".repeat(col), "^".repeat(width))?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}
