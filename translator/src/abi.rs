//! The launch ABI shared by the translator and the runtime.
//!
//! Everything a translated kernel expects from whoever dispatches it is
//! defined here, so the two sides cannot drift apart.
//!
//! # Workgroup shape
//! A CUDA block of `ntid.x * ntid.y * ntid.z` threads is dispatched as a
//! one-dimensional Vulkan workgroup of [`padded_block_threads`] invocations
//! (the thread count rounded up to a multiple of 32, so that warps are whole).
//! `%tid` is derived from the linear invocation index and the block shape;
//! padding invocations behave as threads that have already exited. On the
//! slice warp path ([`crate::WarpPath::Slice`]) the workgroup is padded to a
//! multiple of the subgroup size instead ([`workgroup_size`]), so that every
//! subgroup is full.
//!
//! # Translator scratch memory
//! Kernels that need workgroup-uniform control flow (barriers; warp
//! operations on the emulated path) get a second `Workgroup` array besides
//! `.shared`: [`EntryInfo::scratch_words_per_invocation`] words per
//! workgroup invocation plus [`EntryInfo::scratch_words_fixed`], sized at
//! pipeline creation from [`SPEC_WORKGROUP_SIZE_X`]. The runtime counts it
//! with `.shared` against the device's limit ([`EntryInfo::scratch_bytes`]).
//!
//! # Shared memory variables
//! A module has up to two `.shared` Workgroup variables, one of 32-bit
//! words and one of 64-bit words (for entries with 64-bit shared atomics,
//! [`EntryInfo::shared_wide`]), each sized by its own specialization
//! constant. Some tools add up every Workgroup variable of a module, so the
//! one an entry does not use is given length 1.
//!
//! # Specialization constants
//! | id | type | meaning |
//! |---|---|---|
//! | [`SPEC_WORKGROUP_SIZE_X`] | u32 | padded thread count (workgroup size x) |
//! | [`SPEC_NTID_X`]..[`SPEC_NTID_Z`] | u32 | the CUDA block shape |
//! | [`SPEC_SHARED_WORDS`] | u32 | entries without [`EntryInfo::shared_wide`]: `.shared` 32-bit words in Workgroup memory (static + dynamic unless spilling), at least 1; others: 1 |
//! | [`SPEC_SHARED_WIDE_WORDS`] | u32 | entries with [`EntryInfo::shared_wide`]: the same in 64-bit words; others: 1 |
//! | [`SPEC_DYNAMIC_SHARED_BYTES`] | u32 | dynamic shared memory of the launch, in bytes |
//! | [`SPEC_SHARED_SPILL_ADDRESS`] | u64 | device address of the shared spill area; 0: none |
//! | [`SPEC_SHARED_SPILL_STRIDE`] | u32 | bytes of the spill area per workgroup of a dispatch |
//! | [`SPEC_SHARED_HOT_BYTES`] | u32 | with a spill area: the `.shared` bytes kept in Workgroup memory (a multiple of 16; 0: none) |
//!
//! Id 5 is unused (it was the module data address, now in the push
//! constants). Nothing that differs from one process to the next is a
//! specialization constant while the launch's shared memory fits in
//! Workgroup memory, so drivers' disk caches of compiled pipelines (Mesa's,
//! NVIDIA's) find a kernel compiled by an earlier process.
//!
//! # Shared memory beyond Workgroup memory
//! CUDA gives a block up to 48 KiB of static and, opted in, up to 227 KiB
//! of shared memory in all; Vulkan devices may have as little as 16 KiB of
//! `Workgroup` memory (lavapipe: 32 KiB). An entry with
//! [`EntryInfo::shared_spill`] keeps all its `.shared` memory in `Workgroup`
//! memory while [`SPEC_SHARED_SPILL_ADDRESS`] is 0. Otherwise the bytes
//! below [`SPEC_SHARED_HOT_BYTES`] (the "hot" part; the Workgroup array must
//! hold them) stay there and the bytes at and above it live in device
//! memory: byte `o` of workgroup `w` of a dispatch (`w` its linear index,
//! `x + nx * (y + ny * z)` over `NumWorkgroups`) is at
//! `address + w * SPEC_SHARED_SPILL_STRIDE + (o - hot bytes)`. Each dispatch
//! needs its own area (or one dispatch after another), and `.shared` memory
//! is never initialised, so nothing need be cleared. Every access tests
//! `address != 0 && o >= hot bytes`: with the address 0, or with no hot
//! part, the test is constant once the pipeline is specialised and the
//! driver keeps one path; with a hot part both paths stay (twice the code
//! for each access whose offset is not constant).
//!
//! # Push constants
//! A block of 32-bit words. Words 0..[`PUSH_HEADER_WORDS`] are the header:
//! `[ctaid_base.x, ctaid_base.y, ctaid_base.z, nctaid.x, nctaid.y, nctaid.z,
//! param_buffer_address.lo, param_buffer_address.hi, module_data_address.lo,
//! module_data_address.hi]`. `module_data_address` is the device address of
//! the module's data buffer (its `.global`/`.const` variables and the slots
//! of [`ModuleInfo`]), 0 when the module has none. `ctaid_base` is added
//! to the Vulkan workgroup id (grids larger than the device's dispatch limit
//! are split into several dispatches). When the entry's parameters are passed
//! in push constants ([`ParamPassing::PushConstants`]) the parameter block
//! follows the header at byte [`PUSH_HEADER_BYTES`]; otherwise the parameter
//! block lives in device memory at `param_buffer_address` (8-byte aligned,
//! readable for at least `param_bytes` rounded up to 4).

/// Specialization constant id of the workgroup size in x (padded thread count).
pub const SPEC_WORKGROUP_SIZE_X: u32 = 0;
/// Specialization constant id of `%ntid.x`.
pub const SPEC_NTID_X: u32 = 1;
/// Specialization constant id of `%ntid.y`.
pub const SPEC_NTID_Y: u32 = 2;
/// Specialization constant id of `%ntid.z`.
pub const SPEC_NTID_Z: u32 = 3;
/// Specialization constant id of the total number of 32-bit `.shared` words.
pub const SPEC_SHARED_WORDS: u32 = 4;
/// Specialization constant id of the launch's dynamic shared memory in bytes
/// (`%dynamic_smem_size`).
pub const SPEC_DYNAMIC_SHARED_BYTES: u32 = 6;
/// Specialization constant id (64-bit) of the shared spill area's device
/// address (see "Shared memory beyond Workgroup memory"); 0 when the launch
/// fits in Workgroup memory.
pub const SPEC_SHARED_SPILL_ADDRESS: u32 = 7;
/// Specialization constant id of the spill area's bytes per workgroup.
pub const SPEC_SHARED_SPILL_STRIDE: u32 = 8;
/// Specialization constant id of the `.shared` bytes a spilling launch keeps
/// in Workgroup memory (see "Shared memory beyond Workgroup memory").
pub const SPEC_SHARED_HOT_BYTES: u32 = 10;
/// Specialization constant id of the 64-bit `.shared` words of entries with
/// [`EntryInfo::shared_wide`] (see "Shared memory variables").
pub const SPEC_SHARED_WIDE_WORDS: u32 = 9;
/// Specialization constant id of the depth of the fault checks' range table
/// search (see [`fault`]): the table holds `2^depth` ranges.
pub const SPEC_FAULT_DEPTH: u32 = 11;
/// Vulkan's least `maxComputeSharedMemorySize` (bytes): every device has
/// at least this much Workgroup memory.
pub const MIN_WORKGROUP_BYTES: u32 = 16384;
/// Alignment of the hot part of `.shared` when a launch spills (bytes): no
/// access of up to 16 aligned bytes straddles it.
pub const SHARED_HOT_ALIGN: u32 = 16;

/// Number of 32-bit words in the push-constant header.
pub const PUSH_HEADER_WORDS: u32 = 10;
/// Size of the push-constant header in bytes.
pub const PUSH_HEADER_BYTES: u32 = PUSH_HEADER_WORDS * 4;
/// Alignment of the dynamic shared memory base (bytes).
pub const DYNAMIC_SHARED_ALIGN: u32 = 16;

/// Workgroup size for a CUDA block: its thread count rounded up to a multiple of 32.
pub fn padded_block_threads(block: [u32; 3]) -> u64 {
    let n = block[0] as u64 * block[1] as u64 * block[2] as u64;
    n.div_ceil(32) * 32
}

/// Workgroup size for a CUDA block when every subgroup must be full: the
/// thread count rounded up to a multiple of 32 and of `subgroup_multiple`
/// (pass 32 unless the slice warp path runs with larger subgroups).
pub fn workgroup_size(block: [u32; 3], subgroup_multiple: u32) -> u64 {
    let m = (subgroup_multiple.max(32) as u64).div_ceil(32) * 32;
    let n = block[0] as u64 * block[1] as u64 * block[2] as u64;
    n.div_ceil(m) * m
}

/// Number of 32-bit shared words for a launch with `dynamic_bytes` of dynamic shared memory.
pub fn shared_words(static_bytes: u32, dynamic_bytes: u32) -> u32 {
    let base = static_bytes.div_ceil(DYNAMIC_SHARED_ALIGN) * DYNAMIC_SHARED_ALIGN;
    let total = base as u64 + dynamic_bytes as u64;
    (total.div_ceil(4) as u32).max(1)
}

/// How an entry receives its parameter block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamPassing {
    /// Inline in the push constants, after the header.
    PushConstants,
    /// In device memory; the header holds its address.
    Buffer,
}

/// One kernel parameter, as laid out in the parameter block (CUDA's layout:
/// each parameter at the next offset aligned to its alignment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    /// The PTX name of the parameter.
    pub name: String,
    /// Byte offset in the parameter block.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// Alignment in bytes.
    pub align: u32,
}

/// What the runtime needs to know about one translated `.entry`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryInfo {
    /// The PTX name, also the SPIR-V entry point name.
    pub name: String,
    /// Parameters in declaration order.
    pub params: Vec<ParamInfo>,
    /// Size of the parameter block in bytes.
    pub param_bytes: u32,
    /// Where the parameter block goes.
    pub param_passing: ParamPassing,
    /// Size of the push-constant range the pipeline layout must declare.
    pub push_constant_bytes: u32,
    /// Bytes of static `.shared` memory.
    pub static_shared_bytes: u32,
    /// Whether the kernel declares `extern .shared` (dynamic) memory.
    pub uses_dynamic_shared: bool,
    /// `.reqntid`, if given.
    pub reqntid: Option<[u32; 3]>,
    /// `.maxntid`, if given.
    pub maxntid: Option<[u32; 3]>,
    /// Bytes of `.local` memory per thread.
    pub local_bytes: u32,
    /// Translator scratch (see the module docs): 32-bit `Workgroup` words per
    /// invocation of the workgroup (warp exchange buffers).
    pub scratch_words_per_invocation: u32,
    /// Translator scratch words independent of the workgroup size (the flags
    /// of workgroup-wide votes); 0 when the kernel needs no scratch.
    pub scratch_words_fixed: u32,
    /// `Workgroup` words of loop-iteration counters (`Options::loop_limit`,
    /// when the kernel may loop); 0 otherwise.
    pub loop_counter_words: u32,
    /// `Workgroup` words accounted for the block ticket
    /// (`Options::block_order_threads`, when the module may wait on another
    /// block): 16 for its one word (the validation layer adds padding the
    /// runtime does not model); 0 otherwise.
    pub block_ticket_words: u32,
    /// The entry can keep `.shared` bytes beyond `SPEC_SHARED_WORDS` in
    /// device memory (see "Shared memory beyond Workgroup memory").
    pub shared_spill: bool,
    /// The entry's `.shared` memory is the module's variable of 64-bit
    /// words, sized by [`SPEC_SHARED_WIDE_WORDS`] (see "Shared memory variables").
    pub shared_wide: bool,
    /// The entry's threads save themselves at a loop header before
    /// llvmpipe's loop limiter would end their loop, and go on in resume
    /// rounds the runtime dispatches after the launch (see [`resume`]).
    pub resumable: bool,
}

impl EntryInfo {
    /// Bytes of translator scratch for a workgroup of `workgroup_size` invocations.
    pub fn scratch_bytes(&self, workgroup_size: u64) -> u64 {
        (self.scratch_words_per_invocation as u64 * workgroup_size
            + self.scratch_words_fixed as u64
            + self.loop_counter_words as u64
            + self.block_ticket_words as u64)
            * 4
    }
}

/// The state space of a module-scope variable kept in the module data buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalSpace {
    /// `.global`
    Global,
    /// `.const`
    Const,
}

/// One module-scope `.global` or `.const` variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalInfo {
    /// PTX name.
    pub name: String,
    /// State space.
    pub space: GlobalSpace,
    /// Byte offset in the module data buffer.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// Initial contents (`size` bytes; zero where the PTX gives no initializer).
    pub init: Vec<u8>,
    /// Byte offsets inside `init` that hold 64-bit addresses relative to the
    /// module data buffer's base (from `generic(var)`/`var+offset`
    /// initializers): the runtime adds the buffer's device address there.
    pub relocations: Vec<u64>,
}

/// What the runtime needs to know about a translated module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleInfo {
    /// Entries, in PTX order.
    pub entries: Vec<EntryInfo>,
    /// Module-scope variables, in PTX order.
    pub globals: Vec<GlobalInfo>,
    /// Total size of the module data buffer (0 when there are no variables).
    pub global_data_bytes: u64,
    /// When a kernel of the module can execute `trap`: the byte offset in the
    /// module data buffer of a 32-bit word that `trap` sets to 1. The runtime
    /// reports a launch failure when it finds the word set.
    pub trap_offset: Option<u64>,
    /// When a kernel of the module calls `vprintf` or `__assertfail`: the
    /// byte offset in the module data buffer of a 64-bit word the runtime
    /// sets to the device address of the context's printf FIFO (see
    /// [`printf`]) before launching a kernel of the module.
    pub printf_offset: Option<u64>,
    /// When a kernel of the module calls `malloc` or `free`: the byte offset
    /// in the module data buffer of a 64-bit word the runtime sets to the
    /// device address of the context's device heap (see [`heap`]) before
    /// launching a kernel of the module.
    pub heap_offset: Option<u64>,
    /// When a kernel of the module synchronises its grid (see [`grid`]): the
    /// byte offset in the module data buffer of a 64-bit word the runtime
    /// sets before every launch of a kernel of the module: the device address
    /// of a zeroed grid workspace on a cooperative launch, 0 on other launches.
    pub grid_offset: Option<u64>,
    /// When the module has 16-byte vector accesses that order memory: the
    /// byte offset in the module data buffer of their lock table (1,024
    /// zeroed 32-byte slots the kernels take and release themselves; see
    /// the translator's `emit/vector16.rs`).
    pub vector_lock_offset: Option<u64>,
    /// With `Options::fault_checks`: the byte offset in the module data
    /// buffer of a 64-bit word the runtime sets to the device address of the
    /// context's fault log (see [`fault`]) before launching a kernel of the
    /// module.
    pub fault_offset: Option<u64>,
    /// With `Options::resume_loops`, when an entry of the module was
    /// rewritten to resume its threads (see [`resume`]): the byte offset in
    /// the module data buffer of the resume slot the runtime fills.
    pub resume_offset: Option<u64>,
    /// With `Options::race_checks`: whether the module's `.shared` accesses
    /// are tracked for hazards (not in modules with `mbarrier`).
    pub race_checked: bool,
    /// The checked accesses a fault record can name, by site index.
    pub fault_sites: Vec<fault::FaultSite>,
    /// The PTX file's name as given to the translator (for fault reports).
    pub source_name: String,
}

/// # Fault checks (`Options::fault_checks`)
///
/// Every user access to memory is checked before it happens (see
/// `emit/fault.rs`). A `.global` address must lie inside one range of the
/// context's range table; `.shared` and `.local` offsets inside the block's
/// and the thread's memory; every address aligned to its access size. An
/// access that fails does not happen: the thread sets
/// [`printf::TRAP_ILLEGAL_ADDRESS`] or [`printf::TRAP_MISALIGNED`] in the
/// trap word and appends a record to the fault log.
///
/// The fault log (its address in the module data word at
/// [`ModuleInfo::fault_offset`]; little-endian):
///
/// | offset | type | field |
/// |---|---|---|
/// | [`fault::RANGES`] | u64 | device address of the range table |
/// | [`fault::COUNT`] | u32 | faults so far (records past the capacity are counted, not written) |
/// | [`fault::CAPACITY`] | u32 | records the log holds |
/// | [`fault::SCRATCH`] | 32 bytes | where failing global accesses go instead |
/// | [`fault::RACE_SHADOW`] | u64 | racecheck: device address of the shadow of the launch's shared memory |
/// | [`fault::RACE_SLOTS`] | u32 | racecheck: blocks the shadow has room for (at least 1) |
/// | [`fault::RECORDS`] | ... | the records, [`fault::RECORD_BYTES`] each |
///
/// A thread keeps its first fault in two `Private` variables and appends
/// its record when it returns from the entry.
///
/// A record: `[u64 address (a .shared/.local access: the offset), u64 the
/// module data address of the module, u32 site (index in
/// ModuleInfo::fault_sites), u32 kind, u32 ctaid.x, y, z, u32 tid.x, y, z]`.
///
/// ## Racecheck (`Options::race_checks`)
///
/// Each block has a slot of the shadow: [`fault::RACE_ENTRY_BYTES`] per
/// 32-bit word of its shared memory, `[u64 last write, u64 last read(s),
/// u32 site of the write, u32 site of the read]`, zeroed before each launch.
/// Block `b` (its linear `%ctaid`) uses slot `b % slots`; an entry is
/// `[bits 0-3: bytes of the word accessed, 4-15: accessor, 16-26: warp epoch,
/// 27-42: block epoch, 43-63: b / slots]`. The accessor is the linear
/// `%tid` plus one, or for reads by several threads [`fault::RACE_WARP_READERS`]
/// plus the warp (all in one warp) or [`fault::RACE_MANY_READERS`]. The
/// block epoch counts the thread's `bar`/`barrier` instructions; the warp
/// epoch its `bar.warp.sync` since the last of them. Two accesses of a
/// word's bytes in the same block epoch by different threads, one of them
/// a write, are a hazard unless both threads are in one warp with
/// different warp epochs. Atomics are not tracked. A thread keeps its
/// first hazard and records it at its end: kind [`fault::KIND_RACE_RAW`],
/// [`fault::KIND_RACE_WAR`] or [`fault::KIND_RACE_WAW`], the site of the
/// later access, and as address the shared byte offset (bits 0-19), the
/// earlier access's accessor (bits 20-31) and site (bits 32-63). Hazards
/// do not set the trap word: the launch goes on, the runtime reports them.
///
/// The range table holds `2^depth` entries `[u64 base, u64 end)` sorted by
/// base, disjoint, padded with `[u64::MAX, 0)`; `depth` is the
/// specialization constant [`SPEC_FAULT_DEPTH`] (at most
/// [`fault::MAX_DEPTH`]).
pub mod fault {
    /// Offset of the range table's address in the log.
    pub const RANGES: u64 = 0;
    /// Offset of the fault count.
    pub const COUNT: u64 = 8;
    /// Offset of the record capacity.
    pub const CAPACITY: u64 = 12;
    /// Offset of 32 scratch bytes: a failing global access goes there
    /// instead (the checked code has no branch around global accesses).
    pub const SCRATCH: u64 = 16;
    /// Offset of the racecheck shadow's address.
    pub const RACE_SHADOW: u64 = 48;
    /// Offset of the racecheck shadow's slot count.
    pub const RACE_SLOTS: u64 = 56;
    /// Offset of the first record.
    pub const RECORDS: u64 = 64;
    /// Bytes of a record.
    pub const RECORD_BYTES: u64 = 48;
    /// Record field: the address.
    pub const R_ADDRESS: u64 = 0;
    /// Record field: the module data address.
    pub const R_MODULE: u64 = 8;
    /// Record field: the site.
    pub const R_SITE: u64 = 16;
    /// Record field: the kind.
    pub const R_KIND: u64 = 20;
    /// Record field: `%ctaid` (three u32).
    pub const R_CTAID: u64 = 24;
    /// Record field: `%tid` (three u32).
    pub const R_TID: u64 = 36;
    /// Bytes of a range table entry.
    pub const RANGE_BYTES: u64 = 16;
    /// Largest search depth (a table of 65536 ranges).
    pub const MAX_DEPTH: u32 = 16;
    /// Kind: the address is outside every range (or the space's size).
    pub const KIND_RANGE: u32 = 1;
    /// Kind: the address is not aligned to the access size.
    pub const KIND_MISALIGNED: u32 = 2;
    /// Kind (racecheck): a read of a word another thread wrote in the same epoch.
    pub const KIND_RACE_RAW: u32 = 3;
    /// Kind (racecheck): a write of a word another thread read in the same epoch.
    pub const KIND_RACE_WAR: u32 = 4;
    /// Kind (racecheck): a write of a word another thread wrote in the same epoch.
    pub const KIND_RACE_WAW: u32 = 5;
    /// Bytes of the racecheck shadow per 32-bit word of shared memory.
    pub const RACE_ENTRY_BYTES: u64 = 24;
    /// Accessor field of a shadow entry: reads by several threads of warp
    /// `w` are `RACE_WARP_READERS + w`.
    pub const RACE_WARP_READERS: u32 = 0x800;
    /// Accessor field of a shadow entry: reads by threads of several warps.
    pub const RACE_MANY_READERS: u32 = 0xfff;
    /// Space of a site: `.global` (or a generic global address).
    pub const SPACE_GLOBAL: u32 = 0;
    /// Space of a site: `.shared`.
    pub const SPACE_SHARED: u32 = 1;
    /// Space of a site: `.local`.
    pub const SPACE_LOCAL: u32 = 2;

    /// How a checked access uses memory.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Access {
        /// A load.
        Read,
        /// A store.
        Write,
        /// An atomic read-modify-write (`atom`, `red`).
        Atomic,
    }

    impl Access {
        /// The word compute-sanitizer uses.
        pub fn name(self) -> &'static str {
            match self {
                Access::Read => "read",
                Access::Write => "write",
                Access::Atomic => "atomic",
            }
        }
    }

    /// One checked access of the PTX.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct FaultSite {
        /// Byte range of the instruction in the PTX.
        pub start: u32,
        /// End of that range.
        pub end: u32,
        /// What it does.
        pub access: Access,
        /// Bytes per access.
        pub bytes: u32,
        /// [`SPACE_GLOBAL`], [`SPACE_SHARED`] or [`SPACE_LOCAL`].
        pub space: u32,
        /// The PTX function it is in.
        pub function: String,
        /// Line in the PTX (1-based; 0 before the translator fills it in).
        pub line: u32,
        /// Column in the PTX (1-based).
        pub column: u32,
        /// The source position of the nearest preceding `.loc` (`file:line`),
        /// when the PTX has line information.
        pub source: Option<String>,
    }
}

/// # The device heap (`malloc` and `free` in kernels)
///
/// nvcc lowers `malloc`/`free` (and `new`/`delete`) in device code to calls of
/// the undefined functions `malloc(.param .b64 size)` → `.param .b64` and
/// `free(.param .b64 ptr)`; numba's runtime (NRT) calls the same. The
/// translator lowers them to a lock-free allocator over a device buffer,
/// the heap, whose address the runtime stores in the module data word at
/// [`ModuleInfo::heap_offset`]; its size is `CU_LIMIT_MALLOC_HEAP_SIZE`
/// (8 MiB by default, fixed once a kernel that allocates has run, as in CUDA).
///
/// Layout (little-endian): a [`heap::HEADER_BYTES`] header
///
/// | offset | type | field |
/// |---|---|---|
/// | [`heap::USED`] | u64 | bytes of block space handed out so far |
/// | [`heap::CAPACITY`] | u64 | bytes of block space (after the header) |
/// | [`heap::FREE_LISTS`] + 8·c | u64 | free list of size class c: block offset (low 32 bits, 0 = empty) and a change counter (high 32 bits) |
///
/// then the blocks. A block of class c is 2^c bytes
/// ([`heap::MIN_CLASS`] ≤ c ≤ [`heap::MAX_CLASS`]) at a 16-byte aligned
/// offset from the heap's start: a [`heap::BLOCK_HEADER_BYTES`] header
/// `[u32 class, u32 0, u32 next free block, u32 0]`, then the bytes `malloc`
/// returns (16-byte aligned, as CUDA's).
///
/// `malloc(n)` takes the least class that holds `n` + the block header,
/// pops that class's free list, or else carves a block from the unused end
/// (compare-and-swap on `used`); NULL when `n` is 0, more than
/// [`heap::MAX_REQUEST`], or the heap has no room. `free(p)` pushes the block
/// on its class's list; NULL and pointers outside the heap's blocks are
/// ignored. Pops and pushes are compare-and-swap loops on the tagged list
/// head (the counter defeats the ABA problem), with device-scope
/// acquire-release ordering. Freed blocks are reused by later allocations of
/// the same class; they are not split or merged.
pub mod heap {
    /// Offset of the `used` word.
    pub const USED: u64 = 0;
    /// Offset of the `capacity` word.
    pub const CAPACITY: u64 = 8;
    /// Offset of the free-list heads (one u64 per class 0..=31).
    pub const FREE_LISTS: u64 = 16;
    /// Bytes of the heap header.
    pub const HEADER_BYTES: u64 = 512;
    /// Bytes of a block's header.
    pub const BLOCK_HEADER_BYTES: u32 = 16;
    /// Offset in a block of its next-free-block link.
    pub const NEXT_FIELD: u64 = 8;
    /// Smallest size class (32-byte blocks).
    pub const MIN_CLASS: u32 = 5;
    /// Largest size class (2 GiB blocks).
    pub const MAX_CLASS: u32 = 31;
    /// Largest request `malloc` serves.
    pub const MAX_REQUEST: u64 = (1 << MAX_CLASS) - BLOCK_HEADER_BYTES as u64;
    /// Default heap size (`CU_LIMIT_MALLOC_HEAP_SIZE`), bytes.
    pub const DEFAULT_HEAP_BYTES: u64 = 8 << 20;
}

/// # Kernel `printf` and `assert` (the printf FIFO)
///
/// nvcc and NVVM lower `printf` to calls of the undefined function
/// `vprintf(.param .b64 format, .param .b64 args)` (`format` a generic pointer
/// to the string, `args` a generic pointer to the arguments packed with
/// natural alignment, floats promoted to `double`; 0 when there are none), and
/// `assert` to `__assertfail(message, file, line, function, char_size)`.
/// The translator lowers both to appending a record to a device buffer, the
/// FIFO, whose address the runtime stores in the module data word at
/// [`ModuleInfo::printf_offset`]. The host parses the format strings when it
/// reads the FIFO back (at the next synchronisation), so the device copies
/// the argument bytes without knowing their types: up to
/// [`printf::MAX_ARG_BYTES`], fewer when `args` points into `.local` memory
/// and the thread's local words end sooner.
///
/// FIFO layout (all little-endian): a [`printf::HEADER_BYTES`] header
/// `[u32 used, u32 capacity, u32 0, u32 0]`, then records from byte
/// [`printf::HEADER_BYTES`]. A thread reserves a record by adding its size to
/// `used` atomically and writes it only if it lies entirely within
/// `capacity` bytes of record space: records that do not fit are dropped
/// (the host reports how many bytes were lost), and the host resets `used`
/// to 0 after reading. The FIFO buffer has [`printf::SINK_BYTES`] more
/// after its record space, where a record that does not fit is written
/// instead (without a branch; nothing reads them). Without a FIFO (a zero
/// slot) a kernel writes to a header and sink of its own right after the
/// slot in the module data. A record is 8-byte aligned:
///
/// | offset | type | field |
/// |---|---|---|
/// | 0 | u32 | size of the record in bytes (a multiple of 8) |
/// | 4 | u32 | kind: [`printf::KIND_PRINTF`] or [`printf::KIND_ASSERT`] |
/// | 8 | u64 | the format string (printf) or the message (assert), generic |
/// | 16 | ... | printf: the argument bytes; assert: [`printf::ASSERT_PAYLOAD`] |
///
/// An assert also sets bit [`printf::TRAP_ASSERT`] of the trap word
/// ([`ModuleInfo::trap_offset`]; `trap` sets [`printf::TRAP_TRAP`]) and ends
/// the thread; the runtime then fails the context with an assert error.
pub mod printf {
    /// Bytes of the FIFO header.
    pub const HEADER_BYTES: u64 = 16;
    /// Bytes of a record's header (size, kind, string pointer).
    pub const RECORD_HEADER_BYTES: u32 = 16;
    /// Most argument bytes copied per `printf` (32 arguments of 8 bytes, CUDA's limit).
    pub const MAX_ARG_BYTES: u32 = 256;
    /// Bytes after a FIFO's record space that take the records that do
    /// not fit (the largest record).
    pub const SINK_BYTES: u64 = RECORD_HEADER_BYTES as u64 + MAX_ARG_BYTES as u64;
    /// Bytes of the module data's printf area: the FIFO slot (a u64), then
    /// a FIFO header of capacity 0 and its sink, used when the slot is 0.
    pub const MODULE_AREA_BYTES: u64 = 8 + HEADER_BYTES + SINK_BYTES;
    /// A `printf` record.
    pub const KIND_PRINTF: u32 = 0;
    /// An `assert` record.
    pub const KIND_ASSERT: u32 = 1;
    /// Bytes after the record header of an assert record: `[u64 file, u64
    /// function, u32 line, u32 ctaid.x, ctaid.y, ctaid.z, u32 tid.x, tid.y,
    /// tid.z, u32 0]`.
    pub const ASSERT_PAYLOAD: u32 = 48;
    /// Default FIFO capacity (`CU_LIMIT_PRINTF_FIFO_SIZE`), bytes.
    pub const DEFAULT_FIFO_BYTES: u64 = 1 << 20;
    /// Trap word bit set by `trap` (and stack overflow).
    pub const TRAP_TRAP: u32 = 1;
    /// Trap word bit set by a failed `assert`.
    pub const TRAP_ASSERT: u32 = 2;
    /// Trap word bit set by a grid synchronisation whose blocks did not all
    /// arrive in time (see [`super::grid`]).
    pub const TRAP_GRID_SYNC: u32 = 4;
    /// Trap word bit set when a loop would run on after llvmpipe's loop
    /// limiter ends it (`Options::loop_limit`).
    pub const TRAP_LOOP_LIMIT: u32 = 8;
    /// Loop iterations llvmpipe runs per invocation, all loops together.
    pub const LOOP_LIMIT: u32 = 65535;
    /// Trap word bit set by an access outside every allocation, or outside
    /// the block's shared or the thread's local memory (see [`super::fault`]).
    pub const TRAP_ILLEGAL_ADDRESS: u32 = 16;
    /// Trap word bit set by an access whose address is not aligned to its size.
    pub const TRAP_MISALIGNED: u32 = 32;
    /// Trap word bit set by a 16-byte ordered load that found a writer
    /// moving in every one of its tries (the translator's
    /// `emit/vector16.rs`).
    pub const TRAP_VECTOR_READ: u32 = 64;
    /// Tries of such a load.
    pub const VECTOR_READ_TRIES: u32 = 4;

    /// Most format bytes a kernel scans when it counts a format's
    /// conversions (the value `printf` returns).
    pub const MAX_FORMAT_BYTES: u32 = 4096;

    /// Bytes of the argument buffer a `printf` with format `format` (up to
    /// its first NUL) reads: the end of its last argument, packed as nvcc
    /// packs them, each at its natural alignment: `int`-sized for `%d %i %u
    /// %x %X %o %c` and `*` widths and precisions (`h`/`hh` too, C promotes
    /// them), 8 bytes with `l`, `ll`, `j`, `z`, `t`, `q`, `L`, for `%s %p`
    /// and for the floating conversions (C promotes `float` to `double`).
    /// The runtime's formatting reads arguments by the same rules.
    pub fn argument_bytes(format: &[u8]) -> u32 {
        let fmt = format.split(|&b| b == 0).next().unwrap_or_default();
        let mut at = 0u32;
        let take = |at: &mut u32, size: u32| *at = at.div_ceil(size) * size + size;
        let mut i = 0;
        while i < fmt.len() {
            if fmt[i] != b'%' {
                i += 1;
                continue;
            }
            i += 1;
            while matches!(fmt.get(i), Some(b'-' | b'+' | b' ' | b'#' | b'0')) {
                i += 1;
            }
            // The width, then a precision after '.': digits, or '*' (an int).
            let mut field = |i: &mut usize| {
                if fmt.get(*i) == Some(&b'*') {
                    *i += 1;
                    take(&mut at, 4);
                } else {
                    while fmt.get(*i).is_some_and(u8::is_ascii_digit) {
                        *i += 1;
                    }
                }
            };
            field(&mut i);
            if fmt.get(i) == Some(&b'.') {
                i += 1;
                field(&mut i);
            }
            let mut long = false;
            while let Some(&l) = fmt.get(i) {
                match l {
                    b'l' | b'j' | b'z' | b't' | b'q' | b'L' => long = true,
                    b'h' => {}
                    _ => break,
                }
                i += 1;
            }
            let Some(&conv) = fmt.get(i) else { break };
            i += 1;
            match conv {
                b'd' | b'i' | b'u' | b'x' | b'X' | b'o' => take(&mut at, if long { 8 } else { 4 }),
                b'c' => take(&mut at, 4),
                b's' | b'p' | b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A' => take(&mut at, 8),
                _ => {}
            }
        }
        at
    }

    /// What CUDA's `printf` with format `format` (up to its first NUL)
    /// returns: the number of conversions, a `%` followed by anything but
    /// `%` or the end (`%%` prints a `%`).
    /// At most [`MAX_FORMAT_BYTES`] bytes are read, as on the device.
    pub fn conversions(format: &[u8]) -> u32 {
        let fmt = format.split(|&b| b == 0).next().unwrap_or_default();
        let fmt = &fmt[..fmt.len().min(MAX_FORMAT_BYTES as usize)];
        let mut count = 0;
        let mut lone = false;
        for &c in fmt {
            if lone && c != b'%' {
                count += 1;
            }
            lone = !lone && c == b'%';
        }
        count
    }
}

/// # Grid synchronisation (cooperative launches)
///
/// A cooperative launch (`cuLaunchCooperativeKernel`, or `cuLaunchKernelEx`
/// with `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`) of a kernel whose module has a
/// [`ModuleInfo::grid_offset`] gets a grid workspace: [`grid::BYTES`] bytes
/// of device memory the runtime zeroes before the launch, whose address it
/// stores in the module data word. Layout (little-endian, NVIDIA's, which
/// nvcc's inline `grid.sync()` relies on):
///
/// | offset | type | meaning |
/// |-------:|------|---------|
/// | 0 | u32 | size of the workspace in bytes |
/// | [`grid::BARRIER`] | u32 | the barrier word |
///
/// Each block arrives by adding 1 to the barrier word, block (0, 0, 0) by
/// adding `0x8000_0001 - nblocks`; once all arrived the word's top bit has
/// flipped, which is what waiting blocks watch for.
///
/// Every block of a cooperative launch must be running at once: the runtime
/// refuses a launch of more blocks than the device is known to run at once
/// (`CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE`).
pub mod grid {
    /// Bytes of the grid workspace.
    pub const BYTES: u64 = 8;
    /// Byte offset of the barrier word.
    pub const BARRIER: u64 = 4;
    /// Rounds of the translator's spin loop before a grid sync gives up and
    /// sets [`super::printf::TRAP_GRID_SYNC`] (each round polls the barrier
    /// word 64 times; a device driver may end the loop sooner, as lavapipe's
    /// loop limiter does after 65535 iterations of all loops of a thread).
    pub const SPIN_ROUNDS: u32 = 1 << 20;
}

/// Resume rounds (`Options::resume_loops`, `translator/src/resume.rs`).
///
/// A thread of a resumable entry ([`EntryInfo::resumable`]) that has run
/// [`crate::resume::THRESHOLD`] loop iterations stops at a loop header and
/// saves a record in the context's resume area; the runtime dispatches the
/// entry again, up to the slot's `rounds` times, and each invocation of a
/// resume round restores one record of the round before and goes on.
///
/// The module's resume slot ([`ModuleInfo::resume_offset`], 16 bytes):
/// `[area: u64, half_bytes: u32, rounds: u32]`: the device address of the
/// area, the bytes of each of its two record buffers, and the most resume
/// rounds the runtime dispatches after a launch (at most [`MAX_ROUNDS`](resume::MAX_ROUNDS)).
///
/// The area: at [`COUNTS`](resume::COUNTS), one u32 per round `r` (0 the launch's own
/// dispatches): the records saved in round `r` (may exceed the capacity,
/// `half_bytes / stride`; those beyond it were not written); at
/// [`INDIRECT`](resume::INDIRECT) + `r` x [`INDIRECT_BYTES`](resume::INDIRECT_BYTES), the `VkDispatchIndirectCommand`
/// of round `r + 1` (x: the workgroups that cover the records, y = z = 1;
/// all 0 when round `r` saved none); at [`RECORDS`](resume::RECORDS) + `b` x `half_bytes`,
/// record buffer `b`: round `r` writes buffer `r % 2`. The runtime zeroes
/// the first [`HEADER_BYTES`](resume::HEADER_BYTES) before each launch, and orders the launch
/// and its rounds after and before all other work (one area per context).
///
/// Resume round `r` (1..=rounds) is an indirect dispatch of the entry's
/// pipeline with push-constant header words 0-2 `[r, ROUND_MARK, 0]`
/// instead of the `ctaid` base (the other words as in the launch):
/// invocation `i` (`x * threads + tid`, from its workgroup `x` and its
/// linear index below the block's thread count) restores record `i` of
/// buffer `(r - 1) % 2` if `i` is below round `r - 1`'s count. A record
/// starts with the loop header's number (1-based; u32) and holds the
/// registers live there.
pub mod resume {
    /// Bytes of the module's resume slot.
    pub const SLOT_BYTES: u64 = 16;
    /// Offset in the slot of the area's device address (u64).
    pub const SLOT_AREA: u64 = 0;
    /// Offset in the slot of each record buffer's bytes (u32).
    pub const SLOT_HALF_BYTES: u64 = 8;
    /// Offset in the slot of the most resume rounds (u32).
    pub const SLOT_ROUNDS: u64 = 12;
    /// Most resume rounds after a launch.
    pub const MAX_ROUNDS: u32 = 255;
    /// Offset in the area of the per-round record counts.
    pub const COUNTS: u64 = 0;
    /// Offset in the area of the per-round indirect dispatch commands.
    pub const INDIRECT: u64 = 1024;
    /// Bytes per indirect command (three u32, padded).
    pub const INDIRECT_BYTES: u64 = 16;
    /// Bytes the runtime zeroes before each launch.
    pub const HEADER_BYTES: u64 = 8192;
    /// Offset in the area of record buffer 0.
    pub const RECORDS: u64 = HEADER_BYTES;
    /// Bytes of a record's header (the loop header's number and padding).
    pub const RECORD_HEADER_BYTES: u32 = 8;
    /// Header word 1 of a resume round (no launch has that many blocks in y).
    pub const ROUND_MARK: u32 = u32::MAX;
    const _: () = assert!(INDIRECT >= COUNTS + 4 * (MAX_ROUNDS as u64 + 1));
    const _: () = assert!(HEADER_BYTES >= INDIRECT + INDIRECT_BYTES * (MAX_ROUNDS as u64 + 1));
}

/// Generic addresses of `.shared` memory: `SHARED_WINDOW | offset`.
///
/// A generic address is 64 bits. Device (`.global`/`.const`) addresses are
/// used as they are; `.shared` and `.local` addresses are tagged in the top
/// 16 bits, which no Vulkan device address uses (they are canonical 48-bit
/// or smaller), so `cvta`, `isspacep` and generic loads can tell them apart.
pub const SHARED_WINDOW: u64 = 0xFFFE_0000_0000_0000;
/// Generic addresses of `.local` memory: `LOCAL_WINDOW | offset`.
pub const LOCAL_WINDOW: u64 = 0xFFFD_0000_0000_0000;
/// Mask of the window tag.
pub const WINDOW_MASK: u64 = 0xFFFF_0000_0000_0000;

/// "Addresses" of `.func`s (`mov.u64 %rd, func`): `FUNCTION_WINDOW | index`.
/// Indirect calls compare against these; they are not dereferenceable.
pub const FUNCTION_WINDOW: u64 = 0xFFFC_0000_0000_0000;

/// # Tensor maps (`CUtensorMap`, 128 bytes, 64-byte aligned)
///
/// `cuTensorMapEncodeTiled`/`Im2col`/`Im2colWide` write this layout; the
/// copy engine in `shaders/tma.ptx` reads it from kernel parameters, `.const`
/// or `.global` memory (keep the two in step). All fields little-endian:
///
/// | offset | type | field |
/// |---|---|---|
/// | 0x00 | u64 | global address |
/// | 0x08 | u32\[5\] | size of each dimension in elements (1 beyond the rank) |
/// | 0x1C | u32 | rank (bits 0–7), data type (8–15, `CUtensorMapDataType`), element bytes (16–23, 0 for the sub-byte types), mode (24–31, [`TensorMapMode`]) |
/// | 0x20 | u64\[5\] | stride of each dimension in bytes; dimension 0's is the element size, 0 beyond the rank |
/// | 0x48 | u32\[5\] | per dimension: box size (bits 0–8), traversal (element) stride (9–12), elements traversed `ceil(box / stride)` (16–24); beyond the rank 1, 1, 1 |
/// | 0x5C | u32 | interleave (bits 0–7), swizzle (8–15), L2 promotion (16–23), OOB fill (24–31) — the driver API's enum values |
/// | 0x60 | u32 | im2col: channels per pixel (bits 0–15), pixels per column (16–31) |
/// | 0x64 | i16\[6\] | im2col: lower corner W, H, D, then upper corner W, H, D |
/// | 0x70 | u32 | [`TENSOR_MAP_MAGIC`] |
/// | 0x74 | — | zero |
///
/// The element strides of dimension 0 are stored as 1 when the layout is
/// not interleaved (the driver ignores them there).
pub mod tensor_map {
    /// Size of a tensor map in bytes.
    pub const BYTES: usize = 128;
    /// Byte offset of the global address.
    pub const ADDRESS: usize = 0x00;
    /// Byte offset of the dimension sizes.
    pub const DIMS: usize = 0x08;
    /// Byte offset of the rank / data type / element size / mode word.
    pub const FORMAT: usize = 0x1C;
    /// Byte offset of the dimension strides.
    pub const STRIDES: usize = 0x20;
    /// Byte offset of the box words.
    pub const BOX: usize = 0x48;
    /// Byte offset of the interleave / swizzle / L2 / OOB word.
    pub const MODES: usize = 0x5C;
    /// Byte offset of the im2col pixel word.
    pub const PIXELS: usize = 0x60;
    /// Byte offset of the im2col corners.
    pub const CORNERS: usize = 0x64;
    /// Byte offset of the magic word.
    pub const MAGIC: usize = 0x70;
}

/// Value of the magic word at [`tensor_map::MAGIC`] ("TMv1").
pub const TENSOR_MAP_MAGIC: u32 = 0x3176_4D54;

/// How a tensor map is traversed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TensorMapMode {
    /// `cuTensorMapEncodeTiled`: boxes.
    #[default]
    Tiled = 0,
    /// `cuTensorMapEncodeIm2col`.
    Im2col = 1,
    /// `cuTensorMapEncodeIm2colWide`, `CU_TENSOR_MAP_IM2COL_WIDE_MODE_W`.
    Im2colW = 2,
    /// `cuTensorMapEncodeIm2colWide`, `CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128`.
    Im2colW128 = 3,
}

/// The contents of a tensor map (already validated by the encoder).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TensorMapDesc {
    /// Device address of the tensor.
    pub address: u64,
    /// Number of dimensions, 1 to 5.
    pub rank: u32,
    /// `CUtensorMapDataType`.
    pub data_type: u32,
    /// Bytes per element (0 for the packed sub-byte types).
    pub elem_bytes: u32,
    /// Traversal mode.
    pub mode: TensorMapMode,
    /// Size of each dimension in elements.
    pub dims: [u32; 5],
    /// Stride of each dimension in bytes (`strides[0]` is the element size).
    pub strides: [u64; 5],
    /// Box size per dimension (tiled mode).
    pub box_dim: [u32; 5],
    /// Traversal stride per dimension.
    pub elem_strides: [u32; 5],
    /// `CUtensorMapInterleave`.
    pub interleave: u32,
    /// `CUtensorMapSwizzle`.
    pub swizzle: u32,
    /// `CUtensorMapL2promotion`.
    pub l2_promotion: u32,
    /// `CUtensorMapFloatOOBfill`.
    pub oob_fill: u32,
    /// im2col: channels per pixel.
    pub channels_per_pixel: u32,
    /// im2col: pixels per column.
    pub pixels_per_column: u32,
    /// im2col: lower corner of the bounding box (W, H, D).
    pub lower_corner: [i32; 3],
    /// im2col: upper corner of the bounding box (W, H, D).
    pub upper_corner: [i32; 3],
}

impl TensorMapDesc {
    /// For the packed sub-byte data types (`CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B`,
    /// `16U4_ALIGN16B`, `16U6_ALIGN16B`): how many values of dimension 0 the
    /// copy engine moves as one unit, and that unit's size in global memory
    /// (a byte of two 4-bit values; a group of sixteen values in 8 or 12
    /// bytes). See `shaders/tma.ptx`.
    pub fn packed_unit(data_type: u32) -> Option<(u32, u32)> {
        match data_type {
            13 => Some((2, 1)),
            14 => Some((16, 8)),
            15 => Some((16, 12)),
            _ => None,
        }
    }

    /// The 128-byte map (see [`tensor_map`]). Dimensions beyond the rank get
    /// size 1, stride 0 and box 1. For the packed sub-byte types, dimension 0
    /// (size and box) is stored in the units of [`TensorMapDesc::packed_unit`],
    /// whose global size is the element size.
    pub fn encode(&self) -> [u8; tensor_map::BYTES] {
        let mut m = [0u8; tensor_map::BYTES];
        let mut put = |off: usize, bytes: &[u8]| m[off..off + bytes.len()].copy_from_slice(bytes);
        put(tensor_map::ADDRESS, &self.address.to_le_bytes());
        let rank = self.rank.min(5) as usize;
        let (unit, elem_bytes) = Self::packed_unit(self.data_type).unwrap_or((1, self.elem_bytes));
        for d in 0..5 {
            let inside = d < rank;
            let div = if d == 0 { unit } else { 1 };
            let dim = if inside { self.dims[d] / div } else { 1 };
            put(tensor_map::DIMS + 4 * d, &dim.to_le_bytes());
            let stride = if !inside {
                0
            } else if d == 0 && unit > 1 {
                elem_bytes as u64
            } else {
                self.strides[d]
            };
            put(tensor_map::STRIDES + 8 * d, &stride.to_le_bytes());
            let (b, es) =
                if inside { ((self.box_dim[d] / div).clamp(1, 256), self.elem_strides[d].clamp(1, 8)) } else { (1, 1) };
            let n = b.div_ceil(es);
            put(tensor_map::BOX + 4 * d, &(b | es << 9 | n << 16).to_le_bytes());
        }
        let format =
            (rank as u32) | (self.data_type & 0xFF) << 8 | (elem_bytes & 0xFF) << 16 | (self.mode as u32) << 24;
        put(tensor_map::FORMAT, &format.to_le_bytes());
        let modes = (self.interleave & 0xFF)
            | (self.swizzle & 0xFF) << 8
            | (self.l2_promotion & 0xFF) << 16
            | (self.oob_fill & 0xFF) << 24;
        put(tensor_map::MODES, &modes.to_le_bytes());
        let pixels = (self.channels_per_pixel & 0xFFFF) | (self.pixels_per_column & 0xFFFF) << 16;
        put(tensor_map::PIXELS, &pixels.to_le_bytes());
        for (i, v) in self.lower_corner.iter().chain(self.upper_corner.iter()).enumerate() {
            put(tensor_map::CORNERS + 2 * i, &(*v as i16).to_le_bytes());
        }
        put(tensor_map::MAGIC, &TENSOR_MAP_MAGIC.to_le_bytes());
        m
    }

    /// Whether `bytes` holds a map written by [`TensorMapDesc::encode`].
    pub fn is_encoded(bytes: &[u8; tensor_map::BYTES]) -> bool {
        bytes[tensor_map::MAGIC..tensor_map::MAGIC + 4] == TENSOR_MAP_MAGIC.to_le_bytes()
    }
}

/// # Texture and surface objects (128 bytes in device memory)
///
/// A `CUtexObject` or `CUsurfObject` is the device address of one of these
/// records (`libcuda`'s `cuTexObjectCreate`/`cuSurfObjectCreate` allocate
/// and write them; a `.texref`/`.surfref` module variable holds the address
/// of its reference's record). The sampling engine in `shaders/tex.ptx`
/// reads it (keep the two in step). All fields little-endian:
///
/// | offset | type | field |
/// |---|---|---|
/// | 0x00 | u64 | device address of level 0 |
/// | 0x08 | u32\[3\] | width, height, depth of level 0 in texels (1 where the geometry has no such dimension) |
/// | 0x14 | u32 | layers (1 unless layered; 6 per cubemap) |
/// | 0x18 | u64 | row pitch of level 0 in bytes |
/// | 0x20 | u32 | format: `CUarray_format` (bits 0–7), channels (8–15), element bytes (16–23), dimensions 1–3 (24–27), layered (28), cubemap (29) |
/// | 0x24 | u32 | sampler: address modes of dimensions 0, 1, 2 (2 bits each from bit 0), filter mode (8), mipmap filter mode (9), read as integer (16), normalized coordinates (17), sRGB (18), resource type (24–25: array, mipmapped array, linear, pitch 2D) |
/// | 0x28 | f32\[4\] | border colour |
/// | 0x38 | f32 | mipmap level bias |
/// | 0x3C | f32 | minimum mipmap level clamp |
/// | 0x40 | f32 | maximum mipmap level clamp |
/// | 0x44 | u32 | maximum anisotropy |
/// | 0x48 | u32 | mipmap levels (1 for a plain array or linear memory) |
/// | 0x4C | u32 | [`TEXTURE_MAGIC`] or [`SURFACE_MAGIC`] |
/// | 0x50 | — | zero |
///
/// Texel `(x, y, z)` of layer `l` at level `k` lies at
/// `base_k + ((l * depth_k + z) * height_k + y) * pitch_k + x * element`,
/// where level `k > 0` has the dimensions `max(1, n >> k)`, a tight row
/// pitch, and follows level `k - 1` (all its layers) directly.
pub mod texture {
    /// Size of a record in bytes.
    pub const BYTES: usize = 128;
    /// Byte offset of the level-0 address.
    pub const ADDRESS: usize = 0x00;
    /// Byte offset of width, height and depth.
    pub const EXTENT: usize = 0x08;
    /// Byte offset of the layer count.
    pub const LAYERS: usize = 0x14;
    /// Byte offset of the row pitch.
    pub const PITCH: usize = 0x18;
    /// Byte offset of the format word.
    pub const FORMAT: usize = 0x20;
    /// Byte offset of the sampler word.
    pub const SAMPLER: usize = 0x24;
    /// Byte offset of the border colour.
    pub const BORDER: usize = 0x28;
    /// Byte offset of the mipmap level bias.
    pub const LOD_BIAS: usize = 0x38;
    /// Byte offset of the minimum mipmap level clamp.
    pub const MIN_LOD: usize = 0x3C;
    /// Byte offset of the maximum mipmap level clamp.
    pub const MAX_LOD: usize = 0x40;
    /// Byte offset of the maximum anisotropy.
    pub const ANISOTROPY: usize = 0x44;
    /// Byte offset of the level count.
    pub const LEVELS: usize = 0x48;
    /// Byte offset of the magic word.
    pub const MAGIC: usize = 0x4C;
}

/// Magic word of a texture object record ("PTXT").
pub const TEXTURE_MAGIC: u32 = 0x5458_5450;
/// Magic word of a surface object record ("PTXS").
pub const SURFACE_MAGIC: u32 = 0x5358_5450;

/// What a texture or surface object reads (validated by the shim).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TextureDesc {
    /// Device address of level 0.
    pub address: u64,
    /// Width, height and depth of level 0 in texels (1 where absent).
    pub extent: [u32; 3],
    /// Layers (1 unless layered; 6 per cubemap).
    pub layers: u32,
    /// Row pitch of level 0 in bytes.
    pub pitch: u64,
    /// `CUarray_format`.
    pub format: u32,
    /// Channels: 1, 2 or 4.
    pub channels: u32,
    /// Bytes per texel.
    pub elem_bytes: u32,
    /// Dimensions of one layer: 1, 2 or 3.
    pub dims: u32,
    /// Layered (`CUDA_ARRAY3D_LAYERED`).
    pub layered: bool,
    /// Cubemap (`CUDA_ARRAY3D_CUBEMAP`).
    pub cubemap: bool,
    /// `CUaddress_mode` per dimension.
    pub address_mode: [u32; 3],
    /// `CUfilter_mode`.
    pub filter_mode: u32,
    /// `CUfilter_mode` between mipmap levels.
    pub mipmap_filter_mode: u32,
    /// `CU_TRSF_READ_AS_INTEGER`.
    pub read_as_integer: bool,
    /// `CU_TRSF_NORMALIZED_COORDINATES`.
    pub normalized_coords: bool,
    /// `CU_TRSF_SRGB`.
    pub srgb: bool,
    /// `CUresourcetype`: 0 array, 1 mipmapped array, 2 linear, 3 pitch 2D.
    pub resource_type: u32,
    /// Border colour.
    pub border_color: [f32; 4],
    /// Mipmap level bias.
    pub lod_bias: f32,
    /// Minimum mipmap level clamp.
    pub min_lod: f32,
    /// Maximum mipmap level clamp.
    pub max_lod: f32,
    /// Maximum anisotropy.
    pub max_anisotropy: u32,
    /// Mipmap levels (1 for plain arrays and linear memory).
    pub levels: u32,
    /// A surface object rather than a texture object.
    pub surface: bool,
}

impl TextureDesc {
    /// The 128-byte record (see [`texture`]).
    pub fn encode(&self) -> [u8; texture::BYTES] {
        let mut m = [0u8; texture::BYTES];
        let mut put = |off: usize, bytes: &[u8]| m[off..off + bytes.len()].copy_from_slice(bytes);
        put(texture::ADDRESS, &self.address.to_le_bytes());
        for (d, n) in self.extent.iter().enumerate() {
            put(texture::EXTENT + 4 * d, &(*n).max(1).to_le_bytes());
        }
        put(texture::LAYERS, &self.layers.max(1).to_le_bytes());
        put(texture::PITCH, &self.pitch.to_le_bytes());
        let format = (self.format & 0xFF)
            | (self.channels & 0xFF) << 8
            | (self.elem_bytes & 0xFF) << 16
            | (self.dims & 0xF) << 24
            | (self.layered as u32) << 28
            | (self.cubemap as u32) << 29;
        put(texture::FORMAT, &format.to_le_bytes());
        let sampler = (self.address_mode[0] & 3)
            | (self.address_mode[1] & 3) << 2
            | (self.address_mode[2] & 3) << 4
            | (self.filter_mode & 1) << 8
            | (self.mipmap_filter_mode & 1) << 9
            | (self.read_as_integer as u32) << 16
            | (self.normalized_coords as u32) << 17
            | (self.srgb as u32) << 18
            | (self.resource_type & 3) << 24;
        put(texture::SAMPLER, &sampler.to_le_bytes());
        for (i, c) in self.border_color.iter().enumerate() {
            put(texture::BORDER + 4 * i, &c.to_le_bytes());
        }
        put(texture::LOD_BIAS, &self.lod_bias.to_le_bytes());
        put(texture::MIN_LOD, &self.min_lod.to_le_bytes());
        put(texture::MAX_LOD, &self.max_lod.to_le_bytes());
        put(texture::ANISOTROPY, &self.max_anisotropy.to_le_bytes());
        put(texture::LEVELS, &self.levels.max(1).to_le_bytes());
        let magic = if self.surface { SURFACE_MAGIC } else { TEXTURE_MAGIC };
        put(texture::MAGIC, &magic.to_le_bytes());
        m
    }
}
