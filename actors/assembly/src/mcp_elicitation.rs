//! A server's `elicitation/create` handed to the run whose call it came
//! with: the MCP client's [`ElicitationHandler`] for every server of the
//! assembly. The request's origin (run and call) makes it a pending
//! request of that run ([`agent_supervisor::Runtime::elicit`]); a request
//! without an origin, for a run this runtime does not hold, or after the
//! runtime is gone, is answered `cancel` (nobody can be asked).

use agent_kernel::ids::{CallId, RunId};
use agent_mcp::elicitation::{ElicitationAnswer, ElicitationHandler, ElicitationRequest};
use agent_supervisor::{ElicitationAsk, ElicitationReply, WeakRuntime};

/// Routes each elicitation to its run through a runtime it does not keep alive.
pub(crate) struct RunElicitations {
    pub(crate) runtime: WeakRuntime,
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ElicitationHandler for RunElicitations {
    async fn elicit(&self, request: ElicitationRequest) -> ElicitationAnswer {
        let Some(origin) = &request.origin else {
            tracing::debug!(server = %request.server_id, "an elicitation with no call to belong to: cancelled");
            return ElicitationAnswer::Cancel;
        };
        let (Some(runtime), Ok(run), Ok(call_id)) = (
            self.runtime.upgrade(),
            RunId::new(origin.run.clone()),
            CallId::new(origin.call_id.clone()),
        ) else {
            return ElicitationAnswer::Cancel;
        };
        let ask = ElicitationAsk {
            call_id,
            server: request.server_id.clone(),
            message: request.message.clone(),
            schema: request.requested_schema.clone(),
        };
        match runtime.elicit(&run, ask).await {
            Ok(ElicitationReply::Accept(content)) => ElicitationAnswer::Accept(content),
            Ok(ElicitationReply::Decline) => ElicitationAnswer::Decline,
            Ok(ElicitationReply::Cancel) => ElicitationAnswer::Cancel,
            Err(e) => {
                tracing::debug!(run = %run, error = %e, "the run could not take the elicitation: cancelled");
                ElicitationAnswer::Cancel
            }
        }
    }
}
