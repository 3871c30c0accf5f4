//! The facts hooks select on (method, tool name, upstream, the upstream's own tool name, the
//! call's `tool_use_id`, the tool's definition, the `sub` of the upstream identity serving it).

use crate::catalog::Catalog;
use crate::session::Session;
use crate::state::Snapshot;
use sluice_core::Message;
use sluice_hooks::Ctx;
use std::sync::Arc;

/// The facts hooks select on, for a message from or to a session.
pub(crate) struct Facts {
    /// The method (or `(reply)` for a client's reply).
    pub method: String,
    /// The client-facing tool name (tools/call).
    pub tool_name: Option<String>,
    /// The upstream it goes to or comes from.
    pub upstream: Option<String>,
    /// The catalog the client sees (its own view, `views.rs`), kept when a hook wants the
    /// tool's definition (`validate`) or the catalog's names (`tool-scan`).
    pub catalog: Option<Arc<Catalog>>,
    /// The name the upstream knows the tool by (tools/call to an upstream).
    pub upstream_tool: Option<String>,
    /// The call's `tool_use_id` (tools/call, when there are hooks).
    pub tool_use_id: Option<String>,
    /// For a client's reply to an upstream's request: that request (as the upstream sent it).
    pub answers: Option<Message>,
    /// The OAuth identity that serves the call (a per-user upstream's: the caller's own), kept
    /// when hooks are shown payloads, to tell them its `sub` ([`Facts::see_identity`]).
    pub identity: Option<Arc<sluice_oauth::Identity>>,
    /// That identity's `sub`, as last seen.
    pub upstream_sub: Option<Arc<String>>,
}

/// The OAuth identity whose token serves `session`'s calls to `slot`: the caller's own for a
/// per-user upstream (none for a caller without a principal), else the upstream's one.
pub(crate) fn serving_identity(
    slot: &sluice_upstream::Slot,
    session: &Session,
) -> Option<Arc<sluice_oauth::Identity>> {
    match (slot.per_user(), session.principal_key()) {
        (Some(users), Some(p)) => Some(users.identity(p)),
        (Some(_), None) => None,
        (None, _) => slot.identity().cloned(),
    }
}

/// A fresh `toolu_<32 hex>`, as Claude Code names a tool use.
fn tool_use_id() -> String {
    let mut buf = uuid::Uuid::encode_buffer();
    let hex = uuid::Uuid::new_v4().simple().encode_lower(&mut buf);
    let mut id = String::with_capacity(6 + hex.len());
    id.push_str("toolu_");
    id.push_str(hex);
    id
}

impl Facts {
    /// Facts of a client request: `method`, the client-facing `tool` (tools/call), the
    /// `upstream` it goes to and the name the upstream knows it by, all as the request was
    /// resolved once ([`super::call::Call`]); `catalog` is the one the client sees
    /// ([`crate::views::catalog_for`]), kept when a hook wants the tool's definition.
    pub(crate) fn of_request(
        snap: &Snapshot,
        catalog: &Arc<Catalog>,
        method: &str,
        tool: Option<&str>,
        upstream: Option<&str>,
        upstream_name: Option<&str>,
        identity: Option<Arc<sluice_oauth::Identity>>,
    ) -> Facts {
        let tool_name = tool.filter(|_| method == "tools/call");
        let kept = ((tool_name.is_some() && snap.chain.wants_tool_definitions())
            || snap.chain.wants_catalog_names())
        .then(|| catalog.clone());
        let (upstream_tool, tool_use_id) = match tool_name {
            Some(_) if !snap.chain.is_empty() => (
                upstream_name.map(str::to_string),
                // Only hooks shown payloads see it (and the transcript lines they read).
                snap.chain.shows_payloads().then(tool_use_id),
            ),
            _ => (None, None),
        };
        Facts {
            method: method.to_string(),
            tool_name: tool_name.map(str::to_string),
            upstream: upstream.map(str::to_string),
            catalog: kept,
            upstream_tool,
            tool_use_id,
            answers: None,
            upstream_sub: None,
            identity: identity.filter(|_| snap.chain.shows_payloads()),
        }
    }

    /// Facts of a message with only a method (and maybe an upstream).
    pub(crate) fn plain(method: impl Into<String>, upstream: Option<&str>) -> Facts {
        Facts {
            method: method.into(),
            tool_name: None,
            upstream: upstream.map(str::to_string),
            catalog: None,
            upstream_tool: None,
            tool_use_id: None,
            answers: None,
            identity: None,
            upstream_sub: None,
        }
    }

    /// Read the `sub` of the identity serving the call again, before each phase (a principal
    /// that connected during the call has one for the response phase); a grant this process
    /// has not read yet is loaded from the vault first, as the dispatch would.
    pub(crate) async fn see_identity(&mut self) {
        let Some(i) = &self.identity else {
            return;
        };
        if i.subject().is_none() {
            // Held already: at once. None in the vault: the principal is asked to connect in
            // the dispatch (which reads it again).
            let _ = i.ready().await;
        }
        self.upstream_sub = i.subject();
    }

    /// The hook context for `session`.
    pub(crate) fn ctx<'a>(&'a self, session: &'a Session) -> Ctx<'a> {
        let tool = self
            .tool_name
            .as_deref()
            .and_then(|n| self.catalog.as_ref()?.tool_definition(n));
        self.ctx_with(session, tool)
    }

    /// [`Facts::ctx`] with the tool's definition looked up already (`None` when the facts keep
    /// no catalog or name no tool): a call's phases look it up once.
    pub(crate) fn ctx_with<'a>(
        &'a self,
        session: &'a Session,
        tool: Option<&'a serde_json::Value>,
    ) -> Ctx<'a> {
        Ctx {
            session_id: &session.id,
            method: &self.method,
            tool_name: self.tool_name.as_deref(),
            upstream: self.upstream.as_deref(),
            era: session.era(),
            tool,
            principal: session.principal(),
            upstream_tool: self.upstream_tool.as_deref(),
            tool_use_id: self.tool_use_id.as_deref(),
            answers: self.answers.as_ref(),
            upstream_sub: self.upstream_sub.as_deref().map(String::as_str),
            catalog: self
                .catalog
                .as_deref()
                .map(|c| c as &dyn sluice_hooks::builtin::tool_scan::CatalogNames),
        }
    }
}
