use std::sync::Arc;

use karpenter_core::instancetype::fake::FakeInstanceType;
use serde_json::json;

use super::*;

fn claim(value: serde_json::Value) -> NodeClaim {
    let mut v = json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-x7k2p", "uid": "3f1c2d4e-0000-4000-8000-000000000001",
            "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.huawei", "kind": "CCENodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]},
    });
    for (k, val) in value.as_object().unwrap() {
        v["spec"][k] = val.clone();
    }
    serde_json::from_value(v).expect("valid NodeClaim")
}

fn spec(value: serde_json::Value) -> CCENodeClassSpec {
    let mut v = json!({
        "subnetSelectorTerms": [{"id": "5f7c3a1e-2b4d-4c6e-8f0a-1b2c3d4e5f60"}],
        "imsSelector": {"imsFamily": "Huawei Cloud EulerOS 2.0"},
        "blockDeviceMappings": {"root": {"volumeSize": 40, "volumeType": "SSD"}},
        "login": {"sshKey": "ops"},
    });
    for (k, val) in value.as_object().unwrap() {
        v[k] = val.clone();
    }
    serde_json::from_value(v).expect("valid CCENodeClassSpec")
}

fn candidate() -> Candidate {
    Candidate {
        flavor: "c9.large.2".into(),
        zone: "ap-southeast-3a".into(),
        price: 0.1,
    }
}

fn body(spec: &CCENodeClassSpec, claim: &NodeClaim) -> Value {
    create_node_body(&CreateNode {
        spec,
        claim,
        candidate: &candidate(),
        subnet_id: "subnet-123",
    })
    .expect("a body")
}

#[test]
fn candidates_are_cheapest_first_then_by_zone_then_name() {
    // Upstream's tables: equal prices order by zone, then name; a lower price wins first.
    let same = |name: &str| {
        Arc::new(
            FakeInstanceType::new(name)
                .offerings(&[("on-demand", "zone-b", 1.0), ("on-demand", "zone-a", 1.0)])
                .build(),
        )
    };
    let c = claim(json!({}));
    let got: Vec<String> = candidates(&[same("it-b"), same("it-a")], &c)
        .iter()
        .map(|c| format!("{}/{}", c.zone, c.flavor))
        .collect();
    assert_eq!(
        got,
        ["zone-a/it-a", "zone-a/it-b", "zone-b/it-a", "zone-b/it-b"]
    );

    let priced = |name: &str, price: f64| {
        Arc::new(
            FakeInstanceType::new(name)
                .offerings(&[("on-demand", "zone-a", price)])
                .build(),
        )
    };
    let got = candidates(
        &[priced("ac7.2xlarge.1", 1.8402), priced("x1.6u.10g", 1.4951)],
        &c,
    );
    assert_eq!(got[0].flavor, "x1.6u.10g");
    assert_eq!(got[1].flavor, "ac7.2xlarge.1");
}

#[test]
fn candidates_skip_unavailable_incompatible_and_too_small() {
    let mut it = FakeInstanceType::new("small")
        .offerings(&[
            ("on-demand", "zone-a", 1.0),
            ("on-demand", "zone-b", 1.0),
            ("spot", "zone-c", 0.2),
        ])
        .build();
    it.offerings[0].available = false;
    let big = FakeInstanceType::new("big")
        .resources(&[("cpu", "16"), ("memory", "64Gi")])
        .offerings(&[("on-demand", "zone-a", 4.0)])
        .build();
    let types = [Arc::new(it), Arc::new(big)];
    let c = claim(json!({}));
    let got: Vec<(String, String)> = candidates(&types, &c)
        .into_iter()
        .map(|c| (c.flavor, c.zone))
        .collect();
    assert_eq!(
        got,
        [
            ("small".into(), "zone-b".into()),
            ("big".into(), "zone-a".into())
        ],
        "the unavailable zone-a offering and the spot one are not tried"
    );
    let c = claim(json!({"resources": {"requests": {"cpu": "8"}}}));
    let got: Vec<String> = candidates(&types, &c)
        .into_iter()
        .map(|c| c.flavor)
        .collect();
    assert_eq!(
        got,
        ["big"],
        "a type too small for the requests is not tried"
    );
}

#[test]
fn candidates_are_capped() {
    let zones: Vec<String> = (0..30).map(|i| format!("zone-{i:02}")).collect();
    let offerings: Vec<(&str, &str, f64)> = zones
        .iter()
        .map(|z| ("on-demand", z.as_str(), 1.0))
        .collect();
    let it = Arc::new(FakeInstanceType::new("t").offerings(&offerings).build());
    assert_eq!(candidates(&[it], &claim(json!({}))).len(), MAX_CANDIDATES);
}

#[test]
fn body_maps_every_class_field_as_cce_expects() {
    // Upstream's "maps new node class fields" case.
    let s = spec(json!({
        "ecsGroupId": "46ebaf04-ca42-48ca-8057-0b96e6126e1b",
        "imsSelector": {"imsFamily": "HCE OS 2.0"},
        "blockDeviceMappings": {
            "root": {"volumeSize": 120, "volumeType": "GPSSD2", "iops": 3000, "throughput": 125},
            "k8s": {"volumeSize": 120, "volumeType": "SAS", "iops": 4000},
            "users": [{"volumeSize": 100, "volumeType": "SATA"}],
        },
        "runtimeConfiguration": {"type": "docker"},
        "kubelet": {
            "maxPods": 64,
            "kubeReserved": {"cpu": "1500m", "memory": "1Gi", "ephemeral-storage": "2Gi", "pid": "1234"},
            "systemReserved": {"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "1Gi", "pid": "4321"},
        },
        "login": {"userPassword": {"password": "ciphertext"}},
    }));
    let b = body(&s, &claim(json!({})));
    assert_eq!(b["kind"], "Node");
    assert_eq!(b["apiVersion"], "v3");
    assert_eq!(b["metadata"]["name"], "default-x7k2p");
    let n = &b["spec"];
    assert_eq!(n["flavor"], "c9.large.2");
    assert_eq!(n["az"], "ap-southeast-3a");
    assert_eq!(n["os"], "HCE OS 2.0");
    assert_eq!(n["count"], 1);
    assert_eq!(n["billingMode"], 0);
    assert_eq!(
        n["rootVolume"],
        json!({"size": 120, "volumetype": "GPSSD2", "iops": 3000, "throughput": 125})
    );
    assert_eq!(
        n["dataVolumes"],
        json!([
            {"size": 120, "volumetype": "SAS", "iops": 4000},
            {"size": 100, "volumetype": "SATA"},
        ])
    );
    let selector = &n["storage"]["storageSelectors"][0];
    assert_eq!(selector["name"], "k8s-data");
    assert_eq!(selector["storageType"], "evs");
    assert_eq!(
        selector["matchLabels"],
        json!({"size": "120", "volumeType": "SAS", "count": "1", "iops": "4000"})
    );
    let group = &n["storage"]["storageGroups"][0];
    assert_eq!(group["name"], "vgpaas");
    assert_eq!(group["cceManaged"], true);
    assert_eq!(group["selectorNames"], json!(["k8s-data"]));
    assert_eq!(group["virtualSpaces"][0]["name"], "runtime");
    assert_eq!(group["virtualSpaces"][0]["size"], "90%");
    assert_eq!(
        group["virtualSpaces"][0]["runtimeConfig"]["lvType"],
        "linear"
    );
    assert_eq!(group["virtualSpaces"][1]["name"], "kubernetes");
    assert_eq!(group["virtualSpaces"][1]["size"], "10%");
    assert_eq!(group["virtualSpaces"][1]["lvmConfig"]["lvType"], "linear");
    assert_eq!(n["runtime"], json!({"name": "docker"}));
    assert_eq!(
        n["login"],
        json!({"userPassword": {"username": "root", "password": "ciphertext"}})
    );
    assert_eq!(n["ecsGroupId"], "46ebaf04-ca42-48ca-8057-0b96e6126e1b");
    assert_eq!(
        n["extendParam"],
        json!({
            "maxPods": 64,
            "kubeReservedCpu": 1500, "kubeReservedMem": 1024, "kubeReservedPid": 1234, "kubeReservedStorage": 2,
            "systemReservedCpu": 250, "systemReservedMem": 512, "systemReservedPid": 4321, "systemReservedStorage": 1,
        })
    );
    assert_eq!(
        n["nodeNicSpec"],
        json!({"primaryNic": {"subnetId": "subnet-123"}})
    );
    assert_eq!(
        n["k8sTags"],
        json!({
            "karpenter.k8s.huawei/nodeclaim-uid": "3f1c2d4e-0000-4000-8000-000000000001",
            "karpenter.sh/nodepool": "default",
        })
    );
}

#[test]
fn body_defaults_the_k8s_disk_and_leaves_optional_parts_out() {
    // Upstream's "defaults managed k8s data disk" case: 100 GiB of the root disk's type.
    let s =
        spec(json!({"blockDeviceMappings": {"root": {"volumeSize": 50, "volumeType": "GPSSD"}}}));
    let b = body(&s, &claim(json!({})));
    let n = &b["spec"];
    assert_eq!(
        n["dataVolumes"],
        json!([{"size": 100, "volumetype": "GPSSD"}])
    );
    assert_eq!(
        n["storage"]["storageSelectors"][0]["matchLabels"],
        json!({"size": "100", "volumeType": "GPSSD", "count": "1"})
    );
    assert_eq!(
        n["login"],
        json!({"sshKey": "ops"}),
        "upstream's ssh key case"
    );
    for absent in ["runtime", "ecsGroupId", "extendParam"] {
        assert!(n.get(absent).is_none(), "{absent} is left to CCE's default");
    }
}

#[test]
fn body_refuses_what_cce_would_refuse_naming_the_field() {
    let c = claim(json!({}));
    let bad = |s: CCENodeClassSpec| {
        create_node_body(&CreateNode {
            spec: &s,
            claim: &c,
            candidate: &candidate(),
            subnet_id: "subnet-123",
        })
        .unwrap_err()
        .to_string()
    };
    let e = bad(spec(json!({"kubelet": {"kubeReserved": {"memory": "1G"}}})));
    assert!(e.contains("kubeReserved.memory"), "{e}");
    let e = bad(spec(json!({"login": {}})));
    assert!(e.contains("login"), "{e}");
    let e = bad(spec(json!({"imsSelector": {"imsFamily": ""}})));
    assert!(e.contains("imsFamily"), "{e}");
}

#[test]
fn taints_add_the_unregistered_taint_and_drop_cces_own() {
    let c = claim(json!({
        "taints": [
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"},
            {"key": "karpenter.sh/unregistered", "value": "x", "effect": "NoExecute"},
        ],
        "startupTaints": [{"key": "example.com/init", "effect": "NoExecute"}],
    }));
    let got = taints(&c);
    assert_eq!(
        got,
        vec![
            json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}),
            json!({"key": "example.com/init", "effect": "NoExecute"}),
            json!({"key": "karpenter.sh/unregistered", "effect": "NoExecute"}),
        ],
        "network-unavailable is CCE's; the unregistered taint keeps its canonical form"
    );
    assert_eq!(
        taints(&claim(json!({}))),
        vec![json!({"key": "karpenter.sh/unregistered", "effect": "NoExecute"})]
    );
}

#[test]
fn node_names_cce_accepts() {
    for (name, ok) in [
        ("default-x7k2p", true),
        ("a", true),
        ("Default-x", false),
        ("1abc", false),
        ("abc-", false),
        ("a.b", false),
        ("", false),
        (&"a".repeat(56), true),
        (&"a".repeat(57), false),
    ] {
        assert_eq!(is_cce_node_name(name), ok, "{name:?}");
    }
    let c = claim(json!({}));
    let mut upper = c.clone();
    upper.metadata.name = Some("Upper.Case".into());
    let b = body(&spec(json!({})), &upper);
    assert!(b["metadata"].get("name").is_none(), "CCE names it then");
}

#[test]
fn provider_ids_are_bare_node_ids() {
    // Upstream's table: the providerID is the CCE node id itself.
    for (provider_id, want) in [
        (
            "5e2a4f0c-1111-4222-8333-944455566677",
            Some("5e2a4f0c-1111-4222-8333-944455566677"),
        ),
        ("", None),
        ("   ", None),
        ("aws:///us-east-1a/i-0123", None),
        ("kwok://node-1", None),
    ] {
        assert_eq!(node_id(provider_id), want, "{provider_id:?}");
    }
    assert_eq!(provider_id("abc"), "abc");
}

#[test]
fn node_answers_parse_as_cce_sends_them() {
    let node: Node = serde_json::from_value(json!({
        "kind": "Node", "apiVersion": "v3",
        "metadata": {"name": "default-x7k2p", "uid": "node-1",
            "creationTimestamp": "2026-11-24 10:00:00.123456 +0000 UTC"},
        "spec": {"flavor": "c9.large.2", "az": "ap-southeast-3a", "os": "HCE OS 2.0",
            "nodeNicSpec": {"primaryNic": {"subnetId": "subnet-1"}},
            "k8sTags": {"karpenter.k8s.huawei/nodeclaim-uid": "u1", "karpenter.sh/nodepool": "default"}},
        "status": {"phase": "Installing", "jobID": "job-1", "serverId": "srv-1", "privateIP": "192.168.1.15"},
    }))
    .unwrap();
    assert_eq!(node.metadata.uid, "node-1");
    assert_eq!(node.subnet_id(), Some("subnet-1"));
    assert_eq!(node.node_claim_uid(), Some("u1"));
    assert!(node.is_karpenters());
    assert_eq!(node.status.server_id.as_deref(), Some("srv-1"));
    assert_eq!(node.status.job_id.as_deref(), Some("job-1"));
    assert!(!node.is_deleting() && !node.is_failed());

    // A node of CCE's own node pools, and one without a NIC spec.
    let theirs: Node = serde_json::from_value(json!({
        "metadata": {"uid": "node-2"},
        "spec": {"flavor": "s7.large.2", "az": "ap-southeast-3a",
            "k8sTags": {"cce.cloud.com/cce-nodepool": "pool-1"}},
        "status": {"phase": "Active"},
    }))
    .unwrap();
    assert!(!theirs.is_karpenters());
    assert_eq!(theirs.subnet_id(), None);
}

#[test]
fn job_failures_carry_the_first_failed_reason() {
    let job: Job = serde_json::from_value(json!({
        "kind": "Job",
        "metadata": {"uid": "job-1"},
        "spec": {"type": "CreateNode", "resourceID": "node-1", "subJobs": [
            {"spec": {"type": "CreateServer"}, "status": {"phase": "Failed",
                "reason": "flavor c9.large.2 sold out in ap-southeast-3a"}},
            {"spec": {"type": "InstallNode"}, "status": {"phase": "Initializing"}},
        ]},
        "status": {"phase": "Failed"},
    }))
    .unwrap();
    assert!(job.failed() && !job.succeeded());
    assert_eq!(
        job.failure_reason().as_deref(),
        Some("flavor c9.large.2 sold out in ap-southeast-3a")
    );
    let ok: Job = serde_json::from_value(json!({"status": {"phase": "Success"}})).unwrap();
    assert!(ok.succeeded());
    assert_eq!(ok.failure_reason(), None);
}

#[test]
fn timestamps_parse_in_cces_format() {
    let t = parse_timestamp("2026-11-24 10:00:00.123456789 +0000 UTC").unwrap();
    assert_eq!(t.to_string(), "2026-11-24T10:00:00.123456789Z");
    let t = parse_timestamp("2020-02-02 07:37:24 +0800 CST");
    assert_eq!(t, None, "only UTC answers are known");
    let t = parse_timestamp("2020-02-02 07:37:24 +0800").unwrap();
    assert_eq!(t.to_string(), "2020-02-01T23:37:24Z");
    assert_eq!(parse_timestamp("yesterday"), None);
}
