//! `plan -f DUMP --nodepools NEW.yaml` and `simulate --compare-nodepools A.yaml B.yaml`, run
//! as a user would.

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn karpenter_rs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_karpenter-rs"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("karpenter-rs-what-if-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn node_pool(zones: &str) -> String {
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
      - {{key: topology.kubernetes.io/zone, operator: In, values: [{zones}]}}
"#
    )
}

/// Two KWOK nodes, one in each of zones a and b, each with its NodeClaim and a pod; the
/// NodeClaims carry no hash (as a hand-written dump), so they take their NodePool's.
fn dump() -> String {
    let mut text = node_pool("test-zone-a, test-zone-b");
    let created =
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_hours(2);
    for (name, zone) in [("node-a", "test-zone-a"), ("node-b", "test-zone-b")] {
        let labels = format!(
            "{{karpenter.sh/nodepool: default, karpenter.sh/initialized: \"true\", karpenter.sh/registered: \"true\", node.kubernetes.io/instance-type: c-4x-amd64-linux, topology.kubernetes.io/zone: {zone}, karpenter.sh/capacity-type: on-demand, kubernetes.io/arch: amd64, kubernetes.io/os: linux}}"
        );
        let _ = write!(
            text,
            r#"---
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {labels}, creationTimestamp: "{created}"}}
spec: {{providerID: "kwok://{name}"}}
status:
  allocatable: {{cpu: "4", memory: 16Gi, pods: "110"}}
  capacity: {{cpu: "4", memory: 16Gi, pods: "110"}}
  conditions: [{{type: Ready, status: "True", lastTransitionTime: "{created}"}}]
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {{name: {name}, labels: {labels}, creationTimestamp: "{created}"}}
spec:
  nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
  requirements: []
status:
  providerID: "kwok://{name}"
  nodeName: {name}
  conditions:
  - {{type: Launched, status: "True", reason: Launched, message: "", lastTransitionTime: "{created}"}}
  - {{type: Initialized, status: "True", reason: Initialized, message: "", lastTransitionTime: "{created}"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-{name}
  namespace: default
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}}]
spec: {{nodeName: {name}, containers: [{{name: c, image: i, resources: {{requests: {{cpu: "3", memory: 1Gi}}}}}}]}}
status: {{phase: Running}}
"#
        );
    }
    text
}

#[test]
fn plan_with_nodepools_shows_the_nodes_that_drift_and_the_cost() {
    let dump = temp_file("dump.yaml", &dump());
    let narrowed = temp_file("zone-a.yaml", &node_pool("test-zone-a"));
    let same = temp_file("same.yaml", &node_pool("test-zone-a, test-zone-b"));
    let (dump, narrowed, same) = (
        dump.to_str().unwrap(),
        narrowed.to_str().unwrap(),
        same.to_str().unwrap(),
    );

    let out = karpenter_rs(&["plan", "-f", dump, "--nodepools", narrowed]);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Nodes that would drift: 1"), "{text}");
    assert!(text.contains("node-b (nodepool default, $"), "{text}");
    assert!(text.contains("RequirementsDrifted"), "{text}");
    assert!(text.contains("replaced now by nodepool default:"), "{text}");
    assert!(text.contains("in test-zone-a at $"), "{text}");
    assert!(text.contains("Cost per hour"), "{text}");

    let out = karpenter_rs(&[
        "plan",
        "-f",
        dump,
        "--nodepools",
        narrowed,
        "--output",
        "json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let drifted = json["drifted"].as_array().unwrap();
    assert_eq!(drifted.len(), 1, "{json}");
    assert_eq!(drifted[0]["node"], "node-b");
    assert_eq!(drifted[0]["reason"], "RequirementsDrifted");
    let cost = |side: &str, part: &str| json[side][part].as_f64().unwrap();
    assert!(cost("cost_before", "nodes") > 0.0, "{json}");
    // One node of the same type and price replaced by one of the same: the cost stays.
    assert!(
        (cost("cost_after", "total") - cost("cost_before", "total")).abs() < 1e-9,
        "{json}"
    );
    assert_eq!(json["currency"], "USD");

    // The NodePool as it is drifts nothing.
    let out = karpenter_rs(&["plan", "-f", dump, "--nodepools", same]);
    assert!(
        stdout(&out).contains("Nodes that would drift: 0"),
        "{}",
        stdout(&out)
    );

    // A file with no NodePool is refused.
    let empty = temp_file(
        "empty.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    );
    let out = karpenter_rs(&["plan", "-f", dump, "--nodepools", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no NodePool"));
}

fn scenario_pool(instance_type: &str) -> String {
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: demo-cpu-elastic}}
spec:
  template:
    metadata: {{labels: {{demo/scenario: cpu-elastic}}}}
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [{instance_type}]}}
"#
    )
}

#[test]
fn simulate_compares_two_nodepools_side_by_side() {
    let a = temp_file("small.yaml", &scenario_pool("c-2x-amd64-linux"));
    let b = temp_file("large.yaml", &scenario_pool("c-16x-amd64-linux"));
    let svg = a.with_file_name("compare.svg");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = karpenter_rs(&[
        "simulate",
        "--compare-nodepools",
        a,
        b,
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("small.yaml") && text.contains("large.yaml"),
        "{text}"
    );
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(chart.matches("<svg ").count(), 3);

    let out = karpenter_rs(&["simulate", "--compare-nodepools", a, b, "--output", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let types = |i: usize| {
        json["nodepools"][i]["report"]["nodeclaims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["instance_type"].as_str().unwrap().to_string())
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(json["nodepools"][0]["file"], "small.yaml");
    assert_eq!(
        types(0).into_iter().collect::<Vec<_>>(),
        ["c-2x-amd64-linux"]
    );
    assert_eq!(
        types(1).into_iter().collect::<Vec<_>>(),
        ["c-16x-amd64-linux"]
    );
    // --compare and --compare-nodepools are one comparison or the other.
    let out = karpenter_rs(&[
        "simulate",
        "--compare",
        "cluster-autoscaler",
        "--compare-nodepools",
        a,
        b,
    ]);
    assert!(!out.status.success());
}
