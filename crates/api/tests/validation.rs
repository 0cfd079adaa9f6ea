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
    for (name, bad) in [
        ("consolidationPolicy quoted 1", "1"),
        ("consolidationPolicy quoted 2", "2"),
        ("consolidationPolicy quoted 3", "3"),
        ("consolidationPolicy level 0", "0"),
        ("consolidationPolicy level 4", "4"),
        ("consolidationPolicy level 10", "10"),
        ("consolidationPolicy lowercase balanced", "balanced"),
        ("consolidationPolicy lowercase whenempty", "whenempty"),
        ("consolidationPolicy empty string", ""),
        (
            "consolidationPolicy WhenUnderutilized (v1beta1)",
            "WhenUnderutilized",
        ),
        ("consolidationPolicy arbitrary string", "foo"),
    ] {
        cases.push((
            name,
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
    for (name, op, values) in NUMERIC {
        cases.push((
            name,
            set(
                np(),
                REQS,
                requirement("topology.kubernetes.io/zone", op, values),
            ),
            numeric_expect("spec.template.spec.requirements", values),
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
    cases.extend(more_node_pool_cases());
    cases.extend(node_claim_cases());
    cases
}

/// Upstream's invalid `Gt`/`Lt`/`Gte`/`Lte` requirements on the zone: (case, operator, values).
const NUMERIC: [(&str, &str, &[&str]); 16] = [
    ("Gt without a value", "Gt", &[]),
    ("Gt with two values", "Gt", &["1", "2"]),
    ("Gt with a word", "Gt", &["a"]),
    ("Gt with a negative", "Gt", &["-1"]),
    ("Lt without a value", "Lt", &[]),
    ("Lt with two values", "Lt", &["1", "2"]),
    ("Lt with a word", "Lt", &["a"]),
    ("Lt with a negative", "Lt", &["-1"]),
    ("Gte without a value", "Gte", &[]),
    ("Gte with two values", "Gte", &["1", "2"]),
    ("Gte with a word", "Gte", &["a"]),
    ("Gte with a negative", "Gte", &["-1"]),
    ("Lte without a value", "Lte", &[]),
    ("Lte with two values", "Lte", &["1", "2"]),
    ("Lte with a word", "Lte", &["a"]),
    ("Lte with a negative", "Lte", &["-1"]),
];

/// What the API server says of a [`NUMERIC`] requirement under `path`: the CEL rule for the
/// count, the rule failing to read a word as an integer, or the value pattern refusing `-`.
fn numeric_expect(path: &'static str, values: &[&str]) -> Expect {
    match values {
        [] | [_, _] => Rejected(path, "single positive integer"),
        ["a"] => Rejected(path, "could not be evaluated"),
        _ => Rejected(path, "alphanumeric"),
    }
}

/// A key whose name part (after the prefix) is longer than 63 characters.
fn long_name_key() -> String {
    format!("test.com.test/test-{}", "a".repeat(250))
}

/// Upstream's static NodePool: `replicas: 10`, then `pointer` set to `value`.
fn static_with(pointer: &str, value: Value) -> Value {
    set(
        set(node_pool(), "/spec/replicas", json!(10)),
        pointer,
        value,
    )
}

/// The rest of upstream's NodePool CEL suite (`nodepool_validation_cel_test.go`).
fn more_node_pool_cases() -> Vec<(&'static str, Value, Expect)> {
    let np = node_pool;
    let with_policy = |policy: &str, after: &str| {
        set(
            set(np(), "/spec/disruption/consolidationPolicy", json!(policy)),
            "/spec/disruption/consolidateAfter",
            json!(after),
        )
    };
    let budget_reasons = |reasons: Value| {
        set(
            np(),
            BUDGETS,
            budget(
                json!({"nodes": "10", "schedule": "* * * * *", "duration": "20m0s", "reasons": reasons}),
            ),
        )
    };
    let mut cases = vec![
        (
            "consolidateAfter single unit",
            set(np(), "/spec/disruption/consolidateAfter", json!("30s")),
            Valid,
        ),
        (
            "WhenEmptyOrUnderutilized with consolidateAfter",
            with_policy("WhenEmptyOrUnderutilized", "30s"),
            Valid,
        ),
        (
            "WhenEmptyOrUnderutilized with consolidateAfter Never",
            with_policy("WhenEmptyOrUnderutilized", "Never"),
            Valid,
        ),
        (
            "WhenEmpty with consolidateAfter Never",
            with_policy("WhenEmpty", "Never"),
            Valid,
        ),
        (
            "budget reason Drifted",
            budget_reasons(json!(["Drifted"])),
            Valid,
        ),
        (
            "budget reason Underutilized",
            budget_reasons(json!(["Underutilized"])),
            Valid,
        ),
        (
            "budget reason Empty",
            budget_reasons(json!(["Empty"])),
            Valid,
        ),
        (
            "budget reasons Drifted and Empty",
            budget_reasons(json!(["Drifted", "Empty"])),
            Valid,
        ),
        // Admitted (five fields), but the range runs backwards: the NodePool is not Ready and
        // the budget allows nothing, as upstream's parser says.
        (
            "budget cron backwards day range",
            set(
                np(),
                BUDGETS,
                budget(json!({"nodes": "10", "schedule": "0 0 * * tue-mon", "duration": "6h"})),
            ),
            NotReady("spec.disruption.budgets[0].schedule", "beyond"),
        ),
        (
            "taint with empty key",
            set(np(), TAINTS, json!([{"key": "", "effect": "NoSchedule"}])),
            Rejected("spec.template.spec.taints[0].key", "empty"),
        ),
        (
            "taint key name too long",
            set(
                np(),
                TAINTS,
                json!([{"key": long_name_key(), "effect": "NoSchedule"}]),
            ),
            NotReady("spec.template.spec.taints[0].key", "63"),
        ),
        (
            "requirement key name too long",
            set(np(), REQS, requirement(&long_name_key(), "Exists", &[])),
            NotReady("spec.template.spec.requirements[0]", "63"),
        ),
        (
            "requirement on kubernetes.io/hostname/test",
            set(
                np(),
                REQS,
                requirement("kubernetes.io/hostname/test", "In", &["test"]),
            ),
            Rejected("spec.template.spec.requirements[0].key", "qualified name"),
        ),
        (
            "k8s domain key",
            set(np(), REQS, requirement("k8s.io/test", "In", &["test"])),
            Valid,
        ),
        (
            "kubernetes subdomain key (kubernetes.io)",
            set(
                np(),
                REQS,
                requirement("subdomain.kubernetes.io/test", "In", &["test"]),
            ),
            Valid,
        ),
        (
            "label key name too long",
            set(np(), LABELS, json!({long_name_key(): "x"})),
            NotReady("spec.template.metadata.labels", "63"),
        ),
        (
            "label kubernetes.io",
            set(np(), LABELS, json!({"kubernetes.io": "test-value"})),
            Valid,
        ),
        (
            "label k8s.io",
            set(np(), LABELS, json!({"k8s.io": "test-value"})),
            Valid,
        ),
        (
            "label kubernetes.io/key",
            set(np(), LABELS, json!({"kubernetes.io/key": "test-value"})),
            Valid,
        ),
        (
            "label k8s.io/key",
            set(np(), LABELS, json!({"k8s.io/key": "test-value"})),
            Valid,
        ),
        (
            "label subdomain.kubernetes.io",
            set(
                np(),
                LABELS,
                json!({"subdomain.kubernetes.io": "test-value"}),
            ),
            Valid,
        ),
        (
            "label subdomain.k8s.io",
            set(np(), LABELS, json!({"subdomain.k8s.io": "test-value"})),
            Valid,
        ),
        (
            "label subdomain.kubernetes.io/key",
            set(
                np(),
                LABELS,
                json!({"subdomain.kubernetes.io/key": "test-value"}),
            ),
            Valid,
        ),
        (
            "label subdomain.k8s.io/key",
            set(np(), LABELS, json!({"subdomain.k8s.io/key": "test-value"})),
            Valid,
        ),
        // Static NodePools.
        (
            "replicas large",
            set(np(), "/spec/replicas", json!(1000)),
            Valid,
        ),
        (
            "replicas with limits.pods",
            static_with("/spec/limits", json!({"pods": "10"})),
            Rejected("spec", "only 'limits.nodes'"),
        ),
        (
            "replicas with limits.ephemeral-storage",
            static_with("/spec/limits", json!({"ephemeral-storage": "10Gi"})),
            Rejected("spec", "only 'limits.nodes'"),
        ),
        (
            "replicas with disruption budgets",
            static_with(
                "/spec/disruption",
                json!({
                    "consolidationPolicy": "WhenEmptyOrUnderutilized",
                    "consolidateAfter": "5m",
                    "budgets": [
                        {"nodes": "20%", "schedule": "0 9 * * mon-fri", "duration": "8h0m0s", "reasons": ["Drifted", "Empty"]},
                        {"nodes": "30%", "schedule": "0 22 * * sat,sun", "duration": "4h0m0s", "reasons": ["Underutilized"]},
                        {"nodes": "5"},
                    ],
                }),
            ),
            Valid,
        ),
        (
            "replicas with template labels",
            static_with(LABELS, json!({"environment": "production"})),
            Valid,
        ),
        (
            "replicas with template annotations",
            static_with(
                "/spec/template/metadata/annotations",
                json!({"example.com/last-updated": "2024-01-01"}),
            ),
            Valid,
        ),
        (
            "replicas with taints",
            static_with(
                TAINTS,
                json!([{"key": "gpu-workload", "value": "enabled", "effect": "NoSchedule"}]),
            ),
            Valid,
        ),
        (
            "replicas with startup taints",
            static_with(
                "/spec/template/spec/startupTaints",
                json!([{"key": "example.com/initializing", "value": "true", "effect": "NoSchedule"}]),
            ),
            Valid,
        ),
        (
            "replicas with requirements",
            static_with(
                REQS,
                json!([
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge", "m5.2xlarge", "c5.large", "c5.xlarge", "r5.large", "r5.xlarge"], "minValues": 3},
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a", "us-west-2b", "us-west-2c"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.k8s.aws/instance-memory", "operator": "Gt", "values": ["8192"]},
                    {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["64"]},
                ]),
            ),
            Valid,
        ),
        (
            "replicas with expireAfter",
            static_with("/spec/template/spec/expireAfter", json!("72h")),
            Valid,
        ),
        (
            "replicas with terminationGracePeriod",
            static_with("/spec/template/spec/terminationGracePeriod", json!("5m0s")),
            Valid,
        ),
        (
            "replicas without consolidateAfter",
            set(
                set(np(), "/spec/replicas", json!(3)),
                "/spec/disruption",
                json!({}),
            ),
            Valid,
        ),
    ];
    cases.extend([
        (
            "well-known zone",
            set(
                np(),
                REQS,
                requirement("topology.kubernetes.io/zone", "In", &["test"]),
            ),
            Valid,
        ),
        (
            "well-known region",
            set(
                np(),
                REQS,
                requirement("topology.kubernetes.io/region", "In", &["test"]),
            ),
            Valid,
        ),
        (
            "well-known arch",
            set(
                np(),
                REQS,
                requirement("kubernetes.io/arch", "In", &["test"]),
            ),
            Valid,
        ),
        (
            "well-known os",
            set(np(), REQS, requirement("kubernetes.io/os", "In", &["test"])),
            Valid,
        ),
    ]);
    cases
}

/// Upstream's NodeClaim CEL suite (`nodeclaim_validation_cel_test.go`), on a NodeClaim that
/// requires `karpenter.sh/capacity-type Exists` as upstream's does.
fn node_claim_cases() -> Vec<(&'static str, Value, Expect)> {
    let nc = || {
        set(
            node_claim(),
            "/spec/requirements",
            json!([{"key": "karpenter.sh/capacity-type", "operator": "Exists"}]),
        )
    };
    const TAINTS: &str = "/spec/taints";
    const REQS: &str = "/spec/requirements";
    let reqs = |r: Value| set(nc(), REQS, r);
    let mut cases = vec![
        ("nodeclaim valid taints", set(nc(), TAINTS, json!([
            {"key": "a", "value": "b", "effect": "NoSchedule"},
            {"key": "c", "value": "d", "effect": "NoExecute"},
            {"key": "e", "value": "f", "effect": "PreferNoSchedule"},
            {"key": "key-only", "effect": "NoExecute"},
        ])), Valid),
        ("nodeclaim taint key ???", set(nc(), TAINTS, json!([{"key": "???", "effect": "NoSchedule"}])), Rejected("spec.taints[0].key", "qualified name")),
        ("nodeclaim taint key ??? without effect", set(nc(), TAINTS, json!([{"key": "???", "effect": ""}])), Rejected("spec.taints[0].effect", "supported values")),
        ("nodeclaim taint without key", set(nc(), TAINTS, json!([{"effect": "NoSchedule"}])), Rejected("spec.taints[0].key", "required")),
        ("nodeclaim taint with empty key", set(nc(), TAINTS, json!([{"key": "", "effect": "NoSchedule"}])), Rejected("spec.taints[0].key", "empty")),
        ("nodeclaim taint with bad value", set(nc(), TAINTS, json!([{"key": "invalid-value", "effect": "NoSchedule", "value": "???"}])), Rejected("spec.taints[0].value", "qualified name")),
        ("nodeclaim taint with bad effect", set(nc(), TAINTS, json!([{"key": "invalid-effect", "effect": "???"}])), Rejected("spec.taints[0].effect", "supported values")),
        ("nodeclaim same taint key, different effects", set(nc(), TAINTS, json!([{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}])), Valid),
        ("nodeclaim nodeClassRef valid group", set(nc(), "/spec/nodeClassRef", json!({"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "nodeclass-test"})), Valid),
        ("nodeclaim nodeClassRef group with version", set(nc(), "/spec/nodeClassRef", json!({"group": "karpenter.test.sh/v1", "kind": "TestNodeClass", "name": "nodeclass-test"})), Rejected("spec.nodeClassRef.group", "^[^/]*$")),
        ("nodeclaim supported operators", reqs(json!([
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test"]},
            {"key": "topology.kubernetes.io/zone", "operator": "Gt", "values": ["1"]},
            {"key": "topology.kubernetes.io/zone", "operator": "Lt", "values": ["1"]},
            {"key": "topology.kubernetes.io/zone", "operator": "NotIn"},
            {"key": "topology.kubernetes.io/zone", "operator": "Exists"},
        ])), Valid),
        ("nodeclaim unknown operator", reqs(requirement("topology.kubernetes.io/zone", "unknown", &["test"])), Rejected("spec.requirements[0].operator", "supported values")),
        ("nodeclaim requirement in karpenter.sh domain", reqs(requirement("karpenter.sh/test", "In", &["test"])), Rejected("spec.requirements[0].key", "label domain \"karpenter.sh\" is restricted")),
        ("nodeclaim requirement on kubernetes.io/hostname/test", reqs(requirement("kubernetes.io/hostname/test", "In", &["test"])), Rejected("spec.requirements[0].key", "qualified name")),
        ("nodeclaim kubernetes.io key", reqs(requirement("kubernetes.io/test", "In", &["test"])), Valid),
        ("nodeclaim k8s.io key", reqs(requirement("k8s.io/test", "In", &["test"])), Valid),
        ("nodeclaim subdomain.kubernetes.io key", reqs(requirement("subdomain.kubernetes.io/test", "In", &["test"])), Valid),
        ("nodeclaim subdomain.k8s.io key", reqs(requirement("subdomain.k8s.io/test", "In", &["test"])), Valid),
        ("nodeclaim well-known zone", reqs(requirement("topology.kubernetes.io/zone", "In", &["test"])), Valid),
        ("nodeclaim well-known region", reqs(requirement("topology.kubernetes.io/region", "In", &["test"])), Valid),
        ("nodeclaim well-known instance type", reqs(requirement("node.kubernetes.io/instance-type", "In", &["test"])), Valid),
        ("nodeclaim well-known arch", reqs(requirement("kubernetes.io/arch", "In", &["test"])), Valid),
        ("nodeclaim well-known os", reqs(requirement("kubernetes.io/os", "In", &["test"])), Valid),
        ("nodeclaim well-known windows build", reqs(requirement("node.kubernetes.io/windows-build", "In", &["test"])), Valid),
        // Admitted as upstream; `karpenter-rs validate` adds that no capacity type is named "test".
        ("nodeclaim well-known capacity type", reqs(requirement("karpenter.sh/capacity-type", "In", &["test"])), NotReady("spec.requirements[0]", "no valid values")),
        ("nodeclaim overlapping In and NotIn", reqs(json!([
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test", "foo"]},
            {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["test", "bar"]},
        ])), Valid),
        ("nodeclaim empty requirements", reqs(json!([])), Valid),
        ("nodeclaim minValues negative", reqs(json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["insance-type-1"], "minValues": -1}])), Rejected("spec.requirements[0].minValues", "greater than or equal to 1")),
        ("nodeclaim minValues zero", reqs(json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["insance-type-1"], "minValues": 0}])), Rejected("spec.requirements[0].minValues", "greater than or equal to 1")),
        ("nodeclaim minValues above 50", reqs(json!([{"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 51}])), Rejected("spec.requirements[0].minValues", "less than or equal to 50")),
        ("nodeclaim 90 values without minValues", reqs(json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": (0..90).map(|i| format!("instance{i}")).collect::<Vec<_>>()}])), Valid),
        ("nodeclaim minValues above the number of values", reqs(json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["insance-type-1"], "minValues": 2}])), Rejected("spec.requirements", "at least that many values")),
        ("nodeclaim requirements over 100", reqs(json!((0..101).map(|i| json!({"key": format!("example.com/k{i}"), "operator": "In", "values": [format!("v{i}")]})).collect::<Vec<_>>())), Rejected("spec.requirements", "at most 100")),
        ("nodeclaim terminationGracePeriod single unit", set(nc(), "/spec/terminationGracePeriod", json!("30s")), Valid),
        ("nodeclaim terminationGracePeriod multiple units", set(nc(), "/spec/terminationGracePeriod", json!("1h30m5s")), Valid),
        ("nodeclaim terminationGracePeriod negative", set(nc(), "/spec/terminationGracePeriod", json!("-1s")), Rejected("spec.terminationGracePeriod", "duration")),
        ("nodeclaim terminationGracePeriod bad unit", set(nc(), "/spec/terminationGracePeriod", json!("1hr")), Rejected("spec.terminationGracePeriod", "duration")),
        ("nodeclaim terminationGracePeriod Never", set(nc(), "/spec/terminationGracePeriod", json!("Never")), Rejected("spec.terminationGracePeriod", "duration")),
        ("nodeclaim terminationGracePeriod partial match", set(nc(), "/spec/terminationGracePeriod", json!("FooNever")), Rejected("spec.terminationGracePeriod", "duration")),
        ("nodeclaim expireAfter single unit", set(nc(), "/spec/expireAfter", json!("30s")), Valid),
        ("nodeclaim expireAfter multiple units", set(nc(), "/spec/expireAfter", json!("1h30m5s")), Valid),
        ("nodeclaim expireAfter Never", set(nc(), "/spec/expireAfter", json!("Never")), Valid),
        ("nodeclaim expireAfter negative", set(nc(), "/spec/expireAfter", json!("-1s")), Rejected("spec.expireAfter", "duration")),
        ("nodeclaim expireAfter bad unit", set(nc(), "/spec/expireAfter", json!("1hr")), Rejected("spec.expireAfter", "duration")),
        ("nodeclaim expireAfter partial match", set(nc(), "/spec/expireAfter", json!("FooNever")), Rejected("spec.expireAfter", "duration")),
    ];
    for (name, op, values) in NUMERIC {
        let name: &'static str = Box::leak(format!("nodeclaim {name}").into_boxed_str());
        cases.push((
            name,
            reqs(requirement("topology.kubernetes.io/zone", op, values)),
            numeric_expect("spec.requirements", values),
        ));
    }
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

/// Upstream's `RuntimeValidate` assertions, run through the controller's check
/// (`validate_node_pool`, which decides `ValidationSucceeded`) on the typed NodePool, whether or
/// not the API server would have admitted it (a NodePool stored under an older CRD, say).
/// The names are the admission cases' above: each object is judged both ways.
fn runtime_cases() -> Vec<(&'static str, Value, bool)> {
    let np = node_pool;
    let taint = |key: &str| set(np(), TAINTS, json!([{"key": key, "effect": "NoSchedule"}]));
    let req = |key: &str, op: &str, values: &[&str]| set(np(), REQS, requirement(key, op, values));
    let label = |key: &str, value: &str| set(np(), LABELS, json!({key: value}));
    let mut cases = vec![
        (
            "policy WhenEmpty",
            set(
                np(),
                "/spec/disruption/consolidationPolicy",
                json!("WhenEmpty"),
            ),
            true,
        ),
        (
            "policy WhenEmptyOrUnderutilized",
            set(
                np(),
                "/spec/disruption/consolidationPolicy",
                json!("WhenEmptyOrUnderutilized"),
            ),
            true,
        ),
        (
            "policy Balanced",
            set(
                np(),
                "/spec/disruption/consolidationPolicy",
                json!("Balanced"),
            ),
            true,
        ),
        // Taints.
        (
            "valid taints",
            set(
                np(),
                TAINTS,
                json!([
                    {"key": "a", "value": "b", "effect": "NoSchedule"},
                    {"key": "c", "value": "d", "effect": "NoExecute"},
                    {"key": "e", "value": "f", "effect": "PreferNoSchedule"},
                    {"key": "Test", "value": "f", "effect": "PreferNoSchedule"},
                    {"key": "test.com/Test", "value": "f", "effect": "PreferNoSchedule"},
                    {"key": "test.com.com/test", "value": "f", "effect": "PreferNoSchedule"},
                    {"key": "key-only", "effect": "NoExecute"},
                ]),
            ),
            true,
        ),
        ("taint key with brace", taint("test.com.com}"), false),
        ("taint key uppercase domain", taint("Test.com/test"), false),
        ("taint key two slashes", taint("test/test/test"), false),
        ("taint key trailing slash", taint("test/"), false),
        ("taint key leading slash", taint("/test"), false),
        ("taint key too long", taint(&long_prefix_key()), false),
        ("taint key name too long", taint(&long_name_key()), false),
        ("taint with empty key", taint(""), false),
        (
            "taint with bad value",
            set(
                np(),
                TAINTS,
                json!([{"key": "invalid-value", "effect": "NoSchedule", "value": "???"}]),
            ),
            false,
        ),
        (
            "taint with bad effect",
            set(
                np(),
                TAINTS,
                json!([{"key": "invalid-effect", "effect": "???"}]),
            ),
            false,
        ),
        (
            "same taint key, different effects",
            set(
                np(),
                TAINTS,
                json!([{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}]),
            ),
            true,
        ),
        // Requirements.
        (
            "valid requirement keys",
            set(
                np(),
                REQS,
                json!([
                    {"key": "Test", "operator": "Exists"},
                    {"key": "test.com/Test", "operator": "Exists"},
                    {"key": "test.com.com/test", "operator": "Exists"},
                    {"key": "key-only", "operator": "Exists"},
                ]),
            ),
            true,
        ),
        (
            "requirement key with brace",
            req("test.com.com}", "Exists", &[]),
            false,
        ),
        (
            "requirement key uppercase domain",
            req("Test.com/test", "Exists", &[]),
            false,
        ),
        (
            "requirement key two slashes",
            req("test/test/test", "Exists", &[]),
            false,
        ),
        (
            "requirement key trailing slash",
            req("test/", "Exists", &[]),
            false,
        ),
        (
            "requirement key leading slash",
            req("/test", "Exists", &[]),
            false,
        ),
        (
            "requirement key too long",
            req(&long_prefix_key(), "Exists", &[]),
            false,
        ),
        (
            "requirement key name too long",
            req(&long_name_key(), "Exists", &[]),
            false,
        ),
        (
            "requirement on karpenter.sh/nodepool",
            req("karpenter.sh/nodepool", "In", &["default"]),
            false,
        ),
        (
            "supported operators",
            set(
                np(),
                REQS,
                json!([
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "Gt", "values": ["1"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "Lt", "values": ["1"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "NotIn"},
                    {"key": "topology.kubernetes.io/zone", "operator": "Exists"},
                ]),
            ),
            true,
        ),
        (
            "requirement in karpenter.sh domain",
            req("karpenter.sh/test", "In", &["test"]),
            false,
        ),
        (
            "requirement on kubernetes.io/hostname/test",
            req("kubernetes.io/hostname/test", "In", &["test"]),
            false,
        ),
        (
            "kubernetes domain key",
            req("kubernetes.io/test", "In", &["test"]),
            true,
        ),
        ("k8s domain key", req("k8s.io/test", "In", &["test"]), true),
        (
            "kubernetes subdomain key",
            req("subdomain.k8s.io/test", "In", &["test"]),
            true,
        ),
        (
            "kubernetes subdomain key (kubernetes.io)",
            req("subdomain.kubernetes.io/test", "In", &["test"]),
            true,
        ),
        (
            "well-known zone",
            req("topology.kubernetes.io/zone", "In", &["test"]),
            true,
        ),
        (
            "well-known region",
            req("topology.kubernetes.io/region", "In", &["test"]),
            true,
        ),
        (
            "well-known instance type",
            req("node.kubernetes.io/instance-type", "In", &["test"]),
            true,
        ),
        (
            "well-known arch",
            req("kubernetes.io/arch", "In", &["test"]),
            true,
        ),
        (
            "well-known os",
            req("kubernetes.io/os", "In", &["test"]),
            true,
        ),
        (
            "well-known windows build",
            req("node.kubernetes.io/windows-build", "In", &["test"]),
            true,
        ),
        (
            "overlapping In and NotIn",
            set(
                np(),
                REQS,
                json!([
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test", "foo"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["test", "bar"]},
                ]),
            ),
            true,
        ),
        ("empty requirements", set(np(), REQS, json!([])), true),
        // Labels.
        ("unrecognized label", label("foo", "bar"), true),
        (
            "label karpenter.sh/nodepool",
            label("karpenter.sh/nodepool", "x"),
            false,
        ),
        (
            "label key with spaces",
            label("spaces are not allowed", "x"),
            false,
        ),
        ("label key too long", label(&long_prefix_key(), "x"), false),
        (
            "label key name too long",
            label(&long_name_key(), "x"),
            false,
        ),
        (
            "label value with slash",
            label("team", "/ is not allowed"),
            false,
        ),
        (
            "label in karpenter.sh domain",
            label("karpenter.sh/unknown", "x"),
            false,
        ),
        (
            "kOps labels",
            set(
                np(),
                LABELS,
                json!({"kops.k8s.io/instancegroup": "karpenter-nodes", "kops.k8s.io/gpu": "1"}),
            ),
            true,
        ),
        (
            "label kubernetes.io",
            label("kubernetes.io", "test-value"),
            true,
        ),
        ("label k8s.io", label("k8s.io", "test-value"), true),
        (
            "label kubernetes.io/key",
            label("kubernetes.io/key", "test-value"),
            true,
        ),
        ("label k8s.io/key", label("k8s.io/key", "test-value"), true),
        (
            "label subdomain.kubernetes.io",
            label("subdomain.kubernetes.io", "test-value"),
            true,
        ),
        (
            "label subdomain.k8s.io",
            label("subdomain.k8s.io", "test-value"),
            true,
        ),
        (
            "label subdomain.kubernetes.io/key",
            label("subdomain.kubernetes.io/key", "test-value"),
            true,
        ),
        (
            "label subdomain.k8s.io/key",
            label("subdomain.k8s.io/key", "test-value"),
            true,
        ),
        // Static NodePools.
        (
            "replicas positive",
            set(np(), "/spec/replicas", json!(5)),
            true,
        ),
        ("replicas zero", set(np(), "/spec/replicas", json!(0)), true),
        (
            "replicas large",
            set(np(), "/spec/replicas", json!(1000)),
            true,
        ),
    ];
    for (name, object, expect) in cases_named(&[
        "replicas with limits.nodes",
        "replicas with disruption budgets",
        "replicas with template labels",
        "replicas with template annotations",
        "replicas with taints",
        "replicas with startup taints",
        "replicas with requirements",
        "replicas with expireAfter",
        "replicas with terminationGracePeriod",
    ]) {
        assert!(matches!(expect, Valid), "{name} is admitted");
        cases.push((name, object, true));
    }
    for (name, op, values) in NUMERIC {
        cases.push((name, req("topology.kubernetes.io/zone", op, values), false));
    }
    cases
}

/// The admission cases of these names (each must exist).
fn cases_named(names: &[&str]) -> Vec<(&'static str, Value, Expect)> {
    let all = cases();
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|(n, _, _)| n == name)
                .cloned()
                .unwrap_or_else(|| panic!("no admission case {name:?}"))
        })
        .collect()
}

#[test]
fn upstream_runtime_validation_cases() {
    use karpenter_api::NodePool;
    use karpenter_api::validation::runtime::validate_node_pool;
    let mut failures = Vec::new();
    for (name, object, passes) in runtime_cases() {
        let node_pool: NodePool = match serde_json::from_value(object) {
            Ok(np) => np,
            Err(e) => {
                failures.push(format!("{name}: not a NodePool: {e}"));
                continue;
            }
        };
        let mut problems = Vec::new();
        validate_node_pool(&node_pool, &mut problems);
        if problems.is_empty() != passes {
            failures.push(format!("{name}: passes={passes} but got {problems:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} runtime cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Upstream's update cases: the CRD's transition rules (`oldSelf`), which the API server
/// evaluates on every update, run over the emitted schema with the stored object as `oldSelf`.
/// The new object must also be admissible on its own, so the transition alone decides.
#[test]
fn upstream_update_cases() {
    use karpenter_api::crd::NODE_POOL;
    let np = node_pool;
    let schema = NODE_POOL.schema();
    let static_pool = |replicas: i64| set(np(), "/spec/replicas", json!(replicas));
    let with_nodes = |replicas: i64, nodes: &str| {
        set(
            static_pool(replicas),
            "/spec/limits",
            json!({"nodes": nodes}),
        )
    };
    // (case, stored object, updated object, the rule's message when refused)
    let cases: Vec<(&str, Value, Value, Option<&str>)> = vec![
        (
            "mutate nodeClassRef group",
            np(),
            set(
                np(),
                "/spec/template/spec/nodeClassRef/group",
                json!("karpenter.test.mutated.sh"),
            ),
            Some("nodeClassRef.group is immutable"),
        ),
        // Upstream's case of this name changes the group (to "TestNodeClass2"); both are refused.
        (
            "mutate nodeClassRef group to TestNodeClass2",
            np(),
            set(
                np(),
                "/spec/template/spec/nodeClassRef/group",
                json!("TestNodeClass2"),
            ),
            Some("nodeClassRef.group is immutable"),
        ),
        (
            "mutate nodeClassRef kind",
            np(),
            set(
                np(),
                "/spec/template/spec/nodeClassRef/kind",
                json!("TestNodeClass2"),
            ),
            Some("nodeClassRef.kind is immutable"),
        ),
        (
            "mutate nodeClassRef name",
            np(),
            set(
                np(),
                "/spec/template/spec/nodeClassRef/name",
                json!("other"),
            ),
            None,
        ),
        ("increase replicas", static_pool(3), static_pool(5), None),
        (
            "static to dynamic",
            static_pool(3),
            np(),
            Some("Cannot transition NodePool between static"),
        ),
        (
            "dynamic to static",
            np(),
            static_pool(3),
            Some("Cannot transition NodePool between static"),
        ),
        (
            "change static nodes limit",
            with_nodes(3, "10"),
            with_nodes(3, "100"),
            None,
        ),
    ];
    let validator = kube_cel::Validator::new();
    let mut failures = Vec::new();
    for (name, old, new, refused) in cases {
        let created = validate_object(&CORE, &new).unwrap();
        if !created.problems.is_empty() {
            failures.push(format!(
                "{name}: the updated object alone: {:?}",
                created.problems
            ));
        }
        let messages: Vec<String> = match validator.validate(&schema, &new, Some(&old)) {
            Ok(()) => Vec::new(),
            Err(errors) => errors.iter().map(|e| e.message.clone()).collect(),
        };
        let ok = match refused {
            None => messages.is_empty(),
            Some(text) => messages.iter().any(|m| m.contains(text)),
        };
        if !ok {
            failures.push(format!("{name}: expected {refused:?}, got {messages:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Upstream's defaulting cases: what the API server stores for a NodePool without a
/// `disruption` stanza, or with one that omits `consolidateAfter`, by the emitted schema's
/// defaults, and that the controller's types read the stored object the same way.
#[test]
fn upstream_default_cases() {
    use karpenter_api::crd::NODE_POOL;
    use karpenter_api::{ConsolidationPolicy, NodePool};
    let schema = NODE_POOL.schema();
    let stored = |mut object: Value| {
        api_server_defaults(&schema, &mut object);
        object
    };

    let no_disruption = stored(set(node_pool(), "/spec/disruption", Value::Null));
    assert_eq!(
        no_disruption.pointer("/spec/disruption"),
        Some(&json!({
            "consolidateAfter": "0s",
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "budgets": [{"nodes": "10%"}],
        })),
        "the disruption stanza when undefined"
    );
    let typed: NodePool = serde_json::from_value(no_disruption).unwrap();
    assert_eq!(typed.spec.disruption.consolidate_after.to_string(), "0s");
    assert_eq!(
        typed.spec.disruption.consolidation_policy,
        ConsolidationPolicy::WhenEmptyOrUnderutilized
    );
    assert_eq!(typed.spec.disruption.budgets.len(), 1);
    assert_eq!(typed.spec.disruption.budgets[0].nodes, "10%");
    assert_eq!(typed.spec.disruption.budgets[0].schedule, None);

    // consolidateAfter omitted from a dynamic NodePool's disruption stanza.
    let without = set(
        node_pool(),
        "/spec/disruption",
        json!({"consolidationPolicy": "WhenEmpty"}),
    );
    assert!(
        validate_object(&CORE, &without)
            .unwrap()
            .problems
            .is_empty()
    );
    assert_eq!(
        stored(without).pointer("/spec/disruption/consolidateAfter"),
        Some(&json!("0s")),
        "consolidateAfter defaults to 0s on a dynamic NodePool"
    );
}

/// The API server's structural defaulting: a missing property with a `default` gets it, then
/// every property, defaulted ones included, is defaulted in turn (so a defaulted
/// `disruption: {consolidateAfter: 0s}` also gets `consolidationPolicy` and `budgets`).
/// `kube_cel::apply_defaults` does not descend into the values it adds, hence this.
fn api_server_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                if let Some(additional) = schema.get("additionalProperties") {
                    map.values_mut()
                        .for_each(|v| api_server_defaults(additional, v));
                }
                return;
            };
            for (key, property) in properties {
                if let (None, Some(default)) = (map.get(key), property.get("default")) {
                    map.insert(key.clone(), default.clone());
                }
                if let Some(child) = map.get_mut(key) {
                    api_server_defaults(property, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                items.iter_mut().for_each(|v| api_server_defaults(item, v));
            }
        }
        _ => {}
    }
}
