//! The neutral model between client surfaces and vendor dialects: the
//! request every surface decodes into ([`request`]), the answer every
//! dialect decodes into ([`response`]) and the stream events dialects push
//! ([`stream`]).

pub mod estimate;
pub mod json;
pub mod request;
pub mod response;
pub mod stream;
