//! Allocation, copies and memsets on the default device (lavapipe in CI).

mod common;

use common::{assert_clean, context, Lcg};
use ptxvk_runtime::Error;

#[test]
fn htod_dtoh_round_trip() {
    let ctx = context();
    let mut rng = Lcg(1);
    for &n in &[1usize, 3, 4, 255, 256, 4097, 1 << 20, (5 << 20) + 7] {
        let data = rng.bytes(n);
        let d = ctx.alloc(n as u64).unwrap();
        assert_eq!(d % 256, 0);
        ctx.copy_htod(d, &data).unwrap();
        let mut back = vec![0u8; n];
        ctx.copy_dtoh(&mut back, d).unwrap();
        assert_eq!(back, data, "size {n}");
        ctx.free(d).unwrap();
    }
    assert_clean(&ctx);
}

#[test]
fn large_copy_is_chunked() {
    let ctx = context();
    let n = (64usize << 20) + 12345;
    let data = Lcg(2).bytes(n);
    let d = ctx.alloc(n as u64).unwrap();
    ctx.copy_htod(d, &data).unwrap();
    let mut back = vec![0u8; n];
    ctx.copy_dtoh(&mut back, d).unwrap();
    assert!(back == data);
    ctx.free(d).unwrap();
    assert_clean(&ctx);
}

#[test]
fn interior_addresses_and_dtod() {
    let ctx = context();
    let mut rng = Lcg(3);
    let a = ctx.alloc(1000).unwrap();
    let b = ctx.alloc(1000).unwrap();
    assert_eq!(ctx.allocation_of(a + 999), Some((a, 1000)));
    assert_eq!(ctx.allocation_of(a), Some((a, 1000)));
    assert_eq!(ctx.allocation_of(a + 1000), None);
    let data = rng.bytes(1000);
    ctx.copy_htod(a, &data).unwrap();
    ctx.copy_dtod(b + 3, a + 10, 500).unwrap();
    let mut back = vec![0u8; 500];
    ctx.copy_dtoh(&mut back, b + 3).unwrap();
    assert_eq!(back, data[10..510]);

    // Overlapping moves inside one allocation behave like memmove.
    let mut model = data.clone();
    ctx.copy_dtod(a + 100, a + 50, 300).unwrap();
    model.copy_within(50..350, 100);
    ctx.copy_dtod(a + 20, a + 60, 400).unwrap();
    model.copy_within(60..460, 20);
    let mut all = vec![0u8; 1000];
    ctx.copy_dtoh(&mut all, a).unwrap();
    assert_eq!(all, model);
    ctx.free(a).unwrap();
    ctx.free(b).unwrap();
    assert_clean(&ctx);
}

#[test]
fn memsets_at_odd_offsets() {
    let ctx = context();
    let n = 4096u64;
    let d = ctx.alloc(n).unwrap();
    let mut model = Lcg(4).bytes(n as usize);
    ctx.copy_htod(d, &model).unwrap();
    let mut rng = Lcg(5);
    for _ in 0..40 {
        let kind = rng.next_u32() % 3;
        let width = 1u64 << kind;
        let start = (rng.next_u32() as u64 % 200) * width + (rng.next_u32() as u64 % 3);
        let count = rng.next_u32() as u64 % 300;
        let v = rng.next_u32();
        let pattern: Vec<u8> = match kind {
            0 => {
                ctx.memset_d8(d + start, v as u8, count).unwrap();
                vec![v as u8]
            }
            1 => {
                ctx.memset_d16(d + start, v as u16, count).unwrap();
                (v as u16).to_le_bytes().to_vec()
            }
            _ => {
                ctx.memset_d32(d + start, v, count).unwrap();
                v.to_le_bytes().to_vec()
            }
        };
        for i in 0..count * width {
            model[(start + i) as usize] = pattern[(i % width) as usize];
        }
    }
    let mut back = vec![0u8; n as usize];
    ctx.copy_dtoh(&mut back, d).unwrap();
    assert_eq!(back, model);
    ctx.free(d).unwrap();
    assert_clean(&ctx);
}

#[test]
fn error_cases() {
    let ctx = context();
    assert!(matches!(ctx.alloc(0), Err(Error::InvalidValue(_))));
    let d = ctx.alloc(100).unwrap();
    assert!(matches!(ctx.free(d + 4), Err(Error::InvalidValue(_))));
    assert!(matches!(ctx.free(12345), Err(Error::InvalidValue(_))));
    assert!(matches!(ctx.copy_htod(d + 50, &[0u8; 51]), Err(Error::InvalidValue(_))));
    assert!(matches!(ctx.copy_htod(d + 100, &[0u8; 1]), Err(Error::InvalidValue(_))));
    let mut buf = [0u8; 101];
    assert!(matches!(ctx.copy_dtoh(&mut buf, d), Err(Error::InvalidValue(_))));
    assert!(matches!(ctx.copy_dtod(d, d + 1, 100), Err(Error::InvalidValue(_))));
    assert!(matches!(ctx.memset_d32(d, 0, 26), Err(Error::InvalidValue(_))));
    assert!(matches!(ctx.memset_d32(d, 0, u64::MAX), Err(Error::InvalidValue(_))));
    assert!(matches!(ctx.alloc(u64::MAX), Err(Error::OutOfMemory)));
    let too_big = ctx.info().total_memory.saturating_mul(2).max(1 << 40);
    assert!(matches!(ctx.alloc(too_big), Err(Error::OutOfMemory)));
    // Zero-length transfers are no-ops.
    ctx.copy_htod(d, &[]).unwrap();
    ctx.copy_dtoh(&mut [], d).unwrap();
    ctx.copy_dtod(d, d, 0).unwrap();
    ctx.memset_d8(d, 0, 0).unwrap();
    ctx.memset_d32(d, 7, 25).unwrap();
    ctx.free(d).unwrap();
    assert!(matches!(ctx.free(d), Err(Error::InvalidValue(_))));
    assert!(matches!(ctx.copy_htod(d, &[1]), Err(Error::InvalidValue(_))));
    ctx.synchronize().unwrap();
    assert_clean(&ctx);
}

#[test]
fn mem_info_tracks_allocations() {
    let ctx = context();
    let (free0, total) = ctx.mem_info();
    assert!(total > 0 && free0 <= total);
    let d = ctx.alloc(1 << 20).unwrap();
    let (free1, _) = ctx.mem_info();
    assert_eq!(free0 - free1, 1 << 20);
    ctx.free(d).unwrap();
    assert_eq!(ctx.mem_info().0, free0);
}

#[test]
fn context_is_send_sync_and_shared() {
    fn check<T: Send + Sync + Clone>() {}
    check::<ptxvk_runtime::Context>();
    check::<ptxvk_runtime::Module>();
    check::<ptxvk_runtime::Function>();
    let ctx = context();
    let handles: Vec<_> = (0..4u8)
        .map(|t| {
            let ctx = ctx.clone();
            std::thread::spawn(move || {
                let d = ctx.alloc(4096).unwrap();
                ctx.memset_d8(d, t, 4096).unwrap();
                let mut back = vec![0u8; 4096];
                ctx.copy_dtoh(&mut back, d).unwrap();
                assert!(back.iter().all(|&b| b == t));
                ctx.free(d).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_clean(&ctx);
}

/// Host memory imported as device memory (`register_host`): copies through
/// its device address reach the host bytes themselves, at any offset into a
/// page, and the layer stays quiet. Without `VK_EXT_external_memory_host`
/// it is refused as unsupported.
#[test]
fn registered_host_memory() {
    let ctx = context();
    let mut host = Lcg(11).bytes(3 * 4096 + 100);
    // SAFETY: inside `host`, which outlives the registration.
    let p = unsafe { host.as_mut_ptr().add(77) };
    let len = 2 * 4096 + 9;
    // SAFETY: `host` stays allocated until unregister_host returns.
    let registered = unsafe { ctx.register_host(p, len as u64) };
    let Some(_) = ctx.info().host_import_alignment else {
        assert!(matches!(registered, Err(Error::Unsupported(_))));
        return;
    };
    let d = registered.unwrap();
    let expected = host.clone();
    // Device reads see the host bytes.
    let mut back = vec![0u8; len];
    ctx.copy_dtoh(&mut back, d).unwrap();
    assert_eq!(back, expected[77..77 + len]);
    // Device writes land in them.
    let data = Lcg(12).bytes(1000);
    ctx.copy_htod(d + 5, &data).unwrap();
    ctx.memset_d8(d + 2000, 0x5a, 300).unwrap();
    ctx.synchronize().unwrap();
    let mut model = expected;
    model[77 + 5..77 + 1005].copy_from_slice(&data);
    model[77 + 2000..77 + 2300].fill(0x5a);
    assert!(host == model, "host bytes after device writes");
    ctx.unregister_host(d).unwrap();
    assert_eq!(ctx.allocation_of(d), None);
    assert!(ctx.unregister_host(d).is_err(), "twice");
    // SAFETY: a null pointer is refused before anything is touched.
    assert!(matches!(unsafe { ctx.register_host(std::ptr::null_mut(), 8) }, Err(Error::InvalidValue(_))));
    assert_clean(&ctx);
}

/// Memory no allocation holds reads zero where the host can map it (every
/// device memory on a CPU device): a freed allocation's bytes do not show
/// in later allocations made from the same space, as NVIDIA's fresh
/// allocations read zero in practice (Taichi follows what it reads a
/// little past its buffers).
#[test]
fn reused_memory_reads_zero() {
    let ctx = context();
    if ctx.info().device_type != ptxvk_runtime::DeviceType::Cpu {
        eprintln!("skipped: the device's memory is zeroed only where the host maps it");
        return;
    }
    let mut rng = Lcg(0x5eed);
    // Sizes from a few bytes to 2 MiB, written with non-zero bytes, freed.
    let first: Vec<(u64, u64)> = (0..48)
        .map(|i| {
            let n = 1 + ((u64::from(rng.next_u32()) % (2 << 20)) >> (i % 12));
            let d = ctx.alloc(n).unwrap();
            let pattern: Vec<u8> = rng.bytes(n as usize).into_iter().map(|b| b | 1).collect();
            ctx.copy_htod(d, &pattern).unwrap();
            (d, n)
        })
        .collect();
    ctx.synchronize().unwrap();
    for &(d, _) in &first {
        ctx.free(d).unwrap();
    }
    // Other sizes over the same space: every byte reads zero.
    let mut reused = 0;
    for i in 0..48 {
        let n = 1 + ((u64::from(rng.next_u32()) % (3 << 20)) >> (i % 10));
        let d = ctx.alloc(n).unwrap();
        reused += first.iter().any(|&(f, fl)| d < f + fl && f < d + n) as usize;
        let mut back = vec![0xa5u8; n as usize];
        ctx.copy_dtoh(&mut back, d).unwrap();
        assert!(back.iter().all(|&b| b == 0), "allocation {i} of {n} bytes at {d:#x} holds earlier data");
    }
    // The space was reused, or the test would prove nothing.
    assert!(reused > 8, "only {reused} allocations overlap freed ones");
    assert_clean(&ctx);
}
