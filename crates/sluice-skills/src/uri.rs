//! Skill URIs under a gateway's namespace: an upstream's `skill://<path>/<file>` is shown to
//! clients as `skill://<prefix>/<path>/<file>` (the prefix names the upstream, by default its
//! id), so two upstreams' skills never collide and each request goes back to its own upstream.
//! The final segment of a skill's path (its name) and every byte of its files stay as they are.

use std::borrow::Cow;

/// The URI scheme the namespace applies to.
pub const SCHEME: &str = "skill://";

/// A URI of the upstream, as clients see it under `prefix` (unchanged when the prefix is empty
/// or the URI is not a `skill://` one).
pub fn shown<'a>(prefix: &str, uri: &'a str) -> Cow<'a, str> {
    match uri.strip_prefix(SCHEME) {
        Some(rest) if !prefix.is_empty() => Cow::Owned(format!("{SCHEME}{prefix}/{rest}")),
        _ => Cow::Borrowed(uri),
    }
}

/// The URI the upstream knows a client's `uri` by, when `uri` is under `prefix`: `None` when
/// it is not (another upstream's, or no skill URI at all). The prefix's own root
/// (`skill://<prefix>`) is no URI of the upstream's.
pub fn upstream_uri<'a>(prefix: &str, uri: &'a str) -> Option<Cow<'a, str>> {
    if prefix.is_empty() {
        return uri.starts_with(SCHEME).then_some(Cow::Borrowed(uri));
    }
    let rest = uri
        .strip_prefix(SCHEME)?
        .strip_prefix(prefix)?
        .strip_prefix('/')?;
    (!rest.is_empty()).then(|| Cow::Owned(format!("{SCHEME}{rest}")))
}

/// The first segment of a `skill://` URI (the authority): the prefix a gateway routes by.
pub fn first_segment(uri: &str) -> Option<&str> {
    let rest = uri.strip_prefix(SCHEME)?;
    let first = rest.split('/').next()?;
    (!first.is_empty()).then_some(first)
}
