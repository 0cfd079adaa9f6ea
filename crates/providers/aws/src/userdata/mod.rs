//! User data: how a new instance learns which cluster to join, with which labels, taints and
//! kubelet settings. Per AMI family, as upstream:
//!
//! - **AL2023**: a MIME multipart document; the user's own parts (a MIME document, a nodeadm
//!   `NodeConfig`, or a shell script) come first, then the generated `NodeConfig`, which
//!   nodeadm merges over them.
//! - **Bottlerocket**: TOML settings; the user's settings are kept and the cluster settings,
//!   node labels and taints the provider owns are written over them.
//! - **AL2**: a MIME multipart document ending in `/etc/eks/bootstrap.sh`.
//! - **Windows** (2019, 2022, 2025): a PowerShell block running
//!   `Start-EKSBootstrap.ps1`.
//! - **Custom**: the user's user data, unchanged.

mod al2;
pub mod kubelet_args;
mod windows;

use std::collections::BTreeMap;

use crate::ec2nodeclass::AmiFamily;
use k8s_openapi::api::core::v1::Taint;
use serde_json::{Map, Value, json};

/// The MIME boundary, as upstream's.
const BOUNDARY: &str = "//";

/// What a node needs to join the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bootstrap {
    /// The cluster's name.
    pub cluster_name: String,
    /// The API server's URL.
    pub cluster_endpoint: String,
    /// The cluster CA bundle, base64.
    pub ca_bundle: Option<String>,
    /// The service CIDR (nodeadm needs it).
    pub cluster_cidr: Option<String>,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Taints to register with (the NodeClaim's, and the unregistered taint).
    pub taints: Vec<Taint>,
    /// The EC2NodeClass's kubelet block (`clusterDNS` filled in from the cluster's DNS service
    /// when the NodeClass does not set it).
    pub kubelet: Map<String, Value>,
    /// The kubelet's max pods.
    pub max_pods: Option<i64>,
    /// `instanceStorePolicy: RAID0`.
    pub instance_store_raid0: bool,
    /// The EC2NodeClass's `userData`.
    pub custom: Option<String>,
}

/// Why user data could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    /// The user's user data is not what the family accepts.
    #[error("spec.userData: {0}")]
    Invalid(String),
}

/// The user data for `family`, in plain text (the launch template base64-encodes it).
pub fn render(family: AmiFamily, b: &Bootstrap) -> Result<String, UserDataError> {
    match family {
        AmiFamily::AL2 => Ok(al2::render(b)),
        AmiFamily::AL2023 => Ok(al2023(b)),
        AmiFamily::Bottlerocket => bottlerocket(b),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            Ok(windows::render(b))
        }
        AmiFamily::Custom => Ok(b.custom.clone().unwrap_or_default()),
    }
}

fn label_flag(labels: &BTreeMap<String, String>) -> String {
    let list = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    format!("--node-labels={list}")
}

fn taint_json(t: &Taint) -> Value {
    let mut v = json!({"key": t.key, "effect": t.effect});
    if let Some(value) = &t.value {
        v["value"] = json!(value);
    }
    v
}

/// The generated nodeadm `NodeConfig`.
fn node_config(b: &Bootstrap) -> Value {
    let mut cluster = json!({
        "apiServerEndpoint": b.cluster_endpoint,
        "name": b.cluster_name,
    });
    if let Some(ca) = &b.ca_bundle {
        cluster["certificateAuthority"] = json!(ca);
    }
    if let Some(cidr) = &b.cluster_cidr {
        cluster["cidr"] = json!(cidr);
    }
    let mut config = b.kubelet.clone();
    if let Some(max) = b.max_pods {
        config.entry("maxPods").or_insert(json!(max));
    }
    config.insert(
        "registerWithTaints".into(),
        Value::Array(b.taints.iter().map(taint_json).collect()),
    );
    let mut spec = json!({
        "cluster": cluster,
        "kubelet": {"config": config, "flags": [label_flag(&b.labels)]},
    });
    if b.instance_store_raid0 {
        spec["instance"] = json!({"localStorage": {"strategy": "RAID0"}});
    }
    json!({"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec})
}

/// The parts of a MIME multipart document (each its headers, a blank line, its body); empty
/// when it names no boundary.
fn mime_parts(doc: &str) -> Vec<String> {
    let trimmed = doc.trim_start();
    let boundary = trimmed
        .lines()
        .find_map(|l| l.split("boundary=").nth(1))
        .map(|b| b.trim().trim_matches('"').to_string());
    let Some(boundary) = boundary else {
        return Vec::new();
    };
    let delimiter = format!("--{boundary}");
    trimmed
        .split(&delimiter)
        .skip(1)
        .map(|p| p.trim_matches('\n').to_string())
        .filter(|p| !p.is_empty() && !p.starts_with("--"))
        .collect()
}

/// A MIME multipart document of `parts`, under upstream's boundary.
fn mime_document(parts: &[String]) -> String {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for part in parts {
        out.push_str(&format!("--{BOUNDARY}\n{part}\n"));
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}

/// The user's AL2023 user data as MIME parts: the parts of a MIME document, or one part of a
/// NodeConfig or a script.
fn user_parts(custom: &str) -> Vec<String> {
    let trimmed = custom.trim_start();
    if trimmed.starts_with("MIME-Version:") {
        let parts = mime_parts(trimmed);
        if !parts.is_empty() {
            return parts;
        }
    }
    let content_type = if trimmed.starts_with("apiVersion:") || trimmed.contains("kind: NodeConfig")
    {
        "application/node.eks.aws"
    } else {
        "text/x-shellscript; charset=\"us-ascii\""
    };
    vec![format!(
        "Content-Type: {content_type}\n\n{}",
        custom.trim_end()
    )]
}

fn al2023(b: &Bootstrap) -> String {
    let mut parts = b.custom.as_deref().map(user_parts).unwrap_or_default();
    let yaml = serde_json::to_string_pretty(&node_config(b)).unwrap_or_default();
    // JSON is YAML; nodeadm reads either.
    parts.push(format!(
        "Content-Type: application/node.eks.aws\n\n# karpenter-rs generated NodeConfig\n{yaml}"
    ));
    mime_document(&parts)
}

fn bottlerocket(b: &Bootstrap) -> Result<String, UserDataError> {
    let mut root: Value = match b.custom.as_deref().filter(|c| !c.trim().is_empty()) {
        Some(custom) => basic_toml::from_str(custom)
            .map_err(|e| UserDataError::Invalid(format!("not valid Bottlerocket TOML: {e}")))?,
        None => json!({}),
    };
    if !root.is_object() {
        return Err(UserDataError::Invalid("not a TOML table".into()));
    }
    let kubernetes = root
        .as_object_mut()
        .and_then(|r| {
            r.entry("settings")
                .or_insert_with(|| json!({}))
                .as_object_mut()
        })
        .and_then(|s| {
            s.entry("kubernetes")
                .or_insert_with(|| json!({}))
                .as_object_mut()
        })
        .ok_or_else(|| UserDataError::Invalid("settings.kubernetes must be a table".into()))?;
    kubernetes.insert("api-server".into(), json!(b.cluster_endpoint));
    kubernetes.insert("cluster-name".into(), json!(b.cluster_name));
    if let Some(ca) = &b.ca_bundle {
        kubernetes.insert("cluster-certificate".into(), json!(ca));
    }
    if let Some(max) = kubelet_args::max_pods(b) {
        kubernetes.insert("max-pods".into(), json!(max));
    }
    if let Some(dns) = kubelet_args::cluster_dns(b) {
        kubernetes.insert("cluster-dns-ip".into(), json!(dns));
    }
    let labels = kubernetes.entry("node-labels").or_insert_with(|| json!({}));
    if let Some(labels) = labels.as_object_mut() {
        for (k, v) in &b.labels {
            labels.insert(k.clone(), json!(v));
        }
    }
    // The taints are the NodeClaim's; the user's are replaced, as upstream.
    let mut taints: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in &b.taints {
        taints.entry(t.key.clone()).or_default().push(format!(
            "{}:{}",
            t.value.clone().unwrap_or_default(),
            t.effect
        ));
    }
    kubernetes.insert("node-taints".into(), json!(taints));
    let mut out = String::new();
    write_toml(&root, &mut Vec::new(), &mut out);
    Ok(out)
}

fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        k.to_string()
    } else {
        toml_string(k)
    }
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn toml_value(v: &Value) -> String {
    match v {
        Value::String(s) => toml_string(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{} = {}", toml_key(k), toml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Null => "\"\"".into(),
        other => other.to_string(),
    }
}

/// Writes a table: its plain values, then each sub-table under its own header.
fn write_toml(table: &Value, path: &mut Vec<String>, out: &mut String) {
    let Some(map) = table.as_object() else {
        return;
    };
    let (tables, values): (Vec<_>, Vec<_>) = map.iter().partition(|(_, v)| v.is_object());
    if !values.is_empty() || (tables.is_empty() && !path.is_empty()) {
        if !path.is_empty() {
            out.push_str(&format!("[{}]\n", path.join(".")));
        }
        for (k, v) in values {
            out.push_str(&format!("{} = {}\n", toml_key(k), toml_value(v)));
        }
        out.push('\n');
    }
    for (k, v) in tables {
        path.push(toml_key(k));
        write_toml(v, path, out);
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bootstrap(custom: Option<&str>) -> Bootstrap {
        Bootstrap {
            cluster_name: "test-cluster".into(),
            cluster_endpoint: "https://test-cluster".into(),
            ca_bundle: Some("Y2EtYnVuZGxlCg==".into()),
            cluster_cidr: Some("10.100.0.0/16".into()),
            labels: [
                (
                    "karpenter.sh/capacity-type".to_string(),
                    "on-demand".to_string(),
                ),
                (
                    "karpenter.sh/do-not-sync-taints".to_string(),
                    "true".to_string(),
                ),
            ]
            .into(),
            taints: vec![Taint {
                key: "karpenter.sh/unregistered".into(),
                effect: "NoExecute".into(),
                ..Default::default()
            }],
            kubelet: serde_json::from_value(json!({"clusterDNS": ["10.0.100.10"]})).unwrap(),
            max_pods: Some(110),
            instance_store_raid0: false,
            custom: custom.map(str::to_string),
        }
    }

    fn parts(doc: &str) -> Vec<String> {
        user_parts(doc)
    }

    /// After upstream's `al2023_shell_userdata` golden: the script is its own part, before
    /// the generated NodeConfig.
    #[test]
    fn al2023_script_then_node_config() {
        let out = render(
            AmiFamily::AL2023,
            &bootstrap(Some("#!/bin/bash\necho \"Hello, AL2023!\"\n")),
        )
        .unwrap();
        assert!(
            out.starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n")
        );
        assert!(out.ends_with("--//--\n"));
        let p = parts(&out);
        assert_eq!(p.len(), 2, "{out}");
        assert!(p[0].starts_with("Content-Type: text/x-shellscript"));
        assert!(p[0].contains("echo \"Hello, AL2023!\""));
        assert!(p[1].starts_with("Content-Type: application/node.eks.aws"));
        let yaml = p[1]
            .split_once("\n{")
            .map(|(_, rest)| format!("{{{rest}"))
            .unwrap();
        let config: Value = serde_json::from_str(&yaml).unwrap();
        assert_eq!(config["kind"], "NodeConfig");
        assert_eq!(
            config["spec"]["cluster"]["apiServerEndpoint"],
            "https://test-cluster"
        );
        assert_eq!(
            config["spec"]["cluster"]["certificateAuthority"],
            "Y2EtYnVuZGxlCg=="
        );
        assert_eq!(config["spec"]["cluster"]["cidr"], "10.100.0.0/16");
        assert_eq!(config["spec"]["kubelet"]["config"]["maxPods"], 110);
        assert_eq!(
            config["spec"]["kubelet"]["config"]["clusterDNS"][0],
            "10.0.100.10"
        );
        assert_eq!(
            config["spec"]["kubelet"]["config"]["registerWithTaints"][0]["key"],
            "karpenter.sh/unregistered"
        );
        assert_eq!(
            config["spec"]["kubelet"]["flags"][0],
            "--node-labels=karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true"
        );
    }

    /// After `al2023_mime_userdata` and `al2023_yaml_userdata`: a user's MIME document keeps
    /// its parts; a bare NodeConfig becomes a NodeConfig part; the user's maxPods is kept.
    #[test]
    fn al2023_user_mime_and_node_config() {
        let mime = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 42\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho \"Hello, AL2023!\"\n--BOUNDARY--\n";
        let out = render(AmiFamily::AL2023, &bootstrap(Some(mime))).unwrap();
        let p = parts(&out);
        assert_eq!(p.len(), 3, "{out}");
        assert!(p[0].contains("maxPods: 42"));
        assert!(p[1].contains("Hello, AL2023!"));
        let yaml = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 42\n";
        let p = parts(&render(AmiFamily::AL2023, &bootstrap(Some(yaml))).unwrap());
        assert!(p[0].starts_with("Content-Type: application/node.eks.aws"));
        let mut b = bootstrap(None);
        b.kubelet.insert("maxPods".into(), json!(42));
        b.instance_store_raid0 = true;
        let out = render(AmiFamily::AL2023, &b).unwrap();
        assert!(
            out.contains("\"maxPods\": 42") && !out.contains("\"maxPods\": 110"),
            "the NodeClass's maxPods wins"
        );
        assert!(out.contains("\"strategy\": \"RAID0\""));
    }

    /// After `br_userdata_merged`: the user's settings stay, cluster settings, labels and
    /// taints are the provider's.
    #[test]
    fn bottlerocket_merges_over_the_users_settings() {
        let user = "[settings.kubernetes]\napi-server = 'replaceme'\ncluster-name = 'replaceme'\nmax-pods = 9999999999\n\n[settings.kubernetes.eviction-hard]\n\"memory.available\" = \"12%\"\n\n[settings.kubernetes.node-labels]\n\"custom-node-label\" = \"custom\"\n\"karpenter.sh/capacity-type\" = \"should-be-overridden\"\n\n[settings.kubernetes.node-taints]\n\"replace\" = [\"me:Schedule\"]\n\n[settings.ntp]\ntime-servers = [\"169.254.169.123\"]\n";
        let out = render(AmiFamily::Bottlerocket, &bootstrap(Some(user))).unwrap();
        let parsed: Value = basic_toml::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
        let k = &parsed["settings"]["kubernetes"];
        assert_eq!(k["api-server"], "https://test-cluster");
        assert_eq!(k["cluster-name"], "test-cluster");
        assert_eq!(k["cluster-certificate"], "Y2EtYnVuZGxlCg==");
        assert_eq!(k["max-pods"], 110);
        assert_eq!(k["eviction-hard"]["memory.available"], "12%");
        assert_eq!(k["node-labels"]["custom-node-label"], "custom");
        assert_eq!(k["node-labels"]["karpenter.sh/capacity-type"], "on-demand");
        assert_eq!(
            k["node-taints"],
            json!({"karpenter.sh/unregistered": [":NoExecute"]})
        );
        assert_eq!(
            parsed["settings"]["ntp"]["time-servers"][0],
            "169.254.169.123"
        );
        let bad = render(AmiFamily::Bottlerocket, &bootstrap(Some("[settings"))).unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("spec.userData: not valid Bottlerocket TOML"),
            "{bad}"
        );
    }

    #[test]
    fn custom_passes_through() {
        assert_eq!(
            render(AmiFamily::Custom, &bootstrap(Some("#!/bin/sh\ntrue"))).unwrap(),
            "#!/bin/sh\ntrue"
        );
    }

    /// After upstream's `al2_userdata_merged` golden: the user's script part, then the
    /// bootstrap script with the CA, the cluster DNS, max pods and the kubelet flags.
    #[test]
    fn al2_script_then_bootstrap() {
        let user = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho \"Running custom user data script\"\n\n--BOUNDARY--\n";
        let out = render(AmiFamily::AL2, &bootstrap(Some(user))).unwrap();
        let expected = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho \"Running custom user data script\"\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n/etc/eks/bootstrap.sh 'test-cluster' --apiserver-endpoint 'https://test-cluster' --b64-cluster-ca 'Y2EtYnVuZGxlCg==' \\\n--dns-cluster-ip '10.0.100.10' \\\n--use-max-pods false \\\n--kubelet-extra-args '--node-labels=\"karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true\" --register-with-taints=\"karpenter.sh/unregistered:NoExecute\" --max-pods=110'\n--//--\n";
        assert_eq!(out, expected);
        // A bare script becomes its own part; no user data, only the bootstrap part.
        let p = parts(&render(AmiFamily::AL2, &bootstrap(Some("echo hi"))).unwrap());
        assert_eq!(p.len(), 2);
        assert_eq!(
            p[0],
            "Content-Type: text/x-shellscript; charset=\"us-ascii\"\n\necho hi"
        );
        assert_eq!(
            parts(&render(AmiFamily::AL2, &bootstrap(None)).unwrap()).len(),
            1
        );
    }

    /// The kubelet settings with a flag become flags; an IPv6 cluster DNS adds
    /// `--ip-family ipv6`; RAID0 adds `--local-disks raid0`.
    #[test]
    fn al2_kubelet_flags_ipv6_and_raid0() {
        let mut b = bootstrap(None);
        b.kubelet = serde_json::from_value(json!({
            "clusterDNS": ["fd01:b::a"],
            "maxPods": 42,
            "podsPerCore": 2,
            "systemReserved": {"memory": "1Gi", "cpu": "100m"},
            "evictionHard": {"memory.available": "5%"},
            "imageGCHighThresholdPercent": 85,
            "cpuCFSQuota": false,
        }))
        .unwrap();
        b.instance_store_raid0 = true;
        b.taints.push(Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
        let out = render(AmiFamily::AL2, &b).unwrap();
        assert!(
            out.contains("\\\n--ip-family ipv6 \\\n--dns-cluster-ip 'fd01:b::a'"),
            "{out}"
        );
        assert!(out.contains("--register-with-taints=\"karpenter.sh/unregistered:NoExecute,dedicated=gpu:NoSchedule\" --max-pods=42 --pods-per-core=2 --system-reserved=\"cpu=100m,memory=1Gi\" --eviction-hard=\"memory.available<5%\" --image-gc-high-threshold=85 --cpu-cfs-quota=false'"), "{out}");
        assert!(out.contains("--local-disks raid0\n--//--"), "{out}");
        assert!(!out.contains("--max-pods=110"));
    }

    /// After upstream's `windows_userdata_merged` golden.
    #[test]
    fn windows_runs_the_users_commands_then_bootstrap() {
        let user = "Write-Host \"Running custom user data script\"\nWrite-Host \"Finished running custom user data script\"";
        for family in [
            AmiFamily::Windows2019,
            AmiFamily::Windows2022,
            AmiFamily::Windows2025,
        ] {
            let out = render(family, &bootstrap(Some(user))).unwrap();
            assert_eq!(
                out,
                "<powershell>\nWrite-Host \"Running custom user data script\"\nWrite-Host \"Finished running custom user data script\"\n[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n& $EKSBootstrapScriptFile -EKSClusterName 'test-cluster' -APIServerEndpoint 'https://test-cluster' -Base64ClusterCA 'Y2EtYnVuZGxlCg==' -KubeletExtraArgs '--node-labels=\"karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true\" --register-with-taints=\"karpenter.sh/unregistered:NoExecute\" --max-pods=110' -DNSClusterIP '10.0.100.10'\n</powershell>"
            );
        }
        let plain = render(AmiFamily::Windows2022, &bootstrap(None)).unwrap();
        assert!(plain.starts_with("<powershell>\n[string]$EKSBootstrapScriptFile"));
    }

    #[test]
    fn bottlerocket_gets_the_cluster_dns() {
        let out = render(AmiFamily::Bottlerocket, &bootstrap(None)).unwrap();
        let parsed: Value = basic_toml::from_str(&out).unwrap();
        assert_eq!(
            parsed["settings"]["kubernetes"]["cluster-dns-ip"],
            "10.0.100.10"
        );
    }
}
