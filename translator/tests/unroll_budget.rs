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
use ptxvk_translator::{cfg, parse, reducible, structurize, translate, unroll, Options};
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
        // Each copy adds its loop's one load, and weighs at least 11 (the
        // scan: 7 instructions and its branch, its load counted
        // ACCESS_WEIGHT times; one more with the resume pass's check).
        // Before the budget every search got 8 copies: about 290 more loads.
        let most = MAX_UNROLLED_FUNCTION / (8 + ACCESS_WEIGHT - 1);
        assert!(extra <= most, "resume {resume}: {extra} loads added by copies (at most {most})");
        assert!(extra >= 7 + 7, "resume {resume}: only {extra} loads added by copies");
    }
}

#[test]
fn smallest_bodies_get_their_copies_first() {
    // The regions as the emitter gets them, unrolled with 8 copies in a
    // function without barriers: the scan (`$L__BB0_86`, the smallest
    // body) and the first searches in program order (`$L__BB0_4` is the
    // first) get all 8, the last search (`$L__BB0_82`) none.
    let module = parse::run(PTX).unwrap();
    let f = module
        .items
        .iter()
        .find_map(|i| match i {
            ptxvk_translator::ast::ModuleItem::Function(f) if f.body.is_some() => Some(f),
            _ => None,
        })
        .unwrap();
    let mut g = cfg::run(f.body.as_ref().unwrap(), false).unwrap();
    reducible::run(&mut g);
    let span_of = |b: usize| g.blocks[b].term_span;
    let regions = structurize::run_with(&g, &span_of, structurize::LoopExits::Outside).unwrap();
    let unrolled = unroll::run(&g, &regions, 8, false).expect("some loops are unrolled");
    let text = structurize::render(&g, &unrolled);
    let copies = |label: &str| text.matches(&format!("code {label} ")).count();
    assert_eq!(copies("$L__BB0_86"), 8, "the scan\n{text}");
    assert_eq!(copies("$L__BB0_4"), 8, "the first search\n{text}");
    assert_eq!(copies("$L__BB0_82"), 1, "the last search\n{text}");
    // 41 loops, as many after unrolling (copies are inside their loop).
    assert_eq!(structurize::render(&g, &regions).matches("loop ").count(), 41);
    assert_eq!(text.matches("loop ").count(), 41);
}
