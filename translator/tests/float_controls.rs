//! `DenormPreserve` execution modes: declared per entry point for the widths
//! the options ask for (64 only when the module uses f64), valid SPIR-V.

use ptxvk_translator::{translate, Options, TargetEnv};
use rspirv::binary::Parser;
use rspirv::dr::{Loader, Operand};
use rspirv::spirv::{Capability, ExecutionMode, Op};

const SRC: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\
.visible .entry f(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\t.reg .f64 %fd<3>;\n\t.reg .f32 %f<3>;\n\
\tld.param.u64 %rd1, [p];\n\tld.global.f64 %fd1, [%rd1];\n\tadd.rn.f64 %fd2, %fd1, %fd1;\n\
\tst.global.f64 [%rd1], %fd2;\n\tld.global.f32 %f1, [%rd1+8];\n\tmul.rn.f32 %f2, %f1, %f1;\n\
\tst.global.f32 [%rd1+8], %f2;\n\tret;\n}\n\
.visible .entry g(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\tst.global.u32 [%rd1], 1;\n\tret;\n}\n";

const SRC32: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\
.visible .entry h(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\t.reg .f32 %f<3>;\n\
\tld.param.u64 %rd1, [p];\n\tld.global.f32 %f1, [%rd1];\n\tmul.rn.f32 %f2, %f1, %f1;\n\
\tst.global.f32 [%rd1], %f2;\n\tret;\n}\n";

/// (entry count, DenormPreserve modes as (function id, width), capability declared)
fn modes(src: &str, f32_on: bool, f64_on: bool) -> (usize, Vec<(u32, u32)>, bool) {
    let opts = Options { denorm_preserve_f32: f32_on, denorm_preserve_f64: f64_on, ..Options::default() };
    let m = translated(src, &opts);
    let cap = m.capabilities.iter().any(|i| i.operands == [Operand::Capability(Capability::DenormPreserve)]);
    let mut v = Vec::new();
    for i in m.execution_modes.iter().filter(|i| i.class.opcode == Op::ExecutionMode) {
        if let [Operand::IdRef(f), Operand::ExecutionMode(ExecutionMode::DenormPreserve), Operand::LiteralBit32(w)] =
            i.operands.as_slice()
        {
            v.push((*f, *w));
        }
    }
    (m.entry_points.len(), v, cap)
}

/// The translation of `src` with `opts`, checked by `spirv-val` and loaded.
fn translated(src: &str, opts: &Options) -> rspirv::dr::Module {
    let t = translate(src, "fc.ptx", opts).unwrap_or_else(|d| panic!("{d}"));
    spirv_val(&t.spirv);
    let mut l = Loader::new();
    Parser::new(&t.spirv.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>(), &mut l).parse().unwrap();
    l.module()
}

fn spirv_val(words: &[u32]) {
    let file = std::env::temp_dir().join(format!("ptxvk-fc-{}-{}.spv", std::process::id(), words.len()));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&file, bytes).unwrap();
    let env = match Options::default().target_env {
        TargetEnv::Vulkan1_2 => "vulkan1.2",
        TargetEnv::Vulkan1_3 => "vulkan1.3",
    };
    if let Ok(out) = std::process::Command::new("spirv-val").arg("--target-env").arg(env).arg(&file).output() {
        assert!(out.status.success(), "spirv-val: {}", String::from_utf8_lossy(&out.stderr));
    }
    let _ = std::fs::remove_file(&file);
}

#[test]
fn denorm_preserve_modes() {
    let (n, v, cap) = modes(SRC, false, false);
    assert_eq!((n, v.len(), cap), (2, 0, false));
    let (n, v, cap) = modes(SRC, true, true);
    assert!(cap);
    assert_eq!(v.len(), 2 * n, "{v:?}");
    assert_eq!(v.iter().filter(|(_, w)| *w == 64).count(), n);
    let (_, v, _) = modes(SRC, false, true);
    assert!(v.iter().all(|(_, w)| *w == 64) && v.len() == 2);
    // No f64 in the module: no 64-bit mode.
    let (n, v, cap) = modes(SRC32, true, true);
    assert_eq!((n, v, cap), (1, vec![(v_first(SRC32), 32)], true));
}

fn v_first(src: &str) -> u32 {
    modes(src, true, false).1[0].0
}

const DIV_SRC: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\
.visible .entry d(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\t.reg .f64 %fd<6>;\n\
\tld.param.u64 %rd1, [p];\n\tld.global.f64 %fd1, [%rd1];\n\tld.global.f64 %fd2, [%rd1+8];\n\
\tdiv.rn.f64 %fd3, %fd1, %fd2;\n\tsqrt.rn.f64 %fd4, %fd1;\n\trcp.rn.f64 %fd5, %fd2;\n\
\tst.global.f64 [%rd1], %fd3;\n\tst.global.f64 [%rd1+8], %fd4;\n\tst.global.f64 [%rd1+16], %fd5;\n\tret;\n}\n";

/// (OpFDiv, OpIsInf, all instructions) in the translation of `DIV_SRC`.
fn div_counts(correct: bool) -> (usize, usize, usize) {
    let opts = Options { emulate_fma: true, correct_f64_div_sqrt: correct, ..Options::default() };
    let m = translated(DIV_SRC, &opts);
    let insts: Vec<Op> = m
        .functions
        .iter()
        .flat_map(|f| f.blocks.iter().flat_map(|b| &b.instructions))
        .map(|i| i.class.opcode)
        .collect();
    let count = |op: Op| insts.iter().filter(|&&o| o == op).count();
    (count(Op::FDiv), count(Op::IsInf), insts.len())
}

/// `correct_f64_div_sqrt`: f64 `div.rn` and `rcp.rn` are one `OpFDiv`
/// each and `sqrt.rn` one `Sqrt`, without the exact correction (whose
/// emulated `fma`s test for infinities); without it, the correction.
#[test]
fn f64_division_from_the_driver_or_corrected() {
    let (fdiv, isinf, n) = div_counts(true);
    assert_eq!((fdiv, isinf), (2, 0), "{n} instructions");
    let (fdiv_c, isinf_c, n_c) = div_counts(false);
    assert!(isinf_c > 0 && fdiv_c > 2, "the correction: {fdiv_c} OpFDiv, {isinf_c} OpIsInf");
    assert!(n_c > 5 * n, "{n_c} instructions with the correction, {n} without");
}
