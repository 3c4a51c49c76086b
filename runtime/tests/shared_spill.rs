//! Shared memory beyond the device's Workgroup memory (issue 21, item 3):
//! nvcc's `tests/fixtures/shared_spill.cu` with 48 KiB of static and 100
//! KiB and 200 KiB of dynamic shared memory, where lavapipe has 32 KiB. The
//! part that does not fit lives in device memory per block; every access
//! width, 32- and 64-bit shared atomics and generic pointers must give
//! what the host model says, on random inputs into poisoned outputs, both
//! with a hot part kept in Workgroup memory (the default on GPUs) and with
//! all of a spilling block's shared memory in device memory (llvmpipe's).

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload_u32, Lcg, POISON};
use ptxvk_runtime::{Context, Error, Function, Module};

const PTX: &str = include_str!("../../tests/fixtures/shared_spill.ptx");

fn module(ctx: &Context) -> Module {
    ctx.load_module(PTX, "shared_spill.ptx").expect("load shared_spill.ptx")
}

fn random(seed: u64, n: usize) -> Vec<u32> {
    let mut g = Lcg(seed);
    (0..n).map(|_| g.next_u32()).collect()
}

fn launch(
    ctx: &Context,
    f: &Function,
    grid: u32,
    block: u32,
    dynamic: u32,
    args: &[Vec<u8>],
) -> ptxvk_runtime::Result<()> {
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let params = f.pack_params(&refs).unwrap();
    ctx.launch(f, [grid, 1, 1], [block, 1, 1], dynamic, &params)
}

#[test]
fn static_48_kib() {
    const WORDS: usize = 12288;
    let ctx = context();
    assert!(
        (ctx.info().max_shared_bytes as usize) < WORDS * 4 || std::env::var_os("PTXVK_DEVICE").is_some(),
        "the test is meant to spill: the device has {} bytes of Workgroup memory",
        ctx.info().max_shared_bytes
    );
    let m = module(&ctx);
    let f = m.function("static48").unwrap();
    let blocks = 5;
    for hot in [false, true] {
        ctx.set_shared_hot_part(hot);
        let input = random(48 + hot as u64, WORDS * blocks);
        let din = upload_u32(&ctx, &input);
        let dout = poisoned(&ctx, WORDS * blocks + 16);
        launch(&ctx, &f, blocks as u32, 256, 0, &[din.to_le_bytes().to_vec(), dout.to_le_bytes().to_vec()]).unwrap();
        let got = download_u32(&ctx, dout, WORDS * blocks + 16);
        for b in 0..blocks {
            let tile = &input[b * WORDS..(b + 1) * WORDS];
            for i in 0..WORDS {
                let o = tile[(i as u32).wrapping_mul(7919).wrapping_add(b as u32) as usize % WORDS];
                let want = tile[i] ^ o.rotate_left(5);
                assert_eq!(got[b * WORDS + i], want, "hot part {hot}: block {b} word {i}");
            }
        }
        assert!(got[WORDS * blocks..].iter().all(|&w| w == POISON), "wrote past the output");
    }
    assert_clean(&ctx);
}

/// What `dynamic_mix` leaves in one block's `words` of shared memory.
fn mix_model(input: &[u32]) -> Vec<u32> {
    let words = input.len();
    let mut w: Vec<u32> = input
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let b1 = ((x & 0xff) + 1) & 0xff;
            let x = (x & !0xff00) | (b1 << 8);
            if i & 1 == 1 {
                (x & 0xffff) | (x << 16)
            } else {
                x
            }
        })
        .collect();
    for j in 0..words / 2 {
        let v = (w[2 * j] as u64) | ((w[2 * j + 1] as u64) << 32);
        let v = v.wrapping_mul(3).wrapping_add(j as u64);
        w[2 * j] = v as u32;
        w[2 * j + 1] = (v >> 32) as u32;
    }
    let data = words - 256 - 2;
    let mut hist = [0u32; 256];
    let mut sum = 0u64;
    for &x in &w[..data] {
        hist[(x & 255) as usize] += 1;
        sum = sum.wrapping_add(x as u64);
    }
    w[data] = sum as u32;
    w[data + 1] = (sum >> 32) as u32;
    w[words - 256..].copy_from_slice(&hist);
    w
}

#[test]
fn dynamic_100_and_200_kib_every_access_width() {
    let ctx = context();
    let m = module(&ctx);
    let f = m.function("dynamic_mix").unwrap();
    let cases = [(100usize, 3usize, 100u64, false), (200, 2, 200, false), (100, 3, 101, true), (200, 2, 201, true)];
    for (kib, blocks, seed, hot) in cases {
        ctx.set_shared_hot_part(hot);
        let words = kib * 1024 / 4;
        let input = random(seed, words * blocks);
        let din = upload_u32(&ctx, &input);
        let dout = poisoned(&ctx, words * blocks + 16);
        let args = [din.to_le_bytes().to_vec(), dout.to_le_bytes().to_vec(), (words as i32).to_le_bytes().to_vec()];
        launch(&ctx, &f, blocks as u32, 256, (words * 4) as u32, &args).unwrap();
        let got = download_u32(&ctx, dout, words * blocks + 16);
        for b in 0..blocks {
            let want = mix_model(&input[b * words..(b + 1) * words]);
            for (i, (&g, &w)) in got[b * words..(b + 1) * words].iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{kib} KiB, hot part {hot}: block {b} word {i} of {words}");
            }
        }
        assert!(got[words * blocks..].iter().all(|&w| w == POISON), "{kib} KiB: wrote past the output");
    }
    assert_clean(&ctx);
}

/// Thousands of blocks spilling 200 KiB each: more than one dispatch's share
/// of the spill area, so the launch runs in parts that take turns.
#[test]
fn every_block_has_its_own_shared_memory() {
    let ctx = context();
    let m = module(&ctx);
    let f = m.function("isolation").unwrap();
    let (blocks, threads, slots) = (3000usize, 32usize, 4usize);
    for (kib, hot) in [(40usize, false), (200, false), (200, true)] {
        ctx.set_shared_hot_part(hot);
        let words = kib * 1024 / 4;
        let dout = poisoned(&ctx, blocks * threads + 16);
        let args =
            [dout.to_le_bytes().to_vec(), (words as i32).to_le_bytes().to_vec(), (slots as i32).to_le_bytes().to_vec()];
        launch(&ctx, &f, blocks as u32, threads as u32, (words * 4) as u32, &args).unwrap();
        let got = download_u32(&ctx, dout, blocks * threads + 16);
        for b in 0..blocks {
            for t in 0..threads {
                let u = (t + 1) % threads;
                let want: u32 = (0..slots).map(|k| (b * 1000 + u * 7 + k) as u32).sum();
                assert_eq!(got[b * threads + t], want, "{kib} KiB, hot part {hot}: block {b} thread {t}");
            }
        }
        assert!(got[blocks * threads..].iter().all(|&w| w == POISON), "{kib} KiB: wrote past the output");
    }
    assert_clean(&ctx);
}

#[test]
fn launch_beyond_any_architecture_is_refused() {
    let ctx = context();
    let m = module(&ctx);
    let f = m.function("isolation").unwrap();
    let dout = poisoned(&ctx, 64);
    let args = [dout.to_le_bytes().to_vec(), 1i32.to_le_bytes().to_vec(), 1i32.to_le_bytes().to_vec()];
    match launch(&ctx, &f, 1, 32, 2 << 30, &args) {
        Err(Error::LaunchOutOfResources(msg)) => assert!(msg.contains("isolation"), "{msg}"),
        other => panic!("a block of 2 GiB of shared memory launched: {other:?}"),
    }
    assert_eq!(download_u32(&ctx, dout, 64), vec![POISON; 64]);
    assert_clean(&ctx);
}
