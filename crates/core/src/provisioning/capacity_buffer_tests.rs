//! Upstream's capacity-buffer cases (`pkg/controllers/capacitybuffer`, `pkg/state/virtualpods`,
//! `pkg/controllers/provisioning/buffers_test.go`), as tables of inputs and outcomes.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Container, EphemeralVolumeSource, PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodTemplate,
    PodTemplateSpec, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use karpenter_api::capacitybuffer::{
    CapacityBuffer, CapacityBufferSpec, CapacityBufferStatus, LocalObjectRef, ScalableRef,
    condition,
};

use super::*;
use crate::provisioning::scheduling::{NewNodeClaim, Results};

fn now() -> Time {
    Time("2026-01-01T00:00:00Z".parse().unwrap())
}

fn list(pairs: &[(&str, &str)]) -> ResourceList {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

fn container(requests: &[(&str, &str)]) -> Container {
    Container {
        name: "app".into(),
        resources: Some(ResourceRequirements {
            requests: Some(list(requests)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn spec_of(containers: Vec<Container>, init: Vec<Container>) -> PodSpec {
    PodSpec {
        containers,
        init_containers: (!init.is_empty()).then_some(init),
        ..Default::default()
    }
}

fn template(requests: &[(&str, &str)]) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            ..Default::default()
        }),
        spec: Some(spec_of(vec![container(requests)], vec![])),
    }
}

fn buffer(spec: CapacityBufferSpec) -> CapacityBuffer {
    CapacityBuffer {
        metadata: ObjectMeta {
            name: Some("buf".into()),
            namespace: Some("default".into()),
            uid: Some("uid-1".into()),
            generation: Some(3),
            ..Default::default()
        },
        spec,
        status: None,
    }
}

fn template_ref(name: &str) -> Option<LocalObjectRef> {
    Some(LocalObjectRef { name: name.into() })
}

fn deployment_ref(name: &str) -> Option<ScalableRef> {
    Some(ScalableRef {
        api_group: "apps".into(),
        kind: "Deployment".into(),
        name: name.into(),
    })
}

fn pod_template(name: &str, generation: i64) -> PodTemplate {
    PodTemplate {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            generation: Some(generation),
            ..Default::default()
        },
        template: Some(template(&[("cpu", "1")])),
    }
}

fn deployment(name: &str, replicas: Option<i32>, requests: &[(&str, &str)]) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas,
            template: template(requests),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn ready(replicas: i32) -> CapacityBufferStatus {
    CapacityBufferStatus {
        replicas: Some(replicas),
        conditions: vec![Condition {
            type_: condition::READY_FOR_PROVISIONING.into(),
            status: "True".into(),
            reason: condition::REASON_RESOLVED.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: now(),
        }],
        ..Default::default()
    }
}

/// (case, limits, containers, init containers, expected)
type LimitCase = (
    &'static str,
    ResourceList,
    Vec<Container>,
    Vec<Container>,
    Option<i32>,
);
/// (case, spec, ready, reason, replicas, status podTemplateRef)
type ResolutionCase = (
    &'static str,
    CapacityBufferSpec,
    &'static str,
    &'static str,
    Option<i32>,
    Option<&'static str>,
);
/// (case, status, placement, expected status and reason)
type ConditionCase = (
    &'static str,
    Option<CapacityBufferStatus>,
    Option<Placement>,
    Option<(&'static str, &'static str)>,
);

#[test]
fn limit_replicas_as_upstream() {
    let c = |r: &[(&str, &str)]| container(r);
    // (case, limits, containers, init containers, expected)
    let cases: Vec<LimitCase> = vec![
        (
            "by cpu",
            list(&[("cpu", "4")]),
            vec![c(&[("cpu", "1")])],
            vec![],
            Some(4),
        ),
        (
            "by memory",
            list(&[("memory", "4Gi")]),
            vec![c(&[("memory", "1Gi")])],
            vec![],
            Some(4),
        ),
        (
            "the least over resources",
            list(&[("cpu", "8"), ("memory", "4Gi")]),
            vec![c(&[("cpu", "1"), ("memory", "1Gi")])],
            vec![],
            Some(4),
        ),
        (
            "containers add up",
            list(&[("cpu", "6")]),
            vec![c(&[("cpu", "1")]), c(&[("cpu", "1")])],
            vec![],
            Some(3),
        ),
        (
            "an init container's larger peak counts",
            list(&[("cpu", "8")]),
            vec![c(&[("cpu", "1")])],
            vec![c(&[("cpu", "4")])],
            Some(2),
        ),
        (
            "the containers' larger sum counts",
            list(&[("cpu", "9")]),
            vec![c(&[("cpu", "2")]), c(&[("cpu", "1")])],
            vec![c(&[("cpu", "1")])],
            Some(3),
        ),
        (
            "no requests limit nothing",
            list(&[("cpu", "4")]),
            vec![c(&[])],
            vec![],
            None,
        ),
        (
            "no shared resource limits nothing",
            list(&[("nvidia.com/gpu", "4")]),
            vec![c(&[("cpu", "1")])],
            vec![],
            None,
        ),
        (
            "a pods limit matches no request",
            list(&[("pods", "4")]),
            vec![c(&[("cpu", "1")])],
            vec![],
            None,
        ),
        (
            "rounds down",
            list(&[("cpu", "10")]),
            vec![c(&[("cpu", "3")])],
            vec![],
            Some(3),
        ),
        (
            "millicores",
            list(&[("cpu", "1")]),
            vec![c(&[("cpu", "250m")])],
            vec![],
            Some(4),
        ),
        (
            "less than one chunk",
            list(&[("cpu", "500m")]),
            vec![c(&[("cpu", "1")])],
            vec![],
            Some(0),
        ),
    ];
    for (case, limits, containers, init, want) in cases {
        assert_eq!(
            limit_replicas(&limits, &spec_of(containers, init)),
            want,
            "{case}"
        );
    }
}

#[test]
fn percentage_replicas_as_upstream() {
    for (replicas, pct, want) in [
        (10, 20, 2),
        (3, 10, 1),
        (1, 1, 1),
        (0, 50, 0),
        (10, 0, 0),
        (5, 100, 5),
        (5, 200, 10),
        (1000, 10, 100),
    ] {
        assert_eq!(
            percentage_replicas(replicas, pct),
            want,
            "{pct}% of {replicas}"
        );
    }
}

#[test]
fn replica_calculation_as_upstream() {
    let templates = [pod_template("t", 1)];
    let deployments = [
        deployment("d10", Some(10), &[("cpu", "1")]),
        deployment("d1", Some(1), &[("cpu", "1")]),
    ];
    let workloads = Workloads {
        pod_templates: &templates,
        deployments: &deployments,
        ..Default::default()
    };
    let spec = |pt: bool,
                replicas: Option<i32>,
                pct: Option<i32>,
                limits: Option<&[(&str, &str)]>,
                d: &str| {
        CapacityBufferSpec {
            pod_template_ref: if pt { template_ref("t") } else { None },
            scalable_ref: if pt { None } else { deployment_ref(d) },
            replicas,
            percentage: pct,
            limits: limits.map(list),
            ..Default::default()
        }
    };
    let cases = [
        ("replicas only", spec(true, Some(7), None, None, ""), 7),
        (
            "replicas capped by limits",
            spec(true, Some(10), None, Some(&[("cpu", "3")]), ""),
            3,
        ),
        (
            "limits above replicas",
            spec(true, Some(3), None, Some(&[("cpu", "10")]), ""),
            3,
        ),
        (
            "limits alone",
            spec(true, None, None, Some(&[("cpu", "5")]), ""),
            5,
        ),
        (
            "percentage only",
            spec(false, None, Some(20), None, "d10"),
            2,
        ),
        (
            "the larger of replicas and percentage (replicas)",
            spec(false, Some(5), Some(20), None, "d10"),
            5,
        ),
        (
            "the larger of replicas and percentage (percentage)",
            spec(false, Some(5), Some(80), None, "d10"),
            8,
        ),
        (
            "limits cap the larger",
            spec(false, Some(5), Some(80), Some(&[("cpu", "4")]), "d10"),
            4,
        ),
        (
            "at least one chunk of a percentage",
            spec(false, None, Some(10), None, "d1"),
            1,
        ),
        (
            "percentage ignored for a PodTemplate",
            spec(true, Some(2), Some(90), None, ""),
            2,
        ),
    ];
    for (case, spec, want) in cases {
        let b = buffer(spec);
        let status = resolved_status(&b, &resolve(&b, &workloads), &now());
        assert_eq!(status.replicas, Some(want), "{case}");
    }
}

#[test]
fn resolution_sets_ready_for_provisioning_as_upstream() {
    let templates = [pod_template("t", 4)];
    let deployments = [deployment("web", None, &[("cpu", "1")])];
    let sets = [StatefulSet {
        metadata: ObjectMeta {
            name: Some("db".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(4),
            template: template(&[("cpu", "1")]),
            ..Default::default()
        }),
        ..Default::default()
    }];
    let workloads = Workloads {
        pod_templates: &templates,
        deployments: &deployments,
        stateful_sets: &sets,
        ..Default::default()
    };
    let scalable = |group: &str, kind: &str, name: &str| {
        Some(ScalableRef {
            api_group: group.into(),
            kind: kind.into(),
            name: name.into(),
        })
    };
    // (case, spec, ready, reason, replicas, status podTemplateRef)
    let cases: Vec<ResolutionCase> = vec![
        (
            "a PodTemplate resolves",
            CapacityBufferSpec {
                pod_template_ref: template_ref("t"),
                replicas: Some(2),
                ..Default::default()
            },
            "True",
            condition::REASON_RESOLVED,
            Some(2),
            Some("t"),
        ),
        (
            "a missing PodTemplate",
            CapacityBufferSpec {
                pod_template_ref: template_ref("nope"),
                replicas: Some(2),
                ..Default::default()
            },
            "False",
            condition::REASON_POD_TEMPLATE_NOT_FOUND,
            None,
            None,
        ),
        (
            "a missing Deployment",
            CapacityBufferSpec {
                scalable_ref: deployment_ref("nope"),
                replicas: Some(2),
                ..Default::default()
            },
            "False",
            condition::REASON_SCALABLE_REF_NOT_FOUND,
            None,
            None,
        ),
        (
            "a StatefulSet resolves",
            CapacityBufferSpec {
                scalable_ref: scalable("apps", "StatefulSet", "db"),
                percentage: Some(50),
                ..Default::default()
            },
            "True",
            condition::REASON_RESOLVED,
            Some(2),
            None,
        ),
        (
            "an unsupported kind",
            CapacityBufferSpec {
                scalable_ref: scalable("apps", "DaemonSet", "x"),
                replicas: Some(1),
                ..Default::default()
            },
            "False",
            condition::REASON_RESOLUTION_FAILED,
            None,
            None,
        ),
        (
            "an unsupported group",
            CapacityBufferSpec {
                scalable_ref: scalable("batch", "Job", "x"),
                replicas: Some(1),
                ..Default::default()
            },
            "False",
            condition::REASON_RESOLUTION_FAILED,
            None,
            None,
        ),
        (
            "unset workload replicas count as 1",
            CapacityBufferSpec {
                scalable_ref: deployment_ref("web"),
                percentage: Some(100),
                ..Default::default()
            },
            "True",
            condition::REASON_RESOLVED,
            Some(1),
            None,
        ),
        (
            "neither reference",
            CapacityBufferSpec {
                replicas: Some(1),
                ..Default::default()
            },
            "False",
            condition::REASON_RESOLUTION_FAILED,
            None,
            None,
        ),
    ];
    for (case, spec, ready, reason, replicas, template_name) in cases {
        let b = buffer(spec);
        let status = resolved_status(&b, &resolve(&b, &workloads), &now());
        let c = status
            .conditions
            .iter()
            .find(|c| c.type_ == condition::READY_FOR_PROVISIONING)
            .unwrap_or_else(|| panic!("{case}: no condition"));
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            (ready, reason),
            "{case}: {}",
            c.message
        );
        assert_eq!(c.observed_generation, Some(3), "{case}");
        assert_eq!(status.replicas, replicas, "{case}");
        assert_eq!(
            status.pod_template_ref.as_ref().map(|r| r.name.as_str()),
            template_name,
            "{case}"
        );
    }
    // The PodTemplate's generation is recorded, so a changed template is seen.
    let b = buffer(CapacityBufferSpec {
        pod_template_ref: template_ref("t"),
        replicas: Some(1),
        ..Default::default()
    });
    assert_eq!(
        resolved_status(&b, &resolve(&b, &workloads), &now()).pod_template_generation,
        Some(4)
    );
}

#[test]
fn set_condition_moves_the_transition_time_only_on_a_change() {
    let at = |s: &str| Time(s.parse().unwrap());
    let cond = |status: &str, t: &str| Condition {
        type_: "Provisioning".into(),
        status: status.into(),
        reason: "R".into(),
        message: String::new(),
        observed_generation: Some(1),
        last_transition_time: at(t),
    };
    let mut conditions = vec![];
    set_condition(&mut conditions, cond("True", "2026-01-01T00:00:00Z"));
    set_condition(&mut conditions, cond("True", "2026-01-02T00:00:00Z"));
    assert_eq!(conditions.len(), 1);
    assert_eq!(
        conditions[0].last_transition_time,
        at("2026-01-01T00:00:00Z")
    );
    set_condition(&mut conditions, cond("False", "2026-01-03T00:00:00Z"));
    assert_eq!(
        conditions[0].last_transition_time,
        at("2026-01-03T00:00:00Z")
    );
    set_condition(
        &mut conditions,
        Condition {
            type_: "ReadyForProvisioning".into(),
            ..cond("True", "2026-01-04T00:00:00Z")
        },
    );
    assert_eq!(conditions.len(), 2);
}

#[test]
fn virtual_pods_as_upstream_builds_them() {
    let mut b = buffer(CapacityBufferSpec {
        pod_template_ref: template_ref("t"),
        replicas: Some(3),
        ..Default::default()
    });
    b.status = Some(ready(3));
    let mut t = template(&[("cpu", "1")]);
    let spec = t.spec.as_mut().unwrap();
    spec.node_name = Some("pinned".into());
    spec.tolerations = Some(vec![Toleration {
        key: Some("k".into()),
        operator: Some("Exists".into()),
        ..Default::default()
    }]);
    spec.node_selector = Some(BTreeMap::from([("zone".into(), "a".into())]));
    spec.volumes = Some(vec![
        Volume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: "c".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "scratch".into(),
            ephemeral: Some(EphemeralVolumeSource::default()),
            ..Default::default()
        },
        Volume {
            name: "config".into(),
            ..Default::default()
        },
    ]);
    let mount = |name: &str| VolumeMount {
        name: name.into(),
        mount_path: format!("/{name}"),
        ..Default::default()
    };
    spec.containers[0].volume_mounts = Some(vec![mount("data"), mount("scratch"), mount("config")]);
    let pods = virtual_pods(&b, &t, &now());
    assert_eq!(pods.len(), 3);
    let names: Vec<_> = pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "capacity-buffer-buf-1",
            "capacity-buffer-buf-2",
            "capacity-buffer-buf-3"
        ]
    );
    let uids: Vec<_> = pods
        .iter()
        .map(|p| p.metadata.uid.clone().unwrap())
        .collect();
    assert_eq!(uids, ["uid-1-1", "uid-1-2", "uid-1-3"]);
    // Deterministic: the same pods again.
    assert_eq!(virtual_pods(&b, &t, &now()), pods);
    let p = &pods[0];
    assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(p.metadata.labels.as_ref().unwrap()["app"], "web");
    assert!(is_virtual_pod(p));
    assert_eq!(buffer_key_of(p).as_deref(), Some("default/buf"));
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.priority, Some(i32::MIN));
    assert_eq!(spec.node_name, None);
    assert!(spec.tolerations.is_some() && spec.node_selector.is_some());
    let volumes: Vec<_> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, ["config"]);
    let mounts: Vec<_> = spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(mounts, ["config"]);
    // Provisionable: kube-scheduler "marked" it unschedulable and it is bound nowhere.
    assert!(crate::state::pods::is_provisionable(p));
    // No chunks, no pods.
    b.status = Some(ready(0));
    assert!(virtual_pods(&b, &t, &now()).is_empty());
}

#[test]
fn which_buffers_get_virtual_pods() {
    let templates = [pod_template("t", 1)];
    let deployments = [deployment("web", Some(2), &[("cpu", "1")])];
    let workloads = Workloads {
        pod_templates: &templates,
        deployments: &deployments,
        ..Default::default()
    };
    let with = |spec: CapacityBufferSpec, status: Option<CapacityBufferStatus>| {
        let mut b = buffer(spec);
        b.status = status;
        b
    };
    let pt = CapacityBufferSpec {
        pod_template_ref: template_ref("t"),
        replicas: Some(2),
        ..Default::default()
    };
    let sr = CapacityBufferSpec {
        scalable_ref: deployment_ref("web"),
        replicas: Some(2),
        ..Default::default()
    };
    let cases = [
        (
            "a ready PodTemplate buffer",
            with(pt.clone(), Some(ready(2))),
            2,
        ),
        (
            "a ready scalableRef buffer (no status podTemplateRef)",
            with(sr, Some(ready(2))),
            2,
        ),
        (
            "neither reference",
            with(CapacityBufferSpec::default(), Some(ready(2))),
            0,
        ),
        ("zero replicas", with(pt.clone(), Some(ready(0))), 0),
        ("no ReadyForProvisioning", with(pt.clone(), None), 0),
    ];
    for (case, b, want) in cases {
        assert_eq!(
            all_virtual_pods(std::slice::from_ref(&b), &workloads, &now()).len(),
            want,
            "{case}"
        );
    }
}

#[test]
fn buffer_keys_as_upstream() {
    let annotated = |pairs: &[(&str, &str)]| Pod {
        metadata: ObjectMeta {
            annotations: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    use karpenter_api::capacitybuffer::{
        BUFFER_NAME_ANNOTATION as N, BUFFER_NAMESPACE_ANNOTATION as NS, FAKE_POD_ANNOTATION as F,
    };
    let cases = [
        ("a pod without annotations", Pod::default(), false, None),
        (
            "a pod with other annotations",
            annotated(&[("other", "true")]),
            false,
            None,
        ),
        (
            "no namespace annotation",
            annotated(&[(F, "true"), (N, "b")]),
            true,
            None,
        ),
        (
            "no name annotation",
            annotated(&[(F, "true"), (NS, "ns")]),
            true,
            None,
        ),
        (
            "a complete virtual pod",
            annotated(&[(F, "true"), (N, "b"), (NS, "ns")]),
            true,
            Some("ns/b"),
        ),
    ];
    for (case, pod, virtual_pod, key) in cases {
        assert_eq!(is_virtual_pod(&pod), virtual_pod, "{case}");
        assert_eq!(buffer_key_of(&pod).as_deref(), key, "{case}");
    }
}

/// A batch of real pods and two buffers' virtual pods (same name, two namespaces).
fn batch() -> Vec<Pod> {
    let mut b1 = buffer(CapacityBufferSpec {
        pod_template_ref: template_ref("t"),
        replicas: Some(2),
        ..Default::default()
    });
    b1.status = Some(ready(2));
    let mut b2 = b1.clone();
    b2.metadata.namespace = Some("other".into());
    let t = template(&[("cpu", "1")]);
    let mut pods = vec![Pod::default()];
    pods.extend(virtual_pods(&b1, &t, &now()));
    pods.extend(virtual_pods(&b2, &t, &now()));
    pods.push(Pod::default());
    pods
}

fn results(existing: &[(&str, &[usize])], new: &[&[usize]], errors: &[usize]) -> Results {
    Results {
        existing_nodes: existing
            .iter()
            .map(|(n, p)| (n.to_string(), p.to_vec()))
            .collect(),
        new_node_claims: new
            .iter()
            .map(|p| NewNodeClaim {
                node_pool: "default".into(),
                requirements: Default::default(),
                instance_types: Vec::new(),
                pods: p.to_vec(),
                requests: Resources::new(),
                labels: BTreeMap::new(),
                taints: Vec::new(),
                startup_taints: Vec::new(),
                min_values_relaxed: false,
                dra_drivers: Vec::new(),
            })
            .collect(),
        pod_errors: errors.iter().map(|&i| (i, "no fit".to_string())).collect(),
        interrupted: false,
        deferred: Default::default(),
        pending_by_zone: Default::default(),
        claim_allocations: Default::default(),
    }
}

#[test]
fn placements_bucket_virtual_pods_by_buffer() {
    // Batch: 0 real, 1-2 default/buf, 3-4 other/buf, 5 real.
    let r = results(&[("n1", &[0, 1]), ("n2", &[3])], &[&[2, 5]], &[4]);
    let got = placements(&r, &batch());
    assert_eq!(got.len(), 2, "real pods are not counted: {got:?}");
    assert_eq!(
        got["default/buf"],
        Placement {
            existing: 1,
            new_capacity: 1,
            failed: 0
        }
    );
    assert_eq!(
        got["other/buf"],
        Placement {
            existing: 1,
            new_capacity: 0,
            failed: 1
        }
    );
    let by_node = buffer_pods_by_node(&r, &batch());
    assert_eq!(
        by_node,
        BTreeMap::from([("n1".to_string(), 1), ("n2".to_string(), 1)])
    );
    // Only real pods on a node: not a buffer node.
    let r = results(&[("n1", &[0, 5])], &[], &[]);
    assert!(buffer_pods_by_node(&r, &batch()).is_empty());
    assert!(buffer_pods_by_node(&Results::default(), &batch()).is_empty());
}

#[test]
fn provisioning_condition_as_upstream() {
    let mut b = buffer(CapacityBufferSpec {
        pod_template_ref: template_ref("t"),
        replicas: Some(2),
        ..Default::default()
    });
    let p = |existing, new_capacity, failed| {
        Some(Placement {
            existing,
            new_capacity,
            failed,
        })
    };
    let cases: Vec<ConditionCase> = vec![
        (
            "all fit",
            Some(ready(2)),
            p(2, 0, 0),
            Some(("True", condition::REASON_FITS_EXISTING_CAPACITY)),
        ),
        (
            "new nodes needed",
            Some(ready(2)),
            p(1, 1, 0),
            Some(("False", condition::REASON_REQUIRES_NEW_CAPACITY)),
        ),
        (
            "some fit nowhere",
            Some(ready(2)),
            p(1, 0, 1),
            Some(("False", condition::REASON_REQUIRES_NEW_CAPACITY)),
        ),
        (
            "not ready",
            None,
            p(2, 0, 0),
            Some(("False", condition::REASON_NOT_READY_FOR_PROVISIONING)),
        ),
        (
            "zero replicas",
            Some(ready(0)),
            None,
            Some(("False", condition::REASON_BUFFER_EMPTY)),
        ),
        ("ready, not seen this round", Some(ready(2)), None, None),
    ];
    for (case, status, placement, want) in cases {
        b.status = status;
        let got = provisioning_condition(&b, placement.as_ref(), &now());
        assert_eq!(
            got.as_ref().map(|c| (c.status.as_str(), c.reason.as_str())),
            want,
            "{case}"
        );
        if let Some(c) = got {
            assert_eq!(c.type_, condition::PROVISIONING);
        }
    }
    // Writing the same condition again changes nothing.
    b.status = Some(ready(2));
    let c = provisioning_condition(&b, p(2, 0, 0).as_ref(), &now()).unwrap();
    let status = with_condition(&b, c.clone()).expect("a new condition changes the status");
    b.status = Some(status);
    assert!(with_condition(&b, c).is_none());
}

#[test]
fn provisioning_condition_for_a_scalable_ref_buffer() {
    let mut b = buffer(CapacityBufferSpec {
        scalable_ref: deployment_ref("web"),
        ..Default::default()
    });
    // (case, replicas, placement, expected status and reason)
    let cases = [
        (
            "a scalableRef buffer whose pods all fit",
            2,
            Placement {
                existing: 2,
                new_capacity: 0,
                failed: 0,
            },
            ("True", condition::REASON_FITS_EXISTING_CAPACITY),
        ),
        (
            "a scalableRef buffer that needs new nodes",
            3,
            Placement {
                existing: 1,
                new_capacity: 2,
                failed: 0,
            },
            ("False", condition::REASON_REQUIRES_NEW_CAPACITY),
        ),
    ];
    for (case, replicas, placement, want) in cases {
        b.status = Some(ready(replicas));
        let got = provisioning_condition(&b, Some(&placement), &now()).expect(case);
        assert_eq!((got.status.as_str(), got.reason.as_str()), want, "{case}");
    }
}
