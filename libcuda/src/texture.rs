//! CUDA arrays, mipmapped arrays, texture objects and surface objects.
//!
//! A CUDA array is an ordinary device allocation in the layout that
//! `ptxvk_translator::abi::texture` describes (tight rows, then slices or
//! layers, then the next mipmap level), so copies to and from arrays are
//! pitched copies (`memory.rs`) and the sampling engine (`shaders/tex.ptx`)
//! reads texels with plain loads. A `CUtexObject`/`CUsurfObject` is the
//! device address of a 128-byte record the engine reads; this module keeps
//! what the object was created from, for the `Get*Desc` queries.
//!
//! `CUarray` and `CUmipmappedArray` handles are the addresses of objects in
//! a [`Registry`]; texture and surface objects are looked up by value.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

use ptxvk_translator::{texture as layout, TextureDesc};

use crate::context::{self, ContextObj};
use crate::ffi::{read_in, write_out, CUdeviceptr, Handle};
use crate::handles::Registry;
use crate::result::{CuError, CuResult};

/// `CUDA_ARRAY_DESCRIPTOR`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ArrayDesc {
    width: usize,
    height: usize,
    format: u32,
    channels: u32,
}

/// `CUDA_ARRAY3D_DESCRIPTOR`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Array3DDesc {
    width: usize,
    height: usize,
    depth: usize,
    format: u32,
    channels: u32,
    flags: u32,
}

/// `CUDA_ARRAY3D_LAYERED`.
const LAYERED: u32 = 0x01;
/// `CUDA_ARRAY3D_SURFACE_LDST`.
const SURFACE_LDST: u32 = 0x02;
/// `CUDA_ARRAY3D_CUBEMAP`.
const CUBEMAP: u32 = 0x04;
/// `CUDA_ARRAY3D_TEXTURE_GATHER`.
const TEXTURE_GATHER: u32 = 0x08;

/// Bytes per channel of a `CUarray_format` this shim stores, or `None`.
fn channel_bytes(format: u32) -> Option<u32> {
    match format {
        0x01 | 0x08 => Some(1),        // UNSIGNED_INT8, SIGNED_INT8
        0x02 | 0x09 | 0x10 => Some(2), // UNSIGNED_INT16, SIGNED_INT16, HALF
        0x03 | 0x0a | 0x20 => Some(4), // UNSIGNED_INT32, SIGNED_INT32, FLOAT
        _ => None,
    }
}

/// Bytes per element of `format` x `channels`, checked.
fn element_bytes(format: u32, channels: u32) -> CuResult<u32> {
    let Some(b) = channel_bytes(format) else {
        // 0x91 and up: block-compressed, planar video and packed
        // UNORM/SNORM formats (CUDA 11.5 and later).
        return Err(if matches!(format, 0x91..=0xcf) {
            CuError::CUDA_ERROR_NOT_SUPPORTED.because(format!(
                "CUarray_format {format:#x} (block-compressed, video and packed formats) is not supported"
            ))
        } else {
            CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown CUarray_format {format:#x}"))
        });
    };
    if !matches!(channels, 1 | 2 | 4) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("NumChannels is {channels}, not 1, 2 or 4")));
    }
    Ok(b * channels)
}

/// The shape of an array: texel extent, layers and dimensions per layer.
#[derive(Clone, Copy, Debug)]
struct Shape {
    extent: [u32; 3],
    layers: u32,
    dims: u32,
}

/// Checks a 3D descriptor and returns its shape.
fn shape_of(d: &Array3DDesc) -> CuResult<Shape> {
    let bad = |why: &str| Err(CuError::CUDA_ERROR_INVALID_VALUE.because(why.to_string()));
    let known = LAYERED | SURFACE_LDST | CUBEMAP | TEXTURE_GATHER;
    if d.flags & !known != 0 {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because(format!(
            "CUDA_ARRAY3D flags {:#x} (depth textures, color attachments, sparse or deferred arrays) are not supported",
            d.flags & !known
        )));
    }
    let big = |n: usize| n > i32::MAX as usize;
    if d.width == 0 || big(d.width) || big(d.height) || big(d.depth) {
        return bad("array width is 0 or a dimension is too large");
    }
    let (w, h, dd) = (d.width as u32, d.height as u32, d.depth as u32);
    let layered = d.flags & LAYERED != 0;
    let cubemap = d.flags & CUBEMAP != 0;
    if cubemap {
        if d.width != d.height || d.depth == 0 || (layered && !d.depth.is_multiple_of(6)) || (!layered && d.depth != 6)
        {
            return bad("a cubemap has Width == Height and Depth 6 (a multiple of 6 when layered)");
        }
        return Ok(Shape { extent: [w, h, 1], layers: dd, dims: 2 });
    }
    if layered {
        if d.depth == 0 {
            return bad("a layered array has Depth layers, at least 1");
        }
        let dims = if d.height == 0 { 1 } else { 2 };
        return Ok(Shape { extent: [w, h.max(1), 1], layers: dd, dims });
    }
    match (d.height, d.depth) {
        (0, 0) => Ok(Shape { extent: [w, 1, 1], layers: 1, dims: 1 }),
        (_, 0) => Ok(Shape { extent: [w, h, 1], layers: 1, dims: 2 }),
        (0, _) => bad("a 3D array needs a height"),
        _ => Ok(Shape { extent: [w, h, dd], layers: 1, dims: 3 }),
    }
}

/// Bytes of levels `0..levels` of an array of `shape` and `elem`-byte texels.
fn levels_bytes(shape: &Shape, elem: u32, levels: u32) -> CuResult<u64> {
    let mut total: u64 = 0;
    for k in 0..levels {
        let l = |n: u32| (n >> k).max(1) as u64;
        let bytes = l(shape.extent[0])
            .checked_mul(elem as u64)
            .and_then(|b| b.checked_mul(l(shape.extent[1])))
            .and_then(|b| b.checked_mul(l(shape.extent[2])))
            .and_then(|b| b.checked_mul(shape.layers as u64))
            .and_then(|b| b.checked_add(total));
        total = bytes.ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("array size overflows"))?;
    }
    Ok(total)
}

/// Device memory of an array or mipmapped array, freed when dropped.
struct Storage {
    ctx: Arc<ContextObj>,
    addr: u64,
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.runtime.free(self.addr) {
            log::warn!("freeing CUDA array memory at {:#x}: {e}", self.addr);
        }
    }
}

/// A `CUarray`: a whole array, or one level of a mipmapped array.
pub struct ArrayObj {
    storage: Arc<Storage>,
    /// Address of this array's (level's) first texel.
    pub addr: u64,
    desc: Array3DDesc,
    shape: Shape,
    elem: u32,
}

impl ArrayObj {
    /// Row pitch in bytes.
    pub fn pitch(&self) -> usize {
        self.shape.extent[0] as usize * self.elem as usize
    }

    /// Rows per slice (1 for 1D arrays).
    pub fn rows(&self) -> usize {
        self.shape.extent[1] as usize
    }

    /// Slices: depth for 3D arrays, layers for layered arrays and cubemaps.
    pub fn slices(&self) -> usize {
        self.shape.extent[2] as usize * self.shape.layers as usize
    }

    /// Total bytes.
    pub fn bytes(&self) -> u64 {
        (self.pitch() * self.rows() * self.slices()) as u64
    }
}

/// A `CUmipmappedArray`.
pub struct MipmappedObj {
    storage: Arc<Storage>,
    desc: Array3DDesc,
    shape: Shape,
    elem: u32,
    levels: u32,
    /// `cuMipmappedArrayGetLevel` handles, made on first request.
    level_handles: Mutex<Vec<Option<Handle>>>,
}

// SAFETY: the handles stored are opaque keys of `ARRAYS`, never dereferenced.
unsafe impl Send for MipmappedObj {}
// SAFETY: as above; the vector is behind a mutex.
unsafe impl Sync for MipmappedObj {}

/// Live arrays (including the level views of mipmapped arrays).
pub static ARRAYS: Registry<ArrayObj> = Registry::new();
/// Live mipmapped arrays.
static MIPMAPPED: Registry<MipmappedObj> = Registry::new();

/// The live array behind `h`.
pub fn array(h: Handle) -> CuResult<Arc<ArrayObj>> {
    ARRAYS.get(h).ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because("not a live CUarray"))
}

fn create_storage(ctx: &Arc<ContextObj>, bytes: u64) -> CuResult<Arc<Storage>> {
    let addr = ctx.runtime.alloc(bytes.max(1))?;
    Ok(Arc::new(Storage { ctx: ctx.clone(), addr }))
}

/// `cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)`.
///
/// # Safety
/// Pointers are NULL or valid.
pub unsafe fn array_3d_create(out: *mut Handle, desc: *const Array3DDesc) -> CuResult<()> {
    let ctx = context::current()?;
    // SAFETY: forwarded caller contract.
    let d = unsafe { read_in(desc) }?;
    if out.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pHandle is NULL"));
    }
    let elem = element_bytes(d.format, d.channels)?;
    let shape = shape_of(&d)?;
    let storage = create_storage(&ctx, levels_bytes(&shape, elem, 1)?)?;
    let addr = storage.addr;
    let h = ARRAYS.insert(Arc::new(ArrayObj { storage, addr, desc: d, shape, elem }));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(out, h) }
}

/// `cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)`.
///
/// # Safety
/// Pointers are NULL or valid.
pub unsafe fn array_create(out: *mut Handle, desc: *const ArrayDesc) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let d = unsafe { read_in(desc) }?;
    let d3 =
        Array3DDesc { width: d.width, height: d.height, depth: 0, format: d.format, channels: d.channels, flags: 0 };
    // SAFETY: `d3` is a local; `out` per the caller.
    unsafe { array_3d_create(out, &d3) }
}

/// `cuArrayDestroy(CUarray hArray)`.
pub fn array_destroy(h: Handle) -> CuResult<()> {
    let a = array(h)?;
    if MIPMAPPED.all().iter().any(|(_, m)| Arc::ptr_eq(&m.storage, &a.storage)) {
        return Err(CuError::CUDA_ERROR_INVALID_HANDLE.because("a level of a mipmapped array is destroyed with it"));
    }
    ARRAYS.remove(h);
    Ok(())
}

/// `cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn array_3d_get_descriptor(out: *mut Array3DDesc, h: Handle) -> CuResult<()> {
    let a = array(h)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, a.desc) }
}

/// `cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn array_get_descriptor(out: *mut ArrayDesc, h: Handle) -> CuResult<()> {
    let a = array(h)?;
    let d = ArrayDesc { width: a.desc.width, height: a.desc.height, format: a.desc.format, channels: a.desc.channels };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, d) }
}

/// `cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc, unsigned int numMipmapLevels)`.
///
/// # Safety
/// Pointers are NULL or valid.
pub unsafe fn mipmapped_create(out: *mut Handle, desc: *const Array3DDesc, levels: u32) -> CuResult<()> {
    let ctx = context::current()?;
    // SAFETY: forwarded caller contract.
    let d = unsafe { read_in(desc) }?;
    if out.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pHandle is NULL"));
    }
    let elem = element_bytes(d.format, d.channels)?;
    let shape = shape_of(&d)?;
    let most = 32 - shape.extent.iter().max().copied().unwrap_or(1).leading_zeros();
    if levels == 0 || levels > most {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("numMipmapLevels must be 1 to {most}")));
    }
    let storage = create_storage(&ctx, levels_bytes(&shape, elem, levels)?)?;
    let m =
        MipmappedObj { storage, desc: d, shape, elem, levels, level_handles: Mutex::new(vec![None; levels as usize]) };
    let h = MIPMAPPED.insert(Arc::new(m));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(out, h) }
}

/// `cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray, unsigned int level)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn mipmapped_get_level(out: *mut Handle, h: Handle, level: u32) -> CuResult<()> {
    let m =
        MIPMAPPED.get(h).ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because("not a live CUmipmappedArray"))?;
    if level >= m.levels {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("level {level} of {}", m.levels)));
    }
    let mut handles = m.level_handles.lock().unwrap_or_else(|p| p.into_inner());
    let slot = &mut handles[level as usize];
    let handle = match *slot {
        Some(hh) => hh,
        None => {
            let l = |n: u32| (n >> level).max(1);
            let shape = Shape {
                extent: [l(m.shape.extent[0]), l(m.shape.extent[1]), l(m.shape.extent[2])],
                layers: m.shape.layers,
                dims: m.shape.dims,
            };
            let offset = levels_bytes(&m.shape, m.elem, level)?;
            let sized = |given: usize, n: u32| if given == 0 { 0 } else { n as usize };
            let mut desc = m.desc;
            desc.width = shape.extent[0] as usize;
            desc.height = sized(m.desc.height, shape.extent[1]);
            if m.shape.dims == 3 {
                desc.depth = shape.extent[2] as usize;
            }
            let a = ArrayObj { storage: m.storage.clone(), addr: m.storage.addr + offset, desc, shape, elem: m.elem };
            let hh = ARRAYS.insert(Arc::new(a));
            *slot = Some(hh);
            hh
        }
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, handle) }
}

/// `cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)`: its level arrays go with it.
pub fn mipmapped_destroy(h: Handle) -> CuResult<()> {
    let m =
        MIPMAPPED.remove(h).ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because("not a live CUmipmappedArray"))?;
    let handles = m.level_handles.lock().unwrap_or_else(|p| p.into_inner());
    for hh in handles.iter().flatten() {
        ARRAYS.remove(*hh);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Linear copies with array endpoints (`cuMemcpyHtoA` and friends).

/// The device address of byte `offset..offset + n` of array `h`, checked.
fn array_range(h: Handle, offset: usize, n: usize) -> CuResult<u64> {
    let a = array(h)?;
    match offset.checked_add(n) {
        Some(end) if end as u64 <= a.bytes() => Ok(a.addr + offset as u64),
        _ => Err(CuError::CUDA_ERROR_INVALID_VALUE
            .because(format!("bytes {offset}..{offset}+{n} lie outside the array's {} bytes", a.bytes()))),
    }
}

/// `cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)`.
///
/// # Safety
/// `src` is valid for `n` bytes.
pub unsafe fn memcpy_htoa(dst: Handle, offset: usize, src: *const c_void, n: usize) -> CuResult<()> {
    let d = array_range(dst, offset, n)?;
    // SAFETY: forwarded caller contract.
    unsafe { crate::memory::memcpy_htod(d, src, n) }
}

/// `cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)`.
///
/// # Safety
/// `dst` is valid for `n` bytes.
pub unsafe fn memcpy_atoh(dst: *mut c_void, src: Handle, offset: usize, n: usize) -> CuResult<()> {
    let s = array_range(src, offset, n)?;
    // SAFETY: forwarded caller contract.
    unsafe { crate::memory::memcpy_dtoh(dst, s, n) }
}

/// `cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream)`.
///
/// # Safety
/// `src` is valid for `n` bytes.
pub unsafe fn memcpy_htoa_async(dst: Handle, offset: usize, src: *const c_void, n: usize, s: Handle) -> CuResult<()> {
    let d = array_range(dst, offset, n)?;
    // SAFETY: forwarded caller contract.
    unsafe { crate::memory::memcpy_htod_async(d, src, n, s) }
}

/// `cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream)`.
///
/// # Safety
/// `dst` is valid for `n` bytes.
pub unsafe fn memcpy_atoh_async(dst: *mut c_void, src: Handle, offset: usize, n: usize, s: Handle) -> CuResult<()> {
    let a = array_range(src, offset, n)?;
    // SAFETY: forwarded caller contract.
    unsafe { crate::memory::memcpy_dtoh_async(dst, a, n, s) }
}

/// `cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount)`.
pub fn memcpy_dtoa(dst: Handle, offset: usize, src: CUdeviceptr, n: usize) -> CuResult<()> {
    let d = array_range(dst, offset, n)?;
    crate::memory::memcpy_dtod(d, src, n)
}

/// `cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount)`.
pub fn memcpy_atod(dst: CUdeviceptr, src: Handle, offset: usize, n: usize) -> CuResult<()> {
    let s = array_range(src, offset, n)?;
    crate::memory::memcpy_dtod(dst, s, n)
}

/// `cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount)`.
pub fn memcpy_atoa(dst: Handle, dst_offset: usize, src: Handle, src_offset: usize, n: usize) -> CuResult<()> {
    let d = array_range(dst, dst_offset, n)?;
    let s = array_range(src, src_offset, n)?;
    crate::memory::memcpy_dtod(d, s, n)
}

// ---------------------------------------------------------------------------
// Texture and surface objects

/// `CUDA_RESOURCE_DESC`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ResourceDesc {
    res_type: u32,
    res: [u64; 16],
    flags: u32,
}

/// `CUDA_TEXTURE_DESC`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TextureDescC {
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

/// `CU_TRSF_READ_AS_INTEGER`.
const READ_AS_INTEGER: u32 = 0x01;
/// `CU_TRSF_NORMALIZED_COORDINATES`.
const NORMALIZED_COORDINATES: u32 = 0x02;
/// `CU_TRSF_SRGB`.
const SRGB: u32 = 0x10;
/// Flags accepted and ignored: `CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION`
/// (filtering is always exact here), `CU_TRSF_SEAMLESS_CUBEMAP` (see
/// `docs/textures.md`).
const IGNORED_FLAGS: u32 = 0x20 | 0x40;

/// A live texture or surface object.
struct Object {
    ctx: Arc<ContextObj>,
    /// What it was created from (for the `Get*Desc` queries).
    resource: ResourceDesc,
    texture: Option<TextureDescC>,
    /// The array it reads, kept alive while the object lives.
    _array: Option<Arc<ArrayObj>>,
    _mipmapped: Option<Arc<MipmappedObj>>,
}

/// Live texture objects and surface objects by handle (the record's address).
static OBJECTS: Mutex<BTreeMap<u64, (bool, Object)>> = Mutex::new(BTreeMap::new());

fn objects() -> MutexGuard<'static, BTreeMap<u64, (bool, Object)>> {
    OBJECTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A record and the arrays it reads (kept alive with its object).
type Described = (TextureDesc, Option<Arc<ArrayObj>>, Option<Arc<MipmappedObj>>);

/// The record for `resource` (without its sampling state).
fn describe(resource: &ResourceDesc) -> CuResult<Described> {
    if resource.flags != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("CUDA_RESOURCE_DESC flags must be 0"));
    }
    let r = &resource.res;
    let mut t = TextureDesc { resource_type: resource.res_type, levels: 1, ..TextureDesc::default() };
    let from_shape = |t: &mut TextureDesc, d: &Array3DDesc, shape: &Shape, elem: u32| {
        t.extent = shape.extent;
        t.layers = shape.layers;
        t.dims = shape.dims;
        t.layered = d.flags & LAYERED != 0;
        t.cubemap = d.flags & CUBEMAP != 0;
        t.format = d.format;
        t.channels = d.channels;
        t.elem_bytes = elem;
        t.pitch = shape.extent[0] as u64 * elem as u64;
    };
    match resource.res_type {
        0 => {
            let a = array(r[0] as usize as Handle)?;
            from_shape(&mut t, &a.desc, &a.shape, a.elem);
            t.address = a.addr;
            Ok((t, Some(a), None))
        }
        1 => {
            let m = MIPMAPPED
                .get(r[0] as usize as Handle)
                .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because("not a live CUmipmappedArray"))?;
            from_shape(&mut t, &m.desc, &m.shape, m.elem);
            t.address = m.storage.addr;
            t.levels = m.levels;
            Ok((t, None, Some(m)))
        }
        2 | 3 => {
            // linear: devPtr, format | numChannels << 32, sizeInBytes;
            // pitch2D: devPtr, format | numChannels << 32, width, height, pitchInBytes.
            let (format, channels) = (r[1] as u32, (r[1] >> 32) as u32);
            let elem = element_bytes(format, channels)?;
            if r[0] == 0 || !r[0].is_multiple_of(elem as u64) {
                return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("devPtr is NULL or not aligned to the element"));
            }
            t.address = r[0];
            t.format = format;
            t.channels = channels;
            t.elem_bytes = elem;
            if resource.res_type == 2 {
                let n = r[2] / elem as u64;
                if n == 0 || n > 1 << 28 {
                    return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("sizeInBytes holds no element or too many"));
                }
                t.extent = [n as u32, 1, 1];
                t.dims = 1;
                t.pitch = r[2];
            } else {
                let (w, h, pitch) = (r[2], r[3], r[4]);
                if w == 0
                    || h == 0
                    || w > 1 << 20
                    || h > 1 << 20
                    || pitch < w * elem as u64
                    || !pitch.is_multiple_of(32)
                {
                    return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(
                        "pitch 2D: width and height 1 to 2^20, pitchInBytes a multiple of 32 and at least a row",
                    ));
                }
                t.extent = [w as u32, h as u32, 1];
                t.dims = 2;
                t.pitch = pitch;
            }
            t.layers = 1;
            Ok((t, None, None))
        }
        other => Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown CUresourcetype {other}"))),
    }
}

/// Allocates and writes `record`; returns its address.
fn store(ctx: &ContextObj, record: &TextureDesc) -> CuResult<u64> {
    let addr = ctx.runtime.alloc(layout::BYTES as u64)?;
    if let Err(e) = ctx.runtime.copy_htod(addr, &record.encode()) {
        let _ = ctx.runtime.free(addr);
        return Err(e.into());
    }
    Ok(addr)
}

/// `cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc, const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)`.
///
/// # Safety
/// Pointers are NULL or valid.
pub unsafe fn tex_object_create(
    out: *mut u64,
    res: *const ResourceDesc,
    tex: *const TextureDescC,
    view: *const c_void,
) -> CuResult<()> {
    let ctx = context::current()?;
    if out.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pTexObject is NULL"));
    }
    // SAFETY: forwarded caller contract.
    let resource = unsafe { read_in(res) }?;
    // SAFETY: forwarded caller contract.
    let texture = unsafe { read_in(tex) }?;
    if !view.is_null() {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("resource views (pResViewDesc) are not supported"));
    }
    let (mut t, array_obj, mip) = describe(&resource)?;
    if texture.address_mode.iter().any(|&m| m > 3) || texture.filter_mode > 1 || texture.mipmap_filter_mode > 1 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("unknown address or filter mode"));
    }
    let known = READ_AS_INTEGER | NORMALIZED_COORDINATES | SRGB | IGNORED_FLAGS;
    if texture.flags & !known != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown CU_TRSF flags {:#x}", texture.flags)));
    }
    t.address_mode = texture.address_mode;
    t.filter_mode = texture.filter_mode;
    t.mipmap_filter_mode = texture.mipmap_filter_mode;
    t.read_as_integer = texture.flags & READ_AS_INTEGER != 0;
    t.normalized_coords = texture.flags & NORMALIZED_COORDINATES != 0;
    t.srgb = texture.flags & SRGB != 0;
    t.border_color = texture.border_color;
    t.lod_bias = texture.mipmap_level_bias;
    t.min_lod = texture.min_mipmap_level_clamp;
    t.max_lod = texture.max_mipmap_level_clamp;
    t.max_anisotropy = texture.max_anisotropy;
    let addr = store(&ctx, &t)?;
    let obj = Object { ctx, resource, texture: Some(texture), _array: array_obj, _mipmapped: mip };
    objects().insert(addr, (false, obj));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(out, addr) }
}

/// `cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)`:
/// an array created with `CUDA_ARRAY3D_SURFACE_LDST`.
///
/// # Safety
/// Pointers are NULL or valid.
pub unsafe fn surf_object_create(out: *mut u64, res: *const ResourceDesc) -> CuResult<()> {
    let ctx = context::current()?;
    if out.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pSurfObject is NULL"));
    }
    // SAFETY: forwarded caller contract.
    let resource = unsafe { read_in(res) }?;
    if resource.res_type != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a surface object's resource is a CUDA array"));
    }
    let (mut t, array_obj, _) = describe(&resource)?;
    if array_obj.as_ref().is_some_and(|a| a.desc.flags & SURFACE_LDST == 0) {
        return Err(
            CuError::CUDA_ERROR_INVALID_VALUE.because("the array was not created with CUDA_ARRAY3D_SURFACE_LDST")
        );
    }
    t.surface = true;
    let addr = store(&ctx, &t)?;
    let obj = Object { ctx, resource, texture: None, _array: array_obj, _mipmapped: None };
    objects().insert(addr, (true, obj));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(out, addr) }
}

fn destroy(h: u64, surface: bool) -> CuResult<()> {
    let mut all = objects();
    match all.get(&h) {
        Some((s, _)) if *s == surface => {}
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("not a live object of this kind")),
    }
    let Some((_, obj)) = all.remove(&h) else { return Ok(()) };
    drop(all);
    // The magic goes first: a kernel that still samples through the handle
    // fails its launch instead of reading a record that looks valid.
    obj.ctx.runtime.copy_htod(h + layout::MAGIC as u64, &[0; 4])?;
    obj.ctx.runtime.free(h)?;
    Ok(())
}

/// `cuTexObjectDestroy(CUtexObject texObject)`.
pub fn tex_object_destroy(h: u64) -> CuResult<()> {
    destroy(h, false)
}

/// `cuSurfObjectDestroy(CUsurfObject surfObject)`.
pub fn surf_object_destroy(h: u64) -> CuResult<()> {
    destroy(h, true)
}

fn resource_of(h: u64, surface: bool) -> CuResult<(ResourceDesc, Option<TextureDescC>)> {
    match objects().get(&h) {
        Some((s, o)) if *s == surface => Ok((o.resource, o.texture)),
        _ => Err(CuError::CUDA_ERROR_INVALID_VALUE.because("not a live object of this kind")),
    }
}

/// `cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn tex_object_get_resource_desc(out: *mut ResourceDesc, h: u64) -> CuResult<()> {
    let (r, _) = resource_of(h, false)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, r) }
}

/// `cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn tex_object_get_texture_desc(out: *mut TextureDescC, h: u64) -> CuResult<()> {
    let (_, t) = resource_of(h, false)?;
    let t = t.ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("not a texture object"))?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, t) }
}

/// `cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn surf_object_get_resource_desc(out: *mut ResourceDesc, h: u64) -> CuResult<()> {
    let (r, _) = resource_of(h, true)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, r) }
}

// ---------------------------------------------------------------------------
// Texture and surface references (`.texref`/`.surfref` module variables)

/// What a reference is bound to.
#[derive(Clone)]
enum Binding {
    None,
    Array(Arc<ArrayObj>),
    Mipmapped(Arc<MipmappedObj>),
    /// Linear memory: address and bytes.
    Linear(u64, usize),
    /// Pitched memory: address, width, height, pitch.
    Pitch2D(u64, usize, usize, usize),
}

/// The settings of a reference (`cuTexRefSet*`).
#[derive(Clone)]
struct RefState {
    binding: Binding,
    format: u32,
    channels: u32,
    sampler: TextureDescC,
    /// The record the module variable points to (allocated on first bind).
    record: Option<u64>,
}

/// A `CUtexref` or `CUsurfref`: a module variable holding its record's address.
pub struct RefObj {
    ctx: Arc<ContextObj>,
    /// The module (a handle: unloading the module is not prevented).
    module: usize,
    /// Device address of the 8-byte module variable.
    slot: u64,
    surface: bool,
    state: Mutex<RefState>,
}

impl Drop for RefObj {
    fn drop(&mut self) {
        let record = self.state.get_mut().map(|s| s.record).unwrap_or_else(|p| p.into_inner().record);
        if let Some(r) = record {
            let _ = self.ctx.runtime.free(r);
        }
    }
}

/// Live references, by module and variable: one handle per variable.
static REFS: Registry<RefObj> = Registry::new();

fn reference(h: Handle, surface: bool) -> CuResult<Arc<RefObj>> {
    match REFS.get(h) {
        Some(r) if r.surface == surface && crate::module::lookup(r.module as Handle).is_ok() => Ok(r),
        _ => Err(CuError::CUDA_ERROR_INVALID_HANDLE.because("not a live reference of this kind")),
    }
}

/// `cuModuleGetTexRef(CUtexref *pTexRef, CUmodule hmod, const char *name)`
/// and `cuModuleGetSurfRef` (`surface`).
///
/// # Safety
/// Pointers are NULL or valid.
unsafe fn module_get_ref(out: *mut Handle, hmod: Handle, name: *const std::ffi::c_char, surface: bool) -> CuResult<()> {
    let module = crate::module::lookup(hmod)?;
    // SAFETY: forwarded caller contract.
    let name = unsafe { crate::ffi::c_str(name) }?;
    let (slot, size) =
        module.runtime.global(name).filter(|&(_, size)| size == 8).ok_or_else(|| {
            CuError::CUDA_ERROR_NOT_FOUND.because(format!("the module has no reference named {name:?}"))
        })?;
    // References of unloaded modules go (their records are freed).
    for (h, r) in REFS.all() {
        if crate::module::lookup(r.module as Handle).is_err() {
            REFS.remove(h);
        }
    }
    let existing = REFS.all().into_iter().find(|(_, r)| r.slot == slot && r.module == hmod as usize);
    let h = match existing {
        Some((h, _)) => h,
        None => {
            let _ = size;
            let sampler = TextureDescC {
                address_mode: [1; 3],
                filter_mode: 0,
                flags: 0,
                max_anisotropy: 0,
                mipmap_filter_mode: 0,
                mipmap_level_bias: 0.0,
                min_mipmap_level_clamp: 0.0,
                max_mipmap_level_clamp: 0.0,
                border_color: [0.0; 4],
                reserved: [0; 12],
            };
            let state = RefState { binding: Binding::None, format: 0x20, channels: 1, sampler, record: None };
            let r =
                RefObj { ctx: module.context.clone(), module: hmod as usize, slot, surface, state: Mutex::new(state) };
            REFS.insert(Arc::new(r))
        }
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, h) }
}

/// `cuModuleGetTexRef`.
///
/// # Safety
/// Pointers are NULL or valid.
pub unsafe fn module_get_tex_ref(out: *mut Handle, hmod: Handle, name: *const std::ffi::c_char) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { module_get_ref(out, hmod, name, false) }
}

/// `cuModuleGetSurfRef`.
///
/// # Safety
/// Pointers are NULL or valid.
pub unsafe fn module_get_surf_ref(out: *mut Handle, hmod: Handle, name: *const std::ffi::c_char) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { module_get_ref(out, hmod, name, true) }
}

impl RefObj {
    /// Applies `f` to the state and writes the record the module variable
    /// points to (nothing while unbound).
    fn update(&self, f: impl FnOnce(&mut RefState) -> CuResult<()>) -> CuResult<()> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = st.clone();
        f(&mut next)?;
        let resource = match &next.binding {
            Binding::None => {
                *st = next;
                return Ok(());
            }
            Binding::Array(a) => ResourceDesc { res_type: 0, res: one(a_handle(a)?), flags: 0 },
            Binding::Mipmapped(m) => ResourceDesc { res_type: 1, res: one(m_handle(m)?), flags: 0 },
            Binding::Linear(p, n) => {
                let mut res = [0u64; 16];
                res[0] = *p;
                res[1] = next.format as u64 | (next.channels as u64) << 32;
                res[2] = *n as u64;
                ResourceDesc { res_type: 2, res, flags: 0 }
            }
            Binding::Pitch2D(p, w, h, pitch) => {
                let mut res = [0u64; 16];
                res[0] = *p;
                res[1] = next.format as u64 | (next.channels as u64) << 32;
                res[2] = *w as u64;
                res[3] = *h as u64;
                res[4] = *pitch as u64;
                ResourceDesc { res_type: 3, res, flags: 0 }
            }
        };
        let (mut t, _, _) = describe(&resource)?;
        let s = &next.sampler;
        t.address_mode = s.address_mode;
        t.filter_mode = s.filter_mode;
        t.mipmap_filter_mode = s.mipmap_filter_mode;
        t.read_as_integer = s.flags & READ_AS_INTEGER != 0;
        t.normalized_coords = s.flags & NORMALIZED_COORDINATES != 0;
        t.srgb = s.flags & SRGB != 0;
        t.border_color = s.border_color;
        t.lod_bias = s.mipmap_level_bias;
        t.min_lod = s.min_mipmap_level_clamp;
        t.max_lod = s.max_mipmap_level_clamp;
        t.max_anisotropy = s.max_anisotropy;
        t.surface = self.surface;
        let record = match next.record {
            Some(r) => r,
            None => self.ctx.runtime.alloc(layout::BYTES as u64)?,
        };
        next.record = Some(record);
        self.ctx.runtime.copy_htod(record, &t.encode())?;
        self.ctx.runtime.copy_htod(self.slot, &record.to_le_bytes())?;
        *st = next;
        Ok(())
    }
}

/// The registry handle of a live array (for a reference's resource).
fn a_handle(a: &Arc<ArrayObj>) -> CuResult<u64> {
    ARRAYS
        .all()
        .into_iter()
        .find(|(_, x)| Arc::ptr_eq(x, a))
        .map(|(h, _)| h as u64)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because("the bound array was destroyed"))
}

/// The registry handle of a live mipmapped array.
fn m_handle(m: &Arc<MipmappedObj>) -> CuResult<u64> {
    MIPMAPPED
        .all()
        .into_iter()
        .find(|(_, x)| Arc::ptr_eq(x, m))
        .map(|(h, _)| h as u64)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because("the bound mipmapped array was destroyed"))
}

fn one(v: u64) -> [u64; 16] {
    let mut res = [0u64; 16];
    res[0] = v;
    res
}

/// `cuTexRefSetArray(CUtexref hTexRef, CUarray hArray, unsigned int Flags)`
/// (`CU_TRSA_OVERRIDE_FORMAT`: the array's format is used either way).
pub fn tex_ref_set_array(h: Handle, array_h: Handle, flags: u32) -> CuResult<()> {
    if flags & !1 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("Flags must be 0 or CU_TRSA_OVERRIDE_FORMAT"));
    }
    let a = array(array_h)?;
    reference(h, false)?.update(|s| {
        s.format = a.desc.format;
        s.channels = a.desc.channels;
        s.binding = Binding::Array(a);
        Ok(())
    })
}

/// `cuTexRefSetMipmappedArray(CUtexref hTexRef, CUmipmappedArray hMipmappedArray, unsigned int Flags)`.
pub fn tex_ref_set_mipmapped_array(h: Handle, m: Handle, flags: u32) -> CuResult<()> {
    if flags & !1 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("Flags must be 0 or CU_TRSA_OVERRIDE_FORMAT"));
    }
    let m =
        MIPMAPPED.get(m).ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because("not a live CUmipmappedArray"))?;
    reference(h, false)?.update(|s| {
        s.format = m.desc.format;
        s.channels = m.desc.channels;
        s.binding = Binding::Mipmapped(m);
        Ok(())
    })
}

/// `cuTexRefSetAddress_v2(size_t *ByteOffset, CUtexref hTexRef, CUdeviceptr dptr, size_t bytes)`:
/// linear memory; the offset is always 0 (any element-aligned address works).
///
/// # Safety
/// `offset` is NULL or writable.
pub unsafe fn tex_ref_set_address(offset: *mut usize, h: Handle, dptr: CUdeviceptr, bytes: usize) -> CuResult<()> {
    reference(h, false)?.update(|s| {
        s.binding = if dptr == 0 { Binding::None } else { Binding::Linear(dptr, bytes) };
        Ok(())
    })?;
    // SAFETY: forwarded caller contract.
    unsafe { crate::ffi::write_opt(offset, 0) };
    Ok(())
}

/// `cuTexRefSetAddress2D_v3(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR *desc, CUdeviceptr dptr, size_t Pitch)`.
///
/// # Safety
/// `desc` is NULL or readable.
pub unsafe fn tex_ref_set_address_2d(
    h: Handle,
    desc: *const ArrayDesc,
    dptr: CUdeviceptr,
    pitch: usize,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let d = unsafe { read_in(desc) }?;
    element_bytes(d.format, d.channels)?;
    reference(h, false)?.update(|s| {
        s.format = d.format;
        s.channels = d.channels;
        s.binding = Binding::Pitch2D(dptr, d.width, d.height, pitch);
        Ok(())
    })
}

/// `cuTexRefSetFormat(CUtexref hTexRef, CUarray_format fmt, int NumPackedComponents)`.
pub fn tex_ref_set_format(h: Handle, format: u32, channels: i32) -> CuResult<()> {
    let channels =
        u32::try_from(channels).map_err(|_| CuError::CUDA_ERROR_INVALID_VALUE.because("negative channels"))?;
    element_bytes(format, channels)?;
    reference(h, false)?.update(|s| {
        s.format = format;
        s.channels = channels;
        Ok(())
    })
}

/// `cuTexRefSetAddressMode(CUtexref hTexRef, int dim, CUaddress_mode am)`.
pub fn tex_ref_set_address_mode(h: Handle, dim: i32, mode: u32) -> CuResult<()> {
    if !(0..3).contains(&dim) || mode > 3 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dim 0 to 2 and a known CUaddress_mode"));
    }
    reference(h, false)?.update(|s| {
        s.sampler.address_mode[dim as usize] = mode;
        Ok(())
    })
}

/// `cuTexRefSetFilterMode(CUtexref hTexRef, CUfilter_mode fm)`.
pub fn tex_ref_set_filter_mode(h: Handle, mode: u32) -> CuResult<()> {
    if mode > 1 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("unknown CUfilter_mode"));
    }
    reference(h, false)?.update(|s| {
        s.sampler.filter_mode = mode;
        Ok(())
    })
}

/// `cuTexRefSetMipmapFilterMode(CUtexref hTexRef, CUfilter_mode fm)`.
pub fn tex_ref_set_mipmap_filter_mode(h: Handle, mode: u32) -> CuResult<()> {
    if mode > 1 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("unknown CUfilter_mode"));
    }
    reference(h, false)?.update(|s| {
        s.sampler.mipmap_filter_mode = mode;
        Ok(())
    })
}

/// `cuTexRefSetFlags(CUtexref hTexRef, unsigned int Flags)`.
pub fn tex_ref_set_flags(h: Handle, flags: u32) -> CuResult<()> {
    if flags & !(READ_AS_INTEGER | NORMALIZED_COORDINATES | SRGB | IGNORED_FLAGS) != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown CU_TRSF flags {flags:#x}")));
    }
    reference(h, false)?.update(|s| {
        s.sampler.flags = flags;
        Ok(())
    })
}

/// `cuTexRefSetBorderColor(CUtexref hTexRef, float *pBorderColor)`.
///
/// # Safety
/// `color` is NULL or points to four floats.
pub unsafe fn tex_ref_set_border_color(h: Handle, color: *const [f32; 4]) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let c = unsafe { read_in(color) }?;
    reference(h, false)?.update(|s| {
        s.sampler.border_color = c;
        Ok(())
    })
}

/// `cuTexRefSetMipmapLevelBias(CUtexref hTexRef, float bias)`.
pub fn tex_ref_set_mipmap_level_bias(h: Handle, bias: f32) -> CuResult<()> {
    reference(h, false)?.update(|s| {
        s.sampler.mipmap_level_bias = bias;
        Ok(())
    })
}

/// `cuTexRefSetMipmapLevelClamp(CUtexref hTexRef, float minMipmapLevelClamp, float maxMipmapLevelClamp)`.
pub fn tex_ref_set_mipmap_level_clamp(h: Handle, min: f32, max: f32) -> CuResult<()> {
    reference(h, false)?.update(|s| {
        s.sampler.min_mipmap_level_clamp = min;
        s.sampler.max_mipmap_level_clamp = max;
        Ok(())
    })
}

/// `cuTexRefSetMaxAnisotropy(CUtexref hTexRef, unsigned int maxAniso)`.
pub fn tex_ref_set_max_anisotropy(h: Handle, aniso: u32) -> CuResult<()> {
    reference(h, false)?.update(|s| {
        s.sampler.max_anisotropy = aniso;
        Ok(())
    })
}

/// `cuTexRefGetAddress_v2(CUdeviceptr *pdptr, CUtexref hTexRef)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn tex_ref_get_address(out: *mut CUdeviceptr, h: Handle) -> CuResult<()> {
    let r = reference(h, false)?;
    let st = r.state.lock().unwrap_or_else(|p| p.into_inner());
    let addr = match st.binding {
        Binding::Linear(p, _) | Binding::Pitch2D(p, ..) => p,
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the reference is not bound to linear memory")),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, addr) }
}

/// `cuTexRefGetArray(CUarray *phArray, CUtexref hTexRef)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn tex_ref_get_array(out: *mut Handle, h: Handle) -> CuResult<()> {
    let r = reference(h, false)?;
    let a = match &r.state.lock().unwrap_or_else(|p| p.into_inner()).binding {
        Binding::Array(a) => a.clone(),
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the reference is not bound to an array")),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, a_handle(&a)? as usize as Handle) }
}

/// `cuTexRefGetAddressMode(CUaddress_mode *pam, CUtexref hTexRef, int dim)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn tex_ref_get_address_mode(out: *mut u32, h: Handle, dim: i32) -> CuResult<()> {
    if !(0..3).contains(&dim) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dim 0 to 2"));
    }
    let m = reference(h, false)?.state.lock().unwrap_or_else(|p| p.into_inner()).sampler.address_mode[dim as usize];
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, m) }
}

/// `cuTexRefGetFilterMode(CUfilter_mode *pfm, CUtexref hTexRef)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn tex_ref_get_filter_mode(out: *mut u32, h: Handle) -> CuResult<()> {
    let m = reference(h, false)?.state.lock().unwrap_or_else(|p| p.into_inner()).sampler.filter_mode;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, m) }
}

/// `cuTexRefGetFlags(unsigned int *pFlags, CUtexref hTexRef)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn tex_ref_get_flags(out: *mut u32, h: Handle) -> CuResult<()> {
    let f = reference(h, false)?.state.lock().unwrap_or_else(|p| p.into_inner()).sampler.flags;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, f) }
}

/// `cuTexRefGetFormat(CUarray_format *pFormat, int *pNumChannels, CUtexref hTexRef)`.
///
/// # Safety
/// Pointers are NULL or writable.
pub unsafe fn tex_ref_get_format(format: *mut u32, channels: *mut i32, h: Handle) -> CuResult<()> {
    let r = reference(h, false)?;
    let st = r.state.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: forwarded caller contract.
    unsafe {
        crate::ffi::write_opt(format, st.format);
        crate::ffi::write_opt(channels, st.channels as i32);
    }
    Ok(())
}

/// `cuTexRefGetBorderColor(float *pBorderColor, CUtexref hTexRef)`.
///
/// # Safety
/// `out` is NULL or points to four writable floats.
pub unsafe fn tex_ref_get_border_color(out: *mut [f32; 4], h: Handle) -> CuResult<()> {
    let c = reference(h, false)?.state.lock().unwrap_or_else(|p| p.into_inner()).sampler.border_color;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, c) }
}

/// `cuSurfRefSetArray(CUsurfref hSurfRef, CUarray hArray, unsigned int Flags)`.
pub fn surf_ref_set_array(h: Handle, array_h: Handle, flags: u32) -> CuResult<()> {
    if flags != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("Flags must be 0"));
    }
    let a = array(array_h)?;
    if a.desc.flags & SURFACE_LDST == 0 {
        return Err(
            CuError::CUDA_ERROR_INVALID_VALUE.because("the array was not created with CUDA_ARRAY3D_SURFACE_LDST")
        );
    }
    reference(h, true)?.update(|s| {
        s.format = a.desc.format;
        s.channels = a.desc.channels;
        s.binding = Binding::Array(a);
        Ok(())
    })
}

/// `cuSurfRefGetArray(CUarray *phArray, CUsurfref hSurfRef)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn surf_ref_get_array(out: *mut Handle, h: Handle) -> CuResult<()> {
    let r = reference(h, true)?;
    let a = match &r.state.lock().unwrap_or_else(|p| p.into_inner()).binding {
        Binding::Array(a) => a.clone(),
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the reference is not bound to an array")),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, a_handle(&a)? as usize as Handle) }
}
