//! The racecheck (issue 17, `PTXVK_RACECHECK=1`): nvcc's
//! `tests/fixtures/races.cu`. Kernels with planted shared-memory races
//! (a reduction and a tiled loop each missing a barrier, neighbours in a
//! warp without `__syncwarp`) get their hazard reported, naming both
//! accesses' PTX and CUDA lines, and their launches still complete. Correct
//! kernels (barriers, `__syncwarp` steps, a broadcast, bytes of one word
//! written by different threads, shared atomics) report nothing and give
//! the CPU reference's results.

mod common;

use common::{assert_clean, download_u32, poisoned, setup, upload_u32, Lcg, POISON};
use ptxvk_runtime::{Context, DeviceSelector, RaceHazard, RaceKind};

const PTX: &str = include_str!("../../tests/fixtures/races.ptx");

fn racecheck_context() -> Context {
    setup();
    let ctx = Context::with_racecheck(DeviceSelector::Default, None, true).expect("create context");
    assert!(ctx.racecheck());
    ctx
}

/// Launches `kernel` and synchronises (a hazard does not fail the launch).
fn run(ctx: &Context, kernel: &str, grid: u32, block: u32, params: &[&[u8]]) {
    let m = ctx.load_module(PTX, "races.ptx").expect("load races.ptx");
    assert!(m.info().race_checked, "races.ptx is race-checked");
    let f = m.function(kernel).unwrap();
    let packed = f.pack_params(params).unwrap();
    ctx.launch(&f, [grid, 1, 1], [block, 1, 1], 0, &packed).expect("launch is queued");
    ctx.synchronize().expect("a hazard does not fail the launch");
}

/// Small integers as floats: every order of summation is exact.
fn small_floats(n: usize, seed: u64) -> Vec<u32> {
    let mut g = Lcg(seed);
    (0..n).map(|_| ((g.next_u32() % 200) as f32 - 100.0).to_bits()).collect()
}

fn hazards_of<'a>(all: &'a [RaceHazard], function: &str) -> Vec<&'a RaceHazard> {
    all.iter().filter(|h| h.function == function).collect()
}

/// Whether one of the hazards is between accesses on these CUDA lines of races.cu.
fn has_pair(hs: &[&RaceHazard], a: u32, b: u32) -> bool {
    let line = |s: &Option<String>| s.as_deref().and_then(|s| s.rsplit(':').next()).and_then(|l| l.parse::<u32>().ok());
    hs.iter().any(|h| {
        let (x, y) = (line(&h.source), line(&h.earlier_source));
        (x == Some(a) && y == Some(b)) || (x == Some(b) && y == Some(a)) || (a == b && x == Some(a) && y == Some(a))
    })
}

#[test]
fn planted_races_are_reported_and_launches_complete() {
    let ctx = racecheck_context();
    let block = 256u32;
    let blocks = 4u32;
    let n = (block * blocks) as usize;
    let input = small_floats(n, 3);
    let din = upload_u32(&ctx, &input);

    // A reduction missing the barrier in its loop (races.cu line 16:
    // `s[t] += s[t + step]` reads what another thread writes).
    let dout = poisoned(&ctx, blocks as usize);
    run(&ctx, "reduce_missing_sync", blocks, block, &[&dout.to_le_bytes(), &din.to_le_bytes()]);
    let all = ctx.race_hazards();
    let hs = hazards_of(&all, "reduce_missing_sync");
    assert!(!hs.is_empty(), "the missing barrier is reported: {all:#?}");
    assert!(has_pair(&hs, 16, 16), "{hs:#?}");
    assert!(hs.iter().all(|h| h.line > 0 && h.earlier_line > 0 && h.count >= 1));
    assert!(hs[0].report.contains("Race reported between") && hs[0].report.contains("races.ptx:"), "{}", hs[0].report);
    // Its output is written (whatever the race made of it).
    assert!(download_u32(&ctx, dout, blocks as usize).iter().all(|&w| w != POISON));

    // Tiles overwritten before other threads read them (lines 42 and 44).
    let tiles = 4usize;
    let tin = upload_u32(&ctx, &small_floats(128 * tiles, 9));
    let tout = poisoned(&ctx, 128);
    run(&ctx, "tiles_missing_sync", 1, 128, &[&tout.to_le_bytes(), &tin.to_le_bytes(), &(tiles as i32).to_le_bytes()]);
    let all = ctx.race_hazards();
    let hs = hazards_of(&all, "tiles_missing_sync");
    assert!(has_pair(&hs, 42, 44), "the write-after-read of the next tile is reported: {all:#?}");
    assert!(hs.iter().any(|h| h.kind == RaceKind::WriteAfterRead), "{hs:#?}");

    // Neighbours in a warp without __syncwarp (lines 71 and 72).
    let wout = poisoned(&ctx, n);
    run(&ctx, "warp_neighbour_no_sync", blocks, block, &[&wout.to_le_bytes(), &din.to_le_bytes()]);
    let all = ctx.race_hazards();
    let hs = hazards_of(&all, "warp_neighbour_no_sync");
    assert!(has_pair(&hs, 71, 72), "{all:#?}");
    assert!(hs.iter().all(|h| h.kind == RaceKind::ReadAfterWrite || h.kind == RaceKind::WriteAfterRead), "{hs:#?}");
    assert_clean(&ctx);
}

#[test]
fn correct_kernels_report_nothing_and_compute_exactly() {
    let ctx = racecheck_context();
    let block = 256usize;
    let blocks = 3usize;
    let n = block * blocks;
    let input = small_floats(n, 17);
    let din = upload_u32(&ctx, &input);
    let f = |i: usize| f32::from_bits(input[i]);

    let dout = poisoned(&ctx, blocks + 1);
    run(&ctx, "reduce_ok", blocks as u32, block as u32, &[&dout.to_le_bytes(), &din.to_le_bytes()]);
    let got = download_u32(&ctx, dout, blocks + 1);
    for (b, &sum) in got.iter().enumerate().take(blocks) {
        let want: f32 = (0..block).map(|t| f(b * block + t)).sum();
        assert_eq!(f32::from_bits(sum), want, "reduce_ok block {b}");
    }
    assert_eq!(got[blocks], POISON);

    let warps = block / 32;
    let dout = poisoned(&ctx, blocks * warps + 1);
    run(&ctx, "warp_sums_syncwarp", blocks as u32, block as u32, &[&dout.to_le_bytes(), &din.to_le_bytes()]);
    let got = download_u32(&ctx, dout, blocks * warps + 1);
    for (w, &sum) in got.iter().enumerate().take(blocks * warps) {
        let want: f32 = (0..32).map(|l| f(w * 32 + l)).sum();
        assert_eq!(f32::from_bits(sum), want, "warp_sums_syncwarp warp {w}");
    }
    assert_eq!(got[blocks * warps], POISON);

    let mut g = Lcg(23);
    let words: Vec<u32> = (0..n).map(|_| g.next_u32()).collect();
    let dw = upload_u32(&ctx, &words);
    let dout = poisoned(&ctx, n + 1);
    run(&ctx, "broadcast_bytes_atomics", blocks as u32, block as u32, &[&dout.to_le_bytes(), &dw.to_le_bytes()]);
    let got = download_u32(&ctx, dout, n + 1);
    for b in 0..blocks {
        let v0 = words[b];
        let r = |t: usize| v0.wrapping_add(words[b * block + (t ^ 1)] & 0xff);
        for t in 0..block {
            let want = r(0).wrapping_add(block as u32).wrapping_add(r(t));
            assert_eq!(got[b * block + t], want, "broadcast_bytes_atomics[{b}][{t}]");
        }
    }
    assert_eq!(got[n], POISON);

    let all = ctx.race_hazards();
    assert!(all.is_empty(), "correct kernels report no hazard: {all:#?}");
    assert_clean(&ctx);
}

#[test]
fn racecheck_is_off_by_default_and_changes_no_result() {
    // Without the racecheck the module is not instrumented, and a racy
    // kernel's launch reports nothing.
    let ctx = common::context();
    if std::env::var("PTXVK_RACECHECK").is_ok_and(|v| v == "1") {
        return;
    }
    assert!(!ctx.racecheck());
    let m = ctx.load_module(PTX, "races.ptx").expect("load races.ptx");
    assert!(!m.info().race_checked);
    let n = 256usize;
    let input = small_floats(n, 5);
    let din = upload_u32(&ctx, &input);
    let dout = poisoned(&ctx, 2);
    let f = m.function("reduce_ok").unwrap();
    let packed = f.pack_params(&[&dout.to_le_bytes(), &din.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [256, 1, 1], 0, &packed).unwrap();
    ctx.synchronize().unwrap();
    let want: f32 = input.iter().map(|&w| f32::from_bits(w)).sum();
    assert_eq!(f32::from_bits(download_u32(&ctx, dout, 1)[0]), want);
    assert!(ctx.race_hazards().is_empty());
}
