//! A handshake-era call whose POST runs in the caller's own future ([`InlineReply`]): the POST,
//! and the reply it (or anything else) delivers, awaited together without the task waking
//! itself.
//!
//! Why it matters: the POST hands the reply over through the call's `oneshot`. Were the
//! receiver polled with the task's own waker, that hand-over, made inside the task's own poll,
//! would mark the running task notified; tokio then treats the task's next wait as a yield and
//! wakes another worker thread to steal it (a futex wake and a context switch on every call).
//! So the receiver is polled with a waker that stays quiet while the POST is being polled, and
//! is looked at right after it, in the same poll.

use crate::core::Answer;
use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use tokio::sync::oneshot;

/// A POST run by the caller's future; if that future is dropped before the POST ends, the
/// rest of it runs in a task of its own (so giving up on a reply never cuts a request off
/// mid-flight).
pub(crate) struct Detached(Option<Pin<Box<dyn Future<Output = ()> + Send>>>);

impl Detached {
    /// Run `post` in the caller's future (`None`: nothing to run here).
    pub(crate) fn new(post: Option<Pin<Box<dyn Future<Output = ()> + Send>>>) -> Detached {
        Detached(post)
    }

    /// Is the POST still running here?
    fn running(&self) -> bool {
        self.0.is_some()
    }
}

impl Future for Detached {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(f) = self.0.as_mut() else {
            return Poll::Ready(());
        };
        let done = f.as_mut().poll(cx);
        if done.is_ready() {
            self.0 = None;
        }
        done
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if let Some(rest) = self.0.take() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(rest);
            }
        }
    }
}

/// The waker the reply's receiver is polled with: the task's, except while the task itself
/// is polling the POST (a wake then is made by, or races with, that poll; the receiver is
/// polled right after it either way).
#[derive(Default)]
struct Quiet {
    state: Mutex<QuietState>,
}

#[derive(Default)]
struct QuietState {
    task: Option<Waker>,
    muted: bool,
}

impl Quiet {
    fn mute(&self, on: bool) {
        self.state.lock().muted = on;
    }

    fn register(&self, waker: &Waker) {
        let mut st = self.state.lock();
        if !st.task.as_ref().is_some_and(|w| w.will_wake(waker)) {
            st.task = Some(waker.clone());
        }
    }
}

impl Wake for Quiet {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Under the lock: a wake that sees `muted` happened before the task unmutes and polls
        // the receiver, so the task sees what the waker's caller delivered.
        let st = self.state.lock();
        if !st.muted {
            if let Some(w) = &st.task {
                w.wake_by_ref();
            }
        }
    }
}

/// The reply to a call whose POST (if any) runs here: resolves with what the receiver gets.
pub(crate) struct InlineReply {
    post: Detached,
    rx: oneshot::Receiver<Answer>,
    /// Set while the POST runs here.
    quiet: Option<(Arc<Quiet>, Waker)>,
}

impl InlineReply {
    /// Await `rx`, running `post` here meanwhile.
    pub(crate) fn new(post: Detached, rx: oneshot::Receiver<Answer>) -> Self {
        let quiet = post.running().then(|| {
            let q = Arc::new(Quiet::default());
            let w = Waker::from(q.clone());
            (q, w)
        });
        InlineReply { post, rx, quiet }
    }
}

impl Future for InlineReply {
    type Output = Result<Answer, oneshot::error::RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.post.running() {
            if let Some((q, _)) = &this.quiet {
                q.mute(true);
                let _ = Pin::new(&mut this.post).poll(cx);
                q.mute(false);
            }
        }
        match &this.quiet {
            // The POST ran here: the receiver wakes the task through `Quiet`.
            Some((q, w)) => {
                q.register(cx.waker());
                Pin::new(&mut this.rx).poll(&mut Context::from_waker(w))
            }
            None => Pin::new(&mut this.rx).poll(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts the wakes it gets.
    struct Counter(AtomicUsize);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Counter>, Waker) {
        let c = Arc::new(Counter(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    /// A reply the POST delivers during its own poll resolves at once, and the task is not
    /// woken for it.
    #[test]
    fn a_reply_delivered_by_the_post_does_not_wake_the_task() {
        let (tx, rx) = oneshot::channel();
        let mut tx = Some(tx);
        let mut polls = 0;
        let post = std::future::poll_fn(move |_cx| {
            polls += 1;
            if polls == 2 {
                let _ = tx
                    .take()
                    .expect("sent once")
                    .send(Answer::Reply(sluice_core::Message::notification("x", None)));
            }
            Poll::<()>::Pending
        });
        let mut reply = Box::pin(InlineReply::new(Detached::new(Some(Box::pin(post))), rx));
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        assert!(reply.as_mut().poll(&mut cx).is_pending());
        let Poll::Ready(Ok(Answer::Reply(msg))) = reply.as_mut().poll(&mut cx) else {
            panic!("the reply the POST delivered is there in the same poll")
        };
        assert_eq!(msg.method(), Some("x"));
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "the task woke itself");
    }

    /// A reply delivered from elsewhere while the task waits wakes it.
    #[test]
    fn a_reply_delivered_from_elsewhere_wakes_the_task() {
        let (tx, rx) = oneshot::channel();
        let post = std::future::pending::<()>();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let _guard = rt.enter();
        let mut reply = Box::pin(InlineReply::new(Detached::new(Some(Box::pin(post))), rx));
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        assert!(reply.as_mut().poll(&mut cx).is_pending());
        let _ = tx.send(Answer::Reply(sluice_core::Message::notification("y", None)));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        let Poll::Ready(Ok(Answer::Reply(msg))) = reply.as_mut().poll(&mut cx) else {
            panic!("the reply is there after the wake")
        };
        assert_eq!(msg.method(), Some("y"));
    }
}
