//! Integer and bit instruction semantics on the device against references
//! in Rust: carry chains, `bfe bfi prmt shf bmsk szext lop3 dp4a dp2a sad
//! mul24 mad24`, division by zero and `MIN / -1`, shifts at and beyond the
//! width, `min`/`max` with `.relu` and packed 16-bit forms, `popc clz brev
//! bfind`, `mul.hi`/`.wide`, `add.sat`, `cnot abs neg`.

mod sem;

use sem::{check, run, Lcg, T};

const N: usize = 10_000;

fn words(seed: u64) -> Vec<u64> {
    let mut r = Lcg(seed);
    (0..N).map(|_| r.wild64() & 0xffff_ffff).collect()
}

fn dwords(seed: u64) -> Vec<u64> {
    let mut r = Lcg(seed);
    (0..N).map(|_| r.wild64()).collect()
}

/// Field positions/lengths spread over 0..=300 (beyond every width).
fn fields(seed: u64) -> Vec<u64> {
    let mut r = Lcg(seed);
    (0..N).map(|_| if r.next_u32() & 3 == 0 { r.next_u32() as u64 } else { (r.next_u32() % 70) as u64 }).collect()
}

fn bfe_ref(a: u64, pos: u64, len: u64, bits: u32, signed: bool) -> u64 {
    let (pos, len) = ((pos & 0xff) as u32, (len & 0xff) as u32);
    let msb = bits - 1;
    let bit = |i: u32| (a >> i) & 1;
    let sbit = if signed && len > 0 { bit((pos + len - 1).min(msb)) } else { 0 };
    let mut d = 0u64;
    for i in 0..bits {
        let b = if i < len && pos + i <= msb { bit(pos + i) } else { sbit };
        d |= b << i;
    }
    d
}

fn bfi_ref(a: u64, b: u64, pos: u64, len: u64, bits: u32) -> u64 {
    let (pos, len) = ((pos & 0xff) as u32, (len & 0xff) as u32);
    let mut f = b;
    let mut i = 0;
    while i < len && pos + i < bits {
        f = (f & !(1u64 << (pos + i))) | (((a >> i) & 1) << (pos + i));
        i += 1;
    }
    f
}

#[test]
fn bfe_bfi() {
    for (bits, t) in [(32, T::B32), (64, T::B64)] {
        let a = if bits == 32 { words(1) } else { dwords(1) };
        let b = if bits == 32 { words(2) } else { dwords(2) };
        let (p, l) = (fields(3), fields(4));
        let ins = [(t, a.clone()), (T::B32, p.clone()), (T::B32, l.clone())];
        for signed in [false, true] {
            let ty = format!("{}{bits}", if signed { "s" } else { "u" });
            let body = format!("bfe.{ty} out0, in0, in1, in2;");
            let got = run(&ins, &[t], &body);
            let want: Vec<u64> = (0..N).map(|i| bfe_ref(a[i], p[i], l[i], bits, signed)).collect();
            check(&body, &ins, &got[0], &want);
        }
        let ins = [(t, a.clone()), (t, b.clone()), (T::B32, p.clone()), (T::B32, l.clone())];
        let body = format!("bfi.b{bits} out0, in0, in1, in2, in3;");
        let got = run(&ins, &[t], &body);
        let want: Vec<u64> = (0..N).map(|i| bfi_ref(a[i], b[i], p[i], l[i], bits)).collect();
        check(&body, &ins, &got[0], &want);
    }
}

fn prmt_ref(a: u32, b: u32, c: u32, mode: &str) -> u32 {
    let x = ((b as u64) << 32) | a as u64;
    let byte = |i: u32| ((x >> (8 * (i & 7))) & 0xff) as u32;
    let tab: Option<[[u32; 4]; 4]> = match mode {
        "f4e" => Some([[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]]),
        "b4e" => Some([[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]]),
        "rc8" => Some([[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]]),
        "ecl" => Some([[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]]),
        "ecr" => Some([[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]]),
        "rc16" => Some([[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]]),
        _ => None,
    };
    let mut d = 0;
    for i in 0..4 {
        let v = match tab {
            // Tables list d.b0..d.b3.
            Some(t) => byte(t[(c & 3) as usize][i as usize]),
            None => {
                let s = (c >> (4 * i)) & 0xf;
                let v = byte(s & 7);
                if s & 8 != 0 {
                    if v & 0x80 != 0 {
                        0xff
                    } else {
                        0
                    }
                } else {
                    v
                }
            }
        };
        d |= v << (8 * i);
    }
    d
}

#[test]
fn prmt_all_modes() {
    let (a, b, c) = (words(5), words(6), words(7));
    let ins = [(T::B32, a.clone()), (T::B32, b.clone()), (T::B32, c.clone())];
    for mode in ["", "f4e", "b4e", "rc8", "ecl", "ecr", "rc16"] {
        let m = if mode.is_empty() { String::new() } else { format!(".{mode}") };
        let body = format!("prmt.b32{m} out0, in0, in1, in2;");
        let got = run(&ins, &[T::B32], &body);
        let want: Vec<u64> = (0..N).map(|i| prmt_ref(a[i] as u32, b[i] as u32, c[i] as u32, mode) as u64).collect();
        check(&body, &ins, &got[0], &want);
    }
}

#[test]
fn funnel_shifts_masks_and_extends() {
    let (a, b) = (words(8), words(9));
    let n = fields(10);
    let ins = [(T::B32, a.clone()), (T::B32, b.clone()), (T::B32, n.clone())];
    for (dir, mode) in [("l", "clamp"), ("l", "wrap"), ("r", "clamp"), ("r", "wrap")] {
        let body = format!("shf.{dir}.{mode}.b32 out0, in0, in1, in2;");
        let got = run(&ins, &[T::B32], &body);
        let want: Vec<u64> = (0..N)
            .map(|i| {
                let s = if mode == "wrap" { n[i] as u32 & 31 } else { (n[i] as u32).min(32) };
                let x = (b[i] << 32) | a[i];
                if dir == "l" {
                    ((x << s) >> 32) & 0xffff_ffff
                } else {
                    (x >> s) & 0xffff_ffff
                }
            })
            .collect();
        check(&body, &ins, &got[0], &want);
    }
    let p = fields(11);
    let ins = [(T::B32, p.clone()), (T::B32, n.clone()), (T::B32, a.clone())];
    for mode in ["clamp", "wrap"] {
        let f = |v: u64| if mode == "wrap" { v as u32 & 31 } else { (v as u32).min(32) };
        let body = format!("{{ bmsk.{mode}.b32 out0, in0, in1; szext.{mode}.s32 out1, in2, in1; }}");
        let got = run(&ins, &[T::B32, T::B32], &body);
        let want0: Vec<u64> = (0..N)
            .map(|i| {
                let (pos, len) = (f(p[i]), f(n[i]));
                let m = if len >= 32 { u64::MAX } else { (1u64 << len) - 1 };
                if pos >= 32 {
                    0
                } else {
                    (m << pos) & 0xffff_ffff
                }
            })
            .collect();
        let want1: Vec<u64> = (0..N)
            .map(|i| {
                let k = f(n[i]);
                let v = a[i] as u32;
                (match k {
                    0 => 0,
                    32 => v,
                    _ => (((v << (32 - k)) as i32) >> (32 - k)) as u32,
                }) as u64
            })
            .collect();
        check(&body, &ins, &got[0], &want0);
        check(&body, &ins, &got[1], &want1);
    }
}

#[test]
fn lop3_dp_sad_mul24() {
    let (a, b, c) = (words(12), words(13), words(14));
    let ins = [(T::B32, a.clone()), (T::B32, b.clone()), (T::B32, c.clone())];
    for lut in [0x00u32, 0xff, 0x96, 0xe8, 0xca, 0x1e, 0x80, 0x01, 0x6a] {
        let body = format!("lop3.b32 out0, in0, in1, in2, {lut};");
        let got = run(&ins, &[T::B32], &body);
        let want: Vec<u64> = (0..N)
            .map(|i| {
                let mut r = 0u32;
                for bit in 0..32 {
                    let idx = (((a[i] >> bit) & 1) << 2) | (((b[i] >> bit) & 1) << 1) | ((c[i] >> bit) & 1);
                    r |= ((lut >> idx) & 1) << bit;
                }
                r as u64
            })
            .collect();
        check(&body, &ins, &got[0], &want);
    }
    let lane = |v: u64, i: u32, w: u32, s: bool| -> i64 {
        let x = (v >> (w * i)) & ((1 << w) - 1);
        if s && x >> (w - 1) != 0 {
            x as i64 - (1i64 << w)
        } else {
            x as i64
        }
    };
    for (ta, tb) in [("u32", "u32"), ("s32", "s32"), ("u32", "s32"), ("s32", "u32")] {
        let (sa, sb) = (ta == "s32", tb == "s32");
        let body = format!("{{ dp4a.{ta}.{tb} out0, in0, in1, in2; dp2a.hi.{ta}.{tb} out1, in0, in1, in2; }}");
        let got = run(&ins, &[T::B32, T::B32], &body);
        let want0: Vec<u64> = (0..N)
            .map(|i| {
                let s: i64 = (0..4).map(|k| lane(a[i], k, 8, sa) * lane(b[i], k, 8, sb)).sum();
                (c[i] as i64).wrapping_add(s) as u64 & 0xffff_ffff
            })
            .collect();
        let want1: Vec<u64> = (0..N)
            .map(|i| {
                let s: i64 = (0..2).map(|k| lane(a[i], k, 16, sa) * lane(b[i], 2 + k, 8, sb)).sum();
                (c[i] as i64).wrapping_add(s) as u64 & 0xffff_ffff
            })
            .collect();
        check(&body, &ins, &got[0], &want0);
        check(&body, &ins, &got[1], &want1);
    }
    let body = "{ sad.s32 out0, in0, in1, in2; sad.u32 out1, in0, in1, in2; }";
    let got = run(&ins, &[T::B32, T::B32], body);
    let w0: Vec<u64> = (0..N).map(|i| (c[i] as u32).wrapping_add((a[i] as i32).abs_diff(b[i] as i32)) as u64).collect();
    let w1: Vec<u64> = (0..N).map(|i| (c[i] as u32).wrapping_add((a[i] as u32).abs_diff(b[i] as u32)) as u64).collect();
    check(body, &ins, &got[0], &w0);
    check(body, &ins, &got[1], &w1);
    for s in [false, true] {
        let ty = if s { "s32" } else { "u32" };
        let body = format!("{{ mul24.hi.{ty} out0, in0, in1; mad24.lo.{ty} out1, in0, in1, in2; }}");
        let got = run(&ins, &[T::B32, T::B32], &body);
        let x24 = |v: u64| if s { lane(v, 0, 24, true) } else { (v & 0xff_ffff) as i64 };
        let w0: Vec<u64> = (0..N).map(|i| ((x24(a[i]) * x24(b[i])) >> 16) as u64 & 0xffff_ffff).collect();
        let w1: Vec<u64> = (0..N).map(|i| ((x24(a[i]) * x24(b[i])) as u64).wrapping_add(c[i]) & 0xffff_ffff).collect();
        check(&body, &ins, &got[0], &w0);
        check(&body, &ins, &got[1], &w1);
    }
}

#[test]
fn carry_chains() {
    // 96-bit add and subtract as three-word chains, 64-bit multiply-accumulate with madc.
    let (a0, a1, a2) = (words(15), words(16), words(17));
    let (b0, b1, b2) = (words(18), words(19), words(20));
    let ins = [(T::B32, a0.clone()), (T::B32, a1.clone()), (T::B32, b0.clone()), (T::B32, b1.clone())];
    let _ = (&a2, &b2);
    let body = "{ .reg .b32 s0, s1, s2, d0, d1, d2;
        add.cc.u32 s0, in0, in2; addc.cc.u32 s1, in1, in3; addc.u32 s2, 0, 0;
        sub.cc.u32 d0, in0, in2; subc.cc.u32 d1, in1, in3; subc.u32 d2, 0, 0;
        mov.b64 out0, {s0, s1}; xor.b32 s2, s2, d2; shl.b32 s2, s2, 4; add.u32 s2, s2, d2;
        mov.b64 out1, {d0, d1}; mov.b64 out2, {s2, d2}; }";
    let got = run(&ins, &[T::B64, T::B64, T::B64], body);
    for i in 0..N {
        let x = a0[i] | (a1[i] << 32);
        let y = b0[i] | (b1[i] << 32);
        let (s, c) = x.overflowing_add(y);
        let (d, bo) = x.overflowing_sub(y);
        assert_eq!(got[0][i], s, "add chain {i}");
        assert_eq!(got[1][i], d, "sub chain {i}");
        let s2 = c as u32;
        let d2 = 0u32.wrapping_sub(bo as u32);
        assert_eq!(got[2][i] as u32, ((s2 ^ d2) << 4).wrapping_add(d2), "carry words {i}");
    }
    // (a1:a0) * (b1:b0) low 64 bits + high words via mad.lo.cc/madc.hi.
    let body = "{ .reg .b32 r0, r1, r2, r3;
        mul.lo.u32 r0, in0, in2;
        mul.hi.u32 r1, in0, in2;
        mad.lo.cc.u32 r1, in1, in2, r1;
        madc.hi.u32 r2, in1, in2, 0;
        mad.lo.cc.u32 r1, in0, in3, r1;
        madc.hi.cc.u32 r2, in0, in3, r2;
        addc.u32 r3, 0, 0;
        mad.lo.cc.u32 r2, in1, in3, r2;
        madc.hi.u32 r3, in1, in3, r3;
        mov.b64 out0, {r0, r1}; mov.b64 out1, {r2, r3}; }";
    let got = run(&ins, &[T::B64, T::B64], body);
    for i in 0..N {
        let x = (a0[i] | (a1[i] << 32)) as u128;
        let y = (b0[i] | (b1[i] << 32)) as u128;
        let p = x * y;
        assert_eq!(got[0][i], p as u64, "mul lo {i}");
        assert_eq!(got[1][i], (p >> 64) as u64, "mul hi {i}");
    }
    // 64-bit carries.
    let (x, y) = (dwords(21), dwords(22));
    let ins = [(T::B64, x.clone()), (T::B64, y.clone())];
    let body = "{ .reg .b64 t; add.cc.u64 out0, in0, in1; addc.u64 out1, 0, 0; sub.cc.s64 t, in0, in1; subc.u64 t, 0, 0; add.u64 out1, out1, t; }";
    let got = run(&ins, &[T::B64, T::B64], body);
    for i in 0..N {
        let (s, c) = x[i].overflowing_add(y[i]);
        let bo = x[i] < y[i];
        assert_eq!(got[0][i], s);
        assert_eq!(got[1][i], (c as u64).wrapping_sub(bo as u64), "carry64 {i}");
    }
}

#[test]
fn division_shifts_and_arith() {
    let mut a = words(23);
    let mut b = words(24);
    // Division edges: by zero, MIN / -1.
    for (k, (x, y)) in
        [(5u64, 0u64), (0x8000_0000, 0xffff_ffff), (0xffff_fff0, 0), (0, 0), (7, 0xffff_ffff)].iter().enumerate()
    {
        a[k] = *x;
        b[k] = *y;
    }
    let ins = [(T::B32, a.clone()), (T::B32, b.clone())];
    let body2 = "{ .reg .b32 q, r, uq, ur; div.s32 q, in0, in1; rem.s32 r, in0, in1; div.u32 uq, in0, in1; rem.u32 ur, in0, in1;
        mov.b64 out0, {q, r}; mov.b64 out1, {uq, ur}; }";
    let got = run(&ins, &[T::B64, T::B64], body2);
    for i in 0..N {
        let (x, y) = (a[i] as u32, b[i] as u32);
        let (q, r) = if y == 0 {
            (u32::MAX, u32::MAX)
        } else {
            ((x as i32).wrapping_div(y as i32) as u32, (x as i32).wrapping_rem(y as i32) as u32)
        };
        let (uq, ur) = x.checked_div(y).zip(x.checked_rem(y)).unwrap_or((u32::MAX, u32::MAX));
        assert_eq!(got[0][i], q as u64 | ((r as u64) << 32), "signed div/rem {x:#x} {y:#x}");
        assert_eq!(got[1][i], uq as u64 | ((ur as u64) << 32), "unsigned div/rem {x:#x} {y:#x}");
    }
    // Shifts at and beyond the width.
    let n = fields(25);
    let ins = [(T::B32, a.clone()), (T::B32, n.clone())];
    let body = "{ .reg .b32 l, r, s; shl.b32 l, in0, in1; shr.u32 r, in0, in1; shr.s32 s, in0, in1; mov.b64 out0, {l, r}; cvt.u64.u32 out1, s; }";
    let got = run(&ins, &[T::B64, T::B64], body);
    for i in 0..N {
        let (x, s) = (a[i] as u32, n[i] as u32);
        let l = if s >= 32 { 0 } else { x << s };
        let r = if s >= 32 { 0 } else { x >> s };
        let sa = ((x as i32) >> s.min(31)) as u32;
        assert_eq!(got[0][i], l as u64 | ((r as u64) << 32), "shl/shr {x:#x} {s}");
        assert_eq!(got[1][i], sa as u64, "shr.s32 {x:#x} {s}");
    }
    // Saturating add, relu, hi/wide multiplies, bit counts.
    let ins = [(T::B32, a.clone()), (T::B32, b.clone())];
    let body = "{ .reg .b32 s, m, h, c; add.sat.s32 s, in0, in1; max.relu.s32 m, in0, in1; mul.hi.s32 h, in0, in1; sub.sat.s32 c, in0, in1;
        mov.b64 out0, {s, m}; mov.b64 out1, {h, c}; mul.wide.s32 out2, in0, in1; }";
    let got = run(&ins, &[T::B64, T::B64, T::B64], body);
    for i in 0..N {
        let (x, y) = (a[i] as u32 as i32, b[i] as u32 as i32);
        let s = x.saturating_add(y) as u32;
        let m = x.max(y).max(0) as u32;
        let h = ((x as i64 * y as i64) >> 32) as u32;
        let c = x.saturating_sub(y) as u32;
        assert_eq!(got[0][i], s as u64 | ((m as u64) << 32));
        assert_eq!(got[1][i], h as u64 | ((c as u64) << 32));
        assert_eq!(got[2][i], (x as i64 * y as i64) as u64);
    }
    let w = dwords(26);
    let ins = [(T::B64, w.clone())];
    let body = "{ .reg .b32 p, z, f, g; popc.b64 p, in0; clz.b64 z, in0; bfind.s64 f, in0; bfind.shiftamt.u64 g, in0;
        mov.b64 out0, {p, z}; mov.b64 out1, {f, g}; brev.b64 out2, in0; }";
    let got = run(&ins, &[T::B64, T::B64, T::B64], body);
    for i in 0..N {
        let v = w[i];
        let f = {
            let x = if (v as i64) < 0 { !v } else { v };
            if x == 0 {
                u32::MAX
            } else {
                63 - x.leading_zeros()
            }
        };
        let g = if v == 0 { u32::MAX } else { v.leading_zeros() };
        assert_eq!(got[0][i], v.count_ones() as u64 | ((v.leading_zeros() as u64) << 32), "popc/clz {v:#x}");
        assert_eq!(got[1][i], f as u64 | ((g as u64) << 32), "bfind {v:#x}");
        assert_eq!(got[2][i], v.reverse_bits(), "brev {v:#x}");
    }
    // Packed 16-bit.
    let ins = [(T::B32, a.clone()), (T::B32, b.clone())];
    let body = "{ .reg .b32 x, y, z, u; add.sat.s16x2 x, in0, in1; min.u16x2 y, in0, in1; max.relu.s16x2 z, in0, in1; sub.u16x2 u, in0, in1;
        mov.b64 out0, {x, y}; mov.b64 out1, {z, u}; }";
    let got = run(&ins, &[T::B64, T::B64], body);
    for i in 0..N {
        let l = |v: u64, k: u32| (v >> (16 * k)) as u16;
        let mut x = 0u32;
        let mut y = 0u32;
        let mut z = 0u32;
        let mut u = 0u32;
        for k in 0..2 {
            let (p, q) = (l(a[i], k), l(b[i], k));
            x |= ((p as i16).saturating_add(q as i16) as u16 as u32) << (16 * k);
            y |= (p.min(q) as u32) << (16 * k);
            z |= ((p as i16).max(q as i16).max(0) as u16 as u32) << (16 * k);
            u |= (p.wrapping_sub(q) as u32) << (16 * k);
        }
        assert_eq!(got[0][i], x as u64 | ((y as u64) << 32), "packed add/min {:#x} {:#x}", a[i], b[i]);
        assert_eq!(got[1][i], z as u64 | ((u as u64) << 32), "packed max.relu/sub {:#x} {:#x}", a[i], b[i]);
    }
    let ins = [(T::B32, a.clone())];
    let body = "{ .reg .b32 c, s, n; cnot.b32 c, in0; abs.s32 s, in0; neg.s32 n, in0; mov.b64 out0, {c, s}; cvt.u64.u32 out1, n; }";
    let got = run(&ins, &[T::B64, T::B64], body);
    for i in 0..N {
        let x = a[i] as u32;
        let c = (x == 0) as u32;
        let s = (x as i32).wrapping_abs() as u32;
        assert_eq!(got[0][i], c as u64 | ((s as u64) << 32));
        assert_eq!(got[1][i], (x as i32).wrapping_neg() as u32 as u64);
    }
}

/// `fns` as the PTX ISA's pseudocode defines it (base below 32).
fn fns_ref(mask: u32, base: u32, offset: i32) -> u32 {
    if offset == 0 {
        return if mask >> base & 1 == 1 { base } else { u32::MAX };
    }
    let inc = if offset > 0 { 1 } else { -1 };
    let mut count = offset.unsigned_abs() - 1;
    let mut pos = base as i32;
    while (0..32).contains(&pos) {
        if mask >> pos & 1 == 1 {
            if count == 0 {
                return pos as u32;
            }
            count -= 1;
        }
        pos += inc;
    }
    u32::MAX
}

#[test]
fn find_nth_set() {
    let m = words(30);
    let mut r = Lcg(31);
    let base: Vec<u64> = (0..N).map(|_| (r.next_u32() % 32) as u64).collect();
    let off: Vec<u64> = (0..N).map(|_| ((r.next_u32() % 71) as i32 - 35) as u32 as u64).collect();
    let ins = [(T::B32, m.clone()), (T::B32, base.clone()), (T::B32, off.clone())];
    let body = "fns.b32 out0, in0, in1, in2;";
    let got = run(&ins, &[T::B32], body);
    let want: Vec<u64> = (0..N).map(|i| fns_ref(m[i] as u32, base[i] as u32, off[i] as u32 as i32) as u64).collect();
    check(body, &ins, &got[0], &want);
}

#[test]
fn lop3_bool_op_predicate() {
    // Sparse words so that `d == 0` happens often.
    let sparse =
        |seed: u64| -> Vec<u64> {
            let mut r = Lcg(seed);
            (0..N)
                .map(|_| {
                    if r.next_u32().is_multiple_of(3) {
                        0
                    } else {
                        (r.next_u32() & r.next_u32() & r.next_u32()) as u64
                    }
                })
                .collect()
        };
    let (a, b, c, q) = (sparse(71), sparse(72), sparse(73), words(74));
    let ins = [(T::B32, a.clone()), (T::B32, b.clone()), (T::B32, c.clone()), (T::B32, q.clone())];
    let f = |lut: u32, i: usize| -> u32 {
        let mut r = 0u32;
        for bit in 0..32 {
            let idx = (((a[i] >> bit) & 1) << 2) | (((b[i] >> bit) & 1) << 1) | ((c[i] >> bit) & 1);
            r |= ((lut >> idx) & 1) << bit;
        }
        r
    };
    for lut in [0x80u32, 0xfe, 0x96, 0x40, 0x00, 0xff, 0x3f] {
        for op in ["and", "or"] {
            let body = format!(
                "{{ .reg .pred p, q, nq; setp.ne.u32 q, in3, 0; not.pred nq, q; lop3.{op}.b32 out0|p, in0, in1, in2, {lut}, q; \
                 selp.b32 out1, 1, 0, p; lop3.{op}.b32 _|p, in1, in2, in0, {lut}, nq; selp.b32 out2, 1, 0, p; }}"
            );
            let got = run(&ins, &[T::B32, T::B32, T::B32], &body);
            let want0: Vec<u64> = (0..N).map(|i| f(lut, i) as u64).collect();
            let bop = |x: bool, y: bool| if op == "and" { x && y } else { x || y };
            let want1: Vec<u64> = (0..N).map(|i| bop(f(lut, i) != 0, q[i] != 0) as u64).collect();
            // The sink form rotates the inputs: F(b, c, a).
            let g = |i: usize| -> u32 {
                let mut r = 0u32;
                for bit in 0..32 {
                    let idx = (((b[i] >> bit) & 1) << 2) | (((c[i] >> bit) & 1) << 1) | ((a[i] >> bit) & 1);
                    r |= ((lut >> idx) & 1) << bit;
                }
                r
            };
            let want2: Vec<u64> = (0..N).map(|i| bop(g(i) != 0, q[i] == 0) as u64).collect();
            check(&body, &ins, &got[0], &want0);
            check(&body, &ins, &got[1], &want1);
            check(&body, &ins, &got[2], &want2);
        }
    }
}

#[test]
fn slct_every_type() {
    let (a, b) = (dwords(81), dwords(82));
    let mut r = Lcg(83);
    let sel_i: Vec<u64> = (0..N).map(|_| r.wild64() & 0xffff_ffff).collect();
    let sel_f: Vec<u64> = (0..N).map(|_| sem::rand_f32(&mut r)).collect();
    for dt in ["b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64", "f32", "f64"] {
        let (t, mask) = match &dt[1..] {
            "16" => (T::B16, 0xffffu64),
            "32" => (T::B32, 0xffff_ffff),
            _ => (T::B64, u64::MAX),
        };
        let (ta, tb): (Vec<u64>, Vec<u64>) =
            (a.iter().map(|v| v & mask).collect(), b.iter().map(|v| v & mask).collect());
        for (st, ftz, c) in [("s32", "", &sel_i), ("f32", "", &sel_f), ("f32", ".ftz", &sel_f)] {
            let ins = [(t, ta.clone()), (t, tb.clone()), (T::B32, c.clone())];
            let body = format!(
                "{{ .reg .{dt} x, y, z; .reg .{st} s; mov.b{w} x, in0; mov.b{w} y, in1; mov.b32 s, in2; \
                 slct{ftz}.{dt}.{st} z, x, y, s; mov.b{w} out0, z; }}",
                w = &dt[1..]
            );
            let got = run(&ins, &[t], &body);
            let want: Vec<u64> = (0..N)
                .map(|i| {
                    let ge = if st == "s32" {
                        c[i] as u32 as i32 >= 0
                    } else {
                        let v = f32::from_bits(c[i] as u32);
                        let v = if ftz.is_empty() || !v.is_subnormal() { v } else { 0.0 };
                        v >= 0.0
                    };
                    if ge {
                        ta[i]
                    } else {
                        tb[i]
                    }
                })
                .collect();
            check(&body, &ins, &got[0], &want);
        }
    }
}
