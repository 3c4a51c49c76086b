//! Shared helpers for the runtime's integration tests.
#![allow(dead_code)]

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

/// Fails the test if the validation layer reported anything.
pub fn assert_clean(ctx: &Context) {
    assert!(ctx.info().validation, "validation layer not active");
    assert_eq!(ctx.validation_messages(), 0, "validation layer reported problems (see log)");
}
