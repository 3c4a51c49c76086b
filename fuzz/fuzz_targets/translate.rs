//! Parse and translate arbitrary input: no panic, no hang, bounded memory.
//!
//! Each input is translated with one of four option sets, chosen by its
//! length so that a finding reproduces from its file alone: the defaults,
//! the runtime's options on llvmpipe (zero-operand workaround, loop-limit
//! counting, no memory semantics, spin-loop unrolling), and the native and
//! slice warp paths with the optional device features on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ptxvk_translator::{Options, TargetEnv, WarpPath};

fn options(selector: usize) -> Options {
    let mut o = Options::default();
    match selector % 4 {
        0 => {}
        1 => {
            o.zero_operand_workaround = true;
            o.memory_semantics = false;
            o.unroll_spin_loops = 64;
            o.unroll_loops = 8;
            o.block_order_threads = 2;
            o.loop_limit = true;
            o.loop_live_outs_in_memory = true;
        }
        2 => {
            o.target_env = TargetEnv::Vulkan1_3;
            o.warp_path = WarpPath::Native;
            o.float_atomics = true;
            o.emulate_fma = false;
            o.denorm_preserve_f32 = true;
            o.denorm_preserve_f64 = true;
            o.signed_zero_inf_nan_f32 = true;
            o.signed_zero_inf_nan_f64 = true;
            o.signed_zero_inf_nan_f16 = true;
            o.max_push_constant_bytes = 256;
        }
        _ => {
            o.warp_path = WarpPath::Slice;
        }
    }
    o
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let opts = options(data.len());
    if let Err(d) = ptxvk_translator::translate(src, "fuzz.ptx", &opts) {
        // Rendering the diagnostics must not panic either.
        let _ = d.to_string();
    }
    let _ = ptxvk_translator::check_syntax(src, "fuzz.ptx");
});
