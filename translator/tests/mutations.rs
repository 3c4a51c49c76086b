//! Mutated fixtures (bytes flipped, spans deleted or duplicated, PTX tokens
//! spliced in) go through the front end and the translator without a panic.
//! A deterministic, bounded complement to the cargo-fuzz target in `fuzz/`.

use ptxvk_translator::{check_syntax, translate, Options};

/// xorshift64*: deterministic pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: [&str; 24] = [
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ";",
    ",",
    ".",
    "@",
    "!",
    "|",
    "%r1",
    "0f3F800000",
    "-",
    "+",
    "ld.global.v4.f32",
    "{%r1, %r2}",
    "[%rd1+4]",
    ".reg .b32 %r<99>;",
    "L:",
    "//",
    "/*",
    "\"",
];

#[test]
fn mutated_fixtures_never_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut sources = Vec::new();
    for f in ["vector_add", "data_loop", "funcptr", "reduce_shared", "brx_idx", "types_mix"] {
        if let Ok(s) = std::fs::read(dir.join(format!("{f}.ptx"))) {
            sources.push(s);
        }
    }
    assert!(!sources.is_empty());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let rounds = std::env::var("PTXVK_MUTATION_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 400 } else { 4000 });
    for round in 0..rounds {
        let mut b = sources[round % sources.len()].clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(b.len());
            match rng.below(4) {
                0 => b[at] = rng.next() as u8,
                1 => {
                    let end = (at + rng.below(40)).min(b.len());
                    b.drain(at..end);
                }
                2 => {
                    let end = (at + rng.below(40)).min(b.len());
                    let piece = b[at..end].to_vec();
                    b.splice(at..at, piece);
                }
                _ => {
                    let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                    b.splice(at..at, t.iter().copied());
                }
            }
        }
        let Ok(src) = String::from_utf8(b) else { continue };
        if let Err(d) = translate(&src, "m.ptx", &Options::default()) {
            let _ = d.to_string();
        }
        let _ = check_syntax(&src, "m.ptx");
    }
}
