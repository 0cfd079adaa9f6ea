//! Label selectors (`matchLabels` and `matchExpressions`) as Kubernetes evaluates them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `selector` selects an object with `labels`. An empty selector selects everything.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .as_ref()
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    labels_ok
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

/// A canonical text form, for telling identical selectors apart from different ones.
pub fn canonical(selector: &LabelSelector) -> String {
    let mut out = String::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        out.push_str(&format!("{k}={v},"));
    }
    let mut expressions: Vec<String> = selector
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            let mut values = e.values.clone().unwrap_or_default();
            values.sort();
            format!("{} {} {:?}", e.key, e.operator, values)
        })
        .collect();
    expressions.sort();
    out.push_str(&expressions.join(","));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn selector_table() {
        let labels: BTreeMap<String, String> = [
            ("app".to_string(), "web".to_string()),
            ("tier".to_string(), "front".to_string()),
        ]
        .into();
        let expr = |key: &str, op: &str, values: &[&str]| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: Some(values.iter().map(|s| s.to_string()).collect()),
            }]),
            ..Default::default()
        };
        let cases = [
            (LabelSelector::default(), true),
            (
                LabelSelector {
                    match_labels: Some([("app".to_string(), "web".to_string())].into()),
                    ..Default::default()
                },
                true,
            ),
            (
                LabelSelector {
                    match_labels: Some([("app".to_string(), "db".to_string())].into()),
                    ..Default::default()
                },
                false,
            ),
            (expr("app", "In", &["web", "api"]), true),
            (expr("app", "NotIn", &["web"]), false),
            (expr("missing", "NotIn", &["x"]), true),
            (expr("tier", "Exists", &[]), true),
            (expr("tier", "DoesNotExist", &[]), false),
            (expr("tier", "Bogus", &[]), false),
        ];
        for (selector, want) in cases {
            assert_eq!(matches(&selector, &labels), want, "{selector:?}");
        }
    }
}
