//! Reading the model's JSON form strictly: every error names its field
//! path (`messages[2].role: ...`), duplicate keys are refused at every
//! depth, and JSON Schema fields must be objects. Used by the model's serde
//! derives and by the client surfaces' parsers.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::model::request::{FunctionDef, JsonSchema};

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

/// A JSON Schema field (`parameters`, `schema`): an object, without
/// duplicate keys.
fn strict_object<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    match Option::<Strict>::deserialize(d)? {
        None => Ok(None),
        Some(Strict(v @ Value::Object(_))) => Ok(Some(v)),
        Some(_) => Err(de::Error::custom("must be a JSON Schema object")),
    }
}

pub(crate) fn strict_parameters<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Value>, D::Error> {
    at("parameters", strict_object(d))
}

pub(crate) fn strict_schema<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    at("schema", strict_object(d))
}

/// `tools[i].function`, with its path in errors.
pub(crate) fn function_def<'de, D: Deserializer<'de>>(d: D) -> Result<FunctionDef, D::Error> {
    at("function", FunctionDef::deserialize(d))
}

/// `response_format.json_schema`, with its path in errors.
pub(crate) fn json_schema<'de, D: Deserializer<'de>>(d: D) -> Result<JsonSchema, D::Error> {
    at("json_schema", JsonSchema::deserialize(d))
}

/// An array whose element errors name the index (`[2].function...`).
pub(crate) struct Listed<T>(pub Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Listed<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Listed<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Listed<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = at(Index(out.len()), seq.next_element())? {
                    out.push(item);
                }
                Ok(Listed(out))
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

/// Stores a field's value, refusing a second one (parsers disagree on which wins).
pub(crate) fn once<T, E: de::Error>(
    slot: &mut Option<T>,
    name: &str,
    value: Result<T, E>,
) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::custom(format!("{name}: duplicate field")));
    }
    *slot = Some(at(name, value)?);
    Ok(())
}

pub(crate) fn missing<E: de::Error>(name: &str) -> E {
    E::custom(format!("{name}: missing field"))
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
