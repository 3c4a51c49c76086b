//! Code loading and launching the ways real clients do: fat binaries, the
//! JIT linker, libraries and kernels (`CUkernel` where a `CUfunction` is
//! expected), `cuLaunchKernelEx`, occupancy, with their error codes.

mod common;

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;

use common::{check, code, init, launch_vadd, ptx_image, Api, Ctx, Handle, LaunchAttribute, LaunchConfig, Lcg};

const CU_JIT_INFO_LOG_BUFFER: c_int = 3;
const CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: c_int = 4;
const CU_JIT_ERROR_LOG_BUFFER: c_int = 5;
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;
const CU_JIT_LOG_VERBOSE: c_int = 12;
const CU_JIT_INPUT_CUBIN: c_int = 0;
const CU_JIT_INPUT_PTX: c_int = 1;
const CU_JIT_INPUT_FATBINARY: c_int = 2;
const CU_JIT_INPUT_LIBRARY: c_int = 4;

fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn c_path(name: &str) -> Vec<u8> {
    let mut p = data_path(name).to_string_lossy().into_owned().into_bytes();
    p.push(0);
    p
}

/// Runs `vadd_f32` through function handle `f` (a `CUfunction` or a
/// `CUkernel`) with `cuLaunchKernel`, and checks the sums.
fn run_vadd(api: &Api, f: Handle, n: usize) {
    let mut rng = Lcg(n as u64);
    let a: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.next_f32()).collect();
    let (mut da, mut db, mut dc) = (0u64, 0u64, 0u64);
    for d in [&mut da, &mut db, &mut dc] {
        check(api, cu!(api.cuMemAlloc_v2(d, n * 4)), "cuMemAlloc");
    }
    check(api, cu!(api.cuMemcpyHtoD_v2(da, a.as_ptr().cast(), n * 4)), "HtoD a");
    check(api, cu!(api.cuMemcpyHtoD_v2(db, b.as_ptr().cast(), n * 4)), "HtoD b");
    check(api, launch_vadd(api, f, [da, db, dc], n, 128, std::ptr::null_mut()), "cuLaunchKernel");
    let mut c = vec![0f32; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(c.as_mut_ptr().cast(), dc, n * 4)), "DtoH");
    for i in 0..n {
        assert_eq!(c[i].to_bits(), (a[i] + b[i]).to_bits(), "c[{i}]");
    }
    for d in [da, db, dc] {
        check(api, cu!(api.cuMemFree_v2(d)), "cuMemFree");
    }
}

fn get_function(api: &Api, module: Handle) -> Handle {
    let mut f: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetFunction(&mut f, module, c"vadd_f32".as_ptr())), "cuModuleGetFunction");
    f
}

#[test]
fn fat_binaries_plain_zstd_lz4() {
    let api = init();
    let _ctx = Ctx::new(api);
    for name in ["vadd_f32.fatbin", "vadd_f32.zstd.fatbin", "vadd_f32.lz4.fatbin"] {
        let image = std::fs::read(data_path(name)).unwrap();
        let mut m: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuModuleLoadFatBinary(&mut m, image.as_ptr().cast())), name);
        run_vadd(api, get_function(api, m), 300);
        check(api, cu!(api.cuModuleUnload(m)), "unload");
        // cuModuleLoadData takes fat binaries too, and cuModuleLoad files.
        check(api, cu!(api.cuModuleLoadData(&mut m, image.as_ptr().cast())), name);
        check(api, cu!(api.cuModuleUnload(m)), "unload");
        let path = c_path(name);
        check(api, cu!(api.cuModuleLoad(&mut m, path.as_ptr().cast())), name);
        check(api, cu!(api.cuModuleUnload(m)), "unload");
    }
    // The `__fatBinC_Wrapper_t` form nvcc embeds.
    let image = std::fs::read(data_path("vadd_f32.fatbin")).unwrap();
    #[repr(C)]
    struct Wrapper {
        magic: u32,
        version: u32,
        data: *const u8,
        filename: *const c_void,
    }
    let wrapper = Wrapper { magic: 0x466243B1, version: 1, data: image.as_ptr(), filename: std::ptr::null() };
    let mut m: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadFatBinary(&mut m, (&wrapper as *const Wrapper).cast())), "wrapper");
    check(api, cu!(api.cuModuleUnload(m)), "unload");

    // Errors: NULL arguments, PTX text where a fat binary is expected, an
    // ELF image. A fat binary with only a cubin loads (see
    // `machine_code_only_fat_binaries_fail_at_their_kernels`), and every
    // name in it is `CUDA_ERROR_NO_BINARY_FOR_GPU` when its cubin cannot be read.
    assert_eq!(cu!(api.cuModuleLoadFatBinary(std::ptr::null_mut(), image.as_ptr().cast())), code::INVALID_VALUE);
    assert_eq!(cu!(api.cuModuleLoadFatBinary(&mut m, std::ptr::null())), code::INVALID_VALUE);
    let ptx = ptx_image("vadd_f32.ptx");
    assert_eq!(cu!(api.cuModuleLoadFatBinary(&mut m, ptx.as_ptr().cast())), code::NO_BINARY_FOR_GPU);
    let elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0";
    assert_eq!(cu!(api.cuModuleLoadData(&mut m, elf.as_ptr().cast())), code::INVALID_IMAGE);
    // CUDA Tile IR bytecode (cuBLASLt's half-precision GEMMs on 10.0 and newer):
    // refused as an image, not parsed as PTX text.
    let tile_ir = b"\x7fTileIR\0\xff\xff\xff\xff\xff\xff\xff\xff\x10\0\0\0\x01\0\0\0";
    assert_eq!(cu!(api.cuModuleLoadData(&mut m, tile_ir.as_ptr().cast())), code::INVALID_IMAGE);
    let mut cubin_only = image.clone();
    cubin_only[16] = 2; // entry kind: ELF (the payload is PTX text, not an ELF file)
    check(api, cu!(api.cuModuleLoadFatBinary(&mut m, cubin_only.as_ptr().cast())), "cubin only");
    let mut f: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuModuleGetFunction(&mut f, m, c"anything".as_ptr())), code::NO_BINARY_FOR_GPU);
    check(api, cu!(api.cuModuleUnload(m)), "unload");
    let missing = c"/nonexistent/x.ptx";
    assert_eq!(cu!(api.cuModuleLoad(&mut m, missing.as_ptr())), code::FILE_NOT_FOUND);
}

/// A link state with error and info logs.
struct Link {
    state: Handle,
    error: Box<[u8; 4096]>,
    info: Box<[u8; 4096]>,
    _options: Box<[c_int; 5]>,
    values: Box<[*mut c_void; 5]>,
}

impl Link {
    fn new(api: &Api) -> Link {
        let mut error = Box::new([0u8; 4096]);
        let mut info = Box::new([0u8; 4096]);
        let options = Box::new([
            CU_JIT_ERROR_LOG_BUFFER,
            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            CU_JIT_INFO_LOG_BUFFER,
            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            CU_JIT_LOG_VERBOSE,
        ]);
        let mut values = Box::new([
            error.as_mut_ptr().cast(),
            4096usize as *mut c_void,
            info.as_mut_ptr().cast(),
            4096usize as *mut c_void,
            std::ptr::without_provenance_mut(1), // CU_JIT_LOG_VERBOSE = 1
        ]);
        let mut state: Handle = std::ptr::null_mut();
        let rc = cu!(api.cuLinkCreate_v2(5, options.as_ptr(), values.as_mut_ptr(), &mut state));
        check(api, rc, "cuLinkCreate");
        Link { state, error, info, _options: options, values }
    }

    fn error_log(&self) -> String {
        CStr::from_bytes_until_nul(&self.error[..]).unwrap().to_string_lossy().into_owned()
    }

    fn info_log(&self) -> String {
        CStr::from_bytes_until_nul(&self.info[..]).unwrap().to_string_lossy().into_owned()
    }

    fn add(&self, api: &Api, kind: c_int, data: &[u8], name: &CStr) -> u32 {
        let null_opts: *const c_int = std::ptr::null();
        cu!(api.cuLinkAddData_v2(
            self.state,
            kind,
            data.as_ptr() as *mut c_void,
            data.len(),
            name.as_ptr(),
            0,
            null_opts,
            std::ptr::null_mut()
        ))
    }
}

const HELPER_PTX: &str = ".version 8.0\n.target sm_80\n.address_size 64\n\
.visible .func (.param .b32 r) twice(.param .b32 x)\n{\n.reg .b32 %r<3>;\n\
ld.param.b32 %r1, [x];\nadd.s32 %r2, %r1, %r1;\nst.param.b32 [r], %r2;\nret;\n}\n";

const CALLER_PTX: &str = ".version 8.0\n.target sm_80\n.address_size 64\n\
.extern .func (.param .b32 r) twice\n(\n.param .b32 x\n)\n;\n\
.visible .entry call_twice(.param .u64 out)\n{\n.reg .b32 %r<3>;\n.reg .b64 %rd<2>;\n\
ld.param.u64 %rd1, [out];\nmov.u32 %r1, 21;\n{\n.param .b32 p0;\n.param .b32 r0;\n\
st.param.b32 [p0], %r1;\ncall.uni (r0), twice, (p0);\nld.param.b32 %r2, [r0];\n}\n\
st.global.u32 [%rd1], %r2;\nret;\n}\n";

/// Loads `image` (PTX or a fat binary of `vadd_f32`) with
/// `cuLibraryLoadData` and no options, checks that it lists one kernel,
/// `vadd_f32`, and no `nope`; the library and that kernel.
fn vadd_library(api: &Api, image: &[u8]) -> (Handle, Handle) {
    let null_opts: *const c_int = std::ptr::null();
    let null_vals: *mut *mut c_void = std::ptr::null_mut();
    let mut lib: Handle = std::ptr::null_mut();
    let rc =
        cu!(api.cuLibraryLoadData(&mut lib, image.as_ptr().cast(), null_opts, null_vals, 0, null_opts, null_vals, 0));
    check(api, rc, "cuLibraryLoadData");
    let mut count = 0;
    check(api, cu!(api.cuLibraryGetKernelCount(&mut count, lib)), "kernel count");
    assert_eq!(count, 1);
    let mut kernel: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuLibraryGetKernel(&mut kernel, lib, c"vadd_f32".as_ptr())), "cuLibraryGetKernel");
    let mut other: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuLibraryGetKernel(&mut other, lib, c"nope".as_ptr())), code::NOT_FOUND);
    (lib, kernel)
}

/// A fat binary that holds an sm_80 cubin of `vadd_f32` and no PTX (as
/// cuBLAS, cuRAND and PyTorch carry many next to those with PTX) loads as
/// NVIDIA's driver loads it; its kernel fails where it is looked up or
/// launched, with `CUDA_ERROR_NO_BINARY_FOR_GPU`, and a name it does not
/// have with `CUDA_ERROR_NOT_FOUND`.
#[test]
fn machine_code_only_fat_binaries_fail_at_their_kernels() {
    let api = init();
    let _ctx = Ctx::new(api);
    let image = std::fs::read(data_path("vadd_f32.cubin.fatbin")).unwrap();
    let mut m: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadFatBinary(&mut m, image.as_ptr().cast())), "cuModuleLoadFatBinary");
    let mut f: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuModuleGetFunction(&mut f, m, c"vadd_f32".as_ptr())), code::NO_BINARY_FOR_GPU);
    assert_eq!(cu!(api.cuModuleGetFunction(&mut f, m, c"nope".as_ptr())), code::NOT_FOUND);
    check(api, cu!(api.cuModuleUnload(m)), "unload");

    // As a library: the kernel is listed and has a handle; what needs code fails.
    let (lib, kernel) = vadd_library(api, &image);
    assert_eq!(cu!(api.cuKernelGetFunction(&mut f, kernel)), code::NO_BINARY_FOR_GPU);
    let mut args: [*mut c_void; 0] = [];
    let rc = cu!(api.cuLaunchKernel(
        kernel,
        1,
        1,
        1,
        32,
        1,
        1,
        0,
        std::ptr::null_mut(),
        args.as_mut_ptr(),
        std::ptr::null_mut()
    ));
    assert_eq!(rc, code::NO_BINARY_FOR_GPU);
    check(api, cu!(api.cuLibraryUnload(lib)), "cuLibraryUnload");
}

/// A library of a fat binary with PTX loads lazily (as NVIDIA's driver by
/// default): its entries are listed at once, the module is translated at
/// the first use of a kernel, and `CUDA_MODULE_LOADING=EAGER` is reported
/// back through `cuModuleGetLoadingMode` only when set.
#[test]
fn fat_binary_libraries_load_lazily() {
    let api = init();
    let _ctx = Ctx::new(api);
    let mut mode = 0;
    check(api, cu!(api.cuModuleGetLoadingMode(&mut mode)), "cuModuleGetLoadingMode");
    let eager = std::env::var("CUDA_MODULE_LOADING").is_ok_and(|v| v.eq_ignore_ascii_case("EAGER"));
    assert_eq!(mode, if eager { 1 } else { 2 });
    let image = std::fs::read(data_path("vadd_f32.zstd.fatbin")).unwrap();
    let (lib, kernel) = vadd_library(api, &image);
    run_vadd(api, kernel, 1000);
    check(api, cu!(api.cuLibraryUnload(lib)), "cuLibraryUnload");
}

#[test]
fn linker_ptx_inputs_and_errors() {
    let api = init();
    let _ctx = Ctx::new(api);

    // One PTX input: the output loads and runs.
    let link = Link::new(api);
    let ptx = ptx_image("vadd_f32.ptx");
    assert_eq!(link.add(api, CU_JIT_INPUT_PTX, &ptx, c"vadd.ptx"), code::SUCCESS);
    let (mut cubin, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
    check(api, cu!(api.cuLinkComplete(link.state, &mut cubin, &mut size)), "cuLinkComplete");
    assert!(size > 0 && !cubin.is_null());
    assert!(link.info_log().contains("linked 1 PTX input"), "{}", link.info_log());
    assert_eq!(link.values[3] as usize, link.info_log().len(), "info log size written back");
    let mut m: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut m, cubin)), "load linked");
    check(api, cu!(api.cuLinkDestroy(link.state)), "cuLinkDestroy");
    run_vadd(api, get_function(api, m), 1000);
    check(api, cu!(api.cuModuleUnload(m)), "unload");

    // Two inputs, one calling a function the other defines; and a fat binary
    // input through cuLinkAddFile.
    let link = Link::new(api);
    assert_eq!(link.add(api, CU_JIT_INPUT_PTX, CALLER_PTX.as_bytes(), c"caller"), code::SUCCESS);
    assert_eq!(link.add(api, CU_JIT_INPUT_PTX, HELPER_PTX.as_bytes(), c"helper"), code::SUCCESS);
    let fat = c_path("vadd_f32.lz4.fatbin");
    let null_opts: *const c_int = std::ptr::null();
    let rc = cu!(api.cuLinkAddFile_v2(
        link.state,
        CU_JIT_INPUT_FATBINARY,
        fat.as_ptr().cast(),
        0,
        null_opts,
        std::ptr::null_mut()
    ));
    check(api, rc, "cuLinkAddFile(fatbin)");
    check(api, cu!(api.cuLinkComplete(link.state, &mut cubin, &mut size)), "complete 3 inputs");
    check(api, cu!(api.cuModuleLoadData(&mut m, cubin)), "load linked");
    check(api, cu!(api.cuLinkDestroy(link.state)), "destroy");
    run_vadd(api, get_function(api, m), 100);
    let mut f: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetFunction(&mut f, m, c"call_twice".as_ptr())), "call_twice");
    let mut out = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut out, 4)), "alloc");
    let mut params: [*mut c_void; 1] = [(&mut out as *mut u64).cast()];
    let rc = cu!(api.cuLaunchKernel(
        f,
        1,
        1,
        1,
        1,
        1,
        1,
        0,
        std::ptr::null_mut(),
        params.as_mut_ptr(),
        std::ptr::null_mut()
    ));
    check(api, rc, "launch call_twice");
    let mut v = 0u32;
    check(api, cu!(api.cuMemcpyDtoH_v2((&mut v as *mut u32).cast(), out, 4)), "DtoH");
    assert_eq!(v, 42);
    check(api, cu!(api.cuModuleUnload(m)), "unload");

    // Cubins and libraries are refused with a reason; bad PTX fails at
    // completion with the diagnostics in the error log.
    let link = Link::new(api);
    let elf = b"\x7fELF\x02\x01\x01\0";
    assert_eq!(link.add(api, CU_JIT_INPUT_CUBIN, elf, c"k.cubin"), code::INVALID_IMAGE);
    assert!(link.error_log().contains("cubin") && link.error_log().contains("PTX"), "{}", link.error_log());
    assert_eq!(link.add(api, CU_JIT_INPUT_LIBRARY, b"!<arch>\n", c"libx.a"), code::INVALID_IMAGE);
    assert_eq!(link.add(api, 99, b"x", c"x"), code::INVALID_VALUE);
    assert_eq!(link.add(api, CU_JIT_INPUT_PTX, b".version 8.0\n.target sm_80\nbogus;\n", c"bad.ptx"), code::SUCCESS);
    assert_eq!(cu!(api.cuLinkComplete(link.state, &mut cubin, &mut size)), code::INVALID_PTX);
    assert!(link.error_log().contains("bad.ptx:"), "{}", link.error_log());
    assert_eq!(cu!(api.cuLinkComplete(link.state, std::ptr::null_mut(), &mut size)), code::INVALID_VALUE);
    check(api, cu!(api.cuLinkDestroy(link.state)), "destroy");
    assert_eq!(cu!(api.cuLinkDestroy(link.state)), code::INVALID_HANDLE, "double destroy");
    assert_eq!(cu!(api.cuLinkComplete(link.state, &mut cubin, &mut size)), code::INVALID_HANDLE);
    let mut s: Handle = std::ptr::null_mut();
    let null_opts: *const c_int = std::ptr::null();
    assert_eq!(cu!(api.cuLinkCreate_v2(0, null_opts, std::ptr::null_mut(), std::ptr::null_mut())), code::INVALID_VALUE);
    // Nothing added.
    check(api, cu!(api.cuLinkCreate_v2(0, null_opts, std::ptr::null_mut(), &mut s)), "create");
    assert_eq!(cu!(api.cuLinkComplete(s, &mut cubin, &mut size)), code::INVALID_VALUE);
    check(api, cu!(api.cuLinkDestroy(s)), "destroy");
}

#[test]
fn library_and_kernels() {
    let api = init();
    let ctx = Ctx::new(api);
    let ptx = ptx_image("vadd_f32.ptx");
    let null_opts: *const c_int = std::ptr::null();
    let null_vals: *mut *mut c_void = std::ptr::null_mut();
    let (mut lib, kernel) = vadd_library(api, &ptx);
    let mut again: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuLibraryGetKernel(&mut again, lib, c"vadd_f32".as_ptr())), "again");
    assert_eq!(kernel, again, "one handle per kernel");
    let mut name: *const c_char = std::ptr::null();
    check(api, cu!(api.cuKernelGetName(&mut name, kernel)), "cuKernelGetName");
    // SAFETY: the library returned a NUL-terminated string that lives with the kernel.
    assert_eq!(unsafe { CStr::from_ptr(name) }.to_str().unwrap(), "vadd_f32");

    // The CUkernel itself launches, as numba does it.
    run_vadd(api, kernel, 513);
    // Its CUfunction too.
    let mut f: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuKernelGetFunction(&mut f, kernel)), "cuKernelGetFunction");
    run_vadd(api, f, 77);
    let mut m: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuLibraryGetModule(&mut m, lib)), "cuLibraryGetModule");
    let mut f2: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetFunction(&mut f2, m, c"vadd_f32".as_ptr())), "function of the module");
    assert_eq!(f, f2);

    // Attributes through the kernel and through the function it stands for.
    let mut v = 0;
    check(api, cu!(api.cuKernelGetAttribute(&mut v, 0, kernel, 0)), "cuKernelGetAttribute");
    assert!(v >= 256);
    check(api, cu!(api.cuFuncGetAttribute(&mut v, 5, kernel)), "cuFuncGetAttribute(CUkernel)");
    assert_eq!(v, 80);
    check(api, cu!(api.cuKernelSetAttribute(8, 2048, kernel, 0)), "cuKernelSetAttribute");
    check(api, cu!(api.cuFuncGetAttribute(&mut v, 8, f)), "max dynamic shared");
    assert_eq!(v, 2048);
    assert_eq!(cu!(api.cuKernelGetAttribute(&mut v, 0, kernel, 7)), code::INVALID_DEVICE);
    assert_eq!(cu!(api.cuKernelGetAttribute(std::ptr::null_mut(), 0, kernel, 0)), code::INVALID_VALUE);
    check(api, cu!(api.cuFuncSetCacheConfig(kernel, 1)), "cache config");
    assert_eq!(cu!(api.cuFuncSetCacheConfig(kernel, 9)), code::INVALID_VALUE);
    let (mut off, mut size) = (0usize, 0usize);
    check(api, cu!(api.cuFuncGetParamInfo(f, 3, &mut off, &mut size)), "param info");
    assert_eq!((off, size), (24, 4));
    assert_eq!(cu!(api.cuFuncGetParamInfo(f, 4, &mut off, &mut size)), code::INVALID_VALUE);
    let (mut count, mut kcount) = (0usize, 0usize);
    check(api, cu!(api.cuFuncGetParamCount(f, &mut count)), "cuFuncGetParamCount");
    check(api, cu!(api.cuKernelGetParamCount(kernel, &mut kcount)), "cuKernelGetParamCount");
    assert_eq!((count, kcount), (4, 4), "vadd_f32 has 4 parameters");
    assert_eq!(cu!(api.cuFuncGetParamCount(f, std::ptr::null_mut())), code::INVALID_VALUE);

    // cuLaunchKernelEx with attributes; a cluster is refused.
    let n = 256usize;
    let (mut da, mut dc) = (0u64, 0u64);
    check(api, cu!(api.cuMemAlloc_v2(&mut da, n * 4)), "alloc");
    check(api, cu!(api.cuMemAlloc_v2(&mut dc, n * 4)), "alloc");
    let ones = vec![1.5f32; n];
    check(api, cu!(api.cuMemcpyHtoD_v2(da, ones.as_ptr().cast(), n * 4)), "HtoD");
    let mut count32 = n as u32;
    let mut params: [*mut c_void; 4] = [
        (&mut da as *mut u64).cast(),
        (&mut da as *mut u64).cast(),
        (&mut dc as *mut u64).cast(),
        (&mut count32 as *mut u32).cast(),
    ];
    let priority = LaunchAttribute { id: 8, pad: [0; 4], value: [0; 8] };
    let mut config = LaunchConfig {
        grid: [2, 1, 1],
        block: [128, 1, 1],
        shared: 0,
        stream: std::ptr::null_mut(),
        attrs: &priority,
        num_attrs: 1,
    };
    let null: *mut *mut c_void = std::ptr::null_mut();
    let cfg = (&config as *const LaunchConfig).cast::<c_void>();
    check(api, cu!(api.cuLaunchKernelEx(cfg, kernel, params.as_mut_ptr(), null)), "cuLaunchKernelEx");
    let mut c = vec![0f32; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(c.as_mut_ptr().cast(), dc, n * 4)), "DtoH");
    assert!(c.iter().all(|&x| x == 3.0));
    let mut cluster = LaunchAttribute { id: 4, pad: [0; 4], value: [0; 8] };
    cluster.value[0] = 2 | (1 << 32);
    cluster.value[1] = 1;
    config.attrs = &cluster;
    let cfg = (&config as *const LaunchConfig).cast::<c_void>();
    assert_eq!(cu!(api.cuLaunchKernelEx(cfg, kernel, params.as_mut_ptr(), null)), code::NOT_SUPPORTED);
    assert_eq!(cu!(api.cuLaunchKernelEx(std::ptr::null(), kernel, params.as_mut_ptr(), null)), code::INVALID_VALUE);
    config.num_attrs = 0;
    config.stream = 0xbad0 as Handle;
    let cfg = (&config as *const LaunchConfig).cast::<c_void>();
    assert_eq!(cu!(api.cuLaunchKernelEx(cfg, kernel, params.as_mut_ptr(), null)), code::INVALID_HANDLE);

    // Occupancy answers from the limits.
    let mut blocks = 0;
    check(api, cu!(api.cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut blocks, kernel, 128, 0)), "occupancy");
    assert!(blocks >= 1);
    let (mut grid, mut block) = (0, 0);
    check(api, cu!(api.cuOccupancyMaxPotentialBlockSize(&mut grid, &mut block, f, None, 0, 0)), "potential");
    assert!(block >= 32 && block % 32 == 0 && grid >= 1, "{grid} {block}");
    assert_eq!(cu!(api.cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut blocks, kernel, 0, 0)), code::INVALID_VALUE);

    // Unloading invalidates the library and its kernels.
    check(api, cu!(api.cuLibraryUnload(lib)), "cuLibraryUnload");
    assert_eq!(cu!(api.cuLibraryUnload(lib)), code::INVALID_HANDLE);
    assert_eq!(cu!(api.cuKernelGetFunction(&mut f, kernel)), code::INVALID_HANDLE);
    assert_eq!(cu!(api.cuLibraryGetKernel(&mut again, lib, c"vadd_f32".as_ptr())), code::INVALID_HANDLE);

    // Load errors reach the JIT error log of cuLibraryLoadData.
    let mut log = [0u8; 1024];
    let opts = [CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut vals: [*mut c_void; 2] = [log.as_mut_ptr().cast(), 1024usize as *mut c_void];
    let bad = b".version 8.0\n.target sm_80\nnonsense\n\0";
    let rc = cu!(api.cuLibraryLoadData(
        &mut lib,
        bad.as_ptr().cast(),
        opts.as_ptr(),
        vals.as_mut_ptr(),
        2,
        null_opts,
        null_vals,
        0
    ));
    assert_eq!(rc, code::INVALID_PTX);
    assert!(CStr::from_bytes_until_nul(&log).unwrap().to_str().unwrap().contains("<ptx>:3"));
    let rc = cu!(api.cuLibraryLoadData(
        std::ptr::null_mut(),
        ptx.as_ptr().cast(),
        null_opts,
        null_vals,
        0,
        null_opts,
        null_vals,
        0
    ));
    assert_eq!(rc, code::INVALID_VALUE);
    let path = c_path("vadd_f32.ptx");
    let rc = cu!(api.cuLibraryLoadFromFile(
        &mut lib,
        path.as_ptr().cast(),
        null_opts,
        null_vals,
        0,
        null_opts,
        null_vals,
        0
    ));
    check(api, rc, "cuLibraryLoadFromFile");
    check(api, cu!(api.cuLibraryUnload(lib)), "unload");
    drop(ctx);
}

/// A fat binary container of PTX entries (sm_80), as `fatbinary` writes one.
fn ptx_container(texts: &[&str]) -> Vec<u8> {
    let mut body = Vec::new();
    for text in texts {
        let mut payload = text.as_bytes().to_vec();
        payload.push(0);
        payload.resize(payload.len().div_ceil(8) * 8, 0);
        let mut e = vec![0u8; 64];
        e[0..2].copy_from_slice(&1u16.to_le_bytes()); // PTX
        e[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        e[4..8].copy_from_slice(&64u32.to_le_bytes());
        e[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        e[28..32].copy_from_slice(&80u32.to_le_bytes());
        e[40..48].copy_from_slice(&0x11u64.to_le_bytes()); // 64-bit, Linux
        body.extend_from_slice(&e);
        body.extend_from_slice(&payload);
    }
    let mut c = Vec::new();
    c.extend_from_slice(&0xBA55_ED50u32.to_le_bytes());
    c.extend_from_slice(&1u16.to_le_bytes());
    c.extend_from_slice(&16u16.to_le_bytes());
    c.extend_from_slice(&(body.len() as u64).to_le_bytes());
    c.extend_from_slice(&body);
    c
}

const RDC_KERNEL: &str = "\
.version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b32 ret) scramble(.param .b32 x);
.visible .entry apply(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    .reg .pred %p;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.u32 %r2, %r3, %r4, %r2;
    setp.ge.u32 %p, %r2, %r1;
    @%p bra DONE;
    mul.wide.u32 %rd3, %r2, 4;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.u32 %r5, [%rd4];
    {
        .param .b32 a;
        .param .b32 r;
        st.param.b32 [a], %r5;
        call.uni (r), scramble, (a);
        ld.param.b32 %r6, [r];
    }
    add.u64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r6;
DONE:
    ret;
}
";

const RDC_FUNCTION: &str = "\
.version 8.0
.target sm_80
.address_size 64
.visible .func (.param .b32 ret) scramble(.param .b32 x)
{
    .reg .b32 %r<4>;
    ld.param.b32 %r1, [x];
    mul.lo.u32 %r2, %r1, -1640531535;
    shr.u32 %r3, %r1, 7;
    xor.b32 %r2, %r2, %r3;
    st.param.b32 [ret], %r2;
    ret;
}
";

/// `nvcc -rdc=true`: a version 2 `__fatBinC_Wrapper_t` whose device-linked
/// container is empty (PTX-only targets) lists the pre-link containers of
/// each file; loading it links their PTX.
#[test]
fn separate_compilation_wrapper_links_prelink_ptx() {
    let api = init();
    let _ctx = Ctx::new(api);
    let unit_a = ptx_container(&[RDC_KERNEL]);
    let unit_b = ptx_container(&[RDC_FUNCTION]);
    let linked = ptx_container(&[]);
    let list = [unit_a.as_ptr(), unit_b.as_ptr(), std::ptr::null()];
    #[repr(C)]
    struct Wrapper {
        magic: u32,
        version: u32,
        data: *const u8,
        list: *const *const u8,
    }
    let wrapper = Wrapper { magic: 0x466243B1, version: 2, data: linked.as_ptr(), list: list.as_ptr() };
    let mut m: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut m, (&wrapper as *const Wrapper).cast())), "cuModuleLoadData v2");
    let mut f: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetFunction(&mut f, m, c"apply".as_ptr())), "cuModuleGetFunction");

    let n = 3000usize;
    let mut rng = Lcg(2024);
    let input: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let (mut din, mut dout) = (0u64, 0u64);
    check(api, cu!(api.cuMemAlloc_v2(&mut din, n * 4)), "alloc");
    check(api, cu!(api.cuMemAlloc_v2(&mut dout, n * 4)), "alloc");
    check(api, cu!(api.cuMemcpyHtoD_v2(din, input.as_ptr().cast(), n * 4)), "HtoD");
    check(api, cu!(api.cuMemsetD32_v2(dout, 0xDEAD_BEEF, n)), "poison");
    let mut count = n as u32;
    let mut params: [*mut c_void; 3] =
        [(&mut din as *mut u64).cast(), (&mut dout as *mut u64).cast(), (&mut count as *mut u32).cast()];
    let grid = n.div_ceil(128) as u32;
    let rc = cu!(api.cuLaunchKernel(
        f,
        grid,
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
    let mut out = vec![0u32; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), dout, n * 4)), "DtoH");
    for (i, (&x, &y)) in input.iter().zip(&out).enumerate() {
        assert_eq!(y, x.wrapping_mul(0x9E37_79B1) ^ (x >> 7), "element {i}");
    }
    check(api, cu!(api.cuModuleUnload(m)), "unload");

    // Version 1 of the same wrapper points at the empty container only.
    let v1 = Wrapper { version: 1, ..wrapper };
    assert_eq!(cu!(api.cuModuleLoadData(&mut m, (&v1 as *const Wrapper).cast())), code::INVALID_IMAGE);
    check(api, cu!(api.cuMemFree_v2(din)), "free");
    check(api, cu!(api.cuMemFree_v2(dout)), "free");
}
