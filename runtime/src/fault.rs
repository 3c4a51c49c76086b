//! The runtime side of the fault checks (see `ptxvk_translator::abi::fault`):
//! the context's fault log, the range table kernels check global addresses
//! against, and the reports made from the log when a launch faulted.
//!
//! Two modes. The default checks (on CPU devices, where a bad address
//! takes the process down) keep one range per run of allocations that share
//! a `VkDeviceMemory` mapped in one piece, and the whole of an exportable
//! chunk that allocations are carved from (`crate::memory::Chunk`): an
//! address between two live allocations of the same memory block, or
//! anywhere in a chunk, reaches memory this process owns, as on NVIDIA's
//! GPUs, where only an address outside every mapped page faults; and few
//! ranges keep each check a few comparisons. The memcheck
//! (`PTXVK_MEMCHECK=1`, any device) keeps each allocation's exact bytes
//! (pieces of a chunk are carved with a gap between them), so an access
//! one past the end of an allocation, or into freed memory, is reported;
//! every fault of a launch
//! is reported (up to `MEMCHECK_RECORDS`) in the style of NVIDIA's
//! `compute-sanitizer`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use ash::vk;
use gpu_allocator::MemoryLocation;
use ptxvk_translator::abi::fault::{self, FaultSite};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::memory::Buffer;

/// `PTXVK_FAULT_CHECKS=0`/`1`: translate kernels without (with) checks of
/// every memory access (default: on for CPU devices such as lavapipe, off
/// on GPUs, whose faults end in `VK_ERROR_DEVICE_LOST`).
pub const FAULT_CHECKS_ENV: &str = "PTXVK_FAULT_CHECKS";
/// `PTXVK_MEMCHECK=1`: check every access against the exact live
/// allocations and report each fault (kernel, thread, block, address,
/// nearest allocation, PTX line) on standard error.
pub const MEMCHECK_ENV: &str = "PTXVK_MEMCHECK";

/// `PTXVK_RACECHECK=1`: track the `.shared` accesses of every kernel and
/// report hazards between the threads of a block (in the spirit of
/// `compute-sanitizer --tool racecheck`); implies the fault checks.
pub const RACECHECK_ENV: &str = "PTXVK_RACECHECK";

/// Most bytes of racecheck shadow one launch uses (blocks beyond the slots
/// share them: only hazards can be missed, none invented).
const RACE_SHADOW_BUDGET: u64 = 256 << 20;
/// Most blocks with a slot of their own in the racecheck shadow.
const RACE_MAX_SLOTS: u64 = 1024;

/// Records the log keeps per synchronisation with the default checks.
const CHECK_RECORDS: u32 = 16;
/// Records the log keeps with the memcheck (further faults are counted).
pub(crate) const MEMCHECK_RECORDS: u32 = 1024;

/// How a context checks the memory accesses of its kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultMode {
    /// No checks: a fault is whatever the device does with it.
    Off,
    /// Accesses outside the memory blocks of the context fail the launch.
    Checks,
    /// Accesses outside the exact live allocations fail the launch, each reported.
    Memcheck,
}

impl FaultMode {
    /// The mode the environment asks for on a device of this kind.
    pub(crate) fn from_env(cpu: bool) -> FaultMode {
        if std::env::var(MEMCHECK_ENV).is_ok_and(|v| v == "1") {
            return FaultMode::Memcheck;
        }
        match std::env::var(FAULT_CHECKS_ENV).as_deref() {
            Ok("0") => FaultMode::Off,
            Ok("1") => FaultMode::Checks,
            _ if cpu => FaultMode::Checks,
            _ => FaultMode::Off,
        }
    }
}

/// One live range of device memory a kernel may access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) base: u64,
    pub(crate) end: u64,
    /// The memory block: `(VkDeviceMemory, address of its byte 0)`, when
    /// known; ranges of the same block merge in [`FaultMode::Checks`].
    pub(crate) block: Option<(vk::DeviceMemory, u64)>,
}

/// The fault log and range table of a context.
pub(crate) struct FaultState {
    pub(crate) mode: FaultMode,
    log: Option<Arc<Buffer>>,
    table: Option<Arc<Buffer>>,
    /// The ranges in `table`.
    uploaded: Vec<(u64, u64)>,
    depth: u32,
    /// Tables replaced since the last synchronisation (a kernel still
    /// running may have read their address).
    retired: Vec<Arc<Buffer>>,
    /// Whether a kernel that reads the table has been queued since all
    /// work last completed (then a new table's address is stored in stream
    /// order; otherwise straight through the mapping).
    queued: bool,
    /// Fault sites and PTX file of each module launched, by module data address.
    pub(crate) sites: HashMap<u64, (Arc<[FaultSite]>, Arc<str>)>,
    /// Whether the racecheck runs (fixed at creation).
    pub(crate) race: bool,
    /// The racecheck's shadow (grown as launches need).
    shadow: Option<Arc<Buffer>>,
    /// Fault records read from the log while looking for hazards, and the
    /// faults counted with them: [`FaultState::take`] returns them first.
    held: (u32, Vec<Record>),
    /// Hazards found so far, by (module, kind, site, earlier site), in the
    /// order found.
    hazards: Vec<RaceHazard>,
}

/// The kind of a shared-memory hazard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RaceKind {
    /// A thread read a word another thread wrote between the same barriers.
    ReadAfterWrite,
    /// A thread wrote a word another thread read between the same barriers.
    WriteAfterRead,
    /// A thread wrote a word another thread wrote between the same barriers.
    WriteAfterWrite,
}

/// One hazard the racecheck reported: a pair of accesses (instructions),
/// with how many threads met it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaceHazard {
    /// Which accesses.
    pub kind: RaceKind,
    /// The function of the later access.
    pub function: String,
    /// PTX line of the later access (of the access that found the hazard).
    pub line: u32,
    /// PTX line of the earlier access of the other thread.
    pub earlier_line: u32,
    /// `.loc` source of the later access, when the PTX has line information.
    pub source: Option<String>,
    /// `.loc` source of the earlier access.
    pub earlier_source: Option<String>,
    /// Threads that recorded this hazard (each thread records its first).
    pub count: u64,
    /// The report as printed (compute-sanitizer's layout).
    pub report: String,
    key: (u64, u32, u32, u32),
}

/// One decoded record of the log.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) address: u64,
    pub(crate) module: u64,
    pub(crate) site: u32,
    pub(crate) kind: u32,
    pub(crate) ctaid: [u32; 3],
    pub(crate) tid: [u32; 3],
}

impl FaultState {
    pub(crate) fn new(mode: FaultMode) -> FaultState {
        FaultState {
            mode,
            log: None,
            table: None,
            uploaded: Vec::new(),
            depth: 0,
            retired: Vec::new(),
            queued: false,
            sites: HashMap::new(),
            race: false,
            shadow: None,
            held: (0, Vec::new()),
            hazards: Vec::new(),
        }
    }

    /// Readies the racecheck shadow for a launch of `blocks` blocks with
    /// `shared_bytes` of shared memory each: `(shadow, slots, bytes to zero)`.
    pub(crate) fn race_shadow(
        &mut self,
        device: &Arc<Device>,
        blocks: u64,
        shared_bytes: u64,
    ) -> Result<(Arc<Buffer>, u32, u64)> {
        let slot_bytes = shared_bytes.div_ceil(4).max(1) * fault::RACE_ENTRY_BYTES;
        let slots = blocks.clamp(1, RACE_MAX_SLOTS).min((RACE_SHADOW_BUDGET / slot_bytes).max(1));
        let bytes = slots * slot_bytes;
        let shadow = crate::memory::grown_device_buffer(device, &mut self.shadow, bytes, 16, "ptxvk racecheck shadow")?;
        Ok((shadow, slots as u32, bytes))
    }

    /// Reads the log (all work has completed) and reports the hazards in
    /// it on standard error; fault records are kept for [`FaultState::take`].
    pub(crate) fn collect_hazards(&mut self) -> Result<Vec<RaceHazard>> {
        let (_, records) = self.take()?;
        let mut faults = Vec::new();
        let mut new: Vec<usize> = Vec::new();
        for r in records {
            let kind = match r.kind {
                fault::KIND_RACE_RAW => RaceKind::ReadAfterWrite,
                fault::KIND_RACE_WAR => RaceKind::WriteAfterRead,
                fault::KIND_RACE_WAW => RaceKind::WriteAfterWrite,
                _ => {
                    faults.push(r);
                    continue;
                }
            };
            let earlier_site = (r.address >> 32) as u32;
            let key = (r.module, r.kind, r.site, earlier_site);
            if let Some(i) = self.hazards.iter().position(|h| h.key == key) {
                self.hazards[i].count += 1;
                if !new.contains(&i) {
                    new.push(i);
                }
                continue;
            }
            let h = self.describe_hazard(&r, kind, earlier_site, key);
            self.hazards.push(h);
            new.push(self.hazards.len() - 1);
        }
        // The faults among the records are reported by the launch's error
        // (records past the log's capacity are not known).
        self.held.0 += faults.len() as u32;
        self.held.1.extend(faults);
        let out: Vec<RaceHazard> = new.iter().map(|&i| self.hazards[i].clone()).collect();
        if !out.is_empty() {
            let mut text = String::new();
            for h in &out {
                text.push_str(&h.report);
                let _ = writeln!(text, "=========     [{} hazard{}]", h.count, if h.count == 1 { "" } else { "s" });
                text.push_str(
                    "=========
",
                );
            }
            let _ = writeln!(
                text,
                "========= RACECHECK SUMMARY: {} hazard{} displayed",
                out.len(),
                if out.len() == 1 { "" } else { "s" }
            );
            eprint!("{text}");
        }
        Ok(out)
    }

    /// Every hazard reported so far in this context.
    pub(crate) fn hazards(&self) -> Vec<RaceHazard> {
        self.hazards.clone()
    }

    fn describe_hazard(&self, r: &Record, kind: RaceKind, earlier_site: u32, key: (u64, u32, u32, u32)) -> RaceHazard {
        let sites = self.sites.get(&r.module);
        let site = |i: u32| sites.and_then(|(s, f)| s.get(i as usize).map(|s| (s, f.clone())));
        let (later, earlier) = (site(r.site), site(earlier_site));
        let (later_name, earlier_name) = match kind {
            RaceKind::ReadAfterWrite => ("Read", "Write"),
            RaceKind::WriteAfterRead => ("Write", "Read"),
            RaceKind::WriteAfterWrite => ("Write", "Write"),
        };
        let at = |s: &Option<(&FaultSite, Arc<str>)>| match s {
            Some((s, file)) => {
                let mut t = format!("{} ({file}:{}:{})", s.function, s.line, s.column);
                if let Some(src) = &s.source {
                    let _ = write!(t, " [{src}]");
                }
                t
            }
            None => "an unknown instruction".to_string(),
        };
        let offset = r.address & 0xf_ffff;
        let accessor = ((r.address >> 20) & 0xfff) as u32;
        let other = match accessor {
            fault::RACE_MANY_READERS => "threads of several warps".to_string(),
            a if a >= fault::RACE_WARP_READERS => format!("several threads of warp {}", a - fault::RACE_WARP_READERS),
            a => format!("thread {} (linear %tid)", a.saturating_sub(1)),
        };
        let [tx, ty, tz] = r.tid;
        let [bx, by, bz] = r.ctaid;
        let mut report = String::new();
        let _ = writeln!(report, "========= Error: Race reported between {earlier_name} access at {}", at(&earlier));
        let _ = writeln!(report, "=========     and {later_name} access at {}", at(&later));
        let _ = writeln!(
            report,
            "=========     e.g. __shared__ offset {offset:#x}: thread ({tx},{ty},{tz}) in block ({bx},{by},{bz}) after {other}"
        );
        RaceHazard {
            kind,
            function: later.as_ref().map_or_else(String::new, |(s, _)| s.function.clone()),
            line: later.as_ref().map_or(0, |(s, _)| s.line),
            earlier_line: earlier.as_ref().map_or(0, |(s, _)| s.line),
            source: later.as_ref().and_then(|(s, _)| s.source.clone()),
            earlier_source: earlier.as_ref().and_then(|(s, _)| s.source.clone()),
            count: 1,
            report,
            key,
        }
    }

    /// The fault log's device address, creating the log on first use
    /// (modules with checks get it in their module data at load).
    pub(crate) fn log_address(&mut self, device: &Arc<Device>) -> Result<u64> {
        if let Some(l) = &self.log {
            return Ok(l.address);
        }
        let capacity = if self.mode == FaultMode::Memcheck || self.race { MEMCHECK_RECORDS } else { CHECK_RECORDS };
        let size = fault::RECORDS + fault::RECORD_BYTES * capacity as u64;
        let l = Arc::new(host_buffer(device, size, "ptxvk fault log")?);
        let mut header = [0u8; fault::RECORDS as usize];
        header[fault::CAPACITY as usize..fault::CAPACITY as usize + 4].copy_from_slice(&capacity.to_le_bytes());
        l.write(0, &header)?;
        let address = l.address;
        self.log = Some(l);
        Ok(address)
    }

    /// Makes the range table current for a launch: returns its search
    /// depth, and the address of a new table when the ranges changed, which
    /// the caller stores in the log's [`fault::RANGES`] word in stream
    /// order (work queued earlier keeps the table, and the depth, it was
    /// launched with).
    pub(crate) fn prepare(&mut self, device: &Arc<Device>, live: Vec<Range>) -> Result<(u32, Option<u64>)> {
        self.log_address(device)?;
        let ranges = merge(live, self.mode == FaultMode::Checks);
        let queued = std::mem::replace(&mut self.queued, true);
        if self.table.is_some() && ranges == self.uploaded {
            return Ok((self.depth, None));
        }
        let depth = ranges.len().max(1).next_power_of_two().trailing_zeros();
        if depth > fault::MAX_DEPTH {
            return Err(Error::Unsupported(format!(
                "{} live allocations are more than the fault checks' table holds",
                ranges.len()
            )));
        }
        // The depth only grows: each change of it builds new pipelines.
        self.depth = self.depth.max(depth);
        let slots = 1usize << self.depth;
        let mut bytes = Vec::with_capacity(slots * fault::RANGE_BYTES as usize);
        for i in 0..slots {
            let (b, e) = ranges.get(i).copied().unwrap_or((u64::MAX, 0));
            bytes.extend_from_slice(&b.to_le_bytes());
            bytes.extend_from_slice(&e.to_le_bytes());
        }
        let t = Arc::new(host_buffer(device, bytes.len() as u64, "ptxvk fault ranges")?);
        t.write(0, &bytes)?;
        let address = t.address;
        if let Some(old) = self.table.replace(t) {
            self.retired.push(old);
        }
        self.uploaded = ranges;
        if !queued {
            // No queued kernel reads the log: store the address now.
            if let Some(log) = &self.log {
                log.write(fault::RANGES, &address.to_le_bytes())?;
                return Ok((self.depth, None));
            }
        }
        Ok((self.depth, Some(address)))
    }

    /// The fault log, once created.
    pub(crate) fn log(&self) -> Option<Arc<Buffer>> {
        self.log.clone()
    }

    /// Forgets the tables replaced before the work completed so far (all of it).
    pub(crate) fn work_done(&mut self) {
        self.retired.clear();
        self.queued = false;
    }

    /// The records written since the last call, and how many faults there
    /// were in all (records past the capacity are only counted); resets
    /// the log. Called after all work has completed.
    pub(crate) fn take(&mut self) -> Result<(u32, Vec<Record>)> {
        let (held_count, mut held) = std::mem::take(&mut self.held);
        let Some(log) = &self.log else { return Ok((held_count, held)) };
        let mut head = [0u8; 8];
        log.read(fault::COUNT, &mut head)?;
        let count = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let capacity = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if count == 0 {
            return Ok((held_count, held));
        }
        let n = count.min(capacity) as usize;
        let mut raw = vec![0u8; n * fault::RECORD_BYTES as usize];
        log.read(fault::RECORDS, &mut raw)?;
        log.write(fault::COUNT, &0u32.to_le_bytes())?;
        let u32_at = |r: &[u8], o: u64| u32::from_le_bytes(r[o as usize..o as usize + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |r: &[u8], o: u64| u64::from_le_bytes(r[o as usize..o as usize + 8].try_into().unwrap_or([0; 8]));
        let records = raw
            .chunks_exact(fault::RECORD_BYTES as usize)
            .map(|r| Record {
                address: u64_at(r, fault::R_ADDRESS),
                module: u64_at(r, fault::R_MODULE),
                site: u32_at(r, fault::R_SITE),
                kind: u32_at(r, fault::R_KIND),
                ctaid: [0, 1, 2].map(|i| u32_at(r, fault::R_CTAID + 4 * i)),
                tid: [0, 1, 2].map(|i| u32_at(r, fault::R_TID + 4 * i)),
            })
            .collect::<Vec<_>>();
        held.extend(records);
        Ok((held_count + count, held))
    }

    /// One report of `r` (compute-sanitizer's layout); `nearest` is the
    /// allocation closest to a global address, `(base, size)`, and `freed`
    /// the freed allocation that contained it, if any.
    pub(crate) fn describe(
        &self,
        r: &Record,
        kernel: &str,
        nearest: Option<(u64, u64)>,
        freed: Option<(u64, u64)>,
    ) -> String {
        let site = self.sites.get(&r.module).and_then(|(s, f)| s.get(r.site as usize).map(|s| (s, f)));
        let mut out = String::new();
        let (what, space) = match site {
            Some((s, _)) => (
                format!("{} of size {} bytes", s.access.name(), s.bytes),
                match s.space {
                    fault::SPACE_SHARED => "__shared__",
                    fault::SPACE_LOCAL => "__local__",
                    _ => "__global__",
                },
            ),
            None => ("access".to_string(), "__global__"),
        };
        let kind = if r.kind == fault::KIND_MISALIGNED { "Misaligned" } else { "Invalid" };
        let _ = writeln!(out, "========= {kind} {space} {what}");
        let function = site.map_or(kernel, |(s, _)| s.function.as_str());
        match site {
            Some((s, file)) => {
                let _ = write!(out, "=========     at {function} ({file}:{}:{})", s.line, s.column);
                if let Some(src) = &s.source {
                    let _ = write!(out, " [{src}]");
                }
                let _ = writeln!(out);
            }
            None => {
                let _ = writeln!(out, "=========     at {function}");
            }
        }
        let [tx, ty, tz] = r.tid;
        let [bx, by, bz] = r.ctaid;
        let _ = writeln!(out, "=========     by thread ({tx},{ty},{tz}) in block ({bx},{by},{bz}) of kernel {kernel}");
        let global = site.is_none_or(|(s, _)| s.space == fault::SPACE_GLOBAL);
        if r.kind == fault::KIND_MISALIGNED {
            let _ = writeln!(out, "=========     Address {:#x} is misaligned", r.address);
        } else if !global {
            let _ = writeln!(out, "=========     Address {:#x} is out of bounds", r.address);
        } else if let Some((base, size)) = freed {
            let _ = writeln!(out, "=========     Address {:#x} is in freed memory (use after free)", r.address);
            let _ = writeln!(
                out,
                "=========     it is {} bytes inside an allocation at {base:#x} of size {size} bytes that was freed",
                r.address - base
            );
        } else {
            let _ = writeln!(out, "=========     Address {:#x} is out of bounds", r.address);
            if let Some((base, size)) = nearest {
                let rel = if r.address < base {
                    format!("{} bytes before", base - r.address)
                } else if r.address >= base.saturating_add(size) {
                    format!("{} bytes after", r.address - (base + size))
                } else {
                    // The access starts inside and ends past the end.
                    format!("{} bytes inside", r.address - base)
                };
                let _ = writeln!(
                    out,
                    "=========     and is {rel} the nearest allocation at {base:#x} of size {size} bytes"
                );
            }
        }
        out
    }
}

/// Sorted, disjoint `[base, end)` ranges (touching ones merge only with
/// `by_block`); with `by_block`, ranges of the same memory block merge
/// with everything between them.
pub(crate) fn merge(mut live: Vec<Range>, by_block: bool) -> Vec<(u64, u64)> {
    if by_block {
        let mut blocks: HashMap<(vk::DeviceMemory, u64), (u64, u64)> = HashMap::new();
        let mut rest = Vec::new();
        for r in live {
            match r.block {
                Some(b) => {
                    let e = blocks.entry(b).or_insert((r.base, r.end));
                    e.0 = e.0.min(r.base);
                    e.1 = e.1.max(r.end);
                }
                None => rest.push(r),
            }
        }
        live = rest;
        live.extend(blocks.into_values().map(|(base, end)| Range { base, end, block: None }));
    }
    live.retain(|r| r.end > r.base);
    live.sort_by_key(|r| r.base);
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(live.len());
    for r in live {
        match out.last_mut() {
            // Exact ranges that only touch stay apart: pieces of one chunk
            // lie end to end, and an access that crosses from one into the
            // next is the memcheck's to report.
            Some(last) if r.base < last.1 || (by_block && r.base == last.1) => last.1 = last.1.max(r.end),
            _ => out.push((r.base, r.end)),
        }
    }
    out
}

/// A host-visible buffer kernels read and write through its address.
fn host_buffer(device: &Arc<Device>, size: u64, name: &str) -> Result<Buffer> {
    Buffer::new(
        device,
        size,
        vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
        MemoryLocation::GpuToCpu,
        16,
        name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ash::vk::Handle as _;

    fn r(base: u64, end: u64, block: Option<u64>) -> Range {
        Range { base, end, block: block.map(|b| (vk::DeviceMemory::from_raw(b), 0)) }
    }

    #[test]
    fn ranges_of_one_block_merge_only_by_block() {
        let live = vec![r(0x1000, 0x1100, Some(1)), r(0x3000, 0x3100, Some(1)), r(0x2000, 0x2010, None)];
        assert_eq!(merge(live.clone(), false), vec![(0x1000, 0x1100), (0x2000, 0x2010), (0x3000, 0x3100)]);
        assert_eq!(merge(live, true), vec![(0x1000, 0x3100)]);
    }

    #[test]
    fn touching_and_empty_ranges() {
        let live = vec![r(0x100, 0x200, None), r(0x200, 0x300, None), r(0x400, 0x400, None)];
        assert_eq!(merge(live.clone(), false), vec![(0x100, 0x200), (0x200, 0x300)]);
        assert_eq!(merge(live, true), vec![(0x100, 0x300)]);
    }
}
