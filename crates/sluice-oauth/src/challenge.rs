//! The `WWW-Authenticate: Bearer …` challenge of a 401 or 403 (RFC 6750 §3, RFC 9728 §5.1):
//! `resource_metadata`, `scope` and `error`.

/// What a Bearer challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// The protected resource metadata URL (RFC 9728).
    pub resource_metadata: Option<String>,
    /// The scopes the resource asks for (space-separated in the header).
    pub scope: Option<Vec<String>>,
    /// `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
}

impl Challenge {
    /// The Bearer challenge among the header values (other schemes ignored); an absent or
    /// unparseable header gives an empty challenge.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Challenge {
        let mut out = Challenge::default();
        for value in values {
            for (scheme, params) in challenges(value) {
                if !scheme.eq_ignore_ascii_case("bearer") {
                    continue;
                }
                for (k, v) in params {
                    match k.to_ascii_lowercase().as_str() {
                        "resource_metadata" => out.resource_metadata = Some(v),
                        "scope" => {
                            out.scope = Some(v.split_whitespace().map(str::to_string).collect())
                        }
                        "error" => out.error = Some(v),
                        _ => {}
                    }
                }
                return out;
            }
        }
        out
    }

    /// Is this the step-up challenge (`error="insufficient_scope"`)?
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The challenges of one header value: `Scheme k=v, k="v", Other …` (RFC 9110 §11.6.1).
fn challenges(value: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let b = value.as_bytes();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && (b[*i] == b' ' || b[*i] == b'\t' || b[*i] == b',') {
            *i += 1;
        }
    };
    let token = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && !matches!(b[*i], b' ' | b'\t' | b',' | b'=' | b'"') {
            *i += 1;
        }
        value[start..*i].to_string()
    };
    while i < b.len() {
        skip_ws(&mut i);
        if i >= b.len() {
            break;
        }
        let word = token(&mut i);
        if word.is_empty() {
            i += 1;
            continue;
        }
        // A parameter (`word=`) belongs to the challenge before it; a bare word starts one.
        let mut j = i;
        while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
            j += 1;
        }
        if j < b.len() && b[j] == b'=' && !out.is_empty() {
            i = j + 1;
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            let val = if i < b.len() && b[i] == b'"' {
                i += 1;
                let mut s = String::new();
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        i += 1;
                    }
                    let ch_len = value[i..].chars().next().map_or(1, char::len_utf8);
                    s.push_str(&value[i..i + ch_len]);
                    i += ch_len;
                }
                i += 1;
                s
            } else {
                token(&mut i)
            };
            if let Some(last) = out.last_mut() {
                last.1.push((word, val));
            }
        } else {
            out.push((word, Vec::new()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Challenge;

    #[test]
    fn reads_the_bearer_parameters() {
        let c = Challenge::parse([
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read files:write""#,
        ]);
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            c.scope,
            Some(vec!["files:read".to_string(), "files:write".to_string()])
        );
        assert_eq!(c.error, None);
    }

    #[test]
    fn finds_bearer_after_another_scheme_and_reads_step_up() {
        let c = Challenge::parse([
            r#"Basic realm="x", Bearer error="insufficient_scope", scope="admin", error_description="needs \"admin\"""#,
        ]);
        assert!(c.insufficient_scope());
        assert_eq!(c.scope, Some(vec!["admin".to_string()]));
        let none = Challenge::parse(["Basic realm=\"x\""]);
        assert_eq!(none, Challenge::default());
        let bare = Challenge::parse(["Bearer"]);
        assert_eq!(bare, Challenge::default());
        let unquoted = Challenge::parse(["bearer error=invalid_token"]);
        assert_eq!(unquoted.error.as_deref(), Some("invalid_token"));
    }
}
