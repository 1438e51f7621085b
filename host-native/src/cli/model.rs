//! The model flags shared by `agentrt run` and `agentrt research`: where a
//! run's model comes from (a scenario, a provider named on the command
//! line or in the configuration) and the run configuration they give.

use std::path::PathBuf;

use agent_host_native::app::ProviderSpec;
use agent_host_native::config::{Config, parse_approval};
use agent_kernel::budget::Budget;
use agent_supervisor::{RunConfig, Scenario};

use super::args::{ApprovalArg, Source};
use super::exit::usage;

/// The model flags shared by `agentrt run` and `agentrt research`.
pub(crate) struct ModelFlags<'a> {
    pub(crate) scenario: &'a Option<PathBuf>,
    pub(crate) provider: &'a Option<super::args::ProviderArg>,
    /// `--provider-name`: a provider of the configuration by name (S14.2).
    pub(crate) provider_name: Option<&'a str>,
    /// The run is queued (`--detach`): with no --scenario nor --provider it
    /// names a provider of the workers' configuration, which this process
    /// need not have.
    pub(crate) queued: bool,
    pub(crate) base_url: &'a Option<String>,
    pub(crate) model: &'a Option<String>,
    pub(crate) temperature: Option<f32>,
    pub(crate) budget: &'a super::args::BudgetArgs,
    pub(crate) approval: Option<ApprovalArg>,
}

/// Where a run's model comes from and the run configuration the flags and
/// the config file give (budget, approval, model name, temperature).
pub(crate) fn model_setup(
    config: &Config,
    flags: ModelFlags<'_>,
) -> anyhow::Result<(Source, RunConfig)> {
    let ModelFlags {
        scenario,
        provider,
        provider_name,
        queued,
        base_url,
        model,
        temperature,
        budget,
        approval,
    } = flags;
    if let Some(name) = provider_name
        && !agent_supervisor::provider::set::valid_name(name)
    {
        return Err(usage(format!(
            "--provider-name {name:?}: a provider name is 1 to {} characters from A-Z a-z 0-9 - _ .",
            agent_supervisor::provider::set::MAX_PROVIDER_NAME_BYTES
        )));
    }
    let spec_source = match (scenario, provider) {
        // A provider of the configuration by name: the workers' when queued
        // (S14.2), this process's own otherwise, which must then have it.
        (None, None) if queued || provider_name.is_some() => {
            // Queued with no --model, the worker's configured model counts;
            // here, this configuration's.
            let configured_model = if queued {
                None
            } else {
                let p = config
                    .provider_named(provider_name)
                    .map_err(|e| usage(format!("--provider-name: {e}")))?;
                Some(p.model.clone())
            };
            Source::Provider(ProviderSpec::Configured {
                name: provider_name.map(str::to_owned),
                model: model.clone().or(configured_model),
            })
        }
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("cannot read the scenario {}: {e}", path.display())))?;
            Scenario::from_json(&text)
                .map_err(|e| usage(format!("the scenario {} is invalid: {e}", path.display())))?;
            Source::Scenario(text)
        }
        (None, Some(p)) => {
            // The config file's provider section of the same provider still
            // gives its capabilities; its key goes only to the endpoint it
            // names (`Config::key_for_endpoint`, issue 32), chosen when the
            // provider is built.
            let same = config.provider.as_ref().filter(|c| c.kind == p.kind());
            Source::Provider(ProviderSpec::Remote {
                provider: p.kind(),
                base_url: base_url.clone(),
                model: model.clone().unwrap_or_default(),
                capabilities: same.map(|c| c.capabilities).unwrap_or_default(),
            })
        }
        (None, None) => match &config.provider {
            Some(p) => Source::Provider(ProviderSpec::Remote {
                provider: p.kind,
                base_url: p.base_url.clone(),
                model: p.model.clone(),
                capabilities: p.capabilities,
            }),
            None => {
                return Err(usage(
                    "no model to talk to: give --scenario FILE, --provider openai-compatible|gemini|anthropic --model NAME [--base-url URL], or a [provider] section in --config",
                ));
            }
        },
    };
    if let Source::Provider(ProviderSpec::Remote {
        base_url: Some(base_url),
        ..
    }) = &spec_source
        && !(base_url.starts_with("http://") || base_url.starts_with("https://"))
    {
        return Err(usage(format!(
            "--base-url {base_url:?} must be an http:// or https:// URL"
        )));
    }
    let mut run_config = RunConfig::default();
    if let Some(b) = config.budget {
        run_config.budget = b;
    }
    if let Some(spec) = budget.spec(config.budget_spec.as_ref()) {
        run_config.budget =
            Budget::from_spec(&spec).map_err(|e| usage(format!("the budget is refused: {e}")))?;
    }
    if let Some(a) = config.approval {
        run_config.approval = a;
    }
    if let Some(a) = approval {
        let name = match a {
            ApprovalArg::Permissive => "permissive",
            ApprovalArg::Strict => "strict",
        };
        run_config.approval = parse_approval(name).unwrap_or_default();
    }
    if let Source::Provider(spec) = &spec_source
        && let Some(model) = spec.model()
    {
        run_config.model.model = model.to_owned();
    }
    run_config.model.temperature = temperature;
    Ok((spec_source, run_config))
}
