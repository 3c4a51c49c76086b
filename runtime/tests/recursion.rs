//! Recursive device functions (`translator/src/recursion.rs`: an explicit
//! stack in local memory), run on the device: nvcc's `recursion_run.cu`
//! (self and mutual recursion, results through pointers into the caller's
//! frame, a recursive call inside a loop, every thread at its own depth),
//! the stack-overflow launch failure, and the PTX numba emits for a
//! recursive `@cuda.jit` device function.

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload, Lcg, POISON};
use ptxvk_runtime::Error;

fn fib(n: i32) -> i32 {
    if n < 2 {
        n
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

fn walk(x: u32, depth: u32) -> (u32, u32) {
    if depth == 0 {
        return (x & 255, x & 255);
    }
    let (s1, t1) = walk(x.wrapping_mul(1664525).wrapping_add(1013904223), depth - 1);
    let (s2, t2) = walk(x ^ (x >> 7), depth - 1);
    (s1.wrapping_add(s2).wrapping_add(x & 15), t1.max(t2))
}

fn partitions(n: i32, k: i32) -> i32 {
    if n == 0 {
        return 1;
    }
    (1..=n.min(k)).rev().map(|p| partitions(n - p, p)).sum()
}

fn chain(n: i64, below: i64) -> i64 {
    let mine = n * 3 + below;
    if n == 0 {
        mine
    } else {
        chain(n - 1, mine) + 1
    }
}

#[test]
fn recursive_functions_of_nvcc() {
    run_recursion(include_str!("../../tests/fixtures/recursion_run.ptx"), "recursion_run.ptx");
}

/// The same at `-G -O0`: every variable lives in the frame's `.local`
/// memory, addressed through `%SP`/`%SPL`.
#[test]
fn recursive_functions_of_nvcc_debug() {
    run_recursion(include_str!("../../tests/fixtures/recursion_run_debug.ptx"), "recursion_run_debug.ptx");
}

fn run_recursion(src: &str, name: &str) {
    let ctx = context();
    let m = ctx.load_module(src, name).unwrap();
    let f = m.function("recursion_run").unwrap();
    let n = 300usize;
    let mut rng = Lcg(77);
    let input: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    let din = upload(&ctx, &bytes);
    let words = 6 * n + 32;
    let dout = poisoned(&ctx, words);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [(n as u32).div_ceil(64), 1, 1], [64, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, words);
    for (i, &v) in input.iter().enumerate() {
        let (s, t) = walk(v, v & 3);
        let want = [
            fib((v & 15) as i32) as u32,
            (v & 63) & 1,
            s,
            t,
            partitions((v % 13) as i32, (v % 13) as i32) as u32,
            chain(i64::from((v >> 4) & 31), i64::from(v & 7)) as u32,
        ];
        assert_eq!(&out[6 * i..6 * i + 6], &want, "thread {i}, input {v:#x}");
    }
    assert!(out[6 * n..].iter().all(|&w| w == POISON), "threads beyond n wrote");
    assert_clean(&ctx);
}

/// Deep recursion within the stack runs; past it the launch fails, as a
/// stack overflow does on NVIDIA's driver.
#[test]
fn stack_overflow_fails_the_launch() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/recursion_run.ptx"), "recursion_run.ptx").unwrap();
    let f = m.function("recursion_deep").unwrap();
    let dout = poisoned(&ctx, 32);
    let params = f.pack_params(&[&dout.to_le_bytes(), &200i32.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 32);
    assert!(out.iter().all(|&w| w == chain(200, 1) as u32), "{out:?}");
    assert_clean(&ctx);
    let params = f.pack_params(&[&dout.to_le_bytes(), &100_000i32.to_le_bytes()]).unwrap();
    let failed = ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &params).and_then(|_| ctx.synchronize());
    assert!(matches!(failed, Err(Error::LaunchFailed(_))), "{failed:?}");
}

/// `Context::set_stack_size` (`CU_LIMIT_STACK_SIZE`) sizes the stack of
/// modules loaded after it: 2000 levels of `chain` overflow the default
/// 16 KiB and fit in 256 KiB.
#[test]
fn stack_size_limit_applies_to_modules_loaded_later() {
    let ctx = context();
    let src = include_str!("../../tests/fixtures/recursion_run.ptx");
    let small = ctx.load_module(src, "recursion_run.ptx").unwrap();
    assert!(ctx.set_stack_size(2 << 20).is_err(), "more than 1 MiB per thread");
    ctx.set_stack_size(256 << 10).unwrap();
    assert_eq!(ctx.stack_size(), 256 << 10);
    let big = ctx.load_module(src, "recursion_run.ptx").unwrap();
    let dout = poisoned(&ctx, 8);
    let f = big.function("recursion_deep").unwrap();
    let params = f.pack_params(&[&dout.to_le_bytes(), &2000i32.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [8, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 8);
    assert!(out.iter().all(|&w| w == chain(2000, 1) as u32), "{out:?}");
    assert_clean(&ctx);
    let f = small.function("recursion_deep").unwrap();
    let failed = ctx.launch(&f, [1, 1, 1], [8, 1, 1], 0, &params).and_then(|_| ctx.synchronize());
    assert!(matches!(failed, Err(Error::LaunchFailed(_))), "{failed:?}");
}

/// numba's `recursion_usecases.fib1` (`numba_fib.py`): the kernel passes the
/// address of its local result to the recursive device function, which
/// writes through it.
#[test]
fn recursive_numba_device_function() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/numba_fib.ptx"), "numba_fib.ptx").unwrap();
    let name = m.entry_names().into_iter().find(|n| n.contains("kernel")).unwrap();
    let f = m.function(&name).unwrap();
    let n = 40usize;
    let mut rng = Lcg(5);
    let xs: Vec<i64> = (0..n).map(|_| i64::from(rng.next_u32() % 19)).collect();
    let dx = upload(&ctx, &xs.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
    let dr = poisoned(&ctx, 2 * n);
    // numba's array arguments: meminfo, parent, nitems, itemsize, data,
    // shape, strides.
    let array =
        |d: u64| -> Vec<[u8; 8]> { [0u64, 0, n as u64, 8, d, n as u64, 8].iter().map(|v| v.to_le_bytes()).collect() };
    let args: Vec<[u8; 8]> = array(dr).into_iter().chain(array(dx)).collect();
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let params = f.pack_params(&refs).unwrap();
    ctx.launch(&f, [1, 1, 1], [n as u32, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dr, 2 * n);
    for (i, &x) in xs.iter().enumerate() {
        let got = u64::from(out[2 * i]) | u64::from(out[2 * i + 1]) << 32;
        assert_eq!(got as i64, i64::from(fib(x as i32)), "thread {i}, fib({x})");
    }
    assert_clean(&ctx);
}

fn collatz_even(n: u32, steps: u32) -> u32 {
    if n <= 1 {
        return steps;
    }
    let m = n / 2;
    let r = if m & 1 == 1 { collatz_odd(m, steps + 1) } else { collatz_even(m, steps + 1) };
    if n.is_multiple_of(3) {
        r + 65536
    } else {
        r
    }
}

fn collatz_odd(n: u32, steps: u32) -> u32 {
    if n == 1 {
        return steps;
    }
    let r = collatz_even(3 * n + 1, steps + 1);
    if n.is_multiple_of(5) {
        r + 0x100_0000
    } else {
        r
    }
}

/// Hand-written mutual recursion with `.reg` parameters and results,
/// guarded calls and returns, a predicate and a 64-bit register live across
/// the calls, and register names the two functions declare with other
/// types (`collatz_rec.ptx`).
#[test]
fn mutual_recursion_with_register_parameters() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/collatz_rec.ptx"), "collatz_rec.ptx").unwrap();
    let f = m.function("collatz_rec").unwrap();
    let dout = poisoned(&ctx, 256 + 16);
    let params = f.pack_params(&[&dout.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [256, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 256 + 16);
    for t in 0..256u32 {
        let v = t + 1;
        let want = if v & 1 == 1 { collatz_odd(v, 0) } else { collatz_even(v, 0) };
        assert_eq!(out[t as usize], want, "thread {t}, v = {v}");
    }
    assert!(out[256..].iter().all(|&w| w == POISON));
    assert_clean(&ctx);
}
