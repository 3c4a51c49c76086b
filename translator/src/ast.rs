//! The PTX abstract syntax tree produced by [`crate::parse`].
//!
//! The tree keeps PTX's own vocabulary. Every node carries the [`Span`] of the
//! source text it came from. Instructions are kept in the ISA's generic shape
//! (opcode, dot-modifiers, operands); [`crate::check`] decodes each against
//! the instruction table ([`crate::isa`]) and records the typed form in
//! [`Instruction::decoded`], so that an unknown instruction or modifier is
//! reported with its name and line rather than rejected by the grammar.

use crate::diag::Span;
pub use crate::short_str::Str;
use smallvec::SmallVec;

/// An instruction's modifiers: a vector that holds up to three in place
/// (nearly all instructions have fewer).
pub type Modifiers = SmallVec<[Str; 3]>;

/// An instruction's operands: a vector that holds up to three in place
/// (the few with more, `mad`, `fma`, `selp`, allocate).
pub type Operands = SmallVec<[Operand; 3]>;

/// A whole PTX module.
#[derive(Clone, Debug, Default)]
pub struct Module {
    /// `.version major.minor`.
    pub version: Option<(u32, u32)>,
    /// `.target` items (`sm_80`, `texmode_independent`, `debug`, ...).
    pub target: Vec<String>,
    /// `.address_size` (64 when absent).
    pub address_size: u32,
    /// Functions and module-scope variables in source order.
    pub items: Vec<ModuleItem>,
    /// `.alias alias, aliasee;` pairs.
    pub aliases: Vec<(Span, String, String)>,
}

/// A module-scope item.
#[derive(Clone, Debug)]
pub enum ModuleItem {
    /// `.entry` or `.func`.
    Function(Function),
    /// A module-scope variable declaration.
    Variable(VarDecl),
}

/// `.visible`, `.extern`, `.weak`, `.common`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linkage {
    /// `.visible`
    Visible,
    /// `.extern`
    Extern,
    /// `.weak`
    Weak,
    /// `.common`
    Common,
}

/// Whether a function is a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionKind {
    /// `.entry`
    Entry,
    /// `.func`
    Func,
}

/// A performance-tuning directive of a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PerfDirective {
    /// `.maxntid x, y, z`
    MaxNtid(Vec<u32>),
    /// `.reqntid x, y, z`
    ReqNtid(Vec<u32>),
    /// `.minnctapersm n`
    MinNctaPerSm(u32),
    /// `.maxnctapersm n`
    MaxNctaPerSm(u32),
    /// `.maxnreg n`
    MaxNreg(u32),
    /// `.maxclusterrank n`
    MaxClusterRank(u32),
    /// `.reqnctapercluster x, y, z`
    ReqNctaPerCluster(Vec<u32>),
    /// `.explicitcluster`
    ExplicitCluster,
    /// `.blocksareclusters`
    BlocksAreClusters,
    /// `.abi_preserve n`: registers the callee must preserve.
    AbiPreserve(u32),
    /// `.abi_preserve_control n`: control registers the callee must preserve.
    AbiPreserveControl(u32),
    /// `.noreturn`
    NoReturn,
    /// `.pragma "..."`
    Pragma(Vec<String>),
}

/// A function definition or declaration.
#[derive(Clone, Debug)]
pub struct Function {
    /// Source span of the header.
    pub span: Span,
    /// Linkage directives.
    pub linkage: Vec<Linkage>,
    /// Kernel or device function.
    pub kind: FunctionKind,
    /// Name.
    pub name: String,
    /// Return parameters (`.func` only).
    pub returns: Vec<VarDecl>,
    /// Parameters.
    pub params: Vec<VarDecl>,
    /// Performance directives.
    pub perf: Vec<PerfDirective>,
    /// Body; `None` for a declaration (prototype).
    pub body: Option<Vec<Statement>>,
}

/// PTX state spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StateSpace {
    /// `.reg`
    Reg,
    /// `.sreg`
    SReg,
    /// `.const`
    Const,
    /// `.global`
    Global,
    /// `.local`
    Local,
    /// `.param`
    Param,
    /// `.shared`
    Shared,
    /// `.tex`
    Tex,
}

impl StateSpace {
    /// The PTX spelling.
    pub fn name(self) -> &'static str {
        match self {
            StateSpace::Reg => ".reg",
            StateSpace::SReg => ".sreg",
            StateSpace::Const => ".const",
            StateSpace::Global => ".global",
            StateSpace::Local => ".local",
            StateSpace::Param => ".param",
            StateSpace::Shared => ".shared",
            StateSpace::Tex => ".tex",
        }
    }
}

/// PTX fundamental types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum ScalarType {
    S8,
    S16,
    S32,
    S64,
    U8,
    U16,
    U32,
    U64,
    B8,
    B16,
    B32,
    B64,
    B128,
    F16,
    F16x2,
    Bf16,
    Bf16x2,
    F32,
    /// Two f32 values in a `.b64` register (`add`/`sub`/`mul`/`fma`,
    /// element 0 in bits 0-31).
    F32x2,
    F64,
    Pred,
}

impl ScalarType {
    /// Parse a type modifier (`"u32"`, without the dot).
    pub fn from_name(s: &str) -> Option<ScalarType> {
        use ScalarType::*;
        Some(match s {
            "s8" => S8,
            "s16" => S16,
            "s32" => S32,
            "s64" => S64,
            "u8" => U8,
            "u16" => U16,
            "u32" => U32,
            "u64" => U64,
            "b8" => B8,
            "b16" => B16,
            "b32" => B32,
            "b64" => B64,
            "b128" => B128,
            "f16" => F16,
            "f16x2" => F16x2,
            "f32x2" => F32x2,
            "bf16" => Bf16,
            "bf16x2" => Bf16x2,
            "f32" => F32,
            "f64" => F64,
            "pred" => Pred,
            _ => return None,
        })
    }

    /// Size in bytes (predicates count as 1).
    pub fn size(self) -> u32 {
        use ScalarType::*;
        match self {
            S8 | U8 | B8 | Pred => 1,
            S16 | U16 | B16 | F16 | Bf16 => 2,
            S32 | U32 | B32 | F32 | F16x2 | Bf16x2 => 4,
            S64 | U64 | B64 | F64 | F32x2 => 8,
            B128 => 16,
        }
    }

    /// Signed integer type.
    pub fn is_signed(self) -> bool {
        matches!(self, ScalarType::S8 | ScalarType::S16 | ScalarType::S32 | ScalarType::S64)
    }

    /// Floating-point type (scalar f16/bf16/f32/f64).
    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32 | ScalarType::F64)
    }
}

/// One declared name: `%r<100>`, `arr[4][8]`, `x`.
#[derive(Clone, Debug)]
pub struct VarName {
    /// Span of the name.
    pub span: Span,
    /// The name.
    pub name: String,
    /// `<N>` parameterized register count.
    pub count: Option<u32>,
    /// Array dimensions (`None` for `[]`).
    pub dims: Vec<Option<u64>>,
}

/// A variable declaration (any state space), also used for parameters.
#[derive(Clone, Debug)]
pub struct VarDecl {
    /// Span of the whole declaration.
    pub span: Span,
    /// Linkage (module scope only).
    pub linkage: Vec<Linkage>,
    /// State space.
    pub space: StateSpace,
    /// `.align N`.
    pub align: Option<u32>,
    /// `.v2`/`.v4`/`.v8`.
    pub vector: Option<u32>,
    /// Element type.
    pub ty: ScalarType,
    /// `.ptr` attribute: pointed-to space and alignment.
    pub ptr: Option<(Option<StateSpace>, Option<u32>)>,
    /// Other attributes, kept verbatim (e.g. `.attribute(.managed)`).
    pub other_attrs: Vec<String>,
    /// Declared names.
    pub names: Vec<VarName>,
    /// Initializer.
    pub init: Option<Initializer>,
}

impl VarDecl {
    /// `.reg .ty names;`, as the passes that write PTX declare their
    /// registers.
    pub fn registers(span: Span, ty: ScalarType, names: &[&str]) -> VarDecl {
        VarDecl {
            span,
            linkage: Vec::new(),
            space: StateSpace::Reg,
            align: None,
            vector: None,
            ty,
            ptr: None,
            other_attrs: Vec::new(),
            names: names.iter().map(|n| VarName { span, name: n.to_string(), count: None, dims: Vec::new() }).collect(),
            init: None,
        }
    }
}

/// A variable initializer.
#[derive(Clone, Debug)]
pub enum Initializer {
    /// `{ a, b, ... }`
    List(Span, Vec<Initializer>),
    /// A constant expression.
    Expr(Span, Vec<(InitSign, InitTerm)>),
    /// `{ name = value, ... }`: the attributes of a `.samplerref` or
    /// `.texref` variable (values are names or integers, as written).
    Fields(Span, Vec<(String, String)>),
}

/// Sign of a term in an initializer expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitSign {
    /// `+`
    Plus,
    /// `-`
    Minus,
}

/// A term of an initializer expression.
#[derive(Clone, Debug)]
pub enum InitTerm {
    /// Integer literal.
    Int(i128),
    /// Float literal as f64 bits, with whether it was written as a 32-bit pattern `0f...`.
    Float(f64, Option<u32>),
    /// Address of a variable.
    Symbol(String),
    /// `generic(var)`.
    Generic(String),
    /// `mask(expr)` — kept as its inner expression.
    Mask(Box<Initializer>),
}

/// A statement in a function body.
#[derive(Clone, Debug)]
pub enum Statement {
    /// `name:`
    Label(Span, Str),
    /// A local declaration.
    Decl(VarDecl),
    /// An instruction.
    Inst(Instruction),
    /// A nested `{ ... }` scope.
    Block(Vec<Statement>),
    /// `name: .callprototype ...` (kept verbatim).
    Prototype(Span, String, String),
    /// `name: .branchtargets L1, L2, ...;` (`calls` false) or
    /// `name: .calltargets f1, f2, ...;` (`calls` true).
    TargetList {
        /// Span.
        span: Span,
        /// The list's name.
        name: String,
        /// Whether it lists functions.
        calls: bool,
        /// The targets.
        targets: Vec<String>,
    },
}

/// A guard predicate `@p` / `@!p`.
#[derive(Clone, Debug)]
pub struct Guard {
    /// Span.
    pub span: Span,
    /// Negated (`@!p`).
    pub negated: bool,
    /// Predicate register name.
    pub name: Str,
}

/// An instruction in the ISA's generic form.
#[derive(Clone, Debug)]
pub struct Instruction {
    /// Span of the whole instruction (without `;`).
    pub span: Span,
    /// Guard predicate.
    pub guard: Option<Guard>,
    /// Span of the opcode with its modifiers.
    pub opcode_span: Span,
    /// The base opcode (`ld`).
    pub opcode: Str,
    /// Modifiers without dots, in order (`["global", "nc", "f32"]`).
    pub modifiers: Modifiers,
    /// Operands.
    pub operands: Operands,
    /// The typed form, filled in by [`crate::check`] (`None` before the
    /// check, or when the instruction did not decode).
    pub decoded: Option<crate::isa::Decoded>,
}

impl Instruction {
    /// The full mnemonic as written (`ld.global.nc.f32`).
    pub fn mnemonic(&self) -> String {
        let mut s = self.opcode.to_string();
        for m in &self.modifiers {
            s.push('.');
            s.push_str(m);
        }
        s
    }

    /// Whether a modifier is present.
    pub fn has(&self, m: &str) -> bool {
        self.modifiers.iter().any(|x| x == m)
    }

    /// The operands of a `call`: its results (`(r, ...)`, empty without),
    /// its target and its arguments (`(a, ...)`, empty without).
    pub fn call_operands(&self) -> (&[Operand], Option<&Operand>, &[Operand]) {
        let ops = self.operands.as_slice();
        let (rets, rest): (&[Operand], &[Operand]) = match ops.first() {
            Some(Operand::List(_, r)) => (r.as_slice(), &ops[1..]),
            _ => (&[], ops),
        };
        let args: &[Operand] = match rest.get(1) {
            Some(Operand::List(_, a)) => a.as_slice(),
            _ => &[],
        };
        (rets, rest.first(), args)
    }

    /// How many of the leading operands are destinations: a `call`'s
    /// result list, or those the decoded form marks as outputs (0 when the
    /// instruction did not decode). A form whose block in `isa/ptx.isa` has
    /// no operand type rules marks nothing; there the first operand is the
    /// destination when it is a register, a vector or pair of registers or
    /// `_` (PTX writes destinations first; instructions without one start
    /// with an address, an immediate or nothing).
    /// The function a `call` names, if it is a direct call (not through a
    /// pointer register).
    pub fn direct_callee(&self) -> Option<&str> {
        if self.opcode != "call" {
            return None;
        }
        match self.operands.iter().find(|o| !matches!(o, Operand::List(..))) {
            Some(Operand::Name { name, .. }) => Some(name.as_str()),
            _ => None,
        }
    }

    pub fn destinations(&self) -> usize {
        let ops = self.operands.as_slice();
        if self.opcode == "call" {
            return usize::from(matches!(ops.first(), Some(Operand::List(..))));
        }
        let Some(d) = &self.decoded else { return 0 };
        let form = d.form();
        let unruled = form.operands.iter().all(|s| !s.out && matches!(s.ty, crate::isa::table::TypeRule::Any));
        if unruled {
            // Those that start with a label or a register they read.
            let no_destination = match &*self.opcode {
                "bar" | "barrier" => !self.has("red"),
                "bra" | "brx" | "nanosleep" | "stackrestore" | "pmevent" => true,
                _ => false,
            };
            if no_destination {
                return 0;
            }
            return usize::from(matches!(
                ops.first(),
                Some(Operand::Name { .. } | Operand::Vector(..) | Operand::Pair(..) | Operand::Sink(_))
            ));
        }
        let mut outs = 0;
        while outs < ops.len() && form.operands.get(outs).is_some_and(|s| s.out) {
            outs += 1;
        }
        outs
    }
}

/// An instruction operand.
#[derive(Clone, Debug)]
pub enum Operand {
    /// A register, variable, label or special register, with an optional
    /// vector component (`%tid.x`).
    Name {
        /// Span.
        span: Span,
        /// Name.
        name: Str,
        /// `.x`/`.y`/`.z`/`.w`.
        component: Option<u8>,
    },
    /// `!p`
    Not(Span, Box<Operand>),
    /// Integer immediate (sign applied).
    Int(Span, i128),
    /// Float immediate: `0f`/`0d` bit pattern or decimal.
    Float(Span, FloatImm),
    /// `[base + offset]`
    Address(Span, Address),
    /// `[tensorMap, {c0, c1, ...}]`: a tensor-map address with tensor
    /// coordinates (`cp.async.bulk.tensor`, `prefetch.tensor`).
    TensorAddress(Span, Box<Address>, Vec<Operand>),
    /// `{a, b, ...}`
    Vector(Span, Vec<Operand>),
    /// `(a, b, ...)` (call arguments)
    List(Span, Vec<Operand>),
    /// `p|q` (the two destinations of `setp`)
    Pair(Span, Box<Operand>, Box<Operand>),
    /// `_`
    Sink(Span),
    /// `[a, b, ...]`: texture, surface and tensor coordinates
    /// (`[tex, {x, y}]`, `[tmap, {c0, c1}]`).
    Bracket(Span, Vec<Operand>),
    /// An operand with a selector suffix: video byte/half selectors
    /// (`a.b0`, `d.h1`, `a.b3210`) and `[a].unified`.
    Select {
        /// Span of the whole operand.
        span: Span,
        /// The operand selected from.
        base: Box<Operand>,
        /// The selector without its dot (`b0`, `h10`, `unified`).
        selector: Str,
    },
    /// `-a` (video `vmad` operands).
    Neg(Span, Box<Operand>),
    /// `var+imm` / `var-imm`: the address of a variable plus a constant.
    SymbolOffset(Span, Str, i64),
    /// `var[imm]`: element `imm` of an array variable (6.4.2), as the scanner
    /// reads it. The check pass replaces it (it knows the element size): by
    /// an [`Operand::Address`] where the instruction takes an address
    /// (`ld.global.u32 r, a[3]` is `[a+12]` for a `.u32` array), else by an
    /// [`Operand::SymbolOffset`] (`mov.u64 rd, a[1]`: the element's address).
    /// The index counts elements of the array's scalar type (for a `.v2
    /// .u32` array, 4 bytes each, as `ptxas` does).
    ArrayElement(Span, Str, i64),
}

/// A floating-point immediate.
#[derive(Clone, Copy, Debug)]
pub enum FloatImm {
    /// `0fXXXXXXXX`
    F32Bits(u32),
    /// `0dXXXXXXXXXXXXXXXX`
    F64Bits(u64),
    /// A decimal literal (PTX treats it as f64).
    Decimal(f64),
}

impl Operand {
    /// Every name the operand mentions (registers, variables, labels,
    /// special registers; an address's base), in order.
    pub fn for_each_name<'a>(&'a self, f: &mut impl FnMut(&'a str)) {
        match self {
            Operand::Name { name, .. } => f(name),
            Operand::Address(_, a) => {
                if let Some((_, b)) = &a.base {
                    f(b);
                }
            }
            Operand::TensorAddress(_, a, v) => {
                if let Some((_, b)) = &a.base {
                    f(b);
                }
                v.iter().for_each(|x| x.for_each_name(f));
            }
            Operand::Not(_, x) | Operand::Neg(_, x) => x.for_each_name(f),
            Operand::Select { base, .. } => base.for_each_name(f),
            Operand::Pair(_, a, b) => {
                a.for_each_name(f);
                b.for_each_name(f);
            }
            Operand::Vector(_, v) | Operand::List(_, v) | Operand::Bracket(_, v) => {
                v.iter().for_each(|x| x.for_each_name(f))
            }
            Operand::Int(..) | Operand::Float(..) | Operand::Sink(_) | Operand::SymbolOffset(..) => {}
            Operand::ArrayElement(..) => {}
        }
    }

    /// The operand's span.
    pub fn span(&self) -> Span {
        match self {
            Operand::Name { span, .. } => *span,
            Operand::Not(s, _)
            | Operand::Int(s, _)
            | Operand::Float(s, _)
            | Operand::Address(s, _)
            | Operand::TensorAddress(s, _, _)
            | Operand::Vector(s, _)
            | Operand::List(s, _)
            | Operand::Pair(s, _, _)
            | Operand::Sink(s)
            | Operand::Bracket(s, _)
            | Operand::Neg(s, _)
            | Operand::SymbolOffset(s, _, _)
            | Operand::ArrayElement(s, _, _) => *s,
            Operand::Select { span, .. } => *span,
        }
    }
}

/// An address expression `[base+off]`.
#[derive(Clone, Debug)]
pub struct Address {
    /// Base register or variable (absent for `[imm]`).
    pub base: Option<(Span, Str)>,
    /// Constant byte offset.
    pub offset: i64,
}
