//! HTTP plugins (issue 4, item 6): a manifest the person configures (id, base
//! URL, functions with method, path, schema, effects, idempotency, an auth
//! header and a secret handle), one tool per function on the one tool-actor
//! shell (`agent_kernel::tool`) that turns checked calls into HTTP
//! requests with reqwest (the `SecretResolver` the host implements lives in
//! `agent_kernel::host::secrets` and is re-exported here).
//!
//! The secret is resolved only at dispatch, inside the plugin actor, and put
//! in a header marked sensitive; it is never part of a definition, draft,
//! result, log line or stored record, and a response that echoes it has it
//! redacted. A request whose origin is not the secret's bound origin is
//! `credential_exposure`. Plugin endpoints are user configuration, so the
//! public-address rule for model-supplied URLs does not apply to them; where
//! a model-chosen path placeholder may lead is `plugin_path`'s to decide,
//! and every request is built from the `InsideUrl` it admits.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use agent_capabilities::{
    EffectClass, EffectSet, Fingerprint, Idempotency, Origin, Sensitivity, Trust, is_read_only,
    sha256_hex,
};
use agent_kernel::host::{Clock, Executor, timeout};
// The secret types' one owner is the kernel; re-exported here for callers
// of the old paths.
pub use agent_kernel::host::secrets::{SecretError, SecretHandle, SecretResolver, SecretValue};
use agent_kernel::protocol::{
    EffectReceipt, Provenance, TargetRule, ToolDefinition, ToolFailure, ToolResult, ToolSuccess,
};
use agent_kernel::run::RunMode;

use crate::codes;
use crate::plugin_path::{FillError, InsideUrl, OutsideFunction, PathTemplate};
use crate::registry::{Exposure, ToolRegistration, model_facing_name};
use crate::validate::{CompiledSchema, url_origin};
use agent_kernel::tool::{Tool, ToolContext, ToolOptions, spawn_tool_with};

/// Largest plugin response body read, in bytes (2 MiB).
pub const MAX_PLUGIN_RESPONSE_BYTES: usize = 2 * 1024 * 1024;
/// Default per-call deadline.
pub const DEFAULT_PLUGIN_TIMEOUT_MS: u64 = 30_000;
/// The header carrying the idempotency key of idempotent writes.
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";
/// What replaces an echoed secret in a response.
pub const REDACTED: &str = "[redacted secret]";

/// HTTP methods a plugin function may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl HttpMethod {
    fn reqwest(self) -> reqwest::Method {
        match self {
            HttpMethod::Get => reqwest::Method::GET,
            HttpMethod::Post => reqwest::Method::POST,
            HttpMethod::Put => reqwest::Method::PUT,
            HttpMethod::Patch => reqwest::Method::PATCH,
            HttpMethod::Delete => reqwest::Method::DELETE,
        }
    }
    fn has_body(self) -> bool {
        matches!(self, HttpMethod::Post | HttpMethod::Put | HttpMethod::Patch)
    }
}

/// How a plugin authenticates: a header whose value is a resolved secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginAuth {
    /// The header name, for example `Authorization` or `X-Api-Key`.
    pub header: String,
    /// The handle of the secret to put in it (optionally after `prefix`).
    pub secret: SecretHandle,
    /// Text before the secret, for example `Bearer `.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
}

/// One function of a plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginFunction {
    pub name: String,
    pub description: String,
    pub method: HttpMethod,
    /// Path below the base URL; `{field}` is replaced by that argument,
    /// percent-encoded; a value that is or decodes to `.` or `..`, or holds a
    /// separator or control character, is `invalid_arguments` (see
    /// [`crate::plugin_path`]). Other arguments go to the query (GET, DELETE)
    /// or to the JSON body (POST, PUT, PATCH).
    pub path: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    pub effects: EffectSet,
    pub idempotency: Idempotency,
    #[serde(default = "public")]
    pub sensitivity: Sensitivity,
    /// Display hints; never lower what the policy asks (S6.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

fn public() -> Sensitivity {
    Sensitivity::Public
}

fn default_timeout() -> u64 {
    DEFAULT_PLUGIN_TIMEOUT_MS
}

/// A plugin as the person configured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginManifest {
    pub id: String,
    /// `http(s)://host[:port][/base/path]`, no credentials, query or fragment.
    pub base_url: String,
    /// The person marked this plugin trusted (its writes may then run
    /// automatically in permissive mode while the fingerprint matches).
    #[serde(default)]
    pub trusted: bool,
    /// The fingerprint the person approved (see [`PluginManifest::fingerprint`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_fingerprint: Option<Fingerprint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<PluginAuth>,
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    pub functions: Vec<PluginFunction>,
}

#[derive(Serialize)]
struct ManifestIdentity<'a> {
    id: &'a str,
    base_url: &'a str,
    auth: &'a Option<PluginAuth>,
    functions: &'a [PluginFunction],
}

impl PluginManifest {
    /// SHA-256 of the canonical JSON of what the plugin is: id, base URL,
    /// auth header and handle, and every function (not the trust settings).
    pub fn fingerprint(&self) -> Result<Fingerprint, PluginError> {
        Fingerprint::of(&ManifestIdentity {
            id: &self.id,
            base_url: &self.base_url,
            auth: &self.auth,
            functions: &self.functions,
        })
        .map_err(|e| PluginError::Invalid {
            id: self.id.clone(),
            why: e.to_string(),
        })
    }
}

/// A manifest was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    #[error("plugin {id:?}: {why}")]
    Invalid { id: String, why: String },
    #[error("plugin {id:?} function {function:?}: {why}")]
    Function {
        id: String,
        function: String,
        why: String,
    },
    #[error(
        "plugin {id:?} uses secret handle {handle:?}, which the host does not know; add the secret first"
    )]
    UnknownSecret { id: String, handle: String },
    /// The strict HTTP client could not be built; no other client is used.
    #[error("plugin {id:?}: {source}")]
    HttpClient {
        id: String,
        source: agent_http::ClientBuildError,
    },
}

struct Function {
    spec: PluginFunction,
    def: ToolDefinition,
    path: PathTemplate,
}

struct PluginState {
    id: String,
    base_origin: String,
    auth: Option<PluginAuth>,
    timeout: Duration,
    functions: BTreeMap<String, Function>,
    resolver: Arc<dyn SecretResolver>,
    clock: Arc<dyn Clock>,
    client: reqwest::Client,
}

fn valid_header_name(h: &str) -> bool {
    reqwest::header::HeaderName::from_bytes(h.as_bytes()).is_ok()
        && !matches!(
            h.to_ascii_lowercase().as_str(),
            "host" | "content-length" | "content-type" | "idempotency-key" | "transfer-encoding"
        )
}

/// Check a manifest and derive its tool definitions (without spawning).
/// Returns the definitions in function order and the base origin.
pub fn plugin_definitions(
    manifest: &PluginManifest,
    resolver: &dyn SecretResolver,
) -> Result<Vec<ToolDefinition>, PluginError> {
    Ok(check_manifest(manifest, resolver)?
        .1
        .into_values()
        .map(|f| f.def)
        .collect())
}

fn check_manifest(
    m: &PluginManifest,
    resolver: &dyn SecretResolver,
) -> Result<(String, BTreeMap<String, Function>), PluginError> {
    let invalid = |why: String| PluginError::Invalid {
        id: m.id.clone(),
        why,
    };
    let origin: Origin = format!("plugin:{}", m.id)
        .parse()
        .map_err(|_| invalid("the id must be 1 to 64 characters from A-Z a-z 0-9 - _ .".into()))?;
    let base = url::Url::parse(&m.base_url)
        .map_err(|e| invalid(format!("base_url {:?} is not a URL: {e}", m.base_url)))?;
    if !base.username().is_empty() || base.password().is_some() {
        return Err(invalid(
            "base_url must not contain credentials; use auth with a secret handle".into(),
        ));
    }
    if base.query().is_some() || base.fragment().is_some() {
        return Err(invalid("base_url must not have a query or fragment".into()));
    }
    let (base_origin, _) = url_origin(&base)
        .ok_or_else(|| invalid("base_url must be an http or https URL with a host".into()))?;
    if m.timeout_ms == 0 || m.timeout_ms > 300_000 {
        return Err(invalid("timeout_ms must be between 1 and 300000".into()));
    }
    let mut exposure = false;
    if let Some(auth) = &m.auth {
        if !valid_header_name(&auth.header) {
            return Err(invalid(format!(
                "auth header {:?} is not a usable header name",
                auth.header
            )));
        }
        let bound =
            resolver
                .bound_origin(&auth.secret)
                .ok_or_else(|| PluginError::UnknownSecret {
                    id: m.id.clone(),
                    handle: auth.secret.0.clone(),
                })?;
        // Sending the secret to the base origin when it is bound elsewhere
        // is credential exposure, declared on every function (S6.1).
        exposure = bound != base_origin;
    }
    if m.functions.is_empty() {
        return Err(invalid("a plugin needs at least one function".into()));
    }
    let mut out = BTreeMap::new();
    for f in &m.functions {
        let ferr = |why: String| PluginError::Function {
            id: m.id.clone(),
            function: f.name.clone(),
            why,
        };
        let name = model_facing_name(&f.name).map_err(|e| ferr(e.to_string()))?;
        let path = PathTemplate::new(&base, &f.path).map_err(ferr)?;
        for h in path.placeholders() {
            if f.parameters.pointer(&format!("/properties/{h}")).is_none() {
                return Err(ferr(format!(
                    "path placeholder {{{h}}} is not a property of the schema"
                )));
            }
            let required = f
                .parameters
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(h)));
            if !required {
                return Err(ferr(format!(
                    "path placeholder {{{h}}} must be a required property"
                )));
            }
        }
        if f.effects.is_empty() {
            return Err(ferr(
                "declare the function's effects (at least read_network)".into(),
            ));
        }
        if f.description.trim().is_empty() {
            return Err(ferr("a function needs a description".into()));
        }
        let mut effects = f.effects.clone();
        if exposure {
            effects.insert(EffectClass::CredentialExposure);
        }
        let def = ToolDefinition {
            name: name.clone(),
            description: f.description.clone(),
            parameters: f.parameters.clone(),
            origin: origin.clone(),
            provider: Some(m.id.clone()),
            effects,
            idempotency: f.idempotency,
            sensitivity: f.sensitivity,
            target: TargetRule::Endpoint {
                origin: base_origin.clone(),
            },
            annotations: f.annotations.clone(),
        };
        // Refused here, with the manifest's context, rather than at spawn.
        CompiledSchema::compile(&def.parameters)
            .map_err(|e| ferr(format!("invalid argument schema: {e}")))?;
        def.fingerprint().map_err(|e| ferr(e.to_string()))?;
        if out.contains_key(&name) {
            return Err(ferr(format!(
                "two functions of this plugin are both named {name:?} for the model"
            )));
        }
        out.insert(
            name,
            Function {
                spec: f.clone(),
                def,
                path,
            },
        );
    }
    Ok((base_origin, out))
}

/// Spawn the actor of one plugin and return its tools, ready for
/// `Registry::register_all` or `Registry::replace_provider` (discoverable,
/// agent mode; trusted when the manifest is marked trusted and its
/// fingerprint equals the expected one).
pub fn spawn_plugin(
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    manifest: &PluginManifest,
    resolver: Arc<dyn SecretResolver>,
) -> Result<Vec<ToolRegistration>, PluginError> {
    let (base_origin, functions) = check_manifest(manifest, &*resolver)?;
    let trusted = manifest.trusted
        && manifest.expected_fingerprint.as_ref() == Some(&manifest.fingerprint()?);
    let defs: Vec<ToolDefinition> = functions.values().map(|f| f.def.clone()).collect();
    // Natively every field is Send + Sync; on wasm32 nothing needs to be.
    #[allow(clippy::arc_with_non_send_sync)]
    let state = Arc::new(PluginState {
        id: manifest.id.clone(),
        base_origin,
        auth: manifest.auth.clone(),
        timeout: Duration::from_millis(manifest.timeout_ms),
        functions,
        resolver,
        clock,
        // Never follows redirects: a hop could carry the auth header elsewhere.
        client: agent_http::strict_client(&agent_http::ClientOptions {
            proxy_from_environment: true,
            ..agent_http::ClientOptions::default()
        })
        .map_err(|source| PluginError::HttpClient {
            id: manifest.id.clone(),
            source,
        })?,
    });
    // One shell actor per function (the one tool-actor shell checks the
    // draft and verifies the capability); the functions share the state.
    let mut registrations = Vec::with_capacity(defs.len());
    for definition in defs {
        let function = PluginFunctionTool {
            state: state.clone(),
            name: definition.name.clone(),
        };
        let options = ToolOptions {
            mailbox: 32,
            ..ToolOptions::default()
        };
        let (addr, definition) =
            spawn_tool_with(executor.clone(), state.clock.clone(), function, options).map_err(
                |e| PluginError::Function {
                    id: manifest.id.clone(),
                    function: definition.name.clone(),
                    why: e.to_string(),
                },
            )?;
        registrations.push(ToolRegistration {
            definition,
            modes: vec![RunMode::Agent],
            exposure: Exposure::Discoverable,
            trusted_external: trusted,
            unknown_function: false,
            needs_grant: None,
            addr,
        });
    }
    Ok(registrations)
}

/// One plugin function as a tool of the shell.
struct PluginFunctionTool {
    state: Arc<PluginState>,
    /// Its model-facing name (the key of `PluginState::functions`).
    name: String,
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Tool for PluginFunctionTool {
    type Args = Value;

    fn definition(&self) -> ToolDefinition {
        match self.state.functions.get(&self.name) {
            Some(f) => f.def.clone(),
            // Built from the same map just before: cannot happen.
            None => ToolDefinition::builder(self.name.clone()).build(),
        }
    }

    async fn call(&self, ctx: &ToolContext, _args: Value) -> Result<ToolSuccess, ToolFailure> {
        // Inside the shell's `tool_call` span: which plugin sent the request.
        let span = tracing::info_span!("plugin_call", plugin = %self.state.id);
        match tracing::Instrument::instrument(call(&self.state, ctx), span).await {
            ToolResult::Success(success) => Ok(success),
            ToolResult::Error(failure) => Err(failure),
        }
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn failure(
    state: &PluginState,
    tool: &str,
    code: &str,
    message: String,
    retryable: bool,
    maybe: bool,
) -> ToolResult {
    ToolResult::Error(ToolFailure {
        code: code.to_owned(),
        message,
        retryable,
        trust: Trust::ExternalUntrusted,
        provenance: Provenance {
            origin: format!("plugin:{}", state.id),
            tool: tool.to_owned(),
            ..Provenance::default()
        },
        effect_may_have_happened: maybe,
    })
}

/// One checked call (the shell verified its draft and capability).
async fn call(state: &PluginState, ctx: &ToolContext) -> ToolResult {
    let Some(f) = state.functions.get(ctx.tool()) else {
        return ToolResult::error(
            codes::UNKNOWN_TOOL,
            format!("plugin {} has no function {:?}", state.id, ctx.tool()),
            ctx.tool(),
        );
    };
    // The shell checked that the draft's effects and idempotency are these.
    let draft = &f.def;
    let read_only = is_read_only(&draft.effects);
    let tool = ctx.tool();

    // Build the URL: check 1 refuses placeholder values that could leave
    // their segment, check 2 (`admit`) refuses a finished URL outside the
    // function. Nothing is sent on either refusal.
    let args = ctx.arguments().as_object().cloned().unwrap_or_default();
    let mut url = match f.path.fill(&args) {
        Ok(u) => u,
        Err(e @ FillError::Placeholder { .. }) => {
            return failure(
                state,
                tool,
                codes::INVALID_ARGUMENTS,
                e.to_string(),
                false,
                false,
            );
        }
        Err(e @ FillError::Unparsable(_)) => {
            return failure(
                state,
                tool,
                codes::INVALID_TARGET,
                e.to_string(),
                false,
                false,
            );
        }
    };
    let rest: Map<String, Value> = args
        .into_iter()
        .filter(|(k, _)| !f.path.placeholders().contains(k))
        .collect();
    if !f.spec.method.has_body() && !rest.is_empty() {
        let mut q = url.query_pairs_mut();
        for (k, v) in &rest {
            q.append_pair(k, &scalar_text(v));
        }
    }
    let url: InsideUrl = match f.path.admit(url) {
        Ok(inside) => inside,
        Err(outside) => {
            let code = if outside == OutsideFunction::Origin && state.auth.is_some() {
                codes::CREDENTIAL_EXPOSURE
            } else {
                codes::INVALID_TARGET
            };
            return failure(
                state,
                tool,
                code,
                format!("{outside}: the request would leave the plugin function; nothing was sent"),
                false,
                false,
            );
        }
    };
    let mut req = state
        .client
        .request(f.spec.method.reqwest(), url.as_url().clone())
        .header(
            reqwest::header::ACCEPT,
            "application/json, text/plain;q=0.9, */*;q=0.1",
        );
    if f.spec.method.has_body() {
        req = req.json(&Value::Object(rest));
    }
    if !read_only && draft.idempotency == Idempotency::Idempotent {
        req = req.header(IDEMPOTENCY_KEY_HEADER, ctx.idempotency_key.as_str());
    }
    let mut secret: Option<SecretValue> = None;
    if let Some(auth) = &state.auth {
        // The secret's binding is checked now, not only at registration: a
        // binding that changed since must not leak the secret (S6.1).
        let bound = state.resolver.bound_origin(&auth.secret);
        if bound.as_deref() != Some(state.base_origin.as_str())
            && !draft.effects.contains(&EffectClass::CredentialExposure)
        {
            return failure(
                state,
                tool,
                codes::CREDENTIAL_EXPOSURE,
                format!(
                    "the plugin's credential is bound to {}, not {}; sending it there needs a one-time confirmation. Nothing was sent",
                    bound.unwrap_or_else(|| "no origin".into()),
                    state.base_origin
                ),
                false,
                false,
            );
        }
        let value = match state.resolver.resolve(&auth.secret).await {
            Ok(v) => v,
            Err(e) => {
                return failure(
                    state,
                    tool,
                    codes::SECRET_UNAVAILABLE,
                    e.to_string(),
                    true,
                    false,
                );
            }
        };
        let mut header = match reqwest::header::HeaderValue::from_str(&format!(
            "{}{}",
            auth.prefix,
            value.expose()
        )) {
            Ok(h) => h,
            Err(_) => {
                return failure(
                    state,
                    tool,
                    codes::SECRET_UNAVAILABLE,
                    "the resolved secret is not a valid header value".into(),
                    false,
                    false,
                );
            }
        };
        header.set_sensitive(true);
        req = req.header(auth.header.as_str(), header);
        secret = Some(value);
    }

    tracing::debug!(method = ?f.spec.method, origin = %state.base_origin, "sending plugin request");
    let exchange = async {
        let request = req.build().map_err(|e| agent_http::SendError::Build {
            detail: e.without_url().to_string(),
        })?;
        // A redirect is refused, natively and in the browser (S13.5).
        let resp = agent_http::send(&state.client, request).await?;
        let status = resp.status();
        let mut body = Vec::new();
        let mut too_big = false;
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if body.len() + chunk.len() > MAX_PLUGIN_RESPONSE_BYTES {
                too_big = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok::<_, agent_http::SendError>((status, body, too_big))
    };
    let outcome = timeout(&*state.clock, state.timeout, exchange).await;
    let (status, body, too_big) = match outcome {
        Err(_) => {
            return failure(
                state,
                tool,
                codes::PLUGIN_TIMEOUT,
                format!(
                    "the plugin did not answer within {} ms; {}",
                    state.timeout.as_millis(),
                    if read_only {
                        "nothing was changed"
                    } else {
                        "the write may or may not have happened"
                    }
                ),
                read_only || draft.idempotency == Idempotency::Idempotent,
                !read_only,
            );
        }
        Ok(Err(agent_http::SendError::Redirected { status })) => {
            return failure(
                state,
                tool,
                codes::PLUGIN_REDIRECT,
                format!(
                    "the plugin answered with {}; plugin calls never follow redirects (nothing was sent to its target)",
                    status.map_or_else(|| "a redirect".to_owned(), |s| format!("redirect {s}"))
                ),
                false,
                false,
            );
        }
        Ok(Err(e)) => {
            let before_send = e.never_sent();
            return failure(
                state,
                tool,
                codes::PLUGIN_UNREACHABLE,
                format!("the plugin could not be reached: {e}"),
                true,
                !read_only && !before_send,
            );
        }
        Ok(Ok(v)) => v,
    };
    if too_big {
        return failure(
            state,
            tool,
            codes::PLUGIN_RESPONSE_TOO_LARGE,
            format!(
                "the plugin's response exceeded {MAX_PLUGIN_RESPONSE_BYTES} bytes and was dropped"
            ),
            false,
            !read_only,
        );
    }
    let mut text = String::from_utf8_lossy(&body).into_owned();
    if let Some(secret) = &secret
        && !secret.expose().is_empty()
    {
        text = text.replace(secret.expose(), REDACTED);
    }
    drop(secret);
    let content_hash = sha256_hex(text.as_bytes());
    let code = status.as_u16();
    if status.is_redirection() {
        return failure(
            state,
            tool,
            codes::PLUGIN_REDIRECT,
            format!(
                "the plugin answered with redirect {code}; plugin calls never follow redirects"
            ),
            false,
            false,
        );
    }
    if !status.is_success() {
        let server = status.is_server_error();
        return failure(
            state,
            tool,
            codes::PLUGIN_HTTP_ERROR,
            format!(
                "the plugin answered HTTP {code}: {}",
                crate::envelope::truncate_bytes(&text, 1_000)
            ),
            code == 429 || (server && (read_only || draft.idempotency == Idempotency::Idempotent)),
            server && !read_only,
        );
    }
    let body_value = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
    let mut detail = BTreeMap::new();
    detail.insert("status".to_owned(), Value::from(code));
    let receipts = draft
        .effects
        .iter()
        .filter(|e| !e.is_read() && **e != EffectClass::CredentialExposure)
        .max()
        .map(|effect| EffectReceipt {
            effect: *effect,
            target: state.base_origin.clone(),
            detail: serde_json::json!({
                "status": code,
                "method": f.spec.method,
                "idempotency_key": ctx.idempotency_key,
            }),
        })
        .into_iter()
        .collect();
    let mut final_url = url.as_url().clone();
    final_url.set_query(None);
    ToolResult::Success(ToolSuccess {
        content: serde_json::json!({ "status": code, "body": body_value }),
        trust: Trust::ExternalUntrusted,
        provenance: Provenance {
            origin: format!("plugin:{}", state.id),
            tool: tool.to_owned(),
            requested_url: None,
            final_url: Some(final_url.to_string()),
            fetched_at_ms: Some(state.clock.wall_ms()),
            content_hash: Some(content_hash),
            detail,
        },
        references: Vec::new(),
        receipts,
    })
}
