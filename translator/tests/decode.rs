//! Decoding against the ISA table and the operand type rules, as a user
//! sees them: messages, spans, and the typed form.

use ptxvk_translator::ast::{ModuleItem, ScalarType, Statement};
use ptxvk_translator::isa::{Group, Mod, Opcode};
use ptxvk_translator::{check_syntax, front_end};

const DECLS: &str = "    .reg .pred %p<4>;\n    .reg .b16 %rs<4>;\n    .reg .b32 %r<8>;\n    .reg .f32 %f<8>;\n    .reg .b64 %rd<8>;\n    .reg .f64 %fd<4>;\n    .reg .v4 .f32 %v4;\n";

fn src(body: &str) -> String {
    format!(".version 8.0\n.target sm_80\n.address_size 64\n.extern .func (.param .b32 r) f(.param .b32 a);\n.visible .entry k(.param .u64 p)\n{{\n{DECLS}{body}\nL:\n    ret;\n}}\n")
}

/// The rendered diagnostics for one instruction (empty when it checks).
fn check(inst: &str) -> String {
    match check_syntax(&src(&format!("    {inst};")), "k.ptx") {
        Ok(()) => String::new(),
        Err(d) => d.to_string(),
    }
}

fn ok(inst: &str) {
    let e = check(inst);
    assert!(e.is_empty(), "{inst}: {e}");
}

fn err(inst: &str, want: &str) {
    let e = check(inst);
    assert!(e.contains(want), "{inst}: expected {want:?}, got:\n{e}");
}

/// The decoded form of a single instruction.
fn decoded(inst: &str) -> ptxvk_translator::isa::Decoded {
    let m = front_end(&src(&format!("    {inst};")), "k.ptx").unwrap_or_else(|d| panic!("{d}"));
    for item in &m.items {
        let ModuleItem::Function(f) = item else { continue };
        for s in f.body.iter().flatten() {
            if let Statement::Inst(i) = s {
                if i.opcode != "ret" {
                    return i.decoded.unwrap_or_else(|| panic!("{inst} not decoded"));
                }
            }
        }
    }
    panic!("no instruction in {inst}")
}

#[test]
fn typed_forms() {
    let d = decoded("ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+16]");
    assert_eq!(d.opcode, Opcode::Ld);
    assert_eq!(d.get(Group::Ss), Some(&[Mod::Global][..]));
    assert_eq!(d.get(Group::Vec), Some(&[Mod::V4][..]));
    assert_eq!(d.ty(), Some(ScalarType::F32));
    assert!(d.form().syntax.starts_with("ld{.weak}{.ss}"), "{}", d.form().syntax);
    assert_eq!(d.name(), "ld");
    // Two type slots keep the manual's order.
    let d = decoded("cvt.rn.f32.f16 %f1, %rs1");
    assert_eq!(d.group_type(Group::Dtype), Some(ScalarType::F32));
    assert_eq!(d.group_type(Group::Atype), Some(ScalarType::F16));
    // Sub-opcodes are modifiers of their instruction.
    let d = decoded("setp.lt.s32 %p1, %r1, 0");
    assert_eq!(d.first(Group::CmpOp), Some(Mod::Lt));
    assert!(d.has(Mod::S32));
    // Multi-word alternatives.
    let d = decoded("fence.proxy.async.shared::cta");
    assert_eq!(d.get(Group::Proxykind), Some(&[Mod::Async, Mod::SharedCta][..]));
    assert_eq!(d.name(), "membar");
}

#[test]
fn modifier_order_of_independent_groups_is_free() {
    ok("red.global.add.u32 [%rd1], 1");
    ok("red.add.global.u32 [%rd1], 1");
    ok("atom.acquire.gpu.global.cas.b32 %r1, [%rd1], %r2, %r3");
    ok("ld.volatile.global.u32 %r1, [%rd1]");
    ok("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd1], [%rd2, {%r1, %r2}], [%rd3]");
}

#[test]
fn unknown_instructions_and_modifiers() {
    err("frob.u32 %r1, %r2", "k.ptx:14:5: error: unknown instruction 'frob.u32'");
    err("ld.global.rz.u32 %r1, [%rd1]", "k.ptx:14:14: error: '.rz' is not valid for 'ld'");
    err("ld.global.u32.u32 %r1, [%rd1]", "'.u32' is repeated in 'ld.global.u32.u32'");
    err("cvt.f32 %f1, %r1", "'cvt.f32' lacks .atype (one of .u8,");
    err(
        "ld.global.volatile.acquire.gpu.u32 %r1, [%rd1]",
        "cannot be used here in 'ld.global.volatile.acquire.gpu.u32'",
    );
}

#[test]
fn operand_counts_and_shapes() {
    err("add.u32 %r1, %r2", "'add.u32' expects 3 operands, found 2");
    err("ld.global.u32 %r1, %rd1", "operand 2 ('a') of 'ld.global.u32' must be a memory operand [a]");
    err("add.u32 %r1, [%rd1], 1", "operand 2 ('a') of 'add.u32' must be a register or a constant");
    ok("call.uni (%r1), f, (%r2)");
    ok("bar.sync 0");
    ok("bar.sync 0, 64");
}

#[test]
fn operand_types() {
    // Bit types accept any type of their size; integer and float types do not mix.
    ok("mov.b32 %r1, %f1");
    ok("add.f32 %f1, %f2, %f3");
    err("add.s32 %r1, %f1, 1", "operand 'a' of 'add.s32' has type .s32, but a .f32 register is given");
    err("add.f32 %f1, %f2, %rd1", "has type .f32, but a .b64 register is given");
    err("setp.lt.s32 %r1, %r2, 3", "operand 'p' of 'setp.lt.s32' has type .pred, but a .b32 register is given");
    // Sub-word loads, stores and conversions may use wider registers (not float ones).
    ok("ld.global.u8 %r1, [%rd1]");
    ok("ld.global.s16 %rd1, [%rd2]");
    ok("st.global.u8 [%rd1], %r1");
    ok("cvt.u16.u8 %rs1, %rs2");
    ok("cvt.u32.u8 %r1, %r2");
    err("ld.global.u32 %rs1, [%rd1]", "has type .u32, but a .b16 register is given");
    err("ld.global.f32 %fd1, [%rd1]", "has type .f32, but a .f64 register is given");
    // Constants.
    err("add.u32 %r1, %r2, 1.5", "is an integer (.u32); a floating-point constant is given");
    err("mov.u32 1, %r1", "the destination of 'mov.u32' must be a register, not a constant");
    err("mov.u32 %tid.x, %r1", "must be a register, not a special register");
    ok("mov.u32 %r1, %tid.x");
    ok("mov.u64 %rd1, %clock64");
    err("lop3.b32 %r1, %r2, %r3, %r4, %r5", "operand 'immLut' of 'lop3.b32' must be a constant");
    // Guards.
    err("@%r1 bra L", "guard '%r1' is not a predicate register");
}

#[test]
fn vector_operands() {
    ok("ld.global.v2.f32 {%f1, _}, [%rd1]");
    ok("st.global.v4.f32 [%rd1], %v4");
    err("ld.global.v4.f32 {%f1, %f2}, [%rd1]", "'ld.global.v4.f32' needs a vector of 4 elements, found 2");
    err("ld.global.f32 {%f1, %f2}, [%rd1]", "takes a scalar here; a vector needs .v2, .v4 or .v8");
    err("ld.global.v2.f32 %f1, [%rd1]", "'ld.global.v2.f32' needs a vector of 2 elements");
    ok("mov.b64 %rd1, {%r1, %r2}");
    ok("mov.b64 {%r1, %r2}, %rd1");
}

#[test]
fn names_are_declared() {
    err("mov.u32 %r1, %nosuch", "unknown name '%nosuch'");
    err("mov.u32 %r8, 1", "unknown name '%r8'");
    err("bra NOWHERE", "branch to undefined label 'NOWHERE'");
    ok("bra L");
}

#[test]
fn syntax_errors_are_recovered_from() {
    let s = src("    mov.u32 %r1 %r2;\n    add.u32 %r1, %r2, %r3;\n    frob.x %r1;\n    add.u32 %r1, %r2 %r3;");
    let e = match check_syntax(&s, "k.ptx") {
        Ok(()) => panic!("expected errors"),
        Err(d) => d.to_string(),
    };
    assert!(e.contains("k.ptx:14:17: error: syntax error at '%r2': expected ',' or ';'"), "{e}");
    assert!(e.contains("k.ptx:16:5: error: unknown instruction 'frob.x'"), "{e}");
    assert!(e.contains("k.ptx:17:22: error: syntax error at '%r3'"), "{e}");
    // An error in the module's structure: the parser recovers at the next statement.
    let s = ".version 8.0\n.target sm_80\n.address_size 64\n.global .u32 a b;\n.global .u32 c;\n.visible .entry k()\n{\n    frob;\n    ret;\n}\n";
    let e = match check_syntax(s, "k.ptx") {
        Ok(()) => panic!("expected errors"),
        Err(d) => d.to_string(),
    };
    assert!(e.contains("k.ptx:4:"), "{e}");
    assert!(e.contains("k.ptx:8:5: error: unknown instruction 'frob'"), "{e}");
}
