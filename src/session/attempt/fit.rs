//! Context fitting for this attempt (`crate::fitting`): the request fitted
//! to the window of the vendor model this attempt reached, before it is
//! encoded. The window is what `session::discovery::facts` knows
//! (configuration, the vendor's list, the shipped table). The summaries
//! `compress` applies are the edge's, made once per request before its
//! first attempt (`session::edge::summarise`), in filter state.
//!
//! A fitted (trimmed) request is always encoded from the neutral model,
//! also where the vendor speaks the client's API (a pass-through pair,
//! which otherwise sends the client's own bytes): the bytes are those of
//! the whole conversation, and editing them in place would be a second
//! encoder per API. A request the neutral model cannot carry whole (what
//! only the client API's vendors serve) is not trimmed.

use super::*;
use crate::fitting::{self, Report};
use crate::model::request::ChatRequest;
use crate::session::SUMMARIES_PROPERTY;

/// Filter state: this request's token count asked for the fitted count.
const FIT_COUNT_PROPERTY: &str = "llm_fit_count";

impl<H: Host> Attempt<H> {
    /// `request` fitted for vendor model `model` by the policy of this
    /// attempt's group (its rung's, on a ladder, else the request's
    /// group's): the request to send instead when it changed. The report
    /// is kept for the answer's `x-llm-context` and the access log, and
    /// counted (`llm_gateway.context_fitting`, by group and outcome).
    pub(super) fn fit(
        &self,
        request: &ChatRequest,
        model: &str,
    ) -> Result<Option<ChatRequest>, GatewayError> {
        let groups = &self.config.model_groups;
        let policy_of = |name: &str| groups.get(name).and_then(|g| g.fitting.as_ref());
        let (group, policy) = match self
            .upstream
            .rung
            .as_deref()
            .and_then(|r| Some((r, policy_of(r)?)))
        {
            Some(rung) => rung,
            None => match policy_of(&self.asked.group) {
                Some(policy) => (self.asked.group.as_str(), policy),
                None => return Ok(None),
            },
        };
        let facts = crate::session::discovery::facts(
            &self.host,
            &self.config,
            &self.upstream.provider_name,
            model,
        );
        let summaries = match policy.has(fitting::Strategy::Compress) {
            true => (self.host.property(&[SUMMARIES_PROPERTY]).ok().flatten())
                .map(|bytes| fitting::compress::decode(&bytes))
                .unwrap_or_default(),
            false => Vec::new(),
        };
        let window = facts.context_window;
        let (result, report) = match fitting::fit(policy, request, model, window, &summaries) {
            Ok(fitted) => (Ok(fitted.request), fitted.report),
            Err(refused) => (Err(refused.0), refused.1),
        };
        self.sent.context.set(Some(report));
        ignore(self.host.count(
            "llm_gateway.context_fitting",
            &[("group", group), ("outcome", report.outcome.as_str())],
            1,
        ));
        result
    }

    /// A token count asks for the count of the request as fitted
    /// (request header `x-llm-context: fit`; never forwarded: `x-llm-*`).
    /// The first attempt withholds the header from its vendor in the one
    /// header map all attempts share, so it remembers the ask in filter
    /// state (which clients cannot set) for a failover's later attempts.
    pub(super) fn asks_fitted_count(&self) -> bool {
        let asked = self
            .host
            .header(Map::Request, fitting::HEADER)
            .is_some_and(|v| v.eq_ignore_ascii_case(b"fit"));
        if asked {
            ignore(self.host.set_property(&[FIT_COUNT_PROPERTY], Some(b"fit")));
            return true;
        }
        self.host
            .property(&[FIT_COUNT_PROPERTY])
            .ok()
            .flatten()
            .is_some_and(|v| v == b"fit")
    }

    /// The `x-llm-context` value of this attempt, if it was fitted.
    pub(super) fn context_header(&self) -> Option<String> {
        self.sent.context.get().as_ref().map(Report::header)
    }
}
