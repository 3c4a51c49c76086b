//! A fast, deterministic hasher for the translator's internal maps (FxHash:
//! rotate, xor, multiply per word). SipHash, std's default, was a tenth of a
//! full translation (type and constant lookups in the emitter, register and
//! name lookups); the keys are names from one module and ids the translator
//! made, so hash flooding is not a concern here (but keys that differ only
//! in their high bytes are common: see `finish`).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub(crate) struct Fx(u64);

impl Fx {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        // The multiply carries low bits up only: without this mix (the
        // splitmix64 finalizer), names that differ only past their first
        // bytes (`%r123456`: the prefix is the low bytes) share hashbrown's
        // bucket bits and every lookup is a long probe.
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // The tail as a little-endian word padded with zeros, byte by
            // byte: a `copy_from_slice` of a variable length is a `memcpy`
            // call, which cost more than the rest of hashing a short name.
            let mut w = 0u64;
            for (i, &b) in rest.iter().enumerate() {
                w |= u64::from(b) << (8 * i);
            }
            self.add(w);
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

pub(crate) type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;
pub(crate) type FxHashSet<K> = HashSet<K, BuildHasherDefault<Fx>>;
