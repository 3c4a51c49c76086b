//! Device-side `malloc`/`free` (nvcc's `device_malloc.cu`) on the device:
//! per-thread scratch blocks, blocks kept across launches, exhaustion (NULL)
//! and reuse after `free`, and the heap-size limit.

mod common;

use common::{assert_clean, context, Lcg};
use ptxvk_runtime::{Context, Error, Function};

const PTX: &str = include_str!("../../tests/fixtures/device_malloc.ptx");

fn upload(ctx: &Context, bytes: &[u8]) -> u64 {
    let d = ctx.alloc(bytes.len().max(8) as u64).unwrap();
    ctx.copy_htod(d, bytes).unwrap();
    d
}

fn download(ctx: &Context, d: u64, n: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; n];
    ctx.copy_dtoh(&mut bytes, d).unwrap();
    bytes
}

fn words<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    b.chunks_exact(N).map(|c| c.try_into().unwrap_or([0; N]))
}

fn launch(ctx: &Context, f: &Function, n: usize, args: &[&[u8]]) {
    let params = f.pack_params(args).unwrap();
    ctx.launch(f, [(n as u32).div_ceil(128), 1, 1], [128, 1, 1], 0, &params).unwrap();
}

#[test]
fn scratch_blocks_per_thread() {
    let ctx = context();
    let m = ctx.load_module(PTX, "device_malloc.ptx").unwrap();
    let f = m.function("scratch_sums").unwrap();
    let n = 5000usize;
    let mut rng = Lcg(77);
    let input: Vec<i32> = (0..n).map(|_| rng.next_u32() as i32 >> 8).collect();
    let din = upload(&ctx, &input.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
    let dout = upload(&ctx, &vec![0xA5u8; n * 8]);
    let dal = upload(&ctx, &vec![0xA5u8; n * 4]);
    // Several launches: blocks freed by one are reused by the next.
    for _ in 0..3 {
        launch(&ctx, &f, n, &[&din.to_le_bytes(), &dout.to_le_bytes(), &dal.to_le_bytes(), &(n as i32).to_le_bytes()]);
        let out: Vec<i64> = words::<8>(&download(&ctx, dout, n * 8)).map(i64::from_le_bytes).collect();
        let aligned: Vec<i32> = words::<4>(&download(&ctx, dal, n * 4)).map(i32::from_le_bytes).collect();
        for i in 0..n {
            let len = 1 + (input[i] & 63) as i64;
            let want: i64 = (1..=len).map(|k| (input[i].wrapping_mul(k as i32)) as i64).sum();
            assert_eq!(out[i], want, "thread {i}");
            assert_eq!(aligned[i], 1, "thread {i}: malloc's pointer is 16-byte aligned");
        }
    }
    assert_clean(&ctx);
}

#[test]
fn blocks_kept_across_launches_exhaustion_and_reuse() {
    let ctx = context();
    // 64 KiB of heap: 1000-byte requests take 1 KiB blocks, so at most 64 fit.
    ctx.set_malloc_heap_size(64 << 10).unwrap();
    assert_eq!(ctx.malloc_heap_size(), 64 << 10);
    let m = ctx.load_module(PTX, "device_malloc.ptx").unwrap();
    let keep = m.function("keep_blocks").unwrap();
    let read = m.function("read_and_free").unwrap();
    let n = 100usize;
    let slots = upload(&ctx, &vec![0xEEu8; n * 8]);
    let vals = upload(&ctx, &vec![0xEEu8; n * 4]);
    for round in 0..3 {
        launch(&ctx, &keep, n, &[&slots.to_le_bytes(), &(n as i32).to_le_bytes(), &1000u32.to_le_bytes()]);
        let ptrs: Vec<u64> = words::<8>(&download(&ctx, slots, n * 8)).map(u64::from_le_bytes).collect();
        let live: Vec<u64> = ptrs.iter().copied().filter(|&p| p != 0).collect();
        // Exactly the blocks that fit were handed out, each once.
        assert_eq!(live.len(), 64, "round {round}: {} of {n} allocations succeeded", live.len());
        let mut sorted = live.clone();
        sorted.sort_unstable();
        for w in sorted.windows(2) {
            assert!(w[1] - w[0] >= 1024, "round {round}: blocks overlap: {:#x} {:#x}", w[0], w[1]);
        }
        assert!(live.iter().all(|p| p % 16 == 0));
        launch(&ctx, &read, n, &[&slots.to_le_bytes(), &vals.to_le_bytes(), &(n as i32).to_le_bytes()]);
        let got: Vec<i32> = words::<4>(&download(&ctx, vals, n * 4)).map(i32::from_le_bytes).collect();
        for i in 0..n {
            let want = if ptrs[i] != 0 { i as i32 * 7 + 1 } else { -1 };
            assert_eq!(got[i], want, "round {round}, thread {i}");
        }
        // Everything was freed: the next round gets as many blocks again.
    }
    // The size is fixed once a kernel that allocates has run.
    assert!(matches!(ctx.set_malloc_heap_size(1 << 20), Err(Error::InvalidValue(_))));
    assert_clean(&ctx);
}
