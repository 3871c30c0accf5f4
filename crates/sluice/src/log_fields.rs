//! How a log line's time and fields are written: as tracing-subscriber's defaults write them
//! (RFC 3339 in UTC to the microsecond; the message, then `name=value` pairs, strings quoted,
//! names painted on a terminal), at a part of their cost (the explain hook logs a line per
//! call), and with every control character of every value escaped, where the default escapes
//! the message only: a `%`-shown value (the explain hook's reason, an upstream's error) with a
//! newline in it could forge a line of its own.

use std::cell::RefCell;
use std::fmt::{self, Write};
use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::Writer;

/// The log lines' time (`tracing_subscriber::fmt().with_timer(Time)`): each thread keeps the
/// date and time to the second it wrote last, and writes only the microseconds anew within
/// that second.
pub(crate) struct Time;

thread_local! {
    /// The second last written on this thread, and its text up to the `.`.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

impl tracing_subscriber::fmt::time::FormatTime for Time {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        write_time(w, now.as_micros())
    }
}

/// Write the time `micros` after the epoch, as [`sluice_core::time::rfc3339_micros`] does.
fn write_time(w: &mut impl Write, micros: u128) -> fmt::Result {
    let secs = (micros / 1_000_000) as u64;
    let mut frac = (micros % 1_000_000) as u32;
    SECOND.with_borrow_mut(|(second, text)| {
        if *second != secs {
            let full = sluice_core::time::rfc3339_micros(u128::from(secs) * 1_000_000);
            *text = full[..full.len() - 8].to_string();
            *second = secs;
        }
        w.write_str(text)
    })?;
    let mut digits = *b".000000Z";
    for d in digits[1..7].iter_mut().rev() {
        *d = b'0' + (frac % 10) as u8;
        frac /= 10;
    }
    w.write_str(std::str::from_utf8(&digits).map_err(|_| fmt::Error)?)
}

/// The field formatter (`tracing_subscriber::fmt().fmt_fields(Fields)`).
pub(crate) struct Fields;

impl<'w> MakeVisitor<Writer<'w>> for Fields {
    type Visitor = FieldWriter<'w>;

    fn make_visitor(&self, target: Writer<'w>) -> FieldWriter<'w> {
        FieldWriter {
            ansi: target.has_ansi_escapes(),
            writer: target,
            first: true,
            result: Ok(()),
        }
    }
}

/// Writes one event's (or span's) fields.
pub(crate) struct FieldWriter<'w> {
    writer: Writer<'w>,
    ansi: bool,
    first: bool,
    result: fmt::Result,
}

impl FieldWriter<'_> {
    /// Start a field: the space before it, and `name=` unless it is the message.
    fn start(&mut self, field: &Field) -> bool {
        if self.result.is_err() {
            return false;
        }
        let name = field.name();
        // Metadata of `log` records, already shown where the line shows them.
        if name.starts_with("log.") {
            return false;
        }
        if !self.first {
            self.result = self.writer.write_char(' ');
        }
        self.first = false;
        if name == "message" {
            return self.result.is_ok();
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.result = if self.ansi {
            write!(self.writer, "\x1b[3m{name}\x1b[0m\x1b[2m=\x1b[0m")
        } else {
            self.writer
                .write_str(name)
                .and_then(|_| self.writer.write_char('='))
        };
        self.result.is_ok()
    }
}

impl Visit for FieldWriter<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.start(field) {
            return;
        }
        self.result = if field.name() == "message" {
            Escaping(&mut self.writer).write_str(value)
        } else if value
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        {
            // What `{:?}` writes for a string with nothing to escape, without its walk.
            self.writer
                .write_char('"')
                .and_then(|_| self.writer.write_str(value))
                .and_then(|_| self.writer.write_char('"'))
        } else {
            write!(self.writer, "{value:?}")
        };
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if !self.start(field) {
            return;
        }
        let mut out = Escaping(&mut self.writer);
        let mut result = write!(out, "{value}");
        if let Some(mut source) = value.source() {
            let name = field.name();
            result = result.and_then(|_| write!(out, " {name}.sources=[{source}"));
            while let Some(next) = source.source() {
                result = result.and_then(|_| write!(out, ", {next}"));
                source = next;
            }
            result = result.and_then(|_| out.write_char(']'));
        }
        self.result = result;
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !self.start(field) {
            return;
        }
        self.result = write!(Escaping(&mut self.writer), "{value:?}");
    }
}

impl VisitOutput<fmt::Result> for FieldWriter<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for FieldWriter<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

/// Writes what it is given with its control characters escaped: `\n`, `\r` and `\t` as such,
/// the other C0 ones and DEL as `\xNN`, the C1 ones as `\u{NN}` (as tracing-subscriber escapes
/// a message's).
struct Escaping<'a, W: Write>(&'a mut W);

/// A control character: C0, DEL, or C1 (`U+0080`–`U+009F`).
fn is_control(c: char) -> bool {
    c.is_control()
}

impl<W: Write> Write for Escaping<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // C1 characters are two bytes from 0xC2: a text with no byte below 0x20, no DEL and no
        // 0xC2 has none to escape.
        if !s.bytes().any(|b| b < 0x20 || b == 0x7f || b == 0xc2) {
            return self.0.write_str(s);
        }
        let mut plain = 0;
        for (at, c) in s.char_indices() {
            if !is_control(c) {
                continue;
            }
            self.0.write_str(&s[plain..at])?;
            match c {
                '\n' => self.0.write_str("\\n")?,
                '\r' => self.0.write_str("\\r")?,
                '\t' => self.0.write_str("\\t")?,
                c if (c as u32) < 0x80 => write!(self.0, "\\x{:02x}", c as u32)?,
                c => write!(self.0, "\\u{{{:x}}}", c as u32)?,
            }
            plain = at + c.len_utf8();
        }
        self.0.write_str(&s[plain..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::{Arc, Mutex};

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// What lines a subscriber writes for what `log` logs: with these fields (`ours`) or with
    /// tracing-subscriber's own; painted for a terminal or not.
    fn written(ours: bool, ansi: bool, log: impl FnOnce()) -> String {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let builder = tracing_subscriber::fmt()
            .without_time()
            .with_ansi(ansi)
            .with_target(false)
            .with_writer(move || Sink(sink.clone()));
        if ours {
            tracing::subscriber::with_default(builder.fmt_fields(Fields).finish(), log);
        } else {
            tracing::subscriber::with_default(builder.finish(), log);
        }
        let out = buf.lock().unwrap().clone();
        String::from_utf8(out).unwrap()
    }

    fn lines(log: impl FnOnce()) -> String {
        written(true, false, log)
    }

    #[test]
    fn ordinary_lines_are_written_as_the_default_writes_them() {
        let log = || {
            let reason = "to check the weather";
            let tool = "get_forecast";
            tracing::info!(session = %"ab12", tool = tool, reason = %reason, "explain");
            tracing::warn!(upstream = "fx", n = 3, ok = true, list = ?["a", "b"], "upstream down: {}", "the connection closed");
            tracing::info!(r#type = "x", quoted = "say \"hi\"", "plain message");
            let err = io::Error::other("inner");
            let e: &(dyn std::error::Error + 'static) = &err;
            tracing::error!(error = e, "failed");
            let span = tracing::info_span!("call", id = 7, method = "tools/call");
            let _in = span.enter();
            tracing::info!("inside");
        };
        let ours = lines(log);
        assert_eq!(ours, written(false, false, log));
        assert_eq!(written(true, true, log), written(false, true, log));
        assert_eq!(
            ours.lines().next(),
            Some(r#" INFO explain session=ab12 tool="get_forecast" reason=to check the weather"#)
        );
        assert_eq!(ours.lines().count(), 5, "{ours}");
    }

    #[test]
    fn times_are_written_as_rfc3339_micros_writes_them() {
        let second = 1_796_000_000_000_000u128;
        for us in [
            0,
            7,
            second,
            second + 123_456,
            second + 999_999,
            second + 1_000_000,
            second + 1_000_001,
            second,
            253_402_300_799_999_999,
            253_402_300_800_000_001,
        ] {
            let mut out = String::new();
            write_time(&mut out, us).unwrap();
            assert_eq!(out, sluice_core::time::rfc3339_micros(us), "{us}");
        }
    }

    #[test]
    fn control_characters_in_values_are_escaped() {
        let out = lines(|| {
            let reason = "fine\n2026-12-04T00:00:00Z  INFO forged line\r\x1b[31m\u{9b}\ttab";
            tracing::info!(reason = %reason, text = "a\nb", "explain \x07{}", "\x7f");
        });
        assert_eq!(
            out,
            " INFO explain \\x07\\x7f reason=fine\\n2026-12-04T00:00:00Z  INFO forged line\\r\\x1b[31m\\u{9b}\\ttab text=\"a\\nb\"\n"
        );
        assert_eq!(out.lines().count(), 1);
    }
}
