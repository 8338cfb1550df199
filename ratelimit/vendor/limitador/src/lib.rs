//! Limitador is a generic rate-limiter.
//!
//! # Basic operation
//!
//! Limitador can store the counters in memory or in Redis. Storing them in memory
//! is faster, but the counters cannot be shared between several instances of
//! Limitador. Storing the limits in Redis is slower, but they can be shared
//! between instances.
//!
//! By default, the rate limiter is configured to store the counters in memory.
//! It'll store only a limited amount of "qualified counters", specified as a
//! `u64` value in the constructor.
//! ```
//! use limitador::RateLimiter;
//! let rate_limiter = RateLimiter::new(1000);
//! ```
//!
//! To use Redis:
//! ```no_run
//! #[cfg(feature = "redis_storage")]
//! # {
//! use limitador::RateLimiter;
//! use limitador::storage::redis::RedisStorage;
//!
//! // Default redis URL (redis://localhost:6379).
//! let rate_limiter = RateLimiter::new_with_storage(Box::new(RedisStorage::default()));
//!
//! // Custom redis URL
//! let rate_limiter = RateLimiter::new_with_storage(
//!     Box::new(RedisStorage::new("redis://127.0.0.1:7777").unwrap())
//! );
//! # }
//! ```
//!
//! # Limits
//!
//! The definition of a limit includes:
//! - A namespace that identifies the resource to limit. It could be an API, a
//!   Kubernetes service, a proxy ID, etc.
//! - A value.
//! - The length of the period in seconds.
//! - Conditions that define when to apply the limit.
//! - A set of variables. For example, if we need to define the same limit for
//!   each "user_id", instead of creating a limit for each hardcoded ID, we just
//!   need to define "user_id" as a variable.
//!
//! If we used Limitador in a context where it receives an HTTP request we could
//! define a limit like this to allow 10 requests per minute and per user_id
//! when the HTTP method is "GET".
//!
//! ```
//! use limitador::limit::Limit;
//! let limit = Limit::new(
//!     "my_namespace",
//!      10,
//!      60,
//!      vec!["req_method == 'GET'".try_into().expect("failed parsing!")],
//!      vec!["user_id".try_into().expect("failed parsing!")],
//! );
//! ```
//!
//! Notice that the keys and variables are generic, so they do not necessarily
//! have to refer to an HTTP request.
//!
//! # Manage limits
//!
//! ```
//! use limitador::RateLimiter;
//! use limitador::limit::Limit;
//! let limit = Limit::new(
//!     "my_namespace",
//!      10,
//!      60,
//!      vec!["req_method == 'GET'".try_into().expect("failed parsing!")],
//!      vec!["user_id".try_into().expect("failed parsing!")],
//! );
//! let mut rate_limiter = RateLimiter::new(1000);
//!
//! // Add a limit
//! rate_limiter.add_limit(limit.clone());
//!
//! // Delete the limit
//! rate_limiter.delete_limit(&limit);
//!
//! // Get all the limits in a namespace
//! let namespace = "my_namespace".into();
//! rate_limiter.get_limits(&namespace);
//!
//! // Delete all the limits in a namespace
//! rate_limiter.delete_limits(&namespace);
//! ```
//!
//! # Apply limits
//!
//! ```
//! use limitador::RateLimiter;
//! use limitador::limit::{Limit, Context};
//! use std::collections::HashMap;
//!
//! let mut rate_limiter = RateLimiter::new(1000);
//!
//! let limit = Limit::new(
//!     "my_namespace",
//!      2,
//!      60,
//!      vec!["req_method == 'GET'".try_into().expect("failed parsing!")],
//!      vec!["user_id".try_into().expect("failed parsing!")],
//! );
//! rate_limiter.add_limit(limit);
//!
//! // We've defined a limit of 2. So we can report 2 times before being
//! // rate-limited
//! let mut values_to_report: HashMap<String, String> = HashMap::new();
//! values_to_report.insert("req_method".to_string(), "GET".to_string());
//! values_to_report.insert("user_id".to_string(), "1".to_string());
//!
//! // Check if we can report
//! let namespace = "my_namespace".into();
//! let ctx = &values_to_report.into();
//! assert!(!rate_limiter.is_rate_limited(&namespace, &ctx, 1).unwrap().limited);
//!
//! // Report
//! rate_limiter.update_counters(&namespace, &ctx, 1).unwrap();
//!
//! // Check and report again
//! assert!(!rate_limiter.is_rate_limited(&namespace, &ctx, 1).unwrap().limited);
//! rate_limiter.update_counters(&namespace, &ctx, 1).unwrap();
//!
//! // We've already reported 2, so reporting another one should not be allowed
//! assert!(rate_limiter.is_rate_limited(&namespace, &ctx, 1).unwrap().limited);
//!
//! // You can also check and report if not limited in a single call. It's useful
//! // for example, when calling Limitador from a proxy. Instead of doing 2
//! // separate calls, we can issue just one:
//! rate_limiter.check_rate_limited_and_update(&namespace, &ctx, 1).unwrap();
//! ```
//!
//! # Async
//!
//! There are two Redis drivers, a blocking one and an async one. To use the
//! async one, we need to instantiate an "AsyncRateLimiter" with an
//! "AsyncRedisStorage":
//!
//! ```
//! #[cfg(feature = "redis_storage")]
//! # {
//! use limitador::AsyncRateLimiter;
//! use limitador::storage::redis::AsyncRedisStorage;
//!
//! async {
//!     let rate_limiter = AsyncRateLimiter::new_with_storage(
//!         Box::new(AsyncRedisStorage::new("redis://127.0.0.1:7777").await.unwrap())
//!     );
//! };
//! # }
//! ```
//!
//! Both the blocking and the async limiters expose the same functions, so we
//! can use the async limiter as explained above. For example:
//!
//! ```
//! #[cfg(feature = "redis_storage")]
//! # {
//! use limitador::AsyncRateLimiter;
//! use limitador::limit::Limit;
//! use limitador::storage::redis::AsyncRedisStorage;
//! let limit = Limit::new(
//!      "my_namespace",
//!      10,
//!      60,
//!      vec!["req_method == 'GET'".try_into().expect("failed parsing!")],
//!      vec!["user_id".try_into().expect("failed parsing!")],
//! );
//!
//! async {
//!     let rate_limiter = AsyncRateLimiter::new_with_storage(
//!         Box::new(AsyncRedisStorage::new("redis://127.0.0.1:7777").await.unwrap())
//!     );
//!     rate_limiter.add_limit(limit);
//! };
//! # }
//! ```
//!
//! # Limits accuracy
//!
//! When storing the counters in memory, Limitador guarantees that we'll never go
//! over the limits defined. However, when using Redis that's not the case. The
//! Redis driver sacrifices a bit of accuracy when applying the limits to be
//! more performant.
//!

#![deny(clippy::all, clippy::cargo)]
// TODO this needs review to reduce the bloat pulled in by dependencies
#![allow(clippy::multiple_crate_versions)]

use crate::counter::Counter;
use crate::errors::LimitadorError;
use crate::limit::{Context, Limit, Namespace};
use crate::reservation::{CommitResult, ReservationId, ReservationLimits, ReserveResult};
use crate::storage::in_memory::InMemoryStorage;
use crate::storage::{AsyncCounterStorage, AsyncStorage, Authorization, CounterStorage, Storage};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

#[macro_use]
extern crate core;

pub mod counter;
pub mod errors;
pub mod limit;
pub mod reservation;
pub mod storage;

pub struct RateLimiter {
    storage: Storage,
    reservation_limits: ReservationLimits,
}

pub struct AsyncRateLimiter {
    storage: AsyncStorage,
    reservation_limits: ReservationLimits,
}

pub struct RateLimiterBuilder {
    storage: Storage,
    reservation_limits: ReservationLimits,
}

type LimitadorResult<T> = Result<T, LimitadorError>;

pub struct CheckResult {
    pub limited: bool,
    pub counters: Vec<Counter>,
    pub limit_name: Option<String>,
}

/// Implemented by result types that carry the counters matched by a call - i.e. [`CheckResult`]
/// and [`crate::reservation::ReserveResult`] - so [`response_headers_for`] can build the
/// IETF-draft rate-limit headers the same way for either, regardless of which call produced them.
trait HasCounters {
    fn counters_mut(&mut self) -> &mut Vec<Counter>;
}

impl HasCounters for CheckResult {
    fn counters_mut(&mut self) -> &mut Vec<Counter> {
        &mut self.counters
    }
}

/// Builds `X-RateLimit-{Limit,Remaining,Reset}` headers (per
/// <https://datatracker.ietf.org/doc/id/draft-polli-ratelimit-headers-03.html>) from the most
/// restrictive of `result`'s counters, also recording it on the current tracing span.
fn response_headers_for(result: &mut impl HasCounters) -> HashMap<String, String> {
    let counters = result.counters_mut();
    let mut headers = HashMap::new();
    // sort by the limit remaining..
    counters.sort_by(|a, b| {
        let a_remaining = a.remaining().unwrap_or(a.max_value());
        let b_remaining = b.remaining().unwrap_or(b.max_value());
        a_remaining.cmp(&b_remaining)
    });

    let mut all_limits_text = String::with_capacity(20 * counters.len());
    counters.iter().for_each(|counter| {
        all_limits_text.push_str(
            format!(", {};w={}", counter.max_value(), counter.window().as_secs()).as_str(),
        );
        if let Some(name) = counter.limit().name() {
            all_limits_text.push_str(format!(";name=\"{}\"", name.replace('"', "'")).as_str());
        }
    });

    if let Some(counter) = counters.first() {
        let max_value = counter.max_value();
        let remaining = counter.remaining().unwrap_or(counter.max_value());

        headers.insert(
            "X-RateLimit-Limit".to_string(),
            format!("{}{all_limits_text}", max_value),
        );
        headers.insert("X-RateLimit-Remaining".to_string(), format!("{remaining}"));

        let span = tracing::Span::current();
        span.record("ratelimit.most_restrictive.limit", max_value);
        span.record("ratelimit.most_restrictive.remaining", remaining);

        if let Some(duration) = counter.expires_in() {
            let reset_secs = duration.as_secs();
            headers.insert("X-RateLimit-Reset".to_string(), format!("{}", reset_secs));
            span.record("ratelimit.most_restrictive.reset_secs", reset_secs);
        }
    }
    headers
}

impl CheckResult {
    pub fn response_header(&mut self) -> HashMap<String, String> {
        response_headers_for(self)
    }
}

impl From<CheckResult> for bool {
    fn from(value: CheckResult) -> Self {
        value.limited
    }
}

impl RateLimiterBuilder {
    pub fn with_storage(storage: Storage) -> Self {
        Self {
            storage,
            reservation_limits: ReservationLimits::default(),
        }
    }

    pub fn new(cache_size: u64) -> Self {
        Self {
            storage: Storage::new(cache_size),
            reservation_limits: ReservationLimits::default(),
        }
    }

    pub fn storage(mut self, storage: Storage) -> Self {
        self.storage = storage;
        self
    }

    /// See [`ReservationLimits`].
    pub fn reservation_limits(mut self, reservation_limits: ReservationLimits) -> Self {
        self.reservation_limits = reservation_limits;
        self
    }

    pub fn build(self) -> RateLimiter {
        RateLimiter {
            storage: self.storage,
            reservation_limits: self.reservation_limits,
        }
    }
}

pub struct AsyncRateLimiterBuilder {
    storage: AsyncStorage,
    reservation_limits: ReservationLimits,
}

impl AsyncRateLimiterBuilder {
    pub fn new(storage: AsyncStorage) -> Self {
        Self {
            storage,
            reservation_limits: ReservationLimits::default(),
        }
    }

    /// See [`ReservationLimits`].
    pub fn reservation_limits(mut self, reservation_limits: ReservationLimits) -> Self {
        self.reservation_limits = reservation_limits;
        self
    }

    pub fn build(self) -> AsyncRateLimiter {
        AsyncRateLimiter {
            storage: self.storage,
            reservation_limits: self.reservation_limits,
        }
    }
}

impl RateLimiter {
    pub fn new(cache_size: u64) -> Self {
        Self {
            storage: Storage::new(cache_size),
            reservation_limits: ReservationLimits::default(),
        }
    }

    pub fn new_with_storage(counters: Box<dyn CounterStorage>) -> Self {
        Self {
            storage: Storage::with_counter_storage(counters),
            reservation_limits: ReservationLimits::default(),
        }
    }

    pub fn get_namespaces(&self) -> HashSet<Namespace> {
        self.storage.get_namespaces()
    }

    pub fn add_limit(&self, limit: Limit) -> bool {
        self.storage.add_limit(limit)
    }

    pub fn delete_limit(&self, limit: &Limit) -> LimitadorResult<()> {
        self.storage.delete_limit(limit)?;
        Ok(())
    }

    pub fn get_limits(&self, namespace: &Namespace) -> HashSet<Limit> {
        self.storage
            .get_limits(namespace)
            .iter()
            .map(|l| (**l).clone())
            .collect()
    }

    pub fn delete_limits(&self, namespace: &Namespace) -> LimitadorResult<()> {
        self.storage.delete_limits(namespace)?;
        Ok(())
    }

    /// Checks whether `delta` more would keep every matching counter within its limit,
    /// without applying it - see [`Self::check_rate_limited_and_update`] to also apply it when
    /// admitted. `CheckResult::counters` is always populated, so callers can read remaining
    /// budget/reset time (e.g. via [`CheckResult::response_header`]) whether or not the call
    /// was admitted.
    pub fn is_rate_limited(
        &self,
        namespace: &Namespace,
        values: &Context,
        delta: u64,
    ) -> LimitadorResult<CheckResult> {
        let mut counters = self.counters_that_apply(namespace, values)?;

        if counters.is_empty() {
            return Ok(CheckResult {
                limited: false,
                counters,
                limit_name: None,
            });
        }

        let auth = self.storage.check(&mut counters, delta)?;

        Ok(match auth {
            Authorization::Ok => CheckResult {
                limited: false,
                counters,
                limit_name: None,
            },
            Authorization::Limited(name) => CheckResult {
                limited: true,
                counters,
                limit_name: name,
            },
        })
    }

    pub fn update_counters(
        &self,
        namespace: &Namespace,
        ctx: &Context,
        delta: u64,
    ) -> LimitadorResult<()> {
        let counters = self.counters_that_apply(namespace, ctx)?;

        counters
            .iter()
            .try_for_each(|counter| self.storage.update_counter(counter, delta))
            .map_err(|err| err.into())
    }

    pub fn check_rate_limited_and_update(
        &self,
        namespace: &Namespace,
        ctx: &Context,
        delta: u64,
    ) -> LimitadorResult<CheckResult> {
        let mut counters = self.counters_that_apply(namespace, ctx)?;

        if counters.is_empty() {
            return Ok(CheckResult {
                limited: false,
                counters,
                limit_name: None,
            });
        }

        let check_result = self.storage.check_and_update(&mut counters, delta)?;

        // Unlike `is_rate_limited`, this actually persisted `delta` - each counter's
        // `remaining` (computed against its pre-persist value) needs the same delta subtracted
        // to reflect the state the successful update just produced. Safe/exact: `Ok` guarantees
        // every counter's remaining was already `>= delta`.
        if matches!(check_result, Authorization::Ok) {
            for counter in counters.iter_mut() {
                if let Some(remaining) = counter.remaining() {
                    counter.set_remaining(remaining.saturating_sub(delta));
                }
            }
        }

        match check_result {
            Authorization::Ok => Ok(CheckResult {
                limited: false,
                counters,
                limit_name: None,
            }),
            Authorization::Limited(name) => Ok(CheckResult {
                limited: true,
                counters,
                limit_name: name,
            }),
        }
    }

    pub fn get_counters(&self, namespace: &Namespace) -> LimitadorResult<HashSet<Counter>> {
        self.storage
            .get_counters(namespace)
            .map_err(|err| err.into())
    }

    /// Admits, or not, based on `amount`: every counter matching `namespace`/`ctx` must stay
    /// within its limit if `amount` were held, once outstanding reservations are accounted
    /// for - all matching counters are admitted, or none are. If admitted, the amount
    /// actually held (`ReserveResult::amount`) may be less than `amount`, clamped by
    /// `ReservationLimits::max_fraction` as a self-defense limit so one reservation can't
    /// claim an entire counter.
    ///
    /// On success, `reservation_id` in the result must later be passed to
    /// `commit_reservation` to release the hold once actual usage is known.
    ///
    /// The hold lasts for at most `ttl`; `None` uses `ReservationLimits::max_ttl` outright,
    /// `Some` is still clamped to it.
    pub fn reserve(
        &self,
        namespace: &Namespace,
        ctx: &Context,
        amount: u64,
        ttl: Option<Duration>,
    ) -> LimitadorResult<ReserveResult> {
        let mut counters = self.counters_that_apply(namespace, ctx)?;

        if counters.is_empty() {
            return Ok(ReserveResult {
                limited: false,
                reservation_id: None,
                amount: 0,
                counters,
                limit_name: None,
            });
        }

        // Admission checks the raw, requested `amount` - all-or-nothing, consistent with
        // `check_and_update`/`is_rate_limited` never silently applying a smaller delta than
        // requested. `max_fraction` only clamps how much is actually held once admitted, as
        // a self-defense limit so one reservation can't claim the entire counter.
        let hold_amount = counters
            .iter()
            .map(|c| (c.max_value() as f64 * self.reservation_limits.max_fraction) as u64)
            .min()
            .map_or(amount, |max| amount.min(max));
        debug_assert!(hold_amount <= amount);

        let ttl = ttl.map_or(self.reservation_limits.max_ttl, |ttl| {
            ttl.min(self.reservation_limits.max_ttl)
        });

        let reservation_id = ReservationId::new();
        let auth =
            self.storage
                .reserve(&mut counters, &reservation_id, amount, hold_amount, ttl)?;

        Ok(match auth {
            Authorization::Ok => ReserveResult {
                limited: false,
                // `hold_amount == 0` means nothing was actually stored (see the
                // `hold_amount == 0` guards in storage) - don't hand back a `reservation_id`
                // that could never be found again by `commit_reservation`.
                reservation_id: (hold_amount > 0).then_some(reservation_id),
                amount: hold_amount,
                counters,
                limit_name: None,
            },
            Authorization::Limited(name) => ReserveResult {
                limited: true,
                reservation_id: None,
                amount: 0,
                counters,
                limit_name: name,
            },
        })
    }

    /// Resolves a reservation with the caller's real usage: re-resolves counters from
    /// `namespace`/`ctx` exactly as `update_counters` does, and unconditionally applies
    /// `actual_amount` to them, regardless of whether `reservation_id` is still live.
    /// `reservation_id` of `None` (e.g. `reserve()` admitted the call but held nothing, so
    /// there was never a reservation to begin with) skips releasing anything and just
    /// applies `actual_amount` - the same graceful degradation as `Some` with an
    /// unrecognized or already-expired id.
    pub fn commit_reservation(
        &self,
        namespace: &Namespace,
        ctx: &Context,
        reservation_id: Option<&ReservationId>,
        actual_amount: u64,
    ) -> LimitadorResult<CommitResult> {
        // If the counters resolved here differ from those reserve originally held
        // (e.g. limits changed between the two calls),
        // any reservation left on a counter no longer resolved isn't released by this call.
        // It just sits until its own ttl expires naturally.
        let counters = self.counters_that_apply(namespace, ctx)?;

        counters
            .iter()
            .try_for_each(|counter| self.storage.update_counter(counter, actual_amount))?;

        let reservation_released = match reservation_id {
            Some(reservation_id) if !counters.is_empty() => self
                .storage
                .release_reservation(&counters, reservation_id)?,
            _ => false,
        };

        Ok(CommitResult {
            reservation_released,
        })
    }

    // Deletes all the limits stored except the ones received in the params. For
    // every limit received, if it does not exist, it is created. If it already
    // exists, its associated counters are not reset.
    pub fn configure_with(&self, limits: impl IntoIterator<Item = Limit>) -> LimitadorResult<()> {
        let limits_to_keep_or_create = classify_limits_by_namespace(limits);

        let namespaces_limits_to_keep_or_create: HashSet<Namespace> =
            limits_to_keep_or_create.keys().cloned().collect();

        for namespace in self
            .get_namespaces()
            .union(&namespaces_limits_to_keep_or_create)
        {
            let limits_in_namespace = self.get_limits(namespace);
            let limits_to_keep_in_ns: HashSet<Limit> = limits_to_keep_or_create
                .get(namespace)
                .cloned()
                .unwrap_or_default();

            for limit in limits_in_namespace.difference(&limits_to_keep_in_ns) {
                self.delete_limit(limit)?;
            }

            for limit in limits_to_keep_in_ns.difference(&limits_in_namespace) {
                self.add_limit(limit.clone());
            }

            for limit in limits_to_keep_in_ns.union(&limits_in_namespace) {
                self.storage.update_limit(limit);
            }
        }

        Ok(())
    }

    fn counters_that_apply(
        &self,
        namespace: &Namespace,
        ctx: &Context,
    ) -> LimitadorResult<Vec<Counter>> {
        let limits = self.storage.get_limits(namespace);
        limits
            .iter()
            .filter(|lim| lim.applies(ctx))
            .filter_map(|lim| match Counter::new(Arc::clone(lim), ctx) {
                Ok(None) => None,
                Ok(Some(c)) => Some(Ok(c)),
                Err(e) => Some(Err(e)),
            })
            .collect()
    }
}

// TODO: the code of this implementation is almost identical to the blocking
// one. The only exception is that the functions defined are "async" and all the
// calls to the storage need to include ".await". We'll need to think about how
// to remove this duplication.

impl AsyncRateLimiter {
    pub fn new_with_storage(storage: Box<dyn AsyncCounterStorage>) -> Self {
        Self {
            storage: AsyncStorage::with_counter_storage(storage),
            reservation_limits: ReservationLimits::default(),
        }
    }

    pub fn get_namespaces(&self) -> HashSet<Namespace> {
        self.storage.get_namespaces()
    }

    pub fn add_limit(&self, limit: Limit) -> bool {
        self.storage.add_limit(limit)
    }

    pub async fn delete_limit(&self, limit: &Limit) -> LimitadorResult<()> {
        self.storage.delete_limit(limit).await?;
        Ok(())
    }

    pub fn get_limits(&self, namespace: &Namespace) -> HashSet<Limit> {
        self.storage
            .get_limits(namespace)
            .iter()
            .map(|l| (**l).clone())
            .collect()
    }

    pub async fn delete_limits(&self, namespace: &Namespace) -> LimitadorResult<()> {
        self.storage.delete_limits(namespace).await?;
        Ok(())
    }

    /// See [`RateLimiter::is_rate_limited`].
    pub async fn is_rate_limited(
        &self,
        namespace: &Namespace,
        ctx: &Context<'_>,
        delta: u64,
    ) -> LimitadorResult<CheckResult> {
        let mut counters = self.counters_that_apply(namespace, ctx).await?;

        if counters.is_empty() {
            return Ok(CheckResult {
                limited: false,
                counters,
                limit_name: None,
            });
        }

        let auth = self.storage.check(&mut counters, delta).await?;

        Ok(match auth {
            Authorization::Ok => CheckResult {
                limited: false,
                counters,
                limit_name: None,
            },
            Authorization::Limited(name) => CheckResult {
                limited: true,
                counters,
                limit_name: name,
            },
        })
    }

    pub async fn update_counters(
        &self,
        namespace: &Namespace,
        ctx: &Context<'_>,
        delta: u64,
    ) -> LimitadorResult<()> {
        let counters = self.counters_that_apply(namespace, ctx).await?;

        for counter in counters {
            self.storage.update_counter(&counter, delta).await?
        }

        Ok(())
    }

    pub async fn check_rate_limited_and_update(
        &self,
        namespace: &Namespace,
        ctx: &Context<'_>,
        delta: u64,
    ) -> LimitadorResult<CheckResult> {
        // the above where-clause is needed in order to call unwrap().
        let mut counters = self.counters_that_apply(namespace, ctx).await?;

        if counters.is_empty() {
            return Ok(CheckResult {
                limited: false,
                counters,
                limit_name: None,
            });
        }

        let check_result = self.storage.check_and_update(&mut counters, delta).await?;

        // See the comment in `RateLimiter::check_rate_limited_and_update`: this actually
        // persisted `delta`, so each counter's remaining needs it subtracted to reflect the
        // state the successful update just produced.
        if matches!(check_result, Authorization::Ok) {
            for counter in counters.iter_mut() {
                if let Some(remaining) = counter.remaining() {
                    counter.set_remaining(remaining.saturating_sub(delta));
                }
            }
        }

        match check_result {
            Authorization::Ok => Ok(CheckResult {
                limited: false,
                counters,
                limit_name: None,
            }),
            Authorization::Limited(name) => Ok(CheckResult {
                limited: true,
                counters,
                limit_name: name,
            }),
        }
    }

    pub async fn get_counters(&self, namespace: &Namespace) -> LimitadorResult<HashSet<Counter>> {
        self.storage
            .get_counters(namespace)
            .await
            .map_err(|err| err.into())
    }

    /// See [`RateLimiter::reserve`].
    pub async fn reserve(
        &self,
        namespace: &Namespace,
        ctx: &Context<'_>,
        amount: u64,
        ttl: Option<Duration>,
    ) -> LimitadorResult<ReserveResult> {
        let mut counters = self.counters_that_apply(namespace, ctx).await?;

        if counters.is_empty() {
            return Ok(ReserveResult {
                limited: false,
                reservation_id: None,
                amount: 0,
                counters,
                limit_name: None,
            });
        }

        // See the comment in `RateLimiter::reserve`: admission checks the raw `amount`;
        // `max_fraction` only clamps how much is actually held once admitted.
        let hold_amount = counters
            .iter()
            .map(|c| (c.max_value() as f64 * self.reservation_limits.max_fraction) as u64)
            .min()
            .map_or(amount, |max| amount.min(max));
        debug_assert!(hold_amount <= amount);

        let ttl = ttl.map_or(self.reservation_limits.max_ttl, |ttl| {
            ttl.min(self.reservation_limits.max_ttl)
        });

        let reservation_id = ReservationId::new();
        let auth = self
            .storage
            .reserve(&mut counters, &reservation_id, amount, hold_amount, ttl)
            .await?;

        Ok(match auth {
            Authorization::Ok => ReserveResult {
                limited: false,
                // `hold_amount == 0` means nothing was actually stored (see the
                // `hold_amount == 0` guards in storage) - don't hand back a `reservation_id`
                // that could never be found again by `commit_reservation`.
                reservation_id: (hold_amount > 0).then_some(reservation_id),
                amount: hold_amount,
                counters,
                limit_name: None,
            },
            Authorization::Limited(name) => ReserveResult {
                limited: true,
                reservation_id: None,
                amount: 0,
                counters,
                limit_name: name,
            },
        })
    }

    /// See [`RateLimiter::commit_reservation`].
    pub async fn commit_reservation(
        &self,
        namespace: &Namespace,
        ctx: &Context<'_>,
        reservation_id: Option<&ReservationId>,
        actual_amount: u64,
    ) -> LimitadorResult<CommitResult> {
        let counters = self.counters_that_apply(namespace, ctx).await?;

        for counter in &counters {
            self.storage.update_counter(counter, actual_amount).await?
        }

        let reservation_released = match reservation_id {
            Some(reservation_id) if !counters.is_empty() => {
                self.storage
                    .release_reservation(&counters, reservation_id)
                    .await?
            }
            _ => false,
        };

        Ok(CommitResult {
            reservation_released,
        })
    }

    // Deletes all the limits stored except the ones received in the params. For
    // every limit received, if it does not exist, it is created. If it already
    // exists, its associated counters are not reset.
    pub async fn configure_with(
        &self,
        limits: impl IntoIterator<Item = Limit>,
    ) -> LimitadorResult<()> {
        let limits_to_keep_or_create = classify_limits_by_namespace(limits);

        let namespaces_limits_to_keep_or_create: HashSet<Namespace> =
            limits_to_keep_or_create.keys().cloned().collect();

        for namespace in self
            .get_namespaces()
            .union(&namespaces_limits_to_keep_or_create)
        {
            let limits_in_namespace = self.get_limits(namespace);
            let limits_to_keep_in_ns: HashSet<Limit> = limits_to_keep_or_create
                .get(namespace)
                .cloned()
                .unwrap_or_default();

            for limit in limits_in_namespace.difference(&limits_to_keep_in_ns) {
                self.delete_limit(limit).await?;
            }

            for limit in limits_to_keep_in_ns.difference(&limits_in_namespace) {
                self.add_limit(limit.clone());
            }

            for limit in limits_to_keep_in_ns.union(&limits_in_namespace) {
                self.storage.update_limit(limit);
            }
        }

        Ok(())
    }

    async fn counters_that_apply(
        &self,
        namespace: &Namespace,
        ctx: &Context<'_>,
    ) -> LimitadorResult<Vec<Counter>> {
        let limits = self.storage.get_limits(namespace);
        limits
            .iter()
            .filter(|lim| lim.applies(ctx))
            .filter_map(|lim| match Counter::new(Arc::clone(lim), ctx) {
                Ok(None) => None,
                Ok(Some(c)) => Some(Ok(c)),
                Err(e) => Some(Err(e)),
            })
            .collect()
    }
}

fn classify_limits_by_namespace(
    limits: impl IntoIterator<Item = Limit>,
) -> HashMap<Namespace, HashSet<Limit>> {
    let mut res: HashMap<Namespace, HashSet<Limit>> = HashMap::new();

    for limit in limits {
        match res.get_mut(limit.namespace()) {
            Some(limits) => {
                limits.insert(limit);
            }
            None => {
                let mut set = HashSet::new();
                set.insert(limit.clone());
                res.insert(limit.namespace().clone(), set);
            }
        }
    }

    res
}

#[cfg(test)]
mod test {
    use crate::limit::{Context, Expression, Limit};
    use crate::reservation::ReservationLimits;
    use crate::{RateLimiter, RateLimiterBuilder};
    use std::collections::HashMap;
    use std::time::Duration;

    // A read-only check must report the counter's true current remaining, not remaining as
    // if the hypothetical `delta` had already been applied (nothing was actually consumed);
    // `check_rate_limited_and_update` genuinely persists `delta`, so its remaining must
    // reflect that real, post-increment state.
    #[test]
    fn is_rate_limited_reports_current_remaining_check_rate_limited_and_update_reports_post_delta()
    {
        let rl = RateLimiter::new(10_000);
        let namespace = "remaining_semantics";
        let limit = Limit::new(namespace, 10, 60, vec![], Vec::<Expression>::default());
        rl.add_limit(limit);
        let ns: crate::limit::Namespace = namespace.into();
        let ctx = Context::default();

        let result = rl.is_rate_limited(&ns, &ctx, 1).unwrap();
        assert_eq!(result.counters[0].remaining().unwrap(), 10);

        let result = rl.check_rate_limited_and_update(&ns, &ctx, 1).unwrap();
        assert_eq!(result.counters[0].remaining().unwrap(), 9);
    }

    // RFC 0021's motivating scenario: N concurrent in-flight requests against one limit,
    // racing to reserve capacity before any of them has reported real usage. Uses real OS
    // threads (`std::thread::scope`), not async tasks, since `reserve()`'s local (in-memory)
    // path has no internal `.await` - only genuine thread-level parallelism can exercise a
    // races there (see the `LocalReservationRegistry::admission_lock` docs for the bug this
    // guards against).
    #[test]
    fn concurrent_reserve_calls_never_exceed_the_limit() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;

        const MAX_VALUE: u64 = 50;
        const AMOUNT: u64 = 5;
        const CONCURRENT_REQUESTS: usize = 20;

        for _ in 0..20 {
            let rl = Arc::new(RateLimiter::new(10_000));
            let namespace = "race";
            let limit = Limit::new(
                namespace,
                MAX_VALUE,
                60,
                vec![],
                Vec::<Expression>::default(),
            );
            rl.add_limit(limit);
            let ns: crate::limit::Namespace = namespace.into();

            let admitted_count = Arc::new(AtomicUsize::new(0));
            std::thread::scope(|s| {
                for _ in 0..CONCURRENT_REQUESTS {
                    let rl = rl.clone();
                    let ns = ns.clone();
                    let admitted_count = admitted_count.clone();
                    s.spawn(move || {
                        let ctx = Context::default();
                        let res = rl
                            .reserve(&ns, &ctx, AMOUNT, Some(Duration::from_secs(30)))
                            .unwrap();
                        if !res.limited {
                            admitted_count.fetch_add(1, Ordering::SeqCst);
                        }
                    });
                }
            });

            // Exactly floor(MAX_VALUE / AMOUNT) requests should have been admitted - never
            // more (that would mean the race let outstanding reservations jointly exceed the
            // limit), and never fewer (that would mean available capacity went unused).
            let expected = (MAX_VALUE / AMOUNT) as usize;
            assert_eq!(admitted_count.load(Ordering::SeqCst), expected);
        }
    }

    #[test]
    fn properly_updates_existing_limits() {
        let rl = RateLimiter::new(100);
        let namespace = "foo";

        let l = Limit::new(namespace, 42, 100, vec![], Vec::<Expression>::default());
        rl.add_limit(l.clone());
        let limits = rl.get_limits(&namespace.into());
        assert_eq!(limits.len(), 1);
        assert!(limits.contains(&l));
        assert_eq!(limits.iter().next().unwrap().max_value(), 42);

        let r = rl
            .check_rate_limited_and_update(&namespace.into(), &Context::default(), 1)
            .unwrap();
        assert_eq!(r.counters.first().unwrap().max_value(), 42);

        let mut l = l.clone();
        l.set_max_value(50);

        rl.configure_with([l.clone()]).unwrap();
        let limits = rl.get_limits(&namespace.into());
        assert_eq!(limits.len(), 1);
        assert!(limits.contains(&l));
        assert_eq!(limits.iter().next().unwrap().max_value(), 50);

        let r = rl
            .check_rate_limited_and_update(&namespace.into(), &Context::default(), 1)
            .unwrap();
        assert_eq!(r.counters.first().unwrap().max_value(), 50);
    }

    #[test]
    fn deletes_qualified_counters() {
        let rl = RateLimiter::new(100);
        let namespace = "foo";

        let l = Limit::new(
            namespace,
            42,
            100,
            vec![],
            vec![Expression::parse("x").unwrap()],
        );
        let ctx = Context::from(HashMap::from([("x".to_string(), "a".to_string())]));
        rl.add_limit(l.clone());
        let r = rl
            .check_rate_limited_and_update(&namespace.into(), &ctx, 1)
            .unwrap();
        assert_eq!(r.counters.first().unwrap().remaining(), Some(41));
        rl.delete_limit(&l).unwrap();

        rl.add_limit(l.clone());
        let r = rl
            .check_rate_limited_and_update(&namespace.into(), &ctx, 1)
            .unwrap();
        assert_eq!(r.counters.first().unwrap().remaining(), Some(41));
    }

    #[test]
    fn reserve_accounts_for_outstanding_reservations() {
        let rl = RateLimiter::new(100);
        let namespace = "reservations";
        let limit = Limit::new(namespace, 10, 60, vec![], Vec::<Expression>::default());
        rl.add_limit(limit);

        let ns = namespace.into();
        let ctx = Context::default();

        let first = rl
            .reserve(&ns, &ctx, 6, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!first.limited);
        assert!(first.reservation_id.is_some());

        // value(0) + outstanding(6) + 6 = 12 > 10: rejected
        let second = rl
            .reserve(&ns, &ctx, 6, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(second.limited);
        assert!(second.reservation_id.is_none());

        // value(0) + outstanding(6) + 4 = 10 <= 10: admitted
        let third = rl
            .reserve(&ns, &ctx, 4, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!third.limited);
    }

    #[test]
    fn commit_reservation_applies_actual_amount_and_releases_hold() {
        let rl = RateLimiter::new(100);
        let namespace = "commit";
        let limit = Limit::new(namespace, 10, 60, vec![], Vec::<Expression>::default());
        rl.add_limit(limit);

        let ns = namespace.into();
        let ctx = Context::default();

        let reserved = rl
            .reserve(&ns, &ctx, 6, Some(Duration::from_secs(30)))
            .unwrap();
        let reservation_id = reserved.reservation_id.expect("should be admitted");

        // Still held: 0 + outstanding(6) + 6 = 12 > 10
        let blocked = rl
            .reserve(&ns, &ctx, 6, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(blocked.limited);

        // Real usage turned out lower than the estimate
        let commit = rl
            .commit_reservation(&ns, &ctx, Some(&reservation_id), 2)
            .unwrap();
        assert!(commit.reservation_released);

        // Committing again is a no-op release, but still applies actual_amount unconditionally
        let second_commit = rl
            .commit_reservation(&ns, &ctx, Some(&reservation_id), 2)
            .unwrap();
        assert!(!second_commit.reservation_released);

        // Counter is now at 4 (2 + 2) with no outstanding reservations: 4 + 6 = 10 <= 10
        let after = rl
            .reserve(&ns, &ctx, 6, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!after.limited);
    }

    #[test]
    fn reserve_without_matching_limits_is_a_noop() {
        let rl = RateLimiter::new(100);
        let ns = "empty".into();

        let result = rl
            .reserve(&ns, &Context::default(), 5, Some(Duration::from_secs(10)))
            .unwrap();
        assert!(!result.limited);
        assert!(result.reservation_id.is_none());
    }

    #[test]
    fn reserve_clamps_amount_to_max_reservation_fraction() {
        let rl = RateLimiterBuilder::new(100)
            .reservation_limits(ReservationLimits {
                max_fraction: 0.5,
                ..Default::default()
            })
            .build();
        let namespace = "fraction";
        let limit = Limit::new(namespace, 10, 60, vec![], Vec::<Expression>::default());
        rl.add_limit(limit);

        let ns = namespace.into();
        let ctx = Context::default();

        // Requested 8, but clamped to floor(10 * 0.5) = 5.
        let first = rl
            .reserve(&ns, &ctx, 8, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!first.limited);
        assert_eq!(first.amount, 5);

        // A second reservation for 5 more would need 5 + 5 = 10 <= 10, so it's admitted -
        // proving the first only actually held 5, not the requested 8.
        let second = rl
            .reserve(&ns, &ctx, 5, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!second.limited);

        // A third for even 1 more would be 10 + 1 = 11 > 10: rejected.
        let third = rl
            .reserve(&ns, &ctx, 1, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(third.limited);
    }

    #[test]
    fn default_max_reservation_fraction_does_not_clamp() {
        let rl = RateLimiter::new(100);
        let namespace = "no_fraction_clamp";
        let limit = Limit::new(namespace, 10, 60, vec![], Vec::<Expression>::default());
        rl.add_limit(limit);

        let ns = namespace.into();
        let ctx = Context::default();

        // Without an explicit `max_reservation_fraction`, the full 10 can be reserved in one
        // go - it's only ever clamped down to the counter's own `max_value`, never tighter.
        let result = rl
            .reserve(&ns, &ctx, 10, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!result.limited);
        assert_eq!(result.amount, 10);
    }

    #[test]
    fn reserve_denies_when_requested_amount_exceeds_max_value() {
        // Admission checks the raw requested amount - a request that could never fit in
        // the counter at all is denied outright, regardless of `max_fraction`.
        let rl = RateLimiterBuilder::new(100)
            .reservation_limits(ReservationLimits {
                max_fraction: 0.5,
                ..Default::default()
            })
            .build();
        let namespace = "over_max_value";
        let limit = Limit::new(namespace, 1, 60, vec![], Vec::<Expression>::default());
        rl.add_limit(limit);

        let ns = namespace.into();
        let ctx = Context::default();

        let result = rl
            .reserve(&ns, &ctx, 5, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(result.limited);
        assert!(result.reservation_id.is_none());
        assert_eq!(result.amount, 0);
    }

    #[test]
    fn reserve_handles_hold_amount_clamped_to_zero() {
        // max_value=1 with a 0.5 fraction clamps the actually-held amount down to
        // floor(1 * 0.5) = 0, but a request within max_value is still admitted - it just
        // doesn't create a reservation to later release, since there's nothing to hold.
        let rl = RateLimiterBuilder::new(100)
            .reservation_limits(ReservationLimits {
                max_fraction: 0.5,
                ..Default::default()
            })
            .build();
        let namespace = "hold_clamped_to_zero";
        let limit = Limit::new(namespace, 1, 60, vec![], Vec::<Expression>::default());
        rl.add_limit(limit);

        let ns = namespace.into();
        let ctx = Context::default();

        let result = rl
            .reserve(&ns, &ctx, 1, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!result.limited);
        assert!(result.reservation_id.is_none());
        assert_eq!(result.amount, 0);

        // Repeating it stays consistent - no lingering zero-amount entries accumulate to
        // eventually (incorrectly) block admission.
        let again = rl
            .reserve(&ns, &ctx, 1, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!again.limited);
        assert!(again.reservation_id.is_none());
    }

    #[test]
    fn reserve_denies_a_reservation_that_could_never_fit_even_with_default_fraction() {
        // With the default `max_fraction` (1.0, no extra clamp beyond `max_value`), a
        // request far larger than the counter itself is denied outright - it's never
        // silently admitted holding only `max_value`.
        let rl = RateLimiter::new(10);
        let namespace = "over_max_value_default_fraction";
        let limit = Limit::new(namespace, 10, 60, vec![], Vec::<Expression>::default());
        rl.add_limit(limit);

        let ns = namespace.into();
        let ctx = Context::default();

        let result = rl
            .reserve(&ns, &ctx, 1000, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(result.limited);
        assert!(result.reservation_id.is_none());
        assert_eq!(result.amount, 0);
    }

    #[test]
    fn expired_reservations_do_not_count_as_outstanding() {
        let rl = RateLimiter::new(100);
        let namespace = "expiry";
        let limit = Limit::new(namespace, 10, 60, vec![], Vec::<Expression>::default());
        rl.add_limit(limit);

        let ns = namespace.into();
        let ctx = Context::default();

        // A zero ttl means this reservation is already expired by the time we look at it
        // again, without needing to sleep: `expires_at == now_1 <= now_2`.
        let first = rl.reserve(&ns, &ctx, 8, Some(Duration::ZERO)).unwrap();
        assert!(!first.limited);

        // The first reservation is already expired, so another 8 fits again: 0 + 0 + 8 <= 10
        let second = rl
            .reserve(&ns, &ctx, 8, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!second.limited);
    }

    #[test]
    fn reservation_expires_after_its_ttl_elapses() {
        let rl = RateLimiter::new(100);
        let namespace = "expiry-sleep";
        let limit = Limit::new(namespace, 10, 60, vec![], Vec::<Expression>::default());
        rl.add_limit(limit);

        let ns = namespace.into();
        let ctx = Context::default();

        let first = rl
            .reserve(&ns, &ctx, 8, Some(Duration::from_millis(20)))
            .unwrap();
        assert!(!first.limited);

        // Still outstanding: 0 + outstanding(8) + 8 = 16 > 10
        let blocked = rl
            .reserve(&ns, &ctx, 8, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(blocked.limited);

        std::thread::sleep(Duration::from_millis(50));

        // The first reservation has now genuinely expired: 0 + 0 + 8 <= 10
        let admitted = rl
            .reserve(&ns, &ctx, 8, Some(Duration::from_secs(30)))
            .unwrap();
        assert!(!admitted.limited);
    }
}
