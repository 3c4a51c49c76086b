//! Textures and surfaces through the driver API: CUDA arrays (plain,
//! layered, cubemap, 3D, mipmapped), linear and pitched memory, texture
//! objects with every address and filter mode, surface objects, run with
//! nvcc's `tests/fixtures/textures.ptx` on random data and checked against a
//! CPU model of CUDA's texture rules (the CUDA C++ Programming Guide's
//! "Texture Fetching" appendix; see `docs/textures.md`).

mod common;

use std::ffi::{c_int, c_uint, c_void};
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
        self.launch_in(self.module, name, grid, block, params)
    }

    /// [`Setup::launch`] of a kernel of another module.
    fn launch_in(&self, module: Handle, name: &str, grid: [u32; 3], block: u32, params: &mut [Param]) -> u32 {
        let api = self.api;
        let cname = format!("{name}\0");
        let mut f: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuModuleGetFunction(&mut f, module, cname.as_ptr().cast())), name);
        let mut ptrs: Vec<*mut c_void> = params.iter_mut().map(|p| p.ptr()).collect();
        let no_extra: *mut *mut c_void = std::ptr::null_mut();
        let null: Handle = std::ptr::null_mut();
        let rc =
            cu!(api.cuLaunchKernel(f, grid[0], grid[1], grid[2], block, 1, 1, 0, null, ptrs.as_mut_ptr(), no_extra));
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
        for (c, x) in v.iter_mut().enumerate().take(self.channels as usize) {
            *x = self.channel(at + c * self.channel_bytes());
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
    /// The arguments of the engine's `__ptxvk_tex_level`.
    #[allow(clippy::too_many_arguments)]
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
            let at = off
                + ((layer * ld as usize + t[2] as usize) * lh as usize + t[1] as usize) * pitch
                + t[0] as usize * elem;
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
            let i = [
                u[0].floor() as i32,
                if n >= 2 { u[1].floor() as i32 } else { 0 },
                if n >= 3 { u[2].floor() as i32 } else { 0 },
            ];
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
    let mut rng = Lcg(0x7e572d);
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
                        s.run(
                            "sample_2d",
                            grid(N),
                            64,
                            &mut [Param::U64(tex), Param::U64(dxy), Param::U64(out), Param::I32(N as i32)],
                        );
                        let got: Vec<[u32; 4]> = s.download(out, N);
                        let want: Vec<[u32; 4]> = xy
                            .iter()
                            .map(|p| model.sample_level(0, 2, false, false, [p[0].to_bits(), p[1].to_bits(), 0], 0, -1))
                            .collect();
                        let what = format!(
                            "format {format:#x}x{channels} mode {mode} linear {linear} norm {norm} srgb {srgb}"
                        );
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

/// Runs kernel `name(tex, inputs..., out, n)` and compares with `want`.
fn run_sampler(s: &Setup, name: &str, tex: u64, inputs: &[u64], want: &[[u32; 4]], float: bool, what: &str) {
    let n = want.len();
    let out = s.alloc((n + 4) * 16);
    let mut params = vec![Param::U64(tex)];
    params.extend(inputs.iter().map(|&d| Param::U64(d)));
    params.push(Param::U64(out));
    params.push(Param::I32(n as i32));
    s.run(name, grid(n), 64, &mut params);
    let got: Vec<[u32; 4]> = s.download(out, n + 4);
    assert_close(&got[..n], want, float, what);
    let poison = u32::from_ne_bytes([POISON; 4]);
    assert!(got[n..].iter().flatten().all(|&x| x == poison), "{what}: written past n");
}

/// tex1Dfetch on linear memory: float4 and int4 (read as integers), with
/// indices outside the buffer (which read zero).
#[test]
fn fetch_linear_memory() {
    let s = Setup::new();
    let mut rng = Lcg(0x11e4);
    for (format, channels, float_kernel) in
        [(F32, 4, true), (S32, 4, false), (U8, 4, true), (HALF, 4, true), (S8, 2, false)]
    {
        let count = 100usize;
        let data = random_texels(&mut rng, format, channels, count);
        let d = s.upload(&data);
        let read_int = if float_kernel { 0 } else { READ_AS_INTEGER };
        let t = sampler([CLAMP; 3], false, read_int);
        let tex = tex_object(s.api, &ResourceDesc::linear(d, format, channels, data.len()), &t);
        let model = Model {
            format,
            channels,
            extent: [count as u32, 1, 1],
            layers: 1,
            levels: 1,
            pitch0: data.len(),
            data,
            t,
            linear_memory: true,
        };
        let idx: Vec<i32> = (0..N).map(|k| (rng.next_u32() % 140) as i32 - 20 + (k % 2) as i32).collect();
        let didx = s.upload(&idx);
        let want: Vec<[u32; 4]> =
            idx.iter().map(|&i| model.sample_level(0, 1, true, false, [i as u32, 0, 0], 0, -1)).collect();
        let kernel = if float_kernel { "fetch_linear" } else { "fetch_linear_int" };
        run_sampler(&s, kernel, tex, &[didx], &want, float_kernel, &format!("{kernel} {format:#x}x{channels}"));
        let api = s.api;
        check(api, cu!(api.cuTexObjectDestroy(tex)), "destroy");
    }
}

/// Integer textures read as integers through tex2D<int4>/<uint4>, point
/// sampled whatever the filter mode; pitched linear memory as a 2D texture.
#[test]
fn integer_reads_and_pitched_memory() {
    let s = Setup::new();
    let mut rng = Lcg(0x1d7);
    for (format, channels, kernel) in [(S32, 4, "sample_2d_int"), (U8, 4, "sample_2d_uint"), (S8, 2, "sample_2d_int")] {
        for linear in [false, true] {
            let t = sampler([BORDER, WRAP, CLAMP], linear, READ_AS_INTEGER | NORMALIZED);
            let desc = Array3DDesc { width: 9, height: 5, format, channels, ..Array3DDesc::default() };
            let (a, model) = array_with_data(&s, &mut rng, desc, t);
            let tex = tex_object(s.api, &ResourceDesc::array(a), &t);
            let xs = coords(&mut rng, N, 9, true);
            let ys = coords(&mut rng, N, 5, true);
            let xy: Vec<[f32; 2]> = xs.iter().zip(&ys).map(|(x, y)| [*x, *y]).collect();
            let want: Vec<[u32; 4]> = xy
                .iter()
                .map(|p| model.sample_level(0, 2, false, false, [p[0].to_bits(), p[1].to_bits(), 0], 0, -1))
                .collect();
            run_sampler(
                &s,
                kernel,
                tex,
                &[s.upload(&xy)],
                &want,
                false,
                &format!("{kernel} {format:#x} linear {linear}"),
            );
        }
    }
    // Pitch 2D: 10 x 6 float2 texels in rows of 128 bytes.
    let (w, h, pitch) = (10usize, 6usize, 128usize);
    let mut data = random_texels(&mut rng, F32, 2, pitch / 8 * h);
    data.truncate(pitch * h);
    let d = s.upload(&data);
    let t = sampler([MIRROR, BORDER, CLAMP], true, NORMALIZED);
    let tex = tex_object(s.api, &ResourceDesc::pitch2d(d, F32, 2, w, h, pitch), &t);
    let model = Model {
        format: F32,
        channels: 2,
        extent: [w as u32, h as u32, 1],
        layers: 1,
        levels: 1,
        pitch0: pitch,
        data,
        t,
        linear_memory: false,
    };
    let xy: Vec<[f32; 2]> = coords(&mut rng, N, w as u32, true)
        .into_iter()
        .zip(coords(&mut rng, N, h as u32, true))
        .map(|(x, y)| [x, y])
        .collect();
    let want: Vec<[u32; 4]> =
        xy.iter().map(|p| model.sample_level(0, 2, false, false, [p[0].to_bits(), p[1].to_bits(), 0], 0, -1)).collect();
    run_sampler(&s, "sample_2d", tex, &[s.upload(&xy)], &want, true, "pitch 2D");
}

/// 1D, 3D, 1D layered and 2D layered arrays (layers outside the array clamp).
#[test]
fn sample_1d_3d_and_layered() {
    let s = Setup::new();
    let mut rng = Lcg(0x3d);
    let t = sampler([WRAP, MIRROR, BORDER], true, NORMALIZED);
    // 1D.
    let (a, model) =
        array_with_data(&s, &mut rng, Array3DDesc { width: 17, format: F32, channels: 4, ..Array3DDesc::default() }, t);
    let tex = tex_object(s.api, &ResourceDesc::array(a), &t);
    let xs = coords(&mut rng, N, 17, true);
    let want: Vec<[u32; 4]> =
        xs.iter().map(|x| model.sample_level(0, 1, false, false, [x.to_bits(), 0, 0], 0, -1)).collect();
    run_sampler(&s, "sample_1d", tex, &[s.upload(&xs)], &want, true, "1D");
    // 3D.
    let d3 = Array3DDesc { width: 6, height: 5, depth: 4, format: HALF, channels: 4, ..Array3DDesc::default() };
    let (a, model) = array_with_data(&s, &mut rng, d3, t);
    let tex = tex_object(s.api, &ResourceDesc::array(a), &t);
    let (xs, ys, zs) = (coords(&mut rng, N, 6, true), coords(&mut rng, N, 5, true), coords(&mut rng, N, 4, true));
    let xyz: Vec<[f32; 4]> = (0..N).map(|k| [xs[k], ys[k], zs[k], 0.0]).collect();
    let want: Vec<[u32; 4]> = xyz
        .iter()
        .map(|p| model.sample_level(0, 3, false, false, [p[0].to_bits(), p[1].to_bits(), p[2].to_bits()], 0, -1))
        .collect();
    run_sampler(&s, "sample_3d", tex, &[s.upload(&xyz)], &want, true, "3D");
    // 1D layered: 11 texels x 3 layers.
    let l1 = Array3DDesc { width: 11, height: 0, depth: 3, format: U8, channels: 2, flags: LAYERED };
    let (a, model) = array_with_data(&s, &mut rng, l1, t);
    let tex = tex_object(s.api, &ResourceDesc::array(a), &t);
    let xs = coords(&mut rng, N, 11, true);
    let layers: Vec<i32> = (0..N).map(|_| (rng.next_u32() % 5) as i32 - 1).collect();
    let want: Vec<[u32; 4]> =
        (0..N).map(|k| model.sample_level(0, 1, false, false, [xs[k].to_bits(), 0, 0], layers[k], -1)).collect();
    run_sampler(&s, "sample_1d_layered", tex, &[s.upload(&xs), s.upload(&layers)], &want, true, "1D layered");
    // 2D layered: 7 x 6 texels x 4 layers, unnormalized.
    let t2 = sampler([BORDER, CLAMP, CLAMP], true, 0);
    let l2 = Array3DDesc { width: 7, height: 6, depth: 4, format: F32, channels: 1, flags: LAYERED };
    let (a, model) = array_with_data(&s, &mut rng, l2, t2);
    let tex = tex_object(s.api, &ResourceDesc::array(a), &t2);
    let xy: Vec<[f32; 2]> =
        coords(&mut rng, N, 7, false).into_iter().zip(coords(&mut rng, N, 6, false)).map(|(x, y)| [x, y]).collect();
    let layers: Vec<i32> = (0..N).map(|_| (rng.next_u32() % 6) as i32 - 1).collect();
    let want: Vec<[u32; 4]> = (0..N)
        .map(|k| model.sample_level(0, 2, false, false, [xy[k][0].to_bits(), xy[k][1].to_bits(), 0], layers[k], -1))
        .collect();
    run_sampler(&s, "sample_2d_layered", tex, &[s.upload(&xy), s.upload(&layers)], &want, true, "2D layered");
}

/// The cubemap face a direction selects and its face coordinates
/// (CUDA C++ Programming Guide, "Cubemap Textures").
fn cube_face(d: [f32; 3]) -> (i32, f32, f32) {
    let [x, y, z] = d;
    let (ax, ay, az) = (x.abs(), y.abs(), z.abs());
    let (face, m, sc, tc) = if ax > ay && ax > az {
        if x >= 0.0 {
            (0, ax, -z, -y)
        } else {
            (1, ax, z, -y)
        }
    } else if ay > ax && ay > az {
        if y >= 0.0 {
            (2, ay, x, z)
        } else {
            (3, ay, x, -z)
        }
    } else if z >= 0.0 {
        (4, az, x, -y)
    } else {
        (5, az, -x, -y)
    };
    (face, (sc / m + 1.0) * 0.5, (tc / m + 1.0) * 0.5)
}

/// Cubemaps: the face from the major axis, then the face sampled with clamp.
#[test]
fn sample_cubemap() {
    let s = Setup::new();
    let mut rng = Lcg(0xc0be);
    for linear in [false, true] {
        let t = sampler([WRAP; 3], linear, NORMALIZED);
        let desc = Array3DDesc { width: 8, height: 8, depth: 6, format: F32, channels: 4, flags: CUBEMAP };
        let (a, model) = array_with_data(&s, &mut rng, desc, t);
        let tex = tex_object(s.api, &ResourceDesc::array(a), &t);
        let dirs: Vec<[f32; 4]> = (0..N)
            .map(|k| {
                let mut v = [rng.next_f32(), rng.next_f32(), rng.next_f32(), 0.0];
                if k % 7 == 0 {
                    v[k % 3] = 0.0;
                }
                v
            })
            .collect();
        let want: Vec<[u32; 4]> = dirs
            .iter()
            .map(|d| {
                let (face, sx, ty) = cube_face([d[0], d[1], d[2]]);
                model.sample_level(0, 2, false, true, [sx.to_bits(), ty.to_bits(), 0], face, -1)
            })
            .collect();
        run_sampler(&s, "sample_cube", tex, &[s.upload(&dirs)], &want, true, &format!("cube linear {linear}"));
    }
}

/// tld4 (tex2Dgather) of every channel.
#[test]
fn gather_every_channel() {
    let s = Setup::new();
    let mut rng = Lcg(0x6a7);
    let t = sampler([CLAMP, WRAP, CLAMP], false, NORMALIZED);
    let desc = Array3DDesc { width: 10, height: 9, format: U8, channels: 4, flags: 0x08, ..Array3DDesc::default() };
    let (a, model) = array_with_data(&s, &mut rng, desc, t);
    let tex = tex_object(s.api, &ResourceDesc::array(a), &t);
    let xy: Vec<[f32; 2]> =
        coords(&mut rng, N, 10, true).into_iter().zip(coords(&mut rng, N, 9, true)).map(|(x, y)| [x, y]).collect();
    let comp: Vec<i32> = (0..N as i32).map(|k| k % 4).collect();
    let want: Vec<[u32; 4]> = (0..N)
        .map(|k| model.sample_level(0, 2, false, false, [xy[k][0].to_bits(), xy[k][1].to_bits(), 0], 0, comp[k]))
        .collect();
    run_sampler(&s, "gather_2d", tex, &[s.upload(&xy), s.upload(&comp)], &want, true, "gather");
}

/// Mipmapped arrays: levels filled through cuMipmappedArrayGetLevel and
/// cuMemcpy3D; tex2DLod and tex2DGrad with point and linear mipmap filtering,
/// LOD bias and clamps.
#[test]
fn mipmaps_lod_and_gradients() {
    let s = Setup::new();
    let api = s.api;
    let mut rng = Lcg(0x3132);
    let (w, h, levels) = (16usize, 8usize, 4u32);
    let desc = Array3DDesc { width: w, height: h, format: F32, channels: 4, ..Array3DDesc::default() };
    let mut m: Handle = std::ptr::null_mut();
    check(
        api,
        cu!(api.cuMipmappedArrayCreate(&mut m, (&desc as *const Array3DDesc).cast(), levels as c_uint)),
        "create",
    );
    let mut all = Vec::new();
    for k in 0..levels {
        let mut level: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuMipmappedArrayGetLevel(&mut level, m, k)), "level");
        let (lw, lh) = ((w >> k).max(1), (h >> k).max(1));
        let mut d = Array3DDesc::default();
        check(api, cu!(api.cuArray3DGetDescriptor_v2((&mut d as *mut Array3DDesc).cast(), level)), "level descriptor");
        assert_eq!((d.width, d.height, d.depth), (lw, lh, 0), "level {k} extent");
        let data = random_texels(&mut rng, F32, 4, lw * lh);
        let copy = Memcpy3D::host_to_array(&data, level, lw * 16, lh, 1);
        check(api, cu!(api.cuMemcpy3D_v2((&copy as *const Memcpy3D).cast())), "fill level");
        all.extend_from_slice(&data);
    }
    // The host model of the mipmapped array under sampler `t`.
    let mip_model = |t| Model {
        format: F32,
        channels: 4,
        extent: [w as u32, h as u32, 1],
        layers: 1,
        levels,
        pitch0: w * 16,
        data: all.clone(),
        t,
        linear_memory: false,
    };
    for mip_linear in [false, true] {
        let mut t = sampler([CLAMP, WRAP, CLAMP], true, NORMALIZED);
        t.mipmap_filter_mode = mip_linear as u32;
        t.mipmap_level_bias = 0.25;
        t.min_mipmap_level_clamp = 0.5;
        t.max_mipmap_level_clamp = 2.75;
        let tex = tex_object(api, &ResourceDesc::mipmapped(m), &t);
        let model = mip_model(t);
        let xy: Vec<[f32; 2]> =
            coords(&mut rng, N, 16, true).into_iter().zip(coords(&mut rng, N, 8, true)).map(|(x, y)| [x, y]).collect();
        let lod: Vec<f32> = (0..N).map(|_| rng.next_f32() / 25.0).collect();
        let want: Vec<[u32; 4]> = (0..N).map(|k| model.sample_lod(xy[k], lod[k])).collect();
        run_sampler(
            &s,
            "sample_2d_lod",
            tex,
            &[s.upload(&xy), s.upload(&lod)],
            &want,
            true,
            &format!("lod, linear {mip_linear}"),
        );
        // Gradients along x only: lambda = log2(|dPdx| * size).
        let grads: Vec<[f32; 4]> = (0..N).map(|k| [2f32.powi((k % 6) as i32) / 16.0, 0.0, 0.0, 0.0]).collect();
        let want: Vec<[u32; 4]> = (0..N).map(|k| model.sample_lod(xy[k], (grads[k][0] * 16.0).log2())).collect();
        run_sampler(
            &s,
            "sample_2d_grad",
            tex,
            &[s.upload(&xy), s.upload(&grads)],
            &want,
            true,
            &format!("grad, linear {mip_linear}"),
        );
    }
    // Integer coordinates with an integer LOD: the texel of that level
    // (clamped coordinates; levels past the last read the last).
    let t = sampler([CLAMP; 3], true, NORMALIZED);
    let tex = tex_object(api, &ResourceDesc::mipmapped(m), &t);
    let model = mip_model(t);
    let xyl: Vec<[i32; 4]> = (0..N)
        .map(|_| {
            [(rng.next_u32() % 20) as i32 - 2, (rng.next_u32() % 12) as i32 - 2, (rng.next_u32() % 6) as i32 - 1, 0]
        })
        .collect();
    let want: Vec<[u32; 4]> = xyl
        .iter()
        .map(|p| {
            model.sample_level(
                p[2].clamp(0, levels as i32 - 1) as u32,
                2,
                true,
                false,
                [p[0] as u32, p[1] as u32, 0],
                0,
                -1,
            )
        })
        .collect();
    run_sampler(&s, "fetch_level", tex, &[s.upload(&xyl)], &want, true, "texel fetch from a level");
    check(api, cu!(api.cuMipmappedArrayDestroy(m)), "destroy");
}

impl Model {
    /// A 2D lookup at level of detail `lambda` (before bias and clamps).
    fn sample_lod(&self, p: [f32; 2], lambda: f32) -> [u32; 4] {
        let t = &self.t;
        let lam = (lambda + t.mipmap_level_bias)
            .max(t.min_mipmap_level_clamp)
            .min(t.max_mipmap_level_clamp)
            .min((self.levels - 1) as f32)
            .max(0.0);
        let c = [p[0].to_bits(), p[1].to_bits(), 0];
        if t.mipmap_filter_mode == 0 {
            return self.sample_level((lam + 0.5).floor() as u32, 2, false, false, c, 0, -1);
        }
        let k = lam.floor();
        let f = ((lam - k) * 256.0).round_ties_even() / 256.0;
        let a = self.sample_level(k as u32, 2, false, false, c, 0, -1);
        if f == 0.0 {
            return a;
        }
        let b = self.sample_level(k as u32 + 1, 2, false, false, c, 0, -1);
        std::array::from_fn(|i| (f32::from_bits(a[i]) * (1.0 - f) + f32::from_bits(b[i]) * f).to_bits())
    }
}

/// Reads a whole array back with cuMemcpy3D (array to host).
fn read_array(s: &Setup, a: Handle, row_bytes: usize, rows: usize, slices: usize) -> Vec<u8> {
    let mut out = vec![0u8; row_bytes * rows * slices];
    let mut c = Memcpy3D::zeroed();
    c.src_type = ARRAY;
    c.src_array = a;
    c.dst_type = HOST;
    c.dst_host = out.as_mut_ptr().cast();
    c.dst_pitch = row_bytes;
    c.dst_height = rows;
    c.width = row_bytes;
    c.height = rows;
    c.depth = slices;
    let api = s.api;
    check(api, cu!(api.cuMemcpy3D_v2((&c as *const Memcpy3D).cast())), "cuMemcpy3D from array");
    out
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Surface reads and writes: 2D float4, 1D short, 3D int read-modify-write,
/// 2D layered float2, every boundary mode of a read, and `sured` counters.
#[test]
fn surfaces_read_write_and_reduce() {
    let s = Setup::new();
    let mut rng = Lcg(0x5f);
    let ldst = |w, h, d, format, channels, flags| Array3DDesc {
        width: w,
        height: h,
        depth: d,
        format,
        channels,
        flags: flags | SURFACE_LDST,
    };
    // 2D float4: out = (x k, y + k, z - k, w).
    let (w, h) = (21usize, 5usize);
    let (ain, _) = array_with_data(&s, &mut rng, ldst(w, h, 0, F32, 4, 0), TextureDesc::default());
    let aout = create_array(s.api, ldst(w, h, 0, F32, 4, 0));
    let input = f32s(&read_array(&s, ain, w * 16, h, 1));
    let (sin, sout) = (surf_object(s.api, ain), surf_object(s.api, aout));
    let k = 1.75f32;
    s.run(
        "surf_2d_scale",
        [1, h as u32, 1],
        32,
        &mut [Param::U64(sin), Param::U64(sout), Param::I32(w as i32), Param::I32(h as i32), Param::F32(k)],
    );
    let got = f32s(&read_array(&s, aout, w * 16, h, 1));
    for (i, (g, v)) in got.chunks(4).zip(input.chunks(4)).enumerate() {
        let want = [v[0] * k, v[1] + k, v[2] - k, v[3]];
        assert_eq!(g, want, "surf_2d_scale texel {i}");
    }
    // Boundary modes of a read: clamp to the edge, or zero.
    let (a8, m8) = array_with_data(&s, &mut rng, ldst(9, 4, 0, U8, 4, 0), TextureDesc::default());
    let s8 = surf_object(s.api, a8);
    let xy: Vec<[i32; 2]> =
        (0..N).map(|_| [(rng.next_u32() % 15) as i32 - 3, (rng.next_u32() % 8) as i32 - 2]).collect();
    let (dclamp, dzero) = (s.alloc(N * 4), s.alloc(N * 4));
    s.run(
        "surf_2d_read_modes",
        grid(N),
        64,
        &mut [Param::U64(s8), Param::U64(s.upload(&xy)), Param::U64(dclamp), Param::U64(dzero), Param::I32(N as i32)],
    );
    let (gc, gz): (Vec<[u8; 4]>, Vec<[u8; 4]>) = (s.download(dclamp, N), s.download(dzero, N));
    for (i, p) in xy.iter().enumerate() {
        let texel = |x: i32, y: i32| {
            let at = (y as usize * 9 + x as usize) * 4;
            [m8.data[at], m8.data[at + 1], m8.data[at + 2], m8.data[at + 3]]
        };
        let inside = (0..9).contains(&p[0]) && (0..4).contains(&p[1]);
        assert_eq!(gc[i], texel(p[0].clamp(0, 8), p[1].clamp(0, 3)), "clamp read at {p:?}");
        assert_eq!(gz[i], if inside { texel(p[0], p[1]) } else { [0; 4] }, "zero read at {p:?}");
    }
    // 1D short writes.
    let a16 = create_array(s.api, ldst(77, 0, 0, 0x09, 1, 0));
    let s16 = surf_object(s.api, a16);
    let v: Vec<i16> = (0..77).map(|_| rng.next_u32() as i16).collect();
    s.run("surf_1d_write", grid(77), 64, &mut [Param::U64(s16), Param::U64(s.upload(&v)), Param::I32(77)]);
    let got: Vec<i16> = read_array(&s, a16, 154, 1, 1).chunks(2).map(|c| i16::from_le_bytes([c[0], c[1]])).collect();
    assert_eq!(got, v, "surf_1d_write");
    // 3D int read-modify-write.
    let (w3, h3, d3) = (10usize, 3usize, 4usize);
    let (a3, m3) = array_with_data(&s, &mut rng, ldst(w3, h3, d3, S32, 1, 0), TextureDesc::default());
    let s3 = surf_object(s.api, a3);
    let kk = 5i32;
    s.run(
        "surf_3d_add",
        [1, h3 as u32, d3 as u32],
        32,
        &mut [Param::U64(s3), Param::I32(w3 as i32), Param::I32(h3 as i32), Param::I32(d3 as i32), Param::I32(kk)],
    );
    let got = read_array(&s, a3, w3 * 4, h3, d3);
    for z in 0..d3 {
        for y in 0..h3 {
            for x in 0..w3 {
                let at = ((z * h3 + y) * w3 + x) * 4;
                let before = i32::from_le_bytes(m3.data[at..at + 4].try_into().unwrap());
                let after = i32::from_le_bytes(got[at..at + 4].try_into().unwrap());
                assert_eq!(after, before.wrapping_add(kk * (x + y + z) as i32), "surf_3d_add ({x}, {y}, {z})");
            }
        }
    }
    // 2D layered float2: layer l + 1 = layer l swapped, in parallel (each
    // block reads layer l as it was: blocks of layer l + 1 write only there).
    let (wl, hl, layers) = (6usize, 2usize, 2usize);
    let (al, ml) = array_with_data(&s, &mut rng, ldst(wl, hl, layers, F32, 2, LAYERED), TextureDesc::default());
    let sl = surf_object(s.api, al);
    s.run(
        "surf_2d_layered_copy",
        [1, hl as u32, layers as u32],
        32,
        &mut [Param::U64(sl), Param::I32(wl as i32), Param::I32(hl as i32), Param::I32(layers as i32)],
    );
    let got = f32s(&read_array(&s, al, wl * 8, hl, layers));
    let before = f32s(&ml.data);
    let per_layer = wl * hl * 2;
    assert_eq!(got[..per_layer], before[..per_layer], "layer 0 unchanged");
    for t in 0..wl * hl {
        assert_eq!(
            [got[per_layer + 2 * t], got[per_layer + 2 * t + 1]],
            [before[2 * t + 1], before[2 * t]],
            "layer 1 texel {t}"
        );
    }
    // sured: a histogram of 2000 values into 8 x 4 u32 counters.
    let ah = create_array(s.api, ldst(8, 4, 0, 0x03, 1, 0));
    let zeros = [0u8; 8 * 4 * 4];
    let api = s.api;
    check(api, cu!(api.cuMemcpyHtoA_v2(ah, 0, zeros.as_ptr().cast(), zeros.len())), "zero counters");
    let sh = surf_object(s.api, ah);
    let bins: Vec<[i32; 2]> = (0..2000).map(|_| [(rng.next_u32() % 8) as i32, (rng.next_u32() % 4) as i32]).collect();
    s.run("surf_histogram", grid(2000), 64, &mut [Param::U64(sh), Param::U64(s.upload(&bins)), Param::I32(2000)]);
    let mut counts = vec![0u8; 8 * 4 * 4];
    check(api, cu!(api.cuMemcpyAtoH_v2(counts.as_mut_ptr().cast(), ah, 0, counts.len())), "read counters");
    let counts: Vec<u32> = counts.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let mut want = vec![0u32; 32];
    for b in &bins {
        want[(b[1] * 8 + b[0]) as usize] += 1;
    }
    assert_eq!(counts, want, "sured histogram");
}

/// A `.trap` surface access outside the surface fails the launch loudly.
/// In a process of its own: every CUDA context of the device shares the
/// runtime's context, so a concurrent test could be the one to see the
/// failure.
#[test]
fn trap_mode_faults_outside_the_surface() {
    if common::in_own_process("trap_mode_faults_outside_the_surface", "PTXVK_TEX_TRAP_CHILD").is_some() {
        return;
    }
    let s = Setup::new();
    let (w, h) = (21usize, 1usize);
    let ldst =
        Array3DDesc { width: w, height: h, format: F32, channels: 4, flags: SURFACE_LDST, ..Array3DDesc::default() };
    let (ain, aout) = (create_array(s.api, ldst), create_array(s.api, ldst));
    let (sin, sout) = (surf_object(s.api, ain), surf_object(s.api, aout));
    // Inside: fine.
    s.run(
        "surf_2d_scale",
        [1, 1, 1],
        32,
        &mut [Param::U64(sin), Param::U64(sout), Param::I32(w as i32), Param::I32(1), Param::F32(1.0)],
    );
    // Five texels past the right edge.
    let rc = s.launch(
        "surf_2d_scale",
        [1, 1, 1],
        32,
        &mut [Param::U64(sin), Param::U64(sout), Param::I32(w as i32 + 5), Param::I32(1), Param::F32(1.0)],
    );
    assert_ne!(rc, code::SUCCESS, "a .trap access outside the surface must fail the launch");
    drop(s);
    // A destroyed texture object and a stray value fail the launch (each in
    // a context of its own: the failure is sticky), not the process.
    for stray in [None, Some(0xdead_0000u64)] {
        let s = Setup::new();
        let api = s.api;
        let desc = Array3DDesc { width: 4, height: 4, format: F32, channels: 1, ..Array3DDesc::default() };
        let a = create_array(api, desc);
        let t = sampler([CLAMP; 3], false, 0);
        let tex = tex_object(api, &ResourceDesc::array(a), &t);
        check(api, cu!(api.cuTexObjectDestroy(tex)), "destroy");
        let handle = stray.unwrap_or(tex);
        let xy = [[0.5f32, 0.5f32]; 4];
        let out = s.alloc(64);
        let rc = s.launch(
            "sample_2d",
            [1, 1, 1],
            32,
            &mut [Param::U64(handle), Param::U64(s.upload(&xy)), Param::U64(out), Param::I32(4)],
        );
        assert_ne!(rc, code::SUCCESS, "sampling through {handle:#x} (stray: {}) must fail the launch", stray.is_some());
    }
}

/// txq and suq (inline PTX in the fixture).
#[test]
fn queries() {
    let s = Setup::new();
    let api = s.api;
    let desc = Array3DDesc { width: 40, height: 24, format: U8, channels: 2, ..Array3DDesc::default() };
    let mut m: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuMipmappedArrayCreate(&mut m, (&desc as *const Array3DDesc).cast(), 3)), "mipmapped");
    let t = sampler([CLAMP; 3], true, NORMALIZED);
    let tex = tex_object(api, &ResourceDesc::mipmapped(m), &t);
    let sa = create_array(
        api,
        Array3DDesc { width: 7, height: 3, format: 0x09, channels: 4, flags: SURFACE_LDST, ..Array3DDesc::default() },
    );
    let surf = surf_object(api, sa);
    let out = s.alloc(12 * 4);
    s.run("query", [1, 1, 1], 32, &mut [Param::U64(tex), Param::U64(surf), Param::I32(2), Param::U64(out)]);
    let got: Vec<i32> = s.download(out, 12);
    // width, height, depth, levels, level-2 width and height, normalized,
    // filter, channel order (CL_RG), surface width, height, channel type
    // (CL_SNORM_INT16: a surface reads 16-bit signed texels as stored).
    assert_eq!(got, [40, 24, 1, 3, 10, 6, 1, 1, 0x10B2, 7, 3, 0x10D1]);
}

/// Arrays through the copy entry points: 2D copies with offsets, AtoA,
/// HtoA/AtoH, and every documented argument error.
#[test]
fn array_copies_and_argument_errors() {
    let s = Setup::new();
    let api = s.api;
    let mut rng = Lcg(0xa77);
    let desc = Array3DDesc { width: 12, height: 5, format: U16, channels: 2, ..Array3DDesc::default() };
    let (a, model) = array_with_data(&s, &mut rng, desc, TextureDesc::default());
    let mut got = Array3DDesc::default();
    check(api, cu!(api.cuArray3DGetDescriptor_v2((&mut got as *mut Array3DDesc).cast(), a)), "descriptor");
    assert_eq!((got.width, got.height, got.depth, got.format, got.channels), (12, 5, 0, U16, 2));
    // A sub-box copy: bytes 8..40 of rows 1..4 into a host buffer of pitch 50.
    let mut host = vec![0xEEu8; 50 * 3];
    let mut c = Memcpy3D::zeroed();
    c.src_type = ARRAY;
    c.src_array = a;
    c.src_x = 8;
    c.src_y = 1;
    c.dst_type = HOST;
    c.dst_host = host.as_mut_ptr().cast();
    c.dst_pitch = 50;
    c.dst_height = 3;
    c.width = 32;
    c.height = 3;
    c.depth = 1;
    check(api, cu!(api.cuMemcpy3D_v2((&c as *const Memcpy3D).cast())), "sub-box");
    for r in 0..3 {
        assert_eq!(host[r * 50..r * 50 + 32], model.data[(r + 1) * 48 + 8..(r + 1) * 48 + 40], "row {r}");
        assert!(host[r * 50 + 32..r * 50 + 50].iter().all(|&b| b == 0xEE), "row {r} tail");
    }
    // Outside the array: CUDA_ERROR_INVALID_VALUE, nothing copied.
    c.src_x = 20;
    assert_eq!(cu!(api.cuMemcpy3D_v2((&c as *const Memcpy3D).cast())), code::INVALID_VALUE, "copy past the row");
    // AtoA, then AtoH of the whole.
    let b = create_array(api, desc);
    check(api, cu!(api.cuMemcpyAtoA_v2(b, 0, a, 0, 12 * 5 * 4)), "AtoA");
    let mut whole = vec![0u8; 12 * 5 * 4];
    check(api, cu!(api.cuMemcpyAtoH_v2(whole.as_mut_ptr().cast(), b, 0, whole.len())), "AtoH");
    assert_eq!(whole, model.data);
    assert_eq!(
        cu!(api.cuMemcpyAtoH_v2(whole.as_mut_ptr().cast(), b, 4, whole.len())),
        code::INVALID_VALUE,
        "AtoH past the end"
    );
    // Creation errors.
    let bad = |d: Array3DDesc| {
        let mut h: Handle = std::ptr::null_mut();
        cu!(api.cuArray3DCreate_v2(&mut h, (&d as *const Array3DDesc).cast()))
    };
    let ok = Array3DDesc { width: 4, height: 4, format: F32, channels: 1, ..Array3DDesc::default() };
    assert_eq!(bad(Array3DDesc { format: 0x77, ..ok }), code::INVALID_VALUE, "unknown format");
    assert_eq!(bad(Array3DDesc { channels: 3, ..ok }), code::INVALID_VALUE, "3 channels");
    assert_eq!(bad(Array3DDesc { width: 0, ..ok }), code::INVALID_VALUE, "width 0");
    assert_eq!(
        bad(Array3DDesc { depth: 6, flags: CUBEMAP, width: 5, ..ok }),
        code::INVALID_VALUE,
        "cubemap not square"
    );
    assert_eq!(bad(Array3DDesc { height: 0, depth: 3, ..ok }), code::INVALID_VALUE, "3D without height");
    assert_eq!(bad(Array3DDesc { flags: 0x10, ..ok }), code::NOT_SUPPORTED, "depth texture");
    // A surface needs SURFACE_LDST; views are not supported; handles are checked.
    let mut h = 0u64;
    let res = ResourceDesc::array(a);
    assert_eq!(
        cu!(api.cuSurfObjectCreate(&mut h, (&res as *const ResourceDesc).cast())),
        code::INVALID_VALUE,
        "surface without LDST"
    );
    let t = sampler([CLAMP; 3], false, 0);
    let view = [0u8; 112];
    assert_eq!(
        cu!(api.cuTexObjectCreate(
            &mut h,
            (&res as *const ResourceDesc).cast(),
            (&t as *const TextureDesc).cast(),
            view.as_ptr().cast()
        )),
        code::NOT_SUPPORTED,
        "resource view"
    );
    let tex = tex_object(api, &res, &t);
    let mut back = TextureDesc::default();
    check(api, cu!(api.cuTexObjectGetTextureDesc((&mut back as *mut TextureDesc).cast(), tex)), "texture desc");
    assert_eq!(back, t);
    check(api, cu!(api.cuTexObjectDestroy(tex)), "destroy");
    assert_eq!(cu!(api.cuTexObjectDestroy(tex)), code::INVALID_VALUE, "destroyed twice");
    check(api, cu!(api.cuArrayDestroy(b)), "destroy array");
    assert_eq!(cu!(api.cuArrayDestroy(b)), code::INVALID_HANDLE, "array destroyed twice");
}

/// Legacy references: `.texref`/`.surfref` module variables bound with
/// `cuTexRefSet*`/`cuSurfRefSetArray` (hand-written PTX: CUDA 12 and later
/// have no texture references in CUDA C; `ptxas -arch=sm_80` accepts it).
const REFS_PTX: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.global .texref tr;
.global .surfref sr;

.visible .entry refs(.param .u64 xy, .param .u64 out, .param .u64 sout, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [xy];
    ld.param.u64 %rd2, [out];
    ld.param.u64 %rd3, [sout];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra $Ldone;
    mul.wide.s32 %rd4, %r5, 8;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.v2.f32 {%f1, %f2}, [%rd5];
    tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [tr, {%f1, %f2}];
    mul.wide.s32 %rd6, %r5, 16;
    add.s64 %rd7, %rd2, %rd6;
    st.global.v4.f32 [%rd7], {%f3, %f4, %f5, %f6};
    // The surface: texel (i mod 4, 0) of a 4 x 1 u32 array.
    and.b32 %r6, %r5, 3;
    shl.b32 %r7, %r6, 2;
    suld.b.2d.b32.trap {%r8}, [sr, {%r7, 0}];
    mul.wide.s32 %rd8, %r5, 4;
    add.s64 %rd9, %rd3, %rd8;
    st.global.u32 [%rd9], %r8;
$Ldone:
    ret;
}
"#;

#[test]
fn texture_and_surface_references() {
    let s = Setup::new();
    let api = s.api;
    let mut rng = Lcg(0x7ef);
    let image = format!("{REFS_PTX}\0");
    let mut module: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast())), "load refs");
    let (mut tr, mut sr): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
    check(api, cu!(api.cuModuleGetTexRef(&mut tr, module, c"tr".as_ptr())), "cuModuleGetTexRef");
    check(api, cu!(api.cuModuleGetSurfRef(&mut sr, module, c"sr".as_ptr())), "cuModuleGetSurfRef");
    let mut again: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleGetTexRef(&mut again, module, c"tr".as_ptr())), "again");
    assert_eq!(again, tr, "one handle per reference");
    assert_eq!(cu!(api.cuModuleGetTexRef(&mut again, module, c"nope".as_ptr())), code::NOT_FOUND);
    // The texture: a 6 x 5 float4 array, linear filtering, wrap, normalized.
    let t = sampler([WRAP, WRAP, CLAMP], true, NORMALIZED);
    let desc = Array3DDesc { width: 6, height: 5, format: F32, channels: 4, ..Array3DDesc::default() };
    let (a, mut model) = array_with_data(&s, &mut rng, desc, t);
    check(api, cu!(api.cuTexRefSetArray(tr, a, 1)), "cuTexRefSetArray");
    check(api, cu!(api.cuTexRefSetAddressMode(tr, 0, WRAP)), "mode 0");
    check(api, cu!(api.cuTexRefSetAddressMode(tr, 1, WRAP)), "mode 1");
    check(api, cu!(api.cuTexRefSetFilterMode(tr, 1)), "filter");
    check(api, cu!(api.cuTexRefSetFlags(tr, NORMALIZED)), "flags");
    let mut fm = 9u32;
    check(api, cu!(api.cuTexRefGetFilterMode(&mut fm, tr)), "get filter");
    assert_eq!(fm, 1);
    model.t.border_color = [0.0; 4];
    // The surface: 4 u32 texels.
    let sa = create_array(
        api,
        Array3DDesc { width: 4, height: 1, format: 0x03, channels: 1, flags: SURFACE_LDST, ..Array3DDesc::default() },
    );
    let words = [11u32, 22, 33, 44];
    check(api, cu!(api.cuMemcpyHtoA_v2(sa, 0, words.as_ptr().cast(), 16)), "fill surface");
    assert_eq!(cu!(api.cuSurfRefSetArray(sr, a, 0)), code::INVALID_VALUE, "an array without SURFACE_LDST");
    check(api, cu!(api.cuSurfRefSetArray(sr, sa, 0)), "cuSurfRefSetArray");
    let xy: Vec<[f32; 2]> =
        coords(&mut rng, N, 6, true).into_iter().zip(coords(&mut rng, N, 5, true)).map(|(x, y)| [x, y]).collect();
    let (out, sout) = (s.alloc(N * 16), s.alloc(N * 4));
    let rc = s.launch_in(
        module,
        "refs",
        grid(N),
        64,
        &mut [Param::U64(s.upload(&xy)), Param::U64(out), Param::U64(sout), Param::I32(N as i32)],
    );
    check(api, rc, "refs");
    let got: Vec<[u32; 4]> = s.download(out, N);
    let want: Vec<[u32; 4]> =
        xy.iter().map(|p| model.sample_level(0, 2, false, false, [p[0].to_bits(), p[1].to_bits(), 0], 0, -1)).collect();
    assert_close(&got, &want, true, "texref");
    let got: Vec<u32> = s.download(sout, N);
    assert!(got.iter().enumerate().all(|(i, &v)| v == words[i % 4]), "surfref reads");
    check(api, cu!(api.cuModuleUnload(module)), "unload");
    let mut g = 0u32;
    assert_eq!(cu!(api.cuTexRefGetFilterMode(&mut g, tr)), code::INVALID_HANDLE, "a reference dies with its module");
}

/// `tex.2d.v2.f16x2`: the four channels rounded to f16, packed {R, G}, {B, A}.
#[test]
fn half2_results() {
    let s = Setup::new();
    let mut rng = Lcg(0x4a1f);
    let t = sampler([WRAP, CLAMP, CLAMP], true, NORMALIZED);
    let desc = Array3DDesc { width: 11, height: 6, format: F32, channels: 4, ..Array3DDesc::default() };
    let (a, model) = array_with_data(&s, &mut rng, desc, t);
    let tex = tex_object(s.api, &ResourceDesc::array(a), &t);
    let xy: Vec<[f32; 2]> =
        coords(&mut rng, N, 11, true).into_iter().zip(coords(&mut rng, N, 6, true)).map(|(x, y)| [x, y]).collect();
    let out = s.alloc(N * 8);
    s.run(
        "sample_2d_half2",
        grid(N),
        64,
        &mut [Param::U64(tex), Param::U64(s.upload(&xy)), Param::U64(out), Param::I32(N as i32)],
    );
    let got: Vec<[u32; 2]> = s.download(out, N);
    for (k, p) in xy.iter().enumerate() {
        let v = model.sample_level(0, 2, false, false, [p[0].to_bits(), p[1].to_bits(), 0], 0, -1);
        let h = |x: u32| half::f16::from_f32(f32::from_bits(x)).to_bits() as u32;
        let want = [h(v[0]) | h(v[1]) << 16, h(v[2]) | h(v[3]) << 16];
        assert_eq!(got[k], want, "f16x2 sample {k} at {p:?}");
    }
}

/// `sust.p` (formatted: x counts samples; values converted to the format)
/// and `sured.p` min (signed or unsigned as the format is).
#[test]
fn formatted_surface_stores_and_reductions() {
    let s = Setup::new();
    let api = s.api;
    let mut rng = Lcg(0xf0a7);
    let w = 50usize;
    let vals: Vec<[u32; 4]> =
        (0..w).map(|_| [rng.next_f32().to_bits(), rng.next_f32().to_bits(), rng.next_u32(), rng.next_u32()]).collect();
    for (format, channels) in [(F32, 4), (HALF, 2), (U8, 4), (S32, 1)] {
        let arr = create_array(
            api,
            Array3DDesc { width: w, format, channels, flags: SURFACE_LDST, ..Array3DDesc::default() },
        );
        let elem = match format {
            U8 => 1,
            HALF => 2,
            _ => 4,
        } * channels as usize;
        let poison = vec![0xCDu8; w * elem];
        check(api, cu!(api.cuMemcpyHtoA_v2(arr, 0, poison.as_ptr().cast(), poison.len())), "poison");
        let surf = surf_object(api, arr);
        s.run("surf_store_p", grid(w), 64, &mut [Param::U64(surf), Param::U64(s.upload(&vals)), Param::I32(w as i32)]);
        let mut got = vec![0u8; w * elem];
        check(api, cu!(api.cuMemcpyAtoH_v2(got.as_mut_ptr().cast(), arr, 0, got.len())), "read back");
        let mut want = Vec::new();
        for v in &vals {
            for &c in v.iter().take(channels as usize) {
                match format {
                    HALF => want.extend_from_slice(&half::f16::from_f32(f32::from_bits(c)).to_bits().to_le_bytes()),
                    U8 => want.push(c as u8),
                    _ => want.extend_from_slice(&c.to_le_bytes()),
                }
            }
        }
        assert_eq!(got, want, "sust.p into format {format:#x}x{channels}");
    }
    // sured.p.min on s32 and u32 counters.
    for format in [S32, 0x03] {
        let arr = create_array(
            api,
            Array3DDesc { width: 8, format, channels: 1, flags: SURFACE_LDST, ..Array3DDesc::default() },
        );
        let start = [100i32; 8];
        check(api, cu!(api.cuMemcpyHtoA_v2(arr, 0, start.as_ptr().cast(), 32)), "start");
        let surf = surf_object(api, arr);
        let xv: Vec<[i32; 2]> =
            (0..500).map(|_| [(rng.next_u32() % 8) as i32, (rng.next_u32() % 1000) as i32 - 500]).collect();
        s.run("surf_min_p", grid(500), 64, &mut [Param::U64(surf), Param::U64(s.upload(&xv)), Param::I32(500)]);
        let mut got = [0i32; 8];
        check(api, cu!(api.cuMemcpyAtoH_v2(got.as_mut_ptr().cast(), arr, 0, 32)), "read back");
        let mut want = start;
        for p in &xv {
            let slot = &mut want[p[0] as usize];
            *slot = if format == S32 { (*slot).min(p[1]) } else { (*slot as u32).min(p[1] as u32) as i32 };
        }
        assert_eq!(got, want, "sured.p.min format {format:#x}");
    }
}

/// Independent texturing mode: a module `.samplerref`'s attributes replace
/// the texture object's address modes, filter and normalization
/// (hand-written PTX, as OpenCL compilers emit it; `ptxas -arch=sm_80`
/// accepts it; CUDA C has no separate samplers).
const INDEPENDENT_PTX: &str = r#"
.version 8.0
.target sm_80, texmode_independent
.address_size 64

.global .samplerref smp = { addr_mode_0 = wrap, addr_mode_1 = clamp_to_border, filter_mode = linear, force_unnormalized_coords = 1 };

.visible .entry independent(.param .u64 t, .param .u64 xy, .param .u64 out, .param .u32 n, .param .u64 q)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [t];
    ld.param.u64 %rd2, [xy];
    ld.param.u64 %rd3, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra $Ldone;
    mul.wide.s32 %rd4, %r5, 8;
    add.s64 %rd5, %rd2, %rd4;
    ld.global.v2.f32 {%f1, %f2}, [%rd5];
    tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [%rd1, smp, {%f1, %f2}];
    mul.wide.s32 %rd6, %r5, 16;
    add.s64 %rd7, %rd3, %rd6;
    st.global.v4.f32 [%rd7], {%f3, %f4, %f5, %f6};
    setp.ne.s32 %p1, %r5, 0;
    @%p1 bra $Ldone;
    txq.filter_mode.b32 %r6, [smp];
    txq.addr_mode_1.b32 %r7, [smp];
    txq.force_unnormalized_coords.b32 %r8, [smp];
    ld.param.u64 %rd8, [q];
    st.global.v4.u32 [%rd8], {%r6, %r7, %r8, %r8};
$Ldone:
    ret;
}
"#;

#[test]
fn independent_mode_samplers() {
    let s = Setup::new();
    let api = s.api;
    let mut rng = Lcg(0x1de9);
    let image = format!("{INDEPENDENT_PTX}\0");
    let mut module: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast())), "load independent");
    // The texture object says point sampling, clamp, normalized coordinates.
    let t = sampler([CLAMP; 3], false, NORMALIZED);
    let desc = Array3DDesc { width: 9, height: 7, format: F32, channels: 4, ..Array3DDesc::default() };
    let (a, mut model) = array_with_data(&s, &mut rng, desc, t);
    let tex = tex_object(api, &ResourceDesc::array(a), &t);
    // The sampler's view: wrap x (unnormalized: clamps), border y, linear, unnormalized.
    model.t.address_mode = [WRAP, BORDER, CLAMP];
    model.t.filter_mode = 1;
    model.t.flags = 0;
    let xy: Vec<[f32; 2]> =
        coords(&mut rng, N, 9, false).into_iter().zip(coords(&mut rng, N, 7, false)).map(|(x, y)| [x, y]).collect();
    let (out, q) = (s.alloc(N * 16), s.alloc(16));
    let rc = s.launch_in(
        module,
        "independent",
        grid(N),
        64,
        &mut [Param::U64(tex), Param::U64(s.upload(&xy)), Param::U64(out), Param::I32(N as i32), Param::U64(q)],
    );
    check(api, rc, "independent");
    let got: Vec<[u32; 4]> = s.download(out, N);
    let want: Vec<[u32; 4]> =
        xy.iter().map(|p| model.sample_level(0, 2, false, false, [p[0].to_bits(), p[1].to_bits(), 0], 0, -1)).collect();
    assert_close(&got, &want, true, "independent mode");
    let attrs: Vec<u32> = s.download(q, 4);
    assert_eq!(attrs, [1, BORDER, 1, 1], "txq of the sampler");
}

/// The texture and surface size limits are NVIDIA's for compute capability
/// 8.x (not 0, which told clients there were no textures), and arrays of
/// those sizes are created: 1D at the widest, 3D at the deepest alternate
/// extent, a layered 2D array with the most layers, a layered cubemap with
/// the most faces.
#[test]
fn texture_limits_are_reported_and_honoured() {
    let api = init();
    let _ctx = Ctx::new(api);
    let attr = |a: c_int| {
        let mut v: c_int = -1;
        check(api, cu!(api.cuDeviceGetAttribute(&mut v, a, 0)), "cuDeviceGetAttribute");
        v
    };
    let want: &[(c_int, c_int, &str)] = &[
        (21, 131072, "MAXIMUM_TEXTURE1D_WIDTH"),
        (22, 131072, "MAXIMUM_TEXTURE2D_WIDTH"),
        (23, 65536, "MAXIMUM_TEXTURE2D_HEIGHT"),
        (24, 16384, "MAXIMUM_TEXTURE3D_WIDTH"),
        (26, 16384, "MAXIMUM_TEXTURE3D_DEPTH"),
        (27, 32768, "MAXIMUM_TEXTURE2D_LAYERED_WIDTH"),
        (29, 2048, "MAXIMUM_TEXTURE2D_LAYERED_LAYERS"),
        (43, 2048, "MAXIMUM_TEXTURE1D_LAYERED_LAYERS"),
        (47, 8192, "MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE"),
        (49, 32768, "MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE"),
        (52, 32768, "MAXIMUM_TEXTURECUBEMAP_WIDTH"),
        (54, 2046, "MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS"),
        (55, 32768, "MAXIMUM_SURFACE1D_WIDTH"),
        (57, 65536, "MAXIMUM_SURFACE2D_HEIGHT"),
        (60, 16384, "MAXIMUM_SURFACE3D_DEPTH"),
        (68, 2046, "MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS"),
        (69, 1 << 28, "MAXIMUM_TEXTURE1D_LINEAR_WIDTH"),
        (71, 65000, "MAXIMUM_TEXTURE2D_LINEAR_HEIGHT"),
        (72, 2_097_120, "MAXIMUM_TEXTURE2D_LINEAR_PITCH"),
        (74, 32768, "MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT"),
        (77, 32768, "MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH"),
    ];
    for &(a, v, name) in want {
        assert_eq!(attr(a), v, "{name} ({a})");
    }
    for a in (21..=29).chain(42..=49).chain(52..=74).chain([77]) {
        assert!(attr(a) > 0, "texture or surface attribute {a} is {}", attr(a));
    }
    let u8x1 = 0x01;
    let made = [
        Array3DDesc { width: attr(21) as usize, format: u8x1, channels: 1, ..Array3DDesc::default() },
        Array3DDesc {
            width: 2,
            height: 2,
            depth: attr(49) as usize,
            format: u8x1,
            channels: 1,
            ..Array3DDesc::default()
        },
        Array3DDesc { width: 4, height: 4, depth: attr(29) as usize, format: u8x1, channels: 1, flags: LAYERED },
        Array3DDesc {
            width: 2,
            height: 2,
            depth: attr(54) as usize,
            format: u8x1,
            channels: 1,
            flags: LAYERED | CUBEMAP,
        },
    ];
    for d in made {
        let a = create_array(api, d);
        check(api, cu!(api.cuArrayDestroy(a)), "cuArrayDestroy");
    }
}
