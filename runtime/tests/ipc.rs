//! Memory shared between processes (CUDA IPC): an allocation exported as an
//! opaque file descriptor and imported again. Vulkan lets the importer be
//! any instance on a device with the same UUID, so a second context of the
//! same process stands in for the other process here; the libcuda tests
//! cross a real process boundary.
#![cfg(unix)]

mod common;

use common::{assert_clean, context, Lcg};
use ptxvk_runtime::{Context, Error};

/// An exporting and an importing context, or `None` (the test is skipped)
/// when the device cannot share memory.
fn exporter_and_importer() -> Option<(Context, Context)> {
    let exporter = context();
    if !exporter.info().supports_ipc_memory {
        eprintln!("skipped: {} cannot share memory", exporter.info().name);
        return None;
    }
    Some((exporter, context()))
}

#[test]
fn exported_memory_is_shared_with_an_importer() {
    let Some((exporter, importer)) = exporter_and_importer() else { return };
    let mut rng = Lcg(0x1bc);
    let n = 70_001usize;
    let data = rng.bytes(n);
    let a = exporter.alloc(n as u64).unwrap();
    exporter.copy_htod(a, &data).unwrap();
    // Queued work is submitted at synchronisation points.
    exporter.synchronize().unwrap();
    let e = exporter.export_memory(a).unwrap();
    assert_eq!(e.size, n as u64);
    assert!(e.buffer_size >= e.size && e.memory_size >= e.buffer_size);
    // Exporting again names the same allocation.
    assert_eq!(exporter.export_memory(a).unwrap(), e);

    let b = importer.import_memory(exporter.exported_memory_fd(e.id).unwrap(), &e).unwrap();
    assert_eq!(importer.allocation_of(b + 5), Some((b, n as u64)));
    let mut seen = vec![0xa5u8; n];
    importer.copy_dtoh(&mut seen, b).unwrap();
    assert!(seen == data, "the importer reads what the exporter wrote");

    // Writes through the importer land in the exporter's allocation.
    let patch = rng.bytes(4096);
    importer.copy_htod(b + 1000, &patch).unwrap();
    importer.synchronize().unwrap();
    let mut back = vec![0x5au8; n];
    exporter.copy_dtoh(&mut back, a).unwrap();
    let mut want = data.clone();
    want[1000..1000 + 4096].copy_from_slice(&patch);
    assert!(back == want, "the exporter reads what the importer wrote");

    // Imported memory is not the importer's to free; closing it twice fails.
    assert!(matches!(importer.free(b), Err(Error::InvalidValue(_))));
    importer.close_imported(b).unwrap();
    assert!(matches!(importer.close_imported(b), Err(Error::InvalidValue(_))));
    assert_eq!(importer.allocation_of(b), None);

    // Only the base of a device allocation can be exported.
    assert!(matches!(exporter.export_memory(a + 256), Err(Error::InvalidValue(_))));
    let (mapped, _) = exporter.alloc_mapped(4096).unwrap();
    assert!(matches!(exporter.export_memory(mapped), Err(Error::InvalidValue(_))));
    exporter.free(mapped).unwrap();
    // A freed allocation has no descriptor any more.
    exporter.free(a).unwrap();
    assert!(matches!(exporter.exported_memory_fd(e.id), Err(Error::NotFound(_))));
    assert_clean(&exporter);
    assert_clean(&importer);
}

#[test]
fn pieces_of_one_chunk_are_imported_at_their_own_offsets() {
    // Small allocations are carved from shared chunks: each exported piece
    // names the chunk's memory and its own offset in it.
    let Some((exporter, importer)) = exporter_and_importer() else { return };
    let mut rng = Lcg(0x9c4);
    let sizes = [1usize, 300, 4096, 70_001, 256];
    let pieces: Vec<(u64, Vec<u8>)> = sizes
        .iter()
        .map(|&n| {
            let d = exporter.alloc(n as u64).unwrap();
            let data = rng.bytes(n);
            exporter.copy_htod(d, &data).unwrap();
            (d, data)
        })
        .collect();
    exporter.synchronize().unwrap();
    let handles: Vec<_> = pieces.iter().map(|(d, _)| exporter.export_memory(*d).unwrap()).collect();
    assert!(handles.iter().any(|e| e.offset != 0), "some pieces share a chunk: {handles:?}");
    let mut opened = Vec::new();
    for ((_, data), e) in pieces.iter().zip(&handles) {
        assert_eq!(e.size, data.len() as u64);
        let b = importer.import_memory(exporter.exported_memory_fd(e.id).unwrap(), e).unwrap();
        assert_eq!(importer.allocation_of(b), Some((b, data.len() as u64)));
        let mut seen = vec![0xa5u8; data.len()];
        importer.copy_dtoh(&mut seen, b).unwrap();
        assert!(&seen == data, "piece at offset {} reads its own bytes", e.offset);
        opened.push(b);
    }
    // A write through one imported piece lands in that piece alone.
    let patch = rng.bytes(200);
    importer.copy_htod(opened[2] + 100, &patch).unwrap();
    importer.synchronize().unwrap();
    for (i, (d, data)) in pieces.iter().enumerate() {
        let mut back = vec![0u8; data.len()];
        exporter.copy_dtoh(&mut back, *d).unwrap();
        let mut want = data.clone();
        if i == 2 {
            want[100..300].copy_from_slice(&patch);
        }
        assert!(back == want, "piece {i} after the importer's write");
    }
    // A handle whose offset or size leaves the chunk is refused.
    let mut bad = handles[1];
    bad.offset = bad.buffer_size;
    let fd = exporter.exported_memory_fd(bad.id).unwrap();
    assert!(matches!(importer.import_memory(fd, &bad), Err(Error::InvalidValue(_))));
    for b in opened {
        importer.close_imported(b).unwrap();
    }
    for (d, _) in pieces {
        exporter.free(d).unwrap();
    }
    assert_clean(&exporter);
    assert_clean(&importer);
}
