//! Faulting kernels (issue 17): nvcc's `tests/fixtures/faults.cu`, kernels
//! with planted memory bugs. With the fault checks (the default on
//! lavapipe) an access outside every allocation, outside the block's shared
//! or the thread's local memory, or misaligned, does not happen: the launch
//! fails with the CUDA error NVIDIA reports (illegal or misaligned
//! address), the error names the kernel, the access, the thread and the PTX
//! and CUDA source line, it sticks to the context, and a new context runs
//! the next kernel right. The memcheck (exact allocations) also catches an
//! off-by-one inside a memory block, negative indices and use after free,
//! and reports every faulting thread.

mod common;

use common::{assert_clean, download_u32, poisoned, setup, upload, upload_u32, Lcg, POISON};
use ptxvk_runtime::{Context, DeviceSelector, Error, FaultMode};

const PTX: &str = include_str!("../../tests/fixtures/faults.ptx");

fn context_with(mode: FaultMode) -> Context {
    setup();
    Context::with_fault_mode(DeviceSelector::Default, Some(mode)).expect("create context")
}

/// Launches `kernel` and synchronises: the synchronisation's result.
fn run(ctx: &Context, kernel: &str, grid: u32, block: u32, shared: u32, params: &[&[u8]]) -> Result<(), Error> {
    let m = ctx.load_module(PTX, "faults.ptx").expect("load faults.ptx");
    let f = m.function(kernel).unwrap();
    let packed = f.pack_params(params).unwrap();
    ctx.launch(&f, [grid, 1, 1], [block, 1, 1], shared, &packed).expect("launch is queued");
    ctx.synchronize()
}

fn floats(n: usize, seed: u64) -> Vec<u32> {
    let mut g = Lcg(seed);
    (0..n).map(|_| ((g.next_u32() % 2000) as f32 / 8.0 - 100.0).to_bits()).collect()
}

/// The context is failed for good: every later synchronising call returns the same error.
fn assert_sticky(ctx: &Context, first: &Error) {
    let again = ctx.synchronize().expect_err("the error sticks to the context");
    assert_eq!(std::mem::discriminant(&again), std::mem::discriminant(first), "{again}");
    let mut b = [0u8; 4];
    assert!(ctx.copy_dtoh(&mut b, ctx.alloc(4).unwrap_or(0)).is_err() || ctx.synchronize().is_err());
}

/// A new context on the same device runs `read_all` exactly.
fn assert_fresh_context_works() {
    let ctx = common::context();
    let n = 300usize;
    let data = floats(n, 5);
    let din = upload_u32(&ctx, &data);
    let dout = poisoned(&ctx, n + 4);
    run(&ctx, "read_all", 3, 128, 0, &[&dout.to_le_bytes(), &din.to_le_bytes(), &(n as i32).to_le_bytes()])
        .expect("a new context runs kernels");
    let got = download_u32(&ctx, dout, n + 4);
    for i in 0..n {
        assert_eq!(got[i], (f32::from_bits(data[i]) + 1.0).to_bits(), "read_all[{i}]");
    }
    assert!(got[n..].iter().all(|&w| w == POISON));
    assert_clean(&ctx);
}

#[test]
fn store_far_past_the_end_is_an_illegal_address() {
    let ctx = context_with(FaultMode::Checks);
    let out = poisoned(&ctx, 64);
    // 4 GiB past the end: outside every allocation.
    let far = (1i64 << 30) + 64;
    let err =
        run(&ctx, "far_store", 1, 32, 0, &[&out.to_le_bytes(), &far.to_le_bytes()]).expect_err("the launch fails");
    let Error::IllegalAddress(msg) = &err else { panic!("want an illegal address, got {err}") };
    assert!(msg.contains("far_store"), "{msg}");
    assert!(msg.contains("write of size 4 bytes"), "{msg}");
    assert!(msg.contains("thread (0,0,0) in block (0,0,0)"), "{msg}");
    let want = format!("{:#x}", out + far as u64 * 4);
    assert!(msg.contains(&want), "{msg} names {want}");
    // The PTX line of the store and the CUDA line (`.loc`) of `out[far] = 7u`.
    let ptx_line = PTX.lines().position(|l| l.contains("st.global.u32") && !l.contains("//")).unwrap() + 1;
    let cu_line =
        include_str!("../../tests/fixtures/faults.cu").lines().position(|l| l.contains("out[far] = 7u")).unwrap() + 1;
    assert!(msg.contains(&format!("faults.ptx:{ptx_line}:")), "{msg} names PTX line {ptx_line}");
    assert!(msg.contains(&format!("faults.cu:{cu_line}")), "{msg} names CUDA line {cu_line}");
    assert_sticky(&ctx, &err);
    // The poisoned buffer is untouched (the store did not happen anywhere).
    drop(ctx);
    assert_fresh_context_works();
}

#[test]
fn checks_fault_only_outside_the_memory_the_process_maps() {
    // NVIDIA's driver carves small allocations from larger mappings, and
    // only an address outside every mapped page faults: a read or write
    // just past (or before) a small allocation reaches the memory next to
    // it (Taichi's sparse struct-for reads 8 bytes past a 4 KiB one). The
    // default checks allow the same; the memcheck does not.
    let ctx = context_with(FaultMode::Checks);
    let n = 1024usize;
    let data = floats(n, 23);
    let _before = upload(&ctx, &[3u8; 512]);
    let din = upload_u32(&ctx, &data);
    let dout = poisoned(&ctx, n);
    let after = poisoned(&ctx, 64);
    let params = [&dout.to_le_bytes()[..], &din.to_le_bytes(), &(n as i32).to_le_bytes()];
    run(&ctx, "off_by_one", 5, 256, 0, &params).expect("one element past a small allocation is mapped memory");
    let got = download_u32(&ctx, dout, n);
    for i in 0..n {
        assert_eq!(got[i], (f32::from_bits(data[i]) * 2.0).to_bits(), "off_by_one[{i}]");
    }
    if after == dout + 4 * n as u64 {
        // The next allocation took the store, as on NVIDIA's GPUs.
        assert_eq!(download_u32(&ctx, after, 1)[0], (f32::from_bits(data[0]) * 2.0).to_bits());
    }
    let out = poisoned(&ctx, 256);
    let params = [&out.to_le_bytes()[..], &din.to_le_bytes(), &3i32.to_le_bytes()];
    run(&ctx, "negative_index", 1, 256, 0, &params).expect("12 bytes before an allocation are mapped memory");
    let got = download_u32(&ctx, out, 256);
    for i in 3..256 {
        assert_eq!(got[i], data[i - 3], "negative_index[{i}]");
    }
    assert_clean(&ctx);

    // The memcheck reports the same store.
    let ctx = context_with(FaultMode::Memcheck);
    let din = upload_u32(&ctx, &data);
    let dout = poisoned(&ctx, n);
    let _after = poisoned(&ctx, 64);
    let params = [&dout.to_le_bytes()[..], &din.to_le_bytes(), &(n as i32).to_le_bytes()];
    let err = run(&ctx, "off_by_one", 5, 256, 0, &params).expect_err("the memcheck reports it");
    assert!(matches!(err, Error::IllegalAddress(_)), "{err}");
}

#[test]
fn checks_compare_against_few_ranges_however_many_allocations() {
    // Each range past 8 makes every checked access search a table, and
    // llvmpipe's compile time grows with the square of such code: the
    // default checks see a chunk of small allocations as one range.
    let ctx = context_with(FaultMode::Checks);
    let mut g = Lcg(0x5eed);
    let mut allocs = Vec::new();
    for _ in 0..300 {
        allocs.push(ctx.alloc(1 + u64::from(g.next_u32() % 20_000)).unwrap());
    }
    for d in allocs.drain(..).step_by(3) {
        ctx.free(d).unwrap();
    }
    let checks = ctx.fault_range_count();
    assert!((1..=8).contains(&checks), "{checks} ranges for 200 small allocations");
    let ctx = context_with(FaultMode::Memcheck);
    for _ in 0..300 {
        allocs.push(ctx.alloc(1 + u64::from(g.next_u32() % 20_000)).unwrap());
    }
    assert!(ctx.fault_range_count() >= 300, "the memcheck keeps every allocation exact");
}

#[test]
fn misaligned_vector_load() {
    let ctx = context_with(FaultMode::Checks);
    let data = floats(4 * 32 + 8, 7);
    let din = upload_u32(&ctx, &data);
    let dout = poisoned(&ctx, 4 * 32);
    let err = run(&ctx, "misaligned_v4", 1, 32, 0, &[&dout.to_le_bytes(), &din.to_le_bytes(), &1i32.to_le_bytes()])
        .expect_err("the launch fails");
    let Error::MisalignedAddress(msg) = &err else { panic!("want a misaligned address, got {err}") };
    assert!(msg.contains("misaligned_v4") && msg.contains("read"), "{msg}");
    assert!(msg.contains("and 31 more"), "every thread faults: {msg}");
    assert_sticky(&ctx, &err);
    // Aligned, the same kernel runs right.
    let ctx = context_with(FaultMode::Checks);
    let din = upload_u32(&ctx, &data);
    let dout = poisoned(&ctx, 4 * 32);
    run(&ctx, "misaligned_v4", 1, 32, 0, &[&dout.to_le_bytes(), &din.to_le_bytes(), &0i32.to_le_bytes()]).unwrap();
    assert_eq!(download_u32(&ctx, dout, 4 * 32), data[..4 * 32].to_vec());
    assert_clean(&ctx);
}

#[test]
fn shared_memory_overrun() {
    let ctx = context_with(FaultMode::Checks);
    let block = 64u32;
    let dout = poisoned(&ctx, block as usize);
    // The last thread writes 1 MiB past the block's dynamic shared memory.
    let err = run(&ctx, "shared_overrun", 2, block, block * 4, &[&dout.to_le_bytes(), &(1i32 << 18).to_le_bytes()])
        .expect_err("the launch fails");
    let Error::IllegalAddress(msg) = &err else { panic!("want an illegal address, got {err}") };
    assert!(msg.contains("__shared__ write of size 4 bytes"), "{msg}");
    assert!(msg.contains(&format!("by thread ({},0,0)", block - 1)), "{msg}");
    assert!(msg.contains("and 1 more"), "one thread in each of two blocks: {msg}");
    // In bounds (`extra` 0) the kernel runs right.
    let ctx = context_with(FaultMode::Checks);
    let dout = poisoned(&ctx, block as usize);
    run(&ctx, "shared_overrun", 1, block, block * 4, &[&dout.to_le_bytes(), &0i32.to_le_bytes()]).unwrap();
    let want: Vec<u32> = (0..block).map(|t| (t as f32).to_bits()).collect();
    assert_eq!(download_u32(&ctx, dout, block as usize), want);
}

#[test]
fn local_array_and_atomic_out_of_range() {
    let ctx = context_with(FaultMode::Checks);
    let n = 200usize;
    let mut idx: Vec<u32> = (0..n as u32).map(|i| i % 16).collect();
    idx[137] = 1 << 24;
    let didx = upload_u32(&ctx, &idx);
    let dout = poisoned(&ctx, n);
    let err =
        run(&ctx, "local_overrun", 2, 128, 0, &[&dout.to_le_bytes(), &didx.to_le_bytes(), &(n as i32).to_le_bytes()])
            .expect_err("the launch fails");
    let Error::IllegalAddress(msg) = &err else { panic!("want an illegal address, got {err}") };
    assert!(msg.contains("__local__ read of size 4 bytes") && msg.contains("thread (9,0,0) in block (1,0,0)"), "{msg}");

    let ctx = context_with(FaultMode::Checks);
    let mut keys: Vec<u32> = (0..n as u32).map(|i| (i * 7) % 32).collect();
    keys[3] = (-(1i32 << 29)) as u32;
    let dkeys = upload_u32(&ctx, &keys);
    let bins = upload_u32(&ctx, &[0; 32]);
    let err =
        run(&ctx, "histogram", 2, 128, 0, &[&bins.to_le_bytes(), &dkeys.to_le_bytes(), &(n as i32).to_le_bytes()])
            .expect_err("the launch fails");
    let Error::IllegalAddress(msg) = &err else { panic!("want an illegal address, got {err}") };
    assert!(msg.contains("atomic of size 4 bytes") && msg.contains("thread (3,0,0) in block (0,0,0)"), "{msg}");
}

#[test]
fn memcheck_reports_off_by_one_negative_index_and_use_after_free() {
    let ctx = context_with(FaultMode::Memcheck);
    let n = 1000usize;
    let data = floats(n, 11);
    let din = upload_u32(&ctx, &data);
    let dout = ctx.alloc(n as u64 * 4).unwrap();
    // Thread n writes out[n]: inside the memory block, outside the allocation.
    let err = run(&ctx, "off_by_one", 4, 256, 0, &[&dout.to_le_bytes(), &din.to_le_bytes(), &(n as i32).to_le_bytes()])
        .expect_err("the memcheck catches an off-by-one");
    let Error::IllegalAddress(msg) = &err else { panic!("want an illegal address, got {err}") };
    let (b, t) = (n / 256, n % 256);
    assert!(msg.contains(&format!("thread ({t},0,0) in block ({b},0,0)")), "{msg}");
    assert!(
        msg.contains(&format!("0 bytes after the nearest allocation at {dout:#x} of size {} bytes", n * 4)),
        "{msg}"
    );

    let ctx = context_with(FaultMode::Memcheck);
    let din = upload_u32(&ctx, &data);
    let dout = ctx.alloc(256 * 4).unwrap();
    let err = run(&ctx, "negative_index", 1, 256, 0, &[&dout.to_le_bytes(), &din.to_le_bytes(), &3i32.to_le_bytes()])
        .expect_err("the memcheck catches a negative index");
    let Error::IllegalAddress(msg) = &err else { panic!("want an illegal address, got {err}") };
    assert!(msg.contains("12 bytes before the nearest allocation") && msg.contains("and 2 more"), "{msg}");

    let ctx = context_with(FaultMode::Memcheck);
    let freed = upload_u32(&ctx, &data);
    let keep = upload(&ctx, &[1u8; 64]);
    // Allocated before the free, so the freed range is not reused.
    let dout = ctx.alloc(n as u64 * 4).unwrap();
    ctx.free(freed).unwrap();
    assert!(ctx.allocation_of(freed).is_none());
    let err = run(&ctx, "read_all", 4, 256, 0, &[&dout.to_le_bytes(), &freed.to_le_bytes(), &(n as i32).to_le_bytes()])
        .expect_err("the memcheck catches a use after free");
    let Error::IllegalAddress(msg) = &err else { panic!("want an illegal address, got {err}") };
    assert!(msg.contains("is in freed memory (use after free)"), "{msg}");
    assert!(msg.contains(&format!("an allocation at {freed:#x} of size {} bytes that was freed", n * 4)), "{msg}");
    let _ = keep;
}

#[test]
fn memcheck_searches_a_deep_table_exactly() {
    // Past 8 ranges the checks search the range table instead of scanning
    // the ranges a thread keeps (`emit/fault.rs`, `emit_search`; every
    // step's load stays inside the table, the depth a specialization
    // constant). 30 and 70 live allocations: depths 5 to 7. Every seventh
    // allocation is read in bounds exactly, and a read one element past an
    // allocation made half way through (the memcheck leaves a gap after
    // each) is caught.
    let mut g = Lcg(0xdee9);
    for extra in [30usize, 70] {
        let ctx = context_with(FaultMode::Memcheck);
        let mut live = Vec::new();
        for _ in 0..extra {
            let n = 1 + (g.next_u32() % 300) as usize;
            let data = floats(n, u64::from(g.next_u32()));
            live.push((upload_u32(&ctx, &data), n, data));
        }
        let ranges = ctx.fault_range_count();
        assert!(ranges >= extra, "{ranges} ranges for {extra} allocations");
        for (k, (din, n, data)) in live.iter().enumerate().step_by(7) {
            let dout = poisoned(&ctx, *n + 4);
            run(
                &ctx,
                "read_all",
                n.div_ceil(128) as u32,
                128,
                0,
                &[&dout.to_le_bytes(), &din.to_le_bytes(), &(*n as i32).to_le_bytes()],
            )
            .unwrap_or_else(|e| panic!("allocation {k} of {extra}, {n} elements: {e}"));
            let got = download_u32(&ctx, dout, n + 4);
            for i in 0..*n {
                assert_eq!(got[i], (f32::from_bits(data[i]) + 1.0).to_bits(), "allocation {k} of {extra}: [{i}]");
            }
            assert!(got[*n..].iter().all(|&w| w == POISON), "allocation {k} of {extra}: wrote past the end");
        }
        assert_clean(&ctx);
        // One element past an allocation in the middle of the table.
        let (din, n, _) = &live[extra / 2];
        let dout = poisoned(&ctx, *n + 8);
        let err = run(
            &ctx,
            "read_all",
            1,
            512,
            0,
            &[&dout.to_le_bytes(), &din.to_le_bytes(), &(*n as i32 + 1).to_le_bytes()],
        )
        .expect_err("the memcheck catches a read one past an allocation");
        let Error::IllegalAddress(msg) = &err else { panic!("want an illegal address, got {err}") };
        assert!(msg.contains(&format!("0 bytes after the nearest allocation at {din:#x}")), "{msg}");
    }
}

#[test]
fn checks_keep_results_exact() {
    // Every other test of the suite runs with the default checks on
    // lavapipe; this one compares a kernel with and without them.
    let n = 777usize;
    let data = floats(n, 3);
    let mut results = Vec::new();
    for mode in [FaultMode::Off, FaultMode::Checks, FaultMode::Memcheck] {
        let ctx = context_with(mode);
        let din = upload_u32(&ctx, &data);
        let dout = poisoned(&ctx, n + 8);
        run(&ctx, "off_by_one", 4, 256, 0, &[&dout.to_le_bytes(), &din.to_le_bytes(), &(n as i32 - 1).to_le_bytes()])
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let got = download_u32(&ctx, dout, n + 8);
        assert!(got[n..].iter().all(|&w| w == POISON), "{mode:?} wrote past the end");
        results.push(got);
        assert_clean(&ctx);
    }
    for (i, &got) in results[1][..n].iter().enumerate() {
        let src = if i < n - 1 { i } else { 0 };
        assert_eq!(got, (f32::from_bits(data[src]) * 2.0).to_bits(), "[{i}]");
    }
    assert_eq!(results[0], results[1]);
    assert_eq!(results[1], results[2]);
}
