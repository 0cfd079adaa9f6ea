//! ClusterAPINodeClass manifests as `karpenter-rs validate` judges them: upstream's schema (a
//! label selector, nothing required, no CEL rules) and the NodePools that name the class.

use karpenter_api::crd::CORE;
use karpenter_api::validation::table::{Expect::*, failures};
use serde_json::{Value, json};

fn class(spec: Value) -> Value {
    json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
           "metadata": {"name": "default"}, "spec": spec})
}

#[test]
fn cluster_api_nodeclass_cases() {
    let cases = vec![
        // Upstream's test/resources/default_clusterapinodeclass.yaml.
        ("upstream's default", class(json!({})), Valid),
        (
            "without spec",
            json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass", "metadata": {"name": "default"}}),
            Valid,
        ),
        (
            "match labels and expressions",
            class(json!({"scalableResourceSelector": {
                "matchLabels": {"cluster.x-k8s.io/cluster-name": "workload"},
                "matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "b"]}],
            }})),
            Valid,
        ),
        (
            "a label value that is not a string",
            class(json!({"scalableResourceSelector": {"matchLabels": {"size": 3}}})),
            Rejected("spec.scalableResourceSelector.matchLabels", "string"),
        ),
        (
            "an expression without its operator",
            class(json!({"scalableResourceSelector": {"matchExpressions": [{"key": "pool"}]}})),
            Rejected(
                "spec.scalableResourceSelector.matchExpressions[0].operator",
                "required",
            ),
        ),
        (
            "a field upstream does not have",
            class(json!({"machineDeploymentSelector": {}})),
            Rejected("spec.machineDeploymentSelector", "unknown"),
        ),
        (
            "a NodePool naming the class",
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                   "spec": {"template": {"spec": {
                       "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
                       "requirements": [{"key": "karpenter.cluster.x-k8s.io/instance-cpu", "operator": "Gt", "values": ["3"]}]}}}}),
            Valid,
        ),
    ];
    let crds: Vec<_> = CORE
        .iter()
        .chain(karpenter_clusterapi::CRDS)
        .copied()
        .collect();
    let failures = failures(&crds, cases);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
