//! Kernel `printf` and `assert` through the C ABI, with the output on the
//! process's real standard output: the test runs itself again as a child
//! process (`PTXVK_PRINTF_CHILD=1`), which launches the kernels of
//! `tests/fixtures/printf_formats.ptx`, and checks what the child printed.

mod common;

use std::ffi::{c_int, c_void};
use std::path::PathBuf;

use common::{check, error_name, init, Api, Ctx, Handle};

const CHILD: &str = "PTXVK_PRINTF_CHILD";
/// `CUDA_ERROR_ASSERT`.
const ASSERT: u32 = 710;
/// `CU_LIMIT_PRINTF_FIFO_SIZE`.
const CU_LIMIT_PRINTF_FIFO_SIZE: c_int = 1;

fn fixture() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/printf_formats.ptx");
    let mut text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.push(0);
    text
}

fn function(api: &Api, module: Handle, name: &str) -> Handle {
    let cname = format!("{name}\0");
    let mut f: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetFunction(&mut f, module, cname.as_ptr().cast())), name);
    f
}

fn alloc_with(api: &Api, bytes: &[u8]) -> u64 {
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, bytes.len())), "cuMemAlloc");
    check(api, cu!(api.cuMemcpyHtoD_v2(d, bytes.as_ptr().cast(), bytes.len())), "HtoD");
    d
}

fn launch(api: &Api, f: Handle, grid: u32, block: u32, params: &mut [*mut c_void]) -> u32 {
    cu!(api.cuLaunchKernel(
        f,
        grid,
        1,
        1,
        block,
        1,
        1,
        0,
        std::ptr::null_mut(),
        params.as_mut_ptr(),
        std::ptr::null_mut()
    ))
}

/// What the child does: every line it prints itself starts with `#`.
fn child() {
    let api = init();
    let _ctx = Ctx::new(api);
    let mut size = 0usize;
    check(api, cu!(api.cuCtxGetLimit(&mut size, CU_LIMIT_PRINTF_FIFO_SIZE)), "cuCtxGetLimit");
    println!("#fifo {size}");
    check(api, cu!(api.cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 1 << 16)), "cuCtxSetLimit");
    let image = fixture();
    let mut module: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast())), "load");

    let f = function(api, module, "printf_formats");
    let mut name = alloc_with(api, b"ptxvk\0");
    let mut p = alloc_with(api, &[0u8; 64]);
    let mut big = 9_000_000_000_000_000_007i64;
    let mut d = std::f64::consts::PI;
    let mut x = 1.5f32;
    let mut params: [*mut c_void; 5] = [
        (&mut name as *mut u64).cast(),
        (&mut big as *mut i64).cast(),
        (&mut d as *mut f64).cast(),
        (&mut x as *mut f32).cast(),
        (&mut p as *mut u64).cast(),
    ];
    println!("#p {p:#x}");
    check(api, launch(api, f, 2, 64, &mut params), "launch printf_formats");
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
    println!("#after formats");
    // The FIFO size is fixed now.
    println!("#setlimit {}", cu!(api.cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 1 << 20)));

    let f = function(api, module, "assert_positive");
    let input: Vec<u8> = (0..64i32).map(|i| if i == 40 { -3 } else { i }).flat_map(|v| v.to_le_bytes()).collect();
    let mut din = alloc_with(api, &input);
    let mut dout = alloc_with(api, &[0u8; 256]);
    let mut n = 64i32;
    let mut params: [*mut c_void; 3] =
        [(&mut din as *mut u64).cast(), (&mut dout as *mut u64).cast(), (&mut n as *mut i32).cast()];
    check(api, launch(api, f, 2, 32, &mut params), "launch assert_positive");
    let rc = cu!(api.cuCtxSynchronize());
    println!("#sync {rc} {}", error_name(api, rc));
    println!("#again {}", cu!(api.cuCtxSynchronize()));
}

#[test]
fn printf_and_assert_reach_stdout() {
    let Some((stdout, _)) = common::in_own_process("printf_and_assert_reach_stdout", CHILD) else {
        child();
        return;
    };
    let p = stdout
        .lines()
        .find_map(|l| l.strip_prefix("#p 0x"))
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or_else(|| panic!("no pointer line in:\n{stdout}"));
    let big = 9_000_000_000_000_000_007i64;
    let want = [
        "#fifo 1048576\n".to_string(),
        format!("#p {p:#x}\n"),
        "plain text, no args\n".to_string(),
        "%d=-42 %i=17 %u=4000000000 %x=beef %X=BEEF %o=10 %c=Z\n".to_string(),
        "[   42] [42   ] [00042] [+42] [ 42]\n".to_string(),
        format!("-1234567890123 {big} 18446744073709551615 12345678901234 fedcba9876543210\n"),
        "3.141593 3.14     3.1416 3.1       | 3.141593e+00 3.141593E+00 3.14159 1e-10 1E+20\n".to_string(),
        "float 1.500000 1.5 0x1p+0\n".to_string(),
        "str [ptxvk] [     ptxvk] [ptxvk     ] [ptx]\n".to_string(),
        format!("ptr {p:#x} null (nil)\n"),
        "char ok!\n".to_string(),
        "mixed 7 2.500000 lit -9 x\n".to_string(),
        "#after formats\n".to_string(),
        "#setlimit 1\n".to_string(),
        "printf_formats.cu:45: void assert_positive(const int *, int *, int): block: [1,0,0], thread: [8,0,0] \
         Assertion `in[i] >= 0` failed.\n"
            .to_string(),
        format!("#sync {ASSERT} CUDA_ERROR_ASSERT\n"),
        format!("#again {ASSERT}\n"),
    ]
    .concat();
    let start = stdout.find("#fifo").unwrap_or_else(|| panic!("no output from the child:\n{stdout}"));
    let end = stdout.find("#again").map(|k| k + format!("#again {ASSERT}\n").len()).unwrap_or(stdout.len());
    assert_eq!(&stdout[start..end.min(stdout.len())], want);
}
