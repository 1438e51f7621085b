//! The shared vocabulary of authority: effect classes, idempotency,
//! sensitivity, origins and trust labels. Plain data, no logic beyond ordering.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a tool invocation may do to the world, from mildest to most severe.
///
/// The order is meaningful: `max()` over a set gives its most severe class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum EffectClass {
    /// Reads the session's own local state (workspace, run records).
    ReadLocal,
    /// Reads from the network (public web, plugin GET).
    ReadNetwork,
    /// A recoverable local write (workspace file with revision check, trash).
    WriteLocal,
    /// A write to a system outside this runtime (plugin POST, e-mail, ticket).
    WriteExternal,
    /// A local effect that cannot be undone (emptying the trash).
    DestructiveLocal,
    /// An external effect that cannot be undone.
    DestructiveExternal,
    /// Sends a credential to somewhere other than the origin it is bound to.
    CredentialExposure,
}

impl EffectClass {
    /// Every class, mildest first.
    pub const ALL: [EffectClass; 7] = [
        EffectClass::ReadLocal,
        EffectClass::ReadNetwork,
        EffectClass::WriteLocal,
        EffectClass::WriteExternal,
        EffectClass::DestructiveLocal,
        EffectClass::DestructiveExternal,
        EffectClass::CredentialExposure,
    ];

    /// True for the two read classes.
    pub fn is_read(self) -> bool {
        matches!(self, EffectClass::ReadLocal | EffectClass::ReadNetwork)
    }

    /// True for classes whose effect cannot be undone.
    pub fn is_destructive(self) -> bool {
        matches!(
            self,
            EffectClass::DestructiveLocal | EffectClass::DestructiveExternal
        )
    }

    /// The stable snake_case name used on the wire and in caveats.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectClass::ReadLocal => "read_local",
            EffectClass::ReadNetwork => "read_network",
            EffectClass::WriteLocal => "write_local",
            EffectClass::WriteExternal => "write_external",
            EffectClass::DestructiveLocal => "destructive_local",
            EffectClass::DestructiveExternal => "destructive_external",
            EffectClass::CredentialExposure => "credential_exposure",
        }
    }
}

impl fmt::Display for EffectClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of effect classes; ordered so that its serialisation is canonical.
pub type EffectSet = BTreeSet<EffectClass>;

/// True when every effect in the set is a read.
pub fn is_read_only(effects: &EffectSet) -> bool {
    effects.iter().all(|e| e.is_read())
}

/// Whether repeating a call with the same arguments has the same effect as doing it once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Idempotency {
    Idempotent,
    NonIdempotent,
}

/// How sensitive a tool's content is: private and secret content never
/// reaches logs; secret content enters the model context only redacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Sensitivity {
    Public,
    Private,
    Secret,
}

/// Where a tool comes from. Serialised as `builtin`, `user`, `page`,
/// `plugin:<id>`, `mcp:<server>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// Shipped with the runtime.
    Builtin,
    /// Defined by the person (for example a Skill).
    User,
    /// An HTTP plugin the person configured, by plugin id.
    Plugin(String),
    /// A function of an MCP server, by server id.
    Mcp(String),
    /// A JavaScript function the embedding page registered (S5.9).
    Page,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Builtin => f.write_str("builtin"),
            Origin::User => f.write_str("user"),
            Origin::Plugin(id) => write!(f, "plugin:{id}"),
            Origin::Mcp(server) => write!(f, "mcp:{server}"),
            Origin::Page => f.write_str("page"),
        }
    }
}

/// The string was not one of the five origin forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid origin {0:?}: expected builtin, user, page, plugin:<id> or mcp:<server>")]
pub struct OriginParseError(pub String);

impl FromStr for Origin {
    type Err = OriginParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let valid_id = |id: &str| {
            !id.is_empty()
                && id.len() <= 64
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        };
        match s {
            "builtin" => Ok(Origin::Builtin),
            "user" => Ok(Origin::User),
            "page" => Ok(Origin::Page),
            _ => match s.split_once(':') {
                Some(("plugin", id)) if valid_id(id) => Ok(Origin::Plugin(id.to_owned())),
                Some(("mcp", id)) if valid_id(id) => Ok(Origin::Mcp(id.to_owned())),
                _ => Err(OriginParseError(s.to_owned())),
            },
        }
    }
}

impl Serialize for Origin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The TypeScript of the serialized form above (`ToolOrigin` in the
/// browser API's generated `.d.ts`): the five forms `Display` writes.
#[cfg(feature = "ts")]
impl ts_rs::TS for Origin {
    type WithoutGenerics = Origin;
    type OptionInnerType = Origin;

    fn docs() -> Option<String> {
        Some("/**\n * Where a tool comes from.\n */\n".to_owned())
    }
    fn name(_: &ts_rs::Config) -> String {
        "ToolOrigin".to_owned()
    }
    fn inline(_: &ts_rs::Config) -> String {
        r#""builtin" | "user" | "page" | `plugin:${string}` | `mcp:${string}`"#.to_owned()
    }
    fn decl(cfg: &ts_rs::Config) -> String {
        format!("type ToolOrigin = {};", Self::inline(cfg))
    }
    fn decl_concrete(cfg: &ts_rs::Config) -> String {
        Self::decl(cfg)
    }
    fn output_path() -> Option<std::path::PathBuf> {
        Some("ToolOrigin.ts".into())
    }
}

impl<'de> Deserialize<'de> for Origin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How far content may be trusted. `ExternalUntrusted` content (web,
/// attachments, plugins, MCP) is data, never instructions, and grants nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    Internal,
    User,
    ExternalUntrusted,
}
