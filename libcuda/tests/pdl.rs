//! Programmatic dependent launch (issue 21, item 4): nvcc's
//! `cudaTriggerProgrammaticLaunchCompletion()` and
//! `cudaGridDependencySynchronize()` (`griddepcontrol.launch_dependents` and
//! `.wait`, `data/pdl.cu`) with `cuLaunchKernelEx` and
//! `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`: the dependent
//! grid sees every write of its prerequisite, those after the trigger
//! included; the events of `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT` and
//! `CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT` are recorded and order
//! another stream's work after the kernel's.

mod common;

use std::ffi::c_void;

use common::{check, code, init, ptx_image, Api, Ctx, Handle, LaunchAttribute, LaunchConfig, Lcg};

const PROGRAMMATIC_STREAM_SERIALIZATION: i32 = 6;
const PROGRAMMATIC_EVENT: i32 = 7;
const LAUNCH_COMPLETION_EVENT: i32 = 12;
const POISON: i32 = 0x5A5A_5A5A;
const BLOCK: u32 = 128;

fn functions(api: &Api) -> (Handle, Handle) {
    let image = ptx_image("pdl.ptx");
    let mut module: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast())), "pdl.ptx");
    let (mut p, mut c): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
    check(api, cu!(api.cuModuleGetFunction(&mut p, module, c"producer".as_ptr())), "producer");
    check(api, cu!(api.cuModuleGetFunction(&mut c, module, c"consumer".as_ptr())), "consumer");
    (p, c)
}

fn attr(id: i32, value: [u64; 2]) -> LaunchAttribute {
    LaunchAttribute { id, pad: [0; 4], value: [value[0], value[1], 0, 0, 0, 0, 0, 0] }
}

fn alloc_poisoned(api: &Api, words: usize) -> u64 {
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, words * 4)), "cuMemAlloc");
    check(api, cu!(api.cuMemsetD32_v2(d, POISON as u32, words)), "poison");
    d
}

fn download(api: &Api, d: u64, n: usize) -> Vec<i32> {
    let mut out = vec![0i32; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), d, n * 4)), "DtoH");
    out
}

/// The host model: what `consumer` writes after `producer` ran with `salt`.
fn reference(n: usize, salt: i32) -> Vec<i32> {
    let first = |i: usize| (i as i32).wrapping_mul(3).wrapping_add(salt);
    let second = |i: usize| ((i as i32) ^ salt).wrapping_sub(7);
    (0..n).map(|i| first(i).wrapping_mul(5).wrapping_add(second(n - 1 - i))).collect()
}

/// Producer then dependent consumer, rounds back to back on one stream
/// (each round's producer overwrites the buffer the previous consumer
/// read), on the null stream and on a created one.
#[test]
fn dependent_grid_sees_every_write_of_its_prerequisite() {
    let api = init();
    let _ctx = Ctx::new(api);
    let (producer, consumer) = functions(api);
    let mut created: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut created, 1)), "cuStreamCreate");
    let mut rng = Lcg(0x9D1);
    for stream in [std::ptr::null_mut(), created] {
        let n = 3000 + (rng.next_u32() % 2000) as usize;
        let blocks = n.div_ceil(BLOCK as usize) as u32;
        let buf = alloc_poisoned(api, 2 * n);
        let rounds = 4;
        let outs: Vec<u64> = (0..rounds).map(|_| alloc_poisoned(api, n + 8)).collect();
        let salts: Vec<i32> = (0..rounds).map(|_| rng.next_u32() as i32 >> 4).collect();
        for r in 0..rounds {
            let (mut b, mut n32, mut salt) = (buf, n as i32, salts[r]);
            let mut params: [*mut c_void; 3] =
                [(&mut b as *mut u64).cast(), (&mut n32 as *mut i32).cast(), (&mut salt as *mut i32).cast()];
            let rc = cu!(api.cuLaunchKernel(
                producer,
                blocks,
                1,
                1,
                BLOCK,
                1,
                1,
                0,
                stream,
                params.as_mut_ptr(),
                std::ptr::null_mut()
            ));
            check(api, rc, "producer");
            let serialization = attr(PROGRAMMATIC_STREAM_SERIALIZATION, [1, 0]);
            let config = LaunchConfig {
                grid: [blocks, 1, 1],
                block: [BLOCK, 1, 1],
                shared: 0,
                stream,
                attrs: &serialization,
                num_attrs: 1,
            };
            let (mut b, mut o, mut n32) = (buf, outs[r], n as i32);
            let mut params: [*mut c_void; 3] =
                [(&mut b as *mut u64).cast(), (&mut o as *mut u64).cast(), (&mut n32 as *mut i32).cast()];
            let cfg = (&config as *const LaunchConfig).cast::<c_void>();
            check(api, cu!(api.cuLaunchKernelEx(cfg, consumer, params.as_mut_ptr(), std::ptr::null_mut())), "consumer");
        }
        check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
        for r in 0..rounds {
            let got = download(api, outs[r], n + 8);
            let want = reference(n, salts[r]);
            let bad = (0..n).find(|&i| got[i] != want[i]);
            assert!(bad.is_none(), "round {r}: first difference at {bad:?}");
            assert!(got[n..].iter().all(|&x| x == POISON), "round {r}: wrote past the output");
        }
        for d in outs.into_iter().chain([buf]) {
            check(api, cu!(api.cuMemFree_v2(d)), "cuMemFree");
        }
    }
}

/// The events of the programmatic and launch-completion attributes are
/// recorded (they get a time after the launch), and a second stream that
/// waits on either copies the consumer's output only after the consumer
/// has written it; an event that is not live is
/// `CUDA_ERROR_INVALID_HANDLE`, unknown flags `CUDA_ERROR_INVALID_VALUE`,
/// and neither launches anything.
#[test]
fn programmatic_and_completion_events_are_recorded() {
    let api = init();
    let _ctx = Ctx::new(api);
    let (producer, consumer) = functions(api);
    let (mut s1, mut s2): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
    check(api, cu!(api.cuStreamCreate(&mut s1, 1)), "cuStreamCreate");
    check(api, cu!(api.cuStreamCreate(&mut s2, 1)), "cuStreamCreate");
    let n = 4096usize;
    let blocks = n.div_ceil(BLOCK as usize) as u32;
    let buf = alloc_poisoned(api, 2 * n);
    for id in [PROGRAMMATIC_EVENT, LAUNCH_COMPLETION_EVENT] {
        let out = alloc_poisoned(api, n);
        let (mut event, mut start): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
        check(api, cu!(api.cuEventCreate(&mut event, 0)), "cuEventCreate");
        check(api, cu!(api.cuEventCreate(&mut start, 0)), "cuEventCreate");
        check(api, cu!(api.cuEventRecord(start, s1)), "cuEventRecord");
        let salt = 77 + id;
        let (mut b, mut n32, mut sl) = (buf, n as i32, salt);
        let mut params: [*mut c_void; 3] =
            [(&mut b as *mut u64).cast(), (&mut n32 as *mut i32).cast(), (&mut sl as *mut i32).cast()];
        let rc = cu!(api.cuLaunchKernel(
            producer,
            blocks,
            1,
            1,
            BLOCK,
            1,
            1,
            0,
            s1,
            params.as_mut_ptr(),
            std::ptr::null_mut()
        ));
        check(api, rc, "producer");
        let (mut b, mut o, mut n32) = (buf, out, n as i32);
        let mut params: [*mut c_void; 3] =
            [(&mut b as *mut u64).cast(), (&mut o as *mut u64).cast(), (&mut n32 as *mut i32).cast()];
        let launch = |attrs: &[LaunchAttribute], params: &mut [*mut c_void; 3]| {
            let config = LaunchConfig {
                grid: [blocks, 1, 1],
                block: [BLOCK, 1, 1],
                shared: 0,
                stream: s1,
                attrs: attrs.as_ptr(),
                num_attrs: attrs.len() as u32,
            };
            let cfg = (&config as *const LaunchConfig).cast::<c_void>();
            cu!(api.cuLaunchKernelEx(cfg, consumer, params.as_mut_ptr(), std::ptr::null_mut()))
        };
        // A dead event and unknown flags are refused before anything runs.
        let dead = 0x10usize as Handle;
        assert_eq!(launch(&[attr(id, [dead as u64, 0])], &mut params), code::INVALID_HANDLE);
        assert_eq!(launch(&[attr(id, [event as u64, 0x40])], &mut params), code::INVALID_VALUE);
        check(api, launch(&[attr(id, [event as u64, 0])], &mut params), "consumer with event");
        check(api, cu!(api.cuStreamWaitEvent(s2, event, 0)), "cuStreamWaitEvent");
        let mut got = vec![0i32; n];
        let rc = cu!(api.cuMemcpyDtoHAsync_v2(got.as_mut_ptr().cast(), out, n * 4, s2));
        check(api, rc, "copy on the second stream");
        check(api, cu!(api.cuStreamSynchronize(s2)), "cuStreamSynchronize");
        assert!(got == reference(n, salt), "attribute {id}: the second stream did not wait for the consumer");
        // The event was recorded: it has a time after `start` (an event
        // never recorded has none: CUDA_ERROR_INVALID_HANDLE).
        check(api, cu!(api.cuEventSynchronize(event)), "cuEventSynchronize");
        let mut ms = -1f32;
        check(api, cu!(api.cuEventElapsedTime(&mut ms, start, event)), "cuEventElapsedTime");
        assert!(ms >= 0.0, "attribute {id}: the event's time {ms} ms is before the launch");
        check(api, cu!(api.cuCtxSynchronize()), "cuCtxSynchronize");
        check(api, cu!(api.cuEventDestroy_v2(event)), "cuEventDestroy");
        check(api, cu!(api.cuEventDestroy_v2(start)), "cuEventDestroy");
    }
}
