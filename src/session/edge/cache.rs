//! The edge role's part of the response cache (`crate::cache`), for a
//! generation on a cached group, after its caller may use the group and
//! before admission reserves anything:
//! - the request's plan (`cache-control`, the group's `when`, what the
//!   neutral request can say); a lookup that hits is answered here, in the
//!   client's API, whole or streamed, counted against the request limits
//!   with nothing reserved, and no vendor is called;
//! - on a miss the attempts capture their answer (`attempt/cache.rs`), and
//!   the one the client got is stored once it has passed, with a 200;
//! - every answer says `x-llm-cache`, a hit its `age`; the request's
//!   metrics and log line say what the cache did and what a hit saved.
//!
//! Groups without a cache make no call here at all.

use super::*;
use crate::cache::entry::Entry;
use crate::cache::key::RequestKey;
use crate::cache::store::{Place, Tally};
use crate::cache::{replay, Control, Plan, Settings, Status};
use crate::limits::Reservation;
use crate::session::host::unix_seconds;
use crate::session::shared_data::HostStore;
use crate::shared_state::local::Put;
use crate::surfaces::Echo;

/// The response cache's part of one request.
pub(super) struct Caching {
    pub(super) status: Status,
    /// Where the vendor's answer is stored, while it may be.
    place: Option<Place>,
    /// A hit: what its answer cost when a vendor made it, in USD.
    pub(super) saved_usd: Option<f64>,
}

/// The proxy's shared data, for the cache.
fn shared<H: Host>(host: &H) -> HostStore<'_, H> {
    HostStore::new(host, "the response cache is skipped")
}

impl<H: Host> Edge<H> {
    /// A generation on a group cached as `settings`: answered from the
    /// cache (`Ok(true)`: the request is over), or planned (`Ok(false)`).
    pub(super) fn consult_cache(
        &mut self,
        group: &str,
        settings: &Settings,
        (request, echo): (&ChatRequest, &Echo),
        control: Control,
    ) -> Result<bool, GatewayError> {
        let mut plan = Plan::of(settings, request, control);
        // A Responses answer the gateway stores gets an id of its own, and
        // its input items, as it passes (`edge/stored.rs`): not yet a hit.
        if plan == Plan::LookUp && self.stores_response(echo) {
            plan = Plan::StoreOnly;
        }
        let caller = self.config.auth.caller_name(self.caller);
        let place = (plan != Plan::Bypass)
            .then(|| Place::new(group, settings, caller, &RequestKey::of(group, request)));
        if plan == Plan::LookUp {
            let now = unix_seconds(&self.host);
            let found = (place.as_ref())
                .and_then(|p| p.get(&shared(&self.host), now))
                .and_then(|bytes| Entry::decode(&bytes));
            self.tally(group, found.is_some());
            if let Some(entry) = found {
                self.answer_hit(group, (request, echo), &entry, now)?;
                return Ok(true);
            }
        }
        self.cache = Some(Caching {
            status: plan.status(),
            place,
            saved_usd: None,
        });
        Ok(false)
    }

    /// Whether the gateway's response store keeps this request's answer.
    fn stores_response(&self, echo: &Echo) -> bool {
        self.api == Api::OpenAiResponses
            && self.config.response_store.enabled
            && echo.get("store") != Some(&serde_json::Value::Bool(false))
    }

    /// Counts a lookup in the group's hit ratio (every worker's).
    fn tally(&self, group: &str, hit: bool) {
        if !self.config.request_metrics {
            return;
        }
        if let Some(tally) = Tally::count(&shared(&self.host), group, hit) {
            ignore(self.host.gauge(
                "llm_gateway.cache_hit_ratio_permille",
                &[("group", group)],
                tally.permille(),
            ));
        }
    }

    /// Answers with `entry`, in the client's API: admitted by the request
    /// limits (a 429 as any request) with no tokens or spend reserved.
    fn answer_hit(
        &mut self,
        group: &str,
        (request, echo): (&ChatRequest, &Echo),
        entry: &Entry,
        now: u64,
    ) -> Result<(), GatewayError> {
        self.admit(group, |_| Reservation::default())?;
        let origin = replay::origin(entry, &self.request_id, now);
        let (body, content_type) = if request.stream {
            let include_usage = request.include_usage;
            let body = replay::stream(
                self.api,
                entry,
                origin,
                &self.request_id,
                include_usage,
                echo,
            );
            (body, &b"text/event-stream"[..])
        } else {
            (
                replay::whole(self.api, entry, &origin, echo),
                &b"application/json"[..],
            )
        };
        let age = now.saturating_sub(entry.stored_at).to_string();
        let limits = (self.limits.as_ref())
            .map(RequestLimits::header_pairs)
            .unwrap_or_default();
        let mut headers: Vec<(&str, &[u8])> = vec![
            ("content-type", content_type),
            ("x-request-id", self.request_id.as_bytes()),
            ("x-llm-cache", Status::Hit.as_str().as_bytes()),
            ("age", age.as_bytes()),
            ("x-llm-attempts", b"0"),
            ("x-llm-provider", entry.provider.as_bytes()),
            ("x-llm-model", entry.model.as_bytes()),
        ];
        if request.stream {
            headers.push(("cache-control", b"no-cache"));
        }
        headers.extend(limits.iter().map(|(n, v)| (*n, v.as_bytes())));
        reply_or_reset(&self.host, 200, &headers, &body);
        self.status = 200;
        self.response_complete = true;
        self.state = State::Replied;
        let saved_usd = entry.usage.and_then(|usage| {
            let provider = self.config.providers.get(&entry.provider)?;
            let price = price_for(&provider.prices, &entry.model)?;
            Some(price.cost(&usage.into()))
        });
        self.cache = Some(Caching {
            status: Status::Hit,
            place: None,
            saved_usd,
        });
        Ok(())
    }

    /// The request was handed off: its attempts capture the answer, when
    /// it is to be stored (`limit`: the group's `max_entry_bytes`).
    pub(super) fn order_capture(&self, limit: u64) {
        if self.cache.as_ref().is_some_and(|c| c.place.is_some()) {
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            self.channel.order_capture(limit);
        }
    }

    /// The answer's headers: `x-llm-cache` says what the cache did.
    pub(super) fn cache_header(&self) {
        if let Some(caching) = &self.cache {
            let status = caching.status.as_str();
            ignore(
                self.host
                    .set_header(Map::Response, b"x-llm-cache", Some(status.as_bytes())),
            );
        }
    }

    /// The answer has passed: stored, when an attempt captured it and the
    /// client got it with a 200.
    pub(super) fn store_answer(&mut self) {
        let Some(place) = self.cache.as_mut().and_then(|c| c.place.take()) else {
            return;
        };
        let Some(entry) = self.channel.take_captured() else {
            return;
        };
        if self.status != 200 {
            return;
        }
        let now = unix_seconds(&self.host);
        if let Put::Stored(usage) = place.put(&shared(&self.host), &entry, now) {
            let group = self.chat.as_ref().map_or("", |c| c.group.as_str());
            let labels = [("group", group)];
            ignore(
                self.host
                    .gauge("llm_gateway.cache_bytes", &labels, usage.bytes),
            );
            ignore(
                self.host
                    .gauge("llm_gateway.cache_entries", &labels, usage.entries),
            );
        }
    }

    /// The request's cache metrics: what the cache did, what a hit saved.
    pub(super) fn meter_cache(&self, group: &str, caching: &Caching) {
        let status = caching.status.as_str();
        ignore(self.host.count(
            "llm_gateway.cache_requests",
            &[("group", group), ("status", status)],
            1,
        ));
        if let Some(saved) = caching.saved_usd {
            ignore(self.host.count(
                "llm_gateway.cache_saved_micro_usd",
                &[("group", group)],
                (saved * 1e6).round() as u64,
            ));
        }
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
