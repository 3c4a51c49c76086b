//! Shared helpers for the runtime's integration tests.
#![allow(dead_code)]

pub mod split_module;

use ptxvk_runtime::{Context, DeviceSelector};

/// Pins lavapipe (when installed and no device is chosen) and enables validation before any context exists.
pub fn setup() {
    const LVP: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";
    // Like scripts/test.sh: pin lavapipe unless a device is chosen explicitly.
    if std::env::var_os("VK_ICD_FILENAMES").is_none()
        && std::env::var_os("PTXVK_DEVICE").is_none()
        && std::path::Path::new(LVP).exists()
    {
        std::env::set_var("VK_ICD_FILENAMES", LVP);
    }
    std::env::set_var("PTXVK_VALIDATION", "1");
    std::env::set_var("PTXVK_SPIRV_VAL", "1");
}

/// A context on the default device, with validation on.
pub fn context() -> Context {
    setup();
    Context::new(DeviceSelector::Default).expect("create context")
}

/// A tiny deterministic generator (64-bit LCG, Knuth's constants).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next_u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 32) as u32
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u32() as u8).collect()
    }
}

/// The word output buffers are filled with before a kernel runs ([`poisoned`]).
pub const POISON: u32 = 0xABAB_ABAB;

/// Device memory holding `bytes` (at least 4 bytes allocated).
pub fn upload(ctx: &Context, bytes: &[u8]) -> u64 {
    let d = ctx.alloc(bytes.len().max(4) as u64).unwrap();
    ctx.copy_htod(d, bytes).unwrap();
    d
}

/// Device memory holding `data`.
pub fn upload_u32(ctx: &Context, data: &[u32]) -> u64 {
    upload(ctx, &data.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
}

/// `words` 32-bit words of device memory, each [`POISON`].
pub fn poisoned(ctx: &Context, words: usize) -> u64 {
    let d = ctx.alloc(words as u64 * 4).unwrap();
    ctx.memset_d32(d, POISON, words as u64).unwrap();
    d
}

/// `n` 32-bit words read back from `d`.
pub fn download_u32(ctx: &Context, d: u64, n: usize) -> Vec<u32> {
    let mut bytes = vec![0u8; n * 4];
    ctx.copy_dtoh(&mut bytes, d).unwrap();
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Fails the test if the validation layer reported anything.
pub fn assert_clean(ctx: &Context) {
    assert!(ctx.info().validation, "validation layer not active");
    assert_eq!(ctx.validation_messages(), 0, "validation layer reported problems (see log)");
}
