//! Log of received requests, read back by tests via `GET /_mock/requests`.
//! A ring buffer: only the last `CAPACITY` requests are kept, so a soak test
//! cannot grow memory.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::http::Request;

pub const CAPACITY: usize = 2000;

struct Entry {
    test_id: Option<String>,
    json: Value,
}

#[derive(Default)]
pub struct Recorder {
    entries: Mutex<VecDeque<Entry>>,
}

impl Recorder {
    fn entries(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        // A panic elsewhere cannot leave a VecDeque half-updated: keep going.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn record(&self, req: &Request) {
        let mut headers = Map::new();
        for (name, value) in req.headers() {
            let name = name.to_ascii_lowercase();
            // Repeated headers are joined as a proxy would fold them.
            let joined = match headers.get(&name).and_then(Value::as_str) {
                Some(prev) => format!("{prev}, {value}"),
                None => value.to_owned(),
            };
            headers.insert(name, Value::String(joined));
        }
        let body = serde_json::from_slice(&req.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&req.body).into_owned()));
        let json = serde_json::json!({
            "method": req.method(),
            "path": req.path(),
            "query": req.query(),
            "headers": headers,
            "body": body,
            // When it arrived (Unix time, seconds): tests bound the waits between attempts.
            "received_at": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        });
        let entry = Entry {
            test_id: req.header("x-test-id").map(str::to_owned),
            json,
        };
        let mut entries = self.entries();
        if entries.len() >= CAPACITY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// JSON array of recorded requests, oldest first, optionally only those
    /// whose `x-test-id` header equals `test_id`.
    pub fn list(&self, test_id: Option<&str>) -> String {
        let entries = self.entries();
        let selected: Vec<&Value> = entries
            .iter()
            .filter(|e| test_id.is_none() || e.test_id.as_deref() == test_id)
            .map(|e| &e.json)
            .collect();
        serde_json::to_string(&selected).unwrap_or_else(|_| "[]".to_owned())
    }

    /// Forgets everything; returns how many requests were dropped.
    pub fn clear(&self) -> usize {
        let mut entries = self.entries();
        let n = entries.len();
        entries.clear();
        n
    }
}
