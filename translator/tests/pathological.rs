//! Pathological inputs finish with a result or a diagnostic, in bounded
//! time and memory: deep nesting, a million registers, huge arrays and
//! initializers, a very large file, very long lines.
//!
//! Memory is the growth of the process's peak resident set (`VmHWM` in
//! `/proc/self/status`, reset through `/proc/self/clear_refs`) while the
//! case runs; the cases run one at a time under a lock. The large-file case
//! generates 100 MB of PTX under `cargo test --release` and 4 MB in debug
//! builds (`PTXVK_BIG_MB` overrides); its bounds are per byte of input.

use ptxvk_translator::{check_syntax, translate, Options};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static LOCK: Mutex<()> = Mutex::new(());

/// Whether this is an optimized build (bounds are looser in debug builds).
const RELEASE: bool = !cfg!(debug_assertions);

fn status_kb(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Run `f`, returning its result, its time and how far it raised the peak
/// resident set (bytes; `None` where the kernel does not say).
fn measure<T>(what: &str, f: impl FnOnce() -> T) -> (T, Duration, Option<u64>) {
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_kb("VmRSS:");
    let start = Instant::now();
    let out = f();
    let time = start.elapsed();
    let peak = status_kb("VmHWM:");
    let grew = match (reset, before, peak) {
        (true, Some(b), Some(p)) => Some(p.saturating_sub(b) * 1024),
        _ => None,
    };
    eprintln!(
        "{what}: {:.2} s, peak +{} MiB",
        time.as_secs_f64(),
        grew.map_or("?".to_string(), |g| (g >> 20).to_string())
    );
    (out, time, grew)
}

fn head() -> &'static str {
    ".version 8.0\n.target sm_80\n.address_size 64\n"
}

fn kernel(body: &str) -> String {
    format!("{}.visible .entry k(.param .u64 p)\n{{\n{body}\n    ret;\n}}\n", head())
}

fn message(r: &Result<ptxvk_translator::Translation, ptxvk_translator::Diagnostics>) -> String {
    match r {
        Ok(_) => "ok".to_string(),
        Err(d) => d.items.first().map(|i| i.message.clone()).unwrap_or_default(),
    }
}

#[test]
fn deep_nesting_is_rejected_quickly() {
    let _g = LOCK.lock();
    for open in ["{", "(", "["] {
        let src = kernel(&open.repeat(200_000));
        let (r, t, _) = measure(&format!("200000 x '{open}'"), || translate(&src, "k.ptx", &Options::default()));
        assert!(message(&r).contains("nesting deeper than"), "{}", message(&r));
        assert!(t < Duration::from_secs(5));
    }
    // Nesting within the limit: 150 nested scopes, each declaring and using a register.
    let mut body = String::new();
    for i in 0..150 {
        body.push_str(&format!("{{ .reg .b32 %n{i}; mov.u32 %n{i}, {i};\n"));
    }
    body.push_str(&"}".repeat(150));
    let src = kernel(&body);
    let (r, t, _) = measure("150 nested scopes", || translate(&src, "k.ptx", &Options::default()));
    assert!(r.is_ok(), "{}", message(&r));
    assert!(t < Duration::from_secs(30));
    // Nested vectors inside an instruction.
    let src = kernel(&format!("    mov.b32 %r1, {}%r2{};", "{".repeat(150), "}".repeat(150)));
    let (r, _, _) = measure("150 nested vectors", || translate(&src, "k.ptx", &Options::default()));
    assert!(r.is_err());
}

#[test]
fn a_million_registers() {
    let _g = LOCK.lock();
    let src = kernel("    .reg .b32 %r<1000000>;\n    add.u32 %r999999, %r0, 1;\n    mov.u32 %r0, %r999999;");
    let (r, _, _) = measure("10^6 registers, parse+check", || check_syntax(&src, "k.ptx"));
    assert!(r.is_ok(), "{r:?}");
    let (r, t, mem) = measure("10^6 registers, translate", || translate(&src, "k.ptx", &Options::default()));
    assert!(r.is_ok(), "{}", message(&r));
    assert!(t < Duration::from_secs(if RELEASE { 30 } else { 120 }));
    if let Some(m) = mem {
        assert!(m < 2 << 30, "{} MiB", m >> 20);
    }
    // Past the translator's limit: a diagnostic, not an allocation.
    let src = kernel("    .reg .b32 %r<4000000000>;\n    mov.u32 %r0, 1;");
    let (r, t, mem) = measure("4*10^9 registers", || translate(&src, "k.ptx", &Options::default()));
    assert!(r.is_err());
    assert!(t < Duration::from_secs(5));
    if let Some(m) = mem {
        assert!(m < 64 << 20, "{} MiB", m >> 20);
    }
    // A use past the declared count is an unknown name.
    let src = kernel("    .reg .b32 %r<10>;\n    mov.u32 %r10, 1;");
    let r = translate(&src, "k.ptx", &Options::default());
    assert!(message(&r).contains("unknown name '%r10'"), "{}", message(&r));
}

#[test]
fn huge_arrays_are_diagnosed_without_allocating() {
    let _g = LOCK.lock();
    let cases = [
        format!(
            "{}.global .align 4 .b8 g[4294967296];\n.visible .entry k()\n{{\n    st.global.u8 [g], 1;\n    ret;\n}}\n",
            head()
        ),
        format!("{}.global .align 4 .b8 g[18446744073709551615];\n.visible .entry k()\n{{\n    ret;\n}}\n", head()),
        format!("{}.global .align 4 .b32 g[4096][4096][4096];\n.visible .entry k()\n{{\n    ret;\n}}\n", head()),
        kernel("    .shared .align 4 .b8 s[1099511627776];\n    st.shared.u8 [s], 1;"),
        kernel("    .local .align 4 .b8 l[1099511627776];\n    st.local.u8 [l], 1;"),
        kernel("    .reg .b32 r[1000000000];"),
    ];
    for (i, src) in cases.iter().enumerate() {
        let (r, t, mem) = measure(&format!("huge array {i}"), || translate(src, "k.ptx", &Options::default()));
        eprintln!("  -> {}", message(&r));
        assert!(t < Duration::from_secs(10));
        if let Some(m) = mem {
            assert!(m < 256 << 20, "case {i}: {} MiB", m >> 20);
        }
    }
    // A large initializer: a million elements.
    let mut init = String::with_capacity(8 << 20);
    for i in 0..1_000_000u32 {
        init.push_str(&(i % 1000).to_string());
        init.push_str(", ");
    }
    init.push('0');
    let src = format!(
        "{}.global .align 4 .u32 table[1000001] = {{{init}}};\n.visible .entry k(.param .u64 p)\n{{\n    .reg .b32 %r<2>;\n    ld.global.u32 %r1, [table+4];\n    ret;\n}}\n",
        head()
    );
    let (r, t, mem) = measure("10^6-element initializer", || translate(&src, "k.ptx", &Options::default()));
    eprintln!("  -> {} ({} bytes of PTX)", message(&r), src.len());
    assert!(t < Duration::from_secs(if RELEASE { 20 } else { 120 }));
    if let Some(m) = mem {
        assert!(m < 100 * src.len() as u64, "{} MiB for {} bytes", m >> 20, src.len());
    }
}

#[test]
fn very_long_lines() {
    let _g = LOCK.lock();
    // 4 MB of instructions on one line, then errors on that line.
    let mut line = String::from("    .reg .b32 %r<4>;");
    while line.len() < 4 << 20 {
        line.push_str(" add.u32 %r1, %r2, %r3;");
    }
    let src = kernel(&line);
    let (r, t, _) = measure("4 MB line", || translate(&src, "k.ptx", &Options::default()));
    assert!(r.is_ok(), "{}", message(&r));
    assert!(t < Duration::from_secs(if RELEASE { 20 } else { 200 }));
    let bad = line.replace("add.u32 %r1", "add.u32 %q1");
    let src = kernel(&bad);
    let (r, t, mem) = measure("4 MB line with many errors", || {
        translate(&src, "k.ptx", &Options::default()).map_err(|d| d.to_string())
    });
    let Err(text) = r else { panic!("expected errors") };
    assert!(text.len() < 1 << 20, "rendered diagnostics of {} bytes", text.len());
    assert!(t < Duration::from_secs(if RELEASE { 20 } else { 200 }));
    if let Some(m) = mem {
        assert!(m < 512 << 20, "{} MiB", m >> 20);
    }
    // A 4 MB identifier, comment and string.
    let name = "x".repeat(4 << 20);
    for src in [
        kernel(&format!("    .reg .b32 %{name};\n    mov.u32 %{name}, 1;")),
        kernel(&format!("    // {name}\n    /* {name} */")),
        format!("{}.pragma \"{name}\";\n.visible .entry k()\n{{\n    ret;\n}}\n", head()),
    ] {
        let (r, t, _) = measure("4 MB token", || translate(&src, "k.ptx", &Options::default()));
        assert!(t < Duration::from_secs(if RELEASE { 20 } else { 200 }), "{}", message(&r));
    }
}

/// Kernels of the repository's fixtures that translate, renamed per copy.
fn big_ptx(bytes: usize) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut kernels = Vec::new();
    for f in ["data_loop_debug", "numba_saxpy", "vector_add", "data_loop", "saxpy_f64", "irreducible3"] {
        let text = std::fs::read_to_string(dir.join(format!("{f}.ptx"))).unwrap_or_default();
        let Some(entry) = text.find(".visible .entry") else { continue };
        let name_start = entry + ".visible .entry ".len();
        let name_end = text[name_start..].find('(').map_or(name_start, |e| name_start + e);
        kernels.push((text[entry..].to_string(), text[name_start..name_end].to_string()));
    }
    assert!(!kernels.is_empty());
    let mut out = String::with_capacity(bytes + (64 << 10));
    out.push_str(".version 8.0\n.target sm_80\n.address_size 64\n\n");
    let mut i = 0;
    while out.len() < bytes {
        let (body, name) = &kernels[i % kernels.len()];
        out.push_str(&body.replace(name.as_str(), &format!("{name}_{i}")));
        out.push('\n');
        i += 1;
    }
    out
}

#[test]
fn a_very_large_file() {
    let _g = LOCK.lock();
    let mb: usize =
        std::env::var("PTXVK_BIG_MB").ok().and_then(|s| s.parse().ok()).unwrap_or(if RELEASE { 100 } else { 4 });
    let src = big_ptx(mb << 20);
    let n = src.len() as f64;
    let (r, t, mem) = measure(&format!("{mb} MB, parse+check"), || check_syntax(&src, "big.ptx"));
    assert!(r.is_ok(), "{:?}", r.err().map(|d| d.to_string()));
    eprintln!("  {:.1} MB/s, peak {:.1} x input", n / t.as_secs_f64() / 1e6, mem.unwrap_or(0) as f64 / n);
    // Bounds: well above what we measure (release ~20 MB/s and ~24x; debug ~0.5 MB/s).
    assert!(n / t.as_secs_f64() > if RELEASE { 4e6 } else { 1e5 });
    if let Some(m) = mem {
        assert!((m as f64) < 40.0 * n, "{} MiB for {} MiB of input", m >> 20, src.len() >> 20);
    }
    let (r, t, mem) = measure(&format!("{mb} MB, translate"), || translate(&src, "big.ptx", &Options::default()));
    assert!(r.is_ok(), "{}", message(&r));
    eprintln!("  {:.1} MB/s, peak {:.1} x input", n / t.as_secs_f64() / 1e6, mem.unwrap_or(0) as f64 / n);
    assert!(n / t.as_secs_f64() > if RELEASE { 1e6 } else { 3e4 });
    if let Some(m) = mem {
        assert!((m as f64) < 80.0 * n, "{} MiB for {} MiB of input", m >> 20, src.len() >> 20);
    }
}
