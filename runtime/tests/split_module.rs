//! A module over SPIR-V's id limit becomes one SPIR-V module per entry
//! (issue 24: CUB's library). `PTXVK_MAX_MODULE_IDS` lowers the limit so
//! that nvcc's `tests/fixtures/split_module.cu` (kernels sharing device
//! functions, a `__constant__` table, a `__device__` counter and a table of
//! function pointers) is split; each per-entry module passes `spirv-val`
//! (`PTXVK_SPIRV_VAL=1`), and every kernel computes what it computes in
//! the whole module, bit for bit, and what the host model says.
//!
//! One test in its own binary: it sets environment variables.

mod common;

use common::{assert_clean, context, Lcg};
use ptxvk_runtime::{Context, Module};

const PTX: &str = include_str!("../../tests/fixtures/split_module.ptx");
const POISON: u32 = 0xDEAD_BEEF;
const TABLE: [u32; 16] = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3];

fn mix(x: u32, k: u32) -> u32 {
    let x = x ^ (x >> 13);
    let x = x.wrapping_mul(0x5bd1_e995u32.wrapping_add(k));
    x ^ (x >> 15) ^ TABLE[(x & 15) as usize]
}

/// What each kernel writes, and what it adds to `calls`.
fn model(kernel: &str, input: &[u32], block: usize) -> (Vec<u32>, u32) {
    let n = input.len();
    match kernel {
        "first" => (input.iter().map(|&x| mix(x, 1)).collect(), 1),
        "second" => {
            let s: Vec<u32> = input.iter().map(|&x| mix(x, 2)).collect();
            let out = (0..n)
                .map(|i| {
                    let (b, t) = (i / block, i % block);
                    let next = b * block + (t + 1) % block;
                    s[i].wrapping_add(if next < n { s[next] } else { 0 })
                })
                .collect();
            (out, 10)
        }
        _ => {
            let op = |x: u32| if x & 1 == 0 { x.wrapping_mul(2).wrapping_add(1) } else { x.rotate_left(7) };
            ((0..n).map(|i| op(input[i]).wrapping_add(TABLE[i & 15])).collect(), 100)
        }
    }
}

fn run(ctx: &Context, m: &Module, kernel: &str, input: &[u32], block: u32) -> Vec<u32> {
    let f = m.function(kernel).unwrap();
    let n = input.len();
    let din = ctx.alloc((n * 4) as u64).unwrap();
    let bytes: Vec<u8> = input.iter().flat_map(|w| w.to_le_bytes()).collect();
    ctx.copy_htod(din, &bytes).unwrap();
    let dout = ctx.alloc((n as u64 + 8) * 4).unwrap();
    ctx.memset_d32(dout, POISON, n as u64 + 8).unwrap();
    let args = [din.to_le_bytes().to_vec(), dout.to_le_bytes().to_vec(), (n as i32).to_le_bytes().to_vec()];
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let params = f.pack_params(&refs).unwrap();
    let grid = (n as u32).div_ceil(block);
    ctx.launch(&f, [grid, 1, 1], [block, 1, 1], 0, &params).unwrap();
    let got = common::download_u32(ctx, dout, n + 8);
    assert!(got[n..].iter().all(|&w| w == POISON), "{kernel}: wrote past the output");
    got[..n].to_vec()
}

fn calls(ctx: &Context, m: &Module) -> u32 {
    let (addr, size) = m.global("calls").expect("calls");
    assert_eq!(size, 4);
    common::download_u32(ctx, addr, 1)[0]
}

#[test]
fn over_limit_module_runs_as_one_spirv_module_per_entry() {
    let ctx = context();
    let whole = ctx.load_module(PTX, "split_module.ptx").expect("whole module");
    assert_eq!(whole.spirv_module_count(), 1, "the module is far below SPIR-V's id limit");
    // This binary has no other test: no other thread reads the environment.
    std::env::set_var("PTXVK_MAX_MODULE_IDS", "100");
    std::env::set_var("PTXVK_SPIRV_VAL", "1");
    let split = ctx.load_module(PTX, "split_module.ptx").expect("split module");
    std::env::remove_var("PTXVK_MAX_MODULE_IDS");
    std::env::remove_var("PTXVK_SPIRV_VAL");
    assert_eq!(split.spirv_module_count(), 3, "one SPIR-V module per entry");

    let mut rng = Lcg(0x5E1);
    let block = 128u32;
    let mut want_calls = 0;
    for kernel in ["first", "second", "third", "first"] {
        let n = 1000 + (rng.next_u32() % 1000) as usize;
        let input: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
        let (want, add) = model(kernel, &input, block as usize);
        want_calls += add;
        for (name, m) in [("whole", &whole), ("split", &split)] {
            let got = run(&ctx, m, kernel, &input, block);
            let bad = (0..n).find(|&i| got[i] != want[i]);
            assert!(bad.is_none(), "{kernel} ({name}): first difference at {bad:?}");
        }
        // Each module has its own counter, bumped once per launch.
        assert_eq!(calls(&ctx, &whole), want_calls, "{kernel}: the whole module's counter");
        assert_eq!(calls(&ctx, &split), want_calls, "{kernel}: the split module's counter");
    }
    assert_clean(&ctx);
}
