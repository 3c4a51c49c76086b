//! The persistent cache: translated modules and each device's Vulkan
//! pipeline cache data, kept in files so that a second process does not
//! translate or compile again (`PTXVK_CACHE_DIR`; off with `PTXVK_CACHE=0`).
//!
//! # Files
//! One file an entry, named `<kind>-<32 hex digits>` after a hash of its
//! key: `t` for a translation, `p` for pipeline cache data. A file holds
//! [`MAGIC`], then LZ4 (block format, size prepended) of the key's length
//! (u64, little-endian) and bytes and the payload's length and bytes, then
//! an FNV-1a hash of all that. A lookup compares the whole key, so two keys
//! with one hash never mistake one entry for the other (the later store
//! replaces the earlier); a file that does not read back whole is a miss.
//! (CUB's libraries make entries of hundreds of MB of SPIR-V, a few times
//! smaller compressed.)
//!
//! # Keys
//! A translation's key is everything its result depends on: the runtime's
//! build id (a hash of the translator's and the runtime's sources), the
//! device (its [`crate::DeviceInfo`]), the translator options, the module
//! id limit, the file name and the PTX itself. The driver then specialises
//! and compiles pipelines; drivers keep compiled pipelines in their own
//! disk caches too (Mesa's under `~/.cache/mesa_shader_cache`, NVIDIA's),
//! which find them across processes because nothing that changes from one
//! process to the next is a specialization constant (see
//! `ptxvk_translator::abi`).
//!
//! # Concurrent processes
//! A store writes a temporary file in the directory and renames it over
//! the entry, so a reader sees a whole file, the old or the new. Stores are
//! best effort: one that fails is logged and forgotten.
//!
//! # Size
//! After a store, when the files add up to more than `PTXVK_CACHE_MAXSIZE`
//! bytes (default 1 GiB), the least recently used go until three quarters
//! of it is left; a hit marks its file used.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ptxvk_translator::abi::fault::{Access, FaultSite};
use ptxvk_translator::{EntryInfo, GlobalInfo, GlobalSpace, ModuleInfo, ParamInfo, ParamPassing};

/// `PTXVK_CACHE=0` turns the persistent cache off.
pub const CACHE_ENV: &str = "PTXVK_CACHE";
/// The cache's directory (default `$XDG_CACHE_HOME/ptxvk`, else
/// `$HOME/.cache/ptxvk`).
pub const CACHE_DIR_ENV: &str = "PTXVK_CACHE_DIR";
/// The cache's size limit in bytes (default 1 GiB).
pub const CACHE_MAX_SIZE_ENV: &str = "PTXVK_CACHE_MAXSIZE";

/// The first bytes of every cache file (the format's version).
const MAGIC: &[u8; 8] = b"PTXVKC02";
const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// The build this runtime was made from (see `build.rs`).
pub(crate) const BUILD_ID: &str = env!("PTXVK_BUILD_ID");

/// An open cache directory.
#[derive(Clone, Debug)]
pub(crate) struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
}

/// Temporary files of this process get distinct names.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl DiskCache {
    /// The cache the environment asks for; `None` when it is off or its
    /// directory cannot be created (logged).
    pub(crate) fn from_env() -> Option<DiskCache> {
        if std::env::var(CACHE_ENV).is_ok_and(|v| v == "0" || v.eq_ignore_ascii_case("false")) {
            return None;
        }
        let dir = match std::env::var_os(CACHE_DIR_ENV).filter(|d| !d.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => match std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
                Some(d) => PathBuf::from(d).join("ptxvk"),
                None => PathBuf::from(std::env::var_os("HOME").filter(|d| !d.is_empty())?).join(".cache/ptxvk"),
            },
        };
        if let Err(e) = std::fs::create_dir_all(&dir) {
            log::warn!("the cache directory {} cannot be created ({e}): nothing is cached", dir.display());
            return None;
        }
        let max_bytes =
            std::env::var(CACHE_MAX_SIZE_ENV).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(DEFAULT_MAX_BYTES);
        Some(DiskCache { dir, max_bytes })
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, kind: &str, key: &[u8]) -> PathBuf {
        self.dir.join(format!(
            "{kind}-{:016x}{:016x}",
            fnv1a(0xcbf2_9ce4_8422_2325, key),
            fnv1a(0x8422_2325_cbf2_9ce4, key)
        ))
    }

    /// The payload stored under `key`, if a whole file with that key is there.
    pub(crate) fn get(&self, kind: &str, key: &[u8]) -> Option<Vec<u8>> {
        let path = self.path(kind, key);
        let bytes = std::fs::read(&path).ok()?;
        let payload = unwrap_file(&bytes, key)?;
        drop(bytes);
        // The file was used now (for the size limit); best effort.
        if let Ok(f) = std::fs::File::options().append(true).open(&path) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
        Some(payload)
    }

    /// Stores `payload` under `key` (best effort: failures are logged).
    pub(crate) fn put(&self, kind: &str, key: &[u8], payload: &[u8]) {
        let path = self.path(kind, key);
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = self.dir.join(format!(".tmp-{}-{n}", std::process::id()));
        let mut body = Vec::with_capacity(16 + key.len() + payload.len());
        body.extend_from_slice(&(key.len() as u64).to_le_bytes());
        body.extend_from_slice(key);
        body.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        body.extend_from_slice(payload);
        // The block format's size prefix is a u32.
        if u32::try_from(body.len()).is_err() {
            log::warn!("{} bytes are too many for one cache entry: not stored", body.len());
            return;
        }
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&lz4_flex::block::compress_prepend_size(&body));
        drop(body);
        let sum = fnv1a(0xcbf2_9ce4_8422_2325, &bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        let written = std::fs::write(&temp, &bytes).and_then(|()| std::fs::rename(&temp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            log::warn!("{} could not be written to the cache: {e}", path.display());
            return;
        }
        self.trim();
    }

    /// Removes the least recently used files while the cache is over its
    /// size limit, and temporary files a process left behind over a day ago.
    fn trim(&self) {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = std::time::SystemTime::now();
        let mut files = Vec::new();
        let mut total = 0u64;
        for e in dir.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let used = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
            let name = e.file_name();
            if name.to_string_lossy().starts_with(".tmp-") {
                if now.duration_since(used).is_ok_and(|d| d.as_secs() > 86_400) {
                    let _ = std::fs::remove_file(e.path());
                }
                continue;
            }
            total += meta.len();
            files.push((used, meta.len(), e.path()));
        }
        if total <= self.max_bytes {
            return;
        }
        files.sort();
        let goal = self.max_bytes / 4 * 3;
        for (_, len, path) in files {
            if total <= goal {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

/// The payload of a cache file, when it is whole and its key is `key`.
fn unwrap_file(bytes: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    let (head, sum) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
    if fnv1a(0xcbf2_9ce4_8422_2325, head).to_le_bytes() != sum {
        return None;
    }
    let body = lz4_flex::block::decompress_size_prepended(head.strip_prefix(MAGIC.as_slice())?).ok()?;
    let mut r = Reader(&body);
    if r.bytes()? != key {
        return None;
    }
    let payload = r.bytes()?;
    r.0.is_empty().then(|| payload.to_vec())
}

/// FNV-1a, 64 bits, from `seed`.
fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(seed, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A translated module as the cache keeps it.
#[derive(Debug, PartialEq)]
pub(crate) struct CachedTranslation {
    /// One SPIR-V module for every entry, or one per entry.
    pub(crate) shaders: Vec<Vec<u32>>,
    pub(crate) info: ModuleInfo,
    /// The entries left out, with their diagnostics.
    pub(crate) deferred: Vec<(String, String)>,
}

/// The key of a translation: see the module docs.
pub(crate) fn translation_key(
    device: &crate::DeviceInfo,
    options: &ptxvk_translator::Options,
    max_module_ids: u32,
    file_name: &str,
    ptx: &str,
) -> Vec<u8> {
    let mut w = Writer::default();
    w.str(BUILD_ID);
    w.str(&format!("{device:?}"));
    w.str(&format!("{options:?}"));
    w.u32(max_module_ids);
    w.str(file_name);
    w.str(ptx);
    w.0
}

/// The key of a device's pipeline cache data.
pub(crate) fn pipeline_cache_key(device: &crate::DeviceInfo) -> Vec<u8> {
    let mut w = Writer::default();
    w.str("pipeline cache");
    w.str(&format!("{device:?}"));
    w.0
}

impl CachedTranslation {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(self.shaders.len() as u32);
        for s in &self.shaders {
            w.u64(s.len() as u64);
            for word in s {
                w.u32(*word);
            }
        }
        module_info(&mut w, &self.info);
        w.u32(self.deferred.len() as u32);
        for (name, diag) in &self.deferred {
            w.str(name);
            w.str(diag);
        }
        w.0
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<CachedTranslation> {
        let mut r = Reader(bytes);
        let shaders = r.list(|r| {
            let n = usize::try_from(r.u64()?).ok()?;
            let words = r.take(n.checked_mul(4)?)?;
            Some(words.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
        })?;
        let info = read_module_info(&mut r)?;
        let deferred = r.list(|r| Some((r.string()?, r.string()?)))?;
        r.0.is_empty().then_some(CachedTranslation { shaders, info, deferred })
    }
}

fn module_info(w: &mut Writer, m: &ModuleInfo) {
    // Destructured whole: a new field does not compile until it is stored.
    let ModuleInfo {
        entries,
        globals,
        global_data_bytes,
        trap_offset,
        printf_offset,
        heap_offset,
        grid_offset,
        vector_lock_offset,
        fault_offset,
        resume_offset,
        race_checked,
        fault_sites,
        source_name,
    } = m;
    w.u32(entries.len() as u32);
    for e in entries {
        entry_info(w, e);
    }
    w.u32(globals.len() as u32);
    for g in globals {
        let GlobalInfo { name, space, offset, size, init, relocations } = g;
        w.str(name);
        w.u8(match space {
            GlobalSpace::Global => 0,
            GlobalSpace::Const => 1,
        });
        w.u64(*offset);
        w.u64(*size);
        w.bytes(init);
        w.u32(relocations.len() as u32);
        for r in relocations {
            w.u64(*r);
        }
    }
    w.u64(*global_data_bytes);
    for o in [trap_offset, printf_offset, heap_offset, grid_offset, vector_lock_offset, fault_offset, resume_offset] {
        w.opt_u64(*o);
    }
    w.bool(*race_checked);
    w.u32(fault_sites.len() as u32);
    for s in fault_sites {
        let FaultSite { start, end, access, bytes, space, function, line, column, source } = s;
        w.u32(*start);
        w.u32(*end);
        w.u8(match access {
            Access::Read => 0,
            Access::Write => 1,
            Access::Atomic => 2,
        });
        w.u32(*bytes);
        w.u32(*space);
        w.str(function);
        w.u32(*line);
        w.u32(*column);
        w.bool(source.is_some());
        if let Some(s) = source {
            w.str(s);
        }
    }
    w.str(source_name);
}

fn entry_info(w: &mut Writer, e: &EntryInfo) {
    let EntryInfo {
        name,
        params,
        param_bytes,
        param_passing,
        push_constant_bytes,
        static_shared_bytes,
        uses_dynamic_shared,
        reqntid,
        maxntid,
        local_bytes,
        scratch_words_per_invocation,
        scratch_words_fixed,
        loop_counter_words,
        block_ticket_words,
        shared_spill,
        shared_wide,
        resumable,
    } = e;
    w.str(name);
    w.u32(params.len() as u32);
    for p in params {
        let ParamInfo { name, offset, size, align } = p;
        w.str(name);
        w.u32(*offset);
        w.u32(*size);
        w.u32(*align);
    }
    w.u32(*param_bytes);
    w.u8(match param_passing {
        ParamPassing::PushConstants => 0,
        ParamPassing::Buffer => 1,
    });
    w.u32(*push_constant_bytes);
    w.u32(*static_shared_bytes);
    w.bool(*uses_dynamic_shared);
    for d in [reqntid, maxntid] {
        w.bool(d.is_some());
        for v in d.unwrap_or_default() {
            w.u32(v);
        }
    }
    w.u32(*local_bytes);
    w.u32(*scratch_words_per_invocation);
    w.u32(*scratch_words_fixed);
    w.u32(*loop_counter_words);
    w.u32(*block_ticket_words);
    w.bool(*shared_spill);
    w.bool(*shared_wide);
    w.bool(*resumable);
}

fn read_module_info(r: &mut Reader<'_>) -> Option<ModuleInfo> {
    let entries = r.list(read_entry_info)?;
    let globals = r.list(|r| {
        Some(GlobalInfo {
            name: r.string()?,
            space: match r.u8()? {
                0 => GlobalSpace::Global,
                1 => GlobalSpace::Const,
                _ => return None,
            },
            offset: r.u64()?,
            size: r.u64()?,
            init: r.bytes()?.to_vec(),
            relocations: r.list(|r| r.u64())?,
        })
    })?;
    let global_data_bytes = r.u64()?;
    let trap_offset = r.opt_u64()?;
    let printf_offset = r.opt_u64()?;
    let heap_offset = r.opt_u64()?;
    let grid_offset = r.opt_u64()?;
    let vector_lock_offset = r.opt_u64()?;
    let fault_offset = r.opt_u64()?;
    let resume_offset = r.opt_u64()?;
    let race_checked = r.bool()?;
    let fault_sites = r.list(|r| {
        Some(FaultSite {
            start: r.u32()?,
            end: r.u32()?,
            access: match r.u8()? {
                0 => Access::Read,
                1 => Access::Write,
                2 => Access::Atomic,
                _ => return None,
            },
            bytes: r.u32()?,
            space: r.u32()?,
            function: r.string()?,
            line: r.u32()?,
            column: r.u32()?,
            source: if r.bool()? { Some(r.string()?) } else { None },
        })
    })?;
    let source_name = r.string()?;
    Some(ModuleInfo {
        entries,
        globals,
        global_data_bytes,
        trap_offset,
        printf_offset,
        heap_offset,
        grid_offset,
        vector_lock_offset,
        fault_offset,
        resume_offset,
        race_checked,
        fault_sites,
        source_name,
    })
}

fn read_entry_info(r: &mut Reader<'_>) -> Option<EntryInfo> {
    let name = r.string()?;
    let params =
        r.list(|r| Some(ParamInfo { name: r.string()?, offset: r.u32()?, size: r.u32()?, align: r.u32()? }))?;
    let param_bytes = r.u32()?;
    let param_passing = match r.u8()? {
        0 => ParamPassing::PushConstants,
        1 => ParamPassing::Buffer,
        _ => return None,
    };
    let push_constant_bytes = r.u32()?;
    let static_shared_bytes = r.u32()?;
    let uses_dynamic_shared = r.bool()?;
    let mut dims = [None, None];
    for d in &mut dims {
        let some = r.bool()?;
        let v = [r.u32()?, r.u32()?, r.u32()?];
        *d = some.then_some(v);
    }
    Some(EntryInfo {
        name,
        params,
        param_bytes,
        param_passing,
        push_constant_bytes,
        static_shared_bytes,
        uses_dynamic_shared,
        reqntid: dims[0],
        maxntid: dims[1],
        local_bytes: r.u32()?,
        scratch_words_per_invocation: r.u32()?,
        scratch_words_fixed: r.u32()?,
        loop_counter_words: r.u32()?,
        block_ticket_words: r.u32()?,
        shared_spill: r.bool()?,
        shared_wide: r.bool()?,
        resumable: r.bool()?,
    })
}

/// Little-endian encoding of the cache's payloads.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn bool(&mut self, v: bool) {
        self.0.push(u8::from(v));
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn opt_u64(&mut self, v: Option<u64>) {
        self.bool(v.is_some());
        self.u64(v.unwrap_or(0));
    }
    fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.0.extend_from_slice(v);
    }
    fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }
}

/// Reads what [`Writer`] wrote; `None` at the first thing out of place.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, b) = self.0.split_at_checked(n)?;
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn bool(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn opt_u64(&mut self) -> Option<Option<u64>> {
        let some = self.bool()?;
        let v = self.u64()?;
        Some(some.then_some(v))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }
    /// A u32 count, then that many items (the count is not trusted for
    /// an allocation).
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let n = self.u32()?;
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(item(self)?);
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_cache(name: &str) -> DiskCache {
        let dir = std::env::temp_dir().join(format!("ptxvk-cache-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        DiskCache { dir, max_bytes: DEFAULT_MAX_BYTES }
    }

    #[test]
    fn a_stored_payload_comes_back_only_under_its_own_whole_key() {
        let c = temp_cache("keys");
        c.put("t", b"key one", b"payload one");
        assert_eq!(c.get("t", b"key one").as_deref(), Some(&b"payload one"[..]));
        assert_eq!(c.get("t", b"key two"), None);
        assert_eq!(c.get("p", b"key one"), None);
        // A file whose name matches but whose key differs (a hash collision)
        // is a miss.
        let path = c.path("t", b"key one");
        let other = c.path("t", b"key 1");
        std::fs::copy(&path, &other).expect("copy");
        assert_eq!(c.get("t", b"key 1"), None);
        let _ = std::fs::remove_dir_all(c.dir());
    }

    #[test]
    fn a_damaged_or_cut_file_is_a_miss() {
        let c = temp_cache("damage");
        c.put("t", b"k", b"some payload bytes");
        let path = c.path("t", b"k");
        let whole = std::fs::read(&path).expect("read");
        for cut in [0, 7, 8, 20, whole.len() - 1] {
            std::fs::write(&path, &whole[..cut]).expect("write");
            assert_eq!(c.get("t", b"k"), None, "cut at {cut}");
        }
        for flip in 0..whole.len() {
            let mut bad = whole.clone();
            bad[flip] ^= 0x10;
            std::fs::write(&path, &bad).expect("write");
            assert_eq!(c.get("t", b"k"), None, "byte {flip} flipped");
        }
        std::fs::write(&path, &whole).expect("write");
        assert_eq!(c.get("t", b"k").as_deref(), Some(&b"some payload bytes"[..]));
        let _ = std::fs::remove_dir_all(c.dir());
    }

    #[test]
    fn the_least_recently_used_files_go_when_the_cache_is_full() {
        let mut c = temp_cache("trim");
        c.max_bytes = 4000;
        // Incompressible bytes: the files are about 900 bytes each.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let payload: Vec<u8> = (0..900)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for i in 0..4u8 {
            c.put("t", &[i], &payload);
            let f = std::fs::File::options().append(true).open(c.path("t", &[i])).expect("open");
            f.set_modified(old + std::time::Duration::from_secs(u64::from(i))).expect("mtime");
        }
        // Entry 0 is used again: entry 1 is now the least recently used.
        assert!(c.get("t", &[0]).is_some());
        c.put("t", &[9], &payload);
        let left: Vec<bool> = [0u8, 1, 2, 3, 9].iter().map(|i| c.get("t", &[*i]).is_some()).collect();
        assert_eq!(left, [true, false, false, true, true]);
        let _ = std::fs::remove_dir_all(c.dir());
    }

    #[test]
    fn translations_encode_and_decode_exactly() {
        let ptx = ".version 7.0\n.target sm_70\n.address_size 64\n.global .align 4 .u32 counter = 5;\n\
                   .visible .entry k(.param .u64 p, .param .u32 n)\n{\n.reg .b64 %rd<3>;\n.reg .b32 %r<3>;\n\
                   ld.param.u64 %rd1, [p];\nld.global.u32 %r1, [counter];\nst.global.u32 [%rd1], %r1;\nret;\n}\n";
        let options = ptxvk_translator::Options { fault_checks: true, ..Default::default() };
        let t = ptxvk_translator::translate(ptx, "k.ptx", &options).expect("translates");
        assert!(!t.info.globals.is_empty() && !t.info.fault_sites.is_empty());
        let c = CachedTranslation {
            shaders: vec![t.spirv.clone(), vec![1, 2, 3]],
            info: t.info,
            deferred: vec![("other".into(), "error: brkpt".into())],
        };
        let bytes = c.encode();
        assert_eq!(CachedTranslation::decode(&bytes).as_ref(), Some(&c));
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert_eq!(CachedTranslation::decode(&bytes[..cut]), None, "cut at {cut}");
        }
    }
}
