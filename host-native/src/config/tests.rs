//! The configuration file's own tests: what parses, what is refused with
//! which error, and which key goes to which endpoint.

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("test.toml"))
}

#[test]
fn example_file_parses() {
    let text = include_str!("../../agentrt.example.toml");
    let config = parse(text).expect("the example config is valid");
    assert_eq!(config.approval, Some(ApprovalMode::Permissive));
    assert!(config.provider.is_some());
    assert_eq!(config.plugins.len(), 1);
    assert!(config.budget.is_some());
}

#[test]
fn empty_file_is_all_defaults() {
    let config = parse("").expect("empty");
    assert!(config.approval.is_none() && config.budget.is_none());
}

/// S14: `[store] url` names a shared PostgreSQL database; unknown keys
/// in the section are refused like everywhere else.
#[test]
fn s14_store_section_names_the_database() {
    let config = parse("[store]\nurl = \"postgres://agentrt@db:5432/agentrt\"\n").expect("store");
    assert_eq!(
        config.store.as_deref(),
        Some("postgres://agentrt@db:5432/agentrt")
    );
    assert_eq!(parse("").expect("empty").store, None);
    assert!(parse("[store]\nuri = \"postgres://x@y/z\"\n").is_err());
}

/// S4.4: custom budgets are validated at, below and above the limits.
#[test]
fn s4_4_custom_budget_is_validated() {
    let ok = parse("[budget]\nmax_tool_rounds = 1000\nmax_tool_calls = 5\n").expect("at limit");
    assert_eq!(ok.budget.map(|b| b.max_tool_rounds), Some(1000));
    for bad in [
        "[budget]\nmax_tool_rounds = 1001\n",
        "[budget]\nmax_tool_rounds = 0\n",
        "[budget]\nmax_tool_calls = -1\n",
        "[budget]\nmax_tool_rounds = \"ten\"\n",
        "[budget]\npreset = \"huge\"\n",
        "[budget]\npreset = \"light\"\nmax_tokens = 0\n",
        "[budget]\n",
        "[budget]\nrounds = 3\n",
    ] {
        let err = parse(bad).expect_err(bad);
        assert!(err.to_string().contains("test.toml"), "{err}");
    }
    let light = parse("[budget]\npreset = \"light\"\n").expect("preset");
    assert_eq!(light.budget, Some(Budget::preset(BudgetPreset::Light)));
    // A preset with a cap keeps the preset's other limits.
    let capped = parse("[budget]\npreset = \"light\"\nmax_tokens = 50000\n").expect("capped");
    assert_eq!(
        capped.budget,
        Some(Budget {
            max_tokens: Some(50_000),
            ..Budget::preset(BudgetPreset::Light)
        })
    );
}

#[test]
fn bad_values_are_named() {
    for (bad, needle) in [
        ("approval = \"yolo\"", "approval"),
        ("lease_ttl_ms = 10", "lease_ttl_ms"),
        ("unknown = 1", "unknown"),
        (
            "[provider]\nkind = \"other\"\nbase_url = \"http://x\"\nmodel = \"m\"",
            "openai-compatible",
        ),
        (
            "[provider]\nkind = \"openai-compatible\"\nbase_url = \"ftp://x\"\nmodel = \"m\"",
            "base_url",
        ),
        (
            "[provider]\nkind = \"openai-compatible\"\nbase_url = \"https://u:p@x\"\nmodel = \"m\"",
            "credentials",
        ),
        (
            "[secrets.k]\nenv = \"\"\norigin = \"http://x\"",
            "secrets.k.env",
        ),
        ("this is not toml", "not valid"),
        ("always_on_plugins = [\"ghost\"]", "ghost"),
    ] {
        let err = parse(bad).expect_err(bad).to_string();
        assert!(err.contains(needle), "{bad}: {err}");
    }
}

/// Issue 32: a key goes only to the endpoint its section names, however
/// that URL is spelled; another scheme, host, port, path or kind gets
/// none; the public endpoint gets the usual variable; `[provider]` is
/// matched before `[providers.NAME]`.
#[test]
fn a_key_goes_only_to_the_endpoint_its_section_names() {
    let text = "[provider]\nkind = \"openai-compatible\"\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"m\"\napi_key_env = \"DEFAULT_KEY\"\n\n[providers.same]\nkind = \"openai-compatible\"\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"m\"\napi_key_env = \"SAME_KEY\"\n\n[providers.other]\nkind = \"openai-compatible\"\nbase_url = \"https://models.example/api\"\nmodel = \"m\"\n";
    let config = parse(text).expect("config");
    let oa = ProviderKind::OpenaiCompatible;
    let named = |v: &str| EndpointKey::Variable {
        variable: v.to_owned(),
        required: true,
    };
    let usual = |kind: ProviderKind| EndpointKey::Variable {
        variable: kind.key_variable().to_owned(),
        required: false,
    };
    for same in [
        "http://127.0.0.1:8080/v1",
        "http://127.0.0.1:8080/v1/",
        "HTTP://127.0.0.1:8080/v1",
    ] {
        assert_eq!(
            config.key_for_endpoint(oa, Some(same)),
            named("DEFAULT_KEY"),
            "{same}"
        );
    }
    for other in [
        "https://127.0.0.1:8080/v1",
        "http://localhost:8080/v1",
        "http://127.0.0.1:8081/v1",
        "http://127.0.0.1:8080/v2",
        "http://127.0.0.1:8080/v1/chat",
        "http://127.0.0.1:8080/v1?to=elsewhere",
        "http://127.0.0.1:8080",
        "not a url",
    ] {
        assert_eq!(
            config.key_for_endpoint(oa, Some(other)),
            EndpointKey::None,
            "{other}"
        );
    }
    // Another kind at the configured URL: no key.
    assert_eq!(
        config.key_for_endpoint(ProviderKind::Anthropic, Some("http://127.0.0.1:8080/v1")),
        EndpointKey::None
    );
    // A section without api_key_env: the usual variable, at its endpoint only.
    for spelled in [
        "https://models.example/api",
        "https://models.example:443/api/",
    ] {
        assert_eq!(
            config.key_for_endpoint(oa, Some(spelled)),
            usual(oa),
            "{spelled}"
        );
    }
    assert_eq!(
        config.key_for_endpoint(oa, Some("http://models.example/api")),
        EndpointKey::None
    );
    // The public endpoint: the usual variable, written out or not.
    for kind in [oa, ProviderKind::Gemini, ProviderKind::Anthropic] {
        assert_eq!(config.key_for_endpoint(kind, None), usual(kind));
        assert_eq!(
            config.key_for_endpoint(kind, Some(kind.default_base_url())),
            usual(kind)
        );
    }
    // With no configuration at all, only the public endpoints get a key.
    let empty = parse("").expect("empty");
    assert_eq!(empty.key_for_endpoint(oa, None), usual(oa));
    assert_eq!(
        empty.key_for_endpoint(oa, Some("http://127.0.0.1:8080/v1")),
        EndpointKey::None
    );
}

/// S14.2: named providers beside `[provider]`, each checked like it;
/// a name is 1 to 64 characters of `A-Z a-z 0-9 - _ .` (at, below and
/// above the limit); a name the file lacks is a typed error.
#[test]
fn s14_2_named_providers_are_checked_and_found_by_name() {
    let text = "[provider]\nkind = \"openai-compatible\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"local\"\n\n[providers.claude]\nkind = \"anthropic\"\nmodel = \"claude-x\"\napi_key_env = \"WORKER_ANTHROPIC_KEY\"\n";
    let config = parse(text).expect("named providers");
    assert_eq!(
        config.provider_named(None).map(|p| p.model.as_str()),
        Ok("local")
    );
    let claude = config.provider_named(Some("claude")).expect("claude");
    assert_eq!(claude.api_key_env.as_deref(), Some("WORKER_ANTHROPIC_KEY"));
    let err = config.provider_named(Some("gpt")).expect_err("unknown");
    assert_eq!(
        err,
        ProviderNameError::Unknown {
            name: "gpt".into(),
            known: "claude".into()
        }
    );
    assert!(err.to_string().contains("[providers.gpt]"), "{err}");
    assert_eq!(
        parse("").expect("empty").provider_named(None),
        Err(ProviderNameError::NoDefault)
    );
    let section =
        |name: &str| format!("[providers.\"{name}\"]\nkind = \"gemini\"\nmodel = \"g\"\n");
    for ok in ["a", &"n".repeat(64), "a.b-c_D9"] {
        parse(&section(ok)).expect(ok);
    }
    for bad in ["", &"n".repeat(65), "a b", "a/b", "é"] {
        let err = parse(&section(bad)).expect_err(bad).to_string();
        assert!(err.contains("provider name"), "{bad}: {err}");
    }
    for (bad, needle) in [
        (
            "[providers.x]\nkind = \"gemini\"\nmodel = \" \"\n",
            "providers.x.model",
        ),
        (
            "[providers.x]\nkind = \"gemini\"\nmodel = \"g\"\nbase_url = \"https://u:p@h\"\n",
            "providers.x.base_url",
        ),
        (
            "[providers.x]\nkind = \"gemini\"\nmodel = \"g\"\napi_key = \"sk\"\n",
            "api_key",
        ),
    ] {
        let err = parse(bad).expect_err(bad).to_string();
        assert!(err.contains(needle), "{bad}: {err}");
    }
}

#[tokio::test]
async fn env_secrets_resolve_and_bind_to_origin() {
    let config = parse(
        "[secrets.tok]\nenv = \"AGENTRT_TEST_SECRET_XYZ\"\norigin = \"http://127.0.0.1:9/base\"",
    )
    .expect("parse");
    let r = config.secret_resolver();
    let h = SecretHandle("tok".into());
    assert_eq!(r.bound_origin(&h).as_deref(), Some("http://127.0.0.1:9"));
    assert!(r.bound_origin(&SecretHandle("nope".into())).is_none());
    let err = r.resolve(&h).await.expect_err("unset");
    assert!(err.to_string().contains("AGENTRT_TEST_SECRET_XYZ"), "{err}");
}
