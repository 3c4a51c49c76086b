//! `ptx2spv` as a user runs it: exit status, diagnostics on stderr.

use std::io::Write;
use std::process::{Command, Stdio};

fn run(args: &[&str], stdin: &[u8]) -> (i32, String, Vec<u8>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ptx2spv"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run ptx2spv: {e}"));
    if let Some(mut i) = child.stdin.take() {
        // The child may exit before reading everything.
        let _ = i.write_all(stdin);
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("ptx2spv: {e}"));
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned(), out.stdout)
}

const OK: &str = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n    ret;\n}\n";

#[test]
fn invalid_utf8_is_an_error_not_a_crash() {
    let mut bytes = OK.as_bytes().to_vec();
    bytes.splice(20..20, [0xff, 0xfe, 0xc3]);
    for args in [&["-", "--parse-only"][..], &["-", "--check"][..], &["-", "-o", "/dev/null"][..]] {
        let (code, err, _) = run(args, &bytes);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("<stdin>: error: input is not UTF-8 text (byte 20)"), "{err}");
    }
    // Random bytes, including NUL and lone continuation bytes.
    let noise: Vec<u8> = (0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let (code, err, _) = run(&["-", "--parse-only"], &noise);
    assert_eq!(code, 1, "{err}");
}

#[test]
fn parse_only_is_silent_on_success_and_reports_every_error() {
    let (code, err, out) = run(&["-", "--parse-only"], OK.as_bytes());
    assert_eq!((code, err.as_str(), out.len()), (0, "", 0));
    let bad = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n    .reg .b32 %r<4>;\n    mov.u32 %r1 %r2;\n    ld.global.rz.u32 %r1, [%r2];\n    frob.u32 %r1;\n    add.u32 %r1, %r2;\n    ret;\n}\n";
    let (code, err, _) = run(&["-", "--parse-only"], bad.as_bytes());
    assert_eq!(code, 1);
    for want in [
        "<stdin>:7:17: error: syntax error at '%r2'",
        "<stdin>:8:14: error: '.rz' is not valid for 'ld'",
        "<stdin>:9:5: error: unknown instruction 'frob.u32'",
        "<stdin>:10:5: error: 'add.u32' expects 3 operands, found 2",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
}

/// A NUL-terminated image (NVIDIA Warp's cached PTX ends with its
/// terminator) reads as the driver reads it; a NUL inside the text is an
/// error at its position.
#[test]
fn nul_terminated_text_and_nul_inside_it() {
    let mut terminated = OK.as_bytes().to_vec();
    terminated.extend([0, 0]);
    let (code, err, _) = run(&["-", "--check"], &terminated);
    assert_eq!(code, 0, "{err}");
    let mut inside = OK.as_bytes().to_vec();
    inside.splice(30..30, [0]);
    let (code, err, _) = run(&["-", "--check"], &inside);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("<stdin>:3:4: error: NUL byte inside the PTX text"), "{err}");
}
