//! `llm-state`: the gateway's state service. A fleet of gateways (Envoys
//! with the gateway's module) shares its stored responses, and the
//! response cache to come, through it: each gateway reaches it through an
//! Envoy cluster with HTTP callouts (`shared_state` in the filter's
//! configuration), it keeps the entries in Redis, so they outlive any
//! gateway, any replica of this service, and (with Redis's append-only
//! file) Redis's own restarts.
//!
//! The protocol is `llm_gateway_core::shared_state::protocol`'s (the
//! gateway writes its requests with the same module), documented in
//! `docs/src/architecture/state-service.md`. The service knows nothing of
//! what an entry means: a store's name, a namespace and a key (hashes the
//! gateway made: one gateway key's namespace is not another's), bytes, a
//! time to live and the parent an entry continues.
//!
//! The semantic cache's vectors (`vectors.rs`): held in Redis, one hash
//! per partition, searched by brute force here (`POST .../search`).
//!
//! Bounds: an entry over `--max-entry-bytes` is refused (413), a time to
//! live over `--max-ttl-seconds` is cut to it, a chain read stops at
//! `--max-chain` entries or `--max-chain-bytes`, a vector is at most
//! `MAX_DIMENSIONS` bytes and a partition holds `--max-vectors`; what Redis keeps in all is
//! its `maxmemory`. Redis unreachable or slow (`--redis-timeout-ms`): 503,
//! at once, and the gateways go on without the shared store.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AGE, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use llm_gateway_core::cache::semantic_index::{Quantized, MAX_DIMENSIONS};
use llm_gateway_core::shared_state::protocol::{self, EntryPath, VectorPath};
use store::{Place, Store, Unavailable};
use tokio::net::TcpListener;

mod store;
mod vectors;

struct Args {
    redis: String,
    listen: String,
    max_entry_bytes: usize,
    max_ttl_seconds: u64,
    max_chain: usize,
    max_chain_bytes: usize,
    max_vectors: usize,
    redis_timeout: Duration,
    test_clock: bool,
}

const USAGE: &str = "usage: llm-state [--redis URL] [--listen ADDR] [--max-entry-bytes N] \
    [--max-ttl-seconds N] [--max-chain N] [--max-chain-bytes N] [--max-vectors N] [--redis-timeout-ms N] [--test-clock]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        redis: "redis://127.0.0.1:6379".into(),
        listen: "127.0.0.1:8082".into(),
        max_entry_bytes: 4 << 20,
        max_ttl_seconds: 30 * 86_400,
        max_chain: 1024,
        max_chain_bytes: 64 << 20,
        max_vectors: 1024,
        redis_timeout: Duration::from_millis(500),
        test_clock: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--test-clock" {
            args.test_clock = true;
            continue;
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number = |value: &str| {
            value
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or(format!("{flag}: a positive number"))
        };
        let size = |value: &str| number(value).map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        match flag.as_str() {
            "--redis" => args.redis = value,
            "--listen" => args.listen = value,
            "--max-entry-bytes" => args.max_entry_bytes = size(&value)?,
            "--max-ttl-seconds" => args.max_ttl_seconds = number(&value)?,
            "--max-chain" => args.max_chain = size(&value)?,
            "--max-chain-bytes" => args.max_chain_bytes = size(&value)?,
            "--max-vectors" => args.max_vectors = size(&value)?,
            "--redis-timeout-ms" => args.redis_timeout = Duration::from_millis(number(&value)?),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

struct Service {
    store: Store,
    args: Args,
    /// When Redis's unavailability was last logged (ms since `started`).
    logged_ms: AtomicU64,
    started: Instant,
}

type Answer = Response<Full<Bytes>>;

fn answer(status: StatusCode, body: impl Into<Bytes>) -> Answer {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

fn text(status: StatusCode, message: &str) -> Answer {
    let mut response = answer(status, format!("{message}\n"));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

impl Service {
    /// Redis is unreachable: a 503, logged at most once in ten seconds.
    fn unavailable(&self, e: &Unavailable) -> Answer {
        let now = self.started.elapsed().as_millis() as u64;
        let last = self.logged_ms.load(Ordering::Relaxed);
        if (now.saturating_sub(last) >= 10_000 || last == 0)
            && self
                .logged_ms
                .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            eprintln!("llm-state: {} (answering 503; logged once in 10 s)", e.0);
        }
        text(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable")
    }

    async fn handle(&self, request: Request<Incoming>) -> Answer {
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        match (request.method(), path.as_str()) {
            (&Method::GET, "/healthz") => {
                return match self.store.ping().await {
                    Ok(()) => text(StatusCode::OK, "ok"),
                    Err(e) => self.unavailable(&e),
                }
            }
            (&Method::PUT, "/_test/clock") if self.args.test_clock => {
                return self.move_clock(request).await;
            }
            _ => {}
        }
        if path.starts_with(protocol::VECTORS) {
            return self.vectors(&path, request).await;
        }
        let entry = match protocol::parse_path(&path) {
            Ok(entry) => entry,
            Err(why) => return text(StatusCode::NOT_FOUND, why),
        };
        let result = match *request.method() {
            Method::GET => self.get(&entry).await,
            Method::PUT => self.put(&entry, request).await,
            Method::DELETE => self.delete(&entry).await,
            _ => Ok(text(StatusCode::METHOD_NOT_ALLOWED, "GET, PUT or DELETE")),
        };
        result.unwrap_or_else(|e| self.unavailable(&e))
    }

    async fn put(
        &self,
        entry: &EntryPath<'_>,
        request: Request<Incoming>,
    ) -> Result<Answer, Unavailable> {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let Some(ttl) = header(protocol::TTL_HEADER).and_then(|t| t.parse::<u64>().ok()) else {
            return Ok(text(
                StatusCode::BAD_REQUEST,
                "x-llm-ttl: seconds to keep the entry",
            ));
        };
        let parent = match header(protocol::PARENT_HEADER) {
            None => None,
            Some(hex) => match protocol::parse_hex(&hex) {
                Some(parent) => Some(parent),
                None => {
                    return Ok(text(
                        StatusCode::BAD_REQUEST,
                        "x-llm-parent: a key, 32 hex digits",
                    ))
                }
            },
        };
        if ttl == 0 || entry.chain.is_some() {
            return Ok(text(
                StatusCode::BAD_REQUEST,
                "a time to live of 1 s or more, no chain",
            ));
        }
        let body = match Limited::new(request.into_body(), self.args.max_entry_bytes)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(_) => {
                let limit = self.args.max_entry_bytes;
                return Ok(text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("an entry is at most {limit} bytes"),
                ));
            }
        };
        let ttl = ttl.min(self.args.max_ttl_seconds);
        self.store
            .put(place(entry), &entry.key, parent, ttl, &body)
            .await?;
        Ok(answer(StatusCode::NO_CONTENT, Bytes::new()))
    }

    /// A semantic cache's vector stored, or a partition searched.
    async fn vectors(&self, path: &str, request: Request<Incoming>) -> Answer {
        let vector = match protocol::parse_vector_path(path) {
            Ok(vector) => vector,
            Err(why) => return text(StatusCode::NOT_FOUND, why),
        };
        let ttl = (request.headers().get(protocol::TTL_HEADER))
            .and_then(|v| v.to_str().ok())
            .and_then(|t| t.parse::<u64>().ok())
            .filter(|&t| t > 0);
        let method = request.method().clone();
        let body = match Limited::new(request.into_body(), MAX_DIMENSIONS)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(_) => {
                return text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("a vector is at most {MAX_DIMENSIONS} bytes"),
                )
            }
        };
        let Some(query) = Quantized::from_bytes(&body) else {
            return text(
                StatusCode::BAD_REQUEST,
                "a vector: one signed byte a component, not all zero",
            );
        };
        let result = match (method, vector) {
            (
                Method::PUT,
                VectorPath::Put {
                    store,
                    partition,
                    id,
                },
            ) => {
                let Some(ttl) = ttl else {
                    return text(StatusCode::BAD_REQUEST, "x-llm-ttl: seconds to keep it");
                };
                let ttl = ttl.min(self.args.max_ttl_seconds);
                let put = (self.store)
                    .put_vector((store, &partition), &id, &query, ttl, self.args.max_vectors)
                    .await;
                put.map(|()| answer(StatusCode::NO_CONTENT, Bytes::new()))
            }
            (
                Method::POST,
                VectorPath::Search {
                    store,
                    partition,
                    threshold,
                },
            ) => self.search(store, &partition, &query, threshold).await,
            _ => Ok(text(
                StatusCode::METHOD_NOT_ALLOWED,
                "PUT a vector, POST a search",
            )),
        };
        result.unwrap_or_else(|e| self.unavailable(&e))
    }

    async fn search(
        &self,
        store: &str,
        partition: &[u8; 16],
        query: &Quantized,
        threshold: f32,
    ) -> Result<Answer, Unavailable> {
        let records = self
            .store
            .vectors(&store::vectors_key(store, partition))
            .await?;
        let Some((id, similarity)) = vectors::best(&records, query, threshold, self.store.now_ms())
        else {
            return Ok(missing());
        };
        let mut response = answer(StatusCode::OK, protocol::id_hex(&id));
        if let Ok(value) = HeaderValue::from_str(&format!("{similarity:.4}")) {
            response
                .headers_mut()
                .insert(protocol::SIMILARITY_HEADER, value);
        }
        Ok(response)
    }

    async fn get(&self, entry: &EntryPath<'_>) -> Result<Answer, Unavailable> {
        let place = place(entry);
        let Some((head, first)) = self.store.get(place, &entry.key).await? else {
            return Ok(missing());
        };
        let age = self.store.now_ms().saturating_sub(head.stored_ms) / 1000;
        let Some(max) = entry.chain else {
            let mut response = answer(StatusCode::OK, first);
            response.headers_mut().insert(AGE, HeaderValue::from(age));
            return Ok(response);
        };
        let mut body = Vec::new();
        protocol::write_frame(&mut body, &first);
        let mut parent = head.parent;
        for _ in 1..max.min(self.args.max_chain) {
            let Some(key) = parent else { break };
            let Some((head, entry)) = self.store.get(place, &key).await? else {
                break;
            };
            if body.len().saturating_add(entry.len()) > self.args.max_chain_bytes {
                break;
            }
            protocol::write_frame(&mut body, &entry);
            parent = head.parent;
        }
        let mut response = answer(StatusCode::OK, body);
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(protocol::CHAIN_TYPE));
        headers.insert(AGE, HeaderValue::from(age));
        Ok(response)
    }

    async fn delete(&self, entry: &EntryPath<'_>) -> Result<Answer, Unavailable> {
        Ok(if self.store.delete(place(entry), &entry.key).await? {
            answer(StatusCode::NO_CONTENT, Bytes::new())
        } else {
            missing()
        })
    }

    /// `PUT /_test/clock` with a number of seconds (`--test-clock` only):
    /// the clock expiry is checked against moves that far ahead of the real one.
    async fn move_clock(&self, request: Request<Incoming>) -> Answer {
        let body = Limited::new(request.into_body(), 32).collect().await;
        let seconds = body
            .ok()
            .and_then(|b| String::from_utf8(b.to_bytes().to_vec()).ok())
            .and_then(|s| s.trim().parse::<i64>().ok());
        match seconds {
            Some(seconds) => {
                self.store.move_clock(seconds);
                answer(StatusCode::NO_CONTENT, Bytes::new())
            }
            None => text(StatusCode::BAD_REQUEST, "a number of seconds"),
        }
    }
}

/// No such entry: the service's own 404, which says so.
fn missing() -> Answer {
    let mut response = text(StatusCode::NOT_FOUND, "no such entry");
    response.headers_mut().insert(
        protocol::STATE_HEADER,
        HeaderValue::from_static(protocol::MISSING),
    );
    response
}

fn place<'e>(entry: &EntryPath<'e>) -> Place<'e> {
    Place {
        store: entry.store,
        namespace: entry.namespace,
    }
}

async fn serve(args: Args) -> Result<(), String> {
    let addr: SocketAddr = args
        .listen
        .parse()
        .map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("listening on {addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let store = Store::new(&args.redis, args.redis_timeout)?;
    // Written first, on its own line: whoever started it reads the port.
    println!("llm-state listening on {bound} (redis {})", args.redis);
    let service = Arc::new(Service {
        store,
        args,
        logged_ms: AtomicU64::new(0),
        started: Instant::now(),
    });
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                eprintln!("llm-state: accept: {e}");
                continue;
            }
        };
        let service = Arc::clone(&service);
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request| {
                let service = Arc::clone(&service);
                async move { Ok::<_, Infallible>(service.handle(request).await) }
            });
            // A client that goes away mid-request is its own business.
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), handler)
                .await;
        });
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("llm-state: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("llm-state: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("llm-state: {e}");
            ExitCode::FAILURE
        }
    }
}
