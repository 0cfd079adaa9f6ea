//! Upstream's volume topology suite (the provisioning suite's "Volume Topology Requirements"):
//! where a pod with persistent volumes gets a node, through the same path provisioning takes —
//! the volumes index resolves each pod's claims, the scheduler places the pods.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use karpenter_core::state::pods;
use karpenter_core::state::volumes::Volumes;
use serde_json::{Value, json};
use support::*;

fn from<T: k8s_openapi::serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

/// The suite's objects: a WaitForFirstConsumer class over zones 2 and 3, claims bound and
/// unbound, volumes in zone 3 (a zonal disk, a local disk pinned to a host, a disk pinned to a
/// host that is not local).
fn cluster() -> (
    Vec<PersistentVolumeClaim>,
    Vec<PersistentVolume>,
    Vec<StorageClass>,
) {
    let bound = |name: &str, pv: &str| -> PersistentVolumeClaim {
        from(json!({"metadata": {"name": name, "namespace": "default",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"}}, "spec": {"volumeName": pv}}))
    };
    let unbound = |name: &str, class: &str| -> PersistentVolumeClaim {
        from(json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"storageClassName": class}}))
    };
    let claims = vec![
        unbound("unbound", "zonal"),
        unbound("p-ephemeral", "zonal"),
        bound("zone-3", "pv-zone-3"),
        bound("p-bound-ephemeral", "pv-zone-3"),
        bound("local", "pv-local"),
        bound("pinned", "pv-pinned"),
        bound("classless-bound", "pv-plain"),
    ];
    let affinity = |expressions: Value| json!({"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}});
    let volumes = vec![
        from(
            json!({"metadata": {"name": "pv-zone-3"}, "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "v"},
            "nodeAffinity": affinity(json!([{"key": ZONE, "operator": "In", "values": ["test-zone-3"]}]))}}),
        ),
        from(
            json!({"metadata": {"name": "pv-local"}, "spec": {"local": {"path": "/mnt"},
            "nodeAffinity": affinity(json!([{"key": HOSTNAME, "operator": "In", "values": ["gone-node"]}]))}}),
        ),
        from(
            json!({"metadata": {"name": "pv-pinned"}, "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "v"},
            "nodeAffinity": affinity(json!([{"key": HOSTNAME, "operator": "In", "values": ["gone-node"]}]))}}),
        ),
        from(json!({"metadata": {"name": "pv-plain"}, "spec": {}})),
    ];
    let classes = vec![from(json!({"metadata": {"name": "zonal"},
        "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [
            {"key": ZONE, "values": ["test-zone-2", "test-zone-3"]}]}]}))];
    (claims, volumes, classes)
}

/// A pod named `p` using `volume`: a claim by name, or (`ephemeral:`) a generic ephemeral
/// volume whose claim is `p-<volume>`.
fn with_volume(builder: PodBuilder, volume: &str) -> Pod {
    let mut pod = builder.build();
    pod.metadata.name = Some("p".into());
    pod.metadata.namespace = Some("default".into());
    let volume: Value = match volume.strip_prefix("ephemeral:") {
        Some(name) => json!({"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}),
        None => json!({"name": "data", "persistentVolumeClaim": {"claimName": volume}}),
    };
    pod.spec.as_mut().expect("spec").volumes = Some(vec![from(volume)]);
    pod
}

/// Where the pod lands: its node's zone, or `None` if it is not scheduled.
fn zone_of(pod: Pod) -> Option<String> {
    let (claims, volumes, classes) = cluster();
    let index = Volumes::new(
        &claims.iter().collect::<Vec<_>>(),
        &volumes.iter().collect::<Vec<_>>(),
        &classes.iter().collect::<Vec<_>>(),
    );
    let found = index.of_pod(&pod).ok()?;
    let mut env = Env::new(node_pool("default"));
    env.options.pod_volumes = Arc::new([(pods::key(&pod), found)].into());
    let outcome = env.provision(std::slice::from_ref(&pod));
    outcome
        .scheduled(0)
        .then(|| outcome.label(0, ZONE).map(str::to_string))
        .flatten()
}

#[test]
fn pods_land_where_their_volumes_can_be() {
    let zones_1_or_3 = || pod().require(&[(ZONE, "In", &["test-zone-1", "test-zone-3"])]);
    let zone_1 = || pod().require(&[(ZONE, "In", &["test-zone-1"])]);
    let cases: Vec<(&str, Pod, Option<&str>)> = vec![
        (
            "an unbound claim: the class's zones, within the pod's",
            with_volume(zones_1_or_3(), "unbound"),
            Some("test-zone-3"),
        ),
        (
            "an ephemeral volume: the class's zones, within the pod's",
            with_volume(zones_1_or_3(), "ephemeral:ephemeral"),
            Some("test-zone-3"),
        ),
        (
            "the class's zones exclude the pod's",
            with_volume(zone_1(), "unbound"),
            None,
        ),
        (
            "the class's zones exclude the pod's (ephemeral)",
            with_volume(zone_1(), "ephemeral:ephemeral"),
            None,
        ),
        (
            "a bound volume's zone",
            with_volume(pod(), "zone-3"),
            Some("test-zone-3"),
        ),
        (
            "a bound ephemeral volume's zone",
            with_volume(pod(), "ephemeral:bound-ephemeral"),
            Some("test-zone-3"),
        ),
        (
            "a bound volume in another zone than the pod's",
            with_volume(zone_1(), "zone-3"),
            None,
        ),
        (
            "the volume's zone is not relaxed away with the pod's first term",
            with_volume(
                pod().require(&[(ZONE, "In", &["test-zone-1"])]).require(&[(
                    ZONE,
                    "In",
                    &["test-zone-3"],
                )]),
                "zone-3",
            ),
            Some("test-zone-3"),
        ),
        (
            "a local volume's hostname is ignored",
            with_volume(pod(), "local"),
            Some("any"),
        ),
        (
            "another volume's hostname holds",
            with_volume(pod(), "pinned"),
            None,
        ),
        (
            "a bound claim needs no class",
            with_volume(pod(), "classless-bound"),
            Some("any"),
        ),
    ];
    for (case, pod, expected) in cases {
        let zone = zone_of(pod);
        match expected {
            Some("any") => assert!(zone.is_some(), "{case}: not scheduled"),
            expected => assert_eq!(zone.as_deref(), expected, "{case}"),
        }
    }
}
