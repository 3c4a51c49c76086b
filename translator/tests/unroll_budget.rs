//! The copies that loop unrolling (`translator/src/unroll.rs`, on for
//! llvmpipe) gives all the loops of one function share one budget,
//! `MAX_UNROLLED_FUNCTION`: llvmpipe's compile time grows with the square
//! of a function's memory accesses, and NVIDIA Warp's sparse-matrix
//! kernels hold a hundred binary searches, each a small loop with a load,
//! whose copies doubled the kernel's global loads. nvcc's
//! `tests/fixtures/many_searches.ptx`: 40 binary searches and a serial scan
//! in one kernel.

mod common;

use ptxvk_translator::unroll::{ACCESS_WEIGHT, MAX_UNROLLED_FUNCTION};
use ptxvk_translator::{translate, Options};
use rspirv::spirv::Op;

const PTX: &str = include_str!("../../tests/fixtures/many_searches.ptx");

/// Loads through device addresses (`OpConvertUToPtr` results) in the module.
fn device_loads(words: &[u32]) -> usize {
    let insts = common::instructions(words);
    let pointers: std::collections::HashSet<u32> =
        insts.iter().filter(|(op, _)| *op == Op::ConvertUToPtr as u32).map(|(_, w)| w[2]).collect();
    insts.iter().filter(|(op, w)| *op == Op::Load as u32 && pointers.contains(&w[3])).count()
}

#[test]
fn loops_of_one_function_share_the_budget() {
    // The PTX's 82 global loads: 41 in loops (one per search and the scan).
    assert_eq!(PTX.matches("ld.global.u32").count(), 82);
    for resume in [true, false] {
        let base = Options { fault_checks: false, resume_loops: resume, ..Options::llvmpipe() };
        let plain = translate(PTX, "many_searches.ptx", &Options { unroll_loops: 0, ..base.clone() }).unwrap();
        let unrolled = translate(PTX, "many_searches.ptx", &base).unwrap();
        common::spirv_val(&unrolled.spirv, "many_searches").unwrap();
        let extra = device_loads(&unrolled.spirv) - device_loads(&plain.spirv);
        // Each copy adds its loop's one load, and weighs 12 (the scan: 9
        // instructions and branches, its load counted ACCESS_WEIGHT times)
        // or 18 (a search). Before the budget every search got 7 or more
        // copies: about 290 more loads.
        let most = MAX_UNROLLED_FUNCTION / (9 + ACCESS_WEIGHT - 1);
        assert!(extra <= most, "resume {resume}: {extra} loads added by copies (at most {most})");
        // The scan, the smallest body, got its copies first (7 or more), and
        // so did some of the searches.
        assert!(extra >= 7 + 7, "resume {resume}: only {extra} loads added by copies");
    }
}
