//! Tensor maps: `cuTensorMapEncodeTiled`, `cuTensorMapEncodeIm2col`,
//! `cuTensorMapEncodeIm2colWide`, `cuTensorMapReplaceAddress` and
//! `cuTensorMapSetAllocationClass`.
//!
//! Every argument is checked against the requirements `cuda.h` (CUDA 13)
//! documents for these functions; a violation is `CUDA_ERROR_INVALID_VALUE`
//! with the rule in the trace message. The map itself is written in this
//! project's layout ([`ptxvk_translator::tensor_map`]), which the emulated
//! copy engine of translated kernels reads. Encoding needs no context (it is
//! pure computation) but does need `cuInit`. The packed sub-byte data types
//! are emulated in tiled maps (loads of all three, stores of
//! `16U4_ALIGN8B` and `16U6_ALIGN16B`); in im2col maps they pass validation
//! but are `CUDA_ERROR_NOT_SUPPORTED`.

use std::ffi::{c_int, c_void};

use ptxvk_translator::{tensor_map, TensorMapDesc, TensorMapMode};

use crate::driver;
use crate::result::{CuError, CuResult};

/// `CU_TENSOR_MAP_DATA_TYPE_*` values with special rules.
mod dtype {
    pub const FLOAT16: u32 = 6;
    pub const FLOAT32: u32 = 7;
    pub const FLOAT64: u32 = 8;
    pub const BFLOAT16: u32 = 9;
    pub const FLOAT32_FTZ: u32 = 10;
    pub const TFLOAT32: u32 = 11;
    pub const TFLOAT32_FTZ: u32 = 12;
    pub const U4_ALIGN8B: u32 = 13;
    pub const U4_ALIGN16B: u32 = 14;
    pub const U6_ALIGN16B: u32 = 15;
}

/// `CU_TENSOR_MAP_INTERLEAVE_*`.
const INTERLEAVE_NONE: u32 = 0;
const INTERLEAVE_32B: u32 = 2;
/// `CU_TENSOR_MAP_SWIZZLE_*`.
const SWIZZLE_NONE: u32 = 0;
const SWIZZLE_32B: u32 = 1;
const SWIZZLE_64B: u32 = 2;
const SWIZZLE_128B: u32 = 3;
const SWIZZLE_128B_ATOM_32B: u32 = 4;
const SWIZZLE_128B_ATOM_64B: u32 = 6;
/// `CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA`.
const OOB_FILL_NAN: u32 = 1;

fn invalid(why: impl Into<String>) -> CuError {
    CuError::CUDA_ERROR_INVALID_VALUE.because(why)
}

/// Bytes per element of a data type; 0 for the packed sub-byte types.
fn elem_bytes(data_type: u32) -> CuResult<u32> {
    Ok(match data_type {
        0 => 1,
        1 | dtype::FLOAT16 | dtype::BFLOAT16 => 2,
        2 | 3 | dtype::FLOAT32 | dtype::FLOAT32_FTZ | dtype::TFLOAT32 | dtype::TFLOAT32_FTZ => 4,
        4 | 5 | dtype::FLOAT64 => 8,
        dtype::U4_ALIGN8B | dtype::U4_ALIGN16B | dtype::U6_ALIGN16B => 0,
        _ => return Err(invalid(format!("tensorDataType {data_type} is not a CUtensorMapDataType"))),
    })
}

fn is_packed_16b(data_type: u32) -> bool {
    matches!(data_type, dtype::U4_ALIGN16B | dtype::U6_ALIGN16B)
}

/// Bytes that `n` elements of dimension 0 occupy in shared memory.
fn inner_bytes(data_type: u32, n: u64) -> u64 {
    match data_type {
        // 16 x 4 bits in 8 bytes, no gaps.
        dtype::U4_ALIGN8B => n / 2,
        // 16 values in 16 bytes (with gaps).
        dtype::U4_ALIGN16B | dtype::U6_ALIGN16B => n,
        t => n * elem_bytes(t).unwrap_or(0) as u64,
    }
}

/// The swizzle span in bytes (`None` for no swizzle).
fn swizzle_span(swizzle: u32) -> Option<u64> {
    match swizzle {
        SWIZZLE_32B => Some(32),
        SWIZZLE_64B => Some(64),
        SWIZZLE_NONE => None,
        _ => Some(128),
    }
}

/// Reads `n` values of an input array argument.
///
/// # Safety
/// `ptr` is NULL or valid for reading `n` values of `T`.
unsafe fn array<T: Copy + Default>(ptr: *const T, n: usize, what: &str) -> CuResult<[T; 5]> {
    let mut out = [T::default(); 5];
    if n == 0 {
        return Ok(out);
    }
    if ptr.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    for (i, slot) in out.iter_mut().take(n).enumerate() {
        // SAFETY: non-null, and the caller promises `n` readable values.
        *slot = unsafe { ptr.add(i).read_unaligned() };
    }
    Ok(out)
}

/// The arguments every encoder shares, validated.
struct Common {
    desc: TensorMapDesc,
}

/// Checks the arguments common to the three encoders and fills the
/// descriptor's shared fields. `min_rank` is 3 for the im2col encoders.
///
/// # Safety
/// Array arguments are NULL or hold `rank` (`rank - 1` for the strides) values.
#[allow(clippy::too_many_arguments)]
unsafe fn common(
    map: *mut c_void,
    data_type: c_int,
    rank: u32,
    min_rank: u32,
    global_address: *mut c_void,
    global_dim: *const u64,
    global_strides: *const u64,
    element_strides: *const u32,
    interleave: c_int,
    swizzle: c_int,
    l2_promotion: c_int,
    oob_fill: c_int,
) -> CuResult<Common> {
    driver::driver()?;
    // "tensorMap address must be aligned to 64 bytes."
    if map.is_null() {
        return Err(invalid("tensorMap is NULL"));
    }
    if !(map as usize).is_multiple_of(64) {
        return Err(invalid("tensorMap is not 64-byte aligned"));
    }
    let data_type = u32::try_from(data_type).map_err(|_| invalid("tensorDataType is negative"))?;
    let esize = elem_bytes(data_type)?;
    let interleave = u32::try_from(interleave).ok().filter(|v| *v <= 2).ok_or_else(|| invalid("bad interleave"))?;
    let swizzle = u32::try_from(swizzle).ok().filter(|v| *v <= 6).ok_or_else(|| invalid("bad swizzle"))?;
    let l2 = u32::try_from(l2_promotion).ok().filter(|v| *v <= 3).ok_or_else(|| invalid("bad l2Promotion"))?;
    let oob = u32::try_from(oob_fill).ok().filter(|v| *v <= 1).ok_or_else(|| invalid("bad oobFill"))?;
    // "tensorRank must be non-zero and less than or equal to ... 5. If interleave
    // is not NONE, tensorRank must additionally be greater than or equal to 3."
    if rank == 0 || rank > 5 {
        return Err(invalid(format!("tensorRank {rank} is not in 1..=5")));
    }
    if rank < min_rank {
        return Err(invalid(format!("tensorRank {rank} is below {min_rank}")));
    }
    if interleave != INTERLEAVE_NONE && rank < 3 {
        return Err(invalid("an interleaved layout needs tensorRank >= 3"));
    }
    // "globalAddress ... must be 16 byte aligned"; 32 with 32B interleave or the 16B-aligned packed types.
    let address = global_address as u64;
    let addr_align = if interleave == INTERLEAVE_32B || is_packed_16b(data_type) { 32 } else { 16 };
    if !address.is_multiple_of(addr_align) {
        return Err(invalid(format!("globalAddress {address:#x} is not {addr_align}-byte aligned")));
    }
    let n = rank as usize;
    // SAFETY: forwarded caller contract.
    let dims = unsafe { array(global_dim, n, "globalDim") }?;
    // SAFETY: forwarded caller contract.
    let strides = unsafe { array(global_strides, n - 1, "globalStrides") }?;
    // SAFETY: forwarded caller contract.
    let es = unsafe { array(element_strides, n, "elementStrides") }?;
    // "globalDim ... must be non-zero and less than or equal to 2^31."
    for (i, d) in dims.iter().take(n).enumerate() {
        if *d == 0 || *d > 1 << 31 {
            return Err(invalid(format!("globalDim[{i}] = {d} is not in 1..=2^31")));
        }
    }
    if is_packed_16b(data_type) && !dims[0].is_multiple_of(128) {
        return Err(invalid("globalDim[0] must be a multiple of 128 for the 16-byte-aligned packed types"));
    }
    if data_type == dtype::U4_ALIGN8B && !dims[0].is_multiple_of(2) {
        return Err(invalid("globalDim[0] must be even for CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B"));
    }
    // "globalStrides ... must be a multiple of 16 and less than 2^40"; 32 with
    // 32B interleave or the 16B-aligned packed types.
    let stride_align = if interleave == INTERLEAVE_32B || is_packed_16b(data_type) { 32 } else { 16 };
    for (i, s) in strides.iter().take(n - 1).enumerate() {
        if !s.is_multiple_of(stride_align) || *s >= 1 << 40 {
            return Err(invalid(format!("globalStrides[{i}] = {s} is not a multiple of {stride_align} below 2^40")));
        }
    }
    // "elementStrides ... must be non-zero and less than or equal to 8."
    for (i, e) in es.iter().take(n).enumerate() {
        if *e == 0 || *e > 8 {
            return Err(invalid(format!("elementStrides[{i}] = {e} is not in 1..=8")));
        }
    }
    // "When interleave is CU_TENSOR_MAP_INTERLEAVE_32B, swizzle must be CU_TENSOR_MAP_SWIZZLE_32B."
    if interleave == INTERLEAVE_32B && swizzle != SWIZZLE_32B {
        return Err(invalid("interleave 32B needs swizzle 32B"));
    }
    if data_type == dtype::U6_ALIGN16B {
        if interleave != INTERLEAVE_NONE {
            return Err(invalid("CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B needs interleave NONE"));
        }
        if !matches!(swizzle, SWIZZLE_NONE | SWIZZLE_128B | SWIZZLE_128B_ATOM_32B | SWIZZLE_128B_ATOM_64B) {
            return Err(invalid("swizzle mode not supported with CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B"));
        }
    }
    if data_type == dtype::U4_ALIGN16B && !matches!(swizzle, SWIZZLE_NONE | SWIZZLE_128B | SWIZZLE_128B_ATOM_32B) {
        return Err(invalid("swizzle mode not supported with CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B"));
    }
    // "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA can only be used when
    // tensorDataType represents a floating-point data type" (not the packed ones).
    let float = matches!(
        data_type,
        dtype::FLOAT16
            | dtype::FLOAT32
            | dtype::FLOAT64
            | dtype::BFLOAT16
            | dtype::FLOAT32_FTZ
            | dtype::TFLOAT32
            | dtype::TFLOAT32_FTZ
    );
    if oob == OOB_FILL_NAN && !float {
        return Err(invalid("NaN out-of-bounds fill needs a floating-point data type"));
    }
    let mut desc = TensorMapDesc {
        address,
        rank,
        data_type,
        elem_bytes: esize,
        interleave,
        swizzle,
        l2_promotion: l2,
        oob_fill: oob,
        ..Default::default()
    };
    for d in 0..n {
        desc.dims[d] = dims[d] as u32;
        desc.strides[d] = if d == 0 { esize as u64 } else { strides[d - 1] };
        // "when interleave is NONE, the first element of this array is ignored".
        desc.elem_strides[d] = if d == 0 && interleave == INTERLEAVE_NONE { 1 } else { es[d] };
    }
    Ok(Common { desc })
}

/// Refuses what passed validation but the copy engine cannot do, then
/// writes the map.
///
/// # Safety
/// `map` is valid for writing 128 bytes (checked non-null and aligned by [`common`]).
unsafe fn finish(map: *mut c_void, desc: &TensorMapDesc) -> CuResult<()> {
    if desc.elem_bytes == 0 && desc.mode != TensorMapMode::Tiled {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("packed sub-byte types are emulated in tiled maps only"));
    }
    let bytes = desc.encode();
    // SAFETY: `map` is non-null, 64-byte aligned and, per the caller, holds a
    // writable CUtensorMap (128 bytes) that nothing else accesses meanwhile.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), map.cast::<u8>(), tensor_map::BYTES) };
    Ok(())
}

/// `cuTensorMapEncodeTiled`.
///
/// # Safety
/// `map` is NULL or a writable `CUtensorMap`; the arrays are NULL or hold
/// `rank` values (`rank - 1` for `global_strides`).
#[allow(clippy::too_many_arguments)]
pub unsafe fn encode_tiled(
    map: *mut c_void,
    data_type: c_int,
    rank: u32,
    global_address: *mut c_void,
    global_dim: *const u64,
    global_strides: *const u64,
    box_dim: *const u32,
    element_strides: *const u32,
    interleave: c_int,
    swizzle: c_int,
    l2_promotion: c_int,
    oob_fill: c_int,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let Common { mut desc } = unsafe {
        common(
            map,
            data_type,
            rank,
            1,
            global_address,
            global_dim,
            global_strides,
            element_strides,
            interleave,
            swizzle,
            l2_promotion,
            oob_fill,
        )
    }?;
    // SAFETY: forwarded caller contract.
    let boxes = unsafe { array(box_dim, rank as usize, "boxDim") }?;
    // "boxDim ... must be non-zero and less than or equal to 256."
    for (i, b) in boxes.iter().take(rank as usize).enumerate() {
        if *b == 0 || *b > 256 {
            return Err(invalid(format!("boxDim[{i}] = {b} is not in 1..=256")));
        }
    }
    let inner = inner_bytes(desc.data_type, boxes[0] as u64);
    // "When interleave is NONE, boxDim[0] * elementSizeInBytes must be a multiple of 16 bytes."
    if desc.interleave == INTERLEAVE_NONE && !inner.is_multiple_of(16) {
        return Err(invalid(format!("boxDim[0] spans {inner} bytes, not a multiple of 16")));
    }
    if is_packed_16b(desc.data_type) && boxes[0] != 128 {
        return Err(invalid("boxDim[0] must be 128 for the 16-byte-aligned packed types"));
    }
    // "When interleave is NONE and swizzle is not NONE, the bounding box inner
    // dimension must be less than or equal to the swizzle size."
    if let Some(span) = swizzle_span(desc.swizzle) {
        if desc.interleave == INTERLEAVE_NONE && inner > span {
            return Err(invalid(format!("the box's inner dimension ({inner} bytes) exceeds the {span}-byte swizzle")));
        }
    }
    desc.box_dim = boxes;
    desc.mode = TensorMapMode::Tiled;
    // SAFETY: `map` was checked by `common`; forwarded caller contract.
    unsafe { finish(map, &desc) }
}

/// The im2col checks shared by both im2col encoders: channels per pixel,
/// pixels per column and the swizzle span.
fn im2col_common(desc: &TensorMapDesc, channels_per_pixel: u32, pixels_per_column: u32) -> CuResult<()> {
    // "channelsPerPixel ... must be less than or equal to 256" (and 128 for the 16B packed types).
    if channels_per_pixel == 0 || channels_per_pixel > 256 {
        return Err(invalid(format!("channelsPerPixel {channels_per_pixel} is not in 1..=256")));
    }
    if is_packed_16b(desc.data_type) && channels_per_pixel != 128 {
        return Err(invalid("channelsPerPixel must be 128 for the 16-byte-aligned packed types"));
    }
    // "pixelsPerColumn ... must be less than or equal to 1024."
    if pixels_per_column == 0 || pixels_per_column > 1024 {
        return Err(invalid(format!("pixelsPerColumn {pixels_per_column} is not in 1..=1024")));
    }
    let inner = inner_bytes(desc.data_type, channels_per_pixel as u64);
    if let Some(span) = swizzle_span(desc.swizzle) {
        if desc.interleave == INTERLEAVE_NONE && inner > span {
            return Err(invalid(format!("channelsPerPixel spans {inner} bytes, more than the {span}-byte swizzle")));
        }
    }
    Ok(())
}

/// `cuTensorMapEncodeIm2col`.
///
/// # Safety
/// As [`encode_tiled`]; the corner arrays are NULL or hold `rank - 2` values.
#[allow(clippy::too_many_arguments)]
pub unsafe fn encode_im2col(
    map: *mut c_void,
    data_type: c_int,
    rank: u32,
    global_address: *mut c_void,
    global_dim: *const u64,
    global_strides: *const u64,
    lower_corner: *const c_int,
    upper_corner: *const c_int,
    channels_per_pixel: u32,
    pixels_per_column: u32,
    element_strides: *const u32,
    interleave: c_int,
    swizzle: c_int,
    l2_promotion: c_int,
    oob_fill: c_int,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let Common { mut desc } = unsafe {
        common(
            map,
            data_type,
            rank,
            3,
            global_address,
            global_dim,
            global_strides,
            element_strides,
            interleave,
            swizzle,
            l2_promotion,
            oob_fill,
        )
    }?;
    let spatial = rank as usize - 2;
    // SAFETY: forwarded caller contract.
    let lower = unsafe { array(lower_corner, spatial, "pixelBoxLowerCorner") }?;
    // SAFETY: forwarded caller contract.
    let upper = unsafe { array(upper_corner, spatial, "pixelBoxUpperCorner") }?;
    // Corner ranges: rank 3 [-32768, 32767], rank 4 [-128, 127], rank 5 [-16, 15].
    let (lo, hi) = match rank {
        3 => (-32768, 32767),
        4 => (-128, 127),
        _ => (-16, 15),
    };
    for s in 0..spatial {
        for (name, v) in [("pixelBoxLowerCorner", lower[s]), ("pixelBoxUpperCorner", upper[s])] {
            if v < lo || v > hi {
                return Err(invalid(format!("{name}[{s}] = {v} is not in {lo}..={hi} for rank {rank}")));
            }
        }
        // "The bounding box ... must have non-zero area."
        if desc.dims[s + 1] as i64 + upper[s] as i64 - (lower[s] as i64) <= 0 {
            return Err(invalid(format!("the bounding box is empty in spatial dimension {s}")));
        }
    }
    im2col_common(&desc, channels_per_pixel, pixels_per_column)?;
    desc.mode = TensorMapMode::Im2col;
    desc.channels_per_pixel = channels_per_pixel;
    desc.pixels_per_column = pixels_per_column;
    desc.lower_corner[..spatial].copy_from_slice(&lower[..spatial]);
    desc.upper_corner[..spatial].copy_from_slice(&upper[..spatial]);
    desc.box_dim = [1; 5];
    desc.box_dim[0] = channels_per_pixel;
    // SAFETY: `map` was checked by `common`; forwarded caller contract.
    unsafe { finish(map, &desc) }
}

/// `cuTensorMapEncodeIm2colWide` (CUDA 12.8).
///
/// # Safety
/// As [`encode_tiled`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn encode_im2col_wide(
    map: *mut c_void,
    data_type: c_int,
    rank: u32,
    global_address: *mut c_void,
    global_dim: *const u64,
    global_strides: *const u64,
    lower_corner_width: c_int,
    upper_corner_width: c_int,
    channels_per_pixel: u32,
    pixels_per_column: u32,
    element_strides: *const u32,
    interleave: c_int,
    mode: c_int,
    swizzle: c_int,
    l2_promotion: c_int,
    oob_fill: c_int,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let Common { mut desc } = unsafe {
        common(
            map,
            data_type,
            rank,
            3,
            global_address,
            global_dim,
            global_strides,
            element_strides,
            interleave,
            swizzle,
            l2_promotion,
            oob_fill,
        )
    }?;
    // "mode ... has to be one of CU_TENSOR_MAP_IM2COL_WIDE_MODE_W, _W128."
    let wide = match mode {
        0 => TensorMapMode::Im2colW,
        1 => TensorMapMode::Im2colW128,
        _ => return Err(invalid(format!("mode {mode} is not a CUtensorMapIm2ColWideMode"))),
    };
    // "swizzle ... must be one of 64B, 128B, 128B_ATOM_32B (other swizzle modes are not supported)."
    if !matches!(desc.swizzle, SWIZZLE_64B | SWIZZLE_128B | SWIZZLE_128B_ATOM_32B) {
        return Err(invalid("im2col wide maps take swizzle 64B, 128B or 128B_ATOM_32B"));
    }
    // Corner widths in [-32768, 32767], and a box of non-zero area.
    for (name, v) in
        [("pixelBoxLowerCornerWidth", lower_corner_width), ("pixelBoxUpperCornerWidth", upper_corner_width)]
    {
        if !(-32768..=32767).contains(&v) {
            return Err(invalid(format!("{name} = {v} is not in -32768..=32767")));
        }
    }
    if desc.dims[1] as i64 + upper_corner_width as i64 - (lower_corner_width as i64) <= 0 {
        return Err(invalid("the bounding box is empty in W"));
    }
    // pixelsPerColumn is ignored in W128 mode.
    let ppc = if wide == TensorMapMode::Im2colW128 { 128 } else { pixels_per_column };
    im2col_common(&desc, channels_per_pixel, ppc)?;
    desc.mode = wide;
    desc.channels_per_pixel = channels_per_pixel;
    desc.pixels_per_column = ppc;
    desc.lower_corner[0] = lower_corner_width;
    desc.upper_corner[0] = upper_corner_width;
    desc.box_dim = [1; 5];
    desc.box_dim[0] = channels_per_pixel;
    // SAFETY: `map` was checked by `common`; forwarded caller contract.
    unsafe { finish(map, &desc) }
}

/// Reads an encoded map for an in-place update.
///
/// # Safety
/// `map` is NULL or a readable `CUtensorMap`.
unsafe fn read_map(map: *mut c_void) -> CuResult<[u8; tensor_map::BYTES]> {
    driver::driver()?;
    if map.is_null() {
        return Err(invalid("tensorMap is NULL"));
    }
    if !(map as usize).is_multiple_of(64) {
        return Err(invalid("tensorMap is not 64-byte aligned"));
    }
    let mut bytes = [0u8; tensor_map::BYTES];
    // SAFETY: non-null, aligned, and readable per the caller.
    unsafe { std::ptr::copy_nonoverlapping(map.cast::<u8>(), bytes.as_mut_ptr(), tensor_map::BYTES) };
    if !TensorMapDesc::is_encoded(&bytes) {
        return Err(invalid("tensorMap was not made by a cuTensorMapEncode function"));
    }
    Ok(bytes)
}

/// `cuTensorMapReplaceAddress`: the new address "must follow previous
/// alignment requirements".
///
/// # Safety
/// `map` is NULL or a readable and writable `CUtensorMap`.
pub unsafe fn replace_address(map: *mut c_void, global_address: *mut c_void) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let mut bytes = unsafe { read_map(map) }?;
    let format = u32::from_le_bytes(word(&bytes, tensor_map::FORMAT));
    let modes = u32::from_le_bytes(word(&bytes, tensor_map::MODES));
    let data_type = (format >> 8) & 0xFF;
    let interleave = modes & 0xFF;
    let align = if interleave == INTERLEAVE_32B || is_packed_16b(data_type) { 32 } else { 16 };
    let address = global_address as u64;
    if !address.is_multiple_of(align) {
        return Err(invalid(format!("globalAddress {address:#x} is not {align}-byte aligned")));
    }
    bytes[tensor_map::ADDRESS..tensor_map::ADDRESS + 8].copy_from_slice(&address.to_le_bytes());
    // SAFETY: checked non-null and aligned by `read_map`; writable per the caller.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), map.cast::<u8>(), tensor_map::BYTES) };
    Ok(())
}

fn word(bytes: &[u8; tensor_map::BYTES], at: usize) -> [u8; 4] {
    [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]
}

/// `cuTensorMapSetAllocationClass`: the allocation class changes nothing
/// here (no out-of-bounds window to size), so every valid request reports
/// `CU_TENSOR_MAP_ALLOC_CLASS_SMALL` and leaves the map as it is.
///
/// # Safety
/// `map` is NULL or a readable `CUtensorMap`; `out_class` is NULL or writable.
pub unsafe fn set_allocation_class(map: *mut c_void, alloc_class: c_int, out_class: *mut c_int) -> CuResult<()> {
    const SMALL: c_int = 1;
    // "If outAllocClass is non-NULL, it is initialized to SMALL before validation."
    // SAFETY: forwarded caller contract.
    unsafe { crate::ffi::write_opt(out_class, SMALL) };
    // SAFETY: forwarded caller contract.
    unsafe { read_map(map) }?;
    if !(0..=2).contains(&alloc_class) {
        return Err(invalid(format!("allocClass {alloc_class} is not a CUtensorMapAllocClass")));
    }
    Ok(())
}
