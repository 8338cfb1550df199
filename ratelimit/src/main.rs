//! `llm-ratelimit`: the gateway's global rate limit service. Envoy's rate
//! limit filter asks it `envoy.service.ratelimit.v3.RateLimitService/
//! ShouldRateLimit` (gRPC); the counting and the storage are Kuadrant's
//! limitador with its Redis storage, so every replica of this service and
//! every Envoy in front of them share one set of counters that outlives
//! any of them.
//!
//! This file is the adapter between the two:
//! - the request's `domain` is limitador's namespace; each descriptor is
//!   evaluated on its own, as `descriptors[0]` (a map of its entries), so
//!   a limit of the limits file (limitador's YAML format) matches one
//!   descriptor shape with its `conditions` and counts apart by its
//!   `variables` (docs/src/features/global-limits.md).
//! - a descriptor with no `hits_addend` of its own, or 0, is an ADMISSION:
//!   all of the request's admissions are reserved atomically in Redis
//!   (limitador's reservation script) with the descriptor's hits (the
//!   request's `hits_addend`, 1 when unset; 0 checks without adding) and
//!   committed only when every one of them fits; a refused request adds
//!   nothing anywhere.
//! - a descriptor with its own `hits_addend` above 0 is a CHARGE (the
//!   tokens or cost of a finished stream, Envoy's `apply_on_stream_done`):
//!   already spent, so always added and never refused.
//! - the answer carries, per descriptor, the most restrictive matching
//!   limit (its `name`, the limit and unit, what remains, when it resets):
//!   what Envoy's `x-ratelimit-*` headers are made of. A refusal also
//!   names the limit that fired (`x-llm-ratelimit-name`: its `name`) and
//!   what it counts (`x-llm-ratelimit-budget`: the descriptor's
//!   `llm_budget`, `requests` without one), and has a body (`raw_body`),
//!   so the gateway's edge role can answer it in the client's API.
//! - Redis unreachable is the gRPC error UNAVAILABLE: the Envoy's
//!   `failure_mode_deny` decides (envoy/ratelimit.yaml: fail open).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    rate_limit::Unit, Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use limitador::counter::Counter;
use limitador::limit::{Context, Limit, Namespace};
use limitador::reservation::ReservationId;
use limitador::storage::redis::AsyncRedisStorage;
use limitador::AsyncRateLimiter;
use tokio::sync::Mutex;
use tonic::{Request, Response, Status};

/// How long an admission's hold lives if this process dies between the
/// reservation and its commit (milliseconds apart otherwise).
const HOLD_TTL: Duration = Duration::from_secs(10);
/// The response headers that name the limit that refused a request and what it counts.
const FIRED_HEADER: &str = "x-llm-ratelimit-name";
const BUDGET_HEADER: &str = "x-llm-ratelimit-budget";

/// The windows Envoy's answer can say (`RateLimit.Unit`), in seconds.
const UNITS: &[(u64, Unit)] = &[
    (1, Unit::Second),
    (60, Unit::Minute),
    (3600, Unit::Hour),
    (86_400, Unit::Day),
    (604_800, Unit::Week),
];

struct Args {
    limits: String,
    redis: String,
    listen: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        limits: String::new(),
        redis: "redis://127.0.0.1:6379".into(),
        listen: "127.0.0.1:8081".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--limits" => args.limits = value,
            "--redis" => args.redis = value,
            "--listen" => args.listen = value,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if args.limits.is_empty() {
        return Err("--limits FILE is required".into());
    }
    Ok(args)
}

/// The limits file: limitador's own YAML format (a list of limits with
/// `namespace`, `max_value`, `seconds`, `name`, `conditions`, `variables`).
/// A window must be one Envoy's answer can name.
fn parse_limits(yaml: &str) -> Result<Vec<Limit>, String> {
    let limits: Vec<Limit> = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
    for limit in &limits {
        if unit_of(limit.seconds()).is_none() {
            return Err(format!(
                "limit {:?}: seconds {} is not a window Envoy can name (1, 60, 3600, 86400, 604800)",
                limit.name().unwrap_or_default(),
                limit.seconds()
            ));
        }
        if limit.max_value() > u64::from(u32::MAX) {
            return Err(format!(
                "limit {:?}: max_value above {} (Envoy's requests_per_unit is 32 bits)",
                limit.name().unwrap_or_default(),
                u32::MAX
            ));
        }
    }
    Ok(limits)
}

fn unit_of(seconds: u64) -> Option<Unit> {
    UNITS.iter().find(|(s, _)| *s == seconds).map(|(_, u)| *u)
}

/// One descriptor as limitador's context: `descriptors[0]` is its entries.
fn context(descriptor: &RateLimitDescriptor) -> Context<'static> {
    let entries: HashMap<String, String> = descriptor
        .entries
        .iter()
        .map(|e| (e.key.clone(), e.value.clone()))
        .collect();
    let mut ctx = Context::default();
    ctx.list_binding("descriptors".into(), vec![entries]);
    ctx
}

/// What a descriptor does: `Some(n)` charges n (its own hits_addend above
/// 0), `None` is an admission.
fn charge(descriptor: &RateLimitDescriptor) -> Option<u64> {
    descriptor
        .hits_addend
        .as_ref()
        .map(|h| h.value)
        .filter(|n| *n > 0)
}

/// The admission's hits: the descriptor's own (0 here), else the request's, else 1.
fn admission_hits(descriptor: &RateLimitDescriptor, request: &RateLimitRequest) -> u64 {
    match &descriptor.hits_addend {
        Some(h) => h.value,
        None if request.hits_addend > 0 => u64::from(request.hits_addend),
        None => 1,
    }
}

/// A descriptor's status from its most restrictive counter (none: no limit applies).
fn status(counters: &[Counter], limited: bool) -> DescriptorStatus {
    let code = if limited { Code::OverLimit } else { Code::Ok };
    let tightest = counters
        .iter()
        .min_by_key(|c| c.remaining().unwrap_or(c.max_value()));
    let Some(counter) = tightest else {
        return DescriptorStatus {
            code: code as i32,
            ..Default::default()
        };
    };
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    let reset = counter.expires_in().unwrap_or(counter.window());
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(RateLimit {
            name: counter.limit().name().unwrap_or_default().to_owned(),
            requests_per_unit: clamp(counter.max_value()),
            unit: unit_of(counter.window().as_secs()).unwrap_or(Unit::Unknown) as i32,
        }),
        limit_remaining: clamp(counter.remaining().unwrap_or(counter.max_value())),
        duration_until_reset: Some(PbDuration {
            // Whole seconds, rounded up: Envoy's reset header is in seconds.
            seconds: i64::try_from(reset.as_millis().div_ceil(1000)).unwrap_or(i64::MAX),
            nanos: 0,
        }),
        ..Default::default()
    }
}

/// The limit that refused a request: its name (else the descriptor's
/// entries) and what it counts.
struct Fired {
    name: String,
    budget: String,
}

impl Fired {
    fn of(descriptor: &RateLimitDescriptor, name: Option<String>) -> Self {
        let entries = || {
            descriptor
                .entries
                .iter()
                .map(|e| format!("{}={}", e.key, e.value))
                .collect::<Vec<_>>()
                .join(",")
        };
        let budget = descriptor
            .entries
            .iter()
            .find(|e| e.key == "llm_budget")
            .map_or("requests", |e| e.value.as_str());
        Self {
            name: name.filter(|n| !n.is_empty()).unwrap_or_else(entries),
            budget: budget.to_owned(),
        }
    }
}

struct Service {
    limiter: AsyncRateLimiter,
    /// One admission decision at a time in this process: reservation and
    /// commit are two Redis calls, and a concurrent admission between them
    /// would see the spend twice. Across replicas the reservation script
    /// alone keeps admissions from ever exceeding a limit.
    admission: Mutex<()>,
}

fn storage_error(e: impl std::fmt::Display) -> Status {
    Status::unavailable(format!("rate limit storage: {e}"))
}

#[tonic::async_trait]
impl RateLimitService for Service {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let request = request.into_inner();
        let namespace = Namespace::from(request.domain.as_str());
        let mut statuses = Vec::with_capacity(request.descriptors.len());
        let mut fired = None;
        // (descriptor index, hits, reservation) of every admission held.
        let mut held: Vec<(usize, u64, Option<ReservationId>)> = Vec::new();
        let guard = self.admission.lock().await;
        for (index, descriptor) in request.descriptors.iter().enumerate() {
            let ctx = context(descriptor);
            if let Some(amount) = charge(descriptor) {
                if !descriptor.is_negative_hits {
                    self.limiter
                        .update_counters(&namespace, &ctx, amount)
                        .await
                        .map_err(storage_error)?;
                }
                statuses.push(status(&[], false));
                continue;
            }
            let hits = admission_hits(descriptor, &request);
            let reserved = self
                .limiter
                .reserve(&namespace, &ctx, hits, Some(HOLD_TTL))
                .await
                .map_err(storage_error)?;
            if reserved.limited && fired.is_none() {
                fired = Some(Fired::of(descriptor, reserved.limit_name.clone()));
            }
            statuses.push(status(&reserved.counters, reserved.limited));
            if !reserved.limited {
                held.push((index, hits, reserved.reservation_id));
            }
        }
        // All or nothing: a refused request adds nothing, even where it fit.
        for (index, hits, reservation) in held {
            let amount = if fired.is_some() { 0 } else { hits };
            if amount == 0 && reservation.is_none() {
                continue;
            }
            if let Some(descriptor) = request.descriptors.get(index) {
                self.limiter
                    .commit_reservation(
                        &namespace,
                        &context(descriptor),
                        reservation.as_ref(),
                        amount,
                    )
                    .await
                    .map_err(storage_error)?;
            }
        }
        drop(guard);
        let mut response = RateLimitResponse {
            overall_code: if fired.is_some() {
                Code::OverLimit
            } else {
                Code::Ok
            } as i32,
            statuses,
            ..Default::default()
        };
        if let Some(fired) = fired {
            response.raw_body =
                format!("rate limited by {} (counts {})", fired.name, fired.budget).into_bytes();
            for (key, value) in [(FIRED_HEADER, fired.name), (BUDGET_HEADER, fired.budget)] {
                response.response_headers_to_add.push(HeaderValue {
                    key: key.into(),
                    value,
                    ..Default::default()
                });
            }
        }
        Ok(Response::new(response))
    }
}

/// Redis through limitador's storage, reconnecting within a second of
/// Redis being back (the default backoff waits up to 6.4 s).
async fn connect(url: &str) -> Result<AsyncRedisStorage, redis::RedisError> {
    let client = redis::Client::open(url)?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_factor(50)
        .set_max_delay(1000)
        .set_connection_timeout(Duration::from_secs(1))
        .set_response_timeout(Duration::from_secs(1));
    let manager = redis::aio::ConnectionManager::new_with_config(client, config).await?;
    AsyncRedisStorage::new_with_conn_manager(manager).await
}

async fn serve(args: Args) -> Result<(), String> {
    let yaml = std::fs::read_to_string(&args.limits)
        .map_err(|e| format!("reading {}: {e}", args.limits))?;
    let limits = parse_limits(&yaml).map_err(|e| format!("{}: {e}", args.limits))?;
    let storage = connect(&args.redis)
        .await
        .map_err(|e| format!("redis {}: {e}", args.redis))?;
    let limiter = AsyncRateLimiter::new_with_storage(Box::new(storage));
    let count = limits.len();
    limiter
        .configure_with(limits)
        .await
        .map_err(|e| e.to_string())?;
    let addr: SocketAddr = args
        .listen
        .parse()
        .map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("listening on {addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    // The tests read the port from this line (--listen 127.0.0.1:0).
    println!(
        "llm-ratelimit listening on {bound} ({count} limits, redis {})",
        args.redis
    );
    let service = Service {
        limiter,
        admission: Mutex::new(()),
    };
    tonic::transport::Server::builder()
        .add_service(RateLimitServiceServer::new(service))
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener),
            async {
                let _ = tokio::signal::ctrl_c().await;
            },
        )
        .await
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("llm-ratelimit: {e}\nusage: llm-ratelimit --limits FILE [--redis URL] [--listen ADDR]");
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
            eprintln!("llm-ratelimit: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("llm-ratelimit: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
    use envoy_types::pb::google::protobuf::UInt64Value;

    fn descriptor(hits: Option<u64>) -> RateLimitDescriptor {
        RateLimitDescriptor {
            entries: vec![Entry {
                key: "llm_key".into(),
                value: "team".into(),
            }],
            hits_addend: hits.map(|value| UInt64Value { value }),
            ..Default::default()
        }
    }

    #[test]
    fn a_descriptor_of_its_own_hits_is_a_charge_and_zero_a_check() {
        let request = RateLimitRequest::default();
        assert_eq!(charge(&descriptor(Some(25))), Some(25));
        assert_eq!(charge(&descriptor(Some(0))), None);
        assert_eq!(admission_hits(&descriptor(Some(0)), &request), 0);
        assert_eq!(charge(&descriptor(None)), None);
        assert_eq!(admission_hits(&descriptor(None), &request), 1);
        let weighted = RateLimitRequest {
            hits_addend: 3,
            ..Default::default()
        };
        assert_eq!(admission_hits(&descriptor(None), &weighted), 3);
    }

    #[test]
    fn a_refusal_names_its_limit_and_what_it_counts() {
        let mut tokens = descriptor(Some(0));
        tokens.entries.insert(
            0,
            Entry {
                key: "llm_budget".into(),
                value: "tokens".into(),
            },
        );
        let fired = Fired::of(&tokens, Some("team-tokens".into()));
        assert_eq!(
            (fired.name.as_str(), fired.budget.as_str()),
            ("team-tokens", "tokens")
        );
        let fired = Fired::of(&descriptor(None), None);
        assert_eq!(
            (fired.name.as_str(), fired.budget.as_str()),
            ("llm_key=team", "requests")
        );
    }

    #[test]
    fn the_limits_file_is_limitadors_format_with_windows_envoy_can_name() {
        let ok = "- namespace: llm_gateway\n  name: tokens\n  max_value: 25\n  seconds: 3600\n  \
                  conditions: [\"descriptors[0].llm_budget == 'tokens'\"]\n  variables: [\"descriptors[0].llm_key\"]\n";
        let limits = parse_limits(ok).unwrap();
        assert_eq!(
            (limits[0].max_value(), limits[0].name()),
            (25, Some("tokens"))
        );
        let odd = ok.replace("3600", "90");
        assert!(parse_limits(&odd).unwrap_err().contains("seconds 90"));
        let huge = ok.replace("25", "5000000000");
        assert!(parse_limits(&huge).unwrap_err().contains("32 bits"));
    }

    #[test]
    fn a_limit_applies_to_its_descriptor_shape_only() {
        let limits = parse_limits(
            "- namespace: d\n  max_value: 5\n  seconds: 60\n  conditions: [\"descriptors[0].llm_budget == 'tokens'\"]\n  \
             variables: [\"descriptors[0].llm_key\"]\n",
        )
        .unwrap();
        let mut tokens = descriptor(Some(0));
        tokens.entries.insert(
            0,
            Entry {
                key: "llm_budget".into(),
                value: "tokens".into(),
            },
        );
        assert!(limits[0].applies(&context(&tokens)));
        assert!(!limits[0].applies(&context(&descriptor(None))));
    }
}
