//! Members read as the client sent them, whatever their JSON type, for a
//! surface whose parser checks the types itself, in its API's order and
//! words: these wire types refuse only what `model::json::Strict` refuses
//! (bad JSON, a key given twice), in its words, named by path
//! (`messages[0].role: duplicate field`). Objects are typed ([`Members`],
//! written with [`members!`]), strings borrowed unless they hold escapes.
//! What nothing reads is skipped: checked in the same pass ([`Checked`],
//! the Messages surface's one pass) or not at all ([`Skip`], for a surface
//! that checked the body before: the Responses surface's
//! `wire::syntax::check`).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

use crate::model::json::Index;
use crate::wire::syntax::{inside, Checked};

/// Any JSON value: an object as `O`, an array's elements as `E`.
#[derive(Debug)]
pub enum Loose<'a, O = Skip, E = Skip> {
    Null,
    Bool(bool),
    Number(Number),
    Str(Cow<'a, str>),
    Array(Vec<E>),
    Object(O),
}

impl<O, E> Loose<'_, O, E> {
    pub fn is_null(&self) -> bool {
        matches!(self, Loose::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Loose::Str(s) => Some(&**s),
            _ => None,
        }
    }
}

/// An object read member by member (see [`members!`]).
pub trait Members<'de>: Sized {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;

    /// The first member, in key order, not among `allowed` (none for an
    /// object kept whole or skipped).
    fn first_unknown(&self, _allowed: &[&str]) -> Option<&str> {
        None
    }
}

/// A value nothing reads: skipped, whatever it is.
#[derive(Debug, Default, Clone, Copy)]
pub struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Skip)
    }
}

impl<'de> Members<'de> for Skip {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Skip)
    }
}

/// An object nothing reads, checked.
impl<'de> Members<'de> for Checked {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        Checked::map(map)
    }
}

impl<'de, O: Members<'de>, E: Deserialize<'de>> Deserialize<'de> for Loose<'de, O, E> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LooseVisitor(PhantomData))
    }
}

struct LooseVisitor<O, E>(PhantomData<(O, E)>);

impl<'de, O: Members<'de>, E: Deserialize<'de>> Visitor<'de> for LooseVisitor<O, E> {
    type Value = Loose<'de, O, E>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<Er>(self) -> Result<Self::Value, Er> {
        Ok(Loose::Null)
    }

    fn visit_none<Er>(self) -> Result<Self::Value, Er> {
        Ok(Loose::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Loose::deserialize(d)
    }

    fn visit_bool<Er>(self, v: bool) -> Result<Self::Value, Er> {
        Ok(Loose::Bool(v))
    }

    fn visit_i64<Er>(self, v: i64) -> Result<Self::Value, Er> {
        Ok(Loose::Number(v.into()))
    }

    fn visit_u64<Er>(self, v: u64) -> Result<Self::Value, Er> {
        Ok(Loose::Number(v.into()))
    }

    /// As `serde_json::Value` reads it (JSON has no infinities).
    fn visit_f64<Er>(self, v: f64) -> Result<Self::Value, Er> {
        Ok(Number::from_f64(v).map_or(Loose::Null, Loose::Number))
    }

    fn visit_borrowed_str<Er>(self, v: &'de str) -> Result<Self::Value, Er> {
        Ok(Loose::Str(Cow::Borrowed(v)))
    }

    fn visit_str<Er>(self, v: &str) -> Result<Self::Value, Er> {
        Ok(Loose::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_string<Er>(self, v: String) -> Result<Self::Value, Er> {
        Ok(Loose::Str(Cow::Owned(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = inside(Index(items.len()), seq.next_element())? {
            items.push(item);
        }
        Ok(Loose::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        O::from_map(map).map(Loose::Object)
    }
}

/// Keeps the first key in key order (a `BTreeMap`'s, which the walkers
/// over `serde_json::Value` saw first).
pub fn first_key<'a>(first: &mut Option<Cow<'a, str>>, key: Cow<'a, str>) {
    if first.as_ref().is_none_or(|f| key < *f) {
        *first = Some(key);
    }
}

/// The first of `candidate` and `first` in key order.
pub fn earlier<'k>(first: Option<&'k str>, candidate: &'k str) -> Option<&'k str> {
    match first {
        Some(f) if f <= candidate => Some(f),
        _ => Some(candidate),
    }
}

/// An object type whose members are each an `Option` (absent: `None`; a
/// JSON `null` is `Some` of the member's null), plus the first member of
/// no name it knows (`unknown`), so a parser can refuse unknown members by
/// name in key order, as the object's kind allows. A member given twice
/// is refused; an unknown member's value is checked ([`Checked`]):
///
/// ```ignore
/// members! { pub struct Part<'a> { kind "type": Loose<'a>, text "text": Loose<'a>, } }
/// ```
macro_rules! members {
    ($(#[$meta:meta])* $vis:vis struct $name:ident<'a> {
        $($(#[$fmeta:meta])* $field:ident $key:literal: $ty:ty,)*
    }) => {
        $(#[$meta])*
        #[derive(Default, Debug)]
        $vis struct $name<'a> {
            $($(#[$fmeta])* pub $field: Option<$ty>,)*
            /// The first member of another name, in key order.
            pub unknown: Option<std::borrow::Cow<'a, str>>,
        }

        impl $name<'_> {
            /// The first member, in key order, not among `allowed` (what
            /// this object's kind takes).
            pub fn first_unknown(&self, allowed: &[&str]) -> Option<&str> {
                let mut first = self.unknown.as_deref();
                $(if self.$field.is_some() && !allowed.contains(&$key) {
                    first = $crate::wire::loose::earlier(first, $key);
                })*
                first
            }
        }

        impl<'de> $crate::wire::loose::Members<'de> for $name<'de> {
            fn from_map<A: serde::de::MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
                use $crate::wire::syntax::{duplicate, inside, Checked, Key, Keys};
                let mut this = Self::default();
                // The unknown members' keys (a known one is its field).
                let mut list = Vec::new();
                let mut others = Keys::new(&mut list);
                while let Some(Key(key)) = map.next_key()? {
                    match &*key {
                        $($key => {
                            if this.$field.is_some() {
                                return Err(duplicate(&key));
                            }
                            this.$field = Some(inside(&key, map.next_value())?);
                        })*
                        _ => {
                            others.check(&key)?;
                            inside(&key, map.next_value::<Checked>())?;
                            others.add(key.clone());
                            $crate::wire::loose::first_key(&mut this.unknown, key);
                        }
                    }
                }
                Ok(this)
            }

            /// The inherent one (which needs no trait in scope).
            fn first_unknown(&self, allowed: &[&str]) -> Option<&str> {
                $name::first_unknown(self, allowed)
            }
        }
    };
}

pub(crate) use members;
