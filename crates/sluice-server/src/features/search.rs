//! The tool search: `<prefix>_search_tools({query, limit, schemas})` ranks the tools a caller
//! can reach for a few words, with BM25 (the `bm25` crate) over each tool's name, title,
//! description and parameter names, and answers their names, servers and one-line
//! descriptions (and input schemas with `schemas: true`).
//!
//! The index is worked out from a catalog alone, never from a session: it is built the first
//! time a catalog is searched and kept in it ([`Catalog::derived`]), so a 2026-07-28 client and
//! any replica get the same answers, and every rebuild of the catalog (a list changed, a
//! reload) brings a new index. It holds every reachable tool ([`Catalog::reachable_tools`]:
//! listed, or reached through the funnel; never the gateway's own tools); the caller's access
//! rules are applied to the ranking, so a tool the caller may not use is never returned.
//! Whatever scopes a caller's tools (the session's own view today, an endpoint later) scopes
//! the search by handing it that catalog.

use crate::catalog::{Catalog, ToolAt};
use bm25::{Embedder, EmbedderBuilder, Scorer, Tokenizer};
use rust_stemmers::{Algorithm, Stemmer};
use serde_json::{json, Value};
use sluice_auth::{Item, Policy};
use sluice_core::{Message, Principal, RpcError};

/// The most tools one search returns.
pub(crate) const MAX_LIMIT: u64 = 50;
/// How many tools a search returns when it does not say.
const DEFAULT_LIMIT: u64 = 10;
/// How many times a tool's name counts in its text (its title and parameter names twice, its
/// description once): a word of the name says more about the tool than one of its prose.
const NAME_WEIGHT: usize = 3;
const TITLE_WEIGHT: usize = 2;
const PARAMETER_WEIGHT: usize = 2;

/// Words that say nothing about a tool.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how", "i", "in",
    "is", "it", "its", "me", "my", "of", "on", "or", "that", "the", "this", "to", "use", "we",
    "what", "when", "which", "will", "with", "you", "your",
];

/// Splits text into lower-case stemmed words: at every character that is not a letter or a
/// digit, between a lower-case and an upper-case letter (`getWeather`), and between letters and
/// digits; stop words are left out.
struct Words(Stemmer);

impl Tokenizer for Words {
    fn tokenize(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut word = String::new();
        let mut prev: Option<char> = None;
        let end = |word: &mut String, out: &mut Vec<String>| {
            if !word.is_empty() && !STOP_WORDS.contains(&word.as_str()) {
                out.push(self.0.stem(word).into_owned());
            }
            word.clear();
        };
        for c in text.chars() {
            if !c.is_alphanumeric() {
                end(&mut word, &mut out);
                prev = None;
                continue;
            }
            if let Some(p) = prev {
                let case = p.is_lowercase() && c.is_uppercase();
                let digits = p.is_numeric() != c.is_numeric();
                if case || digits {
                    end(&mut word, &mut out);
                }
            }
            word.extend(c.to_lowercase());
            prev = Some(c);
        }
        end(&mut word, &mut out);
        out
    }
}

/// One searchable tool.
struct Entry {
    name: String,
    server: String,
    at: ToolAt,
}

/// The BM25 index of one catalog's reachable tools.
pub(crate) struct Index {
    entries: Vec<Entry>,
    embedder: Embedder<u32, Words>,
    scorer: Scorer<u32>,
}

/// The text a tool is found by: its name, title, description and parameter names, the name
/// and title weighted.
fn text_of(name: &str, tool: &Value) -> String {
    let mut text = String::new();
    let mut add = |s: &str, times: usize| {
        for _ in 0..times {
            text.push_str(s);
            text.push(' ');
        }
    };
    add(name, NAME_WEIGHT);
    if let Some(title) = tool.get("title").and_then(Value::as_str) {
        add(title, TITLE_WEIGHT);
    }
    if let Some(d) = tool.get("description").and_then(Value::as_str) {
        add(d, 1);
    }
    if let Some(props) = tool
        .pointer("/inputSchema/properties")
        .and_then(Value::as_object)
    {
        for p in props.keys() {
            add(p, PARAMETER_WEIGHT);
        }
    }
    text
}

impl Index {
    /// The index of `catalog`'s reachable tools.
    pub(crate) fn build(catalog: &Catalog) -> Index {
        let reachable = catalog.reachable_tools();
        let texts: Vec<String> = reachable.iter().map(|t| text_of(t.name, t.tool)).collect();
        let corpus: Vec<&str> = texts.iter().map(String::as_str).collect();
        let words = Words(Stemmer::create(Algorithm::English));
        let embedder =
            EmbedderBuilder::<u32, Words>::with_tokenizer_and_fit_to_corpus(words, &corpus).build();
        let mut scorer = Scorer::<u32>::new();
        for (i, text) in texts.iter().enumerate() {
            scorer.upsert(&(i as u32), embedder.embed(text));
        }
        let entries = reachable
            .iter()
            .map(|t| Entry {
                name: t.name.to_string(),
                server: t.server.to_string(),
                at: t.at,
            })
            .collect();
        Index {
            entries,
            embedder,
            scorer,
        }
    }

    /// How many tools the index holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The best `limit` tools for `query` among those `keep` lets through (by name), best
    /// first; equal scores in catalog order.
    fn search(&self, query: &str, limit: usize, keep: impl Fn(&str) -> bool) -> Vec<&Entry> {
        let mut matches = self.scorer.matches(&self.embedder.embed(query));
        matches.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        matches
            .iter()
            .filter_map(|m| self.entries.get(m.id as usize))
            .filter(|e| keep(&e.name))
            .take(limit)
            .collect()
    }
}

/// The first line of a tool's description.
fn one_line(tool: &Value) -> &str {
    let d = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    d.lines().next().unwrap_or("").trim()
}

/// What a search call asks: its query, how many tools, and whether with their schemas.
fn arguments(msg: &Message) -> Result<(String, usize, bool), RpcError> {
    let args = msg.params().and_then(|p| p.get("arguments"));
    let arg = |k: &str| args.and_then(|a| a.get(k)).filter(|v| !v.is_null());
    let query = match arg("query").map(|q| q.as_str().map(str::trim)) {
        Some(Some(q)) if !q.is_empty() => q.to_string(),
        _ => {
            return Err(RpcError::invalid_params(
                "query must be a non-empty string: what the tool should do, in a few words",
            ))
        }
    };
    let limit = match arg("limit") {
        None => DEFAULT_LIMIT,
        Some(l) => match l.as_u64() {
            Some(n) if n >= 1 => n.min(MAX_LIMIT),
            _ => {
                return Err(RpcError::invalid_params(format!(
                    "limit must be an integer from 1 to {MAX_LIMIT}"
                )))
            }
        },
    };
    let schemas = match arg("schemas") {
        None => false,
        Some(s) => s
            .as_bool()
            .ok_or_else(|| RpcError::invalid_params("schemas must be true or false"))?,
    };
    Ok((query, limit as usize, schemas))
}

/// Answer a call to the search tool over `catalog` (the caller's view), as the caller's access
/// rules let it see.
pub(crate) fn answer(
    catalog: &Catalog,
    policy: &Policy,
    principal: Option<&Principal>,
    msg: &Message,
) -> Result<Value, RpcError> {
    let (query, limit, schemas) = arguments(msg)?;
    let index = catalog.derived(Index::build);
    let found = index.search(&query, limit, |name| {
        policy.allows(Item::Tool, name, principal)
    });
    let mut tools = Vec::with_capacity(found.len());
    let mut text = String::new();
    for e in found {
        let Some(tool) = catalog.tool_at(e.at) else {
            continue;
        };
        let description = one_line(tool);
        let mut item = json!({"name": e.name, "server": e.server, "description": description});
        if let Some(title) = tool.get("title").filter(|t| t.is_string()) {
            item["title"] = title.clone();
        }
        text.push_str(&format!("{} — {description}\n", e.name));
        if schemas {
            let schema = tool
                .get("inputSchema")
                .cloned()
                .unwrap_or(json!({"type": "object"}));
            text.push_str(&format!("  input schema: {schema}\n"));
            item["inputSchema"] = schema;
        }
        tools.push(item);
    }
    if tools.is_empty() {
        text = format!("No tool matches {query:?}.");
    }
    Ok(json!({
        "content": [{"type": "text", "text": text.trim_end()}],
        "structuredContent": {"query": query, "tools": tools}
    }))
}

#[cfg(test)]
mod relevance;
#[cfg(test)]
mod tests;
