//! The entries in Redis: one string value per entry, a short header (when
//! it was stored, when it expires, its parent) before the entry's bytes,
//! under `llm-state:{store}:{namespace}:{key}` with Redis's own expiry.
//!
//! Expiry is checked against this service's clock, which a test may move
//! forward (`--test-clock`): an entry past its time is not found even
//! while Redis still holds it (Redis drops it at its own, real, time).
//! What Redis keeps at most is Redis's `maxmemory`, its policy which keys
//! go (`allkeys-lru` or `volatile-lru`: every entry has a time to live).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use std::collections::HashMap;

use llm_gateway_core::cache::semantic_index::Quantized;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::Mutex;

use crate::vectors;

/// The record's version byte.
const VERSION: u8 = 1;
/// version, stored at (ms), expires at (ms), has a parent, the parent's key.
const HEAD: usize = 1 + 8 + 8 + 1 + 16;

/// What a record says besides its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub stored_ms: u64,
    pub expires_ms: u64,
    pub parent: Option<[u8; 16]>,
}

impl Head {
    pub fn encode(&self, entry: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD + entry.len());
        out.push(VERSION);
        out.extend_from_slice(&self.stored_ms.to_be_bytes());
        out.extend_from_slice(&self.expires_ms.to_be_bytes());
        out.push(u8::from(self.parent.is_some()));
        out.extend_from_slice(&self.parent.unwrap_or_default());
        out.extend_from_slice(entry);
        out
    }

    /// The head and the entry of a record (`None`: not one of ours).
    pub fn decode(record: &[u8]) -> Option<(Head, &[u8])> {
        let (head, entry) = record.split_at_checked(HEAD)?;
        let (&version, rest) = head.split_first()?;
        let (stored, rest) = rest.split_first_chunk::<8>()?;
        let (expires, rest) = rest.split_first_chunk::<8>()?;
        let (&has_parent, rest) = rest.split_first()?;
        let parent = <[u8; 16]>::try_from(rest).ok()?;
        (version == VERSION).then_some((
            Head {
                stored_ms: u64::from_be_bytes(*stored),
                expires_ms: u64::from_be_bytes(*expires),
                parent: (has_parent == 1).then_some(parent),
            },
            entry,
        ))
    }
}

/// Redis could not be reached, or did not answer in time.
#[derive(Debug)]
pub struct Unavailable(pub String);

/// An entry's place: its store and namespace (what its parents share) and key.
#[derive(Debug, Clone, Copy)]
pub struct Place<'p> {
    pub store: &'p str,
    pub namespace: [u8; 16],
}

impl Place<'_> {
    pub fn redis_key(&self, key: &[u8; 16]) -> String {
        format!(
            "llm-state:{}:{}:{}",
            self.store,
            hex(&self.namespace),
            hex(key)
        )
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The Redis connection (made again when lost) and the service's clock.
pub struct Store {
    client: redis::Client,
    connection: Mutex<Option<ConnectionManager>>,
    /// What a Redis call may take, connecting included.
    timeout: Duration,
    /// Seconds the clock is moved forward (`--test-clock` only).
    offset_seconds: AtomicI64,
}

impl Store {
    pub fn new(url: &str, timeout: Duration) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| format!("--redis {url}: {e}"))?;
        Ok(Self {
            client,
            connection: Mutex::new(None),
            timeout,
            offset_seconds: AtomicI64::new(0),
        })
    }

    /// The service's clock in Unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        let real = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let offset = self.offset_seconds.load(Ordering::Relaxed);
        real.saturating_add_signed(offset.saturating_mul(1000))
    }

    pub fn move_clock(&self, seconds: i64) {
        self.offset_seconds.store(seconds, Ordering::Relaxed);
    }

    /// The connection, made now when there is none (Redis down at start,
    /// or lost: the manager reconnects by itself once made).
    async fn connection(&self) -> Result<ConnectionManager, Unavailable> {
        let mut held = self.connection.lock().await;
        if let Some(connection) = held.as_ref() {
            return Ok(connection.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(self.timeout)
            .set_response_timeout(self.timeout)
            .set_number_of_retries(1)
            .set_factor(50);
        let made = ConnectionManager::new_with_config(self.client.clone(), config);
        let connection = tokio::time::timeout(self.timeout, made)
            .await
            .map_err(|_| Unavailable("connecting to Redis timed out".into()))?
            .map_err(|e| Unavailable(format!("connecting to Redis: {e}")))?;
        *held = Some(connection.clone());
        Ok(connection)
    }

    /// One Redis command, within the timeout.
    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, Unavailable> {
        let mut connection = self.connection().await?;
        let answer = tokio::time::timeout(self.timeout, cmd.query_async::<T>(&mut connection));
        answer
            .await
            .map_err(|_| Unavailable("Redis did not answer in time".into()))?
            .map_err(|e| Unavailable(format!("Redis: {e}")))
    }

    /// One pipeline of commands (a transaction), within the timeout.
    async fn query_pipe<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, Unavailable> {
        let mut connection = self.connection().await?;
        let answer = tokio::time::timeout(self.timeout, pipe.query_async::<T>(&mut connection));
        answer
            .await
            .map_err(|_| Unavailable("Redis did not answer in time".into()))?
            .map_err(|e| Unavailable(format!("Redis: {e}")))
    }

    pub async fn ping(&self) -> Result<(), Unavailable> {
        self.query::<String>(&redis::cmd("PING")).await.map(drop)
    }

    /// Stores `entry` for `ttl` seconds from now.
    pub async fn put(
        &self,
        place: Place<'_>,
        key: &[u8; 16],
        parent: Option<[u8; 16]>,
        ttl: u64,
        entry: &[u8],
    ) -> Result<(), Unavailable> {
        let now = self.now_ms();
        let ttl_ms = ttl.saturating_mul(1000);
        let head = Head {
            stored_ms: now,
            expires_ms: now.saturating_add(ttl_ms),
            parent,
        };
        let mut cmd = redis::cmd("SET");
        cmd.arg(place.redis_key(key))
            .arg(head.encode(entry))
            .arg("PX")
            .arg(ttl_ms);
        self.query::<()>(&cmd).await
    }

    /// The entry `key` and its head, unless it is not there or expired.
    pub async fn get(
        &self,
        place: Place<'_>,
        key: &[u8; 16],
    ) -> Result<Option<(Head, Vec<u8>)>, Unavailable> {
        let record: Option<Vec<u8>> = self
            .query(redis::cmd("GET").arg(place.redis_key(key)))
            .await?;
        let now = self.now_ms();
        Ok(record.and_then(|record| {
            let (head, entry) = Head::decode(&record)?;
            (head.expires_ms > now).then(|| (head, entry.to_vec()))
        }))
    }

    /// Deletes `key`: whether there was one (an expired entry was not).
    pub async fn delete(&self, place: Place<'_>, key: &[u8; 16]) -> Result<bool, Unavailable> {
        let redis_key = place.redis_key(key);
        let head: Vec<u8> = self
            .query(redis::cmd("GETRANGE").arg(&redis_key).arg(0).arg(HEAD - 1))
            .await?;
        let live = Head::decode(&head).is_some_and(|(h, _)| h.expires_ms > self.now_ms());
        let deleted: u64 = self.query(redis::cmd("DEL").arg(&redis_key)).await?;
        Ok(live && deleted > 0)
    }
}

/// A partition of vectors (`vectors.rs`): its store and partition.
pub fn vectors_key(store: &str, partition: &[u8; 16]) -> String {
    format!("llm-state-vec:{store}:{}", hex(partition))
}

impl Store {
    /// Keeps `vector` as `id` in `partition` of `store` for `ttl` seconds;
    /// past `max` vectors there, the expired and the soonest to expire go.
    pub async fn put_vector(
        &self,
        (store, partition): (&str, &[u8; 16]),
        id: &[u8; 32],
        vector: &Quantized,
        ttl: u64,
        max: usize,
    ) -> Result<(), Unavailable> {
        let key = vectors_key(store, partition);
        let now = self.now_ms();
        let ttl_ms = ttl.saturating_mul(1000);
        let record = vectors::encode(vector, now.saturating_add(ttl_ms));
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("HSET")
            .arg(&key)
            .arg(&id[..])
            .arg(record)
            .ignore()
            // The hash lives as long as its longest lived vector.
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(ttl_ms)
            .arg("NX")
            .ignore()
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(ttl_ms)
            .arg("GT")
            .ignore()
            .cmd("HLEN")
            .arg(&key);
        let (count,): (usize,) = self.query_pipe(&pipe).await?;
        if count <= max {
            return Ok(());
        }
        let records = self.vectors(&key).await?;
        let gone = vectors::evicted(&records, max, self.now_ms());
        if !gone.is_empty() {
            self.query::<()>(redis::cmd("HDEL").arg(&key).arg(gone))
                .await?;
        }
        Ok(())
    }

    /// Every record of a partition's hash: (id, record).
    pub async fn vectors(&self, key: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Unavailable> {
        let all: HashMap<Vec<u8>, Vec<u8>> = self.query(redis::cmd("HGETALL").arg(key)).await?;
        Ok(all.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_its_head_and_entry() {
        let head = Head {
            stored_ms: 1,
            expires_ms: 2,
            parent: Some([7; 16]),
        };
        let record = head.encode(b"entry");
        assert_eq!(Head::decode(&record), Some((head, &b"entry"[..])));
        let orphan = Head {
            parent: None,
            ..head
        };
        assert_eq!(Head::decode(&orphan.encode(b"")), Some((orphan, &b""[..])));
        assert_eq!(Head::decode(&record[..HEAD - 1]), None);
        let mut other = record.clone();
        other[0] = 2;
        assert_eq!(Head::decode(&other), None);
    }

    #[test]
    fn keys_are_namespaced_by_store_and_namespace() {
        let a = Place {
            store: "llm_responses",
            namespace: [1; 16],
        };
        let b = Place {
            namespace: [2; 16],
            ..a
        };
        assert_ne!(a.redis_key(&[0; 16]), b.redis_key(&[0; 16]));
        assert!(a
            .redis_key(&[0; 16])
            .starts_with("llm-state:llm_responses:0101"));
    }
}
