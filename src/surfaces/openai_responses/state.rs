//! [`ResponsesState`]: what this surface keeps of a request for its
//! `response` object, and what the gateway's response store asks of it
//! (`crate::responses_store`).

use serde_json::{Map, Value};

use crate::model::copy_on_write::Shared;
use crate::model::surface_state::OwnState;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResponsesState {
    /// The request members a `response` repeats (`tools`, `instructions`,
    /// `text`...), as the client sent them, OpenAI's defaults where it sent
    /// nothing. Tools and instructions can be large: copies share them.
    pub echo: Shared<Map<String, Value>>,
    /// The client said `store: false`: its answer is not kept.
    pub unstored: bool,
    /// The gateway's id for a response it stores (else the answer's id is
    /// made from the vendor's).
    pub id: Option<String>,
}

impl OwnState for ResponsesState {
    fn stores_answer(&self) -> bool {
        !self.unstored
    }

    /// The `response` names it as its `previous_response_id`.
    fn continues(&mut self, previous_id: &str) {
        self.echo
            .insert("previous_response_id".into(), previous_id.into());
    }

    fn set_answer_id(&mut self, id: &str) {
        self.id = Some(id.to_owned());
    }
}
