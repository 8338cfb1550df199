//! OpenAI's Responses API (`POST /v1/responses`; Azure OpenAI's v1 API at
//! `/openai/v1/responses`, with Azure's `api-key`): request rules, the
//! `response` object and the semantic event stream, shaped like the real API
//! (platform.openai.com/docs/api-reference/responses/create,
//! .../responses/object, .../responses-streaming).
//!
//! The mock keeps the ids of the responses it made, so a
//! `previous_response_id` it never made is refused as OpenAI refuses it; the
//! history of one it made is not replayed (tests send the whole history).
//! The last [`stored::STORED`] responses made with `store` not false are
//! kept whole, for the stored-response calls (.../responses/get, /delete,
//! /cancel, /input-items): each vendor (OpenAI, Azure) finds only its own.
//!
//! The dialect is here; its request rules (parameters, `text`, tools, input
//! items) are in `request`, the made and stored responses and their calls
//! in `stored`, and the `response` object's parts and stream events in
//! `render`.

mod render;
mod request;
mod stored;

use serde_json::{json, Value};

use crate::answer::Answer;
use crate::dialect::{count_words, Dialect, Failure, Meta, Prompt, Reply, SseEvent};
use crate::http::Request;
use crate::openai::{reasoning_model, OpenAi};
use render::{output, response_id, status, stream_item, usage, Events};
use request::{
    check_range, check_text, missing, param, read_items, tools, unknown, INCLUDABLE, PARAMETERS,
};
use stored::{keep, listed_item, made, remember, stored_path, Stored};

pub struct Responses;

const PATH: &str = "/v1/responses";
/// Azure OpenAI's v1 API (learn.microsoft.com/azure/ai-foundry/openai/reference-preview-latest).
const AZURE_PATH: &str = "/openai/v1/responses";

/// Request fields a `response` repeats (the reference's Response object).
const ECHOED: &[&str] = &[
    "instructions",
    "max_output_tokens",
    "metadata",
    "parallel_tool_calls",
    "previous_response_id",
    "reasoning",
    "service_tier",
    "store",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
    "user",
];

impl Dialect for Responses {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn handles(&self, path: &str) -> bool {
        path.ends_with(PATH)
    }

    fn parse_request(&self, req: &Request, body: &Value) -> Result<Prompt, Failure> {
        let mut p = self.parse(body)?;
        p.azure = req.path().ends_with(AZURE_PATH);
        Ok(p)
    }

    fn has_call(&self, path: &str) -> bool {
        stored_path(path).is_some()
    }

    fn call(&self, req: &Request, path: &str) -> Reply {
        let Some((azure, id, rest)) = stored_path(path) else {
            return self.error(&Failure::Status(404));
        };
        let checked = if azure {
            crate::azure::Azure.check_headers(req)
        } else {
            OpenAi.check_headers(req)
        };
        match checked {
            Ok(()) => self.stored_call(req, azure, id, rest),
            Err(f) => self.error(&f),
        }
    }

    fn check_headers(&self, req: &Request) -> Result<(), Failure> {
        if req.path().ends_with(AZURE_PATH) {
            return crate::azure::Azure.check_headers(req);
        }
        OpenAi.check_headers(req)
    }

    fn parse(&self, body: &Value) -> Result<Prompt, Failure> {
        let obj = body
            .as_object()
            .ok_or_else(|| Failure::Invalid("The request body must be a JSON object.".into()))?;
        if let Some(key) = obj.keys().find(|k| !PARAMETERS.contains(&k.as_str())) {
            return Err(unknown(key));
        }
        let model = obj
            .get("model")
            .and_then(Value::as_str)
            .ok_or_else(|| missing("model"))?;
        if let Some(id) = obj.get("previous_response_id").and_then(Value::as_str) {
            if !made(id) {
                return Err(param(
                    format!("Previous response with id '{id}' not found."),
                    "previous_response_id",
                    Some("previous_response_not_found"),
                ));
            }
        }
        let stateful = ["previous_response_id", "prompt", "conversation"]
            .iter()
            .any(|k| obj.get(*k).is_some_and(|v| !v.is_null()));
        let input = obj.get("input").filter(|v| !v.is_null());
        if input.is_none() && !stateful {
            return Err(missing("input"));
        }
        if let Some(n) = obj.get("max_output_tokens").filter(|v| !v.is_null()) {
            match n.as_i64() {
                Some(n) if n >= 16 => {}
                Some(n) => {
                    return Err(param(
                        format!("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got {n} instead."),
                        "max_output_tokens",
                        Some("integer_below_min_value"),
                    ))
                }
                None => {
                    return Err(param(
                        "Invalid type for 'max_output_tokens': expected an integer.",
                        "max_output_tokens",
                        Some("invalid_type"),
                    ))
                }
            }
        }
        check_range(obj, "temperature", 2.0)?;
        check_range(obj, "top_p", 1.0)?;
        let reasoning = obj.get("reasoning").filter(|r| !r.is_null());
        if reasoning_model(model) {
            // Reasoning models: only the default sampling (as on chat).
            for name in ["temperature", "top_p"] {
                if obj
                    .get(name)
                    .is_some_and(|v| !v.is_null() && v.as_f64() != Some(1.0))
                {
                    return Err(param(
                        format!(
                            "Unsupported parameter: '{name}' is not supported with this model."
                        ),
                        name,
                        Some("unsupported_parameter"),
                    ));
                }
            }
        } else if let Some(r) = reasoning {
            for key in ["effort", "summary"] {
                if r.get(key).is_some_and(|v| !v.is_null()) {
                    let name = format!("reasoning.{key}");
                    return Err(param(
                        format!(
                            "Unsupported parameter: '{name}' is not supported with this model."
                        ),
                        &name,
                        Some("unsupported_parameter"),
                    ));
                }
            }
        }
        if let Some(metadata) = obj.get("metadata").filter(|m| !m.is_null()) {
            let m = metadata.as_object().ok_or_else(|| {
                param(
                    "Invalid type for 'metadata': expected an object.",
                    "metadata",
                    Some("invalid_type"),
                )
            })?;
            if m.len() > 16 {
                return Err(param(
                    format!("Invalid 'metadata': too many properties. Expected an object with at most 16 properties, but got an object with {} properties instead.", m.len()),
                    "metadata",
                    Some("object_above_max_properties"),
                ));
            }
            if let Some((k, _)) = m
                .iter()
                .find(|(k, v)| k.len() > 64 || v.as_str().is_none_or(|s| s.len() > 512))
            {
                return Err(param(
                    format!("Invalid 'metadata.{k}': keys are at most 64 characters, values strings of at most 512."),
                    &format!("metadata.{k}"),
                    Some("invalid_value"),
                ));
            }
        }
        let streaming = obj.get("stream").and_then(Value::as_bool) == Some(true);
        if obj.get("stream_options").is_some_and(|o| !o.is_null()) && !streaming {
            return Err(param(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                "stream_options",
                None,
            ));
        }
        if let Some(include) = obj.get("include").and_then(Value::as_array) {
            if let Some(bad) = include
                .iter()
                .find(|v| v.as_str().is_none_or(|s| !INCLUDABLE.contains(&s)))
            {
                return Err(param(
                    format!(
                        "Invalid value: {bad}. Supported values are: {}.",
                        INCLUDABLE.join(", ")
                    ),
                    "include",
                    Some("invalid_value"),
                ));
            }
        }
        // Only reasoning models have encrypted reasoning to include.
        let encrypted = obj
            .get("include")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|v| v == "reasoning.encrypted_content"));
        if encrypted && !reasoning_model(model) {
            return Err(param(
                "Encrypted content is not supported with this model.",
                "include",
                None,
            ));
        }
        let mut p = Prompt {
            model: model.to_owned(),
            max_tokens: obj.get("max_output_tokens").and_then(Value::as_u64),
            tools: tools(obj)?,
            json: match obj.get("text").filter(|t| !t.is_null()) {
                Some(text) => check_text(text)?,
                None => None,
            },
            echo: ECHOED
                .iter()
                .filter_map(|k| Some(((*k).to_owned(), obj.get(*k)?.clone())))
                .collect(),
            ..Prompt::default()
        };
        p.tool_choice = crate::openai::tool_choice(obj.get("tool_choice"), "/name");
        if let Some(instructions) = obj.get("instructions").and_then(Value::as_str) {
            p.prompt_words += count_words(instructions);
        }
        p.input_items = match input {
            Some(Value::String(text)) => {
                vec![json!({"type": "message", "role": "user", "content": text})]
            }
            Some(Value::Array(items)) => items.clone(),
            _ => Vec::new(),
        };
        match input {
            Some(Value::String(text)) => {
                p.prompt_words += count_words(text);
                p.last_user_text = text.clone();
            }
            Some(Value::Array(items)) => {
                read_items(items, &mut p)?;
                crate::openai_parts::check_input_parts(items, model)?;
            }
            Some(_) => {
                return Err(param(
                    "Invalid type for 'input': expected a string or an array of input items.",
                    "input",
                    Some("invalid_type"),
                ))
            }
            None => {}
        }
        Ok(p)
    }

    fn error(&self, failure: &Failure) -> Reply {
        OpenAi.error(failure)
    }

    fn response(&self, p: &Prompt, a: &Answer, meta: Meta) -> Value {
        let id = response_id(meta);
        remember(id.clone());
        let (status, incomplete) = status(a);
        let mut response = json!({
            "id": id,
            "object": "response",
            "created_at": meta.created,
            "status": status,
            "background": false,
            "error": null,
            "incomplete_details": incomplete,
            "instructions": null,
            "max_output_tokens": p.max_tokens,
            // Azure names the deployment's model, not the deployment.
            "model": if p.azure { crate::azure::DEPLOYED_MODEL } else { p.model.as_str() },
            "output": output(p, a, meta, status),
            "parallel_tool_calls": true,
            "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null},
            "service_tier": "default",
            "store": true,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage(a),
            "user": null,
            "metadata": {},
        });
        for (key, value) in &p.echo {
            response[key] = value.clone();
        }
        if response["store"] != false {
            let input_items = p
                .input_items
                .iter()
                .enumerate()
                .map(|(i, item)| listed_item(item, format!("msg_in{}_{i}", meta.seq)))
                .collect();
            keep(Stored {
                azure: p.azure,
                response: response.clone(),
                input_items,
            });
        }
        response
    }

    fn stream(&self, p: &Prompt, a: &Answer, meta: Meta) -> Vec<SseEvent> {
        let mut s = Events::default();
        let mut response = self.response(p, a, meta);
        let done_output = response["output"].take();
        let terminal = response["status"].clone();
        let (usage, incomplete) = (
            response["usage"].take(),
            response["incomplete_details"].take(),
        );
        response["status"] = "in_progress".into();
        response["output"] = json!([]);
        response["usage"] = Value::Null;
        s.push("response.created", json!({"response": response}), false);
        s.push("response.in_progress", json!({"response": response}), false);
        let items = done_output.as_array().cloned().unwrap_or_default();
        for (index, item) in items.iter().enumerate() {
            stream_item(&mut s, index, item, a);
        }
        response["status"] = terminal.clone();
        response["output"] = done_output;
        response["usage"] = usage;
        response["incomplete_details"] = incomplete;
        let name = if terminal == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        s.push(name, json!({"response": response}), false);
        s.events
    }

    fn stream_error(&self) -> SseEvent {
        SseEvent {
            name: Some("error"),
            data: r#"{"type":"error","code":"server_error","message":"The server had an error while processing your request.","param":null,"sequence_number":0}"#.into(),
            delta: false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::answer::plan;
    use crate::scenario::Scenario;

    fn refused(body: Value) -> (String, String) {
        match Responses.parse(&body) {
            Err(Failure::Param { param, message, .. }) => (param, message),
            other => panic!("not refused with a param: {other:?}"),
        }
    }

    #[test]
    fn refuses_what_openai_refuses() {
        let base = json!({"model": "gpt-4o", "input": "hi"});
        let with = |extra: Value| {
            let mut b = base.clone();
            b.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            b
        };
        assert_eq!(refused(with(json!({"frobnicate": 1}))).0, "frobnicate");
        assert_eq!(
            refused(with(json!({"max_output_tokens": 15}))).0,
            "max_output_tokens"
        );
        assert_eq!(refused(with(json!({"temperature": 2.5}))).0, "temperature");
        assert_eq!(
            refused(with(json!({"reasoning": {"effort": "low"}}))).0,
            "reasoning.effort"
        );
        assert_eq!(refused(json!({"model": "gpt-4o"})).0, "input");
        let loose = json!({"format": {"type": "json_schema", "name": "s", "strict": true,
            "schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}});
        assert_eq!(
            refused(with(json!({ "text": loose }))).0,
            "text.format.schema"
        );
        let (param, message) = refused(with(json!({"previous_response_id": "resp_nobody"})));
        assert_eq!(param, "previous_response_id");
        assert!(message.contains("not found"));
        let orphan = json!([{"type": "function_call_output", "call_id": "c1", "output": "x"}]);
        assert_eq!(refused(with(json!({ "input": orphan }))).0, "input");
        for (tool, at) in [
            (
                json!({"type": "web_search", "domains": []}),
                "tools[0].domains",
            ),
            (
                json!({"type": "namespace", "name": "n", "tools": []}),
                "tools[0].description",
            ),
            (
                json!({"type": "namespace", "name": "n", "description": "d",
                       "tools": [{"type": "mcp"}]}),
                "tools[0].tools[0].type",
            ),
        ] {
            assert_eq!(refused(with(json!({"tools": [tool]}))).0, at);
        }
        let codex = json!({"tools": [{"type": "web_search", "external_web_access": true},
            {"type": "namespace", "name": "n", "description": "d",
             "tools": [{"type": "function", "name": "f", "parameters": {}, "strict": false}]}]});
        assert!(Responses.parse(&with(codex)).is_ok());
        let (param, message) = refused(with(json!({"include": ["reasoning.encrypted_content"]})));
        assert_eq!(param, "include");
        assert!(message.contains("Encrypted content is not supported"));
        // A reasoning model takes reasoning, but only the default sampling.
        let o3 = json!({"model": "o3", "input": "hi", "reasoning": {"effort": "low"},
                        "include": ["reasoning.encrypted_content"]});
        assert!(Responses.parse(&o3).is_ok());
        let hot = json!({"model": "o3", "input": "hi", "temperature": 0.5});
        assert_eq!(refused(hot).0, "temperature");
    }

    #[test]
    fn a_response_it_made_may_be_continued() {
        let p = Responses
            .parse(&json!({"model": "gpt-4o", "input": "hi"}))
            .unwrap();
        let a = plan(&p, &Scenario::default(), "openai", None);
        let id = Responses.response(
            &p,
            &a,
            Meta {
                seq: 991,
                created: 1,
            },
        )["id"]
            .clone();
        let next = json!({"model": "gpt-4o", "input": "more", "previous_response_id": id});
        assert!(Responses.parse(&next).is_ok());
    }

    #[test]
    fn stream_events_are_numbered_and_end_with_the_response() {
        let body = json!({"model": "gpt-4o", "input": "look", "stream": true, "instructions": "x",
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object",
                "properties": {"q": {"type": "string"}}}}], "tool_choice": "required"});
        let p = Responses.parse(&body).unwrap();
        let a = plan(&p, &Scenario::default(), "openai", None);
        let events = Responses.stream(&p, &a, Meta { seq: 5, created: 1 });
        let data: Vec<Value> = events
            .iter()
            .map(|e| serde_json::from_str(&e.data).unwrap())
            .collect();
        for (i, (e, d)) in events.iter().zip(&data).enumerate() {
            assert_eq!(d["sequence_number"], i);
            assert_eq!(Some(d["type"].as_str().unwrap()), e.name);
        }
        let names: Vec<&str> = events.iter().filter_map(|e| e.name).collect();
        assert_eq!(
            names[..3],
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added"
            ]
        );
        assert!(names.contains(&"response.function_call_arguments.done"));
        let last = data.last().unwrap();
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"]["output"][0]["type"], "function_call");
        assert_eq!(
            last["response"]["instructions"], "x",
            "the request's fields repeated"
        );
        assert!(last["response"]["usage"]["total_tokens"].as_u64().unwrap() > 0);
    }
}
