//! The edge's use of model discovery and of what is known of models
//! (`session::discovery`), each off (and free) unless configured:
//! - the model list: the discovered models a caller's groups reach, after
//!   its groups (`discovery.route`);
//! - a request naming a discovered model no group is named for goes to a
//!   group whose provider lists it (`discovery.route`), its candidates on
//!   that provider asking for that vendor model;
//! - a candidate whose configured vendor model its vendor no longer lists
//!   is passed over while another can serve (`discovery.avoid_retired`);
//! - a candidate setting no limit of its own is checked against its
//!   vendor model's known window and output limit (`model_facts.check_limits`).

use super::*;
use crate::model::listing::Listed;
use crate::routing::Known;
use crate::session::discovery;

/// A request's model group, and the discovered route it takes, if any.
pub(super) type Resolved<'a> = (&'a str, &'a ModelGroup, Option<(String, String)>);

impl<H: Host> Edge<H> {
    /// `GET /v1/models`: the groups this caller may use, then the
    /// discovered models they reach.
    pub(super) fn models(&self) -> Vec<Listed> {
        let allows = |name: &str| self.config.auth.allows(self.client.caller, name);
        let mut models: Vec<Listed> = (self.config.model_groups.keys())
            .filter(|name| allows(name))
            .map(Listed::named)
            .collect();
        if self.config.discovery.is_some() {
            models.extend(discovery::reachable(&self.host, &self.config, allows));
        }
        models
    }

    /// The model group of a request naming `model`, with discovery's
    /// routing after the rules, and the discovered route taken, if any
    /// (the provider that lists the model, the vendor model): kept for the
    /// candidate choice and the handoff.
    pub(super) fn resolve_group<'a>(
        &self,
        config: &'a Config,
        header: Option<&'a str>,
        model: &'a str,
        request_header: &dyn Fn(&str) -> Option<String>,
        task_type: Option<&str>,
    ) -> Result<Resolved<'a>, GatewayError> {
        let Some(settings) = config.discovery.as_ref().filter(|s| s.route) else {
            let (name, group) = config.resolve_group(header, model, request_header, task_type)?;
            return Ok((name, group, None));
        };
        let caller = self.client.caller;
        let mut routed = None;
        let found = config.resolve_group_or(header, model, request_header, task_type, |model| {
            let view = discovery::view(&self.host, config)?;
            let allows = |group: &str| config.auth.allows(caller, group);
            let default = config.default_model_group.as_deref();
            let r = settings.route(&config.model_groups, default, &view, allows, model)?;
            routed = Some((r.provider.to_owned(), r.model));
            Some(r.group)
        })?;
        Ok((found.0, found.1, routed))
    }

    /// The candidate of `group` for a request (`client_model` its model),
    /// among those `has_it` accepts: on the provider of a discovered route,
    /// not retired where that is avoided, fit by known limits where they
    /// are checked.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn choose(
        &self,
        config: &Config,
        group: &str,
        model_group: &ModelGroup,
        needs: &Needs,
        bucket_key: &[u8],
        client_model: &str,
        has_it: impl Fn(&Candidate) -> bool,
    ) -> Result<usize, GatewayError> {
        let pin = self.client.provider_pin.as_deref();
        let settings = config.discovery.as_ref();
        let check_limits = config.model_facts.check_limits;
        if settings.is_none() && !check_limits {
            return model_group.choose_among(group, needs, bucket_key, pin, has_it);
        }
        let view = settings.and_then(|_| discovery::view(&self.host, config));
        let provider_of = |c: &'_ Candidate| -> Option<String> {
            settings
                .and_then(|s| s.provider_of(c))
                .or(c.provider.as_deref())
                .map(str::to_owned)
        };
        let vendor_model = |c: &Candidate, provider: &str| -> String {
            match (&self.admission.discovered, &c.model) {
                (Some((p, m)), _) if p == provider => m.clone(),
                (_, Some(m)) => m.clone(),
                _ => config
                    .providers
                    .get(provider)
                    .map_or(client_model, |p| p.vendor_model(group, client_model))
                    .to_owned(),
            }
        };
        let on_route = |c: &Candidate| match &self.admission.discovered {
            Some((p, _)) => provider_of(c).as_deref() == Some(p.as_str()),
            None => true,
        };
        let retired = |c: &Candidate| {
            let (Some(view), Some(provider)) = (&view, provider_of(c)) else {
                return false;
            };
            view.retired(&provider, &vendor_model(c, &provider))
        };
        let avoid = settings.is_some_and(|s| s.avoid_retired)
            && model_group
                .candidates
                .iter()
                .any(|c| has_it(c) && on_route(c) && !retired(c));
        let known = |c: &Candidate| {
            if !check_limits {
                return Known::default();
            }
            let Some(provider) = provider_of(c) else {
                return Known::default();
            };
            let facts =
                discovery::facts(&self.host, config, &provider, &vendor_model(c, &provider));
            Known {
                context_window: facts.context_window,
                max_output_tokens: facts.max_output_tokens,
            }
        };
        let eligible = |c: &Candidate| has_it(c) && on_route(c) && !(avoid && retired(c));
        let index = model_group.choose_knowing(group, needs, bucket_key, pin, eligible, known)?;
        if let (Some(s), Some(c)) = (settings, model_group.candidates.get(index)) {
            if s.recheck_after_seconds > 0 {
                if let Some(provider) = provider_of(c) {
                    let now = unix_millis(&self.host);
                    discovery::note_routed(s, &provider, &vendor_model(c, &provider), now);
                }
            }
        }
        Ok(index)
    }
}
