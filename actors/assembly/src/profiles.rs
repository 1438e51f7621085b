//! Agent Profiles wired into runs (SPEC S10), one rule for every host: the
//! profile store over the host's storage ([`Assembly::profiles`]) and the
//! run configuration of a turn ([`Assembly::profile_config`]): the five
//! layers of S10.2 — the host's defaults (the global layer and ceiling),
//! the Workspace, the selected profile at its newest revision, the
//! session's override and the turn's reference — resolved by
//! `agent_profiles::resolve`, copied into the supervisor's `RunConfig`,
//! with the narrowing carried as caveats on every capability the run mints
//! and the profile revision recorded with the run.

use agent_profiles::{
    Effective, Layer, LayerName, Layers, ProfileError, ProfileId, ProfileMode, ProfileStore,
    resolve,
};
use agent_supervisor::{RunConfig, RunProfile};

use crate::Assembly;

/// What a turn brings besides the host's defaults: the profile it uses and
/// the session's and the turn's own layers (each may only narrow, S10.2).
#[derive(Debug, Clone, Default)]
pub struct ProfileChoice {
    pub profile: Option<ProfileId>,
    pub workspace: Option<Layer>,
    pub session: Option<Layer>,
    pub turn: Option<Layer>,
}

/// The host's defaults as the global layer: what `base` (the runtime's
/// default run configuration) sets.
pub fn global_layer(base: &RunConfig) -> Layer {
    Layer {
        mode: Some(match base.mode {
            agent_kernel::run::RunMode::Chat => ProfileMode::Chat,
            _ => ProfileMode::Agent,
        }),
        provider: base.model.provider.clone(),
        model: Some(base.model.model.clone()),
        max_output_tokens: base.model.max_output_tokens,
        reasoning_effort: base.model.reasoning.effort,
        reasoning_budget_tokens: base.model.reasoning.budget_tokens,
        approval: Some(base.approval),
        budget: Some(base.budget),
        tools: base.allowed_tools(),
        ..Layer::default()
    }
}

impl Assembly {
    /// The Agent Profiles of this host's storage (revisions, export,
    /// import, legacy migration).
    pub fn profiles(&self) -> ProfileStore {
        ProfileStore::new(self.host.storage.clone(), self.host.clock.clone())
    }

    /// The run configuration of a turn under `choice` (S10.2): the layers
    /// resolved over `base`, which keeps what no layer speaks of (the
    /// system prompt, temperature, history, the Skill). A turn that tries
    /// to widen is narrowed; what was refused is in the returned
    /// [`Effective::refused`]. The Skill must be one the profile allows.
    pub async fn profile_config(
        &self,
        base: RunConfig,
        choice: &ProfileChoice,
    ) -> Result<(RunConfig, Effective), ProfileError> {
        let profile = match &choice.profile {
            Some(id) => Some(self.profiles().layer(id).await?),
            None => None,
        };
        let layers = Layers {
            global: global_layer(&base),
            workspace: choice.workspace.clone().unwrap_or_default(),
            profile,
            session: choice.session.clone().unwrap_or_default(),
            turn: choice.turn.clone().unwrap_or_default(),
        };
        layers.validate()?;
        let effective = resolve(&layers);
        let settings = effective.run_settings(base.skill.as_ref())?;
        let mut config = base;
        config.mode = settings.mode_for(config.mode);
        config.budget = settings.budget;
        config.approval = settings.approval;
        config.allowlist = settings.allowlist.clone();
        config.model.model = settings.model.clone();
        config.model.provider = settings.provider.clone();
        config.model.max_output_tokens = settings.max_output_tokens;
        config.model.reasoning = settings.reasoning;
        config.model.system_extension = match (
            config.model.system_extension.take(),
            settings.system_extension.clone(),
        ) {
            (Some(own), Some(added)) => Some(format!("{own}\n\n{added}")),
            (own, added) => own.or(added),
        };
        config.profile = settings.profile.as_ref().map(|p| RunProfile {
            id: p.id.to_string(),
            revision: p.revision,
        });
        // The narrowing rides on every capability the run mints, not only
        // on the schemas it is shown (S10.2).
        let narrows = effective.mode == ProfileMode::Chat
            || effective.tools.is_some()
            || effective.plugins.is_some()
            || effective.mcp_servers.is_some();
        if narrows {
            let registered =
                self.tools
                    .snapshot()
                    .await
                    .map_err(|e| ProfileError::InvalidLayer {
                        layer: LayerName::Global,
                        field: "tools",
                        why: format!("the tools actor did not answer: {e}"),
                    })?;
            config.caveats = effective.caveats_for(
                registered
                    .iter()
                    .map(|(name, (origin, _))| (name.as_str(), origin)),
            );
        }
        Ok((config, effective))
    }

    /// Start a turn under `choice` ([`Assembly::profile_config`]) and
    /// record the profile revision it used in the profile's run history.
    pub async fn start_with_profile(
        &self,
        session: &agent_kernel::SessionId,
        prompt: &str,
        base: RunConfig,
        choice: &ProfileChoice,
    ) -> Result<(agent_kernel::RunId, Effective), ProfileStartError> {
        let (mut config, effective) = self.profile_config(base, choice).await?;
        // The run's Memory scopes and knowledge allowlist, kept with it.
        let bases = self
            .knowledge()
            .await
            .map_err(|e| ProfileError::InvalidLayer {
                layer: LayerName::Global,
                field: "knowledge",
                why: format!("the knowledge bases could not be read: {e}"),
            })?;
        crate::memory::grant_into(&mut config, &effective, session, &bases);
        let run = self.runtime.start(session, prompt, config).await?;
        if let Some(profile) = &effective.profile {
            self.profiles().record_run(profile, run.as_str()).await?;
        }
        Ok((run, effective))
    }
}

/// A turn under a profile could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileStartError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Run(#[from] agent_supervisor::RunError),
}
