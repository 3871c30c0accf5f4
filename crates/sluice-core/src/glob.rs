//! Name globs where `*` is the only wildcard (hook `methods`, access rules, tool selectors).

/// Does `glob` (only `*` is special) match `s`? Allocates nothing (it runs on every hook's
/// selection of every call).
pub fn glob_match(glob: &str, s: &str) -> bool {
    if glob == "*" {
        return true;
    }
    // Globs are short: a plain scan is cheaper than setting up `memchr` (and `*` is ASCII, so
    // its index is a character boundary).
    let stars = glob.as_bytes();
    let Some(first_star) = stars.iter().position(|&b| b == b'*') else {
        return glob == s;
    };
    let last_star = stars.iter().rposition(|&b| b == b'*').unwrap_or(first_star);
    let (first, last) = (&glob[..first_star], &glob[last_star + 1..]);
    if !s.starts_with(first) || !s.ends_with(last) || s.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &s[first.len()..s.len() - last.len()];
    if first_star < last_star {
        // The pieces between the first and the last `*`, each found after the one before.
        for p in glob[first_star + 1..last_star].split('*') {
            match rest.find(p) {
                Some(i) => rest = &rest[i + p.len()..],
                None => return false,
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn stars_match_any_run_and_the_rest_is_exact() {
        let cases = [
            ("*", "", true),
            ("*", "tools/call", true),
            ("tools/call", "tools/call", true),
            ("tools/call", "tools/list", false),
            ("tools/*", "tools/call", true),
            ("tools/*", "tools/", true),
            ("tools/*", "prompts/get", false),
            ("*/list", "tools/list", true),
            ("*/list", "tools/call", false),
            ("t*s/*l", "tools/call", true),
            ("t*s/*l", "tools/cal", true),
            ("t*s/*l", "tools/ca", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "acb", false),
            ("a**b", "ab", true),
            ("a*a", "a", false),
            ("a*b*b*c", "abbc", true),
            ("a*b*b*c", "abc", false),
            ("", "", true),
            ("", "x", false),
        ];
        for (glob, s, want) in cases {
            assert_eq!(glob_match(glob, s), want, "{glob:?} against {s:?}");
        }
    }
}
