//! One pass over a Messages body that checks its JSON syntax and refuses
//! duplicate keys at every depth, building nothing. Its errors are those
//! of [`crate::model::json::Strict`] word for word (the same serde_json
//! parser, the same paths: `messages[0].role: duplicate field at line 1
//! column 60`), so the typed read after it meets only valid JSON.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::model::json::{at, Index};
use crate::wire::anthropic::client::Key;

/// Objects with more keys than this look duplicates up in a set.
const LINEAR_KEYS: usize = 16;

/// Checks `body` as [`crate::model::json::Strict`] reads it.
pub(super) fn check(body: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<Checked>(body).map(|_| ())
}

/// A value that was well-formed, without duplicate keys.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckVisitor)
    }
}

struct CheckVisitor;

impl<'de> Visitor<'de> for CheckVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        let mut len = 0;
        while at(Index(len), seq.next_element::<Checked>())?.is_some() {
            len += 1;
        }
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        let mut seen = Vec::new();
        let mut many = HashSet::new();
        while let Some(Key(key)) = map.next_key()? {
            let again = if seen.len() < LINEAR_KEYS {
                seen.contains(&key)
            } else {
                if many.is_empty() {
                    many.extend(seen.iter().cloned());
                }
                !many.insert(key.clone())
            };
            if again {
                return Err(de::Error::custom(format!("{key}: duplicate field")));
            }
            at(&key, map.next_value::<Checked>())?;
            if seen.len() < LINEAR_KEYS {
                seen.push(key);
            }
        }
        Ok(Checked)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn duplicates_are_found_in_wide_objects_and_named_by_path() {
        let keys: String = (0..20).map(|i| format!(r#""k{i}":[{i}],"#)).collect();
        for (body, error) in [
            (
                format!(r#"{{"a":{{{keys}"k3":0}}}}"#),
                "a.k3: duplicate field",
            ),
            (format!(r#"{{"a":{{{keys}"k20":0}}}}"#), ""),
            (
                r#"{"a":[{},{"b":1,"b":2}]}"#.to_owned(),
                "a[1].b: duplicate field",
            ),
        ] {
            match super::check(body.as_bytes()) {
                Ok(()) => assert_eq!(error, "", "{body}"),
                Err(e) => assert!(
                    !error.is_empty() && e.to_string().starts_with(error),
                    "{body}: {e}"
                ),
            }
        }
    }
}
