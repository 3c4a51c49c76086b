//! Legacy warp-synchronous code (issue 21, item 2): nvcc's
//! `tests/fixtures/warp_synchronous.cu`, where the lanes of a warp exchange
//! values through `volatile` shared memory without `__syncwarp()` and rely
//! on running in lock step (the CUDA samples' reduction, GPU Gems' warp
//! scan, a block maximum as in CuPy's partition). On the emulated warp path
//! (lavapipe: a warp is four 8-lane subgroups) each `volatile` shared access
//! is a point where the warp's lanes meet, so they see each other's shared
//! stores in program order, as on NVIDIA's GPUs. Random inputs, poisoned
//! outputs, the host model exactly.

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload_u32, Lcg, POISON};
use ptxvk_runtime::Context;

const PTX: &str = include_str!("../../tests/fixtures/warp_synchronous.ptx");
const BLOCK: usize = 256;
const BLOCKS: usize = 24;

fn run(ctx: &Context, kernel: &str, input: &[i32], outputs: usize) -> Vec<i32> {
    let m = ctx.load_module(PTX, "warp_synchronous.ptx").expect("load warp_synchronous.ptx");
    let f = m.function(kernel).unwrap();
    let words: Vec<u32> = input.iter().map(|&x| x as u32).collect();
    let din = upload_u32(ctx, &words);
    let dout = poisoned(ctx, outputs + 8);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes()]).unwrap();
    ctx.launch(&f, [BLOCKS as u32, 1, 1], [BLOCK as u32, 1, 1], 0, &params).unwrap();
    let got = download_u32(ctx, dout, outputs + 8);
    assert!(got[outputs..].iter().all(|&w| w == POISON), "{kernel} wrote past its output");
    got[..outputs].iter().map(|&w| w as i32).collect()
}

fn random(seed: u64) -> Vec<i32> {
    let mut g = Lcg(seed);
    (0..BLOCK * BLOCKS).map(|_| g.next_u32() as i32 >> 8).collect()
}

#[test]
fn reduction_through_volatile_shared_memory() {
    let ctx = context();
    let input = random(1);
    let got = run(&ctx, "reduce_volatile", &input, BLOCKS);
    for (b, g) in got.iter().enumerate() {
        let want = input[b * BLOCK..(b + 1) * BLOCK].iter().fold(0i32, |a, &x| a.wrapping_add(x));
        assert_eq!(*g, want, "block {b}");
    }
    assert_clean(&ctx);
}

#[test]
fn warp_scan_through_volatile_shared_memory() {
    let ctx = context();
    let input = random(2);
    let got = run(&ctx, "scan_warps", &input, BLOCK * BLOCKS);
    for (w, chunk) in input.chunks(32).enumerate() {
        let mut acc = 0i32;
        for (l, &x) in chunk.iter().enumerate() {
            acc = acc.wrapping_add(x);
            assert_eq!(got[w * 32 + l], acc, "warp {w} lane {l}");
        }
    }
    assert_clean(&ctx);
}

#[test]
fn block_maximum_with_a_lock_step_warp_part() {
    let ctx = context();
    let input = random(3);
    let got = run(&ctx, "max_volatile", &input, BLOCKS);
    for (b, g) in got.iter().enumerate() {
        let want = *input[b * BLOCK..(b + 1) * BLOCK].iter().max().unwrap();
        assert_eq!(*g, want, "block {b}");
    }
    assert_clean(&ctx);
}
