//! Upstream's CapacityBuffer API test cases (schema and CEL), as a table: a buffer and what
//! the API server must say about it.

use karpenter_api::crd::{CAPACITY_BUFFER, CORE};
use karpenter_api::validation::table::{Expect, failures};
use serde_json::{Value, json};

use Expect::*;

fn buffer(spec: Value) -> Value {
    json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "buffer", "namespace": "default"},
        "spec": spec,
    })
}

fn cases() -> Vec<(&'static str, Value, Expect)> {
    vec![
        (
            "podTemplateRef with replicas",
            buffer(json!({"podTemplateRef": {"name": "my-template"}, "replicas": 5})),
            Valid,
        ),
        (
            "podTemplateRef with limits",
            buffer(
                json!({"podTemplateRef": {"name": "t"}, "limits": {"cpu": "10", "memory": "20Gi"}}),
            ),
            Valid,
        ),
        (
            "scalableRef",
            buffer(
                json!({"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"}, "percentage": 20}),
            ),
            Valid,
        ),
        (
            "scalableRef with an empty apiGroup (the core group)",
            buffer(
                json!({"scalableRef": {"apiGroup": "", "kind": "ReplicationController", "name": "rc"}, "replicas": 1}),
            ),
            Valid,
        ),
        (
            "both podTemplateRef and scalableRef",
            buffer(
                json!({"podTemplateRef": {"name": "t"}, "scalableRef": {"kind": "Deployment", "name": "web"}, "replicas": 1}),
            ),
            Rejected("spec", "either PodTemplateRef or ScalableRef, but not both"),
        ),
        (
            "podTemplateRef without replicas or limits",
            buffer(json!({"podTemplateRef": {"name": "t"}})),
            Rejected("spec", "replicas or limits must also be set"),
        ),
        (
            "negative replicas",
            buffer(json!({"podTemplateRef": {"name": "t"}, "replicas": -1})),
            Rejected("spec.replicas", ""),
        ),
        (
            "negative percentage",
            buffer(json!({"scalableRef": {"kind": "Deployment", "name": "web"}, "percentage": -1})),
            Rejected("spec.percentage", ""),
        ),
        (
            "empty podTemplateRef name",
            buffer(json!({"podTemplateRef": {"name": ""}, "replicas": 1})),
            Rejected("spec.podTemplateRef.name", ""),
        ),
        (
            "empty scalableRef kind",
            buffer(json!({"scalableRef": {"kind": "", "name": "web"}})),
            Rejected("spec.scalableRef.kind", ""),
        ),
        (
            "empty scalableRef name",
            buffer(json!({"scalableRef": {"kind": "Deployment", "name": ""}})),
            Rejected("spec.scalableRef.name", ""),
        ),
        (
            "zero replicas",
            buffer(json!({"podTemplateRef": {"name": "t"}, "replicas": 0})),
            Valid,
        ),
        (
            "zero percentage",
            buffer(json!({"scalableRef": {"kind": "Deployment", "name": "web"}, "percentage": 0})),
            Valid,
        ),
        (
            "limits that are not quantities",
            buffer(json!({"podTemplateRef": {"name": "t"}, "limits": {"cpu": "lots"}})),
            Rejected("spec.limits", ""),
        ),
    ]
}

#[test]
fn upstream_capacity_buffer_cases() {
    let failures = failures(&CORE, cases());
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_crd_is_namespaced_in_the_autoscaling_category() {
    let crd = CAPACITY_BUFFER.definition();
    assert_eq!(
        crd["metadata"]["name"],
        "capacitybuffers.autoscaling.x-k8s.io"
    );
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(crd["spec"]["names"]["categories"], json!(["autoscaling"]));
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["cb"]));
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1beta1");
    assert_eq!(
        version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["provisioningStrategy"]
            ["default"],
        "buffer.x-k8s.io/active-capacity"
    );
}

#[test]
fn a_buffer_reads_and_writes_its_wire_form() {
    use karpenter_api::capacitybuffer::CapacityBuffer;
    let wire =
        buffer(json!({"podTemplateRef": {"name": "t"}, "replicas": 3, "limits": {"cpu": "2"}}));
    let typed: CapacityBuffer = serde_json::from_value(wire.clone()).unwrap();
    assert_eq!(typed.spec.replicas, Some(3));
    assert_eq!(typed.key(), "default/buffer");
    assert_eq!(serde_json::to_value(&typed).unwrap(), wire);
    let wrong = json!({"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityBuffer", "spec": {}});
    let err = serde_json::from_value::<CapacityBuffer>(wrong).unwrap_err();
    assert!(err.to_string().contains("v1alpha1"), "{err}");
}
