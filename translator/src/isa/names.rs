//! GENERATED from `ptx.isa` by `isa::gen`; do not edit.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p ptxvk-translator --test isa_names`.
//!
//! One variant per opcode, modifier word and modifier group of the
//! instruction table, each documented with its PTX spelling.

/// A PTX opcode: the first word of an instruction (`ld` in `ld.global.u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
#[repr(u16)]
pub enum Opcode {
    /// `abs`
    Abs,
    /// `activemask`
    Activemask,
    /// `add`
    Add,
    /// `addc`
    Addc,
    /// `alloca`
    Alloca,
    /// `and`
    And,
    /// `applypriority`
    Applypriority,
    /// `atom`
    Atom,
    /// `bar`
    Bar,
    /// `barrier`
    Barrier,
    /// `bfe`
    Bfe,
    /// `bfi`
    Bfi,
    /// `bfind`
    Bfind,
    /// `bmsk`
    Bmsk,
    /// `bra`
    Bra,
    /// `brev`
    Brev,
    /// `brkpt`
    Brkpt,
    /// `brx`
    Brx,
    /// `call`
    Call,
    /// `clusterlaunchcontrol`
    Clusterlaunchcontrol,
    /// `clz`
    Clz,
    /// `cnot`
    Cnot,
    /// `copysign`
    Copysign,
    /// `cos`
    Cos,
    /// `cp`
    Cp,
    /// `createpolicy`
    Createpolicy,
    /// `cvt`
    Cvt,
    /// `cvta`
    Cvta,
    /// `discard`
    Discard,
    /// `div`
    Div,
    /// `dp2a`
    Dp2a,
    /// `dp4a`
    Dp4a,
    /// `elect`
    Elect,
    /// `ex2`
    Ex2,
    /// `exit`
    Exit,
    /// `fence`
    Fence,
    /// `fma`
    Fma,
    /// `fns`
    Fns,
    /// `getctarank`
    Getctarank,
    /// `griddepcontrol`
    Griddepcontrol,
    /// `isspacep`
    Isspacep,
    /// `istypep`
    Istypep,
    /// `ld`
    Ld,
    /// `ldmatrix`
    Ldmatrix,
    /// `ldu`
    Ldu,
    /// `lg2`
    Lg2,
    /// `lop3`
    Lop3,
    /// `mad`
    Mad,
    /// `mad24`
    Mad24,
    /// `madc`
    Madc,
    /// `mapa`
    Mapa,
    /// `match`
    Match,
    /// `max`
    Max,
    /// `mbarrier`
    Mbarrier,
    /// `membar`
    Membar,
    /// `min`
    Min,
    /// `mma`
    Mma,
    /// `mov`
    Mov,
    /// `movmatrix`
    Movmatrix,
    /// `mul`
    Mul,
    /// `mul24`
    Mul24,
    /// `multimem`
    Multimem,
    /// `nanosleep`
    Nanosleep,
    /// `neg`
    Neg,
    /// `not`
    Not,
    /// `or`
    Or,
    /// `pmevent`
    Pmevent,
    /// `popc`
    Popc,
    /// `prefetch`
    Prefetch,
    /// `prefetchu`
    Prefetchu,
    /// `prmt`
    Prmt,
    /// `rcp`
    Rcp,
    /// `red`
    Red,
    /// `redux`
    Redux,
    /// `rem`
    Rem,
    /// `ret`
    Ret,
    /// `rsqrt`
    Rsqrt,
    /// `sad`
    Sad,
    /// `selp`
    Selp,
    /// `set`
    Set,
    /// `setmaxnreg`
    Setmaxnreg,
    /// `setp`
    Setp,
    /// `shf`
    Shf,
    /// `shfl`
    Shfl,
    /// `shl`
    Shl,
    /// `shr`
    Shr,
    /// `sin`
    Sin,
    /// `slct`
    Slct,
    /// `sqrt`
    Sqrt,
    /// `st`
    St,
    /// `stackrestore`
    Stackrestore,
    /// `stacksave`
    Stacksave,
    /// `stmatrix`
    Stmatrix,
    /// `sub`
    Sub,
    /// `subc`
    Subc,
    /// `suld`
    Suld,
    /// `suq`
    Suq,
    /// `sured`
    Sured,
    /// `sust`
    Sust,
    /// `szext`
    Szext,
    /// `tanh`
    Tanh,
    /// `tcgen05`
    Tcgen05,
    /// `tensormap`
    Tensormap,
    /// `testp`
    Testp,
    /// `tex`
    Tex,
    /// `tld4`
    Tld4,
    /// `trap`
    Trap,
    /// `txq`
    Txq,
    /// `vabsdiff`
    Vabsdiff,
    /// `vabsdiff2`
    Vabsdiff2,
    /// `vabsdiff4`
    Vabsdiff4,
    /// `vadd`
    Vadd,
    /// `vadd2`
    Vadd2,
    /// `vadd4`
    Vadd4,
    /// `vavrg2`
    Vavrg2,
    /// `vavrg4`
    Vavrg4,
    /// `vmad`
    Vmad,
    /// `vmax`
    Vmax,
    /// `vmax2`
    Vmax2,
    /// `vmax4`
    Vmax4,
    /// `vmin`
    Vmin,
    /// `vmin2`
    Vmin2,
    /// `vmin4`
    Vmin4,
    /// `vote`
    Vote,
    /// `vset`
    Vset,
    /// `vset2`
    Vset2,
    /// `vset4`
    Vset4,
    /// `vshl`
    Vshl,
    /// `vshr`
    Vshr,
    /// `vsub`
    Vsub,
    /// `vsub2`
    Vsub2,
    /// `vsub4`
    Vsub4,
    /// `wgmma`
    Wgmma,
    /// `wmma`
    Wmma,
    /// `xor`
    Xor,
}

impl Opcode {
    /// Every variant, in declaration order.
    pub const ALL: [Opcode; 135] = [
        Opcode::Abs,
        Opcode::Activemask,
        Opcode::Add,
        Opcode::Addc,
        Opcode::Alloca,
        Opcode::And,
        Opcode::Applypriority,
        Opcode::Atom,
        Opcode::Bar,
        Opcode::Barrier,
        Opcode::Bfe,
        Opcode::Bfi,
        Opcode::Bfind,
        Opcode::Bmsk,
        Opcode::Bra,
        Opcode::Brev,
        Opcode::Brkpt,
        Opcode::Brx,
        Opcode::Call,
        Opcode::Clusterlaunchcontrol,
        Opcode::Clz,
        Opcode::Cnot,
        Opcode::Copysign,
        Opcode::Cos,
        Opcode::Cp,
        Opcode::Createpolicy,
        Opcode::Cvt,
        Opcode::Cvta,
        Opcode::Discard,
        Opcode::Div,
        Opcode::Dp2a,
        Opcode::Dp4a,
        Opcode::Elect,
        Opcode::Ex2,
        Opcode::Exit,
        Opcode::Fence,
        Opcode::Fma,
        Opcode::Fns,
        Opcode::Getctarank,
        Opcode::Griddepcontrol,
        Opcode::Isspacep,
        Opcode::Istypep,
        Opcode::Ld,
        Opcode::Ldmatrix,
        Opcode::Ldu,
        Opcode::Lg2,
        Opcode::Lop3,
        Opcode::Mad,
        Opcode::Mad24,
        Opcode::Madc,
        Opcode::Mapa,
        Opcode::Match,
        Opcode::Max,
        Opcode::Mbarrier,
        Opcode::Membar,
        Opcode::Min,
        Opcode::Mma,
        Opcode::Mov,
        Opcode::Movmatrix,
        Opcode::Mul,
        Opcode::Mul24,
        Opcode::Multimem,
        Opcode::Nanosleep,
        Opcode::Neg,
        Opcode::Not,
        Opcode::Or,
        Opcode::Pmevent,
        Opcode::Popc,
        Opcode::Prefetch,
        Opcode::Prefetchu,
        Opcode::Prmt,
        Opcode::Rcp,
        Opcode::Red,
        Opcode::Redux,
        Opcode::Rem,
        Opcode::Ret,
        Opcode::Rsqrt,
        Opcode::Sad,
        Opcode::Selp,
        Opcode::Set,
        Opcode::Setmaxnreg,
        Opcode::Setp,
        Opcode::Shf,
        Opcode::Shfl,
        Opcode::Shl,
        Opcode::Shr,
        Opcode::Sin,
        Opcode::Slct,
        Opcode::Sqrt,
        Opcode::St,
        Opcode::Stackrestore,
        Opcode::Stacksave,
        Opcode::Stmatrix,
        Opcode::Sub,
        Opcode::Subc,
        Opcode::Suld,
        Opcode::Suq,
        Opcode::Sured,
        Opcode::Sust,
        Opcode::Szext,
        Opcode::Tanh,
        Opcode::Tcgen05,
        Opcode::Tensormap,
        Opcode::Testp,
        Opcode::Tex,
        Opcode::Tld4,
        Opcode::Trap,
        Opcode::Txq,
        Opcode::Vabsdiff,
        Opcode::Vabsdiff2,
        Opcode::Vabsdiff4,
        Opcode::Vadd,
        Opcode::Vadd2,
        Opcode::Vadd4,
        Opcode::Vavrg2,
        Opcode::Vavrg4,
        Opcode::Vmad,
        Opcode::Vmax,
        Opcode::Vmax2,
        Opcode::Vmax4,
        Opcode::Vmin,
        Opcode::Vmin2,
        Opcode::Vmin4,
        Opcode::Vote,
        Opcode::Vset,
        Opcode::Vset2,
        Opcode::Vset4,
        Opcode::Vshl,
        Opcode::Vshr,
        Opcode::Vsub,
        Opcode::Vsub2,
        Opcode::Vsub4,
        Opcode::Wgmma,
        Opcode::Wmma,
        Opcode::Xor,
    ];

    /// The PTX spelling of each variant, in declaration order (sorted).
    const NAMES: [&'static str; 135] = [
        "abs",
        "activemask",
        "add",
        "addc",
        "alloca",
        "and",
        "applypriority",
        "atom",
        "bar",
        "barrier",
        "bfe",
        "bfi",
        "bfind",
        "bmsk",
        "bra",
        "brev",
        "brkpt",
        "brx",
        "call",
        "clusterlaunchcontrol",
        "clz",
        "cnot",
        "copysign",
        "cos",
        "cp",
        "createpolicy",
        "cvt",
        "cvta",
        "discard",
        "div",
        "dp2a",
        "dp4a",
        "elect",
        "ex2",
        "exit",
        "fence",
        "fma",
        "fns",
        "getctarank",
        "griddepcontrol",
        "isspacep",
        "istypep",
        "ld",
        "ldmatrix",
        "ldu",
        "lg2",
        "lop3",
        "mad",
        "mad24",
        "madc",
        "mapa",
        "match",
        "max",
        "mbarrier",
        "membar",
        "min",
        "mma",
        "mov",
        "movmatrix",
        "mul",
        "mul24",
        "multimem",
        "nanosleep",
        "neg",
        "not",
        "or",
        "pmevent",
        "popc",
        "prefetch",
        "prefetchu",
        "prmt",
        "rcp",
        "red",
        "redux",
        "rem",
        "ret",
        "rsqrt",
        "sad",
        "selp",
        "set",
        "setmaxnreg",
        "setp",
        "shf",
        "shfl",
        "shl",
        "shr",
        "sin",
        "slct",
        "sqrt",
        "st",
        "stackrestore",
        "stacksave",
        "stmatrix",
        "sub",
        "subc",
        "suld",
        "suq",
        "sured",
        "sust",
        "szext",
        "tanh",
        "tcgen05",
        "tensormap",
        "testp",
        "tex",
        "tld4",
        "trap",
        "txq",
        "vabsdiff",
        "vabsdiff2",
        "vabsdiff4",
        "vadd",
        "vadd2",
        "vadd4",
        "vavrg2",
        "vavrg4",
        "vmad",
        "vmax",
        "vmax2",
        "vmax4",
        "vmin",
        "vmin2",
        "vmin4",
        "vote",
        "vset",
        "vset2",
        "vset4",
        "vshl",
        "vshr",
        "vsub",
        "vsub2",
        "vsub4",
        "wgmma",
        "wmma",
        "xor",
    ];

    /// The PTX spelling (without the dot).
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The variant spelled `s` (without the dot).
    pub fn from_name(s: &str) -> Option<Self> {
        Self::NAMES.binary_search(&s).ok().map(|i| Self::ALL[i])
    }
}

/// A PTX instruction modifier: one dot-separated word after the opcode (`global` in `ld.global.u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
#[repr(u16)]
pub enum Mod {
    /// `128x128b`
    X128x128b,
    /// `128x256b`
    X128x256b,
    /// `16x128b`
    X16x128b,
    /// `16x256b`
    X16x256b,
    /// `16x32bx2`
    X16x32bx2,
    /// `16x64b`
    X16x64b,
    /// `1d`
    X1d,
    /// `2d`
    X2d,
    /// `2dms`
    X2dms,
    /// `32x128b`
    X32x128b,
    /// `32x32b`
    X32x32b,
    /// `3d`
    X3d,
    /// `4d`
    X4d,
    /// `4x256b`
    X4x256b,
    /// `5d`
    X5d,
    /// `64x128b`
    X64x128b,
    /// `L1`
    L1,
    /// `L1::32B`
    L132B,
    /// `L1::evict_first`
    L1EvictFirst,
    /// `L1::evict_last`
    L1EvictLast,
    /// `L1::evict_normal`
    L1EvictNormal,
    /// `L1::evict_unchanged`
    L1EvictUnchanged,
    /// `L1::no_allocate`
    L1NoAllocate,
    /// `L2`
    L2,
    /// `L2::128B`
    L2128B,
    /// `L2::256B`
    L2256B,
    /// `L2::64B`
    L264B,
    /// `L2::cache_hint`
    L2CacheHint,
    /// `L2::evict_first`
    L2EvictFirst,
    /// `L2::evict_last`
    L2EvictLast,
    /// `L2::evict_normal`
    L2EvictNormal,
    /// `L2::evict_unchanged`
    L2EvictUnchanged,
    /// `NaN`
    NaN,
    /// `a`
    A,
    /// `a1d`
    A1d,
    /// `a2d`
    A2d,
    /// `a2dms`
    A2dms,
    /// `abs`
    Abs,
    /// `acc::f16`
    AccF16,
    /// `acc::f32`
    AccF32,
    /// `acq_rel`
    AcqRel,
    /// `acquire`
    Acquire,
    /// `acube`
    Acube,
    /// `add`
    Add,
    /// `addr_mode_0`
    AddrMode0,
    /// `addr_mode_1`
    AddrMode1,
    /// `addr_mode_2`
    AddrMode2,
    /// `alias`
    Alias,
    /// `aligned`
    Aligned,
    /// `all`
    All,
    /// `alloc`
    Alloc,
    /// `and`
    And,
    /// `any`
    Any,
    /// `approx`
    Approx,
    /// `array_size`
    ArraySize,
    /// `arrive`
    Arrive,
    /// `arrive_drop`
    ArriveDrop,
    /// `ashift`
    Ashift,
    /// `async`
    Async,
    /// `async::generic`
    AsyncGeneric,
    /// `b`
    B,
    /// `b1`
    B1,
    /// `b1024`
    B1024,
    /// `b128`
    B128,
    /// `b16`
    B16,
    /// `b32`
    B32,
    /// `b4e`
    B4e,
    /// `b4x16_p64`
    B4x16P64,
    /// `b64`
    B64,
    /// `b6x16_p32`
    B6x16P32,
    /// `b8`
    B8,
    /// `b8x16`
    B8x16,
    /// `ballot`
    Ballot,
    /// `base`
    Base,
    /// `bf16`
    Bf16,
    /// `bf16x2`
    Bf16x2,
    /// `bfly`
    Bfly,
    /// `block16`
    Block16,
    /// `block32`
    Block32,
    /// `block_scale`
    BlockScale,
    /// `box_dim`
    BoxDim,
    /// `bulk`
    Bulk,
    /// `bulk_group`
    BulkGroup,
    /// `c`
    C,
    /// `ca`
    Ca,
    /// `cas`
    Cas,
    /// `cc`
    Cc,
    /// `cg`
    Cg,
    /// `channel_data_type`
    ChannelDataType,
    /// `channel_order`
    ChannelOrder,
    /// `clamp`
    Clamp,
    /// `cluster`
    Cluster,
    /// `col`
    Col,
    /// `collector::a::discard`
    CollectorADiscard,
    /// `collector::a::fill`
    CollectorAFill,
    /// `collector::a::lastuse`
    CollectorALastuse,
    /// `collector::a::use`
    CollectorAUse,
    /// `collector::b0::discard`
    CollectorB0Discard,
    /// `collector::b0::fill`
    CollectorB0Fill,
    /// `collector::b0::lastuse`
    CollectorB0Lastuse,
    /// `collector::b0::use`
    CollectorB0Use,
    /// `collector::b1::discard`
    CollectorB1Discard,
    /// `collector::b1::fill`
    CollectorB1Fill,
    /// `collector::b1::lastuse`
    CollectorB1Lastuse,
    /// `collector::b1::use`
    CollectorB1Use,
    /// `collector::b2::discard`
    CollectorB2Discard,
    /// `collector::b2::fill`
    CollectorB2Fill,
    /// `collector::b2::lastuse`
    CollectorB2Lastuse,
    /// `collector::b2::use`
    CollectorB2Use,
    /// `collector::b3::discard`
    CollectorB3Discard,
    /// `collector::b3::fill`
    CollectorB3Fill,
    /// `collector::b3::lastuse`
    CollectorB3Lastuse,
    /// `collector::b3::use`
    CollectorB3Use,
    /// `commit`
    Commit,
    /// `commit_group`
    CommitGroup,
    /// `complete_tx`
    CompleteTx,
    /// `const`
    Const,
    /// `cp`
    Cp,
    /// `cp_fenceproxy`
    CpFenceproxy,
    /// `cp_mask`
    CpMask,
    /// `cs`
    Cs,
    /// `cta`
    Cta,
    /// `cta_group::1`
    CtaGroup1,
    /// `cta_group::2`
    CtaGroup2,
    /// `cube`
    Cube,
    /// `cv`
    Cv,
    /// `cvt`
    Cvt,
    /// `d`
    D,
    /// `dealloc`
    Dealloc,
    /// `dec`
    Dec,
    /// `depth`
    Depth,
    /// `down`
    Down,
    /// `e2m1`
    E2m1,
    /// `e2m1x2`
    E2m1x2,
    /// `e2m1x4`
    E2m1x4,
    /// `e2m3`
    E2m3,
    /// `e2m3x2`
    E2m3x2,
    /// `e2m3x4`
    E2m3x4,
    /// `e3m2`
    E3m2,
    /// `e3m2x2`
    E3m2x2,
    /// `e3m2x4`
    E3m2x4,
    /// `e4m3`
    E4m3,
    /// `e4m3x2`
    E4m3x2,
    /// `e4m3x4`
    E4m3x4,
    /// `e5m2`
    E5m2,
    /// `e5m2x2`
    E5m2x2,
    /// `e5m2x4`
    E5m2x4,
    /// `ecl`
    Ecl,
    /// `ecr`
    Ecr,
    /// `element_stride`
    ElementStride,
    /// `elemtype`
    Elemtype,
    /// `eq`
    Eq,
    /// `equ`
    Equ,
    /// `exch`
    Exch,
    /// `expect_tx`
    ExpectTx,
    /// `f16`
    F16,
    /// `f16x2`
    F16x2,
    /// `f32`
    F32,
    /// `f32x2`
    F32x2,
    /// `f4e`
    F4e,
    /// `f64`
    F64,
    /// `fence`
    Fence,
    /// `fence::after_thread_sync`
    FenceAfterThreadSync,
    /// `fence::before_thread_sync`
    FenceBeforeThreadSync,
    /// `fill_mode`
    FillMode,
    /// `filter_mode`
    FilterMode,
    /// `finite`
    Finite,
    /// `force_unnormalized_coords`
    ForceUnnormalizedCoords,
    /// `fractional`
    Fractional,
    /// `ftz`
    Ftz,
    /// `full`
    Full,
    /// `g`
    G,
    /// `ge`
    Ge,
    /// `get_first_ctaid`
    GetFirstCtaid,
    /// `get_first_ctaid::x`
    GetFirstCtaidX,
    /// `get_first_ctaid::y`
    GetFirstCtaidY,
    /// `get_first_ctaid::z`
    GetFirstCtaidZ,
    /// `geu`
    Geu,
    /// `gl`
    Gl,
    /// `global`
    Global,
    /// `global_address`
    GlobalAddress,
    /// `global_dim`
    GlobalDim,
    /// `global_stride`
    GlobalStride,
    /// `gpu`
    Gpu,
    /// `grad`
    Grad,
    /// `gt`
    Gt,
    /// `gtu`
    Gtu,
    /// `height`
    Height,
    /// `hi`
    Hi,
    /// `hs`
    Hs,
    /// `idx`
    Idx,
    /// `im2col`
    Im2col,
    /// `im2col::w`
    Im2colW,
    /// `im2col::w::128`
    Im2colW128,
    /// `im2col_no_offs`
    Im2colNoOffs,
    /// `inc`
    Inc,
    /// `infinite`
    Infinite,
    /// `init`
    Init,
    /// `interleave_layout`
    InterleaveLayout,
    /// `inval`
    Inval,
    /// `is_canceled`
    IsCanceled,
    /// `kind::f16`
    KindF16,
    /// `kind::f8f6f4`
    KindF8f6f4,
    /// `kind::i8`
    KindI8,
    /// `kind::mxf4`
    KindMxf4,
    /// `kind::mxf4nvf4`
    KindMxf4nvf4,
    /// `kind::mxf8f6f4`
    KindMxf8f6f4,
    /// `kind::tf32`
    KindTf32,
    /// `l`
    L,
    /// `launch_dependents`
    LaunchDependents,
    /// `ld`
    Ld,
    /// `ld_reduce`
    LdReduce,
    /// `le`
    Le,
    /// `leu`
    Leu,
    /// `level`
    Level,
    /// `lo`
    Lo,
    /// `load`
    Load,
    /// `local`
    Local,
    /// `ls`
    Ls,
    /// `lt`
    Lt,
    /// `ltu`
    Ltu,
    /// `lu`
    Lu,
    /// `m16n16`
    M16n16,
    /// `m16n16k16`
    M16n16k16,
    /// `m16n16k8`
    M16n16k8,
    /// `m16n8`
    M16n8,
    /// `m16n8k128`
    M16n8k128,
    /// `m16n8k16`
    M16n8k16,
    /// `m16n8k256`
    M16n8k256,
    /// `m16n8k32`
    M16n8k32,
    /// `m16n8k4`
    M16n8k4,
    /// `m16n8k64`
    M16n8k64,
    /// `m16n8k8`
    M16n8k8,
    /// `m32n8k16`
    M32n8k16,
    /// `m64n104k16`
    M64n104k16,
    /// `m64n104k32`
    M64n104k32,
    /// `m64n104k64`
    M64n104k64,
    /// `m64n104k8`
    M64n104k8,
    /// `m64n112k16`
    M64n112k16,
    /// `m64n112k256`
    M64n112k256,
    /// `m64n112k32`
    M64n112k32,
    /// `m64n112k64`
    M64n112k64,
    /// `m64n112k8`
    M64n112k8,
    /// `m64n120k16`
    M64n120k16,
    /// `m64n120k32`
    M64n120k32,
    /// `m64n120k64`
    M64n120k64,
    /// `m64n120k8`
    M64n120k8,
    /// `m64n128k16`
    M64n128k16,
    /// `m64n128k256`
    M64n128k256,
    /// `m64n128k32`
    M64n128k32,
    /// `m64n128k64`
    M64n128k64,
    /// `m64n128k8`
    M64n128k8,
    /// `m64n136k16`
    M64n136k16,
    /// `m64n136k32`
    M64n136k32,
    /// `m64n136k64`
    M64n136k64,
    /// `m64n136k8`
    M64n136k8,
    /// `m64n144k16`
    M64n144k16,
    /// `m64n144k256`
    M64n144k256,
    /// `m64n144k32`
    M64n144k32,
    /// `m64n144k64`
    M64n144k64,
    /// `m64n144k8`
    M64n144k8,
    /// `m64n152k16`
    M64n152k16,
    /// `m64n152k32`
    M64n152k32,
    /// `m64n152k64`
    M64n152k64,
    /// `m64n152k8`
    M64n152k8,
    /// `m64n160k16`
    M64n160k16,
    /// `m64n160k256`
    M64n160k256,
    /// `m64n160k32`
    M64n160k32,
    /// `m64n160k64`
    M64n160k64,
    /// `m64n160k8`
    M64n160k8,
    /// `m64n168k16`
    M64n168k16,
    /// `m64n168k32`
    M64n168k32,
    /// `m64n168k64`
    M64n168k64,
    /// `m64n168k8`
    M64n168k8,
    /// `m64n16k16`
    M64n16k16,
    /// `m64n16k256`
    M64n16k256,
    /// `m64n16k32`
    M64n16k32,
    /// `m64n16k64`
    M64n16k64,
    /// `m64n16k8`
    M64n16k8,
    /// `m64n176k16`
    M64n176k16,
    /// `m64n176k256`
    M64n176k256,
    /// `m64n176k32`
    M64n176k32,
    /// `m64n176k64`
    M64n176k64,
    /// `m64n176k8`
    M64n176k8,
    /// `m64n184k16`
    M64n184k16,
    /// `m64n184k32`
    M64n184k32,
    /// `m64n184k64`
    M64n184k64,
    /// `m64n184k8`
    M64n184k8,
    /// `m64n192k16`
    M64n192k16,
    /// `m64n192k256`
    M64n192k256,
    /// `m64n192k32`
    M64n192k32,
    /// `m64n192k64`
    M64n192k64,
    /// `m64n192k8`
    M64n192k8,
    /// `m64n200k16`
    M64n200k16,
    /// `m64n200k32`
    M64n200k32,
    /// `m64n200k64`
    M64n200k64,
    /// `m64n200k8`
    M64n200k8,
    /// `m64n208k16`
    M64n208k16,
    /// `m64n208k256`
    M64n208k256,
    /// `m64n208k32`
    M64n208k32,
    /// `m64n208k64`
    M64n208k64,
    /// `m64n208k8`
    M64n208k8,
    /// `m64n216k16`
    M64n216k16,
    /// `m64n216k32`
    M64n216k32,
    /// `m64n216k64`
    M64n216k64,
    /// `m64n216k8`
    M64n216k8,
    /// `m64n224k16`
    M64n224k16,
    /// `m64n224k256`
    M64n224k256,
    /// `m64n224k32`
    M64n224k32,
    /// `m64n224k64`
    M64n224k64,
    /// `m64n224k8`
    M64n224k8,
    /// `m64n232k16`
    M64n232k16,
    /// `m64n232k32`
    M64n232k32,
    /// `m64n232k64`
    M64n232k64,
    /// `m64n232k8`
    M64n232k8,
    /// `m64n240k16`
    M64n240k16,
    /// `m64n240k256`
    M64n240k256,
    /// `m64n240k32`
    M64n240k32,
    /// `m64n240k64`
    M64n240k64,
    /// `m64n240k8`
    M64n240k8,
    /// `m64n248k16`
    M64n248k16,
    /// `m64n248k32`
    M64n248k32,
    /// `m64n248k64`
    M64n248k64,
    /// `m64n248k8`
    M64n248k8,
    /// `m64n24k16`
    M64n24k16,
    /// `m64n24k256`
    M64n24k256,
    /// `m64n24k32`
    M64n24k32,
    /// `m64n24k64`
    M64n24k64,
    /// `m64n24k8`
    M64n24k8,
    /// `m64n256k16`
    M64n256k16,
    /// `m64n256k256`
    M64n256k256,
    /// `m64n256k32`
    M64n256k32,
    /// `m64n256k64`
    M64n256k64,
    /// `m64n256k8`
    M64n256k8,
    /// `m64n32k16`
    M64n32k16,
    /// `m64n32k256`
    M64n32k256,
    /// `m64n32k32`
    M64n32k32,
    /// `m64n32k64`
    M64n32k64,
    /// `m64n32k8`
    M64n32k8,
    /// `m64n40k16`
    M64n40k16,
    /// `m64n40k32`
    M64n40k32,
    /// `m64n40k64`
    M64n40k64,
    /// `m64n40k8`
    M64n40k8,
    /// `m64n48k16`
    M64n48k16,
    /// `m64n48k256`
    M64n48k256,
    /// `m64n48k32`
    M64n48k32,
    /// `m64n48k64`
    M64n48k64,
    /// `m64n48k8`
    M64n48k8,
    /// `m64n56k16`
    M64n56k16,
    /// `m64n56k32`
    M64n56k32,
    /// `m64n56k64`
    M64n56k64,
    /// `m64n56k8`
    M64n56k8,
    /// `m64n64k16`
    M64n64k16,
    /// `m64n64k256`
    M64n64k256,
    /// `m64n64k32`
    M64n64k32,
    /// `m64n64k64`
    M64n64k64,
    /// `m64n64k8`
    M64n64k8,
    /// `m64n72k16`
    M64n72k16,
    /// `m64n72k32`
    M64n72k32,
    /// `m64n72k64`
    M64n72k64,
    /// `m64n72k8`
    M64n72k8,
    /// `m64n80k16`
    M64n80k16,
    /// `m64n80k256`
    M64n80k256,
    /// `m64n80k32`
    M64n80k32,
    /// `m64n80k64`
    M64n80k64,
    /// `m64n80k8`
    M64n80k8,
    /// `m64n88k16`
    M64n88k16,
    /// `m64n88k32`
    M64n88k32,
    /// `m64n88k64`
    M64n88k64,
    /// `m64n88k8`
    M64n88k8,
    /// `m64n8k16`
    M64n8k16,
    /// `m64n8k256`
    M64n8k256,
    /// `m64n8k32`
    M64n8k32,
    /// `m64n8k64`
    M64n8k64,
    /// `m64n8k8`
    M64n8k8,
    /// `m64n96k16`
    M64n96k16,
    /// `m64n96k256`
    M64n96k256,
    /// `m64n96k32`
    M64n96k32,
    /// `m64n96k64`
    M64n96k64,
    /// `m64n96k8`
    M64n96k8,
    /// `m8n16`
    M8n16,
    /// `m8n32k16`
    M8n32k16,
    /// `m8n8`
    M8n8,
    /// `m8n8k128`
    M8n8k128,
    /// `m8n8k16`
    M8n8k16,
    /// `m8n8k32`
    M8n8k32,
    /// `m8n8k4`
    M8n8k4,
    /// `mask`
    Mask,
    /// `max`
    Max,
    /// `mbarrier`
    Mbarrier,
    /// `mbarrier::arrive::one`
    MbarrierArriveOne,
    /// `mbarrier::complete_tx::bytes`
    MbarrierCompleteTxBytes,
    /// `mbarrier_init`
    MbarrierInit,
    /// `memory_layout`
    MemoryLayout,
    /// `min`
    Min,
    /// `mma`
    Mma,
    /// `mma_async`
    MmaAsync,
    /// `mmio`
    Mmio,
    /// `multicast::cluster`
    MulticastCluster,
    /// `multicast::cluster::all`
    MulticastClusterAll,
    /// `nan`
    Nan,
    /// `nc`
    Nc,
    /// `ne`
    Ne,
    /// `neu`
    Neu,
    /// `noComplete`
    NoComplete,
    /// `noftz`
    Noftz,
    /// `noinc`
    Noinc,
    /// `normal`
    Normal,
    /// `normalized_coords`
    NormalizedCoords,
    /// `notanumber`
    Notanumber,
    /// `num`
    Num,
    /// `num_mipmap_levels`
    NumMipmapLevels,
    /// `num_samples`
    NumSamples,
    /// `number`
    Number,
    /// `oob`
    Oob,
    /// `or`
    Or,
    /// `p`
    P,
    /// `pack`
    Pack,
    /// `pack::16b`
    Pack16b,
    /// `param`
    Param,
    /// `param::entry`
    ParamEntry,
    /// `param::func`
    ParamFunc,
    /// `parity`
    Parity,
    /// `pending_count`
    PendingCount,
    /// `po`
    Po,
    /// `popc`
    Popc,
    /// `pred`
    Pred,
    /// `prefetch`
    Prefetch,
    /// `proxy`
    Proxy,
    /// `query_cancel`
    QueryCancel,
    /// `r`
    R,
    /// `range`
    Range,
    /// `rank`
    Rank,
    /// `rc16`
    Rc16,
    /// `rc8`
    Rc8,
    /// `read`
    Read,
    /// `red`
    Red,
    /// `reduce`
    Reduce,
    /// `relaxed`
    Relaxed,
    /// `release`
    Release,
    /// `relinquish_alloc_permit`
    RelinquishAllocPermit,
    /// `relu`
    Relu,
    /// `replace`
    Replace,
    /// `rm`
    Rm,
    /// `rmi`
    Rmi,
    /// `rn`
    Rn,
    /// `rna`
    Rna,
    /// `rni`
    Rni,
    /// `row`
    Row,
    /// `rp`
    Rp,
    /// `rpi`
    Rpi,
    /// `rs`
    Rs,
    /// `rz`
    Rz,
    /// `rzi`
    Rzi,
    /// `s16`
    S16,
    /// `s16x2`
    S16x2,
    /// `s2`
    S2,
    /// `s32`
    S32,
    /// `s4`
    S4,
    /// `s64`
    S64,
    /// `s8`
    S8,
    /// `samplerref`
    Samplerref,
    /// `sat`
    Sat,
    /// `satfinite`
    Satfinite,
    /// `sc`
    Sc,
    /// `scale_vec::1X`
    ScaleVec1X,
    /// `scale_vec::2X`
    ScaleVec2X,
    /// `scale_vec::4X`
    ScaleVec4X,
    /// `scope`
    Scope,
    /// `shared`
    Shared,
    /// `shared::cluster`
    SharedCluster,
    /// `shared::cta`
    SharedCta,
    /// `shift`
    Shift,
    /// `shiftamt`
    Shiftamt,
    /// `shr15`
    Shr15,
    /// `shr7`
    Shr7,
    /// `sp`
    Sp,
    /// `sp::ordered_metadata`
    SpOrderedMetadata,
    /// `st`
    St,
    /// `store`
    Store,
    /// `subnormal`
    Subnormal,
    /// `surfref`
    Surfref,
    /// `swizzle_atomicity`
    SwizzleAtomicity,
    /// `swizzle_mode`
    SwizzleMode,
    /// `sync`
    Sync,
    /// `sync_restrict::shared::cluster`
    SyncRestrictSharedCluster,
    /// `sync_restrict::shared::cta`
    SyncRestrictSharedCta,
    /// `sys`
    Sys,
    /// `tensor`
    Tensor,
    /// `tensormap`
    Tensormap,
    /// `tensormap::generic`
    TensormapGeneric,
    /// `test_wait`
    TestWait,
    /// `texref`
    Texref,
    /// `tf32`
    Tf32,
    /// `tile`
    Tile,
    /// `tile::gather4`
    TileGather4,
    /// `tile::scatter4`
    TileScatter4,
    /// `to`
    To,
    /// `to_proxy::from_proxy`
    ToProxyFromProxy,
    /// `trans`
    Trans,
    /// `trap`
    Trap,
    /// `try_cancel`
    TryCancel,
    /// `try_wait`
    TryWait,
    /// `u16`
    U16,
    /// `u16x2`
    U16x2,
    /// `u2`
    U2,
    /// `u32`
    U32,
    /// `u4`
    U4,
    /// `u64`
    U64,
    /// `u8`
    U8,
    /// `ue4m3`
    Ue4m3,
    /// `ue8m0`
    Ue8m0,
    /// `ue8m0x2`
    Ue8m0x2,
    /// `uni`
    Uni,
    /// `unpack::16b`
    Unpack16b,
    /// `up`
    Up,
    /// `v2`
    V2,
    /// `v4`
    V4,
    /// `v8`
    V8,
    /// `valid_addr`
    ValidAddr,
    /// `volatile`
    Volatile,
    /// `wait`
    Wait,
    /// `wait::ld`
    WaitLd,
    /// `wait::st`
    WaitSt,
    /// `wait_all`
    WaitAll,
    /// `wait_group`
    WaitGroup,
    /// `warp`
    Warp,
    /// `warpx2::01_23`
    Warpx20123,
    /// `warpx2::02_13`
    Warpx20213,
    /// `warpx4`
    Warpx4,
    /// `wb`
    Wb,
    /// `weak`
    Weak,
    /// `wide`
    Wide,
    /// `width`
    Width,
    /// `wrap`
    Wrap,
    /// `ws`
    Ws,
    /// `wt`
    Wt,
    /// `x1`
    X1,
    /// `x128`
    X128,
    /// `x16`
    X16,
    /// `x2`
    X2,
    /// `x32`
    X32,
    /// `x4`
    X4,
    /// `x64`
    X64,
    /// `x8`
    X8,
    /// `xor`
    Xor,
    /// `xorsign`
    Xorsign,
    /// `zero`
    Zero,
}

impl Mod {
    /// Every variant, in declaration order.
    pub const ALL: [Mod; 548] = [
        Mod::X128x128b,
        Mod::X128x256b,
        Mod::X16x128b,
        Mod::X16x256b,
        Mod::X16x32bx2,
        Mod::X16x64b,
        Mod::X1d,
        Mod::X2d,
        Mod::X2dms,
        Mod::X32x128b,
        Mod::X32x32b,
        Mod::X3d,
        Mod::X4d,
        Mod::X4x256b,
        Mod::X5d,
        Mod::X64x128b,
        Mod::L1,
        Mod::L132B,
        Mod::L1EvictFirst,
        Mod::L1EvictLast,
        Mod::L1EvictNormal,
        Mod::L1EvictUnchanged,
        Mod::L1NoAllocate,
        Mod::L2,
        Mod::L2128B,
        Mod::L2256B,
        Mod::L264B,
        Mod::L2CacheHint,
        Mod::L2EvictFirst,
        Mod::L2EvictLast,
        Mod::L2EvictNormal,
        Mod::L2EvictUnchanged,
        Mod::NaN,
        Mod::A,
        Mod::A1d,
        Mod::A2d,
        Mod::A2dms,
        Mod::Abs,
        Mod::AccF16,
        Mod::AccF32,
        Mod::AcqRel,
        Mod::Acquire,
        Mod::Acube,
        Mod::Add,
        Mod::AddrMode0,
        Mod::AddrMode1,
        Mod::AddrMode2,
        Mod::Alias,
        Mod::Aligned,
        Mod::All,
        Mod::Alloc,
        Mod::And,
        Mod::Any,
        Mod::Approx,
        Mod::ArraySize,
        Mod::Arrive,
        Mod::ArriveDrop,
        Mod::Ashift,
        Mod::Async,
        Mod::AsyncGeneric,
        Mod::B,
        Mod::B1,
        Mod::B1024,
        Mod::B128,
        Mod::B16,
        Mod::B32,
        Mod::B4e,
        Mod::B4x16P64,
        Mod::B64,
        Mod::B6x16P32,
        Mod::B8,
        Mod::B8x16,
        Mod::Ballot,
        Mod::Base,
        Mod::Bf16,
        Mod::Bf16x2,
        Mod::Bfly,
        Mod::Block16,
        Mod::Block32,
        Mod::BlockScale,
        Mod::BoxDim,
        Mod::Bulk,
        Mod::BulkGroup,
        Mod::C,
        Mod::Ca,
        Mod::Cas,
        Mod::Cc,
        Mod::Cg,
        Mod::ChannelDataType,
        Mod::ChannelOrder,
        Mod::Clamp,
        Mod::Cluster,
        Mod::Col,
        Mod::CollectorADiscard,
        Mod::CollectorAFill,
        Mod::CollectorALastuse,
        Mod::CollectorAUse,
        Mod::CollectorB0Discard,
        Mod::CollectorB0Fill,
        Mod::CollectorB0Lastuse,
        Mod::CollectorB0Use,
        Mod::CollectorB1Discard,
        Mod::CollectorB1Fill,
        Mod::CollectorB1Lastuse,
        Mod::CollectorB1Use,
        Mod::CollectorB2Discard,
        Mod::CollectorB2Fill,
        Mod::CollectorB2Lastuse,
        Mod::CollectorB2Use,
        Mod::CollectorB3Discard,
        Mod::CollectorB3Fill,
        Mod::CollectorB3Lastuse,
        Mod::CollectorB3Use,
        Mod::Commit,
        Mod::CommitGroup,
        Mod::CompleteTx,
        Mod::Const,
        Mod::Cp,
        Mod::CpFenceproxy,
        Mod::CpMask,
        Mod::Cs,
        Mod::Cta,
        Mod::CtaGroup1,
        Mod::CtaGroup2,
        Mod::Cube,
        Mod::Cv,
        Mod::Cvt,
        Mod::D,
        Mod::Dealloc,
        Mod::Dec,
        Mod::Depth,
        Mod::Down,
        Mod::E2m1,
        Mod::E2m1x2,
        Mod::E2m1x4,
        Mod::E2m3,
        Mod::E2m3x2,
        Mod::E2m3x4,
        Mod::E3m2,
        Mod::E3m2x2,
        Mod::E3m2x4,
        Mod::E4m3,
        Mod::E4m3x2,
        Mod::E4m3x4,
        Mod::E5m2,
        Mod::E5m2x2,
        Mod::E5m2x4,
        Mod::Ecl,
        Mod::Ecr,
        Mod::ElementStride,
        Mod::Elemtype,
        Mod::Eq,
        Mod::Equ,
        Mod::Exch,
        Mod::ExpectTx,
        Mod::F16,
        Mod::F16x2,
        Mod::F32,
        Mod::F32x2,
        Mod::F4e,
        Mod::F64,
        Mod::Fence,
        Mod::FenceAfterThreadSync,
        Mod::FenceBeforeThreadSync,
        Mod::FillMode,
        Mod::FilterMode,
        Mod::Finite,
        Mod::ForceUnnormalizedCoords,
        Mod::Fractional,
        Mod::Ftz,
        Mod::Full,
        Mod::G,
        Mod::Ge,
        Mod::GetFirstCtaid,
        Mod::GetFirstCtaidX,
        Mod::GetFirstCtaidY,
        Mod::GetFirstCtaidZ,
        Mod::Geu,
        Mod::Gl,
        Mod::Global,
        Mod::GlobalAddress,
        Mod::GlobalDim,
        Mod::GlobalStride,
        Mod::Gpu,
        Mod::Grad,
        Mod::Gt,
        Mod::Gtu,
        Mod::Height,
        Mod::Hi,
        Mod::Hs,
        Mod::Idx,
        Mod::Im2col,
        Mod::Im2colW,
        Mod::Im2colW128,
        Mod::Im2colNoOffs,
        Mod::Inc,
        Mod::Infinite,
        Mod::Init,
        Mod::InterleaveLayout,
        Mod::Inval,
        Mod::IsCanceled,
        Mod::KindF16,
        Mod::KindF8f6f4,
        Mod::KindI8,
        Mod::KindMxf4,
        Mod::KindMxf4nvf4,
        Mod::KindMxf8f6f4,
        Mod::KindTf32,
        Mod::L,
        Mod::LaunchDependents,
        Mod::Ld,
        Mod::LdReduce,
        Mod::Le,
        Mod::Leu,
        Mod::Level,
        Mod::Lo,
        Mod::Load,
        Mod::Local,
        Mod::Ls,
        Mod::Lt,
        Mod::Ltu,
        Mod::Lu,
        Mod::M16n16,
        Mod::M16n16k16,
        Mod::M16n16k8,
        Mod::M16n8,
        Mod::M16n8k128,
        Mod::M16n8k16,
        Mod::M16n8k256,
        Mod::M16n8k32,
        Mod::M16n8k4,
        Mod::M16n8k64,
        Mod::M16n8k8,
        Mod::M32n8k16,
        Mod::M64n104k16,
        Mod::M64n104k32,
        Mod::M64n104k64,
        Mod::M64n104k8,
        Mod::M64n112k16,
        Mod::M64n112k256,
        Mod::M64n112k32,
        Mod::M64n112k64,
        Mod::M64n112k8,
        Mod::M64n120k16,
        Mod::M64n120k32,
        Mod::M64n120k64,
        Mod::M64n120k8,
        Mod::M64n128k16,
        Mod::M64n128k256,
        Mod::M64n128k32,
        Mod::M64n128k64,
        Mod::M64n128k8,
        Mod::M64n136k16,
        Mod::M64n136k32,
        Mod::M64n136k64,
        Mod::M64n136k8,
        Mod::M64n144k16,
        Mod::M64n144k256,
        Mod::M64n144k32,
        Mod::M64n144k64,
        Mod::M64n144k8,
        Mod::M64n152k16,
        Mod::M64n152k32,
        Mod::M64n152k64,
        Mod::M64n152k8,
        Mod::M64n160k16,
        Mod::M64n160k256,
        Mod::M64n160k32,
        Mod::M64n160k64,
        Mod::M64n160k8,
        Mod::M64n168k16,
        Mod::M64n168k32,
        Mod::M64n168k64,
        Mod::M64n168k8,
        Mod::M64n16k16,
        Mod::M64n16k256,
        Mod::M64n16k32,
        Mod::M64n16k64,
        Mod::M64n16k8,
        Mod::M64n176k16,
        Mod::M64n176k256,
        Mod::M64n176k32,
        Mod::M64n176k64,
        Mod::M64n176k8,
        Mod::M64n184k16,
        Mod::M64n184k32,
        Mod::M64n184k64,
        Mod::M64n184k8,
        Mod::M64n192k16,
        Mod::M64n192k256,
        Mod::M64n192k32,
        Mod::M64n192k64,
        Mod::M64n192k8,
        Mod::M64n200k16,
        Mod::M64n200k32,
        Mod::M64n200k64,
        Mod::M64n200k8,
        Mod::M64n208k16,
        Mod::M64n208k256,
        Mod::M64n208k32,
        Mod::M64n208k64,
        Mod::M64n208k8,
        Mod::M64n216k16,
        Mod::M64n216k32,
        Mod::M64n216k64,
        Mod::M64n216k8,
        Mod::M64n224k16,
        Mod::M64n224k256,
        Mod::M64n224k32,
        Mod::M64n224k64,
        Mod::M64n224k8,
        Mod::M64n232k16,
        Mod::M64n232k32,
        Mod::M64n232k64,
        Mod::M64n232k8,
        Mod::M64n240k16,
        Mod::M64n240k256,
        Mod::M64n240k32,
        Mod::M64n240k64,
        Mod::M64n240k8,
        Mod::M64n248k16,
        Mod::M64n248k32,
        Mod::M64n248k64,
        Mod::M64n248k8,
        Mod::M64n24k16,
        Mod::M64n24k256,
        Mod::M64n24k32,
        Mod::M64n24k64,
        Mod::M64n24k8,
        Mod::M64n256k16,
        Mod::M64n256k256,
        Mod::M64n256k32,
        Mod::M64n256k64,
        Mod::M64n256k8,
        Mod::M64n32k16,
        Mod::M64n32k256,
        Mod::M64n32k32,
        Mod::M64n32k64,
        Mod::M64n32k8,
        Mod::M64n40k16,
        Mod::M64n40k32,
        Mod::M64n40k64,
        Mod::M64n40k8,
        Mod::M64n48k16,
        Mod::M64n48k256,
        Mod::M64n48k32,
        Mod::M64n48k64,
        Mod::M64n48k8,
        Mod::M64n56k16,
        Mod::M64n56k32,
        Mod::M64n56k64,
        Mod::M64n56k8,
        Mod::M64n64k16,
        Mod::M64n64k256,
        Mod::M64n64k32,
        Mod::M64n64k64,
        Mod::M64n64k8,
        Mod::M64n72k16,
        Mod::M64n72k32,
        Mod::M64n72k64,
        Mod::M64n72k8,
        Mod::M64n80k16,
        Mod::M64n80k256,
        Mod::M64n80k32,
        Mod::M64n80k64,
        Mod::M64n80k8,
        Mod::M64n88k16,
        Mod::M64n88k32,
        Mod::M64n88k64,
        Mod::M64n88k8,
        Mod::M64n8k16,
        Mod::M64n8k256,
        Mod::M64n8k32,
        Mod::M64n8k64,
        Mod::M64n8k8,
        Mod::M64n96k16,
        Mod::M64n96k256,
        Mod::M64n96k32,
        Mod::M64n96k64,
        Mod::M64n96k8,
        Mod::M8n16,
        Mod::M8n32k16,
        Mod::M8n8,
        Mod::M8n8k128,
        Mod::M8n8k16,
        Mod::M8n8k32,
        Mod::M8n8k4,
        Mod::Mask,
        Mod::Max,
        Mod::Mbarrier,
        Mod::MbarrierArriveOne,
        Mod::MbarrierCompleteTxBytes,
        Mod::MbarrierInit,
        Mod::MemoryLayout,
        Mod::Min,
        Mod::Mma,
        Mod::MmaAsync,
        Mod::Mmio,
        Mod::MulticastCluster,
        Mod::MulticastClusterAll,
        Mod::Nan,
        Mod::Nc,
        Mod::Ne,
        Mod::Neu,
        Mod::NoComplete,
        Mod::Noftz,
        Mod::Noinc,
        Mod::Normal,
        Mod::NormalizedCoords,
        Mod::Notanumber,
        Mod::Num,
        Mod::NumMipmapLevels,
        Mod::NumSamples,
        Mod::Number,
        Mod::Oob,
        Mod::Or,
        Mod::P,
        Mod::Pack,
        Mod::Pack16b,
        Mod::Param,
        Mod::ParamEntry,
        Mod::ParamFunc,
        Mod::Parity,
        Mod::PendingCount,
        Mod::Po,
        Mod::Popc,
        Mod::Pred,
        Mod::Prefetch,
        Mod::Proxy,
        Mod::QueryCancel,
        Mod::R,
        Mod::Range,
        Mod::Rank,
        Mod::Rc16,
        Mod::Rc8,
        Mod::Read,
        Mod::Red,
        Mod::Reduce,
        Mod::Relaxed,
        Mod::Release,
        Mod::RelinquishAllocPermit,
        Mod::Relu,
        Mod::Replace,
        Mod::Rm,
        Mod::Rmi,
        Mod::Rn,
        Mod::Rna,
        Mod::Rni,
        Mod::Row,
        Mod::Rp,
        Mod::Rpi,
        Mod::Rs,
        Mod::Rz,
        Mod::Rzi,
        Mod::S16,
        Mod::S16x2,
        Mod::S2,
        Mod::S32,
        Mod::S4,
        Mod::S64,
        Mod::S8,
        Mod::Samplerref,
        Mod::Sat,
        Mod::Satfinite,
        Mod::Sc,
        Mod::ScaleVec1X,
        Mod::ScaleVec2X,
        Mod::ScaleVec4X,
        Mod::Scope,
        Mod::Shared,
        Mod::SharedCluster,
        Mod::SharedCta,
        Mod::Shift,
        Mod::Shiftamt,
        Mod::Shr15,
        Mod::Shr7,
        Mod::Sp,
        Mod::SpOrderedMetadata,
        Mod::St,
        Mod::Store,
        Mod::Subnormal,
        Mod::Surfref,
        Mod::SwizzleAtomicity,
        Mod::SwizzleMode,
        Mod::Sync,
        Mod::SyncRestrictSharedCluster,
        Mod::SyncRestrictSharedCta,
        Mod::Sys,
        Mod::Tensor,
        Mod::Tensormap,
        Mod::TensormapGeneric,
        Mod::TestWait,
        Mod::Texref,
        Mod::Tf32,
        Mod::Tile,
        Mod::TileGather4,
        Mod::TileScatter4,
        Mod::To,
        Mod::ToProxyFromProxy,
        Mod::Trans,
        Mod::Trap,
        Mod::TryCancel,
        Mod::TryWait,
        Mod::U16,
        Mod::U16x2,
        Mod::U2,
        Mod::U32,
        Mod::U4,
        Mod::U64,
        Mod::U8,
        Mod::Ue4m3,
        Mod::Ue8m0,
        Mod::Ue8m0x2,
        Mod::Uni,
        Mod::Unpack16b,
        Mod::Up,
        Mod::V2,
        Mod::V4,
        Mod::V8,
        Mod::ValidAddr,
        Mod::Volatile,
        Mod::Wait,
        Mod::WaitLd,
        Mod::WaitSt,
        Mod::WaitAll,
        Mod::WaitGroup,
        Mod::Warp,
        Mod::Warpx20123,
        Mod::Warpx20213,
        Mod::Warpx4,
        Mod::Wb,
        Mod::Weak,
        Mod::Wide,
        Mod::Width,
        Mod::Wrap,
        Mod::Ws,
        Mod::Wt,
        Mod::X1,
        Mod::X128,
        Mod::X16,
        Mod::X2,
        Mod::X32,
        Mod::X4,
        Mod::X64,
        Mod::X8,
        Mod::Xor,
        Mod::Xorsign,
        Mod::Zero,
    ];

    /// The PTX spelling of each variant, in declaration order (sorted).
    const NAMES: [&'static str; 548] = [
        "128x128b",
        "128x256b",
        "16x128b",
        "16x256b",
        "16x32bx2",
        "16x64b",
        "1d",
        "2d",
        "2dms",
        "32x128b",
        "32x32b",
        "3d",
        "4d",
        "4x256b",
        "5d",
        "64x128b",
        "L1",
        "L1::32B",
        "L1::evict_first",
        "L1::evict_last",
        "L1::evict_normal",
        "L1::evict_unchanged",
        "L1::no_allocate",
        "L2",
        "L2::128B",
        "L2::256B",
        "L2::64B",
        "L2::cache_hint",
        "L2::evict_first",
        "L2::evict_last",
        "L2::evict_normal",
        "L2::evict_unchanged",
        "NaN",
        "a",
        "a1d",
        "a2d",
        "a2dms",
        "abs",
        "acc::f16",
        "acc::f32",
        "acq_rel",
        "acquire",
        "acube",
        "add",
        "addr_mode_0",
        "addr_mode_1",
        "addr_mode_2",
        "alias",
        "aligned",
        "all",
        "alloc",
        "and",
        "any",
        "approx",
        "array_size",
        "arrive",
        "arrive_drop",
        "ashift",
        "async",
        "async::generic",
        "b",
        "b1",
        "b1024",
        "b128",
        "b16",
        "b32",
        "b4e",
        "b4x16_p64",
        "b64",
        "b6x16_p32",
        "b8",
        "b8x16",
        "ballot",
        "base",
        "bf16",
        "bf16x2",
        "bfly",
        "block16",
        "block32",
        "block_scale",
        "box_dim",
        "bulk",
        "bulk_group",
        "c",
        "ca",
        "cas",
        "cc",
        "cg",
        "channel_data_type",
        "channel_order",
        "clamp",
        "cluster",
        "col",
        "collector::a::discard",
        "collector::a::fill",
        "collector::a::lastuse",
        "collector::a::use",
        "collector::b0::discard",
        "collector::b0::fill",
        "collector::b0::lastuse",
        "collector::b0::use",
        "collector::b1::discard",
        "collector::b1::fill",
        "collector::b1::lastuse",
        "collector::b1::use",
        "collector::b2::discard",
        "collector::b2::fill",
        "collector::b2::lastuse",
        "collector::b2::use",
        "collector::b3::discard",
        "collector::b3::fill",
        "collector::b3::lastuse",
        "collector::b3::use",
        "commit",
        "commit_group",
        "complete_tx",
        "const",
        "cp",
        "cp_fenceproxy",
        "cp_mask",
        "cs",
        "cta",
        "cta_group::1",
        "cta_group::2",
        "cube",
        "cv",
        "cvt",
        "d",
        "dealloc",
        "dec",
        "depth",
        "down",
        "e2m1",
        "e2m1x2",
        "e2m1x4",
        "e2m3",
        "e2m3x2",
        "e2m3x4",
        "e3m2",
        "e3m2x2",
        "e3m2x4",
        "e4m3",
        "e4m3x2",
        "e4m3x4",
        "e5m2",
        "e5m2x2",
        "e5m2x4",
        "ecl",
        "ecr",
        "element_stride",
        "elemtype",
        "eq",
        "equ",
        "exch",
        "expect_tx",
        "f16",
        "f16x2",
        "f32",
        "f32x2",
        "f4e",
        "f64",
        "fence",
        "fence::after_thread_sync",
        "fence::before_thread_sync",
        "fill_mode",
        "filter_mode",
        "finite",
        "force_unnormalized_coords",
        "fractional",
        "ftz",
        "full",
        "g",
        "ge",
        "get_first_ctaid",
        "get_first_ctaid::x",
        "get_first_ctaid::y",
        "get_first_ctaid::z",
        "geu",
        "gl",
        "global",
        "global_address",
        "global_dim",
        "global_stride",
        "gpu",
        "grad",
        "gt",
        "gtu",
        "height",
        "hi",
        "hs",
        "idx",
        "im2col",
        "im2col::w",
        "im2col::w::128",
        "im2col_no_offs",
        "inc",
        "infinite",
        "init",
        "interleave_layout",
        "inval",
        "is_canceled",
        "kind::f16",
        "kind::f8f6f4",
        "kind::i8",
        "kind::mxf4",
        "kind::mxf4nvf4",
        "kind::mxf8f6f4",
        "kind::tf32",
        "l",
        "launch_dependents",
        "ld",
        "ld_reduce",
        "le",
        "leu",
        "level",
        "lo",
        "load",
        "local",
        "ls",
        "lt",
        "ltu",
        "lu",
        "m16n16",
        "m16n16k16",
        "m16n16k8",
        "m16n8",
        "m16n8k128",
        "m16n8k16",
        "m16n8k256",
        "m16n8k32",
        "m16n8k4",
        "m16n8k64",
        "m16n8k8",
        "m32n8k16",
        "m64n104k16",
        "m64n104k32",
        "m64n104k64",
        "m64n104k8",
        "m64n112k16",
        "m64n112k256",
        "m64n112k32",
        "m64n112k64",
        "m64n112k8",
        "m64n120k16",
        "m64n120k32",
        "m64n120k64",
        "m64n120k8",
        "m64n128k16",
        "m64n128k256",
        "m64n128k32",
        "m64n128k64",
        "m64n128k8",
        "m64n136k16",
        "m64n136k32",
        "m64n136k64",
        "m64n136k8",
        "m64n144k16",
        "m64n144k256",
        "m64n144k32",
        "m64n144k64",
        "m64n144k8",
        "m64n152k16",
        "m64n152k32",
        "m64n152k64",
        "m64n152k8",
        "m64n160k16",
        "m64n160k256",
        "m64n160k32",
        "m64n160k64",
        "m64n160k8",
        "m64n168k16",
        "m64n168k32",
        "m64n168k64",
        "m64n168k8",
        "m64n16k16",
        "m64n16k256",
        "m64n16k32",
        "m64n16k64",
        "m64n16k8",
        "m64n176k16",
        "m64n176k256",
        "m64n176k32",
        "m64n176k64",
        "m64n176k8",
        "m64n184k16",
        "m64n184k32",
        "m64n184k64",
        "m64n184k8",
        "m64n192k16",
        "m64n192k256",
        "m64n192k32",
        "m64n192k64",
        "m64n192k8",
        "m64n200k16",
        "m64n200k32",
        "m64n200k64",
        "m64n200k8",
        "m64n208k16",
        "m64n208k256",
        "m64n208k32",
        "m64n208k64",
        "m64n208k8",
        "m64n216k16",
        "m64n216k32",
        "m64n216k64",
        "m64n216k8",
        "m64n224k16",
        "m64n224k256",
        "m64n224k32",
        "m64n224k64",
        "m64n224k8",
        "m64n232k16",
        "m64n232k32",
        "m64n232k64",
        "m64n232k8",
        "m64n240k16",
        "m64n240k256",
        "m64n240k32",
        "m64n240k64",
        "m64n240k8",
        "m64n248k16",
        "m64n248k32",
        "m64n248k64",
        "m64n248k8",
        "m64n24k16",
        "m64n24k256",
        "m64n24k32",
        "m64n24k64",
        "m64n24k8",
        "m64n256k16",
        "m64n256k256",
        "m64n256k32",
        "m64n256k64",
        "m64n256k8",
        "m64n32k16",
        "m64n32k256",
        "m64n32k32",
        "m64n32k64",
        "m64n32k8",
        "m64n40k16",
        "m64n40k32",
        "m64n40k64",
        "m64n40k8",
        "m64n48k16",
        "m64n48k256",
        "m64n48k32",
        "m64n48k64",
        "m64n48k8",
        "m64n56k16",
        "m64n56k32",
        "m64n56k64",
        "m64n56k8",
        "m64n64k16",
        "m64n64k256",
        "m64n64k32",
        "m64n64k64",
        "m64n64k8",
        "m64n72k16",
        "m64n72k32",
        "m64n72k64",
        "m64n72k8",
        "m64n80k16",
        "m64n80k256",
        "m64n80k32",
        "m64n80k64",
        "m64n80k8",
        "m64n88k16",
        "m64n88k32",
        "m64n88k64",
        "m64n88k8",
        "m64n8k16",
        "m64n8k256",
        "m64n8k32",
        "m64n8k64",
        "m64n8k8",
        "m64n96k16",
        "m64n96k256",
        "m64n96k32",
        "m64n96k64",
        "m64n96k8",
        "m8n16",
        "m8n32k16",
        "m8n8",
        "m8n8k128",
        "m8n8k16",
        "m8n8k32",
        "m8n8k4",
        "mask",
        "max",
        "mbarrier",
        "mbarrier::arrive::one",
        "mbarrier::complete_tx::bytes",
        "mbarrier_init",
        "memory_layout",
        "min",
        "mma",
        "mma_async",
        "mmio",
        "multicast::cluster",
        "multicast::cluster::all",
        "nan",
        "nc",
        "ne",
        "neu",
        "noComplete",
        "noftz",
        "noinc",
        "normal",
        "normalized_coords",
        "notanumber",
        "num",
        "num_mipmap_levels",
        "num_samples",
        "number",
        "oob",
        "or",
        "p",
        "pack",
        "pack::16b",
        "param",
        "param::entry",
        "param::func",
        "parity",
        "pending_count",
        "po",
        "popc",
        "pred",
        "prefetch",
        "proxy",
        "query_cancel",
        "r",
        "range",
        "rank",
        "rc16",
        "rc8",
        "read",
        "red",
        "reduce",
        "relaxed",
        "release",
        "relinquish_alloc_permit",
        "relu",
        "replace",
        "rm",
        "rmi",
        "rn",
        "rna",
        "rni",
        "row",
        "rp",
        "rpi",
        "rs",
        "rz",
        "rzi",
        "s16",
        "s16x2",
        "s2",
        "s32",
        "s4",
        "s64",
        "s8",
        "samplerref",
        "sat",
        "satfinite",
        "sc",
        "scale_vec::1X",
        "scale_vec::2X",
        "scale_vec::4X",
        "scope",
        "shared",
        "shared::cluster",
        "shared::cta",
        "shift",
        "shiftamt",
        "shr15",
        "shr7",
        "sp",
        "sp::ordered_metadata",
        "st",
        "store",
        "subnormal",
        "surfref",
        "swizzle_atomicity",
        "swizzle_mode",
        "sync",
        "sync_restrict::shared::cluster",
        "sync_restrict::shared::cta",
        "sys",
        "tensor",
        "tensormap",
        "tensormap::generic",
        "test_wait",
        "texref",
        "tf32",
        "tile",
        "tile::gather4",
        "tile::scatter4",
        "to",
        "to_proxy::from_proxy",
        "trans",
        "trap",
        "try_cancel",
        "try_wait",
        "u16",
        "u16x2",
        "u2",
        "u32",
        "u4",
        "u64",
        "u8",
        "ue4m3",
        "ue8m0",
        "ue8m0x2",
        "uni",
        "unpack::16b",
        "up",
        "v2",
        "v4",
        "v8",
        "valid_addr",
        "volatile",
        "wait",
        "wait::ld",
        "wait::st",
        "wait_all",
        "wait_group",
        "warp",
        "warpx2::01_23",
        "warpx2::02_13",
        "warpx4",
        "wb",
        "weak",
        "wide",
        "width",
        "wrap",
        "ws",
        "wt",
        "x1",
        "x128",
        "x16",
        "x2",
        "x32",
        "x4",
        "x64",
        "x8",
        "xor",
        "xorsign",
        "zero",
    ];

    /// The PTX spelling (without the dot).
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The variant spelled `s` (without the dot).
    pub fn from_name(s: &str) -> Option<Self> {
        Self::NAMES.binary_search(&s).ok().map(|i| Self::ALL[i])
    }
}

/// A modifier group of the manual's syntax blocks (`.type` in `ld{.ss}.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
#[repr(u16)]
pub enum Group {
    /// `BoolOp`
    BoolOp,
    /// `CmpOp`
    CmpOp,
    /// `abType`
    AbType,
    /// `abtype`
    Abtype,
    /// `acc_prec`
    AccPrec,
    /// `action`
    Action,
    /// `adim`
    Adim,
    /// `alayout`
    Alayout,
    /// `atype`
    Atype,
    /// `bitOp`
    BitOp,
    /// `blayout`
    Blayout,
    /// `btype`
    Btype,
    /// `cType`
    CType,
    /// `cmp`
    Cmp,
    /// `collector_usage`
    CollectorUsage,
    /// `comp`
    Comp,
    /// `completion_mechanism`
    CompletionMechanism,
    /// `convertType`
    ConvertType,
    /// `cop`
    Cop,
    /// `cp_qualifiers`
    CpQualifiers,
    /// `cta_group`
    CtaGroup,
    /// `ctype`
    Ctype,
    /// `dim`
    Dim,
    /// `dst`
    Dst,
    /// `dst_fmt`
    DstFmt,
    /// `dst_src_fmt`
    DstSrcFmt,
    /// `dtype`
    Dtype,
    /// `f4x2type`
    F4x2type,
    /// `f4x4type`
    F4x4type,
    /// `f6x2type`
    F6x2type,
    /// `f6x4type`
    F6x4type,
    /// `f8f6f4type`
    F8f6f4type,
    /// `f8type`
    F8type,
    /// `f8x2type`
    F8x2type,
    /// `f8x4type`
    F8x4type,
    /// `fence_qualifiers`
    FenceQualifiers,
    /// `field1`
    Field1,
    /// `field2`
    Field2,
    /// `field3`
    Field3,
    /// `frnd`
    Frnd,
    /// `frnd2`
    Frnd2,
    /// `frnd3`
    Frnd3,
    /// `geom`
    Geom,
    /// `get_first_ctaid_dimension`
    GetFirstCtaidDimension,
    /// `half_word_type`
    HalfWordType,
    /// `hop`
    Hop,
    /// `htype`
    Htype,
    /// `irnd`
    Irnd,
    /// `itype`
    Itype,
    /// `kind`
    Kind,
    /// `layout`
    Layout,
    /// `ldsem`
    Ldsem,
    /// `level`
    Level,
    /// `level1::eviction_priority`
    Level1EvictionPriority,
    /// `level2::eviction_priority`
    Level2EvictionPriority,
    /// `level::cache_hint`
    LevelCacheHint,
    /// `level::eviction_priority`
    LevelEvictionPriority,
    /// `level::prefetch_size`
    LevelPrefetchSize,
    /// `level::primary_priority`
    LevelPrimaryPriority,
    /// `level::secondary_priority`
    LevelSecondaryPriority,
    /// `load_mode`
    LoadMode,
    /// `mode`
    Mode,
    /// `multicast`
    Multicast,
    /// `num`
    Num,
    /// `op`
    Op,
    /// `op2`
    Op2,
    /// `op_restrict`
    OpRestrict,
    /// `pack`
    Pack,
    /// `packed_type`
    PackedType,
    /// `proxykind`
    Proxykind,
    /// `query`
    Query,
    /// `redOp`
    RedOp,
    /// `redop`
    Redop,
    /// `redsem`
    Redsem,
    /// `redtype`
    Redtype,
    /// `rnd`
    Rnd,
    /// `scale`
    Scale,
    /// `scale_vec_size`
    ScaleVecSize,
    /// `scale_vectorsize`
    ScaleVectorsize,
    /// `scope`
    Scope,
    /// `sem`
    Sem,
    /// `shape`
    Shape,
    /// `shape1`
    Shape1,
    /// `shape2`
    Shape2,
    /// `shape3`
    Shape3,
    /// `shape4`
    Shape4,
    /// `size`
    Size,
    /// `space`
    Space,
    /// `spvariant`
    Spvariant,
    /// `squery`
    Squery,
    /// `src`
    Src,
    /// `src_fmt`
    SrcFmt,
    /// `ss`
    Ss,
    /// `state`
    State,
    /// `stsem`
    Stsem,
    /// `stype`
    Stype,
    /// `tensormap_space`
    TensormapSpace,
    /// `tlquery`
    Tlquery,
    /// `to_proxy::from_proxy`
    ToProxyFromProxy,
    /// `to_proxykind::from_proxykind`
    ToProxykindFromProxykind,
    /// `tquery`
    Tquery,
    /// `type`
    Type,
    /// `unpack`
    Unpack,
    /// `vec`
    Vec,
    /// `vec_16_bit`
    Vec16Bit,
    /// `vec_32_bit`
    Vec32Bit,
    /// `wait_operation`
    WaitOperation,
}

impl Group {
    /// Every variant, in declaration order.
    pub const ALL: [Group; 107] = [
        Group::BoolOp,
        Group::CmpOp,
        Group::AbType,
        Group::Abtype,
        Group::AccPrec,
        Group::Action,
        Group::Adim,
        Group::Alayout,
        Group::Atype,
        Group::BitOp,
        Group::Blayout,
        Group::Btype,
        Group::CType,
        Group::Cmp,
        Group::CollectorUsage,
        Group::Comp,
        Group::CompletionMechanism,
        Group::ConvertType,
        Group::Cop,
        Group::CpQualifiers,
        Group::CtaGroup,
        Group::Ctype,
        Group::Dim,
        Group::Dst,
        Group::DstFmt,
        Group::DstSrcFmt,
        Group::Dtype,
        Group::F4x2type,
        Group::F4x4type,
        Group::F6x2type,
        Group::F6x4type,
        Group::F8f6f4type,
        Group::F8type,
        Group::F8x2type,
        Group::F8x4type,
        Group::FenceQualifiers,
        Group::Field1,
        Group::Field2,
        Group::Field3,
        Group::Frnd,
        Group::Frnd2,
        Group::Frnd3,
        Group::Geom,
        Group::GetFirstCtaidDimension,
        Group::HalfWordType,
        Group::Hop,
        Group::Htype,
        Group::Irnd,
        Group::Itype,
        Group::Kind,
        Group::Layout,
        Group::Ldsem,
        Group::Level,
        Group::Level1EvictionPriority,
        Group::Level2EvictionPriority,
        Group::LevelCacheHint,
        Group::LevelEvictionPriority,
        Group::LevelPrefetchSize,
        Group::LevelPrimaryPriority,
        Group::LevelSecondaryPriority,
        Group::LoadMode,
        Group::Mode,
        Group::Multicast,
        Group::Num,
        Group::Op,
        Group::Op2,
        Group::OpRestrict,
        Group::Pack,
        Group::PackedType,
        Group::Proxykind,
        Group::Query,
        Group::RedOp,
        Group::Redop,
        Group::Redsem,
        Group::Redtype,
        Group::Rnd,
        Group::Scale,
        Group::ScaleVecSize,
        Group::ScaleVectorsize,
        Group::Scope,
        Group::Sem,
        Group::Shape,
        Group::Shape1,
        Group::Shape2,
        Group::Shape3,
        Group::Shape4,
        Group::Size,
        Group::Space,
        Group::Spvariant,
        Group::Squery,
        Group::Src,
        Group::SrcFmt,
        Group::Ss,
        Group::State,
        Group::Stsem,
        Group::Stype,
        Group::TensormapSpace,
        Group::Tlquery,
        Group::ToProxyFromProxy,
        Group::ToProxykindFromProxykind,
        Group::Tquery,
        Group::Type,
        Group::Unpack,
        Group::Vec,
        Group::Vec16Bit,
        Group::Vec32Bit,
        Group::WaitOperation,
    ];

    /// The PTX spelling of each variant, in declaration order (sorted).
    const NAMES: [&'static str; 107] = [
        "BoolOp",
        "CmpOp",
        "abType",
        "abtype",
        "acc_prec",
        "action",
        "adim",
        "alayout",
        "atype",
        "bitOp",
        "blayout",
        "btype",
        "cType",
        "cmp",
        "collector_usage",
        "comp",
        "completion_mechanism",
        "convertType",
        "cop",
        "cp_qualifiers",
        "cta_group",
        "ctype",
        "dim",
        "dst",
        "dst_fmt",
        "dst_src_fmt",
        "dtype",
        "f4x2type",
        "f4x4type",
        "f6x2type",
        "f6x4type",
        "f8f6f4type",
        "f8type",
        "f8x2type",
        "f8x4type",
        "fence_qualifiers",
        "field1",
        "field2",
        "field3",
        "frnd",
        "frnd2",
        "frnd3",
        "geom",
        "get_first_ctaid_dimension",
        "half_word_type",
        "hop",
        "htype",
        "irnd",
        "itype",
        "kind",
        "layout",
        "ldsem",
        "level",
        "level1::eviction_priority",
        "level2::eviction_priority",
        "level::cache_hint",
        "level::eviction_priority",
        "level::prefetch_size",
        "level::primary_priority",
        "level::secondary_priority",
        "load_mode",
        "mode",
        "multicast",
        "num",
        "op",
        "op2",
        "op_restrict",
        "pack",
        "packed_type",
        "proxykind",
        "query",
        "redOp",
        "redop",
        "redsem",
        "redtype",
        "rnd",
        "scale",
        "scale_vec_size",
        "scale_vectorsize",
        "scope",
        "sem",
        "shape",
        "shape1",
        "shape2",
        "shape3",
        "shape4",
        "size",
        "space",
        "spvariant",
        "squery",
        "src",
        "src_fmt",
        "ss",
        "state",
        "stsem",
        "stype",
        "tensormap_space",
        "tlquery",
        "to_proxy::from_proxy",
        "to_proxykind::from_proxykind",
        "tquery",
        "type",
        "unpack",
        "vec",
        "vec_16_bit",
        "vec_32_bit",
        "wait_operation",
    ];

    /// The PTX spelling (without the dot).
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The variant spelled `s` (without the dot).
    pub fn from_name(s: &str) -> Option<Self> {
        Self::NAMES.binary_search(&s).ok().map(|i| Self::ALL[i])
    }
}

