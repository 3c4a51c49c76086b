//! Device timestamps ([`Context::record_timestamp`]), which `cuEventRecord`
//! and `cuEventElapsedTime` use.

mod common;

use common::{assert_clean, context};
use std::time::Instant;

#[test]
fn timestamps_measure_queued_work() {
    let ctx = context();
    assert!(ctx.info().timestamp_period_ns.is_some(), "lavapipe's queue writes timestamps");
    let m = ctx.load_module(include_str!("../../tests/fixtures/data_loop.ptx"), "data_loop.ptx").unwrap();
    let f = m.function("collatz_steps").unwrap();
    let n = 1usize << 16;
    let input: Vec<u8> = (0..n as u32).flat_map(|v| (v | 0x7000_0001).to_le_bytes()).collect();
    let din = ctx.alloc(input.len() as u64).unwrap();
    ctx.copy_htod(din, &input).unwrap();
    let dout = ctx.alloc(input.len() as u64).unwrap();
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as u32).to_le_bytes()]).unwrap();
    ctx.synchronize().unwrap();

    let wall = Instant::now();
    let t0 = ctx.record_timestamp().unwrap();
    ctx.launch(&f, [(n / 256) as u32, 1, 1], [256, 1, 1], 0, &params).unwrap();
    let t1 = ctx.record_timestamp().unwrap();
    for _ in 0..3 {
        ctx.launch(&f, [(n / 256) as u32, 1, 1], [256, 1, 1], 0, &params).unwrap();
    }
    let t2 = ctx.record_timestamp().unwrap();
    let t3 = ctx.record_timestamp().unwrap();
    // Recording does not wait: nothing has run yet when elapsed_ms asks.
    let one = ctx.elapsed_ms(&t0, &t1).unwrap();
    let wall_ms = wall.elapsed().as_secs_f64() * 1e3;
    let four = ctx.elapsed_ms(&t0, &t2).unwrap();
    let none = ctx.elapsed_ms(&t2, &t3).unwrap();
    assert!(one > 0.0, "one launch took {one} ms");
    assert!(four > 2.0 * one, "four launches {four} ms, one {one} ms");
    assert!(four <= wall_ms + 1.0, "device time {four} ms, host wall time {wall_ms} ms");
    assert!((0.0..one).contains(&none), "no work between t2 and t3: {none} ms");
    assert_eq!(ctx.elapsed_ms(&t1, &t0).unwrap(), -one);
    // More timestamps than the pool has slots.
    let many: Vec<_> = (0..600).map(|_| ctx.record_timestamp().unwrap()).collect();
    let span = ctx.elapsed_ms(&many[0], &many[599]).unwrap();
    assert!((0.0..wall_ms + 1000.0).contains(&span), "{span}");
    assert_clean(&ctx);
}

/// [`Context::work_mark`] / [`Context::is_done`] (`cuEventQuery`,
/// `cuStreamQuery`): not done while the work is queued, done after polling
/// alone (the first poll submits the batch), and the results are there.
#[test]
fn work_marks_poll_without_waiting() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/data_loop.ptx"), "data_loop.ptx").unwrap();
    let f = m.function("collatz_steps").unwrap();
    let n = 1usize << 14;
    let input: Vec<u8> = (0..n as u32).flat_map(|v| (v | 0x7000_0001).to_le_bytes()).collect();
    let din = ctx.alloc(input.len() as u64).unwrap();
    let dout = ctx.alloc(input.len() as u64).unwrap();
    ctx.copy_htod(din, &input).unwrap();
    ctx.memset_d32(dout, 0xDEAD_BEEF, n as u64).unwrap();
    ctx.synchronize().unwrap();
    let idle = ctx.work_mark();
    assert!(ctx.is_done(idle).unwrap(), "nothing queued: done");

    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as u32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [(n / 256) as u32, 1, 1], [256, 1, 1], 0, &params).unwrap();
    let mark = ctx.work_mark();
    assert!(mark > idle);
    assert!(!ctx.is_done(mark).unwrap(), "queued work is not done at the first poll");
    // Work queued after the mark waits for the batch in flight, then goes
    // into a new batch; the mark is done without another synchronisation.
    ctx.memset_d32(din, 0, 1).unwrap();
    let later = ctx.work_mark();
    assert!(later > mark);
    assert!(ctx.is_done(mark).unwrap(), "the submitted batch finished before new work was recorded");
    let mut polls = 0u64;
    while !ctx.is_done(later).unwrap() {
        polls += 1;
        assert!(polls < 100_000_000, "polling never finished");
    }
    let mut out = vec![0u8; input.len()];
    ctx.copy_dtoh(&mut out, dout).unwrap();
    // CPU reference: Collatz steps to <= 1, at most 1000, wrapping.
    let steps = |mut x: u32| {
        let mut s = 0u32;
        while x > 1 && s < 1000 {
            x = if x & 1 == 1 { x.wrapping_mul(3).wrapping_add(1) } else { x / 2 };
            s += 1;
        }
        s
    };
    for i in 0..n {
        let got = u32::from_le_bytes([out[4 * i], out[4 * i + 1], out[4 * i + 2], out[4 * i + 3]]);
        assert_eq!(got, steps(i as u32 | 0x7000_0001), "element {i}");
    }
    assert_clean(&ctx);
}
