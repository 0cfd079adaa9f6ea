//! The capacity-buffer scenario (gate on and off), and buffers that follow a workload.

use std::path::{Path, PathBuf};

use karpenter_sim::engine::Simulation;
use karpenter_sim::report::Report;
use karpenter_sim::scenario;

fn crds() -> Vec<karpenter_api::crd::Crd> {
    karpenter_api::crd::CORE
        .into_iter()
        .chain(karpenter_kwok::CRDS.iter().copied())
        .collect()
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/scenarios")
        .join(name)
}

fn run(s: &scenario::Scenario) -> Report {
    Simulation::new(s, karpenter_kwok::catalog::catalog()).run(&mut |_| {})
}

fn events<'a>(report: &'a Report, kind: &str) -> Vec<(u64, &'a str)> {
    report
        .events
        .iter()
        .filter(|e| e.kind == kind)
        .map(|e| (e.t_s, e.message.as_str()))
        .collect()
}

#[test]
fn a_buffer_keeps_headroom_ahead_of_the_pods() {
    let s =
        scenario::load(&example("capacity-buffer.yaml"), &crds()).unwrap_or_else(|e| panic!("{e}"));
    let report = run(&s);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    // One node for the buffer before any pod, one more when the web pods took its room.
    assert_eq!(report.nodeclaims.len(), 2, "{:?}", report.nodeclaims);
    assert!(report.nodeclaims[0].launched_at_s < 60);
    assert!(report.nodeclaims[1].launched_at_s >= 300);
    // The web pods waited for no launch: they bound to the buffer's node at once.
    assert!(
        report.summary.time_to_schedule_max_s <= 2.0,
        "{:?}",
        report.summary
    );
    // The buffer's conditions, as the controller and the provisioner write them.
    let buffer = events(&report, "CapacityBuffer");
    let said = |text: &str| buffer.iter().any(|(_, m)| m.contains(text));
    assert!(
        said("default/headroom ReadyForProvisioning=True Resolved"),
        "{buffer:?}"
    );
    assert!(said("Provisioning=False RequiresNewCapacity"), "{buffer:?}");
    assert!(said("Provisioning=True FitsExistingCapacity"), "{buffer:?}");
    // No FailedScheduling for virtual pods.
    assert!(events(&report, "FailedScheduling").is_empty());
    // Deleted at 20m, the buffer's node was emptied.
    let gone: Vec<_> = report
        .nodeclaims
        .iter()
        .filter(|n| n.terminated_at_s.is_some())
        .collect();
    assert_eq!(gone.len(), 1, "{:?}", report.nodeclaims);
    assert!(gone[0].terminated_at_s.unwrap() >= 1200);
}

#[test]
fn with_the_gate_off_buffers_are_ignored() {
    let mut s = scenario::load(&example("capacity-buffer.yaml"), &crds()).unwrap();
    s.spec.feature_gates = "CapacityBuffer=false".parse().unwrap();
    s.spec.expect.clear();
    let report = run(&s);
    // No node until the web pods come at 5m, and they wait for its launch.
    assert_eq!(report.nodeclaims.len(), 1, "{:?}", report.nodeclaims);
    assert!(report.nodeclaims[0].launched_at_s >= 300);
    assert!(report.summary.time_to_schedule_max_s > 10.0);
    assert!(events(&report, "CapacityBuffer").is_empty());
}

#[test]
fn a_percentage_buffer_follows_its_deployment() {
    let text = r#"
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c-4x-amd64-linux]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 4
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - {name: api, image: api, resources: {requests: {cpu: "1"}}}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: api-headroom}
spec:
  scalableRef: {apiGroup: apps, kind: Deployment, name: api}
  percentage: 100
---
apiVersion: simulation.karpenter-rs.dev/v1alpha1
kind: Scenario
metadata: {name: percentage}
spec:
  duration: 10m
  featureGates: CapacityBuffer=true
  steps:
    - {at: 5m, scale: {kind: Deployment, name: api, replicas: 8}}
"#;
    let dir = std::env::temp_dir().join(format!("cb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("percentage.yaml");
    std::fs::write(&path, text).unwrap();
    let s = scenario::load(&path, &crds()).unwrap_or_else(|e| panic!("{e}"));
    let report = run(&s);
    // 4 pods + 4 chunks of 1 CPU before 5m; 8 + 8 after: the nodes double.
    let before = report
        .nodeclaims
        .iter()
        .filter(|n| n.launched_at_s < 300)
        .count();
    let total = report.nodeclaims.len();
    assert!(before >= 2, "{:?}", report.nodeclaims);
    assert!(
        total >= 2 * before,
        "{before} then {total}: {:?}",
        report.nodeclaims
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `plan` over a dump holding a CapacityBuffer: with the gate on, a NodeClaim for its virtual
/// pods although no pod is pending (its status resolved as the controller would); off, none.
#[test]
fn plan_reports_buffer_headroom() {
    let text = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  disruption: {consolidateAfter: 0s}
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c-4x-amd64-linux]}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: headroom, namespace: default}
template:
  spec:
    containers:
      - {name: c, image: app, resources: {requests: {cpu: "1"}}}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: headroom, namespace: default, uid: u1}
spec:
  podTemplateRef: {name: headroom}
  replicas: 2
"#;
    let path = Path::new("buffer.yaml");
    let catalog = karpenter_kwok::catalog::catalog();
    const NOW: i64 = 1_736_164_800;
    let gates = "CapacityBuffer=true".parse().unwrap();
    let plan = karpenter_planner::plan(path, text, &catalog, NOW, gates).unwrap();
    assert_eq!(
        plan.provisioning.nodeclaims.len(),
        1,
        "{:?}",
        plan.provisioning
    );
    assert_eq!(
        plan.provisioning.nodeclaims[0].pods,
        [
            "default/capacity-buffer-headroom-1",
            "default/capacity-buffer-headroom-2"
        ]
    );
    let off = karpenter_planner::plan(path, text, &catalog, NOW, Default::default()).unwrap();
    assert!(off.provisioning.nodeclaims.is_empty());
}
