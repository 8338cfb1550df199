//! The model list endpoints (`GET /v1/models`, `GET /v1/models/{id}` and
//! each surface's spelling of them), rendered by the surface whose clients
//! ask; what is listed is `discovered.rs`'s `models`.

use super::*;

impl<H: Host> Edge<H> {
    /// `GET /v1/models`: the models this caller may use, rendered by the
    /// surface whose clients ask (`surfaces::lister`).
    pub(super) fn models_list(&self) -> Vec<u8> {
        self.lister()
            .render_models(&self.models(), self.config.loaded_at)
    }

    /// `GET /v1/models/{id}`: one model this caller may use (404 otherwise,
    /// also for a group it may not use: its existence is not revealed).
    pub(super) fn model_retrieve(&self, id: &str) -> Result<Vec<u8>, GatewayError> {
        let group = self.config.model_groups.contains_key(id)
            && self.config.auth.allows(self.client.caller, id);
        let found = match group {
            true => Some(crate::model::listing::Listed::named(id)),
            false if self.config.discovery.is_some() => {
                self.models().into_iter().find(|m| m.id == id)
            }
            false => None,
        };
        let Some(model) = found else {
            let mut e = GatewayError::new(
                ErrorCode::ModelNotFound,
                format!("The model '{}' does not exist", id.escape_debug()),
            );
            e.param = Some("model".into());
            return Err(e);
        };
        Ok(self.lister().render_model(&model, self.config.loaded_at))
    }

    /// The surface the model list answers in, for this request's client.
    fn lister(&self) -> &'static dyn Surface {
        surfaces::lister(self.client.api, |name| {
            self.client.request_headers.has(name)
        })
    }
}
