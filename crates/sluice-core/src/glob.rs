//! Name globs where `*` is the only wildcard (hook `methods`, access rules, tool selectors).

/// Does `glob` (only `*` is special) match `s`?
pub fn glob_match(glob: &str, s: &str) -> bool {
    if glob == "*" {
        return true;
    }
    let parts: Vec<&str> = glob.split('*').collect();
    if parts.len() == 1 {
        return glob == s;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !s.starts_with(first) || !s.ends_with(last) || s.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &s[first.len()..s.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}
