//! The tools `mcp_tool` hooks call: [`HookTools`], sluice-hooks' [`ToolRunner`] over the
//! gateway's own upstreams — a `tools/call` sent through the named upstream's control
//! connection, with its timeout, in the snapshot in force when the hook runs (so a reload that
//! adds or stops an upstream is seen at once).

use crate::state::State;
use futures_util::future::BoxFuture;
use serde_json::{json, Value};
use sluice_hooks::{ToolCallError, ToolRunner};
use sluice_upstream::UpstreamError;
use std::sync::{Arc, OnceLock, Weak};

/// The gateway's [`ToolRunner`]: bound to the state once it exists (the first chain is built
/// before it), and kept by every chain a reload builds.
#[derive(Default)]
pub(crate) struct HookTools {
    state: OnceLock<Weak<State>>,
}

impl HookTools {
    /// A runner not yet bound to a state (its calls fail as unavailable until it is).
    pub(crate) fn unbound() -> Arc<HookTools> {
        Arc::new(HookTools::default())
    }

    /// Bind it to the gateway's state.
    pub(crate) fn bind(&self, st: &Arc<State>) {
        let _ = self.state.set(Arc::downgrade(st));
    }
}

impl ToolRunner for HookTools {
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolCallError>> {
        Box::pin(async move {
            let unavailable = |reason: String| ToolCallError::Unavailable {
                server: server.to_string(),
                reason,
            };
            let st = self
                .state
                .get()
                .and_then(Weak::upgrade)
                .ok_or_else(|| unavailable("the gateway is not serving".into()))?;
            let slot = st
                .snapshot()
                .slot(server)
                .cloned()
                .ok_or_else(|| ToolCallError::UnknownServer(server.to_string()))?;
            let conn = slot
                .control()
                .ok_or_else(|| unavailable(slot.unavailable().message))?;
            let params = json!({"name": tool, "arguments": args});
            let reply = conn
                .call("tools/call", Some(params), slot.timeout())
                .await
                .map_err(|e| match e {
                    UpstreamError::Timeout(_) => ToolCallError::Timeout,
                    e => unavailable(e.to_string()),
                })?;
            if let Some(result) = reply.result() {
                return Ok(result.clone());
            }
            let err = reply.error_obj();
            let field = |k: &str| err.and_then(|e| e.get(k));
            Err(ToolCallError::Rpc {
                code: field("code").and_then(Value::as_i64).unwrap_or(0),
                message: field("message")
                    .and_then(Value::as_str)
                    .unwrap_or("an error without a message")
                    .to_string(),
            })
        })
    }
}
