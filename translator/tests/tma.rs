//! The Hopper asynchronous-copy instructions: the tensor operand syntax, the
//! rewriting into calls of the copy engine (`shaders/tma.ptx`), every
//! accepted instruction form translating to valid SPIR-V, and the
//! diagnostics of the forms that are not supported.

use ptxvk_translator::ast::{ModuleItem, Operand, Statement};
use ptxvk_translator::{parse, tma, translate, Options, TargetEnv};

/// Every instruction form the pass accepts, in one kernel (not meant to run).
const FORMS: &str = r#"
.version 8.6
.target sm_90a
.address_size 64

.const .align 64 .b8 cmap[128];

.visible .entry forms(
    .param .align 64 .b8 forms_param_0[128],
    .param .u64 forms_param_1,
    .param .u32 forms_param_2
)
{
    .reg .pred %p<4>;
    .reg .b16 %rs<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    .shared .align 1024 .b8 tile[4096];
    .shared .align 8 .b64 bar[2];

    mov.b64 %rd1, forms_param_0;
    ld.param.u64 %rd2, [forms_param_1];
    ld.param.u32 %r1, [forms_param_2];
    mov.u32 %r2, tile;
    mov.u32 %r3, bar;
    mov.u64 %rd3, cmap;
    mov.u16 %rs1, 1;
    mov.u16 %rs2, 2;
    mov.u16 %rs3, 0;
    setp.eq.u32 %p1, %r1, 0;

    mbarrier.init.shared::cta.b64 [%r3], 1;
    mbarrier.init.shared.b64 [bar+8], %r1;
    fence.mbarrier_init.release.cluster;
    fence.proxy.async.shared::cta;
    fence.proxy.async;
    fence.proxy.tensormap::generic.release.gpu;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd4, [%r3], 4096;
    mbarrier.arrive.expect_tx.release.cta.shared::cluster.b64 _, [%r3], 16;
    mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r3], 32;
    mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%r3], 48;
    mbarrier.arrive.shared.b64 %rd5, [bar];
    mbarrier.arrive.shared::cta.b64 %rd5, [bar+8], 2;
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r3];
    mbarrier.arrive.noComplete.shared.b64 %rd5, [%r3], 1;
    mbarrier.arrive_drop.shared.b64 %rd5, [%r3];
    mbarrier.arrive_drop.expect_tx.shared::cta.b64 %rd5, [%r3], 64;
    @%p1 mbarrier.arrive.b64 %rd5, [%rd2];
    mbarrier.test_wait.shared::cta.b64 %p2, [%r3], %rd4;
    mbarrier.test_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r3], %r1;
    mbarrier.try_wait.shared::cta.b64 %p2, [%r3], %rd4;
    mbarrier.try_wait.shared::cta.b64 %p2, [%r3], %rd4, 1000;
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r3], 0;
    mbarrier.try_wait.parity.relaxed.cluster.shared::cta.b64 %p3, [%r3], 1, %r1;
    mbarrier.pending_count.b64 %r4, %rd4;

    cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2], [%rd1, {%r1}], [%r3];
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [tile], [%rd1, {%r1, 0}], [bar];
    cp.async.bulk.tensor.3d.shared::cta.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [tile+1024], [%rd3, {%r1, %r1, -1}], [%r3], %rd2;
    cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%r2], [forms_param_0, {%r1, %r1, %r1, %r1}], [%r3], %rs1;
    cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::1 [%r2], [%rd2, {0, 1, 2, 3, 4}], [%r3];
    cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%r2], [%rd1, {%r1, %r1, %r1, %r1}], [%r3], {%rs1, %rs2};
    cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%r2], [%rd1, {%r1, %r1, %r1, %r1, %r1}], [%r3], {%rs1, %rs2, %rs3};
    cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes [%r2], [%rd1, {%r1, 0, 1, 2, 3}], [%r3];
    cp.async.bulk.tensor.3d.shared::cluster.global.im2col::w.mbarrier::complete_tx::bytes [%r2], [%rd1, {%r1, %r1, %r1}], [%r3], {%rs1, %rs2};
    cp.async.bulk.tensor.5d.shared::cta.global.im2col::w::128.mbarrier::complete_tx::bytes [%r2], [%rd1, {%r1, %r1, %r1, %r1, %r1}], [%r3], {%rs2, %rs3};
    cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd1, {%r1, %r1}], [%r2];
    cp.async.bulk.tensor.3d.global.shared::cta.bulk_group.L2::cache_hint [%rd1, {%r1, %r1, %r1}], [tile], %rd2;
    cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group [%rd1, {%r1, 0, 1, 2, 3}], [%r2];
    cp.async.bulk.tensor.3d.global.shared::cta.im2col_no_offs.bulk_group [%rd1, {%r1, %r1, %r1}], [%r2];
    cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%rd1, {%r1, %r1}], [%r2];
    cp.reduce.async.bulk.tensor.1d.global.shared::cta.min.bulk_group [%rd1, {%r1}], [%r2];
    cp.reduce.async.bulk.tensor.5d.global.shared::cta.xor.tile.bulk_group [%rd1, {%r1, %r1, %r1, %r1, %r1}], [%r2];
    @%p1 cp.reduce.async.bulk.tensor.3d.global.shared::cta.inc.tile.bulk_group [%rd1, {%r1, %r1, %r1}], [%r2];

    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd2], 256, [%r3];
    cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes.L2::cache_hint [tile], [%rd2+16], %r1, [bar], %rd2;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r2], [%rd2], 256, [%r3], %rs1;
    cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%r2], [tile+2048], 512, [%r3];
    cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.add.u32 [%r2], [tile+2048], 512, [%r3];
    cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.min.s32 [tile], [%r2], %r1, [bar];
    cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.inc.u32 [%r2], [%r2+16], 16, [%r3];
    cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.xor.b32 [%r2], [%r2], 16, [%r3];
    cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.add.u64 [%r2], [%r2], 16, [%r3];
    cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r2], 256;
    cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%rd2], [%r2], 256, %rd2;
    cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%rd2], [%r2], 256;
    cp.reduce.async.bulk.global.shared::cta.bulk_group.min.s32 [%rd2], [%r2], 256;
    cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd2], [%r2], 256;
    cp.reduce.async.bulk.global.shared::cta.bulk_group.xor.b64 [%rd2], [%r2], 256;
    cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f16 [%rd2], [%r2], 256;
    cp.reduce.async.bulk.global.shared::cta.bulk_group.max.bf16 [%rd2], [%r2], 256;
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
    cp.async.bulk.wait_group.read 1;
    cp.async.bulk.prefetch.L2.global [%rd2], 256;
    cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%rd1, {%r1, %r1}];
    prefetch.tensor.2d.L2.global.tile [%rd1, {%r1, %r1}];
    prefetch.global.tensormap [%rd1];

    cp.async.ca.shared.global [tile], [%rd2], 16;
    cp.async.mbarrier.arrive.shared.b64 [%r3];
    cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bar+8];
    mbarrier.inval.shared::cta.b64 [%r3];
    ret;
}
"#;

fn spirv_val(words: &[u32], env: &str) {
    let dir = std::env::temp_dir().join(format!("ptxvk-tma-{}-{env}", std::process::id()));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&dir, bytes).unwrap();
    match std::process::Command::new("spirv-val").arg("--target-env").arg(env).arg(&dir).output() {
        Ok(out) => assert!(out.status.success(), "spirv-val: {}", String::from_utf8_lossy(&out.stderr)),
        Err(_) => eprintln!("spirv-val not found; skipping validation"),
    }
    let _ = std::fs::remove_file(&dir);
}

#[test]
fn tensor_operands_parse() {
    let m = parse::run(FORMS).unwrap();
    let ModuleItem::Function(f) = m.items.iter().find(|i| matches!(i, ModuleItem::Function(_))).unwrap() else {
        unreachable!()
    };
    let tensor_ops: Vec<&Operand> = f
        .body
        .as_ref()
        .unwrap()
        .iter()
        .filter_map(|s| match s {
            Statement::Inst(i) => i.operands.iter().find(|o| matches!(o, Operand::TensorAddress(..))),
            _ => None,
        })
        .collect();
    assert_eq!(tensor_ops.len(), 20);
    let Operand::TensorAddress(_, a, coords) = tensor_ops[2] else { unreachable!() };
    assert_eq!(a.base.as_ref().map(|b| b.1.as_str()), Some("%rd3"));
    assert_eq!(coords.len(), 3);
    assert!(matches!(coords[2], Operand::Int(_, -1)));
}

#[test]
fn instructions_become_calls_of_the_copy_engine() {
    let mut m = parse::run(FORMS).unwrap();
    tma::run(&mut m).unwrap();
    let names: Vec<&str> = m
        .items
        .iter()
        .filter_map(|i| match i {
            ModuleItem::Function(f) => Some(f.name.as_str()),
            _ => None,
        })
        .collect();
    for f in ["__ptxvk_mbar_update", "__ptxvk_tma_load", "__ptxvk_tma_store", "__ptxvk_bulk_g2s", "__ptxvk_bulk_s2g"] {
        assert!(names.contains(&f), "{f} not appended");
    }
    let ModuleItem::Function(forms) = &m.items[1] else { unreachable!() };
    let opcodes: Vec<&str> = forms
        .body
        .as_ref()
        .unwrap()
        .iter()
        .filter_map(|s| match s {
            Statement::Inst(i) => Some(i.opcode.as_str()),
            _ => None,
        })
        .collect();
    assert!(!opcodes.contains(&"mbarrier"));
    assert!(!opcodes.contains(&"fence"));
    // Only the Ampere cp.async remains of the cp family.
    assert_eq!(opcodes.iter().filter(|o| **o == "cp").count(), 1);
}

#[test]
fn every_form_translates_to_valid_spirv() {
    for (env, name) in [(TargetEnv::Vulkan1_2, "vulkan1.2"), (TargetEnv::Vulkan1_3, "vulkan1.3")] {
        for push in [128, 256] {
            let options = Options { target_env: env, max_push_constant_bytes: push, ..Options::default() };
            let t = translate(FORMS, "forms.ptx", &options).unwrap_or_else(|d| panic!("{d}"));
            spirv_val(&t.spirv, name);
            // The tensor map parameter's address is taken: parameters go to the buffer.
            assert_eq!(t.info.entries[0].param_passing, ptxvk_translator::ParamPassing::Buffer);
        }
    }
}

fn error_of(body: &str) -> String {
    let src = format!(
        ".version 8.6\n.target sm_100a\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n\
         .reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n.reg .b16 %rs<2>;\n.shared .align 8 .b64 bar;\n{body}\nret;\n}}\n"
    );
    match translate(&src, "k.ptx", &Options::default()) {
        Ok(_) => panic!("translated: {body}"),
        Err(d) => d.to_string(),
    }
}

#[test]
fn unsupported_forms_are_reported() {
    // Reductions into shared memory that ptxas refuses (64-bit: only .add.u64).
    let e = error_of("cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.min.u64 [%r1], [%r2], 16, [bar];");
    assert!(e.contains("k.ptx:10:1: error: unsupported instruction") && e.contains("no such reduction"), "{e}");
    let e = error_of("cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.and.b64 [%r1], [%r2], 16, [bar];");
    assert!(e.contains("no such reduction into shared memory"), "{e}");
    // Forms the ISA does not have are reported by the front end's decoder.
    let e = error_of("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u8 [%rd1], [%r2], 16;");
    assert!(e.contains("k.ptx:10:55: error: '.u8' is not valid for 'cp'"), "{e}");
    let e = error_of("mbarrier.frobnicate.shared.b64 [bar];");
    assert!(e.contains("k.ptx:10:9: error: '.frobnicate' is not valid for 'mbarrier'"), "{e}");
    let e = error_of("mbarrier.init.shared.b64 [bar];");
    assert!(e.contains("'mbarrier.init.shared.b64' expects 2 operands, found 1"), "{e}");
    let e = error_of("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd1], [%r1];");
    assert!(
        e.contains("operand 1 ('tensorMap') of 'cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group' must be"),
        "{e}"
    );
    // The copy engine's names are reserved.
    let src = ".version 8.6\n.target sm_90\n.address_size 64\n.func __ptxvk_mbar_init(.reg .b32 a, .reg .b32 b)\n{\nret;\n}\n\
               .visible .entry k()\n{\n.shared .align 8 .b64 bar;\nmbarrier.init.shared.b64 [bar], 1;\nret;\n}\n";
    let e = translate(src, "k.ptx", &Options::default()).unwrap_err().to_string();
    assert!(e.contains("reserved for the emulated copy engine"), "{e}");
}

#[test]
fn modules_without_asynchronous_copies_are_unchanged() {
    let src = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n";
    let mut m = parse::run(src).unwrap();
    tma::run(&mut m).unwrap();
    assert_eq!(m.items.len(), 1);
}
