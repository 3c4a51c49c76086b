//! Parser tests: module-level syntax, operands and immediates, and spans.

use ptxvk_translator::ast::*;
use ptxvk_translator::diag::Span;
use ptxvk_translator::parse;

const MODULE: &str = r#"
// A module exercising PTX's module-level syntax.
.version 8.5
.target sm_80, texmode_independent, debug
.address_size 64

.file 1 "/tmp/k.cu"
.global .align 4 .b8 table[16] = {1, 2, 3, 4, 0x10, 0b11, 017, -1};
.const .align 8 .f64 coeffs[2] = {0d3FF0000000000000, 0d4000000000000000};
.global .align 8 .u64 ptr_to_table = generic(table)+4;
.global .v4 .f32 vec4;
.global .u32 grid[2][3];
.extern .shared .align 16 .b8 dyn[];
.visible .global .u32 counter;
.weak .global .u32 weak_var;
.common .global .align 8 .u64 common_var;

.extern .func (.param .b32 func_retval0) vprintf(.param .b64 fmt, .param .b64 args);

.visible .func (.param .b32 ret) helper(.reg .u32 a, .param .align 8 .b8 s[16]) .noreturn
{
    ret;
}

.visible .entry kernel(
    .param .u64 .ptr .global .align 16 p,
    .param .align 8 .b8 by_value[24],
    .param .f32 scale
)
.maxntid 256, 1, 1
.reqntid 256
.minnctapersm 2
.maxnreg 64
.pragma "nounroll";
{
    .reg .pred %p<3>;
    .reg .b32 %r<100>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<2>;
    .local .align 4 .b8 depot[32];
    .shared .align 4 .u32 tile[8][8];
    /* block comment */
    .loc 1 10 3
    mov.u32 %r1, %tid.x;
    mov.f32 %f1, 0f3F800000;
    mov.f32 %f0, 1.5;
    mov.b64 %rd0, {%r1, %r2};
    mov.b64 {%r3, %r4}, %rd0;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r5, [by_value+8];
    ld.global.v4.u32 {%r6, %r7, %r8, _}, [%rd1+16];
    ld.global.u32 %r9, [%rd1+-4];
    ld.shared.u32 %r10, [tile];
    ld.global.u32 %r11, [0x100];
    setp.lt.s32 %p1|%p2, %r1, -7;
    @%p1 bra $L__exit;
    @!%p2 add.s32 %r12, %r1, 0xFFFFFFFF;
    { // nested scope
        .reg .b32 %inner;
        add.u32 %inner, %r1, 1;
    }
$L__exit:
    ret;
}
.section .debug_info { .b32 0x10 .b8 1 }
"#;

#[test]
fn module_level_syntax() {
    let m = parse::run(MODULE).unwrap_or_else(|d| panic!("{d:?}"));
    assert_eq!(m.version, Some((8, 5)));
    assert_eq!(m.target, vec!["sm_80", "texmode_independent", "debug"]);
    assert_eq!(m.address_size, 64);
    let vars: Vec<&VarDecl> = m
        .items
        .iter()
        .filter_map(|i| match i {
            ModuleItem::Variable(v) => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(vars.len(), 9);
    assert_eq!(vars[0].space, StateSpace::Global);
    assert_eq!(vars[0].align, Some(4));
    assert_eq!(vars[0].names[0].dims, vec![Some(16)]);
    let Some(Initializer::List(_, items)) = &vars[0].init else { panic!("list initializer") };
    assert_eq!(items.len(), 8);
    let Initializer::Expr(_, t) = &items[5] else { panic!() };
    assert!(matches!(t[0].1, InitTerm::Int(3)), "0b11 is 3");
    let Initializer::Expr(_, t) = &items[6] else { panic!() };
    assert!(matches!(t[0].1, InitTerm::Int(15)), "017 is octal 15");
    let Initializer::Expr(_, t) = &items[7] else { panic!() };
    assert!(matches!(t[0].1, InitTerm::Int(-1)));
    let Some(Initializer::Expr(_, t)) = &vars[2].init else { panic!("address initializer") };
    assert!(matches!(&t[0].1, InitTerm::Generic(n) if n == "table"));
    assert!(matches!(t[1].1, InitTerm::Int(4)));
    assert_eq!(vars[3].vector, Some(4));
    assert_eq!(vars[4].names[0].dims, vec![Some(2), Some(3)]);
    assert_eq!(vars[5].linkage, vec![Linkage::Extern]);
    assert_eq!(vars[5].names[0].dims, vec![None]);
    assert_eq!(vars[6].linkage, vec![Linkage::Visible]);
    assert_eq!(vars[7].linkage, vec![Linkage::Weak]);
    assert_eq!(vars[8].linkage, vec![Linkage::Common]);

    let funcs: Vec<&Function> = m
        .items
        .iter()
        .filter_map(|i| match i {
            ModuleItem::Function(f) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(funcs.len(), 3);
    assert!(funcs[0].body.is_none());
    assert_eq!(funcs[0].returns.len(), 1);
    assert_eq!(funcs[1].params[0].space, StateSpace::Reg);
    assert_eq!(funcs[1].params[1].align, Some(8));
    assert!(funcs[1].perf.contains(&PerfDirective::NoReturn));
    let k = funcs[2];
    assert_eq!(k.kind, FunctionKind::Entry);
    assert_eq!(k.params[0].ptr, Some((Some(StateSpace::Global), Some(16))));
    assert_eq!(k.params[1].names[0].dims, vec![Some(24)]);
    assert!(k.perf.contains(&PerfDirective::MaxNtid(vec![256, 1, 1])));
    assert!(k.perf.contains(&PerfDirective::ReqNtid(vec![256])));
    assert!(k.perf.contains(&PerfDirective::MinNctaPerSm(2)));
    assert!(k.perf.contains(&PerfDirective::MaxNreg(64)));

    let body = k.body.as_ref().expect("body");
    let insts: Vec<&Instruction> = body
        .iter()
        .filter_map(|s| match s {
            Statement::Inst(i) => Some(i),
            _ => None,
        })
        .collect();
    assert_eq!(insts[0].opcode, "mov");
    assert!(matches!(&insts[0].operands[1], Operand::Name { name, component: Some(b'x'), .. } if name == "%tid"));
    assert!(matches!(insts[1].operands[1], Operand::Float(_, FloatImm::F32Bits(0x3F80_0000))));
    assert!(matches!(insts[2].operands[1], Operand::Float(_, FloatImm::Decimal(v)) if v == 1.5));
    assert!(matches!(&insts[3].operands[1], Operand::Vector(_, v) if v.len() == 2));
    assert!(matches!(&insts[4].operands[0], Operand::Vector(_, v) if v.len() == 2));
    assert!(
        matches!(&insts[5].operands[1], Operand::Address(_, Address { base: Some((_, b)), offset: 0 }) if b == "p")
    );
    assert!(matches!(&insts[6].operands[1], Operand::Address(_, Address { offset: 8, .. })));
    let Operand::Vector(_, v) = &insts[7].operands[0] else { panic!("vector destination") };
    assert!(matches!(v[3], Operand::Sink(_)));
    assert_eq!(insts[7].modifiers.as_slice(), ["global", "v4", "u32"]);
    assert!(matches!(&insts[8].operands[1], Operand::Address(_, Address { offset: -4, .. })));
    assert!(matches!(&insts[10].operands[1], Operand::Address(_, Address { base: None, offset: 0x100 })));
    assert!(matches!(&insts[11].operands[0], Operand::Pair(..)));
    assert!(matches!(insts[11].operands[2], Operand::Int(_, -7)));
    let g = insts[12].guard.as_ref().expect("guard");
    assert!(!g.negated);
    let g = insts[13].guard.as_ref().expect("guard");
    assert!(g.negated);
    assert!(matches!(insts[13].operands[2], Operand::Int(_, 0xFFFF_FFFF)));
    assert!(body.iter().any(|s| matches!(s, Statement::Block(_))));
    assert!(body.iter().any(|s| matches!(s, Statement::Label(_, l) if l == "$L__exit")));
}

#[test]
fn spans_point_at_source() {
    let m = parse::run(MODULE).expect("parses");
    let ModuleItem::Function(k) = &m.items.last().expect("items") else { panic!() };
    let Some(Statement::Inst(i)) = k.body.as_ref().and_then(|b| b.iter().find(|s| matches!(s, Statement::Inst(_))))
    else {
        panic!()
    };
    let text = &MODULE[i.span.start as usize..i.span.end as usize];
    assert_eq!(text, "mov.u32 %r1, %tid.x");
    let op = i.operands[1].span();
    assert_eq!(&MODULE[op.start as usize..op.end as usize], "%tid.x");
}

#[test]
fn integer_literals() {
    assert_eq!(parse::parse_int("0x1F"), Some(31));
    assert_eq!(parse::parse_int("0b101"), Some(5));
    assert_eq!(parse::parse_int("017"), Some(15));
    assert_eq!(parse::parse_int("42U"), Some(42));
    assert_eq!(parse::parse_int("-8"), Some(-8));
    assert_eq!(parse::parse_int("0"), Some(0));
    assert_eq!(parse::parse_int("0xFFFFFFFFFFFFFFFF"), Some(u64::MAX as i128));
    assert_eq!(parse::parse_int("0x1FFFFFFFFFFFFFFFF"), None);
}

/// The instructions of the first function of a checked module.
fn checked_instructions(src: &str) -> Vec<Instruction> {
    let m = ptxvk_translator::front_end(src, "t.ptx").unwrap_or_else(|d| panic!("{d}"));
    let f = m
        .items
        .iter()
        .find_map(|i| match i {
            ModuleItem::Function(f) => Some(f),
            _ => None,
        })
        .expect("a function");
    f.body
        .as_ref()
        .expect("a body")
        .iter()
        .filter_map(|s| match s {
            Statement::Inst(i) => Some(i.clone()),
            _ => None,
        })
        .collect()
}

const HEADER: &str = ".version 8.0\n.target sm_90\n.address_size 64\n";

/// `elect.sync _|p, mask` (nvcc's output for `elect.sync` with an unused
/// lane number): a sink may be the first half of a pair.
#[test]
fn sink_pair_destination() {
    let src = format!(
        "{HEADER}.visible .entry k() {{\n .reg .pred p;\n .reg .b32 r;\n elect.sync _|p, 0xffffffff;\n \
         elect.sync r|p, -1;\n ret;\n}}\n"
    );
    let insts = checked_instructions(&src);
    let Operand::Pair(_, a, b) = &insts[0].operands[0] else { panic!("{:?}", insts[0].operands[0]) };
    assert!(matches!(**a, Operand::Sink(_)), "{a:?}");
    assert!(matches!(&**b, Operand::Name { name, .. } if name == "p"), "{b:?}");
    assert!(insts[0].decoded.is_some());
    assert!(matches!(&insts[1].operands[0], Operand::Pair(_, a, _) if matches!(**a, Operand::Name { .. })));
}

/// `var[imm]` (6.4.2, "Arrays as Operands"): element `imm` of an array,
/// scaled by the array's scalar size (what `ptxas` does: for `.v2 .u32`
/// elements count 4 bytes): an address in `ld`/`st`, the element's address
/// in `mov`.
#[test]
fn array_element_operands() {
    let src = format!(
        "{HEADER}.global .align 8 .u64 b[16];\n.global .b8 c[64];\n.global .align 16 .v2 .u32 v[4];\n\
         .const .align 4 .f32 tbl[8];\n\
         .visible .entry k(.param .u64 out) {{\n .reg .b32 %r<4>;\n .reg .b64 %rd<4>;\n\
         ld.global.u32 %r1, b[3];\n ld.global.u32 %r2, c [ 3 ];\n ld.global.u32 %r3, v[3];\n\
         ld.const.f32 %r1, tbl[1+2];\n st.global.u64 b[0x2], %rd1;\n mov.u64 %rd2, b[1];\n\
         mov.u64 %rd3, tbl[-1];\n ret;\n}}\n"
    );
    let insts = checked_instructions(&src);
    let addr = |i: usize, op: usize| match &insts[i].operands[op] {
        Operand::Address(_, a) => (a.base.as_ref().map(|(_, n)| n.to_string()).unwrap_or_default(), a.offset),
        other => panic!("instruction {i}: expected an address, got {other:?}"),
    };
    assert_eq!(addr(0, 1), ("b".to_string(), 24));
    assert_eq!(addr(1, 1), ("c".to_string(), 3));
    assert_eq!(addr(2, 1), ("v".to_string(), 12));
    assert_eq!(addr(3, 1), ("tbl".to_string(), 12));
    assert_eq!(addr(4, 0), ("b".to_string(), 16));
    let sym = |i: usize| match &insts[i].operands[1] {
        Operand::SymbolOffset(_, n, off) => (n.to_string(), *off),
        other => panic!("instruction {i}: expected a symbol offset, got {other:?}"),
    };
    assert_eq!(sym(5), ("b".to_string(), 8));
    assert_eq!(sym(6), ("tbl".to_string(), -4));
    assert!(insts.iter().all(|i| i.decoded.is_some()));
}

/// Array-element operands that are not: a register indexed, a missing
/// `]`, an index that is not a constant.
#[test]
fn array_element_errors() {
    for (body, want) in [
        ("ld.global.u32 %r1, %r2[1];", "cannot be indexed"),
        ("ld.global.u32 %r1, c[1;", "expected ']'"),
        ("ld.global.u32 %r1, c[%r2];", "integer"),
        ("ld.global.u32 %r1, nope[1];", "unknown name 'nope'"),
    ] {
        let src =
            format!("{HEADER}.global .b8 c[64];\n.visible .entry k() {{\n .reg .b32 %r<4>;\n {body}\n ret;\n}}\n");
        let err = ptxvk_translator::front_end(&src, "t.ptx").err().unwrap_or_else(|| panic!("{body} accepted"));
        let text = err.to_string();
        assert!(text.contains(want), "{body}: expected '{want}' in:\n{text}");
    }
}

/// `and`/`or`/`xor.pred` take negated predicate sources (`ptxas` accepts
/// them; `shaders/tma.ptx` uses them); `!` on a non-predicate is an error.
#[test]
fn negated_logic_sources() {
    let src = format!(
        "{HEADER}.visible .entry k() {{\n .reg .pred %p<4>;\n .reg .b32 %r<3>;\n and.pred %p1, %p2, !%p3;\n \
         or.pred %p1, !%p2, %p3;\n xor.pred %p1, !%p2, !%p3;\n ret;\n}}\n"
    );
    let insts = checked_instructions(&src);
    assert!(matches!(insts[0].operands[2], Operand::Not(..)));
    assert!(insts.iter().all(|i| i.decoded.is_some()));
    let bad = format!("{HEADER}.visible .entry k() {{\n .reg .b32 %r<3>;\n and.b32 %r1, %r2, !%r0;\n ret;\n}}\n");
    let err = ptxvk_translator::front_end(&bad, "t.ptx").expect_err("'!' on a .b32 operand accepted");
    assert!(err.to_string().contains("negates only predicates"), "{err}");
}

/// The statements the body scanner takes by hand and those it hands to the
/// grammar (`.pragma`, initializers, prototypes, target lists) build the same
/// tree, with spans in the source, after collapsed bodies, parameter lists
/// and long names.
#[test]
fn body_statements_and_fallbacks() {
    let long = "_Z".to_string() + &"x".repeat(300);
    let src = format!(
        r#".version 8.0
.target sm_80
.address_size 64
.file 1 "/a/rather/long/path/to/the/source/file.cu"
.section .debug_str {{ .b8 1, 2 }}
.visible .func (.param .b32 r) {long}(.param .u64 {long}_p0, // a comment (with parens)
    .param .align 8 .b8 s[16])
{{
    .reg .b32 %r<3>, %q ;
    .local .align 4 .b8 depot[8][2];
    .local .u32 init = 5;
    /* a {{ comment }} */
    .pragma "nounroll";
    .loc 1 2 3
    // }}
    ld.param.u32 %r1, [{long}_p0];
L1 :
    {{ .reg .pred %p; setp.eq.u32 %p, %r1, 0; @%p bra L1; }}
    proto: .callprototype (.param .b32 _) _ (.param .b32 _);
    ts: .branchtargets L1, L2;
L2:
    st.param.b32 [r], %r1;
    ret;
}}
.global .u32 after;
"#
    );
    let m = parse::run(&src).unwrap_or_else(|d| panic!("{d:?}"));
    let f = m
        .items
        .iter()
        .find_map(|i| match i {
            ModuleItem::Function(f) => Some(f),
            _ => None,
        })
        .expect("a function");
    assert_eq!(f.name, long);
    assert_eq!(f.returns.len(), 1);
    assert_eq!(f.params.len(), 2);
    assert_eq!(f.params[0].names[0].name, format!("{long}_p0"));
    assert_eq!(f.params[1].align, Some(8));
    assert_eq!(f.params[1].names[0].dims, vec![Some(16)]);
    let at = |s: Span| &src[s.start as usize..s.end as usize];
    assert_eq!(at(f.params[1].names[0].span), "s[16]");
    let body = f.body.as_ref().expect("a body");
    let kinds: Vec<&str> = body
        .iter()
        .map(|s| match s {
            Statement::Label(..) => "label",
            Statement::Decl(_) => "decl",
            Statement::Inst(_) => "inst",
            Statement::Block(_) => "block",
            Statement::Prototype(..) => "proto",
            Statement::TargetList { .. } => "targets",
        })
        .collect();
    assert_eq!(kinds, ["decl", "decl", "decl", "inst", "label", "block", "proto", "targets", "label", "inst", "inst"]);
    let Statement::Decl(regs) = &body[0] else { panic!() };
    assert_eq!(regs.names.len(), 2);
    assert_eq!(regs.names[0].count, Some(3));
    assert_eq!(at(regs.span), ".reg .b32 %r<3>, %q");
    let Statement::Decl(depot) = &body[1] else { panic!() };
    assert_eq!((depot.space, depot.align), (StateSpace::Local, Some(4)));
    assert_eq!(depot.names[0].dims, vec![Some(8), Some(2)]);
    let Statement::Decl(init) = &body[2] else { panic!() };
    assert!(init.init.is_some());
    assert!(at(init.span).starts_with(".local .u32 init = 5"));
    let Statement::Inst(ld) = &body[3] else { panic!() };
    assert_eq!(at(ld.span), format!("ld.param.u32 %r1, [{long}_p0]"));
    let Statement::Label(span, name) = &body[4] else { panic!() };
    assert_eq!((name.as_str(), at(*span)), ("L1", "L1 :"));
    let Statement::Block(inner) = &body[5] else { panic!() };
    assert_eq!(inner.len(), 3);
    let Statement::Prototype(_, name, rest) = &body[6] else { panic!() };
    assert_eq!((name.as_str(), rest.as_str()), ("proto", "(.param .b32 _) _ (.param .b32 _)"));
    let Statement::TargetList { name, calls, targets, .. } = &body[7] else { panic!() };
    assert_eq!((name.as_str(), *calls, targets.clone()), ("ts", false, vec!["L1".to_string(), "L2".to_string()]));
    let Some(ModuleItem::Variable(after)) = m.items.last() else { panic!("the variable after the function") };
    assert_eq!(at(after.span).trim_end(), ".global .u32 after");
}

/// Every bad statement of a body is reported in one pass, with its line;
/// a bad parameter list and errors after collapsed bodies point at the
/// right place.
#[test]
fn body_errors_are_located() {
    let long = "k".repeat(200);
    let src = format!(
        ".version 8.0\n.target sm_80\n.address_size 64\n\
         .visible .entry {long}(.param .u64 a)\n{{\n  .reg .b32 %r<2>;\n  %bad stuff;\n  .reg .b32;\n  mov.u32 %r1 %r0;\n  .bogus 1;\n  ret;\n}}\n\
         .visible .entry g(.param .u64 a, .param b)\n{{\n  ret;\n}}\n\
         .global .u32 x y;\n"
    );
    let Err(d) = ptxvk_translator::check_syntax(&src, "k.ptx") else { panic!("expected errors") };
    let text = d.to_string();
    for want in [
        "k.ptx:7:3: error: syntax error at '%bad'",
        "k.ptx:8:12: error: syntax error",
        "k.ptx:9:15: error",
        "k.ptx:10:3: error",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    assert!(text.contains("k.ptx:13:"), "the parameter list\n{text}");
    assert!(text.contains("k.ptx:17:"), "the variable after the bodies\n{text}");
}
