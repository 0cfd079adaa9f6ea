//! The CRDs the binary ships (`karpenter-rs crds`, what the chart applies) judged by a real API
//! server: it must accept every one — the CEL rules within its cost budget — and then refuse
//! what the rules refuse, with their messages. The client-side CEL evaluator does not estimate
//! costs, so only a real API server can tell.
//!
//! Skipped unless `KARPENTER_RS_REAL_KUBECONFIG` names the kubeconfig of such a cluster (a
//! local control plane built from source; CI has none):
//!
//! ```sh
//! KARPENTER_RS_REAL_KUBECONFIG=path/to/kubeconfig cargo test -p karpenter-cli --test real_apiserver_crds
//! ```

use std::process::Command;

use karpenter_testkit::real;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

fn crds() -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-rs"))
        .arg("crds")
        .output()
        .expect("the binary runs");
    assert!(out.status.success());
    serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).expect("CRDs parse")
}

fn node_pool(name: &str, group: &str, kind: &str, labels: Value, requirements: Value) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {
            "metadata": {"labels": labels},
            "spec": {"nodeClassRef": {"group": group, "kind": kind, "name": "default"},
                "requirements": requirements}}}
    })
}

#[tokio::test]
async fn the_shipped_crds_are_accepted_and_their_label_rules_hold() {
    let Some(client) = real::client().await else {
        eprintln!("skipped: {} is not set", real::KUBECONFIG_VAR);
        return;
    };
    real::install_crds(&client, crds()).await;
    let resource = ApiResource {
        group: "karpenter.sh".into(),
        version: "v1".into(),
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        plural: "nodepools".into(),
    };
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let apply = |object: Value| {
        let pools = pools.clone();
        async move {
            let name = object["metadata"]["name"].as_str().unwrap().to_string();
            let object: DynamicObject = serde_json::from_value(object).unwrap();
            let applied = pools
                .patch(
                    &name,
                    &PatchParams::apply("karpenter-rs-tests").force(),
                    &Patch::Apply(&object),
                )
                .await;
            let _ = pools.delete(&name, &DeleteParams::default()).await;
            applied.map(|_| ()).map_err(|e| e.to_string())
        }
    };
    let requirement = |key: &str| json!([{"key": key, "operator": "In", "values": ["c"]}]);
    // (case, NodePool, the message the API server refuses it with, if it does)
    let cases = [
        (
            "well-known keys of two providers and a custom key",
            node_pool(
                "crds-fine",
                "karpenter.k8s.aws",
                "EC2NodeClass",
                json!({"team": "a", "karpenter.k8s.aws/instance-family": "c5"}),
                json!([
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c"]},
                    {"key": "karpenter.azure.com/sku-family", "operator": "In", "values": ["D"]},
                    {"key": "example.com/team", "operator": "In", "values": ["a"]},
                ]),
            ),
            None,
        ),
        (
            "a mistyped AWS requirement key",
            node_pool(
                "crds-typo",
                "karpenter.k8s.aws",
                "EC2NodeClass",
                json!({}),
                requirement("karpenter.k8s.aws/instance-categry"),
            ),
            Some("not well-known: \"karpenter.k8s.aws/instance-categry\""),
        ),
        (
            "a mistyped AWS label",
            node_pool(
                "crds-label-typo",
                "karpenter.k8s.aws",
                "EC2NodeClass",
                json!({"karpenter.k8s.aws/instance-famly": "c5"}),
                json!([]),
            ),
            Some("label domain \"karpenter.k8s.aws\" is restricted to its well-known labels"),
        ),
        (
            "a mistyped KWOK requirement key",
            node_pool(
                "crds-kwok-typo",
                "karpenter.kwok.sh",
                "KWOKNodeClass",
                json!({}),
                requirement("karpenter.kwok.sh/instance-famly"),
            ),
            Some("label domain \"karpenter.kwok.sh\" is restricted"),
        ),
    ];
    let mut failures = Vec::new();
    for (case, pool, refused) in cases {
        let outcome = apply(pool).await;
        let ok = match (&outcome, refused) {
            (Ok(()), None) => true,
            (Err(e), Some(message)) => e.contains(message),
            _ => false,
        };
        if !ok {
            failures.push(format!("{case}: {outcome:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
