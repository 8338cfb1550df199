//! Writes server-sent events as an HTTP chunked body, applying the stream
//! scenario directives: `crlf`, `split`, `slow`, `cut` and `stream-error`.

use std::io::{self, Write};
use std::thread::sleep;
use std::time::Duration;

use crate::dialect::SseEvent;
use crate::http::{push_chunk, LAST_CHUNK};
use crate::scenario::Scenario;

/// `cut` strikes after this many content deltas, `stream-error` after
/// `ERROR_AFTER`: enough for a client to have forwarded some content.
const CUT_AFTER: usize = 2;
const ERROR_AFTER: usize = 3;
/// Pause between the tiny writes of `split`, so each leaves as its own
/// TCP segment.
const SPLIT_PAUSE: Duration = Duration::from_millis(2);

/// How the stream ended: completely, or cut mid-event (the caller must then
/// drop the connection without the terminating chunk).
#[derive(Debug, PartialEq)]
pub enum End {
    Complete,
    Cut,
}

pub fn encode(e: &SseEvent, crlf: bool, out: &mut Vec<u8>) {
    let nl: &[u8] = if crlf { b"\r\n" } else { b"\n" };
    if let Some(name) = e.name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(nl);
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(e.data.as_bytes());
    out.extend_from_slice(nl);
    out.extend_from_slice(nl);
}

/// Index of the event just after the `n`-th delta event (or after the last
/// delta if there are fewer).
fn after_deltas(events: &[SseEvent], n: usize) -> usize {
    let mut seen = 0;
    let mut after = 1;
    for (i, e) in events.iter().enumerate() {
        if e.delta {
            seen += 1;
            after = i + 1;
            if seen == n {
                break;
            }
        }
    }
    after
}

/// Writes event number `index` in the dialect's wire format (SSE or binary).
pub type Encode<'a> = &'a dyn Fn(usize, &SseEvent, bool, &mut Vec<u8>);

/// Sends `events` (the head is already written). `error` is the dialect's
/// mid-stream error, used by `stream-error`.
pub fn send<W: Write>(
    w: &mut W,
    events: &[SseEvent],
    error: &SseEvent,
    sc: &Scenario,
    encode: Encode,
) -> io::Result<End> {
    let cut_at = sc
        .cut
        .then(|| after_deltas(events, CUT_AFTER).min(events.len().saturating_sub(1)));
    let error_at = if sc.stream_error_first {
        Some(0)
    } else if sc.stream_error_after_start {
        // The opening events (everything before the first content delta).
        Some(events.iter().position(|e| e.delta).unwrap_or(events.len()))
    } else {
        sc.stream_error.then(|| after_deltas(events, ERROR_AFTER))
    };
    let mut out = ChunkOut::new(w, sc.split);
    out.piece = sc.signature_bytes.map(|_| crate::scenario::PIECE_BYTES);
    out.gzip = sc.gzip.then(crate::gzip::Stream::default);
    let mut buf = Vec::with_capacity(512);
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            if let Some(d) = sc.slow {
                out.flush()?;
                sleep(d);
            }
        }
        if error_at == Some(i) {
            break;
        }
        buf.clear();
        encode(i, e, sc.crlf, &mut buf);
        if cut_at == Some(i) {
            out.write(buf.get(..buf.len() / 2).unwrap_or_default())?;
            out.flush()?;
            return Ok(End::Cut);
        }
        out.write(&buf)?;
    }
    if let Some(at) = error_at {
        buf.clear();
        encode(at, error, sc.crlf, &mut buf);
        out.write(&buf)?;
    }
    out.finish()?;
    Ok(End::Complete)
}

/// Turns bytes into HTTP chunks: one chunk per `write`, or with `split`
/// 3..7-byte chunks regardless of event boundaries.
struct ChunkOut<'a, W: Write> {
    w: &'a mut W,
    split: bool,
    pending: Vec<u8>,
    pieces: usize,
    scratch: Vec<u8>,
    /// The response is gzip: each chunk carries the next stored blocks.
    gzip: Option<crate::gzip::Stream>,
    /// Each write in HTTP chunks of at most this many bytes (no pause).
    piece: Option<usize>,
}

impl<'a, W: Write> ChunkOut<'a, W> {
    fn new(w: &'a mut W, split: bool) -> Self {
        ChunkOut {
            w,
            split,
            pending: Vec::new(),
            pieces: 0,
            scratch: Vec::with_capacity(600),
            gzip: None,
            piece: None,
        }
    }

    fn emit(&mut self, data: &[u8]) -> io::Result<()> {
        self.scratch.clear();
        if let Some(z) = self.gzip.as_mut() {
            if data.is_empty() {
                return Ok(());
            }
            let mut packed = Vec::with_capacity(data.len() + 16);
            z.push(data, &mut packed);
            push_chunk(&mut self.scratch, &packed);
            self.w.write_all(&self.scratch)?;
            return self.w.flush();
        }
        push_chunk(&mut self.scratch, data);
        self.w.write_all(&self.scratch)?;
        self.w.flush()
    }

    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if let (false, Some(size)) = (self.split, self.piece) {
            for piece in data.chunks(size.max(1)) {
                self.emit(piece)?;
            }
            return Ok(());
        }
        if !self.split {
            return self.emit(data);
        }
        self.pending.extend_from_slice(data);
        loop {
            let size = 3 + self.pieces % 5;
            if self.pending.len() < size {
                return Ok(());
            }
            let piece: Vec<u8> = self.pending.drain(..size).collect();
            self.emit(&piece)?;
            self.pieces += 1;
            sleep(SPLIT_PAUSE);
        }
    }

    /// Sends what `split` still holds back.
    fn flush(&mut self) -> io::Result<()> {
        let rest = std::mem::take(&mut self.pending);
        self.emit(&rest)
    }

    fn finish(&mut self) -> io::Result<()> {
        self.flush()?;
        if let Some(z) = self.gzip.as_mut() {
            let mut tail = Vec::new();
            z.finish(&mut tail);
            self.scratch.clear();
            push_chunk(&mut self.scratch, &tail);
            self.w.write_all(&self.scratch)?;
        }
        self.w.write_all(LAST_CHUNK)?;
        self.w.flush()
    }
}

/// Test helper: the data of a chunked body, and whether it was terminated.
#[cfg(test)]
pub fn dechunk(mut raw: &[u8]) -> (Vec<u8>, usize, bool) {
    let mut body = Vec::new();
    let mut chunks = 0;
    loop {
        let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") else {
            return (body, chunks, false);
        };
        let size = std::str::from_utf8(raw.get(..eol).unwrap_or_default())
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .unwrap_or(0);
        if size == 0 {
            return (body, chunks, true);
        }
        body.extend_from_slice(raw.get(eol + 2..eol + 2 + size).unwrap_or_default());
        raw = raw.get(eol + 4 + size..).unwrap_or_default();
        chunks += 1;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn events() -> Vec<SseEvent> {
        (0..6)
            .map(|i| SseEvent {
                name: Some("e"),
                data: format!("{{\"i\":{i},\"t\":\"héllo 🌍\"}}"),
                delta: (1..5).contains(&i),
            })
            .collect()
    }

    fn error() -> SseEvent {
        SseEvent {
            name: Some("error"),
            data: "{}".into(),
            delta: false,
        }
    }

    fn run(sc: &str) -> (End, String, usize, bool) {
        let mut out = Vec::new();
        let sse = |_: usize, e: &SseEvent, crlf: bool, out: &mut Vec<u8>| encode(e, crlf, out);
        let end = send(&mut out, &events(), &error(), &Scenario::parse(sc), &sse).unwrap();
        let (body, chunks, terminated) = dechunk(&out);
        (end, String::from_utf8(body).unwrap(), chunks, terminated)
    }

    #[test]
    fn plain_and_crlf() {
        let (end, body, chunks, done) = run("");
        assert_eq!((end, chunks, done), (End::Complete, 6, true));
        assert!(body.starts_with("event: e\ndata: {\"i\":0,"));
        let (_, body, _, _) = run("crlf");
        assert!(body.contains("\r\n\r\nevent: e\r\ndata: {\"i\":1"));
        assert!(!body.replace("\r\n", "").contains('\n'));
    }

    #[test]
    fn split_keeps_bytes_in_tiny_chunks() {
        let (_, plain, _, _) = run("");
        let (end, body, chunks, done) = run("split");
        assert_eq!(body, plain);
        assert!(chunks > 40 && done && end == End::Complete);
    }

    #[test]
    fn cut_and_stream_error() {
        let (end, body, _, done) = run("cut");
        assert_eq!(end, End::Cut);
        assert!(!done);
        assert_eq!(body.matches("\n\n").count(), 3, "events 0..=2 whole");
        assert!(
            body.contains("{\"i\":2,") && body.contains("{\"i\":3") && !body.contains("\"i\":4")
        );
        let (end, body, _, done) = run("stream-error");
        assert!(end == End::Complete && done);
        assert!(body.contains("\"i\":3") && !body.contains("\"i\":4"));
        assert!(body.ends_with("event: error\ndata: {}\n\n"));
    }
}
