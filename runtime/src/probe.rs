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
    let module = ctx.load_module(PROBE_PTX, "fma-probe.ptx", false, ctx.info().warp_path)?;
    let f = module.function("probe").ok_or_else(|| crate::Error::NotFound("probe entry".into()))?;
    let out = ctx.alloc(4)?;
    let result = (|| {
        let params = f.pack_params(&[&out.to_le_bytes(), &A_BITS.to_le_bytes(), &C.to_le_bytes()])?;
        ctx.launch(&f, [1, 1, 1], [1, 1, 1], 0, &params, false)?;
        let mut bytes = [0u8; 4];
        ctx.copy_dtoh(&mut bytes, out)?;
        Ok(u32::from_le_bytes(bytes))
    })();
    ctx.free(out)?;
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
        let module = ctx.load_module(SUBNORMAL_PTX, "subnormal-probe.ptx", false, ctx.info().warp_path)?;
        let f = module.function("probe").ok_or_else(|| crate::Error::NotFound("probe entry".into()))?;
        let out = ctx.alloc(24)?;
        let result = (|| {
            let (a, b, c, d) = (2f64.powi(-1000), 2f64.powi(-50), 2f32.powi(-100), 2f32.powi(-30));
            let params = f.pack_params(&[
                &out.to_le_bytes(),
                &a.to_le_bytes(),
                &b.to_le_bytes(),
                &c.to_le_bytes(),
                &d.to_le_bytes(),
            ])?;
            ctx.launch(&f, [1, 1, 1], [1, 1, 1], 0, &params, false)?;
            let mut bytes = [0u8; 24];
            ctx.copy_dtoh(&mut bytes, out)?;
            let w = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or_default());
            let h = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap_or_default());
            Ok(([w(0), w(8)], [h(16), h(20)]))
        })();
        ctx.free(out)?;
        result
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

#[cfg(test)]
mod tests {
    #[test]
    fn fused_result_is_exact() {
        let expected = 2f32.powi(-11) + 2f32.powi(-24);
        assert_eq!(super::fused_result(), expected);
        assert_eq!(super::fused_result().to_bits(), 0x3A00_0400);
        assert_eq!(2f32.powi(-11).to_bits(), 0x3A00_0000);
    }
}
