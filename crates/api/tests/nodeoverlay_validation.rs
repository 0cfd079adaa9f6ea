//! Upstream's NodeOverlay API test cases (CEL, schema and runtime validation), as a table: a
//! change to a valid NodeOverlay and what the validator must say about it.

use karpenter_api::crd::CORE;
use karpenter_api::labels::WELL_KNOWN_LABELS;
use karpenter_api::validation::table::{Expect, failures, set};
use serde_json::{Value, json};

use Expect::*;

fn overlay() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "default"},
        "spec": {"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}]},
    })
}

const REQS: &str = "/spec/requirements";

fn reqs(list: &[(&str, &str, &[&str])]) -> Value {
    Value::Array(
        list.iter()
            .map(|(key, op, values)| json!({"key": key, "operator": op, "values": values}))
            .collect(),
    )
}

fn req(key: &str, op: &str, values: &[&str]) -> Value {
    reqs(&[(key, op, values)])
}

fn with(pointer: &str, value: Value) -> Value {
    set(overlay(), pointer, value)
}

fn cases() -> Vec<(&'static str, Value, Expect)> {
    let zone = "topology.kubernetes.io/zone";
    let mut cases = vec![
        ("the base overlay", overlay(), Valid),
        // Requirements.
        (
            "In without values",
            with(REQS, req("Test", "In", &[])),
            Rejected(
                "spec.requirements",
                "operator 'In' must have a value defined",
            ),
        ),
        (
            "NotIn without values",
            with(REQS, req("Test", "NotIn", &[])),
            Rejected(
                "spec.requirements",
                "operator 'NotIn' must have a value defined",
            ),
        ),
        ("a valid key", with(REQS, req("Test", "Exists", &[])), Valid),
        (
            "valid keys",
            with(
                REQS,
                reqs(&[
                    ("Test", "Exists", &[]),
                    ("test.com/Test", "Exists", &[]),
                    ("test.com.com/test", "Exists", &[]),
                    ("key-only", "Exists", &[]),
                ]),
            ),
            Valid,
        ),
        (
            "key test.com.com}",
            with(REQS, req("test.com.com}", "Exists", &[])),
            Rejected("spec.requirements[0].key", ""),
        ),
        (
            "key Test.com/test",
            with(REQS, req("Test.com/test", "Exists", &[])),
            Rejected("spec.requirements[0].key", ""),
        ),
        (
            "key test/test/test",
            with(REQS, req("test/test/test", "Exists", &[])),
            Rejected("spec.requirements[0].key", ""),
        ),
        (
            "key test/",
            with(REQS, req("test/", "Exists", &[])),
            Rejected("spec.requirements[0].key", ""),
        ),
        (
            "key /test",
            with(REQS, req("/test", "Exists", &[])),
            Rejected("spec.requirements[0].key", ""),
        ),
        (
            "karpenter.sh/nodepool is allowed",
            with(REQS, req("karpenter.sh/nodepool", "In", &["silly"])),
            Valid,
        ),
        (
            "a prefix longer than 253",
            with(
                REQS,
                req(
                    &format!("test.com.test.{}/test", "a".repeat(250)),
                    "Exists",
                    &[],
                ),
            ),
            NotReady("spec.requirements[0]", "not a qualified name"),
        ),
        (
            "a name longer than 63",
            with(
                REQS,
                req(
                    &format!("test.com.test/test-{}", "a".repeat(250)),
                    "Exists",
                    &[],
                ),
            ),
            NotReady("spec.requirements[0]", "not a qualified name"),
        ),
        (
            "supported operators",
            with(
                REQS,
                reqs(&[
                    (zone, "In", &["test"]),
                    (zone, "Gt", &["1"]),
                    (zone, "Lt", &["1"]),
                    (zone, "Gte", &["1"]),
                    (zone, "Lte", &["1"]),
                    (zone, "NotIn", &["1"]),
                    (zone, "Exists", &[]),
                ]),
            ),
            Valid,
        ),
        (
            "an unknown operator",
            with(REQS, req(zone, "unknown", &["test"])),
            Rejected("spec.requirements[0].operator", ""),
        ),
        (
            "the karpenter.sh domain",
            with(REQS, req("karpenter.sh/test", "In", &["test"])),
            Rejected(
                "spec.requirements[0].key",
                "label domain \"karpenter.sh\" is restricted",
            ),
        ),
        (
            "kubernetes.io is allowed",
            with(REQS, req("kubernetes.io/test", "In", &["test"])),
            Valid,
        ),
        (
            "k8s.io is allowed",
            with(REQS, req("k8s.io/test", "In", &["test"])),
            Valid,
        ),
        (
            "a kubernetes.io subdomain is allowed",
            with(REQS, req("subdomain.kubernetes.io/test", "In", &["test"])),
            Valid,
        ),
        (
            "a k8s.io subdomain is allowed",
            with(REQS, req("subdomain.k8s.io/test", "In", &["test"])),
            Valid,
        ),
        (
            "overlapping In and NotIn",
            with(
                REQS,
                reqs(&[
                    (zone, "In", &["test", "foo"]),
                    (zone, "NotIn", &["test", "bar"]),
                ]),
            ),
            Valid,
        ),
        (
            "Exists alone",
            with(REQS, req("test", "Exists", &[])),
            Valid,
        ),
        (
            "the hostname label",
            with(REQS, req("kubernetes.io/hostname", "In", &["a"])),
            Rejected(
                "spec.requirements[0].key",
                "label \"kubernetes.io/hostname\" is restricted",
            ),
        ),
        (
            "no requirements field",
            with(REQS, Value::Null),
            Rejected("spec.requirements", ""),
        ),
        (
            "empty requirements match everything",
            with(REQS, json!([])),
            Valid,
        ),
        // Price and priceAdjustment.
        (
            "price and priceAdjustment together",
            with("/spec/price", json!("0.432"))
                .pipe(|o| set(o, "/spec/priceAdjustment", json!("+10%"))),
            Rejected("spec", "cannot set both 'price' and 'priceAdjustment'"),
        ),
        (
            "an unsigned percentage adjustment",
            with("/spec/priceAdjustment", json!("1%")),
            Rejected("spec.priceAdjustment", ""),
        ),
        (
            "an unsigned integer adjustment",
            with("/spec/priceAdjustment", json!("1")),
            Rejected("spec.priceAdjustment", ""),
        ),
        (
            "an unsigned float adjustment",
            with("/spec/priceAdjustment", json!("1.3")),
            Rejected("spec.priceAdjustment", ""),
        ),
        (
            "less than -100% adjustment",
            with("/spec/priceAdjustment", json!("-101.1%")),
            Rejected("spec.priceAdjustment", ""),
        ),
        ("integer price", with("/spec/price", json!("43")), Valid),
        ("float price", with("/spec/price", json!("34.43")), Valid),
        // Capacity.
        (
            "an extended resource",
            with("/spec/capacity", json!({"smarter-devices/fuse": "1"})),
            Valid,
        ),
        (
            "hugepages",
            with(
                "/spec/capacity",
                json!({"hugepages-2Mi": "100Mi", "hugepages-1Gi": "2Gi"}),
            ),
            Valid,
        ),
        (
            "cpu",
            with("/spec/capacity", json!({"cpu": "1"})),
            Rejected("spec.capacity", "invalid resource restricted"),
        ),
        (
            "memory",
            with("/spec/capacity", json!({"memory": "34Gi"})),
            Rejected("spec.capacity", "invalid resource restricted"),
        ),
        (
            "pods",
            with("/spec/capacity", json!({"pods": "324"})),
            Rejected("spec.capacity", "invalid resource restricted"),
        ),
        (
            "ephemeral-storage",
            with("/spec/capacity", json!({"ephemeral-storage": "1Gi"})),
            Rejected("spec.capacity", "invalid resource restricted"),
        ),
        // Weight.
        ("weight 1", with("/spec/weight", json!(1)), Valid),
        ("weight 10000", with("/spec/weight", json!(10000)), Valid),
        (
            "weight 0",
            with("/spec/weight", json!(0)),
            Rejected("spec.weight", ""),
        ),
        (
            "weight 10001",
            with("/spec/weight", json!(10001)),
            Rejected("spec.weight", ""),
        ),
    ];
    // Numeric operators need one non-negative integer.
    for op in ["Gt", "Lt", "Gte", "Lte"] {
        for values in [&[][..], &["1", "2"], &["a"], &["-1"]] {
            cases.push((
                "a bad numeric requirement",
                with(REQS, req(zone, op, values)),
                Rejected("spec.requirements", ""),
            ));
        }
    }
    // Every well-known label but the capacity type (whose values are checked at runtime).
    for label in WELL_KNOWN_LABELS
        .iter()
        .filter(|l| **l != "karpenter.sh/capacity-type")
    {
        cases.push((
            "a well-known label",
            with(REQS, req(label, "In", &["test"])),
            Valid,
        ));
    }
    // Invalid prices; upstream runs this table against `price` (for both of its fields).
    for bad in [
        "+42",
        ".5",
        "42.",
        "42%",
        "3,14",
        "1e10",
        "0x42",
        "forty-two",
        "42a",
        "42 ",
        " 42",
        "42.0.0",
        "-",
        ".",
        "-100.0%",
        "-101.1%",
        "-129",
        "-.42",
    ] {
        cases.push((
            "an invalid price",
            with("/spec/price", json!(bad)),
            Rejected("spec.price", ""),
        ));
    }
    // Those of them that are invalid adjustments too.
    for bad in [
        "42.",
        "42%",
        "3,14",
        "1e10",
        "0x42",
        "forty-two",
        "42a",
        "42 ",
        " 42",
        "42.0.0",
        "-",
        ".",
        "-100.0%",
        "-101.1%",
    ] {
        cases.push((
            "an invalid adjustment",
            with("/spec/priceAdjustment", json!(bad)),
            Rejected("spec.priceAdjustment", ""),
        ));
    }
    for good in [
        "+1%",
        "-1%",
        "-100%",
        "+100.102%",
        "+298%",
        "+43",
        "-43",
        "+34.43",
        "-34.43",
        "-.42",
        "-129",
    ] {
        cases.push((
            "a valid adjustment",
            with("/spec/priceAdjustment", json!(good)),
            Valid,
        ));
    }
    cases
}

trait Pipe: Sized {
    fn pipe(self, f: impl FnOnce(Self) -> Self) -> Self {
        f(self)
    }
}
impl Pipe for Value {}

#[test]
fn upstream_node_overlay_cases() {
    let failures = failures(&CORE, cases());
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn runtime_checks_name_the_field() {
    use karpenter_api::nodeoverlay::NodeOverlay;
    use karpenter_api::validation::runtime::validate_node_overlay;
    // What the schema catches is checked again at runtime, as upstream's RuntimeValidate does.
    let overlay: NodeOverlay = serde_json::from_value(json!({
        "metadata": {"name": "o"},
        "spec": {
            "requirements": [
                {"key": "Test", "operator": "NotIn"},
                {"key": "Test", "operator": "In"},
                {"key": "topology.kubernetes.io/zone", "operator": "Gt", "values": ["-1"]},
            ],
            "capacity": {"cpu": "1", "example.com/fuse": "1"},
        },
    }))
    .unwrap();
    let mut problems = Vec::new();
    validate_node_overlay(&overlay, &mut problems);
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    let has = |path: &str, text: &str| {
        shown
            .iter()
            .any(|p| p.starts_with(path) && p.contains(text))
    };
    assert!(
        has("spec.requirements[0]", "NotIn must have a value"),
        "{shown:?}"
    );
    assert!(
        has("spec.requirements[1]", "In must have a value"),
        "{shown:?}"
    );
    assert!(
        has("spec.requirements[2]", "single non-negative integer"),
        "{shown:?}"
    );
    assert!(
        has("spec.capacity[cpu]", "only extended resources"),
        "{shown:?}"
    );
    // And the value -1, which is no label value either.
    assert_eq!(problems.len(), 5, "{shown:?}");
}
