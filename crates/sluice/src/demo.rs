//! The built-in demo upstream: a small stdio MCP server (echo, add, word_count) so that
//! `sluice serve` with no configuration shows a working gateway.

use serde_json::{json, Value};
use std::io::{BufRead, Write};

fn tools() -> Value {
    json!([
        {
            "name": "echo",
            "description": "Return the given text unchanged.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        },
        {
            "name": "add",
            "description": "Add two numbers.",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}
        },
        {
            "name": "word_count",
            "description": "Count the words in a text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        }
    ])
}

fn text(t: String, structured: Value) -> Value {
    json!({"content": [{"type": "text", "text": t}], "structuredContent": structured})
}

fn call(name: &str, args: &Value) -> Result<Value, String> {
    match name {
        "echo" => {
            let t = args.get("text").and_then(Value::as_str).unwrap_or("");
            Ok(text(t.to_string(), json!({"text": t})))
        }
        "add" => {
            let (a, b) = (args.get("a"), args.get("b"));
            if let (Some(a), Some(b)) = (a.and_then(Value::as_i64), b.and_then(Value::as_i64)) {
                let sum = a.saturating_add(b);
                return Ok(text(sum.to_string(), json!({"sum": sum})));
            }
            let a = a.and_then(Value::as_f64).ok_or("a must be a number")?;
            let b = b.and_then(Value::as_f64).ok_or("b must be a number")?;
            let sum = a + b;
            Ok(text(sum.to_string(), json!({"sum": sum})))
        }
        "word_count" => {
            let t = args.get("text").and_then(Value::as_str).unwrap_or("");
            let n = t.split_whitespace().count();
            Ok(text(n.to_string(), json!({"words": n})))
        }
        other => Err(format!("Unknown tool: {other}")),
    }
}

fn handle(msg: &Value) -> Option<Value> {
    let id = msg.get("id")?.clone();
    let method = msg.get("method")?.as_str()?;
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => Ok(json!({
            "protocolVersion": params.get("protocolVersion").cloned().unwrap_or(json!("2025-11-25")),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "sluice-demo", "version": env!("CARGO_PKG_VERSION")}
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": tools()})),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            match call(name, &args) {
                Ok(r) => Ok(r),
                Err(e) if e.starts_with("Unknown tool") => Err((-32602, e)),
                Err(e) => Ok(json!({"content": [{"type": "text", "text": e}], "isError": true})),
            }
        }
        other => Err((-32601, format!("Method not found: {other}"))),
    };
    Some(match result {
        Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    })
}

/// Serve stdin/stdout until stdin closes.
pub(crate) fn run() {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(msg) => handle(&msg),
            Err(e) => Some(
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("Parse error: {e}")}}),
            ),
        };
        if let Some(r) = reply {
            if writeln!(stdout, "{r}")
                .and_then(|_| stdout.flush())
                .is_err()
            {
                break;
            }
        }
    }
}
