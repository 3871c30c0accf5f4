//! A connection's events in order: a reply resolves here (the hot path, nothing handed over);
//! every other event goes to the slot's handler, and the connection's next events wait until
//! the handler says it is handled (so a notification reaches the client before the reply that
//! follows it).

use crate::{Connection, Event};
use tokio::sync::{mpsc, oneshot};

/// Run a connection's events until it closes: replies resolve here; every other event goes to
/// `handle`, which returns what to wait for before the next event (None: nothing).
pub(crate) async fn pump(
    conn: Connection,
    mut rx: mpsc::UnboundedReceiver<Event>,
    mut handle: impl FnMut(Event) -> Option<oneshot::Receiver<()>> + Send + 'static,
) {
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Reply(held) => conn.resolve(held),
            Event::Closed(_) => break,
            ev => {
                if let Some(handled) = handle(ev) {
                    let _ = handled.await;
                }
            }
        }
        conn.event_done();
    }
}
