//! CUDA IPC across a real process boundary: the test starts its own
//! executable again as the importing process (the `child` test below, which
//! does nothing unless `PTXVK_IPC_TEST_CHILD` names the handles).

mod common;

use std::ffi::c_int;
use std::process::Command;

use common::{check, code, init, Api, Handle, IpcHandle, Lcg};

/// `CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS`.
const IPC_EVENT_FLAGS: u32 = 0x2 | 0x4;
/// `CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED`.
const ATTR_IPC: c_int = 125;
const N: usize = 4099;

fn hex(h: &IpcHandle) -> String {
    h.reserved.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> IpcHandle {
    let mut h = IpcHandle { reserved: [0; 64] };
    for (i, b) in h.reserved.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex");
    }
    h
}

fn primary(api: &Api) -> Handle {
    let mut ctx: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuDevicePrimaryCtxRetain(&mut ctx, 0)), "cuDevicePrimaryCtxRetain");
    check(api, cu!(api.cuCtxSetCurrent(ctx)), "cuCtxSetCurrent");
    ctx
}

fn data(seed: u64) -> Vec<u32> {
    let mut rng = Lcg(seed);
    (0..N).map(|_| rng.next_u32()).collect()
}

/// The importing side: reads the parent's data, overwrites it with its
/// bitwise complement, records the shared event, and checks its errors.
#[test]
fn child() {
    let Ok(handles) = std::env::var("PTXVK_IPC_TEST_CHILD") else { return };
    let parts: Vec<&str> = handles.split(',').collect();
    let (mem, freed, event) = (unhex(parts[0]), unhex(parts[1]), unhex(parts[2]));
    let api = init();
    primary(api);
    let mut d = 0u64;
    let mut again = 0u64;
    check(api, cu!(api.cuIpcOpenMemHandle_v2(&mut d, mem, 1)), "cuIpcOpenMemHandle");
    check(api, cu!(api.cuIpcOpenMemHandle_v2(&mut again, mem, 0)), "cuIpcOpenMemHandle again");
    assert_eq!(again, d, "a second open maps the same pointer");
    assert_eq!(cu!(api.cuIpcOpenMemHandle_v2(&mut again, freed, 1)), code::INVALID_HANDLE, "a freed allocation");
    let mut seen = vec![0u32; N];
    check(api, cu!(api.cuMemcpyDtoH_v2(seen.as_mut_ptr().cast(), d, N * 4)), "cuMemcpyDtoH");
    assert!(seen == data(0x1bc), "the child reads the parent's data");
    let flipped: Vec<u32> = seen.iter().map(|v| !v).collect();
    check(api, cu!(api.cuMemcpyHtoD_v2(d, flipped.as_ptr().cast(), N * 4)), "cuMemcpyHtoD");
    let mut ev: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuIpcOpenEventHandle(&mut ev, event)), "cuIpcOpenEventHandle");
    check(api, cu!(api.cuEventRecord(ev, std::ptr::null_mut())), "cuEventRecord");
    check(api, cu!(api.cuEventSynchronize(ev)), "cuEventSynchronize");
    check(api, cu!(api.cuIpcCloseMemHandle(d)), "cuIpcCloseMemHandle");
    check(api, cu!(api.cuIpcCloseMemHandle(d)), "cuIpcCloseMemHandle of the second open");
    assert_eq!(cu!(api.cuIpcCloseMemHandle(d)), code::INVALID_VALUE, "closed twice");
    check(api, cu!(api.cuEventDestroy_v2(ev)), "cuEventDestroy");
}

#[test]
fn memory_and_events_are_shared_with_another_process() {
    let api = init();
    primary(api);
    let mut ipc = -1;
    check(api, cu!(api.cuDeviceGetAttribute(&mut ipc, ATTR_IPC, 0)), "cuDeviceGetAttribute");
    if ipc != 1 {
        eprintln!("skipped: the device cannot share memory");
        return;
    }
    let want = data(0x1bc);
    let (mut d, mut gone) = (0u64, 0u64);
    check(api, cu!(api.cuMemAlloc_v2(&mut d, N * 4)), "cuMemAlloc");
    check(api, cu!(api.cuMemAlloc_v2(&mut gone, 64)), "cuMemAlloc");
    check(api, cu!(api.cuMemcpyHtoD_v2(d, want.as_ptr().cast(), N * 4)), "cuMemcpyHtoD");
    let mut h = IpcHandle { reserved: [0; 64] };
    let mut h_gone = h;
    check(api, cu!(api.cuIpcGetMemHandle(&mut h, d)), "cuIpcGetMemHandle");
    check(api, cu!(api.cuIpcGetMemHandle(&mut h_gone, gone)), "cuIpcGetMemHandle");
    check(api, cu!(api.cuMemFree_v2(gone)), "cuMemFree");
    let mut other = h;
    assert_eq!(cu!(api.cuIpcGetMemHandle(&mut other, d + 4)), code::INVALID_VALUE, "inside an allocation");
    assert_eq!(cu!(api.cuIpcGetMemHandle(std::ptr::null_mut(), d)), code::INVALID_VALUE, "NULL handle");
    let mut p = 0u64;
    assert_eq!(cu!(api.cuIpcOpenMemHandle_v2(&mut p, h, 1)), code::INVALID_CONTEXT, "the exporting process");
    let junk = IpcHandle { reserved: [0x5a; 64] };
    assert_eq!(cu!(api.cuIpcOpenMemHandle_v2(&mut p, junk, 1)), code::INVALID_VALUE, "not a handle");
    assert_eq!(cu!(api.cuIpcCloseMemHandle(d)), code::INVALID_VALUE, "not opened by cuIpcOpenMemHandle");

    let mut ev: Handle = std::ptr::null_mut();
    let mut plain: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuEventCreate(&mut ev, IPC_EVENT_FLAGS)), "cuEventCreate");
    check(api, cu!(api.cuEventCreate(&mut plain, 0)), "cuEventCreate");
    let mut eh = IpcHandle { reserved: [0xa5; 64] };
    assert_eq!(cu!(api.cuIpcGetEventHandle(&mut eh, plain)), code::INVALID_VALUE, "not an interprocess event");
    assert_eq!(eh.reserved, [0; 64], "a handle that is not one is zeroed (Warp tests for that)");
    check(api, cu!(api.cuIpcGetEventHandle(&mut eh, ev)), "cuIpcGetEventHandle");
    let mut mine: Handle = std::ptr::null_mut();
    assert_eq!(cu!(api.cuIpcOpenEventHandle(&mut mine, eh)), code::INVALID_CONTEXT, "the exporting process");

    let status = Command::new(std::env::current_exe().expect("test executable"))
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("PTXVK_IPC_TEST_CHILD", format!("{},{},{}", hex(&h), hex(&h_gone), hex(&eh)))
        .status()
        .expect("start the child");
    assert!(status.success(), "the child's checks failed");
    // The child's record is finished (it waited for it before exiting).
    check(api, cu!(api.cuEventQuery(ev)), "cuEventQuery");
    let mut back = vec![0u32; N];
    check(api, cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), d, N * 4)), "cuMemcpyDtoH");
    let flipped: Vec<u32> = want.iter().map(|v| !v).collect();
    assert!(back == flipped, "the parent reads what the child wrote");
    check(api, cu!(api.cuEventDestroy_v2(ev)), "cuEventDestroy");
    check(api, cu!(api.cuEventDestroy_v2(plain)), "cuEventDestroy");
    check(api, cu!(api.cuMemFree_v2(d)), "cuMemFree");
}
