//! Tensor-core instructions (issue 18): the nvcc kernels of
//! `tests/fixtures/mma.cu` (inline-asm `mma.sync` of every shape family and
//! type, `ldmatrix`, `movmatrix`), on every warp path the device offers.
//!
//! Inputs are random (fixed seeds), outputs poisoned. Each D is checked two
//! ways:
//! - bit for bit against a host model of the translator's documented
//!   arithmetic (`docs/tensor-cores.md`: exact products summed in `k` order
//!   from C, f32 rounding after each addition; f64 fused multiply-adds;
//!   exact integers), which catches any fragment-layout mistake;
//! - for the float types, against the exact result with the bound that
//!   arithmetic guarantees, `|d - exact| <= K·u·(|c| + Σ|a·b|)` (`u` =
//!   2^-24 for f32; plus half an f16 ulp when D is f16), which is what a
//!   program may rely on whatever the summation order.

mod common;

use common::{assert_clean, context, Lcg};
use ptxvk_runtime::{Context, Module, WarpPath};

const PTX: &str = include_str!("../../tests/fixtures/mma.ptx");
const POISON: u32 = 0xABAB_ABAB;
/// Warps per block (each on its own matrices).
const WARPS: usize = 2;

fn on_every_path(name: &str, body: impl Fn(&Context, &Module)) {
    on_every_path_of(PTX, "mma.ptx", name, body)
}

/// Runs `body` on the module `ptx` translated for each warp path the device offers.
fn on_every_path_of(ptx: &str, file: &str, name: &str, body: impl Fn(&Context, &Module)) {
    let ctx = context();
    for path in [WarpPath::Native, WarpPath::Slice, WarpPath::Emulated] {
        if !ctx.info().warp_paths.contains(&path) {
            eprintln!("{name}: skipping the {} warp path (subgroup size {})", path.name(), ctx.info().subgroup_size);
            continue;
        }
        let m = ctx.load_module_with_warp_path(ptx, file, path).expect("translate and load");
        body(&ctx, &m);
    }
    assert_clean(&ctx);
}

/// Runs `kernel` with one block of `WARPS` warps; buffers are words.
fn launch(ctx: &Context, m: &Module, kernel: &str, inputs: &[&[u32]], out_words: usize) -> Vec<u32> {
    let f = m.function(kernel).unwrap();
    let mut ptrs = Vec::new();
    for data in inputs {
        let d = ctx.alloc((data.len().max(1) * 4) as u64).unwrap();
        let bytes: Vec<u8> = data.iter().flat_map(|w| w.to_le_bytes()).collect();
        ctx.copy_htod(d, &bytes).unwrap();
        ptrs.push(d);
    }
    let out = ctx.alloc((out_words as u64 + 16) * 4).unwrap();
    ctx.memset_d32(out, POISON, out_words as u64 + 16).unwrap();
    ptrs.push(out);
    let args: Vec<Vec<u8>> = ptrs.iter().map(|p| p.to_le_bytes().to_vec()).collect();
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let params = f.pack_params(&refs).unwrap();
    ctx.launch(&f, [1, 1, 1], [32 * WARPS as u32, 1, 1], 0, &params).unwrap();
    let got = common::download_u32(ctx, out, out_words + 16);
    assert!(got[out_words..].iter().all(|&w| w == POISON), "{kernel}: wrote past the output");
    got[..out_words].to_vec()
}

/// Element types of A and B.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    F16,
    Bf16,
    Tf32,
    S8,
    U8,
    S4,
    U4,
    B1,
    E4m3,
    E5m2,
}

impl Ty {
    fn bits(self) -> usize {
        match self {
            Ty::F16 | Ty::Bf16 => 16,
            Ty::Tf32 => 32,
            Ty::S8 | Ty::U8 | Ty::E4m3 | Ty::E5m2 => 8,
            Ty::S4 | Ty::U4 => 4,
            Ty::B1 => 1,
        }
    }

    /// A random element (its bits).
    fn random(self, rng: &mut Lcg) -> u32 {
        let r = rng.next_u32();
        match self {
            // Sign, exponent 2^-6..2^5, 10 random mantissa bits; one in
            // eight subnormal.
            Ty::F16 if (r >> 28) < 2 => r & 0x83ff,
            Ty::F16 => (r & 0x83ff) | ((9 + (r >> 16) % 12) << 10),
            // bf16: exponent 2^-6..2^5 (biased 121..132), 7 mantissa bits.
            Ty::Bf16 => (r & 0x807f) | ((121 + (r >> 16) % 12) << 7),
            // tf32 in f32 layout: 10 mantissa bits, the low 13 bits zero.
            Ty::Tf32 => (r & 0x807f_e000) | ((121 + (r >> 8) % 12) << 23),
            // Finite FP8 patterns: e4m3 exponent fields 0..=14, e5m2 0..=30.
            Ty::E4m3 => (r & 0x87) | ((r >> 8) % 15) << 3,
            Ty::E5m2 => (r & 0x83) | ((r >> 8) % 31) << 2,
            _ => r & ((1u32 << self.bits()) - 1),
        }
    }

    /// The exact value of an element (floats) or its integer value.
    fn value(self, bits: u32) -> f64 {
        match self {
            Ty::F16 => f16_value(bits),
            Ty::Bf16 => f32::from_bits(bits << 16) as f64,
            Ty::Tf32 => f32::from_bits(bits) as f64,
            Ty::S8 => bits as u8 as i8 as f64,
            Ty::U8 => bits as f64,
            Ty::S4 => (((bits << 28) as i32) >> 28) as f64,
            Ty::U4 | Ty::B1 => bits as f64,
            Ty::E4m3 => fp8_value(bits, true),
            Ty::E5m2 => fp8_value(bits, false),
        }
    }
}

fn f16_value(h: u32) -> f64 {
    let s = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f64;
    s * if e == 0 { m * 2f64.powi(-24) } else { (1024.0 + m) * 2f64.powi(e - 25) }
}

/// f32 → f16 bits, round to nearest even (finite, in range).
fn f16_bits(x: f32) -> u32 {
    let x = x as f64;
    let s = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a == 0.0 {
        return s;
    }
    let e = a.log2().floor() as i32;
    let e = e.max(-14);
    let q = a / 2f64.powi(e - 10); // significand scaled to 11 bits
    let r = q.round_ties_even();
    let (mut m, mut e) = (r as u32, e);
    if m >= 2048 {
        m /= 2;
        e += 1;
    }
    if m < 1024 {
        return s | m; // subnormal
    }
    s | (((e + 15) as u32) << 10) | (m - 1024)
}

/// Pack elements of `bits` each into words, little-endian.
fn pack(elems: &[u32], bits: usize) -> Vec<u32> {
    let mut words = vec![0u32; (elems.len() * bits).div_ceil(32)];
    for (i, &x) in elems.iter().enumerate() {
        let bit = i * bits;
        words[bit / 32] |= x << (bit % 32);
    }
    words
}

/// Accumulator types.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Acc {
    F32,
    S32,
}

struct Case {
    kernel: &'static str,
    m: usize,
    k: usize,
    a: Ty,
    b: Ty,
    acc: Acc,
    sat: bool,
    /// b1: `and` (else `xor`).
    and: bool,
}

const fn case(kernel: &'static str, m: usize, k: usize, a: Ty, b: Ty, acc: Acc) -> Case {
    Case { kernel, m, k, a, b, acc, sat: false, and: false }
}

fn check_case(ctx: &Context, module: &Module, c: &Case, seed: u64) {
    const N: usize = 8;
    let mut rng = Lcg(seed);
    let (m, k) = (c.m, c.k);
    let a: Vec<u32> = (0..WARPS * m * k).map(|_| c.a.random(&mut rng)).collect();
    let b: Vec<u32> = (0..WARPS * k * N).map(|_| c.b.random(&mut rng)).collect();
    let cin: Vec<u32> = (0..WARPS * m * N)
        .map(|_| match c.acc {
            Acc::F32 => ((rng.next_u32() % 2000) as f32 / 64.0 - 15.6).to_bits(),
            Acc::S32 => {
                if c.sat && rng.next_u32().is_multiple_of(4) {
                    // Near the limits, so that saturation happens.
                    if rng.next_u32() & 1 == 0 {
                        0x7fff_ff00 + rng.next_u32() % 256
                    } else {
                        0x8000_0000 + rng.next_u32() % 256
                    }
                } else {
                    rng.next_u32() >> 8
                }
            }
        })
        .collect();
    let got = launch(ctx, module, c.kernel, &[&pack(&a, c.a.bits()), &pack(&b, c.b.bits()), &cin], WARPS * m * N);
    let mut saturated = 0;
    for w in 0..WARPS {
        for i in 0..m {
            for j in 0..N {
                let at = w * m * N + i * N + j;
                let ai = |kk: usize| a[w * m * k + i * k + kk];
                let bi = |kk: usize| b[w * k * N + kk * N + j];
                let want = match c.acc {
                    Acc::S32 if c.a == Ty::B1 => {
                        let mut s = cin[at];
                        for kk in 0..k {
                            let x = if c.and { ai(kk) & bi(kk) } else { ai(kk) ^ bi(kk) };
                            s = s.wrapping_add(x);
                        }
                        s
                    }
                    Acc::S32 => {
                        let mut s = cin[at] as i32 as i64;
                        for kk in 0..k {
                            s += c.a.value(ai(kk)) as i64 * c.b.value(bi(kk)) as i64;
                        }
                        if c.sat {
                            let cl = s.clamp(i32::MIN as i64, i32::MAX as i64);
                            saturated += (cl != s) as usize;
                            cl as i32 as u32
                        } else {
                            s as i32 as u32
                        }
                    }
                    Acc::F32 => {
                        let mut s = f32::from_bits(cin[at]);
                        let mut exact = s as f64;
                        let mut mag = (s as f64).abs();
                        for kk in 0..k {
                            let p = c.a.value(ai(kk)) * c.b.value(bi(kk));
                            assert_eq!(p as f32 as f64, p, "products are exact in f32");
                            s += p as f32;
                            exact += p;
                            mag += p.abs();
                        }
                        let g = f32::from_bits(got[at]) as f64;
                        let bound = k as f64 * 2f64.powi(-24) * mag;
                        assert!(
                            (g - exact).abs() <= bound,
                            "{}: D[{w}][{i}][{j}] = {g}, exact {exact}, bound {bound}",
                            c.kernel
                        );
                        s.to_bits()
                    }
                };
                assert_eq!(got[at], want, "{}: warp {w} D[{i}][{j}]: got {:#x}, want {want:#x}", c.kernel, got[at]);
            }
        }
    }
    if c.sat {
        assert!(saturated > 0, "{}: no result saturated; the test would not see .satfinite", c.kernel);
    }
}

#[test]
fn mma_every_shape_and_type() {
    let cases = [
        case("mma_m16n8k16_f32_f16", 16, 16, Ty::F16, Ty::F16, Acc::F32),
        case("mma_m16n8k16_f32_bf16", 16, 16, Ty::Bf16, Ty::Bf16, Acc::F32),
        case("mma_m16n8k8_f32_f16", 16, 8, Ty::F16, Ty::F16, Acc::F32),
        case("mma_m16n8k8_f32_bf16", 16, 8, Ty::Bf16, Ty::Bf16, Acc::F32),
        case("mma_m16n8k8_f32_tf32", 16, 8, Ty::Tf32, Ty::Tf32, Acc::F32),
        case("mma_m16n8k4_f32_tf32", 16, 4, Ty::Tf32, Ty::Tf32, Acc::F32),
        case("mma_m16n8k32_s32_s8", 16, 32, Ty::S8, Ty::S8, Acc::S32),
        Case { sat: true, ..case("mma_m16n8k32_s32_u8s8_sat", 16, 32, Ty::U8, Ty::S8, Acc::S32) },
        case("mma_m16n8k16_s32_u8", 16, 16, Ty::U8, Ty::U8, Acc::S32),
        case("mma_m8n8k16_s32_s8u8", 8, 16, Ty::S8, Ty::U8, Acc::S32),
        case("mma_m16n8k64_s32_s4", 16, 64, Ty::S4, Ty::S4, Acc::S32),
        Case { sat: true, ..case("mma_m8n8k32_s32_u4s4_sat", 8, 32, Ty::U4, Ty::S4, Acc::S32) },
        case("mma_m16n8k256_b1_xor", 16, 256, Ty::B1, Ty::B1, Acc::S32),
        Case { and: true, ..case("mma_m8n8k128_b1_and", 8, 128, Ty::B1, Ty::B1, Acc::S32) },
    ];
    on_every_path("mma", |ctx, m| {
        for (n, c) in cases.iter().enumerate() {
            check_case(ctx, m, c, 1000 + n as u64);
        }
    });
}

/// f16 accumulators: D is the f32 sum rounded once to f16.
#[test]
fn mma_f16_accumulators() {
    on_every_path("mma f16", |ctx, module| {
        let mut rng = Lcg(77);
        for (kernel, k, d_f16) in [("mma_m16n8k16_f16_f16", 16, true), ("mma_m16n8k8_f32_f16_f16c", 8, false)] {
            let a: Vec<u32> = (0..WARPS * 16 * k).map(|_| Ty::F16.random(&mut rng)).collect();
            let b: Vec<u32> = (0..WARPS * k * 8).map(|_| Ty::F16.random(&mut rng)).collect();
            let c: Vec<u32> = (0..WARPS * 128).map(|_| Ty::F16.random(&mut rng)).collect();
            let out_words = if d_f16 { WARPS * 64 } else { WARPS * 128 };
            let got = launch(ctx, module, kernel, &[&pack(&a, 16), &pack(&b, 16), &pack(&c, 16)], out_words);
            for w in 0..WARPS {
                for i in 0..16 {
                    for j in 0..8 {
                        let at = w * 128 + i * 8 + j;
                        let mut s = f16_value(c[at]) as f32;
                        for kk in 0..k {
                            let p = f16_value(a[w * 16 * k + i * k + kk]) * f16_value(b[w * k * 8 + kk * 8 + j]);
                            s += p as f32;
                        }
                        let g = if d_f16 { (got[at / 2] >> (16 * (at % 2))) & 0xffff } else { got[at] };
                        let want = if d_f16 { f16_bits(s) } else { s.to_bits() };
                        assert_eq!(g, want, "{kernel}: warp {w} D[{i}][{j}]: got {g:#x}, want {want:#x} ({s})");
                    }
                }
            }
        }
    });
}

/// f64: each D element is C plus the products in `k` order, each step a
/// correctly rounded fused multiply-add (the ISA: "identical to .f64 fma").
#[test]
fn mma_f64() {
    on_every_path("mma f64", |ctx, module| {
        let mut rng = Lcg(5);
        let mut rnd = || {
            let m = (u64::from(rng.next_u32()) << 21 | u64::from(rng.next_u32() >> 11)) | 1 << 52;
            let v = m as f64 * 2f64.powi(-52 + (rng.next_u32() % 9) as i32 - 4);
            if rng.next_u32() & 1 == 1 {
                -v
            } else {
                v
            }
        };
        let a: Vec<f64> = (0..WARPS * 32).map(|_| rnd()).collect();
        let b: Vec<f64> = (0..WARPS * 32).map(|_| rnd()).collect();
        let c: Vec<f64> = (0..WARPS * 64).map(|_| rnd()).collect();
        let words = |v: &[f64]| -> Vec<u32> {
            v.iter().flat_map(|x| [x.to_bits() as u32, (x.to_bits() >> 32) as u32]).collect()
        };
        let got = launch(ctx, module, "mma_m8n8k4_f64", &[&words(&a), &words(&b), &words(&c)], WARPS * 128);
        for w in 0..WARPS {
            for i in 0..8 {
                for j in 0..8 {
                    let at = w * 64 + i * 8 + j;
                    let mut s = c[at];
                    for kk in 0..4 {
                        s = a[w * 32 + i * 4 + kk].mul_add(b[w * 32 + kk * 8 + j], s);
                    }
                    let g = f64::from_bits(u64::from(got[2 * at]) | u64::from(got[2 * at + 1]) << 32);
                    assert_eq!(g.to_bits(), s.to_bits(), "mma f64: warp {w} D[{i}][{j}]: got {g}, want {s}");
                }
            }
        }
    });
}

/// `ldmatrix` (x1, x2, x4, `.trans`, shared and generic addresses) and
/// `movmatrix`, with each warp's row addresses permuted.
#[test]
fn ldmatrix_and_movmatrix() {
    on_every_path("ldmatrix", |ctx, module| {
        let mut rng = Lcg(9);
        // 32 rows of 4 data words and a padding word, per warp.
        let src: Vec<u32> = (0..WARPS * 32 * 5).map(|_| rng.next_u32()).collect();
        let mut perm: Vec<u32> = Vec::new();
        for _ in 0..WARPS {
            let mut p: Vec<u32> = (0..32).collect();
            for i in (1..32).rev() {
                p.swap(i, rng.next_u32() as usize % (i + 1));
            }
            perm.extend(p);
        }
        let per_warp = 32 * 4 * 6;
        let got = launch(ctx, module, "ldmatrix_kinds", &[&src, &perm], WARPS * per_warp);
        for w in 0..WARPS {
            // Element (r, c) of matrix mat: half c of row 8*mat + r.
            let elem = |mat: usize, r: usize, c: usize| -> u32 {
                let slot = perm[w * 32 + 8 * mat + r] as usize;
                let word = src[w * 160 + slot * 5 + c / 2];
                (word >> (16 * (c % 2))) & 0xffff
            };
            let frag = |mat: usize, lane: usize, trans: bool| -> u32 {
                let (g, t) = (lane / 4, lane % 4);
                let e = |j: usize| if trans { elem(mat, 2 * t + j, g) } else { elem(mat, g, 2 * t + j) };
                e(0) | e(1) << 16
            };
            let out = &got[w * per_warp..];
            for lane in 0..32 {
                for mat in 0..4 {
                    let want = [
                        frag(mat, lane, false),
                        frag(mat, lane, true),
                        if mat < 2 { frag(mat, lane, false) } else { 0 },
                        if mat < 1 { frag(mat, lane, true) } else { 0 },
                        frag(mat, lane, false),
                        if mat < 1 { frag(mat, lane, true) } else { 0 },
                    ];
                    for (kind, want) in want.iter().enumerate() {
                        let g = out[kind * 128 + lane * 4 + mat];
                        assert_eq!(
                            g, *want,
                            "warp {w} kind {kind} lane {lane} matrix {mat}: got {g:#x}, want {want:#x}"
                        );
                    }
                }
            }
        }
    });
}

/// `m8n8k4` with f16 inputs (sm_70's quad-pair form): each quad-pair of a
/// warp computes its own 8×8 product; `.row.col` with f32 accumulators and
/// `.col.row` with f16 ones.
#[test]
fn mma_m8n8k4_quad_pairs() {
    on_every_path("mma m8n8k4", |ctx, module| {
        let mut rng = Lcg(31);
        let products = WARPS * 4;
        for (kernel, f16_acc) in [("mma_m8n8k4_row_col_f32", false), ("mma_m8n8k4_col_row_f16", true)] {
            let a: Vec<u32> = (0..products * 32).map(|_| Ty::F16.random(&mut rng)).collect();
            let b: Vec<u32> = (0..products * 32).map(|_| Ty::F16.random(&mut rng)).collect();
            let c: Vec<u32> = (0..products * 64)
                .map(|_| {
                    if f16_acc {
                        Ty::F16.random(&mut rng)
                    } else {
                        ((rng.next_u32() % 2000) as f32 / 64.0 - 15.6).to_bits()
                    }
                })
                .collect();
            let cw = if f16_acc { pack(&c, 16) } else { c.clone() };
            let out_words = if f16_acc { products * 32 } else { products * 64 };
            let got = launch(ctx, module, kernel, &[&pack(&a, 16), &pack(&b, 16), &cw], out_words);
            for p in 0..products {
                for i in 0..8 {
                    for j in 0..8 {
                        let at = p * 64 + i * 8 + j;
                        let mut s = if f16_acc { f16_value(c[at]) as f32 } else { f32::from_bits(c[at]) };
                        for kk in 0..4 {
                            s += (f16_value(a[p * 32 + i * 4 + kk]) * f16_value(b[p * 32 + kk * 8 + j])) as f32;
                        }
                        let (g, want) = if f16_acc {
                            ((got[at / 2] >> (16 * (at % 2))) & 0xffff, f16_bits(s))
                        } else {
                            (got[at], s.to_bits())
                        };
                        assert_eq!(g, want, "{kernel}: product {p} D[{i}][{j}]: got {g:#x}, want {want:#x}");
                    }
                }
            }
        }
    });
}

const PTX_SM90: &str = include_str!("../../tests/fixtures/mma_sm90.ptx");

fn on_every_path_sm90(name: &str, body: impl Fn(&Context, &Module)) {
    on_every_path_of(PTX_SM90, "mma_sm90.ptx", name, body)
}

/// The exact value of an FP8 pattern (`e4m3`: bias 7, 3 mantissa bits;
/// `e5m2`: bias 15, 2 mantissa bits), finite patterns only.
fn fp8_value(x: u32, e4m3: bool) -> f64 {
    let (mbits, bias) = if e4m3 { (3, 7) } else { (2, 15) };
    let s = if x & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((x & 0x7f) >> mbits) as i32;
    let m = (x & ((1 << mbits) - 1)) as f64;
    s * if e == 0 { m * 2f64.powi(1 - bias - mbits) } else { (m + (1 << mbits) as f64) * 2f64.powi(e - bias - mbits) }
}

/// FP8 products (exact in f32) summed in `k` order, and the f64 `m16n8k16`
/// shape (fused multiply-adds in `k` order).
#[test]
fn mma_fp8_and_f64_m16n8k16() {
    on_every_path_sm90("mma sm_90", |ctx, module| {
        let mut rng = Lcg(41);
        // Finite FP8 patterns: e4m3 exponent fields 0..=14, e5m2 0..=30.
        let a: Vec<u32> = (0..WARPS * 16 * 32)
            .map(|_| {
                let r = rng.next_u32();
                (r & 0x87) | ((r >> 8) % 15) << 3
            })
            .collect();
        let b: Vec<u32> = (0..WARPS * 32 * 8)
            .map(|_| {
                let r = rng.next_u32();
                (r & 0x83) | ((r >> 8) % 31) << 2
            })
            .collect();
        let c: Vec<u32> = (0..WARPS * 128).map(|_| ((rng.next_u32() % 2000) as f32 / 64.0 - 15.6).to_bits()).collect();
        let got = launch(ctx, module, "mma_m16n8k32_f32_e4m3_e5m2", &[&pack(&a, 8), &pack(&b, 8), &c], WARPS * 128);
        for w in 0..WARPS {
            for i in 0..16 {
                for j in 0..8 {
                    let at = w * 128 + i * 8 + j;
                    let mut s = f32::from_bits(c[at]);
                    for kk in 0..32 {
                        let p = fp8_value(a[w * 512 + i * 32 + kk], true) * fp8_value(b[w * 256 + kk * 8 + j], false);
                        s += p as f32;
                    }
                    assert_eq!(
                        got[at],
                        s.to_bits(),
                        "e4m3 x e5m2: warp {w} D[{i}][{j}]: got {}",
                        f32::from_bits(got[at])
                    );
                }
            }
        }
        let mut rnd = || {
            let m = (u64::from(rng.next_u32()) << 21 | u64::from(rng.next_u32() >> 11)) | 1 << 52;
            let v = m as f64 * 2f64.powi(-52 + (rng.next_u32() % 9) as i32 - 4);
            if rng.next_u32() & 1 == 1 {
                -v
            } else {
                v
            }
        };
        let a: Vec<f64> = (0..WARPS * 256).map(|_| rnd()).collect();
        let b: Vec<f64> = (0..WARPS * 128).map(|_| rnd()).collect();
        let c: Vec<f64> = (0..WARPS * 128).map(|_| rnd()).collect();
        let words = |v: &[f64]| -> Vec<u32> {
            v.iter().flat_map(|x| [x.to_bits() as u32, (x.to_bits() >> 32) as u32]).collect()
        };
        let got = launch(ctx, module, "mma_m16n8k16_f64", &[&words(&a), &words(&b), &words(&c)], WARPS * 256);
        for w in 0..WARPS {
            for i in 0..16 {
                for j in 0..8 {
                    let at = w * 128 + i * 8 + j;
                    let mut s = c[at];
                    for kk in 0..16 {
                        s = a[w * 256 + i * 16 + kk].mul_add(b[w * 128 + kk * 8 + j], s);
                    }
                    let g = f64::from_bits(u64::from(got[2 * at]) | u64::from(got[2 * at + 1]) << 32);
                    assert_eq!(g.to_bits(), s.to_bits(), "f64 m16n8k16: warp {w} D[{i}][{j}]: got {g}, want {s}");
                }
            }
        }
    });
}

/// `stmatrix` (x4, x4.trans, x1) to permuted row addresses.
#[test]
fn stmatrix_kinds() {
    on_every_path_sm90("stmatrix", |ctx, module| {
        let mut rng = Lcg(43);
        let src: Vec<u32> = (0..WARPS * 128).map(|_| rng.next_u32()).collect();
        let mut perm: Vec<u32> = Vec::new();
        for _ in 0..WARPS {
            let mut p: Vec<u32> = (0..32).collect();
            for i in (1..32).rev() {
                p.swap(i, rng.next_u32() as usize % (i + 1));
            }
            perm.extend(p);
        }
        let got = launch(ctx, module, "stmatrix_kinds", &[&src, &perm], WARPS * 480);
        for w in 0..WARPS {
            // Element (r, c) of fragment matrix m: lane 4r + c/2, register m, half c % 2.
            let frag =
                |m: usize, r: usize, c: usize| (src[w * 128 + (4 * r + c / 2) * 4 + m] >> (16 * (c % 2))) & 0xffff;
            for kind in 0..3 {
                let mut want = vec![0xCDCD_CDCDu32; 160];
                let mats = if kind == 2 { 1 } else { 4 };
                for m in 0..mats {
                    for r in 0..8 {
                        let slot = perm[w * 32 + 8 * m + r] as usize;
                        for c in 0..4 {
                            let e = |col: usize| if kind == 1 { frag(m, col, r) } else { frag(m, r, col) };
                            want[slot * 5 + c] = e(2 * c) | e(2 * c + 1) << 16;
                        }
                    }
                }
                let g = &got[w * 480 + kind * 160..w * 480 + kind * 160 + 160];
                for i in 0..160 {
                    assert_eq!(
                        g[i], want[i],
                        "stmatrix kind {kind} warp {w} word {i}: got {:#x}, want {:#x}",
                        g[i], want[i]
                    );
                }
            }
        }
    });
}

const PTX_WMMA: &str = include_str!("../../tests/fixtures/wmma.ptx");

/// Storage types of wmma A/B matrices.
#[derive(Clone, Copy, Debug, PartialEq)]
enum WTy {
    Plain(Ty),
    /// f32 storage converted to tf32 by the kernel (`__float_to_tf32`, round to nearest, ties away).
    Tf32FromF32,
    F64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum WAcc {
    F32,
    F16,
    F64,
    S32,
}

struct WCase {
    kernel: &'static str,
    m: usize,
    n: usize,
    k: usize,
    ty: WTy,
    a_row: bool,
    b_row: bool,
    lda: usize,
    ldb: usize,
    acc: WAcc,
}

/// tf32 as `cvt.rna.tf32.f32` makes it (finite values).
fn tf32_rna(x: u32) -> u32 {
    let mag = (x & 0x7fff_ffff) + 0x1000;
    (x & 0x8000_0000) | (mag & 0x7fff_e000)
}

fn f64_words(v: &[f64]) -> Vec<u32> {
    v.iter().flat_map(|x| [x.to_bits() as u32, (x.to_bits() >> 32) as u32]).collect()
}

/// `nvcuda::wmma` kernels of every shape and type: loads with both layouts
/// and padded leading dimensions, element-wise work on the accumulator
/// fragment (every element, duplicates included, once), the product, the
/// store; bit for bit against the documented arithmetic.
#[test]
fn wmma_every_shape_and_type() {
    use WAcc::*;
    let cases = [
        WCase {
            kernel: "wmma_f16_m16n16k16_f32",
            m: 16,
            n: 16,
            k: 16,
            ty: WTy::Plain(Ty::F16),
            a_row: true,
            b_row: false,
            lda: 24,
            ldb: 24,
            acc: F32,
        },
        WCase {
            kernel: "wmma_f16_m32n8k16_f16",
            m: 32,
            n: 8,
            k: 16,
            ty: WTy::Plain(Ty::F16),
            a_row: false,
            b_row: true,
            lda: 40,
            ldb: 16,
            acc: F16,
        },
        WCase {
            kernel: "wmma_f16_m8n32k16_f32",
            m: 8,
            n: 32,
            k: 16,
            ty: WTy::Plain(Ty::F16),
            a_row: true,
            b_row: true,
            lda: 16,
            ldb: 40,
            acc: F32,
        },
        WCase {
            kernel: "wmma_bf16_m16n16k16_f32",
            m: 16,
            n: 16,
            k: 16,
            ty: WTy::Plain(Ty::Bf16),
            a_row: true,
            b_row: false,
            lda: 16,
            ldb: 16,
            acc: F32,
        },
        WCase {
            kernel: "wmma_tf32_m16n16k8_f32",
            m: 16,
            n: 16,
            k: 8,
            ty: WTy::Tf32FromF32,
            a_row: true,
            b_row: false,
            lda: 8,
            ldb: 8,
            acc: F32,
        },
        WCase {
            kernel: "wmma_f64_m8n8k4",
            m: 8,
            n: 8,
            k: 4,
            ty: WTy::F64,
            a_row: true,
            b_row: false,
            lda: 4,
            ldb: 4,
            acc: F64,
        },
        WCase {
            kernel: "wmma_s8_m16n16k16",
            m: 16,
            n: 16,
            k: 16,
            ty: WTy::Plain(Ty::S8),
            a_row: true,
            b_row: false,
            lda: 32,
            ldb: 16,
            acc: S32,
        },
        WCase {
            kernel: "wmma_u8_m32n8k16",
            m: 32,
            n: 8,
            k: 16,
            ty: WTy::Plain(Ty::U8),
            a_row: false,
            b_row: true,
            lda: 32,
            ldb: 8,
            acc: S32,
        },
        WCase {
            kernel: "wmma_s4_m8n8k32",
            m: 8,
            n: 8,
            k: 32,
            ty: WTy::Plain(Ty::S4),
            a_row: true,
            b_row: false,
            lda: 32,
            ldb: 32,
            acc: S32,
        },
        WCase {
            kernel: "wmma_b1_m8n8k128",
            m: 8,
            n: 8,
            k: 128,
            ty: WTy::Plain(Ty::B1),
            a_row: true,
            b_row: false,
            lda: 128,
            ldb: 128,
            acc: S32,
        },
    ];
    let ctx = context();
    for path in [WarpPath::Native, WarpPath::Slice, WarpPath::Emulated] {
        if !ctx.info().warp_paths.contains(&path) {
            continue;
        }
        let module = ctx.load_module_with_warp_path(PTX_WMMA, "wmma.ptx", path).expect("translate and load");
        for (seed, c) in cases.iter().enumerate() {
            let mut rng = Lcg(500 + seed as u64);
            let (m, n, k) = (c.m, c.n, c.k);
            // Storage sizes (elements) of A and B with their leading dimensions.
            let size_a = if c.a_row { m * c.lda } else { k * c.lda };
            let size_b = if c.b_row { k * c.ldb } else { n * c.ldb };
            let at_a = |r: usize, col: usize| if c.a_row { r * c.lda + col } else { col * c.lda + r };
            let at_b = |r: usize, col: usize| if c.b_row { r * c.ldb + col } else { col * c.ldb + r };
            let gen = |rng: &mut Lcg, len: usize| -> Vec<u32> {
                (0..WARPS * len)
                    .map(|_| match c.ty {
                        WTy::Plain(t) => t.random(rng),
                        WTy::Tf32FromF32 => {
                            let r = rng.next_u32();
                            (r & 0x807f_ffff) | ((121 + (r >> 8) % 12) << 23)
                        }
                        WTy::F64 => 0,
                    })
                    .collect()
            };
            let words_of = |v: &[u32]| -> Vec<u32> {
                match c.ty {
                    WTy::Plain(t) => pack(v, t.bits()),
                    _ => v.to_vec(),
                }
            };
            let value = |bits: u32| -> f64 {
                match c.ty {
                    WTy::Plain(t) => t.value(bits),
                    WTy::Tf32FromF32 => f32::from_bits(tf32_rna(bits)) as f64,
                    WTy::F64 => 0.0,
                }
            };
            if c.ty == WTy::F64 {
                let mut rnd =
                    |_: usize| (rng.next_u32() as i32 as f64) * 2f64.powi(-31) * (1 + rng.next_u32() % 7) as f64;
                let a: Vec<f64> = (0..WARPS * size_a).map(&mut rnd).collect();
                let b: Vec<f64> = (0..WARPS * size_b).map(&mut rnd).collect();
                let cc: Vec<f64> = (0..WARPS * m * n).map(&mut rnd).collect();
                let got = launch(
                    &ctx,
                    &module,
                    c.kernel,
                    &[&f64_words(&a), &f64_words(&b), &f64_words(&cc)],
                    WARPS * m * n * 2,
                );
                for w in 0..WARPS {
                    for i in 0..m {
                        for j in 0..n {
                            let at = w * m * n + i * n + j;
                            let mut s = cc[at] * 0.5;
                            for kk in 0..k {
                                s = a[w * size_a + at_a(i, kk)].mul_add(b[w * size_b + at_b(kk, j)], s);
                            }
                            let g = f64::from_bits(u64::from(got[2 * at]) | u64::from(got[2 * at + 1]) << 32);
                            assert_eq!(
                                g.to_bits(),
                                s.to_bits(),
                                "{}: warp {w} D[{i}][{j}]: got {g}, want {s}",
                                c.kernel
                            );
                        }
                    }
                }
                continue;
            }
            let a = gen(&mut rng, size_a);
            let b = gen(&mut rng, size_b);
            let cin: Vec<u32> = (0..WARPS * m * n)
                .map(|_| match c.acc {
                    F32 => ((rng.next_u32() % 2000) as f32 / 64.0 - 15.6).to_bits(),
                    // Normal f16 values (halving them is exact).
                    F16 => {
                        let r = rng.next_u32();
                        (r & 0x83ff) | ((9 + (r >> 16) % 12) << 10)
                    }
                    _ => rng.next_u32() >> 4,
                })
                .collect();
            let c_words = if c.acc == F16 { pack(&cin, 16) } else { cin.clone() };
            let out_words = if c.acc == F16 { WARPS * m * n / 2 } else { WARPS * m * n };
            let got = launch(&ctx, &module, c.kernel, &[&words_of(&a), &words_of(&b), &c_words], out_words);
            for w in 0..WARPS {
                for i in 0..m {
                    for j in 0..n {
                        let at = w * m * n + i * n + j;
                        let ai = |kk: usize| a[w * size_a + at_a(i, kk)];
                        let bi = |kk: usize| b[w * size_b + at_b(kk, j)];
                        let (g, want) = match c.acc {
                            S32 => {
                                let mut s = cin[at].wrapping_add(1);
                                for kk in 0..k {
                                    let p = if c.ty == WTy::Plain(Ty::B1) {
                                        ai(kk) ^ bi(kk)
                                    } else {
                                        (value(ai(kk)) * value(bi(kk))) as i64 as u32
                                    };
                                    s = s.wrapping_add(p);
                                }
                                (got[at], s)
                            }
                            F32 | F16 => {
                                let c0 = if c.acc == F16 { f16_value(cin[at]) as f32 } else { f32::from_bits(cin[at]) };
                                let mut s = c0 * 0.5;
                                for kk in 0..k {
                                    s += (value(ai(kk)) * value(bi(kk))) as f32;
                                }
                                if c.acc == F16 {
                                    ((got[at / 2] >> (16 * (at % 2))) & 0xffff, f16_bits(s))
                                } else {
                                    (got[at], s.to_bits())
                                }
                            }
                            F64 => unreachable!(),
                        };
                        assert_eq!(g, want, "{}: warp {w} D[{i}][{j}]: got {g:#x}, want {want:#x}", c.kernel);
                    }
                }
            }
        }
    }
    assert_clean(&ctx);
}

const PTX_GEMM: &str = include_str!("../../tests/fixtures/gemm.ptx");

/// A CUTLASS-style GEMM (`tests/fixtures/gemm.cu`: double-buffered
/// `cp.async` into padded shared tiles, `ldmatrix` (`.trans` for B),
/// `mma.m16n8k16`), 128×128×96 over a grid of 4 blocks of 4 warps, against
/// the host: each C element is the products added in `k` order in f32 (bit
/// for bit), within `K·u·Σ|a·b|` of the exact sum. And the f32 FMA GEMM of
/// the same file (sequential `fmaf` in `k` order, bit for bit).
#[test]
fn gemm_cp_async_ldmatrix_mma() {
    let ctx = context();
    let module = ctx.load_module(PTX_GEMM, "gemm.ptx").expect("translate and load");
    let (m, n, k) = (128usize, 128usize, 96usize);
    let mut rng = Lcg(71);
    let a: Vec<u32> = (0..m * k).map(|_| Ty::F16.random(&mut rng)).collect();
    let b: Vec<u32> = (0..k * n).map(|_| Ty::F16.random(&mut rng)).collect();
    let run = |kernel: &str, block: u32, inputs: [Vec<u32>; 2]| -> Vec<u32> {
        let f = module.function(kernel).unwrap();
        let mut ptrs = Vec::new();
        for data in &inputs {
            let d = ctx.alloc((data.len() * 4) as u64).unwrap();
            let bytes: Vec<u8> = data.iter().flat_map(|w| w.to_le_bytes()).collect();
            ctx.copy_htod(d, &bytes).unwrap();
            ptrs.push(d);
        }
        let out = ctx.alloc((m * n * 4 + 64) as u64).unwrap();
        ctx.memset_d32(out, POISON, (m * n + 16) as u64).unwrap();
        let mut args: Vec<Vec<u8>> = ptrs.iter().map(|p| p.to_le_bytes().to_vec()).collect();
        args.push(out.to_le_bytes().to_vec());
        for d in [m, n, k] {
            args.push((d as i32).to_le_bytes().to_vec());
        }
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let params = f.pack_params(&refs).unwrap();
        ctx.launch(&f, [(n / 64) as u32, (m / 64) as u32, 1], [block, 1, 1], 0, &params).unwrap();
        let got = common::download_u32(&ctx, out, m * n + 16);
        assert!(got[m * n..].iter().all(|&w| w == POISON), "{kernel}: wrote past C");
        got[..m * n].to_vec()
    };
    let got = run("hgemm_mma", 128, [pack(&a, 16), pack(&b, 16)]);
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut exact, mut mag) = (0f32, 0f64, 0f64);
            for kk in 0..k {
                let p = f16_value(a[i * k + kk]) * f16_value(b[kk * n + j]);
                s += p as f32;
                exact += p;
                mag += p.abs();
            }
            let g = f32::from_bits(got[i * n + j]);
            assert!(
                ((g as f64) - exact).abs() <= k as f64 * 2f64.powi(-24) * mag,
                "hgemm C[{i}][{j}] = {g}, exact {exact}"
            );
            assert_eq!(got[i * n + j], s.to_bits(), "hgemm C[{i}][{j}]: got {g}, want {s}");
        }
    }
    let af: Vec<f32> = a.iter().map(|&h| f16_value(h) as f32).collect();
    let bf: Vec<f32> = b.iter().map(|&h| f16_value(h) as f32).collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    let got = run("sgemm_fma", 256, [bits(&af), bits(&bf)]);
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f32;
            for kk in 0..k {
                s = af[i * k + kk].mul_add(bf[kk * n + j], s);
            }
            assert_eq!(
                got[i * n + j],
                s.to_bits(),
                "sgemm C[{i}][{j}]: got {}, want {s}",
                f32::from_bits(got[i * n + j])
            );
        }
    }
    assert_clean(&ctx);
}

const PTX_F64_RND: &str = include_str!("../../tests/fixtures/mma_f64_rnd.ptx");

/// f64 `mma.sync` and `wmma.mma` with `.rn`, `.rz`, `.rm` and `.rp`: each D
/// element is C plus the products in `k` order, each step a fused
/// multiply-add rounded in the instruction's mode (checked against
/// rustc_apfloat's). The inputs have full 53-bit significands, so every
/// step rounds; warp 1's are scaled near the top of the range, so that
/// some sums overflow (to infinity or to the largest finite value,
/// depending on the mode).
#[test]
fn f64_rounding_modes() {
    use rustc_apfloat::ieee::Double;
    use rustc_apfloat::{Float, Round};
    on_every_path_of(PTX_F64_RND, "mma_f64_rnd.ptx", "f64 rounding", |ctx, module| {
        let mut rng = Lcg(61);
        let mut rnd = |w: usize| {
            let m = (u64::from(rng.next_u32()) << 21 | u64::from(rng.next_u32() >> 11)) | 1 << 52;
            let scale = if w == 0 { -52 + (rng.next_u32() % 9) as i32 - 4 } else { 457 + (rng.next_u32() % 3) as i32 };
            let v = m as f64 * 2f64.powi(scale);
            if rng.next_u32() & 1 == 1 {
                -v
            } else {
                v
            }
        };
        let a: Vec<f64> = (0..WARPS * 32).map(|i| rnd(i / 32)).collect();
        let b: Vec<f64> = (0..WARPS * 32).map(|i| rnd(i / 32)).collect();
        let c: Vec<f64> = (0..WARPS * 64).map(|i| rnd(i / 64)).collect();
        let d = |x: f64| Double::from_bits(u128::from(x.to_bits()));
        let mut overflowed = [0usize; 4];
        for (mi, (mode, round)) in [
            ("rn", Round::NearestTiesToEven),
            ("rz", Round::TowardZero),
            ("rm", Round::TowardNegative),
            ("rp", Round::TowardPositive),
        ]
        .into_iter()
        .enumerate()
        {
            for kind in ["mma", "wmma"] {
                let kernel = format!("{kind}_f64_{mode}");
                let got = launch(ctx, module, &kernel, &[&f64_words(&a), &f64_words(&b), &f64_words(&c)], WARPS * 128);
                for w in 0..WARPS {
                    for i in 0..8 {
                        for j in 0..8 {
                            let at = w * 64 + i * 8 + j;
                            let mut s = d(c[at]);
                            for kk in 0..4 {
                                s = d(a[w * 32 + i * 4 + kk]).mul_add_r(d(b[w * 32 + kk * 8 + j]), s, round).value;
                            }
                            let want = f64::from_bits(s.to_bits() as u64);
                            let g = f64::from_bits(u64::from(got[2 * at]) | u64::from(got[2 * at + 1]) << 32);
                            assert_eq!(
                                g.to_bits(),
                                want.to_bits(),
                                "{kernel}: warp {w} D[{i}][{j}]: got {g:e}, want {want:e}"
                            );
                            if want.is_infinite() || want.abs() == f64::MAX {
                                overflowed[mi] += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(overflowed.iter().all(|&n| n > 0), "no overflowing sums in some mode: {overflowed:?}");
    });
}

const PTX_SP: &str = include_str!("../../tests/fixtures/mma_sp.ptx");

/// Accumulators of the sparse cases.
#[derive(Clone, Copy, Debug, PartialEq)]
enum SpAcc {
    F16,
    F32,
    S32,
}

/// One `mma.sp` kernel of `tests/fixtures/mma_sp.cu`.
struct SpCase {
    kernel: &'static str,
    k: usize,
    a: Ty,
    b: Ty,
    acc: SpAcc,
    /// The sparsity selector.
    f: usize,
    sat: bool,
    /// `::ordered_metadata` (indices ascending in each field); plain
    /// `mma.sp` cases get descending pairs too.
    ordered: bool,
}

/// The lane and bit offset of the metadata field of `row` and `chunk`,
/// from the ISA's figures "Sparse MMA metadata layout" (one thread of each
/// quad, or a pair of threads, or all four; see `mma_sp.rs` for sources).
fn sp_meta_place(c: &SpCase, chunks: usize, row: usize, chunk: usize) -> (usize, usize) {
    meta_place(c.a, c.f, chunks, row, chunk)
}

/// [`sp_meta_place`] for A type `a` and selector `f`.
fn meta_place(a: Ty, f: usize, chunks: usize, row: usize, chunk: usize) -> (usize, usize) {
    let g = row % 8;
    let upper = row >= 8;
    match a {
        // 16-bit and tf32 types: one register holds rows g (bits 0..16)
        // and g+8 (bits 16..32), four fields each.
        Ty::F16 | Ty::Bf16 | Ty::Tf32 => {
            let bits = if upper { 16 } else { 0 } + 4 * (chunk % 4);
            if chunks == 4 {
                (4 * g + f, bits)
            } else {
                (4 * g + 2 * f + chunk / 4, bits)
            }
        }
        // 8- and 4-bit types: one register is one row's eight fields.
        _ => {
            if chunks == 8 {
                (4 * g + 2 * f + upper as usize, 4 * chunk)
            } else {
                (4 * g + upper as usize + 2 * (chunk / 8), 4 * (chunk % 8))
            }
        }
    }
}

/// `mma.sp` and `mma.sp::ordered_metadata` of every shape and type, and
/// every sparsity selector of the 16-bit `m16n8k16` shape: random
/// compressed A, metadata (the registers of lanes that do not supply
/// metadata are random too) and B; each D is C plus the stored A elements
/// times the B rows their metadata selects, in compressed-column order,
/// bit for bit.
#[test]
fn mma_sparse_every_shape_and_type() {
    use SpAcc::*;
    let sp = |kernel, k, a, b, acc, f, sat, ordered| SpCase { kernel, k, a, b, acc, f, sat, ordered };
    let cases = [
        sp("sp_f16_k16_f32_s0", 16, Ty::F16, Ty::F16, F32, 0, false, false),
        sp("sp_f16_k16_f32_s1", 16, Ty::F16, Ty::F16, F32, 1, false, false),
        sp("sp_f16_k16_f32_s2", 16, Ty::F16, Ty::F16, F32, 2, false, false),
        sp("sp_f16_k16_f32_s3", 16, Ty::F16, Ty::F16, F32, 3, false, false),
        sp("sp_f16_k16_f16_s1", 16, Ty::F16, Ty::F16, F16, 1, false, false),
        sp("sp_f16_k32_f32_s0", 32, Ty::F16, Ty::F16, F32, 0, false, false),
        sp("sp_f16_k32_f32_s1", 32, Ty::F16, Ty::F16, F32, 1, false, false),
        sp("sp_f16_k32_f16_s0", 32, Ty::F16, Ty::F16, F16, 0, false, true),
        sp("sp_bf16_k16_s2", 16, Ty::Bf16, Ty::Bf16, F32, 2, false, true),
        sp("sp_bf16_k32_s1", 32, Ty::Bf16, Ty::Bf16, F32, 1, false, false),
        sp("sp_tf32_k8_s0", 8, Ty::Tf32, Ty::Tf32, F32, 0, false, false),
        sp("sp_tf32_k8_s3", 8, Ty::Tf32, Ty::Tf32, F32, 3, false, true),
        sp("sp_tf32_k16_s1", 16, Ty::Tf32, Ty::Tf32, F32, 1, false, false),
        sp("sp_s8_k32_s0", 32, Ty::S8, Ty::S8, S32, 0, false, false),
        sp("sp_u8s8_k32_sat_s1", 32, Ty::U8, Ty::S8, S32, 1, true, false),
        sp("sp_s8u8_k64_s0", 64, Ty::S8, Ty::U8, S32, 0, false, true),
        sp("sp_u8_k64_sat_s0", 64, Ty::U8, Ty::U8, S32, 0, true, false),
        sp("sp_s4_k64_s1", 64, Ty::S4, Ty::S4, S32, 1, false, false),
        sp("sp_u4_k64_sat_s0", 64, Ty::U4, Ty::U4, S32, 0, true, true),
        sp("sp_s4u4_k128_s0", 128, Ty::S4, Ty::U4, S32, 0, false, false),
        sp("sp_e4m3_k64_s0", 64, Ty::E4m3, Ty::E4m3, F32, 0, false, true),
        sp("sp_e5m2e4m3_k64_s0", 64, Ty::E5m2, Ty::E4m3, F32, 0, false, false),
    ];
    on_every_path_of(PTX_SP, "mma_sp.ptx", "mma.sp", |ctx, module| {
        for (i, c) in cases.iter().enumerate() {
            check_sparse(ctx, module, c, 700 + i as u64);
        }
    });
}

/// `start` plus `products` in order: wrapping in 32 bits, or with `sat`
/// exact and clamped to s32 (counting the clamped results in `saturated`).
fn int_sum(start: i64, products: impl Iterator<Item = i64>, sat: bool, saturated: &mut usize) -> u32 {
    let mut acc = start;
    for p in products {
        acc = if sat { acc + p } else { (acc as i32).wrapping_add(p as i32) as i64 };
    }
    if sat {
        let cl = acc.clamp(i32::MIN as i64, i32::MAX as i64);
        *saturated += (cl != acc) as usize;
        cl as i32 as u32
    } else {
        acc as i32 as u32
    }
}

/// Columns of A per metadata chunk, and stored elements per chunk.
fn sparsity(a: Ty) -> (usize, usize) {
    match a {
        Ty::Tf32 => (2, 1),
        Ty::S4 | Ty::U4 => (8, 4),
        _ => (4, 2),
    }
}

/// `fields` random metadata fields for A of type `a`: two different
/// indices, ascending when `ordered` (else in either order); tf32's
/// `0b0100` or `0b1110`.
fn random_meta(rng: &mut Lcg, a: Ty, fields: usize, ordered: bool) -> Vec<u32> {
    (0..fields)
        .map(|_| {
            if a == Ty::Tf32 {
                return if rng.next_u32() & 1 == 0 { 0b0100 } else { 0b1110 };
            }
            let i0 = rng.next_u32() % 4;
            let i1 = (i0 + 1 + rng.next_u32() % 3) % 4;
            let (lo, hi) =
                if ordered || rng.next_u32() & 1 == 0 { (i0.min(i1), i0.max(i1)) } else { (i0.max(i1), i0.min(i1)) };
            lo | hi << 2
        })
        .collect()
}

/// The column of B (the row of dense A) that stored element `x` of `row`
/// multiplies, from the row's metadata fields.
fn sparse_column(meta: &[u32], a: Ty, chunks: usize, row: usize, x: usize) -> usize {
    let (w, s) = sparsity(a);
    let (chunk, slot) = (x / s, x % s);
    let nib = meta[row * chunks + chunk] as usize;
    let pos = match w {
        2 => (nib & 3) >> 1,
        8 => 2 * ((nib >> (2 * (slot / 2))) & 3) + slot % 2,
        _ => (nib >> (2 * slot)) & 3,
    };
    w * chunk + pos
}

fn check_sparse(ctx: &Context, module: &Module, c: &SpCase, seed: u64) {
    const M: usize = 16;
    const N: usize = 8;
    let mut rng = Lcg(seed);
    let k = c.k;
    let kc = k / 2;
    let e = 32 / c.a.bits();
    let chunks = k / sparsity(c.a).0;
    // The compressed 16×K/2 A and the K×8 B both take K/(4e) registers.
    let (a_regs, b_regs, c_regs) = (k / (4 * e), k / (4 * e), if c.acc == SpAcc::F16 { 2 } else { 4 });
    let (mut a_in, mut b_in, mut c_in, mut e_in) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut want = Vec::new();
    let mut saturated = 0;
    for _warp in 0..WARPS {
        let a: Vec<u32> = (0..M * kc).map(|_| c.a.random(&mut rng)).collect();
        let b: Vec<u32> = (0..k * N).map(|_| c.b.random(&mut rng)).collect();
        let cm: Vec<u32> = (0..M * N)
            .map(|_| match c.acc {
                SpAcc::F16 => f16_bits((rng.next_u32() % 2000) as f32 / 64.0 - 15.6),
                SpAcc::F32 => ((rng.next_u32() % 2000) as f32 / 64.0 - 15.6).to_bits(),
                SpAcc::S32 if c.sat && rng.next_u32().is_multiple_of(3) => {
                    if rng.next_u32() & 1 == 0 {
                        0x7fff_ff00 + rng.next_u32() % 256
                    } else {
                        0x8000_0000 + rng.next_u32() % 256
                    }
                }
                SpAcc::S32 => rng.next_u32() >> 8,
            })
            .collect();
        let meta = random_meta(&mut rng, c.a, M * chunks, c.ordered);
        let k_of = |row: usize, x: usize| sparse_column(&meta, c.a, chunks, row, x);
        // Lane registers.
        let mut e_reg: Vec<u32> = (0..32).map(|_| rng.next_u32()).collect();
        for row in 0..M {
            for chunk in 0..chunks {
                let (lane, bit) = sp_meta_place(c, chunks, row, chunk);
                e_reg[lane] = (e_reg[lane] & !(15 << bit)) | meta[row * chunks + chunk] << bit;
            }
        }
        for (lane, &e_lane) in e_reg.iter().enumerate() {
            let (g, t) = (lane / 4, lane % 4);
            for r in 0..a_regs {
                let mut word = 0;
                for i in 0..e {
                    let (row, col) = (g + 8 * (r & 1), t * e + 4 * e * (r >> 1) + i);
                    word |= a[row * kc + col] << (i * c.a.bits());
                }
                a_in.push(word);
            }
            for r in 0..b_regs {
                let mut word = 0;
                for i in 0..e {
                    word |= b[(t * e + 4 * e * r + i) * N + g] << (i * c.b.bits());
                }
                b_in.push(word);
            }
            let at = |j: usize| (g + 8 * (j >> 1)) * N + 2 * t + (j & 1);
            for r in 0..c_regs {
                c_in.push(match c.acc {
                    SpAcc::F16 => cm[at(2 * r)] | cm[at(2 * r + 1)] << 16,
                    _ => cm[at(r)],
                });
            }
            e_in.push(e_lane);
            // Expected D elements of this lane.
            let mut d = Vec::new();
            for j in 0..4 {
                let (row, col) = (g + 8 * (j >> 1), 2 * t + (j & 1));
                let cv = cm[row * N + col];
                let bv = |x: usize| b[k_of(row, x) * N + col];
                d.push(match c.acc {
                    SpAcc::S32 => {
                        let products = (0..kc).map(|x| c.a.value(a[row * kc + x]) as i64 * c.b.value(bv(x)) as i64);
                        int_sum(cv as i32 as i64, products, c.sat, &mut saturated)
                    }
                    SpAcc::F32 | SpAcc::F16 => {
                        let mut acc = if c.acc == SpAcc::F16 { f16_value(cv) as f32 } else { f32::from_bits(cv) };
                        for x in 0..kc {
                            let p = c.a.value(a[row * kc + x]) * c.b.value(bv(x));
                            assert_eq!(p as f32 as f64, p, "products are exact in f32");
                            acc += p as f32;
                        }
                        if c.acc == SpAcc::F16 {
                            f16_bits(acc)
                        } else {
                            acc.to_bits()
                        }
                    }
                });
            }
            match c.acc {
                SpAcc::F16 => want.extend([d[0] | d[1] << 16, d[2] | d[3] << 16]),
                _ => want.extend(d),
            }
        }
    }
    let got = launch(ctx, module, c.kernel, &[&a_in, &b_in, &c_in, &e_in], WARPS * 32 * c_regs);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let (warp, lane, r) = (i / (32 * c_regs), i / c_regs % 32, i % c_regs);
        assert_eq!(g, w, "{}: warp {warp} lane {lane} D register {r}: got {g:#x}, want {w:#x}", c.kernel);
    }
    if c.sat {
        assert!(saturated > 0, "{}: no result saturated; the test would not see .satfinite", c.kernel);
    }
}

const PTX_WGMMA: &str = include_str!("../../tests/fixtures/wgmma.ptx");

/// One `wgmma.mma_async` kernel of `tests/fixtures/wgmma.cu`.
struct WgCase {
    kernel: &'static str,
    n: usize,
    /// K of the instruction (of the dense A; the compressed A has K/2).
    k: usize,
    a: Ty,
    b: Ty,
    acc: SpAcc,
    /// `.sp` with this selector.
    sparse: Option<usize>,
    /// A in registers.
    rs: bool,
    /// `imm-trans-a`, `imm-trans-b` (MN-major A, B).
    trans: (bool, bool),
    /// `imm-scale-a · imm-scale-b` is -1.
    negate: bool,
    sat: bool,
}

/// Swizzle widths in bytes of the descriptor modes 0..=3.
const SWIZZLE: [usize; 4] = [0, 128, 64, 32];

/// A shared-memory tile of `rows` rows (M of A or N of B) and `kbytes`
/// bytes of K per row, in descriptor mode `mode`, K- or MN-major: the
/// leading and stride byte offsets, and the byte offset of unit `u`
/// (`ub` bytes: an element, or a 32-bit word of b1) of row `r`, swizzled.
/// These are the ISA's canonical layouts ("Shared Memory Matrix Layout"):
/// 8×16-byte core matrices without swizzling, `S`-byte rows of 8-row
/// groups (K-major) or of 8-K groups (MN-major) with it, address bits
/// [4, 4+b) XORed with [7, 7+b).
struct Tile {
    mode: usize,
    mn_major: bool,
    rows: usize,
    kbytes: usize,
    lbo: usize,
    sbo: usize,
}

impl Tile {
    fn new(mode: usize, mn_major: bool, rows: usize, kbytes: usize) -> Tile {
        let s = SWIZZLE[mode];
        let (lbo, sbo) = match (mn_major, s) {
            // K blocks after all the row groups.
            (false, 0) => (128 * rows.div_ceil(8), 128),
            (false, s) => (0, 8 * s),
            (true, 0) => (128 * rows.div_ceil(8), 128),
            // 8-K groups of S bytes, then MN blocks of S/2 elements... after all K groups.
            (true, s) => (8 * s * (kbytes / 16).max(1), 8 * s),
        };
        Tile { mode, mn_major, rows, kbytes, lbo, sbo }
    }

    fn desc(&self) -> u64 {
        ((self.lbo as u64 >> 4) << 16) | ((self.sbo as u64 >> 4) << 32) | ((self.mode as u64) << 62)
    }

    /// Byte offset of element (`r`, `k`) of `eb` bytes (K-major: `k` in
    /// elements; MN-major: `eb` is the element size).
    fn offset(&self, r: usize, k: usize, eb: usize) -> usize {
        let s = SWIZZLE[self.mode];
        let off = if !self.mn_major {
            let kb = k * eb;
            if s == 0 {
                (r % 8) * 16 + (r / 8) * self.sbo + kb % 16 + (kb / 16) * self.lbo
            } else {
                (r % 8) * s + (r / 8) * self.sbo + kb
            }
        } else {
            let t = 16 / eb;
            if s == 0 {
                (r % t) * eb + (r / t) * self.sbo + (k % 8) * 16 + (k / 8) * self.lbo
            } else {
                let wt = (s / 16) * t;
                (r % wt) * eb + (r / wt) * self.lbo + (k % 8) * s + (k / 8) * self.sbo
            }
        };
        let b = match s {
            128 => 3,
            64 => 2,
            32 => 1,
            _ => 0,
        };
        let mask = ((1 << b) - 1) << 4;
        let off = off ^ ((off >> 3) & mask);
        assert!(off + eb <= 8192, "tile of {} rows x {} bytes does not fit", self.rows, self.kbytes);
        off
    }
}

/// Writes `units[r][u]` (`ub` bytes each) into a 2048-word image.
fn tile_image(t: &Tile, units: &[Vec<u32>], ub: usize) -> Vec<u32> {
    let mut bytes = vec![0u8; 8192];
    for (r, row) in units.iter().enumerate() {
        for (u, &v) in row.iter().enumerate() {
            let at = t.offset(r, u, ub);
            bytes[at..at + ub].copy_from_slice(&v.to_le_bytes()[..ub]);
        }
    }
    bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// `wgmma.mma_async` (dense and `.sp`, A from a descriptor or registers)
/// of every type, on tiles in each swizzle mode, K- and MN-major: each D
/// is scale-d·C plus the products in `k` order (compressed-column order
/// with `.sp`), bit for bit.
#[test]
fn wgmma_every_type_layout_and_sparsity() {
    use SpAcc::*;
    let wg = |kernel, n, k, a, b, acc| WgCase {
        kernel,
        n,
        k,
        a,
        b,
        acc,
        sparse: None,
        rs: false,
        trans: (false, false),
        negate: false,
        sat: false,
    };
    let cases = [
        wg("wg_f16_kk", 16, 16, Ty::F16, Ty::F16, F32),
        WgCase { trans: (true, true), negate: true, ..wg("wg_f16_tt", 16, 16, Ty::F16, Ty::F16, F32) },
        WgCase { trans: (false, true), negate: true, ..wg("wg_f16_f16acc", 8, 16, Ty::F16, Ty::F16, F16) },
        WgCase { trans: (true, false), ..wg("wg_bf16_tk", 8, 16, Ty::Bf16, Ty::Bf16, F32) },
        wg("wg_tf32", 8, 8, Ty::Tf32, Ty::Tf32, F32),
        wg("wg_e4m3_e5m2", 8, 32, Ty::E4m3, Ty::E5m2, F32),
        WgCase { sat: true, ..wg("wg_s8_u8_sat", 8, 32, Ty::S8, Ty::U8, S32) },
        wg("wg_b1", 8, 256, Ty::B1, Ty::B1, S32),
        WgCase { rs: true, trans: (false, true), negate: true, ..wg("wg_f16_rs", 8, 16, Ty::F16, Ty::F16, F32) },
        WgCase { rs: true, ..wg("wg_s8_rs", 8, 32, Ty::S8, Ty::S8, S32) },
        WgCase { sparse: Some(0), ..wg("wg_sp_f16_s0", 8, 32, Ty::F16, Ty::F16, F32) },
        WgCase { sparse: Some(1), ..wg("wg_sp_bf16_s1", 8, 32, Ty::Bf16, Ty::Bf16, F32) },
        WgCase { sparse: Some(1), ..wg("wg_sp_tf32_s1", 8, 16, Ty::Tf32, Ty::Tf32, F32) },
        WgCase { sparse: Some(0), ..wg("wg_sp_e4m3_s0", 8, 64, Ty::E4m3, Ty::E4m3, F32) },
        WgCase { sparse: Some(0), ..wg("wg_sp_s8_s0", 8, 64, Ty::S8, Ty::S8, S32) },
        WgCase { sparse: Some(1), rs: true, ..wg("wg_sp_f16_rs_s1", 8, 32, Ty::F16, Ty::F16, F32) },
    ];
    let ctx = context();
    for path in [WarpPath::Native, WarpPath::Slice, WarpPath::Emulated] {
        if !ctx.info().warp_paths.contains(&path) {
            continue;
        }
        let module = ctx.load_module_with_warp_path(PTX_WGMMA, "wgmma.ptx", path).expect("translate and load");
        for (i, c) in cases.iter().enumerate() {
            // 32-byte swizzling holds 32 bytes of K: not the 64 of a sparse B.
            let modes: &[usize] = if c.sparse.is_some() { &[0, 1, 2] } else { &[0, 1, 2, 3] };
            for &mode in modes {
                for scale_d in [true, false] {
                    if !scale_d && mode != 1 {
                        continue;
                    }
                    check_wgmma(&ctx, &module, c, mode, scale_d, 900 + 10 * i as u64 + mode as u64);
                }
            }
        }
    }
    assert_clean(&ctx);
}

fn check_wgmma(ctx: &Context, module: &Module, c: &WgCase, mode: usize, scale_d: bool, seed: u64) {
    const M: usize = 64;
    let mut rng = Lcg(seed);
    let (n, k) = (c.n, c.k);
    let ka = if c.sparse.is_some() { k / 2 } else { k };
    let bits = c.a.bits();
    // Units: elements, or 32-bit words of b1.
    let (ub, per_unit) = if c.a == Ty::B1 { (4, 32) } else { (bits / 8, 1) };
    let a: Vec<Vec<u32>> = (0..M).map(|_| (0..ka / per_unit).map(|_| unit(c.a, &mut rng)).collect()).collect();
    let b: Vec<Vec<u32>> = (0..n).map(|_| (0..k / per_unit).map(|_| unit(c.b, &mut rng)).collect()).collect();
    let chunks = k / sparsity(c.a).0;
    let meta = random_meta(&mut rng, c.a, M * chunks, true);
    let k_of = |row: usize, x: usize| sparse_column(&meta, c.a, chunks, row, x);
    let ta = Tile::new(mode, c.trans.0, M, ka * bits / 8);
    let tb = Tile::new(mode, c.trans.1, n, k * bits / 8);
    // With A in registers the A tile is noise, which the product must not read.
    let img_a = if c.rs { (0..2048).map(|_| rng.next_u32()).collect() } else { tile_image(&ta, &a, ub) };
    let img_b = tile_image(&tb, &b, ub);
    let nd = n / 2;
    let regs = if c.acc == SpAcc::F16 { nd / 2 } else { nd };
    let c_elems: Vec<u32> = (0..128 * nd)
        .map(|_| match c.acc {
            SpAcc::F16 => f16_bits((rng.next_u32() % 2000) as f32 / 64.0 - 15.6),
            SpAcc::F32 => ((rng.next_u32() % 2000) as f32 / 64.0 - 15.6).to_bits(),
            SpAcc::S32 if c.sat && rng.next_u32().is_multiple_of(3) => 0x7fff_ff00 + rng.next_u32() % 256,
            SpAcc::S32 => rng.next_u32() >> 8,
        })
        .collect();
    let (mut r_in, mut e_in, mut c_in, mut want) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let e_per = 32 / bits;
    let mut saturated = 0;
    for tid in 0..128 {
        let (wp, lane) = (tid / 32, tid % 32);
        let (g, t) = (lane / 4, lane % 4);
        // A registers (the mma.m16n8k A fragment of the warp's 16 rows).
        for r in 0..4 {
            let mut word = 0u32;
            if c.a == Ty::B1 {
                word = a[16 * wp + g + 8 * (r & 1)][t + 4 * (r >> 1)];
            } else {
                for i in 0..e_per {
                    let col = t * e_per + 4 * e_per * (r >> 1) + i;
                    if col < ka {
                        word |= a[16 * wp + g + 8 * (r & 1)][col] << (i * bits);
                    }
                }
            }
            r_in.push(word);
        }
        // Metadata: the lanes' registers of mma.sp with this K, per warp.
        let mut e_reg = rng.next_u32();
        if let Some(f) = c.sparse {
            for row in 0..16 {
                for chunk in 0..chunks {
                    let (l, bit) = meta_place(c.a, f, chunks, row, chunk);
                    if l == lane {
                        e_reg = (e_reg & !(15 << bit)) | meta[(16 * wp + row) * chunks + chunk] << bit;
                    }
                }
            }
        }
        e_in.push(e_reg);
        let mut d = Vec::new();
        for i in 0..nd {
            let (row, col) = (16 * wp + g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2));
            let cv = c_elems[tid * nd + i];
            let terms: Vec<(u32, u32)> = (0..ka / per_unit)
                .map(|u| match c.sparse {
                    Some(_) => (a[row][u], b[col][k_of(row, u)]),
                    None => (a[row][u], b[col][u]),
                })
                .collect();
            d.push(match c.acc {
                SpAcc::S32 => {
                    let products = terms.into_iter().map(|(x, y)| {
                        if c.a == Ty::B1 {
                            (x & y).count_ones() as i64
                        } else {
                            c.a.value(x) as i64 * c.b.value(y) as i64
                        }
                    });
                    int_sum(if scale_d { cv as i32 as i64 } else { 0 }, products, c.sat, &mut saturated)
                }
                SpAcc::F32 | SpAcc::F16 => {
                    let c0 = if c.acc == SpAcc::F16 { f16_value(cv) as f32 } else { f32::from_bits(cv) };
                    let mut acc = if scale_d { c0 } else { 0.0 };
                    for (x, y) in terms {
                        let p = c.a.value(x) * c.b.value(y);
                        assert_eq!(p as f32 as f64, p, "products are exact in f32");
                        acc += if c.negate { -(p as f32) } else { p as f32 };
                    }
                    if c.acc == SpAcc::F16 {
                        f16_bits(acc)
                    } else {
                        acc.to_bits()
                    }
                }
            });
        }
        if c.acc == SpAcc::F16 {
            for j in 0..regs {
                c_in.push(c_elems[tid * nd + 2 * j] | c_elems[tid * nd + 2 * j + 1] << 16);
                want.push(d[2 * j] | d[2 * j + 1] << 16);
            }
        } else {
            c_in.extend(&c_elems[tid * nd..(tid + 1) * nd]);
            want.extend(d);
        }
    }
    // Launch: one warpgroup.
    let f = module.function(c.kernel).unwrap();
    let mut ptrs = Vec::new();
    for data in [&img_a, &img_b, &r_in, &e_in, &c_in] {
        let d = ctx.alloc((data.len() * 4) as u64).unwrap();
        let bytes: Vec<u8> = data.iter().flat_map(|w| w.to_le_bytes()).collect();
        ctx.copy_htod(d, &bytes).unwrap();
        ptrs.push(d);
    }
    let out_words = 128 * regs;
    let out = ctx.alloc((out_words as u64 + 16) * 4).unwrap();
    ctx.memset_d32(out, POISON, out_words as u64 + 16).unwrap();
    ptrs.push(out);
    let mut args: Vec<Vec<u8>> = ptrs.iter().map(|p| p.to_le_bytes().to_vec()).collect();
    args.push(ta.desc().to_le_bytes().to_vec());
    args.push(tb.desc().to_le_bytes().to_vec());
    args.push((scale_d as i32).to_le_bytes().to_vec());
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let params = f.pack_params(&refs).unwrap();
    ctx.launch(&f, [1, 1, 1], [128, 1, 1], 0, &params).unwrap();
    let got = common::download_u32(ctx, out, out_words + 16);
    assert!(got[out_words..].iter().all(|&x| x == POISON), "{}: wrote past the output", c.kernel);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g,
            w,
            "{} (swizzle mode {mode}, scale-d {scale_d}): thread {} D register {}: got {g:#x}, want {w:#x}",
            c.kernel,
            i / regs,
            i % regs
        );
    }
    if c.sat && scale_d {
        assert!(saturated > 0, "{}: no result saturated", c.kernel);
    }
}

/// A random unit of `ty`: an element, or for b1 a word of 32.
fn unit(ty: Ty, rng: &mut Lcg) -> u32 {
    if ty == Ty::B1 {
        rng.next_u32()
    } else {
        ty.random(rng)
    }
}
