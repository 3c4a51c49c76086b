//! `cuGetExportTable`: the private tables NVIDIA's CUDA runtime calls
//! through (`src/export_table.rs`), driven through the C ABI as cudart does;
//! and the stream-ordered allocation cudart's `cudaMallocAsync` uses.
mod common;

use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use common::*;

const CUDART_INTERFACE: [u8; 16] =
    [0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9];
const TOOLS_TLS: [u8; 16] =
    [0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc];
const TOOLS_HOOKS: [u8; 16] =
    [0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66];
const CLS: [u8; 16] = [0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93];
const CHECKS: [u8; 16] =
    [0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e];
const INTEGRITY: [u8; 16] =
    [0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2];
const CUDART13: [u8; 16] =
    [0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2];
const MODULE_FUNCTIONS: [u8; 16] =
    [0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e];
const SKIP_INIT: [u8; 16] =
    [0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9];

/// Tests that use the primary context or context-local storage run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn table(api: &Api, id: &[u8; 16]) -> *const *const c_void {
    let mut t: *const c_void = 0x5a5a as *const c_void;
    check(api, cu!(api.cuGetExportTable(&mut t, id)), "cuGetExportTable");
    assert!(!t.is_null());
    t.cast()
}

/// Slot `i` of a table.
fn slot(t: *const *const c_void, i: usize) -> *const c_void {
    // SAFETY: the tests only read slots below the table's size.
    unsafe { *t.add(i) }
}

/// Slot `i` as a function of type `F` (a function-pointer type).
fn func<F: Copy>(t: *const *const c_void, i: usize) -> F {
    let p = slot(t, i);
    assert!(!p.is_null(), "slot {i} is NULL");
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*const c_void>());
    // SAFETY: `F` is the function-pointer type of that slot's signature.
    unsafe { std::mem::transmute_copy::<*const c_void, F>(&p) }
}

#[test]
fn ids_resolve_to_sized_tables_and_unknown_ids_are_not_found() {
    let api = init();
    for (id, slots) in [
        (CUDART_INTERFACE, 13),
        (TOOLS_TLS, 4),
        (TOOLS_HOOKS, 7),
        (CHECKS, 4),
        (INTEGRITY, 3),
        (CUDART13, 95),
        (MODULE_FUNCTIONS, 8),
    ] {
        let t = table(api, &id);
        assert_eq!(slot(t, 0) as usize, slots * 8, "slot 0 is the size in bytes");
        for i in 1..slots {
            assert!(!slot(t, i).is_null(), "every slot is callable");
        }
    }
    // Context-local storage has no size slot: slot 0 is a function.
    let t = table(api, &CLS);
    assert!(slot(t, 0) as usize > 4096);
    // The same table every time.
    assert_eq!(table(api, &CUDART_INTERFACE), table(api, &CUDART_INTERFACE));

    let mut t: *const c_void = 0x5a5a as *const c_void;
    assert_eq!(cu!(api.cuGetExportTable(&mut t, &SKIP_INIT)), code::NOT_FOUND);
    assert!(t.is_null(), "an unknown id gives NULL");
    let mut random = [0u8; 16];
    let mut rng = Lcg(77);
    for b in random.iter_mut() {
        *b = rng.next_u32() as u8;
    }
    t = 0x5a5a as *const c_void;
    assert_eq!(cu!(api.cuGetExportTable(&mut t, &random)), code::NOT_FOUND);
    assert!(t.is_null());
    assert_eq!(cu!(api.cuGetExportTable(std::ptr::null_mut(), &CUDART_INTERFACE)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuGetExportTable(&mut t, std::ptr::null())), code::INVALID_VALUE);
}

type GetPrimary = unsafe extern "C" fn(*mut Handle, c_int) -> u32;
type LoadWrapped = unsafe extern "C" fn(*mut Handle, *const c_void) -> u32;
type LoadWrappedExt = unsafe extern "C" fn(*mut Handle, *const c_void, *mut c_void, *mut c_void, c_uint) -> u32;
type LoadContainerExt = unsafe extern "C" fn(*const c_void, *mut Handle, *mut c_void, *mut c_void, c_uint) -> u32;
type NoArgs = unsafe extern "C" fn() -> u32;

#[repr(C)]
struct FatbinWrapper {
    magic: u32,
    version: u32,
    data: *const u8,
    filename: *const c_void,
}

/// Runs `vadd_f32` of `module` on random inputs and compares on the host.
fn check_vadd(api: &Api, module: Handle) {
    let mut f: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetFunction(&mut f, module, c"vadd_f32".as_ptr())), "cuModuleGetFunction");
    let n = 1000usize;
    let mut rng = Lcg(5);
    let a: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let (mut da, mut db, mut dc) = (0u64, 0u64, 0u64);
    for d in [&mut da, &mut db, &mut dc] {
        check(api, cu!(api.cuMemAlloc_v2(d, n * 4)), "cuMemAlloc");
    }
    check(api, cu!(api.cuMemcpyHtoD_v2(da, a.as_ptr().cast(), n * 4)), "HtoD");
    check(api, cu!(api.cuMemcpyHtoD_v2(db, b.as_ptr().cast(), n * 4)), "HtoD");
    check(api, cu!(api.cuMemsetD32_v2(dc, 0x7fc0_0001, n)), "poison");
    let mut count = n as u32;
    let mut params: [*mut c_void; 4] = [
        (&mut da as *mut u64).cast(),
        (&mut db as *mut u64).cast(),
        (&mut dc as *mut u64).cast(),
        (&mut count as *mut u32).cast(),
    ];
    let rc = cu!(api.cuLaunchKernel(
        f,
        8,
        1,
        1,
        128,
        1,
        1,
        0,
        std::ptr::null_mut(),
        params.as_mut_ptr(),
        std::ptr::null_mut()
    ));
    check(api, rc, "cuLaunchKernel");
    let mut c = vec![0f32; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(c.as_mut_ptr().cast(), dc, n * 4)), "DtoH");
    for i in 0..n {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }
    for d in [da, db, dc] {
        check(api, cu!(api.cuMemFree_v2(d)), "cuMemFree");
    }
}

#[test]
fn cudart_interface_gives_the_primary_context_and_loads_fat_binaries() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let api = init();
    let t = table(api, &CUDART_INTERFACE);
    let get_primary: GetPrimary = func(t, 2);
    let mut via_table: Handle = std::ptr::null_mut();
    // SAFETY: slot 2's signature; a writable handle.
    check(api, unsafe { get_primary(&mut via_table, 0) }, "get_primary_context");
    let mut retained: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuDevicePrimaryCtxRetain(&mut retained, 0)), "cuDevicePrimaryCtxRetain");
    assert_eq!(via_table, retained, "slot 2 is the primary context");
    // SAFETY: as above; a bad device and a NULL output are refused.
    assert_eq!(unsafe { get_primary(&mut via_table, 99) }, code::INVALID_DEVICE);
    assert_eq!(unsafe { get_primary(std::ptr::null_mut(), 0) }, code::INVALID_VALUE);
    check(api, cu!(api.cuCtxSetCurrent(retained)), "cuCtxSetCurrent");

    let image = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/vadd_f32.zstd.fatbin")).unwrap();
    let wrapper = FatbinWrapper { magic: 0x466243B1, version: 1, data: image.as_ptr(), filename: std::ptr::null() };
    let wrapper_ptr = (&wrapper as *const FatbinWrapper).cast::<c_void>();
    let load: LoadWrapped = func(t, 1);
    let load_ext1: LoadWrappedExt = func(t, 6);
    let load_ext2: LoadContainerExt = func(t, 8);
    let null = std::ptr::null_mut();
    for way in 0..3 {
        let mut module: Handle = std::ptr::null_mut();
        // SAFETY: the slots' signatures; a live wrapper and container.
        let rc = unsafe {
            match way {
                0 => load(&mut module, wrapper_ptr),
                1 => load_ext1(&mut module, wrapper_ptr, null, null, 0),
                _ => load_ext2(image.as_ptr().cast(), &mut module, null, null, 0),
            }
        };
        check(api, rc, "get_module_from_cubin");
        check_vadd(api, module);
        check(api, cu!(api.cuModuleUnload(module)), "cuModuleUnload");
    }
    let mut module: Handle = std::ptr::null_mut();
    let mut junk = 5u32;
    // SAFETY: as above; the extra arguments of unknown meaning are refused.
    let rc = unsafe { load_ext1(&mut module, wrapper_ptr, (&mut junk as *mut u32).cast(), null, 1) };
    assert_eq!(rc, code::NOT_SUPPORTED);
    // SAFETY: as above; NULL images are refused.
    assert_eq!(unsafe { load(&mut module, std::ptr::null()) }, code::INVALID_VALUE);

    // Slot 12 (load the compilers) succeeds; slot 3 has no known meaning.
    let load_compilers: NoArgs = func(t, 12);
    let unknown: NoArgs = func(t, 3);
    // SAFETY: both take no arguments (the unknown slot ignores any).
    assert_eq!(unsafe { load_compilers() }, code::SUCCESS);
    assert_eq!(unsafe { unknown() }, code::NOT_SUPPORTED);

    check(api, cu!(api.cuCtxSetCurrent(std::ptr::null_mut())), "cuCtxSetCurrent NULL");
    check(api, cu!(api.cuDevicePrimaryCtxRelease_v2(0)), "release");
    check(api, cu!(api.cuDevicePrimaryCtxRelease_v2(0)), "release");
}

type ClsPut = unsafe extern "C" fn(Handle, *mut c_void, *mut c_void, Option<Dtor>) -> u32;
type ClsDelete = unsafe extern "C" fn(Handle, *mut c_void) -> u32;
type ClsGet = unsafe extern "C" fn(*mut *mut c_void, Handle, *mut c_void) -> u32;
type Dtor = extern "C" fn(Handle, *mut c_void, *mut c_void);

/// What the destructor saw: (context, key, value) of each call.
static DESTROYED: Mutex<Vec<(usize, usize, usize)>> = Mutex::new(Vec::new());
static DTOR_CALLS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn record_dtor(ctx: Handle, key: *mut c_void, value: *mut c_void) {
    DTOR_CALLS.fetch_add(1, Ordering::SeqCst);
    DESTROYED.lock().unwrap_or_else(|p| p.into_inner()).push((ctx as usize, key as usize, value as usize));
}

#[test]
fn context_local_storage_keeps_values_per_context_and_destroys_them_with_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let api = init();
    let t = table(api, &CLS);
    let put: ClsPut = func(t, 0);
    let delete: ClsDelete = func(t, 1);
    let get: ClsGet = func(t, 2);
    let mut rng = Lcg(99);
    let key_a = (0x1000 + (rng.next_u32() as usize & 0xfff0)) as *mut c_void;
    let key_b = (key_a as usize + 8) as *mut c_void;
    let value_a = (rng.next_u32() as usize | 1) as *mut c_void;
    let value_b = (rng.next_u32() as usize | 1) as *mut c_void;

    let first = Ctx::new(api);
    let second = Ctx::new(api); // current
    let mut out: *mut c_void = 0xdead as *mut c_void;
    // SAFETY (all calls below): the slots' signatures, live out-pointers and contexts.
    assert_eq!(unsafe { get(&mut out, second.handle, key_a) }, code::INVALID_HANDLE);
    assert!(out.is_null(), "a missing key reads NULL");
    check(api, unsafe { put(first.handle, key_a, value_a, Some(record_dtor)) }, "put");
    // NULL means the current context.
    check(api, unsafe { put(std::ptr::null_mut(), key_a, value_b, Some(record_dtor)) }, "put current");
    check(api, unsafe { put(std::ptr::null_mut(), key_b, value_a, None) }, "put without destructor");
    check(api, unsafe { get(&mut out, first.handle, key_a) }, "get");
    assert_eq!(out, value_a);
    check(api, unsafe { get(&mut out, second.handle, key_a) }, "get");
    assert_eq!(out, value_b, "each context has its own value");
    check(api, unsafe { get(&mut out, std::ptr::null_mut(), key_b) }, "get current");
    assert_eq!(out, value_a);
    // Replacing, deleting.
    check(api, unsafe { put(second.handle, key_b, value_b, None) }, "replace");
    check(api, unsafe { get(&mut out, second.handle, key_b) }, "get");
    assert_eq!(out, value_b);
    check(api, unsafe { delete(second.handle, key_b) }, "delete");
    assert_eq!(unsafe { get(&mut out, second.handle, key_b) }, code::INVALID_HANDLE);
    // Errors: a NULL output, a stale context.
    assert_eq!(unsafe { get(std::ptr::null_mut(), second.handle, key_a) }, code::INVALID_VALUE);
    assert_eq!(unsafe { put(0x10 as Handle, key_a, value_a, None) }, code::INVALID_CONTEXT);

    // Destroying a context calls the destructors of its entries, once.
    DESTROYED.lock().unwrap().clear();
    let before = DTOR_CALLS.load(Ordering::SeqCst);
    let (h1, h2) = (first.handle as usize, second.handle as usize);
    drop(second);
    assert_eq!(*DESTROYED.lock().unwrap(), vec![(h2, key_a as usize, value_b as usize)]);
    drop(first);
    assert_eq!(DTOR_CALLS.load(Ordering::SeqCst) - before, 2);
    assert_eq!(DESTROYED.lock().unwrap()[1], (h1, key_a as usize, value_a as usize));

    // Resetting the primary context does too, and its entries are gone after.
    let mut primary: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuDevicePrimaryCtxRetain(&mut primary, 0)), "retain");
    check(api, unsafe { put(primary, key_b, value_b, Some(record_dtor)) }, "put primary");
    check(api, cu!(api.cuDevicePrimaryCtxReset_v2(0)), "reset");
    assert_eq!(DESTROYED.lock().unwrap().last().copied(), Some((primary as usize, key_b as usize, value_b as usize)));
    let mut again: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuDevicePrimaryCtxRetain(&mut again, 0)), "retain");
    assert_eq!(unsafe { get(&mut out, again, key_b) }, code::INVALID_HANDLE);
    check(api, cu!(api.cuDevicePrimaryCtxRelease_v2(0)), "release");
    check(api, cu!(api.cuDevicePrimaryCtxRelease_v2(0)), "release");
}

type Integrity = unsafe extern "C" fn(c_uint, u64, *mut [u64; 2]) -> u32;
type Buffer = unsafe extern "C" fn(*mut *mut c_void, *mut usize);
type ContextCheck = unsafe extern "C" fn(Handle, *mut c_uint, *mut *const c_void) -> u32;

#[test]
fn integrity_check_tools_buffers_and_context_checks() {
    let api = init();
    let t = table(api, &INTEGRITY);
    let integrity: Integrity = func(t, 1);
    let mut a = [0u64; 2];
    let mut b = [1u64; 2];
    // SAFETY (all calls below): the slots' signatures and live out-pointers.
    check(api, unsafe { integrity(13050, 1_700_000_000, &mut a) }, "integrity_check");
    assert_eq!(a, [0x3341_181C_03CB_675C, 0x8ED3_83AA_1F4C_D1E8], "version % 10 == 0 has a fixed answer");
    check(api, unsafe { integrity(13052, 1_700_000_000, &mut a) }, "integrity_check");
    check(api, unsafe { integrity(13052, 1_700_000_000, &mut b) }, "integrity_check");
    assert_eq!(a, b, "same thread, same time, same answer");
    check(api, unsafe { integrity(13052, 1_700_000_001, &mut b) }, "integrity_check");
    assert_ne!(a, b, "the time is hashed");
    assert_eq!(unsafe { integrity(13052, 0, std::ptr::null_mut()) }, code::INVALID_VALUE);

    let t = table(api, &TOOLS_HOOKS);
    for (i, words) in [(2usize, 1024usize), (6, 14)] {
        let buffer: Buffer = func(t, i);
        let (mut p, mut n): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
        unsafe { buffer(&mut p, &mut n) };
        assert!(!p.is_null());
        assert_eq!(n, words);
        // The buffer holds `words` 32-bit words, writable.
        let words_ptr = p.cast::<u32>();
        unsafe { words_ptr.add(words - 1).write(0xabcd) };
        let (mut q, mut m): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
        unsafe { buffer(&mut q, &mut m) };
        assert_eq!((q, m), (p, n), "the same buffer each time");
    }

    let t = table(api, &CHECKS);
    let context_check: ContextCheck = func(t, 2);
    let mut wrapped: c_uint = 7;
    let mut inner: *const c_void = std::ptr::null();
    check(api, unsafe { context_check(std::ptr::null_mut(), &mut wrapped, &mut inner) }, "context_check");
    assert_eq!(wrapped, 0, "no context wraps another");
    let check_fn3: NoArgs = func(t, 3);
    assert_eq!(unsafe { check_fn3() }, 0);
    let unknown: NoArgs = func(table(api, &CUDART13), 50);
    assert_eq!(unsafe { unknown() }, code::NOT_SUPPORTED);
}

type CurrentContext = unsafe extern "C" fn(*mut Handle) -> u32;
type ContextId = unsafe extern "C" fn(Handle, *mut u64) -> u32;

/// TOOLS_TLS slot 2 and CUDART13 slot 4, which cuBLASLt 13 calls for every
/// candidate algorithm (and drops the algorithm where either fails): the
/// current context, as `cuCtxGetCurrent`, and a context's id, as
/// `cuCtxGetId`. When slot 2 returned nothing, cuBLASLt found no algorithm.
#[test]
fn the_current_context_and_its_id_as_cublaslt_asks_for_them() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let api = init();
    let current: CurrentContext = func(table(api, &TOOLS_TLS), 2);
    let id_of: ContextId = func(table(api, &CUDART13), 4);
    let first = Ctx::new(api);
    let second = Ctx::new(api); // current
    let mut ids = Vec::new();
    for (ctx, push) in [(&second, false), (&first, true)] {
        if push {
            check(api, cu!(api.cuCtxPushCurrent_v2(ctx.handle)), "cuCtxPushCurrent");
        }
        let (mut a, mut b) = (0x5a5a as Handle, 0x6b6b as Handle);
        check(api, cu!(api.cuCtxGetCurrent(&mut a)), "cuCtxGetCurrent");
        // SAFETY (all slot calls below): the slots' signatures, live
        // out-pointers and contexts.
        check(api, unsafe { current(&mut b) }, "TOOLS_TLS[2]");
        assert_eq!((a, b), (ctx.handle, ctx.handle));
        let (mut x, mut y) = (0u64, 7u64);
        check(api, cu!(api.cuCtxGetId(ctx.handle, &mut x)), "cuCtxGetId");
        check(api, unsafe { id_of(b, &mut y) }, "CUDART13[4]");
        assert_eq!(x, y);
        assert_ne!(y, 0);
        ids.push(y);
    }
    assert_ne!(ids[0], ids[1], "each context its own id");
    // NULL is the current context (first, pushed).
    let mut y = 0u64;
    check(api, unsafe { id_of(std::ptr::null_mut(), &mut y) }, "CUDART13[4] of NULL");
    assert_eq!(y, ids[1]);
    assert_eq!(unsafe { current(std::ptr::null_mut()) }, code::INVALID_VALUE);
    assert_eq!(unsafe { id_of(first.handle, std::ptr::null_mut()) }, code::INVALID_VALUE);
    let mut popped: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuCtxPopCurrent_v2(&mut popped)), "cuCtxPopCurrent");
    assert_eq!(popped, first.handle);
}

type StreamObject = unsafe extern "C" fn(Handle, Handle, *mut Handle, c_int) -> u32;
type StreamId = unsafe extern "C" fn(Handle, Handle, *mut u64) -> u32;

/// CUDART13 slots 51 and 39, which cuBLAS 13 calls before every GEMM (its
/// per-stream workspace) and cudart around its stream calls: a stream
/// handle's object (NULL meaning the per-thread stream where the flag is
/// set), then that object's id, as `cuStreamGetId` gives it.
#[test]
fn stream_objects_and_their_ids_as_cublas_asks_for_them() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let api = init();
    let t = table(api, &CUDART13);
    let object_of: StreamObject = func(t, 51);
    let id_of: StreamId = func(t, 39);
    let ctx = Ctx::new(api);
    let mut created: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut created, 0)), "cuStreamCreate");
    let per_thread = 2usize as Handle;
    for (stream, flag, same_as) in [
        (std::ptr::null_mut(), 0, std::ptr::null_mut()),
        (std::ptr::null_mut(), 1, per_thread),
        (1usize as Handle, 0, 1usize as Handle),
        (per_thread, 0, per_thread),
        (created, 0, created),
        (created, 1, created),
    ] {
        let mut object: Handle = 0x5a5a as Handle;
        // SAFETY (all slot calls below): the slots' signatures, live
        // out-pointers, handles of this test.
        check(api, unsafe { object_of(ctx.handle, stream, &mut object, flag) }, "CUDART13[51]");
        let (mut got, mut want) = (7u64, 9u64);
        check(api, unsafe { id_of(ctx.handle, object, &mut got) }, "CUDART13[39]");
        check(api, cu!(api.cuStreamGetId(same_as, &mut want)), "cuStreamGetId");
        assert_eq!(got, want, "stream {stream:?} per-thread {flag}");
    }
    let mut object: Handle = std::ptr::null_mut();
    assert_eq!(unsafe { object_of(ctx.handle, 0x7777_0000usize as Handle, &mut object, 0) }, code::INVALID_HANDLE);
    assert_eq!(unsafe { object_of(ctx.handle, created, std::ptr::null_mut(), 0) }, code::INVALID_VALUE);
    assert_eq!(unsafe { id_of(ctx.handle, created, std::ptr::null_mut()) }, code::INVALID_VALUE);
    check(api, cu!(api.cuStreamDestroy_v2(created)), "cuStreamDestroy");
}

type EachFunction = unsafe extern "C" fn(Handle, Handle, Option<FunctionCallback>, *mut c_void) -> c_int;
type FunctionCallback = unsafe extern "C" fn(*mut c_void, Handle, *mut c_void);

/// Collects what slot 7 reports into the `Vec<(function, third argument)>` behind `arg`.
unsafe extern "C" fn collect_function(arg: *mut c_void, f: Handle, third: *mut c_void) {
    // SAFETY: the test passes a live `Vec` as `arg`.
    let seen = unsafe { &mut *arg.cast::<Vec<(Handle, *mut c_void)>>() };
    seen.push((f, third));
}

const TWO_KERNELS: &std::ffi::CStr = c".version 8.0
.target sm_80
.address_size 64
.visible .entry first(.param .u64 p) { ret; }
.visible .entry second(.param .u64 p) { ret; }
";

/// The table cuFFT 12's runtime asks for ({6E163FBE-...}): slot 7 calls a
/// callback for each function of a module, which cuFFT launches (it loads a
/// kernel's fat binary, then takes the function the callback kept), and
/// answers 1; 0 where there is none.
#[test]
fn module_functions_are_handed_to_a_callback_as_cufft_asks() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let api = init();
    let each: EachFunction = func(table(api, &MODULE_FUNCTIONS), 7);
    let ctx = Ctx::new(api);
    let image = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/vadd_f32.zstd.fatbin")).unwrap();
    let mut fatbin: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut fatbin, image.as_ptr().cast())), "cuModuleLoadData fat binary");
    let mut text: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut text, TWO_KERNELS.as_ptr().cast())), "cuModuleLoadData PTX");
    for (module, names) in [(fatbin, vec![c"vadd_f32"]), (text, vec![c"first", c"second"])] {
        let mut seen: Vec<(Handle, *mut c_void)> = Vec::new();
        let arg = (&mut seen as *mut Vec<(Handle, *mut c_void)>).cast::<c_void>();
        // SAFETY (all slot calls below): the slot's signature, a live
        // module or a bad handle, the callback above with its `Vec`.
        assert_eq!(unsafe { each(ctx.handle, module, Some(collect_function), arg) }, 1);
        let mut want = Vec::new();
        for name in names {
            let mut f: Handle = std::ptr::null_mut();
            check(api, cu!(api.cuModuleGetFunction(&mut f, module, name.as_ptr())), "cuModuleGetFunction");
            want.push((f, std::ptr::null_mut()));
        }
        assert_eq!(seen, want);
    }
    check_vadd(api, fatbin);
    let mut seen: Vec<(Handle, *mut c_void)> = Vec::new();
    let arg = (&mut seen as *mut Vec<(Handle, *mut c_void)>).cast::<c_void>();
    assert_eq!(unsafe { each(ctx.handle, 0x4242_0000usize as Handle, Some(collect_function), arg) }, 0);
    assert_eq!(unsafe { each(ctx.handle, text, None, arg) }, 0);
    assert!(seen.is_empty());
    for m in [fatbin, text] {
        check(api, cu!(api.cuModuleUnload(m)), "cuModuleUnload");
    }
}

/// `cuMemAllocAsync`/`cuMemFreeAsync`, which cudart's `cudaMallocAsync` and
/// `cudaFreeAsync` call.
#[test]
fn stream_ordered_allocation() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let api = init();
    let _ctx = Ctx::new(api);
    let mut s: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut s, 0)), "cuStreamCreate");
    let n = 4099usize;
    let mut rng = Lcg(41);
    let fill = rng.next_u32();
    let mut d = 0u64;
    check(api, cu!(api.cuMemAllocAsync(&mut d, n * 4, s)), "cuMemAllocAsync");
    assert_ne!(d, 0);
    check(api, cu!(api.cuMemsetD32Async(d, fill, n, s)), "cuMemsetD32Async");
    let mut host = vec![0u32; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), d, n * 4)), "DtoH");
    assert!(host.iter().all(|&v| v == fill));
    check(api, cu!(api.cuMemFreeAsync(d, s)), "cuMemFreeAsync");
    check(api, cu!(api.cuStreamSynchronize(s)), "sync");
    // The freed address is no longer an allocation; NULL frees nothing.
    assert_eq!(cu!(api.cuMemFreeAsync(d, s)), code::INVALID_VALUE);
    check(api, cu!(api.cuMemFreeAsync(0, s)), "free NULL");
    // Errors: NULL output, zero bytes, a bad stream.
    assert_eq!(cu!(api.cuMemAllocAsync(std::ptr::null_mut(), 16, s)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuMemAllocAsync(&mut d, 0, s)), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuMemAllocAsync(&mut d, 16, 0x40 as Handle)), code::INVALID_HANDLE);
    // In a capturing stream it is a graph memory node (see kernels.rs).
    check(api, cu!(api.cuStreamBeginCapture_v2(s, 2)), "begin capture (relaxed)");
    check(api, cu!(api.cuMemAllocAsync(&mut d, 16, s)), "captured cuMemAllocAsync");
    assert_ne!(d, 0);
    let mut g: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamEndCapture(s, &mut g)), "end capture");
    check(api, cu!(api.cuGraphDestroy(g)), "cuGraphDestroy");
    check(api, cu!(api.cuStreamDestroy_v2(s)), "cuStreamDestroy");
}
