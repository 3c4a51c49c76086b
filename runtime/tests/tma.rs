//! Hopper TMA on the emulated copy engine: tensor copies (1-D to 5-D loads
//! with out-of-bounds fill, element strides and every swizzle mode; stores
//! clipped at the tensor's edges; reductions), tensor maps read from
//! parameters, `.const` and `.global` memory, mbarrier phases, bulk copies
//! and a two-stage pipeline. The nvcc fixtures are `ptx/tma_tile.cu` and
//! `ptx/tma_mbarrier.cu`; expected results come from a CPU model of the
//! PTX ISA's section 5.5 (Tensors) written here, on random tensors, boxes
//! and coordinates, with poisoned outputs.

mod common;

use common::{assert_clean, context, Lcg};
use ptxvk_runtime::{Context, Function};
use ptxvk_translator::{TensorMapDesc, TensorMapMode};

const TILE: &str = include_str!("ptx/tma_tile.ptx");
const MBARRIER: &str = include_str!("ptx/tma_mbarrier.ptx");

/// What the load fixtures fill their tile with first.
const POISON: u32 = 0xDEAD_BEEF;
/// Capacity of the fixtures' shared tile in bytes.
const TILE_BYTES: usize = 16000;
/// `CUtensorMapDataType` values used here, with their element sizes.
const DTYPES: [(u32, usize); 10] = [(0, 1), (1, 2), (2, 4), (3, 4), (4, 8), (5, 8), (6, 2), (7, 4), (8, 8), (9, 2)];

fn is_float(dtype: u32) -> bool {
    matches!(dtype, 6..=12)
}

fn upload(ctx: &Context, bytes: &[u8]) -> u64 {
    let d = ctx.alloc(bytes.len().max(16) as u64).unwrap();
    ctx.copy_htod(d, bytes).unwrap();
    d
}

fn download(ctx: &Context, d: u64, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    ctx.copy_dtoh(&mut v, d).unwrap();
    v
}

fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The shared-memory position of logical byte `off` of a 1024-byte-aligned
/// tile, from the swizzle tables of section 5.5.7: each row of a table is a
/// 128-byte line of 16-byte cells, and cell `p` of line `l` holds chunk
/// `table[l % rows][p]` (the 32-byte-atom flip mode also swaps the 8-byte
/// halves of every cell on odd lines).
fn swizzle(off: usize, mode: u32) -> usize {
    const T32: [[usize; 8]; 2] = [[0, 1, 2, 3, 4, 5, 6, 7], [1, 0, 3, 2, 5, 4, 7, 6]];
    const T64: [[usize; 8]; 4] =
        [[0, 1, 2, 3, 4, 5, 6, 7], [1, 0, 3, 2, 5, 4, 7, 6], [2, 3, 0, 1, 6, 7, 4, 5], [3, 2, 1, 0, 7, 6, 5, 4]];
    const T128: [[usize; 8]; 8] = [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [1, 0, 3, 2, 5, 4, 7, 6],
        [2, 3, 0, 1, 6, 7, 4, 5],
        [3, 2, 1, 0, 7, 6, 5, 4],
        [4, 5, 6, 7, 0, 1, 2, 3],
        [5, 4, 7, 6, 1, 0, 3, 2],
        [6, 7, 4, 5, 2, 3, 0, 1],
        [7, 6, 5, 4, 3, 2, 1, 0],
    ];
    const A32: [[usize; 8]; 4] =
        [[0, 1, 2, 3, 4, 5, 6, 7], [2, 3, 0, 1, 6, 7, 4, 5], [4, 5, 6, 7, 0, 1, 2, 3], [6, 7, 4, 5, 2, 3, 0, 1]];
    const A64: [[usize; 8]; 2] = [[0, 1, 2, 3, 4, 5, 6, 7], [4, 5, 6, 7, 0, 1, 2, 3]];
    let table: &[[usize; 8]] = match mode {
        1 => &T32,
        2 => &T64,
        3 => &T128,
        4 | 5 => &A32,
        6 => &A64,
        _ => return off,
    };
    let line = off / 128;
    let chunk = (off / 16) % 8;
    let row = &table[line % table.len()];
    let cell = row.iter().position(|&c| c == chunk).unwrap();
    let mut within = off % 16;
    if mode == 5 && line % 2 == 1 {
        within ^= 8;
    }
    line * 128 + cell * 16 + within
}

/// A random tensor in device memory with its map.
struct Tensor {
    desc: TensorMapDesc,
    data: Vec<u8>,
    addr: u64,
}

impl Tensor {
    fn esize(&self) -> usize {
        self.desc.elem_bytes as usize
    }

    /// Elements traversed per dimension (1 beyond the rank).
    fn counts(&self) -> [usize; 5] {
        let mut n = [1usize; 5];
        for (d, v) in n.iter_mut().enumerate().take(self.desc.rank as usize) {
            *v = self.desc.box_dim[d].div_ceil(self.desc.elem_strides[d]) as usize;
        }
        n
    }

    fn box_bytes(&self) -> usize {
        self.counts().iter().product::<usize>() * self.esize()
    }

    /// The shared memory a copy touches: the box rounded up to whole
    /// 128-byte lines (the swizzle permutes 16-byte chunks within a line).
    fn image_bytes(&self) -> usize {
        self.box_bytes().div_ceil(128) * 128
    }

    /// Byte offset of the element at `x` when it lies inside the tensor.
    fn offset(&self, x: [i64; 5]) -> Option<usize> {
        let mut off = 0usize;
        for (d, &xd) in x.iter().enumerate().take(self.desc.rank as usize) {
            if xd < 0 || xd >= self.desc.dims[d] as i64 {
                return None;
            }
            off += xd as usize * self.desc.strides[d] as usize;
        }
        Some(off)
    }

    /// Calls `f(logical byte offset in the box, tensor coordinates)` for
    /// every element of the box at `c`, in shared-memory order.
    fn walk(&self, c: [i32; 5], mut f: impl FnMut(usize, [i64; 5])) {
        let n = self.counts();
        let es = self.desc.elem_strides;
        let mut k = 0usize;
        for i4 in 0..n[4] {
            for i3 in 0..n[3] {
                for i2 in 0..n[2] {
                    for i1 in 0..n[1] {
                        for i0 in 0..n[0] {
                            let i = [i0, i1, i2, i3, i4];
                            let mut x = [0i64; 5];
                            for d in 0..5 {
                                x[d] = c[d] as i64 + (i[d] as i64) * es[d].max(1) as i64;
                            }
                            f(k * self.esize(), x);
                            k += 1;
                        }
                    }
                }
            }
        }
    }

    /// The shared-memory image of a load of the box at `c` (section 5.5.3)
    /// into a tile that held [`POISON`].
    fn reference_load(&self, c: [i32; 5]) -> Vec<u8> {
        let es = self.esize();
        let mut out: Vec<u8> = POISON.to_le_bytes().iter().copied().cycle().take(self.image_bytes()).collect();
        let nan = self.desc.oob_fill == 1;
        self.walk(c, |off, x| {
            let value: Vec<u8> = match self.offset(x) {
                Some(o) => self.data[o..o + es].to_vec(),
                None if nan => {
                    // OOB-NaN: a quiet NaN with every payload bit set.
                    let mut v = vec![0xFFu8; es];
                    v[es - 1] = 0x7F;
                    v
                }
                None => vec![0u8; es],
            };
            let p = swizzle(off, self.desc.swizzle);
            out[p..p + es].copy_from_slice(&value);
        });
        out
    }

    /// Applies a store (`op` 0) or reduction of the shared image `smem` to
    /// the box at `c`, clipping at the tensor's edges.
    fn reference_store(&self, data: &mut [u8], c: [i32; 5], smem: &[u8], op: u32) {
        let es = self.esize();
        let dtype = self.desc.data_type;
        self.walk(c, |off, x| {
            let Some(o) = self.offset(x) else { return };
            let p = swizzle(off, self.desc.swizzle);
            let new = reduce(dtype, op, &data[o..o + es], &smem[p..p + es]);
            data[o..o + es].copy_from_slice(&new);
        });
    }
}

/// `op(old, v)` on little-endian element bytes of `dtype`.
fn reduce(dtype: u32, op: u32, old: &[u8], v: &[u8]) -> Vec<u8> {
    if op == 0 {
        return v.to_vec();
    }
    let le = |b: &[u8]| {
        let mut a = [0u8; 8];
        a[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(a)
    };
    let (a, b) = (le(old), le(v));
    let r: u64 = match (dtype, op) {
        (2 | 3, _) => {
            let (a, b) = (a as u32, b as u32);
            (match op {
                1 => a.wrapping_add(b),
                2 if dtype == 3 => (a as i32).min(b as i32) as u32,
                3 if dtype == 3 => (a as i32).max(b as i32) as u32,
                2 => a.min(b),
                3 => a.max(b),
                4 => {
                    if a >= b {
                        0
                    } else {
                        a + 1
                    }
                }
                5 => {
                    if a == 0 || a > b {
                        b
                    } else {
                        a - 1
                    }
                }
                6 => a & b,
                7 => a | b,
                _ => a ^ b,
            }) as u64
        }
        (4 | 5, _) => match op {
            1 => a.wrapping_add(b),
            2 if dtype == 5 => (a as i64).min(b as i64) as u64,
            3 if dtype == 5 => (a as i64).max(b as i64) as u64,
            2 => a.min(b),
            3 => a.max(b),
            6 => a & b,
            7 => a | b,
            _ => a ^ b,
        },
        (7, _) => {
            let (x, y) = (f32::from_bits(a as u32), f32::from_bits(b as u32));
            (match op {
                1 => x + y,
                2 => x.min(y),
                _ => x.max(y),
            })
            .to_bits() as u64
        }
        (8, _) => {
            let (x, y) = (f64::from_bits(a), f64::from_bits(b));
            (match op {
                1 => x + y,
                2 => x.min(y),
                _ => x.max(y),
            })
            .to_bits()
        }
        (6 | 9, _) => {
            // Small integers: exact in f32 and back.
            let (x, y) = (half_to_f32(dtype, a as u16), half_to_f32(dtype, b as u16));
            let r = match op {
                1 => x + y,
                2 => x.min(y),
                _ => x.max(y),
            };
            u16::from_le_bytes(float_bytes(dtype, r as i32)[..2].try_into().unwrap()) as u64
        }
        _ => unreachable!("no such reduction in these tests"),
    };
    r.to_le_bytes()[..old.len()].to_vec()
}

/// The bytes of integer `v` (|v| < 2048) as a float of tensor data type
/// `dtype` (6 f16, 7 f32, 8 f64, 9 bf16), exactly.
fn float_bytes(dtype: u32, v: i32) -> Vec<u8> {
    let f = v as f32;
    match dtype {
        7 => f.to_bits().to_le_bytes().to_vec(),
        8 => (v as f64).to_bits().to_le_bytes().to_vec(),
        // bf16: the top half of the f32 (exact for these integers).
        9 => ((f.to_bits() >> 16) as u16).to_le_bytes().to_vec(),
        _ => {
            let b = f.to_bits();
            let h = if v == 0 {
                0
            } else {
                let sign = (b >> 16) & 0x8000;
                let exp = ((b >> 23) & 0xFF) as i32 - 127 + 15;
                sign | (exp as u32) << 10 | (b >> 13) & 0x3FF
            };
            (h as u16).to_le_bytes().to_vec()
        }
    }
}

/// An f16 (6) or bf16 (9) value, normal or zero, as f32.
fn half_to_f32(dtype: u32, h: u16) -> f32 {
    if dtype == 9 {
        return f32::from_bits((h as u32) << 16);
    }
    let h = h as u32;
    if h & 0x7FFF == 0 {
        return f32::from_bits(h << 16);
    }
    let exp = ((h >> 10) & 0x1F) as i32 - 15 + 127;
    f32::from_bits((h & 0x8000) << 16 | (exp as u32) << 23 | (h & 0x3FF) << 13)
}

/// A random tiled tensor of `rank` dimensions.
fn random_tensor(ctx: &Context, rng: &mut Lcg, rank: u32, store: bool) -> Tensor {
    let pick = |rng: &mut Lcg, n: u32| rng.next_u32() % n;
    loop {
        let (dtype, esize) = DTYPES[pick(rng, DTYPES.len() as u32) as usize];
        // Swizzle: none, 32B, 64B, 128B and the 128B atom modes (the 8-byte
        // flip only for loads).
        let mut swz = pick(rng, 7);
        if store && swz == 5 {
            swz = 3;
        }
        let span = match swz {
            0 => 64,
            1 => 32,
            2 => 64,
            _ => 128,
        };
        let chunks = 1 + pick(rng, span / 16);
        let box0 = (chunks as usize * 16 / esize) as u32;
        if box0 > 256 {
            continue;
        }
        let mut desc = TensorMapDesc {
            rank,
            data_type: dtype,
            elem_bytes: esize as u32,
            mode: TensorMapMode::Tiled,
            swizzle: swz,
            oob_fill: if is_float(dtype) && pick(rng, 3) == 0 { 1 } else { 0 },
            ..Default::default()
        };
        desc.dims[0] = 1 + pick(rng, box0 * 2 + 8);
        desc.box_dim[0] = box0;
        desc.elem_strides[0] = 1;
        for d in 1..rank as usize {
            desc.dims[d] = 1 + pick(rng, if rank > 3 { 5 } else { 12 });
            desc.box_dim[d] = 1 + pick(rng, if rank > 3 { 3 } else { 6 });
            desc.elem_strides[d] = if pick(rng, 4) == 0 { 2 + pick(rng, 2) } else { 1 };
        }
        // Strides: the row padded to 16 bytes plus random padding.
        desc.strides[0] = esize as u64;
        let mut extent = (desc.dims[0] as u64 * esize as u64).div_ceil(16) * 16;
        for d in 1..rank as usize {
            desc.strides[d] = extent + 16 * pick(rng, 3) as u64;
            extent = desc.strides[d] * desc.dims[d] as u64;
        }
        let mut t = Tensor { desc, data: Vec::new(), addr: 0 };
        if t.image_bytes() > TILE_BYTES {
            continue;
        }
        t.data = rng.bytes(extent.div_ceil(16) as usize * 16);
        if matches!(dtype, 6..=9) {
            // Floats of small integers, so that reductions are exact in any order.
            for e in t.data.chunks_exact_mut(esize) {
                let v = (rng.next_u32() % 100) as i32 - 50;
                e.copy_from_slice(&float_bytes(dtype, v));
            }
        }
        t.addr = upload(ctx, &t.data);
        t.desc.address = t.addr;
        return t;
    }
}

/// Random box coordinates: mostly overlapping the tensor, often sticking out
/// on either side (negative coordinates included).
fn random_coords(rng: &mut Lcg, t: &Tensor) -> [i32; 5] {
    let mut c = [0i32; 5];
    for (d, v) in c.iter_mut().enumerate().take(t.desc.rank as usize) {
        let reach = (t.desc.box_dim[d] * t.desc.elem_strides[d]) as i32;
        let span = t.desc.dims[d] as i32 + reach + 2;
        *v = (rng.next_u32() % span as u32) as i32 - reach - 1;
    }
    c
}

fn coords_bytes(cs: &[[i32; 5]]) -> Vec<u8> {
    cs.iter().flatten().flat_map(|v| v.to_le_bytes()).collect()
}

/// Launches a load kernel (`map_arg` is the map parameter, when the kernel takes it) and checks every box.
fn run_load(ctx: &Context, f: &Function, t: &Tensor, coords: &[[i32; 5]], map_arg: &[u8], what: &str) {
    let bytes = t.image_bytes();
    let dc = upload(ctx, &coords_bytes(coords));
    let out = ctx.alloc((bytes * coords.len()) as u64).unwrap();
    ctx.memset_d8(out, 0xA5, (bytes * coords.len()) as u64).unwrap();
    let params = f
        .pack_params(&[
            map_arg,
            &dc.to_le_bytes(),
            &out.to_le_bytes(),
            &(t.box_bytes() as u32).to_le_bytes(),
            &(bytes as u32).to_le_bytes(),
        ])
        .unwrap();
    ctx.launch(f, [coords.len() as u32, 1, 1], [128, 1, 1], 0, &params).unwrap();
    let got = download(ctx, out, bytes * coords.len());
    for (b, c) in coords.iter().enumerate() {
        let want = t.reference_load(*c);
        let have = &got[b * bytes..(b + 1) * bytes];
        if have != want.as_slice() {
            let i = (0..bytes).find(|&i| have[i] != want[i]).unwrap();
            panic!(
                "{what}: box {b} at {c:?} differs at byte {i} (have {:#04x}, want {:#04x}); map {:?}",
                have[i], want[i], t.desc
            );
        }
    }
    ctx.free(dc).unwrap();
    ctx.free(out).unwrap();
}

#[test]
fn tiled_loads_of_every_rank_dtype_and_swizzle() {
    let ctx = context();
    let m = ctx.load_module(TILE, "tma_tile.ptx").unwrap();
    let mut rng = Lcg(0x7A11);
    for round in 0..40 {
        let rank = 1 + round % 5;
        let t = random_tensor(&ctx, &mut rng, rank, false);
        let f = m.function(&format!("tma_load_{rank}d")).unwrap();
        let coords: Vec<[i32; 5]> = (0..4).map(|_| random_coords(&mut rng, &t)).collect();
        run_load(&ctx, &f, &t, &coords, &t.desc.encode(), &format!("round {round}"));
        ctx.free(t.addr).unwrap();
    }
    assert_clean(&ctx);
}

/// Boxes on a grid that crosses every edge of a 2-D f32 tensor, for each
/// swizzle mode: the interior, the negative side and the far side.
#[test]
fn swizzled_boxes_crossing_edges() {
    let ctx = context();
    let m = ctx.load_module(TILE, "tma_tile.ptx").unwrap();
    let f = m.function("tma_load_2d").unwrap();
    let mut rng = Lcg(0x5E);
    for swizzle in 0..=6u32 {
        let inner = match swizzle {
            1 => 32,
            2 => 64,
            _ => 128,
        };
        let box0 = inner / 4;
        let (w, h) = (70u32, 21u32);
        let pitch = 80 * 4;
        let data = rng.bytes(pitch * h as usize);
        let addr = upload(&ctx, &data);
        let mut desc = TensorMapDesc {
            address: addr,
            rank: 2,
            data_type: 7,
            elem_bytes: 4,
            swizzle,
            oob_fill: (swizzle % 2),
            ..Default::default()
        };
        desc.dims[..2].copy_from_slice(&[w, h]);
        desc.strides[..2].copy_from_slice(&[4, pitch as u64]);
        desc.box_dim[..2].copy_from_slice(&[box0, 16]);
        desc.elem_strides[..2].copy_from_slice(&[1, 1]);
        let t = Tensor { desc, data, addr };
        let mut coords = Vec::new();
        for y in [-15i32, -3, 0, 5, 10, 20] {
            for x in [-(box0 as i32) + 1, -5, 0, 17, 60, 69] {
                coords.push([x, y, 0, 0, 0]);
            }
        }
        run_load(&ctx, &f, &t, &coords, &t.desc.encode(), &format!("swizzle {swizzle}"));
        ctx.free(addr).unwrap();
    }
    assert_clean(&ctx);
}

/// A copy through a map that no encoder wrote fails the launch.
#[test]
fn invalid_maps_fail_the_launch() {
    let ctx = context();
    let m = ctx.load_module(TILE, "tma_tile.ptx").unwrap();
    let f = m.function("tma_load_2d").unwrap();
    let dc = upload(&ctx, &coords_bytes(&[[0; 5]]));
    let out = ctx.alloc(4096).unwrap();
    let params = f
        .pack_params(&[&[0u8; 128], &dc.to_le_bytes(), &out.to_le_bytes(), &64u32.to_le_bytes(), &64u32.to_le_bytes()])
        .unwrap();
    let r = ctx.launch(&f, [1, 1, 1], [128, 1, 1], 0, &params).and_then(|_| ctx.synchronize());
    assert!(r.is_err(), "a zeroed tensor map was accepted");
    assert_clean(&ctx);
}

/// The map read from global memory (a pointer parameter) and from a
/// `__constant__` variable instead of a `__grid_constant__` parameter.
#[test]
fn maps_in_global_and_constant_memory() {
    let ctx = context();
    let m = ctx.load_module(TILE, "tma_tile.ptx").unwrap();
    let mut rng = Lcg(0xC0);
    let t = random_tensor(&ctx, &mut rng, 2, false);
    let coords: Vec<[i32; 5]> = (0..3).map(|_| random_coords(&mut rng, &t)).collect();
    let map = t.desc.encode();
    let gmap = upload(&ctx, &map);
    let f = m.function("tma_load_2d_global").unwrap();
    run_load(&ctx, &f, &t, &coords, &gmap.to_le_bytes(), "map in global memory");
    let (caddr, csize) = m.global("const_map").unwrap();
    assert_eq!(csize, 128);
    ctx.copy_htod(caddr, &map).unwrap();
    let f = m.function("tma_load_2d_const").unwrap();
    run_load(&ctx, &f, &t, &coords, &0i32.to_le_bytes(), "map in constant memory");
    ctx.free(gmap).unwrap();
    ctx.free(t.addr).unwrap();
    assert_clean(&ctx);
}

/// Stores of every rank (one box per launch), clipped at the edges.
#[test]
fn tiled_stores_clip_at_the_edges() {
    let ctx = context();
    let m = ctx.load_module(TILE, "tma_tile.ptx").unwrap();
    let mut rng = Lcg(0x5708E);
    for round in 0..20 {
        let rank = 1 + round % 5;
        let t = random_tensor(&ctx, &mut rng, rank, true);
        let f = m.function(&format!("tma_store_{rank}d")).unwrap();
        let c = random_coords(&mut rng, &t);
        let smem = rng.bytes(t.image_bytes());
        let mut want = t.data.clone();
        t.reference_store(&mut want, c, &smem, 0);
        launch_store(&ctx, &f, &t, &[c], &smem, 0);
        let have = download(&ctx, t.addr, t.data.len());
        assert!(have == want, "round {round}: store of box {c:?} differs; map {:?}", t.desc);
        ctx.free(t.addr).unwrap();
    }
    assert_clean(&ctx);
}

fn launch_store(ctx: &Context, f: &Function, t: &Tensor, coords: &[[i32; 5]], smem: &[u8], op: u32) {
    let dc = upload(ctx, &coords_bytes(coords));
    let din = upload(ctx, smem);
    // Each block's share of `smem` (its shared image).
    let bytes = (smem.len() / coords.len()) as u32;
    let params = f
        .pack_params(&[
            &t.desc.encode(),
            &dc.to_le_bytes(),
            &din.to_le_bytes(),
            &bytes.to_le_bytes(),
            &(op as i32).to_le_bytes(),
        ])
        .unwrap();
    ctx.launch(f, [coords.len() as u32, 1, 1], [128, 1, 1], 0, &params).unwrap();
    ctx.free(dc).unwrap();
    ctx.free(din).unwrap();
}

/// Reductions from overlapping boxes of several blocks (so they must be
/// atomic); inc/dec, which do not commute, from one block.
#[test]
fn tensor_reductions() {
    let ctx = context();
    let m = ctx.load_module(TILE, "tma_tile.ptx").unwrap();
    let mut rng = Lcg(0x4ED);
    let cases: &[(u32, &[u32])] = &[
        (2, &[1, 2, 3, 4, 5, 6, 7, 8]),
        (3, &[1, 2, 3, 6, 7, 8]),
        (4, &[1, 2, 3, 6, 7, 8]),
        (5, &[2, 3]),
        (6, &[1, 2, 3]),
        (7, &[1, 2, 3]),
        (8, &[1, 2, 3]),
        (9, &[1, 2, 3]),
    ];
    for &(dtype, ops) in cases {
        for &op in ops {
            let rank = 2 + rng.next_u32() % 2;
            let mut t = random_tensor(&ctx, &mut rng, rank, true);
            while t.desc.data_type != dtype {
                ctx.free(t.addr).unwrap();
                t = random_tensor(&ctx, &mut rng, rank, true);
            }
            let f = m.function(&format!("tma_store_{rank}d")).unwrap();
            let blocks = if matches!(op, 4 | 5) { 1 } else { 6 };
            let coords: Vec<[i32; 5]> = (0..blocks).map(|_| random_coords(&mut rng, &t)).collect();
            let bytes = t.image_bytes();
            let mut smem = rng.bytes(bytes * blocks);
            if matches!(dtype, 6..=9) {
                for e in smem.chunks_exact_mut(t.esize()) {
                    let v = (rng.next_u32() % 32) as i32 - 16;
                    e.copy_from_slice(&float_bytes(dtype, v));
                }
            }
            if matches!(op, 4 | 5) {
                // inc/dec limits: keep some below and some above the old values.
                for e in smem.chunks_exact_mut(4) {
                    let v = rng.next_u32() >> (rng.next_u32() % 32);
                    e.copy_from_slice(&v.to_le_bytes());
                }
            }
            let mut want = t.data.clone();
            for (b, c) in coords.iter().enumerate() {
                t.reference_store(&mut want, *c, &smem[b * bytes..(b + 1) * bytes], op);
            }
            launch_store(&ctx, &f, &t, &coords, &smem, op);
            let have = download(&ctx, t.addr, t.data.len());
            assert!(have == want, "dtype {dtype} op {op}: reduction differs; map {:?}", t.desc);
            ctx.free(t.addr).unwrap();
        }
    }
    assert_clean(&ctx);
}

fn read_u32(ctx: &Context, d: u64, n: usize) -> Vec<u32> {
    download(ctx, d, n * 4).chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
fn mbarrier_phases() {
    let ctx = context();
    let m = ctx.load_module(MBARRIER, "tma_mbarrier.ptx").unwrap();
    let f = m.function("mbarrier_single").unwrap();
    let out = ctx.alloc(64).unwrap();
    ctx.memset_d32(out, 0x5555_5555, 16).unwrap();
    ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &f.pack_params(&[&out.to_le_bytes()]).unwrap()).unwrap();
    assert_eq!(read_u32(&ctx, out, 16), [0, 3, 1, 1, 1, 0, 0, 0, 1, 2, 0, 1, 1, 2, 1, 0xC0FFEE]);

    // Every thread of several blocks arrives on each of five phases.
    let f = m.function("mbarrier_all").unwrap();
    let (blocks, threads, phases) = (3usize, 96usize, 5i32);
    let out = ctx.alloc((blocks * threads * 4) as u64).unwrap();
    ctx.memset_d32(out, 0, (blocks * threads) as u64).unwrap();
    let params = f.pack_params(&[&out.to_le_bytes(), &phases.to_le_bytes()]).unwrap();
    ctx.launch(&f, [blocks as u32, 1, 1], [threads as u32, 1, 1], 0, &params).unwrap();
    let counts = read_u32(&ctx, out, blocks * threads);
    assert!(counts.iter().all(|&c| c == 3 * phases as u32), "{counts:?}");

    // cp.async completing on an mbarrier (cp.async.mbarrier.arrive.noinc).
    let f = m.function("mbarrier_cp_async").unwrap();
    let n = 4 * 64;
    let data: Vec<u32> = {
        let mut rng = Lcg(9);
        (0..n * 4).map(|_| rng.next_u32()).collect()
    };
    let din = upload(&ctx, &words(&data));
    let dout = ctx.alloc((n * 16) as u64).unwrap();
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes()]).unwrap();
    ctx.launch(&f, [4, 1, 1], [64, 1, 1], 0, &params).unwrap();
    let got = read_u32(&ctx, dout, n * 4);
    for b in 0..4 {
        for t in 0..64 {
            let src = b * 64 + (t + 1) % 64;
            assert_eq!(got[(b * 64 + t) * 4..][..4], data[src * 4..][..4], "block {b} thread {t}");
        }
    }
    assert_clean(&ctx);
}

#[test]
fn bulk_copies_and_reduction() {
    let ctx = context();
    let m = ctx.load_module(MBARRIER, "tma_mbarrier.ptx").unwrap();
    let f = m.function("bulk_copy").unwrap();
    let (blocks, bytes) = (5usize, 4096usize - 48);
    let words_per = bytes / 4;
    let mut rng = Lcg(77);
    let src: Vec<u32> = (0..blocks * words_per).map(|_| rng.next_u32()).collect();
    let dsrc = upload(&ctx, &words(&src));
    let ddst = ctx.alloc((blocks * bytes) as u64).unwrap();
    ctx.memset_d8(ddst, 0xA5, (blocks * bytes) as u64).unwrap();
    let init: Vec<u32> = (0..words_per).map(|_| rng.next_u32()).collect();
    let dsum = upload(&ctx, &words(&init));
    let params = f
        .pack_params(&[&dsrc.to_le_bytes(), &ddst.to_le_bytes(), &dsum.to_le_bytes(), &(bytes as u32).to_le_bytes()])
        .unwrap();
    ctx.launch(&f, [blocks as u32, 1, 1], [128, 1, 1], 0, &params).unwrap();
    let dst = read_u32(&ctx, ddst, blocks * words_per);
    let sum = read_u32(&ctx, dsum, words_per);
    let mut want_sum = init.clone();
    for b in 0..blocks {
        for k in 0..words_per {
            let v = src[b * words_per + k].wrapping_mul(3).wrapping_add(b as u32);
            assert_eq!(dst[b * words_per + k], v, "block {b} word {k}");
            want_sum[k] = want_sum[k].wrapping_add(v);
        }
    }
    assert_eq!(sum, want_sum);
    assert_clean(&ctx);
}

/// A two-stage pipeline reusing each mbarrier with alternating phase parity.
#[test]
fn two_stage_pipeline() {
    let ctx = context();
    let m = ctx.load_module(MBARRIER, "tma_mbarrier.ptx").unwrap();
    let f = m.function("tma_pipeline").unwrap();
    let (w, ktiles) = (96u32, 7u32);
    let h = 8 * ktiles - 3; // the last tile is partly out of bounds
    let mut rng = Lcg(1234);
    let vals: Vec<f32> = (0..w * h).map(|_| (rng.next_u32() % 1000) as f32 / 8.0).collect();
    let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let addr = upload(&ctx, &data);
    let mut desc = TensorMapDesc { address: addr, rank: 2, data_type: 7, elem_bytes: 4, ..Default::default() };
    desc.dims[..2].copy_from_slice(&[w, h]);
    desc.strides[..2].copy_from_slice(&[4, w as u64 * 4]);
    desc.box_dim[..2].copy_from_slice(&[32, 8]);
    desc.elem_strides[..2].copy_from_slice(&[1, 1]);
    let blocks = w / 32;
    let out = ctx.alloc(blocks as u64 * 256 * 4).unwrap();
    ctx.memset_d32(out, 0x7FC0_0001, blocks as u64 * 256).unwrap();
    let params = f.pack_params(&[&desc.encode(), &out.to_le_bytes(), &(ktiles as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [blocks, 1, 1], [128, 1, 1], 0, &params).unwrap();
    let got = read_u32(&ctx, out, blocks as usize * 256);
    for b in 0..blocks as usize {
        for r in 0..8usize {
            for c in 0..32usize {
                let mut acc = 0.0f32;
                for k in 0..ktiles as usize {
                    let y = 8 * k + r;
                    if y < h as usize {
                        acc += vals[y * w as usize + b * 32 + c];
                    }
                }
                assert_eq!(f32::from_bits(got[b * 256 + r * 32 + c]), acc, "block {b} row {r} col {c}");
            }
        }
    }
    assert_clean(&ctx);
}

const MODES: &str = include_str!("ptx/tma_modes.ptx");

impl Tensor {
    /// The value of element `x` (dimension 0) of the row at byte offset
    /// `row` (`None` when the row lies outside the tensor), or the fill.
    fn element(&self, row: Option<usize>, x: i64) -> Vec<u8> {
        let es = self.esize();
        match row {
            Some(r) if x >= 0 && x < self.desc.dims[0] as i64 => {
                let o = r + x as usize * es;
                self.data[o..o + es].to_vec()
            }
            _ if self.desc.oob_fill == 1 => {
                let mut v = vec![0xFFu8; es];
                v[es - 1] = 0x7F;
                v
            }
            _ => vec![0u8; es],
        }
    }

    /// The shared image of an im2col load (section 5.5.4): the filter base
    /// starts at the coordinates and walks the bounding box [lower corner,
    /// size - 1 + upper corner] with the traversal strides, W fastest, then H,
    /// then D, then the next image; each pixel read is base + offsets, and
    /// its `channels_per_pixel` channels from `c[0]` on make one row.
    fn reference_im2col(&self, c: [i32; 5], offs: [u32; 3]) -> Vec<u8> {
        let es = self.esize();
        let bytes = (self.desc.pixels_per_column * self.desc.channels_per_pixel) as usize * es;
        let mut out: Vec<u8> = POISON.to_le_bytes().iter().copied().cycle().take(bytes.div_ceil(128) * 128).collect();
        self.walk_im2col(c, offs, |smem, row, x| {
            let at = swizzle(smem, self.desc.swizzle);
            out[at..at + es].copy_from_slice(&self.element(row, x));
        });
        out
    }

    /// Calls `f(logical shared offset, byte offset of the pixel when it is
    /// inside the tensor, channel)` for every element of an im2col copy.
    fn walk_im2col(&self, c: [i32; 5], offs: [u32; 3], mut f: impl FnMut(usize, Option<usize>, i64)) {
        let d = &self.desc;
        let rank = d.rank as usize;
        let ns = rank - 2;
        let es = self.esize();
        let row_bytes = d.channels_per_pixel as usize * es;
        let mut base = [0i64; 3];
        for (s, b) in base.iter_mut().enumerate().take(ns) {
            *b = c[1 + s] as i64;
        }
        let mut image = c[rank - 1] as i64;
        for p in 0..d.pixels_per_column as usize {
            let pixel: Vec<i64> = (0..ns).map(|s| base[s] + offs[s] as i64).collect();
            let inside = (0..ns).all(|s| pixel[s] >= 0 && pixel[s] < d.dims[1 + s] as i64)
                && image >= 0
                && image < d.dims[rank - 1] as i64;
            let row = inside.then(|| {
                (0..ns).map(|s| pixel[s] as usize * d.strides[1 + s] as usize).sum::<usize>()
                    + image as usize * d.strides[rank - 1] as usize
            });
            for ch in 0..d.channels_per_pixel as usize {
                f(p * row_bytes + ch * es, row, c[0] as i64 + ch as i64);
            }
            // Step the base like an odometer.
            let mut s = 0;
            loop {
                if s == ns {
                    image += 1;
                    break;
                }
                base[s] += d.elem_strides[1 + s] as i64;
                if base[s] <= d.dims[1 + s] as i64 - 1 + d.upper_corner[s] as i64 {
                    break;
                }
                base[s] = d.lower_corner[s] as i64;
                s += 1;
            }
        }
    }

    /// The shared image of a gather4 load: four rows of a 2-D tensor, at
    /// dimension-1 coordinates c[1..5], from column c[0].
    fn reference_gather4(&self, c: [i32; 5]) -> Vec<u8> {
        let es = self.esize();
        let n0 = self.desc.box_dim[0] as usize;
        let bytes = 4 * n0 * es;
        let mut out: Vec<u8> = POISON.to_le_bytes().iter().copied().cycle().take(bytes.div_ceil(128) * 128).collect();
        for (k, &y) in c[1..5].iter().enumerate() {
            let row = (y >= 0 && (y as u32) < self.desc.dims[1]).then(|| y as usize * self.desc.strides[1] as usize);
            for j in 0..n0 {
                let at = swizzle((k * n0 + j) * es, self.desc.swizzle);
                out[at..at + es].copy_from_slice(&self.element(row, c[0] as i64 + j as i64));
            }
        }
        out
    }
}

/// A random tensor of `rank` (3 to 5) dimensions (C, W[, H[, D]], N) with an im2col map.
fn random_im2col(ctx: &Context, rng: &mut Lcg, rank: u32) -> Tensor {
    let pick = |rng: &mut Lcg, n: u32| rng.next_u32() % n;
    loop {
        let (dtype, esize) = DTYPES[pick(rng, DTYPES.len() as u32) as usize];
        let swizzle = [0, 1, 2, 3, 4, 6][pick(rng, 6) as usize];
        let span = match swizzle {
            1 => 32,
            2 => 64,
            _ => 128,
        };
        let cpp = (16 * (1 + pick(rng, span / 16)) as usize / esize) as u32;
        let mut desc = TensorMapDesc {
            rank,
            data_type: dtype,
            elem_bytes: esize as u32,
            mode: TensorMapMode::Im2col,
            swizzle,
            oob_fill: if is_float(dtype) && pick(rng, 3) == 0 { 1 } else { 0 },
            channels_per_pixel: cpp,
            pixels_per_column: 1 + pick(rng, 48),
            ..Default::default()
        };
        let ns = rank as usize - 2;
        desc.dims[0] = 1 + pick(rng, cpp + cpp / 2);
        desc.box_dim = [cpp, 1, 1, 1, 1];
        desc.elem_strides = [1; 5];
        for s in 0..ns {
            desc.dims[1 + s] = 1 + pick(rng, 7);
            desc.elem_strides[1 + s] = 1 + pick(rng, 2);
            desc.lower_corner[s] = pick(rng, 3) as i32 - 2;
            desc.upper_corner[s] = pick(rng, 3) as i32 - 2;
            if desc.dims[1 + s] as i32 - 1 + desc.upper_corner[s] < desc.lower_corner[s] {
                desc.upper_corner[s] = 0;
                desc.lower_corner[s] = 0;
            }
        }
        desc.dims[rank as usize - 1] = 1 + pick(rng, 3);
        desc.strides[0] = esize as u64;
        let mut extent = (desc.dims[0] as u64 * esize as u64).div_ceil(16) * 16;
        for d in 1..rank as usize {
            desc.strides[d] = extent + 16 * pick(rng, 2) as u64;
            extent = desc.strides[d] * desc.dims[d] as u64;
        }
        let bytes = desc.pixels_per_column as usize * cpp as usize * esize;
        if bytes.div_ceil(128) * 128 > TILE_BYTES {
            continue;
        }
        let data = rng.bytes(extent as usize);
        let addr = upload(ctx, &data);
        desc.address = addr;
        return Tensor { desc, data, addr };
    }
}

/// Launches an im2col or gather4 kernel of `tma_modes.ptx` and checks each block's image.
fn run_mode(
    ctx: &Context,
    f: &Function,
    t: &Tensor,
    blocks: &[([i32; 5], [u32; 3])],
    box_bytes: usize,
    reference: &dyn Fn([i32; 5], [u32; 3]) -> Vec<u8>,
    what: &str,
) {
    let image = box_bytes.div_ceil(128) * 128;
    let coords: Vec<[i32; 5]> = blocks.iter().map(|b| b.0).collect();
    let offs: Vec<u32> = blocks.iter().flat_map(|b| b.1).collect();
    let dc = upload(ctx, &coords_bytes(&coords));
    let doffs = upload(ctx, &words(&offs));
    let out = ctx.alloc((image * blocks.len()) as u64).unwrap();
    ctx.memset_d8(out, 0xA5, (image * blocks.len()) as u64).unwrap();
    let params = f
        .pack_params(&[
            &t.desc.encode(),
            &dc.to_le_bytes(),
            &doffs.to_le_bytes(),
            &out.to_le_bytes(),
            &(box_bytes as u32).to_le_bytes(),
            &(image as u32).to_le_bytes(),
        ])
        .unwrap();
    ctx.launch(f, [blocks.len() as u32, 1, 1], [128, 1, 1], 0, &params).unwrap();
    let got = download(ctx, out, image * blocks.len());
    for (b, &(c, o)) in blocks.iter().enumerate() {
        let want = reference(c, o);
        let have = &got[b * image..(b + 1) * image];
        if have != want.as_slice() {
            let i = (0..image).find(|&i| have[i] != want[i]).unwrap();
            panic!(
                "{what}: block {b} at {c:?} offsets {o:?} differs at byte {i} (have {:#04x}, want {:#04x}); map {:?}",
                have[i], want[i], t.desc
            );
        }
    }
    for d in [dc, doffs, out] {
        ctx.free(d).unwrap();
    }
}

fn im2col_bytes(t: &Tensor) -> usize {
    (t.desc.pixels_per_column * t.desc.channels_per_pixel * t.desc.elem_bytes) as usize
}

#[test]
fn im2col_loads() {
    let ctx = context();
    let m = ctx.load_module(MODES, "tma_modes.ptx").unwrap();
    let mut rng = Lcg(0x1A2C);
    for round in 0..24 {
        let rank = 3 + round % 3;
        let t = random_im2col(&ctx, &mut rng, rank);
        let f = m.function(&format!("tma_im2col_{rank}d")).unwrap();
        let ns = rank as usize - 2;
        let blocks: Vec<([i32; 5], [u32; 3])> = (0..4)
            .map(|_| {
                let mut c = [0i32; 5];
                c[0] = (rng.next_u32() % (t.desc.dims[0] + 8)) as i32 - 4;
                for s in 0..ns {
                    // A base on the traversal grid of the box (possibly past its end).
                    let k = (rng.next_u32() % 5) as i32;
                    c[1 + s] = t.desc.lower_corner[s] + k * t.desc.elem_strides[1 + s] as i32;
                }
                c[rank as usize - 1] = (rng.next_u32() % (t.desc.dims[rank as usize - 1] + 1)) as i32;
                let mut o = [0u32; 3];
                for v in o.iter_mut().take(ns) {
                    *v = rng.next_u32() % 3;
                }
                (c, o)
            })
            .collect();
        run_mode(&ctx, &f, &t, &blocks, im2col_bytes(&t), &|c, o| t.reference_im2col(c, o), &format!("round {round}"));
        ctx.free(t.addr).unwrap();
    }
    assert_clean(&ctx);
}

/// The im2col examples of section 5.5.4 (f16 NHWC tensors, 4-D).
#[test]
fn im2col_examples_of_the_isa() {
    let ctx = context();
    let m = ctx.load_module(MODES, "tma_modes.ptx").unwrap();
    let f = m.function("tma_im2col_4d").unwrap();
    let mut rng = Lcg(0x55);
    // (W, H, pixels per column, channels per pixel, lower, upper, stride, coordinates, offsets)
    type Example = (u32, u32, u32, u32, [i32; 2], [i32; 2], u32, [i32; 5], [u32; 3]);
    let examples: [Example; 3] = [
        (9, 14, 64, 8, [-1, -1], [-1, -1], 1, [7, 7, 4, 0, 0], [0, 0, 0]),
        (9, 14, 64, 8, [0, 0], [-2, -2], 1, [7, 7, 4, 0, 0], [2, 2, 0]),
        (8, 14, 32, 16, [-1, -1], [-1, -1], 2, [7, 7, 5, 0, 0], [1, 1, 0]),
    ];
    for (i, (w, h, ppc, cpp, lower, upper, stride, c, o)) in examples.into_iter().enumerate() {
        let dims = [64u32, w, h, 64];
        let mut desc = TensorMapDesc {
            rank: 4,
            data_type: 6,
            elem_bytes: 2,
            mode: TensorMapMode::Im2col,
            channels_per_pixel: cpp,
            pixels_per_column: ppc,
            box_dim: [cpp, 1, 1, 1, 1],
            elem_strides: [1, stride, stride, 1, 1],
            ..Default::default()
        };
        desc.dims[..4].copy_from_slice(&dims);
        desc.strides[..4].copy_from_slice(&[2, 128, 128 * w as u64, 128 * (w * h) as u64]);
        desc.lower_corner[..2].copy_from_slice(&lower);
        desc.upper_corner[..2].copy_from_slice(&upper);
        let data = rng.bytes(128 * (w * h * 64) as usize);
        let addr = upload(&ctx, &data);
        desc.address = addr;
        let t = Tensor { desc, data, addr };
        let bytes = im2col_bytes(&t);
        run_mode(&ctx, &f, &t, &[(c, o)], bytes, &|c, o| t.reference_im2col(c, o), &format!("example {}", i + 1));
        ctx.free(addr).unwrap();
    }
    assert_clean(&ctx);
}

/// .tile::gather4 loads and .tile::scatter4 stores of four rows of a 2-D tensor.
#[test]
fn gather4_and_scatter4() {
    let ctx = context();
    let m = ctx.load_module(MODES, "tma_modes.ptx").unwrap();
    let gather = m.function("tma_gather4").unwrap();
    let scatter = m.function("tma_scatter4").unwrap();
    let mut rng = Lcg(0x6A4);
    for round in 0..12 {
        let mut t = random_tensor(&ctx, &mut rng, 2, true);
        t.desc.box_dim[1] = 1;
        t.desc.elem_strides[1] = 1;
        let row = |rng: &mut Lcg, t: &Tensor| (rng.next_u32() % (t.desc.dims[1] + 4)) as i32 - 2;
        let col = |rng: &mut Lcg, t: &Tensor| {
            let b = t.desc.box_dim[0] as i32;
            (rng.next_u32() % (t.desc.dims[0] + b as u32 + 2)) as i32 - b - 1
        };
        let box_bytes = 4 * t.desc.box_dim[0] as usize * t.esize();
        let blocks: Vec<([i32; 5], [u32; 3])> = (0..3)
            .map(|_| {
                (
                    [col(&mut rng, &t), row(&mut rng, &t), row(&mut rng, &t), row(&mut rng, &t), row(&mut rng, &t)],
                    [0; 3],
                )
            })
            .collect();
        run_mode(
            &ctx,
            &gather,
            &t,
            &blocks,
            box_bytes,
            &|c, _| t.reference_gather4(c),
            &format!("gather round {round}"),
        );

        // Scatter four distinct rows from one block.
        let image = box_bytes.div_ceil(128) * 128;
        let smem = rng.bytes(image);
        let mut rows: Vec<i32> = (0..t.desc.dims[1] as i32 + 3).map(|r| r - 1).collect();
        for i in (1..rows.len()).rev() {
            rows.swap(i, rng.next_u32() as usize % (i + 1));
        }
        rows.resize(4, -1);
        let c = [col(&mut rng, &t), rows[0], rows[1], rows[2], rows[3]];
        let mut want = t.data.clone();
        let es = t.esize();
        let n0 = t.desc.box_dim[0] as usize;
        for (k, &y) in c[1..5].iter().enumerate() {
            if y < 0 || y as u32 >= t.desc.dims[1] {
                continue;
            }
            for j in 0..n0 {
                let x = c[0] as i64 + j as i64;
                if x < 0 || x >= t.desc.dims[0] as i64 {
                    continue;
                }
                let o = y as usize * t.desc.strides[1] as usize + x as usize * es;
                let at = swizzle((k * n0 + j) * es, t.desc.swizzle);
                want[o..o + es].copy_from_slice(&smem[at..at + es]);
            }
        }
        let dc = upload(&ctx, &coords_bytes(&[c]));
        let din = upload(&ctx, &smem);
        let params = scatter
            .pack_params(&[&t.desc.encode(), &dc.to_le_bytes(), &din.to_le_bytes(), &(image as u32).to_le_bytes()])
            .unwrap();
        ctx.launch(&scatter, [1, 1, 1], [128, 1, 1], 0, &params).unwrap();
        let have = download(&ctx, t.addr, t.data.len());
        assert!(have == want, "scatter round {round}: rows {c:?} differ; map {:?}", t.desc);
        for d in [dc, din, t.addr] {
            ctx.free(d).unwrap();
        }
    }
    assert_clean(&ctx);
}

/// `.im2col_no_offs` stores: the pixels of the walk, clipped at the tensor's edges.
#[test]
fn im2col_stores() {
    let ctx = context();
    let m = ctx.load_module(MODES, "tma_modes.ptx").unwrap();
    let f = m.function("tma_im2col_store_4d").unwrap();
    let mut rng = Lcg(0x1C57);
    for round in 0..8 {
        let t = random_im2col(&ctx, &mut rng, 4);
        let mut c = [0i32; 5];
        c[0] = (rng.next_u32() % (t.desc.dims[0] + 4)) as i32 - 2;
        for s in 0..2 {
            c[1 + s] = t.desc.lower_corner[s] + (rng.next_u32() % 4) as i32 * t.desc.elem_strides[1 + s] as i32;
        }
        c[3] = (rng.next_u32() % t.desc.dims[3]) as i32;
        let image = im2col_bytes(&t).div_ceil(128) * 128;
        let smem = rng.bytes(image);
        let mut want = t.data.clone();
        let es = t.esize();
        t.walk_im2col(c, [0; 3], |off, row, x| {
            if let (Some(r), true) = (row, x >= 0 && x < t.desc.dims[0] as i64) {
                let o = r + x as usize * es;
                let at = swizzle(off, t.desc.swizzle);
                want[o..o + es].copy_from_slice(&smem[at..at + es]);
            }
        });
        let dc = upload(&ctx, &coords_bytes(&[c]));
        let din = upload(&ctx, &smem);
        let params = f
            .pack_params(&[&t.desc.encode(), &dc.to_le_bytes(), &din.to_le_bytes(), &(image as u32).to_le_bytes()])
            .unwrap();
        ctx.launch(&f, [1, 1, 1], [128, 1, 1], 0, &params).unwrap();
        let have = download(&ctx, t.addr, t.data.len());
        assert!(have == want, "round {round}: im2col store at {c:?} differs; map {:?}", t.desc);
        for d in [dc, din, t.addr] {
            ctx.free(d).unwrap();
        }
    }
    assert_clean(&ctx);
}

impl Tensor {
    /// The walk position of pixel `k` of an `.im2col::w` copy: W steps by
    /// its traversal stride from `c[1] + woff` through the bounding box
    /// [lower W + woff, size - 1 + upper W + woff], restarting at its lower
    /// end in the next image. Returns (W, image).
    fn w_walk(&self, c: [i32; 5], woff: i64, k: usize) -> (i64, i64) {
        let d = &self.desc;
        let rank = d.rank as usize;
        let lo = d.lower_corner[0] as i64 + woff;
        let hi = d.dims[1] as i64 - 1 + d.upper_corner[0] as i64 + woff;
        let (mut w, mut n) = (c[1] as i64 + woff, c[rank - 1] as i64);
        for _ in 0..k {
            w += d.elem_strides[1] as i64;
            if w > hi {
                w = lo;
                n += 1;
            }
        }
        (w, n)
    }

    /// Rows of an `.im2col::w` (`w128` false) or `.im2col::w::128` load.
    fn w_rows(&self, halo: u32, w128: bool) -> usize {
        if w128 {
            128 + 4 * halo as usize
        } else {
            (self.desc.pixels_per_column + halo) as usize
        }
    }

    /// The walk pixel that row `r` holds: for `.im2col::w` the pixels and
    /// then the halo pixels that continue the walk; for `.im2col::w::128`
    /// four groups of 32 pixels, each followed by `halo` pixels continuing it.
    fn w_pixel(r: usize, halo: u32, w128: bool) -> usize {
        if w128 {
            let g = 32 + halo as usize;
            32 * (r / g) + r % g
        } else {
            r
        }
    }

    /// Byte offset of the pixel at (W, image) with H and D from the coordinates, when inside the tensor.
    fn w_row_offset(&self, c: [i32; 5], w: i64, n: i64) -> Option<usize> {
        let d = &self.desc;
        let rank = d.rank as usize;
        // (dimension, coordinate): W, H (rank >= 4), D (rank 5), N.
        let mut at = vec![(1usize, w)];
        at.extend(c.iter().enumerate().take(rank - 1).skip(2).map(|(s, &x)| (s, x as i64)));
        at.push((rank - 1, n));
        let inside = at.iter().all(|&(dim, x)| x >= 0 && x < d.dims[dim] as i64);
        inside.then(|| at.iter().map(|&(dim, x)| x as usize * d.strides[dim] as usize).sum())
    }

    /// The shared image of an `.im2col::w` / `.im2col::w::128` load (section 5.5.5).
    fn reference_im2col_w(&self, c: [i32; 5], halo: u32, woff: u32, w128: bool) -> Vec<u8> {
        let es = self.esize();
        let cpp = self.desc.channels_per_pixel as usize;
        let rows = self.w_rows(halo, w128);
        let bytes = rows * cpp * es;
        let mut out: Vec<u8> = POISON.to_le_bytes().iter().copied().cycle().take(bytes.div_ceil(128) * 128).collect();
        for r in 0..rows {
            let (w, n) = self.w_walk(c, woff as i64, Self::w_pixel(r, halo, w128));
            let row = self.w_row_offset(c, w, n);
            for ch in 0..cpp {
                let at = swizzle((r * cpp + ch) * es, self.desc.swizzle);
                out[at..at + es].copy_from_slice(&self.element(row, c[0] as i64 + ch as i64));
            }
        }
        out
    }
}

/// A random tensor with an im2col-wide map (`.im2col::w` or, with `w128`, `.im2col::w::128`).
fn random_im2col_w(ctx: &Context, rng: &mut Lcg, rank: u32, w128: bool) -> Tensor {
    loop {
        let mut t = random_im2col(ctx, rng, rank);
        let d = &mut t.desc;
        // Wide maps take the 64B, 128B and 128B-with-32B-atom swizzles only.
        d.swizzle = match d.swizzle {
            1 => 2,
            6 => 4,
            0 => 3,
            s => s,
        };
        d.mode = if w128 { TensorMapMode::Im2colW128 } else { TensorMapMode::Im2colW };
        if w128 {
            d.pixels_per_column = 128;
        }
        let rows = t.w_rows(3, w128);
        if rows * (t.desc.channels_per_pixel * t.desc.elem_bytes) as usize > TILE_BYTES - 128 {
            ctx.free(t.addr).unwrap();
            continue;
        }
        // Wider images and more of them, so that most of the up to 140
        // pixels of a walk lie inside the tensor.
        let pick = |rng: &mut Lcg, n: u32| rng.next_u32() % n;
        let d = &mut t.desc;
        let rank = rank as usize;
        d.dims[1] = 4 + pick(rng, if w128 { 40 } else { 16 });
        d.dims[rank - 1] = 2 + pick(rng, 4);
        if d.dims[1] as i32 - 1 + d.upper_corner[0] < d.lower_corner[0] {
            (d.lower_corner[0], d.upper_corner[0]) = (0, 0);
        }
        let mut extent = (d.dims[0] as u64 * d.elem_bytes as u64).div_ceil(16) * 16;
        for k in 1..rank {
            d.strides[k] = extent + 16 * pick(rng, 2) as u64;
            extent = d.strides[k] * d.dims[k] as u64;
        }
        ctx.free(t.addr).unwrap();
        t.data = rng.bytes(extent as usize);
        t.addr = upload(ctx, &t.data);
        t.desc.address = t.addr;
        return t;
    }
}

/// `.im2col::w` and `.im2col::w::128` loads of 3-D to 5-D tensors with
/// random wHalo and wOffset, H and D positions and starts left of the box.
#[test]
fn im2col_w_loads() {
    let ctx = context();
    let m = ctx.load_module(MODES, "tma_modes.ptx").unwrap();
    let mut rng = Lcg(0x1C2F);
    for round in 0..24 {
        let rank = 3 + round % 3;
        let w128 = round % 2 == 1;
        let t = random_im2col_w(&ctx, &mut rng, rank, w128);
        let name = if w128 { "w128" } else { "w" };
        let f = m.function(&format!("tma_im2col_{name}_{rank}d")).unwrap();
        let blocks: Vec<([i32; 5], [u32; 3])> = (0..4)
            .map(|_| {
                let mut c = [0i32; 5];
                c[0] = (rng.next_u32() % (t.desc.dims[0] + 8)) as i32 - 4;
                // A start on the W grid of the box, or left of it.
                let k = (rng.next_u32() % 6) as i32 - 1;
                c[1] = t.desc.lower_corner[0] + k * t.desc.elem_strides[1] as i32;
                for (s, v) in c.iter_mut().enumerate().take(rank as usize - 1).skip(2) {
                    *v = (rng.next_u32() % (t.desc.dims[s] + 2)) as i32 - 1;
                }
                c[rank as usize - 1] = (rng.next_u32() % t.desc.dims[rank as usize - 1]) as i32;
                (c, [rng.next_u32() % 4, rng.next_u32() % 3, 0])
            })
            .collect();
        for &(c, o) in &blocks {
            let bytes = t.w_rows(o[0], w128) * (t.desc.channels_per_pixel * t.desc.elem_bytes) as usize;
            run_mode(
                &ctx,
                &f,
                &t,
                &[(c, o)],
                bytes,
                &|c, o| t.reference_im2col_w(c, o[0], o[1], w128),
                &format!("round {round} ({name}, rank {rank})"),
            );
        }
        ctx.free(t.addr).unwrap();
    }
    assert_clean(&ctx);
}

/// A u8 NHWC tensor with random contents and a wide map (the examples of section 5.5.5).
fn wide_example(
    ctx: &Context,
    rng: &mut Lcg,
    dims: [u32; 4],
    lower: i32,
    upper: i32,
    stride: u32,
    w128: bool,
) -> Tensor {
    let mut desc = TensorMapDesc {
        rank: 4,
        data_type: 0,
        elem_bytes: 1,
        mode: if w128 { TensorMapMode::Im2colW128 } else { TensorMapMode::Im2colW },
        swizzle: 3,
        channels_per_pixel: 64,
        pixels_per_column: 128,
        box_dim: [64, 1, 1, 1, 1],
        elem_strides: [1, stride, 1, 1, 1],
        ..Default::default()
    };
    desc.dims[..4].copy_from_slice(&dims);
    let (c, w, h) = (dims[0] as u64, dims[1] as u64, dims[2] as u64);
    desc.strides[..4].copy_from_slice(&[1, c, c * w, c * w * h]);
    desc.lower_corner[0] = lower;
    desc.upper_corner[0] = upper;
    let data = rng.bytes((c * w * h * dims[3] as u64) as usize);
    let addr = upload(ctx, &data);
    desc.address = addr;
    Tensor { desc, data, addr }
}

/// Runs one wide load and returns its shared image un-swizzled, one row (64 channels) per pixel.
fn wide_rows(ctx: &Context, f: &Function, t: &Tensor, c: [i32; 5], halo: u32, woff: u32, w128: bool) -> Vec<Vec<u8>> {
    let rows = t.w_rows(halo, w128);
    let bytes = rows * 64;
    run_mode(ctx, f, t, &[(c, [halo, woff, 0])], bytes, &|c, o| t.reference_im2col_w(c, o[0], o[1], w128), "example");
    // The model agreed with the device; read the image back through it.
    let img = t.reference_im2col_w(c, halo, woff, w128);
    (0..rows).map(|r| (0..64).map(|ch| img[swizzle(r * 64 + ch, 3)]).collect()).collect()
}

/// The examples of section 5.5.5.3 (wHalo) and 5.5.5.4 (wOffset), with
/// hand-derived positions checked on top of the model.
#[test]
fn im2col_w_examples_of_the_isa() {
    let ctx = context();
    let m = ctx.load_module(MODES, "tma_modes.ptx").unwrap();
    let fw = m.function("tma_im2col_w_4d").unwrap();
    let f128 = m.function("tma_im2col_w128_4d").unwrap();
    let mut rng = Lcg(0x5A5);
    // The 64 channels from 7 of the pixel at (w, h, n), zero when outside.
    let pixel = |t: &Tensor, w: i64, h: i64, n: i64| -> Vec<u8> {
        let d = &t.desc;
        if w < 0 || w >= d.dims[1] as i64 || h < 0 || h >= d.dims[2] as i64 || n < 0 || n >= d.dims[3] as i64 {
            return vec![0; 64];
        }
        let o = (w as u64 * d.strides[1] + h as u64 * d.strides[2] + n as u64 * d.strides[3]) as usize;
        t.data[o + 7..o + 71].to_vec()
    };

    // wHalo, .im2col::w: size (128, 9, 7, 64), box corners 0/0, coordinates
    // (7, 2, 3, 0), wHalo 2: 128 pixels from W = 2 of image 0 (W 2..8, then
    // 0..8 of the next images), then 2 halo pixels.
    let t = wide_example(&ctx, &mut rng, [128, 9, 7, 64], 0, 0, 1, false);
    let rows = wide_rows(&ctx, &fw, &t, [7, 2, 3, 0, 0], 2, 0, false);
    assert_eq!(rows.len(), 130);
    assert_eq!(rows[0], pixel(&t, 2, 3, 0));
    assert_eq!(rows[6], pixel(&t, 8, 3, 0));
    assert_eq!(rows[7], pixel(&t, 0, 3, 1));
    // Pixel 127: 7 + 9 * 13 = 124 is W 0 of image 14, so 127 is W 3; the halo is W 4 and 5.
    assert_eq!(rows[127], pixel(&t, 3, 3, 14));
    assert_eq!(rows[128], pixel(&t, 4, 3, 14));
    assert_eq!(rows[129], pixel(&t, 5, 3, 14));
    ctx.free(t.addr).unwrap();

    // wHalo, .im2col::w::128: the same map; 4 groups of 32 pixels, each with 2 halo pixels.
    let t = wide_example(&ctx, &mut rng, [128, 9, 7, 64], 0, 0, 1, true);
    let rows = wide_rows(&ctx, &f128, &t, [7, 2, 3, 0, 0], 2, 0, true);
    assert_eq!(rows.len(), 136);
    assert_eq!(rows[0], pixel(&t, 2, 3, 0));
    // Pixel 32 = 7 + 9 * 2 + 7: W 7 of image 3, both the first halo pixel of
    // group 0 (row 32) and the first pixel of group 1 (row 34).
    assert_eq!(rows[32], pixel(&t, 7, 3, 3));
    assert_eq!(rows[33], pixel(&t, 8, 3, 3));
    assert_eq!(rows[34], pixel(&t, 7, 3, 3));
    // Row 135 is halo pixel 2 of group 3: pixel 96 + 33 = 129 = 124 + 5, W 5 of image 14.
    assert_eq!(rows[135], pixel(&t, 5, 3, 14));
    ctx.free(t.addr).unwrap();

    // wOffset example 1: size (128, 9, 67, 64), corners -1/0, traversal
    // stride 2, buffer 1 with wHalo 1 / wOffset 0 and buffer 2 with wHalo 0 /
    // wOffset 1. The coordinates as printed, (7, 2, -1, 0), put H at -1 (all
    // padding); the same buffers at W = -1, H = 2 show the interleaving: box
    // [-1, 8] from -1 gives W -1, 1, 3, 5, 7 per image, and the wOffset 1
    // buffer (box [0, 9] from 0) gives W 0, 2, 4, 6, 8.
    let t = wide_example(&ctx, &mut rng, [128, 9, 67, 64], -1, 0, 2, false);
    for (halo, woff) in [(1, 0), (0, 1)] {
        let rows = wide_rows(&ctx, &fw, &t, [7, 2, -1, 0, 0], halo, woff, false);
        assert!(rows.iter().all(|r| r.iter().all(|&b| b == 0)), "H = -1 lies outside the tensor");
    }
    let b1 = wide_rows(&ctx, &fw, &t, [7, -1, 2, 0, 0], 1, 0, false);
    let b2 = wide_rows(&ctx, &fw, &t, [7, -1, 2, 0, 0], 0, 1, false);
    assert_eq!((b1.len(), b2.len()), (129, 128));
    for k in 0..128 {
        let (n, j) = ((k / 5) as i64, (k % 5) as i64);
        assert_eq!(b1[k], pixel(&t, 2 * j - 1, 2, n), "buffer 1 pixel {k}");
        assert_eq!(b2[k], pixel(&t, 2 * j, 2, n), "buffer 2 pixel {k}");
    }
    // The halo pixel of buffer 1 continues the walk: pixel 128 is W 5 of image 25.
    assert_eq!(b1[128], pixel(&t, 5, 2, 25));
    ctx.free(t.addr).unwrap();

    // wOffset example 2: size (128, 7, 7, 64), corners -1/-1, stride 3,
    // wOffset 0, 1, 2 (the three taps of a stride-3 filter): box [-1, 5] from
    // -1 gives W -1, 2, 5 per image; [0, 6] gives 0, 3, 6; [1, 7] gives 1, 4, 7.
    let t = wide_example(&ctx, &mut rng, [128, 7, 7, 64], -1, -1, 3, false);
    for woff in 0..3u32 {
        let rows = wide_rows(&ctx, &fw, &t, [7, 2, -1, 0, 0], 0, woff, false);
        assert!(rows.iter().all(|r| r.iter().all(|&b| b == 0)), "H = -1 lies outside the tensor");
        let rows = wide_rows(&ctx, &fw, &t, [7, -1, 2, 0, 0], 0, woff, false);
        for (k, row) in rows.iter().enumerate() {
            let w = woff as i64 - 1 + 3 * (k % 3) as i64;
            assert_eq!(*row, pixel(&t, w, 2, (k / 3) as i64), "wOffset {woff} pixel {k}");
        }
    }
    ctx.free(t.addr).unwrap();
    assert_clean(&ctx);
}

/// `cp.reduce.async.bulk` into shared memory (`.shared::cluster`, a
/// one-CTA cluster) for every operation and type ptxas accepts there, one
/// case per block, completing on an mbarrier.
#[test]
fn bulk_reductions_into_shared_memory() {
    let ctx = context();
    let m = ctx.load_module(MBARRIER, "tma_mbarrier.ptx").unwrap();
    let f = m.function("bulk_reduce_shared").unwrap();
    // (tensor-map data type of the model, operation) per block, as in tma_mbarrier.cu.
    let cases: [(u32, u32); 12] =
        [(2, 1), (2, 2), (2, 3), (2, 4), (2, 5), (3, 1), (3, 2), (3, 3), (2, 6), (2, 7), (2, 8), (4, 1)];
    let (bytes, nwords) = (1024usize, 256usize);
    let mut rng = Lcg(0x5ED);
    let mut init = Vec::new();
    let mut src = Vec::new();
    for &(_, op) in &cases {
        for _ in 0..nwords {
            // Values of every magnitude, so that min/max/inc/dec see both orders.
            let (a, b) = (rng.next_u32() >> (rng.next_u32() % 32), rng.next_u32() >> (rng.next_u32() % 32));
            init.push(a);
            src.push(if matches!(op, 4 | 5) && rng.next_u32().is_multiple_of(4) { a } else { b });
        }
    }
    let dinit = upload(&ctx, &words(&init));
    let dsrc = upload(&ctx, &words(&src));
    let out = ctx.alloc((cases.len() * bytes) as u64).unwrap();
    ctx.memset_d8(out, 0xA5, (cases.len() * bytes) as u64).unwrap();
    let params = f
        .pack_params(&[&dinit.to_le_bytes(), &dsrc.to_le_bytes(), &out.to_le_bytes(), &(bytes as u32).to_le_bytes()])
        .unwrap();
    ctx.launch(&f, [cases.len() as u32, 1, 1], [64, 1, 1], 0, &params).unwrap();
    let got = download(&ctx, out, cases.len() * bytes);
    let (init, src) = (words(&init), words(&src));
    for (k, &(dtype, op)) in cases.iter().enumerate() {
        let es = if dtype == 4 { 8 } else { 4 };
        let range = k * bytes..(k + 1) * bytes;
        let want: Vec<u8> = init[range.clone()]
            .chunks_exact(es)
            .zip(src[range.clone()].chunks_exact(es))
            .flat_map(|(a, b)| reduce(dtype, op, a, b))
            .collect();
        assert!(got[range] == want[..], "case {k}: dtype {dtype} op {op} differs");
    }
    for d in [dinit, dsrc, out] {
        ctx.free(d).unwrap();
    }
    assert_clean(&ctx);
}

/// A packed sub-byte tensor (section 5.5.1.1) with its tiled map:
/// `dtype` 13 (16U4_ALIGN8B, `.b4x16`), 14 (16U4_ALIGN16B, `.b4x16_p64`) or
/// 15 (16U6_ALIGN16B, `.b6x16_p32` loads and `.b6p2x16` stores).
struct Packed {
    t: Tensor,
    /// Values per copy unit (2 for a byte of 4-bit values, 16 for a group).
    unit: usize,
    /// Bytes of a unit in global memory and in shared memory.
    global: usize,
    shared: usize,
}

impl Packed {
    fn new(ctx: &Context, rng: &mut Lcg, dtype: u32, rank: u32) -> Packed {
        let pick = |rng: &mut Lcg, n: u32| rng.next_u32() % n;
        let (unit, global, shared) = match dtype {
            13 => (2, 1, 1),
            14 => (16, 8, 16),
            _ => (16, 12, 16),
        };
        let (box0, dim0, swizzle) = if dtype == 13 {
            // 32..256 values (16..128 bytes) within the swizzle span.
            let swizzle = pick(rng, 7);
            let span = [128, 32, 64, 128, 128, 128, 128][swizzle as usize];
            (32 * (1 + pick(rng, span / 16)), 2 * (1 + pick(rng, 200)), swizzle)
        } else {
            let modes: &[u32] = if dtype == 14 { &[0, 3, 4] } else { &[0, 3, 4, 6] };
            (128, 128 * (1 + pick(rng, 3)), modes[pick(rng, modes.len() as u32) as usize])
        };
        let mut desc = TensorMapDesc {
            rank,
            data_type: dtype,
            elem_bytes: 0,
            mode: TensorMapMode::Tiled,
            swizzle,
            ..Default::default()
        };
        desc.dims[0] = dim0;
        desc.box_dim[0] = box0;
        desc.elem_strides = [1; 5];
        let row = (dim0 as usize / unit * global) as u64;
        let mut extent = row.div_ceil(32) * 32;
        for d in 1..rank as usize {
            desc.dims[d] = 1 + pick(rng, 9);
            desc.box_dim[d] = 1 + pick(rng, 5);
            desc.strides[d] = extent + 32 * pick(rng, 2) as u64;
            extent = desc.strides[d] * desc.dims[d] as u64;
        }
        let data = rng.bytes(extent as usize);
        let addr = upload(ctx, &data);
        desc.address = addr;
        Packed { t: Tensor { desc, data, addr }, unit, global, shared }
    }

    /// Units per box row, shared bytes per box row, and rows.
    fn shape(&self) -> (usize, usize, usize) {
        let d = &self.t.desc;
        let units = d.box_dim[0] as usize / self.unit;
        let rows: usize = (1..d.rank as usize).map(|k| d.box_dim[k] as usize).product();
        (units, units * self.shared, rows)
    }

    /// Calls `f(logical shared offset of the unit, global byte offset when inside)`
    /// for every unit of the box at `c` (c[0] counts values).
    fn walk(&self, c: [i32; 5], mut f: impl FnMut(usize, Option<usize>)) {
        let d = &self.t.desc;
        let (units, row_bytes, rows) = self.shape();
        for r in 0..rows {
            // Row r: dimension 1 fastest.
            let (mut rest, mut off, mut inside) = (r, 0usize, true);
            for (k, &ck) in c.iter().enumerate().take(d.rank as usize).skip(1) {
                let x = ck as i64 + (rest % d.box_dim[k] as usize) as i64;
                rest /= d.box_dim[k] as usize;
                inside &= x >= 0 && x < d.dims[k] as i64;
                off = off.wrapping_add((x as usize).wrapping_mul(d.strides[k] as usize));
            }
            for u in 0..units {
                let x = c[0] as i64 / self.unit as i64 + u as i64;
                let ok = inside && x >= 0 && x < (d.dims[0] as usize / self.unit) as i64;
                f(r * row_bytes + u * self.shared, ok.then(|| off + x as usize * self.global));
            }
        }
    }

    /// The bytes of a load's shared image that the ISA defines (the
    /// padding of `.b4x16_p64` and `.b6x16_p32` groups is uninitialised),
    /// as (shared position, value).
    fn reference_load(&self, c: [i32; 5]) -> Vec<(usize, u8)> {
        let mut out = Vec::new();
        self.walk(c, |s, g| {
            for b in 0..self.global {
                let v = g.map_or(0, |g| self.t.data[g + b]);
                out.push((swizzle(s + b, self.t.desc.swizzle), v));
            }
        });
        out
    }

    /// The tensor after a store of the shared image `smem` at `c`.
    fn reference_store(&self, c: [i32; 5], smem: &[u8]) -> Vec<u8> {
        let mut data = self.t.data.clone();
        self.walk(c, |s, g| {
            let Some(g) = g else { return };
            let byte = |b: usize| smem[swizzle(s + b, self.t.desc.swizzle)];
            if self.global == 1 {
                data[g] = byte(0);
            } else {
                // .b6p2x16: the low 6 bits of 16 bytes, packed into 12.
                let mut bits = 0u128;
                for i in 0..16 {
                    bits |= ((byte(i) & 63) as u128) << (6 * i);
                }
                data[g..g + 12].copy_from_slice(&bits.to_le_bytes()[..12]);
            }
        });
        data
    }

    /// A coordinate in dimension 0 (in values), on a unit boundary.
    fn coord0(&self, rng: &mut Lcg) -> i32 {
        let d = &self.t.desc;
        let units = (d.dims[0] as usize / self.unit) as i32;
        let box_units = (d.box_dim[0] as usize / self.unit) as i32;
        let u = (rng.next_u32() % (units + box_units + 2) as u32) as i32 - box_units - 1;
        u * self.unit as i32
    }
}

/// Loads of the three packed sub-byte types (and stores of the two that
/// have a store layout), 2-D and 3-D, boxes crossing every edge.
#[test]
fn packed_sub_byte_types() {
    let ctx = context();
    let m = ctx.load_module(TILE, "tma_tile.ptx").unwrap();
    let mut rng = Lcg(0x5B7E);
    for round in 0..18 {
        let dtype = 13 + round % 3;
        let rank = 2 + (round / 3) % 2;
        let p = Packed::new(&ctx, &mut rng, dtype, rank);
        let (_, row_bytes, rows) = p.shape();
        let box_bytes = row_bytes * rows;
        let image = box_bytes.div_ceil(128) * 128;
        if image > TILE_BYTES {
            ctx.free(p.t.addr).unwrap();
            continue;
        }
        let coords: Vec<[i32; 5]> = (0..4)
            .map(|_| {
                let mut c = random_coords(&mut rng, &p.t);
                c[0] = p.coord0(&mut rng);
                c
            })
            .collect();
        let f = m.function(&format!("tma_load_{rank}d")).unwrap();
        let dc = upload(&ctx, &coords_bytes(&coords));
        let out = ctx.alloc((image * coords.len()) as u64).unwrap();
        ctx.memset_d8(out, 0xA5, (image * coords.len()) as u64).unwrap();
        let params = f
            .pack_params(&[
                &p.t.desc.encode(),
                &dc.to_le_bytes(),
                &out.to_le_bytes(),
                &(box_bytes as u32).to_le_bytes(),
                &(image as u32).to_le_bytes(),
            ])
            .unwrap();
        ctx.launch(&f, [coords.len() as u32, 1, 1], [128, 1, 1], 0, &params).unwrap();
        let got = download(&ctx, out, image * coords.len());
        for (b, c) in coords.iter().enumerate() {
            for (at, want) in p.reference_load(*c) {
                let have = got[b * image + at];
                assert!(
                    have == want,
                    "round {round}: dtype {dtype} box at {c:?}: shared byte {at} is {have:#04x}, want {want:#04x}; map {:?}",
                    p.t.desc
                );
            }
        }
        ctx.free(dc).unwrap();
        ctx.free(out).unwrap();

        if dtype != 14 {
            let f = m.function(&format!("tma_store_{rank}d")).unwrap();
            let mut c = random_coords(&mut rng, &p.t);
            c[0] = p.coord0(&mut rng);
            let smem = rng.bytes(image);
            let want = p.reference_store(c, &smem);
            launch_store(&ctx, &f, &p.t, &[c], &smem, 0);
            let have = download(&ctx, p.t.addr, p.t.data.len());
            assert!(have == want, "round {round}: dtype {dtype} store at {c:?} differs; map {:?}", p.t.desc);
        }
        ctx.free(p.t.addr).unwrap();
    }
    assert_clean(&ctx);
}
