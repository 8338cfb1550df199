//! Reading JSON strictly, for the client surfaces' parsers and their wire
//! types: every error names its field path (`messages[2].role: ...`),
//! duplicate keys are refused at every depth ([`Strict`]), and a refused
//! body is the client's 400 ([`body_error`]).

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

/// Wraps a field's deserialisation error with the field's path (formatted
/// only when there is an error).
pub(crate) fn at<T, E: de::Error>(path: impl fmt::Display, r: Result<T, E>) -> Result<T, E> {
    r.map_err(|e| {
        let msg = e.to_string();
        // Nested paths arrive as "[3].role: ..." or "role: ...": join them.
        if msg.starts_with('[') {
            E::custom(format!("{path}{msg}"))
        } else if msg.split_once(": ").is_some_and(|(p, _)| !p.contains(' ')) {
            E::custom(format!("{path}.{msg}"))
        } else {
            E::custom(format!("{path}: {msg}"))
        }
    })
}

/// A body serde_json refuses (bad JSON, a duplicate key, a field's
/// error), as the client's 400: the message, and as `param` the path it
/// names (`messages[2].role: ...`), else `body`.
pub(crate) fn body_error(e: serde_json::Error) -> crate::error::GatewayError {
    let msg = e.to_string();
    let param = msg
        .split_once(": ")
        .map(|(p, _)| p)
        .filter(|p| !p.contains(' '))
        .unwrap_or("body");
    crate::error::GatewayError::invalid(param, format!("invalid request body: {msg}"))
}

/// An array index in an error's path, `[i]`.
pub(crate) struct Index(pub usize);

impl fmt::Display for Index {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "[{}]", self.0)
    }
}

/// Any JSON value, refusing duplicate object keys at every depth (serde_json's
/// `Value` silently keeps the last; vendors' parsers may keep the first).
pub(crate) struct Strict(pub Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Strict::deserialize(d).map(|s| s.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = at(Index(items.len()), seq.next_element())? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!("{key}: duplicate field")));
            }
            let Strict(value) = at(&key, map.next_value())?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// `stop`: a string or an array of strings (at most 4, as OpenAI allows).
pub(crate) struct Stop(pub Vec<String>);

impl<'de> Deserialize<'de> for Stop {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(String),
            Many(Vec<String>),
        }
        let list = match Raw::deserialize(d)
            .map_err(|_| de::Error::custom("expected a string or an array of strings"))?
        {
            Raw::One(s) => vec![s],
            Raw::Many(v) => v,
        };
        if list.len() > 4 {
            return Err(de::Error::custom("at most 4 stop sequences are allowed"));
        }
        Ok(Stop(list))
    }
}
