//! Resource templates (RFC 6570) matched against a URI by their literal parts: how a read of a
//! URI no upstream listed finds the upstream whose template it fits.

/// Split an RFC 6570 template into its literal parts (`a{x}b{y}` → `["a", "b", ""]`).
pub(super) fn literals(template: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = template;
    loop {
        match rest.find('{') {
            Some(i) => {
                out.push(rest[..i].to_string());
                match rest[i..].find('}') {
                    Some(j) => rest = &rest[i + j + 1..],
                    None => {
                        rest = "";
                    }
                }
            }
            None => {
                out.push(rest.to_string());
                return out;
            }
        }
    }
}

pub(super) fn template_matches(lits: &[String], uri: &str) -> bool {
    if lits.len() == 1 {
        return lits[0] == uri;
    }
    let (first, last) = (&lits[0], &lits[lits.len() - 1]);
    if !uri.starts_with(first.as_str()) || !uri.ends_with(last.as_str()) {
        return false;
    }
    if uri.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &uri[first.len()..uri.len() - last.len()];
    for lit in &lits[1..lits.len() - 1] {
        match rest.find(lit.as_str()) {
            Some(i) => rest = &rest[i + lit.len()..],
            None => return false,
        }
    }
    true
}
