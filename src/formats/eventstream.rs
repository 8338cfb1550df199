//! The AWS event stream binary framing (`application/vnd.amazon.eventstream`),
//! as Bedrock's `converse-stream` sends it.
//!
//! Each message: prelude (total length u32, headers length u32, CRC32 of those
//! 8 bytes), headers, payload, CRC32 of everything before it; integers are
//! big-endian. Network chunks split messages anywhere: the decoder carries the
//! incomplete tail (bounded) and hands out each message once both CRCs check.

/// Largest message we are willing to hold.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// Prelude (12 bytes) plus the trailing message CRC (4 bytes).
const MIN_MESSAGE_BYTES: usize = 16;
const PRELUDE_BYTES: usize = 12;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A message announced a length over the limit (or under the minimum).
    BadLength(u32),
    PreludeCrc,
    MessageCrc,
    /// The header block does not parse.
    BadHeaders(&'static str),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BadLength(n) => write!(f, "a message length of {n} bytes"),
            Self::PreludeCrc => f.write_str("a prelude CRC mismatch"),
            Self::MessageCrc => f.write_str("a message CRC mismatch"),
            Self::BadHeaders(why) => write!(f, "malformed headers ({why})"),
        }
    }
}

/// A header value, by its wire type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    Bool(bool),
    Byte(i8),
    Short(i16),
    Int(i32),
    Long(i64),
    Bytes(Vec<u8>),
    String(String),
    Timestamp(i64),
    Uuid([u8; 16]),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    pub headers: Vec<(String, HeaderValue)>,
    pub payload: Vec<u8>,
}

impl Message {
    /// A string header's value (`:message-type`, `:event-type`...).
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|(n, v)| match v {
            HeaderValue::String(s) if n == name => Some(s.as_str()),
            _ => None,
        })
    }
}

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), table-driven.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32_update(0, bytes)
}

fn crc32_update(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in bytes {
        let slot = usize::from((c as u8) ^ b);
        c = CRC_TABLE.get(slot).copied().unwrap_or(0) ^ (c >> 8);
    }
    !c
}

// Evaluated at compile time: an out-of-range index would fail the build, not panic.
#[allow(clippy::indexing_slicing)]
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
};

/// Incremental decoder: feed network chunks, get whole messages.
#[derive(Debug)]
pub struct EventStreamDecoder {
    /// Bytes of at most one incomplete message.
    carry: Vec<u8>,
    max: usize,
}

impl Default for EventStreamDecoder {
    fn default() -> Self {
        Self::with_limit(MAX_MESSAGE_BYTES)
    }
}

impl EventStreamDecoder {
    pub fn with_limit(max: usize) -> Self {
        Self {
            carry: Vec::new(),
            max,
        }
    }

    /// Feeds one chunk; calls `on_message` for each complete, verified message.
    /// After an error the stream cannot be resynchronised: stop feeding.
    pub fn feed<E>(
        &mut self,
        input: &[u8],
        on_message: &mut impl FnMut(Message) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<FrameError>,
    {
        let mut input = input;
        // Complete the carried message first, taking only the bytes it needs.
        while !self.carry.is_empty() && !input.is_empty() {
            let want = match self.announced_length(&self.carry)? {
                Some(total) => total,
                None => PRELUDE_BYTES,
            };
            let take = want.saturating_sub(self.carry.len()).min(input.len());
            let (head, rest) = input.split_at(take);
            self.carry.extend_from_slice(head);
            input = rest;
            if self.carry.len() == want && want > PRELUDE_BYTES {
                let message = parse_message(&self.carry)?;
                self.carry.clear();
                on_message(message)?;
            }
        }
        // Then whole messages straight from the input, without copying them.
        loop {
            match self.announced_length(input)? {
                Some(total) if input.len() >= total => {
                    let (whole, rest) = input.split_at(total);
                    on_message(parse_message(whole)?)?;
                    input = rest;
                }
                _ => break,
            }
        }
        self.carry.extend_from_slice(input);
        Ok(())
    }

    /// The total length a buffer's prelude announces, once its 12 bytes are there.
    fn announced_length(&self, bytes: &[u8]) -> Result<Option<usize>, FrameError> {
        let Some(prelude) = bytes.get(..PRELUDE_BYTES) else {
            return Ok(None);
        };
        let total = be_u32(prelude, 0);
        if crc32(prelude.get(..8).unwrap_or_default()) != be_u32(prelude, 8) {
            return Err(FrameError::PreludeCrc);
        }
        let total_len = total as usize;
        if total_len < MIN_MESSAGE_BYTES || total_len > self.max {
            return Err(FrameError::BadLength(total));
        }
        Ok(Some(total_len))
    }

    /// True when bytes of an unfinished message are held back.
    pub fn has_partial(&self) -> bool {
        !self.carry.is_empty()
    }
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    if let Some(src) = bytes.get(at..at + 4) {
        b.copy_from_slice(src);
    }
    u32::from_be_bytes(b)
}

/// Parses one whole message whose prelude CRC and length were checked.
fn parse_message(bytes: &[u8]) -> Result<Message, FrameError> {
    let total = bytes.len();
    let crc_at = total - 4;
    if crc32(bytes.get(..crc_at).unwrap_or_default()) != be_u32(bytes, crc_at) {
        return Err(FrameError::MessageCrc);
    }
    let headers_len = be_u32(bytes, 4) as usize;
    let payload_at = PRELUDE_BYTES + headers_len;
    if payload_at > crc_at {
        return Err(FrameError::BadHeaders("longer than the message"));
    }
    let headers = parse_headers(bytes.get(PRELUDE_BYTES..payload_at).unwrap_or_default())?;
    Ok(Message {
        headers,
        payload: bytes.get(payload_at..crc_at).unwrap_or_default().to_vec(),
    })
}

/// Reads `n` bytes from the front of `cursor`.
fn take<'a>(cursor: &mut &'a [u8], n: usize) -> Result<&'a [u8], FrameError> {
    if cursor.len() < n {
        return Err(FrameError::BadHeaders("truncated"));
    }
    let (head, rest) = cursor.split_at(n);
    *cursor = rest;
    Ok(head)
}

fn take_array<const N: usize>(cursor: &mut &[u8]) -> Result<[u8; N], FrameError> {
    let mut out = [0u8; N];
    out.copy_from_slice(take(cursor, N)?);
    Ok(out)
}

fn parse_headers(mut cursor: &[u8]) -> Result<Vec<(String, HeaderValue)>, FrameError> {
    let mut headers = Vec::new();
    while !cursor.is_empty() {
        let [name_len] = take_array::<1>(&mut cursor)?;
        let name = std::str::from_utf8(take(&mut cursor, usize::from(name_len))?)
            .map_err(|_| FrameError::BadHeaders("name is not UTF-8"))?
            .to_owned();
        let [kind] = take_array::<1>(&mut cursor)?;
        let value = match kind {
            0 => HeaderValue::Bool(true),
            1 => HeaderValue::Bool(false),
            2 => HeaderValue::Byte(i8::from_be_bytes(take_array(&mut cursor)?)),
            3 => HeaderValue::Short(i16::from_be_bytes(take_array(&mut cursor)?)),
            4 => HeaderValue::Int(i32::from_be_bytes(take_array(&mut cursor)?)),
            5 => HeaderValue::Long(i64::from_be_bytes(take_array(&mut cursor)?)),
            6 | 7 => {
                let len = u16::from_be_bytes(take_array(&mut cursor)?);
                let raw = take(&mut cursor, usize::from(len))?;
                if kind == 6 {
                    HeaderValue::Bytes(raw.to_vec())
                } else {
                    let s = std::str::from_utf8(raw)
                        .map_err(|_| FrameError::BadHeaders("string value is not UTF-8"))?;
                    HeaderValue::String(s.to_owned())
                }
            }
            8 => HeaderValue::Timestamp(i64::from_be_bytes(take_array(&mut cursor)?)),
            9 => HeaderValue::Uuid(take_array(&mut cursor)?),
            _ => return Err(FrameError::BadHeaders("unknown value type")),
        };
        headers.push((name, value));
    }
    Ok(headers)
}

/// Encodes a message with string headers: what tests and benchmarks need.
pub fn encode(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in headers {
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(7);
        block.extend_from_slice(&(value.len() as u16).to_be_bytes());
        block.extend_from_slice(value.as_bytes());
    }
    let total = (PRELUDE_BYTES + block.len() + payload.len() + 4) as u32;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(block.len() as u32).to_be_bytes());
    let prelude_crc = crc32(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&block);
    out.extend_from_slice(payload);
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&[u8]]) -> Result<Vec<Message>, FrameError> {
        let mut d = EventStreamDecoder::default();
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut |m| {
                out.push(m);
                Ok::<(), FrameError>(())
            })?;
        }
        assert!(!d.has_partial());
        Ok(out)
    }

    fn stream() -> (Vec<u8>, Vec<Message>) {
        type Part<'a> = (&'a [(&'a str, &'a str)], &'a [u8]);
        let parts: [Part; 3] = [
            (
                &[(":event-type", "messageStart"), (":message-type", "event")],
                br#"{"role":"assistant"}"#,
            ),
            (
                &[(":event-type", "contentBlockDelta")],
                "{\"delta\":{\"text\":\"h\u{e9}llo \u{1f30d}\"}}".as_bytes(),
            ),
            (&[], b""),
        ];
        let mut bytes = Vec::new();
        let mut want = Vec::new();
        for (headers, payload) in parts {
            bytes.extend(encode(headers, payload));
            want.push(Message {
                headers: headers
                    .iter()
                    .map(|(n, v)| (n.to_string(), HeaderValue::String(v.to_string())))
                    .collect(),
                payload: payload.to_vec(),
            });
        }
        (bytes, want)
    }

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    /// AWS's published test vector: a message with no headers and no payload.
    #[test]
    fn empty_message_vector() {
        let bytes = [
            0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x05, 0xc2, 0x48, 0xeb, 0x7d, 0x98,
            0xc8, 0xff,
        ];
        assert_eq!(encode(&[], b""), bytes);
        assert_eq!(collect(&[&bytes]).unwrap(), vec![Message::default()]);
    }

    #[test]
    fn decodes_whole_stream() {
        let (bytes, want) = stream();
        let got = collect(&[&bytes]).unwrap();
        assert_eq!(got, want);
        assert_eq!(got[0].header_str(":event-type"), Some("messageStart"));
        assert_eq!(got[0].header_str(":nope"), None);
    }

    /// Property: every way of cutting the stream into 2 or 3 chunks gives the same messages.
    #[test]
    fn every_split_gives_identical_messages() {
        let (bytes, want) = stream();
        for i in 0..=bytes.len() {
            let (a, rest) = bytes.split_at(i);
            assert_eq!(collect(&[a, rest]).unwrap(), want, "split at {i}");
            for j in i..=bytes.len() {
                let (b, c) = rest.split_at(j - i);
                assert_eq!(collect(&[a, b, c]).unwrap(), want, "split at {i},{j}");
            }
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(collect(&singles).unwrap(), want);
    }

    #[test]
    fn every_header_type_parses() {
        let mut block = Vec::new();
        let mut push = |name: &str, kind: u8, value: &[u8]| {
            block.push(name.len() as u8);
            block.extend_from_slice(name.as_bytes());
            block.push(kind);
            block.extend_from_slice(value);
        };
        push("t", 0, &[]);
        push("f", 1, &[]);
        push("b", 2, &[0xff]);
        push("s", 3, &[0x01, 0x02]);
        push("i", 4, &[0, 0, 0, 7]);
        push("l", 5, &[0, 0, 0, 0, 0, 0, 0, 9]);
        push("y", 6, &[0, 2, 0xde, 0xad]);
        push("ts", 8, &[0, 0, 0, 0, 0, 0, 0, 1]);
        push("u", 9, &[7; 16]);
        let total = (PRELUDE_BYTES + block.len() + 4) as u32;
        let mut bytes = total.to_be_bytes().to_vec();
        bytes.extend_from_slice(&(block.len() as u32).to_be_bytes());
        let c = crc32(&bytes);
        bytes.extend_from_slice(&c.to_be_bytes());
        bytes.extend_from_slice(&block);
        let c = crc32(&bytes);
        bytes.extend_from_slice(&c.to_be_bytes());
        let [m] = <[Message; 1]>::try_from(collect(&[&bytes]).unwrap()).unwrap();
        let values: Vec<HeaderValue> = m.headers.into_iter().map(|(_, v)| v).collect();
        assert_eq!(
            values,
            vec![
                HeaderValue::Bool(true),
                HeaderValue::Bool(false),
                HeaderValue::Byte(-1),
                HeaderValue::Short(0x0102),
                HeaderValue::Int(7),
                HeaderValue::Long(9),
                HeaderValue::Bytes(vec![0xde, 0xad]),
                HeaderValue::Timestamp(1),
                HeaderValue::Uuid([7; 16]),
            ]
        );
    }

    #[test]
    fn crc_failures_are_detected() {
        let (bytes, _) = stream();
        let mut bad_prelude = bytes.clone();
        bad_prelude[9] ^= 1;
        assert_eq!(collect(&[&bad_prelude]), Err(FrameError::PreludeCrc));
        let mut bad_payload = bytes.clone();
        bad_payload[30] ^= 0x20;
        assert_eq!(collect(&[&bad_payload]), Err(FrameError::MessageCrc));
        // Also when the damaged message arrives in pieces.
        let pieces: Vec<&[u8]> = bad_payload.chunks(5).collect();
        assert_eq!(collect(&pieces), Err(FrameError::MessageCrc));
    }

    #[test]
    fn bounded() {
        let big = encode(&[], &[b'x'; 100]);
        let mut d = EventStreamDecoder::with_limit(64);
        let r = d.feed(&big[..20], &mut |_| Ok::<(), FrameError>(()));
        assert_eq!(r, Err(FrameError::BadLength(116)));
        let mut tiny = encode(&[], b"");
        tiny[3] = 4;
        let c = crc32(&tiny[..8]);
        tiny[8..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(collect(&[&tiny]), Err(FrameError::BadLength(4)));
    }

    #[test]
    fn headers_longer_than_message_are_rejected() {
        let mut m = encode(&[], b"abcd");
        m[7] = 9;
        let c = crc32(&m[..8]);
        m[8..12].copy_from_slice(&c.to_be_bytes());
        let n = m.len();
        let c = crc32(&m[..n - 4]);
        m[n - 4..].copy_from_slice(&c.to_be_bytes());
        assert!(matches!(collect(&[&m]), Err(FrameError::BadHeaders(_))));
    }
}
