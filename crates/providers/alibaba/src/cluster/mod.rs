//! The cluster a node joins, after upstream's cluster provider (`pkg/providers/cluster`): how a
//! new ECS instance becomes a node, which CNI the cluster runs, which images ACK offers.
//!
//! Two cluster types, upstream's `CLUSTER_TYPE` setting:
//!
//! * [`ClusterType::AckManaged`] (`ACKManaged`, the default): the node runs ACK's attach script
//!   (`DescribeClusterAttachScripts`), its container runtime set to the cluster's node pools'
//!   ([`set_runtime`]), finished with the node's labels, taints and kubelet configuration
//!   ([`finish_attach_script`]) and merged with the `ECSNodeClass`'s `userData` into a MIME
//!   multipart document ([`cloudinit`]).
//! * [`ClusterType::Custom`]: the `userData` alone ([`custom_user_data`]); joining the cluster is
//!   the user's business (and the user's data must register the node with the
//!   `karpenter.sh/unregistered:NoExecute` taint).
//!
//! The pieces here are pure; with the `cloud` feature, `AckCluster` and `Cluster` make the ACK
//! calls (ROA, through the client's `roa`) and cache their answers.

pub mod cloudinit;

#[cfg(feature = "cloud")]
mod ack;
#[cfg(test)]
mod tests;

#[cfg(feature = "cloud")]
pub use ack::{AckCluster, Cluster, ClusterError};

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Taint;
use karpenter_api::labels::UNREGISTERED_TAINT_KEY;
use serde_json::{Value, json};

use crate::ecsnodeclass::KubeletConfiguration;
use crate::imagefamily::ClusterImage;
pub use crate::instancetype::Cni;
use cloudinit::{CloudInit, MimeError};

/// The setting (environment variable) that names the cluster type.
pub const CLUSTER_TYPE_SETTING: &str = "CLUSTER_TYPE";

/// The label every ACK node carries, first in `--labels`.
pub const DEFAULT_NODE_LABEL: &str = "k8s.aliyun.com=true";

/// The label naming the node's ACK cluster.
pub const CLUSTER_ID_LABEL: &str = "ack.aliyun.com";

/// How long an attach script is reused (upstream's `ClusterAttachScriptTTL`): it carries a
/// token that outlives this, and asking ACK for it on every launch would be a call per node.
pub const ATTACH_SCRIPT_TTL: Duration = Duration::from_secs(6 * 60 * 60);

/// The `ClusterType` ACK's version metadata is asked for.
pub const MANAGED_KUBERNETES: &str = "ManagedKubernetes";

/// How nodes join the cluster.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ClusterType {
    /// An ACK managed cluster: ACK's attach script.
    #[default]
    AckManaged,
    /// Any other cluster: the user's data alone.
    Custom,
}

impl ClusterType {
    /// The setting's value: `ACKManaged`, `Custom`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterType::AckManaged => "ACKManaged",
            ClusterType::Custom => "Custom",
        }
    }
}

impl std::fmt::Display for ClusterType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `CLUSTER_TYPE` that is neither `ACKManaged` nor `Custom`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{CLUSTER_TYPE_SETTING} {0:?}: expected \"ACKManaged\" or \"Custom\"")]
pub struct UnknownClusterType(pub String);

impl std::str::FromStr for ClusterType {
    type Err = UnknownClusterType;

    /// `ACKManaged` (also when empty, upstream's default) or `Custom`. Upstream treats every
    /// other value as `Custom`; here it is an error, since a misspelt `ACKManaged` would
    /// launch nodes that never join.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "" | "ACKManaged" => Ok(ClusterType::AckManaged),
            "Custom" => Ok(ClusterType::Custom),
            other => Err(UnknownClusterType(other.to_string())),
        }
    }
}

/// What a node boots with, besides the cluster's own part.
#[derive(Clone, Copy, Debug)]
pub struct NodeBootstrap<'a> {
    /// The node's labels (the claim's, with its capacity type).
    pub labels: &'a BTreeMap<String, String>,
    /// The node's taints: the claim's taints and startup taints (see [`node_taints`]).
    pub taints: &'a [Taint],
    /// The `ECSNodeClass`'s kubelet configuration.
    pub kubelet: Option<&'a KubeletConfiguration>,
    /// The `ECSNodeClass`'s `userData`.
    pub user_data: Option<&'a str>,
    /// The `ECSNodeClass`'s `formatDataDisk`: whether ACK's script formats the data disk.
    pub format_data_disk: bool,
}

/// The taints a node registers with, as upstream's launch gathers them: the claim's taints,
/// its startup taints, and `karpenter.sh/unregistered:NoExecute` unless one of them already
/// is that taint (same key and effect), so the node takes no pods before Karpenter has seen it.
pub fn node_taints(taints: &[Taint], startup_taints: &[Taint]) -> Vec<Taint> {
    let mut all: Vec<Taint> = taints.iter().chain(startup_taints).cloned().collect();
    if !all
        .iter()
        .any(|t| t.key == UNREGISTERED_TAINT_KEY && t.effect == "NoExecute")
    {
        all.push(Taint {
            key: UNREGISTERED_TAINT_KEY.to_string(),
            effect: "NoExecute".to_string(),
            ..Default::default()
        });
    }
    all
}

/// `--labels`'s value: [`DEFAULT_NODE_LABEL`], `ack.aliyun.com=<cluster>`, then the node's
/// labels as `key=value` in key order (upstream follows Go's map order, which varies from launch
/// to launch), joined with `,`.
pub fn format_labels(cluster_id: &str, labels: &BTreeMap<String, String>) -> String {
    let mut out = format!("{DEFAULT_NODE_LABEL},{CLUSTER_ID_LABEL}={cluster_id}");
    for (key, value) in labels {
        out.push_str(&format!(",{key}={value}"));
    }
    out
}

/// A taint as Kubernetes writes it (`Taint.ToString`): `key=value:Effect`, or `key:Effect`
/// without a value.
pub fn format_taint(taint: &Taint) -> String {
    match taint.value.as_deref() {
        Some(value) if !value.is_empty() => format!("{}={value}:{}", taint.key, taint.effect),
        _ => format!("{}:{}", taint.key, taint.effect),
    }
}

/// `--taints`'s value: the taints in order, joined with `,`.
pub fn format_taints(taints: &[Taint]) -> String {
    taints
        .iter()
        .map(format_taint)
        .collect::<Vec<_>>()
        .join(",")
}

/// `--node-config`'s value: the base64 of ACK's node configuration JSON,
/// `{"kubelet_config":{"maxPods":N}}`. Upstream passes only `maxPods` to ACK; without it (or
/// without a kubelet configuration) the kubelet configuration is `{}`.
pub fn node_config(kubelet: Option<&KubeletConfiguration>) -> String {
    let mut kubelet_config = serde_json::Map::new();
    if let Some(max_pods) = kubelet.and_then(|k| k.max_pods) {
        kubelet_config.insert("maxPods".into(), json!(max_pods));
    }
    let config = json!({"kubelet_config": kubelet_config});
    base64::engine::general_purpose::STANDARD.encode(config.to_string())
}

/// ACK's attach script with its `\r\n`s removed (upstream's clean-up: the command is one line
/// and the script's arguments are appended to it).
pub fn clean_attach_script(script: &str) -> String {
    script.replace("\r\n", "")
}

/// The container runtime a node pool runs (`kubernetes_config.runtime`, `runtime_version`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runtime {
    /// `containerd`, `docker`.
    pub name: String,
    /// `1.6.28`.
    pub version: String,
}

/// Whitespace as Go's `\s` has it.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0c' | b'\r')
}

/// `script` with every `<whitespace>--runtime X --runtime-version Y` (any whitespace between the
/// four words) written as ` --runtime <name> --runtime-version <version>`. ACK's attach script
/// can name a runtime the cluster's version no longer supports (Docker on 1.24), so upstream
/// sets the node pools' instead. A script without the pair is left as it is.
pub fn set_runtime(script: &str, runtime: &Runtime) -> String {
    let bytes = script.as_bytes();
    // Each word with where its leading whitespace starts and where the word ends.
    let mut words: Vec<(usize, usize, usize)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let space_start = i;
        while i < bytes.len() && is_space(bytes[i]) {
            i += 1;
        }
        let word_start = i;
        while i < bytes.len() && !is_space(bytes[i]) {
            i += 1;
        }
        if word_start < i {
            words.push((space_start, word_start, i));
        }
    }
    let word = |n: usize| &script[words[n].1..words[n].2];
    let mut out = String::with_capacity(script.len());
    let mut copied = 0;
    let mut n = 0;
    while n + 3 < words.len() {
        let has_space_before = words[n].0 < words[n].1;
        if has_space_before && word(n) == "--runtime" && word(n + 2) == "--runtime-version" {
            out.push_str(&script[copied..words[n].0]);
            out.push_str(&format!(
                " --runtime {} --runtime-version {}",
                runtime.name, runtime.version
            ));
            copied = words[n + 3].2;
            n += 4;
        } else {
            n += 1;
        }
    }
    out.push_str(&script[copied..]);
    out
}

/// The node's shell script (upstream's `ackBootstrap`): a `bash` shebang, then the attach
/// script with `--labels`, `--node-config` and `--taints` appended.
pub fn finish_attach_script(
    attach_script: &str,
    cluster_id: &str,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    kubelet: Option<&KubeletConfiguration>,
) -> String {
    format!(
        "#!/bin/bash\n\n{attach_script} --labels {} --node-config {} --taints {}\n\n",
        format_labels(cluster_id, labels),
        node_config(kubelet),
        format_taints(taints)
    )
}

/// An ACK node's `UserData` (base64): the finished attach script, then the user's data, in
/// one MIME multipart document.
pub fn ack_user_data(
    attach_script: &str,
    cluster_id: &str,
    node: &NodeBootstrap<'_>,
) -> Result<String, MimeError> {
    let script = finish_attach_script(
        attach_script,
        cluster_id,
        node.labels,
        node.taints,
        node.kubelet,
    );
    let mut cloud_init = CloudInit::new();
    cloud_init.merge(&script)?;
    cloud_init.merge(node.user_data.unwrap_or_default())?;
    Ok(cloud_init.script())
}

/// A custom cluster's node `UserData` (base64): the user's data as it is, empty without one.
pub fn custom_user_data(user_data: Option<&str>) -> String {
    base64::engine::general_purpose::STANDARD.encode(user_data.unwrap_or_default())
}

/// An ACK answer that lacks what the provider needs from it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// `DescribeClusterNodePools` listed no node pool.
    #[error("DescribeClusterNodePools: no node pool")]
    NoNodePool,
    /// The chosen node pool does not say its runtime.
    #[error("DescribeClusterNodePools: node pool {0:?} has no runtime and runtime version")]
    NoRuntime(String),
    /// `DescribeClusterDetail` has no `meta_data`.
    #[error("DescribeClusterDetail: no meta_data")]
    NoMetaData,
    /// `meta_data` is not the JSON object it should be.
    #[error("DescribeClusterDetail: meta_data: {0}")]
    MetaData(String),
    /// `DescribeKubernetesVersionMetadata` listed no version.
    #[error("DescribeKubernetesVersionMetadata: no version in the answer")]
    NoVersion,
    /// The version has no images.
    #[error("DescribeKubernetesVersionMetadata: no image for the version")]
    NoImages,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, key| v.get(*key))
        .and_then(Value::as_str)
}

/// The runtime new nodes should run, from a `DescribeClusterNodePools` answer: the default node
/// pool's, else that of the pool with the most healthy nodes (the first such on a tie). The
/// chosen pool must name both runtime and version.
pub fn pick_runtime(answer: &Value) -> Result<Runtime, AnswerError> {
    let pools = answer
        .get("nodepools")
        .and_then(Value::as_array)
        .filter(|p| !p.is_empty())
        .ok_or(AnswerError::NoNodePool)?;
    let rank = |pool: &Value| {
        let is_default = pool
            .pointer("/nodepool_info/is_default")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let healthy = pool
            .pointer("/status/healthy_nodes")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        (is_default, healthy)
    };
    // `max_by_key` keeps the last of equals; the first is what a stable sort would pick.
    let chosen = pools
        .iter()
        .rev()
        .max_by_key(|p| rank(p))
        .ok_or(AnswerError::NoNodePool)?;
    match (
        str_at(chosen, &["kubernetes_config", "runtime"]),
        str_at(chosen, &["kubernetes_config", "runtime_version"]),
    ) {
        (Some(name), Some(version)) => Ok(Runtime {
            name: name.to_string(),
            version: version.to_string(),
        }),
        _ => Err(AnswerError::NoRuntime(
            str_at(chosen, &["nodepool_info", "name"])
                .unwrap_or_default()
                .to_string(),
        )),
    }
}

/// A key of a JSON object, its case ignored when no key matches exactly (Go's decoder matches
/// field names so, and `meta_data` has been seen both ways).
fn get_ci<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let object = v.as_object()?;
    object.get(key).or_else(|| {
        object
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

/// The network plugin of a `DescribeClusterDetail` answer: `meta_data` (a JSON document in a
/// string) → `Capabilities.Network`, `terway-eniip` or `Flannel`; empty when not given.
pub fn cluster_network(answer: &Value) -> Result<String, AnswerError> {
    let meta_data = answer
        .get("meta_data")
        .and_then(Value::as_str)
        .ok_or(AnswerError::NoMetaData)?;
    let meta: Value =
        serde_json::from_str(meta_data).map_err(|e| AnswerError::MetaData(e.to_string()))?;
    if !meta.is_object() {
        return Err(AnswerError::MetaData("not a JSON object".into()));
    }
    Ok(get_ci(&meta, "Capabilities")
        .and_then(|c| get_ci(c, "Network"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string())
}

/// The images of a `DescribeKubernetesVersionMetadata` answer (a list of versions; the first
/// one's `images`).
pub fn parse_images(answer: &Value) -> Result<Vec<ClusterImage>, AnswerError> {
    let version = answer
        .as_array()
        .and_then(|versions| versions.first())
        .ok_or(AnswerError::NoVersion)?;
    let images = version
        .get("images")
        .and_then(Value::as_array)
        .filter(|i| !i.is_empty())
        .ok_or(AnswerError::NoImages)?;
    let field = |image: &Value, key: &str| str_at(image, &[key]).unwrap_or_default().to_string();
    Ok(images
        .iter()
        .map(|image| ClusterImage {
            id: field(image, "image_id"),
            name: field(image, "image_name"),
            platform: field(image, "platform"),
            os_version: field(image, "os_version"),
            image_type: field(image, "image_type"),
            os_type: field(image, "os_type"),
            architecture: field(image, "architecture"),
        })
        .collect())
}

/// The Kubernetes version as ACK's metadata API wants it: without a leading `v`.
pub fn metadata_version(kubernetes_version: &str) -> &str {
    kubernetes_version
        .strip_prefix('v')
        .unwrap_or(kubernetes_version)
}
