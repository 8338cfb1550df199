//! Byte and text formats the gateway reads and writes, below every domain
//! module and knowing none: base64, Server-Sent Events, AWS's event stream,
//! long JSON strings written fast (eight bytes at a time, `swar`), URL
//! pieces, and calendar dates of Unix times.

pub mod base64;
pub mod date;
pub mod eventstream;
pub mod json_text;
pub mod sse;
pub mod swar;
pub mod url;
