//! Run a CUDA kernel, compiled to PTX by `nvcc`, on any Vulkan device.
//!
//! ```text
//! cargo run --release -p ptxvk-examples                       # the embedded vector_add
//! cargo run --release -p ptxvk-examples -- my.ptx my_kernel   # your own PTX
//! ```
//!
//! The embedded kernel is `tests/fixtures/vector_add.ptx`, which `nvcc -ptx
//! -arch=sm_80 -O3` made from this CUDA C++:
//!
//! ```cuda
//! extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)
//! {
//!     int i = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (i < n) c[i] = a[i] + b[i];
//! }
//! ```
//!
//! A PTX file given on the command line must contain a kernel with that same
//! signature and meaning (`c[i] = a[i] + b[i]`), named `vector_add` unless a
//! kernel name follows the path.
//!
//! The steps are those of a CUDA driver-API program: open a device, load the
//! module, allocate, copy in, launch, copy out. Without a GPU, Mesa's
//! lavapipe (a Vulkan driver on the CPU) runs the kernel:
//! `VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json`.

use std::process::ExitCode;

use ptxvk_runtime::{Context, DeviceSelector};

/// The PTX `nvcc` produced, embedded in the executable.
const VECTOR_ADD_PTX: &str = include_str!("../../tests/fixtures/vector_add.ptx");

/// Number of elements: deliberately not a multiple of the block size, so the
/// kernel's `if (i < n)` matters.
const N: usize = 100_003;

/// Threads per block (CUDA's `blockDim.x`).
const BLOCK: u32 = 256;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    // 1. Which PTX and which kernel: the embedded one, or `[FILE.ptx [KERNEL]]`.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() > 2 || args.first().is_some_and(|a| a == "-h" || a == "--help") {
        return Err("usage: ptxvk-examples [FILE.ptx [KERNEL]]  (KERNEL defaults to vector_add)".into());
    }
    let (ptx, file_name) = match args.first() {
        Some(path) => (std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?, path.clone()),
        None => (VECTOR_ADD_PTX.to_string(), "vector_add.ptx".to_string()),
    };
    let kernel = args.get(1).map_or("vector_add", String::as_str);

    // 2. Open a device. `Default` takes a GPU when there is one, else a CPU
    //    implementation such as lavapipe; `PTXVK_DEVICE=<index or name>` overrides.
    let ctx = Context::new(DeviceSelector::Default).map_err(|e| format!("no usable Vulkan device: {e}"))?;
    let info = ctx.info();
    println!("device: {} ({})", info.name, info.driver_name);

    // 3. Load the module: the PTX is translated to SPIR-V here. Errors come
    //    back with compiler-style diagnostics (file:line:col).
    let module = ctx.load_module(&ptx, &file_name).map_err(|e| e.to_string())?;
    let function = module
        .function(kernel)
        .ok_or_else(|| format!("{file_name} has no kernel `{kernel}` (it has: {})", module.entry_names().join(", ")))?;

    // 4. Host data, and device buffers. A device pointer is a plain `u64`, as
    //    `CUdeviceptr` is in CUDA.
    let a: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..N).map(|i| 0.5 * i as f32 + 1.0).collect();
    let bytes = (N * size_of::<f32>()) as u64;
    let d_a = ctx.alloc(bytes).map_err(|e| e.to_string())?;
    let d_b = ctx.alloc(bytes).map_err(|e| e.to_string())?;
    let d_c = ctx.alloc(bytes).map_err(|e| e.to_string())?;
    ctx.copy_htod(d_a, &to_bytes(&a)).map_err(|e| e.to_string())?;
    ctx.copy_htod(d_b, &to_bytes(&b)).map_err(|e| e.to_string())?;

    // 5. Launch. Arguments are passed as in `cuLaunchKernel`: one byte slice
    //    per parameter, each exactly the parameter's size (pointers are 8
    //    bytes, `int n` is 4); `pack_params` checks them against the PTX.
    let n = N as i32;
    let params = function
        .pack_params(&[&d_a.to_le_bytes(), &d_b.to_le_bytes(), &d_c.to_le_bytes(), &n.to_le_bytes()])
        .map_err(|e| format!("kernel `{kernel}` does not take (a, b, c, n): {e}"))?;
    let grid = (N as u32).div_ceil(BLOCK);
    ctx.launch(&function, [grid, 1, 1], [BLOCK, 1, 1], 0, &params).map_err(|e| e.to_string())?;

    // 6. Read the result back. `copy_dtoh` waits for the launch to finish
    //    (work is queued in order, like one CUDA stream).
    let mut c_bytes = vec![0u8; N * size_of::<f32>()];
    ctx.copy_dtoh(&mut c_bytes, d_c).map_err(|e| e.to_string())?;
    let c = from_bytes(&c_bytes);
    for d in [d_a, d_b, d_c] {
        ctx.free(d).map_err(|e| e.to_string())?;
    }

    // 7. Check against the CPU (f32 addition is exact IEEE on both sides).
    for i in [0, 1, 2, N / 2, N - 1] {
        println!("c[{i}] = {} + {} = {}", a[i], b[i], c[i]);
    }
    if let Some(i) = (0..N).find(|&i| c[i].to_bits() != (a[i] + b[i]).to_bits()) {
        return Err(format!("mismatch at {i}: got {}, expected {}", c[i], a[i] + b[i]));
    }
    println!("{kernel}: {N} elements, {grid} blocks of {BLOCK} threads: ok");
    Ok(())
}

/// `f32`s as little-endian bytes (the layout device memory holds).
fn to_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian bytes back to `f32`s.
fn from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}
