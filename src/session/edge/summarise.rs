//! The edge role's part of context fitting's `compress`
//! (`crate::fitting::compress`): the summaries of a request's old blocks,
//! made once per request before its first attempt (a failover does not
//! pay twice), and only when a candidate of its group could need them
//! (the request, with the policy's margin and its output limit, is over
//! the smallest known window of the group's candidates).
//!
//! Each block (oldest first, at most `max_blocks`, each within
//! `max_block_bytes`: its head and tail when longer) is a Chat Completions request to the policy's
//! summariser group, with the caller's own credential, through the
//! gateway's own listener (`edge/own_call.rs`): metered and charged to
//! the key as any of its requests. At most `self_calls.max_in_flight` are
//! out at once, and all of them within `timeout_ms` of the first: a call
//! sent later gets what is left of it, and none is sent once it is spent,
//! so the request waits at most `timeout_ms` whatever the number of
//! blocks. The summaries go to the
//! attempts in filter state (`SUMMARIES_PROPERTY`), each naming its block
//! by place and digest. A call that fails, is refused or too slow makes
//! no summary: the attempts' `compress` has less (or nothing) to apply
//! and the policy goes on to its next strategy; counted
//! (`llm_gateway.context_fitting`, `outcome: summariser_failed`) and
//! logged at most once a minute.

use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use super::*;
use crate::fitting::compress::{self, Summary};
use crate::fitting::{self, Policy, Strategy, Summariser};
use crate::session::callouts::{Callout, Callouts};
use crate::session::SUMMARIES_PROPERTY;

/// A block to summarise: its place, its text's digest, and the text sent.
struct Block {
    message: usize,
    part: usize,
    hash: String,
    text: String,
}

/// What the edge knows of a request's summaries while it makes them.
pub(super) struct Summarising {
    /// The request's group (the metric's label).
    group: String,
    summariser: Summariser,
    /// Blocks not sent yet (the oldest last: popped first).
    pending: Vec<Block>,
    out: Callouts<Block>,
    made: Vec<Summary>,
    failed: bool,
    /// When the first call went: all end within `timeout_ms` of it.
    started: SystemTime,
}

/// When a failed summariser call was last logged (Unix seconds; per worker).
static LOGGED: AtomicU64 = AtomicU64::new(0);

impl<H: Host> Edge<H> {
    /// The blocks of `request` to summarise, when its group or a rung of
    /// its ladder compresses (the first that does, in ladder order, says
    /// how) and a candidate of any of them could need them: the summaries
    /// are made once, before the first attempt, for whichever attempt
    /// needs them (a rung fits by its own policy, else the group's).
    pub(super) fn plan_summaries(
        &self,
        (group, model_group): (&str, &ModelGroup),
        request: &ChatRequest,
        needs: &Needs,
    ) -> Option<Summarising> {
        if self.client.part.is_some() || request.native_only.is_some() {
            return None;
        }
        let rungs = (model_group.fallback.iter())
            .filter_map(|r| Some((r.as_str(), self.config.model_groups.get(r)?)));
        let ladder: Vec<(&str, &ModelGroup)> =
            std::iter::once((group, model_group)).chain(rungs).collect();
        let (policy, summariser) = ladder.iter().find_map(|(_, g)| {
            let policy = g.fitting.as_ref().filter(|p| p.has(Strategy::Compress))?;
            Some((policy, policy.summariser.as_ref()?))
        })?;
        if !self.could_overflow(policy, &ladder, request, needs) {
            return None;
        }
        let max = summariser.max_blocks;
        let blocks = compress::blocks(&request.messages, summariser.min_block_bytes, max);
        if blocks.is_empty() {
            return None;
        }
        let mut pending: Vec<Block> = (blocks.iter().rev())
            .map(|b| Block {
                message: b.message,
                part: b.part,
                hash: compress::digest(b.text),
                text: compress::head_and_tail(b.text, summariser.max_block_bytes),
            })
            .collect();
        pending.shrink_to_fit();
        let in_flight = (self.config.self_calls.as_ref()).map_or(1, |c| c.max_in_flight);
        Some(Summarising {
            group: group.to_owned(),
            summariser: summariser.clone(),
            pending,
            out: Callouts::new(in_flight),
            made: Vec::new(),
            failed: false,
            started: self.host.now(),
        })
    }

    /// Whether the request could be over a candidate's window: the smallest
    /// window known of the candidates of the ladder's groups (their
    /// `capabilities`, else what `session::discovery::facts` knows of their
    /// vendor model).
    fn could_overflow(
        &self,
        policy: &Policy,
        ladder: &[(&str, &ModelGroup)],
        request: &ChatRequest,
        needs: &Needs,
    ) -> bool {
        let output = needs.output_tokens.map_or(0, u64::from);
        let window = |group: &str, c: &Candidate| {
            c.capabilities.context_window.or_else(|| {
                let provider = c.provider.as_deref()?;
                let model = match &c.model {
                    Some(model) => model.as_str(),
                    None => {
                        (self.config.providers.get(provider))?.vendor_model(group, &request.model)
                    }
                };
                crate::session::discovery::facts(&self.host, &self.config, provider, model)
                    .context_window
            })
        };
        (ladder.iter())
            .flat_map(|(group, g)| g.candidates.iter().map(move |c| (*group, c)))
            .filter_map(|(group, c)| window(group, c))
            .min()
            .is_some_and(|w| !fitting::fits_window(policy, needs.prompt_tokens, output, w))
    }

    /// Sends the summariser calls `summarising` plans (as many as may be
    /// out at once): the request then waits for them, unless none went.
    pub(super) fn start_summaries(&mut self, mut summarising: Summarising, client: &Headers) {
        self.send_summaries(&mut summarising, client);
        if summarising.out.is_empty() {
            self.finish_summaries(summarising);
            return;
        }
        self.summarising = Some((Box::new(summarising), client.clone()));
    }

    fn send_summaries(&self, summarising: &mut Summarising, client: &Headers) {
        let Some(calls) = self.config.self_calls.as_ref() else {
            summarising.failed = true;
            summarising.pending.clear();
            return;
        };
        while summarising.out.has_room() && !summarising.pending.is_empty() {
            let s = &summarising.summariser;
            let spent =
                (self.host.now().duration_since(summarising.started)).map_or(0, |d| d.as_millis());
            let left = u128::from(s.timeout_ms).saturating_sub(spent);
            let Ok(left @ 1..) = u32::try_from(left) else {
                // Out of time: the blocks not sent are not summarised.
                summarising.failed = true;
                summarising.pending.clear();
                return;
            };
            let Some(block) = summarising.pending.pop() else {
                return;
            };
            let body = serde_json::json!({
                "model": s.model(),
                "messages": [
                    {"role": "system", "content": compress::INSTRUCTION},
                    {"role": "user", "content": block.text},
                ],
                "max_tokens": s.max_summary_tokens,
                "stream": false,
            });
            let Ok(body) = serde_json::to_vec(&body) else {
                summarising.failed = true;
                continue;
            };
            let id = format!(
                "{}-summary-{}-{}",
                self.client.request_id, block.message, block.part
            );
            let headers = own_call::headers(client, "/v1/chat/completions", &s.group, id);
            let mut headers = own_call::borrowed(&headers);
            // The pseudo-headers are the callout's own.
            headers.retain(|(name, _)| !name.starts_with(':'));
            let authority = (client.get(":authority"))
                .and_then(|a| std::str::from_utf8(a).ok())
                .unwrap_or("llm-gateway");
            let call = Callout {
                cluster: &calls.cluster,
                method: "POST",
                path: "/v1/chat/completions",
                authority,
                headers: &headers,
                body: &body,
                timeout_ms: left,
            };
            if let Err(e) = summarising.out.send(&self.host, &call, block) {
                log_once(&e, "a block is not summarised");
                summarising.failed = true;
            }
        }
    }

    /// Callout `token` is one of this request's summariser calls.
    pub(super) fn summaries_wait_for(&self, token: u32) -> bool {
        (self.summarising.as_ref()).is_some_and(|(s, _)| s.out.waits_for(token))
    }

    /// The request waits for its summaries.
    pub(super) fn summaries_wait(&self) -> bool {
        self.summarising.is_some()
    }

    /// A summariser call answered (or failed): its summary kept, the next
    /// block sent; once none is out, the summaries go to the attempts and
    /// the request goes on.
    pub(super) fn on_summary(&mut self, token: u32, answer: CalloutAnswer) -> Flow {
        let Some((mut summarising, client)) = self.summarising.take() else {
            return Flow::Pause;
        };
        if let Some(block) = summarising.out.answered(token) {
            let text = match answer {
                CalloutAnswer::Answered {
                    status: 200, body, ..
                } => compress::answer_text(&body),
                _ => None,
            };
            match text {
                Some(text) => summarising.made.push(Summary {
                    message: block.message,
                    part: block.part,
                    hash: block.hash,
                    text: compress::cut(&text, compress::MAX_SUMMARY_BYTES).to_owned(),
                }),
                None => summarising.failed = true,
            }
        }
        self.send_summaries(&mut summarising, &client);
        if !summarising.out.is_empty() {
            self.summarising = Some((summarising, client));
            return Flow::Pause;
        }
        self.finish_summaries(*summarising);
        self.state = State::Forwarded;
        Flow::Continue
    }

    /// The summaries made, handed to the attempts; a failure counted.
    fn finish_summaries(&self, summarising: Summarising) {
        if summarising.failed {
            ignore(self.host.count(
                "llm_gateway.context_fitting",
                &[
                    ("group", summarising.group.as_str()),
                    ("outcome", "summariser_failed"),
                ],
                1,
            ));
            if own_call::log_now(&self.host, &LOGGED) {
                log::warn!(
                    "llm gateway: a context fitting summariser call to group '{}' failed \
                     (its block is not compressed; llm_gateway.context_fitting counts each \
                     request as summariser_failed; logged once a minute)",
                    summarising.summariser.group
                );
            }
        }
        if summarising.made.is_empty() {
            return;
        }
        if let Some(bytes) = compress::encode(&summarising.made) {
            ignore(self.host.set_property(&[SUMMARIES_PROPERTY], Some(&bytes)));
        }
    }
}
