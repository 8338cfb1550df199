//! Each vendor's model list, as the vendor serves it (its paths, paging,
//! members and errors; `render.rs`), with its credentials checked by the
//! vendor's dialect first, as every other endpoint of the mock:
//! - OpenAI `GET /v1/models` (and `/v1/models/{model}`), one page;
//! - Anthropic the same paths with `anthropic-version`, paged by `limit`
//!   (1-1000, default 20), `after_id` and `before_id`;
//! - Azure OpenAI's v1 `GET /openai/v1/models`, and its classic deployments
//!   `GET /openai/deployments?api-version=2022-12-01` (the data-plane
//!   version that lists them; another is a 404);
//! - Gemini `GET /v1beta/models` (`pageSize` 1-1000, default 50, `pageToken`);
//! - Vertex AI `GET /v1beta1/publishers/{google|anthropic}/models` (paged alike);
//! - Bedrock's control plane `GET /foundation-models` (one page) and
//!   `GET /inference-profiles` (`maxResults` 1-1000, `nextToken`), SigV4;
//! - DashScope's compatible mode `GET /compatible-mode/v1/models`.
//!
//! `GET /_mock/models` shows every catalog (its models, its fault, how
//! many list calls it had); `POST /_mock/models` changes one at run time:
//! `{"vendor": "openai", "remove": ["gpt-4o"], "add": ["gpt-5", {"id":
//! "x", "context_window": 8192}], "fault": "error-500" | "error-429" |
//! "slow=MS" | null, "page_size": 2 | null}`. A removed model is refused by
//! the vendor's generation endpoint too (its own 404), as a retired one is.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};

use crate::anthropic::Anthropic;
use crate::azure::Azure;
use crate::bedrock::Bedrock;
use crate::dashscope::DashScope;
use crate::dialect::{Dialect, Failure, Reply};
use crate::gemini::Gemini;
use crate::http::Request;
use crate::openai::OpenAi;
use crate::sigv4::Verifier;
use crate::vertex::{VertexAnthropic, VertexGemini};

mod render;

/// One model of a catalog, in no vendor's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u64>,
    /// An embedding model.
    pub embeds: bool,
    /// What an Azure deployment runs.
    pub base: Option<String>,
}

impl Model {
    fn new(id: &str, created: u64, window: u64, output: u64) -> Self {
        Self {
            id: id.to_owned(),
            created,
            context_window: Some(window),
            max_output_tokens: Some(output),
            embeds: false,
            base: None,
        }
    }

    fn embedder(id: &str, created: u64, window: u64) -> Self {
        Self {
            embeds: true,
            max_output_tokens: None,
            ..Self::new(id, created, window, 0)
        }
    }
}

/// A fault every list call of a catalog answers with.
#[derive(Clone, Debug, PartialEq)]
enum Fault {
    Status(u16),
    Slow(Duration),
}

#[derive(Default)]
struct Catalog {
    models: Vec<Model>,
    /// Removed at run time: the generation endpoints refuse them.
    removed: Vec<String>,
    fault: Option<Fault>,
    /// The most models a page gives, whatever the caller asked.
    page_size: Option<usize>,
    calls: u64,
}

/// The catalogs, by vendor.
pub const VENDORS: [&str; 10] = [
    "openai",
    "anthropic",
    "azure",
    "azure-deployments",
    "gemini",
    "vertex-google",
    "vertex-anthropic",
    "bedrock",
    "bedrock-profiles",
    "dashscope",
];

/// The models each vendor lists at start: those `envoy/gateway.yaml` asks
/// for, and a few more.
fn defaults(vendor: &str) -> Vec<Model> {
    const T: u64 = 1_700_000_000;
    let m = Model::new;
    let e = Model::embedder;
    match vendor {
        "openai" => vec![
            m("mock-gpt-4o", T, 128_000, 16_384),
            m("gpt-4o-mini", T + 2, 128_000, 16_384),
            // A small window, for context fitting (`mock-small` in envoy/gateway.yaml).
            m("mock-gpt-small", T + 3, 4096, 1024),
            m("gpt-5.6", T + 4, 400_000, 128_000),
            // Mid-size: a coding agent's fixed part fits, its long session does not
            // (a GPT-4o name: the gateway drops the reasoning it lacks).
            m("mock-gpt-4o-32k", T + 5, 32_768, 8192),
            e("text-embedding-3-small", T, 8191),
            e("text-embedding-3-large", T, 8191),
        ],
        "anthropic" => vec![
            m("mock-claude-sonnet", T, 200_000, 64_000),
            m("claude-haiku-4-5-20251001", 1_760_486_400, 200_000, 64_000),
            m("mock-claude-small", T - 1, 4096, 1024),
            m("mock-claude-32k", T - 2, 32_768, 8192),
        ],
        "azure" => vec![
            m("gpt-4o", T, 128_000, 16_384),
            m("gpt-4o-mini", T, 128_000, 16_384),
            e("text-embedding-3-small", T, 8191),
        ],
        "azure-deployments" => vec![
            Model {
                base: Some("gpt-4o".into()),
                ..m("mock-gpt4o-deployment", T, 128_000, 16_384)
            },
            Model {
                base: Some("text-embedding-3-small".into()),
                ..e("mock-embedding-deployment", T, 8191)
            },
        ],
        "gemini" => vec![
            m("mock-gemini-flash", T, 1_048_576, 65_536),
            m("gemini-2.5-pro", T + 1, 1_048_576, 65_536),
            m("gemini-2.5-flash", T + 2, 1_048_576, 65_536),
            m("gemini-3-pro-preview", T + 3, 1_048_576, 65_536),
            m("mock-gemini-small", T + 4, 4096, 1024),
            e("gemini-embedding-001", T, 2048),
        ],
        "vertex-google" => vec![
            m("gemini-2.5-flash", T, 1_048_576, 65_536),
            e("gemini-embedding-001", T, 2048),
            e("text-embedding-005", T, 2048),
        ],
        "vertex-anthropic" => vec![
            m("claude-sonnet-4-5", T, 200_000, 64_000),
            m("claude-haiku-4-5", T, 200_000, 64_000),
        ],
        "bedrock" => vec![
            m("anthropic.claude-3-haiku-20240307-v1:0", T, 200_000, 4096),
            m(
                "anthropic.claude-sonnet-4-20250514-v1:0",
                T,
                200_000,
                64_000,
            ),
            e("amazon.titan-embed-text-v2:0", T, 8192),
            e("cohere.embed-v4:0", T, 128_000),
        ],
        "bedrock-profiles" => vec![m(
            "us.anthropic.claude-sonnet-4-20250514-v1:0",
            T,
            200_000,
            64_000,
        )],
        "dashscope" => vec![
            m("qwen-plus", T, 131_072, 16_384),
            m("qwen-vl-plus", T, 131_072, 8192),
            m("qwen3-32b", T, 131_072, 16_384),
            e("text-embedding-v4", T, 8192),
        ],
        _ => Vec::new(),
    }
}

/// A list call: which catalog, one model or the list, and the dialect
/// whose credentials and errors it has.
pub struct Route {
    vendor: &'static str,
    /// `GET .../{model}`.
    one: Option<String>,
}

pub struct Models {
    catalogs: Mutex<BTreeMap<&'static str, Catalog>>,
    bedrock: Bedrock,
}

impl Models {
    pub fn new(aws: Option<Verifier>) -> Self {
        let catalogs = VENDORS
            .iter()
            .map(|v| {
                (
                    *v,
                    Catalog {
                        models: defaults(v),
                        ..Catalog::default()
                    },
                )
            })
            .collect();
        Self {
            catalogs: Mutex::new(catalogs),
            bedrock: Bedrock { credentials: aws },
        }
    }

    fn catalogs(&self) -> MutexGuard<'_, BTreeMap<&'static str, Catalog>> {
        self.catalogs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The list call a GET to `path` is, if any.
    pub fn route(&self, req: &Request, path: &str) -> Option<Route> {
        let one = |rest: &str| -> Option<Option<String>> {
            match rest {
                "" => Some(None),
                _ => rest
                    .strip_prefix('/')
                    .filter(|m| !m.is_empty() && !m.contains('/') && !m.contains(':'))
                    .map(|m| Some(crate::http::percent_decode(m))),
            }
        };
        let (vendor, rest) = if let Some(rest) = path.strip_prefix("/v1/models") {
            let anthropic = req.header("anthropic-version").is_some();
            (if anthropic { "anthropic" } else { "openai" }, rest)
        } else if let Some(rest) = path.strip_prefix("/openai/v1/models") {
            ("azure", rest)
        } else if let Some(rest) = path.strip_prefix("/openai/deployments") {
            ("azure-deployments", rest)
        } else if let Some(rest) = path.strip_prefix("/v1beta/models") {
            ("gemini", rest)
        } else if let Some(rest) = path.strip_prefix("/v1beta1/publishers/google/models") {
            ("vertex-google", rest)
        } else if let Some(rest) = path.strip_prefix("/v1beta1/publishers/anthropic/models") {
            ("vertex-anthropic", rest)
        } else if let Some(rest) = path.strip_prefix("/foundation-models") {
            ("bedrock", rest)
        } else if let Some(rest) = path.strip_prefix("/inference-profiles") {
            ("bedrock-profiles", rest)
        } else if let Some(rest) = path.strip_prefix("/compatible-mode/v1/models") {
            ("dashscope", rest)
        } else {
            return None;
        };
        // A Gemini model path with a method is a generation, not this.
        let one = one(rest)?;
        Some(Route { vendor, one })
    }

    /// The dialect whose credentials and errors a catalog's calls have.
    fn dialect(&self, vendor: &str) -> &dyn Dialect {
        match vendor {
            "anthropic" => &Anthropic,
            "azure" | "azure-deployments" => &Azure,
            "gemini" => &Gemini,
            "vertex-google" => &VertexGemini,
            "vertex-anthropic" => &VertexAnthropic,
            "bedrock" | "bedrock-profiles" => &self.bedrock,
            "dashscope" => &DashScope,
            _ => &OpenAi,
        }
    }

    /// The answer to list call `route`.
    pub fn answer(&self, route: &Route, req: &Request) -> Reply {
        let dialect = self.dialect(route.vendor);
        if let Err(f) = dialect.check_headers(req) {
            return dialect.error(&f);
        }
        // The classic deployments list is one API version's.
        if route.vendor == "azure-deployments"
            && crate::http::query_param(req.query(), "api-version").as_deref() != Some("2022-12-01")
        {
            return dialect.error(&Failure::Status(404));
        }
        let (models, fault, page_size) = {
            let mut catalogs = self.catalogs();
            let Some(catalog) = catalogs.get_mut(route.vendor) else {
                return dialect.error(&Failure::Status(404));
            };
            catalog.calls += 1;
            (
                catalog.models.clone(),
                catalog.fault.clone(),
                catalog.page_size,
            )
        };
        match fault {
            Some(Fault::Status(status)) => {
                let mut reply = dialect.error(&Failure::Status(status));
                if status == 429 {
                    reply.retry_after = Some("1");
                }
                return reply;
            }
            Some(Fault::Slow(pause)) => std::thread::sleep(pause),
            None => {}
        }
        let query = req.query();
        match &route.one {
            Some(id) => match models.iter().find(|m| &m.id == id) {
                Some(m) => render::one(route.vendor, m),
                None => dialect.error(&Failure::Status(404)),
            },
            None => render::list(route.vendor, &models, query, page_size)
                .unwrap_or_else(|message| dialect.error(&Failure::Invalid(message))),
        }
    }

    /// Whether `model` was removed from `vendor`'s catalog at run time.
    pub fn removed(&self, vendor: &str, model: &str) -> bool {
        self.catalogs()
            .get(vendor)
            .is_some_and(|c| c.removed.iter().any(|r| r == model))
    }

    /// The context window `vendor` lists for `model` (a removed model keeps
    /// it: its 404 comes first).
    pub fn window(&self, vendor: &str, model: &str) -> Option<u64> {
        self.catalogs()
            .get(vendor)?
            .models
            .iter()
            .find(|m| m.id == model && !m.embeds)?
            .context_window
    }

    /// `GET /_mock/models`.
    pub fn show(&self) -> String {
        let catalogs = self.catalogs();
        let shown: serde_json::Map<String, Value> = catalogs
            .iter()
            .map(|(vendor, c)| {
                let fault = c.fault.as_ref().map(|f| match f {
                    Fault::Status(s) => format!("error-{s}"),
                    Fault::Slow(d) => format!("slow={}", d.as_millis()),
                });
                (
                    (*vendor).to_owned(),
                    json!({
                        "models": c.models.iter().map(|m| m.id.clone()).collect::<Vec<_>>(),
                        "removed": c.removed,
                        "fault": fault,
                        "page_size": c.page_size,
                        "calls": c.calls,
                    }),
                )
            })
            .collect();
        Value::Object(shown).to_string()
    }

    /// `POST /_mock/models`: a catalog changed; the error says what is wrong.
    pub fn change(&self, body: &[u8]) -> Result<(), String> {
        let v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let vendor = v.get("vendor").and_then(Value::as_str).unwrap_or_default();
        let mut catalogs = self.catalogs();
        let catalog = catalogs
            .get_mut(vendor)
            .ok_or_else(|| format!("vendor must be one of {VENDORS:?}"))?;
        for id in v
            .get("remove")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = id.as_str().ok_or("remove: model ids")?;
            catalog.models.retain(|m| m.id != id);
            if !catalog.removed.iter().any(|r| r == id) {
                catalog.removed.push(id.to_owned());
            }
        }
        for added in v.get("add").and_then(Value::as_array).into_iter().flatten() {
            let model = match added {
                Value::String(id) => Model::new(id, 1_750_000_000, 128_000, 8192),
                Value::Object(o) => {
                    let num = |k: &str| o.get(k).and_then(Value::as_u64);
                    Model {
                        id: o
                            .get("id")
                            .and_then(Value::as_str)
                            .ok_or("add: an id")?
                            .to_owned(),
                        created: num("created").unwrap_or(1_750_000_000),
                        context_window: num("context_window"),
                        max_output_tokens: num("max_output_tokens"),
                        embeds: o.get("embeds").and_then(Value::as_bool).unwrap_or(false),
                        base: o.get("base").and_then(Value::as_str).map(str::to_owned),
                    }
                }
                _ => return Err("add: model ids or objects".into()),
            };
            catalog.removed.retain(|r| *r != model.id);
            catalog.models.retain(|m| m.id != model.id);
            catalog.models.push(model);
        }
        if let Some(fault) = v.get("fault") {
            catalog.fault = match fault.as_str() {
                None => None,
                Some(f) => Some(parse_fault(f)?),
            };
        }
        if let Some(size) = v.get("page_size") {
            catalog.page_size = size.as_u64().map(|n| n.max(1) as usize);
        }
        Ok(())
    }
}

fn parse_fault(fault: &str) -> Result<Fault, String> {
    if let Some(status) = fault.strip_prefix("error-") {
        return status
            .parse()
            .map(Fault::Status)
            .map_err(|_| format!("fault: {fault}"));
    }
    if let Some(ms) = fault.strip_prefix("slow=") {
        return ms
            .parse()
            .map(|ms| Fault::Slow(Duration::from_millis(ms)))
            .map_err(|_| format!("fault: {fault}"));
    }
    Err(format!("fault: error-NNN or slow=MS, not {fault}"))
}

/// The catalog a generation request on `path` reaches and the model it
/// names there (`model`, the body's, unless the path names a deployment),
/// to refuse a model removed from it.
pub fn named(path: &str, model: &str) -> Option<(&'static str, String)> {
    let catalog = catalog_of(path)?;
    let model = match path.strip_prefix("/openai/deployments/") {
        Some(rest) => crate::http::percent_decode(rest.split('/').next().unwrap_or_default()),
        None => vertex_model(path).unwrap_or_else(|| model.to_owned()),
    };
    Some((catalog, model))
}

/// A Vertex AI model in a path (`.../publishers/{p}/models/{model}@{v}:method`).
fn vertex_model(path: &str) -> Option<String> {
    let (_, rest) = path.split_once("/publishers/")?;
    let (_, rest) = rest.split_once("/models/")?;
    let model = rest.split(':').next()?;
    Some(model.split('@').next().unwrap_or(model).to_owned())
}

fn catalog_of(path: &str) -> Option<&'static str> {
    Some(if path.starts_with("/v1/messages") {
        "anthropic"
    } else if path.starts_with("/v1/chat/completions") || path.starts_with("/v1/responses") {
        "openai"
    } else if path.starts_with("/openai/deployments/") {
        "azure-deployments"
    } else if path.starts_with("/openai/v1/") {
        "azure"
    } else if path.starts_with("/v1beta/models/") {
        "gemini"
    } else if path.contains("/publishers/google/") {
        "vertex-google"
    } else if path.contains("/publishers/anthropic/") {
        "vertex-anthropic"
    } else if path.starts_with("/model/") {
        "bedrock"
    } else if path.starts_with("/api/v1/services/") {
        "dashscope"
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests;
