//! The error codes: one type, every code documented in docs/errors.md with its class, and
//! every code the HTTP docs name is a real one.

use std::collections::BTreeMap;

use cmdr_executors::{ErrorClass, ErrorCode};

fn doc(name: &str) -> String {
    let path = format!("{}/docs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The rows `| `CODE` | `Class` | …` of docs/errors.md.
fn documented() -> BTreeMap<String, String> {
    doc("errors.md")
        .lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let code = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let class = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            code.chars()
                .all(|c| c.is_ascii_uppercase() || c == '_')
                .then(|| (code.to_owned(), class.to_owned()))
        })
        .collect()
}

fn class_name(class: ErrorClass) -> String {
    format!("{class:?}")
}

#[test]
fn every_code_is_documented_with_its_class() {
    let documented = documented();
    for code in ErrorCode::ALL {
        let class = documented
            .get(code.as_str())
            .unwrap_or_else(|| panic!("{code} is not in docs/errors.md"));
        assert_eq!(*class, class_name(code.class()), "class of {code}");
    }
    for code in documented.keys() {
        assert!(
            ErrorCode::parse(code).is_some(),
            "docs/errors.md lists {code}, which cmdr never sends"
        );
    }
}

#[test]
fn the_http_docs_name_only_real_codes() {
    let http = doc("http.md");
    let errors = &http[http.find("## Errors").unwrap()..];
    let errors = &errors[..errors[3..].find("\n## ").unwrap()];
    let mut named = 0;
    for word in errors.split('`').skip(1).step_by(2) {
        if word.len() > 3 && word.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            let code = ErrorCode::parse(word)
                .unwrap_or_else(|| panic!("docs/http.md names {word}, not a code"));
            named += 1;
            let status = match code.class() {
                ErrorClass::Invalid => "400",
                ErrorClass::Unauthorized => "401",
                ErrorClass::Forbidden => "403",
                ErrorClass::NotFound => "404",
                ErrorClass::MethodNotAllowed => "405",
                ErrorClass::Conflict => "409",
                ErrorClass::PayloadTooLarge => "413",
                ErrorClass::RequestTimeout => "408",
                ErrorClass::Unavailable => "503",
                ErrorClass::Internal | ErrorClass::Failed => "500",
            };
            let row = errors
                .lines()
                .find(|line| line.contains(&format!("`{word}`")))
                .unwrap();
            assert!(row.starts_with(&format!("| {status} ")), "{word}: {row}");
        }
    }
    assert!(named > 20, "the HTTP error table is where it was");
}
