//! The shared memory of the reported architecture (issue 21, item 3): the
//! device attributes of an sm_80 part (48 KiB per block, 163 KiB opted in,
//! 164 KiB per multiprocessor) whatever Workgroup memory the Vulkan device
//! has, CUDA's opt-in rule for dynamic shared memory beyond 48 KiB, and
//! nvcc kernels (`tests/fixtures/shared_spill.cu`) with 48 KiB of static
//! and 160 KiB of dynamic shared memory giving the host model's results.

mod common;

use std::ffi::{c_int, c_void};

use common::{check, code, init, Api, Ctx, Handle, Lcg};

const PTX: &str = include_str!("../../tests/fixtures/shared_spill.ptx");
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
const MAX_DYNAMIC_SHARED: c_int = 8;
const POISON: u32 = 0xC0DE_F00D;

fn function(api: &Api, name: &std::ffi::CStr) -> Handle {
    let mut image = PTX.as_bytes().to_vec();
    image.push(0);
    let mut module: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast())), "shared_spill.ptx");
    let mut f: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetFunction(&mut f, module, name.as_ptr())), "cuModuleGetFunction");
    f
}

fn device_attribute(api: &Api, a: c_int) -> c_int {
    let mut v = -1;
    check(api, cu!(api.cuDeviceGetAttribute(&mut v, a, 0)), "cuDeviceGetAttribute");
    v
}

fn alloc_words(api: &Api, data: &[u32], extra: usize) -> u64 {
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, (data.len() + extra) * 4)), "cuMemAlloc");
    check(api, cu!(api.cuMemsetD32_v2(d, POISON, data.len() + extra)), "poison");
    if !data.is_empty() {
        check(api, cu!(api.cuMemcpyHtoD_v2(d, data.as_ptr().cast(), data.len() * 4)), "HtoD");
    }
    d
}

fn download(api: &Api, d: u64, n: usize) -> Vec<u32> {
    let mut out = vec![0u32; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), d, n * 4)), "DtoH");
    out
}

#[test]
fn attributes_and_kernels_of_an_sm80_part() {
    let api = init();
    let _ctx = Ctx::new(api);
    assert_eq!((device_attribute(api, 75), device_attribute(api, 76)), (8, 0), "the default compute capability");
    assert_eq!(device_attribute(api, 8), 48 * 1024, "MAX_SHARED_MEMORY_PER_BLOCK");
    assert_eq!(device_attribute(api, 97), 163 * 1024, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
    assert_eq!(device_attribute(api, 81), 164 * 1024, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR");

    // 48 KiB of static shared memory needs no opt-in.
    let f = function(api, c"static48");
    let words = 12288usize;
    let mut rng = Lcg(4848);
    let input: Vec<u32> = (0..words * 2).map(|_| rng.next_u32()).collect();
    let (din, dout) = (alloc_words(api, &input, 0), alloc_words(api, &[], words * 2 + 8));
    let mut args: [*mut c_void; 2] = [(&din as *const u64).cast_mut().cast(), (&dout as *const u64).cast_mut().cast()];
    let (stream, no_extra): (Handle, *mut *mut c_void) = (std::ptr::null_mut(), std::ptr::null_mut());
    check(api, cu!(api.cuLaunchKernel(f, 2, 1, 1, 256, 1, 1, 0, stream, args.as_mut_ptr(), no_extra)), "static48");
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
    let got = download(api, dout, words * 2 + 8);
    for b in 0..2 {
        let tile = &input[b * words..(b + 1) * words];
        for i in 0..words {
            let o = tile[(i as u32).wrapping_mul(7919).wrapping_add(b as u32) as usize % words];
            assert_eq!(got[b * words + i], tile[i] ^ o.rotate_left(5), "static48 block {b} word {i}");
        }
    }
    assert!(got[words * 2..].iter().all(|&w| w == POISON), "static48 wrote past its output");

    // Dynamic shared memory beyond 48 KiB only opted in, and at most 163 KiB.
    let f = function(api, c"isolation");
    let mut v = -1;
    check(api, cu!(api.cuFuncGetAttribute(&mut v, MAX_DYNAMIC_SHARED, f)), "MAX_DYNAMIC_SHARED_SIZE_BYTES");
    assert_eq!(v, 48 * 1024, "the default dynamic limit of a kernel without static shared memory");
    assert_eq!(cu!(api.cuFuncSetAttribute(f, MAX_DYNAMIC_SHARED, 163 * 1024 + 4)), code::INVALID_VALUE);
    let (blocks, threads, slots) = (40usize, 64usize, 4i32);
    let dwords: usize = 160 * 1024 / 4;
    let dout = alloc_words(api, &[], blocks * threads + 8);
    let words_arg = dwords as i32;
    let mut args: [*mut c_void; 3] = [
        (&dout as *const u64).cast_mut().cast(),
        (&words_arg as *const i32).cast_mut().cast(),
        (&slots as *const i32).cast_mut().cast(),
    ];
    let shared = (dwords * 4) as u32;
    let launch = |args: &mut [*mut c_void; 3]| {
        cu!(api.cuLaunchKernel(
            f,
            blocks as u32,
            1,
            1,
            threads as u32,
            1,
            1,
            shared,
            stream,
            args.as_mut_ptr(),
            no_extra
        ))
    };
    assert_eq!(launch(&mut args), code::INVALID_VALUE, "160 KiB without opting in");
    check(api, cu!(api.cuFuncSetAttribute(f, MAX_DYNAMIC_SHARED, 163 * 1024)), "opt in to 163 KiB");
    check(api, launch(&mut args), "isolation with 160 KiB");
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
    let got = download(api, dout, blocks * threads + 8);
    for b in 0..blocks {
        for t in 0..threads {
            let u = (t + 1) % threads;
            let want: u32 = (0..slots as usize).map(|k| (b * 1000 + u * 7 + k) as u32).sum();
            assert_eq!(got[b * threads + t], want, "isolation block {b} thread {t}");
        }
    }
    assert!(got[blocks * threads..].iter().all(|&w| w == POISON), "isolation wrote past its output");
}
