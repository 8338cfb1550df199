//! The edge role's part of the semantic cache (`crate::cache::semantic`),
//! for a lookup the exact cache (the proxy's store, then the fleet's)
//! missed on a group with `cache.semantic`:
//! - the prompt's text is embedded by the configured embedding group: an
//!   OpenAI embeddings request, with the caller's own credential, sent to
//!   the gateway's own listener (`self_calls.cluster`) as a callout while
//!   the request waits (`edge/own_call.rs`). It is any request of that
//!   key's there: authenticated, admitted by the key's limits, routed,
//!   metered and charged to it;
//! - its vector is compared with the group index's vectors of the same
//!   partition (`semantic_index`); one at least `threshold` close names
//!   the exact entry the request is then answered with, as the exact
//!   cache answers (`semantic-hit`);
//! - on a miss, the vector is kept for the answer's entry: once that is
//!   stored, the vector goes into the index beside it;
//! - with the fleet's store (`shared_state.service`), a vector the
//!   proxy's own index has nothing close to is searched for in the
//!   fleet's (`POST /v1/vectors/...`, the same partition, the group's
//!   threshold): the id it answers is the exact key of an entry another
//!   proxy stored, which is then fetched as the exact cache fetches (a
//!   second callout), copied into the proxy's store, and the vector put
//!   into the proxy's index beside it; a stored answer's vector is put
//!   into the fleet's index too, once its entry is there. A service that
//!   does not answer is a miss, counted (`llm_gateway.shared_state`, `op`
//!   `search`, `put_vector`);
//! - an embedding call that fails, is refused or too slow
//!   (`timeout_ms`): a miss, counted (`llm_gateway.cache_semantic`,
//!   `outcome: unavailable`) and logged once an interval.

use std::sync::atomic::AtomicU64;

use super::*;
use crate::cache::key::RequestKey;
use crate::cache::semantic::{self as semantic_cache, vector_of, Index, Prompt};
use crate::cache::semantic_index::Quantized;
use crate::cache::store::Place;
use crate::session::host::unix_seconds;
use crate::session::shared_data::HostStore;
use crate::shared_state::remote::Call as StateCall;
use crate::shared_state::Key;

/// What the semantic cache knows of one request.
pub(super) struct Semantic {
    /// Its partition in the group's index.
    partition: Key,
    /// Its exact key (the entry its answer is stored as).
    request: RequestKey,
    /// Its prompt's vector, once embedded.
    vector: Option<Quantized>,
    /// The exact key of the entry found close enough.
    found: Option<RequestKey>,
    /// The fleet's index was searched already.
    searched: bool,
    /// The embedding call failed.
    failed: bool,
}

/// The store the fleet's index is kept under (`shared_state::protocol`).
pub(super) const FLEET_VECTORS: &str = "llm_semantic";

/// When a failed embedding call was last logged (Unix seconds; per worker).
static LOGGED: AtomicU64 = AtomicU64::new(0);

fn shared<H: Host>(host: &H) -> HostStore<'_, H> {
    HostStore::new(host, "the semantic cache is skipped")
}

impl<H: Host> Edge<H> {
    /// Sends the embedding call for `request`'s prompt (to be stored at,
    /// or found near, `place`): its token and what is known so far, or
    /// `None` when the prompt is not compared by meaning or the call could
    /// not be sent (counted).
    pub(super) fn embed_prompt(
        &self,
        (group, settings): (&str, &semantic_cache::Settings),
        request: &ChatRequest,
        place: &Place,
        client: &Headers,
    ) -> Option<(u32, Semantic)> {
        let prompt = Prompt::of(group, request)?;
        if prompt.text.len() as u64 > settings.max_text_bytes {
            self.count_semantic(group, "skipped");
            return None;
        }
        let cluster = self.config.self_calls.as_ref()?.cluster.as_str();
        let body = serde_json::json!({"model": settings.model(), "input": prompt.text});
        let body = serde_json::to_vec(&body).ok()?;
        let id = format!("{}-semantic", self.client.request_id);
        let group_of_call = &settings.embedding_group;
        let headers = own_call::headers(client, "/v1/embeddings", group_of_call, id);
        let headers = own_call::borrowed(&headers);
        let request_key = RequestKey::of(group, request);
        match (self.host).http_call(cluster, &headers, &body, settings.timeout_ms) {
            Ok(token) => Some((
                token,
                Semantic {
                    partition: prompt.partition(&place.namespace, settings),
                    request: request_key,
                    vector: None,
                    found: None,
                    searched: false,
                    failed: false,
                },
            )),
            Err(e) => {
                log_once(&e, "the semantic cache is skipped");
                self.count_semantic(group, "unavailable");
                None
            }
        }
    }

    /// The embedding call's answer: the prompt's vector, and the entry the
    /// group's index holds close enough to it, if any.
    pub(super) fn on_embedding(&self, semantic: &mut Semantic, answer: CalloutAnswer) {
        let Some((group, settings)) = self.semantic_settings() else {
            return;
        };
        let vector = match answer {
            CalloutAnswer::Answered {
                status: 200, body, ..
            } => vector_of(&body),
            _ => None,
        };
        let Some(vector) = vector.as_deref().and_then(Quantized::of) else {
            semantic.failed = true;
            self.log_failed(&settings.embedding_group);
            return;
        };
        let now = unix_seconds(&self.host);
        let store = shared(&self.host);
        let index = Index::new(&store, &group, &settings);
        let threshold = settings.threshold as f32;
        semantic.found =
            (index.lookup(&semantic.partition, &vector, threshold, now)).map(|found| found.request);
        semantic.vector = Some(vector);
    }

    /// The exact key of the entry the index found for this request.
    pub(super) fn semantic_found(semantic: Option<&Semantic>) -> Option<RequestKey> {
        semantic.and_then(|s| s.found)
    }

    /// The search of the fleet's index for `semantic`'s vector, when the
    /// proxy's own found none and the fleet's was not searched yet (it is
    /// marked so).
    pub(super) fn fleet_search(&self, semantic: &mut Semantic) -> Option<StateCall> {
        self.config.shared_state.service.as_ref()?;
        if semantic.searched || semantic.found.is_some() {
            return None;
        }
        let vector = semantic.vector.as_ref()?;
        let (_, settings) = self.semantic_settings()?;
        semantic.searched = true;
        Some(StateCall::search(
            FLEET_VECTORS,
            &semantic.partition,
            settings.threshold as f32,
            vector.to_bytes(),
        ))
    }

    /// The fleet's index found the entry of `request`: it is the found one.
    pub(super) fn found_in_fleet(semantic: &mut Semantic, request: RequestKey) {
        semantic.found = Some(request);
    }

    /// The call that puts `semantic`'s vector into the fleet's index, for
    /// `ttl_seconds` (its entry's), when there is a vector and a fleet.
    pub(super) fn fleet_vector(&self, semantic: &Semantic, ttl_seconds: u64) -> Option<StateCall> {
        self.config.shared_state.service.as_ref()?;
        let vector = semantic.vector.as_ref()?;
        Some(StateCall::put_vector(
            FLEET_VECTORS,
            &semantic.partition,
            &semantic.request.0,
            ttl_seconds,
            vector.to_bytes(),
        ))
    }

    /// Counts what the lookup came to: `hit` (answered), else `unavailable`
    /// (no vector) or `miss`.
    pub(super) fn count_lookup(&self, group: &str, semantic: &Semantic, answered: bool) {
        let outcome = match (answered, semantic.failed) {
            (true, _) => "hit",
            (false, true) => "unavailable",
            (false, false) => "miss",
        };
        self.count_semantic(group, outcome);
    }

    /// The answer's entry was stored (until `expires`): its prompt's
    /// vector goes into the group's index beside it.
    pub(super) fn index_answer(&self, semantic: &Semantic, now: u64, expires: u64) {
        self.index_vector(semantic, &semantic.request, (now, expires));
    }

    /// `semantic`'s vector goes into the group's index for the entry of
    /// `request` (its own, or the one the fleet's index found), until
    /// `expires`.
    pub(super) fn index_vector(
        &self,
        semantic: &Semantic,
        request: &RequestKey,
        (now, expires): (u64, u64),
    ) {
        let (Some(vector), Some((group, settings))) =
            (semantic.vector.as_ref(), self.semantic_settings())
        else {
            return;
        };
        let store = shared(&self.host);
        let index = Index::new(&store, &group, &settings);
        index.insert(&semantic.partition, request, vector, (now, expires));
    }

    /// The request's group and its semantic cache's settings.
    fn semantic_settings(&self) -> Option<(String, semantic_cache::Settings)> {
        let group = self.admission.chat.as_ref()?.group.clone();
        let settings = (self.config.model_groups.get(&group))
            .and_then(|g| g.cache.as_ref())
            .and_then(|c| c.semantic.clone())?;
        Some((group, settings))
    }

    fn count_semantic(&self, group: &str, outcome: &str) {
        ignore(self.host.count(
            "llm_gateway.cache_semantic",
            &[("group", group), ("outcome", outcome)],
            1,
        ));
    }

    /// A failed embedding call, logged at most once a minute (per worker).
    fn log_failed(&self, embedding_group: &str) {
        if own_call::log_now(&self.host, &LOGGED) {
            log::warn!(
                "llm gateway: the semantic cache's embedding call to group '{embedding_group}' \
                 failed (requests go on uncached; llm_gateway.cache_semantic counts each as \
                 unavailable; logged once a minute)"
            );
        }
    }
}
