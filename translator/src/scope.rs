//! Pass: resolve nested scopes by renaming.
//!
//! PTX declarations inside a `{ ... }` block are visible only there, and nvcc
//! reuses names in sibling blocks (`.param .b32 param0;` in every call
//! sequence), sometimes with different types. This pass gives every
//! declaration a function-unique name (`param0` in a second scope becomes
//! `param0$1`) and rewrites the uses inside its scope, so later passes can
//! treat a function's names as one flat namespace. Parameterized register
//! declarations (`%r<4>`) that need renaming are expanded into single names.

use crate::ast::{Address, Instruction, Operand, Statement, Str, VarDecl, VarName};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// Rename the declarations of a function body. `outer` holds names visible
/// from outside the body (parameters). A body without declarations in nested
/// blocks has nothing to rename and is returned as it is (no copy).
pub fn run<'a>(body: &'a [Statement], outer: &[&str]) -> Cow<'a, [Statement]> {
    if !nested_decls(body, false) {
        return Cow::Borrowed(body);
    }
    let mut used = Used { names: outer.iter().map(|s| s.to_string()).collect(), ranges: HashMap::new() };
    // Names declared at the top level of the body are the function's own;
    // parameterized registers stay ranges (`%r<1000000>` is one entry).
    for st in body {
        if let Statement::Decl(d) = st {
            for n in &d.names {
                match n.count {
                    Some(c) => {
                        let e = used.ranges.entry(n.name.clone()).or_insert(0);
                        *e = (*e).max(c);
                    }
                    None => {
                        used.names.insert(n.name.clone());
                    }
                }
            }
        }
    }
    let mut stack: Vec<HashMap<String, String>> = Vec::new();
    let mut counter = 0u32;
    Cow::Owned(block(body, &mut stack, &mut used, &mut counter, true))
}

/// Whether a block nested in `stmts` (or `stmts` itself, when `nested`)
/// declares anything: only such declarations are renamed.
fn nested_decls(stmts: &[Statement], nested: bool) -> bool {
    stmts.iter().any(|s| match s {
        Statement::Decl(_) => nested,
        Statement::Block(inner) => nested_decls(inner, true),
        _ => false,
    })
}

/// Names in use in a function: single names and parameterized ranges
/// (`%r` with count 100 stands for `%r0` .. `%r99`).
struct Used {
    names: HashSet<String>,
    ranges: HashMap<String, u32>,
}

impl Used {
    fn contains(&self, name: &str) -> bool {
        if self.names.contains(name) {
            return true;
        }
        let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
        (1..=digits).any(|k| {
            let (prefix, index) = name.split_at(name.len() - k);
            (index.len() == 1 || !index.starts_with('0'))
                && matches!((self.ranges.get(prefix), index.parse::<u64>()), (Some(&c), Ok(i)) if i < u64::from(c))
        })
    }

    fn insert(&mut self, name: String) {
        self.names.insert(name);
    }
}

fn expanded(n: &VarName) -> Vec<String> {
    match n.count {
        Some(c) => (0..c.min(1 << 22)).map(|i| format!("{}{i}", n.name)).collect(),
        None => vec![n.name.clone()],
    }
}

fn block(
    stmts: &[Statement],
    stack: &mut Vec<HashMap<String, String>>,
    used: &mut Used,
    counter: &mut u32,
    top: bool,
) -> Vec<Statement> {
    stack.push(HashMap::new());
    let mut out = Vec::with_capacity(stmts.len());
    for s in stmts {
        match s {
            Statement::Decl(d) => out.push(Statement::Decl(declare(d, stack, used, counter, top))),
            Statement::Inst(i) => out.push(Statement::Inst(rename_inst(i, stack))),
            Statement::Block(inner) => out.push(Statement::Block(block(inner, stack, used, counter, false))),
            other => out.push(other.clone()),
        }
    }
    stack.pop();
    out
}

fn declare(
    d: &VarDecl,
    stack: &mut [HashMap<String, String>],
    used: &mut Used,
    counter: &mut u32,
    top: bool,
) -> VarDecl {
    let mut d = d.clone();
    if top {
        // Already in `used`; top-level names keep their names.
        return d;
    }
    let mut names = Vec::new();
    for n in &d.names {
        let all = expanded(n);
        let clash = all.iter().any(|x| used.contains(x));
        if !clash {
            for x in &all {
                used.insert(x.clone());
                if let Some(scope) = stack.last_mut() {
                    scope.insert(x.clone(), x.clone());
                }
            }
            names.push(n.clone());
            continue;
        }
        *counter += 1;
        for x in all {
            let new = format!("{x}${counter}");
            used.insert(new.clone());
            if let Some(scope) = stack.last_mut() {
                scope.insert(x, new.clone());
            }
            names.push(VarName { span: n.span, name: new, count: None, dims: n.dims.clone() });
        }
    }
    d.names = names;
    d
}

fn lookup(stack: &[HashMap<String, String>], name: &str) -> Option<String> {
    stack.iter().rev().find_map(|s| s.get(name)).filter(|n| n.as_str() != name).cloned()
}

fn rename_inst(i: &Instruction, stack: &[HashMap<String, String>]) -> Instruction {
    let mut i = i.clone();
    if let Some(g) = &mut i.guard {
        rename(&mut g.name, stack);
    }
    for op in &mut i.operands {
        rename_operand(op, stack);
    }
    i
}

fn rename(name: &mut Str, stack: &[HashMap<String, String>]) {
    if let Some(n) = lookup(stack, name) {
        *name = n.into();
    }
}

fn rename_operand(op: &mut Operand, stack: &[HashMap<String, String>]) {
    match op {
        Operand::Name { name, .. }
        | Operand::Address(_, Address { base: Some((_, name)), .. })
        | Operand::SymbolOffset(_, name, _)
        | Operand::ArrayElement(_, name, _) => rename(name, stack),
        Operand::Not(_, inner) | Operand::Neg(_, inner) | Operand::Select { base: inner, .. } => {
            rename_operand(inner, stack)
        }
        Operand::Pair(_, a, b) => {
            rename_operand(a, stack);
            rename_operand(b, stack);
        }
        Operand::Vector(_, v) | Operand::List(_, v) | Operand::Bracket(_, v) => {
            for o in v {
                rename_operand(o, stack);
            }
        }
        Operand::TensorAddress(_, a, coords) => {
            if let Some((_, name)) = &mut a.base {
                rename(name, stack);
            }
            for o in coords {
                rename_operand(o, stack);
            }
        }
        Operand::Address(_, Address { base: None, .. }) | Operand::Int(..) | Operand::Float(..) | Operand::Sink(_) => {}
    }
}
