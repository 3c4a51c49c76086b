//! Cooperative launches and grid-wide synchronisation: nvcc's inline
//! `grid.sync()` (`data/grid_sync.cu`) through `cuLaunchCooperativeKernel`
//! and `cuLaunchKernelEx` with `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`, the
//! `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE` check against occupancy x
//! multiprocessors, and the trap of a grid sync in a launch that is not
//! cooperative.

mod common;

use std::ffi::{c_int, c_void};

use common::{check, code, init, ptx_image, Api, Ctx, Handle, LaunchAttribute, LaunchConfig, Lcg};

/// `CUDA_ERROR_LAUNCH_FAILED`.
const LAUNCH_FAILED: u32 = 719;
/// `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE`.
const COOPERATIVE_LAUNCH_TOO_LARGE: u32 = 720;
/// `CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`.
const ATTR_MULTIPROCESSOR_COUNT: c_int = 16;
/// `CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`.
const ATTR_COOPERATIVE_LAUNCH: c_int = 95;
/// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`.
const LAUNCH_ATTRIBUTE_COOPERATIVE: c_int = 2;
const POISON: i32 = 0x5A5A_5A5A;
const BLOCK: u32 = 64;

fn grid_rows(api: &Api) -> Handle {
    let image = ptx_image("grid_sync.ptx");
    let mut module: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast())), "grid_sync.ptx");
    let mut f: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetFunction(&mut f, module, c"grid_rows".as_ptr())), "grid_rows");
    f
}

fn attribute(api: &Api, attr: c_int) -> c_int {
    let mut v = -1;
    check(api, cu!(api.cuDeviceGetAttribute(&mut v, attr, 0)), "cuDeviceGetAttribute");
    v
}

/// The CPU model of `grid_rows`: row r from row r-1 read backwards.
fn reference(first: &[i32], rows: usize) -> Vec<i32> {
    let cols = first.len();
    let mut m = first.to_vec();
    for r in 1..rows {
        for c in 0..cols {
            let v = m[(r - 1) * cols + (cols - 1 - c)].wrapping_mul(3).wrapping_add(c as i32);
            m.push(v);
        }
    }
    m
}

/// A matrix whose first row is random and whose other rows are poisoned.
fn upload_matrix(api: &Api, d: u64, first: &[i32], rows: usize) {
    let mut m = first.to_vec();
    m.resize(first.len() * rows, POISON);
    check(api, cu!(api.cuMemcpyHtoD_v2(d, m.as_ptr().cast(), m.len() * 4)), "HtoD");
}

fn download(api: &Api, d: u64, n: usize) -> Vec<i32> {
    let mut out = vec![0i32; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), d, n * 4)), "DtoH");
    out
}

#[test]
fn nvcc_grid_sync() {
    let api = init();
    let _ctx = Ctx::new(api);
    let f = grid_rows(api);
    let cooperative = attribute(api, ATTR_COOPERATIVE_LAUNCH);
    let sms = attribute(api, ATTR_MULTIPROCESSOR_COUNT);
    let mut per_sm = 0;
    check(api, cu!(api.cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut per_sm, f, BLOCK as c_int, 0)), "occupancy");
    assert!(sms >= 1 && per_sm >= 1, "{sms} multiprocessors, {per_sm} blocks each");
    let max = if cooperative == 1 { (sms * per_sm) as u32 } else { 1 };

    let rows = 48usize;
    let cols = (max * BLOCK) as usize - 5;
    let mut rng = Lcg(0xC0FE);
    let first: Vec<i32> = (0..cols).map(|_| rng.next_u32() as i32 >> 8).collect();
    let want = reference(&first, rows);
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, rows * cols * 4)), "cuMemAlloc");
    let (mut pm, mut pr, mut pc) = (d, rows as i32, cols as i32);
    let mut params: [*mut c_void; 3] =
        [(&mut pm as *mut u64).cast(), (&mut pr as *mut i32).cast(), (&mut pc as *mut i32).cast()];
    let (null, no_extra): (Handle, *mut *mut c_void) = (std::ptr::null_mut(), std::ptr::null_mut());

    // cuLaunchCooperativeKernel with as many blocks as may run at once.
    upload_matrix(api, d, &first, rows);
    let rc = cu!(api.cuLaunchCooperativeKernel(f, max, 1, 1, BLOCK, 1, 1, 0, null, params.as_mut_ptr()));
    check(api, rc, "cuLaunchCooperativeKernel");
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
    let got = download(api, d, rows * cols);
    let bad = (0..got.len()).find(|&i| got[i] != want[i]);
    assert!(bad.is_none(), "{max} blocks: first difference at {bad:?} (row {:?})", bad.map(|i| i / cols));

    // One block more does not fit.
    let rc = cu!(api.cuLaunchCooperativeKernel(f, max + 1, 1, 1, BLOCK, 1, 1, 0, null, params.as_mut_ptr()));
    let expected = if cooperative == 1 { COOPERATIVE_LAUNCH_TOO_LARGE } else { code::NOT_SUPPORTED };
    assert_eq!(rc, expected, "{} blocks", max + 1);

    // cuLaunchKernelEx with the cooperative attribute, the grid in y.
    upload_matrix(api, d, &first, rows);
    let attr = LaunchAttribute { id: LAUNCH_ATTRIBUTE_COOPERATIVE, pad: [0; 4], value: [1, 0, 0, 0, 0, 0, 0, 0] };
    let config =
        LaunchConfig { grid: [max, 1, 1], block: [BLOCK, 1, 1], shared: 0, stream: null, attrs: &attr, num_attrs: 1 };
    let cfg = (&config as *const LaunchConfig).cast::<c_void>();
    check(api, cu!(api.cuLaunchKernelEx(cfg, f, params.as_mut_ptr(), no_extra)), "cuLaunchKernelEx");
    check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
    assert!(download(api, d, rows * cols) == want, "cuLaunchKernelEx: wrong result");
    let config = LaunchConfig { grid: [max + 1, 1, 1], ..config };
    let cfg = (&config as *const LaunchConfig).cast::<c_void>();
    assert_eq!(cu!(api.cuLaunchKernelEx(cfg, f, params.as_mut_ptr(), no_extra)), expected);
}

/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
const LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: c_int = 4;
/// `CUDA_ERROR_INVALID_CLUSTER_SIZE`.
const INVALID_CLUSTER_SIZE: u32 = 912;
/// `CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH`.
const ATTR_CLUSTER_LAUNCH: c_int = 120;

/// The cluster occupancy queries (cuBLAS 13's `cublasLtCreate` asks
/// `cuOccupancyMaxActiveClusters` on Hopper and later): clusters of one
/// block are the resident blocks; larger clusters cannot run here
/// (`CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH` is 0, their launch is refused), so
/// none is resident; without a cluster dimension the query is an error, as
/// documented for functions that require no cluster size.
#[test]
fn cluster_occupancy() {
    let api = init();
    let _ctx = Ctx::new(api);
    let f = grid_rows(api);
    assert_eq!(attribute(api, ATTR_CLUSTER_LAUNCH), 0, "cluster launch");
    let sms = attribute(api, ATTR_MULTIPROCESSOR_COUNT);
    let mut per_sm = 0;
    check(api, cu!(api.cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut per_sm, f, BLOCK as c_int, 0)), "occupancy");
    let null: Handle = std::ptr::null_mut();
    let cluster = |dims: [u32; 3]| LaunchAttribute {
        id: LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value: [u64::from(dims[0]) | u64::from(dims[1]) << 32, u64::from(dims[2]), 0, 0, 0, 0, 0, 0],
    };
    let query = |attrs: &[LaunchAttribute], block: u32| -> (u32, c_int, u32, c_int) {
        let config = LaunchConfig {
            grid: [8, 1, 1],
            block: [block, 1, 1],
            shared: 0,
            stream: null,
            attrs: attrs.as_ptr(),
            num_attrs: attrs.len() as u32,
        };
        let cfg = (&config as *const LaunchConfig).cast::<c_void>();
        let (mut clusters, mut size) = (-1, -1);
        let rc = cu!(api.cuOccupancyMaxActiveClusters(&mut clusters, f, cfg));
        let rs = cu!(api.cuOccupancyMaxPotentialClusterSize(&mut size, f, cfg));
        (rc, clusters, rs, size)
    };
    assert_eq!(query(&[cluster([1, 1, 1])], BLOCK), (0, sms * per_sm, 0, 1), "clusters of one block");
    assert_eq!(query(&[cluster([2, 1, 1])], BLOCK), (0, 0, 0, 1), "clusters of two blocks");
    assert_eq!(query(&[cluster([1, 2, 2])], BLOCK), (0, 0, 0, 1), "clusters of four blocks");
    let (rc, _, rs, size) = query(&[], BLOCK);
    assert_eq!((rc, rs, size), (INVALID_CLUSTER_SIZE, 0, 1), "no cluster dimension");
    assert_eq!(query(&[cluster([0, 1, 1])], BLOCK).0, INVALID_CLUSTER_SIZE, "a zero cluster dimension");
    // A block the function cannot run.
    assert_eq!(query(&[cluster([1, 1, 1])], 4096), (0, 0, 0, 0), "4096 threads");
    assert_eq!(cu!(api.cuOccupancyMaxActiveClusters(std::ptr::null_mut(), f, std::ptr::null())), code::INVALID_VALUE);
    let mut n = 0;
    assert_eq!(cu!(api.cuOccupancyMaxActiveClusters(&mut n, f, std::ptr::null())), code::INVALID_VALUE);
    // No function: the device's limits alone (cuBLAS 13 asks so), which for
    // blocks of 256 threads are `grid_rows`' (it has no static shared memory).
    let config = LaunchConfig {
        grid: [8, 1, 1],
        block: [256, 1, 1],
        shared: 0,
        stream: null,
        attrs: &cluster([1, 1, 1]),
        num_attrs: 1,
    };
    let cfg = (&config as *const LaunchConfig).cast::<c_void>();
    let mut per_sm_256 = 0;
    check(api, cu!(api.cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut per_sm_256, f, 256, 0)), "occupancy");
    assert_eq!(cu!(api.cuOccupancyMaxActiveClusters(&mut n, null, cfg)), 0);
    assert_eq!(n, sms * per_sm_256, "no function, clusters of one block of 256 threads");
    let mut size = -1;
    assert_eq!(cu!(api.cuOccupancyMaxPotentialClusterSize(&mut size, null, cfg)), 0);
    assert_eq!(size, 1, "no function");
}

/// Set in the child process of [`grid_sync_without_cooperative_launch_traps`].
const CHILD: &str = "PTXVK_COOPERATIVE_TRAP_CHILD";

/// nvcc's `grid.sync()` traps when the launch gave no grid workspace (a
/// launch that is not cooperative), as on NVIDIA's hardware. In a child
/// process: the failure is sticky, and the other test must have lavapipe's
/// threads to itself.
#[test]
fn grid_sync_without_cooperative_launch_traps() {
    if let Some((stdout, stderr)) = common::in_own_process("grid_sync_without_cooperative_launch_traps", CHILD) {
        let text = format!("{stdout}{stderr}");
        assert!(text.contains("#trapped"), "child failed:\n{text}");
        return;
    }
    let api = init();
    let _ctx = Ctx::new(api);
    let f = grid_rows(api);
    let (rows, cols) = (4usize, BLOCK as usize);
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, rows * cols * 4)), "cuMemAlloc");
    let (mut pm, mut pr, mut pc) = (d, rows as i32, cols as i32);
    let mut params: [*mut c_void; 3] =
        [(&mut pm as *mut u64).cast(), (&mut pr as *mut i32).cast(), (&mut pc as *mut i32).cast()];
    let (null, no_extra): (Handle, *mut *mut c_void) = (std::ptr::null_mut(), std::ptr::null_mut());
    let rc = cu!(api.cuLaunchKernel(f, 1, 1, 1, BLOCK, 1, 1, 0, null, params.as_mut_ptr(), no_extra));
    check(api, rc, "cuLaunchKernel");
    assert_eq!(cu!(api.cuCtxSynchronize()), LAUNCH_FAILED);
    println!("#trapped");
}
