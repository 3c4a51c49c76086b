//! The fused-multiply-add probe run at context creation.
//!
//! Vulkan lets `Fma` be a multiply followed by an add; PTX `fma.rn` is always
//! fused. A one-thread kernel computes `fma(a, a, c)` with `a = 1 + 2^-12`,
//! `c = -1`: fused gives `2^-11 + 2^-24`, unfused `2^-11`. Modules loaded on a
//! device whose `Fma` does not fuse are translated with an exact emulation.

use crate::context::ContextInner;
use crate::error::Result;

const PROBE_PTX: &str = ".version 7.0\n.target sm_80\n.address_size 64\n\
.visible .entry probe(.param .u64 out, .param .f32 a, .param .f32 c)\n{\n\
\t.reg .b64 %rd<2>;\n\t.reg .f32 %f<4>;\n\
\tld.param.u64 %rd1, [out];\n\tld.param.f32 %f1, [a];\n\tld.param.f32 %f2, [c];\n\
\tfma.rn.f32 %f3, %f1, %f1, %f2;\n\tst.global.f32 [%rd1], %f3;\n\tret;\n}\n";

/// `a = 1 + 2^-12`.
const A_BITS: u32 = 0x3F80_0800;
/// `c = -1`.
const C: f32 = -1.0;

/// The correctly rounded `fma(a, a, c)`: the exact product fits an f64, so
/// one rounding to f32 at the end is exact.
pub(crate) fn fused_result() -> f32 {
    let a = f32::from_bits(A_BITS) as f64;
    (a * a + C as f64) as f32
}

/// Whether modules must emulate `fma` on this device. Any failure (the
/// translator cannot handle the probe yet, a Vulkan error) answers `true`,
/// which is always correct, only slower.
pub(crate) fn needs_fma_emulation(ctx: &ContextInner) -> bool {
    match run_probe(ctx) {
        Ok(bits) => {
            let fused = bits == fused_result().to_bits();
            log::info!(
                "ptxvk: fma probe on {} gave {bits:#010x}: {}",
                ctx.info().name,
                if fused { "fused, no emulation" } else { "not fused, emulating fma" }
            );
            !fused
        }
        Err(e) => {
            log::info!("ptxvk: fma probe failed ({e}); emulating fma");
            true
        }
    }
}

fn run_probe(ctx: &ContextInner) -> Result<u32> {
    let bytes = run_kernel(ctx, PROBE_PTX, "fma-probe.ptx", 1, &[], 4, &|out, _| {
        vec![out.to_le_bytes().to_vec(), A_BITS.to_le_bytes().to_vec(), C.to_le_bytes().to_vec()]
    })?;
    Ok(u32::from_le_bytes(bytes[..4].try_into().unwrap_or_default()))
}

/// Runs entry `probe` of `ptx` over `threads` threads (blocks of up to 64)
/// with an output buffer of `out_bytes` and, unless `input` is empty, an
/// input buffer holding it; `params(out, in)` gives the kernel's
/// parameters. Returns the output; the buffers are freed either way.
fn run_kernel(
    ctx: &ContextInner,
    ptx: &str,
    file_name: &str,
    threads: u32,
    input: &[u8],
    out_bytes: usize,
    params: &dyn Fn(u64, u64) -> Vec<Vec<u8>>,
) -> Result<Vec<u8>> {
    let module = ctx.load_module(ptx, file_name, false, ctx.info().warp_path)?;
    let f = module.function("probe").ok_or_else(|| crate::Error::NotFound("probe entry".into()))?;
    let src = if input.is_empty() { 0 } else { ctx.alloc(input.len() as u64)? };
    let out = match ctx.alloc(out_bytes as u64) {
        Ok(out) => out,
        Err(e) => {
            if src != 0 {
                ctx.free(src)?;
            }
            return Err(e);
        }
    };
    let result = (|| {
        if src != 0 {
            ctx.copy_htod(src, input)?;
        }
        let values = params(out, src);
        let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
        let packed = f.pack_params(&refs)?;
        let block = threads.clamp(1, 64);
        ctx.launch(&f, [threads.div_ceil(block), 1, 1], [block, 1, 1], 0, &packed, false)?;
        let mut bytes = vec![0u8; out_bytes];
        ctx.copy_dtoh(&mut bytes, out)?;
        Ok(bytes)
    })();
    ctx.free(out)?;
    if src != 0 {
        ctx.free(src)?;
    }
    result
}

const SUBNORMAL_PTX: &str = ".version 7.0\n.target sm_80\n.address_size 64\n\
.visible .entry probe(.param .u64 out, .param .f64 a, .param .f64 b, .param .f32 c, .param .f32 d)\n{\n\
\t.reg .b64 %rd<2>;\n\t.reg .f64 %fd<5>;\n\t.reg .f32 %f<5>;\n\
\tld.param.u64 %rd1, [out];\n\tld.param.f64 %fd1, [a];\n\tld.param.f64 %fd2, [b];\n\
\tld.param.f32 %f1, [c];\n\tld.param.f32 %f2, [d];\n\
\tmul.rn.f64 %fd3, %fd1, %fd2;\n\tadd.rn.f64 %fd4, %fd3, %fd3;\n\
\tmul.rn.f32 %f3, %f1, %f2;\n\tadd.rn.f32 %f4, %f3, %f3;\n\
\tst.global.f64 [%rd1], %fd3;\n\tst.global.f64 [%rd1+8], %fd4;\n\
\tst.global.f32 [%rd1+16], %f3;\n\tst.global.f32 [%rd1+20], %f4;\n\tret;\n}\n";

/// Whether subnormal f32 and f64 results survive `mul` and `add` on this
/// device as modules are compiled for it (with `DenormPreserve` where the
/// device offers it): `(f32, f64)`. PTX keeps both (without `.ftz`); a
/// device that flushes is logged. A failed probe answers `(true, true)`.
pub(crate) fn keeps_subnormals(ctx: &ContextInner) -> (bool, bool) {
    // 2^-1050, 2^-1049 and 2^-130, 2^-129 (powi would overflow on the way).
    let want64 = [1u64 << 24, 1 << 25];
    let want32 = [1u32 << 19, 1 << 20];
    let run = || -> Result<([u64; 2], [u32; 2])> {
        let (a, b, c, d) = (2f64.powi(-1000), 2f64.powi(-50), 2f32.powi(-100), 2f32.powi(-30));
        let bytes = run_kernel(ctx, SUBNORMAL_PTX, "subnormal-probe.ptx", 1, &[], 24, &|out, _| {
            vec![
                out.to_le_bytes().to_vec(),
                a.to_le_bytes().to_vec(),
                b.to_le_bytes().to_vec(),
                c.to_le_bytes().to_vec(),
                d.to_le_bytes().to_vec(),
            ]
        })?;
        let w = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or_default());
        let h = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap_or_default());
        Ok(([w(0), w(8)], [h(16), h(20)]))
    };
    match run() {
        Ok((g64, g32)) => {
            let (k32, k64) = (g32 == want32, g64 == want64);
            if k32 && k64 {
                log::info!("ptxvk: subnormal probe on {}: f32 and f64 subnormals kept", ctx.info().name);
            } else {
                log::warn!(
                    "ptxvk: {} flushes subnormal results (f32 kept: {k32}, f64 kept: {k64}; got {g32:#x?} {g64:#x?}); \
                     PTX results that are subnormal will differ",
                    ctx.info().name
                );
            }
            (k32, k64)
        }
        Err(e) => {
            log::info!("ptxvk: subnormal probe failed ({e})");
            (true, true)
        }
    }
}

const DIV_SQRT_PTX: &str = ".version 7.0\n.target sm_80\n.address_size 64\n\
.visible .entry probe(.param .u64 out, .param .u64 in, .param .u32 n)\n{\n\
\t.reg .pred %p<2>;\n\t.reg .b32 %r<5>;\n\t.reg .b64 %rd<7>;\n\t.reg .f64 %fd<8>;\n\
\tld.param.u64 %rd1, [out];\n\tld.param.u64 %rd2, [in];\n\tld.param.u32 %r1, [n];\n\
\tmov.u32 %r2, %tid.x;\n\tmov.u32 %r3, %ctaid.x;\n\tmov.u32 %r4, %ntid.x;\n\
\tmad.lo.s32 %r2, %r3, %r4, %r2;\n\tsetp.ge.u32 %p1, %r2, %r1;\n\t@%p1 bra $DONE;\n\
\tmul.wide.u32 %rd3, %r2, 16;\n\tadd.s64 %rd4, %rd2, %rd3;\n\
\tld.global.f64 %fd1, [%rd4];\n\tld.global.f64 %fd2, [%rd4+8];\n\
\tdiv.rn.f64 %fd3, %fd1, %fd2;\n\tsqrt.rn.f64 %fd4, %fd1;\n\trcp.rn.f64 %fd5, %fd2;\n\
\tabs.f64 %fd6, %fd1;\n\tsqrt.rn.f64 %fd7, %fd6;\n\
\tmul.wide.u32 %rd5, %r2, 32;\n\tadd.s64 %rd6, %rd1, %rd5;\n\
\tst.global.f64 [%rd6], %fd3;\n\tst.global.f64 [%rd6+8], %fd4;\n\
\tst.global.f64 [%rd6+16], %fd5;\n\tst.global.f64 [%rd6+24], %fd7;\n\
$DONE:\n\tret;\n}\n";

/// Results per case of the division probe.
const DIV_SQRT_RESULTS: usize = 4;

/// The operand pairs of the division probe: every pair of a list of
/// special and boundary values, random bit patterns over the whole range,
/// random operands near 1 (where a quotient from a reciprocal, or a
/// square root from an inverse square root, is wrong in about a third of
/// the cases), subnormal quotients, exact quotients and exact square roots
/// with full-width results (which an almost-right method misses).
pub(crate) fn div_sqrt_cases() -> Vec<(f64, f64)> {
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        3.0,
        7.0,
        10.0,
        0.1,
        -1.0 / 3.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        f64::MIN_POSITIVE * 1.5,
        f64::from_bits(1),
        f64::from_bits(0x000f_ffff_ffff_ffff),
        f64::MAX,
        1e-300,
        1e300,
    ];
    let mut cases: Vec<(f64, f64)> = specials.iter().flat_map(|&a| specials.iter().map(move |&b| (a, b))).collect();
    // xorshift64*, fixed seed.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    for _ in 0..1024 {
        cases.push((f64::from_bits(next()), f64::from_bits(next())));
    }
    // Mantissa random, exponent near 0: [1, 2) scaled by 2^-4 .. 2^4.
    let near = |bits: u64, e: i32| f64::from_bits(0x3FF0_0000_0000_0000 | (bits >> 12)) * 2f64.powi(e);
    for i in 0..4096 {
        let (x, y) = (next(), next());
        cases.push((near(x, i % 9 - 4), near(y, (i / 9) % 9 - 4)));
    }
    // Subnormal quotients: 2^-1000 .. over 2^20 .. 2^60.
    for i in 0..256 {
        let (x, y) = (next(), next());
        cases.push((near(x, -1000 + i % 8), near(y, 20 + i % 40)));
    }
    // Exact quotients and square roots: an odd 45-bit integer times an
    // odd 7-bit one (up to 52 bits, exact) over the 7-bit one, and squares
    // of odd 26-bit integers, scaled by even powers of two.
    for i in 0..512 {
        let k = (next() >> 19) | 1 | 1 << 44;
        let m = (next() >> 57) | 1 | 1 << 6;
        let r = (next() >> 38) | 1 | 1 << 25;
        let e = 2 * (i % 41 - 20);
        let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
        let b = m as f64 * 2f64.powi(-e / 2);
        cases.push((sign * (k * m) as f64 * 2f64.powi(e / 2), b));
        cases.push(((r * r) as f64 * 2f64.powi(e), b));
    }
    // Quotients within 2^-105 of a midpoint between two doubles (the hard
    // cases of rounding): for an odd 53-bit `b` and `a = ±2^-54 mod b`
    // (with `2a > b`), `a * 2^54 = (2q + 1) * b ± 1`, so `a / b` is the
    // midpoint `(2q + 1) / 2^54` plus or minus `1 / (b * 2^54)`.
    for e in near_midpoint_divisions(&mut next, 256) {
        cases.push(e);
    }
    cases
}

/// `n` operand pairs whose quotients lie within 2^-105 (relative) of a
/// midpoint between two doubles (see [`div_sqrt_cases`]), scaled by powers
/// of two and signed.
pub(crate) fn near_midpoint_divisions(next: &mut dyn FnMut() -> u64, n: usize) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    while out.len() < n {
        let b = (next() >> 11) | 1 | 1 << 52;
        // 2^-54 mod b: (b + 1) / 2 is the inverse of 2.
        let half = (b as u128).div_ceil(2);
        let inv = (0..54).fold(1u128, |x, _| x * half % b as u128) as u64;
        for a in [inv, b - inv] {
            if 2 * a <= b || out.len() == n {
                continue;
            }
            let k = out.len() as i32;
            let scale = 2f64.powi(k % 40 - 20);
            let sign = if k % 4 < 2 { 1.0 } else { -1.0 };
            out.push((sign * a as f64 * scale, b as f64 / scale));
        }
    }
    out
}

/// What IEEE 754 gives for a case: `a / b`, `sqrt(a)`, `1 / b`, `sqrt(|a|)`.
pub(crate) fn div_sqrt_want(a: f64, b: f64) -> [f64; DIV_SQRT_RESULTS] {
    [a / b, a.sqrt(), 1.0 / b, a.abs().sqrt()]
}

/// Whether the driver's f64 division and square root are correctly
/// rounded on [`div_sqrt_cases`] (bit for bit; any NaN matches any NaN).
/// Called with [`DeviceInfo::correct_f64_div_sqrt`](crate::DeviceInfo)
/// set, so that the probe's module uses the driver's operations. Any
/// failure answers `false` (the exact correction, always right).
pub(crate) fn correct_f64_div_sqrt(ctx: &ContextInner) -> bool {
    let cases = div_sqrt_cases();
    let run = || -> Result<Vec<f64>> {
        let n = cases.len() as u32;
        let input: Vec<u8> = cases.iter().flat_map(|(a, b)| [a.to_le_bytes(), b.to_le_bytes()]).flatten().collect();
        let bytes = run_kernel(
            ctx,
            DIV_SQRT_PTX,
            "f64-div-probe.ptx",
            n,
            &input,
            8 * DIV_SQRT_RESULTS * cases.len(),
            &|out, src| vec![out.to_le_bytes().to_vec(), src.to_le_bytes().to_vec(), n.to_le_bytes().to_vec()],
        )?;
        Ok(bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default())).collect())
    };
    match run() {
        Ok(got) => {
            let wrong = cases
                .iter()
                .zip(got.chunks_exact(DIV_SQRT_RESULTS))
                .filter(|((a, b), g)| {
                    let want = div_sqrt_want(*a, *b);
                    want.iter().zip(g.iter()).any(|(w, g)| w.to_bits() != g.to_bits() && !(w.is_nan() && g.is_nan()))
                })
                .count();
            log::info!(
                "ptxvk: f64 division probe on {}: {wrong} of {} cases not correctly rounded: {}",
                ctx.info().name,
                cases.len(),
                if wrong == 0 { "the driver's division and square root" } else { "exact correction" }
            );
            wrong == 0 && got.len() == cases.len() * DIV_SQRT_RESULTS
        }
        Err(e) => {
            log::info!("ptxvk: f64 division probe failed ({e}); exact correction");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    /// The division probe's cases tell a correctly rounded division and
    /// square root from the usual shortcuts: a quotient from a rounded
    /// reciprocal, a root from a rounded inverse root, results flushed to
    /// zero.
    #[test]
    fn division_cases_catch_shortcuts() {
        let cases = super::div_sqrt_cases();
        let differs = |w: f64, g: f64| w.to_bits() != g.to_bits() && !(w.is_nan() && g.is_nan());
        let by_reciprocal = cases.iter().filter(|(a, b)| differs(a / b, a * (1.0 / b))).count();
        assert!(by_reciprocal > cases.len() / 10, "{by_reciprocal} of {}", cases.len());
        let by_inverse_root =
            cases.iter().map(|(a, _)| a.abs()).filter(|a| differs(a.sqrt(), a * (1.0 / a.sqrt()))).count();
        assert!(by_inverse_root > cases.len() / 10, "{by_inverse_root} of {}", cases.len());
        let subnormal =
            cases.iter().filter(|(a, b)| super::div_sqrt_want(*a, *b).iter().any(|r| r.is_subnormal())).count();
        assert!(subnormal > 200, "{subnormal} cases with a subnormal result");
        // Exact results with 26 significant bits or more.
        let full = |x: f64| x.is_finite() && x != 0.0 && (x.to_bits() << 12).trailing_zeros() < 28;
        let exact_quotients = cases.iter().filter(|(a, b)| full(a / b) && (a / b) * b == *a).count();
        assert!(exact_quotients > 400, "{exact_quotients} exact quotients");
        let exact_roots = cases.iter().filter(|(a, _)| full(a.sqrt()) && a.sqrt() * a.sqrt() == *a).count();
        assert!(exact_roots > 400, "{exact_roots} exact square roots");
        // The near-midpoint quotients are what they claim (a * 2^54 is an
        // odd multiple of b plus or minus one, scales aside), and a
        // correction with a rounded residual (Markstein's step without a
        // fused multiply-add) gets half of them wrong.
        let mut state = 7u64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            state
        };
        let near = super::near_midpoint_divisions(&mut next, 256);
        let mut unfused_wrong = 0;
        for &(a, b) in &near {
            let scale = 2f64.powi(b.log2().floor() as i32 - 52);
            let (ai, bi) = ((a.abs() * scale) as u128, (b / scale) as u128);
            let m = (ai << 54) % bi;
            assert!(m == 1 || m == bi - 1, "{a} / {b}: not near a midpoint");
            let q0 = a * (1.0 / b);
            let r = a - q0 * b;
            if differs(a / b, q0 + r * (1.0 / b)) {
                unfused_wrong += 1;
            }
        }
        assert!(unfused_wrong > near.len() / 4, "{unfused_wrong} of {}", near.len());
    }

    #[test]
    fn fused_result_is_exact() {
        let expected = 2f32.powi(-11) + 2f32.powi(-24);
        assert_eq!(super::fused_result(), expected);
        assert_eq!(super::fused_result().to_bits(), 0x3A00_0400);
        assert_eq!(2f32.powi(-11).to_bits(), 0x3A00_0000);
    }
}
