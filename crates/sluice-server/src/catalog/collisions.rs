//! Names two upstreams both produce (a tool, a prompt, a resource URI), found before a catalog
//! is built, for `"on_collision": "error"`: such a name is listed for neither. The naming and
//! the finding are `sluice-config`'s (`sluice check --lists` finds them the same way).

use sluice_config::{Collisions, ExposeEntry, ExposeFile, Listed, UpstreamSpec};
use sluice_upstream::UpstreamLists;

/// Every name of the live upstreams' lists that more than one of them produces.
pub(super) fn find(
    upstreams: &[(&UpstreamSpec, Option<&UpstreamLists>)],
    expose: &[ExposeEntry],
) -> Collisions {
    let listed: Vec<(&UpstreamSpec, Listed<'_>)> = upstreams
        .iter()
        .filter_map(|(spec, lists)| Some((*spec, (*lists)?.listed(spec))))
        .collect();
    ExposeFile::collisions(&listed, expose)
}

/// The warnings for the log, one per name.
pub(super) fn warnings(c: &Collisions) -> Vec<String> {
    c.lines()
        .into_iter()
        .map(|l| {
            format!("{l}; with on_collision \"error\" it is listed for none of them (rename one with `as`)")
        })
        .collect()
}
