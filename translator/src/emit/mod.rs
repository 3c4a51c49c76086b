//! Pass 4: structured functions → SPIR-V (written by [`spv::Builder`]).
//!
//! One module per PTX module, one `GLCompute` entry point per `.entry`.
//! State spaces follow the launch ABI in [`crate::abi`] and
//! `shared/DESIGN.md`:
//! - registers are `Function` variables (the driver promotes them to SSA);
//! - `.global`, generic and module `.const`/`.global` variables are reached
//!   through `PhysicalStorageBuffer64` pointers made from 64-bit addresses;
//! - `.shared` is one `Workgroup` array of 32-bit words per entry, sized by a
//!   specialization constant, addressed by byte offset;
//! - `.local` is one `Function` array of 32-bit words per function;
//! - kernel parameters are 32-bit words of the push-constant block or of the
//!   parameter buffer.
//!
//! Structured regions from [`crate::structurize`] become loop constructs
//! (`Block` and `Loop`) and selection constructs (`If`). A branch that leaves
//! more than one loop construct stores its target in a `brk` variable, breaks
//! out of the innermost construct, and is re-dispatched at each construct's
//! merge block until it reaches its destination.
//!
//! Functions with barriers, or with warp operations on the emulated warp
//! path, are emitted in workgroup-uniform mode instead ([`uniform`]): every
//! invocation follows the same control flow and thread activity is data, so
//! that barriers ([`barrier`]) and emulated warp operations ([`warp`]) are
//! reached by the whole workgroup wherever CUDA code puts them.

mod async_copy;
mod barrier;
mod bits;
mod block_order;
mod call;
mod carry;
mod compare;
mod cvt;
mod fault;
mod float;
mod func;
mod graph_cond;
mod grid;
mod half;
mod heap;
mod inst;
mod live_out;
mod lockstep;
mod loop_limit;
mod mem;
mod mma;
mod mma_sp;
pub(crate) mod printf;
mod printf_sites;
mod race;
mod rounding;
mod spv;
mod stack;
mod uniform;
mod values;
mod vector16;
mod warp;
mod wgmma;
mod windowed;
mod wmma;
pub(crate) mod zero;

use crate::abi::{self, EntryInfo, ModuleInfo, ParamPassing};
use crate::ast::{self, FunctionKind, Linkage, ModuleItem, PerfDirective, StateSpace};
use crate::diag::{Diagnostic, Span};
use crate::fxhash::{FxHashMap, FxHashSet};
use crate::{layout, Options, TargetEnv};
use rspirv::dr::Operand;
use rspirv::spirv::{self, Capability, Word};
use spv::Builder;
use std::collections::{BTreeSet, HashMap};

pub(crate) use values::K;

/// Type keys for the type cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TyKey {
    Void,
    Bool,
    Int(u32),
    Float(u32),
    Vec(Word, u32),
    Ptr(spirv::StorageClass, Word),
    Array(Word, Word),
    Func(Word, Vec<Word>),
    Struct(Vec<Word>),
}

/// Largest variable kept in [`Emitter::literals`].
const MAX_LITERAL_BYTES: u64 = 1 << 16;

/// Slots of [`Emitter::scalars`].
const SCALAR_SLOTS: usize = 9;

/// The slot of a scalar type in [`Emitter::scalars`] (the types most asked
/// for, looked up without hashing).
fn scalar_slot(k: &TyKey) -> Option<usize> {
    Some(match k {
        TyKey::Void => 0,
        TyKey::Bool => 1,
        TyKey::Int(8) => 2,
        TyKey::Int(16) => 3,
        TyKey::Int(32) => 4,
        TyKey::Int(64) => 5,
        TyKey::Float(16) => 6,
        TyKey::Float(32) => 7,
        TyKey::Float(64) => 8,
        _ => return None,
    })
}

/// Module-wide emission state.
/// A plan of [`mma::plan_tile`], shared.
pub(crate) type MmaPlan = std::rc::Rc<Vec<Vec<(mma::Source, mma::Source)>>>;
/// A plan of `mma_sp::plan_sparse`, shared.
pub(crate) type MmaSpPlan = std::rc::Rc<Vec<Vec<mma_sp::Term>>>;

pub(crate) struct Emitter<'o> {
    pub b: Builder,
    pub opts: &'o Options,
    types: FxHashMap<TyKey, Word>,
    /// The scalar types already made, by [`scalar_slot`] (0: not yet).
    scalars: [Word; SCALAR_SLOTS],
    /// Pointer types already made: (storage class, pointee) → id.
    pointers: FxHashMap<(u32, Word), Word>,
    consts: FxHashMap<(Word, u64), Word>,
    caps: BTreeSet<u32>,
    pub glsl: Word,
    /// `LocalInvocationIndex` input.
    pub local_index: Word,
    /// The open function's opaque zeros (see [`zero::opaque_zero`]): the
    /// builder's function serial they belong to, then the 32- and 64-bit
    /// ones (0: not made yet).
    pub(crate) opaque_zeros: (u64, [Word; 2]),
    /// `WorkgroupId` input.
    pub workgroup_id: Word,
    /// `NumWorkgroups` input (in the interface of every entry).
    pub num_workgroups: Word,
    /// Private `uvec3`: the block's permuted workgroup id, computed once at
    /// each entry's start (see [`block_order::declare`]).
    pub block_id: Option<Word>,
    /// Workgroup `u32`: the block's ticket, which its first invocation takes
    /// from the module data word at [`Emitter::block_ticket_offset`] (see
    /// [`block_order`]).
    pub block_ticket: Option<Word>,
    /// Byte offset in the module data buffer of the ticket counter.
    pub block_ticket_offset: Option<u64>,
    /// Worker threads `%ctaid` is permuted for: the option's value when a
    /// function of the module may wait on another block, else 0 (see
    /// [`block_order::declare`]).
    pub block_order_threads: u32,
    /// Spec constants `%ntid.x/y/z`.
    pub spec_ntid: [Word; 3],
    /// Spec constant: the 32-bit words of the `.shared` variable of entries
    /// without 64-bit shared atomics ([`abi::SPEC_SHARED_WORDS`]).
    pub spec_shared_words: Word,
    /// Spec constant: the 64-bit words of the `.shared` variable of entries
    /// with them ([`abi::SPEC_SHARED_WIDE_WORDS`]).
    pub spec_shared_wide_words: Word,
    /// The `Private` u64 holding the module data buffer's device address
    /// (when the module has data): each entry copies it from push-constant
    /// header words 8 and 9 before anything else (see [`Emitter::module_data_address`]).
    pub module_data_var: Option<Word>,
    /// Spec constant `%dynamic_smem_size`, created on first use.
    pub spec_dynamic_shared: Option<Word>,
    /// Module-scope `.global`/`.const` variables: name → (offset, size).
    pub globals: HashMap<String, (u64, u64)>,
    /// The contents of the module's string literals, when it calls
    /// `printf` (its formats).
    pub literals: HashMap<String, Vec<u8>>,
    /// Types that already carry their decorations.
    pub decorated: BTreeSet<Word>,
    /// Index of every `.func` with a body (for function addresses).
    pub func_index: HashMap<String, u32>,
    /// `.func`s whose address is taken (candidates of indirect calls).
    pub address_taken: BTreeSet<String>,
    /// Offset of the trap word in the module data buffer.
    pub trap_offset: Option<u64>,
    /// Offset of the printf FIFO address in the module data buffer.
    pub printf_offset: Option<u64>,
    /// Byte offset of the device heap's address word in module data, when a
    /// kernel calls `malloc` or `free`.
    pub heap_offset: Option<u64>,
    /// Byte offset of the grid workspace's address word in module data, when
    /// a kernel synchronises its grid (see [`grid`]).
    pub grid_offset: Option<u64>,
    /// Byte offset of the lock table of 16-byte ordered vector accesses in
    /// module data, when the module has one (see [`vector16`]).
    pub vector_lock_offset: Option<u64>,
    /// Byte offset of the fault log's address word in module data, with
    /// fault checks (see [`fault`]).
    pub fault_offset: Option<u64>,
    /// Offset of the module's resume slot (see [`crate::abi::resume`]).
    pub resume_offset: Option<u64>,
    /// The instruction being emitted is one of the resume pass's record
    /// accesses (`fault::guard` leaves it unchecked).
    pub internal_access: bool,
    /// The checked accesses so far (see [`abi::fault::FaultSite`]).
    pub fault_sites: Vec<abi::fault::FaultSite>,
    /// Index of each site in `fault_sites`, by (span, space, function).
    pub fault_site_index: FxHashMap<(u32, u32, u32, String), u32>,
    /// The sources of each `mma` shape's products ([`mma::plan_tile`]),
    /// computed once per shape.
    pub mma_plans: FxHashMap<(mma::Geometry, bool), MmaPlan>,
    /// The products of each `mma.sp` (element type, K, selector), computed
    /// once per module.
    pub mma_sp_plans: FxHashMap<(mma::Elem, u32, u32), MmaSpPlan>,
    /// Spec constant: the range table's search depth, created on first use.
    pub spec_fault_depth: Option<Word>,
    /// Spec constant ops `k < depth`, by `k`.
    pub fault_steps: Vec<Word>,
    /// The range search function of the fault checks, once a check calls it.
    pub fault_search: Option<Word>,
    /// The record function of the fault paths, once one calls it.
    pub fault_record: Option<Word>,
    /// The `Private` fault state (first faulting site, its address) of
    /// modules with fault checks.
    pub fault_state: Option<(Word, Word)>,
    /// The `Private` copy of a small range table (see `fault::load_cache`).
    pub fault_cache: Option<Word>,
    /// The `Private` copy of the fault log's address (see `fault::load_cache`).
    pub fault_log_var: Option<Word>,
    /// The `Private` copies of the printf FIFO's address and capacity, read
    /// once per entry (see `printf::load_fifo`).
    pub printf_fifo_vars: Option<(Word, Word)>,
    /// Spec constant ops of the range scan (see `fault::linear_consts`).
    pub fault_linear: Option<(Word, Word)>,
    /// The racecheck's state, when the module's shared accesses are tracked.
    pub race: Option<race::Race>,
    /// Spec constant: the workgroup size in x (padded thread count).
    pub spec_wg_x: Word,
    /// The entry being emitted (with the functions it reaches) declares
    /// `.explicitcluster`: `%is_explicit_cluster` is true. Its launches
    /// have clusters of one block (the driver refuses larger ones).
    pub explicit_cluster: bool,
    /// The entry being emitted declares `.reqnctapercluster` with more
    /// than one block: its cluster registers cannot be given (clusters are
    /// not emulated), and reading one fails the translation.
    pub required_cluster: Option<[u32; 3]>,
    /// Spec constant ops: the block's thread count (`%ntid.x * .y * .z`),
    /// and whether the workgroup has padding invocations beyond it (see
    /// [`Emitter::padding_invocation`]).
    pub spec_threads: Word,
    pub spec_padded: Word,
    /// Functions that run in workgroup-uniform mode (see [`uniform`]).
    pub uniform_fns: BTreeSet<String>,
    /// Words per invocation of one emulated warp exchange: the most any
    /// warp instruction of the module shares at once ([`warp::share_many`]).
    pub exchange_words: u32,
    /// Scratch words (per invocation, fixed) of the module's one scratch
    /// array ([`uniform::module_scratch_words`]).
    pub module_scratch: (u32, u32),
    /// That array, created with the first entry that needs it.
    pub scratch_var: Option<Word>,
    /// Module-scope variables of warp and uniform-mode emission, created
    /// before any function (see [`warp::Globals`]).
    pub warp: warp::Globals,
    /// The `.shared` Workgroup variables of 32- and 64-bit words, shared by all entries.
    pub shared_var_narrow: Option<Word>,
    pub shared_var_wide: Option<Word>,
    /// Loop iterations so far per subgroup ([`loop_limit`]), when counted.
    pub loop_counter: Option<loop_limit::Counter>,
    /// The lock-step points (accesses where a warp's lanes meet) on the
    /// emulated warp path ([`lockstep::points`]).
    pub lockstep: FxHashSet<usize>,
    /// The shared spill area's constants, when `.shared` accesses may spill
    /// ([`crate::Options::shared_spill`] and a kernel uses `.shared`).
    pub spill: Option<mem::Spill>,
}

impl<'o> Emitter<'o> {
    /// Whether native float32 atomic add may be used.
    pub fn opts_float_atomics(&self) -> bool {
        self.opts.float_atomics
    }

    pub fn cap(&mut self, c: Capability) {
        if self.caps.insert(c as u32) {
            self.b.capability(c);
        }
    }

    pub fn ty(&mut self, k: TyKey) -> Word {
        let slot = scalar_slot(&k);
        if let Some(s) = slot {
            if self.scalars[s] != 0 {
                return self.scalars[s];
            }
        }
        if let TyKey::Ptr(sc, t) = k {
            if let Some(&w) = self.pointers.get(&(sc as u32, t)) {
                return w;
            }
        }
        if let Some(&w) = self.types.get(&k) {
            return w;
        }
        let w = match &k {
            TyKey::Void => self.b.type_void(),
            TyKey::Bool => self.b.type_bool(),
            TyKey::Int(w) => {
                match w {
                    8 => self.cap(Capability::Int8),
                    16 => self.cap(Capability::Int16),
                    64 => self.cap(Capability::Int64),
                    _ => {}
                }
                self.b.type_int(*w, 0)
            }
            TyKey::Float(w) => {
                match w {
                    16 => self.cap(Capability::Float16),
                    64 => self.cap(Capability::Float64),
                    _ => {}
                }
                self.b.type_float(*w, None)
            }
            TyKey::Vec(e, n) => self.b.type_vector(*e, *n),
            TyKey::Ptr(sc, t) => self.b.type_pointer(None, *sc, *t),
            TyKey::Array(e, len) => {
                let id = self.b.type_array(*e, *len);
                self.b.decorate(id, spirv::Decoration::ArrayStride, [Operand::LiteralBit32(4)]);
                id
            }
            TyKey::Func(r, p) => self.b.type_function(*r, p.clone()),
            TyKey::Struct(m) => self.b.type_struct(m.clone()),
        };
        match (slot, &k) {
            (Some(s), _) => self.scalars[s] = w,
            (None, &TyKey::Ptr(sc, t)) => {
                self.pointers.insert((sc as u32, t), w);
            }
            _ => {
                self.types.insert(k, w);
            }
        }
        w
    }

    pub fn t_bool(&mut self) -> Word {
        self.ty(TyKey::Bool)
    }
    pub fn t_int(&mut self, w: u32) -> Word {
        self.ty(TyKey::Int(w))
    }
    pub fn t_float(&mut self, w: u32) -> Word {
        self.ty(TyKey::Float(w))
    }
    pub fn t_ptr(&mut self, sc: spirv::StorageClass, t: Word) -> Word {
        self.ty(TyKey::Ptr(sc, t))
    }

    /// Integer constant of width `w` (value truncated to the width).
    pub fn c_int(&mut self, w: u32, v: u64) -> Word {
        let t = self.t_int(w);
        let v = if w >= 64 { v } else { v & ((1u64 << w) - 1) };
        self.constant(t, w, v)
    }
    pub fn c_u32(&mut self, v: u32) -> Word {
        self.c_int(32, v as u64)
    }

    /// Memory semantics `order` (acquire, release, ...) on device memory,
    /// as a constant; relaxed (0) where [`crate::Options::memory_semantics`]
    /// is off (llvmpipe).
    pub(crate) fn device_semantics(&mut self, order: spirv::MemorySemantics) -> Word {
        let bits = if self.opts.memory_semantics { (order | spirv::MemorySemantics::UNIFORM_MEMORY).bits() } else { 0 };
        self.c_u32(bits)
    }

    /// Whether the invocation `linear` is padding: beyond the block's
    /// threads in a workgroup rounded up past them. The test is
    /// `spec_padded && linear >= threads`, so that a driver folds it to
    /// `false` once the workgroup equals the block (the common case); a
    /// branch on it left in place cost llvmpipe a third of a memory-bound
    /// kernel's time (saxpy: 0.62 instead of 0.93 of a hand-written BDA
    /// shader's speed).
    pub fn padding_invocation(&mut self, linear: Word) -> Result<Word, Diagnostic> {
        let bt = self.t_bool();
        let beyond = self.b.u_greater_than_equal(bt, None, linear, self.spec_threads).map_err(func::internal1)?;
        self.b.logical_and(bt, None, self.spec_padded, beyond).map_err(func::internal1)
    }
    pub fn c_f32(&mut self, v: f32) -> Word {
        let t = self.t_float(32);
        self.constant(t, 32, v.to_bits() as u64)
    }
    pub fn c_f64(&mut self, v: f64) -> Word {
        let t = self.t_float(64);
        self.constant(t, 64, v.to_bits())
    }
    pub fn c_float(&mut self, w: u32, v: f64) -> Word {
        if w == 64 {
            self.c_f64(v)
        } else {
            self.c_f32(v as f32)
        }
    }
    pub fn c_bool(&mut self, v: bool) -> Word {
        let t = self.t_bool();
        if let Some(&w) = self.consts.get(&(t, v as u64)) {
            return w;
        }
        let w = if v { self.b.constant_true(t) } else { self.b.constant_false(t) };
        self.consts.insert((t, v as u64), w);
        w
    }
    pub(crate) fn consts_get(&self, t: Word, v: u64) -> Option<&Word> {
        self.consts.get(&(t, v))
    }
    pub(crate) fn consts_put(&mut self, t: Word, v: u64, id: Word) {
        self.consts.insert((t, v), id);
    }
    fn constant(&mut self, t: Word, w: u32, v: u64) -> Word {
        if let Some(&id) = self.consts.get(&(t, v)) {
            return id;
        }
        let id = if w == 64 { self.b.constant_bit64(t, v) } else { self.b.constant_bit32(t, v as u32) };
        self.consts.insert((t, v), id);
        id
    }
}

/// Emit a module. `module` must have been parsed; errors are diagnostics.
/// What lowering needs to know of the whole module, whichever entries it
/// emits: computed once per module ([`facts`]), so that emitting a module
/// of many entries one entry at a time (a module over SPIR-V's id limit)
/// does not scan every function once per entry.
#[derive(Clone, Debug)]
pub struct Facts {
    used: Uses,
    /// A function synchronises its grid.
    grid: bool,
    /// The `.func`s whose address is taken (in a body or an initializer).
    address_taken: BTreeSet<String>,
}

/// The [`Facts`] of `module`.
pub fn facts(module: &ast::Module) -> Facts {
    let func_index = function_index(module);
    let function_names: crate::fxhash::FxHashSet<&str> = module
        .items
        .iter()
        .filter_map(|i| match i {
            ModuleItem::Function(f) => Some(f.name.as_str()),
            _ => None,
        })
        .collect();
    let mut used = Uses::default();
    let mut grid = false;
    let mut address_taken = BTreeSet::new();
    for item in &module.items {
        match item {
            ModuleItem::Function(f) => {
                let Some(body) = f.body.as_deref() else { continue };
                uses(body, &function_names, &mut used);
                grid |= uses_grid(body);
                address_uses(&scoped_body(f, body), &func_index, &mut address_taken);
            }
            ModuleItem::Variable(v) => {
                // A function named in a variable's initializer (a table of
                // function pointers) has its address taken too.
                if let (Some(init), true) = (&v.init, matches!(v.space, StateSpace::Global | StateSpace::Const)) {
                    initializer_functions(init, &func_index, &mut address_taken);
                }
            }
        }
    }
    // A poll waits for nothing outside a loop.
    used.polls = used.polls && block_order::may_wait(module);
    Facts { used, grid, address_taken }
}

/// The module's `.func`s with bodies, by name: their item index.
fn function_index(module: &ast::Module) -> HashMap<String, u32> {
    let mut index = HashMap::new();
    for (i, item) in module.items.iter().enumerate() {
        if let ModuleItem::Function(f) = item {
            if f.kind == FunctionKind::Func && f.body.is_some() {
                index.insert(f.name.clone(), i as u32);
            }
        }
    }
    index
}

/// A function's body with its nested scopes resolved ([`crate::scope::run`]).
pub(crate) fn scoped_body<'a>(f: &ast::Function, body: &'a [ast::Statement]) -> std::borrow::Cow<'a, [ast::Statement]> {
    let outer: Vec<&str> =
        f.params.iter().chain(f.returns.iter()).flat_map(|d| d.names.iter().map(|n| n.name.as_str())).collect();
    crate::scope::run(body, &outer)
}

pub fn run(module: &ast::Module, opts: &Options, facts: &Facts) -> Result<(Vec<u32>, ModuleInfo), Vec<Diagnostic>> {
    let mut b = Builder::new();
    match opts.target_env {
        TargetEnv::Vulkan1_2 => b.set_version(1, 5),
        TargetEnv::Vulkan1_3 => b.set_version(1, 6),
    }
    let mut e = Emitter {
        b,
        opts,
        types: FxHashMap::default(),
        scalars: [0; SCALAR_SLOTS],
        pointers: FxHashMap::default(),
        consts: FxHashMap::default(),
        caps: BTreeSet::new(),
        glsl: 0,
        local_index: 0,
        opaque_zeros: (0, [0; 2]),
        workgroup_id: 0,
        num_workgroups: 0,
        block_id: None,
        block_ticket: None,
        block_ticket_offset: None,
        block_order_threads: 0,
        spec_ntid: [0; 3],
        spec_shared_words: 0,
        spec_shared_wide_words: 0,
        module_data_var: None,
        spec_dynamic_shared: None,
        globals: HashMap::new(),
        literals: HashMap::new(),
        decorated: BTreeSet::new(),
        func_index: HashMap::new(),
        address_taken: BTreeSet::new(),
        trap_offset: None,
        loop_counter: None,
        spill: None,
        lockstep: FxHashSet::default(),
        printf_offset: None,
        fault_offset: None,
        resume_offset: None,
        internal_access: false,
        fault_sites: Vec::new(),
        fault_site_index: FxHashMap::default(),
        mma_plans: FxHashMap::default(),
        mma_sp_plans: FxHashMap::default(),
        spec_fault_depth: None,
        fault_steps: Vec::new(),
        fault_search: None,
        fault_record: None,
        fault_state: None,
        fault_cache: None,
        fault_log_var: None,
        printf_fifo_vars: None,
        fault_linear: None,
        race: None,
        heap_offset: None,
        vector_lock_offset: None,
        grid_offset: None,
        spec_wg_x: 0,
        spec_threads: 0,
        spec_padded: 0,
        explicit_cluster: false,
        required_cluster: None,
        uniform_fns: BTreeSet::new(),
        exchange_words: 1,
        module_scratch: (0, 0),
        scratch_var: None,
        warp: warp::Globals::default(),
        shared_var_narrow: None,
        shared_var_wide: None,
    };
    e.cap(Capability::Shader);
    e.cap(Capability::PhysicalStorageBufferAddresses);
    e.cap(Capability::Int64);
    e.glsl = e.b.ext_inst_import("GLSL.std.450");
    e.b.memory_model(spirv::AddressingModel::PhysicalStorageBuffer64, spirv::MemoryModel::GLSL450);

    let mut errors = Vec::new();

    // Module data buffer.
    let data_vars: Vec<&ast::VarDecl> = module
        .items
        .iter()
        .filter_map(|i| match i {
            ModuleItem::Variable(v) if matches!(v.space, StateSpace::Global | StateSpace::Const) => Some(v),
            _ => None,
        })
        .collect();
    e.func_index = function_index(module);
    let (globals, mut data_bytes) = match layout::module_data(&data_vars, &e.func_index) {
        Ok(x) => x,
        Err(d) => return Err(vec![d]),
    };
    let used = facts.used;
    // Counted loops trap when the loop limit is reached (any function may loop).
    let counts_loops =
        opts.loop_limit && module.items.iter().any(|i| matches!(i, ModuleItem::Function(f) if f.body.is_some()));
    // Fault checks set the trap word and write the fault log.
    let checks_faults =
        opts.fault_checks && module.items.iter().any(|i| matches!(i, ModuleItem::Function(f) if f.body.is_some()));
    if used.trap || counts_loops || checks_faults {
        let off = data_bytes.div_ceil(8) * 8;
        e.trap_offset = Some(off);
        data_bytes = off + 8;
    }
    if checks_faults {
        let off = data_bytes.div_ceil(8) * 8;
        e.fault_offset = Some(off);
        data_bytes = off + 8;
        fault::declare_state(&mut e);
        // The copy engine's functions (mbarrier, bulk copies) order threads
        // in ways the racecheck's barrier epochs do not see.
        let engine =
            module.items.iter().any(|i| matches!(i, ModuleItem::Function(f) if f.name.starts_with("__ptxvk_")));
        if opts.race_checks && !engine {
            race::declare_state(&mut e);
        }
    }
    if block_order::declare(&mut e, used.ctaid, used.polls) {
        let off = data_bytes.div_ceil(8) * 8;
        e.block_ticket_offset = Some(off);
        data_bytes = off + 8;
    }
    if used.printf {
        let off = data_bytes.div_ceil(8) * 8;
        e.printf_offset = Some(off);
        data_bytes = off + crate::abi::printf::MODULE_AREA_BYTES;
        printf::declare_fifo(&mut e);
    }
    if used.heap {
        let off = data_bytes.div_ceil(8) * 8;
        e.heap_offset = Some(off);
        data_bytes = off + 8;
    }
    if facts.grid {
        let off = data_bytes.div_ceil(8) * 8;
        e.grid_offset = Some(off);
        data_bytes = off + 8;
    }
    if used.resume {
        let off = data_bytes.div_ceil(8) * 8;
        e.resume_offset = Some(off);
        data_bytes = off + crate::abi::resume::SLOT_BYTES;
    }
    if used.vector_locks {
        let off = data_bytes.div_ceil(8) * 8;
        e.vector_lock_offset = Some(off);
        data_bytes = off + vector16::SLOT_BYTES * vector16::VECTOR_LOCKS;
    }
    for g in &globals {
        e.globals.insert(g.name.clone(), (g.offset, g.size));
        // String literals (clang's and NVVM's `.str`, `.str.1`, ..., which
        // the NVPTX backend renames `$str`, `$str$1`; numba's
        // `__conststring__...` in .const): nothing may write them, so their
        // initializers are what `printf` reads as its format. (Other .const
        // data is not: the host may write it.)
        let literal = g.name.starts_with("$str") || g.name.starts_with("__conststring__");
        if used.printf && literal && g.size <= MAX_LITERAL_BYTES && g.relocations.is_empty() {
            e.literals.insert(g.name.clone(), g.init.clone());
        }
    }
    let module_shared: Vec<(&ast::VarDecl, &ast::VarName)> = module
        .items
        .iter()
        .filter_map(|i| match i {
            ModuleItem::Variable(v) if v.space == StateSpace::Shared => Some(v),
            _ => None,
        })
        .flat_map(|v| v.names.iter().map(move |n| (v, n)))
        .collect();
    for item in &module.items {
        if let ModuleItem::Variable(v) = item {
            if !matches!(v.space, StateSpace::Global | StateSpace::Const | StateSpace::Shared) {
                errors.push(Diagnostic::error(
                    v.span,
                    format!("module-scope {} variables are not supported", v.space.name()),
                ));
            }
        }
    }

    // Built-ins and specialization constants shared by all entries.
    let u32t = e.t_int(32);
    let v3 = e.ty(TyKey::Vec(u32t, 3));
    let in_u32 = e.t_ptr(spirv::StorageClass::Input, u32t);
    let in_v3 = e.t_ptr(spirv::StorageClass::Input, v3);
    e.local_index = e.b.variable(in_u32, None, spirv::StorageClass::Input, None);
    e.b.decorate(e.local_index, spirv::Decoration::BuiltIn, [Operand::BuiltIn(spirv::BuiltIn::LocalInvocationIndex)]);
    e.workgroup_id = e.b.variable(in_v3, None, spirv::StorageClass::Input, None);
    e.b.decorate(e.workgroup_id, spirv::Decoration::BuiltIn, [Operand::BuiltIn(spirv::BuiltIn::WorkgroupId)]);
    e.num_workgroups = e.b.variable(in_v3, None, spirv::StorageClass::Input, None);
    e.b.decorate(e.num_workgroups, spirv::Decoration::BuiltIn, [Operand::BuiltIn(spirv::BuiltIn::NumWorkgroups)]);
    let wg_x = e.b.spec_constant_bit32(u32t, 32);
    e.b.decorate(wg_x, spirv::Decoration::SpecId, [Operand::LiteralBit32(abi::SPEC_WORKGROUP_SIZE_X)]);
    e.spec_wg_x = wg_x;
    let one = e.c_u32(1);
    let wg_size = e.b.spec_constant_composite(v3, [wg_x, one, one]);
    e.b.decorate(wg_size, spirv::Decoration::BuiltIn, [Operand::BuiltIn(spirv::BuiltIn::WorkgroupSize)]);
    for (i, id) in [abi::SPEC_NTID_X, abi::SPEC_NTID_Y, abi::SPEC_NTID_Z].into_iter().enumerate() {
        let c = e.b.spec_constant_bit32(u32t, if i == 0 { 32 } else { 1 });
        e.b.decorate(c, spirv::Decoration::SpecId, [Operand::LiteralBit32(id)]);
        e.spec_ntid[i] = c;
    }
    let [nx, ny, nz] = e.spec_ntid;
    let xy = e.b.spec_constant_op(u32t, spirv::Op::IMul, &[nx, ny]);
    e.spec_threads = e.b.spec_constant_op(u32t, spirv::Op::IMul, &[xy, nz]);
    let bt = e.t_bool();
    e.spec_padded = e.b.spec_constant_op(bt, spirv::Op::INotEqual, &[wg_x, e.spec_threads]);
    if data_bytes > 0 {
        // Not a specialization constant: the address differs from process
        // to process, and a pipeline specialised for it would never be found
        // in a driver's disk cache.
        let u64t = e.t_int(64);
        let pt = e.t_ptr(spirv::StorageClass::Private, u64t);
        let zero = e.c_int(64, 0);
        e.module_data_var = Some(e.b.variable(pt, None, spirv::StorageClass::Private, Some(zero)));
    }

    let mut entries = Vec::new();
    let mut entry_fids = Vec::new();
    // Resolve scopes, then plan every function with a body.
    let functions: Vec<&ast::Function> = module
        .items
        .iter()
        .filter_map(|i| match i {
            ModuleItem::Function(f) => Some(f),
            _ => None,
        })
        .collect();
    // Entries other than the ones emitted need no scopes resolved.
    let emitted = |f: &ast::Function| {
        f.kind != FunctionKind::Entry
            || (opts.entry.as_ref().is_none_or(|only| *only == f.name) && !opts.skip_entries.contains(&f.name))
    };
    let bodies: Vec<Option<std::borrow::Cow<[ast::Statement]>>> =
        functions.iter().map(|f| f.body.as_deref().filter(|_| emitted(f)).map(|b| scoped_body(f, b))).collect();
    e.address_taken = facts.address_taken.clone();
    let mut plans: HashMap<String, func::Plan> = HashMap::new();
    let mut entry_names = Vec::new();
    let mut max_static_shared_words = 1u32;
    for (f, body) in functions.iter().zip(&bodies) {
        let Some(body) = body else {
            if f.kind == FunctionKind::Entry && f.body.is_none() && !f.linkage.contains(&Linkage::Extern) {
                errors.push(Diagnostic::error(f.span, format!("entry '{}' has no body", f.name)));
            }
            continue;
        };
        if f.kind == FunctionKind::Entry {
            if let Some(only) = &opts.entry {
                if &f.name != only {
                    continue;
                }
            }
            if opts.skip_entries.contains(&f.name) {
                continue;
            }
            entry_names.push(f.name.clone());
        }
        match func::plan_function(&mut e, f, body, &module_shared) {
            Ok(p) => {
                max_static_shared_words = max_static_shared_words.max(abi::shared_words(p.static_shared_bytes, 0));
                plans.insert(f.name.clone(), p);
            }
            Err(d) => errors.push(d),
        }
    }
    if let Some(only) = &opts.entry {
        if entry_names.is_empty() && errors.is_empty() {
            errors.push(Diagnostic::error(Span::default(), format!("no .entry named '{only}' in the module")));
        }
    }
    // Walls in blocks of their own where a function spins, so that the code
    // beside a barrier (a critical section and its release) can be
    // interleaved (`progress.rs`).
    let polling = crate::progress::polling_functions(&mut plans.iter().map(|(name, plan)| {
        let callees = plan.callees.iter().map(|c| c.target.as_str()).collect();
        (name.as_str(), plan.instructions().collect(), callees)
    }));
    let spin = crate::progress::SpinTest { every_loop: opts.interleave_every_loop, polling: &polling };
    if opts.forward_progress {
        let is_wall = |i: &crate::ast::Instruction| {
            uniform::is_warp_op(i) || matches!(i.opcode.as_str(), "bar" | "barrier" | "call")
        };
        for plan in plans.values_mut() {
            if let Err(d) = plan.isolate_walls(opts, &is_wall, &spin) {
                errors.push(d);
            }
        }
    }
    if opts.warp_path == crate::WarpPath::Emulated && opts.lockstep {
        // The lock-step points leave out the accesses that spin loops reach
        // before a wall (a lock's critical section may be there; points
        // before the spin loops are walls of their own), and the walls
        // include the calls of uniform functions, which the points
        // themselves help decide: start from the functions with warp
        // operations and barriers, and repeat until the set holds (it only
        // grows: more walls, smaller regions, more points). Counting every
        // call as a wall made the accesses after a plain call inside a
        // critical section points, so the lock was held across a
        // collective and livelocked.
        let mut uniform_guess = uniform::functions(&plans, opts.warp_path, &FxHashSet::default(), &BTreeSet::new());
        loop {
            let is_wall = |i: &crate::ast::Instruction| {
                uniform::is_warp_op(i)
                    || matches!(i.opcode.as_str(), "bar" | "barrier")
                    || (i.opcode == "call" && !matches!(i.direct_callee(), Some(f) if !uniform_guess.contains(f)))
            };
            let spinning = |plan: &func::Plan| {
                if opts.forward_progress {
                    lockstep::Spinning {
                        any: !crate::progress::regions(&plan.cfg, &is_wall, &spin).is_empty(),
                        reach: crate::progress::spin_reach(&plan.cfg, &is_wall, &spin),
                    }
                } else {
                    lockstep::Spinning { any: false, reach: BTreeSet::new() }
                }
            };
            e.lockstep = lockstep::points(&plans, &spinning);
            let now = uniform::functions(&plans, opts.warp_path, &e.lockstep, &BTreeSet::new());
            if now == uniform_guess {
                break;
            }
            uniform_guess = now;
        }
    }
    e.uniform_fns = uniform::functions(&plans, opts.warp_path, &e.lockstep, &BTreeSet::new());
    // On the emulated path a warp is several subgroups, which llvmpipe runs
    // one after another between barriers. In kernels that have a spin loop,
    // no collective and no call, each step of a spin region's dispatch loop
    // yields to the other subgroups of the workgroup with a barrier, and the
    // kernel runs in uniform mode (see `progress.rs`, "Between subgroups").
    // Functions with collectives or calls keep their regions without a yield:
    // giving Taichi's runtime functions and kernels yields and uniform mode
    // made its pointer SNodes wrong.
    let mut yielding = BTreeSet::new();
    if opts.forward_progress && opts.warp_path == crate::WarpPath::Emulated {
        let is_wall = |i: &crate::ast::Instruction| progress_wall(&e, i);
        yielding = plans
            .iter()
            .filter(|(name, plan)| {
                plan.info.is_some()
                    && !e.uniform_fns.contains(*name)
                    && plan.callees.is_empty()
                    && !crate::progress::regions(&plan.cfg, &is_wall, &spin).is_empty()
            })
            .map(|(name, _)| name.clone())
            .collect();
        if !yielding.is_empty() {
            e.uniform_fns = uniform::functions(&plans, opts.warp_path, &e.lockstep, &yielding);
        }
    }
    // Forward progress around spin loops: after the collectives are known
    // (they bound the interleaved regions); it moves no instruction, so the
    // uniform functions and lock-step points stay what they are.
    if opts.forward_progress {
        for (name, plan) in plans.iter_mut() {
            let is_wall = |i: &crate::ast::Instruction| progress_wall(&e, i);
            let yield_inst = yielding.contains(name).then(crate::progress::yield_instruction);
            if let Err(d) = plan.interleave_spin_loops(opts, &is_wall, &spin, yield_inst) {
                errors.push(d);
            }
        }
    }
    e.exchange_words = plans.values().flat_map(|p| p.instructions()).map(mma::exchange_words).max().unwrap_or(1).max(1);
    // Workgroup-uniform functions are emitted from regions of their own.
    for (name, plan) in plans.iter_mut() {
        if e.uniform_fns.contains(name) {
            if let Err(d) = plan.plan_uniform() {
                errors.push(d);
            }
        }
    }
    // After `plan_uniform`: the vote slots depend on the uniform regions.
    e.module_scratch = uniform::module_scratch_words(&e, &plans);
    let any_uniform = !e.uniform_fns.is_empty();
    e.warp = warp::Globals::new(&mut e, any_uniform);
    // Created with the first entry that may loop: the validation layer adds
    // up every Workgroup variable of a module.
    let mut loop_counter = None;
    // The default counts for tools that check a module before it is
    // specialised (the validation layer adds up Workgroup variables at
    // vkCreateShaderModule): at most Vulkan's least maxComputeSharedMemorySize.
    // Whoever dispatches sets the launch's value (see `abi`).
    let sw = e.b.spec_constant_bit32(u32t, max_static_shared_words.min(abi::MIN_WORKGROUP_BYTES / 4));
    e.b.decorate(sw, spirv::Decoration::SpecId, [Operand::LiteralBit32(abi::SPEC_SHARED_WORDS)]);
    e.spec_shared_words = sw;
    let sww = e.b.spec_constant_bit32(u32t, max_static_shared_words.min(abi::MIN_WORKGROUP_BYTES / 4).div_ceil(2));
    e.b.decorate(sww, spirv::Decoration::SpecId, [Operand::LiteralBit32(abi::SPEC_SHARED_WIDE_WORDS)]);
    e.spec_shared_wide_words = sww;
    if opts.shared_spill && plans.values().any(|p| !p.shared.is_empty()) {
        e.spill = Some(mem::Spill::new(&mut e));
    }

    for name in &entry_names {
        let Some(plan) = plans.get(name) else { continue };
        // The functions this entry reaches, callees after callers; a cycle
        // left (through a function pointer: `recursion.rs` rewrites direct
        // ones) is reported.
        let reach = match reachable(&plans, name, &e.address_taken) {
            Ok(r) => r,
            Err(d) => {
                errors.push(d);
                continue;
            }
        };
        let reached: Vec<&func::Plan> = reach.iter().filter_map(|n| plans.get(n)).collect();
        let mut all = vec![plan];
        all.extend(reached.iter().copied());
        // Count loops only in entries that may loop.
        e.loop_counter = None;
        if opts.loop_limit && all.iter().any(|p| loop_limit::may_loop(p)) {
            loop_counter = loop_counter.or_else(|| loop_limit::counter(&mut e));
            let counts = loop_limit::counting(&all, opts.resume_count);
            e.loop_counter = loop_counter.map(|c| c.with_counts(counts));
        }
        e.explicit_cluster = plan.func.perf.iter().any(|p| matches!(p, PerfDirective::ExplicitCluster));
        e.required_cluster = plan.func.perf.iter().find_map(|p| match p {
            PerfDirective::ReqNctaPerCluster(v) => Some(dims(v)).filter(|d| d.iter().product::<u32>() > 1),
            _ => None,
        });
        let vars = func::entry_vars(&mut e, &all, plan);
        let mut callees = HashMap::new();
        for p in &reached {
            let c = func::callee(&mut e, p);
            callees.insert(p.func.name.clone(), c);
        }
        let mut ok = true;
        // Frames: the entry's at 0, then each function's, one after another,
        // each at a multiple of 16 bytes (`.local` variables keep their
        // alignment, up to 16, as device addresses would).
        let mut bases = HashMap::new();
        let mut next = func::frame_bytes(plan.local_bytes());
        for p in &reached {
            bases.insert(p.func.name.clone(), next);
            next += func::frame_bytes(p.local_bytes());
        }
        match func::emit_function(&mut e, plan, vars, None, &callees, 0) {
            Ok(fid) => {
                let mut iface = vec![e.local_index, e.workgroup_id, e.num_workgroups];
                iface.extend(vars.push_var);
                iface.extend(vars.shared_var);
                iface.extend(vars.local_var);
                iface.extend(vars.exited_var);
                iface.extend(vars.stack.map(|(v, _)| v));
                iface.extend(vars.scratch_var);
                iface.extend(e.warp.interface());
                iface.extend(e.loop_counter.iter().flat_map(|c| c.interface()));
                iface.extend(e.fault_state.iter().flat_map(|&(a, b)| [a, b]));
                iface.extend(e.fault_cache);
                iface.extend(e.fault_log_var);
                iface.extend(e.printf_fifo_vars.iter().flat_map(|&(a, b)| [a, b]));
                iface.extend(e.module_data_var);
                iface.extend(e.race.iter().flat_map(|r| r.interface()));
                iface.extend(e.block_id);
                iface.extend(e.block_ticket);
                e.b.entry_point(spirv::ExecutionModel::GLCompute, fid, name, iface);
                entry_fids.push(fid);
            }
            Err(ds) => {
                errors.extend(ds);
                ok = false;
            }
        }
        if ok {
            for p in &reached {
                let me = callees.get(&p.func.name).cloned();
                let base = bases.get(&p.func.name).copied().unwrap_or(0);
                if let Err(ds) = func::emit_function(&mut e, p, vars, me.as_ref(), &callees, base) {
                    errors.extend(ds);
                }
            }
        }
        if let Some(mut info) = plan.info.clone() {
            // Local memory of the whole call tree.
            info.local_bytes = if vars.stack.is_some() { next + stack::STACK_BYTES } else { next };
            info.static_shared_bytes = all.iter().map(|p| p.static_shared_bytes).max().unwrap_or(0);
            let (per_invocation, fixed) = uniform::scratch_words(&mut e, &all, plan);
            info.scratch_words_per_invocation = per_invocation;
            info.scratch_words_fixed = fixed;
            // The block ticket's Workgroup word is in every entry's interface.
            info.block_ticket_words = if e.block_ticket.is_some() { block_order::TICKET_WORDS } else { 0 };
            info.loop_counter_words = if e.loop_counter.is_some() { loop_limit::SLOTS } else { 0 };
            info.shared_spill = e.spill.is_some() && vars.shared_var.is_some();
            info.shared_wide = vars.shared_wide;
            info.resumable =
                e.resume_offset.is_some() && plan.func.body.as_deref().is_some_and(crate::resume::rewritten);
            entries.push(info);
        }
    }
    if let Err(d) =
        fault::emit_search(&mut e).and_then(|_| race::emit_word_fn(&mut e)).and_then(|_| fault::emit_record(&mut e))
    {
        errors.push(d);
    }
    if !errors.is_empty() {
        errors.sort_by_key(|d| d.span.start);
        return Err(errors);
    }
    // Keep subnormals where the device can be asked to (SPIR-V 1.4 float
    // controls): f32 always (`.ftz` flushes explicitly), f64 when used.
    let uses_f64 = e.caps.contains(&(Capability::Float64 as u32));
    let uses_f16 = e.caps.contains(&(Capability::Float16 as u32));
    let widths: Vec<u32> = [(32, opts.denorm_preserve_f32), (64, opts.denorm_preserve_f64 && uses_f64)]
        .into_iter()
        .filter_map(|(w, on)| on.then_some(w))
        .collect();
    if !widths.is_empty() {
        e.cap(Capability::DenormPreserve);
        for &fid in &entry_fids {
            for &w in &widths {
                e.b.execution_mode(fid, spirv::ExecutionMode::DenormPreserve, [w]);
            }
        }
    }
    // PTX arithmetic keeps signed zeros, infinities and NaNs; without this
    // mode drivers may fold `x * 0.0` to `0.0` or `x + 0.0` to `x`.
    let widths: Vec<u32> = [
        (16, opts.signed_zero_inf_nan_f16 && uses_f16),
        (32, opts.signed_zero_inf_nan_f32),
        (64, opts.signed_zero_inf_nan_f64 && uses_f64),
    ]
    .into_iter()
    .filter_map(|(w, on)| on.then_some(w))
    .collect();
    if !widths.is_empty() {
        e.cap(Capability::SignedZeroInfNanPreserve);
        for &fid in &entry_fids {
            for &w in &widths {
                e.b.execution_mode(fid, spirv::ExecutionMode::SignedZeroInfNanPreserve, [w]);
            }
        }
    }
    let zeros = if e.opts.zero_operand_workaround { zero::prepare(&mut e) } else { None };
    let mut words = e.b.assemble();
    if let Some(z) = zeros {
        words = zero::hide_zero_constants(words, &z);
    }
    Ok((
        words,
        ModuleInfo {
            entries,
            globals,
            global_data_bytes: data_bytes,
            trap_offset: e.trap_offset,
            printf_offset: e.printf_offset,
            heap_offset: e.heap_offset,
            grid_offset: e.grid_offset,
            vector_lock_offset: e.vector_lock_offset,
            fault_offset: e.fault_offset,
            resume_offset: e.resume_offset,
            race_checked: e.race.is_some(),
            fault_sites: std::mem::take(&mut e.fault_sites),
            source_name: String::new(),
        },
    ))
}

/// The three dimensions of a performance directive (`.reqntid 256` is
/// 256x1x1).
fn dims(v: &[u32]) -> [u32; 3] {
    [0, 1, 2].map(|i| v.get(i).copied().unwrap_or(1))
}

/// Entry metadata from a function's declarations.
pub(crate) fn entry_info(
    f: &ast::Function,
    opts: &Options,
    static_shared: u32,
    dynamic: bool,
    local_bytes: u32,
    params_addressed: bool,
) -> Result<EntryInfo, Diagnostic> {
    let (params, param_bytes) = layout::params(&f.params)?;
    // A parameter whose address is taken must live in addressable memory.
    let fits =
        !params_addressed && abi::PUSH_HEADER_BYTES + param_bytes.div_ceil(4) * 4 <= opts.max_push_constant_bytes;
    let (passing, push) = if fits {
        (ParamPassing::PushConstants, abi::PUSH_HEADER_BYTES + param_bytes.div_ceil(4) * 4)
    } else {
        (ParamPassing::Buffer, abi::PUSH_HEADER_BYTES)
    };
    let mut reqntid = None;
    let mut maxntid = None;
    for p in &f.perf {
        match p {
            PerfDirective::ReqNtid(v) => reqntid = Some(dims(v)),
            PerfDirective::MaxNtid(v) => maxntid = Some(dims(v)),
            _ => {}
        }
    }
    Ok(EntryInfo {
        name: f.name.clone(),
        params,
        param_bytes,
        param_passing: passing,
        push_constant_bytes: push,
        static_shared_bytes: static_shared,
        uses_dynamic_shared: dynamic,
        reqntid,
        maxntid,
        local_bytes,
        scratch_words_per_invocation: 0,
        scratch_words_fixed: 0,
        loop_counter_words: 0,
        block_ticket_words: 0,
        shared_spill: false,
        shared_wide: false,
        resumable: false,
    })
}

/// The `.func`s reachable from `root` (excluding it), or a diagnostic naming
/// a recursive cycle (SPIR-V for Vulkan cannot express recursion; the cycles
/// of direct calls are gone by now, see [`crate::recursion`]).
fn reachable(
    plans: &HashMap<String, func::Plan>,
    root: &str,
    address_taken: &BTreeSet<String>,
) -> Result<Vec<String>, Diagnostic> {
    let mut order = Vec::new();
    let mut state: HashMap<String, u8> = HashMap::new();
    let mut path: Vec<String> = Vec::new();
    fn visit(
        plans: &HashMap<String, func::Plan>,
        taken: &BTreeSet<String>,
        n: &str,
        state: &mut HashMap<String, u8>,
        path: &mut Vec<String>,
        order: &mut Vec<String>,
    ) -> Result<(), Diagnostic> {
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        if let Some(p) = plans.get(n) {
            // An indirect call may reach any function whose address is taken.
            // (`call::indirect` dispatches over the same set: the
            // address-taken functions of as many parameters and results.)
            let mut calls: Vec<(String, Span)> = Vec::new();
            for site in &p.callees {
                let c = &site.target;
                if plans.contains_key(c.as_str()) {
                    calls.push((c.clone(), site.span));
                } else if c.starts_with('%') {
                    calls.extend(
                        taken
                            .iter()
                            .filter(|t| {
                                plans
                                    .get(t.as_str())
                                    .is_some_and(|q| q.params.len() == site.args && q.returns.len() == site.rets)
                            })
                            .map(|t| (t.clone(), site.span)),
                    );
                }
            }
            for (c, span) in &calls {
                match state.get(c.as_str()) {
                    Some(1) => {
                        let start = path.iter().position(|x| x == c).unwrap_or(0);
                        let mut cycle: Vec<String> = path[start..].to_vec();
                        cycle.push(c.clone());
                        return Err(Diagnostic::error(
                            *span,
                            format!(
                                "recursion through a function pointer is not supported: call cycle {}",
                                cycle.join(" -> ")
                            ),
                        ));
                    }
                    Some(_) => {}
                    None => {
                        if plans.contains_key(c.as_str()) {
                            visit(plans, taken, c, state, path, order)?;
                        }
                    }
                }
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        order.push(n.to_string());
        Ok(())
    }
    visit(plans, address_taken, root, &mut state, &mut path, &mut order)?;
    order.retain(|n| n != root);
    Ok(order)
}

/// Names of `.func`s in a variable initializer.
fn initializer_functions(init: &ast::Initializer, funcs: &HashMap<String, u32>, out: &mut BTreeSet<String>) {
    match init {
        ast::Initializer::List(_, items) => items.iter().for_each(|i| initializer_functions(i, funcs, out)),
        ast::Initializer::Fields(..) => {}
        ast::Initializer::Expr(_, terms) => {
            for (_, t) in terms {
                match t {
                    ast::InitTerm::Symbol(s) | ast::InitTerm::Generic(s) if funcs.contains_key(s.as_str()) => {
                        out.insert(s.clone());
                    }
                    ast::InitTerm::Mask(inner) => initializer_functions(inner, funcs, out),
                    _ => {}
                }
            }
        }
    }
}

/// Names of `.func`s used as values (not as call targets) in a body.
fn address_uses(stmts: &[ast::Statement], funcs: &HashMap<String, u32>, out: &mut BTreeSet<String>) {
    fn operand(o: &ast::Operand, funcs: &HashMap<String, u32>, out: &mut BTreeSet<String>) {
        match o {
            ast::Operand::Name { name, .. } if funcs.contains_key(name.as_str()) => {
                out.insert(name.to_string());
            }
            ast::Operand::Vector(_, v) | ast::Operand::List(_, v) => v.iter().for_each(|x| operand(x, funcs, out)),
            _ => {}
        }
    }
    for s in stmts {
        match s {
            ast::Statement::Inst(i) if i.opcode != "call" => i.operands.iter().for_each(|o| operand(o, funcs, out)),
            ast::Statement::Block(b) => address_uses(b, funcs, out),
            ast::Statement::TargetList { calls: true, targets, .. } => {
                out.extend(targets.iter().filter(|t| funcs.contains_key(t.as_str())).cloned())
            }
            _ => {}
        }
    }
}

/// What the module's code uses that needs a word of module data.
#[derive(Clone, Copy, Debug, Default)]
struct Uses {
    /// The trap word: `trap`; `alloca` (traps when the stack overflows); a
    /// failed assert; `cudaCGSynchronize`; an indirect call (its target is not a function of the
    /// module: traps when the pointer names no function it may call).
    trap: bool,
    /// The printf FIFO: `vprintf` or `__assertfail`.
    printf: bool,
    /// The device heap: `malloc` or `free`.
    heap: bool,
    /// `%ctaid` (not module data: whether [`block_order::declare`] keeps it).
    ctaid: bool,
    /// An instruction through which a thread could wait for another block,
    /// and then ([`facts`]) one in a loop ([`block_order::may_wait`]) (not
    /// module data: whether [`block_order::declare`] orders `%ctaid`).
    polls: bool,
    /// The lock table of 16-byte ordered vector accesses ([`vector16`]).
    vector_locks: bool,
    /// The resume slot: an entry the resume pass rewrote
    /// ([`crate::resume`]).
    resume: bool,
}

/// Add what `stmts` use to `u` (one pass over the body for all four).
fn uses(stmts: &[ast::Statement], functions: &crate::fxhash::FxHashSet<&str>, u: &mut Uses) {
    for s in stmts {
        match s {
            ast::Statement::Inst(i) => {
                u.ctaid |= reads_ctaid(i);
                // The resume pass's own atomics wait for nothing.
                u.polls |= block_order::may_poll(i) && !crate::resume::is_internal_access(i);
                u.resume |= i.operands.iter().any(|o| {
                    let mut found = false;
                    o.for_each_name(&mut |n| found |= n == "%__ptxvk_resume_slot");
                    found
                });
                u.vector_locks |= vector16::needs_vector_lock(i);
                // A 16-byte load that cannot read its bytes whole traps.
                u.trap |= vector16::needs_vector_lock(i) && i.opcode != "st";
                match i.opcode.as_str() {
                    "trap" | "alloca" => u.trap = true,
                    "call" => {
                        let names = [printf::ASSERTFAIL, printf::VPRINTF, heap::MALLOC, heap::FREE, grid::SYNCHRONIZE];
                        match call::system_call(i, &names) {
                            Some(printf::ASSERTFAIL) => {
                                u.trap = true;
                                u.printf = true;
                            }
                            Some(printf::VPRINTF) => u.printf = true,
                            Some(heap::MALLOC | heap::FREE) => u.heap = true,
                            // A grid sync that cannot be honoured traps (see `grid`).
                            Some(_) => u.trap = true,
                            None => {}
                        }
                        // The target (the first operand that is not a list) is
                        // not a function of the module: an indirect call.
                        if matches!(
                            i.operands.iter().find(|o| !matches!(o, ast::Operand::List(..))),
                            Some(ast::Operand::Name { name, .. }) if !functions.contains(name.as_str())
                        ) {
                            u.trap = true;
                        }
                    }
                    _ => {}
                }
            }
            ast::Statement::Block(b) => uses(b, functions, u),
            _ => {}
        }
    }
}

/// Whether a function synchronises its grid: calls the device runtime's
/// cooperative-groups entry points or reads `%envreg1`/`%envreg2` (nvcc's
/// inline grid sync), see [`grid`].
fn uses_grid(stmts: &[ast::Statement]) -> bool {
    stmts.iter().any(|s| match s {
        ast::Statement::Inst(i) => {
            call::system_call(i, &[grid::GET_INTRINSIC_HANDLE, grid::SYNCHRONIZE]).is_some()
                || i.operands.iter().any(reads_grid_envreg)
        }
        ast::Statement::Block(b) => uses_grid(b),
        _ => false,
    })
}

/// Whether `i` reads `%ctaid`.
fn reads_ctaid(i: &ast::Instruction) -> bool {
    let mut found = false;
    for op in &i.operands {
        op.for_each_name(&mut |n| found |= n == "%ctaid");
    }
    found
}

/// Whether `op` names `%envreg1` or `%envreg2`.
fn reads_grid_envreg(op: &ast::Operand) -> bool {
    match op {
        ast::Operand::Name { name, .. } => name == "%envreg1" || name == "%envreg2",
        ast::Operand::List(_, l) => l.iter().any(reads_grid_envreg),
        _ => false,
    }
}

/// Whether `i` bounds the interleaved regions of spin loops (see
/// [`crate::progress`]): a collective of `e`'s uniform functions and
/// lock-step points, a warp operation or a block barrier.
fn progress_wall(e: &Emitter, i: &crate::ast::Instruction) -> bool {
    uniform::is_collective(i, e.opts.warp_path, &e.uniform_fns, &e.lockstep)
        || uniform::is_warp_op(i)
        || matches!(i.opcode.as_str(), "bar" | "barrier")
}
