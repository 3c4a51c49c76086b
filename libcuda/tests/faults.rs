//! Faulting kernels through the C ABI (issue 17), as a CUDA program sees
//! them: `tests/fixtures/faults.ptx` (nvcc, planted bugs). A store 4 GiB
//! past an allocation makes the next synchronising call return
//! `CUDA_ERROR_ILLEGAL_ADDRESS`, and every later call of the context the
//! same, until `cuDevicePrimaryCtxReset`; then a fresh context runs kernels
//! right. A misaligned vector load is `CUDA_ERROR_MISALIGNED_ADDRESS`.
//! Copies outside an allocation are `CUDA_ERROR_INVALID_VALUE`, not a host
//! crash. A process whose kernel faults does not disturb another process
//! running kernels at the same time.
//!
//! With `PTXVK_RACECHECK=1`, a reduction missing its barrier
//! (`tests/fixtures/races.ptx`) completes and the hazard is reported on
//! standard error with its CUDA line.
//!
//! Each case runs in a child process of its own (the test runs itself with
//! `PTXVK_FAULT_CHILD=<case>`): the primary context is process-wide.

mod common;

use std::ffi::c_void;
use std::path::PathBuf;
use std::process::Command;

use common::{check, error_name, init, Api, Handle};

const CHILD: &str = "PTXVK_FAULT_CHILD";
const ILLEGAL_ADDRESS: u32 = 700;
const MISALIGNED_ADDRESS: u32 = 716;
const INVALID_VALUE: u32 = 1;

fn fixture() -> Vec<u8> {
    fixture_named("faults.ptx")
}

fn fixture_named(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(name);
    let mut text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.push(0);
    text
}

fn function(api: &Api, module: Handle, name: &str) -> Handle {
    let cname = format!("{name}\0");
    let mut f: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetFunction(&mut f, module, cname.as_ptr().cast())), name);
    f
}

fn alloc_with(api: &Api, bytes: &[u8]) -> u64 {
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, bytes.len())), "cuMemAlloc");
    check(api, cu!(api.cuMemcpyHtoD_v2(d, bytes.as_ptr().cast(), bytes.len())), "HtoD");
    d
}

fn launch(api: &Api, f: Handle, grid: u32, block: u32, params: &mut [*mut c_void]) -> u32 {
    cu!(api.cuLaunchKernel(
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
    ))
}

/// The primary context of device 0, current.
fn primary(api: &Api) -> Handle {
    let mut ctx: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuDevicePrimaryCtxRetain(&mut ctx, 0)), "cuDevicePrimaryCtxRetain");
    check(api, cu!(api.cuCtxSetCurrent(ctx)), "cuCtxSetCurrent");
    ctx
}

/// Runs `read_all` (`out[i] = in[i] + 1`) on `n` elements in the current
/// context and checks every element; returns the first bad result code.
fn read_all_right(api: &Api, n: usize, seed: u32) -> Result<(), String> {
    let mut module: Handle = std::ptr::null_mut();
    let image = fixture();
    let rc = cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast()));
    if rc != 0 {
        return Err(format!("load: {}", error_name(api, rc)));
    }
    let f = function(api, module, "read_all");
    let input: Vec<f32> =
        (0..n).map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 * 0.25).collect();
    let bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut din = alloc_with(api, &bytes);
    let mut dout = alloc_with(api, &vec![0xAB; n * 4]);
    let mut n32 = n as i32;
    let mut params: [*mut c_void; 3] =
        [(&mut dout as *mut u64).cast(), (&mut din as *mut u64).cast(), (&mut n32 as *mut i32).cast()];
    let rc = launch(api, f, n.div_ceil(128) as u32, 128, &mut params);
    if rc != 0 {
        return Err(format!("launch: {}", error_name(api, rc)));
    }
    let mut out = vec![0u8; n * 4];
    let rc = cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), dout, n * 4));
    if rc != 0 {
        return Err(format!("DtoH: {}", error_name(api, rc)));
    }
    for (i, c) in out.chunks_exact(4).enumerate() {
        let got = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        if got != input[i] + 1.0 {
            return Err(format!("out[{i}] = {got}, want {}", input[i] + 1.0));
        }
    }
    let _ = cu!(api.cuMemFree_v2(din));
    let _ = cu!(api.cuMemFree_v2(dout));
    let _ = cu!(api.cuModuleUnload(module));
    Ok(())
}

/// The child's side: prints `#key value` lines the parent checks.
fn child(case: &str) {
    let api = init();
    let _ctx = primary(api);
    let image = fixture();
    let mut module: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast())), "load");
    match case {
        "far_store" => {
            let f = function(api, module, "far_store");
            let mut out = alloc_with(api, &[0u8; 256]);
            let mut far = (1i64 << 30) + 64;
            let mut params: [*mut c_void; 2] = [(&mut out as *mut u64).cast(), (&mut far as *mut i64).cast()];
            println!("#launch {}", launch(api, f, 1, 32, &mut params));
            println!("#sync {}", cu!(api.cuCtxSynchronize()));
            println!("#again {}", cu!(api.cuCtxSynchronize()));
            let mut d = 0u64;
            println!("#alloc {}", cu!(api.cuMemAlloc_v2(&mut d, 16)));
            let mut b = [0u8; 4];
            println!("#copy {}", cu!(api.cuMemcpyDtoH_v2(b.as_mut_ptr().cast(), out, 4)));
            println!("#reset {}", cu!(api.cuDevicePrimaryCtxReset_v2(0)));
            let _ctx = primary(api);
            println!("#fresh {}", read_all_right(api, 1000, 3).err().unwrap_or_else(|| "ok".into()));
        }
        "misaligned" => {
            let f = function(api, module, "misaligned_v4");
            let mut din = alloc_with(api, &[0u8; 4 * 4 * 32 + 64]);
            let mut dout = alloc_with(api, &[0u8; 4 * 4 * 32]);
            let mut shift = 1i32;
            let mut params: [*mut c_void; 3] =
                [(&mut dout as *mut u64).cast(), (&mut din as *mut u64).cast(), (&mut shift as *mut i32).cast()];
            println!("#launch {}", launch(api, f, 1, 32, &mut params));
            println!("#sync {}", cu!(api.cuCtxSynchronize()));
        }
        "copies" => {
            let d = alloc_with(api, &[1u8; 256]);
            let host = [0u8; 512];
            let mut back = [0u8; 512];
            println!("#htod {}", cu!(api.cuMemcpyHtoD_v2(d + 128, host.as_ptr().cast(), 512)));
            println!("#dtoh {}", cu!(api.cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), d + 4096 * 1024 * 1024, 4)));
            println!("#memset {}", cu!(api.cuMemsetD8_v2(d + 200, 0, 100)));
            println!("#after {}", read_all_right(api, 100, 9).err().unwrap_or_else(|| "ok".into()));
        }
        "race" => {
            let image = fixture_named("races.ptx");
            let mut races: Handle = std::ptr::null_mut();
            check(api, cu!(api.cuModuleLoadData(&mut races, image.as_ptr().cast())), "load races.ptx");
            let f = function(api, races, "reduce_missing_sync");
            let input: Vec<u8> = (0..512u32).flat_map(|i| ((i % 7) as f32).to_le_bytes()).collect();
            let mut din = alloc_with(api, &input);
            let mut dout = alloc_with(api, &[0u8; 8]);
            let mut params: [*mut c_void; 2] = [(&mut dout as *mut u64).cast(), (&mut din as *mut u64).cast()];
            println!("#launch {}", launch(api, f, 2, 256, &mut params));
            println!("#sync {}", cu!(api.cuCtxSynchronize()));
            println!("#after {}", read_all_right(api, 100, 4).err().unwrap_or_else(|| "ok".into()));
        }
        "steady" => {
            // Runs kernels while another process faults.
            for k in 0..20 {
                if let Err(e) = read_all_right(api, 5000, k) {
                    println!("#steady {e}");
                    return;
                }
            }
            println!("#steady ok");
        }
        other => panic!("unknown case {other}"),
    }
}

/// Runs the test binary again as a child for `case`; its `#` lines.
fn spawn(case: &str) -> std::process::Child {
    spawn_with(case, &[])
}

/// [`spawn`] with more environment variables.
fn spawn_with(case: &str, env: &[(&str, &str)]) -> std::process::Child {
    let exe = std::env::current_exe().unwrap();
    Command::new(exe)
        .args(["--exact", "child_process_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, case)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn lines(child: std::process::Child) -> Vec<(String, String)> {
    lines_and_stderr(child).0
}

/// The child's `#` lines and its standard error.
fn lines_and_stderr(child: std::process::Child) -> (Vec<(String, String)>, String) {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    let lines = stdout
        .lines()
        // libtest's own text may precede the first line on the same line.
        .filter_map(|l| l.find('#').map(|i| &l[i + 1..]))
        .filter_map(|l| l.split_once(' ').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    (lines, stderr)
}

fn value<'a>(lines: &'a [(String, String)], key: &str) -> &'a str {
    lines.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("no #{key} in {lines:?}"))
}

#[test]
fn child_process_entry() {
    if let Ok(case) = std::env::var(CHILD) {
        child(&case);
    }
}

#[test]
fn illegal_address_is_sticky_until_the_context_is_reset() {
    // Another process runs kernels meanwhile, undisturbed.
    let steady = spawn("steady");
    let l = lines(spawn("far_store"));
    assert_eq!(value(&l, "launch"), "0", "the launch itself is queued");
    assert_eq!(value(&l, "sync"), ILLEGAL_ADDRESS.to_string());
    assert_eq!(value(&l, "again"), ILLEGAL_ADDRESS.to_string(), "sticky");
    assert_eq!(value(&l, "alloc"), ILLEGAL_ADDRESS.to_string(), "every call of the context fails");
    assert_eq!(value(&l, "copy"), ILLEGAL_ADDRESS.to_string());
    assert_eq!(value(&l, "reset"), "0");
    assert_eq!(value(&l, "fresh"), "ok", "a reset primary context runs kernels right");
    assert_eq!(value(&lines(steady), "steady"), "ok");
}

#[test]
fn misaligned_vector_load_is_a_misaligned_address() {
    let l = lines(spawn("misaligned"));
    assert_eq!(value(&l, "launch"), "0");
    assert_eq!(value(&l, "sync"), MISALIGNED_ADDRESS.to_string());
}

#[test]
fn copies_outside_an_allocation_are_invalid_values() {
    let l = lines(spawn("copies"));
    assert_eq!(value(&l, "htod"), INVALID_VALUE.to_string());
    assert_eq!(value(&l, "dtoh"), INVALID_VALUE.to_string());
    assert_eq!(value(&l, "memset"), INVALID_VALUE.to_string());
    assert_eq!(value(&l, "after"), "ok", "a bad copy does not fail the context");
}

#[test]
fn racecheck_reports_a_missing_barrier_and_the_launch_completes() {
    let (l, stderr) = lines_and_stderr(spawn_with("race", &[("PTXVK_RACECHECK", "1")]));
    assert_eq!(value(&l, "launch"), "0");
    assert_eq!(value(&l, "sync"), "0", "a hazard does not fail the launch");
    assert_eq!(value(&l, "after"), "ok");
    assert!(stderr.contains("========= Error: Race reported between"), "{stderr}");
    assert!(stderr.contains("races.cu:16]"), "the CUDA line of the racing accesses: {stderr}");
    assert!(stderr.contains("RACECHECK SUMMARY"), "{stderr}");
}
