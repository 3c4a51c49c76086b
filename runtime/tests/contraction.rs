//! Multiply-add contraction as `ptxas` does it (issue 24, `docs/contraction.md`):
//! nvcc kernels built with the default `--fmad=true`, whose PTX keeps
//! `mul` + `add`/`sub` pairs without rounding modifiers, give the results of
//! an NVIDIA GPU, where `ptxas` fuses those pairs. Expected values follow the
//! PTX with the fused pairs evaluated with one rounding (`mul_add`, which is
//! correctly rounded); inputs are random (fixed seeds) and outputs poisoned.

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload, Lcg, POISON};

const N: usize = 4096;
const PTX: &str = include_str!("../../tests/fixtures/contraction.ptx");

/// A random f64 with a full 53-bit significand, sign and scale from `lo`..`hi`
/// (powers of two).
fn rand_f64(rng: &mut Lcg, lo: i32, hi: i32) -> f64 {
    let m = (u64::from(rng.next_u32()) << 21 | u64::from(rng.next_u32() >> 11)) | 1 << 52;
    let e = lo + (rng.next_u32() % (hi - lo + 1) as u32) as i32;
    let v = m as f64 * 2f64.powi(e - 52);
    if rng.next_u32() & 1 == 1 {
        -v
    } else {
        v
    }
}

fn rand_f32(rng: &mut Lcg, lo: i32, hi: i32) -> f32 {
    let m = (rng.next_u32() >> 9) | 1 << 23;
    let e = lo + (rng.next_u32() % (hi - lo + 1) as u32) as i32;
    let v = m as f32 * 2f32.powi(e - 23);
    if rng.next_u32() & 1 == 1 {
        -v
    } else {
        v
    }
}

fn bytes64(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs `kernel` over `N` elements with the given input buffers and returns
/// `out_words` words of output.
fn run(ctx: &ptxvk_runtime::Context, kernel: &str, inputs: &[Vec<u8>], out_words: usize) -> Vec<u32> {
    let m = ctx.load_module(PTX, "contraction.ptx").unwrap();
    let f = m.function(kernel).unwrap();
    let ins: Vec<u64> = inputs.iter().map(|b| upload(ctx, b)).collect();
    let out = poisoned(ctx, out_words + 16);
    let mut args: Vec<Vec<u8>> = ins.iter().map(|d| d.to_le_bytes().to_vec()).collect();
    args.push(out.to_le_bytes().to_vec());
    args.push((N as i32).to_le_bytes().to_vec());
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let params = f.pack_params(&refs).unwrap();
    ctx.launch(&f, [(N as u32).div_ceil(128), 1, 1], [128, 1, 1], 0, &params).unwrap();
    let got = download_u32(ctx, out, out_words + 16);
    assert!(got[out_words..].iter().all(|&w| w == POISON), "{kernel}: wrote past the output");
    got[..out_words].to_vec()
}

/// Compares bit for bit; `separate` is the result with every operation
/// rounded on its own, which must differ somewhere (else the test could not
/// tell contraction from its absence).
fn check<T: Copy + std::fmt::Debug + PartialEq>(what: &str, got: &[T], fused: &[T], separate: &[T]) {
    let wrong: Vec<(usize, T, T)> =
        (0..fused.len()).filter(|&i| got[i] != fused[i]).map(|i| (i, got[i], fused[i])).take(5).collect();
    assert!(wrong.is_empty(), "{what}: (index, got, expected) {wrong:?}");
    let differ = (0..fused.len()).filter(|&i| fused[i] != separate[i]).count();
    assert!(differ > fused.len() / 20, "{what}: only {differ} results depend on contraction");
}

fn f64s(words: &[u32]) -> Vec<u64> {
    words.chunks_exact(2).map(|w| u64::from(w[0]) | u64::from(w[1]) << 32).collect()
}

#[test]
fn cupy_remainder_fuses_the_product_into_the_subtraction() {
    let ctx = context();
    let mut rng = Lcg(24);
    let a: Vec<f64> = (0..N).map(|_| rand_f64(&mut rng, -4, 10)).collect();
    let b: Vec<f64> = (0..N).map(|_| rand_f64(&mut rng, -3, 3)).collect();
    let got = f64s(&run(&ctx, "remainder_f64", &[bytes64(&a), bytes64(&b)], 2 * N));
    // div.rn; cvt.rmi; mul.f64 y*q; sub.f64 x - (y*q): one fma(-y, q, x).
    let fused: Vec<u64> = (0..N).map(|i| (-b[i]).mul_add((a[i] / b[i]).floor(), a[i]).to_bits()).collect();
    let separate: Vec<u64> = (0..N).map(|i| (a[i] - (a[i] / b[i]).floor() * b[i]).to_bits()).collect();
    check("remainder_f64", &got, &fused, &separate);
    // The case: remainder(255.6, 1.2) is 3.77e-15 on NVIDIA (and in numpy), not 0.
    let got = f64s(&run(&ctx, "remainder_f64", &[bytes64(&[255.6; N]), bytes64(&[1.2; N])], 2 * N));
    assert_eq!(f64::from_bits(got[0]), (-1.2f64).mul_add((255.6f64 / 1.2).floor(), 255.6));
    assert!(f64::from_bits(got[0]) > 3.7e-15 && f64::from_bits(got[0]) < 3.8e-15, "{}", f64::from_bits(got[0]));
    assert_clean(&ctx);
}

#[test]
fn det2_and_complex_product_fuse_the_first_product() {
    let ctx = context();
    let mut rng = Lcg(2424);
    let m: Vec<f32> = (0..4 * N).map(|_| rand_f32(&mut rng, -6, 6)).collect();
    let got: Vec<u32> = run(&ctx, "det2_f32", &[bytes32(&m)], N);
    // Two single-use products: ptxas fuses the first operand's.
    let fused: Vec<u32> =
        (0..N).map(|i| m[4 * i].mul_add(m[4 * i + 3], -(m[4 * i + 1] * m[4 * i + 2])).to_bits()).collect();
    let separate: Vec<u32> =
        (0..N).map(|i| (m[4 * i] * m[4 * i + 3] - m[4 * i + 1] * m[4 * i + 2]).to_bits()).collect();
    check("det2_f32", &got, &fused, &separate);

    let p: Vec<f32> = (0..2 * N).map(|_| rand_f32(&mut rng, -6, 6)).collect();
    let q: Vec<f32> = (0..2 * N).map(|_| rand_f32(&mut rng, -6, 6)).collect();
    let got = run(&ctx, "cmul_f32", &[bytes32(&p), bytes32(&q)], 2 * N);
    let (mut fused, mut separate) = (Vec::new(), Vec::new());
    for i in 0..N {
        let (px, py, qx, qy) = (p[2 * i], p[2 * i + 1], q[2 * i], q[2 * i + 1]);
        // Real part: ptxas fuses px*qx; imaginary part: NVVM's own fma.rn.
        fused.extend([px.mul_add(qx, -(py * qy)).to_bits(), px.mul_add(qy, py * qx).to_bits()]);
        separate.extend([(px * qx - py * qy).to_bits(), px.mul_add(qy, py * qx).to_bits()]);
    }
    check("cmul_f32", &got, &fused, &separate);
    assert_clean(&ctx);
}

#[test]
fn nvvm_contracted_horner_and_dot_product_stay_exact() {
    let ctx = context();
    let mut rng = Lcg(240);
    let x: Vec<f64> = (0..N).map(|_| rand_f64(&mut rng, -3, 3)).collect();
    let got = f64s(&run(&ctx, "horner_f64", &[bytes64(&x)], 2 * N));
    let want: Vec<u64> = x
        .iter()
        .map(|&x| {
            let r = x.mul_add(0.0083, -0.166);
            let r = x.mul_add(r, 0.5);
            let r = x.mul_add(r, -1.0);
            let r = x.mul_add(r, 3.0);
            x.mul_add(r, -0.25).to_bits()
        })
        .collect();
    let wrong = (0..N).filter(|&i| got[i] != want[i]).count();
    assert_eq!(wrong, 0, "horner_f64: {wrong} wrong");

    let p: Vec<f32> = (0..4 * N).map(|_| rand_f32(&mut rng, -6, 6)).collect();
    let q: Vec<f32> = (0..4 * N).map(|_| rand_f32(&mut rng, -6, 6)).collect();
    let got = run(&ctx, "dot4_f32", &[bytes32(&p), bytes32(&q)], N);
    let want: Vec<u32> = (0..N)
        .map(|i| {
            let (a, b) = (&p[4 * i..4 * i + 4], &q[4 * i..4 * i + 4]);
            a[3].mul_add(b[3], a[2].mul_add(b[2], a[0].mul_add(b[0], a[1] * b[1]))).to_bits()
        })
        .collect();
    let wrong = (0..N).filter(|&i| got[i] != want[i]).count();
    assert_eq!(wrong, 0, "dot4_f32: {wrong} wrong");
    assert_clean(&ctx);
}
