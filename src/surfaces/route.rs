//! Routes: what a request line (method, path, query) asks of the gateway,
//! as the surface whose path it is reads it ([`super::Surface::route`]).

use crate::error::{ErrorCode, GatewayError};
use crate::model::call::Call;
use crate::model::request::ChatRequest;
use crate::model::surface_state::SurfaceState;
use crate::model::{Api, Generation};

/// A request line on one surface's path.
#[derive(Debug)]
pub struct Route {
    /// The surface whose path it is: an error answering the request is in
    /// its envelope.
    pub api: Api,
    /// The operation, or why the request line names none (a method the
    /// path does not take, a path of the API that names nothing).
    pub operation: Result<Operation, GatewayError>,
    /// The path is one of the API's operations (a generation, a native
    /// call): the request is metered (metrics, request log) even when
    /// refused; model lists and unknown paths are not.
    pub metered: bool,
}

/// What the gateway is asked to do.
#[derive(Debug, PartialEq)]
pub enum Operation {
    /// A generation, its body the surface's to parse.
    Generate(PathFacts),
    /// A native call (`crate::model::call`).
    Call(Call),
    /// The models the caller may use.
    ListModels,
    /// One model, by name (percent-decoded).
    Model(String),
}

/// What a generation's path says of it, for an API that puts request
/// fields in the path (Gemini's `models/{model}:streamGenerateContent`):
/// it overrides the body ([`PathFacts::apply`]).
#[derive(Debug, Default, PartialEq, Clone)]
pub struct PathFacts {
    pub model: Option<String>,
    pub stream: Option<bool>,
    /// What the path's surface keeps of it for its answers (Gemini's
    /// stream framing, which its query chooses): the generation's state
    /// unless the surface's parser makes its own.
    pub state: SurfaceState,
}

impl PathFacts {
    /// The generation of `request` (its surface's parser's, which keeps no
    /// state of its own): as its path has it ([`Self::apply`]), with the
    /// path's state.
    pub fn generation(&self, mut request: ChatRequest) -> Generation {
        self.apply(&mut request);
        Generation {
            request,
            state: self.state.clone(),
        }
    }

    /// The request as its path has it: the path's model and stream flag.
    pub fn apply(&self, request: &mut ChatRequest) {
        if let Some(model) = &self.model {
            request.model.clone_from(model);
        }
        if let Some(stream) = self.stream {
            request.stream = stream;
        }
    }
}

/// A gateway key the client gave in the request's query, on a surface
/// whose clients may ([`super::Surface::key_parameter`]): the key, and
/// the path and query without it, which is all that travels on (the key
/// never reaches a vendor nor a log).
#[derive(Debug, PartialEq)]
pub struct QueryKey {
    /// The key, percent-decoded.
    pub key: String,
    /// `path` with the query less the key's parameter.
    pub path: String,
}

impl QueryKey {
    /// The first `name` parameter of `query` (on `path`), if it has one.
    /// Every parameter of that name leaves the query, however its name is
    /// spelt (`k%65y`): the vendor would read each one as a key.
    pub fn take(name: &str, path: &str, query: &str) -> Option<QueryKey> {
        let decoded = |text: &str| crate::formats::url::decode_segment(&text.replace('+', " "));
        let mut key = None;
        let mut rest = Vec::new();
        for pair in query.split('&') {
            let (n, value) = pair
                .split_once('=')
                .map_or((pair, None), |(n, v)| (n, Some(v)));
            if n != name && decoded(n) != name {
                rest.push(pair);
            } else if key.is_none() {
                key = value.map(decoded);
            }
        }
        let rest = rest.join("&");
        let sep = if rest.is_empty() { "" } else { "?" };
        key.map(|key| QueryKey {
            key,
            path: format!("{path}{sep}{rest}"),
        })
    }
}

impl Route {
    /// A generation at `path`, which takes `POST` only.
    pub fn generation(api: Api, method: &str, path: &str) -> Route {
        Route {
            api,
            operation: only(method, path, "POST", || {
                Operation::Generate(PathFacts::default())
            }),
            metered: true,
        }
    }

    /// A path of `api` that names nothing (404).
    pub fn unknown(api: Api, path: &str) -> Route {
        Route {
            api,
            operation: Err(unknown_path(path)),
            metered: false,
        }
    }
}

/// `operation` when the request's method is `allow`, else a 405 naming
/// `shape`, the path as its documentation writes it.
pub fn only(
    method: &str,
    shape: &str,
    allow: &'static str,
    operation: impl FnOnce() -> Operation,
) -> Result<Operation, GatewayError> {
    if method == allow {
        Ok(operation())
    } else {
        Err(GatewayError::method_not_allowed(shape, method, allow))
    }
}

/// The 404 for a path no operation has.
pub fn unknown_path(path: &str) -> GatewayError {
    let mut e = GatewayError::new(
        ErrorCode::ModelNotFound,
        format!("unknown path {}", path.escape_debug()),
    );
    e.param = Some("path".into());
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::call::{Call, CallOp, StoredOp};

    /// The route's envelope, whether it is metered, and its operation or status.
    fn route(m: &str, p: &str, q: &str) -> Option<(Api, bool, Result<Operation, u16>)> {
        let r = crate::surfaces::route(m, p, q)?;
        Some((r.api, r.metered, r.operation.map_err(|e| e.status())))
    }

    #[test]
    fn generations_are_told_by_path_and_take_post_only() {
        let generate = |api| Some((api, true, Ok(Operation::Generate(PathFacts::default()))));
        assert_eq!(
            route("POST", "/v1/chat/completions", ""),
            generate(Api::OpenAiChat)
        );
        assert_eq!(
            route("POST", "/v1/messages", ""),
            generate(Api::AnthropicMessages)
        );
        assert_eq!(
            route("POST", "/v1/responses", ""),
            generate(Api::OpenAiResponses)
        );
        let refused = crate::surfaces::route("GET", "/v1/messages", "").unwrap();
        let e = refused.operation.unwrap_err();
        assert_eq!((refused.api, e.status()), (Api::AnthropicMessages, 405));
        assert_eq!(e.allow, Some("POST"));
        assert_eq!(e.message, "/v1/messages accepts POST, not GET");
    }

    #[test]
    fn the_model_list_is_openais_path_and_not_metered() {
        let chat = Api::OpenAiChat;
        assert_eq!(
            route("GET", "/v1/models", ""),
            Some((chat, false, Ok(Operation::ListModels)))
        );
        assert_eq!(
            route("GET", "/v1/models/a%2Fb", ""),
            Some((chat, false, Ok(Operation::Model("a/b".into()))))
        );
        assert_eq!(
            route("POST", "/v1/models", ""),
            Some((chat, false, Err(405)))
        );
        assert_eq!(
            route("DELETE", "/v1/models/x", ""),
            Some((chat, false, Err(405)))
        );
    }

    #[test]
    fn calls_are_told_by_method_and_path() {
        let (messages, responses) = (Api::AnthropicMessages, Api::OpenAiResponses);
        let call = |m, p, q| {
            let (api, metered, op) = route(m, p, q)?;
            assert!(metered, "{m} {p}");
            Some((api, op))
        };
        assert_eq!(
            call("POST", "/v1/messages/count_tokens", ""),
            Some((
                messages,
                Ok(Operation::Call(Call::new(
                    CallOp::CountTokens,
                    messages,
                    "/v1/messages/count_tokens"
                )))
            ))
        );
        assert_eq!(
            call("GET", "/v1/messages/count_tokens", ""),
            Some((messages, Err(405)))
        );
        let stored = |op, path: &str, query: &str| {
            let id = "resp_1".into();
            let mut call = Call::new(CallOp::Stored { op, id }, responses, path);
            call.query = query.into();
            Some((responses, Ok(Operation::Call(call))))
        };
        let (one, cancel, items) = (
            "/v1/responses/resp_1",
            "/v1/responses/resp_1/cancel",
            "/v1/responses/resp_1/input_items",
        );
        assert_eq!(
            call("GET", one, "include%5B%5D=x"),
            stored(StoredOp::Retrieve, one, "include%5B%5D=x")
        );
        assert_eq!(call("DELETE", one, ""), stored(StoredOp::Delete, one, ""));
        assert_eq!(
            call("POST", cancel, ""),
            stored(StoredOp::Cancel, cancel, "")
        );
        assert_eq!(
            call("GET", items, "limit=2"),
            stored(StoredOp::InputItems, items, "limit=2")
        );
        let refused = |status| Some((responses, Err(status)));
        assert_eq!(call("POST", "/v1/responses/resp_1", ""), refused(405));
        assert_eq!(call("GET", "/v1/responses/resp_1/cancel", ""), refused(405));
        assert_eq!(call("GET", "/v1/responses/resp_1/other", ""), refused(404));
        assert_eq!(call("GET", "/v1/responses/", ""), refused(404));
        assert_eq!(call("GET", "/v1/responses/a%2F..", ""), refused(400));
        assert_eq!(
            call("GET", "/v1/responses/resp_1", "stream=true"),
            refused(400)
        );
        assert_eq!(
            call("GET", "/v1/responses/resp_1", "after=\u{fffd}"),
            refused(400)
        );
    }

    #[test]
    fn a_calls_body_is_its_surfaces_to_read() {
        use crate::surfaces::parse_call_body;
        let count = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let routed = crate::surfaces::routed_call;
        let count_tokens = routed("POST", "/v1/messages/count_tokens", "");
        let request = parse_call_body(&count_tokens, count).unwrap();
        assert_eq!(request.map(|r| r.model().to_owned()), Some("m".to_owned()));
        let retrieve = routed("GET", "/v1/responses/resp_1", "");
        assert!(parse_call_body(&retrieve, b" ").unwrap().is_none());
        let cancel = routed("POST", "/v1/responses/resp_1/cancel", "");
        assert!(parse_call_body(&cancel, b" { } ").unwrap().is_none());
        let delete = routed("DELETE", "/v1/responses/resp_1", "");
        let e = parse_call_body(&delete, b"{}").unwrap_err();
        assert_eq!(e.message, "DELETE /v1/responses/{id} takes no request body");
    }

    #[test]
    fn unknown_paths_are_refused_in_their_apis_envelope_and_others_are_not_ours() {
        assert_eq!(
            route("GET", "/v1/messages/batches", ""),
            Some((Api::AnthropicMessages, false, Err(404)))
        );
        assert_eq!(
            route("POST", "/v1/messages/", ""),
            Some((Api::AnthropicMessages, false, Err(404)))
        );
        assert_eq!(
            route("POST", "/v1/images/generations", ""),
            Some((Api::OpenAiChat, false, Err(404)))
        );
        assert_eq!(
            route("POST", "/v1/embeddings", ""),
            Some((
                Api::OpenAiChat,
                true,
                Ok(Operation::Call(Call::new(
                    CallOp::Embeddings,
                    Api::OpenAiChat,
                    "/v1/embeddings"
                )))
            ))
        );
        let refused = crate::surfaces::route("GET", "/v1/embeddings", "").unwrap();
        assert_eq!(refused.operation.unwrap_err().status(), 405);
        assert_eq!(route("GET", "/healthz", ""), None);
        assert_eq!(route("POST", "/v1", ""), None);
    }

    #[test]
    fn an_unclaimed_path_is_refused_in_the_envelope_its_prefix_names_however_spelled() {
        let not_found = |api| Some((api, false, Err(404)));
        let messages = Api::AnthropicMessages;
        for path in [
            "/v1/Messages",
            "/v1/MESSAGES/count_tokens",
            "/v1/messages%2Fcount_tokens",
            "/v1/messages%2fcount_tokens",
            "/v1/messages;x",
            "/v1/messages;x/count_tokens",
            "/v1//messages",
            "/v1/%6Dessages",
        ] {
            assert_eq!(route("POST", path, ""), not_found(messages), "{path}");
            assert_eq!(route("GET", path, ""), not_found(messages), "{path}");
        }
        let responses = Api::OpenAiResponses;
        for path in ["/v1/Responses", "/v1/responses;x", "/v1/responses%2Fresp_1"] {
            assert_eq!(route("GET", path, ""), not_found(responses), "{path}");
        }
        let chat = Api::OpenAiChat;
        for path in [
            "/v1/Chat/completions",
            "/v1/chat/completions;x",
            "/v1/messagesx",
            "/v1/modelsx",
        ] {
            assert_eq!(route("POST", path, ""), not_found(chat), "{path}");
        }
        assert_eq!(route("GET", "/v1beta/modelsx", ""), not_found(Api::Gemini));
        assert_eq!(route("POST", "/v1", ""), None);
    }

    #[test]
    fn a_key_in_the_query_is_taken_out_of_it() {
        let taken = |query| QueryKey::take("key", "/p", query).map(|k| (k.key, k.path));
        assert_eq!(
            taken("alt=sse&key=k%2By"),
            Some(("k+y".to_owned(), "/p?alt=sse".to_owned()))
        );
        assert_eq!(taken("key=a&x=1"), Some(("a".into(), "/p?x=1".into())));
        assert_eq!(taken("key=a+b"), Some(("a b".into(), "/p".into())));
        assert_eq!(taken("alt=sse"), None);
        assert_eq!(taken("keys=a"), None);
        // Every key goes: a second one, or one whose name is encoded, would
        // reach the vendor (which reads it as a key) and the logs.
        assert_eq!(
            taken("key=a&alt=sse&key=b"),
            Some(("a".into(), "/p?alt=sse".into()))
        );
        assert_eq!(
            taken("k%65y=a&x=1&%6B%65%79=b"),
            Some(("a".into(), "/p?x=1".into()))
        );
        assert_eq!(taken("key&key=a"), Some(("a".into(), "/p".into())));
    }

    #[test]
    fn only_a_surface_whose_clients_may_give_a_key_in_the_query_takes_it() {
        use crate::surfaces::key_in_query;
        let gemini = key_in_query(Api::Gemini, "/v1beta/models/g:countTokens", "key=k&alt=sse");
        assert_eq!(
            gemini,
            Some(QueryKey {
                key: "k".into(),
                path: "/v1beta/models/g:countTokens?alt=sse".into()
            })
        );
        for api in [
            Api::OpenAiChat,
            Api::AnthropicMessages,
            Api::OpenAiResponses,
        ] {
            assert_eq!(key_in_query(api, "/v1/models", "key=k"), None, "{api:?}");
        }
    }

    #[test]
    fn the_model_list_is_rendered_for_the_client_that_asks() {
        use crate::surfaces::lister;
        let anthropic = |name: &str| name == "anthropic-version";
        let m = [crate::model::listing::Listed::named("m")];
        let list = |s: &dyn crate::surfaces::Surface| s.render_models(&m, 0);
        let openai = list(crate::surfaces::surface(Api::OpenAiChat));
        assert_eq!(list(lister(Api::OpenAiChat, |_| false)), openai);
        assert_ne!(list(lister(Api::OpenAiChat, anthropic)), openai);
        assert_eq!(
            list(lister(Api::OpenAiChat, anthropic)),
            list(crate::surfaces::surface(Api::AnthropicMessages))
        );
    }
}
