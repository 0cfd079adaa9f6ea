//! `docs/upstream-parity/` maps every case of upstream Karpenter's suites to ours. This keeps that map
//! honest: every `ported` row names a test that exists, every other row says why, and the counts in
//! `docs/upstream-parity.md` are the rows' own.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

const STATUSES: [&str; 4] = ["ported", "improvement", "not applicable", "not ported"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One upstream suite file's rows: (upstream case, status, ours).
type Suite = Vec<(String, String, String)>;

/// Suites by upstream file, in the order the area docs list them, with their doc's name.
fn suites() -> Vec<(String, String, Suite)> {
    let dir = repo().join("docs/upstream-parity");
    let mut docs: Vec<_> = fs::read_dir(&dir)
        .expect("docs/upstream-parity exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let mut out = Vec::new();
    for doc in docs {
        let name = doc.file_name().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(&doc).unwrap();
        for line in text.lines() {
            if let Some(file) = line.strip_prefix("## `").and_then(|l| l.strip_suffix('`')) {
                out.push((name.clone(), file.to_string(), Vec::new()));
                continue;
            }
            if !line.starts_with('|') {
                continue;
            }
            let cells: Vec<&str> = line
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            if cells[0] == "Upstream" || cells[0].starts_with("---") {
                continue;
            }
            let (_, suite, rows) = out
                .last_mut()
                .unwrap_or_else(|| panic!("{name}: a row before any `## ` suite heading"));
            assert!(
                cells.len() == 3,
                "{name} ({suite}): a row needs three cells: {line}"
            );
            rows.push((
                cells[0].to_string(),
                cells[1].to_string(),
                cells[2].to_string(),
            ));
        }
    }
    out
}

/// The references in an Ours cell: (file, case names, test function names).
fn references(cell: &str) -> Vec<(String, Vec<String>, Vec<String>)> {
    let mut refs: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    let mut rest = cell;
    while let Some(start) = rest.find(['`', '"']) {
        let quote = rest.as_bytes()[start] as char;
        let tail = &rest[start + 1..];
        let Some(end) = tail.find(quote) else { break };
        let token = &tail[..end];
        rest = &tail[end + 1..];
        match quote {
            '`' if token.ends_with(".rs") => refs.push((token.to_string(), Vec::new(), Vec::new())),
            '`' => {
                if let Some(last) = refs.last_mut() {
                    last.2.push(token.to_string());
                }
            }
            _ => {
                if let Some(last) = refs.last_mut() {
                    last.1.push(token.to_string());
                }
            }
        }
    }
    refs
}

#[test]
fn every_row_is_accounted_for() {
    let mut problems = Vec::new();
    let mut sources: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (doc, suite, rows) in suites() {
        for (case, status, ours) in &rows {
            let at = format!("{doc} ({suite}) {case:?}");
            if !STATUSES.contains(&status.as_str()) {
                problems.push(format!("{at}: unknown status {status:?}"));
                continue;
            }
            let refs = references(ours);
            match status.as_str() {
                "ported" | "improvement" if refs.is_empty() => {
                    problems.push(format!("{at}: {status} names no test file"));
                }
                "not applicable" if ours.is_empty() => {
                    problems.push(format!("{at}: not applicable without a reason"));
                }
                _ => {}
            }
            if !matches!(status.as_str(), "ported" | "improvement") {
                continue;
            }
            for (file, cases, functions) in refs {
                let source = sources
                    .entry(file.clone())
                    .or_insert_with(|| fs::read_to_string(repo().join(&file)).ok());
                let Some(source) = source else {
                    problems.push(format!("{at}: no file {file}"));
                    continue;
                };
                if cases.is_empty() && functions.is_empty() {
                    problems.push(format!("{at}: {file} without a case or test name"));
                }
                for name in cases {
                    if !source.contains(&format!("\"{name}\"")) {
                        problems.push(format!("{at}: {file} has no case \"{name}\""));
                    }
                }
                for name in functions {
                    if !source.contains(&format!("fn {name}(")) {
                        problems.push(format!("{at}: {file} has no fn {name}"));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_index_counts_the_rows() {
    let mut table = String::from(
        "| Upstream suite | Cases | Ported | Improvement | Not applicable | Not ported |\n|---|---:|---:|---:|---:|---:|\n",
    );
    let mut total = [0usize; 5];
    for (doc, suite, rows) in suites() {
        let mut counts = [rows.len(), 0, 0, 0, 0];
        for (_, status, _) in &rows {
            if let Some(i) = STATUSES.iter().position(|s| s == status) {
                counts[i + 1] += 1;
            }
        }
        for (t, c) in total.iter_mut().zip(counts) {
            *t += c;
        }
        let [n, p, i, a, np] = counts;
        table +=
            &format!("| [`{suite}`](upstream-parity/{doc}) | {n} | {p} | {i} | {a} | {np} |\n");
    }
    let [n, p, i, a, np] = total;
    table += &format!("| **All** | {n} | {p} | {i} | {a} | {np} |\n");
    let index = fs::read_to_string(repo().join("docs/upstream-parity.md")).unwrap();
    assert!(
        index.contains(&table),
        "docs/upstream-parity.md must hold the counts as they are now:\n\n{table}"
    );
}
