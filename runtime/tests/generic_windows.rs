//! Generic accesses through addresses of every origin
//! (`tests/fixtures/generic_windows.cu`): a global pointer from a kernel
//! parameter, a shared address plus a parameter's integer, a local
//! address, a pointer chosen at run time between shared and global, and
//! one stored to memory and loaded back. The translator sends the first
//! straight to global memory (`translator/src/emit/windowed.rs`) and tests
//! the others' windows; run with that analysis and without, on random
//! inputs, each result must equal the host's.

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload_u32, Lcg};
use ptxvk_runtime::{Context, Module};

const PTX: &str = include_str!("../../tests/fixtures/generic_windows.ptx");

fn load(ctx: &Context, generic_to_global: bool) -> Module {
    let options = ptxvk_translator::Options { generic_to_global, ..ctx.translate_options() };
    let t = ptxvk_translator::translate(PTX, "generic_windows.ptx", &options).unwrap_or_else(|d| panic!("{d}"));
    ctx.load_spirv(&t.spirv, t.info).unwrap()
}

#[test]
fn generic_loads_of_every_origin_with_and_without_the_window_analysis() {
    let ctx = context();
    let n = 64usize;
    for (seed, shift) in [(3u64, 0i64), (5, 64), (7, 124)] {
        let mut rng = Lcg(seed);
        let data: Vec<u32> = (0..n).map(|_| rng.next_u32() % 100_000).collect();
        let want: Vec<u32> = (0..n)
            .map(|t| {
                let tile = |i: usize| data[i].wrapping_mul(3);
                let a = data[t ^ 5];
                let b = tile(shift as usize / 4 + (t + 1) % 32);
                let c = data[(t + (t & 3)) % n].wrapping_add((t & 3) as u32);
                let d = if t & 1 == 1 { tile(t) } else { data[t] };
                let e = if t & 2 != 0 { tile(63 - t) } else { data[63 - t] };
                a.wrapping_add(b.wrapping_mul(2))
                    .wrapping_add(c.wrapping_mul(3))
                    .wrapping_add(d.wrapping_mul(5))
                    .wrapping_add(e.wrapping_mul(7))
            })
            .collect();
        for analysis in [true, false] {
            let m = load(&ctx, analysis);
            let f = m.function("generic_windows").unwrap();
            let din = upload_u32(&ctx, &data);
            let dout = poisoned(&ctx, n);
            let params = f
                .pack_params(&[
                    &din.to_le_bytes(),
                    &dout.to_le_bytes(),
                    &shift.to_le_bytes(),
                    &(n as i32).to_le_bytes(),
                ])
                .unwrap();
            ctx.launch(&f, [1, 1, 1], [n as u32, 1, 1], 0, &params).unwrap();
            assert_eq!(download_u32(&ctx, dout, n), want, "shift {shift}, analysis {analysis}");
        }
    }
    assert_clean(&ctx);
}
