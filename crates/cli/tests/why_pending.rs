//! "Why is my pod pending?": `plan --pod` on a dump, as a user (or a CI pipeline) runs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A KWOK cluster: NodePool `default` (zones a and b, on-demand, 96 of its 100 CPUs in use)
/// and NodePool `gpu` (heavier, tainted); a pod that fits (on `gpu`: nothing of `default`'s
/// limit is taken this round), one too big for what `default`'s limit leaves, and one asking
/// for a zone `default` does not allow.
const DUMP: &str = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      limits: {cpu: "100"}
      template:
        spec:
          nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
          requirements:
            - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
            - {key: topology.kubernetes.io/zone, operator: In, values: [test-zone-a, test-zone-b]}
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: gpu}
    spec:
      weight: 10
      template:
        spec:
          nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
          taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
  - apiVersion: v1
    kind: Node
    metadata:
      name: default-big
      labels: {karpenter.sh/nodepool: default, karpenter.sh/initialized: "true", kubernetes.io/hostname: default-big}
    status:
      capacity: {cpu: "96", memory: 192Gi, pods: "1024"}
      allocatable: {cpu: "0", memory: "0", pods: "1024"}
      conditions: [{type: Ready, status: "True"}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: web, namespace: shop}
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Exists}]
      containers: [{name: c, image: c, resources: {requests: {cpu: "1"}}}]
    status: {phase: Pending, conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]}
  - apiVersion: v1
    kind: Pod
    metadata: {name: trainer, namespace: ml}
    spec:
      containers: [{name: c, image: c, resources: {requests: {cpu: "6"}}}]
    status: {phase: Pending, conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]}
  - apiVersion: v1
    kind: Pod
    metadata: {name: zoned, namespace: ml}
    spec:
      nodeSelector: {topology.kubernetes.io/zone: test-zone-c}
      tolerations: [{key: nvidia.com/gpu, operator: Exists}]
      containers: [{name: c, image: c, resources: {requests: {cpu: "1"}}}]
    status: {phase: Pending, conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]}
"#;

/// Only the pod that fits.
const FITS: &str = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      template:
        spec:
          nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
  - apiVersion: v1
    kind: Pod
    metadata: {name: web, namespace: shop}
    spec:
      containers: [{name: c, image: c, resources: {requests: {cpu: "1"}}}]
    status: {phase: Pending, conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]}
"#;

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("karpenter-rs-why-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn plan(file: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_karpenter-rs"))
        .arg("plan")
        .arg("-f")
        .arg(file)
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_pod_held_by_a_limit_is_explained_with_the_arithmetic() {
    let dump = temp_file("limit.yaml", DUMP);
    let (code, text, err) = plan(&dump, &["--pod", "ml/trainer"]);
    assert_eq!(code, Some(0), "without --exit-code: {err}");
    assert!(
        text.starts_with("Pod ml/trainer (cpu: 6) would stay pending\n"),
        "{text}"
    );
    // Both NodePools have one reason: the scheduler's order (gpu, heavier) between them.
    let gpu = text.find("  nodepool gpu\n").expect(&text);
    let default = text.find("  nodepool default\n").expect(&text);
    assert!(gpu < default, "{text}");
    assert!(
        text.contains(
            "    taint: the pod does not tolerate its taint nvidia.com/gpu=true:NoSchedule\n"
        ),
        "{text}"
    );
    // c-8x is the smallest type that holds 6 CPUs; the scheduler itself only says no type
    // under the limit has enough resources.
    assert!(
        text.contains("    limits: cpu: 96 in use + 8 requested > limit 100\n"),
        "{text}"
    );
    assert!(
        text.contains("hint: raise nodepool default's spec.limits.cpu to at least 104"),
        "{text}"
    );
    assert!(
        text.contains("To schedule it: nodepool gpu: add the toleration {key: nvidia.com/gpu, operator: Equal, value: \"true\", effect: NoSchedule} to the pod"),
        "{text}"
    );

    assert!(
        text.contains("The scheduler's own message: nodepool \"gpu\": did not tolerate taint nvidia.com/gpu=true:NoSchedule; nodepool \"default\": no instance type has enough resources"),
        "the round's verdict is kept, after the explanation: {text}"
    );

    // -n with a bare name is the same pod.
    let (_, same, _) = plan(&dump, &["-n", "ml", "--pod", "trainer"]);
    assert_eq!(same, text, "-n ml --pod trainer");
}

#[test]
fn a_zone_the_node_pool_does_not_allow_names_the_zones_it_does() {
    let dump = temp_file("zone.yaml", DUMP);
    let (_, text, err) = plan(&dump, &["--pod", "ml/zoned", "--output", "json"]);
    let json: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text} {err}"));
    assert_eq!(json["pod"], "ml/zoned");
    assert_eq!(
        json["pending"], false,
        "the gpu NodePool takes it: {json:#}"
    );
    assert_eq!(json["outcome"]["kind"], "launch", "{json:#}");
    assert_eq!(json["outcome"]["nodeclaim"]["nodepool"], "gpu", "{json:#}");

    // Without the toleration only `default` is left, and its zones are the answer.
    let untolerated = DUMP.replace(
        "      tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n",
        "",
    );
    let dump = temp_file("zone-untolerated.yaml", &untolerated);
    let (code, text, err) = plan(
        &dump,
        &["--pod", "ml/zoned", "--output", "json", "--exit-code"],
    );
    assert_eq!(code, Some(1), "pending with --exit-code: {err}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["pending"], true, "{json:#}");
    assert_eq!(json["outcome"]["kind"], "pending", "{json:#}");
    let pools = json["nodepools"].as_array().expect("nodepools");
    let default = pools
        .iter()
        .find(|p| p["nodepool"] == "default")
        .expect("default");
    let reason = &default["reasons"][0];
    assert_eq!(reason["kind"], "requirement", "{default:#}");
    assert!(
        reason["hint"]
            .as_str()
            .is_some_and(|h| h.contains("the NodePool allows zones [test-zone-a, test-zone-b]")),
        "{reason:#}"
    );
}

#[test]
fn exit_code_says_whether_pods_would_stay_pending() {
    let pending = temp_file("pending.yaml", DUMP);
    let fits = temp_file("fits.yaml", FITS);
    let cases: [(&str, &Path, &[&str], i32); 6] = [
        ("a plan with pending pods", &pending, &["--exit-code"], 1),
        ("the same without --exit-code", &pending, &[], 0),
        ("a plan where every pod fits", &fits, &["--exit-code"], 0),
        (
            "a pod that fits",
            &pending,
            &["--pod", "shop/web", "--exit-code"],
            0,
        ),
        (
            "a pod that stays pending",
            &pending,
            &["--pod", "ml/trainer", "--exit-code"],
            1,
        ),
        (
            "a pod the dump does not have",
            &pending,
            &["--pod", "ml/nope"],
            2,
        ),
    ];
    for (case, file, args, want) in cases {
        let (code, out, err) = plan(file, args);
        assert_eq!(code, Some(want), "{case}: {out}{err}");
    }
    let (_, _, err) = plan(&pending, &["--pod", "ml/nope"]);
    assert!(err.contains("no pod ml/nope in"), "{err}");
    let (code, _, err) = plan(&pending, &["-n", "shop", "--pod", "ml/trainer"]);
    assert_eq!(code, Some(2), "conflicting namespaces: {err}");
}
