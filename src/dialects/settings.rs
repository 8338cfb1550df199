//! Each dialect's own provider settings (Azure's `api_version`, Bedrock's
//! `claude_invoke`, ...). Users write them at the provider level beside
//! the common keys, as always; the configuration sets them apart
//! ([`is_setting`]) and has the provider's dialect read them into its own
//! typed section ([`read`]), which only that dialect looks into
//! (`Provider::settings`).

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{dialect, DialectKind};
use crate::provider::Settings;

/// A provider key a dialect reads: its name, and what a provider of a
/// dialect that has no such setting is told.
pub struct Key {
    pub name: &'static str,
    pub elsewhere: &'static str,
}

/// The provider keys a provider of dialect `kind` may have: its
/// dialect's, and its transport's (Vertex AI's `project`, `location`).
pub fn keys(kind: DialectKind) -> impl Iterator<Item = &'static Key> {
    dialect(kind)
        .settings_keys()
        .iter()
        .chain(super::transport::of(kind).settings_keys())
}

/// The dialect that owns provider key `name` first, with its words for the others.
fn owner(name: &str) -> Option<&'static Key> {
    DialectKind::ALL
        .iter()
        .flat_map(|kind| keys(*kind))
        .find(|key| key.name == name)
}

/// Whether provider key `name` is some dialect's setting.
pub fn is_setting(name: &str) -> bool {
    owner(name).is_some()
}

/// Provider `field`'s dialect keys read by its dialect `kind`: a key that
/// is another dialect's is refused in that dialect's words.
pub fn read(kind: DialectKind, settings: Settings, field: &str) -> Result<Settings, String> {
    let Settings::Unread(members) = settings else {
        return Ok(settings);
    };
    if let Some(name) = members
        .keys()
        .find(|name| !keys(kind).any(|key| key.name == name.as_str()))
    {
        let elsewhere = owner(name).map_or("not a setting", |key| key.elsewhere);
        return Err(format!("{field}.{name}: {elsewhere}"));
    }
    // A transport with settings reads them (no dialect with settings of
    // its own goes over one).
    let transport = super::transport::of(kind);
    let read = if transport.settings_keys().is_empty() {
        dialect(kind).read_settings(members, field)?
    } else {
        transport.read_settings(members, field)?
    };
    Ok(read.map_or(Settings::None, Settings::Read))
}

/// A dialect's keys as its settings type `T` (serde, field errors named).
pub fn typed<T: DeserializeOwned>(members: Map<String, Value>, field: &str) -> Result<T, String> {
    T::deserialize(Value::Object(members)).map_err(|e| format!("{field}: {e}"))
}
