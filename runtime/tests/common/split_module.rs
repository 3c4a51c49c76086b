//! nvcc's `tests/fixtures/split_module.cu` (kernels sharing device
//! functions, a `__constant__` table, a `__device__` counter and a table of
//! function pointers): the PTX, a host model of its kernels, and a launch
//! with a poisoned tail (`split_module.rs`, `disk_cache.rs`).

use ptxvk_runtime::{Context, Module};

pub const PTX: &str = include_str!("../../../tests/fixtures/split_module.ptx");
/// The fixture's `__constant__` table.
pub const TABLE: [u32; 16] = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3];

pub fn mix(x: u32, k: u32, table: &[u32; 16]) -> u32 {
    let x = x ^ (x >> 13);
    let x = x.wrapping_mul(0x5bd1_e995u32.wrapping_add(k));
    x ^ (x >> 15) ^ table[(x & 15) as usize]
}

/// What each kernel writes, and what it adds to `calls`, with `table` as
/// the `__constant__` table.
pub fn model(kernel: &str, input: &[u32], block: usize, table: &[u32; 16]) -> (Vec<u32>, u32) {
    let n = input.len();
    match kernel {
        "first" => (input.iter().map(|&x| mix(x, 1, table)).collect(), 1),
        "second" => {
            let s: Vec<u32> = input.iter().map(|&x| mix(x, 2, table)).collect();
            let out = (0..n)
                .map(|i| {
                    let (b, t) = (i / block, i % block);
                    let next = b * block + (t + 1) % block;
                    s[i].wrapping_add(if next < n { s[next] } else { 0 })
                })
                .collect();
            (out, 10)
        }
        _ => {
            let op = |x: u32| if x & 1 == 0 { x.wrapping_mul(2).wrapping_add(1) } else { x.rotate_left(7) };
            ((0..n).map(|i| op(input[i]).wrapping_add(table[i & 15])).collect(), 100)
        }
    }
}

/// Launches `kernel` of `m` on `input` and returns what it wrote; fails if
/// it wrote past the output.
pub fn run(ctx: &Context, m: &Module, kernel: &str, input: &[u32], block: u32) -> Vec<u32> {
    let f = m.function(kernel).expect("kernel");
    let n = input.len();
    let din = super::upload_u32(ctx, input);
    let dout = super::poisoned(ctx, n + 8);
    let args = [din.to_le_bytes().to_vec(), dout.to_le_bytes().to_vec(), (n as i32).to_le_bytes().to_vec()];
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let params = f.pack_params(&refs).expect("params");
    ctx.launch(&f, [(n as u32).div_ceil(block), 1, 1], [block, 1, 1], 0, &params).expect("launch");
    let got = super::download_u32(ctx, dout, n + 8);
    assert!(got[n..].iter().all(|&w| w == super::POISON), "{kernel}: wrote past the output");
    ctx.free(din).expect("free");
    ctx.free(dout).expect("free");
    got[..n].to_vec()
}
