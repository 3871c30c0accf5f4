//! The `pii` response control: personal data and secrets in a reply become typed placeholders
//! (`[EMAIL]`, `[PHONE]`, `[CARD]`, `[IBAN]`, `[SSN]`, `[IP]`, `[JWT]`, `[PRIVATE_KEY]`,
//! `[SECRET]`) in every string of the reply — text blocks, structured content, embedded
//! resources. Candidates are found with regexes and then checked (payment cards by issuer
//! prefix, length and Luhn; IBANs by country length and mod-97; SSNs by their reserved ranges;
//! IP addresses by parsing), so a number that only looks like one is left alone.

use regex::{Captures, Regex, RegexSet};
use serde_json::{Map, Value};
use sluice_config::builtin::PiiOptions;
use sluice_config::OptionError;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

/// A kind of personal data or secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PiiKind {
    /// Email addresses.
    Email,
    /// Phone numbers: international (`+` and 8–15 digits) and North-American with separators.
    Phone,
    /// Payment card numbers (issuer prefix, length, Luhn).
    Card,
    /// IBANs (country length, mod-97 checksum).
    Iban,
    /// US social security numbers (`123-45-6789`, reserved ranges excluded).
    Ssn,
    /// IPv4 and IPv6 addresses.
    Ip,
    /// JSON Web Tokens.
    Jwt,
    /// PEM private keys.
    PrivateKey,
    /// API keys and secrets: AWS, GitHub, GitLab, Slack, OpenAI/Anthropic `sk-`, Stripe, Google,
    /// `Bearer` tokens, and `api_key=` / `password:` style assignments.
    Secret,
}

impl PiiKind {
    /// Every kind, in the order they are looked for.
    pub const ALL: [PiiKind; 9] = [
        PiiKind::PrivateKey,
        PiiKind::Jwt,
        PiiKind::Secret,
        PiiKind::Email,
        PiiKind::Iban,
        PiiKind::Card,
        PiiKind::Ssn,
        PiiKind::Ip,
        PiiKind::Phone,
    ];

    /// The name used in options, placeholders and counts (`EMAIL`, …).
    pub fn name(self) -> &'static str {
        match self {
            PiiKind::Email => "EMAIL",
            PiiKind::Phone => "PHONE",
            PiiKind::Card => "CARD",
            PiiKind::Iban => "IBAN",
            PiiKind::Ssn => "SSN",
            PiiKind::Ip => "IP",
            PiiKind::Jwt => "JWT",
            PiiKind::PrivateKey => "PRIVATE_KEY",
            PiiKind::Secret => "SECRET",
        }
    }

    /// Parse a kind name (case-insensitive).
    pub fn parse(s: &str) -> Option<PiiKind> {
        PiiKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
    }

    /// The placeholder that replaces a match: `[EMAIL]`, …
    pub fn placeholder(self) -> String {
        format!("[{}]", self.name())
    }
}

/// Checks a regex candidate `hay[start..end]`; returns the end of the accepted match (the
/// candidate may be cut shorter), or `None` to leave it.
type Check = fn(hay: &str, start: usize, end: usize) -> Option<usize>;

struct Detector {
    kind: PiiKind,
    regex: Regex,
    /// The capture group replaced (0 = the whole match).
    group: usize,
    check: Check,
}

fn accept(_: &str, _: usize, end: usize) -> Option<usize> {
    Some(end)
}

/// Luhn's checksum over a string of ASCII digits.
pub fn luhn(digits: &str) -> bool {
    let mut sum = 0u32;
    for (i, c) in digits.bytes().rev().enumerate() {
        let mut d = u32::from(c - b'0');
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    let rem = sum % 10;
    rem == 0
}

/// Does a card number of this length start like a card of some issuer?
fn card_issuer(d: &str) -> bool {
    let n = d.len();
    let p = |k: usize| d[..k].parse::<u32>().unwrap_or(0);
    match d.as_bytes()[0] {
        // Visa.
        b'4' => matches!(n, 13 | 16 | 19),
        // Mastercard (51–55, 2221–2720) and Maestro (50, 56–59).
        b'5' => (51..=55).contains(&p(2)) && n == 16 || matches!(p(2), 50 | 56..=59) && n >= 12,
        b'2' => (2221..=2720).contains(&p(4)) && n == 16,
        // Amex (34, 37), Diners (300–305, 36, 38, 39), JCB (3528–3589).
        b'3' => {
            matches!(p(2), 34 | 37) && n == 15
                || ((300..=305).contains(&p(3)) || matches!(p(2), 36 | 38 | 39)) && n >= 14
                || (3528..=3589).contains(&p(4)) && n >= 16
        }
        // Discover, UnionPay, Maestro (6x), RuPay.
        b'6' => n >= 16,
        _ => false,
    }
}

fn check_card(hay: &str, start: usize, end: usize) -> Option<usize> {
    let digits: String = hay[start..end]
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    ((13..=19).contains(&digits.len()) && card_issuer(&digits) && luhn(&digits)).then_some(end)
}

/// IBAN lengths by country (the SWIFT registry).
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BI", 27),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DJ", 27),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FK", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("LY", 25),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MN", 20),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NI", 28),
    ("NL", 18),
    ("NO", 15),
    ("OM", 23),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("RU", 33),
    ("SA", 24),
    ("SC", 31),
    ("SD", 18),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("SO", 23),
    ("ST", 25),
    ("SV", 28),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
    ("YE", 30),
];

/// The ISO 13616 mod-97 check over an IBAN without spaces.
pub fn iban_checksum(iban: &str) -> bool {
    let rotated = iban[4..].bytes().chain(iban[..4].bytes());
    let mut rem: u32 = 0;
    for b in rotated {
        let v = match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'A'..=b'Z' => u32::from(b - b'A') + 10,
            _ => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

fn check_iban(hay: &str, start: usize, end: usize) -> Option<usize> {
    let cand = &hay[start..end];
    let len = IBAN_LENGTHS.iter().find(|(c, _)| cand.starts_with(c))?.1;
    // Take exactly the country's number of characters; the rest of the candidate (a word that
    // followed after a space) is not part of it.
    let mut compact = String::with_capacity(len);
    let mut cut = None;
    for (i, c) in cand.char_indices() {
        if c == ' ' {
            continue;
        }
        compact.push(c);
        if compact.len() == len {
            cut = Some(i + c.len_utf8());
            break;
        }
    }
    let cut = cut?;
    if cand[cut..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return None;
    }
    iban_checksum(&compact).then_some(start + cut)
}

fn check_ssn(hay: &str, start: usize, end: usize) -> Option<usize> {
    let s = &hay[start..end];
    let (area, group, serial) = (&s[0..3], &s[4..6], &s[7..11]);
    let bad = area == "000" || area == "666" || area.starts_with('9') || group == "00";
    (!bad && serial != "0000").then_some(end)
}

fn check_ipv4(hay: &str, start: usize, end: usize) -> Option<usize> {
    // Part of a longer dotted number (a version string such as 1.2.3.4.5)?
    let mut back = hay[..start].chars().rev();
    let mut fwd = hay[end..].chars();
    let dotted = |dot: Option<char>, digit: Option<char>| {
        dot == Some('.') && digit.is_some_and(|c| c.is_ascii_digit())
    };
    if dotted(back.next(), back.next()) || dotted(fwd.next(), fwd.next()) {
        return None;
    }
    hay[start..end].parse::<Ipv4Addr>().ok().map(|_| end)
}

fn check_ipv6(hay: &str, start: usize, mut end: usize) -> Option<usize> {
    let before = hay[..start].chars().next_back();
    if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == ':') {
        return None;
    }
    if hay[end..]
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
    {
        return None;
    }
    // A sentence may end right after the address.
    while hay[start..end].ends_with('.') {
        end -= 1;
    }
    let cand = &hay[start..end];
    let groups = cand.split(':').filter(|g| !g.is_empty()).count();
    if groups < 2 || !cand.contains(|c: char| c.is_ascii_digit()) {
        return None;
    }
    cand.parse::<Ipv6Addr>().ok().map(|_| end)
}

fn check_phone_intl(hay: &str, start: usize, end: usize) -> Option<usize> {
    if hay[..start]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric())
    {
        return None;
    }
    let digits = hay[start..end].bytes().filter(u8::is_ascii_digit).count();
    (8..=15).contains(&digits).then_some(end)
}

/// The assignment-style secret names (`api_key=…`, `"password": "…"`).
const SECRET_NAMES: &str = r"api[_-]?key|apikey|api[_-]?secret|secret[_-]?key|client[_-]?secret|secret|access[_-]?token|auth[_-]?token|refresh[_-]?token|token|password|passwd|pwd";

static SECRET_KEY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("(?i)^(?:{SECRET_NAMES})$")).expect("secret key regex"));

static DETECTORS: LazyLock<Vec<Detector>> = LazyLock::new(|| {
    let d = |kind, re: &str, group, check: Check| Detector {
        kind,
        regex: Regex::new(re).unwrap_or_else(|e| panic!("{re}: {e}")),
        group,
        check,
    };
    use PiiKind::*;
    vec![
        d(
            PrivateKey,
            r#"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[^"]*?-----END[A-Z0-9 ]*PRIVATE KEY-----|-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[A-Za-z0-9+/=\s\\]*"#,
            0,
            accept,
        ),
        d(
            Jwt,
            r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
            0,
            accept,
        ),
        d(
            Secret,
            r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[0-9A-Z]{16}\b",
            0,
            accept,
        ),
        d(
            Secret,
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
            0,
            accept,
        ),
        d(Secret, r"\bglpat-[A-Za-z0-9_-]{20,}", 0, accept),
        d(Secret, r"\bxox[abposre]-[A-Za-z0-9-]{10,}", 0, accept),
        d(Secret, r"\bsk-[A-Za-z0-9_-]{20,}", 0, accept),
        d(Secret, r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", 0, accept),
        d(Secret, r"\bAIza[0-9A-Za-z_-]{35}", 0, accept),
        d(
            Secret,
            r"(?i)\bbearer\s+([A-Za-z0-9._~+/-]{16,}=*)",
            1,
            accept,
        ),
        d(
            Secret,
            &format!(r#"(?i)\b(?:{SECRET_NAMES})\b["']?\s*[:=]\s*["']?([^\s"',;&<>\\]{{8,}})"#),
            1,
            accept,
        ),
        d(
            Email,
            r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}\b",
            0,
            accept,
        ),
        d(
            Iban,
            r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}\b",
            0,
            check_iban,
        ),
        d(Card, r"\b[0-9](?:[ -]?[0-9]){12,18}\b", 0, check_card),
        d(Ssn, r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b", 0, check_ssn),
        d(
            Ip,
            r"[0-9A-Fa-f]*:[0-9A-Fa-f]*:[0-9A-Fa-f:.]*",
            0,
            check_ipv6,
        ),
        d(Ip, r"\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b", 0, check_ipv4),
        d(
            Phone,
            r"\+[0-9]{1,3}[ .-]?(?:\([0-9]{1,4}\)[ .-]?)?[0-9]{1,4}(?:[ .-]?[0-9]{1,4}){1,5}\b",
            0,
            check_phone_intl,
        ),
        d(
            Phone,
            r"(?:\([0-9]{3}\) ?|\b[0-9]{3}[.-])[0-9]{3}[.-][0-9]{4}\b",
            0,
            accept,
        ),
    ]
});

/// Every detector's regex, and an object key that is a secret's name (whose value
/// [`Scanner::redact_value`] replaces), in one set: one pass tells whether anything could be
/// replaced, which most strings of a reply (and most replies' whole text, see
/// [`Scanner::surely_clean`]) cannot; then no detector runs at all. (The key pattern, quoted
/// name and colon, only makes a plain string "maybe" now and then, never "no" wrongly.)
static ANY_MATCH: LazyLock<RegexSet> = LazyLock::new(|| {
    let key = format!(r#"(?i)"(?:{SECRET_NAMES})"\s*:"#);
    let detectors = DETECTORS.iter().map(|d| d.regex.as_str().to_string());
    RegexSet::new(detectors.chain([key])).expect("the detectors compile")
});

/// Counts of what was replaced, by kind name.
pub type Counts = BTreeMap<&'static str, u64>;

/// Finds and replaces the selected kinds in strings.
#[derive(Debug, Clone)]
pub struct Scanner {
    kinds: Vec<PiiKind>,
}

impl Scanner {
    /// A scanner for `kinds` (empty = every kind).
    pub fn new(kinds: &[PiiKind]) -> Scanner {
        let kinds = if kinds.is_empty() {
            PiiKind::ALL.to_vec()
        } else {
            kinds.to_vec()
        };
        Scanner { kinds }
    }

    /// `s` with every match replaced, or `None` when nothing matched.
    pub fn redact(&self, s: &str, counts: &mut Counts) -> Option<String> {
        // No detector matches the string as it is: none can change it (each one's first
        // replacement needs a match in the string before it).
        if !ANY_MATCH.is_match(s) {
            return None;
        }
        let mut cur: Option<String> = None;
        for det in DETECTORS.iter().filter(|d| self.kinds.contains(&d.kind)) {
            let hay = cur.as_deref().unwrap_or(s);
            if let Some(out) = replace(det, hay, counts) {
                cur = Some(out);
            }
        }
        cur
    }

    /// A string value under the object key `key`: a secret assignment in structured form
    /// (`{"password": "…"}`) is a `[SECRET]` as a whole; otherwise as [`Scanner::redact`].
    pub fn redact_value(&self, key: Option<&str>, s: &str, counts: &mut Counts) -> Option<String> {
        if self.kinds.contains(&PiiKind::Secret)
            && key.is_some_and(|k| SECRET_KEY.is_match(k))
            && s.len() >= 8
            && !s.contains(char::is_whitespace)
            && !s.starts_with('[')
        {
            *counts.entry(PiiKind::Secret.name()).or_default() += 1;
            return Some(PiiKind::Secret.placeholder());
        }
        self.redact(s, counts)
    }

    /// Can nothing in the JSON text `text` (a reply's `result` as received) be replaced? `true`
    /// only when that is sure: with its escapes undone (every string then reads as it will
    /// once parsed, between quotes and other punctuation, which no detector needs and which
    /// bound a match as a string's ends do), no detector matches anywhere in it and no object
    /// key in it is a secret's name. Then [`Scanner::redact_tree`] would change nothing, and
    /// the text need not be parsed. A `\u` escape makes it unsure.
    pub fn surely_clean(&self, text: &str) -> bool {
        if text.contains("\\u") {
            return false;
        }
        !ANY_MATCH.is_match(&unescape(text))
    }

    /// Redact every string in `v` (binary fields — `data` of image and audio blocks, `blob` —
    /// are left alone). Returns whether anything changed.
    pub fn redact_tree(&self, v: &mut Value, counts: &mut Counts) -> bool {
        self.walk(None, v, counts)
    }

    fn walk(&self, key: Option<&str>, v: &mut Value, counts: &mut Counts) -> bool {
        match v {
            Value::String(s) => match self.redact_value(key, s, counts) {
                Some(out) => {
                    *s = out;
                    true
                }
                None => false,
            },
            Value::Array(a) => {
                let mut changed = false;
                for item in a.iter_mut() {
                    changed |= self.walk(None, item, counts);
                }
                changed
            }
            Value::Object(m) => {
                let binary = is_binary_block(m);
                let mut changed = false;
                for (k, item) in m.iter_mut() {
                    if k == "blob" || (binary && k == "data") {
                        continue;
                    }
                    changed |= self.walk(Some(k), item, counts);
                }
                changed
            }
            _ => false,
        }
    }
}

/// The pii control: a scanner and the tools exempt from it.
#[derive(Debug, Clone)]
pub struct Pii {
    scanner: Scanner,
    allow_tools: Vec<super::ToolPattern>,
}

impl Pii {
    /// Build from the hook's `options`: `kinds` (a subset of the kind names; default all) and
    /// `allow_tools` (tool-name regexes, full match, whose results are left alone).
    pub fn from_options(options: &PiiOptions) -> Result<Pii, OptionError> {
        let mut kinds = Vec::new();
        for (i, k) in options.kinds.iter().enumerate() {
            match PiiKind::parse(k) {
                Some(kind) => kinds.push(kind),
                None => {
                    return Err(OptionError::new(
                        format!("options.kinds[{i}]"),
                        format!(
                            "unknown kind {k:?} (known: {})",
                            sluice_config::builtin::PII_KINDS.join(", ")
                        ),
                    ))
                }
            }
        }
        Ok(Pii {
            scanner: Scanner::new(&kinds),
            allow_tools: super::tool_patterns("options.allow_tools", &options.allow_tools)?,
        })
    }

    /// Is this tool exempt?
    pub fn allows(&self, tool: &str) -> bool {
        self.allow_tools.iter().any(|p| p.is_match(tool))
    }

    /// The scanner.
    pub fn scanner(&self) -> &Scanner {
        &self.scanner
    }
}

fn is_binary_block(m: &Map<String, Value>) -> bool {
    matches!(
        m.get("type").and_then(Value::as_str),
        Some("image" | "audio")
    )
}

fn replace(det: &Detector, hay: &str, counts: &mut Counts) -> Option<String> {
    let mut out = String::new();
    let mut copied = 0;
    let mut pos = 0;
    let mut n = 0u64;
    while pos <= hay.len() {
        let caps: Option<Captures> = det.regex.captures_at(hay, pos);
        let Some(caps) = caps else { break };
        let whole = caps.get(0).expect("group 0");
        let Some(target) = caps.get(det.group) else {
            pos = next_pos(hay, whole.end(), whole.start());
            continue;
        };
        match (det.check)(hay, target.start(), target.end()) {
            Some(end) if end > target.start() => {
                out.push_str(&hay[copied..target.start()]);
                out.push('[');
                out.push_str(det.kind.name());
                out.push(']');
                copied = end;
                n += 1;
                pos = next_pos(hay, end, whole.start());
            }
            _ => pos = next_pos(hay, whole.end(), whole.start()),
        }
    }
    if n == 0 {
        return None;
    }
    out.push_str(&hay[copied..]);
    *counts.entry(det.kind.name()).or_default() += n;
    Some(out)
}

/// JSON text with its one-letter escapes undone (`\n` is a newline, `\"` a quote, …); the
/// text itself when it has none.
fn unescape(text: &str) -> std::borrow::Cow<'_, str> {
    // One byte search over the text finds every `\`; the text between escapes is copied a
    // run at a time.
    let mut escapes = memchr::memchr_iter(b'\\', text.as_bytes()).peekable();
    if escapes.peek().is_none() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    // Where the text not copied yet starts.
    let mut from = 0;
    for at in escapes {
        if at < from {
            // The backslash an escape stood for (`\\`): taken with it already.
            continue;
        }
        out.push_str(&text[from..at]);
        let mut after = text[at + 1..].chars();
        out.push(unescaped(after.next()));
        from = text.len() - after.as_str().len();
    }
    out.push_str(&text[from..]);
    std::borrow::Cow::Owned(out)
}

/// What `\` followed by `next` stands for (`None`: the text ended on the backslash).
fn unescaped(next: Option<char>) -> char {
    match next {
        Some('n') => '\n',
        Some('t') => '\t',
        Some('r') => '\r',
        Some('b') => '\u{8}',
        Some('f') => '\u{c}',
        Some(other) => other,
        None => '\\',
    }
}

/// Where to look next: after `end`, but always past `start` (an empty match must not loop).
fn next_pos(hay: &str, end: usize, start: usize) -> usize {
    if end > start {
        end
    } else {
        hay[start..]
            .chars()
            .next()
            .map_or(hay.len() + 1, |c| start + c.len_utf8())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `unescape` as it was written first, a character at a time: what the run-at-a-time
    /// version must equal.
    fn unescape_by_char(text: &str) -> String {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            out.push(unescaped(chars.next()));
        }
        out
    }

    #[test]
    fn unescape_copies_runs_as_the_char_loop_does() {
        for text in [
            "",
            "plain text, no escapes",
            r#"{\"text\":\"hi\"}"#,
            r"a\nb\tc\rd\be\ff\/g\\h",
            "ends in a backslash \\",
            "\\",
            "\\\\",
            "é\\ü straße \\€ 日本\\n語",
            r"\u0041 is kept as u0041",
            "x\\\\\\\"y",
        ] {
            assert_eq!(unescape(text), unescape_by_char(text), "{text:?}");
        }
        assert!(matches!(
            unescape("no escapes"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(unescape(r#"{\"a\":\"b\nc\\\\"}"#), "{\"a\":\"b\nc\\\\\"}");
    }

    fn all(s: &str) -> (String, Counts) {
        let mut c = Counts::new();
        let out = Scanner::new(&[])
            .redact(s, &mut c)
            .unwrap_or_else(|| s.to_string());
        (out, c)
    }

    fn same(s: &str) {
        let (out, c) = all(s);
        assert_eq!(out, s, "{c:?}");
        assert!(c.is_empty(), "{s}: {c:?}");
    }

    /// The configuration checks `kinds` against its own list (in the order users read it): it
    /// must name these kinds.
    #[test]
    fn the_configuration_knows_every_kind() {
        let mut ours = PiiKind::ALL.map(PiiKind::name);
        let mut config = sluice_config::builtin::PII_KINDS.to_vec();
        ours.sort_unstable();
        config.sort_unstable();
        assert_eq!(ours.as_slice(), config);
    }

    #[test]
    fn checksums() {
        assert!(luhn("4111111111111111"));
        assert!(!luhn("4111111111111112"));
        assert!(iban_checksum("DE89370400440532013000"));
        assert!(iban_checksum("GB82WEST12345698765432"));
        assert!(!iban_checksum("DE89370400440532013001"));
    }

    #[test]
    fn cards_need_luhn_and_an_issuer() {
        assert_eq!(all("card 4111 1111 1111 1111 ok").0, "card [CARD] ok");
        assert_eq!(all("4111-1111-1111-1111").0, "[CARD]");
        assert_eq!(all("amex 378282246310005").0, "amex [CARD]");
        assert_eq!(all("mc 5555555555554444.").0, "mc [CARD].");
        // Fails Luhn: left alone.
        same("card 4111 1111 1111 1112 ok");
        same("4111111111111112");
        // Passes Luhn but no issuer starts with 1 (an epoch in milliseconds).
        same("ts 1718000000007");
    }

    #[test]
    fn ibans_need_their_checksum() {
        assert_eq!(
            all("pay to DE89 3704 0044 0532 0130 00 today").0,
            "pay to [IBAN] today"
        );
        assert_eq!(all("GB82WEST12345698765432").0, "[IBAN]");
        assert_eq!(all("DE89370400440532013000 ABCD").0, "[IBAN] ABCD");
        // Bad checksum: left alone.
        same("pay to DE89 3704 0044 0532 0130 01 today");
        same("GB82WEST12345698765433");
    }

    #[test]
    fn emails_phones_ssns_ips() {
        let (out, c) = all("mail ann.lee+x@mail.example.co.uk or bob@example.com");
        assert_eq!(out, "mail [EMAIL] or [EMAIL]");
        assert_eq!(c.get("EMAIL"), Some(&2));
        assert_eq!(all("call +44 20 7946 0958 now").0, "call [PHONE] now");
        assert_eq!(all("call +14155552671").0, "call [PHONE]");
        assert_eq!(all("call (415) 555-2671").0, "call [PHONE]");
        assert_eq!(all("call 415-555-2671.").0, "call [PHONE].");
        assert_eq!(all("ssn 123-45-6789").0, "ssn [SSN]");
        same("ssn 000-45-6789 and 666-12-3456 and 900-12-3456");
        assert_eq!(all("from 192.168.1.20:8080").0, "from [IP]:8080");
        assert_eq!(all("v6 2001:db8::8a2e:370:7334.").0, "v6 [IP].");
        assert_eq!(all("loop fe80::1%eth0").0, "loop [IP]%eth0");
        same("version 1.2.3.4.5 and 999.1.1.1");
        same("at 12:30:45 on 2024-01-15, std::vec::Vec, a::b, MAC 00:1a:2b:3c:4d:5e");
        same("order 12345, qty 3, price 19.99, id 550e8400-e29b-41d4-a716-446655440000");
    }

    #[test]
    fn tokens_keys_and_secrets() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(all(&format!("token {jwt} end")).0, "token [JWT] end");
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc=\n-----END RSA PRIVATE KEY-----";
        assert_eq!(
            all(&format!("key:\n{pem}\nok")).0,
            "key:\n[PRIVATE_KEY]\nok"
        );
        // In JSON text, a key never runs past the end of its string.
        let doc = serde_json::json!({"a": "-----BEGIN PRIVATE KEY-----\nAAAA", "b": "-----END PRIVATE KEY-----"})
            .to_string();
        assert_eq!(
            all(&doc).0,
            r#"{"a":"[PRIVATE_KEY]","b":"-----END PRIVATE KEY-----"}"#
        );
        for s in [
            "AKIAIOSFODNN7EXAMPLE",
            "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
            "xoxb-1234567890-abcdefghij",
            "sk-proj-abcdefghijklmnopqrstuvwx",
            "sk_live_abcdefghijklmnop1234",
            "AIzaSyA1234567890abcdefghijklmnopqrstuv",
        ] {
            assert_eq!(all(&format!("k={s};")).0, "k=[SECRET];", "{s}");
        }
        assert_eq!(
            all("Authorization: Bearer abcdefghijklmnop1234").0,
            "Authorization: Bearer [SECRET]"
        );
        assert_eq!(
            all(r#"{"api_key":"s3cr3t-value-123","n":1}"#).0,
            r#"{"api_key":"[SECRET]","n":1}"#
        );
        assert_eq!(all("password = hunter22hunter").0, "password = [SECRET]");
        same("token: short, the password field, skip-this-one");
    }

    #[test]
    fn kinds_select_and_structured_values() {
        let mut c = Counts::new();
        let only_email = Scanner::new(&[PiiKind::Email]);
        assert_eq!(
            only_email.redact("a@b.io 4111111111111111", &mut c),
            Some("[EMAIL] 4111111111111111".into())
        );
        let mut v = serde_json::json!({
            "user": {"email": "a@b.io", "password": "correct-horse", "n": 4111111111111111u64},
            "content": [{"type": "image", "data": "a@b.io"}, {"type": "text", "text": "ip 10.0.0.1"}]
        });
        let mut c = Counts::new();
        assert!(Scanner::new(&[]).redact_tree(&mut v, &mut c));
        assert_eq!(
            v,
            serde_json::json!({
                "user": {"email": "[EMAIL]", "password": "[SECRET]", "n": 4111111111111111u64},
                "content": [{"type": "image", "data": "a@b.io"}, {"type": "text", "text": "ip [IP]"}]
            })
        );
        assert_eq!(c, Counts::from([("EMAIL", 1), ("IP", 1), ("SECRET", 1)]));
    }

    #[test]
    fn a_text_is_surely_clean_only_when_the_walk_would_change_nothing() {
        let scanner = Scanner::new(&[]);
        let texts = [
            (
                r#"{"content":[{"type":"text","text":"hello 42"}],"isError":false}"#,
                true,
            ),
            (r#"{"structuredContent":{"n":7,"reason":"fine"}}"#, true),
            (r#"{"text":"mail bob@example.com"}"#, false),
            (r#"{"password":"hunter2,xyz"}"#, false),
            (r#"{"Token" : "abcdefghijkl"}"#, false),
            (r#"{"text":"call 555-123-4567"}"#, false),
            (r#"{"text":"bob\u0040example.com"}"#, false),
            (r#"{"text":"line\nbreak \"quoted\" a\\b"}"#, true),
            (r#"{"text":"{\"n\":7,\"ok\":true}"}"#, true),
            (r#"{"text":"x\n123-45-6789"}"#, false),
            (r#"{"text":"x\t4111 1111 1111 1111"}"#, false),
            (r#"{"text":"{\"password\":\"hunter2,xyz\"}"}"#, false),
            (r#"{"ip":"10.0.0.1"}"#, false),
            // Detector matches that the checks turn down are still "not sure".
            (r#"{"n":"4111 1111 1111 1112"}"#, false),
        ];
        for (text, want) in texts {
            assert_eq!(scanner.surely_clean(text), want, "{text}");
            if want {
                let mut v: Value = serde_json::from_str(text).unwrap();
                let mut counts = Counts::new();
                assert!(!scanner.redact_tree(&mut v, &mut counts), "{text}");
            }
        }
        // The escaped ones are found once parsed.
        let mut v: Value = serde_json::from_str(r#"{"text":"bob\u0040example.com"}"#).unwrap();
        let mut counts = Counts::new();
        assert!(scanner.redact_tree(&mut v, &mut counts));
        assert_eq!(v, serde_json::json!({"text": "[EMAIL]"}));
    }
}
