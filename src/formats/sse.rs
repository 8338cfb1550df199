//! Server-sent events framing on raw bytes.
//!
//! Network chunks split events anywhere: mid-line, mid multi-byte UTF-8
//! character, between the CR and LF of a CRLF. The parser carries the
//! incomplete tail (bounded) and hands out each complete event as soon as its
//! terminating blank line arrives.

use crate::formats::swar;

/// Largest event (or partial line) we are willing to hold.
pub const MAX_EVENT_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// An event grew past [`MAX_EVENT_BYTES`].
    TooLarge,
    /// An event's data is not valid UTF-8.
    InvalidUtf8,
}

/// Where the first line ends (the first CR or LF): most of a stream's bytes
/// are JSON inside `data:` lines, so skip them a word at a time.
fn line_end(bytes: &[u8]) -> Option<usize> {
    let clean = swar::skip_words(bytes, |w| {
        swar::has_byte(w, b'\n') || swar::has_byte(w, b'\r')
    });
    bytes
        .get(clean..)?
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map(|pos| clean + pos)
}

#[derive(Debug)]
pub struct SseParser {
    /// Unconsumed bytes: at most one partial line.
    carry: Vec<u8>,
    /// A CR ended the previous chunk: a LF starting the next one belongs to it.
    pending_cr: bool,
    event: String,
    data: Vec<u8>,
    has_data: bool,
    max: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_limit(MAX_EVENT_BYTES)
    }
}

impl SseParser {
    pub fn with_limit(max: usize) -> Self {
        Self {
            carry: Vec::new(),
            pending_cr: false,
            event: String::new(),
            data: Vec::new(),
            has_data: false,
            max,
        }
    }

    /// Feeds one chunk; calls `on_event(event_name, data)` for each complete
    /// event. The event name is "" when the event had no `event:` field.
    pub fn feed<E>(
        &mut self,
        mut input: &[u8],
        on_event: &mut impl FnMut(&str, &str) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<SseError>,
    {
        if input.is_empty() {
            return Ok(());
        }
        if self.pending_cr {
            self.pending_cr = false;
            if let Some(rest) = input.strip_prefix(b"\n") {
                input = rest;
            }
        }
        while let Some(pos) = line_end(input) {
            let (line_part, rest) = input.split_at(pos);
            let terminator = rest.first().copied();
            let mut rest = rest.get(1..).unwrap_or_default();
            if terminator == Some(b'\r') {
                match rest.first() {
                    Some(b'\n') => rest = rest.get(1..).unwrap_or_default(),
                    None => self.pending_cr = true,
                    Some(_) => {}
                }
            }
            if self.carry.is_empty() {
                self.line(line_part, on_event)?;
            } else {
                self.push_carry(line_part)?;
                let line = std::mem::take(&mut self.carry);
                let result = self.line(&line, on_event);
                // Keep the allocation for the next partial line.
                self.carry = line;
                self.carry.clear();
                result?;
            }
            input = rest;
        }
        self.push_carry(input)?;
        Ok(())
    }

    fn push_carry(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.carry.len() + bytes.len() > self.max {
            return Err(SseError::TooLarge);
        }
        self.carry.extend_from_slice(bytes);
        Ok(())
    }

    fn line<E>(
        &mut self,
        line: &[u8],
        on_event: &mut impl FnMut(&str, &str) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<SseError>,
    {
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if line.first() == Some(&b':') {
            return Ok(()); // comment
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let (f, v) = line.split_at(i);
                let v = v.get(1..).unwrap_or_default();
                (f, v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.data.len() + value.len() + 1 > self.max {
                    return Err(SseError::TooLarge.into());
                }
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                let name = std::str::from_utf8(value).map_err(|_| SseError::InvalidUtf8)?;
                self.event.clear();
                self.event.push_str(name);
            }
            _ => {} // id, retry and unknown fields do not matter to us
        }
        Ok(())
    }

    fn dispatch<E>(
        &mut self,
        on_event: &mut impl FnMut(&str, &str) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<SseError>,
    {
        if !self.has_data {
            self.event.clear();
            return Ok(());
        }
        let result = match std::str::from_utf8(&self.data) {
            Ok(data) => on_event(&self.event, data),
            Err(_) => Err(SseError::InvalidUtf8.into()),
        };
        self.event.clear();
        self.data.clear();
        self.has_data = false;
        result
    }

    /// True when bytes of an unfinished event are held back.
    pub fn has_partial(&self) -> bool {
        !self.carry.is_empty() || self.has_data
    }
}

/// Appends one `data: <json>\n\n` event.
pub fn write_data(out: &mut Vec<u8>, json: &[u8]) {
    out.reserve(json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&[u8]]) -> Result<Vec<(String, String)>, SseError> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut |e: &str, d: &str| {
                events.push((e.to_owned(), d.to_owned()));
                Ok::<(), SseError>(())
            })?;
        }
        Ok(events)
    }

    const STREAM: &str = "event: message_start\ndata: {\"a\":1}\n\n: a comment\r\n\r\nevent: delta\r\ndata: h\u{e9}llo \u{4f60}\u{597d} \u{1f30d}\r\n\r\ndata: line1\ndata:line2\n\nid: 7\nretry: 10\n\ndata: [DONE]\r\r";

    fn expected() -> Vec<(String, String)> {
        vec![
            ("message_start".into(), "{\"a\":1}".into()),
            (
                "delta".into(),
                "h\u{e9}llo \u{4f60}\u{597d} \u{1f30d}".into(),
            ),
            ("".into(), "line1\nline2".into()),
            ("".into(), "[DONE]".into()),
        ]
    }

    #[test]
    fn parses_whole_stream() {
        assert_eq!(collect(&[STREAM.as_bytes()]).unwrap(), expected());
    }

    /// Property: every way of cutting the stream into 2 or 3 chunks gives the same events.
    #[test]
    fn every_split_gives_identical_events() {
        let bytes = STREAM.as_bytes();
        let want = expected();
        for i in 0..=bytes.len() {
            let (a, b) = bytes.split_at(i);
            assert_eq!(collect(&[a, b]).unwrap(), want, "split at {i}");
            for j in i..=bytes.len() {
                let (b1, b2) = bytes[i..].split_at(j - i);
                assert_eq!(collect(&[a, b1, b2]).unwrap(), want, "split at {i},{j}");
            }
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(collect(&singles).unwrap(), want);
    }

    #[test]
    fn events_come_out_as_soon_as_complete() {
        let mut parser = SseParser::default();
        let mut n = 0;
        let mut count = |_: &str, _: &str| {
            n += 1;
            Ok::<(), SseError>(())
        };
        parser.feed(b"data: 1\n\ndata: 2", &mut count).unwrap();
        assert!(parser.has_partial());
        parser.feed(b"\n\n", &mut count).unwrap();
        assert_eq!(n, 2);
        assert!(!parser.has_partial());
    }

    #[test]
    fn bounded() {
        let mut parser = SseParser::with_limit(16);
        let r = parser.feed(&[b'x'; 40], &mut |_: &str, _: &str| Ok::<(), SseError>(()));
        assert_eq!(r, Err(SseError::TooLarge));
        let mut parser = SseParser::with_limit(16);
        let r = parser.feed(
            b"data: 0123456789\ndata: 0123456789\n",
            &mut |_: &str, _: &str| Ok::<(), SseError>(()),
        );
        assert_eq!(r, Err(SseError::TooLarge));
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let r = collect(&[b"data: \xff\xfe\n\n"]);
        assert_eq!(r, Err(SseError::InvalidUtf8));
    }
}
