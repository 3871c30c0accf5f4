//! One session's view of the catalog. A legacy client whose calls go through upstream sessions
//! of its own (HTTP upstreams, stdio with `"isolation": "session"`) sees the lists those
//! sessions show: an upstream may register tools on a session after `initialize`, or announce a
//! change with `list_changed` there only. [`prepare`] opens the session's own connections before
//! its first request (the slot reads their lists as they open), and [`catalog_for`] is the
//! gateway's catalog with those lists in place of the control connection's, built once per
//! change and kept on the session. Sessions whose upstreams list the same everywhere (the usual
//! case) use the gateway's catalog itself. A per-user upstream's own lists are its principal's
//! (what the upstream lists for that user's account, in either era), from the principal's
//! connection once it has connected.

use crate::catalog::Catalog;
use crate::control;
use crate::session::Session;
use crate::state::Snapshot;
use sluice_upstream::Slot;
use std::borrow::Cow;
use std::sync::Arc;

/// Does any upstream of the snapshot give this session a connection of its own (a legacy
/// session's, or its principal's to a per-user upstream)?
fn has_own_sessions(snap: &Snapshot, session: &Session) -> bool {
    snap.slots.iter().any(|s| {
        if s.per_user().is_some() {
            session.principal_key().is_some()
        } else {
            s.per_session() && !session.is_modern()
        }
    })
}

/// The key of the session's own connection to `slot`, when it has one: its principal's for a
/// per-user upstream, else its own id for an upstream that gives each legacy session one.
fn own_key<'a>(slot: &Slot, session: &'a Session) -> Option<Cow<'a, str>> {
    if slot.per_user().is_some() {
        return session
            .principal_key()
            .map(|p| Cow::Owned(sluice_upstream::slot::user_key(p)));
    }
    (slot.per_session() && !session.is_modern()).then_some(Cow::Borrowed(session.id.as_ref()))
}

/// Open the session's own connection to every upstream that gives it one and is up, so what
/// they list is known before the session lists or calls anything. Once per session and
/// upstream; a failed open is tried again on the next request (and reported by the call).
pub(crate) async fn prepare(snap: &Snapshot, session: &Arc<Session>) {
    if !has_own_sessions(snap, session) {
        return;
    }
    // A session's own connection to an upstream that gives it one (a per-user upstream's is
    // the principal's, opened at its first call, after its consent); and a principal holding a
    // grant (in memory) whose connection is not open, so its lists are known (read as it
    // opens). Usually none: after the first request every one is open, and nothing is built.
    let needs_open = |slot: &Arc<Slot>| match slot.per_user() {
        Some(users) => session.principal_key().is_some_and(|p| {
            users.holds(p)
                && slot.is_up()
                && !slot.has_session_connection(&sluice_upstream::slot::user_key(p))
        }),
        None => {
            !session.is_modern()
                && slot.per_session()
                && slot.is_up()
                && !slot.has_session_connection(&session.id)
        }
    };
    if !snap.slots.iter().any(needs_open) {
        return;
    }
    let opens = snap.slots.iter().filter(|s| needs_open(s)).map(|slot| async move {
        if let Err(e) = slot.connection_for(session.upstream_ref()).await {
            tracing::debug!(upstream = %slot.spec.id, session = %session.id, "opening the session's own connection: {}", e.message);
        }
    });
    futures_util::future::join_all(opens).await;
}

/// The catalog `session` sees: the gateway's (borrowed: a call does not write its reference
/// count), or its own view when an upstream session of its own lists something else.
pub(crate) fn catalog_for<'a>(snap: &'a Snapshot, session: &Session) -> Cow<'a, Arc<Catalog>> {
    if !has_own_sessions(snap, session) {
        return Cow::Borrowed(&snap.catalog);
    }
    match own_catalog(snap, session) {
        Some(own) => Cow::Owned(own),
        None => Cow::Borrowed(&snap.catalog),
    }
}

/// The catalog of a session with upstream sessions of its own (`None`: they list what the
/// gateway's catalog shows).
fn own_catalog(snap: &Snapshot, session: &Session) -> Option<Arc<Catalog>> {
    let own: Vec<(usize, u64, Arc<sluice_upstream::UpstreamLists>)> = snap
        .slots
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let key = own_key(s, session)?;
            s.session_lists(&key).map(|(g, l)| (i, g, l))
        })
        .collect();
    if own.is_empty() {
        return None;
    }
    let key: Vec<(usize, u64)> = own.iter().map(|(i, g, _)| (*i, *g)).collect();
    let mut view = session.routes.view.lock();
    if let Some(c) = &view.catalog {
        if view.base == snap.catalog.version && view.key == key {
            return Some(c.clone());
        }
    }
    let lists: Vec<Option<Arc<sluice_upstream::UpstreamLists>>> = snap
        .slots
        .iter()
        .enumerate()
        .map(|(i, s)| match own.iter().find(|(j, _, _)| *j == i) {
            Some((_, _, l)) => Some(l.clone()),
            None => s.state.lock().lists.clone().map(Arc::new),
        })
        .collect();
    let pairs: Vec<_> = snap
        .slots
        .iter()
        .zip(lists.iter())
        .map(|(s, l)| (&s.spec, l.as_deref()))
        .collect();
    let (catalog, _warnings) = control::catalog_over(
        &snap.config,
        &snap.slots,
        &pairs,
        snap.catalog.version,
        snap.funnel_prefix.is_some(),
        snap.endpoint.as_deref(),
    );
    let catalog = Arc::new(catalog);
    view.base = snap.catalog.version;
    view.key = key;
    view.catalog = Some(catalog.clone());
    Some(catalog)
}
