//! `printf` lowered from what is known at translation time
//! (`emit/printf_sites.rs`): an nvcc kernel with 17 calls of literal
//! formats, arguments in its local depot and results nothing reads
//! compiles each call to one atomic and its stores, without loops or
//! branches (llvmpipe's compile time grows with the square of a kernel's
//! memory accesses and blocks: NVIDIA Warp's 600-call kernels took tens of
//! minutes). Without the facts every call has its copy loop. The output of
//! both is compared on a device in `runtime/tests/printf.rs`; the argument
//! bytes a format reads are checked against the host's formatting in
//! `runtime/src/printf.rs`.

use ptxvk_translator::{abi::printf as pf, disassemble, translate, Options};

const PTX: &str = include_str!("../../tests/fixtures/printf_paths.ptx");

fn count(text: &str, op: &str) -> usize {
    text.lines().filter(|l| l.split_whitespace().any(|w| w == op)).count()
}

fn many(sites: bool) -> String {
    let o = Options { entry: Some("printf_many".into()), printf_sites: sites, ..Options::default() };
    let t = translate(PTX, "printf_paths.ptx", &o).unwrap_or_else(|d| panic!("{d}"));
    disassemble(&t.spirv)
}

#[test]
fn literal_calls_store_their_records_without_loops() {
    let with = many(true);
    assert_eq!(count(&with, "OpAtomicIAdd"), 17, "one reservation per call");
    assert_eq!(count(&with, "OpLoopMerge"), 0, "no loop:\n{with}");
    // The one selection is the entry's test of padding invocations.
    assert_eq!(count(&with, "OpSelectionMerge"), 1, "no branch:\n{with}");
    // Device stores: "in[%d][%d] = %d\n" puts its 16-byte header and 3
    // ints in one 32-byte store (16 calls); the last call's 56 argument
    // bytes and header take 9 u64s: two 32-byte stores and one more.
    let device_stores = with.lines().filter(|l| l.contains("OpStore") && l.contains("Aligned")).count();
    assert_eq!(device_stores, 16 + 3, "{with}");
    let without = many(false);
    assert_eq!(count(&without, "OpAtomicIAdd"), 17);
    assert!(count(&without, "OpLoopMerge") >= 17, "a copy loop per call");
}

#[test]
fn argument_bytes_and_conversions_of_formats() {
    assert_eq!(pf::argument_bytes(b"plain\n\0"), 0);
    assert_eq!(pf::argument_bytes(b"%d\n"), 4);
    assert_eq!(pf::argument_bytes(b"%d %f"), 16, "the double aligned to 8");
    assert_eq!(pf::argument_bytes(b"%c%hhd%hd%lld"), 24, "the long long aligned to 8");
    assert_eq!(pf::argument_bytes(b"%*.*f|%-*d"), 24);
    assert_eq!(pf::argument_bytes(b"100%% %s %p"), 16);
    assert_eq!(pf::argument_bytes(b"%d\0%f%f"), 4, "the format ends at its NUL");
    assert_eq!(pf::argument_bytes(b"%n%k%d"), 4, "%n and unknown conversions take nothing");
    assert_eq!(pf::conversions(b"no args\n"), 0);
    assert_eq!(pf::conversions(b"three %d %d %f\n"), 3);
    assert_eq!(pf::conversions(b"%%%d 100%%"), 1);
    assert_eq!(pf::conversions(b"%"), 0);
}
