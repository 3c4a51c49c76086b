//! The coverage table `docs/coverage.md`, generated from the code so that
//! it cannot drift: for every form of the instruction table (`isa/ptx.isa`)
//! a small kernel is built from the form's syntax, run through the front
//! end (parse, decode, type checks) and through the real translator, and
//! the outcome recorded; directives get hand-written samples. The rendered
//! markdown is compared with the checked-in file.
//!
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p ptxvk-translator --test coverage`.

use ptxvk_translator::ast::ScalarType;
use ptxvk_translator::isa::raw::Shape;
use ptxvk_translator::isa::table::{Form, OperandSpec, TypeRule};
use ptxvk_translator::isa::{self, Group, Mod};
use ptxvk_translator::{front_end, translate, Options};
use std::fmt::Write;

/// Registers declared in every sample, by type.
/// The sample kernel's registers, and shared memory for instructions that
/// read it through descriptors (`wgmma`).
const DECLS: &str = "    .shared .align 1024 .b8 smem[1024];\n    .reg .pred %p<8>;\n    .reg .b16 %rs<16>;\n    .reg .b32 %r<64>;\n    .reg .f32 %f<16>;\n    .reg .b64 %rd<16>;\n    .reg .f64 %fd<16>;\n";

/// A register name of type `t` (the `k`-th one).
fn reg(t: Option<ScalarType>, k: usize) -> String {
    use ScalarType::*;
    match t {
        Some(Pred) => format!("%p{}", 1 + k % 7),
        Some(S8 | U8 | B8 | S16 | U16 | B16 | F16 | Bf16) => format!("%rs{}", 1 + k % 15),
        Some(F32) => format!("%f{}", 1 + k % 15),
        Some(S64 | U64 | B64 | F32x2) => format!("%rd{}", 2 + k % 14),
        Some(F64) => format!("%fd{}", 1 + k % 15),
        _ => format!("%r{}", 1 + k % 63),
    }
}

/// The preferred alternative of a required group.
fn pick(alts: &[Vec<Mod>]) -> usize {
    for want in ["u32", "b32", "s32", "f32"] {
        if let Some(i) = alts.iter().position(|a| a.len() == 1 && a[0].name() == want) {
            return i;
        }
    }
    0
}

/// A sample instruction for a form: its required modifiers (preferred
/// alternatives) and operands.
fn sample(form: &Form) -> String {
    let mut mnemonic = form.opcode.name().to_string();
    let mut chosen: Vec<(Option<Group>, &[Mod])> = Vec::new();
    for e in &form.elems {
        if e.optional {
            continue;
        }
        let alt = &e.alts[pick(&e.alts)];
        for m in alt {
            mnemonic.push('.');
            mnemonic.push_str(m.name());
        }
        chosen.push((e.group, alt));
    }
    let types: Vec<ScalarType> =
        chosen.iter().flat_map(|(_, a)| a.iter()).filter_map(|m| ScalarType::from_name(m.name())).collect();
    let last_type = types.last().copied();
    let type_of = |spec: &OperandSpec| -> Option<ScalarType> {
        match spec.ty {
            // Unchecked operands: the destination gets the first type, the
            // sources the last (`cvt.rn.f16.f32 d, a`).
            TypeRule::Any if spec.name == "d" => types.first().copied(),
            TypeRule::Any => last_type,
            TypeRule::Fixed(t) => Some(t),
            TypeRule::Inst => last_type,
            TypeRule::Group { group, .. } => chosen
                .iter()
                .find(|(g, _)| *g == Some(group))
                .and_then(|(_, a)| a.first())
                .and_then(|m| ScalarType::from_name(m.name())),
            _ => None,
        }
    };
    let lanes = |spec: &OperandSpec| -> Option<usize> {
        let g = spec.vector?;
        let (_, alt) = chosen.iter().find(|(x, _)| *x == Some(g))?;
        alt.first()?.name().strip_prefix('v')?.parse().ok()
    };
    let mut ops = Vec::new();
    for (k, spec) in form.operands.iter().filter(|o| !o.optional).enumerate() {
        let t = type_of(spec);
        let op = match spec.shape {
            Shape::Memory => "[%rd1]".to_string(),
            Shape::Bracket { min, .. } => {
                let rest: Vec<String> = (1..min as usize).map(|i| reg(None, 40 + i)).collect();
                format!("[%rd1, {{{}}}]", rest.join(", "))
            }
            Shape::Vector(n) => {
                let v: Vec<String> = (0..n as usize).map(|i| reg(t, 20 + i)).collect();
                format!("{{{}}}", v.join(", "))
            }
            Shape::List => format!("({})", reg(None, 30)),
            Shape::Sink => "_".to_string(),
            Shape::Literal(v) => v.to_string(),
            Shape::Plain => match spec.ty {
                TypeRule::Imm => "1".to_string(),
                TypeRule::Label => "L".to_string(),
                _ if spec.pair == Some(true) => format!("{}|%p7", reg(t, k)),
                _ => match lanes(spec) {
                    Some(n) => {
                        let v: Vec<String> = (0..n).map(|i| reg(t, 10 + 2 * k + i)).collect();
                        format!("{{{}}}", v.join(", "))
                    }
                    None => reg(t, k),
                },
            },
        };
        let op = if spec.selector == Some(true) { format!("{op}.b0") } else { op };
        ops.push(op);
    }
    if mnemonic.starts_with("wgmma.mma_async") {
        let names: Vec<&str> = form.operands.iter().filter(|o| !o.optional).map(|o| o.name.as_ref()).collect();
        if let Some(w) = wgmma_operands(&mnemonic, &names) {
            ops = w;
        }
    }
    if let Some(frags) = mma_fragments(&mnemonic) {
        for (op, frag) in ops.iter_mut().zip(frags) {
            *op = frag;
        }
    }
    texture_operands(&mnemonic, &mut ops);
    if ops.is_empty() {
        mnemonic
    } else {
        format!("{mnemonic} {}", ops.join(", "))
    }
}

/// The operands of a `wgmma.mma_async` sample, by name: D with the ISA's
/// register count (N/2 f32 or s32, N/4 f16x2), descriptors, four A
/// registers, the metadata register, selector 0, a scale-d predicate and
/// immediates 1.
fn wgmma_operands(mnemonic: &str, names: &[&str]) -> Option<Vec<String>> {
    let mods: Vec<&str> = mnemonic.split('.').collect();
    let n: usize = mods.iter().find_map(|m| m.strip_prefix("m64n")?.split_once('k')?.0.parse().ok())?;
    let dtype = *mods.iter().find(|m| matches!(**m, "f16" | "f32" | "s32"))?;
    let (count, t) = match dtype {
        "f32" => (n / 2, Some(ScalarType::F32)),
        "s32" => (n / 2, None),
        _ => (n / 4, None),
    };
    let regs = |t: Option<ScalarType>, count: usize, base: usize| -> String {
        let v: Vec<String> = (0..count).map(|i| reg(t, base + i)).collect();
        format!("{{{}}}", v.join(", "))
    };
    names
        .iter()
        .map(|name| {
            Some(match *name {
                "d" => regs(t, count, 0),
                "a" => regs(None, 4, 40),
                "a-desc" => "%rd2".to_string(),
                "b-desc" => "%rd3".to_string(),
                "sp-meta" => reg(None, 50),
                "sp-sel" => "0".to_string(),
                "scale-d" => "%p1".to_string(),
                n if n.starts_with("imm-") => "1".to_string(),
                _ => return None,
            })
        })
        .collect()
}

/// Texture and surface samples: `tex`/`tld4` write a vector (four
/// registers, two for `.f16x2`), and coordinates and gradients have as many
/// elements as the geometry (`{layer, x}` for `a1d`, four for 3D, layered 2D
/// and cubes; the types of `.ctype`).
fn texture_operands(mnemonic: &str, ops: &mut [String]) {
    let m: Vec<&str> = mnemonic.split('.').collect();
    if !matches!(m[0], "tex" | "tld4" | "suld" | "sust" | "sured") {
        return;
    }
    let Some(geom) =
        m.iter().find(|x| matches!(**x, "1d" | "2d" | "3d" | "a1d" | "a2d" | "cube" | "acube" | "2dms" | "a2dms"))
    else {
        return;
    };
    let n = match *geom {
        "1d" => 1,
        "2d" | "a1d" => 2,
        _ => 4,
    };
    let texture = matches!(m[0], "tex" | "tld4");
    let float_coords = texture && m.last() == Some(&"f32");
    let coord = |i: usize| if float_coords { format!("%f{}", 1 + i) } else { format!("%r{}", 40 + i) };
    let list = |k: usize| (0..k).map(coord).collect::<Vec<_>>().join(", ");
    for (i, op) in ops.iter_mut().enumerate() {
        if op.starts_with("[%rd1") {
            *op = format!("[%rd1, {{{}}}]", list(n));
        } else if i == 0 && texture {
            let (count, prefix) = if m.contains(&"f16x2") {
                (2, "%r")
            } else if m.contains(&"f32") && m[m.len() - 2] == "f32" {
                (4, "%f")
            } else {
                (4, "%r")
            };
            *op = format!("{{{}}}", (0..count).map(|k| format!("{prefix}{}", 20 + k)).collect::<Vec<_>>().join(", "));
        } else if texture && m.contains(&"grad") && i >= 2 {
            let dims = match *geom {
                "1d" | "a1d" => 1,
                "2d" | "a2d" => 2,
                _ => 4,
            };
            *op = format!("{{{}}}", (0..dims).map(|k| format!("%f{}", 10 + k)).collect::<Vec<_>>().join(", "));
        }
    }
}

/// The fragment operands (d, a, b, c) of a dense `mma` sample: registers per
/// thread as the ISA counts them (M·K/32 A elements, K·N/32 B, M·N/32 C/D,
/// packed 32 bits to a register; f64 one to a register).
fn mma_fragments(mnemonic: &str) -> Option<Vec<String>> {
    let mods: Vec<&str> = mnemonic.split('.').collect();
    if mods[0] == "wmma" {
        return wmma_fragments(&mods);
    }
    let sparse = mods[0] == "mma" && (mods[1] == "sp" || mods[1].starts_with("sp::"));
    if mods[0] != "mma" || (mods[1] != "sync" && !sparse) {
        return None;
    }
    let shape = mods.iter().find_map(|m| {
        let (m_, rest) = m.strip_prefix('m')?.split_once('n')?;
        let (n_, k_) = rest.split_once('k')?;
        Some((m_.parse::<usize>().ok()?, n_.parse::<usize>().ok()?, k_.parse::<usize>().ok()?))
    })?;
    let (m, n, k) = shape;
    let bits = |t: &str| -> Option<usize> {
        Some(match t {
            "f64" => 64,
            "f32" | "s32" | "tf32" => 32,
            "f16" | "bf16" => 16,
            "s8" | "u8" | "e4m3" | "e5m2" => 8,
            "s4" | "u4" => 4,
            "b1" => 1,
            _ => return None,
        })
    };
    let types: Vec<&str> = mods.iter().copied().filter(|t| bits(t).is_some()).collect();
    let [d, a, _, c] = types.as_slice() else { return None };
    let per_reg = |t: &str| if t == "f64" { 1 } else { 32 / bits(t).unwrap_or(32) };
    let ty = |t: &str| match t {
        "f32" => Some(ScalarType::F32),
        "f64" => Some(ScalarType::F64),
        _ => None,
    };
    let vec = |t: &str, count: usize, base: usize| -> String {
        let v: Vec<String> = (0..count).map(|i| reg(ty(t), base + i)).collect();
        format!("{{{}}}", v.join(", "))
    };
    if (m, n, k) == (8, 8, 4) && *a == "f16" {
        // The quad-pair form: A and B 2 registers, C/D 8 elements.
        let acc = |t: &str| if t == "f16" { 4 } else { 8 };
        return Some(vec![vec(d, acc(d), 0), vec(a, 2, 4), vec(a, 2, 12), vec(c, acc(c), 8)]);
    }
    let acc = |t: &str| m * n / 32 / per_reg(t).min(2);
    let ab = |count: usize| count / (32 * per_reg(a));
    if sparse {
        // A compressed to M·K/2; then the metadata register and selector 0.
        return Some(vec![
            vec(d, acc(d), 0),
            vec(a, ab(m * k / 2), 4),
            vec(a, ab(k * n), 12),
            vec(c, acc(c), 8),
            reg(None, 30),
            "0".to_string(),
        ]);
    }
    Some(vec![vec(d, acc(d), 0), vec(a, ab(m * k), 4), vec(a, ab(k * n), 12), vec(c, acc(c), 8)])
}

/// The operands of a `wmma` sample with the ISA's fragment register counts
/// (f16 A/B: 8; other A/B: M·K/32 (K·N/32) elements packed 32 bits to a
/// register; C/D: M·N/32 elements, two to a register for f16).
fn wmma_fragments(mods: &[&str]) -> Option<Vec<String>> {
    let (m, n, k) = mods.iter().find_map(|x| {
        let (m_, rest) = x.strip_prefix('m')?.split_once('n')?;
        let (n_, k_) = rest.split_once('k')?;
        Some((m_.parse::<usize>().ok()?, n_.parse::<usize>().ok()?, k_.parse::<usize>().ok()?))
    })?;
    let bits = |t: &str| -> Option<usize> {
        Some(match t {
            "f64" => 64,
            "f32" | "s32" | "tf32" => 32,
            "f16" | "bf16" => 16,
            "s8" | "u8" => 8,
            "s4" | "u4" => 4,
            "b1" => 1,
            _ => return None,
        })
    };
    let types: Vec<&str> = mods.iter().copied().filter(|t| bits(t).is_some()).collect();
    let ab = |t: &str, elems: usize| {
        if t == "f16" {
            8
        } else if t == "f64" {
            elems / 32
        } else {
            elems * bits(t).unwrap_or(32) / 1024
        }
    };
    let cd = |t: &str| if t == "f16" { m * n / 64 } else { m * n / 32 };
    let ty = |t: &str| match t {
        "f32" => Some(ScalarType::F32),
        "f64" => Some(ScalarType::F64),
        _ => None,
    };
    let vec = |t: &str, count: usize, base: usize| -> String {
        let v: Vec<String> = (0..count.max(1)).map(|i| reg(ty(t), base + i)).collect();
        format!("{{{}}}", v.join(", "))
    };
    let last = *types.last()?;
    match mods.get(1).copied() {
        Some("load") => {
            let count = match mods.get(2).copied() {
                Some("a") => ab(last, m * k),
                Some("b") => ab(last, k * n),
                _ => cd(last),
            };
            Some(vec![vec(last, count, 0), "[%rd1]".to_string()])
        }
        Some("store") => Some(vec!["[%rd1]".to_string(), vec(last, cd(last), 0)]),
        _ => {
            // wmma.mma: .dtype.ctype (f16 A/B implied) or .dtype.atype.btype.ctype.
            let (d, a, c) = match types.as_slice() {
                [d, c] => (*d, "f16", *c),
                [d, a, _, c] => (*d, *a, *c),
                _ => return None,
            };
            Some(vec![vec(d, cd(d), 0), vec(a, ab(a, m * k), 10), vec(a, ab(a, k * n), 20), vec(c, cd(c), 30)])
        }
    }
}

fn kernel(body: &str) -> String {
    format!(
        ".version 8.7\n.target sm_90a\n.address_size 64\n\n.visible .entry k(.param .u64 p)\n{{\n{DECLS}    ld.param.u64 %rd1, [p];\n{body}\nL:\n    ret;\n}}\n"
    )
}

/// Outcome of one sample: (front end, translation).
fn outcome(src: &str) -> (String, String) {
    let parse = match front_end(src, "sample.ptx") {
        Ok(_) => "yes".to_string(),
        Err(d) => return (format!("no: {}", first_message(&d)), "—".to_string()),
    };
    let tr = match translate(src, "sample.ptx", &Options::default()) {
        Ok(_) => "yes".to_string(),
        Err(d) => {
            let m = first_message(&d);
            if m.starts_with("unsupported") {
                format!("no: {m}")
            } else {
                format!("error: {m}")
            }
        }
    };
    (parse, tr)
}

fn first_message(d: &ptxvk_translator::Diagnostics) -> String {
    let m = d.items.first().map(|i| i.message.clone()).unwrap_or_default();
    let m = m.replace('|', "\\|").replace('`', "'");
    if m.chars().count() > 120 {
        format!("{}…", m.chars().take(120).collect::<String>())
    } else {
        m
    }
}

/// Directive samples: name, what it is, a module using it.
fn directives() -> Vec<(&'static str, &'static str, String)> {
    let head = ".version 8.7\n.target sm_90a\n.address_size 64\n";
    let entry =
        |attrs: &str, body: &str| format!("{head}.visible .entry k(.param .u64 p){attrs}\n{{\n{body}\n    ret;\n}}\n");
    vec![
        (".version", "PTX ISA version", entry("", "")),
        (".target", "target architecture and platform options", entry("", "")),
        (".address_size", "address size of the module", entry("", "")),
        (".entry", "kernel entry point and body", entry("", "")),
        (
            ".func",
            "device function",
            format!("{head}.func (.param .b32 r) f(.param .b32 a)\n{{\n    .reg .b32 %r<2>;\n    ld.param.b32 %r1, [a];\n    st.param.b32 [r], %r1;\n    ret;\n}}\n.visible .entry k()\n{{\n    .reg .b32 %r<2>;\n    {{\n    .param .b32 a0;\n    .param .b32 r0;\n    st.param.b32 [a0], 1;\n    call (r0), f, (a0);\n    ld.param.b32 %r1, [r0];\n    }}\n    ret;\n}}\n"),
        ),
        (".alias", "function alias", format!("{head}.func f()\n{{\n    ret;\n}}\n.func g();\n.alias g, f;\n")),
        (
            ".callprototype",
            "indirect call prototype",
            format!("{head}.func f()\n{{\n    ret;\n}}\n.visible .entry k()\n{{\n    .reg .b64 %rd<2>;\n    mov.u64 %rd1, f;\n    proto: .callprototype ()_ ();\n    call %rd1, proto;\n    ret;\n}}\n"),
        ),
        (
            ".branchtargets",
            "list of brx.idx targets",
            entry("", "    .reg .b32 %r<2>;\n    mov.u32 %r1, 0;\n    ts: .branchtargets L0, L1;\n    brx.idx %r1, ts;\nL0:\n    bra.uni L1;\nL1:"),
        ),
        (
            ".calltargets",
            "list of indirect call targets",
            format!("{head}.func f()\n{{\n    ret;\n}}\n.visible .entry k()\n{{\n    .reg .b64 %rd<2>;\n    mov.u64 %rd1, f;\n    ct: .calltargets f;\n    call %rd1, ct;\n    ret;\n}}\n"),
        ),
        (".file", "source file name", format!("{head}.file 1 \"k.cu\"\n.visible .entry k()\n{{\n    ret;\n}}\n")),
        (".loc", "source line", entry("", "    .loc 1 2 3")),
        (".section", "debug section", format!("{head}.visible .entry k()\n{{\n    ret;\n}}\n.section .debug_info {{ .b32 0 }}\n")),
        (".pragma", "compiler directive", entry("", "    .pragma \"nounroll\";")),
        (".maxnreg", "most registers per thread", entry("\n.maxnreg 32", "")),
        (".maxntid", "most threads per CTA", entry("\n.maxntid 128, 1, 1", "")),
        (".reqntid", "required threads per CTA", entry("\n.reqntid 128, 1, 1", "")),
        (".minnctapersm", "least CTAs per SM", entry("\n.maxntid 128\n.minnctapersm 2", "")),
        (".maxnctapersm", "most CTAs per SM (deprecated)", entry("\n.maxnctapersm 2", "")),
        (".noreturn", "function does not return", format!("{head}.func f() .noreturn\n{{\n    trap;\n}}\n.visible .entry k()\n{{\n    ret;\n}}\n")),
        (".explicitcluster", "kernel must be launched with a cluster", entry("\n.explicitcluster", "")),
        (".reqnctapercluster", "required CTAs per cluster", entry("\n.reqnctapercluster 2, 1, 1", "")),
        (".maxclusterrank", "most CTAs per cluster", entry("\n.maxclusterrank 8", "")),
        (".blocksareclusters", "each CTA is a cluster", entry("\n.blocksareclusters", "")),
        (
            ".abi_preserve",
            "registers a callee preserves",
            format!("{head}.func f() .abi_preserve 16 .abi_preserve_control 2\n{{\n    ret;\n}}\n.visible .entry k()\n{{\n    call f;\n    ret;\n}}\n"),
        ),
        (".reg", "register variables", entry("", "    .reg .b32 %r<4>;\n    mov.u32 %r1, 1;")),
        (".sreg", "special registers", entry("", "    .reg .b32 %r<2>;\n    mov.u32 %r1, %tid.x;")),
        (".const", "constant memory", format!("{head}.const .align 4 .b32 c[2] = {{1, 2}};\n.visible .entry k()\n{{\n    .reg .b32 %r<2>;\n    ld.const.u32 %r1, [c+4];\n    ret;\n}}\n")),
        (".global", "global memory", format!("{head}.global .align 4 .b32 g[2];\n.visible .entry k()\n{{\n    st.global.u32 [g], 1;\n    ret;\n}}\n")),
        (".local", "local memory", entry("", "    .local .align 4 .b8 l[16];\n    st.local.u32 [l], 1;")),
        (".param", "parameters", entry("", "    .reg .b64 %rd<2>;\n    ld.param.u64 %rd1, [p];")),
        (".shared", "shared memory", entry("", "    .shared .align 4 .b8 s[16];\n    st.shared.u32 [s], 1;")),
        (".tex", "texture memory (deprecated)", format!("{head}.tex .u32 t;\n.visible .entry k()\n{{\n    ret;\n}}\n")),
        (".extern", "external symbol", format!("{head}.extern .shared .align 16 .b8 dyn[];\n.visible .entry k()\n{{\n    st.shared.u32 [dyn], 1;\n    ret;\n}}\n")),
        (".visible", "externally visible symbol", entry("", "")),
        (".weak", "weak symbol", format!("{head}.weak .global .align 4 .b32 w;\n.visible .entry k()\n{{\n    ret;\n}}\n")),
        (".common", "common symbol", format!("{head}.common .global .align 4 .b32 w;\n.visible .entry k()\n{{\n    ret;\n}}\n")),
        (".align", "alignment", format!("{head}.global .align 16 .b8 a[16];\n.visible .entry k()\n{{\n    ret;\n}}\n")),
        (".ptr", "pointer parameter attribute", format!("{head}.visible .entry k(.param .u64 .ptr .global .align 16 p)\n{{\n    ret;\n}}\n")),
        (
            ".attribute",
            "variable attribute (.managed)",
            format!("{head}.global .attribute(.managed) .align 4 .b32 m;\n.visible .entry k()\n{{\n    ret;\n}}\n"),
        ),
    ]
}

/// The markdown table.
fn render() -> String {
    let t = isa::table();
    let mut rows_by_inst: Vec<Vec<(String, String, String, String)>> = Vec::new();
    let (mut forms, mut parse_ok, mut translate_ok) = (0, 0, 0);
    let mut insts_parse_ok = 0;
    let mut insts_translate_all = 0;
    let mut insts_translate_some = 0;
    for info in &t.instructions {
        let mut rows = Vec::new();
        let (mut p_all, mut t_all, mut t_some) = (true, true, false);
        for &fid in &info.forms {
            let form = &t.forms[fid as usize];
            let inst = sample(form);
            let (p, tr) = outcome(&kernel(&format!("    {inst};")));
            forms += 1;
            if p == "yes" {
                parse_ok += 1;
            } else {
                p_all = false;
            }
            if tr == "yes" {
                translate_ok += 1;
                t_some = true;
            } else {
                t_all = false;
            }
            rows.push((form.syntax.to_string(), inst, p, tr));
        }
        insts_parse_ok += usize::from(p_all);
        insts_translate_all += usize::from(t_all);
        insts_translate_some += usize::from(t_some && !t_all);
        rows_by_inst.push(rows);
    }
    let dirs: Vec<_> = directives().into_iter().map(|(n, what, src)| (n, what, outcome(&src))).collect();
    let dir_parse = dirs.iter().filter(|d| d.2 .0 == "yes").count();
    let dir_tr = dirs.iter().filter(|d| d.2 .1 == "yes").count();

    let mut out = String::new();
    let _ = writeln!(out, "# PTX coverage");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "GENERATED by `translator/tests/coverage.rs`; do not edit. Regenerate with\n`UPDATE_GOLDEN=1 cargo test -p ptxvk-translator --test coverage` (the test fails when this file is stale)."
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Every form of every instruction in the instruction table (`translator/src/isa/ptx.isa`, transcribed from the PTX ISA manual, chapter 9) is instantiated as a one-instruction kernel: the required modifiers (`.u32`, `.b32`, `.s32` or `.f32` where the form allows, else the first listed), no optional modifiers, the required operands as registers of the operand's type. **Parses** is the front end (grammar, decoding against the table, operand type checks, as `ptx2spv --parse-only`); **translates** is the whole translator with default options (`yes`, or the first diagnostic: `no: unsupported ...` for a form the translator does not lower yet, `error: ...` for any other failure). A form that translates in this sample may still be unsupported with other modifiers."
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "## Summary");
    let _ = writeln!(out);
    let _ = writeln!(out, "| | count | parse | translate |");
    let _ = writeln!(out, "|---|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| instructions | {} | {insts_parse_ok} all forms | {insts_translate_all} all forms, {insts_translate_some} some forms |",
        t.instructions.len()
    );
    let _ = writeln!(out, "| forms (syntax lines) | {forms} | {parse_ok} | {translate_ok} |");
    let _ = writeln!(out, "| directives | {} | {dir_parse} | {dir_tr} |", dirs.len());
    let _ = writeln!(out, "| special registers | {} | all | see `emit` |", isa::SpecialRegister::all().len());
    let _ = writeln!(out);
    let _ = writeln!(out, "## Instructions");
    let _ = writeln!(out);
    for (info, rows) in t.instructions.iter().zip(&rows_by_inst) {
        let since = match (info.ptx, info.sm) {
            ("", "") => String::new(),
            (p, s) => format!(" (PTX {p}, sm_{s})"),
        };
        let _ = writeln!(out, "### `{}`{since}", info.name);
        let _ = writeln!(out);
        let _ = writeln!(out, "{}", info.description);
        let _ = writeln!(out);
        let _ = writeln!(out, "| form | sample | parses | translates |");
        let _ = writeln!(out, "|---|---|---|---|");
        for (syntax, inst, p, tr) in rows {
            let syntax = syntax.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
            let inst = inst.replace('|', "\\|");
            let _ = writeln!(out, "| `{syntax}` | `{inst}` | {p} | {tr} |");
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "## Directives");
    let _ = writeln!(out);
    let _ = writeln!(out, "| directive | what | parses | translates |");
    let _ = writeln!(out, "|---|---|---|---|");
    for (name, what, (p, tr)) in &dirs {
        let _ = writeln!(out, "| `{name}` | {what} | {p} | {tr} |");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "## Special registers");
    let _ = writeln!(out);
    let names: Vec<String> = isa::SpecialRegister::all().iter().map(|r| format!("`{}`", r.name())).collect();
    let _ = writeln!(out, "{}", names.join(", "));
    out
}

#[test]
fn coverage_table_is_up_to_date() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/coverage.md");
    let want = render();
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            std::fs::write(&path, &want).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        } else {
            panic!(
                "{} is stale; regenerate with UPDATE_GOLDEN=1 cargo test -p ptxvk-translator --test coverage",
                path.display()
            );
        }
    }
}

/// Every form's sample passes the front end: the table, the decoder and
/// the type rules agree with each other.
#[test]
fn every_form_sample_passes_the_front_end() {
    let t = isa::table();
    let mut bad = String::new();
    for form in &t.forms {
        let inst = sample(form);
        if let Err(d) = front_end(&kernel(&format!("    {inst};")), "sample.ptx") {
            let _ = writeln!(bad, "{} (ptx.isa:{}): {}", inst, form.line, first_message(&d));
        }
    }
    assert!(bad.is_empty(), "{bad}");
}
