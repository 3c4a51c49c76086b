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

use common::split_module::{model, run, PTX, TABLE};
use common::{assert_clean, context, Lcg};
use ptxvk_runtime::{Context, Module};

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
        let (want, add) = model(kernel, &input, block as usize, &TABLE);
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
    // The whole module's kernels ran from slices of it (each entry with
    // the functions it calls), not from the whole module.
    for kernel in ["first", "second", "third"] {
        let bytes = whole.entry_spirv_bytes(kernel).expect("built");
        assert!(bytes < whole.spirv_bytes(), "{kernel}: {bytes} of {} bytes", whole.spirv_bytes());
    }
    assert_clean(&ctx);
}
