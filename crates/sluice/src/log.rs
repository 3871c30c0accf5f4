//! The log's writer: serving threads append their formatted lines to one buffer, and a thread
//! of its own writes that buffer to stderr. The first line into an empty buffer wakes the
//! writer; after each write it sleeps [`EVERY`], so in a burst lines go out in batches, 50 times
//! a second, and a line costs its formatting and a short lock, no wake-up of another thread. A
//! quiet log's line is written at once. Nothing is dropped: past [`FULL`] bytes the logging
//! thread writes the buffer itself. Lines keep their order (one output lock is held from taking
//! the buffer to writing it).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

/// How long the writer thread sleeps after a write (lines logged meanwhile wait for it).
const EVERY: Duration = Duration::from_millis(20);

/// Buffered bytes past which the thread that logs writes the buffer itself (a burst the writer
/// thread does not keep up with waits, as a full queue would; nothing is dropped).
const FULL: usize = 4 * 1024 * 1024;

/// What the logging threads and the writer thread share.
struct Shared {
    /// Lines not yet written.
    lines: Mutex<Vec<u8>>,
    /// Where lines go (stderr) and the spare buffer swapped in for `lines` (so the buffer
    /// keeps its capacity), held from taking the buffer to writing it: lines keep their order.
    output: Mutex<(Box<dyn Write + Send>, Vec<u8>)>,
    /// The writer thread (woken by a line into an empty buffer, and to stop).
    writer: std::sync::OnceLock<Thread>,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Write what is buffered (a failed write is dropped: there is nowhere to report it).
    fn drain(&self) {
        let mut out = lock(&self.output);
        let (sink, spare) = &mut *out;
        std::mem::swap(spare, &mut *lock(&self.lines));
        if !spare.is_empty() {
            let _ = sink.write_all(spare);
            let _ = sink.flush();
            spare.clear();
        }
    }
}

/// The `MakeWriter` of the log: each line is appended to the shared buffer.
pub(crate) struct LogWriter(Arc<Shared>);

/// Held to the end of `main`: dropping it stops the writer thread, which writes what is still
/// buffered.
pub(crate) struct LogGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// The writer to stderr and its guard; starts the writer thread (`sluice-log`).
pub(crate) fn writer() -> (LogWriter, LogGuard) {
    writer_to(Box::new(std::io::stderr()))
}

/// The writer to `sink` and its guard.
fn writer_to(sink: Box<dyn Write + Send>) -> (LogWriter, LogGuard) {
    let shared = Arc::new(Shared {
        lines: Mutex::new(Vec::with_capacity(64 * 1024)),
        output: Mutex::new((sink, Vec::with_capacity(64 * 1024))),
        writer: std::sync::OnceLock::new(),
        stop: AtomicBool::new(false),
    });
    let own = shared.clone();
    let thread = std::thread::Builder::new()
        .name("sluice-log".into())
        .spawn(move || loop {
            std::thread::park();
            let stopping = own.stop.load(Ordering::Acquire);
            own.drain();
            if stopping {
                return;
            }
            std::thread::sleep(EVERY);
        })
        .expect("the log writer thread");
    let _ = shared.writer.set(thread.thread().clone());
    (
        LogWriter(shared.clone()),
        LogGuard {
            shared,
            thread: Some(thread),
        },
    )
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        // Lines logged while the thread stopped.
        self.shared.drain();
    }
}

/// One line's writer (what [`LogWriter`] makes per event).
pub(crate) struct Line<'a>(&'a Shared);

impl Write for Line<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (was, len) = {
            let mut lines = lock(&self.0.lines);
            let was = lines.len();
            lines.extend_from_slice(buf);
            (was, lines.len())
        };
        if len >= FULL {
            self.0.drain();
        } else if was == 0 {
            // The writer is parked, or sleeping (then it finds the wake when it parks).
            if let Some(t) = self.0.writer.get() {
                t.unpark();
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::fmt::MakeWriter;

    /// A sink the test reads back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_is_written_once_and_in_each_threads_order() {
        let sink = Sink::default();
        let (writer, guard) = writer_to(Box::new(sink.clone()));
        let writer = Arc::new(writer);
        // Lines of 1 KiB from four threads: 4 × 3,000 KiB passes FULL, so the logging threads
        // write the buffer themselves too.
        let pad = "x".repeat(1000);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (writer, pad) = (writer.clone(), &pad);
                s.spawn(move || {
                    for i in 0..3000 {
                        let line = format!("{t} {i:05} {pad}\n");
                        writer.make_writer().write_all(line.as_bytes()).unwrap();
                    }
                });
            }
        });
        drop(guard);
        let text = String::from_utf8(lock(&sink.0).clone()).unwrap();
        let mut next = [0usize; 4];
        for line in text.lines() {
            let (t, rest) = line.split_once(' ').unwrap();
            let t: usize = t.parse().unwrap();
            assert_eq!(
                rest[..5].parse::<usize>().unwrap(),
                next[t],
                "thread {t}'s order"
            );
            assert_eq!(&rest[6..], pad);
            next[t] += 1;
        }
        assert_eq!(next, [3000; 4]);
    }

    /// A sink whose first write fails (stderr closed for a moment, a full pipe).
    struct FailsOnce(Sink, bool);

    impl Write for FailsOnce {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if !self.1 {
                self.1 = true;
                return Err(std::io::Error::other("broken pipe"));
            }
            self.0.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_loses_its_batch_and_the_writer_goes_on() {
        let sink = Sink::default();
        let (writer, guard) = writer_to(Box::new(FailsOnce(sink.clone(), false)));
        writer.make_writer().write_all(b"lost\n").unwrap();
        for _ in 0..500 {
            if lock(&writer.0.lines).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        writer.make_writer().write_all(b"kept\n").unwrap();
        drop(guard);
        assert_eq!(lock(&sink.0).as_slice(), b"kept\n");
    }

    #[test]
    fn a_line_into_a_quiet_log_is_written_without_a_flush() {
        let sink = Sink::default();
        let (writer, _guard) = writer_to(Box::new(sink.clone()));
        writer.make_writer().write_all(b"one line\n").unwrap();
        for _ in 0..500 {
            if lock(&sink.0).as_slice() == b"one line\n" {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("not written after 5 s: {:?}", lock(&sink.0));
    }
}
