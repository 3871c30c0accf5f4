//! W3C trace context (`traceparent`) and the ids of traces and spans.
//!
//! Ids need to be unique, not secret: they come from `fastrand`'s per-thread generator
//! (nanoseconds, no system call per id).

use data_encoding::HEXLOWER;

/// The W3C trace context of one span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanContext {
    /// The trace id (never all zeros).
    pub trace_id: [u8; 16],
    /// The span id (never all zeros).
    pub span_id: [u8; 8],
    /// Is the trace recorded (the `01` flag)?
    pub sampled: bool,
}

impl SpanContext {
    /// Parse a `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`; a later version may append
    /// fields). Invalid or all-zero ids: None.
    pub fn parse(s: &str) -> Option<SpanContext> {
        let s = s.trim();
        let mut parts = s.split('-');
        let version = parts.next()?;
        let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
        if version == "ff" || unhex::<1>(version).is_none() {
            return None;
        }
        if version == "00" && parts.next().is_some() {
            return None;
        }
        let (trace_id, span_id, flag) =
            (unhex::<16>(trace)?, unhex::<8>(span)?, unhex::<1>(flags)?);
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(SpanContext {
            trace_id,
            span_id,
            sampled: flag[0] & 1 == 1,
        })
    }

    /// The `traceparent` value naming this span as the parent.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{}",
            hex(&self.trace_id),
            hex(&self.span_id),
            if self.sampled { "01" } else { "00" }
        )
    }

    /// A new span in the same trace.
    pub(crate) fn child(&self) -> SpanContext {
        SpanContext {
            span_id: span_id(),
            ..*self
        }
    }

    /// The first span of a new, sampled trace.
    pub(crate) fn root() -> SpanContext {
        SpanContext {
            trace_id: fastrand::u128(1..).to_be_bytes(),
            span_id: span_id(),
            sampled: true,
        }
    }
}

/// `N` bytes from exactly `2 * N` lowercase hex digits.
fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    HEXLOWER.decode(s.as_bytes()).ok()?.try_into().ok()
}

/// Lowercase hex (ids in `traceparent` and in OTLP JSON).
pub(crate) fn hex(bytes: &[u8]) -> String {
    HEXLOWER.encode(bytes)
}

/// A new span id (never all zeros).
fn span_id() -> [u8; 8] {
    fastrand::u64(1..).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_bad_values() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let ctx = SpanContext::parse(tp).unwrap();
        assert!(ctx.sampled);
        assert_eq!(ctx.traceparent(), tp);
        let unsampled =
            SpanContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!unsampled.sampled);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        ] {
            assert_eq!(SpanContext::parse(bad), None, "{bad}");
        }
        // A later version may append fields.
        assert!(
            SpanContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
                .is_some()
        );
        let child = ctx.child();
        assert_eq!(child.trace_id, ctx.trace_id);
        assert_ne!(child.span_id, ctx.span_id);
        let (a, b) = (SpanContext::root(), SpanContext::root());
        assert_ne!(a.trace_id, b.trace_id);
        assert_eq!(hex(&[0, 1, 0xab, 0xff]), "0001abff");
    }
}
