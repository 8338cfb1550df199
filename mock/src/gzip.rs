//! gzip (RFC 1952) with stored deflate blocks (RFC 1951 BTYPE 00): a real,
//! decodable gzip stream without a compressor, which is all a test of
//! "does anything send or accept compressed bodies" needs. Streams are
//! wrapped piece by piece, so SSE stays incremental.

const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
const MAX_BLOCK: usize = 65_535;

/// Whether an `accept-encoding` value accepts gzip (q=0 excluded).
pub fn accepted(accept_encoding: Option<&str>) -> bool {
    accept_encoding.is_some_and(|v| {
        v.split(',').any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or("");
            let refused = parts.any(|p| p.replace(' ', "") == "q=0");
            (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
        })
    })
}

/// CRC-32 (IEEE) continued from `crc` (start with 0).
pub fn crc32_update(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A gzip stream written piece by piece.
#[derive(Default)]
pub struct Stream {
    started: bool,
    crc: u32,
    size: u32,
}

impl Stream {
    /// Appends `data` as stored blocks (after the header, the first time).
    pub fn push(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if !self.started {
            out.extend_from_slice(&HEADER);
            self.started = true;
        }
        for block in data.chunks(MAX_BLOCK) {
            stored_block(block, false, out);
        }
        self.crc = crc32_update(self.crc, data);
        self.size = self.size.wrapping_add(data.len() as u32);
    }

    /// Appends the final (empty) block and the trailer.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            out.extend_from_slice(&HEADER);
            self.started = true;
        }
        stored_block(&[], true, out);
        out.extend_from_slice(&self.crc.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
    }
}

fn stored_block(data: &[u8], last: bool, out: &mut Vec<u8>) {
    let len = u16::try_from(data.len()).unwrap_or(u16::MAX);
    out.push(u8::from(last));
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(data);
}

/// A whole body as gzip.
pub fn compress(data: &[u8]) -> Vec<u8> {
    let mut s = Stream::default();
    let mut out = Vec::with_capacity(data.len() + 32);
    s.push(data, &mut out);
    s.finish(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encoding_values() {
        assert!(accepted(Some("gzip, deflate, br")));
        assert!(accepted(Some("br;q=1.0, gzip;q=0.5")));
        assert!(!accepted(Some("gzip;q=0")));
        assert!(!accepted(Some("identity")));
        assert!(!accepted(None));
    }

    #[test]
    fn crc_and_layout() {
        assert_eq!(crc32_update(0, b"123456789"), 0xCBF4_3926);
        let z = compress(b"hi");
        assert_eq!(&z[..10], &HEADER);
        assert_eq!(&z[10..15], &[0, 2, 0, 0xfd, 0xff]);
        assert_eq!(&z[15..17], b"hi");
        assert_eq!(&z[17..22], &[1, 0, 0, 0xff, 0xff]);
        assert_eq!(&z[26..30], &2u32.to_le_bytes());
    }
}
