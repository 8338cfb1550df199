use crate::counter::Counter;
use crate::limit::Limit;
use crate::reservation::ReservationId;
use crate::storage::disk::expiring_value::ExpiringValue;
use crate::storage::disk::OptimizeFor;
use crate::storage::keys::bin::{
    key_for_counter, partial_counter_from_counter_key, prefix_for_namespace,
};
use crate::storage::local_reservations::{
    LocalReservationRegistry, ReservationRequest, DEFAULT_LOCAL_RESERVATIONS_CACHE_SIZE,
};
use crate::storage::{Authorization, CounterStorage, StorageErr};
use rocksdb::{
    CompactionDecision, DBCompressionType, DBWithThreadMode, IteratorMode, MultiThreaded, Options,
    DB,
};
use std::collections::{BTreeSet, HashSet};
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tracing::debug_span;

pub struct RocksDbStorage {
    db: DBWithThreadMode<MultiThreaded>,
    // Local-memory only, not shared across processes - see `LocalReservationRegistry`'s docs.
    reservations: LocalReservationRegistry,
}

impl CounterStorage for RocksDbStorage {
    #[tracing::instrument(skip_all)]
    fn is_within_limits(&self, counter: &Counter, delta: u64) -> Result<bool, StorageErr> {
        let key = key_for_counter(counter);
        let value = self.insert_or_update(&key, counter, 0)?;
        Ok(counter.max_value() >= value.value() + delta)
    }

    #[tracing::instrument(skip_all)]
    fn add_counter(&self, _limit: &Limit) -> Result<(), StorageErr> {
        Ok(())
    }

    #[tracing::instrument(skip_all)]
    fn update_counter(&self, counter: &Counter, delta: u64) -> Result<(), StorageErr> {
        let key = key_for_counter(counter);
        self.insert_or_update(&key, counter, delta)?;
        Ok(())
    }

    #[tracing::instrument(skip_all)]
    fn check(&self, counters: &mut Vec<Counter>, delta: u64) -> Result<Authorization, StorageErr> {
        Ok(self.evaluate(counters, delta)?.0)
    }

    #[tracing::instrument(skip_all)]
    fn check_and_update(
        &self,
        counters: &mut Vec<Counter>,
        delta: u64,
    ) -> Result<Authorization, StorageErr> {
        let (auth, keys) = self.evaluate(counters, delta)?;
        if matches!(auth, Authorization::Ok) {
            for (idx, counter) in counters.iter_mut().enumerate() {
                self.insert_or_update(&keys[idx], counter, delta)?;
            }
        }
        Ok(auth)
    }

    #[tracing::instrument(skip_all)]
    fn get_counters(&self, limits: &HashSet<Arc<Limit>>) -> Result<HashSet<Counter>, StorageErr> {
        let mut counters = HashSet::default();
        let namepaces: BTreeSet<&str> = limits.iter().map(|l| l.namespace().as_ref()).collect();
        for ns in namepaces {
            let mut iterator = self.db.prefix_iterator(prefix_for_namespace(ns));
            loop {
                let option = {
                    let span = debug_span!("datastore");
                    let _entered = span.enter();
                    iterator.next()
                };
                let next = option;
                match next {
                    None => break,
                    Some(entry) => {
                        let (key, value) = entry?;
                        let mut counter = partial_counter_from_counter_key(key.as_ref());
                        if counter.namespace().as_ref() != ns {
                            break;
                        }
                        let value: ExpiringValue = value.as_ref().try_into()?;
                        for limit in limits {
                            if limit.deref() == counter.limit() {
                                counter.update_to_limit(Arc::clone(limit));
                                let ttl = value.ttl();
                                counter.set_expires_in(ttl);
                                counter
                                    .set_remaining(limit.max_value().saturating_sub(value.value()));
                                break;
                            }
                        }
                        if counter.expires_in().expect("Duration needs to be set") > Duration::ZERO
                        {
                            counters.insert(counter);
                        }
                    }
                }
            }
        }
        Ok(counters)
    }

    #[tracing::instrument(skip_all)]
    fn delete_counters(&self, limits: &HashSet<Arc<Limit>>) -> Result<(), StorageErr> {
        let counters = self.get_counters(limits)?;
        for counter in &counters {
            let span = debug_span!("datastore");
            let _entered = span.enter();
            self.db.delete(key_for_counter(counter))?;
        }
        Ok(())
    }

    #[tracing::instrument(skip_all)]
    fn clear(&self) -> Result<(), StorageErr> {
        let span = debug_span!("datastore");
        let _entered = span.enter();
        for entry in self.db.iterator(IteratorMode::Start) {
            let span = debug_span!("datastore");
            let _entered = span.enter();
            self.db.delete(entry?.0)?
        }
        Ok(())
    }

    // Local-memory only (see `LocalReservationRegistry`'s docs): not shared across processes,
    // which is consistent with `RocksDbStorage`'s existing single-instance scope for counters
    // themselves.
    #[tracing::instrument(skip_all)]
    fn reserve(
        &self,
        counters: &mut Vec<Counter>,
        reservation_id: &ReservationId,
        check_amount: u64,
        hold_amount: u64,
        ttl: Duration,
    ) -> Result<Authorization, StorageErr> {
        let now = SystemTime::now();
        let mut values_and_window_ttls = Vec::with_capacity(counters.len());
        for counter in counters.iter() {
            let key = key_for_counter(counter);
            // Zero-delta "touch": establishes a fresh window if absent/expired, without
            // affecting the counter's real value - mirrors `InMemoryStorage`'s `touch`.
            let value = self.insert_or_update(&key, counter, 0)?;
            values_and_window_ttls.push((value.value(), value.ttl()));
        }

        Ok(self.reservations.reserve(
            counters,
            &values_and_window_ttls,
            ReservationRequest {
                reservation_id,
                check_amount,
                hold_amount,
                ttl,
                now,
            },
        ))
    }

    #[tracing::instrument(skip_all)]
    fn release_reservation(
        &self,
        counters: &[Counter],
        reservation_id: &ReservationId,
    ) -> Result<bool, StorageErr> {
        Ok(self.reservations.release(counters, reservation_id))
    }
}

impl RocksDbStorage {
    /// Shared by [`CounterStorage::check`] and [`CounterStorage::check_and_update`]: reads
    /// every counter's current value, annotating each with its `remaining`/`expires_in`, and
    /// determines whether `delta` more would keep all of them within their limit - also
    /// returning each counter's storage key, for the caller's benefit if it goes on to persist.
    /// Never mutates any stored value itself.
    fn evaluate(
        &self,
        counters: &mut [Counter],
        delta: u64,
    ) -> Result<(Authorization, Vec<Vec<u8>>), StorageErr> {
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(counters.len());
        let mut first_limited = None;

        for counter in &mut *counters {
            let key = key_for_counter(counter);
            let slice: &[u8] = key.as_ref();
            let entry = {
                let span = debug_span!("datastore");
                let _entered = span.enter();
                self.db.get(slice)?
            };
            let (val, ttl) = match entry {
                None => (0, Duration::from_secs(counter.limit().seconds())),
                Some(raw) => {
                    let slice: &[u8] = raw.as_ref();
                    let value: ExpiringValue = slice.try_into()?;
                    let ttl = value.ttl();
                    // A zero ttl means the previous window has already elapsed even though a
                    // stale entry is still physically present - report a fresh full window,
                    // the same as a counter that never existed at all.
                    let ttl = if ttl.is_zero() {
                        Duration::from_secs(counter.limit().seconds())
                    } else {
                        ttl
                    };
                    (value.value(), ttl)
                }
            };

            counter.set_expires_in(ttl);
            // `remaining` reflects the counter's actual current state, not a projection of
            // `delta` having been applied - `check()` never applies it, and `check_and_update`
            // compensates for its own persisted delta afterward (see `RateLimiter`).
            counter.set_remaining(counter.max_value().saturating_sub(val));

            if first_limited.is_none() && counter.max_value() < val + delta {
                first_limited = Some(Authorization::Limited(
                    counter.limit().name().map(|n| n.to_string()),
                ));
            }

            keys.push(key);
        }

        Ok((first_limited.unwrap_or(Authorization::Ok), keys))
    }

    pub fn open<P: AsRef<std::path::Path>>(path: P, mode: OptimizeFor) -> Result<Self, StorageErr> {
        let mut opts = Options::default();
        match mode {
            OptimizeFor::Space => {
                opts.set_compression_type(DBCompressionType::Bz2);
                opts.set_compaction_filter("ExpiredValueFilter", |_level, _key, value| {
                    if let Ok(value) = ExpiringValue::try_from(value) {
                        if value.value_at(SystemTime::now()) != 0 {
                            return CompactionDecision::Keep;
                        }
                    }
                    CompactionDecision::Remove
                });
            }
            OptimizeFor::Throughput => {
                opts.set_compression_type(DBCompressionType::None);
            }
        }
        opts.set_merge_operator_associative("ExpiringValueMerge", |_key, start, operands| {
            let now = SystemTime::now();
            let mut value: ExpiringValue = start
                .map(|raw: &[u8]| raw.try_into().unwrap_or_default())
                .unwrap_or_default();
            for op in operands {
                // ignore (corrupted?) values pending merges
                if let Ok(pending) = ExpiringValue::try_from(op) {
                    value = value.merge(pending, now);
                }
            }
            Some(Vec::from(value))
        });
        opts.create_if_missing(true);
        let db = DB::open(&opts, path).unwrap();
        Ok(Self {
            db,
            reservations: LocalReservationRegistry::new(DEFAULT_LOCAL_RESERVATIONS_CACHE_SIZE),
        })
    }

    fn insert_or_update(
        &self,
        key: &[u8],
        counter: &Counter,
        delta: u64,
    ) -> Result<ExpiringValue, StorageErr> {
        let now = SystemTime::now();
        let entry = {
            let span = debug_span!("datastore");
            let _entered = span.enter();
            self.db.get(key)?
        };
        let value = match entry {
            None => ExpiringValue::default(),
            Some(raw) => {
                let slice: &[u8] = raw.as_ref();
                slice.try_into()?
            }
        };
        if value.value_at(now) + delta <= counter.max_value() {
            let expiring_value =
                ExpiringValue::new(delta, now + Duration::from_secs(counter.limit().seconds()));
            let span = debug_span!("datastore");
            let _entered = span.enter();
            self.db
                .merge(key, <ExpiringValue as Into<Vec<u8>>>::into(expiring_value))?;
            return Ok(value.update(delta, counter.window(), now));
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::RocksDbStorage;
    use crate::counter::Counter;
    use crate::limit::{Context, Limit};
    use crate::reservation::ReservationId;
    use crate::storage::disk::OptimizeFor;
    use crate::storage::{Authorization, CounterStorage};
    use std::collections::HashMap;
    use std::fs;
    use std::time::Duration;
    use tempfile::TempDir;

    fn counter(max_value: u64) -> Counter {
        let limit = Limit::new(
            "reserve_test",
            max_value,
            60,
            vec![],
            Vec::<crate::limit::Expression>::default(),
        );
        Counter::new(limit, &Context::default())
            .unwrap()
            .expect("must have a counter")
    }

    #[test]
    fn opens_db_on_disk() {
        let namespace = "test_namespace";
        let limit = Limit::new(
            namespace,
            1,
            2,
            vec!["req_method == 'GET'".try_into().expect("failed parsing!")],
            vec!["app_id".try_into().expect("failed parsing!")],
        );
        let map = HashMap::from([("app_id".to_string(), "foo".to_string())]);
        let ctx = map.into();
        let counter = Counter::new(limit, &ctx)
            .unwrap()
            .expect("must have a counter");

        let tmp = TempDir::new().expect("We should have a dir!");
        {
            let storage = RocksDbStorage::open(tmp.path(), OptimizeFor::Space)
                .expect("We should have a storage");
            let mut files = fs::read_dir(tmp.as_ref()).expect("Couldn't access data dir");
            assert!(files.next().is_some());

            assert!(
                storage.is_within_limits(&counter, 1).unwrap(),
                "Should be a fresh value"
            );
            assert!(
                storage.is_within_limits(&counter, 1).unwrap(),
                "Should be from the store, yet still below threshold"
            );
            std::thread::sleep(Duration::from_secs(2));
            assert!(
                storage.update_counter(&counter, 1).is_ok(),
                "Should have written the counter to disk"
            );
            assert!(
                !storage.is_within_limits(&counter, 1).unwrap(),
                "Should now be above threshold!"
            );
        }

        {
            let storage = RocksDbStorage::open(tmp.path(), OptimizeFor::Space)
                .expect("We should still have a storage");
            assert!(
                !storage.is_within_limits(&counter, 1).unwrap(),
                "Should be above threshold still!"
            );
        }
    }

    #[test]
    fn reserve_with_hold_amount_zero_creates_no_entry() {
        let tmp = TempDir::new().expect("We should have a dir!");
        let storage =
            RocksDbStorage::open(tmp.path(), OptimizeFor::Space).expect("We should have storage");
        let mut counters = vec![counter(10)];
        let reservation_id = ReservationId::new();

        let auth = storage
            .reserve(
                &mut counters,
                &reservation_id,
                10,
                0,
                Duration::from_secs(60),
            )
            .unwrap();
        assert!(matches!(auth, Authorization::Ok));

        let released = storage
            .release_reservation(&counters, &reservation_id)
            .unwrap();
        assert!(!released, "nothing should have been held to release");
    }
}
