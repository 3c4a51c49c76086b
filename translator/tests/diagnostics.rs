//! Diagnostics as a user sees them: `file:line:col: error: ...`, the source
//! line and a caret.

use ptxvk_translator::{translate, Options};

fn err(src: &str) -> String {
    match translate(src, "k.ptx", &Options::default()) {
        Ok(_) => panic!("expected an error"),
        Err(d) => d.to_string(),
    }
}

const HEAD: &str = ".version 8.0\n.target sm_80\n.address_size 64\n";

#[test]
fn syntax_error_has_location_line_and_caret() {
    let src = format!("{HEAD}.visible .entry k()\n{{\n  mov.u32 %r1 %r2;\n}}\n");
    let text = err(&src);
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    assert!(first.starts_with("k.ptx:6:"), "{text}");
    assert!(first.contains("error: syntax error"), "{text}");
    assert_eq!(lines.next(), Some("  mov.u32 %r1 %r2;"));
    assert!(lines.next().unwrap_or("").trim_start().starts_with('^'), "{text}");
}

#[test]
fn unknown_instruction_is_named_with_its_line() {
    let src =
        format!("{HEAD}.visible .entry k()\n{{\n  .reg .b32 %r<3>;\n  mov.u32 %r1, 1;\n  bogus.op.u32 %r2, %r1;\n}}\n");
    let text = err(&src);
    assert!(text.starts_with("k.ptx:8:3: error: unknown instruction 'bogus.op.u32'"), "{text}");
}

#[test]
fn several_errors_are_reported() {
    let src =
        format!("{HEAD}.visible .entry k()\n{{\n  .reg .b32 %r<3>;\n  frob.u32 %r1, 1;\n  mov.u32 %r2, %nosuch;\n}}\n");
    let text = err(&src);
    assert!(text.contains("k.ptx:7:3: error: unknown instruction 'frob.u32'"), "{text}");
    assert!(text.contains("k.ptx:8:16: error: unknown name '%nosuch'"), "{text}");
}

#[test]
fn undefined_label() {
    let src = format!("{HEAD}.visible .entry k()\n{{\n  bra $L__nowhere;\n}}\n");
    let text = err(&src);
    assert!(text.contains("k.ptx:6:3: error: branch to undefined label '$L__nowhere'"), "{text}");
}

#[test]
fn missing_entry_is_reported() {
    let src = format!("{HEAD}.visible .entry k()\n{{\n  ret;\n}}\n");
    let opts = Options { entry: Some("other".into()), ..Options::default() };
    let Err(d) = translate(&src, "k.ptx", &opts) else { panic!("expected an error") };
    assert!(d.to_string().contains("no .entry named 'other'"));
}

#[test]
fn garbage_never_panics() {
    let inputs = [
        "",
        "\u{0}\u{1}",
        ".version",
        ".version 1.0 .target",
        "{{{{{{",
        ".entry k(",
        ".visible .entry k() { @ bra; }",
        ".visible .entry k() { .reg .b32 %r<99999999999999999999>; }",
        ".visible .entry k() { ld.global.u32 %r1, [%r2+%r3]; }",
        ".visible .entry k() { mov.u32 %r1, 0x; }",
    ];
    for i in inputs {
        let _ = translate(i, "x.ptx", &Options::default());
    }
}

#[test]
fn recursion_through_a_function_pointer_names_the_cycle() {
    let src = format!(
        "{HEAD}.func (.param .b32 r) f(.param .b64 fp)\n{{\n  .reg .b64 %rd1;\n  .reg .b32 %r1;\n  ld.param.u64 %rd1, [fp];\n  {{\n  .param .b64 a;\n  .param .b32 b;\n  st.param.b64 [a], %rd1;\n  prot: .callprototype (.param .b32 _) _ (.param .b64 _);\n  call (b), %rd1, (a), prot;\n  ld.param.b32 %r1, [b];\n  }}\n  st.param.b32 [r], %r1;\n  ret;\n}}\n.visible .entry k()\n{{\n  .reg .b64 %rd1;\n  .reg .b32 %r1;\n  mov.u64 %rd1, f;\n  {{\n  .param .b64 a;\n  .param .b32 b;\n  st.param.b64 [a], %rd1;\n  call (b), f, (a);\n  ld.param.b32 %r1, [b];\n  }}\n  ret;\n}}\n"
    );
    let text = err(&src);
    assert!(
        text.contains("k.ptx:14:13: error: recursion through a function pointer is not supported: call cycle f -> f"),
        "{text}"
    );
}

/// Entries that must run in clusters of several blocks cannot read the
/// cluster registers (they would hold a one-block cluster's values);
/// `.reqnctapercluster 1, 1, 1` is a cluster of one and translates, as does
/// `.explicitcluster` (the driver launches clusters of one block).
#[test]
fn entries_that_need_clusters_are_refused() {
    let body = "{\n  .reg .b32 %r<2>;\n  mov.u32 %r1, %cluster_ctarank;\n  ret;\n}\n";
    let explicit = format!("{HEAD}.visible .entry k() .explicitcluster\n{body}");
    assert!(translate(&explicit, "k.ptx", &Options::default()).is_ok());
    let text = err(&format!("{HEAD}.visible .entry k() .reqnctapercluster 2, 1, 1\n{body}"));
    assert!(text.contains("%cluster_ctarank in an entry that requires thread block clusters of 2x1x1"), "{text}");
    // Without a cluster register, the entry runs as blocks alone would.
    let plain = format!("{HEAD}.visible .entry k() .reqnctapercluster 2, 1, 1\n{{\n  ret;\n}}\n");
    assert!(translate(&plain, "k.ptx", &Options::default()).is_ok());
    let one = format!("{HEAD}.visible .entry k() .reqnctapercluster 1, 1, 1\n{body}");
    assert!(translate(&one, "k.ptx", &Options::default()).is_ok());
}
