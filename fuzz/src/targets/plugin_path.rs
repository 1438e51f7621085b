//! Plugin path placeholders (`agent_tools::plugin_path`, issue 12 item 3).
//!
//! Property: a URL that `PathTemplate::fill` builds from model-chosen
//! values, and any URL `PathTemplate::admit` lets through, stays inside its
//! function: the base URL's origin, the base path and the template's fixed
//! prefix, the template's number of segments, and no segment that decodes
//! (percent-decoding repeated to a fixed point, then Unicode compatibility
//! folding) to `.`, `..` or text holding `/` or `\`. A value `fill` accepts
//! is admitted, and arrives intact: its segment percent-decodes to it.
//!
//! Input: the first byte picks a template and the mode. Even: fill, with
//! the placeholder values separated by 0x1E bytes. Odd: admit, with the
//! rest appended to the base URL and the template's fixed prefix.

use agent_tools::plugin_path::PathTemplate;
use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

/// (base URL, path template, placeholders in order).
const TEMPLATES: &[(&str, &str, &[&str])] = &[
    ("https://api.example.com", "/items/{id}", &["id"]),
    (
        "https://api.example.com/v1/",
        "/repos/{owner}/{repo}/issues",
        &["owner", "repo"],
    ),
    (
        "https://api.example.com/base",
        "/files/{name}.json",
        &["name"],
    ),
    ("http://127.0.0.1:8080/api", "/a/{x}/b/{y}", &["x", "y"]),
    (
        "https://api.example.com",
        "/search/v{version}",
        &["version"],
    ),
];

fn percent_decode(text: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'%'
            && let (Some(h), Some(l)) = (
                text.get(i + 1).and_then(|b| hex(*b)),
                text.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// Every reading a server might make of a segment: each decoding round,
/// lossily as text, and its compatibility folding; once without folding
/// between rounds and once folding before each round.
fn readings(segment: &str) -> Vec<String> {
    let mut out = Vec::new();
    for fold_between in [false, true] {
        let mut bytes = segment.as_bytes().to_vec();
        for _ in 0..16 {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let folded: String = text.nfkc().collect();
            let next = percent_decode(if fold_between {
                folded.as_bytes()
            } else {
                &bytes
            });
            out.push(folded);
            out.push(text);
            if next == bytes {
                break;
            }
            bytes = next;
        }
    }
    out
}

fn inside(base: &url::Url, template: &str, url: &url::Url) {
    assert_eq!(
        url.origin(),
        base.origin(),
        "{url} left the origin of {base}"
    );
    assert!(
        url.username().is_empty() && url.password().is_none(),
        "{url}"
    );
    assert!(url.fragment().is_none(), "{url} has a fragment");
    let base_path = base.path().trim_end_matches('/');
    let literal = &template[..template.find('{').unwrap_or(template.len())];
    let prefix = format!("{base_path}{literal}");
    let prefix = prefix.rsplit_once('/').map_or("", |(dir, _)| dir);
    assert!(
        url.path().starts_with(&format!("{prefix}/")),
        "{url} is not below {prefix}/"
    );
    let expected = format!("{base_path}{template}").split('/').count() - 1;
    let segments: Vec<&str> = url.path().split('/').skip(1).collect();
    assert_eq!(
        segments.len(),
        expected,
        "{url} has another shape than {template}"
    );
    for segment in segments {
        for reading in readings(segment) {
            let head = reading.split(';').next().unwrap_or("").trim();
            assert!(
                head.is_empty() || !head.chars().all(|c| c == '.'),
                "{url}: segment {segment:?} reads as the dot segment {reading:?}"
            );
            assert!(
                !reading.contains(['/', '\\']),
                "{url}: segment {segment:?} reads as {reading:?}, with a separator"
            );
        }
    }
}

pub fn check(data: &[u8]) {
    let Some((&knob, rest)) = data.split_first() else {
        return;
    };
    let (base, template, names) = TEMPLATES[usize::from(knob / 2) % TEMPLATES.len()];
    let base_url = url::Url::parse(base).unwrap_or_else(|e| panic!("{base}: {e}"));
    let checked = PathTemplate::new(&base_url, template)
        .unwrap_or_else(|e| panic!("the template {template} is refused: {e}"));
    if knob.is_multiple_of(2) {
        let mut args = Map::new();
        let mut values = rest.split(|&b| b == 0x1e);
        for name in names {
            let value = String::from_utf8_lossy(values.next().unwrap_or_default()).into_owned();
            args.insert((*name).to_owned(), Value::String(value));
        }
        let Ok(url) = checked.fill(&args) else {
            return;
        };
        let admitted = checked
            .admit(url.clone())
            .unwrap_or_else(|e| panic!("fill built {url}, which admit refuses: {e}"));
        inside(&base_url, template, admitted.as_url());
        // Each value that fills a whole segment arrives intact.
        let segments: Vec<&str> = url.path().split('/').collect();
        let shape: Vec<String> = format!("{}{template}", base_url.path().trim_end_matches('/'))
            .split('/')
            .map(str::to_owned)
            .collect();
        for (segment, piece) in segments.iter().zip(&shape) {
            if let Some(name) = piece.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                let sent =
                    String::from_utf8_lossy(&percent_decode(segment.as_bytes())).into_owned();
                assert_eq!(
                    Some(&Value::String(sent)),
                    args.get(name),
                    "{name} changed in {url}"
                );
            }
        }
    } else {
        let Some(tail) = super::text(rest) else {
            return;
        };
        let literal = &template[..template.find('{').unwrap_or(template.len())];
        let Ok(url) = url::Url::parse(&format!("{}{literal}{tail}", base.trim_end_matches('/')))
        else {
            return;
        };
        if let Ok(admitted) = checked.admit(url) {
            inside(&base_url, template, admitted.as_url());
        }
    }
}
