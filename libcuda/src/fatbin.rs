//! NVIDIA fat binaries: finding the PTX inside one.
//!
//! A fat binary (what `nvcc` embeds in a program, `fatbinary --create`
//! writes, and `cuModuleLoadFatBinary` takes) is a container of images:
//! cubins (ELF, NVIDIA machine code, which this driver cannot run) and PTX
//! text, possibly compressed. The layout, as the files show it:
//!
//! - container header (16 bytes): magic `0xBA55ED50`, `u16` version, `u16`
//!   header size, `u64` size of the entries that follow;
//! - per entry: `u16` kind (1 PTX, 2 ELF), `u16` version, `u32` header size,
//!   `u64` payload size (padded), `u32` compressed size at +16, the PTX ISA
//!   version (`u16` minor, `u16` major) at +24, `u32` SM at +28, `u64` flags at
//!   +40 (`0x2000`: LZ4 block, `0x8000`: Zstandard), `u64` uncompressed size at
//!   +56; the payload follows the entry header.
//!
//! A program's embedded fat binary is reached through a wrapper
//! (`__fatBinC_Wrapper_t`: `u32` magic `0x466243B1`, `u32` version, pointer
//! to the container at +8, pointer at +16), which [`container_from_pointer`]
//! follows. In a version 2 wrapper (`nvcc -rdc=true`, separate compilation)
//! the container is the device-linked one, and the pointer at +16 is a
//! NULL-terminated list of the pre-link containers of each translation unit
//! (ZLUDA's `FatbincWrapper`): when device code was compiled to PTX only,
//! the linked container is empty and the driver links their PTX itself
//! ([`prelink_containers`]).

use std::ffi::c_void;

/// Magic number of a fat binary container (little-endian `50 ED 55 BA`).
pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// Magic number of `__fatBinC_Wrapper_t` (little-endian `B1 43 62 46`).
pub const WRAPPER_MAGIC: u32 = 0x4662_43B1;

const KIND_PTX: u16 = 1;
const KIND_ELF: u16 = 2;
const FLAG_LZ4: u64 = 0x2000;
const FLAG_ZSTD: u64 = 0x8000;
const CONTAINER_HEADER: usize = 16;
const ENTRY_HEADER_MIN: usize = 64;

/// One image of a fat binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// 1 for PTX, 2 for ELF (cubin); other kinds are kept but unused.
    pub kind: u16,
    /// The SM it was built for (80 for sm_80).
    pub sm: u32,
    /// The payload, decompressed.
    pub payload: Vec<u8>,
}

impl Entry {
    /// Whether this is PTX text.
    pub fn is_ptx(&self) -> bool {
        self.kind == KIND_PTX
    }

    /// Whether this is a cubin (ELF).
    pub fn is_elf(&self) -> bool {
        self.kind == KIND_ELF
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Total size in bytes of the container starting at `header` (its first 16
/// bytes), or `None` if they are not a container header.
pub fn container_size(header: &[u8]) -> Option<usize> {
    if u32_at(header, 0)? != FATBIN_MAGIC {
        return None;
    }
    let header_size = usize::from(u16_at(header, 6)?);
    let body = usize::try_from(u64_at(header, 8)?).ok()?;
    header_size.max(CONTAINER_HEADER).checked_add(body)
}

/// The container behind `ptr`: either a container itself or a
/// `__fatBinC_Wrapper_t` pointing to one. `None` if neither magic matches.
///
/// # Safety
/// `ptr` is non-null and points to at least 4 readable bytes; if they are
/// one of the two magics, to a complete wrapper or container.
pub unsafe fn container_from_pointer<'a>(ptr: *const c_void) -> Option<&'a [u8]> {
    // SAFETY: at least 4 readable bytes, per the caller.
    let magic = unsafe { ptr.cast::<u32>().read_unaligned() };
    let header_ptr = match magic {
        FATBIN_MAGIC => ptr.cast::<u8>(),
        WRAPPER_MAGIC => {
            // SAFETY: a complete wrapper: magic, version (i32 each), then the data pointer.
            let data = unsafe { ptr.cast::<u8>().add(8).cast::<*const u8>().read_unaligned() };
            if data.is_null() {
                return None;
            }
            data
        }
        _ => return None,
    };
    // SAFETY: a container starts with its 16-byte header, per the caller.
    let header = unsafe { std::slice::from_raw_parts(header_ptr, CONTAINER_HEADER) };
    let size = container_size(header)?;
    // SAFETY: the container is complete (header plus the size it declares), per the caller.
    Some(unsafe { std::slice::from_raw_parts(header_ptr, size) })
}

/// The pre-link containers of a version 2 `__fatBinC_Wrapper_t` at `ptr`
/// (see the module docs); empty for anything else.
///
/// # Safety
/// `ptr` is non-null and points to at least 4 readable bytes; if they are
/// the wrapper magic, to a complete wrapper whose list, when not NULL, is
/// NULL-terminated and points to complete containers.
pub unsafe fn prelink_containers<'a>(ptr: *const c_void) -> Vec<&'a [u8]> {
    // SAFETY: at least 4 readable bytes, per the caller.
    let magic = unsafe { ptr.cast::<u32>().read_unaligned() };
    if magic != WRAPPER_MAGIC {
        return Vec::new();
    }
    // SAFETY: a complete wrapper: version at +4, the list pointer at +16.
    let (version, mut list) = unsafe {
        (
            ptr.cast::<u8>().add(4).cast::<u32>().read_unaligned(),
            ptr.cast::<u8>().add(16).cast::<*const *const u8>().read_unaligned(),
        )
    };
    let mut out = Vec::new();
    if version != 2 || list.is_null() {
        return out;
    }
    loop {
        // SAFETY: a NULL-terminated list of container pointers, per the caller.
        let item = unsafe { list.read_unaligned() };
        if item.is_null() {
            break;
        }
        // SAFETY: a complete container, per the caller.
        if let Some(c) = unsafe { container_from_pointer(item.cast()) } {
            out.push(c);
        }
        // SAFETY: not past the terminating NULL.
        list = unsafe { list.add(1) };
    }
    out
}

/// One image of a container as it lies there (possibly compressed).
struct RawEntry<'a> {
    kind: u16,
    sm: u32,
    flags: u64,
    compressed_size: usize,
    uncompressed: usize,
    raw: &'a [u8],
}

impl RawEntry<'_> {
    /// The payload, decompressed where the flags say so (PTX and ELF
    /// entries; other kinds as they are).
    fn payload(&self) -> Result<Vec<u8>, String> {
        if (self.kind != KIND_PTX && self.kind != KIND_ELF) || self.flags & (FLAG_LZ4 | FLAG_ZSTD) == 0 {
            // Other kinds (8, with flag 0x10000, in cuSPARSE and cuFFT 12:
            // not PTX, and not LZ4 or Zstandard data as its flags say) are
            // kept as they are: nothing here reads them.
            return Ok(self.raw.to_vec());
        }
        let packed = self.raw.get(..self.compressed_size.min(self.raw.len())).ok_or("malformed fat binary entry")?;
        if self.flags & FLAG_ZSTD != 0 {
            zstd_decompress(packed, self.uncompressed)
        } else {
            lz4_block_decompress(packed, self.uncompressed)
        }
    }
}

/// The entries of a container without decompressing them.
fn raw_entries(container: &[u8]) -> Result<Vec<RawEntry<'_>>, String> {
    let size = container_size(container).ok_or("not a fat binary (bad magic)")?;
    let body_start = usize::from(u16_at(container, 6).unwrap_or(16)).max(CONTAINER_HEADER);
    let data = container.get(..size).ok_or("fat binary is truncated")?;
    let mut at = body_start;
    let mut out = Vec::new();
    while at + ENTRY_HEADER_MIN <= data.len() {
        let bad = || format!("malformed fat binary entry at offset {at}");
        let kind = u16_at(data, at).ok_or_else(bad)?;
        let header_size = u32_at(data, at + 4).ok_or_else(bad)? as usize;
        let payload_size = usize::try_from(u64_at(data, at + 8).ok_or_else(bad)?).map_err(|_| bad())?;
        let compressed_size = u32_at(data, at + 16).ok_or_else(bad)? as usize;
        let sm = u32_at(data, at + 28).ok_or_else(bad)?;
        let flags = u64_at(data, at + 40).ok_or_else(bad)?;
        let uncompressed = usize::try_from(u64_at(data, at + 56).ok_or_else(bad)?).map_err(|_| bad())?;
        if header_size < ENTRY_HEADER_MIN {
            return Err(bad());
        }
        let start = at.checked_add(header_size).ok_or_else(bad)?;
        let end = start.checked_add(payload_size).ok_or_else(bad)?;
        let raw = data.get(start..end).ok_or_else(bad)?;
        out.push(RawEntry { kind, sm, flags, compressed_size, uncompressed, raw });
        at = end;
    }
    Ok(out)
}

/// Splits a container into its entries; an error names what is malformed.
pub fn entries(container: &[u8]) -> Result<Vec<Entry>, String> {
    raw_entries(container)?.iter().map(|e| Ok(Entry { kind: e.kind, sm: e.sm, payload: e.payload()? })).collect()
}

/// What a container offers a driver that runs PTX.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// The PTX text to use: of the PTX entries, the one for the highest SM
    /// not above the device's (or the lowest SM if all are above it).
    Ptx(Vec<u8>),
    /// NVIDIA machine code only: the SMs of its cubins, and the kernels
    /// (`.entry` functions) of the cubin for the highest SM not above the
    /// device's (or the lowest), `None` where that cubin cannot be read.
    CubinsOnly { sms: Vec<u32>, kernels: Option<Vec<String>> },
}

/// What [`Code`] a container holds for a device of SM `sm`. Only the
/// entry chosen is decompressed. `Err` says why there is none (malformed,
/// or neither PTX nor cubins).
pub fn select(container: &[u8], sm: u32) -> Result<Code, String> {
    let all = raw_entries(container)?;
    let best = |kind: u16| {
        let mut of_kind: Vec<&RawEntry> = all.iter().filter(|e| e.kind == kind).collect();
        of_kind.sort_by_key(|e| e.sm);
        of_kind.iter().rev().find(|e| e.sm <= sm).or(of_kind.first()).copied()
    };
    if let Some(chosen) = best(KIND_PTX) {
        let text = chosen.payload()?;
        let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
        return Ok(Code::Ptx(text[..end].to_vec()));
    }
    let Some(cubin) = best(KIND_ELF) else {
        return Err("the fat binary holds no PTX".to_string());
    };
    let sms = all.iter().filter(|e| e.kind == KIND_ELF).map(|e| e.sm).collect();
    let kernels = cubin.payload().ok().and_then(|elf| elf_kernels(&elf));
    Ok(Code::CubinsOnly { sms, kernels })
}

/// The PTX text to use from a container (see [`Code::Ptx`]). `Err` says
/// why there is none (for example: only cubins).
pub fn select_ptx(container: &[u8], sm: u32) -> Result<Vec<u8>, String> {
    match select(container, sm)? {
        Code::Ptx(text) => Ok(text),
        Code::CubinsOnly { sms, .. } => Err(cubins_only(&sms)),
    }
}

/// Why a container with cubins of `sms` and no PTX has nothing to translate.
pub fn cubins_only(sms: &[u32]) -> String {
    let sms: Vec<String> = sms.iter().map(|sm| format!("sm_{sm}")).collect();
    format!("the fat binary holds only cubins ({}), NVIDIA machine code, and no PTX", sms.join(", "))
}

/// `st_other` bit of a cubin's kernel (`.entry`) symbols.
const STO_CUDA_ENTRY: u8 = 0x10;

/// The kernels of a cubin: the names of its `STT_FUNC` symbols marked as
/// entries in `st_other`. `None` if it is not a readable 64-bit
/// little-endian ELF file.
pub fn elf_kernels(elf: &[u8]) -> Option<Vec<String>> {
    const SHT_SYMTAB: u32 = 2;
    const STT_FUNC: u8 = 2;
    if !elf.starts_with(b"\x7fELF\x02\x01") {
        return None;
    }
    let shoff = usize::try_from(u64_at(elf, 0x28)?).ok()?;
    let shentsize = usize::from(u16_at(elf, 0x3A)?);
    let shnum = usize::from(u16_at(elf, 0x3C)?);
    if shentsize < 64 {
        return None;
    }
    let section = |i: usize| -> Option<(u32, usize, usize, u32, usize)> {
        let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
        let kind = u32_at(elf, at + 4)?;
        let offset = usize::try_from(u64_at(elf, at + 24)?).ok()?;
        let size = usize::try_from(u64_at(elf, at + 32)?).ok()?;
        let link = u32_at(elf, at + 40)?;
        let entsize = usize::try_from(u64_at(elf, at + 56)?).ok()?;
        Some((kind, offset, size, link, entsize))
    };
    let mut names = Vec::new();
    for i in 0..shnum {
        let (kind, offset, size, link, entsize) = section(i)?;
        if kind != SHT_SYMTAB {
            continue;
        }
        let (_, str_offset, str_size, _, _) = section(link as usize)?;
        let strings = elf.get(str_offset..str_offset.checked_add(str_size)?)?;
        let symbols = elf.get(offset..offset.checked_add(size)?)?;
        for sym in symbols.chunks_exact(entsize.max(24)) {
            let (info, other) = (sym[4], sym[5]);
            if info & 0xf != STT_FUNC || other & STO_CUDA_ENTRY == 0 {
                continue;
            }
            let name_at = u32_at(sym, 0)? as usize;
            let rest = strings.get(name_at..)?;
            let end = rest.iter().position(|&b| b == 0)?;
            names.push(String::from_utf8_lossy(&rest[..end]).into_owned());
        }
    }
    Some(names)
}

/// Decompresses an LZ4 block (no frame) of known output size.
pub fn lz4_block_decompress(src: &[u8], size_hint: usize) -> Result<Vec<u8>, String> {
    let bad = || "corrupt LZ4 data in fat binary".to_string();
    let mut out: Vec<u8> = Vec::with_capacity(size_hint);
    let mut i = 0;
    let read_len = |i: &mut usize, mut len: usize| -> Result<usize, String> {
        if len == 15 {
            loop {
                let b = *src.get(*i).ok_or_else(bad)?;
                *i += 1;
                len += usize::from(b);
                if b != 255 {
                    break;
                }
            }
        }
        Ok(len)
    };
    while i < src.len() {
        let token = src[i];
        i += 1;
        let lit = read_len(&mut i, usize::from(token >> 4))?;
        let literals = src.get(i..i + lit).ok_or_else(bad)?;
        out.extend_from_slice(literals);
        i += lit;
        if i >= src.len() {
            break; // the last sequence has literals only
        }
        let offset = usize::from(u16_at(src, i).ok_or_else(bad)?);
        i += 2;
        let len = read_len(&mut i, usize::from(token & 15))? + 4;
        if offset == 0 || offset > out.len() {
            return Err(bad());
        }
        let from = out.len() - offset;
        for k in 0..len {
            let b = out[from + k];
            out.push(b);
        }
    }
    Ok(out)
}

/// Decompresses a Zstandard frame.
pub fn zstd_decompress(src: &[u8], size_hint: usize) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let mut decoder = ruzstd::decoding::StreamingDecoder::new(src)
        .map_err(|e| format!("corrupt Zstandard data in fat binary: {e}"))?;
    let mut out = Vec::with_capacity(size_hint);
    decoder.read_to_end(&mut out).map_err(|e| format!("corrupt Zstandard data in fat binary: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container with one entry (`kind`, `sm`, `flags`) around `payload`.
    fn container(kind: u16, sm: u32, flags: u64, payload: &[u8], uncompressed: usize) -> Vec<u8> {
        let mut e = vec![0u8; 64];
        e[0..2].copy_from_slice(&kind.to_le_bytes());
        e[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        e[4..8].copy_from_slice(&64u32.to_le_bytes());
        e[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        e[16..20].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        e[28..32].copy_from_slice(&sm.to_le_bytes());
        e[40..48].copy_from_slice(&flags.to_le_bytes());
        e[56..64].copy_from_slice(&(uncompressed as u64).to_le_bytes());
        e.extend_from_slice(payload);
        let mut c = Vec::new();
        c.extend_from_slice(&FATBIN_MAGIC.to_le_bytes());
        c.extend_from_slice(&1u16.to_le_bytes());
        c.extend_from_slice(&16u16.to_le_bytes());
        c.extend_from_slice(&(e.len() as u64).to_le_bytes());
        c.extend_from_slice(&e);
        c
    }

    #[test]
    fn plain_ptx_entry() {
        let c = container(1, 80, 0x11, b".version 9.5\n\0\0\0", 0);
        assert_eq!(select_ptx(&c, 80).unwrap(), b".version 9.5\n");
    }

    #[test]
    fn cubin_only_is_explained() {
        let c = container(2, 90, 0x11, b"\x7fELF", 0);
        let err = select_ptx(&c, 80).unwrap_err();
        assert!(err.contains("only cubins (sm_90)"), "{err}");
    }

    /// nvcc 13.5's sm_80 cubin of `vadd_f32` in a fat binary without PTX
    /// (`libcuda/tests/data/README.md`): its one kernel is listed.
    #[test]
    fn cubin_only_lists_its_kernels() {
        let c = include_bytes!("../tests/data/vadd_f32.cubin.fatbin");
        match select(c, 80).unwrap() {
            Code::CubinsOnly { sms, kernels } => {
                assert_eq!(sms, vec![80]);
                assert_eq!(kernels, Some(vec!["vadd_f32".to_string()]));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(elf_kernels(b"\x7fELF\x02\x01\x01"), None);
    }

    #[test]
    fn lz4_entry() {
        // Literals "abcd", then a match of 8 at offset 4, then literal "x".
        let block = [0x44, b'a', b'b', b'c', b'd', 4, 0, 0x10, b'x'];
        assert_eq!(lz4_block_decompress(&block, 13).unwrap(), b"abcdabcdabcdx");
        let c = container(1, 80, 0x2011, &block, 13);
        assert_eq!(select_ptx(&c, 80).unwrap(), b"abcdabcdabcdx");
    }

    /// cuSPARSE 12.9 and cuFFT 12.5 put entries of kind 8 with flags
    /// `0x12011`/`0x18011` (LZ4 or Zstandard, and `0x10000`) before their
    /// PTX, whose payload is neither: the PTX must still be found.
    #[test]
    fn opaque_entries_of_other_kinds_are_skipped() {
        let block = [0x44, b'a', b'b', b'c', b'd', 4, 0, 0x10, b'x'];
        let opaque = container(8, 80, 0x12011, &[0x0a, 0x63, 0x86, 0xda, 0x88, 0x8d, 0xb7, 0x0c], 17408);
        let ptx = container(1, 80, 0x2011, &block, 13);
        // One container: the header, then both entries.
        let mut c = opaque[..16].to_vec();
        c.extend_from_slice(&opaque[16..]);
        c.extend_from_slice(&ptx[16..]);
        let body = (c.len() - 16) as u64;
        c[8..16].copy_from_slice(&body.to_le_bytes());
        let all = entries(&c).unwrap();
        assert_eq!(all.iter().map(|e| e.kind).collect::<Vec<_>>(), vec![8, 1]);
        assert_eq!(select_ptx(&c, 80).unwrap(), b"abcdabcdabcdx");
    }

    #[test]
    fn lz4_rejects_bad_offsets() {
        assert!(lz4_block_decompress(&[0x04, 9, 0], 8).is_err());
    }

    #[test]
    fn truncated_container() {
        let mut c = container(1, 80, 0, b"abc", 0);
        c.truncate(40);
        assert!(select_ptx(&c, 80).is_err());
    }

    /// `__fatBinC_Wrapper_t`: magic, version, container, list.
    #[repr(C)]
    struct Wrapper {
        magic: u32,
        version: u32,
        data: *const u8,
        list: *const *const u8,
    }

    #[test]
    fn version_2_wrapper_lists_its_prelink_containers() {
        let a = container(1, 80, 0x11, b".version 9.5\n// a\0", 0);
        let b = container(1, 80, 0x11, b".version 9.5\n// b\0", 0);
        let linked = container(2, 80, 0x11, b"\x7fELF", 0);
        let list = [a.as_ptr(), b.as_ptr(), std::ptr::null()];
        let w = Wrapper { magic: WRAPPER_MAGIC, version: 2, data: linked.as_ptr(), list: list.as_ptr() };
        let p = (&w as *const Wrapper).cast::<c_void>();
        // SAFETY: a complete wrapper, a NULL-terminated list of complete containers.
        let units = unsafe { prelink_containers(p) };
        assert_eq!(units, vec![&a[..], &b[..]]);
        // SAFETY: as above.
        assert_eq!(unsafe { container_from_pointer(p) }, Some(&linked[..]));
        // Version 1, or no list: none.
        let w1 = Wrapper { version: 1, ..w };
        // SAFETY: as above.
        assert!(unsafe { prelink_containers((&w1 as *const Wrapper).cast()) }.is_empty());
        let w2 = Wrapper { list: std::ptr::null(), ..w };
        // SAFETY: as above.
        assert!(unsafe { prelink_containers((&w2 as *const Wrapper).cast()) }.is_empty());
        // SAFETY: a container, not a wrapper.
        assert!(unsafe { prelink_containers(a.as_ptr().cast()) }.is_empty());
    }
}
