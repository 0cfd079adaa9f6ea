//! The Helm chart takes upstream Karpenter's values layout: every key of upstream's chart
//! (`charts/karpenter-rs/tests/upstream-values.yaml`) has a default in this chart's
//! `values.yaml` and is read by its templates, so a values file written for upstream's chart
//! installs this one unchanged. (Rendering needs helm, which CI does not have; the templates'
//! `.Values` references are read instead.)

use std::collections::BTreeSet;

use serde_json::Value;

fn chart_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/karpenter-rs")
}

fn yaml(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The dotted paths of `value`'s leaves: scalars, lists and empty maps.
fn leaves(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(v, &path, out);
            }
        }
        _ => {
            out.insert(prefix.to_string());
        }
    }
}

/// Every `.Values.a.b` the templates name.
fn read_by_templates() -> BTreeSet<String> {
    let re = regex::Regex::new(r"\.Values((?:\.[A-Za-z0-9_]+)+)").unwrap();
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(chart_dir().join("templates")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for c in re.captures_iter(&text) {
            out.insert(c[1].trim_start_matches('.').to_string());
        }
    }
    out
}

/// A leaf is read when the templates name it or a map holding it (handed on whole).
fn is_read(leaf: &str, read: &BTreeSet<String>) -> bool {
    read.iter()
        .any(|r| leaf == r || leaf.starts_with(&format!("{r}.")))
}

#[test]
fn every_upstream_value_has_a_default_and_is_read() {
    let upstream = yaml(&chart_dir().join("tests/upstream-values.yaml"));
    let ours = yaml(&chart_dir().join("values.yaml"));
    let mut upstream_leaves = BTreeSet::new();
    leaves(&upstream, "", &mut upstream_leaves);
    let mut our_leaves = BTreeSet::new();
    leaves(&ours, "", &mut our_leaves);
    assert!(upstream_leaves.len() > 80, "{}", upstream_leaves.len());

    let read = read_by_templates();
    let unread: Vec<&String> = upstream_leaves
        .iter()
        .filter(|l| !is_read(l, &read))
        .collect();
    assert!(
        unread.is_empty(),
        "upstream values the templates never read: {unread:?}"
    );

    // A default for each: the key itself, or the map holding it (a free-form one such as
    // `affinity` or `controller.resources`).
    let missing: Vec<&String> = upstream_leaves
        .iter()
        .filter(|l| {
            !our_leaves.iter().any(|o| {
                *l == o || l.starts_with(&format!("{o}.")) || o.starts_with(&format!("{l}."))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "upstream values without a default here: {missing:?}"
    );
}

#[test]
fn every_value_of_ours_is_read() {
    let ours = yaml(&chart_dir().join("values.yaml"));
    let mut our_leaves = BTreeSet::new();
    leaves(&ours, "", &mut our_leaves);
    let read = read_by_templates();
    // Read through `with .Values.<provider>` as `.field`.
    let scoped = ["azure.", "alibaba.", "huawei.", "proxmox.", "clusterapi."];
    let unread: Vec<&String> = our_leaves
        .iter()
        .filter(|l| !is_read(l, &read) && !scoped.iter().any(|s| l.starts_with(s)))
        .collect();
    assert!(
        unread.is_empty(),
        "values the templates never read: {unread:?}"
    );
}
