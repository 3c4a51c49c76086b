//! f32 and f64 instruction semantics on the device against references in
//! Rust (rustc_apfloat for every rounding mode): `add sub mul fma div sqrt
//! rcp` in `.rn .rz .rm .rp`, `min`/`max` NaN and signed-zero rules,
//! `abs neg copysign testp`, `setp` comparisons, `.ftz`, `.sat`, and the
//! accuracy of the `.approx` forms.

mod sem;

use rustc_apfloat::ieee::{Double, Single};
use rustc_apfloat::{Float, Round};
use sem::{canon64_pair, check, rand_f32, rand_f64, round_of, run, sqrt64_ref, Lcg, T};
use std::cmp::Ordering;

type Cmp2 = (&'static str, fn(f32, f32) -> bool);
type Test1 = (&'static str, fn(f32) -> bool);

const N: usize = 10_000;
const MODES: [&str; 4] = ["rn", "rz", "rm", "rp"];

fn vals32(seed: u64) -> Vec<u64> {
    let mut r = Lcg(seed);
    (0..N).map(|_| rand_f32(&mut r)).collect()
}

fn vals64(seed: u64) -> Vec<u64> {
    let mut r = Lcg(seed);
    (0..N).map(|_| rand_f64(&mut r)).collect()
}

/// Edge pairs (every combination of a few specials) placed at the front.
fn with_edge_pairs(mut a: Vec<u64>, mut b: Vec<u64>, edges: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let mut k = 0;
    for &x in edges {
        for &y in edges {
            if k < a.len() {
                a[k] = x;
                b[k] = y;
                k += 1;
            }
        }
    }
    (a, b)
}

fn canon32(v: Single) -> u64 {
    if v.is_nan() {
        0x7fff_ffff
    } else {
        v.to_bits() as u64
    }
}

#[test]
fn f32_arith_all_modes() {
    let (a, b) = with_edge_pairs(vals32(11), vals32(12), &sem::f32_edges());
    let c = vals32(13);
    let ins2 = [(T::F32, a.clone()), (T::F32, b.clone())];
    let ins3 = [(T::F32, a.clone()), (T::F32, b.clone()), (T::F32, c.clone())];
    for m in MODES {
        let rd = round_of(m);
        for op in ["add", "sub", "mul", "div"] {
            let body = format!("{op}.{m}.f32 out0, in0, in1;");
            let got = run(&ins2, &[T::B32], &body);
            let want: Vec<u64> = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| {
                    let (x, y) = (Single::from_bits(x as u128), Single::from_bits(y as u128));
                    canon32(match op {
                        "add" => x.add_r(y, rd).value,
                        "sub" => x.sub_r(y, rd).value,
                        "mul" => x.mul_r(y, rd).value,
                        _ => x.div_r(y, rd).value,
                    })
                })
                .collect();
            check(&body, &ins2, &got[0], &want);
        }
        let body = format!("fma.{m}.f32 out0, in0, in1, in2;");
        let got = run(&ins3, &[T::B32], &body);
        let want: Vec<u64> = (0..N)
            .map(|i| {
                let f = |v: u64| Single::from_bits(v as u128);
                canon32(f(a[i]).mul_add_r(f(b[i]), f(c[i]), rd).value)
            })
            .collect();
        check(&body, &ins3, &got[0], &want);
        let body = format!("rcp.{m}.f32 out0, in0;");
        let ins1 = [(T::F32, a.clone())];
        let got = run(&ins1, &[T::B32], &body);
        let one = Single::from_bits(1f32.to_bits() as u128);
        let want: Vec<u64> = a.iter().map(|&x| canon32(one.div_r(Single::from_bits(x as u128), rd).value)).collect();
        check(&body, &ins1, &got[0], &want);
    }
}

#[test]
fn f64_arith_all_modes() {
    let (a, b) = with_edge_pairs(vals64(21), vals64(22), &sem::f64_edges());
    let c = vals64(23);
    let ins2 = [(T::F64, a.clone()), (T::F64, b.clone())];
    let ins3 = [(T::F64, a.clone()), (T::F64, b.clone()), (T::F64, c.clone())];
    for m in MODES {
        let rd = round_of(m);
        for op in ["add", "sub", "mul", "div"] {
            let body = format!("{op}.{m}.f64 out0, in0, in1;");
            let got = run(&ins2, &[T::B64], &body);
            let want: Vec<u64> = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| {
                    let (fx, fy) = (Double::from_bits(x as u128), Double::from_bits(y as u128));
                    let r = match op {
                        "add" => fx.add_r(fy, rd).value,
                        "sub" => fx.sub_r(fy, rd).value,
                        "mul" => fx.mul_r(fy, rd).value,
                        _ => fx.div_r(fy, rd).value,
                    };
                    r.to_bits() as u64
                })
                .collect();
            // Every operand in every mode: directed products and quotients
            // get exact errors also for huge and tiny values (see float.rs).
            let (g, w) = canon64_pair(&got[0], &want);
            check(&body, &ins2, &g, &w);
        }
        let body = format!("fma.{m}.f64 out0, in0, in1, in2;");
        let got = run(&ins3, &[T::B64], &body);
        let want: Vec<u64> = (0..N)
            .map(|i| {
                let f = |v: u64| Double::from_bits(v as u128);
                f(a[i]).mul_add_r(f(b[i]), f(c[i]), rd).value.to_bits() as u64
            })
            .collect();
        // Every input: tiny and huge products are scaled (see float.rs).
        let (g, w) = canon64_pair(&got[0], &want);
        check(&body, &ins3, &g, &w);
    }
}

/// f64 values `m * 2^(e - 52)` with `m` a 53-bit significand (or fewer
/// bits), exponents drawn from the whole range, the edges of the emulated
/// `fma`'s scaling (below 2^-900, above 2^900) or near 1.
fn hard64(r: &mut Lcg) -> f64 {
    let e = match r.next_u32() % 10 {
        0..=2 => (r.next_u32() % 2098) as i32 - 1074,
        3..=5 if r.next_u32().is_multiple_of(2) => -1074 + (r.next_u32() % 175) as i32,
        3..=5 => 900 + (r.next_u32() % 124) as i32,
        _ => (r.next_u32() % 121) as i32 - 60,
    };
    let mut m = r.next_u64() & ((1 << 53) - 1) | 1 << 52;
    if r.next_u32().is_multiple_of(3) {
        m >>= r.next_u32() % 51;
    }
    either_sign(r, scaled(m as f64, e - 52))
}

/// `v` or `-v`, evenly.
fn either_sign(r: &mut Lcg, v: f64) -> f64 {
    if r.next_u32().is_multiple_of(2) {
        -v
    } else {
        v
    }
}

/// `x * 2^k` for any `k` (in steps that stay exact until the last one).
fn scaled(mut x: f64, mut k: i32) -> f64 {
    while k > 1000 {
        x *= 2f64.powi(1000);
        k -= 1000;
    }
    while k < -1000 {
        x *= 2f64.powi(-1000);
        k += 1000;
    }
    x * 2f64.powi(k)
}

/// f64 `fma` in every mode on the operands where an emulation without a
/// fused multiply-add goes wrong: factors at or above 2^995 with products
/// on a midpoint and subnormal addends (whose bits a scaling would drop),
/// zero factors beside huge ones, addends near the largest double, tiny
/// products with subnormal or cancelling addends (results on the
/// subnormal grid), products that cancel the addend to within a few ulps.
/// Against rustc_apfloat.
#[test]
fn f64_fma_hard_operands() {
    let mut r = Lcg(0x66_6d61);
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    let sub = |r: &mut Lcg| {
        let v = f64::from_bits(r.next_u64() % (1 << 52));
        either_sign(r, v)
    };
    // Found wrong on lavapipe before 2026-12-08.
    let fixed = [
        (f64::from_bits(0x7e20_0000_0000_0001), 1.5, -f64::from_bits(1)),
        (1.5, f64::from_bits(0x7e20_0000_0000_0001), -f64::from_bits(1)),
        (2f64.powi(500), 2f64.powi(499), f64::MAX),
        (-0.0, 1.2589e300, f64::from_bits(8)),
        (0.0, f64::MAX, -f64::from_bits(0x0010_0000_0000_0000) * 0.5),
    ];
    for (x, y, z) in fixed {
        a.push(x);
        b.push(y);
        c.push(z);
    }
    while a.len() < N {
        let (mut x, mut y) = (hard64(&mut r), hard64(&mut r));
        let z = match r.next_u32() % 8 {
            0 => hard64(&mut r),
            1 | 2 => {
                // Near cancellation.
                let p = x * y;
                let p = if p.is_finite() { -p } else { hard64(&mut r) };
                // A few ulps away in magnitude (not below zero), same sign.
                let k = (r.next_u32() % 7) as i64 - 3;
                let sign = p.to_bits() & 1 << 63;
                let mag = (p.to_bits() & !(1 << 63)) as i64;
                if p.is_finite() {
                    f64::from_bits((mag + k).max(0) as u64 | sign)
                } else {
                    p
                }
            }
            3 => sub(&mut r),
            4 => {
                // A product on a midpoint: (1 + j 2^-52) * 1.5 * 2^k (half
                // of them with a factor near 2^995), and a tiny addend that
                // breaks the tie.
                let k = if r.next_u32().is_multiple_of(2) {
                    990 + (r.next_u32() % 11) as i32
                } else {
                    (r.next_u32() % 2075) as i32 - 1074
                };
                x = scaled(1.0 + (1 + r.next_u32() % 7) as f64 * 2f64.powi(-52), k);
                y = [1.5, 1.25, 1.75, 3.0][r.next_u32() as usize % 4] * 2f64.powi((r.next_u32() % 121) as i32 - 100);
                sub(&mut r)
            }
            5 => {
                // Tiny products near the subnormal grid.
                x = scaled((r.next_u64() >> 11 | 1) as f64, -400 - (r.next_u32() % 200) as i32 - 52);
                y = scaled((r.next_u64() >> 11 | 1) as f64, -450 - (r.next_u32() % 230) as i32 - 52);
                let p = x * y;
                match r.next_u32() % 4 {
                    0 => -p,
                    1 => sub(&mut r),
                    2 => scaled((r.next_u64() >> 11) as f64, -1080 + (r.next_u32() % 80) as i32),
                    _ => 0.0,
                }
            }
            6 => {
                let p = x * y;
                if p.is_finite() {
                    p * [0.5, 2.0, -1.0, 1e-20, 1e20][r.next_u32() as usize % 5]
                } else {
                    f64::MAX
                }
            }
            _ => [0.0, -0.0, f64::INFINITY, f64::NAN, f64::MAX, -f64::MAX][r.next_u32() as usize % 6],
        };
        if r.next_u32().is_multiple_of(50) {
            y = [0.0, -0.0, f64::INFINITY, f64::NAN][r.next_u32() as usize % 4];
        }
        a.push(x);
        b.push(y);
        c.push(z);
    }
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
    let ins3 = [(T::F64, bits(&a)), (T::F64, bits(&b)), (T::F64, bits(&c))];
    for m in MODES {
        let rd = round_of(m);
        let body = format!("fma.{m}.f64 out0, in0, in1, in2;");
        let got = run(&ins3, &[T::B64], &body);
        let want: Vec<u64> = (0..N)
            .map(|i| {
                let f = |v: f64| Double::from_bits(v.to_bits() as u128);
                f(a[i]).mul_add_r(f(b[i]), f(c[i]), rd).value.to_bits() as u64
            })
            .collect();
        let (g, w) = canon64_pair(&got[0], &want);
        check(&body, &ins3, &g, &w);
    }
}

fn sqrt32_ref(x: u64, m: &str) -> u64 {
    let v = f32::from_bits(x as u32);
    let q = (v as f64).sqrt() as f32;
    if q.is_nan() {
        return 0x7fff_ffff;
    }
    if !q.is_finite() || q == 0.0 || m == "rn" {
        return q.to_bits() as u64;
    }
    let sq = q as f64 * q as f64;
    let ord = sq.partial_cmp(&(v as f64)).unwrap_or(Ordering::Equal);
    (match (m, ord) {
        ("rz" | "rm", Ordering::Greater) => q.to_bits() - 1,
        ("rp", Ordering::Less) => q.to_bits() + 1,
        _ => q.to_bits(),
    }) as u64
}

#[test]
fn sqrt_all_modes() {
    let a32: Vec<u64> = vals32(31).into_iter().map(|v| v & 0x7fff_ffff).chain(sem::f32_edges()).take(N).collect();
    let a64: Vec<u64> = vals64(32).into_iter().map(|v| v & !(1 << 63)).chain(sem::f64_edges()).take(N).collect();
    for m in MODES {
        let body = format!("sqrt.{m}.f32 out0, in0;");
        let ins = [(T::F32, a32.clone())];
        let got = run(&ins, &[T::B32], &body);
        let want: Vec<u64> = a32.iter().map(|&x| sqrt32_ref(x, m)).collect();
        check(&body, &ins, &got[0], &want);
        let body = format!("sqrt.{m}.f64 out0, in0;");
        let ins = [(T::F64, a64.clone())];
        let got = run(&ins, &[T::B64], &body);
        let want: Vec<u64> = a64.iter().map(|&x| sqrt64_ref(x, m)).collect();
        let (g, w) = canon64_pair(&got[0], &want);
        check(&body, &ins, &g, &w);
    }
}

fn minmax_ref32(x: u32, y: u32, max: bool, nan_wins: bool) -> u64 {
    let (fx, fy) = (f32::from_bits(x), f32::from_bits(y));
    if fx.is_nan() || fy.is_nan() {
        if nan_wins || (fx.is_nan() && fy.is_nan()) {
            return 0x7fff_ffff;
        }
        return if fx.is_nan() { y as u64 } else { x as u64 };
    }
    if fx == 0.0 && fy == 0.0 {
        return if max { (x & y) as u64 } else { (x | y) as u64 };
    }
    let pick_x = if max { fx > fy } else { fx < fy };
    (if pick_x { x } else { y }) as u64
}

#[test]
fn f32_min_max_abs_neg_copysign() {
    let (a, b) = with_edge_pairs(vals32(41), vals32(42), &sem::f32_edges());
    let ins = [(T::F32, a.clone()), (T::F32, b.clone())];
    for (op, max, nan) in
        [("min", false, false), ("max", true, false), ("min.NaN", false, true), ("max.NaN", true, true)]
    {
        let body = format!("{op}.f32 out0, in0, in1;");
        let got = run(&ins, &[T::B32], &body);
        let want: Vec<u64> = a.iter().zip(&b).map(|(&x, &y)| minmax_ref32(x as u32, y as u32, max, nan)).collect();
        check(&body, &ins, &got[0], &want);
    }
    let body = "max.xorsign.abs.f32 out0, in0, in1;";
    let got = run(&ins, &[T::B32], body);
    let want: Vec<u64> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| {
            let m = minmax_ref32(x as u32 & 0x7fff_ffff, y as u32 & 0x7fff_ffff, true, false);
            if f32::from_bits(m as u32).is_nan() {
                m
            } else {
                m | ((x ^ y) & 0x8000_0000)
            }
        })
        .collect();
    check(body, &ins, &got[0], &want);
    let body = "{ .reg .f32 t; abs.f32 t, in0; neg.f32 out0, t; copysign.f32 out1, in1, in0; }";
    let got = run(&ins, &[T::B32, T::B32], body);
    let want0: Vec<u64> = a.iter().map(|&x| x | 0x8000_0000).collect();
    let want1: Vec<u64> = a.iter().zip(&b).map(|(&x, &y)| (x & 0x7fff_ffff) | (y & 0x8000_0000)).collect();
    check(body, &ins, &got[0], &want0);
    check(body, &ins, &got[1], &want1);
    // f64 min/max.
    let (a, b) = with_edge_pairs(vals64(43), vals64(44), &sem::f64_edges());
    let ins = [(T::F64, a.clone()), (T::F64, b.clone())];
    let body = "min.f64 out0, in0, in1;";
    let got = run(&ins, &[T::B64], body);
    let want: Vec<u64> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| {
            let (fx, fy) = (f64::from_bits(x), f64::from_bits(y));
            match (fx.is_nan(), fy.is_nan()) {
                (true, true) => 0x7fff_ffff_ffff_ffff,
                (true, false) => y,
                (false, true) => x,
                _ if fx == 0.0 && fy == 0.0 => x | y,
                _ => {
                    if fx < fy {
                        x
                    } else {
                        y
                    }
                }
            }
        })
        .collect();
    check(body, &ins, &got[0], &want);
}

#[test]
fn setp_testp_and_ftz() {
    let (a, b) = with_edge_pairs(vals32(51), vals32(52), &sem::f32_edges());
    let ins = [(T::F32, a.clone()), (T::F32, b.clone())];
    let cmps: [Cmp2; 18] = [
        ("eq", |x, y| x == y),
        ("ne", |x, y| x != y && !x.is_nan() && !y.is_nan()),
        ("lt", |x, y| x < y),
        ("le", |x, y| x <= y),
        ("gt", |x, y| x > y),
        ("ge", |x, y| x >= y),
        ("equ", |x, y| x == y || x.is_nan() || y.is_nan()),
        ("neu", |x, y| x != y),
        ("ltu", |x, y| x < y || x.is_nan() || y.is_nan()),
        ("leu", |x, y| x <= y || x.is_nan() || y.is_nan()),
        ("gtu", |x, y| x > y || x.is_nan() || y.is_nan()),
        ("geu", |x, y| x >= y || x.is_nan() || y.is_nan()),
        ("num", |x, y| !x.is_nan() && !y.is_nan()),
        ("nan", |x, y| x.is_nan() || y.is_nan()),
        ("lo", |_, _| false),
        ("ls", |_, _| false),
        ("hi", |_, _| false),
        ("hs", |_, _| false),
    ];
    for (c, f) in cmps.iter().take(14) {
        let body = format!(
            "{{ .reg .pred p, q; setp.{c}.f32 p|q, in0, in1; selp.b32 out0, 1, 0, p; selp.b32 out1, 1, 0, q; }}"
        );
        let got = run(&ins, &[T::B32, T::B32], &body);
        let want: Vec<u64> =
            a.iter().zip(&b).map(|(&x, &y)| f(f32::from_bits(x as u32), f32::from_bits(y as u32)) as u64).collect();
        let nwant: Vec<u64> = want.iter().map(|w| 1 - w).collect();
        check(&body, &ins, &got[0], &want);
        check(&body, &ins, &got[1], &nwant);
    }
    let tests: [Test1; 6] = [
        ("finite", |x| x.is_finite()),
        ("infinite", |x| x.is_infinite()),
        ("number", |x| !x.is_nan()),
        ("notanumber", |x| x.is_nan()),
        ("normal", |x| x.is_normal()),
        ("subnormal", |x| x.is_subnormal()),
    ];
    for (t, f) in tests {
        let body = format!("{{ .reg .pred p; testp.{t}.f32 p, in0; selp.b32 out0, 1, 0, p; }}");
        let got = run(&ins, &[T::B32], &body);
        let want: Vec<u64> = a.iter().map(|&x| f(f32::from_bits(x as u32)) as u64).collect();
        check(&body, &ins, &got[0], &want);
    }
    // .ftz flushes subnormal inputs and results; .sat clamps to [0, 1] with NaN to 0.
    let body = "{ add.rn.ftz.f32 out0, in0, in1; mul.rn.sat.f32 out1, in0, in1; }";
    let got = run(&ins, &[T::B32, T::B32], body);
    let ftz = |v: f32| if v.is_subnormal() { f32::from_bits(v.to_bits() & 0x8000_0000) } else { v };
    let want0: Vec<u64> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| {
            let r = ftz(ftz(f32::from_bits(x as u32)) + ftz(f32::from_bits(y as u32)));
            if r.is_nan() {
                0x7fff_ffff
            } else {
                r.to_bits() as u64
            }
        })
        .collect();
    let want1: Vec<u64> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| {
            let r = f32::from_bits(x as u32) * f32::from_bits(y as u32);
            let r = if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) };
            // clamp keeps -0 as -0; PTX's .sat gives +0 for it? Both are zero here.
            r.to_bits() as u64
        })
        .collect();
    check(body, &ins, &got[0], &want0);
    let got1: Vec<u64> = got[1].iter().map(|&v| if v == 0x8000_0000 { 0 } else { v }).collect();
    let want1: Vec<u64> = want1.iter().map(|&v| if v == 0x8000_0000 { 0 } else { v }).collect();
    check(body, &ins, &got1, &want1);
}

/// ulp distance between two finite f32 values of the same sign.
fn ulp32(a: u32, b: u32) -> u64 {
    let o = |v: u32| if v & 0x8000_0000 != 0 { -((v & 0x7fff_ffff) as i64) } else { v as i64 };
    (o(a) - o(b)).unsigned_abs()
}

#[test]
fn approx_accuracy() {
    let mut r = Lcg(61);
    let xs: Vec<u64> =
        (0..N).map(|_| ((r.next_u32() as f32 / u32::MAX as f32) * 200.0 - 100.0).to_bits() as u64).collect();
    let ins = [(T::F32, xs.clone())];
    // ex2.approx: 2 ulp (PTX ISA); tanh.approx: 2^-11 relative.
    let got = run(
        &ins,
        &[T::B32, T::B32],
        "{ .reg .f32 t; mul.f32 t, in0, 0f3e800000; ex2.approx.f32 out0, t; tanh.approx.f32 out1, in0; }",
    );
    for (i, &x) in xs.iter().enumerate() {
        let x = f32::from_bits(x as u32);
        let e = ((x * 0.25) as f64).exp2() as f32;
        assert!(
            ulp32(got[0][i] as u32, e.to_bits()) <= 2,
            "ex2({}) = {} want {e}",
            x * 0.25,
            f32::from_bits(got[0][i] as u32)
        );
        let t = (x as f64).tanh();
        let g = f32::from_bits(got[1][i] as u32) as f64;
        assert!((g - t).abs() <= t.abs() * 2f64.powi(-11) + 1e-30, "tanh({x}) = {g} want {t}");
    }
    let small: Vec<u64> = (0..N).map(|i| ((i as f32 - 5000.0) * 1e-6).to_bits() as u64).collect();
    let ins = [(T::F32, small.clone())];
    let got = run(&ins, &[T::B32], "tanh.approx.f32 out0, in0;");
    for (i, &x) in small.iter().enumerate() {
        let x = f32::from_bits(x as u32) as f64;
        let g = f32::from_bits(got[0][i] as u32) as f64;
        assert!((g - x.tanh()).abs() <= x.tanh().abs() * 2f64.powi(-11), "tanh({x}) = {g}");
    }
}

/// The documented accuracy of every `.approx` f32 form (PTX ISA 9.1), each
/// against an f64 reference: `sin`/`cos` 2^-20.5 absolute in [-2pi, 2pi]
/// and 2^-14.7 in [-100pi, 100pi]; `lg2` 2^-22 absolute in (0.5, 2), relative
/// elsewhere; `ex2` 2 ulp;
/// `rsqrt` 2^-22.9 relative; `rcp` 1 ulp; `div.approx` 2 ulp for divisors
/// in [2^-126, 2^126]; `div.full` 2 ulp; `tanh` 2^-10.987 relative.
#[test]
fn approx_documented_bounds() {
    let mut r = Lcg(62);
    let f = |v: u64| f32::from_bits(v as u32);
    let uni = |r: &mut Lcg, lo: f64, hi: f64| -> u64 {
        ((lo + (r.next_u32() as f64 / u32::MAX as f64) * (hi - lo)) as f32).to_bits() as u64
    };
    let pi = std::f64::consts::PI;
    for (range, bound) in [(2.0 * pi, 2f64.powf(-20.5)), (100.0 * pi, 2f64.powf(-14.7))] {
        let mut xs: Vec<u64> = (0..N).map(|_| uni(&mut r, -range, range)).collect();
        // Near multiples of pi/2, where the reduction cancels most.
        for k in 1..(range / (pi / 2.0)) as i32 {
            let m = (k as f64 * pi / 2.0) as f32;
            for d in [-2i32, -1, 0, 1, 2] {
                xs[(k * 5 + d + 2) as usize] = (m.to_bits() as i32 + d) as u32 as u64;
            }
        }
        let ins = [(T::F32, xs.clone())];
        let got = run(&ins, &[T::B32, T::B32], "{ sin.approx.f32 out0, in0; cos.approx.f32 out1, in0; }");
        for (i, &x) in xs.iter().enumerate() {
            let xd = f(x) as f64;
            let (s, c) = (f(got[0][i]) as f64, f(got[1][i]) as f64);
            assert!((s - xd.sin()).abs() <= bound, "sin({xd}) = {s}, want {}", xd.sin());
            assert!((c - xd.cos()).abs() <= bound, "cos({xd}) = {c}, want {}", xd.cos());
        }
    }
    // Specials, subnormals and .ftz.
    let sp: Vec<u64> = vec![0, 0x8000_0000, 0x7f80_0000, 0xff80_0000, 0x7fc0_0000, 1, 0x8000_0001, 0x4f00_0000];
    let ins = [(T::F32, sp.clone())];
    let got = run(&ins, &[T::B32, T::B32], "{ sin.approx.f32 out0, in0; cos.approx.ftz.f32 out1, in0; }");
    assert_eq!(&got[0][..7], &[0, 0x8000_0000, 0x7fff_ffff, 0x7fff_ffff, 0x7fff_ffff, 1, 0x8000_0001]);
    assert_eq!(
        &got[1][..7],
        &[0x3f80_0000, 0x3f80_0000, 0x7fff_ffff, 0x7fff_ffff, 0x7fff_ffff, 0x3f80_0000, 0x3f80_0000]
    );
    let big = (1u64 << 31) as f64;
    assert!((f(got[0][7]) as f64 - big.sin()).abs() < 1e-3, "sin(2^31) = {}", f(got[0][7]));

    // lg2, ex2, rsqrt, rcp over wide ranges.
    let pos: Vec<u64> = (0..N)
        .map(|i| match i % 4 {
            0 => uni(&mut r, 0.5, 2.0),
            _ => ((1 + r.next_u32() % 253) << 23 | (r.next_u32() & 0x7f_ffff)) as u64,
        })
        .collect();
    let ins = [(T::F32, pos.clone())];
    let got = run(
        &ins,
        &[T::B32, T::B32, T::B32],
        "{ lg2.approx.f32 out0, in0; rsqrt.approx.f32 out1, in0; rcp.approx.f32 out2, in0; }",
    );
    for (i, &x) in pos.iter().enumerate() {
        let xd = f(x) as f64;
        let l = f(got[0][i]) as f64;
        // Absolute error 2^-22 for inputs in (0.5, 2), relative 2^-22 elsewhere.
        let tol = if xd > 0.5 && xd < 2.0 { 2f64.powi(-22) } else { xd.log2().abs() * 2f64.powi(-22) };
        assert!((l - xd.log2()).abs() <= tol, "lg2({xd}) = {l}, want {}", xd.log2());
        let rs = f(got[1][i]) as f64;
        let want = 1.0 / xd.sqrt();
        assert!(((rs - want) / want).abs() <= 2f64.powf(-22.9), "rsqrt({xd}) = {rs}, want {want}");
        let rc = (1.0 / xd) as f32;
        if rc.is_normal() {
            assert!(ulp32(got[2][i] as u32, rc.to_bits()) <= 1, "rcp({xd}) = {}", f(got[2][i]));
        }
    }
    let ex: Vec<u64> = (0..N).map(|_| uni(&mut r, -125.0, 127.9)).collect();
    let ins = [(T::F32, ex.clone())];
    let got = run(&ins, &[T::B32], "ex2.approx.f32 out0, in0;");
    for (i, &x) in ex.iter().enumerate() {
        let want = (f(x) as f64).exp2() as f32;
        assert!(ulp32(got[0][i] as u32, want.to_bits()) <= 2, "ex2({}) = {}, want {want}", f(x), f(got[0][i]));
    }
    // div.approx (divisor in [2^-126, 2^126]) and div.full.
    let a: Vec<u64> = (0..N).map(|_| sem::rand_f32(&mut r) & 0xbfff_ffff | 0x1000_0000).collect();
    let b: Vec<u64> = (0..N).map(|_| ((1 + r.next_u32() % 252) << 23 | (r.next_u32() & 0x807f_ffff)) as u64).collect();
    let ins = [(T::F32, a.clone()), (T::F32, b.clone())];
    let got = run(&ins, &[T::B32, T::B32], "{ div.approx.f32 out0, in0, in1; div.full.f32 out1, in0, in1; }");
    for i in 0..N {
        let q = (f(a[i]) as f64 / f(b[i]) as f64) as f32;
        if !q.is_normal() {
            continue;
        }
        for (k, what) in [(0, "div.approx"), (1, "div.full")] {
            assert!(
                ulp32(got[k][i] as u32, q.to_bits()) <= 2,
                "{what}({}, {}) = {}, want {q}",
                f(a[i]),
                f(b[i]),
                f(got[k][i])
            );
        }
    }
    // tanh over the whole range.
    let th: Vec<u64> = (0..N).map(|_| uni(&mut r, -12.0, 12.0)).collect();
    let ins = [(T::F32, th.clone())];
    let got = run(&ins, &[T::B32], "tanh.approx.f32 out0, in0;");
    for (i, &x) in th.iter().enumerate() {
        let want = (f(x) as f64).tanh();
        let g = f(got[0][i]) as f64;
        assert!((g - want).abs() <= want.abs() * 2f64.powf(-10.987), "tanh({}) = {g}, want {want}", f(x));
    }
}

/// f64 results and operands around the subnormal range, in every rounding
/// mode for `add sub mul fma` and `.rn` for `div sqrt`: PTX never flushes
/// f64 subnormals.
#[test]
fn f64_subnormal_results() {
    let mut r = Lcg(91);
    let near = |r: &mut Lcg, lo: u64, hi: u64| -> u64 {
        let exp = lo + r.next_u64() % (hi - lo);
        (r.next_u64() & 0x8000_0000_0000_0000) | (exp << 52) | (r.next_u64() & 0x000f_ffff_ffff_ffff)
    };
    let mut a = Vec::new();
    let mut b = Vec::new();
    let mut c = Vec::new();
    for i in 0..N {
        if i % 16 == 15 {
            // Products near the top of the range (and beyond it).
            a.push(near(&mut r, 1530, 1536));
            b.push(near(&mut r, 1530, 1536));
            c.push(if i % 32 == 15 { near(&mut r, 2040, 2047) } else { rand_f64(&mut r) });
            continue;
        }
        match i % 4 {
            // Tiny times moderate: products near 2^-1022.
            0 => {
                a.push(near(&mut r, 0, 80));
                b.push(near(&mut r, 1000, 1060));
                c.push(near(&mut r, 0, 3));
            }
            // Products of two small normals (exponent sum below the range).
            1 => {
                a.push(near(&mut r, 480, 530));
                b.push(near(&mut r, 480, 530));
                c.push(near(&mut r, 0, 2));
            }
            // Subnormal operands.
            2 => {
                a.push(r.next_u64() & 0x800f_ffff_ffff_ffff);
                b.push(r.next_u64() & 0x800f_ffff_ffff_ffff);
                c.push(near(&mut r, 0, 4));
            }
            // Quotients into the subnormal range.
            _ => {
                a.push(near(&mut r, 1, 60));
                b.push(near(&mut r, 1023, 1080));
                c.push(r.next_u64() & 0x800f_ffff_ffff_ffff);
            }
        }
    }
    let ins3 = [(T::F64, a.clone()), (T::F64, b.clone()), (T::F64, c.clone())];
    let f = |v: u64| Double::from_bits(v as u128);
    for m in MODES {
        let rd = round_of(m);
        let body = format!(
            "{{ add.{m}.f64 out0, in0, in2; sub.{m}.f64 out1, in0, in2; mul.{m}.f64 out2, in0, in1; fma.{m}.f64 out3, in0, in1, in2; }}"
        );
        let got = run(&ins3, &[T::B64, T::B64, T::B64, T::B64], &body);
        let wants: [Vec<u64>; 4] = [
            (0..N).map(|i| f(a[i]).add_r(f(c[i]), rd).value.to_bits() as u64).collect(),
            (0..N).map(|i| f(a[i]).sub_r(f(c[i]), rd).value.to_bits() as u64).collect(),
            (0..N).map(|i| f(a[i]).mul_r(f(b[i]), rd).value.to_bits() as u64).collect(),
            (0..N).map(|i| f(a[i]).mul_add_r(f(b[i]), f(c[i]), rd).value.to_bits() as u64).collect(),
        ];
        for (k, w) in wants.iter().enumerate() {
            if m != "rn" && k == 2 {
                // Directed f64 mul keeps the nearest result outside the
                // two-product's range (see float.rs).
                continue;
            }
            check(&format!("{body} (out{k})"), &ins3, &got[k], w);
        }
    }
    let body = "{ div.rn.f64 out0, in0, in1; sqrt.rn.f64 out1, in2; rcp.rn.f64 out2, in1; }";
    let got = run(&ins3, &[T::B64, T::B64, T::B64], body);
    let w0: Vec<u64> =
        (0..N).map(|i| f(a[i]).div_r(f(b[i]), Round::NearestTiesToEven).value.to_bits() as u64).collect();
    let w1: Vec<u64> = c.iter().map(|&x| sqrt64_ref(x, "rn")).collect();
    let one = Double::from_bits(1f64.to_bits() as u128);
    let w2: Vec<u64> = b.iter().map(|&y| one.div_r(f(y), Round::NearestTiesToEven).value.to_bits() as u64).collect();
    for (k, w) in [w0, w1, w2].iter().enumerate() {
        let (g, w) = canon64_pair(&got[k], w);
        check(&format!("{body} (out{k})"), &ins3, &g, &w);
    }
    let subn = (0..N).filter(|&i| f64::from_bits(got[0][i]).is_subnormal()).count();
    assert!(subn > N / 8, "only {subn} subnormal quotients");
}

/// The f64 division probe: llvmpipe's f64 `OpFDiv` and `Sqrt` are LLVM's
/// `fdiv` and `sqrt`, correctly rounded, so its modules use them as they
/// are, and this file's f64 `div`, `rcp` and `sqrt` tests check that path
/// (`f64_div_correction.rs` checks the exact correction other drivers get).
#[test]
fn f64_division_probe() {
    let info = sem::ctx().info();
    if info.driver_name == "llvmpipe" {
        assert!(info.correct_f64_div_sqrt, "llvmpipe's f64 division and square root round correctly");
    }
}

/// The context's subnormal probe agrees with what kernels do.
#[test]
fn subnormal_probe_agrees() {
    let info = sem::ctx().info();
    // 2^-1000 and 2^-1060 (subnormal).
    let a = vec![2f64.powi(-1000).to_bits(), 1 << 14];
    let b = vec![2f64.powi(-50).to_bits(), 3f64.to_bits()];
    let ins = [(T::F64, a.clone()), (T::F64, b.clone())];
    let got = run(&ins, &[T::B64], "mul.rn.f64 out0, in0, in1;");
    let want: Vec<u64> = (0..2).map(|i| (f64::from_bits(a[i]) * f64::from_bits(b[i])).to_bits()).collect();
    assert_eq!(got[0] == want, info.keeps_f64_subnormals, "f64 {:x?} vs {:x?}", got[0], want);
    // 2^-100 and 2^-140 (subnormal).
    let c = vec![2f32.powi(-100).to_bits() as u64, 1 << 9];
    let d = vec![2f32.powi(-30).to_bits() as u64, 3f32.to_bits() as u64];
    let ins = [(T::F32, c.clone()), (T::F32, d.clone())];
    let got = run(&ins, &[T::B32], "mul.rn.f32 out0, in0, in1;");
    let want: Vec<u64> =
        (0..2).map(|i| (f32::from_bits(c[i] as u32) * f32::from_bits(d[i] as u32)).to_bits() as u64).collect();
    assert_eq!(got[0] == want, info.keeps_f32_subnormals, "f32 {:x?} vs {:x?}", got[0], want);
}

/// `add sub mul fma mad` on `.f32x2` (two f32 values in a `.b64` register,
/// element 0 in the low half) in every rounding mode (and none, for `add`,
/// `sub`, `mul`), with and without `.ftz`: each element as the `.f32`
/// instruction computes it.
#[test]
fn f32x2_arith_all_modes() {
    let (a, b) = with_edge_pairs(vals32(21), vals32(22), &sem::f32_edges());
    let c = vals32(23);
    // Element 1 of each pair comes from further along the same vectors.
    let pack = |v: &[u64], i: usize| v[i] | v[(i + 5) % N] << 32;
    let (pa, pb, pc): (Vec<u64>, Vec<u64>, Vec<u64>) =
        (0..N).map(|i| (pack(&a, i), pack(&b, i), pack(&c, i))).fold((vec![], vec![], vec![]), |mut acc, t| {
            acc.0.push(t.0);
            acc.1.push(t.1);
            acc.2.push(t.2);
            acc
        });
    let ins3 = [(T::B64, pa.clone()), (T::B64, pb.clone()), (T::B64, pc.clone())];
    let f = |v: u64| Single::from_bits(v as u128);
    let ftz = |v: Single| if v.is_denormal() { Single::ZERO.copy_sign(v) } else { v };
    for m in MODES {
        let rd = round_of(m);
        for flush in [false, true] {
            let z = if flush { ".ftz" } else { "" };
            for op in ["add", "sub", "mul", "fma", "mad"] {
                let body = if op == "fma" || op == "mad" {
                    format!("{op}.{m}{z}.f32x2 out0, in0, in1, in2;")
                } else if m == "rn" && !flush {
                    // No rounding modifier: to nearest.
                    format!("{op}.f32x2 out0, in0, in1;")
                } else {
                    format!("{op}.{m}{z}.f32x2 out0, in0, in1;")
                };
                let got = run(&ins3, &[T::B64], &body);
                let want: Vec<u64> = (0..N)
                    .map(|i| {
                        let element = |h: u32| {
                            let g = |v: &[u64]| {
                                let x = f((v[i] >> h) & 0xffff_ffff);
                                if flush {
                                    ftz(x)
                                } else {
                                    x
                                }
                            };
                            let (x, y, w) = (g(&pa), g(&pb), g(&pc));
                            let r = match op {
                                "add" => x.add_r(y, rd).value,
                                "sub" => x.sub_r(y, rd).value,
                                "mul" => x.mul_r(y, rd).value,
                                _ => x.mul_add_r(y, w, rd).value,
                            };
                            canon32(if flush { ftz(r) } else { r })
                        };
                        element(0) | element(32) << 32
                    })
                    .collect();
                check(&body, &ins3, &got[0], &want);
            }
        }
    }
}
