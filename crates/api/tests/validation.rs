//! Upstream's NodePool/NodeClaim API test cases (CEL, schema and runtime validation), as a
//! table: a change to a valid object and what the validator must say about it.

use karpenter_api::crd::CORE;
use karpenter_api::validation::table::{Expect, failures, set};
use karpenter_api::validation::validate_object;
use serde_json::{Value, json};

fn node_pool() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}],
                },
            },
        },
    })
}

fn node_claim() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde"},
        "spec": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c-4x-amd64-linux"]}],
        },
    })
}

/// Sets (or, with `Value::Null`, removes) the field at a JSON pointer, creating objects on the way.
const REQS: &str = "/spec/template/spec/requirements";
const TAINTS: &str = "/spec/template/spec/taints";
const BUDGETS: &str = "/spec/disruption/budgets";
const LABELS: &str = "/spec/template/metadata/labels";

use Expect::*;

fn requirement(key: &str, op: &str, values: &[&str]) -> Value {
    json!([{"key": key, "operator": op, "values": values}])
}

fn budget(fields: Value) -> Value {
    json!([fields])
}

fn long_prefix_key() -> String {
    format!("test.com.test.{}/test", "a".repeat(250))
}

fn cases() -> Vec<(&'static str, Value, Expect)> {
    let np = node_pool;
    let mut cases = vec![
        // Disruption and expiry durations.
        (
            "expireAfter single unit",
            set(np(), "/spec/template/spec/expireAfter", json!("30s")),
            Valid,
        ),
        (
            "expireAfter multiple units",
            set(np(), "/spec/template/spec/expireAfter", json!("1h30m5s")),
            Valid,
        ),
        (
            "expireAfter Never",
            set(np(), "/spec/template/spec/expireAfter", json!("Never")),
            Valid,
        ),
        (
            "expireAfter negative",
            set(np(), "/spec/template/spec/expireAfter", json!("-1s")),
            Rejected("spec.template.spec.expireAfter", "Never"),
        ),
        (
            "expireAfter bad unit",
            set(np(), "/spec/template/spec/expireAfter", json!("1hr")),
            Rejected("spec.template.spec.expireAfter", "duration"),
        ),
        (
            "expireAfter partial match",
            set(np(), "/spec/template/spec/expireAfter", json!("FooNever")),
            Rejected("spec.template.spec.expireAfter", "duration"),
        ),
        (
            "expireAfter without unit",
            set(np(), "/spec/template/spec/expireAfter", json!("720")),
            Rejected("spec.template.spec.expireAfter", "duration"),
        ),
        (
            "consolidateAfter Never",
            set(np(), "/spec/disruption/consolidateAfter", json!("Never")),
            Valid,
        ),
        (
            "consolidateAfter multiple units",
            set(np(), "/spec/disruption/consolidateAfter", json!("1h30m5s")),
            Valid,
        ),
        (
            "consolidateAfter negative",
            set(np(), "/spec/disruption/consolidateAfter", json!("-1s")),
            Rejected("spec.disruption.consolidateAfter", "duration"),
        ),
        (
            "consolidateAfter bad unit",
            set(np(), "/spec/disruption/consolidateAfter", json!("1hr")),
            Rejected("spec.disruption.consolidateAfter", "duration"),
        ),
        (
            "consolidateAfter partial match",
            set(np(), "/spec/disruption/consolidateAfter", json!("FooNever")),
            Rejected("spec.disruption.consolidateAfter", "duration"),
        ),
        (
            "terminationGracePeriod single unit",
            set(
                np(),
                "/spec/template/spec/terminationGracePeriod",
                json!("30s"),
            ),
            Valid,
        ),
        (
            "terminationGracePeriod multiple units",
            set(
                np(),
                "/spec/template/spec/terminationGracePeriod",
                json!("1h30m5s"),
            ),
            Valid,
        ),
        (
            "terminationGracePeriod negative",
            set(
                np(),
                "/spec/template/spec/terminationGracePeriod",
                json!("-1s"),
            ),
            Rejected("spec.template.spec.terminationGracePeriod", "duration"),
        ),
        (
            "terminationGracePeriod bad unit",
            set(
                np(),
                "/spec/template/spec/terminationGracePeriod",
                json!("1hr"),
            ),
            Rejected("spec.template.spec.terminationGracePeriod", "duration"),
        ),
        (
            "terminationGracePeriod Never",
            set(
                np(),
                "/spec/template/spec/terminationGracePeriod",
                json!("Never"),
            ),
            Rejected("spec.template.spec.terminationGracePeriod", "duration"),
        ),
        (
            "terminationGracePeriod partial match",
            set(
                np(),
                "/spec/template/spec/terminationGracePeriod",
                json!("FooNever"),
            ),
            Rejected("spec.template.spec.terminationGracePeriod", "duration"),
        ),
        // Consolidation policy.
        (
            "policy WhenEmpty",
            set(
                np(),
                "/spec/disruption/consolidationPolicy",
                json!("WhenEmpty"),
            ),
            Valid,
        ),
        (
            "policy WhenEmptyOrUnderutilized",
            set(
                np(),
                "/spec/disruption/consolidationPolicy",
                json!("WhenEmptyOrUnderutilized"),
            ),
            Valid,
        ),
        (
            "policy Balanced",
            set(
                np(),
                "/spec/disruption/consolidationPolicy",
                json!("Balanced"),
            ),
            Valid,
        ),
        (
            "WhenEmpty with consolidateAfter",
            set(
                set(
                    np(),
                    "/spec/disruption/consolidationPolicy",
                    json!("WhenEmpty"),
                ),
                "/spec/disruption/consolidateAfter",
                json!("30s"),
            ),
            Valid,
        ),
    ];
    for bad in [
        "1",
        "2",
        "3",
        "0",
        "4",
        "10",
        "balanced",
        "whenempty",
        "",
        "WhenUnderutilized",
        "foo",
    ] {
        cases.push((
            "invalid consolidationPolicy",
            set(np(), "/spec/disruption/consolidationPolicy", json!(bad)),
            Rejected("spec.disruption.consolidationPolicy", "supported values"),
        ));
    }
    cases.extend([
        // Budgets.
        ("budget with cron and duration", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "* * * * *", "duration": "20m"}))), Valid),
        ("budget with hours and minutes", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "* * * * *", "duration": "2h20m"}))), Valid),
        ("budget with neither cron nor duration", set(np(), BUDGETS, budget(json!({"nodes": "10"}))), Valid),
        ("budget with special cron", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "@annually", "duration": "20m"}))), Valid),
        ("budget 100%", set(np(), BUDGETS, budget(json!({"nodes": "100%"}))), Valid),
        ("budget with all reasons", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "* * * * *", "duration": "20m", "reasons": ["Drifted", "Underutilized", "Empty"]}))), Valid),
        ("budget with weekday names", set(np(), BUDGETS, budget(json!({"nodes": "20%", "schedule": "0 9 * * mon-fri", "duration": "8h"}))), Valid),
        ("budget cron with one field", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "*", "duration": "20m"}))), Rejected("spec.disruption.budgets[0].schedule", "cron")),
        ("budget cron with four fields", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "* * * * ", "duration": "20m"}))), Rejected("spec.disruption.budgets[0].schedule", "cron")),
        ("budget negative duration", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "* * * * *", "duration": "-20m"}))), Rejected("spec.disruption.budgets[0].duration", "hours and minutes")),
        ("budget seconds duration", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "* * * * *", "duration": "30s"}))), Rejected("spec.disruption.budgets[0].duration", "hours and minutes")),
        ("budget negative count", set(np(), BUDGETS, budget(json!({"nodes": "-10"}))), Rejected("spec.disruption.budgets[0].nodes", "percentage")),
        ("budget negative percent", set(np(), BUDGETS, budget(json!({"nodes": "-10%"}))), Rejected("spec.disruption.budgets[0].nodes", "percentage")),
        ("budget percent over 3 digits", set(np(), BUDGETS, budget(json!({"nodes": "1000%"}))), Rejected("spec.disruption.budgets[0].nodes", "percentage")),
        ("budget percent over 100", set(np(), BUDGETS, budget(json!({"nodes": "110%"}))), Rejected("spec.disruption.budgets[0].nodes", "percentage")),
        ("budget nodes as integer", set(np(), BUDGETS, budget(json!({"nodes": 10}))), Rejected("spec.disruption.budgets[0].nodes", "type string")),
        ("budget cron without duration", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "* * * * *"}))), Rejected("spec.disruption.budgets", "'schedule' must be set with 'duration'")),
        ("budget duration without cron", set(np(), BUDGETS, budget(json!({"nodes": "10", "duration": "20m"}))), Rejected("spec.disruption.budgets", "'schedule' must be set with 'duration'")),
        ("two budgets, one bad cron", set(np(), BUDGETS, json!([{"nodes": "10", "schedule": "@annually", "duration": "20m"}, {"nodes": "10", "schedule": "*", "duration": "20m"}])), Rejected("spec.disruption.budgets[1].schedule", "cron")),
        ("three budgets, one without cron", set(np(), BUDGETS, json!([{"nodes": "10", "duration": "20m"}, {"nodes": "10", "schedule": "* * * * *", "duration": "20m"}, {"nodes": "10"}])), Rejected("spec.disruption.budgets", "'schedule' must be set with 'duration'")),
        ("budget reason invalid", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "* * * * *", "duration": "20m", "reasons": ["invalid"]}))), Rejected("spec.disruption.budgets[0].reasons[0]", "supported values")),
        ("budget reason expired", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "* * * * *", "duration": "20m", "reasons": ["expired"]}))), Rejected("spec.disruption.budgets[0].reasons[0]", "supported values")),
        ("budget reason empty", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "* * * * *", "duration": "20m", "reasons": [""]}))), Rejected("spec.disruption.budgets[0].reasons[0]", "supported values")),
        ("budget reason repeated", set(np(), BUDGETS, budget(json!({"nodes": "10", "reasons": ["Drifted", "Drifted"]}))), Rejected("spec.disruption.budgets[0].reasons[1]", "duplicate")),
        ("budget cron out of range", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "61 * * * *", "duration": "20m"}))), NotReady("spec.disruption.budgets[0].schedule", "minute")),
        ("budget cron bad weekday", set(np(), BUDGETS, budget(json!({"nodes": "10", "schedule": "0 9 * * funday", "duration": "1h"}))), NotReady("spec.disruption.budgets[0].schedule", "day of week")),
        // Taints.
        ("valid taints", set(np(), TAINTS, json!([
            {"key": "a", "value": "b", "effect": "NoSchedule"},
            {"key": "c", "value": "d", "effect": "NoExecute"},
            {"key": "e", "value": "f", "effect": "PreferNoSchedule"},
            {"key": "Test", "value": "f", "effect": "PreferNoSchedule"},
            {"key": "test.com/Test", "value": "f", "effect": "PreferNoSchedule"},
            {"key": "test.com.com/test", "value": "f", "effect": "PreferNoSchedule"},
            {"key": "key-only", "effect": "NoExecute"},
        ])), Valid),
        ("same taint key, different effects", set(np(), TAINTS, json!([{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}])), Valid),
        ("taint key with brace", set(np(), TAINTS, json!([{"key": "test.com.com}", "effect": "NoSchedule"}])), Rejected("spec.template.spec.taints[0].key", "qualified name")),
        ("taint key uppercase domain", set(np(), TAINTS, json!([{"key": "Test.com/test", "effect": "NoSchedule"}])), Rejected("spec.template.spec.taints[0].key", "qualified name")),
        ("taint key two slashes", set(np(), TAINTS, json!([{"key": "test/test/test", "effect": "NoSchedule"}])), Rejected("spec.template.spec.taints[0].key", "qualified name")),
        ("taint key trailing slash", set(np(), TAINTS, json!([{"key": "test/", "effect": "NoSchedule"}])), Rejected("spec.template.spec.taints[0].key", "qualified name")),
        ("taint key leading slash", set(np(), TAINTS, json!([{"key": "/test", "effect": "NoSchedule"}])), Rejected("spec.template.spec.taints[0].key", "qualified name")),
        ("taint without key", set(np(), TAINTS, json!([{"effect": "NoSchedule"}])), Rejected("spec.template.spec.taints[0].key", "required")),
        ("taint with bad value", set(np(), TAINTS, json!([{"key": "invalid-value", "effect": "NoSchedule", "value": "???"}])), Rejected("spec.template.spec.taints[0].value", "qualified name")),
        ("taint with bad effect", set(np(), TAINTS, json!([{"key": "invalid-effect", "effect": "???"}])), Rejected("spec.template.spec.taints[0].effect", "supported values")),
        ("taint without effect", set(np(), TAINTS, json!([{"key": "dedicated", "value": "gpu"}])), Rejected("spec.template.spec.taints[0].effect", "required")),
        ("startup taint without effect", set(np(), "/spec/template/spec/startupTaints", json!([{"key": "dedicated"}])), Rejected("spec.template.spec.startupTaints[0].effect", "required")),
        ("taint key too long", set(np(), TAINTS, json!([{"key": long_prefix_key(), "effect": "NoSchedule"}])), NotReady("spec.template.spec.taints[0].key", "253")),
        ("taint repeated in startupTaints", set(set(np(), TAINTS, json!([{"key": "a", "effect": "NoSchedule"}])), "/spec/template/spec/startupTaints", json!([{"key": "a", "effect": "NoSchedule"}])), NotReady("spec.template.spec.startupTaints[0]", "duplicate taint")),
        // Requirements.
        ("valid requirement keys", set(np(), REQS, json!([
            {"key": "Test", "operator": "Exists"},
            {"key": "test.com/Test", "operator": "Exists"},
            {"key": "test.com.com/test", "operator": "Exists"},
            {"key": "key-only", "operator": "Exists"},
        ])), Valid),
        ("supported operators", set(np(), REQS, json!([
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test"]},
            {"key": "topology.kubernetes.io/zone", "operator": "Gt", "values": ["1"]},
            {"key": "topology.kubernetes.io/zone", "operator": "Lt", "values": ["1"]},
            {"key": "topology.kubernetes.io/zone", "operator": "NotIn"},
            {"key": "topology.kubernetes.io/zone", "operator": "Exists"},
        ])), Valid),
        ("empty requirements", set(np(), REQS, json!([])), Valid),
        ("overlapping In and NotIn", set(np(), REQS, json!([
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test", "foo"]},
            {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["test", "bar"]},
        ])), Valid),
        ("kubernetes domain key", set(np(), REQS, requirement("kubernetes.io/test", "In", &["test"])), Valid),
        ("kubernetes subdomain key", set(np(), REQS, requirement("subdomain.k8s.io/test", "In", &["test"])), Valid),
        ("well-known instance type", set(np(), REQS, requirement("node.kubernetes.io/instance-type", "In", &["test"])), Valid),
        ("well-known windows build", set(np(), REQS, requirement("node.kubernetes.io/windows-build", "In", &["test"])), Valid),
        ("90 values without minValues", set(np(), REQS, json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": (0..90).map(|i| format!("instance{i}")).collect::<Vec<_>>()}])), Valid),
        ("requirement key with brace", set(np(), REQS, requirement("test.com.com}", "Exists", &[])), Rejected("spec.template.spec.requirements[0].key", "qualified name")),
        ("requirement key uppercase domain", set(np(), REQS, requirement("Test.com/test", "Exists", &[])), Rejected("spec.template.spec.requirements[0].key", "qualified name")),
        ("requirement key two slashes", set(np(), REQS, requirement("test/test/test", "Exists", &[])), Rejected("spec.template.spec.requirements[0].key", "qualified name")),
        ("requirement key trailing slash", set(np(), REQS, requirement("test/", "Exists", &[])), Rejected("spec.template.spec.requirements[0].key", "qualified name")),
        ("requirement key leading slash", set(np(), REQS, requirement("/test", "Exists", &[])), Rejected("spec.template.spec.requirements[0].key", "qualified name")),
        ("requirement on karpenter.sh/nodepool", set(np(), REQS, requirement("karpenter.sh/nodepool", "In", &["default"])), Rejected("spec.template.spec.requirements[0].key", "label \"karpenter.sh/nodepool\" is restricted")),
        ("requirement on kubernetes.io/hostname", set(np(), REQS, requirement("kubernetes.io/hostname", "In", &["node-a"])), Rejected("spec.template.spec.requirements[0].key", "label \"kubernetes.io/hostname\" is restricted")),
        ("requirement in karpenter.sh domain", set(np(), REQS, requirement("karpenter.sh/test", "In", &["test"])), Rejected("spec.template.spec.requirements[0].key", "label domain \"karpenter.sh\" is restricted")),
        ("requirement with unknown operator", set(np(), REQS, requirement("topology.kubernetes.io/zone", "unknown", &["test"])), Rejected("spec.template.spec.requirements[0].operator", "supported values")),
        ("In without values", set(np(), REQS, requirement("topology.kubernetes.io/zone", "In", &[])), Rejected("spec.template.spec.requirements", "operator 'In' must have a value")),
        ("minValues negative", set(np(), REQS, json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["a"], "minValues": -1}])), Rejected("spec.template.spec.requirements[0].minValues", "greater than or equal to 1")),
        ("minValues zero", set(np(), REQS, json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["a"], "minValues": 0}])), Rejected("spec.template.spec.requirements[0].minValues", "greater than or equal to 1")),
        ("minValues above 50", set(np(), REQS, json!([{"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 51}])), Rejected("spec.template.spec.requirements[0].minValues", "less than or equal to 50")),
        ("minValues above the number of values", set(np(), REQS, json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["a"], "minValues": 2}])), Rejected("spec.template.spec.requirements", "at least that many values")),
        ("requirement value with space", set(np(), REQS, requirement("example.com/tier", "In", &["has space"])), Rejected("spec.template.spec.requirements[0].values[0]", "alphanumeric")),
        ("requirement value too long", set(np(), REQS, json!([{"key": "example.com/tier", "operator": "In", "values": ["a".repeat(64)]}])), Rejected("spec.template.spec.requirements[0].values[0]", "63")),
        ("requirement key too long", set(np(), REQS, requirement(&long_prefix_key(), "Exists", &[])), NotReady("spec.template.spec.requirements[0]", "253")),
        ("capacity type without a known value", set(np(), REQS, requirement("karpenter.sh/capacity-type", "In", &["ondemand"])), NotReady("spec.template.spec.requirements[0]", "no valid values")),
        ("requirements missing", set(np(), REQS, Value::Null), Rejected("spec.template.spec.requirements", "required")),
        ("requirements over 100", set(np(), REQS, json!((0..101).map(|i| json!({"key": format!("example.com/k{i}"), "operator": "Exists"})).collect::<Vec<_>>())), Rejected("spec.template.spec.requirements", "at most 100")),
    ]);
    for op in ["Gt", "Lt", "Gte", "Lte"] {
        cases.push((
            "numeric operator without a value",
            set(
                np(),
                REQS,
                requirement("topology.kubernetes.io/zone", op, &[]),
            ),
            Rejected("spec.template.spec.requirements", "single positive integer"),
        ));
        cases.push((
            "numeric operator with two values",
            set(
                np(),
                REQS,
                requirement("topology.kubernetes.io/zone", op, &["1", "2"]),
            ),
            Rejected("spec.template.spec.requirements", "single positive integer"),
        ));
        cases.push((
            "numeric operator with a word",
            set(
                np(),
                REQS,
                requirement("topology.kubernetes.io/zone", op, &["a"]),
            ),
            Rejected("spec.template.spec.requirements", ""),
        ));
        cases.push((
            "numeric operator with a negative",
            set(
                np(),
                REQS,
                requirement("topology.kubernetes.io/zone", op, &["-1"]),
            ),
            Rejected(
                "spec.template.spec.requirements[0].values[0]",
                "alphanumeric",
            ),
        ));
    }
    cases.extend([
        // Template labels.
        ("unrecognized label", set(np(), LABELS, json!({"foo": "bar"})), Valid),
        ("kOps labels", set(np(), LABELS, json!({"kops.k8s.io/instancegroup": "karpenter-nodes", "kops.k8s.io/gpu": "1"})), Valid),
        ("kubernetes domain labels", set(np(), LABELS, json!({"kubernetes.io": "test-value", "k8s.io/key": "test-value", "subdomain.kubernetes.io/key": "test-value"})), Valid),
        ("label karpenter.sh/nodepool", set(np(), LABELS, json!({"karpenter.sh/nodepool": "x"})), Rejected("spec.template.metadata.labels", "label \"karpenter.sh/nodepool\" is restricted")),
        ("label in karpenter.sh domain", set(np(), LABELS, json!({"karpenter.sh/unknown": "x"})), Rejected("spec.template.metadata.labels", "label domain \"karpenter.sh\" is restricted")),
        ("label kubernetes.io/hostname", set(np(), LABELS, json!({"kubernetes.io/hostname": "x"})), Rejected("spec.template.metadata.labels", "label \"kubernetes.io/hostname\" is restricted")),
        ("label value with slash", set(np(), LABELS, json!({"team": "/ is not allowed"})), Rejected("spec.template.metadata.labels[team]", "alphanumeric")),
        ("label key with spaces", set(np(), LABELS, json!({"spaces are not allowed": "x"})), NotReady("spec.template.metadata.labels[spaces are not allowed]", "invalid label key")),
        ("label key too long", set(np(), LABELS, json!({long_prefix_key(): "x"})), NotReady("spec.template.metadata.labels", "253")),
        ("more than 100 labels", set(np(), LABELS, Value::Object((0..101).map(|i| (format!("l{i}"), json!("v"))).collect())), Rejected("spec.template.metadata.labels", "at most 100")),
        // NodeClassRef.
        ("nodeClassRef group empty", set(np(), "/spec/template/spec/nodeClassRef/group", json!("")), Rejected("spec.template.spec.nodeClassRef.group", "group may not be empty")),
        ("nodeClassRef kind empty", set(np(), "/spec/template/spec/nodeClassRef/kind", json!("")), Rejected("spec.template.spec.nodeClassRef.kind", "kind may not be empty")),
        ("nodeClassRef name empty", set(np(), "/spec/template/spec/nodeClassRef/name", json!("")), Rejected("spec.template.spec.nodeClassRef.name", "name may not be empty")),
        ("nodeClassRef group with version", set(np(), "/spec/template/spec/nodeClassRef/group", json!("karpenter.k8s.aws/v1")), Rejected("spec.template.spec.nodeClassRef.group", "^[^/]*$")),
        ("nodeClassRef without group", set(np(), "/spec/template/spec/nodeClassRef/group", Value::Null), Rejected("spec.template.spec.nodeClassRef.group", "required")),
        ("nodeClassRef missing", set(np(), "/spec/template/spec/nodeClassRef", Value::Null), Rejected("spec.template.spec.nodeClassRef", "required")),
        // Replicas (static NodePools), weight and limits.
        ("replicas positive", set(np(), "/spec/replicas", json!(5)), Valid),
        ("replicas zero", set(np(), "/spec/replicas", json!(0)), Valid),
        ("replicas with limits.nodes", set(set(np(), "/spec/replicas", json!(10)), "/spec/limits", json!({"nodes": "100"})), Valid),
        ("replicas negative", set(np(), "/spec/replicas", json!(-100)), Rejected("spec.replicas", "greater than or equal to 0")),
        ("replicas with limits.cpu", set(set(np(), "/spec/replicas", json!(10)), "/spec/limits", json!({"cpu": "1000"})), Rejected("spec", "only 'limits.nodes' is supported on static NodePools")),
        ("replicas with limits.memory", set(set(np(), "/spec/replicas", json!(10)), "/spec/limits", json!({"memory": "2000Gi"})), Rejected("spec", "only 'limits.nodes'")),
        ("replicas with weight", set(set(np(), "/spec/replicas", json!(10)), "/spec/weight", json!(25)), Rejected("spec", "'weight' is not supported on static NodePools")),
        ("weight 1", set(np(), "/spec/weight", json!(1)), Valid),
        ("weight 100", set(np(), "/spec/weight", json!(100)), Valid),
        ("weight 0", set(np(), "/spec/weight", json!(0)), Rejected("spec.weight", "greater than or equal to 1")),
        ("weight 101", set(np(), "/spec/weight", json!(101)), Rejected("spec.weight", "less than or equal to 100")),
        ("weight as string", set(np(), "/spec/weight", json!("10")), Rejected("spec.weight", "type integer")),
        ("limits as quantities", set(np(), "/spec/limits", json!({"cpu": "1000", "memory": "1000Gi", "nvidia.com/gpu": 8})), Valid),
        ("limit that is not a quantity", set(np(), "/spec/limits", json!({"cpu": "four"})), Rejected("spec.limits[cpu]", "quantity")),
        // Structure and metadata.
        ("v1beta1 kubelet field", set(np(), "/spec/template/spec/kubelet", json!({"maxPods": 110})), Rejected("spec.template.spec.kubelet", "unknown field")),
        ("v1beta1 expireAfter under disruption", set(np(), "/spec/disruption/expireAfter", json!("720h")), Rejected("spec.disruption.expireAfter", "unknown field")),
        ("template missing", set(np(), "/spec/template", Value::Null), Rejected("spec.template", "required")),
        ("spec missing", set(np(), "/spec", Value::Null), Rejected("spec", "required")),
        ("name missing", set(np(), "/metadata/name", Value::Null), Rejected("metadata.name", "required")),
        ("name with capitals", set(np(), "/metadata/name", json!("Default")), Rejected("metadata.name", "lower case")),
        ("status is ignored but checked", set(np(), "/status/nodes", json!("three")), Rejected("status.nodes", "type integer")),
        // NodeClaim.
        ("nodeclaim minimal", node_claim(), Valid),
        ("nodeclaim requirement on nodepool label", set(node_claim(), "/spec/requirements", requirement("karpenter.sh/nodepool", "In", &["default"])), Valid),
        ("nodeclaim requirement on hostname", set(node_claim(), "/spec/requirements", requirement("kubernetes.io/hostname", "In", &["a"])), Rejected("spec.requirements[0].key", "kubernetes.io/hostname")),
        ("nodeclaim without nodeClassRef", set(node_claim(), "/spec/nodeClassRef", Value::Null), Rejected("spec.nodeClassRef", "required")),
        ("nodeclaim resources", set(node_claim(), "/spec/resources", json!({"requests": {"cpu": "1500m", "memory": "1Gi"}})), Valid),
        ("nodeclaim bad resource", set(node_claim(), "/spec/resources", json!({"requests": {"cpu": "1.5 cores"}})), Rejected("spec.resources.requests[cpu]", "quantity")),
        ("nodeclaim status condition without reason", set(node_claim(), "/status/conditions", json!([{"type": "Launched", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"}])), Valid),
        ("nodeclaim status condition bad time", set(node_claim(), "/status/conditions", json!([{"type": "Launched", "status": "True", "lastTransitionTime": "yesterday"}])), Rejected("status.conditions[0].lastTransitionTime", "RFC 3339")),
        ("nodeclaim duplicate condition types", set(node_claim(), "/status/conditions", json!([
            {"type": "Launched", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"},
            {"type": "Launched", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z"},
        ])), Rejected("status.conditions[1]", "duplicate")),
        // Versions.
        ("v1beta1 NodePool", set(np(), "/apiVersion", json!("karpenter.sh/v1beta1")), Rejected("apiVersion", "karpenter-rs convert")),
    ]);
    cases
}

#[test]
fn upstream_api_cases() {
    let cases = cases();
    let invalid = cases.iter().filter(|(_, _, e)| !matches!(e, Valid)).count();
    assert!(invalid >= 30, "at least 30 invalid cases, have {invalid}");
    let failures = failures(&CORE, cases);
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn other_kinds_are_not_ours() {
    let deployment =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
    assert!(validate_object(&CORE, &deployment).is_none());
}

/// The Rust types' serde defaults must be the CRD's defaults: an object read by the controller
/// must mean what the API server stored.
#[test]
fn type_defaults_match_crd_defaults() {
    use karpenter_api::crd::{NODE_CLAIM, NODE_POOL};
    use karpenter_api::{NodeClaim, NodePool};
    let schema = NODE_POOL.schema();
    let defaulted: NodePool =
        serde_json::from_value(kube_cel::apply_defaults(&schema, &node_pool())).unwrap();
    let typed: NodePool = serde_json::from_value(node_pool()).unwrap();
    assert_eq!(typed, defaulted);
    assert_eq!(typed.spec.disruption.budgets[0].nodes, "10%");
    // A `disruption` block without consolidateAfter still means 0s, not Never.
    let partial = set(
        node_pool(),
        "/spec/disruption",
        serde_json::json!({"consolidationPolicy": "WhenEmpty"}),
    );
    let defaulted: NodePool =
        serde_json::from_value(kube_cel::apply_defaults(&schema, &partial)).unwrap();
    let typed_partial: NodePool = serde_json::from_value(partial).unwrap();
    assert_eq!(typed_partial, defaulted);
    assert_eq!(
        typed_partial.spec.disruption.consolidate_after.to_string(),
        "0s"
    );
    assert_eq!(
        typed.spec.template.spec.expire_after.to_string(),
        "720h0m0s"
    );
    // A fully written object survives the types unchanged in meaning.
    let written = serde_json::to_value(&typed).unwrap();
    assert!(
        validate_object(&CORE, &written)
            .unwrap()
            .problems
            .is_empty()
    );
    assert_eq!(serde_json::from_value::<NodePool>(written).unwrap(), typed);

    let schema = NODE_CLAIM.schema();
    let defaulted: NodeClaim =
        serde_json::from_value(kube_cel::apply_defaults(&schema, &node_claim())).unwrap();
    assert_eq!(
        serde_json::from_value::<NodeClaim>(node_claim()).unwrap(),
        defaulted
    );
}
