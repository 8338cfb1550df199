//! Minimal HTTP/1.1: read one request (content-length or chunked body),
//! write a response in one write, or stream a chunked body.
//!
//! Buffers live in the connection and are reused across keep-alive requests,
//! so a benchmark does not pay an allocation per header.

use std::io::{self, BufRead, Read, Write};
use std::ops::Range;

/// Largest request head and body we accept: generous, but bounded so a
/// broken client cannot make us allocate without limit.
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One parsed request. Strings are ranges into `head`, the raw request
/// line and header lines as received.
#[derive(Default)]
pub struct Request {
    head: String,
    method: Range<usize>,
    target: Range<usize>,
    http10: bool,
    headers: Vec<(Range<usize>, Range<usize>)>,
    pub body: Vec<u8>,
}

/// Why a request could not be read: the connection failed or closed
/// mid-request (nothing to answer), or the request is malformed and we
/// answer `status` before closing.
#[derive(Debug)]
pub enum ReadError {
    Closed,
    Bad(u16, &'static str),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        // read_line reports invalid UTF-8 as InvalidData: that is the
        // client's fault, not a dead connection.
        if e.kind() == io::ErrorKind::InvalidData {
            ReadError::Bad(400, "request head is not valid UTF-8")
        } else {
            ReadError::Closed
        }
    }
}

impl Request {
    fn part(&self, r: &Range<usize>) -> &str {
        self.head.get(r.clone()).unwrap_or("")
    }

    pub fn method(&self) -> &str {
        self.part(&self.method)
    }

    /// The target without its query string.
    pub fn path(&self) -> &str {
        let t = self.part(&self.target);
        t.split_once('?').map_or(t, |(p, _)| p)
    }

    /// The query string without `?`, or "".
    pub fn query(&self) -> &str {
        let t = self.part(&self.target);
        t.split_once('?').map_or("", |(_, q)| q)
    }

    /// First header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers
            .iter()
            .map(|(n, v)| (self.part(n), self.part(v)))
    }

    /// HTTP/1.1 keeps the connection unless told `close`; 1.0 the reverse.
    pub fn keep_alive(&self) -> bool {
        match self.header("connection") {
            Some(v) if v.eq_ignore_ascii_case("close") => false,
            Some(v) if v.eq_ignore_ascii_case("keep-alive") => true,
            _ => !self.http10,
        }
    }

    fn clear(&mut self) {
        self.head.clear();
        self.headers.clear();
        self.body.clear();
        self.method = 0..0;
        self.target = 0..0;
        self.http10 = false;
    }
}

/// Reads the next request into `req`. Returns Ok(false) on a clean end of
/// connection before any byte of a new request. `w` receives the
/// `100 Continue` interim answer when the client asks for it (curl does).
pub fn read_request<R: BufRead, W: Write>(
    r: &mut R,
    w: &mut W,
    req: &mut Request,
) -> Result<bool, ReadError> {
    req.clear();
    let mut first = true;
    loop {
        let start = req.head.len();
        let room = MAX_HEAD.saturating_sub(start) as u64;
        if room == 0 {
            return Err(ReadError::Bad(431, "request head too large"));
        }
        // Header values may carry any byte (obs-text, Latin-1 from old
        // clients): read bytes and keep them as text the tests can read.
        let mut raw = Vec::new();
        let n = (&mut *r).take(room).read_until(b'\n', &mut raw)?;
        req.head.push_str(&String::from_utf8_lossy(&raw));
        if n == 0 {
            return if first && req.head.is_empty() {
                Ok(false)
            } else {
                Err(ReadError::Closed)
            };
        }
        let line = req.head.get(start..).unwrap_or("");
        let content = line.trim_end_matches(['\r', '\n']);
        let end = start + content.len();
        if first {
            if content.is_empty() {
                // Tolerate blank lines before the request line (RFC 9112 2.2).
                req.head.truncate(start);
                continue;
            }
            parse_request_line(req, start, end)?;
            first = false;
        } else if content.is_empty() {
            break;
        } else {
            let colon = content
                .find(':')
                .ok_or(ReadError::Bad(400, "header line without colon"))?;
            let name = start..start + colon;
            let value = trim_range(&req.head, start + colon + 1..end);
            req.headers.push((name, value));
        }
    }
    read_body(r, w, req)?;
    Ok(true)
}

/// A request read from its raw bytes (the vendor mocks' unit tests).
#[cfg(test)]
pub fn parse(raw: &str) -> Request {
    let mut req = Request::default();
    let mut sink = Vec::new();
    let read = read_request(
        &mut std::io::BufReader::new(raw.as_bytes()),
        &mut sink,
        &mut req,
    );
    assert!(matches!(read, Ok(true)), "not a request: {raw:?}");
    req
}

fn parse_request_line(req: &mut Request, start: usize, end: usize) -> Result<(), ReadError> {
    let line = req.head.get(start..end).unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad(400, "malformed request line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(ReadError::Bad(505, "only HTTP/1.x is supported"));
    }
    req.http10 = version == "HTTP/1.0";
    req.method = start..start + method.len();
    let t0 = start + method.len() + 1;
    req.target = t0..t0 + target.len();
    Ok(())
}

fn trim_range(s: &str, r: Range<usize>) -> Range<usize> {
    let v = s.get(r.clone()).unwrap_or("");
    let lead = v.len() - v.trim_start().len();
    let trail = v.len() - v.trim_end().len();
    r.start + lead..r.end - trail
}

fn read_body<R: BufRead, W: Write>(
    r: &mut R,
    w: &mut W,
    req: &mut Request,
) -> Result<(), ReadError> {
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = match req.header("content-length") {
        Some(v) if !chunked => Some(
            v.parse::<usize>()
                .map_err(|_| ReadError::Bad(400, "bad content-length"))?,
        ),
        _ => None,
    };
    if length.is_some_and(|n| n > MAX_BODY) {
        return Err(ReadError::Bad(413, "request body too large"));
    }
    let expects_body = chunked || length.is_some_and(|n| n > 0);
    if expects_body
        && req
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        w.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        w.flush()?;
    }
    let mut body = std::mem::take(&mut req.body);
    let res = if chunked {
        read_chunked(r, &mut body)
    } else if let Some(n) = length {
        body.resize(n, 0);
        r.read_exact(&mut body).map_err(ReadError::from)
    } else {
        Ok(())
    };
    req.body = body;
    res
}

/// Decodes a chunked body: `<hex size>[;ext]\r\n<data>\r\n` ... `0\r\n<trailers>\r\n`.
fn read_chunked<R: BufRead>(r: &mut R, body: &mut Vec<u8>) -> Result<(), ReadError> {
    let mut line = String::new();
    loop {
        line.clear();
        if (&mut *r).take(1024).read_line(&mut line)? == 0 {
            return Err(ReadError::Closed);
        }
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| ReadError::Bad(400, "bad chunk size"))?;
        if size == 0 {
            // Skip optional trailer headers up to the final empty line.
            loop {
                line.clear();
                if (&mut *r).take(MAX_HEAD as u64).read_line(&mut line)? == 0
                    || line.trim_end().is_empty()
                {
                    return Ok(());
                }
            }
        }
        if body.len() + size > MAX_BODY {
            return Err(ReadError::Bad(413, "request body too large"));
        }
        let old = body.len();
        body.resize(old + size, 0);
        r.read_exact(body.get_mut(old..).unwrap_or_default())?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf)?;
        if &crlf != b"\r\n" {
            return Err(ReadError::Bad(400, "chunk not followed by CRLF"));
        }
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        529 => "Site Overloaded",
        _ => "Unknown",
    }
}

fn write_head(
    buf: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    raw_headers: &[u8],
    keep_alive: bool,
) {
    // Writing into a Vec cannot fail; ignore the io::Result.
    let _ = write!(
        buf,
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\n",
        reason(status)
    );
    for (n, v) in extra {
        let _ = write!(buf, "{n}: {v}\r\n");
    }
    buf.extend_from_slice(raw_headers);
    if !keep_alive {
        buf.extend_from_slice(b"connection: close\r\n");
    }
}

/// A whole response, written with a single write call. `buf` is scratch
/// space reused by the connection; `raw_headers` are header lines as bytes
/// (each ending in CRLF), for scenarios that send any byte.
#[allow(clippy::too_many_arguments)]
pub fn write_response<W: Write>(
    w: &mut W,
    buf: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    raw_headers: &[u8],
    body: &[u8],
    keep_alive: bool,
) -> io::Result<()> {
    buf.clear();
    write_head(buf, status, content_type, extra, raw_headers, keep_alive);
    let _ = write!(buf, "content-length: {}\r\n\r\n", body.len());
    buf.extend_from_slice(body);
    w.write_all(buf)?;
    w.flush()
}

/// Appends the head of a 200 chunked (streamed) response to `buf`; the
/// body follows as chunks (`push_chunk`, then `LAST_CHUNK`).
pub fn stream_head(buf: &mut Vec<u8>, content_type: &str, raw_headers: &[u8], keep_alive: bool) {
    write_head(
        buf,
        200,
        content_type,
        &[("cache-control", "no-cache")],
        raw_headers,
        keep_alive,
    );
    buf.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
}

/// Appends one HTTP chunk to `buf` (nothing for empty data: an empty chunk
/// would end the body).
pub fn push_chunk(buf: &mut Vec<u8>, data: &[u8]) {
    if !data.is_empty() {
        let _ = write!(buf, "{:x}\r\n", data.len());
        buf.extend_from_slice(data);
        buf.extend_from_slice(b"\r\n");
    }
}

pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Value of `key` in a query string, percent-decoded.
pub fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k) == key).then(|| percent_decode(v))
    })
}

pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> (Result<bool, ReadError>, Request, Vec<u8>) {
        let mut r = io::BufReader::new(raw);
        let mut w = Vec::new();
        let mut req = Request::default();
        let res = read_request(&mut r, &mut w, &mut req);
        (res, req, w)
    }

    #[test]
    fn content_length_body() {
        let raw = b"POST /v1/chat/completions?a=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX-Test-Id:  t1 \r\n\r\nhelloNEXT";
        let (res, req, w) = parse(raw);
        assert!(res.unwrap());
        assert_eq!(req.method(), "POST");
        assert_eq!(req.path(), "/v1/chat/completions");
        assert_eq!(req.query(), "a=1");
        assert_eq!(req.header("x-test-id"), Some("t1"));
        assert_eq!(req.body, b"hello");
        assert!(req.keep_alive());
        assert!(w.is_empty());
    }

    #[test]
    fn chunked_body_with_extension_and_trailer() {
        let raw = b"POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\nX-Trailer: y\r\n\r\n";
        let (res, req, _) = parse(raw);
        assert!(res.unwrap());
        assert_eq!(req.body, b"{\"a\":1}");
    }

    #[test]
    fn keep_alive_reads_two_requests_and_then_eof() {
        let raw = b"GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi";
        let mut r = io::BufReader::new(&raw[..]);
        let mut w = Vec::new();
        let mut req = Request::default();
        assert!(read_request(&mut r, &mut w, &mut req).unwrap());
        assert_eq!(req.path(), "/a");
        assert!(req.body.is_empty());
        assert!(read_request(&mut r, &mut w, &mut req).unwrap());
        assert_eq!(req.path(), "/b");
        assert_eq!(req.body, b"hi");
        assert!(!req.keep_alive());
        assert!(!read_request(&mut r, &mut w, &mut req).unwrap());
    }

    #[test]
    fn expect_continue_and_errors() {
        let raw = b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx";
        let (res, _, w) = parse(raw);
        assert!(res.unwrap());
        assert_eq!(w, b"HTTP/1.1 100 Continue\r\n\r\n");
        let (res, _, _) = parse(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        assert!(matches!(res, Err(ReadError::Bad(400, _))));
        let (res, _, _) = parse(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
        assert!(matches!(res, Err(ReadError::Closed)));
    }

    #[test]
    fn query_decoding() {
        assert_eq!(
            query_param("x=1&test_id=a%20b+c", "test_id").as_deref(),
            Some("a b c")
        );
        assert_eq!(query_param("x=1", "test_id"), None);
    }
}
