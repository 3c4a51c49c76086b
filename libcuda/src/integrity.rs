//! The keyed hash cudart's integrity check asks the driver for
//! ([`crate::export_table`], table INTEGRITY_CHECK).
//!
//! ZLUDA (`vosen/ZLUDA`, `dark_api/src/lib.rs`) reconstructed the
//! computation from NVIDIA's driver pass by pass; read as a whole, its
//! passes are HMAC (RFC 2104) over MD2 (RFC 1319) with a fixed 16-byte key,
//! and its mixing table is MD2's substitution table. This module implements
//! that from the RFCs. cudart 13.5 checks the answer (see `export_table`).

/// What the integrity hash covers, besides the devices.
#[derive(Clone, Copy, Debug)]
pub struct IntegrityInput {
    /// What `cuDriverGetVersion` reports.
    pub driver_version: u32,
    /// The `version` argument.
    pub version: u32,
    /// The process id.
    pub process: u32,
    /// The low 32 bits of `pthread_self()`.
    pub thread: u32,
    /// Address of the CUDART_INTERFACE table.
    pub cudart_table: u64,
    /// Address of the INTEGRITY_CHECK table.
    pub integrity_table: u64,
    /// Address of the integrity-check function (that table's slot 1).
    pub function: u64,
    /// The `unix_seconds` argument.
    pub unix_seconds: u64,
}

impl IntegrityInput {
    /// The 48 bytes hashed: the C struct `{u32 driver_version, version,
    /// process, thread; void *cudart_table, *integrity_table, *function;
    /// u64 unix_seconds}`, little-endian.
    fn bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(48);
        for v in [self.driver_version, self.version, self.process, self.thread] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.cudart_table, self.integrity_table, self.function, self.unix_seconds] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }
}

/// The key of the integrity hash (ZLUDA: the result of a first pass that
/// uses no input).
const INTEGRITY_KEY: [u8; 16] =
    [0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52, 0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f];

/// The answer to an integrity check: for `version % 10` of 0 and 1 fixed
/// values; otherwise HMAC-MD2 (RFC 2104 over RFC 1319, block size 16) keyed
/// with `INTEGRITY_KEY` of the input's bytes followed by each device's,
/// the digest read as two little-endian `u64`s. (ZLUDA transcribes the
/// computation pass by pass; its passes are HMAC's inner and outer hash, and
/// its mixing table is MD2's substitution table.)
pub fn integrity_hash(input: &IntegrityInput, devices: &[[u8; 28]]) -> [u64; 2] {
    match input.version % 10 {
        0 => return [0x3341_181C_03CB_675C, 0x8ED3_83AA_1F4C_D1E8],
        1 => return [0x1841_181C_03CB_675C, 0x8ED3_83AA_1F4C_D1E8],
        _ => {}
    }
    let mut message = input.bytes();
    for d in devices {
        message.extend_from_slice(d);
    }
    let digest = hmac_md2(&INTEGRITY_KEY, &message);
    let (lo, hi) = digest.split_at(8);
    [u64::from_le_bytes(lo.try_into().unwrap_or_default()), u64::from_le_bytes(hi.try_into().unwrap_or_default())]
}

/// HMAC (RFC 2104) over MD2 with a 16-byte key (MD2's block size).
fn hmac_md2(key: &[u8; 16], message: &[u8]) -> [u8; 16] {
    let mut inner = Md2::new();
    inner.update(&key.map(|k| k ^ 0x36));
    inner.update(message);
    let inner = inner.finish();
    let mut outer = Md2::new();
    outer.update(&key.map(|k| k ^ 0x5c));
    outer.update(&inner);
    outer.finish()
}

/// MD2's substitution table (RFC 1319, section 3.2: "a random permutation
/// constructed from the digits of pi").
const MD2_S: [u8; 256] = [
    41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19, //
    98, 167, 5, 243, 192, 199, 115, 140, 152, 147, 43, 217, 188, 76, 130, 202, //
    30, 155, 87, 60, 253, 212, 224, 22, 103, 66, 111, 24, 138, 23, 229, 18, //
    190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47, 238, 122, //
    169, 104, 121, 145, 21, 178, 7, 63, 148, 194, 16, 137, 11, 34, 95, 33, //
    128, 127, 93, 154, 90, 144, 50, 39, 53, 62, 204, 231, 191, 247, 151, 3, //
    255, 25, 48, 179, 72, 165, 181, 209, 215, 94, 146, 42, 172, 86, 170, 198, //
    79, 184, 56, 210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4, 241, //
    69, 157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45, 168, 2, //
    27, 96, 37, 173, 174, 176, 185, 246, 28, 70, 97, 105, 52, 64, 126, 15, //
    85, 71, 163, 35, 221, 81, 175, 58, 195, 92, 249, 206, 186, 197, 234, 38, //
    44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205, 244, 65, 129, 77, 82, //
    106, 220, 55, 200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74, //
    120, 136, 149, 139, 227, 99, 232, 109, 233, 203, 213, 254, 59, 0, 29, 57, //
    242, 239, 183, 14, 102, 88, 208, 228, 166, 119, 114, 248, 235, 117, 75, 10, //
    49, 68, 80, 180, 143, 237, 31, 26, 219, 153, 141, 51, 159, 17, 131, 20, //
];

/// MD2 (RFC 1319) over a byte stream.
struct Md2 {
    /// The 48-byte state X.
    state: [u8; 48],
    /// The running checksum C.
    checksum: [u8; 16],
    /// The last checksum byte L.
    last: u8,
    /// Bytes of the block being filled.
    block: [u8; 16],
    /// How many of them.
    filled: usize,
}

impl Md2 {
    fn new() -> Md2 {
        Md2 { state: [0; 48], checksum: [0; 16], last: 0, block: [0; 16], filled: 0 }
    }

    fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.block[self.filled] = b;
            self.filled += 1;
            if self.filled == 16 {
                let block = self.block;
                self.compress(&block);
                self.add_to_checksum(&block);
                self.filled = 0;
            }
        }
    }

    /// Section 3.4: mixes one block into the state.
    fn compress(&mut self, block: &[u8; 16]) {
        for (j, &m) in block.iter().enumerate() {
            self.state[16 + j] = m;
            self.state[32 + j] = m ^ self.state[j];
        }
        let mut t = 0u8;
        for round in 0..18u8 {
            for x in self.state.iter_mut() {
                *x ^= MD2_S[usize::from(t)];
                t = *x;
            }
            t = t.wrapping_add(round);
        }
    }

    /// Section 3.2 (with the RFC's erratum: `C[j]` is xored, not set).
    fn add_to_checksum(&mut self, block: &[u8; 16]) {
        for (c, &m) in self.checksum.iter_mut().zip(block) {
            *c ^= MD2_S[usize::from(m ^ self.last)];
            self.last = *c;
        }
    }

    /// Pads (section 3.1), appends the checksum (3.2) and returns the digest.
    fn finish(mut self) -> [u8; 16] {
        let pad = 16 - self.filled;
        self.update(&vec![pad as u8; pad]);
        let checksum = self.checksum;
        self.compress(&checksum);
        let mut digest = [0u8; 16];
        digest.copy_from_slice(&self.state[..16]);
        digest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn md2(data: &[u8]) -> [u8; 16] {
        let mut h = Md2::new();
        h.update(data);
        h.finish()
    }

    #[test]
    fn md2_matches_rfc_1319_test_suite() {
        // RFC 1319, appendix A.5.
        assert_eq!(hex(&md2(b"")), "8350e5a3e24c153df2275c9f80692773");
        assert_eq!(hex(&md2(b"a")), "32ec01ec4a6dac72c0ab96fb34c0b5d1");
        assert_eq!(hex(&md2(b"abc")), "da853b0d3f88d99b30283a69e6ded6bb");
        assert_eq!(hex(&md2(b"message digest")), "ab4f496bfb2a530b219ff33031fe06b0");
        assert_eq!(hex(&md2(b"abcdefghijklmnopqrstuvwxyz")), "4e8ddff3650292ab5a4108c3aa47940b");
        let digits = b"12345678901234567890123456789012345678901234567890123456789012345678901234567890";
        assert_eq!(hex(&md2(digits)), "d5976f79d83d3a0dc9806c3c66f3efd8");
    }

    #[test]
    fn md2_streams_in_any_pieces() {
        let data: Vec<u8> = (0..200u32).map(|i| (i * 37 % 251) as u8).collect();
        let whole = md2(&data);
        for cut in [0, 1, 15, 16, 17, 100, 199, 200] {
            let mut h = Md2::new();
            h.update(&data[..cut]);
            h.update(&data[cut..]);
            assert_eq!(h.finish(), whole, "split at {cut}");
        }
    }

    #[test]
    fn integrity_hash_fixed_versions_and_inputs_matter() {
        let input = IntegrityInput {
            driver_version: 13050,
            version: 10,
            process: 1234,
            thread: 0xdead_beef,
            cudart_table: 0x7f00_0000_1000,
            integrity_table: 0x7f00_0000_2000,
            function: 0x7f00_0000_3000,
            unix_seconds: 1_700_000_000,
        };
        assert_eq!(integrity_hash(&input, &[]), [0x3341_181C_03CB_675C, 0x8ED3_83AA_1F4C_D1E8]);
        let v2 = IntegrityInput { version: 12, ..input };
        let device = [7u8; 28];
        let h = integrity_hash(&v2, &[device]);
        assert_ne!(h, integrity_hash(&v2, &[]));
        assert_ne!(h, integrity_hash(&IntegrityInput { unix_seconds: 1_700_000_001, ..v2 }, &[device]));
        assert_eq!(h, integrity_hash(&v2, &[device]));
        assert_eq!(input.bytes().len(), 48);
    }
}
