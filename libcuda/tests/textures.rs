//! Textures and surfaces through the driver API: CUDA arrays (plain,
//! layered, cubemap, 3D, mipmapped), linear and pitched memory, texture
//! objects with every address and filter mode, surface objects, run with
//! nvcc's `tests/fixtures/textures.ptx` on random data and checked against a
//! CPU model of CUDA's texture rules (the CUDA C++ Programming Guide's
//! "Texture Fetching" appendix; see `docs/textures.md`).

mod common;

use std::ffi::{c_uint, c_void};
use std::sync::OnceLock;

use common::{check, code, init, Api, Ctx, Handle, Lcg};

const POISON: u8 = 0xAB;

// CUarray_format.
const U8: u32 = 0x01;
const U16: u32 = 0x02;
const S8: u32 = 0x08;
const S32: u32 = 0x0a;
const HALF: u32 = 0x10;
const F32: u32 = 0x20;

// CUaddress_mode.
const WRAP: u32 = 0;
const CLAMP: u32 = 1;
const MIRROR: u32 = 2;
const BORDER: u32 = 3;

// CU_TRSF flags.
const READ_AS_INTEGER: u32 = 1;
const NORMALIZED: u32 = 2;
const SRGB: u32 = 0x10;

// CUDA_ARRAY3D flags.
const LAYERED: u32 = 1;
const SURFACE_LDST: u32 = 2;
const CUBEMAP: u32 = 4;

fn ptx() -> &'static [u8] {
    static PTX: OnceLock<Vec<u8>> = OnceLock::new();
    PTX.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/textures.ptx");
        let mut text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        text.push(0);
        text
    })
}

/// A context with the fixture loaded.
struct Setup {
    api: &'static Api,
    _ctx: Ctx,
    module: Handle,
}

impl Setup {
    fn new() -> Setup {
        let api = init();
        let ctx = Ctx::new(api);
        let mut module: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuModuleLoadData(&mut module, ptx().as_ptr().cast())), "load textures.ptx");
        Setup { api, _ctx: ctx, module }
    }

    fn alloc(&self, bytes: usize) -> u64 {
        let api = self.api;
        let mut d = 0u64;
        check(api, cu!(api.cuMemAlloc_v2(&mut d, bytes)), "cuMemAlloc");
        check(api, cu!(api.cuMemsetD8_v2(d, POISON, bytes)), "poison");
        d
    }

    fn upload<T>(&self, data: &[T]) -> u64 {
        let api = self.api;
        let d = self.alloc(std::mem::size_of_val(data).max(4));
        check(api, cu!(api.cuMemcpyHtoD_v2(d, data.as_ptr().cast(), std::mem::size_of_val(data))), "HtoD");
        d
    }

    fn download<T: Default + Clone>(&self, d: u64, n: usize) -> Vec<T> {
        let api = self.api;
        let mut out = vec![T::default(); n];
        check(api, cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), d, n * std::mem::size_of::<T>())), "DtoH");
        out
    }

    /// Launches `name` with the given parameters (each a value to pass).
    fn launch(&self, name: &str, grid: [u32; 3], block: u32, params: &mut [Param]) -> u32 {
        let api = self.api;
        let cname = format!("{name}\0");
        let mut f: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuModuleGetFunction(&mut f, self.module, cname.as_ptr().cast())), name);
        let mut ptrs: Vec<*mut c_void> = params.iter_mut().map(|p| p.ptr()).collect();
        let no_extra: *mut *mut c_void = std::ptr::null_mut();
        let null: Handle = std::ptr::null_mut();
        let rc = cu!(api.cuLaunchKernel(f, grid[0], grid[1], grid[2], block, 1, 1, 0, null, ptrs.as_mut_ptr(), no_extra));
        if rc != code::SUCCESS {
            return rc;
        }
        cu!(api.cuCtxSynchronize())
    }

    fn run(&self, name: &str, grid: [u32; 3], block: u32, params: &mut [Param]) {
        let rc = self.launch(name, grid, block, params);
        check(self.api, rc, name);
    }
}

/// A kernel parameter.
enum Param {
    U64(u64),
    I32(i32),
    F32(f32),
}

impl Param {
    fn ptr(&mut self) -> *mut c_void {
        match self {
            Param::U64(v) => (v as *mut u64).cast(),
            Param::I32(v) => (v as *mut i32).cast(),
            Param::F32(v) => (v as *mut f32).cast(),
        }
    }
}

// ---------------------------------------------------------------------------
// Driver-API structures.

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Array3DDesc {
    width: usize,
    height: usize,
    depth: usize,
    format: u32,
    channels: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct ResourceDesc {
    res_type: u32,
    res: [u64; 16],
    flags: u32,
}

impl ResourceDesc {
    fn array(a: Handle) -> ResourceDesc {
        let mut res = [0u64; 16];
        res[0] = a as u64;
        ResourceDesc { res_type: 0, res, flags: 0 }
    }
    fn mipmapped(m: Handle) -> ResourceDesc {
        let mut r = ResourceDesc::array(m);
        r.res_type = 1;
        r
    }
    fn linear(ptr: u64, format: u32, channels: u32, bytes: usize) -> ResourceDesc {
        let mut res = [0u64; 16];
        res[0] = ptr;
        res[1] = format as u64 | (channels as u64) << 32;
        res[2] = bytes as u64;
        ResourceDesc { res_type: 2, res, flags: 0 }
    }
    fn pitch2d(ptr: u64, format: u32, channels: u32, w: usize, h: usize, pitch: usize) -> ResourceDesc {
        let mut res = [0u64; 16];
        res[0] = ptr;
        res[1] = format as u64 | (channels as u64) << 32;
        res[2] = w as u64;
        res[3] = h as u64;
        res[4] = pitch as u64;
        ResourceDesc { res_type: 3, res, flags: 0 }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct TextureDesc {
    address_mode: [u32; 3],
    filter_mode: u32,
    flags: u32,
    max_anisotropy: u32,
    mipmap_filter_mode: u32,
    mipmap_level_bias: f32,
    min_mipmap_level_clamp: f32,
    max_mipmap_level_clamp: f32,
    border_color: [f32; 4],
    reserved: [i32; 12],
}

/// `CUDA_MEMCPY3D`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Memcpy3D {
    src_x: usize,
    src_y: usize,
    src_z: usize,
    src_lod: usize,
    src_type: u32,
    src_host: *const c_void,
    src_device: u64,
    src_array: Handle,
    reserved0: *mut c_void,
    src_pitch: usize,
    src_height: usize,
    dst_x: usize,
    dst_y: usize,
    dst_z: usize,
    dst_lod: usize,
    dst_type: u32,
    dst_host: *mut c_void,
    dst_device: u64,
    dst_array: Handle,
    reserved1: *mut c_void,
    dst_pitch: usize,
    dst_height: usize,
    width: usize,
    height: usize,
    depth: usize,
}

const HOST: u32 = 1;
const ARRAY: u32 = 3;

impl Memcpy3D {
    fn zeroed() -> Memcpy3D {
        // SAFETY: every field is an integer or a raw pointer, for which all
        // zero bits are valid (NULL).
        unsafe { std::mem::zeroed() }
    }

    /// Host (tightly packed `w` bytes x `h` x `d`) to array.
    fn host_to_array(src: &[u8], a: Handle, w: usize, h: usize, d: usize) -> Memcpy3D {
        let mut c = Memcpy3D::zeroed();
        c.src_type = HOST;
        c.src_host = src.as_ptr().cast();
        c.src_pitch = w;
        c.src_height = h;
        c.dst_type = ARRAY;
        c.dst_array = a;
        c.width = w;
        c.height = h;
        c.depth = d;
        c
    }
}

fn create_array(api: &Api, d: Array3DDesc) -> Handle {
    let mut a: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuArray3DCreate_v2(&mut a, (&d as *const Array3DDesc).cast())), "cuArray3DCreate");
    a
}

fn tex_object(api: &Api, res: &ResourceDesc, t: &TextureDesc) -> u64 {
    let mut h = 0u64;
    let null: *const c_void = std::ptr::null();
    check(
        api,
        cu!(api.cuTexObjectCreate(&mut h, (res as *const ResourceDesc).cast(), (t as *const TextureDesc).cast(), null)),
        "cuTexObjectCreate",
    );
    h
}

fn surf_object(api: &Api, a: Handle) -> u64 {
    let mut h = 0u64;
    let res = ResourceDesc::array(a);
    check(api, cu!(api.cuSurfObjectCreate(&mut h, (&res as *const ResourceDesc).cast())), "cuSurfObjectCreate");
    h
}

fn sampler(modes: [u32; 3], linear: bool, flags: u32) -> TextureDesc {
    TextureDesc {
        address_mode: modes,
        filter_mode: linear as u32,
        flags,
        border_color: [0.25, -0.5, 0.75, 2.0],
        max_mipmap_level_clamp: 100.0,
        ..TextureDesc::default()
    }
}

// ---------------------------------------------------------------------------
// The CPU model of CUDA's texture unit.

/// A texture: texels of all levels in the array layout, and its sampler.
#[derive(Clone)]
struct Model {
    format: u32,
    channels: u32,
    extent: [u32; 3],
    layers: u32,
    levels: u32,
    pitch0: usize,
    data: Vec<u8>,
    t: TextureDesc,
    linear_memory: bool,
}

fn f16_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

fn srgb_to_linear(c: f32) -> f32 {
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

impl Model {
    fn channel_bytes(&self) -> usize {
        match self.format {
            U8 | S8 => 1,
            U16 | 0x09 | HALF => 2,
            _ => 4,
        }
    }
    fn elem(&self) -> usize {
        self.channel_bytes() * self.channels as usize
    }
    fn returns_float(&self) -> bool {
        matches!(self.format, HALF | F32)
            || (matches!(self.format, U8 | U16 | S8 | 0x09) && self.t.flags & READ_AS_INTEGER == 0)
    }
    /// (byte offset, pitch, w, h, d) of level k.
    fn level(&self, k: u32) -> (usize, usize, u32, u32, u32) {
        let mut off = 0;
        let sz = |n: u32, k: u32| (n >> k).max(1);
        for j in 0..k {
            let pitch = if j == 0 { self.pitch0 } else { sz(self.extent[0], j) as usize * self.elem() };
            off += pitch * sz(self.extent[1], j) as usize * sz(self.extent[2], j) as usize * self.layers as usize;
        }
        let pitch = if k == 0 { self.pitch0 } else { sz(self.extent[0], k) as usize * self.elem() };
        (off, pitch, sz(self.extent[0], k), sz(self.extent[1], k), sz(self.extent[2], k))
    }
    fn channel(&self, at: usize) -> u32 {
        let b = &self.data[at..];
        let float = self.returns_float();
        match self.format {
            U8 if float => (b[0] as f32 / 255.0).to_bits(),
            U8 => b[0] as u32,
            S8 if float => ((b[0] as i8) as f32 / 127.0).max(-1.0).to_bits(),
            S8 => (b[0] as i8) as i32 as u32,
            U16 if float => (u16::from_le_bytes([b[0], b[1]]) as f32 / 65535.0).to_bits(),
            U16 => u16::from_le_bytes([b[0], b[1]]) as u32,
            HALF => f16_to_f32(u16::from_le_bytes([b[0], b[1]])).to_bits(),
            _ => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        }
    }
    fn texel(&self, at: usize) -> [u32; 4] {
        let float = self.returns_float();
        let mut v = [0, 0, 0, if float { 1f32.to_bits() } else { 1 }];
        for c in 0..self.channels as usize {
            v[c] = self.channel(at + c * self.channel_bytes());
        }
        if float && self.t.flags & SRGB != 0 && self.format == U8 {
            for x in v.iter_mut().take((self.channels as usize).min(3)) {
                *x = srgb_to_linear(f32::from_bits(*x)).to_bits();
            }
        }
        v
    }
    fn border(&self) -> [u32; 4] {
        let b = self.t.border_color;
        if self.returns_float() {
            b.map(f32::to_bits)
        } else {
            b.map(|x| x as i32 as u32)
        }
    }
    fn index(i: i32, n: u32, mode: u32) -> Option<u32> {
        let n = n as i32;
        match mode {
            WRAP => Some(i.rem_euclid(n) as u32),
            MIRROR => {
                let p = i.rem_euclid(2 * n);
                Some(if p >= n { 2 * n - 1 - p } else { p } as u32)
            }
            BORDER => (0..n).contains(&i).then_some(i as u32),
            _ => Some(i.clamp(0, n - 1) as u32),
        }
    }
    /// Level k, dims n, coordinates c (float bits or ints), layer; comp >= 0: gather.
    fn sample_level(&self, k: u32, n: usize, icoord: bool, cube: bool, c: [u32; 3], layer: i32, comp: i32) -> [u32; 4] {
        let (off, pitch, w, h, d) = self.level(k);
        let norm = self.t.flags & NORMALIZED != 0 || cube;
        let modes: Vec<u32> = (0..3)
            .map(|j| {
                let m = self.t.address_mode[j];
                if cube || (!norm && (m == WRAP || m == MIRROR)) {
                    CLAMP
                } else {
                    m
                }
            })
            .collect();
        let layer = layer.clamp(0, self.layers as i32 - 1) as usize;
        let (h, d) = (if n >= 2 { h } else { 1 }, if n >= 3 { d } else { 1 });
        let sizes = [w, h, d];
        let elem = self.elem();
        let fetch = |idx: [i32; 3]| -> [u32; 4] {
            let mut t = [0u32; 3];
            for j in 0..3 {
                match Model::index(idx[j], sizes[j], modes[j]) {
                    Some(v) => t[j] = v,
                    None => return self.border(),
                }
            }
            // ((layer * depth + z) * height + y) * pitch + x * elem, with the
            // level's full height and depth.
            let (_, _, _, lh, ld) = self.level(k);
            let at = off + ((layer * ld as usize + t[2] as usize) * lh as usize + t[1] as usize) * pitch + t[0] as usize * elem;
            self.texel(at)
        };
        if icoord {
            let i = [c[0] as i32, if n >= 2 { c[1] as i32 } else { 0 }, if n >= 3 { c[2] as i32 } else { 0 }];
            if self.linear_memory && !(0..w as i32).contains(&i[0]) {
                return [0; 4];
            }
            return fetch(i);
        }
        let mut u = [0f32; 3];
        for j in 0..3 {
            let x = if j < n { f32::from_bits(c[j]) } else { 0.0 };
            u[j] = if norm { x * sizes[j] as f32 } else { x };
        }
        let linear = comp >= 0 || (self.t.filter_mode == 1 && self.returns_float());
        if !linear {
            let i = [u[0].floor() as i32, if n >= 2 { u[1].floor() as i32 } else { 0 }, if n >= 3 { u[2].floor() as i32 } else { 0 }];
            return fetch(i);
        }
        let mut i0 = [0i32; 3];
        let mut a = [0f32; 3];
        for j in 0..3 {
            let x = u[j] - 0.5;
            let f = x.floor();
            i0[j] = f as i32;
            a[j] = ((x - f) * 256.0).round_ties_even() / 256.0;
            if j >= n {
                i0[j] = 0;
                a[j] = 0.0;
            }
        }
        let corners = if comp >= 0 { 4 } else { 1 << n };
        let mut acc = [0f32; 4];
        for cidx in 0..corners {
            let b = [cidx & 1, (cidx >> 1) & 1, (cidx >> 2) & 1];
            let t = fetch([i0[0] + b[0], i0[1] + b[1], i0[2] + b[2]]);
            if comp >= 0 {
                let v = f32::from_bits(t[comp as usize]);
                acc[[3, 2, 0, 1][cidx as usize]] = v;
                continue;
            }
            let mut wgt = 1.0f32;
            for j in 0..3 {
                wgt *= if b[j] == 1 { a[j] } else { 1.0 - a[j] };
            }
            for ch in 0..4 {
                acc[ch] += f32::from_bits(t[ch]) * wgt;
            }
        }
        acc.map(f32::to_bits)
    }
}

/// Random texel bytes for `count` texels of `elem` bytes; f32 and f16
/// textures get finite values in [-100, 100).
fn random_texels(rng: &mut Lcg, format: u32, channels: u32, count: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..count * channels as usize {
        match format {
            F32 => out.extend_from_slice(&rng.next_f32().to_le_bytes()),
            HALF => out.extend_from_slice(&half::f16::from_f32(rng.next_f32()).to_bits().to_le_bytes()),
            U8 | S8 => out.push(rng.next_u32() as u8),
            U16 | 0x09 => out.extend_from_slice(&(rng.next_u32() as u16).to_le_bytes()),
            _ => out.extend_from_slice(&rng.next_u32().to_le_bytes()),
        }
    }
    out
}

/// An array of `desc` filled with random texels (uploaded with cuMemcpy3D);
/// its model with sampler `t`.
fn array_with_data(s: &Setup, rng: &mut Lcg, desc: Array3DDesc, t: TextureDesc) -> (Handle, Model) {
    let a = create_array(s.api, desc);
    let elem = match desc.format {
        U8 | S8 => 1,
        U16 | 0x09 | HALF => 2,
        _ => 4,
    } * desc.channels as usize;
    let rows = desc.height.max(1);
    let slices = desc.depth.max(1);
    let data = random_texels(rng, desc.format, desc.channels, desc.width * rows * slices);
    let copy = Memcpy3D::host_to_array(&data, a, desc.width * elem, rows, slices);
    let api = s.api;
    check(api, cu!(api.cuMemcpy3D_v2((&copy as *const Memcpy3D).cast())), "cuMemcpy3D to array");
    let layered = desc.flags & (LAYERED | CUBEMAP) != 0;
    let model = Model {
        format: desc.format,
        channels: desc.channels,
        extent: [desc.width as u32, rows as u32, if layered { 1 } else { slices as u32 }],
        layers: if layered { slices as u32 } else { 1 },
        levels: 1,
        pitch0: desc.width * elem,
        data,
        t,
        linear_memory: false,
    };
    (a, model)
}

/// Random coordinates covering [-span, 1 + span) of `n` texels (normalized)
/// or [-span n, (1 + span) n) (unnormalized), with some exact texel centres
/// and edges.
fn coords(rng: &mut Lcg, count: usize, n: u32, norm: bool) -> Vec<f32> {
    (0..count)
        .map(|k| {
            let x = match k % 5 {
                0 => (rng.next_u32() % (n * 2)) as f32 * 0.5,
                _ => (rng.next_u32() as f32 / u32::MAX as f32) * 2.0 * n as f32 - 0.5 * n as f32,
            };
            if norm {
                x / n as f32
            } else {
                x
            }
        })
        .collect()
}

#[track_caller]
fn assert_close(got: &[[u32; 4]], want: &[[u32; 4]], float: bool, what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        for c in 0..4 {
            let ok = if float {
                let (g, w) = (f32::from_bits(g[c]), f32::from_bits(w[c]));
                g == w || (g - w).abs() <= 1e-5 * w.abs().max(1.0)
            } else {
                g[c] == w[c]
            };
            assert!(ok, "{what}: element {i} channel {c}: got {:?} want {:?}", fmt4(g, float), fmt4(w, float));
        }
    }
}

fn fmt4(v: &[u32; 4], float: bool) -> String {
    if float {
        format!("{:?}", v.map(f32::from_bits))
    } else {
        format!("{:?}", v.map(|x| x as i32))
    }
}

const N: usize = 333;

fn grid(n: usize) -> [u32; 3] {
    [n.div_ceil(64) as u32, 1, 1]
}

/// 2D float4 and uchar4 arrays: every address mode, point and linear
/// filtering, normalized and unnormalized coordinates, sRGB.
#[test]
fn sample_2d_every_mode() {
    let s = Setup::new();
    let mut rng = Lcg(0x7e57_2d);
    for (format, channels) in [(F32, 4), (U8, 4), (HALF, 2), (S8, 1), (U16, 4)] {
        let (w, h) = (13usize, 7usize);
        let desc = Array3DDesc { width: w, height: h, format, channels, ..Array3DDesc::default() };
        for mode in [WRAP, CLAMP, MIRROR, BORDER] {
            for linear in [false, true] {
                for norm in [false, true] {
                    for srgb in [false, format == U8] {
                        if srgb && !linear {
                            continue;
                        }
                        let flags = if norm { NORMALIZED } else { 0 } | if srgb { SRGB } else { 0 };
                        let t = sampler([mode, mode, mode], linear, flags);
                        let (a, model) = array_with_data(&s, &mut rng, desc, t);
                        let tex = tex_object(s.api, &ResourceDesc::array(a), &t);
                        let xs = coords(&mut rng, N, w as u32, norm);
                        let ys = coords(&mut rng, N, h as u32, norm);
                        let xy: Vec<[f32; 2]> = xs.iter().zip(&ys).map(|(x, y)| [*x, *y]).collect();
                        let dxy = s.upload(&xy);
                        let out = s.alloc(N * 16);
                        s.run("sample_2d", grid(N), 64, &mut [Param::U64(tex), Param::U64(dxy), Param::U64(out), Param::I32(N as i32)]);
                        let got: Vec<[u32; 4]> = s.download(out, N);
                        let want: Vec<[u32; 4]> = xy
                            .iter()
                            .map(|p| model.sample_level(0, 2, false, false, [p[0].to_bits(), p[1].to_bits(), 0], 0, -1))
                            .collect();
                        let what = format!("format {format:#x}x{channels} mode {mode} linear {linear} norm {norm} srgb {srgb}");
                        assert_close(&got, &want, true, &what);
                        let api = s.api;
                        check(api, cu!(api.cuTexObjectDestroy(tex)), "cuTexObjectDestroy");
                        check(api, cu!(api.cuArrayDestroy(a)), "cuArrayDestroy");
                    }
                }
            }
        }
    }
}
