//! Agent Profiles for the page (S10): `listProfiles`, `readProfile`,
//! `saveProfile`, `diffProfile`, `rollbackProfile`, `forkProfile`,
//! `exportProfile`, `importProfile`, `profileRuns`, and `startRun`'s
//! `profile` and `turn` options. Every rule (bounds, revisions, the
//! narrowing-only precedence and import, what an export leaves out, lazy
//! migration of legacy assistants) is `agent-profiles`' and the assembly's;
//! this module converts JavaScript values.

use agent_assembly::{ProfileChoice, ProfileStartError};
use agent_profiles::{AgentProfileV2, Layer, LayerName, ProfileError, ProfileId};
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use super::errors::{ErrorCode, from_js, js_error, run_error, storage_code, to_js};
use super::{AgentRuntime, promise};

/// The stable code of a profile error: what the page can fix is
/// `invalid_argument` (a bound, a bad layer, a widening import), a missing
/// profile or revision `not_found`, a lost race `wrong_status`.
pub(crate) fn profile_error(e: ProfileError) -> JsValue {
    let code = match &e {
        ProfileError::NotFound { .. } | ProfileError::RevisionNotFound { .. } => {
            ErrorCode::NotFound
        }
        ProfileError::Exists { .. } => ErrorCode::AlreadyExists,
        ProfileError::Conflict { .. } => ErrorCode::WrongStatus,
        ProfileError::Storage(s) => storage_code(s),
        ProfileError::Corrupt { .. } | ProfileError::Format { .. } => ErrorCode::InconsistentState,
        _ => ErrorCode::InvalidArgument,
    };
    js_error(code, e)
}

pub(crate) fn start_error(e: ProfileStartError) -> JsValue {
    match e {
        ProfileStartError::Profile(p) => profile_error(p),
        ProfileStartError::Run(r) => run_error(r),
        other => js_error(ErrorCode::RuntimeError, other),
    }
}

/// `startRun`'s `profile` and `turn` options as the assembly's choice, or
/// `None` when neither is given.
pub(crate) fn choice_of(
    profile: Option<String>,
    turn: Option<Value>,
) -> Result<Option<ProfileChoice>, JsValue> {
    if profile.is_none() && turn.is_none() {
        return Ok(None);
    }
    let profile = match profile {
        Some(id) => Some(ProfileId::new(id).map_err(profile_error)?),
        None => None,
    };
    let turn = match turn {
        Some(value) => Some(Layer::from_json(&value, LayerName::Turn).map_err(profile_error)?),
        None => None,
    };
    Ok(Some(ProfileChoice {
        profile,
        turn,
        ..ProfileChoice::default()
    }))
}

fn id(s: &str) -> Result<ProfileId, JsValue> {
    ProfileId::new(s).map_err(profile_error)
}

#[wasm_bindgen]
impl AgentRuntime {
    /// Every profile (id, name, mode, latest revision, fork origin) and
    /// the records that could not be read, with why.
    #[wasm_bindgen(js_name = listProfiles, unchecked_return_type = "Promise<ProfileList>")]
    pub fn list_profiles(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let list = inner
                .assembly
                .profiles()
                .list()
                .await
                .map_err(profile_error)?;
            let unreadable: Vec<String> = list.unreadable.iter().map(|e| e.to_string()).collect();
            to_js(&json!({"profiles": list.profiles, "unreadable": unreadable}))
        })
    }

    /// A profile's latest revision, or revision `revision`.
    #[wasm_bindgen(js_name = readProfile, unchecked_return_type = "Promise<ProfileRevision>")]
    pub fn read_profile(&self, id: String, revision: Option<f64>) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let id = self::id(&id)?;
            let store = inner.assembly.profiles();
            let r = match revision {
                Some(n) if n >= 1.0 && n.fract() == 0.0 => store.get_revision(&id, n as u64).await,
                Some(n) => {
                    return Err(js_error(
                        ErrorCode::InvalidArgument,
                        format!("revision must be a whole number from 1, not {n}"),
                    ));
                }
                None => store.get(&id).await,
            }
            .map_err(profile_error)?;
            to_js(&r)
        })
    }

    /// Save `profile` (an `AgentProfileV2`): a new profile, or a new
    /// revision of an existing one when `basedOn` names its latest
    /// revision (a stale `basedOn` is refused with `wrong_status`).
    #[wasm_bindgen(js_name = saveProfile, unchecked_return_type = "Promise<ProfileRevision>")]
    pub fn save_profile(
        &self,
        #[wasm_bindgen(unchecked_param_type = "AgentProfileV2")] profile: JsValue,
        #[wasm_bindgen(js_name = basedOn)] based_on: Option<f64>,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let profile: AgentProfileV2 = from_js(profile, "profile")?;
            let store = inner.assembly.profiles();
            let saved = match based_on {
                None => store.create(&profile).await,
                Some(n) if n >= 1.0 && n.fract() == 0.0 => store.save(&profile, n as u64).await,
                Some(n) => {
                    return Err(js_error(
                        ErrorCode::InvalidArgument,
                        format!("basedOn must be a whole number from 1, not {n}"),
                    ));
                }
            }
            .map_err(profile_error)?;
            to_js(&saved)
        })
    }

    /// What changed from revision `a` to revision `b`, field by field.
    #[wasm_bindgen(js_name = diffProfile, unchecked_return_type = "Promise<FieldChange[]>")]
    pub fn diff_profile(&self, id: String, a: u32, b: u32) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let changes = inner
                .assembly
                .profiles()
                .diff(&self::id(&id)?, u64::from(a), u64::from(b))
                .await
                .map_err(profile_error)?;
            to_js(&changes)
        })
    }

    /// A new revision equal to revision `to`.
    #[wasm_bindgen(js_name = rollbackProfile, unchecked_return_type = "Promise<ProfileRevision>")]
    pub fn rollback_profile(&self, id: String, to: u32) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let r = inner
                .assembly
                .profiles()
                .rollback(&self::id(&id)?, u64::from(to))
                .await
                .map_err(profile_error)?;
            to_js(&r)
        })
    }

    /// A new profile `newId` from `id`'s latest revision, with fork metadata.
    #[wasm_bindgen(js_name = forkProfile, unchecked_return_type = "Promise<ProfileRevision>")]
    pub fn fork_profile(
        &self,
        id: String,
        #[wasm_bindgen(js_name = newId)] new_id: String,
        name: String,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let r = inner
                .assembly
                .profiles()
                .fork(&self::id(&id)?, self::id(&new_id)?, &name)
                .await
                .map_err(profile_error)?;
            to_js(&r)
        })
    }

    /// The shareable export (JSON text): no credentials, no secret values,
    /// no run history (S10.3).
    #[wasm_bindgen(js_name = exportProfile, unchecked_return_type = "Promise<string>")]
    pub fn export_profile(&self, id: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let bytes = inner
                .assembly
                .profiles()
                .export(&self::id(&id)?)
                .await
                .map_err(profile_error)?;
            String::from_utf8(bytes)
                .map(|s| JsValue::from_str(&s))
                .map_err(|e| js_error(ErrorCode::InconsistentState, e))
        })
    }

    /// Import an export (its JSON text), under `asId` when given; it never
    /// grants more than this runtime's defaults allow (what was narrowed is
    /// in `narrowed`).
    #[wasm_bindgen(js_name = importProfile, unchecked_return_type = "Promise<ProfileImport>")]
    pub fn import_profile(
        &self,
        text: String,
        #[wasm_bindgen(js_name = asId)] as_id: Option<String>,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let as_id = match as_id {
                Some(s) => Some(self::id(&s)?),
                None => None,
            };
            let ceiling = agent_assembly::profiles::global_layer(&inner.defaults);
            let imported = inner
                .assembly
                .profiles()
                .import(text.as_bytes(), &ceiling, as_id)
                .await
                .map_err(profile_error)?;
            to_js(&json!({"revision": imported.revision, "narrowed": imported.refused}))
        })
    }

    /// The runs that used a profile (its local run history; never exported).
    #[wasm_bindgen(js_name = profileRuns, unchecked_return_type = "Promise<ProfileRunUse[]>")]
    pub fn profile_runs(&self, id: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let runs = inner
                .assembly
                .profiles()
                .runs(&self::id(&id)?)
                .await
                .map_err(profile_error)?;
            to_js(&runs)
        })
    }
}
