//! Kernel `printf` and `assert` (nvcc's `vprintf` and `__assertfail`) run on
//! the device, with the output captured through
//! [`Context::capture_printf`]; `tests/fixtures/printf_formats.cu`.

mod common;

use common::{assert_clean, context, Lcg};
use ptxvk_runtime::{Context, Error, Module};

const PTX: &str = include_str!("../../tests/fixtures/printf_formats.ptx");

fn upload(ctx: &Context, bytes: &[u8]) -> u64 {
    let d = ctx.alloc(bytes.len().max(4) as u64).unwrap();
    ctx.copy_htod(d, bytes).unwrap();
    d
}

fn upload_i32(ctx: &Context, data: &[i32]) -> u64 {
    upload(ctx, &data.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
}

fn download_i32(ctx: &Context, d: u64, n: usize) -> Vec<i32> {
    let mut bytes = vec![0u8; n * 4];
    ctx.copy_dtoh(&mut bytes, d).unwrap();
    bytes.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn load(ctx: &Context) -> Module {
    ctx.load_module(PTX, "printf_formats.ptx").unwrap()
}

fn sorted_lines(text: &[u8]) -> Vec<String> {
    let s = String::from_utf8(text.to_vec()).expect("utf-8 output");
    let mut v: Vec<String> = s.split_inclusive('\n').map(str::to_string).collect();
    v.sort();
    v
}

/// The line `printf_threads` prints for element `i`.
fn thread_line(i: usize, block: usize, x: i32) -> String {
    let hex = if x == 0 { "0".to_string() } else { format!("{:#x}", x as u32) };
    let sq = (x as f32 * 0.5f32) as f64;
    format!("thread {} block {}: in={x} hex={hex} sq={sq:.3}\n", i % block, i / block)
}

#[test]
fn printf_one_line_per_thread() {
    let ctx = context();
    ctx.capture_printf(true);
    let m = load(&ctx);
    let f = m.function("printf_threads").unwrap();
    let n = 300usize;
    let block = 128usize;
    let mut rng = Lcg(5);
    let input: Vec<i32> = (0..n).map(|k| if k == 7 { 0 } else { rng.next_u32() as i32 / 1000 }).collect();
    let din = upload_i32(&ctx, &input);
    let params = f.pack_params(&[&din.to_le_bytes(), &(n as u32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [(n / block + 1) as u32, 1, 1], [block as u32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let out = ctx.take_printf_output();
    let mut want: Vec<String> = input.iter().enumerate().map(|(i, &x)| thread_line(i, block, x)).collect();
    want.sort();
    assert_eq!(sorted_lines(&out), want);
    // The FIFO was emptied: a second launch prints the lines once more, no more.
    ctx.launch(&f, [(n / block + 1) as u32, 1, 1], [block as u32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    assert_eq!(sorted_lines(&ctx.take_printf_output()), want);
    assert_clean(&ctx);
}

/// The text `printf_formats` prints for the arguments the tests pass.
pub fn formats_text(p: u64) -> String {
    let big = 9_000_000_000_000_000_007i64;
    [
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
    ]
    .concat()
}

#[test]
fn printf_conversions() {
    let ctx = context();
    ctx.capture_printf(true);
    let m = load(&ctx);
    let f = m.function("printf_formats").unwrap();
    let name = upload(&ctx, b"ptxvk\0");
    let p = ctx.alloc(64).unwrap();
    let big = 9_000_000_000_000_000_007i64;
    let params = f
        .pack_params(&[
            &name.to_le_bytes(),
            &big.to_le_bytes(),
            &std::f64::consts::PI.to_bits().to_le_bytes(),
            &1.5f32.to_bits().to_le_bytes(),
            &p.to_le_bytes(),
        ])
        .unwrap();
    ctx.launch(&f, [2, 1, 1], [64, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let out = String::from_utf8(ctx.take_printf_output()).unwrap();
    assert_eq!(out, formats_text(p));
    assert_clean(&ctx);
}

#[test]
fn printf_returns_the_argument_count() {
    let ctx = context();
    ctx.capture_printf(true);
    let m = load(&ctx);
    let f = m.function("printf_ret").unwrap();
    let d = upload_i32(&ctx, &[0x5555; 2]);
    let params = f.pack_params(&[&d.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [1, 1, 1], 0, &params).unwrap();
    assert_eq!(download_i32(&ctx, d, 2), vec![0, 3]);
    assert_eq!(String::from_utf8(ctx.take_printf_output()).unwrap(), "no args\nthree 1 2 3.000000\n");
    assert_clean(&ctx);
}

#[test]
fn printf_fifo_overflow_drops_records() {
    let ctx = context();
    ctx.capture_printf(true);
    // 4 KiB of records. A printf_threads record is 40 bytes: the 16-byte
    // header and the argument bytes its literal format reads (four ints and
    // a double).
    ctx.set_printf_fifo_size(4096).unwrap();
    let m = load(&ctx);
    let f = m.function("printf_threads").unwrap();
    let n = 256usize;
    let input: Vec<i32> = (0..n as i32).collect();
    let din = upload_i32(&ctx, &input);
    let params = f.pack_params(&[&din.to_le_bytes(), &(n as u32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [n as u32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let lines = sorted_lines(&ctx.take_printf_output());
    assert_eq!(lines.len(), 4096 / 40, "records that fit");
    let all: Vec<String> = input.iter().enumerate().map(|(i, &x)| thread_line(i, n, x)).collect();
    assert!(lines.iter().all(|l| all.contains(l)), "{lines:?}");
    // The size is fixed once a kernel that prints has run.
    assert!(matches!(ctx.set_printf_fifo_size(1 << 20), Err(Error::InvalidValue(_))));
    assert_eq!(ctx.printf_fifo_size(), 4096);
    assert_clean(&ctx);
}

/// CUDA's assert message for element `i` of `assert_positive` (block 32).
pub fn assert_line(i: usize) -> String {
    format!(
        "printf_formats.cu:45: void assert_positive(const int *, int *, int): block: [{},0,0], thread: [{},0,0] \
         Assertion `in[i] >= 0` failed.\n",
        i / 32,
        i % 32
    )
}

#[test]
fn assert_fails_the_context() {
    let ctx = context();
    ctx.capture_printf(true);
    let m = load(&ctx);
    let f = m.function("assert_positive").unwrap();
    let n = 100usize;
    // Every element positive: no assert, the kernel runs.
    let input: Vec<i32> = (0..n as i32).collect();
    let din = upload_i32(&ctx, &input);
    let dout = upload_i32(&ctx, &vec![-1; n]);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as u32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [4, 1, 1], [32, 1, 1], 0, &params).unwrap();
    assert_eq!(download_i32(&ctx, dout, n), input.iter().map(|x| x * 2).collect::<Vec<i32>>());
    assert!(ctx.take_printf_output().is_empty());
    // Elements 37 and 70 are negative: both threads report, the context fails for good.
    let mut bad = input.clone();
    bad[37] = -5;
    bad[70] = -1;
    ctx.copy_htod(din, &bad.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    ctx.launch(&f, [4, 1, 1], [32, 1, 1], 0, &params).unwrap();
    match ctx.synchronize() {
        Err(Error::Assert(msg)) => assert!(msg.contains("assert_positive"), "{msg}"),
        other => panic!("expected an assert error, got {other:?}"),
    }
    let mut want = vec![assert_line(37), assert_line(70)];
    want.sort();
    assert_eq!(sorted_lines(&ctx.take_printf_output()), want);
    assert!(matches!(ctx.synchronize(), Err(Error::Assert(_))), "an assert is sticky");
    assert!(matches!(ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &params), Err(Error::Assert(_))));
}

const PATHS: &str = include_str!("../../tests/fixtures/printf_paths.ptx");

/// `printf_paths.ptx` translated with this device's options, with the
/// translation-time facts of `printf` calls used or not.
fn load_paths(ctx: &Context, sites: bool) -> Module {
    let options = ptxvk_translator::Options { printf_sites: sites, ..ctx.translate_options() };
    let t = ptxvk_translator::translate(PATHS, "printf_paths.ptx", &options).unwrap_or_else(|d| panic!("{d}"));
    ctx.load_spirv(&t.spirv, t.info).unwrap()
}

/// Runs the three kernels of `printf_paths.ptx`; each result and the
/// printed lines (sorted) are checked against what C's `printf` prints.
fn run_paths(ctx: &Context, m: &Module) -> Vec<String> {
    let mut lines = Vec::new();
    // A format in device memory (not a literal): its conversions counted
    // on the device, its arguments copied by what the buffer holds.
    let f = m.function("printf_format_from_memory").unwrap();
    for (fmt, count) in [("a=%d b=%.2f 100%%\n", 2), ("no conversions\n", 0)] {
        let text = upload(ctx, format!("{fmt}\0").as_bytes());
        let out = upload_i32(ctx, &[0x5555_5555; 4]);
        let params = f
            .pack_params(&[
                &text.to_le_bytes(),
                &10i32.to_le_bytes(),
                &1.5f64.to_bits().to_le_bytes(),
                &out.to_le_bytes(),
            ])
            .unwrap();
        ctx.launch(&f, [1, 1, 1], [4, 1, 1], 0, &params).unwrap();
        ctx.synchronize().unwrap();
        assert_eq!(download_i32(ctx, out, 4), vec![count; 4], "{fmt:?}");
        let got = sorted_lines(&ctx.take_printf_output());
        let mut want: Vec<String> = (0..4)
            .map(|t| if count == 0 { fmt.to_string() } else { format!("a={} b={:.2} 100%\n", 10 + t, 1.5 * t as f64) })
            .collect();
        want.sort();
        assert_eq!(got, want, "{fmt:?}");
        lines.extend(got);
    }
    // printf in a __noinline__ callee, its count read.
    let f = m.function("printf_in_a_callee").unwrap();
    let mut rng = Lcg(0x5eed_0f9f);
    let n = 6;
    let vals: Vec<f32> = (0..8).map(|_| (rng.next_u32() % 100_000) as f32 / 64.0 - 700.0).collect();
    let input = upload(ctx, &vals.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
    let out = upload_i32(ctx, &[0x5555_5555; 8]);
    let params = f.pack_params(&[&input.to_le_bytes(), &out.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [8, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let mut want_out = vec![3; n];
    want_out.extend([0x5555_5555; 2]);
    assert_eq!(download_i32(ctx, out, 8), want_out);
    let got = sorted_lines(&ctx.take_printf_output());
    // Multiples of 1/64: "%.2f" has no ties to round.
    let mut want: Vec<String> = (0..n)
        .map(|i| format!("report {i} {:.2} {}\n", vals[i] as f64, if i % 2 == 1 { "odd" } else { "even" }))
        .collect();
    want.sort();
    assert_eq!(got, want);
    lines.extend(got);
    // 17 literal calls per thread whose results nothing reads.
    let f = m.function("printf_many").unwrap();
    let data: Vec<i32> = (0..32).map(|_| rng.next_u32() as i32).collect();
    let input = upload_i32(ctx, &data);
    let params = f.pack_params(&[&input.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [2, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let got = sorted_lines(&ctx.take_printf_output());
    let mut want = Vec::new();
    for t in 0..2usize {
        for k in 0..16 {
            want.push(format!("in[{t}][{k}] = {}\n", data[t * 16 + k]));
        }
        // "%s %c %lld %5.1f%% %*d|%-*.*f|": 0.125 rounds to even in C.
        let last = ["0.00", "0.12"][t];
        want.push(format!("done x {}  99.5% {t:>4}|{last:<8}|\n", (t as i64) << 40));
    }
    want.sort();
    assert_eq!(got, want);
    lines.extend(got);
    lines
}

#[test]
fn printf_lowered_from_translation_time_facts_and_without_them() {
    let ctx = context();
    ctx.capture_printf(true);
    let with = run_paths(&ctx, &load_paths(&ctx, true));
    let without = run_paths(&ctx, &load_paths(&ctx, false));
    assert_eq!(with, without);
    assert_clean(&ctx);
}
