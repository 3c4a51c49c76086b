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
