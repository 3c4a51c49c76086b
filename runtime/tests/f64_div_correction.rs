//! f64 `div`, `rcp` and `sqrt` computed with the translator's exact
//! correction (`PTXVK_NATIVE_F64_DIV=0`), against rustc_apfloat in every
//! rounding mode. Where the context's probe finds the driver's f64
//! division and square root correctly rounded (llvmpipe), modules use them
//! as they are and `semantics_float.rs` tests that path; this binary keeps
//! the correction that every other driver gets tested on lavapipe too.
//! One test: the variable is set before the context exists.

mod sem;

use rustc_apfloat::ieee::Double;
use rustc_apfloat::{Float, Round};
use sem::{canon64_pair, check, rand_f64, round_of, run, sqrt64_ref, Lcg, T};

const N: usize = 4096;
const MODES: [&str; 4] = ["rn", "rz", "rm", "rp"];

/// Operand pairs: every pair of the edge values, random values over the
/// whole range, quotients near and below 2^-1022, and huge over tiny.
fn operands() -> (Vec<u64>, Vec<u64>) {
    let edges = sem::f64_edges();
    let mut a = Vec::new();
    let mut b = Vec::new();
    for &x in &edges {
        for &y in &edges {
            a.push(x);
            b.push(y);
        }
    }
    let mut r = Lcg(0x05ee_dd1f);
    let near = |r: &mut Lcg, lo: u64, hi: u64| -> u64 {
        let exp = lo + r.next_u64() % (hi - lo);
        (r.next_u64() & 0x8000_0000_0000_0000) | (exp << 52) | (r.next_u64() & 0x000f_ffff_ffff_ffff)
    };
    while a.len() < N {
        match a.len() % 4 {
            0 | 1 => {
                a.push(rand_f64(&mut r));
                b.push(rand_f64(&mut r));
            }
            // Subnormal and near-subnormal quotients.
            2 => {
                a.push(near(&mut r, 1, 40));
                b.push(near(&mut r, 1023, 1090));
            }
            // Huge over tiny, tiny over huge.
            _ => {
                a.push(near(&mut r, 1990, 2047));
                b.push(near(&mut r, 1, 60));
            }
        }
    }
    (a, b)
}

#[test]
fn f64_division_and_square_root_with_the_exact_correction() {
    std::env::set_var("PTXVK_NATIVE_F64_DIV", "0");
    assert!(!sem::ctx().info().correct_f64_div_sqrt, "PTXVK_NATIVE_F64_DIV=0 keeps the exact correction");
    let (a, b) = operands();
    let ins2 = [(T::F64, a.clone()), (T::F64, b.clone())];
    let f = |v: u64| Double::from_bits(v as u128);
    for m in MODES {
        let body = format!("div.{m}.f64 out0, in0, in1;");
        let got = run(&ins2, &[T::B64], &body);
        let want: Vec<u64> = (0..N).map(|i| f(a[i]).div_r(f(b[i]), round_of(m)).value.to_bits() as u64).collect();
        // Every operand in every mode (see float.rs).
        let (g, w) = canon64_pair(&got[0], &want);
        check(&body, &ins2, &g, &w);
        let subnormal = (0..N).filter(|&i| f64::from_bits(got[0][i]).is_subnormal()).count();
        assert!(subnormal > N / 8, "{body}: only {subnormal} subnormal quotients");
    }
    let body = "rcp.rn.f64 out0, in1;";
    let got = run(&ins2, &[T::B64], body);
    let one = Double::from_bits(1f64.to_bits() as u128);
    let want: Vec<u64> = b.iter().map(|&y| one.div_r(f(y), Round::NearestTiesToEven).value.to_bits() as u64).collect();
    let (g, w) = canon64_pair(&got[0], &want);
    check(body, &ins2, &g, &w);
    let ins1 = [(T::F64, a.iter().map(|&x| x & !(1 << 63)).collect::<Vec<u64>>())];
    for m in MODES {
        let body = format!("sqrt.{m}.f64 out0, in0;");
        let got = run(&ins1, &[T::B64], &body);
        let want: Vec<u64> = ins1[0].1.iter().map(|&x| sqrt64_ref(x, m)).collect();
        let (g, w) = canon64_pair(&got[0], &want);
        check(&body, &ins1, &g, &w);
    }
}
