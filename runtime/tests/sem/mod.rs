//! Instruction-semantics test harness: one-thread-per-element kernels built
//! from a PTX body, run on the default device (lavapipe in CI), compared
//! bit for bit with a reference written in Rust.
//!
//! A kernel has up to four inputs `in0..in3` and up to two outputs
//! `out0..out1`, each a register of a declared PTX type loaded from (stored
//! to) its own buffer at the thread's element index. The body is plain PTX
//! that reads the inputs and writes the outputs; it may declare its own
//! registers inside `{ }`.
#![allow(dead_code)]

use ptxvk_runtime::{Context, DeviceSelector};
use std::sync::OnceLock;

/// A tiny deterministic generator (64-bit LCG, Knuth's constants).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next_u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 32) as u32
    }
    pub fn next_u64(&mut self) -> u64 {
        ((self.next_u32() as u64) << 32) | self.next_u32() as u64
    }
    /// A value biased toward interesting bit patterns: mostly random, some
    /// small, some near the top, some with few bits.
    pub fn wild64(&mut self) -> u64 {
        match self.next_u32() % 8 {
            0 => self.next_u32() as u64 % 70,
            1 => u64::MAX - self.next_u32() as u64 % 70,
            2 => 1u64 << (self.next_u32() % 64),
            3 => (self.next_u32() as i32 as i64) as u64,
            _ => self.next_u64(),
        }
    }
}

/// A PTX register type of an input or output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum T {
    B16,
    B32,
    B64,
    F32,
    F64,
}

impl T {
    fn name(self) -> &'static str {
        match self {
            T::B16 => "b16",
            T::B32 => "b32",
            T::B64 => "b64",
            T::F32 => "f32",
            T::F64 => "f64",
        }
    }
    pub fn bytes(self) -> usize {
        match self {
            T::B16 => 2,
            T::B32 | T::F32 => 4,
            T::B64 | T::F64 => 8,
        }
    }
}

/// PTX source of a kernel `k(in0.., out0.., n)` running `body` per element.
pub fn kernel_source(ins: &[T], outs: &[T], body: &str) -> String {
    let mut params = Vec::new();
    for i in 0..ins.len() {
        params.push(format!(".param .u64 pin{i}"));
    }
    for i in 0..outs.len() {
        params.push(format!(".param .u64 pout{i}"));
    }
    params.push(".param .u32 pn".into());
    let mut s = String::new();
    s.push_str(".version 8.0\n.target sm_90\n.address_size 64\n");
    s.push_str(&format!(".visible .entry k({})\n{{\n", params.join(", ")));
    s.push_str("  .reg .pred %pg;\n  .reg .b32 %gi<5>;\n  .reg .b64 %ga<3>;\n");
    for (i, t) in ins.iter().enumerate() {
        s.push_str(&format!("  .reg .{} in{i};\n", t.name()));
    }
    for (i, t) in outs.iter().enumerate() {
        s.push_str(&format!("  .reg .{} out{i};\n", t.name()));
    }
    s.push_str(
        "  mov.u32 %gi0, %ctaid.x;\n  mov.u32 %gi1, %ntid.x;\n  mov.u32 %gi2, %tid.x;\n\
         mad.lo.u32 %gi3, %gi0, %gi1, %gi2;\n  ld.param.u32 %gi4, [pn];\n\
         setp.ge.u32 %pg, %gi3, %gi4;\n  @%pg bra DONE;\n",
    );
    for (i, t) in ins.iter().enumerate() {
        s.push_str(&format!(
            "  ld.param.u64 %ga0, [pin{i}];\n  mul.wide.u32 %ga1, %gi3, {};\n  add.s64 %ga2, %ga0, %ga1;\n  ld.global.{} in{i}, [%ga2];\n",
            t.bytes(),
            t.name()
        ));
    }
    s.push_str(body);
    s.push('\n');
    for (i, t) in outs.iter().enumerate() {
        s.push_str(&format!(
            "  ld.param.u64 %ga0, [pout{i}];\n  mul.wide.u32 %ga1, %gi3, {};\n  add.s64 %ga2, %ga0, %ga1;\n  st.global.{} [%ga2], out{i};\n",
            t.bytes(),
            t.name()
        ));
    }
    s.push_str("DONE:\n  ret;\n}\n");
    s
}

pub fn ctx() -> &'static Context {
    static CTX: OnceLock<Context> = OnceLock::new();
    CTX.get_or_init(|| {
        const LVP: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";
        if std::env::var_os("VK_ICD_FILENAMES").is_none()
            && std::env::var_os("PTXVK_DEVICE").is_none()
            && std::path::Path::new(LVP).exists()
        {
            std::env::set_var("VK_ICD_FILENAMES", LVP);
        }
        Context::new(DeviceSelector::Default).expect("create context")
    })
}

/// Run `spirv-val` on the translation of `ptx` (when the tool is installed).
pub fn validate(ptx: &str) {
    let Ok(path) = which("spirv-val") else { return };
    let t = ptxvk_translator::translate(ptx, "test.ptx", &ctx().translate_options())
        .unwrap_or_else(|d| panic!("translation failed:\n{d}\n{ptx}"));
    let bytes: Vec<u8> = t.spirv.iter().flat_map(|w| w.to_le_bytes()).collect();
    let dir = std::env::temp_dir();
    let f = dir.join(format!("ptxvk-sem-{}-{:x}.spv", std::process::id(), hash(ptx)));
    std::fs::write(&f, bytes).expect("write spv");
    let env = match ctx().translate_options().target_env {
        ptxvk_translator::TargetEnv::Vulkan1_2 => "vulkan1.2",
        ptxvk_translator::TargetEnv::Vulkan1_3 => "vulkan1.3",
    };
    let out = std::process::Command::new(path).args(["--target-env", env]).arg(&f).output().expect("run spirv-val");
    let _ = std::fs::remove_file(&f);
    assert!(out.status.success(), "spirv-val failed: {}\n{ptx}", String::from_utf8_lossy(&out.stderr));
}

fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

fn which(tool: &str) -> Result<std::path::PathBuf, ()> {
    let paths = std::env::var_os("PATH").ok_or(())?;
    std::env::split_paths(&paths).map(|p| p.join(tool)).find(|p| p.exists()).ok_or(())
}

/// Input values as raw little-endian bytes of type `t` (values truncated to the type's width).
fn pack(t: T, vals: &[u64]) -> Vec<u8> {
    vals.iter().flat_map(|v| v.to_le_bytes()[..t.bytes()].to_vec()).collect()
}

/// Run `body` on every element: `ins[i][j]` is input `i` of element `j`
/// (raw bits); returns each output's raw bits per element.
pub fn run(ins: &[(T, Vec<u64>)], outs: &[T], body: &str) -> Vec<Vec<u64>> {
    let in_types: Vec<T> = ins.iter().map(|(t, _)| *t).collect();
    let src = kernel_source(&in_types, outs, body);
    validate(&src);
    let n = ins.first().map(|(_, v)| v.len()).unwrap_or(0);
    let ctx = ctx();
    let m = ctx.load_module(&src, "sem.ptx").unwrap_or_else(|e| panic!("load failed: {e}\n{src}"));
    let f = m.function("k").expect("entry k");
    let mut bufs = Vec::new();
    for (t, v) in ins {
        assert_eq!(v.len(), n);
        let bytes = pack(*t, v);
        let d = ctx.alloc(bytes.len().max(8) as u64).unwrap();
        ctx.copy_htod(d, &bytes).unwrap();
        bufs.push(d);
    }
    let mut obufs = Vec::new();
    for t in outs {
        let d = ctx.alloc((n * t.bytes()).max(8) as u64).unwrap();
        ctx.memset_d8(d, 0xab, (n * t.bytes()) as u64).unwrap();
        obufs.push(d);
    }
    let mut args: Vec<Vec<u8>> = bufs.iter().chain(&obufs).map(|d| d.to_le_bytes().to_vec()).collect();
    args.push((n as u32).to_le_bytes().to_vec());
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let params = f.pack_params(&refs).unwrap();
    ctx.launch(&f, [n.div_ceil(128) as u32, 1, 1], [128, 1, 1], 0, &params).unwrap();
    ctx.synchronize().unwrap();
    let mut res = Vec::new();
    for (t, d) in outs.iter().zip(&obufs) {
        let mut bytes = vec![0u8; n * t.bytes()];
        ctx.copy_dtoh(&mut bytes, *d).unwrap();
        res.push(
            bytes
                .chunks_exact(t.bytes())
                .map(|c| {
                    let mut b = [0u8; 8];
                    b[..c.len()].copy_from_slice(c);
                    u64::from_le_bytes(b)
                })
                .collect(),
        );
    }
    for d in bufs.into_iter().chain(obufs) {
        ctx.free(d).unwrap();
    }
    res
}

/// Compare outputs with expectations, reporting the first few mismatches
/// with their inputs.
pub fn check(what: &str, ins: &[(T, Vec<u64>)], got: &[u64], want: &[u64]) {
    let mut bad = Vec::new();
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
        if g != w {
            bad.push(j);
        }
    }
    if bad.is_empty() {
        return;
    }
    let mut msg = format!("{what}: {} of {} elements differ\n", bad.len(), got.len());
    for &j in bad.iter().take(8) {
        let inputs: Vec<String> = ins.iter().map(|(_, v)| format!("{:#x}", v[j])).collect();
        msg.push_str(&format!("  [{j}] in=({}) got {:#x} want {:#x}\n", inputs.join(", "), got[j], want[j]));
    }
    panic!("{msg}");
}

/// Edge values for f32 (bits).
pub fn f32_edges() -> Vec<u64> {
    let v: Vec<u32> = vec![
        0,
        0x8000_0000,
        1,
        0x8000_0001,
        0x007f_ffff,
        0x0080_0000,
        0x8080_0000,
        0x3f80_0000,
        0xbf80_0000,
        0x7f7f_ffff,
        0xff7f_ffff,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
        0x7fa0_0001,
        0xffc0_1234,
        0x3f00_0000,
        0x4b00_0001,
        0x4f00_0000,
        0xcf00_0000,
        0x5f00_0000,
        0xdf00_0000,
        0x3fc0_0000,
        0x4020_0000,
        0x00ff_ffff,
        0x3380_0000,
        0x0000_0003,
        0x4f80_0000,
        0x3eff_ffff,
        0xbfc0_0000,
    ];
    v.into_iter().map(u64::from).collect()
}

/// Edge values for f64 (bits).
pub fn f64_edges() -> Vec<u64> {
    vec![
        0,
        0x8000_0000_0000_0000,
        1,
        0x8000_0000_0000_0001,
        0x000f_ffff_ffff_ffff,
        0x0010_0000_0000_0000,
        0x3ff0_0000_0000_0000,
        0xbff0_0000_0000_0000,
        0x7fef_ffff_ffff_ffff,
        0xffef_ffff_ffff_ffff,
        0x7ff0_0000_0000_0000,
        0xfff0_0000_0000_0000,
        0x7ff8_0000_0000_0000,
        0x3fe0_0000_0000_0000,
        0x4330_0000_0000_0001,
        0x43e0_0000_0000_0000,
        0xc3e0_0000_0000_0000,
        0x41e0_0000_0000_0000,
        0x3ff8_0000_0000_0000,
        0x3690_0000_0000_0000,
        0x47ef_ffff_e000_0000,
        0x47ef_ffff_f000_0000,
        0x380f_ffff_f000_0000,
        0x36a0_0000_0000_0000,
    ]
}

/// A random f32 bit pattern spread over all magnitudes (with some edges mixed in).
pub fn rand_f32(r: &mut Lcg) -> u64 {
    match r.next_u32() % 16 {
        0 => {
            let e = f32_edges();
            e[r.next_u32() as usize % e.len()]
        }
        1 => (r.next_u32() & 0x807f_ffff) as u64,
        2..=7 => {
            // Moderate exponents: sums and products that stay in range.
            let exp = 100 + r.next_u32() % 56;
            ((r.next_u32() & 0x8000_0000) | (exp << 23) | (r.next_u32() & 0x7f_ffff)) as u64
        }
        _ => r.next_u32() as u64,
    }
}

/// A random f64 bit pattern spread over all magnitudes.
pub fn rand_f64(r: &mut Lcg) -> u64 {
    match r.next_u32() % 16 {
        0 => {
            let e = f64_edges();
            e[r.next_u32() as usize % e.len()]
        }
        1 => r.next_u64() & 0x800f_ffff_ffff_ffff,
        2..=7 => {
            let exp = 900 + r.next_u64() % 250;
            (r.next_u64() & 0x8000_0000_0000_0000) | (exp << 52) | (r.next_u64() & 0x000f_ffff_ffff_ffff)
        }
        _ => r.next_u64(),
    }
}

/// Correctly rounded square root in mode `m` of an f64 (exact comparison in binary128).
pub fn sqrt64_ref(x: u64, m: &str) -> u64 {
    use rustc_apfloat::ieee::{Double, Quad};
    use rustc_apfloat::{Float, FloatConvert, Round};
    use std::cmp::Ordering;
    let v = f64::from_bits(x);
    let q = v.sqrt();
    if !q.is_finite() || q == 0.0 || m == "rn" {
        return q.to_bits();
    }
    let qq: Quad = Double::from_bits(q.to_bits() as u128).convert(&mut false).value;
    let sq = qq.mul_r(qq, Round::NearestTiesToEven).value;
    let xv: Quad = Double::from_bits(x as u128).convert(&mut false).value;
    let ord = sq.partial_cmp(&xv).unwrap_or(Ordering::Equal);
    match (m, ord) {
        ("rz" | "rm", Ordering::Greater) => (q.to_bits()) - 1,
        ("rp", Ordering::Less) => q.to_bits() + 1,
        _ => q.to_bits(),
    }
}

/// rustc_apfloat's rounding for a PTX rounding modifier (`rn`, `rz`, `rm`, `rp`).
pub fn round_of(m: &str) -> rustc_apfloat::Round {
    use rustc_apfloat::Round;
    match m {
        "rn" => Round::NearestTiesToEven,
        "rz" => Round::TowardZero,
        "rm" => Round::TowardNegative,
        _ => Round::TowardPositive,
    }
}

/// f64 results compare NaN as NaN (PTX leaves f64 NaN payloads open).
pub fn canon64_pair(got: &[u64], want: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let norm = |v: u64| if f64::from_bits(v).is_nan() { 0x7ff8_0000_0000_0000 } else { v };
    (got.iter().map(|&v| norm(v)).collect(), want.iter().map(|&v| norm(v)).collect())
}
