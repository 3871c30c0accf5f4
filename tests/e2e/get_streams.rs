//! GET requests served on the bare connection (`transport/bare_get.rs`), without hyper: the
//! same bytes on the wire as hyper writes (compared with a GET that hyper serves, pipelined
//! behind a POST), the hand-over both ways on one kept-alive connection, the client's end
//! noticed while a stream is idle, and the requests that stay with hyper. Raw TCP; every wait
//! is bounded.

use serde_json::json;
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// A gateway over a stdio fixture `fx`, and a client with a session.
async fn gateway(label: &str) -> (Home, sluice_e2e::Proc, String, Client) {
    let home = Home::new(label);
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let (gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    (home, gw, url, c)
}

fn host_of(url: &str) -> String {
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string()
}

fn get(host: &str, path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n")
}

fn get_stream(host: &str, session: &str) -> String {
    get(
        host,
        "/mcp",
        &format!("Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"),
    )
}

/// A POST that hyper serves (a notification without a session: 400, a JSON body).
fn post(host: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// One response read off the connection: the head (the `date` value masked) and the body
/// (whole with `content-length`; for a chunked stream, the head only).
async fn response(s: &mut TcpStream, buf: &mut Vec<u8>) -> (String, String) {
    let read = async {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end + 4]).into_owned();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .map(|n| n.trim().parse::<usize>().expect("a length"));
                let want = end + 4 + len.unwrap_or(0);
                if buf.len() >= want {
                    let body = String::from_utf8_lossy(&buf[end + 4..want]).into_owned();
                    buf.drain(..want);
                    return (mask_date(&head), body);
                }
            }
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.expect("read");
            assert!(n > 0, "the gateway closed the connection; read: {buf:?}");
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    timeout(Duration::from_secs(10), read)
        .await
        .expect("a response within 10 s")
}

fn mask_date(head: &str) -> String {
    head.lines()
        .map(|l| {
            if l.starts_with("date: ") {
                assert_eq!(l.len(), "date: Sun, 06 Nov 1994 08:49:37 GMT".len(), "{l}");
                "date: <date>"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

/// Read from `s` onto `buf` until `found` picks something out of the chunks read so far.
async fn read_until<T>(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    found: impl Fn(Vec<String>) -> Option<T>,
) -> T {
    loop {
        if let Some(t) = found(chunks(buf)) {
            return t;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.expect("read");
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The complete chunks at the start of a chunked body.
fn chunks(mut body: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..eol]).expect("a chunk size");
        let size = usize::from_str_radix(size, 16).expect("a hex chunk size");
        let start = eol + 2;
        if body.len() < start + size + 2 {
            break;
        }
        assert_eq!(&body[start + size..start + size + 2], b"\r\n");
        out.push(String::from_utf8_lossy(&body[start..start + size]).into_owned());
        body = &body[start + size + 2..];
    }
    out
}

/// Whether the peer closes the connection within `within`.
async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    timeout(within, read).await.is_ok()
}

#[tokio::test]
async fn a_get_served_without_hyper_is_byte_for_byte_what_hyper_writes() {
    let (_home, _gw, url, c) = gateway("bare-get-bytes").await;
    let host = host_of(&url);
    let session = c.session.clone().expect("a session");
    let requests = [
        // no session: 400 with a JSON-RPC error
        get(&host, "/mcp", "Accept: text/event-stream\r\n"),
        // unknown session: 404
        get(&host, "/mcp", "Accept: text/event-stream\r\nMcp-Session-Id: nope\r\nMCP-Protocol-Version: 2025-11-25\r\n"),
        // wrong Accept: 406
        get(&host, "/mcp", "Accept: application/json\r\nConnection: keep-alive\r\n"),
        // another path: 404, an empty body
        get(&host, "/elsewhere", ""),
        // no authentication configured: 404, an empty body
        get(&host, "/.well-known/oauth-protected-resource", ""),
        // a malformed Last-Event-ID: 400
        get(&host, "/mcp", &format!("Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\nLast-Event-ID: junk\r\n")),
    ];
    for req in requests {
        // Bare: the first request on a connection of its own.
        let mut bare = TcpStream::connect(&host).await.unwrap();
        bare.write_all(req.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        let got = response(&mut bare, &mut buf).await;
        // Hyper: the same GET pipelined behind a POST (read with it, so hyper parses it).
        let mut hyper = TcpStream::connect(&host).await.unwrap();
        hyper
            .write_all(format!("{}{req}", post(&host)).as_bytes())
            .await
            .unwrap();
        let mut hbuf = Vec::new();
        let (post_head, _) = response(&mut hyper, &mut hbuf).await;
        assert!(
            post_head.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{post_head}"
        );
        let want = response(&mut hyper, &mut hbuf).await;
        assert_eq!(got, want, "for {req:?}");
        assert!(!got.0.contains("transfer-encoding"), "{}", got.0);
    }
    // The stream itself: the same head.
    let mut bare = TcpStream::connect(&host).await.unwrap();
    bare.write_all(get_stream(&host, &session).as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    let (head, _) = response(&mut bare, &mut buf).await;
    drop(bare);
    // Hyper's, once the bare one has ended (one GET stream per session).
    let want = timeout(Duration::from_secs(10), async {
        loop {
            let mut hyper = TcpStream::connect(&host).await.unwrap();
            hyper
                .write_all(format!("{}{}", post(&host), get_stream(&host, &session)).as_bytes())
                .await
                .unwrap();
            let mut hbuf = Vec::new();
            response(&mut hyper, &mut hbuf).await;
            let (h, _) = response(&mut hyper, &mut hbuf).await;
            if !h.starts_with("HTTP/1.1 409") {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the GET slot freed within 10 s");
    assert_eq!(head, want);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("\r\ncontent-type: text/event-stream\r\n")
            && head.contains("\r\ntransfer-encoding: chunked\r\n"),
        "{head}"
    );
}

#[tokio::test]
async fn one_kept_alive_connection_goes_from_hyper_to_the_bare_server_and_back() {
    let (_home, _gw, url, c) = gateway("bare-get-handover").await;
    let host = host_of(&url);
    let session = c.session.clone().expect("a session");
    let mut s = TcpStream::connect(&host).await.unwrap();
    let mut buf = Vec::new();
    // POST (hyper), GET (bare), POST (hyper again), then the GET stream (bare), on one connection.
    s.write_all(post(&host).as_bytes()).await.unwrap();
    let (head, body) = response(&mut s, &mut buf).await;
    assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
    assert!(body.contains("Mcp-Session-Id"), "{body}");
    s.write_all(get(&host, "/mcp", "Accept: text/event-stream\r\nMcp-Session-Id: nope\r\nMCP-Protocol-Version: 2025-11-25\r\n").as_bytes())
        .await
        .unwrap();
    let (head, body) = response(&mut s, &mut buf).await;
    assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"), "{head}");
    assert!(body.contains("-32001"), "{body}");
    s.write_all(post(&host).as_bytes()).await.unwrap();
    let (head, _) = response(&mut s, &mut buf).await;
    assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
    s.write_all(get_stream(&host, &session).as_bytes())
        .await
        .unwrap();
    let (head, _) = response(&mut s, &mut buf).await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    // An event reaches the stream, chunked.
    let r = c.call_tool("fx_trigger_list_changed", json!({})).await;
    assert_eq!(r["result"]["content"][0]["text"], json!("ok"));
    let data = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
    let read = read_until(&mut s, &mut buf, |c| {
        c.into_iter().find(|c| c.ends_with(data))
    });
    let frame = timeout(Duration::from_secs(10), read)
        .await
        .expect("the event within 10 s");
    assert!(frame.starts_with("event: message\nid: 0-"), "{frame:?}");
    // A silent stream sends its keep-alive comment (every 15 s), chunked like the events.
    let seen = chunks(&buf).len();
    let read = read_until(&mut s, &mut buf, |c| c.into_iter().nth(seen));
    let next = timeout(Duration::from_secs(25), read)
        .await
        .expect("a keep-alive within 25 s");
    assert_eq!(next, ": keep-alive\n\n");
    // A second GET stream for the session is refused while this one is open.
    assert_eq!(c.open_get(None).await.status(), 409);
    // The client goes: the gateway notices (with nothing to write) and frees the GET slot.
    drop(s);
    let freed = timeout(Duration::from_secs(10), async {
        loop {
            let r = c.open_get(None).await;
            if r.status() == 200 {
                return;
            }
            assert_eq!(r.status(), 409);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(freed.is_ok(), "the GET slot was not freed within 10 s");
}

#[tokio::test]
async fn gets_the_bare_server_does_not_take_stay_with_hyper() {
    let (_home, _gw, url, _c) = gateway("bare-get-hyper").await;
    let host = host_of(&url);
    // `Connection: close`: hyper answers and closes.
    let mut s = TcpStream::connect(&host).await.unwrap();
    s.write_all(
        get(
            &host,
            "/mcp",
            "Accept: text/event-stream\r\nConnection: close\r\n",
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = Vec::new();
    let (head, body) = response(&mut s, &mut buf).await;
    assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
    assert!(body.contains("Mcp-Session-Id"), "{body}");
    assert!(closed_within(&mut s, Duration::from_secs(5)).await);
    // A GET with a body (Content-Length) and an HTTP/1.0 GET are hyper's too.
    for req in [
        format!("GET /mcp HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\nContent-Length: 2\r\n\r\n{{}}"),
        format!("GET /mcp HTTP/1.0\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n"),
    ] {
        let mut s = TcpStream::connect(&host).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        let (head, body) = response(&mut s, &mut buf).await;
        assert!(head.contains(" 400 Bad Request\r\n"), "{head}");
        assert!(body.contains("Mcp-Session-Id"), "{body}");
    }
    // A malformed head: hyper's own 400.
    let mut s = TcpStream::connect(&host).await.unwrap();
    s.write_all(b"GET /mcp HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let (head, _) = response(&mut s, &mut buf).await;
    assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
    assert!(closed_within(&mut s, Duration::from_secs(5)).await);
}
