//! Real kernels through the driver API: load PTX, launch, compare with a CPU
//! computation.

mod common;

use std::ffi::{c_int, c_void};

use common::{check, code, init, ptx_image, Api, Ctx, Handle, Lcg};

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

    let (mut pa, mut pb, mut pc, mut pn) = (da, db, dc, n as i32);
    let mut params: [*mut c_void; 4] = [
        (&mut pa as *mut u64).cast(),
        (&mut pb as *mut u64).cast(),
        (&mut pc as *mut u64).cast(),
        (&mut pn as *mut i32).cast(),
    ];
    let block = 256u32;
    let grid = n.div_ceil(block as usize) as u32;
    let rc = cu!(api.cuLaunchKernel(
        f,
        grid,
        1,
        1,
        block,
        1,
        1,
        0,
        std::ptr::null_mut(),
        params.as_mut_ptr(),
        std::ptr::null_mut()
    ));
    check(api, rc, "cuLaunchKernel");
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
    let (mut pa, mut pb, mut pc, mut pn) = (da, db, dc, n as i32);
    let mut params: [*mut c_void; 4] = [
        (&mut pa as *mut u64).cast(),
        (&mut pb as *mut u64).cast(),
        (&mut pc as *mut u64).cast(),
        (&mut pn as *mut i32).cast(),
    ];
    let rc = cu!(api.cuLaunchKernel(
        f,
        n.div_ceil(256) as u32,
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
