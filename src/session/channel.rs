//! The one way a request's two roles hand each other what they must (see
//! `exchange`): the in-VM exchange when both roles run in one VM, else
//! filter state. Chosen once per role and request (the edge when it opens
//! the exchange, an attempt when it reads the handoff); every read and
//! write of records, route and attempt count goes through here.

use std::cell::Ref;

use super::host::{ignore, Host};
use super::{attempt_property, ROUTE_PROPERTY};
use crate::metering::AttemptRecord;
use crate::model::Request;
use crate::session::exchange::{self, Shared, Token, MAX_RECORDS};

/// Envoy's count of this request's attempts, for the filter-state channel.
const ATTEMPT_COUNT: [&str; 2] = ["upstream", "request_attempt_count"];

pub enum AttemptChannel {
    /// Both roles in this VM: the request's exchange.
    InVm(Shared),
    /// The roles in different VMs (or no exchange could be opened).
    FilterState,
}

impl AttemptChannel {
    /// The channel of the handoff's exchange token.
    pub fn find(token: Option<Token>) -> Self {
        match token.and_then(exchange::find) {
            Some(shared) => Self::InVm(shared),
            None => Self::FilterState,
        }
    }

    /// Counts an attempt starting; its number (1 for the first).
    pub fn begin_attempt(&self, host: &impl Host) -> u64 {
        match self {
            Self::InVm(shared) => {
                let mut exchange = shared.borrow_mut();
                exchange.attempts += 1;
                exchange.attempts
            }
            Self::FilterState => host
                .property(&ATTEMPT_COUNT)
                .ok()
                .flatten()
                .and_then(|b| b.get(..8).and_then(|b| b.try_into().ok()))
                .map_or(1, u64::from_le_bytes),
        }
    }

    /// The request as the edge role parsed it, while it is kept.
    pub fn request(&self) -> Option<Ref<'_, Request>> {
        match self {
            Self::InVm(shared) => Ref::filter_map(shared.borrow(), |e| e.request.as_ref()).ok(),
            Self::FilterState => None,
        }
    }

    /// A vendor accepted the request: a stream need not keep it parsed.
    pub fn release_request(&self) {
        if let Self::InVm(shared) = self {
            shared.borrow_mut().request = None;
        }
    }

    /// How many bytes of the answer the response cache wants captured,
    /// when it keeps this request's (only with the roles in one VM).
    pub fn cache_limit(&self) -> Option<usize> {
        match self {
            Self::InVm(shared) => shared.borrow().cache.limit,
            Self::FilterState => None,
        }
    }

    /// Asks the attempts to capture their answer for the response cache,
    /// up to `limit` bytes of it.
    pub fn order_capture(&self, limit: usize) {
        if let Self::InVm(shared) = self {
            shared.borrow_mut().cache.limit = Some(limit);
        }
    }

    /// What an attempt captured for the response cache, once.
    pub fn take_captured(&self) -> Option<Vec<u8>> {
        match self {
            Self::InVm(shared) => shared.borrow_mut().cache.captured.take(),
            Self::FilterState => None,
        }
    }

    /// The response cache's entry of the answer the client got (the edge
    /// role stores it once the answer has passed).
    pub fn keep_captured(&self, entry: Vec<u8>) {
        if let Self::InVm(shared) = self {
            shared.borrow_mut().cache.captured = Some(entry);
        }
    }

    /// Hands attempt number `attempt`'s record to the edge role.
    pub fn save_record(&self, host: &impl Host, attempt: u64, record: &AttemptRecord) {
        match self {
            Self::InVm(shared) => shared.borrow_mut().set_record(attempt, record),
            Self::FilterState => {
                if let Ok(json) = serde_json::to_vec(record) {
                    ignore(host.set_property(&[&attempt_property(attempt)], Some(&json)));
                }
            }
        }
    }

    /// Sets attempt number `attempt`'s entry (`provider/model:outcome`) in
    /// the request's route; `previous`: the entry this attempt set before,
    /// which it replaces (an attempt answered, then reset).
    pub fn set_route(&self, host: &impl Host, attempt: u64, entry: &str, previous: Option<&str>) {
        match self {
            Self::InVm(shared) => shared.borrow_mut().set_route(attempt, entry.to_owned()),
            Self::FilterState => {
                let route = host
                    .property(&[ROUTE_PROPERTY])
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                let route = String::from_utf8_lossy(&route);
                let mut entries: Vec<&str> = route.split(',').filter(|r| !r.is_empty()).collect();
                // Entries are in the order attempts answered; this attempt's
                // is the last one with its text.
                let mine = previous.and_then(|p| entries.iter().rposition(|e| *e == p));
                match mine.and_then(|i| entries.get_mut(i)) {
                    Some(slot) => *slot = entry,
                    None => entries.push(entry),
                }
                let route = entries.join(",");
                ignore(host.set_property(&[ROUTE_PROPERTY], Some(route.as_bytes())));
            }
        }
    }

    /// Attempts begun so far (0 before any): the exchange's count once an
    /// attempt found it, else Envoy's (the roles in different VMs).
    pub fn attempt_count(&self, host: &impl Host) -> u64 {
        if let Self::InVm(shared) = self {
            let attempts = shared.borrow().attempts;
            if attempts > 0 {
                return attempts;
            }
        }
        host.property(&ATTEMPT_COUNT)
            .ok()
            .flatten()
            .and_then(|b| b.get(..8).and_then(|b| b.try_into().ok()))
            .map_or(0, u64::from_le_bytes)
    }

    /// Every attempt's record and route entry, as the edge role reads them
    /// at the end: from the exchange when an attempt found it, else from
    /// filter state (the roles run in different VMs, or no attempt was made).
    pub fn attempts(&self, host: &impl Host) -> (Vec<AttemptRecord>, Vec<String>) {
        if let Self::InVm(shared) = self {
            let exchange = shared.borrow();
            if exchange.attempts > 0 {
                let route = exchange.route.iter().filter(|r| !r.is_empty());
                return (exchange.records.clone(), route.cloned().collect());
            }
        }
        let route: Vec<String> = host
            .property(&[ROUTE_PROPERTY])
            .ok()
            .flatten()
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .split(',')
                    .filter(|r| !r.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        // Attempt numbers are Envoy's; one that failed before the vendor
        // answered left no record, so look a little past the route's length.
        let mut records = Vec::new();
        let most = (route.len() + 2).min(MAX_RECORDS) as u64;
        for attempt in 1..=most {
            let record = host
                .property(&[&attempt_property(attempt)])
                .ok()
                .flatten()
                .and_then(|b| serde_json::from_slice::<AttemptRecord>(&b).ok());
            if let Some(record) = record {
                records.push(record);
            }
        }
        (records, route)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::request::ChatRequest;
    use crate::session::fake::FakeHost;

    fn request() -> ChatRequest {
        ChatRequest::parse(br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#).unwrap()
    }

    fn record(status: u16) -> AttemptRecord {
        AttemptRecord {
            provider: "p".into(),
            status,
            ..AttemptRecord::default()
        }
    }

    #[test]
    fn both_channels_carry_the_same_attempts() {
        let (token, shared) = exchange::open(Some(crate::model::Request::Chat(Box::new(
            request().into(),
        ))))
        .unwrap();
        let in_vm = AttemptChannel::find(Some(token));
        assert!(matches!(in_vm, AttemptChannel::InVm(_)));
        let host = FakeHost::new();
        for channel in [in_vm, AttemptChannel::FilterState] {
            // Envoy's own count, which only the filter-state channel reads.
            host.set_prop(&["upstream", "request_attempt_count"], &1u64.to_le_bytes());
            assert_eq!(channel.begin_attempt(&host), 1);
            channel.save_record(&host, 1, &record(503));
            channel.set_route(&host, 1, "p/m:503", None);
            host.set_prop(&["upstream", "request_attempt_count"], &2u64.to_le_bytes());
            assert_eq!(channel.begin_attempt(&host), 2);
            channel.save_record(&host, 2, &record(200));
            channel.set_route(&host, 2, "p/m:200", None);
            assert_eq!(channel.attempt_count(&host), 2);
            // Attempt 3 reset before it answered, attempt 2 after it did.
            host.set_prop(&["upstream", "request_attempt_count"], &3u64.to_le_bytes());
            assert_eq!(channel.begin_attempt(&host), 3);
            channel.set_route(&host, 3, "q/m:reset", None);
            channel.set_route(&host, 2, "p/m:reset", Some("p/m:200"));
            let (records, route) = channel.attempts(&host);
            assert_eq!(
                records.iter().map(|r| r.status).collect::<Vec<_>>(),
                [503, 200]
            );
            assert_eq!(route, ["p/m:503", "p/m:reset", "q/m:reset"]);
        }
        assert!(shared.borrow().request.is_some());
        exchange::close(token);
    }

    #[test]
    fn the_parsed_request_is_there_until_a_vendor_accepted_it() {
        let (token, _) = exchange::open(Some(crate::model::Request::Chat(Box::new(
            request().into(),
        ))))
        .unwrap();
        let channel = AttemptChannel::find(Some(token));
        assert_eq!(
            channel.request().map(|r| r.model().to_owned()).as_deref(),
            Some("m")
        );
        channel.release_request();
        assert!(channel.request().is_none());
        assert!(AttemptChannel::FilterState.request().is_none());
        exchange::close(token);
    }
}
