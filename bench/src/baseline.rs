//! The baseline: saxpy written directly as a Vulkan compute shader and
//! dispatched with plain `ash`, the way a hand-written Vulkan program would.
//!
//! The shader is the twins' `bench/twins/saxpy.comp` (checked in as SPIR-V,
//! run through [`crate::handwritten`]):
//!
//! ```glsl
//! layout(local_size_x = 256) in;
//! layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
//! layout(std430, set = 0, binding = 1) buffer Y { float y[]; };
//! layout(push_constant) uniform Push { uint n; float a; };
//! void main() {
//!     uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 256u) + gl_GlobalInvocationID.x;
//!     if (i < n) y[i] = fma(a, x[i], y[i]);
//! }
//! ```
//!
//! Buffers are device-local storage buffers bound through one descriptor
//! set; uploads and the read-back go through host-visible staging buffers.

use crate::handwritten::{Buffer, Gpu, Kernel, Result};

/// The saxpy shader's workgroup size.
const LOCAL_SIZE: u32 = 256;

/// Saxpy over `n` floats on a device of its own, set up once.
pub struct Baseline {
    n: u32,
    y: Buffer,
    kernel: Kernel,
    gpu: Gpu,
    x: Buffer,
}

impl Baseline {
    /// Opens the device with `uuid` and records `y = a * x + y` over `n`
    /// floats (a 2-D dispatch where `n / 256` groups exceed a dimension).
    pub fn new(uuid: [u8; 16], n: u32, a: f32) -> Result<Baseline> {
        let gpu = Gpu::new(uuid)?;
        let bytes = u64::from(n) * 4;
        let (x, y) = (gpu.buffer(bytes)?, gpu.buffer(bytes)?);
        let groups = n.div_ceil(LOCAL_SIZE);
        let max = gpu.max_workgroups()[0];
        let rows = groups.div_ceil(max);
        if rows > gpu.max_workgroups()[1] {
            return Err("too many elements for one dispatch".into());
        }
        let push = [n.to_le_bytes(), a.to_le_bytes()].concat();
        let spirv = include_bytes!("../twins/saxpy.spv");
        let kernel = gpu.kernel(spirv, &[&x, &y], &push, [groups.div_ceil(rows), rows, 1])?;
        Ok(Baseline { n, y, kernel, gpu, x })
    }

    pub fn device_name(&self) -> &str {
        self.gpu.name()
    }

    /// Copies `x` and `y` (each `n` floats) to the device.
    pub fn upload(&self, x: &[f32], y: &[f32]) -> Result<()> {
        if x.len() != self.n as usize || y.len() != self.n as usize {
            return Err("upload: wrong length".into());
        }
        let bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
        self.gpu.upload(&self.x, &bytes(x))?;
        self.gpu.upload(&self.y, &bytes(y))
    }

    /// Runs saxpy once (`y = a * x + y`) and waits for it.
    pub fn run(&self) -> Result<()> {
        self.kernel.run()
    }

    /// Reads `y` back.
    pub fn download_y(&self) -> Result<Vec<f32>> {
        let out = self.gpu.download(&self.y, self.n as usize * 4)?;
        Ok(out.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}
