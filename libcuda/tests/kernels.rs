//! Real kernels through the driver API: load PTX, launch, compare with a CPU
//! computation.

mod common;

use std::ffi::{c_int, c_void};

use common::{check, code, init, launch_vadd, ptx_image, Api, Ctx, Handle, Lcg};

const POISON: u8 = 0xAB;
/// `CU_LAUNCH_PARAM_BUFFER_POINTER` (`cuda.h`).
const CU_LAUNCH_PARAM_BUFFER_POINTER: usize = 1;
/// `CU_LAUNCH_PARAM_BUFFER_SIZE` (`cuda.h`).
const CU_LAUNCH_PARAM_BUFFER_SIZE: usize = 2;

fn load(api: &Api, name: &str) -> Handle {
    let image = ptx_image(name);
    let mut module: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast())), name);
    module
}

fn function(api: &Api, module: Handle, name: &str) -> Handle {
    let cname = format!("{name}\0");
    let mut f: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetFunction(&mut f, module, cname.as_ptr().cast())), name);
    f
}

fn alloc(api: &Api, bytes: usize) -> u64 {
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, bytes)), "cuMemAlloc");
    d
}

fn upload<T>(api: &Api, d: u64, data: &[T]) {
    check(api, cu!(api.cuMemcpyHtoD_v2(d, data.as_ptr().cast(), std::mem::size_of_val(data))), "HtoD");
}

fn download<T: Default + Clone>(api: &Api, d: u64, n: usize) -> Vec<T> {
    let mut out = vec![T::default(); n];
    check(api, cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), d, n * std::mem::size_of::<T>())), "DtoH");
    out
}

/// `vadd_f32(a, b, c, n)` on random inputs, through `kernelParams`; the
/// output is poisoned first so untouched elements show.
#[test]
fn vadd_f32_kernel_params() {
    let api = init();
    let _ctx = Ctx::new(api);
    let module = load(api, "vadd_f32.ptx");
    let f = function(api, module, "vadd_f32");

    let n = 50_003usize;
    let mut rng = Lcg(0x5eed);
    let a: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let (da, db, dc) = (alloc(api, n * 4), alloc(api, n * 4), alloc(api, (n + 16) * 4));
    upload(api, da, &a);
    upload(api, db, &b);
    check(api, cu!(api.cuMemsetD8_v2(dc, POISON, (n + 16) * 4)), "poison");

    check(api, launch_vadd(api, f, [da, db, dc], n, 256, std::ptr::null_mut()), "cuLaunchKernel");
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");

    let c: Vec<u32> = download(api, dc, n + 16);
    for i in 0..n {
        let want = (a[i] + b[i]).to_bits();
        assert_eq!(c[i], want, "c[{i}] = {} expected {}", f32::from_bits(c[i]), a[i] + b[i]);
    }
    let poison = u32::from_ne_bytes([POISON; 4]);
    assert!(c[n..].iter().all(|&x| x == poison), "elements past n were written");

    for d in [da, db, dc] {
        check(api, cu!(api.cuMemFree_v2(d)), "cuMemFree");
    }
    check(api, cu!(api.cuModuleUnload(module)), "cuModuleUnload");
    // The function died with its module.
    let mut v = 0;
    assert_eq!(cu!(api.cuFuncGetAttribute(&mut v, 0, f)), code::INVALID_HANDLE);
}

/// The same kernel with the parameter block passed through `extra`, and the
/// launch checks that need a real function.
#[test]
fn vadd_f32_extra_and_launch_checks() {
    let api = init();
    let _ctx = Ctx::new(api);
    let module = load(api, "vadd_f32.ptx");
    let f = function(api, module, "vadd_f32");
    assert_eq!(function(api, module, "vadd_f32"), f, "same handle for the same entry");
    let mut missing: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuModuleGetFunction(&mut missing, module, c"nope".as_ptr().cast())), code::NOT_FOUND);

    let attr = |a: c_int| {
        let mut v = -1;
        let rc = cu!(api.cuFuncGetAttribute(&mut v, a, f));
        (rc, v)
    };
    assert_eq!(attr(1), (0, 0), "SHARED_SIZE_BYTES");
    assert_eq!(attr(5), (0, 80), "PTX_VERSION: the .target");
    assert_eq!(attr(6).0, 0, "BINARY_VERSION");
    assert!(attr(0).1 >= 256, "MAX_THREADS_PER_BLOCK");
    assert_eq!(attr(99).0, code::INVALID_VALUE);
    let max_dyn = attr(8).1;
    assert!(max_dyn > 0);
    assert_eq!(cu!(api.cuFuncSetAttribute(f, 8, 1 << 30)), code::INVALID_VALUE);
    check(api, cu!(api.cuFuncSetAttribute(f, 8, 1024)), "set max dynamic shared");
    assert_eq!(attr(8), (0, 1024));
    assert_eq!(cu!(api.cuFuncSetAttribute(f, 0, 1)), code::INVALID_VALUE, "read-only attribute");

    let n = 1000usize;
    let mut rng = Lcg(42);
    let a: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let (da, db, dc) = (alloc(api, n * 4), alloc(api, n * 4), alloc(api, n * 4));
    upload(api, da, &a);
    upload(api, db, &b);
    check(api, cu!(api.cuMemsetD8_v2(dc, POISON, n * 4)), "poison");

    // CUDA's parameter layout: three pointers, then an int, 28 bytes.
    #[repr(C)]
    struct Params {
        a: u64,
        b: u64,
        c: u64,
        n: i32,
    }
    let mut p = Params { a: da, b: db, c: dc, n: n as i32 };
    let mut size = std::mem::size_of::<Params>();
    let mut extra: [*mut c_void; 5] = [
        CU_LAUNCH_PARAM_BUFFER_POINTER as *mut c_void,
        (&mut p as *mut Params).cast(),
        CU_LAUNCH_PARAM_BUFFER_SIZE as *mut c_void,
        (&mut size as *mut usize).cast(),
        std::ptr::null_mut(),
    ];
    let null: *mut *mut c_void = std::ptr::null_mut();
    let launch = |grid: u32, block: u32, shared: u32, params: *mut *mut c_void, extra: *mut *mut c_void| {
        cu!(api.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, shared, std::ptr::null_mut(), params, extra))
    };
    // Launch checks: zero or oversized dimensions, too much dynamic shared
    // memory, both parameter forms, no parameters at all.
    assert_eq!(launch(0, 128, 0, null, extra.as_mut_ptr()), code::INVALID_VALUE);
    assert_eq!(launch(8, 0, 0, null, extra.as_mut_ptr()), code::INVALID_VALUE);
    assert_eq!(launch(8, 4096, 0, null, extra.as_mut_ptr()), code::INVALID_VALUE);
    assert_eq!(launch(8, 128, 4096, null, extra.as_mut_ptr()), code::INVALID_VALUE);
    let mut one: [*mut c_void; 1] = [(&mut p.a as *mut u64).cast()];
    assert_eq!(launch(8, 128, 0, one.as_mut_ptr(), extra.as_mut_ptr()), code::INVALID_VALUE);
    assert_eq!(launch(8, 128, 0, null, null), code::INVALID_VALUE);

    check(api, launch(8, 128, 0, null, extra.as_mut_ptr()), "launch with extra");
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
    let c: Vec<f32> = download(api, dc, n);
    for i in 0..n {
        assert_eq!(c[i].to_bits(), (a[i] + b[i]).to_bits(), "c[{i}]");
    }
    check(api, cu!(api.cuModuleUnload(module)), "cuModuleUnload");
    assert_eq!(cu!(api.cuModuleUnload(module)), code::INVALID_HANDLE, "double unload");
}

/// `cuModuleGetGlobal` on a `.const` variable with an initializer and a
/// `.global` counter the kernel increments.
#[test]
fn module_globals() {
    let api = init();
    let _ctx = Ctx::new(api);
    let module = load(api, "scale_count.ptx");
    let f = function(api, module, "scale_count");

    let (mut scale, mut scale_size) = (0u64, 0usize);
    check(api, cu!(api.cuModuleGetGlobal_v2(&mut scale, &mut scale_size, module, c"scale".as_ptr().cast())), "scale");
    assert_eq!(scale_size, 4);
    assert_eq!(download::<u32>(api, scale, 1), vec![3], "initializer applied at load");
    let mut counter = 0u64;
    check(
        api,
        cu!(api.cuModuleGetGlobal_v2(&mut counter, std::ptr::null_mut(), module, c"counter".as_ptr().cast())),
        "counter",
    );
    assert_eq!(download::<u32>(api, counter, 1), vec![0]);
    let mut nothing = 0u64;
    let rc = cu!(api.cuModuleGetGlobal_v2(&mut nothing, std::ptr::null_mut(), module, c"missing".as_ptr().cast()));
    assert_eq!(rc, code::NOT_FOUND);
    let mut cbytes = -1;
    check(api, cu!(api.cuFuncGetAttribute(&mut cbytes, 2, f)), "CONST_SIZE_BYTES");
    assert_eq!(cbytes, 4);

    upload(api, scale, &[5u32]);
    let n = 1000usize;
    let out = alloc(api, n * 4);
    check(api, cu!(api.cuMemsetD8_v2(out, POISON, n * 4)), "poison");
    let (mut pout, mut pn) = (out, n as i32);
    let mut params: [*mut c_void; 2] = [(&mut pout as *mut u64).cast(), (&mut pn as *mut i32).cast()];
    let rc = cu!(api.cuLaunchKernel(
        f,
        4,
        1,
        1,
        256,
        1,
        1,
        0,
        std::ptr::null_mut(),
        params.as_mut_ptr(),
        std::ptr::null_mut()
    ));
    check(api, rc, "cuLaunchKernel");
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
    let got: Vec<u32> = download(api, out, n);
    let want: Vec<u32> = (0..n as u32).map(|i| i * 5).collect();
    assert_eq!(got, want);
    assert_eq!(download::<u32>(api, counter, 1), vec![n as u32]);
    check(api, cu!(api.cuModuleUnload(module)), "cuModuleUnload");
}

/// `vadd_f32` on managed memory: the host writes the inputs and reads the
/// result through the pointers the kernel gets. Lavapipe maps memory at its
/// device address, so managed memory must work there.
#[test]
fn vadd_f32_managed_memory() {
    let api = init();
    let _ctx = Ctx::new(api);
    let mut managed = -1;
    check(api, cu!(api.cuDeviceGetAttribute(&mut managed, 83, 0)), "MANAGED_MEMORY");
    let mut name = [0 as std::ffi::c_char; 256];
    check(api, cu!(api.cuDeviceGetName(name.as_mut_ptr(), 256, 0)), "name");
    // SAFETY: the library wrote a NUL-terminated name into the buffer.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
    let mut d = 0u64;
    if managed == 0 {
        assert!(!name.contains("llvmpipe"), "lavapipe supports managed memory");
        assert_eq!(cu!(api.cuMemAllocManaged(&mut d, 64, 1)), code::NOT_SUPPORTED);
        return;
    }
    assert_eq!(managed, 1);
    let n = 10_000usize;
    let mut ptrs = [0u64; 3];
    for p in ptrs.iter_mut() {
        check(api, cu!(api.cuMemAllocManaged(p, (n + 16) * 4, 1)), "cuMemAllocManaged");
    }
    let [da, db, dc] = ptrs;
    let mut rng = Lcg(77);
    let a: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    // SAFETY: managed allocations of (n + 16) floats, valid on the host at the
    // same address; the device is idle while the host touches them.
    let (ha, hb, hc) = unsafe {
        (
            std::slice::from_raw_parts_mut(da as *mut f32, n + 16),
            std::slice::from_raw_parts_mut(db as *mut f32, n + 16),
            std::slice::from_raw_parts_mut(dc as *mut u32, n + 16),
        )
    };
    ha[..n].copy_from_slice(&a);
    hb[..n].copy_from_slice(&b);
    hc.fill(u32::from_ne_bytes([POISON; 4]));
    let module = load(api, "vadd_f32.ptx");
    let f = function(api, module, "vadd_f32");
    check(api, launch_vadd(api, f, [da, db, dc], n, 256, std::ptr::null_mut()), "cuLaunchKernel");
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
    for i in 0..n {
        assert_eq!(hc[i], (a[i] + b[i]).to_bits(), "c[{i}]");
    }
    assert!(hc[n..].iter().all(|&x| x == u32::from_ne_bytes([POISON; 4])), "elements past n were written");
    // Device copies see host writes too.
    ha[0] = 1234.5;
    assert_eq!(download::<f32>(api, da, 1), vec![1234.5]);
    for p in ptrs {
        check(api, cu!(api.cuMemFree_v2(p)), "cuMemFree");
    }
    check(api, cu!(api.cuModuleUnload(module)), "cuModuleUnload");
}

/// Host memory registered with `CU_MEMHOSTREGISTER_DEVICEMAP`, at no page
/// boundary: a kernel reads its inputs from and writes its result to the
/// host memory itself, through `cuMemHostGetDevicePointer`'s addresses.
#[test]
fn vadd_f32_on_registered_host_memory() {
    let api = init();
    let _ctx = Ctx::new(api);
    let mut read_only = -1;
    // CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: the device maps host memory.
    check(api, cu!(api.cuDeviceGetAttribute(&mut read_only, 113, 0)), "attribute");
    let n = 10_007usize;
    let mut rng = Lcg(0x0bad_cafe);
    // One host buffer: a at element 3 (not page aligned), b after it, c last.
    let mut host = vec![0f32; 3 * n + 64];
    let (a0, b0, c0) = (3, 3 + n + 5, 3 + 2 * n + 11);
    for i in 0..n {
        host[a0 + i] = rng.next_f32();
        host[b0 + i] = rng.next_f32();
    }
    let poison = f32::from_bits(u32::from_ne_bytes([POISON; 4]));
    host[c0..].fill(poison);
    let base = host.as_mut_ptr();
    // SAFETY: offsets inside `host`, which outlives the registrations.
    let (pa, pb, pc) = unsafe { (base.add(a0), base.add(b0), base.add(c0)) };
    let devptr = |p: *mut f32| {
        let mut d = 0u64;
        check(api, cu!(api.cuMemHostGetDevicePointer_v2(&mut d, p.cast(), 0)), "device pointer");
        d
    };
    if read_only != 1 {
        // Without host import the registration is recorded, the mapping fails.
        check(api, cu!(api.cuMemHostRegister_v2(pa.cast(), n * 4, 2)), "register");
        let mut d = 0u64;
        assert_eq!(cu!(api.cuMemHostGetDevicePointer_v2(&mut d, pa.cast(), 0)), code::INVALID_VALUE);
        check(api, cu!(api.cuMemHostUnregister(pa.cast())), "unregister");
        return;
    }
    // a read-only, b and c mapped (b's registration shares pages with a's and c's).
    check(api, cu!(api.cuMemHostRegister_v2(pa.cast(), n * 4, 2 | 8)), "register a");
    check(api, cu!(api.cuMemHostRegister_v2(pb.cast(), n * 4, 2)), "register b");
    check(api, cu!(api.cuMemHostRegister_v2(pc.cast(), (n + 16) * 4, 2)), "register c");
    assert_eq!(cu!(api.cuMemHostRegister_v2(pc.cast(), 4, 2)), code::HOST_MEMORY_ALREADY_REGISTERED);
    assert_eq!(cu!(api.cuMemHostRegister_v2(pc.cast(), 4, 4)), code::NOT_SUPPORTED, "IOMEMORY");
    let (da, db, dc) = (devptr(pa), devptr(pb), devptr(pc));
    // SAFETY: one element into the registration of a.
    let da1 = devptr(unsafe { pa.add(1) });
    assert_eq!(da1, da + 4, "addresses inside a registration");

    let module = load(api, "vadd_f32.ptx");
    let f = function(api, module, "vadd_f32");
    check(api, launch_vadd(api, f, [da, db, dc], n, 128, std::ptr::null_mut()), "cuLaunchKernel");
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
    for i in 0..n {
        let want = host[a0 + i] + host[b0 + i];
        assert_eq!(host[c0 + i].to_bits(), want.to_bits(), "c[{i}]");
    }
    assert!(host[c0 + n..].iter().all(|x| x.to_bits() == poison.to_bits()), "elements past n were written");
    // Copies reach the host memory through the device address too.
    check(api, cu!(api.cuMemsetD32_v2(dc, 0x4040_0000, 8)), "memset through the mapping");
    check(api, cu!(api.cuCtxSynchronize()), "sync");
    assert!(host[c0..c0 + 8].iter().all(|&x| x == 3.0));

    for p in [pa, pb, pc] {
        check(api, cu!(api.cuMemHostUnregister(p.cast())), "unregister");
    }
    let mut d = 0u64;
    assert_eq!(cu!(api.cuMemHostGetDevicePointer_v2(&mut d, pa.cast(), 0)), code::INVALID_VALUE, "unregistered");
    check(api, cu!(api.cuModuleUnload(module)), "cuModuleUnload");
}

/// `CUmemPoolProps` as bytes: allocation type, handle types, location (type,
/// id) and `maxSize`; the rest zero.
fn pool_props(alloc_type: i32, handle_types: i32, location: [i32; 2], max_size: u64) -> [u8; 88] {
    let mut p = [0u8; 88];
    p[0..4].copy_from_slice(&alloc_type.to_ne_bytes());
    p[4..8].copy_from_slice(&handle_types.to_ne_bytes());
    p[8..12].copy_from_slice(&location[0].to_ne_bytes());
    p[12..16].copy_from_slice(&location[1].to_ne_bytes());
    p[24..32].copy_from_slice(&max_size.to_ne_bytes());
    p
}

fn pool_u64(api: &Api, pool: Handle, attr: c_int) -> u64 {
    let mut v = u64::MAX;
    check(api, cu!(api.cuMemPoolGetAttribute(pool, attr, (&mut v as *mut u64).cast())), "pool attribute");
    v
}

/// Stream-ordered allocation: `vadd_f32` on memory from `cuMemAllocAsync`
/// (the default pool) and from a created pool, with the pools' accounting,
/// current-pool switching, destruction with live allocations and the
/// documented errors.
#[test]
fn vadd_f32_on_stream_ordered_allocations() {
    let api = init();
    let _ctx = Ctx::new(api);
    let mut supported = 0;
    check(api, cu!(api.cuDeviceGetAttribute(&mut supported, 115, 0)), "MEMORY_POOLS_SUPPORTED");
    assert_eq!(supported, 1);
    let (mut default, mut current): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
    check(api, cu!(api.cuDeviceGetDefaultMemPool(&mut default, 0)), "default pool");
    check(api, cu!(api.cuDeviceGetMemPool(&mut current, 0)), "current pool");
    assert_eq!(default, current);
    assert_eq!(cu!(api.cuDeviceGetDefaultMemPool(&mut current, 7)), code::INVALID_DEVICE);
    assert_eq!(cu!(api.cuMemPoolDestroy(default)), code::INVALID_VALUE, "the default pool stays");

    let mut s: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut s, 1)), "stream");
    let n = 20_011usize;
    let mut rng = Lcg(0x51ab);
    let a: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let used_before = pool_u64(api, default, 7);
    let (mut da, mut db) = (0u64, 0u64);
    check(api, cu!(api.cuMemAllocAsync(&mut da, n * 4, s)), "alloc a");
    check(api, cu!(api.cuMemAllocAsync(&mut db, n * 4, s)), "alloc b");
    assert_eq!(pool_u64(api, default, 7), used_before + 8 * n as u64, "USED_MEM_CURRENT");
    assert!(pool_u64(api, default, 8) >= used_before + 8 * n as u64, "USED_MEM_HIGH");
    let mut pool_of_a: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuPointerGetAttribute((&mut pool_of_a as *mut Handle).cast(), 17, da)), "MEMPOOL_HANDLE");
    assert_eq!(pool_of_a, default);

    // A pool of its own, made current: cuMemAllocAsync takes from it.
    let props = pool_props(1, 0, [1, 0], 0);
    let mut mine: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuMemPoolCreate(&mut mine, &props)), "create pool");
    for (bad, rc) in [
        (pool_props(2, 0, [1, 0], 0), code::NOT_SUPPORTED),
        (pool_props(1, 1, [1, 0], 0), code::NOT_SUPPORTED),
        (pool_props(1, 0, [1, 7], 0), code::INVALID_DEVICE),
    ] {
        let mut p: Handle = std::ptr::null_mut();
        assert_eq!(cu!(api.cuMemPoolCreate(&mut p, &bad)), rc);
    }
    check(api, cu!(api.cuDeviceSetMemPool(0, mine)), "set current pool");
    let mut dc = 0u64;
    check(api, cu!(api.cuMemAllocAsync(&mut dc, (n + 16) * 4, s)), "alloc c");
    check(api, cu!(api.cuPointerGetAttribute((&mut pool_of_a as *mut Handle).cast(), 17, dc)), "MEMPOOL_HANDLE");
    assert_eq!(pool_of_a, mine);
    assert_eq!(pool_u64(api, mine, 7), (n as u64 + 16) * 4);
    let mut access = -1;
    check(api, cu!(api.cuMemPoolGetAccess(&mut access, mine, &[1, 0])), "access");
    assert_eq!(access, 3, "read-write for its device");
    let mut threshold = u64::MAX;
    check(api, cu!(api.cuMemPoolSetAttribute(mine, 4, (&mut threshold as *mut u64).cast())), "release threshold");
    assert_eq!(pool_u64(api, mine, 4), u64::MAX);
    let mut high = 5u64;
    assert_eq!(cu!(api.cuMemPoolSetAttribute(mine, 8, (&mut high as *mut u64).cast())), code::INVALID_VALUE);

    check(api, cu!(api.cuMemcpyHtoDAsync_v2(da, a.as_ptr().cast(), n * 4, s)), "upload a");
    check(api, cu!(api.cuMemcpyHtoDAsync_v2(db, b.as_ptr().cast(), n * 4, s)), "upload b");
    check(api, cu!(api.cuMemsetD32Async(dc, u32::from_ne_bytes([POISON; 4]), n + 16, s)), "poison");
    let module = load(api, "vadd_f32.ptx");
    let f = function(api, module, "vadd_f32");
    check(api, launch_vadd(api, f, [da, db, dc], n, 256, s), "launch");
    // Freed in stream order: after the kernel that reads them.
    check(api, cu!(api.cuMemFreeAsync(da, s)), "free a");
    check(api, cu!(api.cuMemFreeAsync(db, s)), "free b");
    assert_eq!(pool_u64(api, default, 7), used_before, "USED_MEM_CURRENT after the frees");
    assert_eq!(cu!(api.cuMemFreeAsync(da, s)), code::INVALID_VALUE, "freed twice");
    let mut c = vec![0u32; n + 16];
    check(api, cu!(api.cuMemcpyDtoHAsync_v2(c.as_mut_ptr().cast(), dc, (n + 16) * 4, s)), "download");
    check(api, cu!(api.cuStreamSynchronize(s)), "sync");
    for i in 0..n {
        assert_eq!(c[i], (a[i] + b[i]).to_bits(), "c[{i}]");
    }
    assert!(c[n..].iter().all(|&x| x == u32::from_ne_bytes([POISON; 4])), "elements past n were written");

    // Destroyed with an allocation live: the device's current pool is the
    // default again, the allocation stays usable until it is freed.
    check(api, cu!(api.cuMemPoolDestroy(mine)), "destroy pool");
    check(api, cu!(api.cuDeviceGetMemPool(&mut current, 0)), "current pool");
    assert_eq!(current, default);
    let mut v = 0u64;
    assert_eq!(cu!(api.cuMemPoolGetAttribute(mine, 7, (&mut v as *mut u64).cast())), code::INVALID_VALUE);
    check(api, cu!(api.cuMemcpyDtoHAsync_v2(c.as_mut_ptr().cast(), dc, 16, s)), "read after destroy");
    check(api, cu!(api.cuStreamSynchronize(s)), "sync");
    assert_eq!(c[0], (a[0] + b[0]).to_bits());
    check(api, cu!(api.cuMemFree_v2(dc)), "cuMemFree of a pool allocation");

    // maxSize is a limit.
    let mut small: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuMemPoolCreate(&mut small, &pool_props(1, 0, [1, 0], 1 << 20))), "small pool");
    let mut d = 0u64;
    assert_eq!(cu!(api.cuMemAllocFromPoolAsync(&mut d, 2 << 20, small, s)), code::OUT_OF_MEMORY);
    check(api, cu!(api.cuMemAllocFromPoolAsync(&mut d, 1 << 20, small, s)), "within maxSize");
    check(api, cu!(api.cuMemPoolTrimTo(small, 0)), "trim");
    check(api, cu!(api.cuMemFreeAsync(d, s)), "free");
    check(api, cu!(api.cuMemPoolDestroy(small)), "destroy");
    check(api, cu!(api.cuStreamDestroy_v2(s)), "destroy stream");
    check(api, cu!(api.cuModuleUnload(module)), "cuModuleUnload");
}

fn graph_mem(api: &Api, attr: c_int) -> u64 {
    let mut v = u64::MAX;
    check(api, cu!(api.cuDeviceGetGraphMemAttribute(0, attr, (&mut v as *mut u64).cast())), "graph memory attribute");
    v
}

/// The types of a graph's nodes, sorted.
fn node_types(api: &Api, graph: Handle) -> Vec<c_int> {
    let mut count = 0usize;
    check(api, cu!(api.cuGraphGetNodes(graph, std::ptr::null_mut(), &mut count)), "node count");
    let mut nodes = vec![std::ptr::null_mut(); count];
    check(api, cu!(api.cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut count)), "nodes");
    let mut types: Vec<c_int> = nodes
        .iter()
        .map(|&n| {
            let mut t = -1;
            check(api, cu!(api.cuGraphNodeGetType(n, &mut t)), "node type");
            t
        })
        .collect();
    types.sort();
    types
}

/// Graph memory nodes from stream capture: `cuMemAllocAsync` and
/// `cuMemFreeAsync` become allocation and free nodes; the captured graph
/// runs `vadd_f32` on its own allocations, keeps their addresses across
/// launches, refuses a relaunch while an allocation of the last launch is
/// live (unless instantiated with auto-free), and has the documented
/// restrictions and errors.
#[test]
fn vadd_f32_in_a_graph_with_memory_nodes() {
    let api = init();
    let _ctx = Ctx::new(api);
    let module = load(api, "vadd_f32.ptx");
    let f = function(api, module, "vadd_f32");
    let mut s: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut s, 1)), "stream");
    let n = 5_003usize;
    let mut rng = Lcg(0x6a9f);
    let mut a: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let mut c = vec![0u32; n + 16];
    let reserved_before = graph_mem(api, 2);

    // CU_STREAM_CAPTURE_MODE_RELAXED (2): no unsafe-call checks.
    check(api, cu!(api.cuStreamBeginCapture_v2(s, 2)), "begin capture");
    let (mut da, mut db, mut dc) = (0u64, 0u64, 0u64);
    check(api, cu!(api.cuMemAllocAsync(&mut da, n * 4, s)), "alloc a");
    check(api, cu!(api.cuMemAllocAsync(&mut db, n * 4, s)), "alloc b");
    check(api, cu!(api.cuMemAllocAsync(&mut dc, (n + 16) * 4, s)), "alloc c");
    check(api, cu!(api.cuMemcpyHtoDAsync_v2(da, a.as_ptr().cast(), n * 4, s)), "upload a");
    check(api, cu!(api.cuMemcpyHtoDAsync_v2(db, b.as_ptr().cast(), n * 4, s)), "upload b");
    check(api, cu!(api.cuMemsetD32Async(dc, u32::from_ne_bytes([POISON; 4]), n + 16, s)), "poison");
    check(api, launch_vadd(api, f, [da, db, dc], n, 256, s), "launch");
    check(api, cu!(api.cuMemcpyDtoHAsync_v2(c.as_mut_ptr().cast(), dc, (n + 16) * 4, s)), "download");
    check(api, cu!(api.cuMemFreeAsync(da, s)), "free a");
    check(api, cu!(api.cuMemFreeAsync(db, s)), "free b");
    assert_eq!(cu!(api.cuMemFreeAsync(db, s)), code::INVALID_VALUE, "freed twice in the graph");
    let mut g: Handle = std::ptr::null_mut();
    // The failed free invalidated the capture: capture again without it.
    let rc = cu!(api.cuStreamEndCapture(s, &mut g));
    if rc == code::SUCCESS {
        check(api, cu!(api.cuGraphDestroy(g)), "destroy");
    }
    check(api, cu!(api.cuStreamBeginCapture_v2(s, 2)), "begin capture");
    check(api, cu!(api.cuMemAllocAsync(&mut da, n * 4, s)), "alloc a");
    check(api, cu!(api.cuMemAllocAsync(&mut db, n * 4, s)), "alloc b");
    check(api, cu!(api.cuMemAllocAsync(&mut dc, (n + 16) * 4, s)), "alloc c");
    check(api, cu!(api.cuMemcpyHtoDAsync_v2(da, a.as_ptr().cast(), n * 4, s)), "upload a");
    check(api, cu!(api.cuMemcpyHtoDAsync_v2(db, b.as_ptr().cast(), n * 4, s)), "upload b");
    check(api, cu!(api.cuMemsetD32Async(dc, u32::from_ne_bytes([POISON; 4]), n + 16, s)), "poison");
    check(api, launch_vadd(api, f, [da, db, dc], n, 256, s), "launch");
    check(api, cu!(api.cuMemcpyDtoHAsync_v2(c.as_mut_ptr().cast(), dc, (n + 16) * 4, s)), "download");
    check(api, cu!(api.cuMemFreeAsync(da, s)), "free a");
    check(api, cu!(api.cuMemFreeAsync(db, s)), "free b");
    check(api, cu!(api.cuStreamEndCapture(s, &mut g)), "end capture");
    // Three allocation nodes (10), two free nodes (11), memcpy (1) x 3, memset (2), kernel (0).
    assert_eq!(node_types(api, g), vec![0, 1, 1, 1, 2, 10, 10, 10, 11, 11]);
    assert!(graph_mem(api, 2) >= reserved_before + (3 * n as u64 + 16) * 4, "RESERVED_MEM_CURRENT");

    let mut clone: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuGraphClone(&mut clone, g)), code::NOT_SUPPORTED, "no clones of graphs with memory nodes");
    let mut exec: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphInstantiateWithFlags(&mut exec, g, 0)), "instantiate");
    let mut second: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuGraphInstantiateWithFlags(&mut second, g, 0)), code::NOT_SUPPORTED, "one instantiation");

    let check_c = |c: &[u32], a: &[f32]| {
        for i in 0..n {
            assert_eq!(c[i], (a[i] + b[i]).to_bits(), "c[{i}]");
        }
        assert!(c[n..].iter().all(|&x| x == u32::from_ne_bytes([POISON; 4])), "elements past n were written");
    };
    check(api, cu!(api.cuGraphLaunch(exec, s)), "launch the graph");
    check(api, cu!(api.cuStreamSynchronize(s)), "sync");
    check_c(&c, &a);
    assert!(graph_mem(api, 0) >= (n as u64 + 16) * 4, "c is live: USED_MEM_CURRENT");
    // c was not freed in the graph: a second launch needs it freed first.
    assert_eq!(cu!(api.cuGraphLaunch(exec, s)), code::INVALID_VALUE, "c of the last launch is live");
    // a is freed by its own graph: nothing else may free it.
    assert_eq!(cu!(api.cuMemFreeAsync(da, s)), code::INVALID_VALUE);
    check(api, cu!(api.cuMemFreeAsync(dc, s)), "free c outside the graph");
    for x in a.iter_mut() {
        *x = -*x;
    }
    c.fill(0);
    check(api, cu!(api.cuGraphLaunch(exec, s)), "relaunch");
    check(api, cu!(api.cuStreamSynchronize(s)), "sync");
    check_c(&c, &a);
    check(api, cu!(api.cuMemFree_v2(dc)), "cuMemFree of c");
    assert_eq!(cu!(api.cuMemFree_v2(dc)), code::INVALID_VALUE, "not live any more");
    check(api, cu!(api.cuGraphExecDestroy(exec)), "destroy exec");

    // Auto-free: relaunching frees the last launch's c.
    check(api, cu!(api.cuGraphInstantiateWithFlags(&mut exec, g, 1)), "instantiate with auto-free");
    for _ in 0..2 {
        c.fill(0);
        check(api, cu!(api.cuGraphLaunch(exec, s)), "launch with auto-free");
        check(api, cu!(api.cuStreamSynchronize(s)), "sync");
        check_c(&c, &a);
    }
    // The last launch's c outlives the graph until it is freed.
    check(api, cu!(api.cuGraphExecDestroy(exec)), "destroy exec");
    check(api, cu!(api.cuGraphDestroy(g)), "destroy graph");
    check(api, cu!(api.cuMemsetD32Async(dc, 7, 4, s)), "c is still usable");
    check(api, cu!(api.cuMemFreeAsync(dc, s)), "free c");
    check(api, cu!(api.cuStreamSynchronize(s)), "sync");
    assert_eq!(graph_mem(api, 2), reserved_before, "RESERVED_MEM_CURRENT back");
    let mut zero = 0u64;
    check(api, cu!(api.cuDeviceSetGraphMemAttribute(0, 1, (&mut zero as *mut u64).cast())), "reset USED_MEM_HIGH");
    let mut five = 5u64;
    assert_eq!(cu!(api.cuDeviceSetGraphMemAttribute(0, 0, (&mut five as *mut u64).cast())), code::INVALID_VALUE);

    // Explicit nodes.
    check(api, cu!(api.cuGraphCreate(&mut g, 0)), "graph");
    let mut params = [0u8; 120];
    params[..88].copy_from_slice(&pool_props(1, 0, [1, 0], 0));
    params[104..112].copy_from_slice(&4096usize.to_ne_bytes());
    let mut alloc: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphAddMemAllocNode(&mut alloc, g, std::ptr::null(), 0, &mut params)), "alloc node");
    let dptr = u64::from_ne_bytes(params[112..120].try_into().unwrap_or_default());
    assert_ne!(dptr, 0);
    let mut back = [0u8; 120];
    check(api, cu!(api.cuGraphMemAllocNodeGetParams(alloc, &mut back)), "alloc node params");
    assert_eq!(back[104..120], params[104..120], "bytesize and dptr");
    let mut free: Handle = std::ptr::null_mut();
    assert_eq!(
        cu!(api.cuGraphAddMemFreeNode(&mut free, g, &alloc, 1, dptr + 8)),
        code::INVALID_VALUE,
        "not an allocation"
    );
    check(api, cu!(api.cuGraphAddMemFreeNode(&mut free, g, &alloc, 1, dptr)), "free node");
    let mut freed = 0u64;
    check(api, cu!(api.cuGraphMemFreeNodeGetParams(free, &mut freed)), "free node params");
    assert_eq!(freed, dptr);
    assert_eq!(cu!(api.cuGraphAddMemFreeNode(&mut free, g, &alloc, 1, dptr)), code::INVALID_VALUE, "twice");
    assert_eq!(cu!(api.cuGraphDestroyNode(free)), code::NOT_SUPPORTED, "no node deletion");
    let mut bad = params;
    bad[..88].copy_from_slice(&pool_props(1, 1, [1, 0], 0));
    assert_eq!(cu!(api.cuGraphAddMemAllocNode(&mut alloc, g, std::ptr::null(), 0, &mut bad)), code::NOT_SUPPORTED);
    check(api, cu!(api.cuGraphInstantiateWithFlags(&mut exec, g, 0)), "instantiate");
    for _ in 0..2 {
        check(api, cu!(api.cuGraphLaunch(exec, s)), "alloc and free in one launch");
    }
    check(api, cu!(api.cuStreamSynchronize(s)), "sync");
    check(api, cu!(api.cuGraphExecDestroy(exec)), "destroy exec");
    check(api, cu!(api.cuGraphDestroy(g)), "destroy graph");
    assert_eq!(graph_mem(api, 2), reserved_before, "RESERVED_MEM_CURRENT back");

    // Freed in another graph: once that graph is gone, a third may free it.
    let (mut owner, mut other): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
    check(api, cu!(api.cuGraphCreate(&mut owner, 0)), "graph");
    check(api, cu!(api.cuGraphAddMemAllocNode(&mut alloc, owner, std::ptr::null(), 0, &mut params)), "alloc node");
    let dptr = u64::from_ne_bytes(params[112..120].try_into().unwrap_or_default());
    for round in 0..2 {
        check(api, cu!(api.cuGraphCreate(&mut other, 0)), "graph");
        check(api, cu!(api.cuGraphAddMemFreeNode(&mut free, other, std::ptr::null(), 0, dptr)), "free elsewhere");
        if round == 0 {
            let mut third: Handle = std::ptr::null_mut();
            check(api, cu!(api.cuGraphCreate(&mut third, 0)), "graph");
            let rc = cu!(api.cuGraphAddMemFreeNode(&mut free, third, std::ptr::null(), 0, dptr));
            assert_eq!(rc, code::INVALID_VALUE, "a second free node while the first exists");
            check(api, cu!(api.cuGraphDestroy(third)), "destroy graph");
        }
        check(api, cu!(api.cuGraphDestroy(other)), "destroy graph");
    }
    check(api, cu!(api.cuGraphDestroy(owner)), "destroy graph");
    assert_eq!(graph_mem(api, 2), reserved_before, "RESERVED_MEM_CURRENT back");
    check(api, cu!(api.cuStreamDestroy_v2(s)), "destroy stream");
    check(api, cu!(api.cuModuleUnload(module)), "cuModuleUnload");
}

/// Copies whose declared direction does not match the memory: a "host"
/// source or destination that is a device allocation is copied device to
/// device in stream order, as NVIDIA's driver does under unified addressing
/// (Warp's APIC `set_param`/`get_param` call `cudaMemcpyAsync(...,
/// cudaMemcpyHostToDevice)` with a device array). The source is written by
/// a kernel queued just before, so a copy that read it as host memory at
/// call time would see the poison, not the sums; on a discrete GPU it would
/// read no host memory at all.
#[test]
fn copies_whose_host_side_is_device_memory() {
    let api = init();
    let _ctx = Ctx::new(api);
    let module = load(api, "vadd_f32.ptx");
    let f = function(api, module, "vadd_f32");
    let mut stream: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut stream, 1)), "cuStreamCreate");

    let n = 4099usize;
    let bytes = n * 4;
    let mut rng = Lcg(0xa91c);
    let a: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let want: Vec<u32> = a.iter().zip(&b).map(|(x, y)| (x + y).to_bits()).collect();
    let (da, db, dc, dd, de, dg) = (
        alloc(api, bytes),
        alloc(api, bytes),
        alloc(api, bytes),
        alloc(api, bytes),
        alloc(api, bytes),
        alloc(api, bytes),
    );
    upload(api, da, &a);
    upload(api, db, &b);
    for d in [dc, dd, de, dg] {
        check(api, cu!(api.cuMemsetD8_v2(d, POISON, bytes)), "poison");
    }

    // HtoD from a device source, DtoH into a device destination, each
    // queued behind the kernel that writes its source.
    check(api, launch_vadd(api, f, [da, db, dc], n, 128, stream), "cuLaunchKernel");
    check(api, cu!(api.cuMemcpyHtoDAsync_v2(dd, dc as usize as *const c_void, bytes, stream)), "HtoDAsync from device");
    check(api, cu!(api.cuMemcpyDtoHAsync_v2(de as usize as *mut c_void, dd, bytes, stream)), "DtoHAsync into device");
    check(api, cu!(api.cuStreamSynchronize(stream)), "cuStreamSynchronize");
    same(&download::<u32>(api, dd, n), &want, "HtoD with a device source");
    same(&download::<u32>(api, de, n), &want, "DtoH with a device destination");

    // The same copy recorded by stream capture and replayed from a graph:
    // its node declares a host source. Relaxed mode (2): the other tests of
    // this binary run on other threads, and a global-mode capture makes their
    // `cuMemAlloc` fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (and
    // invalidates this capture), as NVIDIA's driver does.
    check(api, cu!(api.cuMemsetD8_v2(dc, POISON, bytes)), "poison");
    check(api, cu!(api.cuStreamBeginCapture_v2(stream, 2)), "cuStreamBeginCapture");
    check(api, launch_vadd(api, f, [da, db, dc], n, 128, stream), "captured launch");
    check(api, cu!(api.cuMemcpyHtoDAsync_v2(dg, dc as usize as *const c_void, bytes, stream)), "captured HtoDAsync");
    let mut graph: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamEndCapture(stream, &mut graph)), "cuStreamEndCapture");
    let mut exec: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphInstantiateWithFlags(&mut exec, graph, 0)), "cuGraphInstantiate");
    check(api, cu!(api.cuGraphLaunch(exec, stream)), "cuGraphLaunch");
    check(api, cu!(api.cuStreamSynchronize(stream)), "cuStreamSynchronize");
    same(&download::<u32>(api, dg, n), &want, "graph copy node with a device source");

    check(api, cu!(api.cuGraphExecDestroy(exec)), "cuGraphExecDestroy");
    check(api, cu!(api.cuGraphDestroy(graph)), "cuGraphDestroy");
    check(api, cu!(api.cuStreamDestroy_v2(stream)), "cuStreamDestroy");
    for d in [da, db, dc, dd, de, dg] {
        check(api, cu!(api.cuMemFree_v2(d)), "cuMemFree");
    }
    check(api, cu!(api.cuModuleUnload(module)), "cuModuleUnload");
}

/// Asserts `got == want`, naming the first element that differs.
#[track_caller]
fn same(got: &[u32], want: &[u32], what: &str) {
    if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
        panic!("{what}: element {i} is {:#x?}, expected {:#x}", got.get(i), want[i]);
    }
    assert_eq!(got.len(), want.len(), "{what}: length");
}
