//! The tools the gateway answers itself: the funnel's three meta-tools, the management
//! tools, a user's own connections to per-user upstreams and the tool search. Their definitions (what clients list) and the closed set of what each one does
//! ([`GatewayTool`]), which the catalog routes to; the behaviour lives in `features/`.

use serde_json::{json, Value};

/// A tool the gateway answers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayTool {
    /// `<prefix>_list_tools`: the funnel's briefs.
    ListTools,
    /// `<prefix>_tool_instructions`: one tool's full usage.
    ToolInstructions,
    /// `<prefix>_run_tool`: run one tool by name (a rewrite into a real `tools/call`).
    RunTool,
    /// A management operation (`<prefix>_<op>`).
    Manage(ManageOp),
    /// `<prefix>_connections`: the caller's own connections to per-user upstreams (list,
    /// connect, disconnect).
    Connections,
    /// `<prefix>_search_tools`: the caller's tools ranked for a query (`features/search.rs`).
    SearchTools,
}

/// The management operations, over the same edits as the CLI and the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManageOp {
    /// List register tools, hooks and upstreams.
    List,
    /// Add a register tool.
    ToolAdd,
    /// Enable, disable, hide or unhide a register tool.
    ToolSet,
    /// Add a hook.
    HookAdd,
    /// Turn a hook on or off.
    HookSet,
    /// Add an upstream.
    UpstreamAdd,
    /// Change fields of an upstream.
    UpstreamSet,
    /// Turn the audit log on or off.
    Log,
}

/// The funnel's meta-tools, each with what it does.
pub(crate) fn funnel_tools(prefix: &str) -> Vec<(Value, GatewayTool)> {
    let [list, instructions, run]: [Value; 3] =
        meta_tools(prefix).try_into().expect("three meta-tools");
    vec![
        (list, GatewayTool::ListTools),
        (instructions, GatewayTool::ToolInstructions),
        (run, GatewayTool::RunTool),
    ]
}

/// The management tools, each with what it does.
pub(crate) fn management_tools(prefix: &str) -> Vec<(Value, GatewayTool)> {
    use ManageOp::*;
    let ops = [
        List,
        ToolAdd,
        ToolSet,
        HookAdd,
        HookSet,
        UpstreamAdd,
        UpstreamSet,
        Log,
    ];
    tools(prefix)
        .into_iter()
        .zip(ops)
        .map(|(t, op)| (t, GatewayTool::Manage(op)))
        .collect()
}

/// The connections tool, with what it does: listed when some upstream connects each user as
/// themselves (`"oauth": {"mode": "per_user"}`).
pub(crate) fn connections_tool(prefix: &str) -> (Value, GatewayTool) {
    let tool = json!({
        "name": format!("{prefix}_connections"),
        "title": "Your connections",
        "description": "Your own connections to the upstreams that act as each user: list them (connected or not, until when), connect one (you get a link to sign in with your own account) or disconnect one (your grant is forgotten and revoked). Only ever yours.",
        "inputSchema": {"type": "object", "properties": {
            "action": {"type": "string", "enum": ["list", "connect", "disconnect"], "description": "list (the default), connect or disconnect."},
            "upstream": {"type": "string", "description": "The upstream to connect or disconnect (its id, as list shows it)."}
        }}
    });
    (tool, GatewayTool::Connections)
}

/// The funnel's run tool alone (progressive discovery lists it beside the search tool, with
/// or without the funnel).
pub(crate) fn run_tool(prefix: &str) -> (Value, GatewayTool) {
    let run = meta_tools(prefix)
        .pop()
        .expect("the run tool is the last meta-tool");
    (run, GatewayTool::RunTool)
}

/// The search tool, its description saying what it searches: `tools` tools from `servers`
/// (upstream ids; `local` is the tool register).
pub(crate) fn search_tool(prefix: &str, tools: usize, servers: &[&str]) -> (Value, GatewayTool) {
    let from = match servers {
        [] => "no server yet".to_string(),
        [one] => format!("1 server ({one})"),
        many => format!("{} servers ({})", many.len(), many.join(", ")),
    };
    let tool = json!({
        "name": format!("{prefix}_search_tools"),
        "title": "Search tools",
        "description": format!("Search the {tools} tools this gateway reaches, from {from}, by what they do: give a few words (a task, a noun, a parameter name) and get the best matching tools, best first, with their one-line descriptions (and their input schemas with schemas: true). Then call one by name with {prefix}_run_tool."),
        "inputSchema": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What the tool should do, in a few words."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10, "description": "How many tools at most (1-50)."},
            "schemas": {"type": "boolean", "default": false, "description": "Also return each tool's input schema."}
        }, "required": ["query"]}
    });
    (tool, GatewayTool::SearchTools)
}

/// The three meta-tool definitions.
fn meta_tools(prefix: &str) -> Vec<Value> {
    vec![
        json!({
            "name": format!("{prefix}_list_tools"),
            "title": "List tools",
            "description": "List the tools available through this gateway as short briefs (name, summary, category). Optionally filter by an exact category. Then call the tool_instructions meta-tool for one tool's full usage, and run_tool to run it.",
            "inputSchema": {"type": "object", "properties": {"category": {"type": "string", "description": "Only tools of this category (exact match)."}}}
        }),
        json!({
            "name": format!("{prefix}_tool_instructions"),
            "title": "Tool instructions",
            "description": "Return the full usage instructions of one tool (by name), including its input schema.",
            "inputSchema": {"type": "object", "properties": {"name": {"type": "string", "description": "The tool's name as listed."}}, "required": ["name"]}
        }),
        json!({
            "name": format!("{prefix}_run_tool"),
            "title": "Run tool",
            "description": "Run one tool by name with its arguments (an object) and return its result.",
            "inputSchema": {"type": "object", "properties": {
                "name": {"type": "string", "description": "The tool's name as listed."},
                "args": {"type": "object", "description": "The tool's arguments."}
            }, "required": ["name"]}
        }),
    ]
}

fn tool(prefix: &str, op: &str, description: &str, schema: Value) -> Value {
    json!({"name": format!("{prefix}_{op}"), "description": description, "inputSchema": schema})
}

/// The management tool definitions.
fn tools(prefix: &str) -> Vec<Value> {
    let entry = json!({"type": "object", "properties": {"entry": {"type": "object", "description": "The entry, in the file's own format."}}, "required": ["entry"]});
    vec![
        tool(
            prefix,
            "list",
            "List the tree's register tools (with their overlay state), hooks and upstreams.",
            json!({"type": "object", "properties": {"kind": {"type": "string", "enum": ["tools", "hooks", "upstreams"]}}}),
        ),
        tool(
            prefix,
            "tool_add",
            "Add a first-party tool to tools/tools.register.json.",
            entry.clone(),
        ),
        tool(
            prefix,
            "tool_set",
            "Enable, disable, hide or unhide a register tool.",
            json!({"type": "object", "properties": {"id": {"type": "string"}, "enabled": {"type": "boolean"}, "hidden": {"type": "boolean"}}, "required": ["id"]}),
        ),
        tool(
            prefix,
            "hook_add",
            "Add a hook to hooks/hooks.manifest.json.",
            entry.clone(),
        ),
        tool(
            prefix,
            "hook_set",
            "Turn a hook on or off.",
            json!({"type": "object", "properties": {"id": {"type": "string"}, "enabled": {"type": "boolean"}}, "required": ["id", "enabled"]}),
        ),
        tool(
            prefix,
            "upstream_add",
            "Add an upstream MCP server to mcp/expose.json.",
            entry,
        ),
        tool(
            prefix,
            "upstream_set",
            "Change fields of an upstream (enabled, expose_all, …).",
            json!({"type": "object", "properties": {"id": {"type": "string"}, "fields": {"type": "object"}}, "required": ["id", "fields"]}),
        ),
        tool(
            prefix,
            "log",
            "Turn the audit log on or off.",
            json!({"type": "object", "properties": {"enabled": {"type": "boolean"}}, "required": ["enabled"]}),
        ),
    ]
}
