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
//! With the fleet's store (`shared_state.service`), a lookup the proxy's
//! own store misses asks the state service (a callout, bounded by its
//! `timeout_ms`; the request waits): an entry it has is copied into the
//! proxy's store and the request is run again, to find it there. A stored
//! answer is put there too, its end held until the service took it. A
//! service that does not answer is counted (`llm_gateway.shared_state`)
//! and the request goes on uncached.
//!
//! Groups without a cache make no call here at all.

use super::*;
use crate::cache::entry::Entry;
use crate::cache::key::RequestKey;
use crate::cache::store::{Place, Tally, STORE};
use crate::cache::{replay, Control, Plan, Settings, Status};
use crate::limits::Reservation;
use crate::session::host::{unix_seconds, CalloutAnswer};
use crate::session::shared_data::HostStore;
use crate::shared_state::local::Put;
use crate::shared_state::remote::{self, Call as StateCall, Reply};
use crate::surfaces::SurfaceState;

/// The response cache's part of one request.
pub(super) struct Caching {
    pub(super) status: Status,
    /// Where the vendor's answer is stored, while it may be.
    place: Option<Place>,
    /// A hit: what its answer cost when a vendor made it, in USD.
    pub(super) saved_usd: Option<f64>,
    /// The fleet's store was asked for this request's entry already.
    asked: bool,
    /// A call to the state service out: its token, and what waits for it.
    waiting: Option<(u32, Waiting)>,
    /// The semantic cache's part (`edge/semantic.rs`), once asked.
    semantic: Option<super::semantic::Semantic>,
}

/// What waits for the state service's answer.
enum Waiting {
    /// The request (its path's facts and body), run again once the entry
    /// is known.
    Lookup(Box<(PathFacts, Vec<u8>)>),
    /// The answer's end, held until its entry is stored; then its vector
    /// is put into the fleet's index (`edge/semantic.rs`), when it has one.
    Store(Option<Box<StateCall>>),
    /// The answer's end, held until its vector is stored.
    StoreVector,
    /// The request, run again once its prompt is embedded (`edge/semantic.rs`).
    Embed(Box<(PathFacts, Vec<u8>)>),
    /// The request, run again once the fleet's index was searched.
    Search(Box<(PathFacts, Vec<u8>)>),
    /// The request, run again once the entry the fleet's index found
    /// (its place, its exact key) is fetched.
    SemanticEntry(Box<(PathFacts, Vec<u8>, Place, RequestKey)>),
}

/// What the cache made of a generation.
pub(super) enum Consulted {
    /// Not answered from the cache: the request goes on to a vendor.
    Go,
    /// Answered from the cache: the request is over.
    Answered,
    /// The fleet's store is asked: the request waits for its answer.
    Waiting,
}

/// Whether `entry` is within the group's time to live (a copy the
/// fleet's store gave lives in the proxy's store from when it was copied).
fn fresh(entry: &Entry, ttl_seconds: u64, now: u64) -> bool {
    now < entry.stored_at.saturating_add(ttl_seconds)
}

/// The proxy's shared data, for the cache.
fn shared<H: Host>(host: &H) -> HostStore<'_, H> {
    HostStore::new(host, "the response cache is skipped")
}

impl<H: Host> Edge<H> {
    /// A generation on a group cached as `settings`: answered from the
    /// cache, planned (it goes on to a vendor), or waiting for the fleet's
    /// store, with `resume` (the request's path facts and body) to run it
    /// again once it answered (`None`: the proxy's store only).
    pub(super) fn consult_cache(
        &mut self,
        group: &str,
        settings: &Settings,
        (request, state): (&ChatRequest, &SurfaceState),
        (control, client): (Control, &Headers),
        resume: Option<(&PathFacts, &[u8])>,
    ) -> Result<Consulted, GatewayError> {
        let mut plan = Plan::of(settings, request, control);
        // An answer the gateway stores gets an id of its own, and its
        // input items, as it passes (`edge/stored.rs`): not yet a hit.
        if plan == Plan::LookUp && self.stores_response(state) {
            plan = Plan::StoreOnly;
        }
        let previous = self.cache.take();
        let asked = previous.as_ref().is_some_and(|c| c.asked);
        let mut semantic = previous.and_then(|c| c.semantic);
        let caller = self.config.auth.caller_name(self.client.caller);
        let place = (plan != Plan::Bypass)
            .then(|| Place::new(group, settings, caller, &RequestKey::of(group, request)));
        let mut caching = Caching {
            status: plan.status(),
            place,
            saved_usd: None,
            asked,
            waiting: None,
            semantic: None,
        };
        if plan == Plan::LookUp {
            let now = unix_seconds(&self.host);
            let found = (caching.place.as_ref())
                .and_then(|p| p.get(&shared(&self.host), now))
                .and_then(|bytes| Entry::decode(&bytes))
                .filter(|entry| fresh(entry, settings.ttl_seconds, now));
            if let Some(entry) = found {
                let saved = self.saved_usd(&entry);
                self.tally(group, Some((saved.unwrap_or(0.0) * 1e6).round() as u64));
                self.answer_hit(group, (request, state), &entry, (now, Status::Hit))?;
                return Ok(Consulted::Answered);
            }
            // The semantic cache's entry, once the prompt was embedded.
            if let Some(mut asked) = semantic.take() {
                let found = Self::semantic_found(Some(&asked))
                    .map(|key| Place::new(group, settings, caller, &key))
                    .and_then(|p| p.get(&shared(&self.host), now))
                    .and_then(|bytes| Entry::decode(&bytes))
                    .filter(|entry| fresh(entry, settings.ttl_seconds, now));
                // None close in the proxy's index: the fleet's is searched.
                let search = (found.is_none())
                    .then(|| self.fleet_search(&mut asked))
                    .flatten();
                if let (Some(call), Some((facts, body))) = (search, resume) {
                    if let Some(token) = self.send_state(&call) {
                        caching.semantic = Some(asked);
                        let resume = Box::new((facts.clone(), body.to_vec()));
                        caching.waiting = Some((token, Waiting::Search(resume)));
                        self.cache = Some(caching);
                        return Ok(Consulted::Waiting);
                    }
                }
                self.count_lookup(group, &asked, found.is_some());
                if let Some(entry) = found {
                    let saved = self.saved_usd(&entry);
                    self.tally(group, Some((saved.unwrap_or(0.0) * 1e6).round() as u64));
                    let status = (now, Status::SemanticHit);
                    self.answer_hit(group, (request, state), &entry, status)?;
                    return Ok(Consulted::Answered);
                }
                semantic = Some(asked);
            }
            if let (false, Some((facts, body)), Some(place)) = (asked, resume, &caching.place) {
                let call = StateCall::get(STORE, &place.namespace, &place.key);
                if let Some(token) = self.send_state(&call) {
                    caching.asked = true;
                    let resume = Box::new((facts.clone(), body.to_vec()));
                    caching.waiting = Some((token, Waiting::Lookup(resume)));
                    self.cache = Some(caching);
                    return Ok(Consulted::Waiting);
                }
            }
            // Not asked by meaning yet: the prompt is embedded (it waits).
            let semantic_settings = settings.semantic.as_ref().filter(|_| semantic.is_none());
            if let (Some(s), Some((facts, body)), Some(place)) =
                (semantic_settings, resume, &caching.place)
            {
                if let Some((token, asking)) = self.embed_prompt((group, s), request, place, client)
                {
                    caching.asked = true;
                    caching.semantic = Some(asking);
                    let resume = Box::new((facts.clone(), body.to_vec()));
                    caching.waiting = Some((token, Waiting::Embed(resume)));
                    self.cache = Some(caching);
                    return Ok(Consulted::Waiting);
                }
            }
            self.tally(group, None);
        }
        caching.semantic = semantic;
        self.cache = Some(caching);
        Ok(Consulted::Go)
    }

    /// The request waits for the fleet's store.
    pub(super) fn cache_waits(&self) -> bool {
        (self.cache.as_ref()).is_some_and(|c| c.waiting.is_some())
    }

    /// Callout `token` is the cache's call to the state service.
    pub(super) fn cache_waits_for(&self, token: u32) -> bool {
        (self.cache.as_ref()).is_some_and(|c| c.waiting.as_ref().is_some_and(|w| w.0 == token))
    }

    /// The state service answered the cache's call (or did not): a
    /// lookup's request runs again (an entry found is in the proxy's store
    /// now), a stored answer's end goes on.
    pub(super) fn on_cache_answer(&mut self, answer: CalloutAnswer) -> Flow {
        let Some(caching) = self.cache.as_mut() else {
            return Flow::Pause;
        };
        let Some((_, waiting)) = caching.waiting.take() else {
            return Flow::Pause;
        };
        let op = match waiting {
            Waiting::Lookup(_) | Waiting::SemanticEntry(_) => remote::Op::Get,
            Waiting::Store(_) => remote::Op::Put,
            Waiting::StoreVector => remote::Op::PutVector,
            Waiting::Search(_) => remote::Op::Search,
            Waiting::Embed(resume) => {
                let mut semantic = caching.semantic.take();
                if let Some(semantic) = semantic.as_mut() {
                    self.on_embedding(semantic, answer);
                }
                if let Some(caching) = self.cache.as_mut() {
                    caching.semantic = semantic;
                }
                let (facts, body) = *resume;
                return self.generate(&facts, &body);
            }
        };
        let reply = match answer {
            CalloutAnswer::Answered {
                status,
                headers,
                body,
            } => remote::reply(op, Some((status, &headers, body))),
            CalloutAnswer::Failed => remote::reply(op, None),
        };
        self.count_state(op, &reply);
        match waiting {
            Waiting::Lookup(resume) => {
                if let Reply::Found(entries) = &reply {
                    self.mirror(entries.first());
                }
                let (facts, body) = *resume;
                self.generate(&facts, &body)
            }
            Waiting::Search(resume) => {
                let found = match &reply {
                    Reply::Found(ids) => ids
                        .first()
                        .and_then(|id| <[u8; 32]>::try_from(&id[..]).ok()),
                    _ => None,
                };
                if let Some(request) = found.map(RequestKey) {
                    if let Some(place) = self.cache_place(&request) {
                        let call = StateCall::get(STORE, &place.namespace, &place.key);
                        if let Some(token) = self.send_state(&call) {
                            let (facts, body) = *resume;
                            let waiting =
                                Waiting::SemanticEntry(Box::new((facts, body, place, request)));
                            if let Some(caching) = self.cache.as_mut() {
                                caching.waiting = Some((token, waiting));
                            }
                            return Flow::Pause;
                        }
                    }
                }
                let (facts, body) = *resume;
                self.generate(&facts, &body)
            }
            Waiting::SemanticEntry(found) => {
                let (facts, body, place, request) = *found;
                if let Reply::Found(entries) = &reply {
                    self.mirror_found(&place, entries.first(), request);
                }
                self.generate(&facts, &body)
            }
            // Stored: its vector goes into the fleet's index too.
            Waiting::Store(Some(vector)) if reply == Reply::Done => {
                if let Some(token) = self.send_state(&vector) {
                    if let Some(caching) = self.cache.as_mut() {
                        caching.waiting = Some((token, Waiting::StoreVector));
                    }
                    return Flow::Pause;
                }
                self.stored_flow()
            }
            Waiting::Store(_) | Waiting::StoreVector => self.stored_flow(),
            // Answered above.
            Waiting::Embed(_) => Flow::Pause,
        }
    }

    /// The answer's end, once the fleet's store took what it was given:
    /// the response store's own call may still hold it.
    fn stored_flow(&self) -> Flow {
        if self.responses.waiting.is_some() {
            Flow::Pause
        } else {
            Flow::Continue
        }
    }

    /// Where the entry of `request` is, on this request's group, for its caller.
    fn cache_place(&self, request: &RequestKey) -> Option<Place> {
        let group = &self.admission.chat.as_ref()?.group;
        let settings = self.config.model_groups.get(group)?.cache.as_ref()?;
        let caller = self.config.auth.caller_name(self.client.caller);
        Some(Place::new(group, settings, caller, request))
    }

    /// The entry the fleet's index found (`request`'s), copied into the
    /// proxy's store when it is one and fresh, and the request's vector
    /// into the proxy's index beside it: the request run again finds it.
    fn mirror_found(&mut self, place: &Place, bytes: Option<&Vec<u8>>, request: RequestKey) {
        let Some(bytes) = bytes else { return };
        let now = unix_seconds(&self.host);
        let Some(entry) = Entry::decode(bytes).filter(|e| fresh(e, place.ttl_seconds(), now))
        else {
            return;
        };
        place.put(&shared(&self.host), bytes, now);
        let expires = entry.stored_at.saturating_add(place.ttl_seconds());
        let Some(semantic) = self.cache.as_mut().and_then(|c| c.semantic.as_mut()) else {
            return;
        };
        Self::found_in_fleet(semantic, request);
        if let Some(semantic) = self.cache.as_ref().and_then(|c| c.semantic.as_ref()) {
            self.index_vector(semantic, &request, (now, expires));
        }
    }

    /// An entry the fleet's store gave, copied into the proxy's store
    /// (when it is one, and fresh), where the request run again finds it.
    fn mirror(&self, bytes: Option<&Vec<u8>>) {
        let (Some(bytes), Some(caching)) = (bytes, self.cache.as_ref()) else {
            return;
        };
        let Some(place) = caching.place.as_ref() else {
            return;
        };
        let now = unix_seconds(&self.host);
        if Entry::decode(bytes).is_some_and(|e| fresh(&e, place.ttl_seconds(), now)) {
            place.put(&shared(&self.host), bytes, now);
        }
    }

    /// Whether the gateway's response store keeps this request's answer.
    fn stores_response(&self, state: &SurfaceState) -> bool {
        self.config.response_store.enabled && state.stores_answer()
    }

    /// Counts a lookup in the group's hit ratio (every worker's): a hit
    /// with what it saved (micro-USD), or a miss. For the metrics, and for
    /// the diagnostics view's cache section; neither on, nothing counted.
    fn tally(&self, group: &str, hit: Option<u64>) {
        if !self.config.request_metrics && self.config.diagnostics.is_none() {
            return;
        }
        let tally = Tally::count(&shared(&self.host), group, hit);
        if let Some(tally) = tally.filter(|_| self.config.request_metrics) {
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
        (request, state): (&ChatRequest, &SurfaceState),
        entry: &Entry,
        (now, status): (u64, Status),
    ) -> Result<(), GatewayError> {
        self.admit(group, |_| Reservation::default())?;
        let origin = replay::origin(entry, &self.client.request_id, now);
        let (body, content_type) = if request.stream {
            let include_usage = request.include_usage;
            let body = replay::stream(
                self.client.api,
                entry,
                origin,
                &self.client.request_id,
                include_usage,
                state,
            );
            (body, &b"text/event-stream"[..])
        } else {
            (
                replay::whole(self.client.api, entry, &origin, state),
                &b"application/json"[..],
            )
        };
        let age = now.saturating_sub(entry.stored_at).to_string();
        let limits = (self.admission.limits.as_ref())
            .map(RequestLimits::header_pairs)
            .unwrap_or_default();
        let mut headers: Vec<(&str, &[u8])> = vec![
            ("content-type", content_type),
            ("x-request-id", self.client.request_id.as_bytes()),
            ("x-llm-cache", status.as_str().as_bytes()),
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
        self.outcome.status = 200;
        self.outcome.response_complete = true;
        self.state = State::Replied;
        self.cache = Some(Caching {
            status,
            place: None,
            saved_usd: self.saved_usd(entry),
            asked: true,
            waiting: None,
            semantic: None,
        });
        Ok(())
    }

    /// What `entry`'s answer cost when a vendor made it, in USD (priced
    /// from its stored usage; `None`: unpriced).
    fn saved_usd(&self, entry: &Entry) -> Option<f64> {
        let usage = entry.usage?;
        let provider = self.config.providers.get(&entry.provider)?;
        let price = price_for(&provider.prices, &entry.model)?;
        Some(price.cost(&usage.into()))
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
    /// client got it with a 200; `true` when the fleet's store is taking it
    /// (the answer's end waits).
    pub(super) fn store_answer(&mut self) -> bool {
        let Some(place) = self.cache.as_mut().and_then(|c| c.place.take()) else {
            return false;
        };
        let Some(entry) = self.channel.take_captured() else {
            return false;
        };
        if self.outcome.status != 200 {
            return false;
        }
        let now = unix_seconds(&self.host);
        if let Put::Stored(usage) = place.put(&shared(&self.host), &entry, now) {
            if let Some(semantic) = self.cache.as_ref().and_then(|c| c.semantic.as_ref()) {
                let expires = now.saturating_add(place.ttl_seconds());
                self.index_answer(semantic, now, expires);
            }
            let group = self
                .admission
                .chat
                .as_ref()
                .map_or("", |c| c.group.as_str());
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
        if self.config.shared_state.service.is_none() {
            return false;
        }
        let vector = (self.cache.as_ref())
            .and_then(|c| c.semantic.as_ref())
            .and_then(|s| self.fleet_vector(s, place.ttl_seconds()));
        let call = StateCall::put(
            STORE,
            &place.namespace,
            &place.key,
            None,
            place.ttl_seconds(),
            entry,
        );
        let Some(token) = self.send_state(&call) else {
            return false;
        };
        if let Some(caching) = self.cache.as_mut() {
            caching.waiting = Some((token, Waiting::Store(vector.map(Box::new))));
        }
        true
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
mod tests;
