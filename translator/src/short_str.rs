//! [`Str`]: the names of the AST (opcodes, modifiers, registers, labels).
//!
//! A `String` per name was most of the parser's allocations (an 8 MB file
//! has about 700 000 names). A `Str` is a range of a shared text: the parser
//! makes one reference-counted copy of the source and every name it reads
//! is a range of that copy, so a name costs a reference-count increment
//! rather than an allocation. A name made elsewhere (`Str::new`) is a text
//! of its own. A `Str` is 16 bytes and reads like a `String`: it
//! derefs to `str`, compares with `str`, `&str` and `String`, hashes as a
//! `str` (so maps keyed by `Str` can be looked up with a `&str`) and has
//! `as_str`. It keeps its whole text alive (the source, for the parser's
//! names) as long as it lives.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// An immutable string: a range of a shared text (see the [module
/// documentation](self)).
#[derive(Clone)]
pub struct Str {
    /// An `Arc` of a `String` rather than of a `str`: a thin pointer, so
    /// that a `Str` is 16 bytes.
    text: Arc<String>,
    start: u32,
    end: u32,
}

impl Str {
    /// A copy of `s` (one allocation).
    pub fn new(s: &str) -> Str {
        Str::whole(Arc::new(s.to_string()))
    }

    /// All of `text`, shared.
    pub fn whole(text: Arc<String>) -> Str {
        let end = u32::try_from(text.len()).unwrap_or(u32::MAX);
        let s = Str { text, start: 0, end };
        if s.text.len() == end as usize {
            s
        } else {
            // Beyond 4 GiB (inputs are at most 1 GiB): a copy of the front.
            let mut cut = end as usize;
            while !s.text.is_char_boundary(cut) {
                cut -= 1;
            }
            Str::whole(Arc::new(s.text[..cut].to_string()))
        }
    }

    /// `text[start..end]`, sharing `text` (no allocation); a copy when the
    /// range is not within 4 GiB. A range that is not one of characters of
    /// `text` reads as the empty string.
    #[inline]
    pub fn slice(text: &Arc<String>, start: usize, end: usize) -> Str {
        match (u32::try_from(start), u32::try_from(end)) {
            (Ok(s), Ok(e)) => Str { text: text.clone(), start: s, end: e },
            _ => Str::new(text.get(start..end).unwrap_or("")),
        }
    }

    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        self.text.get(self.start as usize..self.end as usize).unwrap_or("")
    }
}

impl Default for Str {
    fn default() -> Str {
        Str::new("")
    }
}

impl Deref for Str {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Str {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Str {
        Str::new(s)
    }
}

impl From<&String> for Str {
    fn from(s: &String) -> Str {
        Str::new(s)
    }
}

impl From<String> for Str {
    fn from(s: String) -> Str {
        Str::whole(Arc::new(s))
    }
}

impl From<&Str> for String {
    fn from(s: &Str) -> String {
        s.as_str().to_string()
    }
}

impl From<Str> for String {
    fn from(s: Str) -> String {
        s.as_str().to_string()
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl Hash for Str {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl PartialEq for Str {
    #[inline]
    fn eq(&self, other: &Str) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Str {}

impl PartialOrd for Str {
    fn partial_cmp(&self, other: &Str) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Str {
    fn cmp(&self, other: &Str) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

macro_rules! eq_with {
    ($($t:ty),*) => {$(
        impl PartialEq<$t> for Str {
            #[inline]
            fn eq(&self, other: &$t) -> bool {
                self.as_str() == AsRef::<str>::as_ref(other)
            }
        }
        impl PartialEq<Str> for $t {
            #[inline]
            fn eq(&self, other: &Str) -> bool {
                AsRef::<str>::as_ref(self) == other.as_str()
            }
        }
    )*};
}

eq_with!(str, &str, String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_string() {
        for s in ["", "ld", "%rd12", "a".repeat(100).as_str(), "é€𝄞x"] {
            let x = Str::new(s);
            assert_eq!(x.as_str(), s);
            assert_eq!(x, s);
            assert_eq!(Str::from(s.to_string()), x);
            assert_eq!(format!("{x:?}"), format!("{s:?}"));
            assert_eq!(x.to_string(), s);
        }
        assert_eq!(std::mem::size_of::<Str>(), 16);
        let src = Arc::new("ld.global.u32 é".to_string());
        assert_eq!(Str::slice(&src, 3, 9), "global");
        assert_eq!(Str::slice(&src, 14, 15), "");
        assert_eq!(Str::slice(&src, 14, 16), "é");
        assert_eq!(Str::slice(&src, 10, 99), "");
        let mut m = std::collections::HashMap::new();
        m.insert(Str::new("%r1"), 1);
        assert_eq!(m.get("%r1"), Some(&1));
    }
}
#[cfg(test)]
mod sizes {
    /// The AST's memory is mostly instructions (a third of a byte of
    /// instruction per byte of PTX, 9x the input in all): a name is 16
    /// bytes, an operand 48, an instruction (three operands and three
    /// modifiers in place) 304.
    #[test]
    fn ast_node_sizes() {
        use crate::ast::{Instruction, Operand, Statement, Str};
        use std::mem::size_of;
        assert_eq!(size_of::<Str>(), 16);
        assert!(size_of::<Operand>() <= 48, "Operand is {} bytes", size_of::<Operand>());
        assert!(size_of::<Instruction>() <= 304, "Instruction is {} bytes", size_of::<Instruction>());
        assert_eq!(size_of::<Statement>(), size_of::<Instruction>());
    }
}
