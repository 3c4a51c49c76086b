//! `cvt` semantics on the device against Rust references: float → integer
//! in every integral rounding mode (saturating, NaN → 0), integer → float
//! and float → float in every rounding mode, half precision, FP8, TF32 and
//! `cvt.pack`.

mod sem;

use sem::{check, f32_edges, f64_edges, rand_f32, rand_f64, run, Lcg, T};

const N: usize = 10_000;

fn inputs_f32(seed: u64) -> Vec<u64> {
    let mut r = Lcg(seed);
    let mut v = f32_edges();
    // Ties and near-ties for rounding to integers.
    for k in 0..64u32 {
        v.push((k as f32 + 0.5).to_bits() as u64);
        v.push((-(k as f32) - 0.5).to_bits() as u64);
    }
    while v.len() < N {
        v.push(rand_f32(&mut r));
    }
    v
}

fn inputs_f64(seed: u64) -> Vec<u64> {
    let mut r = Lcg(seed);
    let mut v = f64_edges();
    for k in 0..64u32 {
        v.push((k as f64 + 0.5).to_bits());
        v.push((-(k as f64) - 0.5).to_bits());
    }
    while v.len() < N {
        v.push(rand_f64(&mut r));
    }
    v
}

fn round_f64(x: f64, mode: &str) -> f64 {
    match mode {
        "rni" => x.round_ties_even(),
        "rzi" => x.trunc(),
        "rmi" => x.floor(),
        _ => x.ceil(),
    }
}

#[test]
fn f32_to_int_all_modes() {
    let a = inputs_f32(1);
    let ins = [(T::F32, a.clone())];
    for mode in ["rni", "rzi", "rmi", "rpi"] {
        for (ty, out) in
            [("s32", T::B32), ("u32", T::B32), ("s64", T::B64), ("u64", T::B64), ("s16", T::B16), ("u16", T::B16)]
        {
            let body = format!("cvt.{mode}.{ty}.f32 out0, in0;");
            let got = run(&ins, &[out], &body);
            let want: Vec<u64> = a
                .iter()
                .map(|&b| {
                    let x = round_f64(f32::from_bits(b as u32) as f64, mode);
                    match ty {
                        "s32" => x as i32 as u32 as u64,
                        "u32" => x as u32 as u64,
                        "s64" => x as i64 as u64,
                        "u64" => x as u64,
                        "s16" => x as i16 as u16 as u64,
                        _ => x as u16 as u64,
                    }
                })
                .collect();
            check(&body, &ins, &got[0], &want);
        }
    }
}

use rustc_apfloat::ieee::{Double, Half, Single};
use rustc_apfloat::{Float, FloatConvert, Round};

fn apround(mode: &str) -> Round {
    match mode {
        "rn" => Round::NearestTiesToEven,
        "rz" => Round::TowardZero,
        "rm" => Round::TowardNegative,
        _ => Round::TowardPositive,
    }
}

fn int_inputs(seed: u64) -> Vec<u64> {
    let mut r = Lcg(seed);
    let mut v: Vec<u64> =
        vec![0, 1, u64::MAX, 1 << 63, (1 << 63) - 1, 0x8000_0000, 0x7fff_ffff, 0xffff_ffff, 16_777_217, 16_777_219];
    while v.len() < N {
        v.push(r.wild64());
    }
    v
}

#[test]
fn int_to_float_all_modes() {
    let a = int_inputs(2);
    for mode in ["rn", "rz", "rm", "rp"] {
        let rd = apround(mode);
        for (sty, sbits, signed) in [
            ("s32", 32, true),
            ("u32", 32, false),
            ("s64", 64, true),
            ("u64", 64, false),
            ("s16", 16, true),
            ("u16", 16, false),
        ] {
            let it = match sbits {
                16 => T::B16,
                32 => T::B32,
                _ => T::B64,
            };
            let ins = [(it, a.clone())];
            for dty in ["f32", "f64", "f16"] {
                let ot = match dty {
                    "f32" => T::B32,
                    "f64" => T::B64,
                    _ => T::B16,
                };
                let body = format!("cvt.{mode}.{dty}.{sty} out0, in0;");
                let got = run(&ins, &[ot], &body);
                let want: Vec<u64> = a
                    .iter()
                    .map(|&v| {
                        let v = if sbits == 64 { v } else { v & ((1u64 << sbits) - 1) };
                        let x: i128 =
                            if signed { ((v << (64 - sbits)) as i64 >> (64 - sbits)) as i128 } else { v as i128 };
                        let neg = x < 0;
                        let mag = x.unsigned_abs();
                        // Round the magnitude with the mirrored mode.
                        let md = match (rd, neg) {
                            (Round::TowardNegative, true) => Round::TowardPositive,
                            (Round::TowardPositive, true) => Round::TowardNegative,
                            (m, _) => m,
                        };
                        let bits = match dty {
                            "f32" => Single::from_u128_r(mag, md).value.to_bits() as u64,
                            "f64" => Double::from_u128_r(mag, md).value.to_bits() as u64,
                            _ => Half::from_u128_r(mag, md).value.to_bits() as u64,
                        };
                        let sign = match dty {
                            "f32" => 1u64 << 31,
                            "f64" => 1 << 63,
                            _ => 1 << 15,
                        };
                        if neg {
                            bits | sign
                        } else {
                            bits
                        }
                    })
                    .collect();
                check(&body, &ins, &got[0], &want);
            }
        }
    }
}

#[test]
fn float_to_float_narrowing() {
    let a64 = inputs_f64(3);
    let a32 = inputs_f32(4);
    for mode in ["rn", "rz", "rm", "rp"] {
        let rd = apround(mode);
        let ins = [(T::F64, a64.clone())];
        let body = format!("cvt.{mode}.f32.f64 out0, in0;");
        let got = run(&ins, &[T::B32], &body);
        let want: Vec<u64> = a64
            .iter()
            .map(|&b| {
                let x = Double::from_bits(b as u128);
                if x.is_nan() {
                    return 0x7fff_ffff;
                }
                let r: Single = x.convert_r(rd, &mut false).value;
                r.to_bits() as u64
            })
            .collect();
        check(&body, &ins, &got[0], &want);
        for (dty, src, ins_t, vals) in [("f16", "f64", T::F64, &a64), ("f16", "f32", T::F32, &a32)] {
            let ins = [(ins_t, vals.clone())];
            let body = format!("cvt.{mode}.{dty}.{src} out0, in0;");
            let got = run(&ins, &[T::B16], &body);
            let want: Vec<u64> = vals
                .iter()
                .map(|&b| {
                    let x = if src == "f64" {
                        Double::from_bits(b as u128)
                    } else {
                        let s = Single::from_bits(b as u128);
                        s.convert(&mut false).value
                    };
                    if x.is_nan() {
                        return 0x7fff;
                    }
                    let r: Half = x.convert_r(rd, &mut false).value;
                    r.to_bits() as u64
                })
                .collect();
            check(&body, &ins, &got[0], &want);
        }
    }
}
