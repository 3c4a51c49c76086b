//! `cuGetExportTable`: the private tables NVIDIA's CUDA runtime asks the
//! driver for.
//!
//! The CUDA runtime (`cudart`, which `nvcc` links statically into every
//! program) does not only call the documented driver API: at its first call
//! it asks `cuGetExportTable(&table, &id)` for tables of function pointers
//! named by 16-byte ids that no header declares, and calls through them to
//! register the program's fat binary, get the primary context, keep
//! per-context state and check that the driver is NVIDIA's. Without them
//! every runtime call fails with `cudaErrorNotSupported`.
//!
//! No NVIDIA document describes these tables. The ids, the number of slots,
//! each slot's signature and what it must do are facts recorded by projects
//! that reimplemented the driver by observing NVIDIA's: ZLUDA
//! (`vosen/ZLUDA`, `dark_api/src/lib.rs`, "dark API"), and two later shims
//! that run cudart 13.x (a fake-GPU test driver and smolvm's guest
//! `libcuda.so.1`), which added the slots cudart 13 calls. Their code is not
//! used here; where they disagree, the choice made is noted at the slot.
//!
//! # Layout
//!
//! A table is an array of pointer-sized slots. In all but the context-local
//! storage table, slot 0 is the table's size in bytes (slots × 8), the
//! others are functions with the C calling convention. The tables are
//! `static`s: cudart keeps the pointers, and the integrity check hashes the
//! tables' addresses.
//!
//! Every slot runs under [`guard`] with a name such as
//! `CUDART_INTERFACE[2] get_primary_context`, so `PTXVK_TRACE=2` names
//! each call and `PTXVK_TRACE=1` each failing one. A slot whose meaning is
//! unknown is a function that takes nothing (the C convention lets a callee
//! ignore its caller's arguments) and returns `CUDA_ERROR_NOT_SUPPORTED`,
//! reported as `CUDART_INTERFACE[3]: ... slot of unknown meaning` under
//! `PTXVK_TRACE=1`: a caller that checks the result fails with a clear
//! error instead of reading an output that was never written.
//!
//! # What cudart 13.5 does with them
//!
//! Observed with `PTXVK_TRACE=2` on programs built by nvcc 13.5: before
//! `cuInit` it probes [`SKIP_INIT_ID`]; then it asks, in this order, for
//! CUDART_INTERFACE, TOOLS_RUNTIME_CALLBACK_HOOKS, TOOLS_TLS, the cudart 13
//! table, CONTEXT_LOCAL_STORAGE, CONTEXT_CHECKS and INTEGRITY_CHECK; it calls
//! CUDART_INTERFACE slot 2 (primary context), both tools buffers, the
//! integrity check three times (versions 13050-13052), context-local
//! storage around every runtime call and CONTEXT_CHECKS slot 2 when it
//! first uses the primary context, and at exit CONTEXT_LOCAL_STORAGE slot 1 (delete). It registers
//! the fat binary with the public `cuLibraryLoadData` and `cuLibraryGetKernel`,
//! not through CUDART_INTERFACE slots 1, 6 and 8 (older runtimes use those).
//! No other slot was called by the programs of `tests/clients/cu`.
//!
//! An id this library does not know is `CUDA_ERROR_NOT_FOUND` with the id
//! in the trace (`{6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9}` form: the bytes in
//! order). cudart probes some ids it can do without (see [`SKIP_INIT_ID`]).

use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Mutex, MutexGuard};

use crate::context as ctx;
use crate::device as dev;
use crate::ffi::{read_in, write_out, CUdevice, Handle};
use crate::integrity::{integrity_hash, IntegrityInput};
use crate::module as modl;
use crate::result::{guard, CUresult, CuError, CuResult};

/// One table's slots, as cudart reads them.
#[repr(transparent)]
struct Slots<const N: usize>([*const c_void; N]);

// SAFETY: the slots are function addresses and sizes, never written after
// initialisation; sharing them between threads is sharing constants.
unsafe impl<const N: usize> Sync for Slots<N> {}

/// Slot 0 of a table of `n` slots: its size in bytes.
const fn size_slot(n: usize) -> *const c_void {
    (n * std::mem::size_of::<usize>()) as *const c_void
}

/// A table cudart may ask for.
struct Table {
    /// The name used in traces (ZLUDA's where it has one).
    name: &'static str,
    /// The id, bytes in the order cudart passes them.
    id: [u8; 16],
    /// The first slot.
    slots: *const c_void,
}

// SAFETY: `slots` points into one of the immutable statics below.
unsafe impl Sync for Table {}

/// Index of each table in [`TABLES`] (the unknown-slot functions name their
/// table by it).
const CUDART: usize = 0;
const TOOLS_TLS: usize = 1;
const TOOLS_HOOKS: usize = 2;
const CLS: usize = 3;
const CHECKS: usize = 4;
const INTEGRITY: usize = 5;
const CUDART13: usize = 6;
const MODULE_FUNCTIONS: usize = 7;

/// Every table this library provides.
static TABLES: [Table; 8] = [
    Table { name: "CUDART_INTERFACE", id: CUDART_INTERFACE_ID, slots: CUDART_INTERFACE.0.as_ptr().cast() },
    Table { name: "TOOLS_TLS", id: TOOLS_TLS_ID, slots: TOOLS_TLS_TABLE.0.as_ptr().cast() },
    Table {
        name: "TOOLS_RUNTIME_CALLBACK_HOOKS",
        id: TOOLS_RUNTIME_CALLBACK_HOOKS_ID,
        slots: TOOLS_RUNTIME_CALLBACK_HOOKS.0.as_ptr().cast(),
    },
    Table {
        name: "CONTEXT_LOCAL_STORAGE_INTERFACE_V0301",
        id: CONTEXT_LOCAL_STORAGE_ID,
        slots: CONTEXT_LOCAL_STORAGE.0.as_ptr().cast(),
    },
    Table { name: "CONTEXT_CHECKS", id: CONTEXT_CHECKS_ID, slots: CONTEXT_CHECKS.0.as_ptr().cast() },
    Table { name: "INTEGRITY_CHECK", id: INTEGRITY_CHECK_ID, slots: INTEGRITY_CHECK_TABLE.0.as_ptr().cast() },
    Table { name: "CUDART13_INTERFACE", id: CUDART13_ID, slots: CUDART13_TABLE.0.as_ptr().cast() },
    Table { name: "MODULE_FUNCTIONS", id: MODULE_FUNCTIONS_ID, slots: MODULE_FUNCTIONS_TABLE.0.as_ptr().cast() },
];

/// `{F8CFF951-2146-8B4E-B9E2-FB469E7C0DD9}`: cudart asks whether the driver
/// lets it skip its usual start-up; it must be told no with
/// `CUDA_ERROR_NOT_FOUND` (smolvm's shim records that any other error makes
/// cudart fail). Not provided.
pub const SKIP_INIT_ID: [u8; 16] =
    [0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9];

/// A slot nobody has documented: takes nothing, returns
/// `CUDA_ERROR_NOT_SUPPORTED` and says which table and slot was called.
extern "C" fn unknown_slot<const TABLE: usize, const SLOT: usize>() -> CUresult {
    let name = format!("{}[{SLOT}]", TABLES[TABLE].name);
    guard(&name, || {
        Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("slot of unknown meaning called; ptxvk does not implement it"))
    })
}

/// The table `id` names, if this library provides it.
pub fn lookup(id: &[u8; 16]) -> Option<(&'static str, *const c_void)> {
    TABLES.iter().find(|t| &t.id == id).map(|t| (t.name, t.slots))
}

/// `id` as `{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}`, its bytes in order.
pub fn format_id(id: &[u8; 16]) -> String {
    let hex = |r: std::ops::Range<usize>| id[r].iter().map(|b| format!("{b:02X}")).collect::<String>();
    format!("{{{}-{}-{}-{}-{}}}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16))
}

/// `cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)`.
///
/// `CUDA_ERROR_INVALID_VALUE` if either pointer is NULL;
/// `CUDA_ERROR_NOT_FOUND` (and `*ppExportTable` NULL) for an id this library
/// does not provide. `PTXVK_TRACE=2` names the table given.
///
/// # Safety
/// `table` is NULL or writable; `id` is NULL or points to 16 readable bytes.
pub unsafe fn get_export_table(table: *mut *const c_void, id: *const c_void) -> CuResult<()> {
    if table.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("ppExportTable is NULL"));
    }
    // SAFETY: NULL is refused by read_in; 16 readable bytes per the caller.
    let id = unsafe { read_in(id.cast::<[u8; 16]>()) }.map_err(|e| e.because("pExportTableId is NULL"))?;
    match lookup(&id) {
        Some((name, slots)) => {
            if crate::result::trace_level() >= 2 {
                eprintln!("ptxvk: cuGetExportTable {} = {name}", format_id(&id));
            }
            // SAFETY: checked non-null; writable per the caller.
            unsafe { write_out(table, slots) }
        }
        None => {
            // SAFETY: checked non-null; writable per the caller.
            unsafe { write_out(table, std::ptr::null()) }?;
            let what = if id == SKIP_INIT_ID { " (cudart's start-up bypass; not provided)" } else { "" };
            Err(CuError::CUDA_ERROR_NOT_FOUND.because(format!("cuGetExportTable: no table {}{what}", format_id(&id))))
        }
    }
}

// ---------------------------------------------------------------------------
// CUDART_INTERFACE {6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9}, 13 slots.
//
// ZLUDA lists 10 slots (1, 2, 6, 7, 8 known); the cudart 13 shims have 13
// (slot 12 added). Slot 9 was a kernel launch in an old ZLUDA and is gone
// from its newer lists: left unknown.

const CUDART_INTERFACE_ID: [u8; 16] =
    [0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9];

static CUDART_INTERFACE: Slots<13> = Slots([
    size_slot(13),
    get_module_from_cubin as *const c_void,
    get_primary_context as *const c_void,
    unknown_slot::<CUDART, 3> as *const c_void,
    unknown_slot::<CUDART, 4> as *const c_void,
    unknown_slot::<CUDART, 5> as *const c_void,
    get_module_from_cubin_ext1 as *const c_void,
    cudart_interface_fn7 as *const c_void,
    get_module_from_cubin_ext2 as *const c_void,
    unknown_slot::<CUDART, 9> as *const c_void,
    unknown_slot::<CUDART, 10> as *const c_void,
    unknown_slot::<CUDART, 11> as *const c_void,
    load_compilers as *const c_void,
]);

/// Loads a fat binary (a `__fatBinC_Wrapper_t` or the container itself)
/// into the current context, as `cuModuleLoadData`.
///
/// # Safety
/// `module` is NULL or writable; `image` is NULL or a complete image.
unsafe fn load_image(module: *mut Handle, image: *const c_void) -> CuResult<()> {
    if image.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the fat binary is NULL"));
    }
    // SAFETY: forwarded caller contract.
    unsafe { modl::module_load_data(module, image) }
}

/// Slot 1: `CUresult (CUmodule *module, const __fatBinC_Wrapper_t *fatbin)`:
/// loads the program's fat binary into the current context.
extern "C" fn get_module_from_cubin(module: *mut Handle, wrapper: *const c_void) -> CUresult {
    // SAFETY: cudart passes a writable module pointer and its wrapper.
    guard("CUDART_INTERFACE[1] get_module_from_cubin", || unsafe { load_image(module, wrapper) })
}

/// Slot 2: `CUresult (CUcontext *pctx, CUdevice dev)`: the device's primary
/// context, retained (as `cuDevicePrimaryCtxRetain`; the cudart 13 shims do
/// the same).
extern "C" fn get_primary_context(pctx: *mut Handle, dev: CUdevice) -> CUresult {
    // SAFETY: cudart passes a writable context pointer.
    guard("CUDART_INTERFACE[2] get_primary_context", || unsafe { ctx::primary_retain(pctx, dev) })
}

/// Slot 6: `CUresult (CUmodule *module, const __fatBinC_Wrapper_t *fatbin,
/// void *arg3, void *arg4, unsigned arg5)`: slot 1 with three more
/// arguments (arg5 looks like a count of things in arg3 and arg4, says
/// ZLUDA). They are refused unless NULL/0 (`CUDA_ERROR_NOT_SUPPORTED`).
extern "C" fn get_module_from_cubin_ext1(
    module: *mut Handle,
    wrapper: *const c_void,
    arg3: *mut c_void,
    arg4: *mut c_void,
    arg5: c_uint,
) -> CUresult {
    guard("CUDART_INTERFACE[6] get_module_from_cubin_ext1", || {
        check_ext_args(arg3, arg4, arg5)?;
        // SAFETY: cudart passes a writable module pointer and its wrapper.
        unsafe { load_image(module, wrapper) }
    })
}

/// Slot 8: `CUresult (const void *fatbin, CUmodule *module, void *arg3,
/// void *arg4, unsigned arg5)`: slot 6 with the container (not its wrapper)
/// first.
extern "C" fn get_module_from_cubin_ext2(
    fatbin: *const c_void,
    module: *mut Handle,
    arg3: *mut c_void,
    arg4: *mut c_void,
    arg5: c_uint,
) -> CUresult {
    guard("CUDART_INTERFACE[8] get_module_from_cubin_ext2", || {
        check_ext_args(arg3, arg4, arg5)?;
        // SAFETY: cudart passes its fat binary and a writable module pointer.
        unsafe { load_image(module, fatbin) }
    })
}

/// The extra arguments of slots 6 and 8, whose meaning is not known.
fn check_ext_args(arg3: *mut c_void, arg4: *mut c_void, arg5: c_uint) -> CuResult<()> {
    if arg3.is_null() && arg4.is_null() && arg5 == 0 {
        return Ok(());
    }
    Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because(format!(
        "extra arguments of unknown meaning ({arg3:p}, {arg4:p}, {arg5}); only NULL, NULL, 0 is supported"
    )))
}

/// Slot 7: `(size_t)`, meaning unknown; every shim does nothing and succeeds.
extern "C" fn cudart_interface_fn7(arg: usize) -> CUresult {
    guard("CUDART_INTERFACE[7]", || {
        let _ = arg;
        Ok(())
    })
}

/// Slot 12: `CUresult (void)`: asks the driver to load its compilers (the
/// JIT); ours is built in.
extern "C" fn load_compilers() -> CUresult {
    guard("CUDART_INTERFACE[12] load_compilers", || Ok(()))
}

// ---------------------------------------------------------------------------
// TOOLS_TLS {42D85A81-23F6-CB47-8298-F6E78A3AECDC}, 4 slots: thread-local
// state. Slot 2 answers the calling thread's current context: cuBLASLt 13
// calls it for every candidate algorithm of `cublasLtMatmulAlgoGetIds` and
// of its heuristics, as `CUresult (CUcontext *)`, then asks CUDART13 slot 4
// for that context's id (the key of its per-context state), and drops the
// algorithm where either call fails (found in cuBLASLt 13.10's machine
// code; a public test exercises the same pair against NVIDIA's driver,
// comparing them with `cuCtxGetCurrent` and `cuCtxGetId`). While this slot
// was a `void` callback, the register it left behind read as a failure and
// cuBLASLt found no algorithm at all (`CUBLAS_STATUS_NOT_SUPPORTED` from
// every GEMM).

const TOOLS_TLS_ID: [u8; 16] =
    [0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc];

static TOOLS_TLS_TABLE: Slots<4> = Slots([
    size_slot(4),
    unknown_slot::<TOOLS_TLS, 1> as *const c_void,
    tools_tls_current_context as *const c_void,
    unknown_slot::<TOOLS_TLS, 3> as *const c_void,
]);

/// Slot 2: `CUresult (CUcontext *pctx)`: the calling thread's current
/// context, as `cuCtxGetCurrent`.
extern "C" fn tools_tls_current_context(pctx: *mut Handle) -> CUresult {
    // SAFETY: `pctx` is NULL (refused) or writable, as for `cuCtxGetCurrent`.
    guard("TOOLS_TLS[2] current_context", || unsafe { ctx::ctx_get_current(pctx) })
}

// ---------------------------------------------------------------------------
// TOOLS_RUNTIME_CALLBACK_HOOKS {A094798C-2E74-2E74-93F2-0800200C0A66},
// 7 slots. Slots 2 and 6 hand out buffers for tools (ZLUDA); slots 1 and 4
// are callbacks cudart brackets its driver look-ups with (smolvm: cudart 12.8
// calls them on ordinary paths), which do nothing without a tool.

const TOOLS_RUNTIME_CALLBACK_HOOKS_ID: [u8; 16] =
    [0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66];

static TOOLS_RUNTIME_CALLBACK_HOOKS: Slots<7> = Slots([
    size_slot(7),
    tools_hooks_event as *const c_void,
    tools_buffer1 as *const c_void,
    unknown_slot::<TOOLS_HOOKS, 3> as *const c_void,
    tools_hooks_span as *const c_void,
    unknown_slot::<TOOLS_HOOKS, 5> as *const c_void,
    tools_buffer2 as *const c_void,
]);

/// A zeroed buffer cudart may write into.
struct ToolsBuffer<const WORDS: usize>(std::cell::UnsafeCell<[u32; WORDS]>);

// SAFETY: the buffer is only handed out as a raw pointer; whatever cudart
// writes there it synchronises itself, and this library never reads it.
unsafe impl<const WORDS: usize> Sync for ToolsBuffer<WORDS> {}

/// The buffers of slots 2 and 6: 1024 and 14 32-bit words (ZLUDA). The size
/// reported is the word count, which the shims disagree about reading as
/// bytes or words; either reading stays inside the buffer.
static TOOLS_BUFFER1: ToolsBuffer<1024> = ToolsBuffer(std::cell::UnsafeCell::new([0; 1024]));
static TOOLS_BUFFER2: ToolsBuffer<14> = ToolsBuffer(std::cell::UnsafeCell::new([0; 14]));

/// Writes a tools buffer's address and size through cudart's pointers.
///
/// # Safety
/// `ptr` and `size` are NULL or writable.
unsafe fn hand_out<const W: usize>(
    buffer: &'static ToolsBuffer<W>,
    ptr: *mut *mut c_void,
    size: *mut usize,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe {
        write_out(ptr, buffer.0.get().cast::<c_void>())?;
        write_out(size, W)
    }
}

/// Slot 1: `void (unsigned event, void *data)`: a tools callback; no tool.
extern "C" fn tools_hooks_event(event: c_uint, data: *mut c_void) {
    let _ = guard("TOOLS_RUNTIME_CALLBACK_HOOKS[1] callback", || {
        let _ = (event, data);
        Ok(())
    });
}

/// Slot 2: `void (void **ptr, size_t *size)`: the first tools buffer.
extern "C" fn tools_buffer1(ptr: *mut *mut c_void, size: *mut usize) {
    // SAFETY: cudart passes writable pointers.
    let _ = guard("TOOLS_RUNTIME_CALLBACK_HOOKS[2] buffer", || unsafe { hand_out(&TOOLS_BUFFER1, ptr, size) });
}

/// Slot 4: `void (void *a, void *b)`: a tools callback; no tool.
extern "C" fn tools_hooks_span(a: *mut c_void, b: *mut c_void) {
    let _ = guard("TOOLS_RUNTIME_CALLBACK_HOOKS[4] callback", || {
        let _ = (a, b);
        Ok(())
    });
}

/// Slot 6: `void (void **ptr, size_t *size)`: the second tools buffer.
extern "C" fn tools_buffer2(ptr: *mut *mut c_void, size: *mut usize) {
    // SAFETY: cudart passes writable pointers.
    let _ = guard("TOOLS_RUNTIME_CALLBACK_HOOKS[6] buffer", || unsafe { hand_out(&TOOLS_BUFFER2, ptr, size) });
}

// ---------------------------------------------------------------------------
// CONTEXT_LOCAL_STORAGE_INTERFACE_V0301 {C693336E-1121-DF11-A8C3-68F355D89593},
// 4 slots and no size slot: cudart keeps its per-context state (its modules,
// its functions) under a key of its own in each context. An entry's
// destructor is called when the context is destroyed or reset (ZLUDA: "has to
// be called on cuDevicePrimaryCtxReset"), after which the entry is gone.

const CONTEXT_LOCAL_STORAGE_ID: [u8; 16] =
    [0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93];

static CONTEXT_LOCAL_STORAGE: Slots<4> = Slots([
    cls_put as *const c_void,
    cls_delete as *const c_void,
    cls_get as *const c_void,
    unknown_slot::<CLS, 3> as *const c_void,
]);

/// The destructor cudart registers with an entry: `(context, key, value)`.
type ClsDestructor = extern "C" fn(Handle, *mut c_void, *mut c_void);

/// One stored value.
#[derive(Clone, Copy)]
struct ClsEntry {
    value: usize,
    dtor: Option<ClsDestructor>,
}

/// Context-local storage: (context handle, key) → entry.
static CLS_STORE: Mutex<BTreeMap<(usize, usize), ClsEntry>> = Mutex::new(BTreeMap::new());

fn cls_store() -> MutexGuard<'static, BTreeMap<(usize, usize), ClsEntry>> {
    // Each operation is one insert or remove: a poisoned map is consistent.
    CLS_STORE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The context an entry belongs to: `ctx`, or the current one when NULL.
/// `CUDA_ERROR_INVALID_CONTEXT` for a stale handle or none current.
fn cls_context(ctx: Handle) -> CuResult<usize> {
    ctx::handle_or_current(ctx).map(|h| h as usize)
}

/// Slot 0: `CUresult (CUcontext ctx, void *key, void *value,
/// void (*dtor)(CUcontext, void *key, void *value))`: stores `value` under
/// `key` in `ctx` (the current context when NULL), replacing an earlier one.
extern "C" fn cls_put(ctx: Handle, key: *mut c_void, value: *mut c_void, dtor: Option<ClsDestructor>) -> CUresult {
    guard("CONTEXT_LOCAL_STORAGE[0] put", || {
        let ctx = cls_context(ctx)?;
        cls_store().insert((ctx, key as usize), ClsEntry { value: value as usize, dtor });
        Ok(())
    })
}

/// Slot 1: `CUresult (CUcontext ctx, void *key)`: removes the entry without
/// calling its destructor. (ZLUDA names the arguments `key, value`; the two
/// cudart 13 shims take `context, key`, which is what is done here.)
extern "C" fn cls_delete(ctx: Handle, key: *mut c_void) -> CUresult {
    guard("CONTEXT_LOCAL_STORAGE[1] delete", || {
        let ctx = cls_context(ctx)?;
        cls_store().remove(&(ctx, key as usize));
        Ok(())
    })
}

/// Slot 2: `CUresult (void **value, CUcontext ctx, void *key)`: the value
/// stored under `key` in `ctx` (the current context when NULL);
/// `CUDA_ERROR_INVALID_HANDLE` (and `*value` NULL) when there is none, as
/// ZLUDA answers.
extern "C" fn cls_get(value: *mut *mut c_void, ctx: Handle, key: *mut c_void) -> CUresult {
    guard("CONTEXT_LOCAL_STORAGE[2] get", || {
        let ctx = cls_context(ctx)?;
        let found = cls_store().get(&(ctx, key as usize)).map(|e| e.value);
        // SAFETY: cudart passes a writable value pointer (NULL is refused).
        unsafe { write_out(value, found.unwrap_or(0) as *mut c_void) }?;
        match found {
            Some(_) => Ok(()),
            None => Err(CuError::CUDA_ERROR_INVALID_HANDLE.because("no value under this key in this context")),
        }
    })
}

/// Called when the context `handle` is destroyed or its resources reset,
/// before they are freed: removes its entries and calls their destructors
/// (outside any lock: they call back into the driver).
pub fn context_released(handle: Handle) {
    let ctx = handle as usize;
    let entries: Vec<((usize, usize), ClsEntry)> = {
        let mut store = cls_store();
        let keys: Vec<(usize, usize)> = store.range((ctx, 0)..=(ctx, usize::MAX)).map(|(k, _)| *k).collect();
        keys.into_iter().filter_map(|k| store.remove(&k).map(|e| (k, e))).collect()
    };
    for ((_, key), entry) in entries {
        if let Some(dtor) = entry.dtor {
            dtor(handle, key as *mut c_void, entry.value as *mut c_void);
        }
    }
}

// ---------------------------------------------------------------------------
// CONTEXT_CHECKS {263E8860-7CD2-6143-92F6-BBD5006DFA7E}, 4 slots (ZLUDA:
// "check for some bits that are never observably set").

const CONTEXT_CHECKS_ID: [u8; 16] =
    [0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e];

static CONTEXT_CHECKS: Slots<4> = Slots([
    size_slot(4),
    unknown_slot::<CHECKS, 1> as *const c_void,
    context_check as *const c_void,
    check_fn3 as *const c_void,
]);

/// Slot 2: `CUresult (CUcontext ctx, unsigned *wrapped, const void **inner)`:
/// whether `ctx` wraps another context (ZLUDA's pseudocode of NVIDIA's:
/// `*wrapped = 1` and the inner context only for a kind of context no public
/// call creates). Ours never do: `*wrapped = 0`.
extern "C" fn context_check(ctx: Handle, wrapped: *mut c_uint, inner: *mut *const c_void) -> CUresult {
    guard("CONTEXT_CHECKS[2] context_check", || {
        let _ = (ctx, inner);
        // SAFETY: cudart passes a writable flag pointer (NULL is refused).
        unsafe { write_out(wrapped, 0) }
    })
}

/// Slot 3: `unsigned (void)`: always 0 on NVIDIA's driver (ZLUDA).
extern "C" fn check_fn3() -> c_uint {
    0
}

// ---------------------------------------------------------------------------
// INTEGRITY_CHECK {D4082055-BDE6-704B-8D34-BA123C66E1F2}, 3 slots: cudart
// checks that the driver is NVIDIA's by asking for a keyed hash of values
// both sides know (ZLUDA's reconstruction; see [`crate::integrity`]). cudart
// 13.5 asks with versions 13050, 13051 and 13052 and compares: with one bit
// of the answer flipped, every runtime call fails with
// cudaErrorSoftwareValidityNotEstablished (103), so the programs of
// `tests/clients/cu` passing is the check that this hash is right.

const INTEGRITY_CHECK_ID: [u8; 16] =
    [0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2];

static INTEGRITY_CHECK_TABLE: Slots<3> =
    Slots([size_slot(3), integrity_check as *const c_void, unknown_slot::<INTEGRITY, 2> as *const c_void]);

extern "C" {
    /// glibc's `pthread_t pthread_self(void)` (`pthread_t` is `unsigned long`).
    fn pthread_self() -> std::ffi::c_ulong;
}

/// Slot 1: `CUresult (unsigned version, uint64_t unix_seconds, uint64_t
/// result[2])`: writes [`integrity_hash`] of this process, thread, tables and
/// devices.
extern "C" fn integrity_check(version: c_uint, unix_seconds: u64, result: *mut [u64; 2]) -> CUresult {
    guard("INTEGRITY_CHECK[1] integrity_check", || {
        let mut driver_version: c_int = 0;
        // SAFETY: a local.
        unsafe { dev::driver_get_version(&mut driver_version) }?;
        // SAFETY: takes nothing; returns the calling thread's id.
        let thread = unsafe { pthread_self() };
        let input = IntegrityInput {
            driver_version: driver_version as u32,
            version,
            process: std::process::id(),
            // ZLUDA and both shims hash the low 32 bits of pthread_self().
            thread: thread as u32,
            cudart_table: CUDART_INTERFACE.0.as_ptr() as u64,
            integrity_table: INTEGRITY_CHECK_TABLE.0.as_ptr() as u64,
            function: INTEGRITY_CHECK_TABLE.0[1] as u64,
            unix_seconds,
        };
        let devices = device_hash_info()?;
        // SAFETY: cudart passes a writable result pointer (NULL is refused).
        unsafe { write_out(result, integrity_hash(&input, &devices)) }
    })
}

/// Per device, the 28 bytes hashed: its UUID and PCI domain, bus and device
/// (`CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID`, `_BUS_ID`, `_DEVICE_ID`) as `i32`s.
fn device_hash_info() -> CuResult<Vec<[u8; 28]>> {
    let mut count: c_int = 0;
    // SAFETY: a local.
    unsafe { dev::device_get_count(&mut count) }?;
    (0..count)
        .map(|d| {
            let mut info = [0u8; 28];
            let mut uuid = [0u8; 16];
            // SAFETY: a local.
            unsafe { dev::device_get_uuid(&mut uuid, d) }?;
            info[..16].copy_from_slice(&uuid);
            for (i, attribute) in [50, 33, 34].into_iter().enumerate() {
                let mut v: c_int = 0;
                // SAFETY: a local.
                unsafe { dev::device_get_attribute(&mut v, attribute, d) }?;
                info[16 + 4 * i..20 + 4 * i].copy_from_slice(&v.to_le_bytes());
            }
            Ok(info)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// {21318C60-9714-3248-8CA6-41FF7324C8F2}, 95 slots: asked for by cudart
// 13.x, which fails every call with `cudaErrorSymbolNotFound` without it.
// Not in ZLUDA; the fake-GPU shim records that NVIDIA's driver 595 serves it
// with a size of 95 slots and that cudart only checks that it exists (no slot
// was called through device, memory, copy, stream, event, IPC and reset
// calls). Slot 4 is a context's id (cuBLASLt, see TOOLS_TLS), slots 51
// and 39 a stream's object and id (cuBLAS, cudart); every other slot is of
// unknown meaning.

const CUDART13_ID: [u8; 16] =
    [0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2];

/// A table of `1 + n` slots: its size, then each slot: `[function]`, or a
/// slot number of table `$table` whose meaning is unknown.
macro_rules! table_slots {
    ($table:ident; $($item:tt)*) => {
        Slots([size_slot(1 + [$(table_slots!(@unit $item)),*].len()), $(table_slots!(@slot $table $item)),*])
    };
    (@unit $item:tt) => { () };
    (@slot $table:ident [$known:ident]) => { $known as *const c_void };
    (@slot $table:ident $n:literal) => { unknown_slot::<$table, $n> as *const c_void };
}

/// CUDART13 slot 4: `CUresult (CUcontext ctx, unsigned long long *id)`: the
/// context's id, as `cuCtxGetId` (see TOOLS_TLS slot 2).
extern "C" fn cudart13_context_id(context: Handle, id: *mut u64) -> CUresult {
    // SAFETY: `id` is NULL (refused) or writable, as for `cuCtxGetId`.
    guard("CUDART13_INTERFACE[4] context_id", || unsafe { ctx::ctx_get_id(context, id) })
}

/// CUDART13 slot 51: `CUresult (CUcontext ctx, CUstream stream, void
/// **object, int per_thread)`: the driver's object for a stream handle,
/// the special handles included (NULL is the per-thread stream where
/// `per_thread` is set, as in cudart's `_ptsz` entry points); its only use
/// is slot 39. cudart 13 calls the pair around 112 stream-taking calls for
/// its tools records, and cuBLAS 13 in its per-stream workspace pool before
/// every GEMM (`CUBLAS_STATUS_INTERNAL_ERROR` where either fails). Here a
/// stream's object is its handle. An invalid handle is
/// `CUDA_ERROR_INVALID_HANDLE`.
extern "C" fn cudart13_stream_object(
    context: Handle,
    stream: Handle,
    object: *mut Handle,
    per_thread: c_int,
) -> CUresult {
    guard("CUDART13_INTERFACE[51] stream_object", || {
        let _ = context;
        if object.is_null() {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the stream object's out-pointer is NULL"));
        }
        let s =
            if stream.is_null() && per_thread != 0 { crate::stream::CU_STREAM_PER_THREAD as Handle } else { stream };
        let mut id = 0u64;
        // SAFETY: `id` is a local; the call checks the handle.
        unsafe { crate::stream::stream_get_id(s, &mut id) }?;
        // SAFETY: checked non-null; writable per the caller.
        unsafe { write_out(object, s) }
    })
}

/// CUDART13 slot 39: `CUresult (CUcontext ctx, void *object, unsigned long
/// long *id)`: the id of a stream object of slot 51, as `cuStreamGetId`.
extern "C" fn cudart13_stream_id(context: Handle, object: Handle, id: *mut u64) -> CUresult {
    let _ = context;
    // SAFETY: `id` is NULL (refused) or writable, as for `cuStreamGetId`.
    guard("CUDART13_INTERFACE[39] stream_id", || unsafe { crate::stream::stream_get_id(object, id) })
}

static CUDART13_TABLE: Slots<95> = table_slots!(CUDART13; 1 2 3 [cudart13_context_id] 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 [cudart13_stream_id] 40 41 42 43 44 45 46 47 48 49 50 [cudart13_stream_object] 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94);

// ---------------------------------------------------------------------------
// {6E163FBE-B958-444D-835C-E182AFF1991E}, 8 slots: asked for by cuFFT 12,
// whose own copy of the CUDA runtime fails its start-up without it
// (`CUFFT_INTERNAL_ERROR` at the first plan). Found in cuFFT 12.5's machine
// code by a helper: cuFFT reads slot 0 (at least 0x38 bytes) and slot 7
// only. After `cuModuleLoadData` of a kernel's fat binary it calls slot 7
// with the current context, the module, a callback and its argument, and
// the callback keeps the function it is given; cuFFT then launches that
// function. A result other than 1 fails the plan.

const MODULE_FUNCTIONS_ID: [u8; 16] =
    [0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e];

static MODULE_FUNCTIONS_TABLE: Slots<8> = table_slots!(MODULE_FUNCTIONS; 1 2 3 4 5 6 [module_functions_each]);

/// What slot 7 calls for each function: `(argument, function, 0)`.
type FunctionCallback = Option<unsafe extern "C" fn(*mut c_void, Handle, *mut c_void)>;

/// Slot 7: `int (CUcontext ctx, CUmodule module, void (*callback)(void *arg,
/// CUfunction f, void *), void *arg)`: calls `callback` for each function of
/// the module, in the order of `cuModuleEnumerateFunctions`; 1 when it
/// called it at least once, 0 otherwise (a bad module or callback, or a
/// module without functions, such as a fat binary whose kernel is machine
/// code only). The third argument of the callback is of unknown meaning
/// (cuFFT ignores it): NULL.
extern "C" fn module_functions_each(
    context: Handle,
    module: Handle,
    callback: FunctionCallback,
    arg: *mut c_void,
) -> c_int {
    let _ = context;
    let mut n: c_uint = 0;
    let result = guard("MODULE_FUNCTIONS[7] each_function", || {
        let Some(callback) = callback else {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the callback is NULL"));
        };
        // SAFETY: `n` is a local.
        unsafe { modl::module_get_function_count(&mut n, module) }?;
        let mut functions: Vec<Handle> = vec![std::ptr::null_mut(); n as usize];
        // SAFETY: `functions` holds `n` handles.
        unsafe { modl::module_enumerate_functions(functions.as_mut_ptr(), n, module) }?;
        for f in functions {
            // SAFETY: the caller's callback, with its argument, as the slot's
            // contract says.
            unsafe { callback(arg, f, std::ptr::null_mut()) };
        }
        Ok(())
    });
    c_int::from(result == 0 && n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_format_and_resolve() {
        assert_eq!(format_id(&CUDART_INTERFACE_ID), "{6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9}");
        assert_eq!(lookup(&CUDART_INTERFACE_ID).map(|t| t.0), Some("CUDART_INTERFACE"));
        assert!(lookup(&SKIP_INIT_ID).is_none());
        // Slot 0 of the sized tables is their size in bytes.
        assert_eq!(CUDART_INTERFACE.0[0] as usize, 13 * 8);
        assert_eq!(TOOLS_RUNTIME_CALLBACK_HOOKS.0[0] as usize, 7 * 8);
        assert_eq!(INTEGRITY_CHECK_TABLE.0[0] as usize, 3 * 8);
    }
}
