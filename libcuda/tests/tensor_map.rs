//! Tensor-map encoders through the C ABI: every documented argument rule
//! rejected with `CUDA_ERROR_INVALID_VALUE`, valid maps encoded in the
//! layout the copy engine reads (`ptxvk_translator::tensor_map`).

mod common;

use std::ffi::{c_int, c_void};

use common::{check, code, init, Api};
use ptxvk_translator::{tensor_map, TensorMapDesc};

/// A `CUtensorMap`: 128 bytes, 64-byte aligned.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Map([u8; 128]);

impl Map {
    fn new() -> Map {
        Map([0xCC; 128])
    }
    fn ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr().cast()
    }
    fn u32_at(&self, off: usize) -> u32 {
        u32::from_le_bytes(self.0[off..off + 4].try_into().unwrap())
    }
    fn u64_at(&self, off: usize) -> u64 {
        u64::from_le_bytes(self.0[off..off + 8].try_into().unwrap())
    }
}

type Im2colFn = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    u32,
    *mut c_void,
    *const u64,
    *const u64,
    *const c_int,
    *const c_int,
    u32,
    u32,
    *const u32,
    c_int,
    c_int,
    c_int,
    c_int,
) -> u32;
type Im2colWideFn = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    u32,
    *mut c_void,
    *const u64,
    *const u64,
    c_int,
    c_int,
    u32,
    u32,
    *const u32,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
) -> u32;
type ReplaceFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> u32;
type AllocClassFn = unsafe extern "C" fn(*mut c_void, c_int, *mut c_int) -> u32;

/// An entry point looked up with `cuGetProcAddress_v2`.
fn proc(api: &Api, name: &std::ffi::CStr) -> *mut c_void {
    let mut f: *mut c_void = std::ptr::null_mut();
    let mut status = -1;
    check(api, cu!(api.cuGetProcAddress_v2(name.as_ptr(), &mut f, 13050, 0, &mut status)), "cuGetProcAddress");
    assert!(!f.is_null());
    f
}

/// The arguments of `cuTensorMapEncodeTiled`, valid by default: a 2-D f32
/// tensor of 100 x 37 with a 512-byte row pitch and a 32 x 16 box.
#[derive(Clone)]
struct Tiled {
    dtype: c_int,
    rank: u32,
    address: u64,
    dims: Vec<u64>,
    strides: Vec<u64>,
    boxes: Vec<u32>,
    es: Vec<u32>,
    interleave: c_int,
    swizzle: c_int,
    l2: c_int,
    oob: c_int,
}

impl Tiled {
    fn new() -> Tiled {
        Tiled {
            dtype: 7,
            rank: 2,
            address: 0x10_0000,
            dims: vec![100, 37],
            strides: vec![512],
            boxes: vec![32, 16],
            es: vec![1, 1],
            interleave: 0,
            swizzle: 0,
            l2: 0,
            oob: 0,
        }
    }

    fn encode(&self, api: &Api, map: &mut Map) -> u32 {
        let p = map.ptr();
        self.encode_at(api, p)
    }

    fn encode_at(&self, api: &Api, p: *mut c_void) -> u32 {
        let ptr = |v: &Vec<u64>| if v.is_empty() { std::ptr::null() } else { v.as_ptr() };
        let ptr32 = |v: &Vec<u32>| if v.is_empty() { std::ptr::null() } else { v.as_ptr() };
        cu!(api.cuTensorMapEncodeTiled(
            p,
            self.dtype,
            self.rank,
            self.address as *mut c_void,
            ptr(&self.dims),
            ptr(&self.strides),
            ptr32(&self.boxes),
            ptr32(&self.es),
            self.interleave,
            self.swizzle,
            self.l2,
            self.oob
        ))
    }
}

#[test]
fn tiled_map_is_encoded() {
    let api = init();
    let mut map = Map::new();
    let mut t = Tiled::new();
    t.es = vec![3, 2]; // dimension 0's stride is ignored without interleave
    check(api, t.encode(api, &mut map), "cuTensorMapEncodeTiled");
    assert!(TensorMapDesc::is_encoded(&map.0));
    assert_eq!(map.u64_at(tensor_map::ADDRESS), 0x10_0000);
    assert_eq!(map.u32_at(tensor_map::DIMS), 100);
    assert_eq!(map.u32_at(tensor_map::DIMS + 4), 37);
    assert_eq!(map.u32_at(tensor_map::DIMS + 8), 1);
    assert_eq!(map.u64_at(tensor_map::STRIDES), 4);
    assert_eq!(map.u64_at(tensor_map::STRIDES + 8), 512);
    // box | stride << 9 | traversed << 16
    assert_eq!(map.u32_at(tensor_map::BOX), 32 | 1 << 9 | 32 << 16);
    assert_eq!(map.u32_at(tensor_map::BOX + 4), 16 | 2 << 9 | 8 << 16);
    assert_eq!(map.u32_at(tensor_map::FORMAT), 2 | 7 << 8 | 4 << 16);

    // Every rank, every swizzle within its span, OOB-NaN fill for floats.
    for rank in 1..=5u32 {
        let mut t = Tiled::new();
        t.rank = rank;
        t.dims = (0..rank as u64).map(|d| 10 + d).collect();
        t.strides = (1..rank as u64).map(|d| 4096 * d).collect();
        t.boxes = vec![8; rank as usize];
        t.es = vec![1; rank as usize];
        t.oob = 1;
        for swizzle in 0..=6 {
            t.swizzle = swizzle;
            check(api, t.encode(api, &mut map), &format!("rank {rank} swizzle {swizzle}"));
        }
    }
    // Interleaved layouts (rank >= 3); 32B interleave with 32B swizzle.
    let mut t = Tiled::new();
    t.rank = 3;
    t.dims = vec![8, 10, 10];
    t.strides = vec![32, 320];
    t.boxes = vec![8, 4, 4];
    t.es = vec![2, 1, 1];
    t.dtype = 1;
    t.interleave = 1;
    check(api, t.encode(api, &mut map), "interleave 16B");
    t.interleave = 2;
    t.swizzle = 1;
    check(api, t.encode(api, &mut map), "interleave 32B");
}

#[test]
fn tiled_arguments_are_checked() {
    let api = init();
    let mut map = Map::new();
    let bad = |what: &str, t: Tiled| {
        let mut map = Map::new();
        assert_eq!(t.encode(api, &mut map), code::INVALID_VALUE, "{what}");
        assert!(!TensorMapDesc::is_encoded(&map.0), "{what}: map written");
    };
    // The map itself: NULL, not 64-byte aligned.
    assert_eq!(Tiled::new().encode_at(api, std::ptr::null_mut()), code::INVALID_VALUE);
    let mut two = [Map::new(), Map::new()];
    let misaligned = two[0].0.as_mut_ptr().wrapping_add(32).cast::<c_void>();
    assert_eq!(Tiled::new().encode_at(api, misaligned), code::INVALID_VALUE);
    let t = |f: &dyn Fn(&mut Tiled)| {
        let mut t = Tiled::new();
        f(&mut t);
        t
    };
    bad("data type 16", t(&|t| t.dtype = 16));
    bad("data type -1", t(&|t| t.dtype = -1));
    bad("rank 0", t(&|t| t.rank = 0));
    bad("rank 6", t(&|t| t.rank = 6));
    bad("interleave with rank 2", t(&|t| t.interleave = 1));
    bad("address 8-byte aligned", t(&|t| t.address = 0x10_0008));
    bad("dimension 0", t(&|t| t.dims[1] = 0));
    bad("dimension 2^31 + 1", t(&|t| t.dims[0] = (1 << 31) + 1));
    bad("dims NULL", t(&|t| t.dims.clear()));
    bad("strides NULL", t(&|t| t.strides.clear()));
    bad("stride 8", t(&|t| t.strides[0] = 8));
    bad("stride 2^40", t(&|t| t.strides[0] = 1 << 40));
    bad("box 0", t(&|t| t.boxes[1] = 0));
    bad("box 257", t(&|t| t.boxes[1] = 257));
    bad("box NULL", t(&|t| t.boxes.clear()));
    bad("box row of 12 bytes", t(&|t| t.boxes[0] = 3));
    bad("element stride 0", t(&|t| t.es[1] = 0));
    bad("element stride 9", t(&|t| t.es[1] = 9));
    bad("element strides NULL", t(&|t| t.es.clear()));
    bad("interleave 3", t(&|t| t.interleave = 3));
    bad("swizzle 7", t(&|t| t.swizzle = 7));
    bad("l2 promotion 4", t(&|t| t.l2 = 4));
    bad("oob fill 2", t(&|t| t.oob = 2));
    bad("NaN fill of integers", t(&|t| (t.dtype, t.oob) = (2, 1)));
    bad("128-byte row with 64B swizzle", t(&|t| t.swizzle = 2));
    bad("64-byte row with 32B swizzle", t(&|t| (t.boxes[0], t.swizzle) = (16, 1)));
    let interleaved = |f: &dyn Fn(&mut Tiled)| {
        let mut t = Tiled::new();
        t.rank = 3;
        t.dims = vec![8, 10, 10];
        t.strides = vec![32, 320];
        t.boxes = vec![8, 4, 4];
        t.es = vec![1, 1, 1];
        t.dtype = 1;
        t.interleave = 2;
        t.swizzle = 1;
        f(&mut t);
        t
    };
    bad("32B interleave without 32B swizzle", interleaved(&|t| t.swizzle = 0));
    bad("32B interleave, 16-byte aligned address", interleaved(&|t| t.address = 0x10_0010));
    bad("32B interleave, stride 48", interleaved(&|t| t.strides[0] = 48));
    // Packed sub-byte types: checked, then encoded with dimension 0 in
    // groups of sixteen values (8 bytes each for 16U4_ALIGN16B).
    let packed = |f: &dyn Fn(&mut Tiled)| {
        let mut t = Tiled::new();
        t.dtype = 14; // 16U4_ALIGN16B
        t.dims = vec![256, 4];
        t.strides = vec![256];
        t.boxes = vec![128, 4];
        f(&mut t);
        t
    };
    check(api, packed(&|_| {}).encode(api, &mut map), "16U4_ALIGN16B tiled map");
    assert_eq!(map.u32_at(tensor_map::DIMS), 256 / 16);
    assert_eq!(map.u32_at(tensor_map::BOX) & 0x1FF, 128 / 16);
    assert_eq!((map.u32_at(tensor_map::FORMAT) >> 16) & 0xFF, 8);
    // 16U4_ALIGN8B: dimension 0 in bytes of two values.
    let mut t = packed(&|t| t.boxes[0] = 64);
    t.dtype = 13;
    check(api, t.encode(api, &mut map), "16U4_ALIGN8B tiled map");
    assert_eq!(map.u32_at(tensor_map::DIMS), 256 / 2);
    assert_eq!(map.u32_at(tensor_map::BOX) & 0x1FF, 64 / 2);
    assert_eq!((map.u32_at(tensor_map::FORMAT) >> 16) & 0xFF, 1);
    bad("16U4_ALIGN16B with box 64", packed(&|t| t.boxes[0] = 64));
    bad("16U4_ALIGN16B with dimension 200", packed(&|t| t.dims[0] = 200));
    bad("16U4_ALIGN16B with 64B swizzle", packed(&|t| t.swizzle = 2));
}

#[test]
fn im2col_maps() {
    let api = init();
    let f = proc(api, c"cuTensorMapEncodeIm2col");
    // SAFETY: cuTensorMapEncodeIm2col has this C signature.
    let encode: Im2colFn = unsafe { std::mem::transmute(f) };
    // NHWC 4-D tensor: C 64, W 9, H 14, N 2 (f16); as 5-D, D 2 and N 2.
    let dims = [64u64, 9, 14, 2, 2];
    let strides = [128u64, 128 * 9, 128 * 9 * 14, 128 * 9 * 14 * 2];
    let es = [1u32; 5];
    let run = |map: &mut Map, rank: u32, lower: &[c_int], upper: &[c_int], cpp: u32, ppc: u32, swizzle: c_int| {
        let p = map.ptr();
        let (lo, hi) = (lower.as_ptr(), upper.as_ptr());
        let (d, s, e) = (dims.as_ptr(), strides.as_ptr(), es.as_ptr());
        let address = 0x20_0000usize as *mut c_void;
        // SAFETY: every pointer is a live local array holding at least the
        // values the rank asks for.
        unsafe { encode(p, 6, rank, address, d, s, lo, hi, cpp, ppc, e, 0, swizzle, 0, 0) }
    };
    let mut map = Map::new();
    check(api, run(&mut map, 4, &[-1, -1], &[-1, -1], 8, 64, 0), "cuTensorMapEncodeIm2col");
    assert_eq!(map.u32_at(tensor_map::FORMAT) >> 24, 1, "im2col mode");
    assert_eq!(map.u32_at(tensor_map::PIXELS), 8 | 64 << 16);
    assert_eq!(map.u32_at(tensor_map::CORNERS), 0xFFFF_FFFF);
    let bad = |what: &str, rc: u32| assert_eq!(rc, code::INVALID_VALUE, "{what}");
    let mut m = Map::new();
    bad("rank 2", run(&mut m, 2, &[0], &[0], 8, 64, 0));
    bad("corner 128 at rank 4", run(&mut m, 4, &[128, 0], &[0, 0], 8, 64, 0));
    bad("corner -129 at rank 4", run(&mut m, 4, &[0, 0], &[0, -129], 8, 64, 0));
    bad("empty box", run(&mut m, 4, &[5, 0], &[-5, 0], 8, 64, 0));
    bad("0 channels per pixel", run(&mut m, 4, &[0, 0], &[0, 0], 0, 64, 0));
    bad("257 channels per pixel", run(&mut m, 4, &[0, 0], &[0, 0], 257, 64, 0));
    bad("1025 pixels per column", run(&mut m, 4, &[0, 0], &[0, 0], 8, 1025, 0));
    bad("128-byte pixels with 64B swizzle", run(&mut m, 4, &[0, 0], &[0, 0], 64, 64, 2));
    bad("NULL corners", {
        let p = m.ptr();
        let (d, s, e) = (dims.as_ptr(), strides.as_ptr(), es.as_ptr());
        let address = 0x20_0000usize as *mut c_void;
        let null = std::ptr::null();
        // SAFETY: NULL corner arrays are rejected before any is read.
        unsafe { encode(p, 6, 4, address, d, s, null, null, 8, 64, e, 0, 0, 0, 0) }
    });
    // Rank 5: corners within [-16, 15].
    check(api, run(&mut map, 5, &[-16, 0, 0], &[0, 15, -1], 8, 64, 0), "rank 5");
    bad("corner 16 at rank 5", run(&mut m, 5, &[16, 0, 0], &[0, 0, 0], 8, 64, 0));
    // Packed sub-byte types pass validation but are emulated in tiled maps only.
    let packed = {
        let p = m.ptr();
        let (d, s, e) = (dims.as_ptr(), strides.as_ptr(), es.as_ptr());
        let (lo, hi) = ([0 as c_int; 2], [0 as c_int; 2]);
        let address = 0x20_0000usize as *mut c_void;
        // SAFETY: every pointer is a live local array holding at least 4 values.
        unsafe { encode(p, 13, 4, address, d, s, lo.as_ptr(), hi.as_ptr(), 64, 64, e, 0, 0, 0, 0) }
    };
    assert_eq!(packed, code::NOT_SUPPORTED, "16U4_ALIGN8B im2col map");

    let f = proc(api, c"cuTensorMapEncodeIm2colWide");
    // SAFETY: cuTensorMapEncodeIm2colWide has this C signature.
    let wide: Im2colWideFn = unsafe { std::mem::transmute(f) };
    let run = |map: &mut Map, mode: c_int, swizzle: c_int, lower: c_int| {
        let p = map.ptr();
        let (d, s, e) = (dims.as_ptr(), strides.as_ptr(), es.as_ptr());
        let address = 0x20_0000usize as *mut c_void;
        // SAFETY: every pointer is a live local array of at least 4 values.
        unsafe { wide(p, 6, 4, address, d, s, lower, 0, 64, 128, e, 0, mode, swizzle, 0, 0) }
    };
    check(api, run(&mut map, 0, 3, -1), "cuTensorMapEncodeIm2colWide W");
    assert_eq!(map.u32_at(tensor_map::FORMAT) >> 24, 2);
    check(api, run(&mut map, 1, 3, -1), "cuTensorMapEncodeIm2colWide W128");
    assert_eq!(map.u32_at(tensor_map::FORMAT) >> 24, 3);
    bad("wide mode 2", run(&mut m, 2, 3, 0));
    bad("wide without swizzle", run(&mut m, 0, 0, 0));
    bad("wide lower corner -32769", run(&mut m, 0, 3, -32769));
}

#[test]
fn replace_address_and_allocation_class() {
    let api = init();
    // SAFETY: the names' C signatures.
    let replace: ReplaceFn = unsafe { std::mem::transmute(proc(api, c"cuTensorMapReplaceAddress")) };
    // SAFETY: as above.
    let class: AllocClassFn = unsafe { std::mem::transmute(proc(api, c"cuTensorMapSetAllocationClass")) };
    let mut map = Map::new();
    // A map no encoder wrote.
    // SAFETY: `map` is a live 64-byte-aligned CUtensorMap.
    assert_eq!(unsafe { replace(map.ptr(), 0x40_0000usize as *mut c_void) }, code::INVALID_VALUE);
    check(api, Tiled::new().encode(api, &mut map), "encode");
    // SAFETY: as above.
    check(api, unsafe { replace(map.ptr(), 0x40_0000usize as *mut c_void) }, "cuTensorMapReplaceAddress");
    assert_eq!(map.u64_at(tensor_map::ADDRESS), 0x40_0000);
    // SAFETY: as above.
    assert_eq!(unsafe { replace(map.ptr(), 0x40_0004usize as *mut c_void) }, code::INVALID_VALUE);
    assert_eq!(map.u64_at(tensor_map::ADDRESS), 0x40_0000);
    // SAFETY: NULL is rejected without being touched.
    assert_eq!(unsafe { replace(std::ptr::null_mut(), std::ptr::null_mut()) }, code::INVALID_VALUE);

    let mut out: c_int = -1;
    // SAFETY: `map` and `out` are live locals.
    check(api, unsafe { class(map.ptr(), 2, &mut out) }, "cuTensorMapSetAllocationClass");
    assert_eq!(out, 1, "the effective class is SMALL");
    out = -1;
    // SAFETY: as above.
    assert_eq!(unsafe { class(map.ptr(), 3, &mut out) }, code::INVALID_VALUE);
    assert_eq!(out, 1, "outAllocClass is SMALL even on failure");
}
