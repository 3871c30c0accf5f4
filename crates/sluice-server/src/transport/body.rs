//! Reading a POST body whole, within its limits: at most `max_body_bytes` (413), all of it
//! within `body_timeout_ms` (408), and never slower than `min_body_bytes_per_sec` on average
//! once the allowance (the header timeout, shorter under overload) has passed: a body that
//! arrives slower is cut (408, counted as an overload action).
//!
//! The deadline is that of Apache's `mod_reqtimeout` with `MinRate`: the allowance, plus a
//! second for every `min_body_bytes_per_sec` bytes received, and never past the body timeout.
//! A body that is whole at the first look (most are: it came with the head) is read without a
//! timer; only a body still arriving gets one, and looks at the rate again at most once a second.

use axum::body::{Body, Bytes};
use futures_util::FutureExt;
use http_body_util::BodyExt;
use std::time::Duration;
use tokio::time::Instant;

/// Why a body was not read.
#[derive(Debug, PartialEq)]
pub(super) enum BodyError {
    /// Larger than the limit (or the client's stream failed).
    TooLarge,
    /// Not whole within the body timeout.
    TimedOut,
    /// Arriving slower than the minimum rate.
    TooSlow,
}

/// The limits a body is read within.
pub(super) struct Limits {
    /// `max_body_bytes`.
    pub(super) max: usize,
    /// `body_timeout_ms`.
    pub(super) within: Duration,
    /// `min_body_bytes_per_sec` (0: no minimum).
    pub(super) min_rate: u64,
}

/// Read `body` whole within `limits`; `allowance` says how long the body may take before its
/// rate counts (asked again as it goes: it shrinks under overload).
pub(super) async fn read(
    body: Body,
    limits: &Limits,
    allowance: impl Fn() -> Duration,
) -> Result<Bytes, BodyError> {
    let mut body = body;
    let start = Instant::now();
    let hard = start + limits.within;
    // When the body must be whole by, given `got` bytes so far.
    let due = |got: usize| -> Instant {
        if limits.min_rate == 0 {
            return hard;
        }
        let earned = Duration::from_secs_f64(got as f64 / limits.min_rate as f64);
        hard.min(start + allowance() + earned)
    };
    // The first piece alone (most bodies are one), the others after it.
    let mut first: Option<Bytes> = None;
    let mut rest: Vec<Bytes> = Vec::new();
    let mut got = 0usize;
    let mut keep = |data: Bytes, got: &mut usize| -> Result<(), BodyError> {
        *got += data.len();
        if *got > limits.max {
            return Err(BodyError::TooLarge);
        }
        match first {
            None => first = Some(data),
            Some(_) => rest.push(data),
        }
        Ok(())
    };
    // A body whole at the first look (it came with the head) is read without a timer.
    let mut whole = false;
    loop {
        match body.frame().now_or_never() {
            Some(None) => {
                whole = true;
                break;
            }
            Some(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    keep(data, &mut got)?;
                }
            }
            Some(Some(Err(_))) => return Err(BodyError::TooLarge),
            None => break,
        }
    }
    if !whole {
        let mut deadline = due(got);
        let timer = tokio::time::sleep_until(deadline.min(Instant::now() + Duration::from_secs(1)));
        tokio::pin!(timer);
        loop {
            tokio::select! {
                biased;
                frame = body.frame() => match frame {
                    None => break,
                    Some(Ok(frame)) => {
                        let Ok(data) = frame.into_data() else { continue };
                        keep(data, &mut got)?;
                        if limits.min_rate != 0 {
                            deadline = due(got);
                            timer.as_mut().reset(deadline.min(Instant::now() + Duration::from_secs(1)));
                        }
                    }
                    Some(Err(_)) => return Err(BodyError::TooLarge),
                },
                () = &mut timer => {
                    let now = Instant::now();
                    if now >= hard {
                        return Err(BodyError::TimedOut);
                    }
                    // The allowance may have shrunk since (overload): look again.
                    deadline = due(got);
                    if now >= deadline {
                        return Err(BodyError::TooSlow);
                    }
                    timer.as_mut().reset(deadline.min(now + Duration::from_secs(1)));
                }
            }
        }
    }
    Ok(match first {
        None => Bytes::new(),
        Some(one) if rest.is_empty() => one,
        Some(one) => {
            let mut all = Vec::with_capacity(got);
            all.extend_from_slice(&one);
            for piece in &rest {
                all.extend_from_slice(piece);
            }
            Bytes::from(all)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    /// A body sent in `parts`, `gap` apart.
    fn dribbled(parts: Vec<&'static str>, gap: Duration) -> Body {
        let stream = futures_util::stream::iter(parts).then(move |p| async move {
            tokio::time::sleep(gap).await;
            Ok::<_, std::convert::Infallible>(Bytes::from_static(p.as_bytes()))
        });
        Body::from_stream(stream)
    }

    fn limits(min_rate: u64) -> Limits {
        Limits {
            max: 64,
            within: Duration::from_secs(30),
            min_rate,
        }
    }

    #[tokio::test]
    async fn a_whole_body_is_read_and_one_past_the_limit_is_refused() {
        let (usual, slow) = (limits(1024), limits(1));
        let got = read(Body::from("{\"a\":1}"), &usual, || Duration::from_secs(10)).await;
        assert_eq!(got.unwrap(), Bytes::from_static(b"{\"a\":1}"));
        let parts = vec!["ab", "cd", "ef"];
        let got = read(dribbled(parts, Duration::from_millis(10)), &slow, || {
            Duration::from_secs(10)
        })
        .await;
        assert_eq!(got.unwrap(), Bytes::from_static(b"abcdef"));
        let big = Body::from("x".repeat(65));
        assert_eq!(
            read(big, &limits(0), || Duration::ZERO).await,
            Err(BodyError::TooLarge)
        );
    }

    #[tokio::test]
    async fn a_body_slower_than_the_rate_is_cut_after_the_allowance() {
        // A byte every 200 ms against 100 bytes a second after a 300 ms allowance: cut near
        // 310 ms.
        let parts = vec!["a"; 20];
        let start = Instant::now();
        let got = read(
            dribbled(parts, Duration::from_millis(200)),
            &limits(100),
            || Duration::from_millis(300),
        )
        .await;
        assert_eq!(got, Err(BodyError::TooSlow));
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(2),
            "{took:?}"
        );
        // Without a minimum rate only the body timeout applies.
        let parts = vec!["a"; 20];
        let strict = Limits {
            within: Duration::from_millis(500),
            ..limits(0)
        };
        let got = read(dribbled(parts, Duration::from_millis(200)), &strict, || {
            Duration::ZERO
        })
        .await;
        assert_eq!(got, Err(BodyError::TimedOut));
    }
}
