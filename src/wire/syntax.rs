//! JSON checked as `model::json::Strict` reads it, building nothing: its
//! syntax, and duplicate keys refused at every depth. Its errors, message
//! and path (`input[2].role: duplicate field at line 1 column 40`), are
//! Strict's, which built the whole tree to find them: the same serde_json
//! reader, the same visits, the same path wrapping. A whole body
//! ([`check`], the Responses surface's first pass) or a value a typed read
//! skips ([`Checked`]). [`Keys`] finds a key given twice, here and in the
//! typed objects of `wire::loose`.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::model::json::{at, Index};

/// Up to this many keys an object's are compared one by one; past it, a
/// set (a hostile object of many keys must not cost their square).
const FEW_KEYS: usize = 16;

/// An object's keys so far, to refuse one given twice. They are kept at
/// the end of a list that the objects inside it may share (each keeps its
/// own after them while it is read, and gives them back when done): a walk
/// of nested objects allocates one list, not one per object.
pub struct Keys<'l, 'de> {
    list: &'l mut Vec<Cow<'de, str>>,
    /// Where this object's keys start in `list`.
    start: usize,
    /// This object's keys once it has more than a few.
    many: Option<BTreeSet<Cow<'de, str>>>,
}

impl<'l, 'de> Keys<'l, 'de> {
    #[inline]
    pub fn new(list: &'l mut Vec<Cow<'de, str>>) -> Self {
        let start = list.len();
        Keys {
            list,
            start,
            many: None,
        }
    }

    /// Refuses `key`, in `Strict`'s words, when the object has it.
    #[inline]
    pub fn check<E: de::Error>(&self, key: &str) -> Result<(), E> {
        let seen = match &self.many {
            Some(set) => set.contains(key),
            None => self
                .list
                .get(self.start..)
                .unwrap_or_default()
                .iter()
                .any(|k| k == key),
        };
        if seen {
            Err(duplicate(key))
        } else {
            Ok(())
        }
    }

    /// Adds a key [`Keys::check`] let through.
    #[inline]
    pub fn add(&mut self, key: Cow<'de, str>) {
        match self.many {
            None if self.list.len() - self.start < FEW_KEYS => self.list.push(key),
            _ => self.add_to_set(key),
        }
    }

    /// The rare case, kept out of the common one's way: a wide object.
    #[cold]
    #[inline(never)]
    fn add_to_set(&mut self, key: Cow<'de, str>) {
        let set = self
            .many
            .get_or_insert_with(|| self.list.drain(self.start..).collect());
        set.insert(key);
    }

    /// The list, for the objects inside this one.
    #[inline]
    fn list(&mut self) -> &mut Vec<Cow<'de, str>> {
        self.list
    }
}

impl Drop for Keys<'_, '_> {
    #[inline]
    fn drop(&mut self) {
        self.list.truncate(self.start);
    }
}

/// A read's result, an error named by its place `path` as `Strict` names
/// it ([`at`]): the success costs a branch, the rest is out of line.
#[inline(always)]
pub fn inside<T, E: de::Error>(path: impl fmt::Display, r: Result<T, E>) -> Result<T, E> {
    match r {
        Ok(v) => Ok(v),
        Err(e) => named(path, e),
    }
}

#[cold]
#[inline(never)]
fn named<T, E: de::Error>(path: impl fmt::Display, e: E) -> Result<T, E> {
    at(path, Err(e))
}

/// `Strict`'s words for a key given twice.
#[cold]
pub fn duplicate<E: de::Error>(key: &str) -> E {
    E::custom(format!("{key}: duplicate field"))
}

/// An object's key, borrowed unless it holds escapes.
pub struct Key<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Checks `body` (syntax, duplicate keys, serde_json's depth limit) and
/// returns it as text, which the typed parse reads without checking each
/// string's UTF-8 again.
pub fn check(body: &[u8]) -> Result<&str, serde_json::Error> {
    match std::str::from_utf8(body) {
        Ok(text) => {
            check_with(serde_json::Deserializer::from_str(text))?;
            Ok(text)
        }
        // serde_json names the bytes that are not UTF-8 (in a string or out
        // of place): a body it takes is UTF-8.
        Err(e) => {
            check_with(serde_json::Deserializer::from_slice(body))?;
            Err(de::Error::custom(e))
        }
    }
}

fn check_with<'de, R: serde_json::de::Read<'de>>(
    mut reader: serde_json::Deserializer<R>,
) -> Result<(), serde_json::Error> {
    let mut keys = Vec::new();
    AnyValue { keys: &mut keys }.deserialize(&mut reader)?;
    reader.end()
}

/// A value to check; `keys` holds the keys of the objects it is inside
/// (each object's own at the end while it is read).
struct AnyValue<'k, 'de> {
    keys: &'k mut Vec<Cow<'de, str>>,
}

impl<'de> DeserializeSeed<'de> for AnyValue<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for AnyValue<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while inside(
            Index(index),
            seq.next_element_seed(AnyValue {
                keys: &mut *self.keys,
            }),
        )?
        .is_some()
        {
            index += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = Keys::new(self.keys);
        while let Some(Key(key)) = map.next_key()? {
            keys.check(&key)?;
            inside(&key, map.next_value_seed(AnyValue { keys: keys.list() }))?;
            keys.add(key);
        }
        Ok(())
    }
}

/// A value a typed read skips (an unknown member, one nothing reads),
/// checked as [`check`] checks a body.
#[derive(Debug)]
pub struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        AnyValue {
            keys: &mut Vec::new(),
        }
        .deserialize(d)
        .map(|()| Checked)
    }
}

impl Checked {
    /// An object a typed read met where it takes no object, checked.
    pub fn map<'de, A: MapAccess<'de>>(map: A) -> Result<Checked, A::Error> {
        AnyValue {
            keys: &mut Vec::new(),
        }
        .visit_map(map)
        .map(|()| Checked)
    }
}
