//! The cost of the software texture unit (`shaders/tex.ptx`): a 1024 x 1024
//! float4 image resampled bilinearly to 1024 x 1024 through a texture
//! object (`tex2D`), against the same filter written by hand with global
//! loads (`bench/tex_sample.cu`), in the same process on the same device.
//! Both are timed as the median of [`RUNS`] launches after a warm-up run;
//! the results are checked against each other (they differ only by the
//! texture unit's 8-bit filter weights, so within 1/256 of the range).

use std::error::Error;

use ptxvk_runtime::{Context, Function};
use ptxvk_translator::TextureDesc;

use crate::{median, time};

/// `nvcc -ptx -arch=sm_80 -O3 tex_sample.cu` (see `bench/tex_sample.cu`).
const PTX: &str = include_str!("../tex_sample.ptx");
/// Image and output size (texels).
const W: u32 = 1024;
const H: u32 = 1024;
/// Threads per block.
const BLOCK: u32 = 256;
/// Timed runs per kernel.
const RUNS: usize = 5;

fn launch(ctx: &Context, f: &Function, params: &[u8]) -> Result<(), Box<dyn Error>> {
    ctx.launch(f, [W / BLOCK, H, 1], [BLOCK, 1, 1], 0, params)?;
    ctx.synchronize()?;
    Ok(())
}

/// Prints both times and their ratio; `Ok(false)` when the results disagree.
pub fn run(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    let module = ctx.load_module(PTX, "tex_sample.ptx")?;
    let tex = module.function("tex_resample").ok_or("no tex_resample")?;
    let manual = module.function("manual_resample").ok_or("no manual_resample")?;
    let texels = (W * H * 4) as usize;
    let mut state = 0x2545_F491u32;
    let image: Vec<f32> = (0..texels)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 8) as f32 / (1 << 24) as f32
        })
        .collect();
    let bytes = (texels * 4) as u64;
    let (dimg, dtex, dout_tex, dout_manual) =
        (ctx.alloc(bytes)?, ctx.alloc(128)?, ctx.alloc(bytes)?, ctx.alloc(bytes)?);
    let image_bytes: Vec<u8> = image.iter().flat_map(|f| f.to_le_bytes()).collect();
    ctx.copy_htod(dimg, &image_bytes)?;
    // The record cuTexObjectCreate writes for a 2D float4 array with linear
    // filtering, clamp and normalized coordinates.
    let record = TextureDesc {
        address: dimg,
        extent: [W, H, 1],
        layers: 1,
        pitch: W as u64 * 16,
        format: 0x20,
        channels: 4,
        elem_bytes: 16,
        dims: 2,
        address_mode: [1, 1, 1],
        filter_mode: 1,
        normalized_coords: true,
        levels: 1,
        ..TextureDesc::default()
    };
    ctx.copy_htod(dtex, &record.encode())?;
    let (w, h) = ((W as i32).to_le_bytes(), (H as i32).to_le_bytes());
    let tex_params = tex.pack_params(&[&dtex.to_le_bytes(), &dout_tex.to_le_bytes(), &w, &h])?;
    let manual_params = manual.pack_params(&[&dimg.to_le_bytes(), &w, &h, &dout_manual.to_le_bytes(), &w, &h])?;
    ctx.memset_d8(dout_tex, 0xA5, bytes)?;
    ctx.memset_d8(dout_manual, 0xA5, bytes)?;
    launch(ctx, &tex, &tex_params)?;
    launch(ctx, &manual, &manual_params)?;
    let (mut a, mut b) = (vec![0u8; bytes as usize], vec![0u8; bytes as usize]);
    ctx.copy_dtoh(&mut a, dout_tex)?;
    ctx.copy_dtoh(&mut b, dout_manual)?;
    let f = |v: &[u8]| -> Vec<f32> { v.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect() };
    let (a, b) = (f(&a), f(&b));
    let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    let ok = worst.is_finite() && worst <= 1.0 / 128.0;
    let (mut t_tex, mut t_manual) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        t_tex.push(time(|| launch(ctx, &tex, &tex_params))?);
        t_manual.push(time(|| launch(ctx, &manual, &manual_params))?);
    }
    for d in [dimg, dtex, dout_tex, dout_manual] {
        ctx.free(d)?;
    }
    let (t_tex, t_manual) = (median(t_tex), median(t_manual));
    println!("textures: {W} x {H} float4 image resampled bilinearly, median of {RUNS} runs");
    println!("  tex2D (sampling engine):        {:8.2} ms", t_tex.as_secs_f64() * 1e3);
    println!("  by hand with ld.global:         {:8.2} ms", t_manual.as_secs_f64() * 1e3);
    println!("  ratio tex2D / by hand: {:.2}", t_tex.as_secs_f64() / t_manual.as_secs_f64());
    println!(
        "  check: largest difference {worst:.2e} (8-bit weights against float weights){}",
        if ok { "" } else { " TOO LARGE" }
    );
    Ok(ok)
}
