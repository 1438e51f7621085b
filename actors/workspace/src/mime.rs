//! MIME types of workspace files and Artifacts: validation (`type/subtype`,
//! RFC 6838 token characters, optional parameters) and a guess from the
//! file extension for writes that name none.

use crate::error::WorkspaceError;
use crate::limits::MAX_MIME_BYTES;

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#' | b'$' | b'&' | b'-' | b'^' | b'_' | b'.' | b'+'
                )
        })
}

/// Accept `type/subtype` with optional `; name=value` parameters, printable
/// ASCII only, at most [`MAX_MIME_BYTES`] bytes.
pub fn validate_mime(mime: &str) -> Result<(), WorkspaceError> {
    let bad = |reason: &str| WorkspaceError::InvalidArgument {
        field: "mime",
        reason: format!("{mime:?} {reason}; use a MIME type such as text/plain"),
    };
    if mime.len() > MAX_MIME_BYTES {
        return Err(bad(&format!("is longer than {MAX_MIME_BYTES} bytes")));
    }
    if !mime.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(bad("contains a character outside printable ASCII"));
    }
    let mut parts = mime.split(';');
    let essence = parts.next().unwrap_or_default().trim();
    match essence.split_once('/') {
        Some((t, s)) if is_token(t) && is_token(s) => {}
        _ => return Err(bad("is not of the form type/subtype")),
    }
    for param in parts {
        match param.trim().split_once('=') {
            Some((name, value)) if is_token(name) && !value.is_empty() => {}
            _ => return Err(bad("has a malformed parameter")),
        }
    }
    Ok(())
}

/// A MIME type for `name` by its extension; `application/octet-stream` when unknown.
pub fn guess_mime(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "json" => "application/json",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "rs" | "py" | "ts" | "sh" | "c" | "h" | "go" | "java" => "text/plain",
        _ => "application/octet-stream",
    }
}

/// True for MIME types whose content is text a model can read.
pub fn is_text(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or_default().trim();
    essence.starts_with("text/")
        || matches!(
            essence,
            "application/json"
                | "application/xml"
                | "application/yaml"
                | "application/toml"
                | "image/svg+xml"
        )
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_validation() {
        for ok in [
            "text/plain",
            "text/plain; charset=utf-8",
            "application/vnd.api+json",
        ] {
            assert!(validate_mime(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "text",
            "text/",
            "/plain",
            "text/pl ain",
            "text/plain; x",
            "tëxt/plain",
        ] {
            assert!(validate_mime(bad).is_err(), "{bad:?}");
        }
        let long = format!("text/{}", "a".repeat(MAX_MIME_BYTES));
        assert!(validate_mime(&long).is_err());
    }

    #[test]
    fn guesses() {
        assert_eq!(guess_mime("a/b.MD"), "text/markdown");
        assert_eq!(guess_mime("noext"), "application/octet-stream");
        assert!(is_text("application/ld+json"));
        assert!(!is_text("image/png"));
    }
}
