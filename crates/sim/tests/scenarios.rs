//! The example scenarios and the built-in one, run as a user would, with assertions on what
//! they must show; and the errors a broken scenario gets.

use std::path::{Path, PathBuf};

use karpenter_sim::engine::Simulation;
use karpenter_sim::report::Report;
use karpenter_sim::scenario::{self, ScenarioError};

/// karpenter's CRDs and the KWOK provider's, as the binary's registry gives the simulator.
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
    let catalog = match s.spec.catalog.as_deref().unwrap_or("kwok") {
        "kwok" => karpenter_kwok::catalog::catalog(),
        other => panic!("the scenario tests run on the kwok catalog, not {other:?}"),
    };
    Simulation::new(s, catalog).run(&mut |_| {})
}

fn run_file(name: &str) -> Report {
    let report = run(&scenario::load(&example(name), &crds()).unwrap_or_else(|e| panic!("{e}")));
    assert!(report.failures.is_empty(), "{name}: {:?}", report.failures);
    report
}

#[test]
fn built_in_scenario_serves_the_burst() {
    let report = run(&scenario::built_in());
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let s = &report.summary;
    // Ten pods, and the five left after the scale-down are rescheduled once by consolidation.
    assert_eq!(
        (s.pods_total, s.pods_scheduled, s.pods_pending),
        (15, 15, 0)
    );
    assert!(s.nodes_launched >= 1);
    // After the scale-down the half-empty node is replaced by a cheaper one, once.
    let consolidations: Vec<_> = report
        .disruptions
        .iter()
        .filter(|d| d.kind == "Underutilized")
        .collect();
    assert_eq!(consolidations.len(), 1, "{:?}", report.disruptions);
    let last = report.timeline.last().expect("samples");
    let peak = report
        .timeline
        .iter()
        .map(|t| t.cost_per_hour)
        .fold(0.0, f64::max);
    assert!(last.cost_per_hour < peak && last.nodes == 1, "{last:?}");
    // Nodes appear after the launch and registration delays (20s + 30s), plus batching.
    assert!(
        s.time_to_schedule_p50_s >= 50.0 && s.time_to_schedule_max_s <= 70.0,
        "{s:?}"
    );
    // On demand only, as the NodePool says.
    assert!(
        report
            .nodeclaims
            .iter()
            .all(|n| n.capacity_type == "on-demand")
    );
    assert!(s.cost_total > s.cost_lower_bound && s.cost_lower_bound > 0.0);
}

#[test]
fn burst_scale_up_uses_few_large_nodes() {
    let report = run_file("burst-scale-up.yaml");
    // Sixty replicas, and the three of the first, small node once more: once the big node
    // is up (and no longer nominated for pending pods), consolidation deletes the small one.
    assert_eq!(report.summary.pods_total, 63);
    let consolidated: Vec<_> = report
        .disruptions
        .iter()
        .filter(|d| d.kind == "Underutilized")
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(
        consolidated,
        ["single-node consolidation: delete general-0, saving $0.0380/h"]
    );
    assert!(report.summary.nodes_launched <= 4);
    // Within 15% of the linear-programming bound while the burst runs.
    let busy: Vec<_> = report
        .timeline
        .iter()
        .filter(|t| t.pods_running == 60)
        .collect();
    assert!(!busy.is_empty());
    assert!(
        busy.iter()
            .all(|t| t.cost_per_hour <= t.lower_bound_per_hour * 1.15 + 1e-9),
        "{:?}",
        busy.first()
    );
}

#[test]
fn diurnal_wave_serves_every_ramp() {
    let report = run_file("diurnal-wave.yaml");
    let peak = report
        .timeline
        .iter()
        .map(|t| t.pods_running)
        .max()
        .unwrap();
    assert_eq!(peak, 40);
    assert!(report.events.iter().filter(|e| e.kind == "Scaled").count() == 4);
}

#[test]
fn batch_job_completes() {
    let report = run_file("batch-jobs.yaml");
    assert_eq!(report.summary.pods_total, 30, "30 completions");
    let last = report.timeline.last().unwrap();
    assert_eq!(last.pods_running, 0, "all pods finished");
    assert!(report.nodeclaims.iter().all(|n| n.capacity_type == "spot"));
}

#[test]
fn spot_interruption_is_replaced() {
    let report = run_file("spot-interruption.yaml");
    assert_eq!(report.summary.nodes_terminated, 1);
    assert!(
        report.summary.nodes_launched >= 2,
        "a replacement was launched"
    );
    let interrupted = report
        .events
        .iter()
        .find(|e| e.kind == "Interrupted")
        .unwrap()
        .t_s;
    let replaced = report
        .events
        .iter()
        .find(|e| e.kind == "Launched" && e.t_s > interrupted)
        .expect("a launch after the interruption");
    assert!(
        replaced.t_s - interrupted <= 15,
        "launched {}s after",
        replaced.t_s - interrupted
    );
}

#[test]
fn zone_spread_covers_every_allowed_zone() {
    let report = run_file("zone-spread.yaml");
    let zones: std::collections::BTreeSet<&str> =
        report.nodeclaims.iter().map(|n| n.zone.as_str()).collect();
    assert_eq!(
        zones.into_iter().collect::<Vec<_>>(),
        ["test-zone-a", "test-zone-b", "test-zone-c"]
    );
}

#[test]
fn daemonsets_are_reserved_on_new_nodes() {
    let report = run_file("small-pods-daemonsets.yaml");
    assert_eq!(report.summary.pods_pending, 0);
    assert!(report.summary.nodes_launched >= 2);
}

fn parse_error(text: &str) -> String {
    match scenario::parse(Path::new("s.yaml"), text, &crds()) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

const HEADER: &str =
    "apiVersion: simulation.karpenter-rs.dev/v1alpha1\nkind: Scenario\nmetadata: {name: t}\n";

#[test]
fn scenario_errors_name_the_document_and_field() {
    let e = parse_error(&format!("{HEADER}spec:\n  duration: 10m\n  stepz: []\n"));
    assert!(
        e.starts_with("s.yaml: document 1: spec.stepz: unknown field `stepz`"),
        "{e}"
    );
    let e = parse_error(&format!("{HEADER}spec:\n  duration: ten minutes\n"));
    assert!(
        e.contains("document 1: spec.duration:") && e.contains("invalid duration"),
        "{e}"
    );
    let e = parse_error(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\n---\n{HEADER}spec: {{duration: 1m}}\n"
    ));
    assert!(
        e.starts_with("s.yaml: document 1: kind: v1 ConfigMap is not supported"),
        "{e}"
    );
    // A provider's NodeClass is judged by its CRD, which the registry hands the simulator.
    let e = parse_error(&format!(
        "apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {{name: d}}\nspec: {{nodeRegistrationDelay: soon}}\n---\n{HEADER}spec: {{duration: 1m}}\n"
    ));
    assert!(
        e.starts_with("s.yaml: document 1: spec.nodeRegistrationDelay:"),
        "{e}"
    );
    let e = parse_error(&format!(
        "{HEADER}spec:\n  duration: 1m\n  steps:\n  - at: 10s\n    scale: {{kind: Deployment, name: a, replicas: 1}}\n    interrupt: {{}}\n"
    ));
    assert!(
        e.contains("spec.steps[0]: a step takes exactly one of"),
        "{e}"
    );
    let e = parse_error(&format!(
        "{HEADER}spec:\n  duration: 1m\n  steps:\n  - at: 2m\n    scale: {{kind: Deployment, name: a, replicas: 1}}\n"
    ));
    assert!(e.contains("spec.steps[0].at: is after the end"), "{e}");
    // Karpenter objects are checked as the API server would.
    let e = parse_error(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: x}}\nspec:\n  weight: 0\n  template:\n    spec:\n      nodeClassRef: {{group: g, kind: K, name: n}}\n      requirements: []\n---\n{HEADER}spec: {{duration: 1m}}\n"
    ));
    assert!(
        e.starts_with("s.yaml: document 1: spec.weight: must be greater than or equal to 1"),
        "{e}"
    );
    let e = parse_error(&format!(
        "{HEADER}spec:\n  duration: 1m\n  featureGates: SpotToSpot=true\n"
    ));
    assert!(
        e.contains("spec.featureGates:") && e.contains("unknown feature gate \"SpotToSpot\""),
        "{e}"
    );
    // Objects inside steps get their step's path.
    let e = parse_error(&format!(
        "{HEADER}spec:\n  duration: 1m\n  steps:\n  - at: 1s\n    apply:\n    - apiVersion: apps/v1\n      kind: Deployment\n      metadata: {{name: d}}\n      spec: {{replicas: many}}\n"
    ));
    assert!(e.contains("spec.steps[0].apply[0].spec.replicas"), "{e}");
    assert!(matches!(
        scenario::parse(
            Path::new("s.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
            &crds()
        ),
        Err(ScenarioError::Structure { .. })
    ));
}

/// 2025-01-06 12:00 UTC, a Monday, after every timestamp in the snapshots.
const NOW: i64 = 1_736_164_800;

#[test]
fn plan_from_a_snapshot() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/snapshots/small-cluster.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let plan = karpenter_planner::plan(
        &path,
        &text,
        &karpenter_kwok::catalog::catalog(),
        NOW,
        Default::default(),
    )
    .unwrap();
    assert_eq!(
        plan.warnings,
        [
            "the dump holds no NodeClaims: karpenter manages only nodes that have one, so none of its nodes is disrupted (add nodeclaims to the kubectl get)"
        ],
        "the example's node has no NodeClaim"
    );
    let p = &plan.provisioning;
    assert_eq!(plan.snapshot.pending_pods, 4);
    assert_eq!(
        plan.snapshot.ignored_pods, 2,
        "web-6 waits for kube-scheduler to try it first; cache-0 is pinned to a hostname"
    );
    assert_eq!(p.ignored.len(), 1, "only cache-0 says why");
    assert_eq!(p.ignored[0].pod, "shop/cache-0");
    assert!(
        p.ignored[0]
            .reason
            .contains("\"kubernetes.io/hostname\" is restricted"),
        "{}",
        p.ignored[0].reason
    );
    assert_eq!(
        p.existing_node_placements.len(),
        1,
        "one web pod still fits the node"
    );
    assert_eq!(p.existing_node_placements[0].node, "default-abc12");
    assert_eq!(p.nodeclaims.len(), 1);
    assert_eq!(p.nodeclaims[0].pods.len(), 2);
    assert!(
        p.nodeclaims[0]
            .instance_types
            .iter()
            .all(|t| t.ends_with("-linux")),
        "the NodePool allows Linux only"
    );
    assert_eq!(p.unschedulable.len(), 1);
    assert_eq!(p.unschedulable[0].pod, "ml/trainer");
    assert!(
        p.unschedulable[0]
            .reason
            .contains("no instance type has enough resources"),
        "{}",
        p.unschedulable[0].reason
    );
    assert!(!p.unschedulable[0].reason.contains("hostname-placeholder"));
    let json = serde_json::to_value(&plan).unwrap();
    for key in ["nodeclaims", "existing_node_placements", "unschedulable"] {
        assert!(json["provisioning"].get(key).is_some(), "{key}");
    }
    assert!(json["disruption"]["actions"].is_array() && json["disruption"]["blocked"].is_array());
}

#[test]
fn cluster_autoscaler_comparison() {
    let s = scenario::load(&example("diurnal-wave.yaml"), &crds()).unwrap();
    let catalog = karpenter_kwok::catalog::catalog();
    let ca =
        Simulation::cluster_autoscaler(&s, catalog.clone(), Default::default()).run(&mut |_| {});
    assert!(ca.failures.is_empty(), "{:?}", ca.failures);
    assert!(ca.scenario.ends_with("(cluster-autoscaler)"));
    let groups = ca
        .events
        .iter()
        .find(|e| e.kind == "NodeGroups")
        .expect("node groups are reported");
    assert_eq!(
        groups.message.matches(':').count(),
        3,
        "three size tiers: {}",
        groups.message
    );
    // Every node it launched belongs to one of its groups.
    for n in &ca.nodeclaims {
        assert!(
            groups.message.contains(&n.instance_type),
            "{} not in {}",
            n.instance_type,
            groups.message
        );
    }
    // The wave goes down again: underused nodes are scaled down after 10 minutes.
    assert!(!ca.disruptions.is_empty());
    let first_scale_down = ca.disruptions[0].t_s;
    assert!(
        first_scale_down >= 80 * 60 + 600,
        "not before 10 minutes under 50%: {first_scale_down}"
    );
    let text = karpenter_sim::report::compare_text(
        &Simulation::new(&s, catalog).run(&mut |_| {}),
        "karpenter-rs",
        &ca,
        "cluster-autoscaler",
    );
    assert!(
        text.contains("karpenter-rs")
            && text.contains("cluster-autoscaler")
            && text.contains("over the bound")
    );
}

#[test]
fn unknown_fields_in_kubernetes_objects_are_errors() {
    let e = parse_error(&format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d}}\nspec:\n  replicaz: 3\n  selector: {{matchLabels: {{a: b}}}}\n  template: {{spec: {{containers: [{{name: c, image: c}}]}}}}\n---\n{HEADER}spec: {{duration: 1m}}\n"
    ));
    assert_eq!(e, "s.yaml: document 1: spec.replicaz: unknown field");
    let e = parse_error(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers: [{{name: c, image: c, resourcez: {{}}}}]\n---\n{HEADER}spec: {{duration: 1m}}\n"
    ));
    assert_eq!(
        e,
        "s.yaml: document 1: spec.containers.0.resourcez: unknown field"
    );
}

#[test]
fn budget_schedule_holds_consolidation_until_it_ends() {
    let report = run_file("consolidation-budget.yaml");
    assert!(!report.disruptions.is_empty());
    // The budget allows no disruption from 00:00 to 00:30 of each day.
    assert!(
        report.disruptions.iter().all(|d| d.t_s >= 30 * 60),
        "{:?}",
        report.disruptions
    );
    // 20% of four nodes rounds up to one: never two commands in the same pass.
    let mut times: Vec<u64> = report.disruptions.iter().map(|d| d.t_s).collect();
    times.dedup();
    assert_eq!(times.len(), report.disruptions.len());
    assert_eq!(report.summary.pods_pending, 0);
}

#[test]
fn plan_reports_disruption_and_why_nodes_stay() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/snapshots/idle-nodes.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let plan = karpenter_planner::plan(
        &path,
        &text,
        &karpenter_kwok::catalog::catalog(),
        NOW,
        Default::default(),
    )
    .unwrap();
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    let d = &plan.disruption;
    assert_eq!(d.actions.len(), 1, "{d:?}");
    assert_eq!(
        (d.actions[0].reason.as_str(), d.actions[0].nodes.as_slice()),
        ("Empty", &["empty-1".to_string()][..])
    );
    assert!(d.actions[0].replacements.is_empty() && d.actions[0].savings_per_hour > 0.0);
    let why = |node: &str| {
        d.blocked
            .iter()
            .find(|k| k.node == node)
            .map(|k| k.reason.clone())
            .unwrap_or_default()
    };
    assert!(
        why("db-1").contains("PodDisruptionBudget=[shop/db]"),
        "{d:?}"
    );
    assert!(why("pinned-1").contains("do-not-disrupt"), "{d:?}");
    assert!(why("big-1").contains("emptiness acts first"), "{d:?}");
    // Every node is either acted on or explained.
    assert_eq!(
        d.actions.iter().map(|a| a.nodes.len()).sum::<usize>() + d.blocked.len(),
        plan.snapshot.nodes
    );

    // Once the empty node is going, the big node's one small pod moves to a node with room
    // (a do-not-disrupt node may still receive pods): delete, no replacement.
    let without_empty = text.replacen(
        "name: empty-1",
        "name: empty-1\n      deletionTimestamp: \"2025-01-06T11:59:00Z\"",
        1,
    );
    let plan = karpenter_planner::plan(
        &path,
        &without_empty,
        &karpenter_kwok::catalog::catalog(),
        NOW,
        Default::default(),
    )
    .unwrap();
    let a = &plan.disruption.actions[0];
    assert_eq!(
        (a.reason.as_str(), a.nodes.as_slice()),
        ("Underutilized", &["big-1".to_string()][..]),
        "{:?}",
        plan.disruption
    );
    assert!(a.replacements.is_empty());
    assert!((a.savings_per_hour - 0.8687).abs() < 1e-3, "{a:?}");
}

#[test]
fn expired_nodes_are_drained_and_their_pods_rescheduled() {
    let text = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: short-lived}
spec:
  template:
    spec:
      expireAfter: 10m
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  replicas: 3
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers: [{name: app, image: app, resources: {requests: {cpu: "1"}}}]
---
apiVersion: simulation.karpenter-rs.dev/v1alpha1
kind: Scenario
metadata: {name: expiry}
spec:
  duration: 25m
"#;
    let report = run(&scenario::parse(Path::new("expiry.yaml"), text, &crds()).unwrap());
    let expired: Vec<_> = report
        .disruptions
        .iter()
        .filter(|d| d.kind == "Expired")
        .collect();
    // The first node expires at about 10m50s, its replacement 10 minutes after it launched.
    assert!(!expired.is_empty(), "{:?}", report.events);
    assert!(expired.iter().all(|d| d.t_s >= 10 * 60), "{expired:?}");
    for n in &report.nodeclaims {
        if let Some(end) = n.terminated_at_s {
            assert!(
                end - n.launched_at_s >= 10 * 60,
                "{n:?} ended before expireAfter"
            );
        }
    }
    assert_eq!(report.summary.pods_pending, 0);
    assert!(report.summary.nodes_launched >= 2);
}

#[test]
fn a_template_change_drifts_nodes_and_a_widened_requirement_does_not() {
    let text = |steps: &str| {
        format!(
            r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  disruption: {{consolidateAfter: Never}}
  template:
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: app}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: app}}}}
  template:
    metadata: {{labels: {{app: app}}}}
    spec:
      containers: [{{name: app, image: app, resources: {{requests: {{cpu: "1"}}}}}}]
---
apiVersion: simulation.karpenter-rs.dev/v1alpha1
kind: Scenario
metadata: {{name: drift}}
spec:
  duration: 20m
  steps:
  - at: 5m
    apply:
    - apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {{name: default}}
      spec:
        disruption: {{consolidateAfter: Never}}
        template:
{steps}
"#
        )
    };
    let widened = "          spec:
            nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
            requirements:
              - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand, spot]}";
    let report = run(&scenario::parse(Path::new("drift.yaml"), &text(widened), &crds()).unwrap());
    assert!(
        report.disruptions.iter().all(|d| d.kind != "Drifted"),
        "{:?}",
        report.disruptions
    );
    let labelled = "          metadata: {labels: {team: a}}
          spec:
            nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
            requirements:
              - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}";
    let report = run(&scenario::parse(Path::new("drift.yaml"), &text(labelled), &crds()).unwrap());
    let drifted: Vec<_> = report
        .disruptions
        .iter()
        .filter(|d| d.kind == "Drifted")
        .collect();
    assert!(!drifted.is_empty(), "{:?}", report.events);
    assert!(drifted.iter().all(|d| d.t_s >= 5 * 60), "{drifted:?}");
    assert_eq!(report.summary.pods_pending, 0);
    assert!(
        report
            .nodeclaims
            .iter()
            .any(|n| n.launched_at_s >= 5 * 60 && n.terminated_at_s.is_none()),
        "a replacement launched after the change is still running: {:?}",
        report.nodeclaims
    );
}

/// Issue: a NodePool requiring a custom label with several values (or `Exists`) replaced every
/// node it launched as RequirementsDrifted, forever. Its nodes now carry a value the
/// requirement allows, so they stay; and a pod requiring one of the values gets a node.
#[test]
fn custom_requirements_label_the_nodes_so_they_never_drift() {
    for requirement in [
        "{key: example.com/team, operator: In, values: [a, b]}",
        "{key: example.com/team, operator: Exists}",
    ] {
        let text = format!(
            r#"
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {{name: default}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: teams}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
        - {{key: kubernetes.io/os, operator: In, values: [linux]}}
        - {requirement}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 4
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - {{name: web, image: web, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: team-b}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: team-b}}}}
  template:
    metadata: {{labels: {{app: team-b}}}}
    spec:
      nodeSelector: {{example.com/team: b}}
      containers:
        - {{name: b, image: b, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}
---
apiVersion: simulation.karpenter-rs.dev/v1alpha1
kind: Scenario
metadata: {{name: custom-requirement}}
spec:
  duration: 40m
"#
        );
        let s = scenario::parse(Path::new("custom.yaml"), &text, &crds())
            .unwrap_or_else(|e| panic!("{e}"));
        let report = run(&s);
        assert_eq!(report.summary.pods_pending, 0, "{requirement}");
        let drifted: Vec<_> = report
            .events
            .iter()
            .filter(|e| e.message.contains("Drift") || e.kind.contains("Drift"))
            .collect();
        assert!(drifted.is_empty(), "{requirement}: {drifted:?}");
        assert!(
            report.summary.nodes_launched <= 3,
            "{requirement}: {} nodes launched in 40 minutes",
            report.summary.nodes_launched
        );
    }
}

/// Issue: do-not-disrupt pods on an expired node were evicted at once. A drain waits for them;
/// the NodePool's terminationGracePeriod alone forces them out, at its deadline.
#[test]
fn do_not_disrupt_pods_hold_an_expired_node_until_the_grace_period_ends() {
    let text = r#"
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: batch}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      expireAfter: 10m
      terminationGracePeriod: 30m
      requirements:
        - {key: kubernetes.io/os, operator: In, values: [linux]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: training}
spec:
  replicas: 2
  selector: {matchLabels: {app: training}}
  template:
    metadata:
      labels: {app: training}
      annotations: {karpenter.sh/do-not-disrupt: "true"}
    spec:
      containers:
        - {name: t, image: t, resources: {requests: {cpu: "1", memory: 1Gi}}}
---
apiVersion: simulation.karpenter-rs.dev/v1alpha1
kind: Scenario
metadata: {name: do-not-disrupt-expiry}
spec:
  duration: 60m
"#;
    let s = scenario::parse(Path::new("dnd.yaml"), text, &crds()).unwrap_or_else(|e| panic!("{e}"));
    let report = run(&s);
    let first = &report.nodeclaims[0];
    let expired_at = first.launched_at_s + 10 * 60;
    let ended = first
        .terminated_at_s
        .expect("the expired node goes in the end");
    assert!(
        ended >= expired_at + 30 * 60 - 30,
        "the node went at {ended} s, expired at {expired_at} s: its do-not-disrupt pods were evicted"
    );
    assert!(
        ended <= expired_at + 30 * 60 + 60,
        "the deadline forces them out: {ended}"
    );
    assert_eq!(report.summary.pods_pending, 0, "the pods found a new node");
}

/// Pods that must sit next to a cache in another namespace, chosen by the namespace's labels
/// (a required pod affinity with a `namespaceSelector`), get a place beside it: namespaces reach
/// the scheduling simulation through the snapshot, as in the controller.
#[test]
fn pod_affinity_with_a_namespace_selector_follows_the_namespace_labels() {
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
        - {key: kubernetes.io/os, operator: In, values: [linux]}
---
apiVersion: v1
kind: Namespace
metadata: {name: caches, labels: {team: cache}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: cache, namespace: caches}
spec:
  replicas: 1
  selector: {matchLabels: {app: cache}}
  template:
    metadata: {labels: {app: cache}}
    spec:
      containers:
        - {name: cache, image: cache, resources: {requests: {cpu: "1", memory: 1Gi}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  replicas: 2
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      affinity:
        podAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: cache}}
              namespaceSelector: {matchLabels: {team: cache}}
              topologyKey: kubernetes.io/hostname
      containers:
        - {name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}
---
apiVersion: simulation.karpenter-rs.dev/v1alpha1
kind: Scenario
metadata: {name: namespace-selector}
spec:
  duration: 10m
"#;
    let s = scenario::parse(Path::new("ns.yaml"), text, &crds()).unwrap_or_else(|e| panic!("{e}"));
    let report = run(&s);
    assert_eq!(
        report.summary.pods_pending, 0,
        "the app pods find the cache: {:?}",
        report.events
    );
}

/// A pod whose claim is bound to a zonal volume gets a node in the volume's zone, and one whose
/// claim waits for its first consumer gets a zone its StorageClass allows.
#[test]
fn pods_get_nodes_where_their_volumes_are() {
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
        - {key: kubernetes.io/os, operator: In, values: [linux]}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-db-0}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-c]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-0, annotations: {pv.kubernetes.io/bind-completed: "yes"}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
  volumeName: pv-db-0
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: zone-d-only}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [test-zone-d]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-1}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: zone-d-only
  resources: {requests: {storage: 10Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, labels: {app: db}}
spec:
  containers: [{name: db, image: db, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-0}}]
---
apiVersion: v1
kind: Pod
metadata: {name: db-1, labels: {app: db}}
spec:
  containers: [{name: db, image: db, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-1}}]
---
apiVersion: simulation.karpenter-rs.dev/v1alpha1
kind: Scenario
metadata: {name: zonal-volumes}
spec:
  duration: 5m
"#;
    let s =
        scenario::parse(Path::new("volumes.yaml"), text, &crds()).unwrap_or_else(|e| panic!("{e}"));
    let report = run(&s);
    assert_eq!(report.summary.pods_pending, 0, "{:?}", report.events);
    let mut zones: Vec<&str> = report.nodeclaims.iter().map(|n| n.zone.as_str()).collect();
    zones.sort();
    assert_eq!(
        zones,
        ["test-zone-c", "test-zone-d"],
        "{:?}",
        report.nodeclaims
    );
}

#[test]
fn node_overlay_price_changes_the_instance_type_chosen() {
    let report = run_file("node-overlay.yaml");
    let families: Vec<&str> = report
        .nodeclaims
        .iter()
        .map(|n| n.instance_type.as_str())
        .collect();
    assert!(!families.is_empty());
    // The discounted `m` family, but not the size the heavier overlay prices at 5/h.
    assert!(
        families
            .iter()
            .all(|t| t.starts_with("m-") && *t != "m-8x-amd64-linux"),
        "{families:?}"
    );
    // The price karpenter decided with is the overlaid one: a fifth of the list price
    // (m-16x lists at 0.025 per vCPU plus 0.001 per GB, about 0.54/h).
    assert!(
        report.nodeclaims.iter().all(|n| n.price_per_hour < 0.2),
        "{:?}",
        report.nodeclaims
    );

    // The same scenario with the gate off launches the `c` family at list price.
    let mut s = scenario::load(&example("node-overlay.yaml"), &crds()).unwrap();
    s.spec.feature_gates = "NodeOverlay=false".parse().unwrap();
    let off = run(&s);
    assert!(off.failures.is_empty(), "{:?}", off.failures);
    assert!(
        off.nodeclaims
            .iter()
            .all(|n| n.instance_type.starts_with("c-")),
        "{:?}",
        off.nodeclaims
            .iter()
            .map(|n| &n.instance_type)
            .collect::<Vec<_>>()
    );
}

#[test]
fn static_capacity_keeps_a_static_node_pool_at_its_replicas() {
    let report = run_file("static-capacity.yaml");
    let statics: Vec<_> = report
        .nodeclaims
        .iter()
        .filter(|n| n.name.starts_with("static-"))
        .collect();
    assert_eq!(statics.len(), 5, "3, then 2 more: {statics:?}");
    assert!(
        statics
            .iter()
            .all(|n| n.instance_type == "c-4x-amd64-linux")
    );

    // With the gate off the static NodePool is ignored: no node until the pods come, and
    // those from the default NodePool.
    let mut s = scenario::load(&example("static-capacity.yaml"), &crds()).unwrap();
    s.spec.feature_gates = "StaticCapacity=false".parse().unwrap();
    s.spec.expect.clear();
    let off = run(&s);
    assert!(
        off.nodeclaims
            .iter()
            .all(|n| !n.name.starts_with("static-")),
        "{:?}",
        off.nodeclaims
    );
}

#[test]
fn plan_reports_static_capacity() {
    let text = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: static}
spec:
  replicas: 2
  limits: {nodes: "5"}
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c-4x-amd64-linux]}
"#;
    let path = Path::new("static.yaml");
    let gates = "StaticCapacity=true".parse().unwrap();
    let plan = karpenter_planner::plan(path, text, &karpenter_kwok::catalog::catalog(), NOW, gates)
        .unwrap();
    assert_eq!(plan.static_capacity.nodeclaims.len(), 2);
    assert_eq!(
        plan.static_capacity.nodeclaims[0].instance_types,
        ["c-4x-amd64-linux"]
    );
    assert!(plan.provisioning.nodeclaims.is_empty());
    assert!(
        plan.to_text()
            .contains("Static capacity: launch 2 NodeClaim(s)")
    );
    let off = karpenter_planner::plan(
        path,
        text,
        &karpenter_kwok::catalog::catalog(),
        NOW,
        Default::default(),
    )
    .unwrap();
    assert!(off.static_capacity.nodeclaims.is_empty());
}

#[test]
fn a_changed_capacity_overlay_drifts_the_nodes_launched_under_it() {
    // Pods need an extended resource only the overlay gives the `c` family; at 5m the overlay
    // gives more of it, so every node launched before is drifted and replaced.
    let overlay = |fuse: u32| {
        format!(
            "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {{name: fuse}}\nspec:\n  requirements:\n    - {{key: karpenter.kwok.sh/instance-family, operator: In, values: [c]}}\n  capacity: {{smarter-devices/fuse: \"{fuse}\"}}\n"
        )
    };
    let text = format!(
        r#"apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {{name: default}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  disruption: {{consolidateAfter: Never}}
  template:
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
{first}---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: fuse}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: fuse}}}}
  template:
    metadata: {{labels: {{app: fuse}}}}
    spec:
      containers:
        - name: fuse
          image: fuse
          resources:
            requests: {{cpu: 500m, smarter-devices/fuse: "1"}}
            limits: {{smarter-devices/fuse: "1"}}
---
apiVersion: simulation.karpenter-rs.dev/v1alpha1
kind: Scenario
metadata: {{name: overlay-drift}}
spec:
  duration: 20m
  featureGates: NodeOverlay=true
  steps:
    - at: 5m
      apply:
{second}
"#,
        first = overlay(1),
        second = overlay(2)
            .lines()
            .enumerate()
            .map(|(i, l)| {
                let prefix = if i == 0 { "        - " } else { "          " };
                format!("{prefix}{l}\n")
            })
            .collect::<String>()
    );
    let s = scenario::parse(Path::new("overlay-drift.yaml"), &text, &crds())
        .unwrap_or_else(|e| panic!("{e}"));
    let report = run(&s);
    assert_eq!(report.summary.pods_pending, 0, "{:?}", report.events);
    let drifted: Vec<_> = report
        .disruptions
        .iter()
        .filter(|d| d.kind == "Drifted")
        .collect();
    assert!(!drifted.is_empty(), "{:?}", report.disruptions);
    assert!(drifted.iter().all(|d| d.t_s >= 300), "{drifted:?}");
    let before: Vec<_> = report
        .nodeclaims
        .iter()
        .filter(|n| n.launched_at_s < 300)
        .collect();
    assert!(!before.is_empty());
    assert!(
        before.iter().all(|n| n.terminated_at_s.is_some()),
        "every node launched under the old overlay is replaced: {:?}",
        report.nodeclaims
    );

    // Without the gate the pods fit nowhere (no type has the resource) and nothing drifts.
    let mut off = s.clone();
    off.spec.feature_gates = "NodeOverlay=false".parse().unwrap();
    let off = run(&off);
    assert!(off.disruptions.iter().all(|d| d.kind != "Drifted"));
}

#[test]
fn node_repair_replaces_an_unhealthy_node_after_its_toleration_unless_the_breaker_holds() {
    let report = run_file("node-repair.yaml");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let repaired: Vec<_> = report
        .disruptions
        .iter()
        .filter(|d| d.kind == "Unhealthy")
        .collect();
    // Ready=False at 5m, KWOK's 10-minute toleration: repaired at 15m, once.
    assert_eq!(repaired.len(), 1, "{:?}", report.disruptions);
    assert_eq!(repaired[0].t_s, 15 * 60);
    assert!(repaired[0].message.contains("Ready=False"), "{repaired:?}");
    // Three of five unhealthy is past the 20% breaker: each is reported, none replaced.
    let blocked: Vec<_> = report
        .events
        .iter()
        .filter(|e| e.kind == "NodeRepairBlocked")
        .collect();
    assert_eq!(blocked.len(), 3, "{blocked:?}");
    assert!(blocked.iter().all(|e| e.t_s >= 30 * 60), "{blocked:?}");
    assert_eq!(report.summary.nodes_terminated, 1);

    // With the gate off the bad node stays.
    let mut s = scenario::load(&example("node-repair.yaml"), &crds()).unwrap();
    s.spec.feature_gates = "NodeRepair=false".parse().unwrap();
    let off = run(&s);
    assert!(off.disruptions.is_empty(), "{:?}", off.disruptions);
    assert_eq!(off.summary.nodes_terminated, 0);
}

/// A dump of `nodes` KWOK nodes of NodePool `default`, each with its NodeClaim; the first
/// `bad` have been `Ready=False` since `since` (Unix seconds).
fn repair_dump(nodes: usize, bad: usize, since: i64) -> String {
    let since = k8s_openapi::jiff::Timestamp::from_second(since).unwrap();
    let mut text = String::from(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}\n",
    );
    for i in 0..nodes {
        let status = if i < bad { "False" } else { "True" };
        text.push_str(&format!(
            r#"---
apiVersion: v1
kind: Node
metadata:
  name: n{i}
  labels: {{karpenter.sh/nodepool: default, karpenter.sh/initialized: "true", node.kubernetes.io/instance-type: c-4x-amd64-linux}}
spec: {{providerID: "kwok://n{i}"}}
status:
  allocatable: {{cpu: "4", memory: 8Gi, pods: "64"}}
  capacity: {{cpu: "4", memory: 8Gi, pods: "64"}}
  conditions: [{{type: Ready, status: "{status}", lastTransitionTime: "{since}"}}]
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: c{i}
  labels: {{karpenter.sh/nodepool: default}}
spec:
  nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
  requirements: []
status:
  providerID: "kwok://n{i}"
  nodeName: n{i}
"#
        ));
    }
    text
}

#[test]
fn plan_reports_node_repairs_and_the_circuit_breaker() {
    let path = Path::new("repair.yaml");
    let catalog = karpenter_kwok::catalog::catalog();
    let gates = "NodeRepair=true".parse().unwrap();
    let plan_of =
        |text: &str, gates| karpenter_planner::plan(path, text, &catalog, NOW, gates).unwrap();
    // KWOK tolerates Ready=False for 10 minutes: 11 minutes is past it, 9 is not.
    let plan = plan_of(&repair_dump(5, 1, NOW - 11 * 60), gates);
    assert_eq!(plan.repair.repaired.len(), 1, "{:?}", plan.repair);
    assert_eq!(plan.repair.repaired[0].node, "n0");
    assert_eq!(plan.repair.repaired[0].nodeclaim, "c0");
    assert_eq!(plan.repair.repaired[0].condition, "Ready=False");
    assert!(
        plan.to_text().contains("Node repair: replace 1"),
        "{}",
        plan.to_text()
    );
    let tolerated = plan_of(&repair_dump(5, 1, NOW - 9 * 60), gates);
    assert_eq!(tolerated.repair, Default::default());
    // Two of five is over 20% (one, rounded up): both held back.
    let held = plan_of(&repair_dump(5, 2, NOW - 11 * 60), gates);
    assert!(held.repair.repaired.is_empty());
    assert_eq!(held.repair.blocked.len(), 2, "{:?}", held.repair);
    // The gate off: nothing.
    let off = plan_of(&repair_dump(5, 1, NOW - 11 * 60), Default::default());
    assert_eq!(off.repair, Default::default());
}

#[test]
fn reserved_capacity_is_used_first_counted_down_and_given_back() {
    let report = run_file("reserved-capacity.yaml");
    let in_reservation = |n: &karpenter_sim::report::LaunchedNodeClaim| {
        n.reservation.as_deref() == Some("cr-web-a") && n.capacity_type == "reserved"
    };
    // The first round takes the reservation's three instances; the rest wait a round and then
    // fall back to on-demand.
    let first: Vec<_> = report
        .nodeclaims
        .iter()
        .filter(|n| n.launched_at_s < 120)
        .collect();
    assert_eq!(first.len(), 6, "{first:?}");
    let reserved: Vec<_> = first.iter().filter(|n| in_reservation(n)).collect();
    assert_eq!(reserved.len(), 3, "{first:?}");
    let fallback_at = first
        .iter()
        .filter(|n| n.capacity_type == "on-demand")
        .map(|n| n.launched_at_s)
        .min()
        .unwrap();
    assert!(
        reserved.iter().all(|n| n.launched_at_s < fallback_at),
        "{first:?}"
    );
    // Never more nodes in the reservation than it holds.
    for t in 0..report.duration_s {
        let alive = report
            .nodeclaims
            .iter()
            .filter(|n| in_reservation(n))
            .filter(|n| n.launched_at_s <= t && n.terminated_at_s.is_none_or(|e| e > t))
            .count();
        assert!(alive <= 3, "t={t}: {alive} nodes in a reservation of 3");
    }
    // After the scale-down, consolidation moved the on-demand nodes' pods into the freed
    // instances: the reservation is in use again.
    assert!(
        report
            .nodeclaims
            .iter()
            .any(|n| in_reservation(n) && (1200..2400).contains(&n.launched_at_s)),
        "{:?}",
        report.nodeclaims
    );
    assert!(report.summary.pods_pending == 0);
}

#[test]
fn reserved_capacity_gate_off_ignores_reservations() {
    let text = std::fs::read_to_string(example("reserved-capacity.yaml"))
        .unwrap()
        .replace(
            "  duration: 1h\n",
            "  duration: 1h\n  featureGates: ReservedCapacity=false\n",
        );
    let s = scenario::parse(&example("reserved-capacity.yaml"), &text, &crds()).unwrap();
    let report = run(&s);
    assert!(!report.nodeclaims.is_empty());
    assert!(
        report
            .nodeclaims
            .iter()
            .all(|n| n.capacity_type == "on-demand" && n.reservation.is_none()),
        "{:?}",
        report.nodeclaims
    );
}

#[test]
fn capacity_reservation_errors_name_the_field() {
    let e = parse_error(&format!(
        "{HEADER}spec:\n  duration: 1m\n  capacityReservations:\n  - {{id: cr-1, instanceType: c-8x-amd64-linux, zone: test-zone-a, count: 1}}\n  - {{id: cr-1, instanceType: c-4x-amd64-linux, zone: test-zone-a, count: 2}}\n"
    ));
    assert!(
        e.contains("spec.capacityReservations[1].id: \"cr-1\" is declared twice"),
        "{e}"
    );
    let e = parse_error(&format!(
        "{HEADER}spec:\n  duration: 1m\n  capacityReservations:\n  - {{id: cr-1, instanceType: '', zone: test-zone-a, count: 1}}\n"
    ));
    assert!(
        e.contains("spec.capacityReservations[0].instanceType: must not be empty"),
        "{e}"
    );
    let e = parse_error(&format!(
        "{HEADER}spec:\n  duration: 1m\n  capacityReservations:\n  - {{id: cr-1, instanceType: a, zone: b, count: -1}}\n"
    ));
    assert!(e.contains("spec.capacityReservations"), "{e}");
}

/// The zone-spread example's replicas without a spread of their own, with the cluster's
/// default one (`spec.schedulerConfig`, as the controller's `--scheduler-config`): each gets
/// the zonal spread with its Deployment's selector, as kube-scheduler would give it.
#[test]
fn the_clusters_default_spread_applies_to_pods_without_one() {
    let text = std::fs::read_to_string(example("zone-spread.yaml")).unwrap();
    let own = "      topologySpreadConstraints:\n        - maxSkew: 1\n          topologyKey: topology.kubernetes.io/zone\n          whenUnsatisfiable: DoNotSchedule\n          labelSelector: {matchLabels: {app: frontend}}\n";
    assert!(
        text.contains(own),
        "the example spreads its replicas itself"
    );
    let without_own = text
        .replace(own, "")
        .replace("      nodes: {min: 3, max: 3}\n", "");
    let zones = |text: &str| {
        let s = scenario::parse(Path::new("spread.yaml"), text, &crds())
            .unwrap_or_else(|e| panic!("{e}"));
        let report = run(&s);
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        assert_eq!(report.summary.pods_pending, 0);
        report
            .nodeclaims
            .iter()
            .map(|n| n.zone.clone())
            .collect::<std::collections::BTreeSet<String>>()
            .len()
    };
    assert!(
        zones(&without_own) < 3,
        "without a spread the replicas share a zone"
    );
    let configured = without_own.replace(
        "spec:\n  duration: 10m\n",
        "spec:\n  duration: 10m\n  schedulerConfig:\n    podTopologySpread:\n      defaultConstraints:\n        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}\n",
    );
    assert_ne!(configured, without_own);
    assert_eq!(zones(&configured), 3);
    let e = parse_error(&format!(
        "{HEADER}spec:\n  duration: 1m\n  schedulerConfig: {{podTopologySpread: {{defaultConstraints: [{{maxSkew: 1, topologyKey: k, whenUnsatisfiable: DoNotSchedule, labelSelector: {{}}}}]}}}}\n"
    ));
    assert!(
        e.contains("spec.schedulerConfig") && e.contains("defaultConstraints[0].labelSelector"),
        "{e}"
    );
}
