//! Control flow and calls through the translator, run on the device:
//! jump tables, irreducible loops, function pointers, `exit` inside a
//! `.func`, `trap`, and `cp.async` with zero fill.

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload_u32, Lcg, POISON};
use ptxvk_runtime::Error;

#[test]
fn brx_idx_jump_table() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/brx_idx.ptx"), "brx_idx.ptx").unwrap();
    let f = m.function("brx_idx").unwrap();
    let n = 1000usize;
    let mut rng = Lcg(11);
    let input: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let din = upload_u32(&ctx, &input);
    let dout = poisoned(&ctx, n + 24);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as u32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [(n as u32).div_ceil(128), 1, 1], [128, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, n + 24);
    for (i, &x) in input.iter().enumerate() {
        let v = match x & 3 {
            0 => 1000,
            1 => 2000,
            2 => x ^ 0x5555,
            _ => x.wrapping_mul(3),
        };
        assert_eq!(out[i], v.wrapping_add(x), "element {i}");
    }
    assert!(out[n..].iter().all(|&v| v == POISON), "threads beyond n wrote");
    assert_clean(&ctx);
}

#[test]
fn irreducible_cycle_with_three_entries() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/irreducible3.ptx"), "irreducible3.ptx").unwrap();
    let f = m.function("irreducible3").unwrap();
    let n = 777usize;
    let mut rng = Lcg(5);
    let input: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let din = upload_u32(&ctx, &input);
    let dout = poisoned(&ctx, 2 * n);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as u32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [(n as u32).div_ceil(64), 1, 1], [64, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 2 * n);
    for (i, &x0) in input.iter().enumerate() {
        let (mut x, mut steps) = (x0, 0u32);
        let mut at = x0 % 3;
        loop {
            match at {
                0 => {
                    x = x.wrapping_mul(5).wrapping_add(1);
                    steps += 1;
                    if steps >= 20 || x % 7 == 0 {
                        break;
                    }
                    at = 1;
                }
                1 => {
                    x ^= x >> 2;
                    steps += 1;
                    if steps >= 20 || x % 5 == 0 {
                        break;
                    }
                    at = 2;
                }
                _ => {
                    x = x.wrapping_add(40503);
                    steps += 1;
                    if steps >= 20 {
                        break;
                    }
                    at = 0;
                }
            }
        }
        assert_eq!((out[2 * i], out[2 * i + 1]), (x, steps), "element {i} (input {x0:#x})");
    }
    assert_clean(&ctx);
}

#[test]
fn function_pointers() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/funcptr.ptx"), "funcptr.ptx").unwrap();
    let f = m.function("apply_ops").unwrap();
    let n = 2000usize;
    let mut rng = Lcg(99);
    let a: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let b: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let sel: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let (da, db, ds) = (upload_u32(&ctx, &a), upload_u32(&ctx, &b), upload_u32(&ctx, &sel));
    let dout = poisoned(&ctx, n + 40);
    let params = f
        .pack_params(&[
            &da.to_le_bytes(),
            &db.to_le_bytes(),
            &ds.to_le_bytes(),
            &dout.to_le_bytes(),
            &(n as i32).to_le_bytes(),
        ])
        .unwrap();
    ctx.launch(&f, [(n as u32).div_ceil(96), 1, 1], [96, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, n + 40);
    for i in 0..n {
        let v = match sel[i] & 3 {
            0 => a[i].wrapping_add(b[i]),
            1 => a[i].wrapping_sub(b[i]),
            2 => a[i].wrapping_mul(b[i]),
            _ => a[i] ^ b[i],
        };
        assert_eq!(out[i], v, "element {i}");
    }
    assert!(out[n..].iter().all(|&v| v == POISON));
    assert_clean(&ctx);
}

/// nvcc's `funcptr_dtor.cu`: function pointers of two signatures, taken in
/// `__device__` tables (module initializers); a 3-argument destructor whose
/// address is taken calls a 1-argument one through a pointer, which is not
/// recursion.
#[test]
fn function_pointer_tables_of_two_signatures() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/funcptr_dtor.ptx"), "funcptr_dtor.ptx").unwrap();
    let f = m.function("run_dtors").unwrap();
    let n = 3000usize;
    let mut rng = Lcg(1234);
    let sel: Vec<u32> = (0..n).map(|_| rng.next_u32() >> 2).collect();
    let mut init: Vec<u32> = (0..2 * n).map(|_| rng.next_u32()).collect();
    init.extend([POISON; 16]);
    let (ds, dout) = (upload_u32(&ctx, &sel), upload_u32(&ctx, &init));
    let params = f.pack_params(&[&dout.to_le_bytes(), &ds.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [(n as u32).div_ceil(128), 1, 1], [128, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 2 * n + 16);
    for i in 0..n {
        let s = sel[i] as i32;
        let mut a = init[2 * i] as i32;
        let size = s >> 4;
        let elem = (s >> 1) % 3; // 0: add 1000, 1: negate, 2: none
        let b = if s & 1 == 0 {
            match elem {
                0 => a = a.wrapping_add(1000),
                1 => a = a.wrapping_neg(),
                _ => {}
            }
            size.wrapping_mul(3)
        } else {
            size + i32::from(elem != 2)
        };
        assert_eq!((out[2 * i] as i32, out[2 * i + 1] as i32), (a, b), "element {i}, sel {s:#x}");
    }
    assert!(out[2 * n..].iter().all(|&v| v == POISON));
    assert_clean(&ctx);
}

/// A call through a pointer that names no function fails the launch (as a
/// call to a bad address does on NVIDIA), and the context with it.
#[test]
fn call_through_a_bad_function_pointer_fails_the_launch() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/funcptr_dtor.ptx"), "funcptr_dtor.ptx").unwrap();
    let f = m.function("call_raw").unwrap();
    let init: Vec<u32> = (0..64).map(|i| i * 3 + 1).collect();
    let dout = upload_u32(&ctx, &init);
    // Through the table: even threads add 1000, odd ones negate.
    let params = f.pack_params(&[&dout.to_le_bytes(), &0x1234u64.to_le_bytes(), &0i32.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [64, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 64);
    for i in 0..64 {
        let v = init[i] as i32;
        let want = if i % 2 == 0 { v + 1000 } else { -v };
        assert_eq!(out[i] as i32, want, "thread {i}");
    }
    assert_clean(&ctx);
    let params = f.pack_params(&[&dout.to_le_bytes(), &0x1234u64.to_le_bytes(), &1i32.to_le_bytes()]).unwrap();
    let failed = ctx.launch(&f, [1, 1, 1], [64, 1, 1], 0, &params).and_then(|_| ctx.synchronize());
    assert!(matches!(failed, Err(Error::LaunchFailed(_))), "{failed:?}");
}

#[test]
fn exit_inside_a_function_ends_the_thread() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/func_exit.ptx"), "func_exit.ptx").unwrap();
    let f = m.function("k").unwrap();
    let dout = poisoned(&ctx, 64);
    let params = f.pack_params(&[&dout.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [64, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 64);
    for (i, &v) in out.iter().enumerate() {
        assert_eq!(v, if i <= 10 { i as u32 } else { POISON }, "thread {i}");
    }
    assert_clean(&ctx);
}

const TRAP: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry maybe_trap(.param .u64 out, .param .u32 bad)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [bad];
    mov.u32 %r2, %tid.x;
    setp.eq.u32 %p1, %r2, %r1;
    @%p1 trap;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd2, %rd1, %rd2;
    st.global.u32 [%rd2], %r2;
    ret;
}
"#;

#[test]
fn trap_fails_the_launch_and_the_context() {
    let ctx = context();
    let m = ctx.load_module(TRAP, "trap.ptx").unwrap();
    let f = m.function("maybe_trap").unwrap();
    let dout = poisoned(&ctx, 32);
    // No thread traps: the launch succeeds.
    let params = f.pack_params(&[&dout.to_le_bytes(), &1000u32.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    assert_eq!(download_u32(&ctx, dout, 32), (0..32).collect::<Vec<u32>>());
    // Thread 5 traps: the synchronisation reports it, and the context stays failed.
    let params = f.pack_params(&[&dout.to_le_bytes(), &5u32.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &params).unwrap();
    match ctx.synchronize() {
        Err(Error::LaunchFailed(msg)) => assert!(msg.contains("trap"), "{msg}"),
        other => panic!("expected LaunchFailed, got {other:?}"),
    }
    assert!(ctx.synchronize().is_err(), "a trap is sticky");
    assert_clean(&ctx);
}

const CP_ASYNC: &str = r#"
.version 8.0
.target sm_80
.address_size 64
// Each thread copies 16 bytes of src into shared memory with a src-size of
// (tid % 17) bytes (zero fill after), twice: once with a register src-size,
// once with ignore-src for odd threads; then writes the shared words out.
.visible .entry cp(.param .u64 src, .param .u64 out)
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .reg .pred %p<2>;
    .shared .align 16 .b8 buf[2048];
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    rem.u32 %r2, %r1, 17;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd4, %rd1, %rd3;
    mov.u32 %r3, buf;
    shl.b32 %r4, %r1, 4;
    add.u32 %r5, %r3, %r4;
    cp.async.cg.shared.global [%r5], [%rd4], 16, %r2;
    and.b32 %r6, %r1, 1;
    setp.eq.u32 %p1, %r6, 1;
    add.u32 %r7, %r5, 1024;
    cp.async.ca.shared.global [%r7], [%rd4], 8, %p1;
    cp.async.ca.shared.global [%r7+8], [%rd4+8], 4, 3;
    cp.async.commit_group;
    cp.async.wait_group 0;
    bar.sync 0;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd2, %rd5;
    shl.b32 %r8, %r1, 2;
    add.u32 %r9, %r3, %r8;
    ld.shared.u32 %r10, [%r9];
    st.global.u32 [%rd6], %r10;
    ld.shared.u32 %r11, [%r9+1024];
    st.global.u32 [%rd6+256], %r11;
    ret;
}
"#;

#[test]
fn cp_async_zero_fills() {
    let ctx = context();
    let m = ctx.load_module(CP_ASYNC, "cp.ptx").unwrap();
    let f = m.function("cp").unwrap();
    let threads = 64usize;
    let mut rng = Lcg(3);
    let src = rng.bytes(threads * 16);
    let dsrc = ctx.alloc(src.len() as u64).unwrap();
    ctx.copy_htod(dsrc, &src).unwrap();
    let dout = poisoned(&ctx, 2 * threads);
    let params = f.pack_params(&[&dsrc.to_le_bytes(), &dout.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [threads as u32, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 2 * threads);
    // Expected shared image: region 0 (1024 bytes) and region 1.
    let mut shared = vec![0u8; 2048];
    for t in 0..threads {
        let n = t % 17;
        for k in 0..16 {
            shared[t * 16 + k] = if k < n { src[t * 16 + k] } else { 0 };
        }
        for k in 0..8 {
            shared[1024 + t * 16 + k] = if t % 2 == 1 { 0 } else { src[t * 16 + k] };
        }
        for k in 0..4 {
            shared[1024 + t * 16 + 8 + k] = if k < 3 { src[t * 16 + 8 + k] } else { 0 };
        }
    }
    let word = |off: usize| u32::from_le_bytes([shared[off], shared[off + 1], shared[off + 2], shared[off + 3]]);
    for t in 0..threads {
        assert_eq!(out[t], word(4 * t), "region 0 word {t}");
        // Region 1 words 12..16 of each thread's slot are never written by cp.async.
        let off = 1024 + 4 * t;
        if (off - 1024) % 16 < 12 {
            assert_eq!(out[threads + t], word(off), "region 1 word {t}");
        }
    }
    assert_clean(&ctx);
}

#[test]
fn four_kib_struct_by_value_with_its_address_taken() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/params_big.ptx"), "params_big.ptx").unwrap();
    let f = m.function("struct_4k").unwrap();
    assert_eq!(f.info().param_passing, ptxvk_runtime::ParamPassing::Buffer);
    let n = 3000usize;
    let mut rng = Lcg(21);
    let table: Vec<u32> = (0..1024).map(|_| rng.next_u32()).collect();
    let idx: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let didx = upload_u32(&ctx, &idx);
    let dout = poisoned(&ctx, n + 16);
    let tbytes: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
    let params =
        f.pack_params(&[&tbytes, &didx.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [(n as u32).div_ceil(128), 1, 1], [128, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, n + 16);
    for i in 0..n {
        let v = table[(idx[i] & 1023) as usize].wrapping_mul(3).wrapping_add(table[i & 1023]);
        assert_eq!(out[i], v, "element {i}");
    }
    assert!(out[n..].iter().all(|&v| v == POISON));
    assert_clean(&ctx);
}

#[test]
fn twenty_mixed_parameters() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/params_big.ptx"), "params_big.ptx").unwrap();
    let f = m.function("many_params").unwrap();
    // 104 bytes: with the 32-byte header, more than lavapipe's 128 bytes of push constants.
    assert_eq!(f.info().param_bytes, 104);
    if ctx.info().max_push_constant_bytes < 136 {
        assert_eq!(f.info().param_passing, ptxvk_runtime::ParamPassing::Buffer);
    }
    let dout = poisoned(&ctx, 64);
    let (a, b, c, d, e, ff) = (-7i8, -300i16, 123456i32, -9_876_543_210i64, 1234.75f32, -98765.25f64);
    let (g, h, i, j) = (200u8, 60000u16, 4_000_000_000u32, 12_345_678_901_234u64);
    let (k, l, mm, nn, o, p, q, r, s) = (1i32, -2i32, 3i32, -4i32, 5.5f64, -6.5f32, 7i32, -8i8, 9_000_000_000i64);
    let args: Vec<Vec<u8>> = vec![
        dout.to_le_bytes().to_vec(),
        a.to_le_bytes().to_vec(),
        b.to_le_bytes().to_vec(),
        c.to_le_bytes().to_vec(),
        d.to_le_bytes().to_vec(),
        e.to_le_bytes().to_vec(),
        ff.to_le_bytes().to_vec(),
        g.to_le_bytes().to_vec(),
        h.to_le_bytes().to_vec(),
        i.to_le_bytes().to_vec(),
        j.to_le_bytes().to_vec(),
        k.to_le_bytes().to_vec(),
        l.to_le_bytes().to_vec(),
        mm.to_le_bytes().to_vec(),
        nn.to_le_bytes().to_vec(),
        o.to_le_bytes().to_vec(),
        p.to_le_bytes().to_vec(),
        q.to_le_bytes().to_vec(),
        r.to_le_bytes().to_vec(),
        s.to_le_bytes().to_vec(),
    ];
    let refs: Vec<&[u8]> = args.iter().map(|v| v.as_slice()).collect();
    let params = f.pack_params(&refs).unwrap();
    ctx.launch(&f, [1, 1, 1], [48, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 64);
    let acc: i64 = a as i64
        + b as i64
        + c as i64
        + d
        + e as i64
        + ff as i64
        + g as i64
        + h as i64
        + i as i64
        + j as i64
        + k as i64
        + l as i64
        + mm as i64
        + nn as i64
        + o as i64
        + p as i64
        + q as i64
        + r as i64
        + s;
    let folded = (acc ^ (acc >> 32)) as i32;
    for (t, &v) in out.iter().take(48).enumerate() {
        assert_eq!(v as i32, folded.wrapping_add(t as i32), "thread {t}");
    }
    assert!(out[48..].iter().all(|&v| v == POISON));
    assert_clean(&ctx);
}

#[test]
fn shared_64_bit_atomics() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/shared_atomics64.ptx"), "sh64.ptx").unwrap();
    let f = m.function("sh64").unwrap();
    let threads = 60usize;
    let mut rng = Lcg(77);
    let input: Vec<u64> = (0..threads).map(|_| (rng.next_u32() as u64) << 32 | rng.next_u32() as u64).collect();
    let bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    let din = ctx.alloc(bytes.len() as u64).unwrap();
    ctx.copy_htod(din, &bytes).unwrap();
    let dout = poisoned(&ctx, 12);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [threads as u32, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 12);
    let word = |i: usize| out[2 * i] as u64 | (out[2 * i + 1] as u64) << 32;
    let sum = input.iter().fold(0u64, |a, &v| a.wrapping_add(v));
    let max = input.iter().map(|&v| v as i64).max().unwrap().max(0) as u64;
    let min = *input.iter().min().unwrap();
    let xor = input.iter().fold(0u64, |a, &v| a ^ v);
    assert_eq!([word(0), word(1), word(2), word(3)], [sum, max, min, xor]);
    assert_eq!(out[8], 1 + 100, "thread 1's 32-bit slot");
    assert_eq!(out[9], 15 + 100, "thread 15's 32-bit slot");
    assert_clean(&ctx);
}

/// CPU model of `control_flow` in tests/fixtures/control_flow.cu.
fn control_flow_reference(v: u32) -> i32 {
    fn classify(v: u32) -> i32 {
        match v % 23 {
            0 => 11,
            1 => 22,
            2 => 33,
            3 => v.wrapping_mul(2) as i32,
            4 => (v >> 3) as i32,
            5 => (v ^ 0xff) as i32,
            6 => 66,
            7 => 77,
            13 => 1300,
            19 => v.wrapping_add(19) as i32,
            22 => -1,
            _ => (v & 7) as i32,
        }
    }
    #[derive(Clone, Copy)]
    struct Pair {
        a: i32,
        b: i64,
        c: f32,
    }
    fn mix(p: Pair, k: i32) -> Pair {
        Pair { a: p.a.wrapping_mul(3).wrapping_add(k), b: p.b ^ ((k as i64) << 20), c: p.c * 0.5 + k as f32 }
    }
    let mut acc = classify(v);
    for r in 0..(v & 15) as i32 {
        if r % 3 == 1 {
            continue;
        }
        for c in 0..8 {
            if (v >> c) & 1 == 1 {
                acc = acc.wrapping_add(r * c);
            } else if c > r {
                break;
            }
        }
        if acc > 5000 {
            return acc.wrapping_neg();
        }
    }
    let mut p = Pair { a: v as i32, b: (v as i64).wrapping_mul(1_000_003), c: (v & 1023) as f32 };
    for i in 0..(v & 3) as i32 + 1 {
        p = mix(p, i);
    }
    acc = acc.wrapping_add(p.a.wrapping_add((p.b >> 7) as i32).wrapping_add(p.c as i32));
    let y = (v >> 5) as i32;
    match v % 3 {
        0 => acc.wrapping_add(y),
        1 => acc.wrapping_shl((y & 7) as u32),
        _ => acc.min(y),
    }
}

fn run_control_flow(ptx: &str, name: &str) {
    let ctx = context();
    let m = ctx.load_module(ptx, name).unwrap();
    let f = m.function("control_flow").unwrap();
    let n = 3001usize;
    let mut rng = Lcg(1234);
    let mut input: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    // Small values take the early-return and long-loop paths too.
    for (i, v) in input.iter_mut().enumerate().take(600) {
        *v = i as u32 * 37;
    }
    let din = upload_u32(&ctx, &input);
    let dout = poisoned(&ctx, n + 64);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [(n as u32).div_ceil(128), 1, 1], [128, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, n + 64);
    for (i, &v) in input.iter().enumerate() {
        assert_eq!(out[i] as i32, control_flow_reference(v), "{name}: element {i} (input {v})");
    }
    assert!(out[n..].iter().all(|&v| v == POISON));
    assert_clean(&ctx);
}

#[test]
fn nvcc_control_flow_o3() {
    run_control_flow(include_str!("../../tests/fixtures/control_flow.ptx"), "control_flow.ptx");
}

#[test]
fn nvcc_control_flow_debug_o0() {
    run_control_flow(include_str!("../../tests/fixtures/control_flow_debug.ptx"), "control_flow_debug.ptx");
}

/// f16, f16x2 and bf16 atomics (global and shared), on values whose sums
/// are exact in every order, so the result does not depend on scheduling.
#[test]
fn half_precision_atomics() {
    use half::{bf16, f16};
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/half_atomics.ptx"), "half_atomics.ptx").unwrap();
    let f = m.function("hatom").unwrap();
    let threads = 128usize;
    let mut rng = Lcg(8);
    // Multiples of 1/8 in [0, 1): sums of 32 of them are exact in f16; the
    // same bits read as bf16 are checked against their own exact sums.
    let vals: Vec<f32> = (0..threads).map(|_| (rng.next_u32() % 8) as f32 / 8.0).collect();
    let in16: Vec<u16> = vals.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
    let pairs: Vec<u32> = (0..threads)
        .map(|i| {
            let lo = f16::from_f32(vals[i]).to_bits() as u32;
            let hi = f16::from_f32(vals[(i + 7) % threads]).to_bits() as u32;
            lo | hi << 16
        })
        .collect();
    let b16: Vec<u8> = in16.iter().flat_map(|v| v.to_le_bytes()).collect();
    let d16 = ctx.alloc(b16.len() as u64).unwrap();
    ctx.copy_htod(d16, &b16).unwrap();
    // bf16 inputs: multiples of 1/4 in [0, 2): sums of 43 of them are exact in bf16.
    let valsb: Vec<f32> = (0..threads).map(|_| (rng.next_u32() % 8) as f32 / 4.0).collect();
    let bb: Vec<u8> = valsb.iter().flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes()).collect();
    let db = ctx.alloc(bb.len() as u64).unwrap();
    ctx.copy_htod(db, &bb).unwrap();
    let d32 = upload_u32(&ctx, &pairs);
    let acc16 = ctx.alloc(8).unwrap();
    ctx.memset_d8(acc16, 0, 8).unwrap();
    let acc2 = ctx.alloc(8).unwrap();
    ctx.memset_d8(acc2, 0, 8).unwrap();
    let accb = ctx.alloc(8).unwrap();
    ctx.memset_d8(accb, 0, 8).unwrap();
    let dout = poisoned(&ctx, 1);
    let params = f
        .pack_params(&[
            &d16.to_le_bytes(),
            &d32.to_le_bytes(),
            &db.to_le_bytes(),
            &acc16.to_le_bytes(),
            &acc2.to_le_bytes(),
            &accb.to_le_bytes(),
            &dout.to_le_bytes(),
        ])
        .unwrap();
    ctx.launch(&f, [1, 1, 1], [threads as u32, 1, 1], 0, &params).unwrap();
    let halves = |d: u64| -> Vec<u16> {
        let mut b = vec![0u8; 8];
        ctx.copy_dtoh(&mut b, d).unwrap();
        b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
    };
    let got16 = halves(acc16);
    for (slot, &got) in got16.iter().enumerate() {
        let sum: f32 = (0..threads).filter(|i| i % 4 == slot).map(|i| vals[i]).sum();
        assert_eq!(got, f16::from_f32(sum).to_bits(), "f16 slot {slot}");
    }
    let got2 = halves(acc2);
    for slot in 0..2 {
        let lo: f32 = (0..threads).filter(|i| i % 2 == slot).map(|i| vals[i]).sum();
        let hi: f32 = (0..threads).filter(|i| i % 2 == slot).map(|i| vals[(i + 7) % threads]).sum();
        assert_eq!(got2[2 * slot], f16::from_f32(lo).to_bits(), "f16x2 slot {slot} low");
        assert_eq!(got2[2 * slot + 1], f16::from_f32(hi).to_bits(), "f16x2 slot {slot} high");
    }
    let gotb = halves(accb);
    for (slot, &got) in gotb.iter().take(3).enumerate() {
        let sum: f32 = (0..threads).filter(|i| i % 3 == slot).map(|i| valsb[i]).sum();
        assert_eq!(got, bf16::from_f32(sum).to_bits(), "bf16 slot {slot}");
    }
    let shared = download_u32(&ctx, dout, 1)[0];
    let sum: f32 = vals.iter().sum();
    assert_eq!(shared & 0xffff, 0, "the other half of the shared word is untouched");
    assert_eq!((shared >> 16) as u16, f16::from_f32(sum).to_bits(), "shared f16 accumulator");
    assert_clean(&ctx);
}

#[test]
fn alloca_stacksave_stackrestore() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/alloca.ptx"), "alloca.ptx").unwrap();
    let f = m.function("alloca_sum").unwrap();
    let dout = poisoned(&ctx, 128);
    let params = f.pack_params(&[&dout.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [64, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 128);
    for t in 0..64u32 {
        let n = 4 + t % 13;
        let sum: u32 = (0..n).map(|k| k * 7 + t).sum();
        assert_eq!(out[t as usize], sum, "thread {t}");
        assert_eq!(out[64 + t as usize], 1, "thread {t}: stackrestore gives the space back");
    }
    assert_clean(&ctx);
}

const DYN_SMEM: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry dyn_size(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %dynamic_smem_size;
    st.global.u32 [%rd1], %r1;
    ret;
}
"#;

#[test]
fn dynamic_smem_size_register() {
    let ctx = context();
    let m = ctx.load_module(DYN_SMEM, "dyn.ptx").unwrap();
    let f = m.function("dyn_size").unwrap();
    let dout = poisoned(&ctx, 1);
    for bytes in [0u32, 13, 4096] {
        let params = f.pack_params(&[&dout.to_le_bytes()]).unwrap();
        ctx.launch(&f, [1, 1, 1], [32, 1, 1], bytes, &params).unwrap();
        assert_eq!(download_u32(&ctx, dout, 1)[0], bytes);
    }
    assert_clean(&ctx);
}

const SET_HALF: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry set_half(.param .u64 a, .param .u64 b, .param .u64 out)
{
    .reg .b16 %h<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    ld.global.b32 %r2, [%rd5];
    ld.global.b32 %r3, [%rd6];
    mov.b32 {%h1, %h2}, %r2;
    mov.b32 {%h3, _}, %r3;
    set.eq.f16.f16 %h0, %h1, %h3;
    set.ltu.u32.f16x2 %r4, %r2, %r3;
    mul.wide.u32 %rd7, %r1, 8;
    add.s64 %rd7, %rd3, %rd7;
    cvt.u32.u16 %r5, %h0;
    st.global.u32 [%rd7], %r5;
    st.global.u32 [%rd7+4], %r4;
    ret;
}
"#;

#[test]
fn half_set() {
    use half::f16;
    let ctx = context();
    let m = ctx.load_module(SET_HALF, "set_half.ptx").unwrap();
    let f = m.function("set_half").unwrap();
    let pick = [0.0f32, -0.0, 1.5, -2.0, 65504.0, f32::NAN, f32::INFINITY, 0.25];
    let n = 64usize;
    let mut rng = Lcg(31);
    let mut h = || f16::from_f32(pick[(rng.next_u32() % 8) as usize]).to_bits() as u32;
    let a: Vec<u32> = (0..n).map(|_| h() | h() << 16).collect();
    let b: Vec<u32> = (0..n).map(|i| if i % 5 == 0 { a[i] } else { h() | h() << 16 }).collect();
    let (da, db) = (upload_u32(&ctx, &a), upload_u32(&ctx, &b));
    let dout = poisoned(&ctx, 2 * n);
    let params = f.pack_params(&[&da.to_le_bytes(), &db.to_le_bytes(), &dout.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [n as u32, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, dout, 2 * n);
    let val = |bits: u32| f16::from_bits(bits as u16).to_f32();
    for i in 0..n {
        let eq = val(a[i] & 0xffff) == val(b[i] & 0xffff);
        assert_eq!(out[2 * i], if eq { 0x3c00 } else { 0 }, "set.eq.f16 {i}");
        let ltu = |x: f32, y: f32| x < y || x.is_nan() || y.is_nan();
        let lo = if ltu(val(a[i] & 0xffff), val(b[i] & 0xffff)) { 0xffff } else { 0 };
        let hi = if ltu(val(a[i] >> 16), val(b[i] >> 16)) { 0xffff } else { 0 };
        assert_eq!(out[2 * i + 1], lo | hi << 16, "set.ltu.u32.f16x2 {i}");
    }
    assert_clean(&ctx);
}
