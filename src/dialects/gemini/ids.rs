//! Tool call ids: Gemini's calls carry none (or its own), so the gateway
//! makes them from the response id, and keeps a call's thought signature in
//! its id for the turn that answers it.

use super::*;
/// FNV-1a of `bytes`, going on from `state` (a short, stable digest of
/// the response id, and of the candidate, for tool call ids).
fn fnv1a(state: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(state, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Our id for tool call `n` of candidate `candidate` of a response,
/// carrying Gemini's signature. Calls are numbered per candidate, so the
/// candidate is in the digest: two candidates' calls never share an id
/// (the first candidate's ids are the response's digest alone).
pub(super) fn tool_call_id(
    response_id: &str,
    candidate: u32,
    n: usize,
    signature: Option<&str>,
) -> String {
    let mut digest = fnv1a(FNV_OFFSET, response_id.as_bytes());
    if candidate > 0 {
        digest = fnv1a(digest, format!("#{candidate}").as_bytes());
    }
    let mut id = format!("call_{digest:016x}_{n}");
    if let Some(signature) = signature {
        id.push_str(SIGNATURE_MARK);
        // base64url without padding: ids stay in [A-Za-z0-9_-].
        id.push_str(&crate::formats::base64::standard_to_url_safe(signature));
    }
    id
}

/// The thought signature inside one of our ids, back in standard base64;
/// `None` for ids we did not make or made without a signature.
pub(super) fn split_tool_call_id(id: &str) -> Option<String> {
    let rest = id.strip_prefix("call_")?;
    let (hash, rest) = rest.split_at_checked(16)?;
    let (n, signature) = rest.strip_prefix('_')?.split_once(SIGNATURE_MARK)?;
    let ours = hash.bytes().all(|b| b.is_ascii_hexdigit())
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
        && !signature.is_empty()
        && signature
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ours {
        return None;
    }
    Some(crate::formats::base64::url_safe_to_standard(signature))
}
