//! Error log management (`cuLogs*`): each failing call leaves a message
//! with its reason, delivered to registered callbacks, kept for the dump
//! functions and written to `CUDA_LOG_FILE`. The log is per process, so the
//! API is checked in one test, and `CUDA_LOG_FILE` in a child process.

mod common;

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::Mutex;

use common::{check, code, init, Api};

/// Messages the callback received: level and text.
static RECEIVED: Mutex<Vec<(c_int, String)>> = Mutex::new(Vec::new());

unsafe extern "C" fn on_log(data: *mut c_void, level: c_int, message: *mut c_char, length: usize) {
    assert_eq!(data as usize, 0x5eed, "user data");
    // SAFETY: the driver passes `length` readable bytes, NUL-terminated.
    let text = unsafe { std::slice::from_raw_parts(message.cast::<u8>(), length) };
    // SAFETY: as above.
    assert_eq!(unsafe { *message.add(length) }, 0, "NUL after the message");
    RECEIVED.lock().unwrap().push((level, String::from_utf8_lossy(text).into_owned()));
}

/// A call that fails with `CUDA_ERROR_INVALID_VALUE`, naming `attr`.
fn fail(api: &Api, attr: c_int) {
    let mut v = 0;
    assert_eq!(cu!(api.cuDeviceGetAttribute(&mut v, attr, 0)), code::INVALID_VALUE);
}

fn dump(api: &Api, it: Option<&mut c_uint>, room: usize) -> (u32, String) {
    let mut buf = vec![0x7fu8; room.max(1)];
    let mut size = room;
    let it = it.map_or(std::ptr::null_mut(), |i| i as *mut c_uint);
    let rc = cu!(api.cuLogsDumpToMemory(it, buf.as_mut_ptr().cast(), &mut size, 0));
    if rc != code::SUCCESS {
        assert_eq!(size, 0, "a failed dump reports 0 bytes");
        return (rc, String::new());
    }
    assert_eq!(buf[size], 0, "the dump is NUL-terminated");
    (rc, String::from_utf8(buf[..size].to_vec()).expect("UTF-8"))
}

#[test]
fn failing_calls_are_logged() {
    let api = init();
    let mut it: c_uint = 0;
    check(api, cu!(api.cuLogsCurrent(&mut it, 0)), "cuLogsCurrent");
    let start = it;
    let mut handle: *mut c_void = std::ptr::null_mut();
    type Callback = unsafe extern "C" fn(*mut c_void, c_int, *mut c_char, usize);
    let callback: Callback = on_log;
    check(api, cu!(api.cuLogsRegisterCallback(Some(callback), 0x5eed as *mut c_void, &mut handle)), "register");
    assert!(!handle.is_null());

    fail(api, 9001);
    {
        let got = RECEIVED.lock().unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 0, "CU_LOG_LEVEL_ERROR");
        let m = &got[0].1;
        assert!(m.starts_with('[') && m.contains("][CUDA][E][cuDeviceGetAttribute] "), "{m}");
        assert!(m.contains("9001") && m.ends_with("(CUDA_ERROR_INVALID_VALUE)"), "{m}");
    }
    // The dump from the iterator holds that message, and advances it.
    let (rc, text) = dump(api, Some(&mut it), 4096);
    assert_eq!(rc, code::SUCCESS);
    assert_eq!(text, format!("{}\n", RECEIVED.lock().unwrap()[0].1));
    assert_eq!(it, start + 1);
    let (rc, text) = dump(api, Some(&mut it), 4096);
    assert_eq!((rc, text.as_str()), (code::SUCCESS, ""), "nothing new");

    // Three more; a buffer with room for about one and a half keeps the
    // newest behind a line saying the others are left out.
    for a in [9002, 9003, 9004] {
        fail(api, a);
    }
    let whole = RECEIVED.lock().unwrap()[1..].iter().map(|m| m.1.clone()).collect::<Vec<_>>();
    assert_eq!(whole.len(), 3);
    let mut it2 = it;
    let (rc, text) = dump(api, Some(&mut it2), whole[2].len() * 2 + 60);
    assert_eq!(rc, code::SUCCESS);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("earlier messages are left out"), "{text}");
    assert_eq!(*lines.last().unwrap(), whole[2], "the newest message comes last");
    assert!(lines.len() < 4, "{text}");
    assert_eq!(it2, start + 4);
    // Too small for any message: CUDA_ERROR_INVALID_VALUE, size 0.
    let mut it3 = it;
    assert_eq!(dump(api, Some(&mut it3), 20).0, code::INVALID_VALUE);
    // Into a file (appended), from the earlier iterator: all three.
    let path = std::env::temp_dir().join(format!("ptxvk-logs-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut it4 = it;
    check(api, cu!(api.cuLogsDumpToFile(&mut it4, cpath.as_ptr(), 0)), "cuLogsDumpToFile");
    let file = std::fs::read_to_string(&path).expect("the dump file");
    assert!(file.starts_with(&format!("{}\n{}\n{}\n", whole[0], whole[1], whole[2])), "{file}");
    // The failures of the two dumps above came after the three (the too
    // small buffer's and no other): the file ends with that one.
    assert!(file.lines().last().unwrap().contains("[cuLogsDumpToMemory]"), "{file}");
    let _ = std::fs::remove_file(&path);

    // Argument errors, each itself logged.
    let mut size = 8usize;
    assert_eq!(
        cu!(api.cuLogsDumpToMemory(std::ptr::null_mut(), std::ptr::null_mut(), &mut size, 0)),
        code::INVALID_VALUE
    );
    assert_eq!(cu!(api.cuLogsCurrent(&mut it, 1)), code::INVALID_VALUE, "flags");
    assert_eq!(cu!(api.cuLogsDumpToFile(&mut it, std::ptr::null(), 0)), code::INVALID_VALUE, "NULL path");
    assert_eq!(cu!(api.cuLogsRegisterCallback(None, std::ptr::null_mut(), &mut handle)), code::INVALID_VALUE);
    let (_, all) = dump(api, None, 1 << 16);
    assert!(all.contains("[cuLogsDumpToMemory] buffer or size is NULL"), "{all}");
    assert!(all.contains("[cuLogsCurrent] flags must be 0"), "{all}");

    // Unregistered: no more deliveries; a second unregistration fails.
    let before = RECEIVED.lock().unwrap().len();
    check(api, cu!(api.cuLogsUnregisterCallback(handle)), "unregister");
    fail(api, 9005);
    assert_eq!(cu!(api.cuLogsUnregisterCallback(handle)), code::INVALID_VALUE);
    assert_eq!(RECEIVED.lock().unwrap().len(), before, "delivered after unregistration");
}

/// `CUDA_ERROR_NOT_READY` answers a query and reports no misuse: polling a
/// busy stream leaves nothing in the log (in a child process: the log is
/// per process).
#[test]
fn queries_that_are_not_ready_are_not_logged() {
    if common::in_own_process("queries_that_are_not_ready_are_not_logged", "PTXVK_TEST_NOT_READY_CHILD").is_some() {
        return;
    }
    let api = init();
    let _ctx = common::Ctx::new(api);
    let mut stream: common::Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut stream, 1)), "stream");
    let words = 8usize << 20;
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, words * 4)), "alloc");
    let mut start: c_uint = 0;
    check(api, cu!(api.cuLogsCurrent(&mut start, 0)), "cuLogsCurrent");
    for v in 0..8 {
        check(api, cu!(api.cuMemsetD32Async(d, v, words, stream)), "queued memset");
    }
    let mut not_ready = 0;
    loop {
        match cu!(api.cuStreamQuery(stream)) {
            code::NOT_READY => not_ready += 1,
            rc => {
                check(api, rc, "cuStreamQuery");
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    assert!(not_ready > 0, "the stream was never busy: nothing was checked");
    let (rc, text) = dump(api, Some(&mut start), 4096);
    assert_eq!((rc, text.as_str()), (code::SUCCESS, ""), "{not_ready} not-ready answers");
}

/// `CUDA_LOG_FILE=<path>`: each message is appended to the file as it is
/// made (run in a child process: the variable is read once per process).
#[test]
fn cuda_log_file_receives_each_message() {
    const CHILD: &str = "PTXVK_TEST_LOG_FILE_CHILD";
    if let Some(path) = std::env::var_os(CHILD) {
        let api = init();
        fail(api, 9101);
        fail(api, 9102);
        let text = std::fs::read_to_string(&path).expect("CUDA_LOG_FILE written");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].contains("[cuDeviceGetAttribute]") && lines[0].contains("9101"), "{text}");
        assert!(lines[1].contains("9102"), "{text}");
        return;
    }
    let path = std::env::temp_dir().join(format!("ptxvk-log-file-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let exe = std::env::current_exe().expect("test executable");
    let out = std::process::Command::new(exe)
        .args(["--exact", "cuda_log_file_receives_each_message", "--nocapture", "--test-threads=1"])
        .env(CHILD, &path)
        .env("CUDA_LOG_FILE", &path)
        .output()
        .expect("run the child");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
