//! Providers' restricted label domains in karpenter's CRDs, as a table. The oracle is
//! upstream: the domains and key lists below are copied from upstream's
//! `hack/validation/requirements.sh` and `labels.sh` (AWS, Azure) and
//! `kwok/hack/validation/requirements.sh`, and the generated rules must read as the rules
//! those scripts put into upstream's CRDs.
#![cfg(feature = "cel")]

use karpenter_api::crd::{Crd, RestrictedLabelDomain, core_with_label_domains};
use karpenter_api::validation::table::{Expect, failures, set};
use serde_json::{Value, json};

use Expect::*;

const AWS: &[&str] = &[
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/ec2nodeclass",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/nitro-sandbox",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

/// Upstream drops tenancy, capacity reservations and placement groups for NodeOverlays.
const AWS_OVERLAY: &[&str] = &[
    "karpenter.k8s.aws/ec2nodeclass",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/nitro-sandbox",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-capability-flex",
];

const AZURE: &[&str] = &[
    "karpenter.azure.com/aksnodeclass",
    "karpenter.azure.com/sku-name",
    "karpenter.azure.com/sku-family",
    "karpenter.azure.com/sku-series",
    "karpenter.azure.com/sku-version",
    "karpenter.azure.com/sku-cpu",
    "karpenter.azure.com/sku-memory",
    "karpenter.azure.com/sku-networking-accelerated",
    "karpenter.azure.com/sku-storage-premium-capable",
    "karpenter.azure.com/sku-storage-ultra-ssd",
    "karpenter.azure.com/sku-storage-ephemeralos-maxsize",
    "karpenter.azure.com/sku-gpu-name",
    "karpenter.azure.com/sku-gpu-manufacturer",
    "karpenter.azure.com/sku-gpu-count",
    "karpenter.azure.com/placement-scope",
];

const AKS: &[&str] = &[
    "kubernetes.azure.com/mode",
    "kubernetes.azure.com/scalesetpriority",
    "kubernetes.azure.com/priority",
    "kubernetes.azure.com/fips_enabled",
    "kubernetes.azure.com/os-sku",
    "kubernetes.azure.com/cluster",
    "kubernetes.azure.com/sku-cpu",
    "kubernetes.azure.com/sku-memory",
    "kubernetes.azure.com/ebpf-dataplane",
    "kubernetes.azure.com/ebpf-host-routing",
    "kubernetes.azure.com/network-policy",
    "kubernetes.azure.com/hostedvm",
];

/// Refused by upstream's Azure CRDs outright; here on Azure's NodePools and NodeClaims.
const AKS_LEGACY: &[&str] = &["agentpool", "storageprofile", "storagetier", "accelerator"];

const KWOK: &[&str] = &[
    "karpenter.kwok.sh/kwoknodeclass",
    "karpenter.kwok.sh/instance-cpu",
    "karpenter.kwok.sh/instance-memory",
    "karpenter.kwok.sh/instance-family",
    "karpenter.kwok.sh/instance-size",
];

const DOMAINS: &[RestrictedLabelDomain] = &[
    RestrictedLabelDomain::new("karpenter.k8s.aws", AWS).with_overlay_keys(AWS_OVERLAY),
    RestrictedLabelDomain::new("karpenter.azure.com", AZURE).refusing(AKS_LEGACY),
    RestrictedLabelDomain::new("kubernetes.azure.com", AKS),
    RestrictedLabelDomain::new("karpenter.kwok.sh", KWOK).requirements_only(),
];

fn crds() -> [Crd; 4] {
    core_with_label_domains(DOMAINS)
}

fn node_pool() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}],
        }}},
    })
}

fn node_claim() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde"},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}],
        },
    })
}

fn node_overlay() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "default"},
        "spec": {"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}], "price": "1"},
    })
}

const POOL_REQS: &str = "/spec/template/spec/requirements";
const POOL_LABELS: &str = "/spec/template/metadata/labels";
const REQS: &str = "/spec/requirements";

fn req(key: &str) -> Value {
    json!([{"key": key, "operator": "In", "values": ["1"]}])
}

fn label(key: &str) -> Value {
    json!({ key: "1" })
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn run(cases: Vec<(&'static str, Value, Expect)>) {
    let failures = failures(&crds(), cases);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_mistyped_provider_key_is_refused_naming_it_and_the_allowed_keys() {
    let typo = "karpenter.k8s.aws/instance-categry";
    run(vec![
        (
            "aws typo in a NodePool requirement",
            set(node_pool(), POOL_REQS, req(typo)),
            Rejected(
                "spec.template.spec.requirements[0].key",
                r#"label domain "karpenter.k8s.aws" is restricted to its well-known labels (karpenter.k8s.aws/instance-tenancy, "#,
            ),
        ),
        (
            "the allowed keys are all named",
            set(node_pool(), POOL_REQS, req(typo)),
            Rejected(
                "spec.template.spec.requirements[0].key",
                r#"karpenter.k8s.aws/placement-group-partition); not well-known: "karpenter.k8s.aws/instance-categry""#,
            ),
        ),
        // A map's rule names the domain and its keys, not the unknown key: a message expression
        // over the map is past a real API server's cost budget (it refuses the CRD).
        (
            "aws typo in a NodePool label",
            set(node_pool(), POOL_LABELS, label(typo)),
            Rejected(
                "spec.template.metadata.labels",
                r#"label domain "karpenter.k8s.aws" is restricted to its well-known labels (karpenter.k8s.aws/instance-tenancy, "#,
            ),
        ),
        (
            "an unknown AWS label beside a custom one",
            set(
                node_pool(),
                POOL_LABELS,
                json!({"karpenter.k8s.aws/foo": "x", "team": "a"}),
            ),
            Rejected(
                "spec.template.metadata.labels",
                r#"karpenter.k8s.aws/placement-group-partition)"#,
            ),
        ),
        (
            "aws typo in a NodeClaim requirement",
            set(node_claim(), REQS, req(typo)),
            Rejected(
                "spec.requirements[0].key",
                r#"not well-known: "karpenter.k8s.aws/instance-categry""#,
            ),
        ),
        (
            "aws typo in a NodeOverlay requirement",
            set(node_overlay(), REQS, req(typo)),
            Rejected(
                "spec.requirements[0].key",
                r#"label domain "karpenter.k8s.aws" is restricted"#,
            ),
        ),
        (
            "a subdomain is in the domain",
            set(
                node_pool(),
                POOL_REQS,
                req("x.karpenter.k8s.aws/instance-family"),
            ),
            Rejected(
                "spec.template.spec.requirements[0].key",
                r#"label domain "karpenter.k8s.aws" is restricted"#,
            ),
        ),
        (
            "azure typo",
            set(
                node_pool(),
                POOL_REQS,
                req("karpenter.azure.com/sku-familly"),
            ),
            Rejected(
                "spec.template.spec.requirements[0].key",
                r#"karpenter.azure.com/placement-scope); not well-known: "karpenter.azure.com/sku-familly""#,
            ),
        ),
        (
            "an AKS key outside upstream's list",
            set(
                node_pool(),
                POOL_REQS,
                req("kubernetes.azure.com/agentpool"),
            ),
            Rejected(
                "spec.template.spec.requirements[0].key",
                r#"label domain "kubernetes.azure.com" is restricted"#,
            ),
        ),
        (
            "an AKS label outside upstream's list",
            set(
                node_pool(),
                POOL_LABELS,
                label("kubernetes.azure.com/agentpool"),
            ),
            Rejected(
                "spec.template.metadata.labels",
                r#"label domain "kubernetes.azure.com" is restricted"#,
            ),
        ),
        (
            "azure typo in a NodeClaim",
            set(node_claim(), REQS, req("karpenter.azure.com/sku-nme")),
            Rejected(
                "spec.requirements[0].key",
                r#"label domain "karpenter.azure.com" is restricted"#,
            ),
        ),
        (
            "kwok typo",
            set(
                node_pool(),
                POOL_REQS,
                req("karpenter.kwok.sh/instance-sized"),
            ),
            Rejected(
                "spec.template.spec.requirements[0].key",
                r#"label domain "karpenter.kwok.sh" is restricted to its well-known labels (karpenter.kwok.sh/kwoknodeclass, karpenter.kwok.sh/instance-cpu, karpenter.kwok.sh/instance-memory, karpenter.kwok.sh/instance-family, karpenter.kwok.sh/instance-size); not well-known: "karpenter.kwok.sh/instance-sized""#,
            ),
        ),
        (
            "kwok typo in a NodeClaim",
            set(node_claim(), REQS, req("karpenter.kwok.sh/instance-sized")),
            Rejected(
                "spec.requirements[0].key",
                r#"label domain "karpenter.kwok.sh" is restricted"#,
            ),
        ),
        // karpenter's own restriction still applies, alongside the providers'.
        (
            "karpenter.sh stays restricted",
            set(node_pool(), POOL_REQS, req("karpenter.sh/unknown")),
            Rejected(
                "spec.template.spec.requirements[0].key",
                r#"label domain "karpenter.sh" is restricted"#,
            ),
        ),
    ]);
}

/// Upstream's Azure CRDs refuse AKS's legacy labels; this binary's CRDs serve every
/// provider, so they are refused on the NodePools and NodeClaims of AKSNodeClasses only.
#[test]
fn aks_legacy_labels_are_refused_on_azure_node_pools_only() {
    let azure = |object: Value, pointer: &str| {
        set(
            object,
            pointer,
            json!({"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"}),
        )
    };
    let pool = || azure(node_pool(), "/spec/template/spec/nodeClassRef");
    let claim = || azure(node_claim(), "/spec/nodeClassRef");
    let mut cases = Vec::new();
    for key in AKS_LEGACY {
        let message = leak(format!(r#"label "{key}" is restricted"#));
        cases.push((
            leak(format!("azure requirement {key}")),
            set(pool(), POOL_REQS, req(key)),
            Rejected("spec.template.spec", message),
        ));
        cases.push((
            leak(format!("azure label {key}")),
            set(pool(), POOL_LABELS, label(key)),
            Rejected("spec.template", message),
        ));
        cases.push((
            leak(format!("azure NodeClaim {key}")),
            set(claim(), REQS, req(key)),
            Rejected("spec", message),
        ));
        cases.push((
            leak(format!("aws requirement {key}")),
            set(node_pool(), POOL_REQS, req(key)),
            Valid,
        ));
        cases.push((
            leak(format!("aws label {key}")),
            set(node_pool(), POOL_LABELS, label(key)),
            Valid,
        ));
        cases.push((
            leak(format!("aws NodeClaim {key}")),
            set(node_claim(), REQS, req(key)),
            Valid,
        ));
    }
    // Close names are not refused.
    cases.push((
        "azure agentpools",
        set(pool(), POOL_REQS, req("agentpools")),
        Valid,
    ));
    cases.push((
        "azure label agentpools",
        set(pool(), POOL_LABELS, label("agentpools")),
        Valid,
    ));
    run(cases);
}

#[test]
fn every_well_known_key_is_accepted() {
    let mut cases = Vec::new();
    for key in AWS.iter().chain(AZURE).chain(AKS).chain(KWOK) {
        cases.push((
            leak(format!("NodePool requirement {key}")),
            set(node_pool(), POOL_REQS, req(key)),
            Valid,
        ));
        cases.push((
            leak(format!("NodeClaim requirement {key}")),
            set(node_claim(), REQS, req(key)),
            Valid,
        ));
    }
    for key in AWS.iter().chain(AZURE).chain(AKS) {
        cases.push((
            leak(format!("NodePool label {key}")),
            set(node_pool(), POOL_LABELS, label(key)),
            Valid,
        ));
    }
    for key in AWS_OVERLAY.iter().chain(AZURE).chain(AKS) {
        cases.push((
            leak(format!("NodeOverlay requirement {key}")),
            set(node_overlay(), REQS, req(key)),
            Valid,
        ));
    }
    run(cases);
}

#[test]
fn keys_outside_every_provider_domain_are_untouched() {
    let mut cases = Vec::new();
    for key in [
        "team",
        "example.com/instance-categry",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.k8s.aws/zone-id",
        "k8s.aws/anything",
        "azure.com/anything",
        "kwok.sh/anything",
    ] {
        cases.push((
            leak(format!("requirement {key}")),
            set(node_pool(), POOL_REQS, req(key)),
            Valid,
        ));
        cases.push((
            leak(format!("label {key}")),
            set(node_pool(), POOL_LABELS, label(key)),
            Valid,
        ));
        cases.push((
            leak(format!("NodeClaim {key}")),
            set(node_claim(), REQS, req(key)),
            Valid,
        ));
    }
    // Upstream's KWOK restricts requirements only, its labels are free.
    cases.push((
        "kwok label",
        set(
            node_pool(),
            POOL_LABELS,
            label("karpenter.kwok.sh/anything"),
        ),
        Valid,
    ));
    // NodeOverlays cannot name AWS's reservation, tenancy and placement-group keys; they can
    // name KWOK's domain freely, as upstream.
    for key in [
        "karpenter.k8s.aws/capacity-reservation-id",
        "karpenter.k8s.aws/instance-tenancy",
        "karpenter.k8s.aws/placement-group-id",
    ] {
        cases.push((
            leak(format!("overlay {key}")),
            set(node_overlay(), REQS, req(key)),
            Rejected(
                "spec.requirements[0].key",
                r#"label domain "karpenter.k8s.aws" is restricted"#,
            ),
        ));
    }
    cases.push((
        "overlay kwok",
        set(node_overlay(), REQS, req("karpenter.kwok.sh/anything")),
        Valid,
    ));
    run(cases);
}

/// The rules read as the ones upstream's scripts write into its CRDs.
#[test]
fn rules_are_upstreams() {
    let [pool, claim, overlay, _] = crds();
    let aws_rule = format!(
        r#"self in [{}] || !self.find("^([^/]+)").endsWith("karpenter.k8s.aws")"#,
        AWS.iter()
            .map(|k| format!("\"{k}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let rules = |schema: &Value, pointer: &str| -> Vec<Value> {
        schema
            .pointer(pointer)
            .and_then(|v| v.get("x-kubernetes-validations"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let pool_key = rules(
        &pool.schema(),
        "/properties/spec/properties/template/properties/spec/properties/requirements/items/properties/key",
    );
    let claim_key = rules(
        &claim.schema(),
        "/properties/spec/properties/requirements/items/properties/key",
    );
    for (what, list) in [("NodePool", &pool_key), ("NodeClaim", &claim_key)] {
        let aws = list
            .iter()
            .find(|r| r["message"] == r#"label domain "karpenter.k8s.aws" is restricted"#)
            .unwrap_or_else(|| panic!("{what}: {list:#?}"));
        assert_eq!(aws["rule"], aws_rule.as_str(), "{what}");
        assert!(
            list.iter()
                .any(|r| r["message"] == r#"label domain "kubernetes.azure.com" is restricted"#),
            "{what}"
        );
        assert!(
            list.iter()
                .any(|r| r["message"] == r#"label domain "karpenter.kwok.sh" is restricted"#),
            "{what}"
        );
        // karpenter's own rules come first, unchanged.
        assert_eq!(
            list[0]["message"],
            r#"label domain "karpenter.sh" is restricted"#
        );
    }
    let labels = rules(
        &pool.schema(),
        "/properties/spec/properties/template/properties/metadata/properties/labels",
    );
    let azure = labels
        .iter()
        .find(|r| {
            r["message"].as_str().is_some_and(|m| {
                m.starts_with(r#"label domain "karpenter.azure.com" is restricted"#)
            })
        })
        .unwrap();
    assert_eq!(
        azure["rule"],
        format!(
            r#"self.all(x, x in [{}] || !x.find("^([^/]+)").endsWith("karpenter.azure.com"))"#,
            AZURE
                .iter()
                .map(|k| format!("\"{k}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
    assert!(
        !labels
            .iter()
            .any(|r| r["message"] == r#"label domain "karpenter.kwok.sh" is restricted"#)
    );
    let overlay_key = rules(
        &overlay.schema(),
        "/properties/spec/properties/requirements/items/properties/key",
    );
    assert!(
        !overlay_key
            .iter()
            .any(|r| r["message"] == r#"label domain "karpenter.kwok.sh" is restricted"#)
    );
    // Without domains, karpenter's CRDs are upstream core's.
    let bare = karpenter_api::crd::NODE_POOL.schema().to_string();
    assert!(!bare.contains("karpenter.k8s.aws"));
}
