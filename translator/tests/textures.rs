//! Texture and surface instructions: the rewriting into calls of the
//! sampling engine (`shaders/tex.ptx`), every accepted form translating to
//! valid SPIR-V (handles in registers, `.texref`/`.surfref` kernel
//! parameters and module references), and the diagnostics of the forms
//! that are not supported. The runtime behaviour is tested through the
//! driver API in `libcuda/tests/textures.rs`.

use ptxvk_translator::ast::{Instruction, ModuleItem, Statement};
use ptxvk_translator::{parse, tex, translate, Options, TargetEnv};

/// Every instruction form the pass accepts, in one kernel (not meant to run).
const FORMS: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.global .texref module_tex;
.global .surfref module_surf;
.global .samplerref module_smp = { addr_mode_0 = mirror, filter_mode = linear };

.visible .entry forms(
    .param .u64 forms_param_0,
    .param .texref forms_tex,
    .param .surfref forms_surf,
    .param .u64 forms_out
)
{
    .reg .pred %p<4>;
    .reg .b16 %rs<8>;
    .reg .b32 %r<32>;
    .reg .f32 %f<32>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [forms_param_0];
    ld.param.u64 %rd2, [forms_out];
    mov.u32 %r1, 3;
    mov.f32 %f1, 0f3F000000;
    mov.f32 %f2, 0f3E800000;
    mov.f32 %f3, 0f3F400000;
    tex.1d.v4.f32.s32 {%f4, %f5, %f6, %f7}, [%rd1, {%r1}];
    tex.1d.v4.s32.f32 {%r2, %r3, %r4, %r5}, [%rd1, {%f1}];
    tex.2d.v4.u32.f32 {%r2, %r3, %r4, %r5}, [%rd1, {%f1, %f2}];
    tex.3d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2, %f3, %f3}];
    tex.a1d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%r1, %f1}];
    tex.a2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%r1, %f1, %f2, %f2}];
    tex.cube.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2, %f3, %f3}];
    tex.acube.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%r1, %f1, %f2, %f3}];
    tex.level.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}], %f3;
    tex.grad.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}], {%f1, %f2}, {%f2, %f3};
    tex.base.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}];
    tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}], {%r1, %r1};
    tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [forms_tex, {%f1, %f2}];
    tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [module_tex, {%f1, %f2}];
    @%p1 tex.2d.v4.f32.f32 {%f8, %f9, %f10, %f11}, [%rd1, {%f1, %f2}];
    tex.2d.v2.f16x2.f32 {%r2, %r3}, [%rd1, {%f1, %f2}];
    sust.p.2d.v4.b32.trap [%rd1, {%r1, %r1}], {%r2, %r3, %r4, %r5};
    sured.p.max.1d.b32.zero [%rd1, {%r1}], %r1;
    tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, module_smp, {%f1, %f2}];
    txq.addr_mode_0.b32 %r13, [module_smp];
    tld4.r.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}];
    tld4.a.2d.v4.s32.f32 {%r2, %r3, %r4, %r5}, [%rd1, {%f1, %f2}];
    txq.width.b32 %r6, [%rd1];
    txq.level.height.b32 %r7, [%rd1], %r1;
    txq.num_mipmap_levels.b32 %r8, [module_tex];
    txq.addr_mode_1.b32 %r9, [forms_tex];
    suq.width.b32 %r10, [forms_surf];
    suq.memory_layout.b32 %r11, [module_surf];
    suld.b.1d.b32.trap {%r12}, [%rd1, {%r1}];
    suld.b.2d.v2.b16.clamp {%rs1, %rs2}, [forms_surf, {%r1, %r1}];
    suld.b.3d.v4.b8.zero {%rs1, %rs2, %rs3, %rs4}, [module_surf, {%r1, %r1, %r1, %r1}];
    suld.b.a2d.b64.trap {%rd3}, [%rd1, {%r1, %r1, %r1, %r1}];
    sust.b.1d.b32.trap [%rd1, {%r1}], {%r12};
    sust.b.a1d.v4.b32.clamp [%rd1, {%r1, %r1}], {%r2, %r3, %r4, %r5};
    @!%p1 sust.b.2d.b8.zero [forms_surf, {%r1, %r1}], {%rs1};
    sured.b.add.2d.u32.trap [%rd1, {%r1, %r1}], %r1;
    sured.b.min.1d.s32.clamp [%rd1, {%r1}], %r1;
    sured.b.add.3d.u64.zero [%rd1, {%r1, %r1, %r1, %r1}], %rd3;
    sured.b.or.2d.b32.trap [%rd1, {%r1, %r1}], %r1;
    istypep.texref %p2, %rd1;
    istypep.surfref %p3, %rd1;
    st.global.v4.f32 [%rd2], {%f4, %f5, %f6, %f7};
    st.global.v4.u32 [%rd2+16], {%r6, %r7, %r8, %r9};
    ret;
}
"#;

fn spirv_val(words: &[u32], env: &str) {
    let path = std::env::temp_dir().join(format!("ptxvk-tex-{}-{env}", std::process::id()));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&path, bytes).unwrap();
    match std::process::Command::new("spirv-val").arg("--target-env").arg(env).arg(&path).output() {
        Ok(out) => assert!(out.status.success(), "spirv-val: {}", String::from_utf8_lossy(&out.stderr)),
        Err(_) => eprintln!("spirv-val not found; skipping validation"),
    }
    let _ = std::fs::remove_file(&path);
}

fn instructions(m: &ptxvk_translator::ast::Module, func: &str) -> Vec<Instruction> {
    fn walk(stmts: &[Statement], out: &mut Vec<Instruction>) {
        for s in stmts {
            match s {
                Statement::Inst(i) => out.push(i.clone()),
                Statement::Block(b) => walk(b, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    for item in &m.items {
        if let ModuleItem::Function(f) = item {
            if f.name == func {
                walk(f.body.as_deref().unwrap_or(&[]), &mut out);
            }
        }
    }
    out
}

#[test]
fn instructions_become_calls_of_the_engine() {
    let mut m = parse::run(FORMS).unwrap();
    tex::run(&mut m).unwrap();
    let insts = instructions(&m, "forms");
    let left: Vec<String> = insts
        .iter()
        .filter(|i| matches!(i.opcode.as_str(), "tex" | "tld4" | "txq" | "suq" | "suld" | "sust" | "sured" | "istypep"))
        .map(|i| i.mnemonic())
        .collect();
    assert!(left.is_empty(), "not rewritten: {left:?}");
    let calls = insts.iter().filter(|i| i.opcode == "call").count();
    assert_eq!(
        calls,
        19 + 6 + 13 + 2 + 1,
        "one engine call per tex/tld4, query (not of a sampler), surface access and istypep (two for sured.p.max)"
    );
    // Module references are loaded; reference parameters read.
    assert!(insts.iter().any(|i| i.mnemonic() == "ld.global.u64"), "module reference loaded");
    assert!(insts.iter().any(|i| i.mnemonic() == "ld.param.u64"), "reference parameter read");
    // The engine is appended once.
    let engine = m.items.iter().filter(|i| matches!(i, ModuleItem::Function(f) if f.name == "__ptxvk_tex")).count();
    assert_eq!(engine, 1);
}

#[test]
fn every_form_translates_to_valid_spirv() {
    for (env, name) in [(TargetEnv::Vulkan1_2, "vulkan1.2"), (TargetEnv::Vulkan1_3, "vulkan1.3")] {
        let options = Options { target_env: env, ..Options::default() };
        let t = translate(FORMS, "forms.ptx", &options).unwrap_or_else(|d| panic!("{d}"));
        spirv_val(&t.spirv, name);
    }
}

/// The engine passes the front end's checks like user PTX.
#[test]
fn the_engine_is_valid_ptx() {
    if let Err(d) = ptxvk_translator::front_end(tex::LIBRARY, "shaders/tex.ptx") {
        panic!("{d}");
    }
}

fn error_of(body: &str) -> String {
    let src = format!(
        ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n.reg .pred %p<2>;\n.reg .b32 %r<8>;\n.reg .f32 %f<8>;\n.reg .b64 %rd<4>;\nld.param.u64 %rd1, [p];\n{body}\nret;\n}}\n"
    );
    match translate(&src, "k.ptx", &Options::default()) {
        Ok(_) => panic!("'{body}' translated"),
        Err(d) => d.to_string(),
    }
}

#[test]
fn unsupported_forms_are_reported() {
    let cases = [
        ("tex.2dms.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r1, %r1, %r1, %r1}];", "geometry"),
        ("tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f1, %f2}], {%r1, %r1}, %f5;", "depth compare"),
        ("tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, %rd2, {%f1, %f2}];", "not a module .samplerref"),
    ];
    for (body, want) in cases {
        let e = error_of(body);
        assert!(e.contains("unsupported instruction") && e.contains(want), "{body}: {e}");
        assert!(e.contains("k.ptx:"), "the diagnostic names the file and line: {e}");
    }
}

#[test]
fn sampler_attributes_are_checked() {
    let src = |init: &str| {
        format!(
            ".version 8.0\n.target sm_80, texmode_independent\n.address_size 64\n.global .samplerref s = {{ {init} }};\n.visible .entry k(.param .u64 p)\n{{\n.reg .f32 %f<8>;\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [p];\ntex.2d.v4.f32.f32 {{%f1, %f2, %f3, %f4}}, [%rd1, s, {{%f1, %f2}}];\nret;\n}}\n"
        )
    };
    assert!(
        translate(&src("addr_mode_0 = clamp_to_border, filter_mode = nearest"), "k.ptx", &Options::default()).is_ok()
    );
    for (bad, want) in
        [("filter_mode = cubic", "unknown sampler attribute value"), ("colour = 1", "unknown sampler attribute")]
    {
        match translate(&src(bad), "k.ptx", &Options::default()) {
            Ok(_) => panic!("'{bad}' accepted"),
            Err(d) => assert!(d.to_string().contains(want), "{bad}: {d}"),
        }
    }
}

#[test]
fn modules_without_textures_are_unchanged() {
    let src = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [p];\nst.global.u32 [%rd1], 1;\nret;\n}\n";
    let mut m = parse::run(src).unwrap();
    let before = format!("{:?}", m.items);
    tex::run(&mut m).unwrap();
    assert_eq!(before, format!("{:?}", m.items));
}
