//! An upstream's lists: what it offers (tools, prompts, resources, resource templates, and the
//! skills of the Skills extension), read page by page over a connection as its capabilities
//! announce them (a 2026-07-28 HTTP upstream's tools with invalid `x-mcp-header` declarations
//! left out).

use crate::{Connection, UpstreamError};
use serde_json::{json, Value};
use std::time::Duration;

/// Why an upstream's lists could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// The call failed (the connection closed, no reply in time).
    #[error("{method}: {source}")]
    Call {
        /// The list method.
        method: &'static str,
        /// Why.
        #[source]
        source: UpstreamError,
    },
    /// The upstream answered with an error (or with neither a result nor an error: null).
    #[error("{method} failed: {error}")]
    Refused {
        /// The list method.
        method: &'static str,
        /// The JSON-RPC error object.
        error: Value,
    },
}

/// What one upstream currently offers (fetched by its control connection).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpstreamLists {
    /// `tools/list`, every page.
    pub tools: Vec<Value>,
    /// `prompts/list`, every page.
    pub prompts: Vec<Value>,
    /// `resources/list`, every page.
    pub resources: Vec<Value>,
    /// `resources/templates/list`, every page.
    pub templates: Vec<Value>,
    /// `skills/list`, every page (the Skills extension, when the upstream declares it).
    pub skills: Vec<Value>,
    /// The Skills extension's settings, when the upstream declares it (`{"directoryRead": …}`).
    pub skill_settings: Option<Value>,
}

impl UpstreamLists {
    /// What it lists, by name (tools, prompts) and URI (resources, as clients see them: the
    /// `skill://` URIs of an upstream that declares the Skills extension under its prefix):
    /// what name collisions are found over.
    pub fn listed(&self, spec: &sluice_config::UpstreamSpec) -> sluice_config::Listed<'_> {
        fn names<'a>(items: &'a [Value], key: &str) -> Vec<&'a str> {
            items.iter().filter_map(|v| v.get(key)?.as_str()).collect()
        }
        let prefix = match self.skill_settings {
            Some(_) => spec.shown_skill_prefix(),
            None => "",
        };
        sluice_config::Listed {
            tools: names(&self.tools, "name"),
            prompts: names(&self.prompts, "name"),
            resources: names(&self.resources, "uri")
                .into_iter()
                .map(|u| sluice_skills::uri::shown(prefix, u))
                .collect(),
        }
    }
}

/// Fetch every page of one list (bounded to 1000 pages).
async fn fetch_all(
    conn: &Connection,
    method: &'static str,
    key: &str,
    timeout: Duration,
) -> Result<Vec<Value>, ListError> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let params = cursor.as_ref().map(|c| json!({"cursor": c}));
        let reply = conn
            .call(method, params, timeout)
            .await
            .map_err(|source| ListError::Call { method, source })?;
        let Some(result) = reply.result() else {
            return Err(ListError::Refused {
                method,
                error: reply.error_obj().cloned().unwrap_or(Value::Null),
            });
        };
        if let Some(items) = result.get(key).and_then(Value::as_array) {
            out.extend(items.iter().cloned());
        }
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => return Ok(out),
        }
    }
    Ok(out)
}

/// Fetch the lists the upstream's capabilities say it has.
pub async fn fetch_lists(
    conn: &Connection,
    caps: &Value,
    timeout: Duration,
) -> Result<UpstreamLists, ListError> {
    let mut lists = UpstreamLists::default();
    if caps.get("tools").is_some() {
        lists.tools = fetch_all(conn, "tools/list", "tools", timeout).await?;
        // A 2026-07-28 Streamable HTTP client must reject a tool whose `x-mcp-header`
        // parameters are declared wrongly: it is not offered, and so never called.
        if conn.mirrors_param_headers() {
            for (name, why) in crate::tool_headers::retain_valid_tools(&mut lists.tools) {
                tracing::warn!(upstream = %conn.label(), "left out the tool {name:?}: {why}");
            }
        }
    }
    if caps.get("prompts").is_some() {
        lists.prompts = fetch_all(conn, "prompts/list", "prompts", timeout).await?;
    }
    if caps.get("resources").is_some() {
        lists.resources = fetch_all(conn, "resources/list", "resources", timeout).await?;
        // Templates are optional even with the resources capability.
        lists.templates = fetch_all(
            conn,
            "resources/templates/list",
            "resourceTemplates",
            timeout,
        )
        .await
        .unwrap_or_default();
    }
    if let Some(settings) = sluice_skills::declared(caps) {
        lists.skill_settings = Some(settings.clone());
        // The entries only: no skill file is read ahead of need.
        match fetch_all(conn, "skills/list", "skills", timeout).await {
            Ok(skills) => lists.skills = skills,
            Err(e) => tracing::warn!(upstream = %conn.label(), "no skills listed: {e}"),
        }
    }
    Ok(lists)
}
