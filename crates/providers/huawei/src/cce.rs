//! CCE's node API as the provider speaks it: the `CreateNode` body a NodeClaim and its
//! CCENodeClass make, the order launch candidates are tried in, and the node and job answers.
//!
//! CCE creates the ECS server, installs the node and joins it to the cluster, so there is no
//! bootstrap of our own: labels go in `k8sTags`, taints in `taints`, kubelet reservations in
//! `extendParam`. CCE registers the Kubernetes node with the CCE node's id (`metadata.uid`) as
//! its `spec.providerID` — a bare UUID, no scheme — so that is the NodeClaim's providerID too
//! (upstream's choice, and what its users' clusters show).

use std::collections::BTreeMap;

use karpenter_api::NodeClaim;
use karpenter_api::labels::{NODE_POOL_LABEL, UNREGISTERED_TAINT_KEY};
use karpenter_core::instancetype::{InstanceType, launchable};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::ccenodeclass::{BlockDevice, CCENodeClassSpec, LoginMethod};

/// The `k8sTags` key holding the NodeClaim's uid: a retried create finds its node by it.
pub const NODE_CLAIM_UID_TAG: &str = "karpenter.k8s.huawei/nodeclaim-uid";

/// The taint CCE sets itself while the node's network comes up, and refuses in a request.
const NETWORK_UNAVAILABLE_TAINT: &str = "node.kubernetes.io/network-unavailable";

/// The most (type, zone) candidates one create tries: each refusal is a round trip, and past
/// this the claim is better rescheduled with the refused offerings marked unavailable.
pub const MAX_CANDIDATES: usize = 20;

/// One way to create the node: a flavor in a zone, at its on-demand price.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The ECS flavor (`c7.large.2`).
    pub flavor: String,
    /// The availability zone.
    pub zone: String,
    /// The price per hour.
    pub price: f64,
}

/// The (flavor, zone) pairs a claim may be created as, cheapest first (then by zone and name,
/// as upstream orders ties), at most [`MAX_CANDIDATES`]: the available on-demand offerings of
/// the types whose requirements and allocatable fit the claim.
pub fn candidates(types: &[std::sync::Arc<InstanceType>], claim: &NodeClaim) -> Vec<Candidate> {
    let (requirements, fitting) = launchable(types, claim);
    let mut out: Vec<Candidate> = fitting
        .iter()
        .flat_map(|it| {
            it.offerings
                .iter()
                .filter(|o| o.available && o.is_compatible(&requirements))
                .map(|o| Candidate {
                    flavor: it.name.clone(),
                    zone: o.zone.clone(),
                    price: o.price,
                })
        })
        .collect();
    out.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.zone.cmp(&b.zone))
            .then_with(|| a.flavor.cmp(&b.flavor))
    });
    out.dedup_by(|a, b| a.flavor == b.flavor && a.zone == b.zone);
    out.truncate(MAX_CANDIDATES);
    out
}

/// Why a class cannot make a `CreateNode` body.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NodeSpecError {
    /// A field the create needs is missing or wrong; the message names it.
    #[error("{0}")]
    InvalidNodeClass(String),
}

/// What one `CreateNode` asks for.
#[derive(Clone, Copy, Debug)]
pub struct CreateNode<'a> {
    /// The class the node is made from.
    pub spec: &'a CCENodeClassSpec,
    /// The claim it is made for.
    pub claim: &'a NodeClaim,
    /// The flavor and zone tried.
    pub candidate: &'a Candidate,
    /// The subnet of the node's primary NIC.
    pub subnet_id: &'a str,
}

/// The `CreateNode` body (`kind: Node`, `apiVersion: v3`): one pay-per-use node of the
/// candidate's flavor in its zone, with the class's OS, disks (the k8s disk given to CCE's
/// `vgpaas` volume group, 90% runtime / 10% kubelet, as upstream), login, runtime, server
/// group and kubelet reservations; the claim's taints and startup taints plus the
/// unregistered taint; `k8sTags` with the claim's uid and NodePool; named after the claim when
/// the name is one CCE accepts.
pub fn create_node_body(request: &CreateNode<'_>) -> Result<Value, NodeSpecError> {
    let spec = request.spec;
    let claim = request.claim;
    spec.validate_for_create()
        .map_err(NodeSpecError::InvalidNodeClass)?;
    let os = spec.ims_selector.ims_family.trim();
    if os.is_empty() {
        return Err(NodeSpecError::InvalidNodeClass(
            "spec.imsSelector.imsFamily is required".into(),
        ));
    }
    let k8s = volume(&spec.block_device_mappings.k8s_or_default());
    let mut data_volumes = vec![k8s.clone()];
    data_volumes.extend(
        spec.block_device_mappings
            .users
            .iter()
            .map(|d| volume(&d.effective())),
    );

    let mut node_spec = Map::new();
    node_spec.insert("flavor".into(), json!(request.candidate.flavor));
    node_spec.insert("az".into(), json!(request.candidate.zone));
    node_spec.insert("os".into(), json!(os));
    node_spec.insert("count".into(), json!(1));
    node_spec.insert("billingMode".into(), json!(0));
    node_spec.insert(
        "rootVolume".into(),
        volume(&spec.block_device_mappings.root.effective()),
    );
    node_spec.insert("dataVolumes".into(), Value::Array(data_volumes));
    node_spec.insert("storage".into(), storage(&k8s));
    node_spec.insert("login".into(), login(spec)?);
    if let Some(runtime) = spec.runtime() {
        node_spec.insert("runtime".into(), json!({"name": runtime}));
    }
    if let Some(group) = spec.ecs_group_id() {
        node_spec.insert("ecsGroupId".into(), json!(group));
    }
    if let Some(extend) = extend_param(spec)? {
        node_spec.insert("extendParam".into(), extend);
    }
    // Upstream always sets it; CCE reads it as "a CCE Turbo node" and other clusters ignore it.
    node_spec.insert("offloadNode".into(), json!(true));
    node_spec.insert(
        "nodeNicSpec".into(),
        json!({"primaryNic": {"subnetId": request.subnet_id}}),
    );
    node_spec.insert("taints".into(), Value::Array(taints(claim)));
    node_spec.insert("k8sTags".into(), json!(k8s_tags(claim)));

    let mut metadata = Map::new();
    if let Some(name) = claim
        .metadata
        .name
        .as_deref()
        .filter(|n| is_cce_node_name(n))
    {
        metadata.insert("name".into(), json!(name));
    }
    Ok(json!({
        "kind": "Node",
        "apiVersion": "v3",
        "metadata": metadata,
        "spec": node_spec,
    }))
}

/// A volume as CCE takes it (the device already [`BlockDevice::effective`]).
fn volume(device: &BlockDevice) -> Value {
    let mut v = Map::new();
    v.insert("size".into(), json!(device.volume_size));
    v.insert("volumetype".into(), json!(device.volume_type));
    if let Some(iops) = device.iops {
        v.insert("iops".into(), json!(iops));
    }
    if let Some(throughput) = device.throughput {
        v.insert("throughput".into(), json!(throughput));
    }
    Value::Object(v)
}

/// CCE's storage layout: the k8s data disk (picked by size and type) in CCE's `vgpaas` volume
/// group, 90% for the container runtime and 10% for the kubelet.
fn storage(k8s: &Value) -> Value {
    let mut labels = Map::new();
    labels.insert("size".into(), json!(k8s["size"].to_string()));
    labels.insert("volumeType".into(), k8s["volumetype"].clone());
    labels.insert("count".into(), json!("1"));
    for key in ["iops", "throughput"] {
        if let Some(n) = k8s.get(key) {
            labels.insert(key.into(), json!(n.to_string()));
        }
    }
    json!({
        "storageSelectors": [{
            "name": "k8s-data",
            "storageType": "evs",
            "matchLabels": labels,
        }],
        "storageGroups": [{
            "name": "vgpaas",
            "cceManaged": true,
            "selectorNames": ["k8s-data"],
            "virtualSpaces": [
                {"name": "runtime", "size": "90%", "runtimeConfig": {"lvType": "linear"}},
                {"name": "kubernetes", "size": "10%", "lvmConfig": {"lvType": "linear"}},
            ],
        }],
    })
}

fn login(spec: &CCENodeClassSpec) -> Result<Value, NodeSpecError> {
    match spec.login.method() {
        Some(LoginMethod::SshKey(key)) => Ok(json!({"sshKey": key})),
        Some(LoginMethod::Password { username, password }) if !password.is_empty() => {
            Ok(json!({"userPassword": {"username": username, "password": password}}))
        }
        _ => Err(NodeSpecError::InvalidNodeClass(
            "spec.login: exactly one of userPassword or sshKey must be set".into(),
        )),
    }
}

/// `extendParam`: `maxPods` and the kubelet reservations in CCE's units; `None` when the class
/// sets none of them (CCE's own defaults then apply).
fn extend_param(spec: &CCENodeClassSpec) -> Result<Option<Value>, NodeSpecError> {
    let Some(kubelet) = &spec.kubelet else {
        return Ok(None);
    };
    let (kube, system) = kubelet
        .reserved()
        .map_err(|e| NodeSpecError::InvalidNodeClass(e.to_string()))?;
    let mut out = Map::new();
    if let Some(max_pods) = kubelet.max_pods {
        out.insert("maxPods".into(), json!(max_pods));
    }
    for (prefix, r) in [("kubeReserved", &kube), ("systemReserved", &system)] {
        for (suffix, value) in [
            ("Cpu", r.cpu_milli),
            ("Mem", r.memory_mib),
            ("Pid", r.pid),
            ("Storage", r.storage_gib),
        ] {
            if let Some(v) = value {
                out.insert(format!("{prefix}{suffix}"), json!(v));
            }
        }
    }
    Ok((!out.is_empty()).then_some(Value::Object(out)))
}

/// The node's taints: the unregistered taint (so nothing schedules before Karpenter has synced
/// the node), the claim's startup taints and taints, one per (key, effect) with the later one
/// winning, without the network-unavailable taint CCE manages itself.
pub fn taints(claim: &NodeClaim) -> Vec<Value> {
    let unregistered = k8s_openapi::api::core::v1::Taint {
        key: UNREGISTERED_TAINT_KEY.into(),
        effect: "NoExecute".into(),
        ..Default::default()
    };
    let mut by_key: BTreeMap<(String, String), Value> = BTreeMap::new();
    let all = std::iter::once(&unregistered)
        .chain(claim.spec.startup_taints.iter())
        .chain(claim.spec.taints.iter());
    for t in all {
        if t.key == NETWORK_UNAVAILABLE_TAINT && t.effect == "NoSchedule" {
            continue;
        }
        let key = (t.key.clone(), t.effect.clone());
        if key.0 == UNREGISTERED_TAINT_KEY && key.1 == "NoExecute" {
            // Karpenter removes it by this exact value.
            by_key.insert(key, json!({"key": t.key, "effect": t.effect}));
            continue;
        }
        let mut v = json!({"key": t.key, "effect": t.effect});
        if let Some(value) = t.value.as_deref().filter(|v| !v.is_empty()) {
            v["value"] = json!(value);
        }
        by_key.insert(key, v);
    }
    by_key.into_values().collect()
}

/// The node's `k8sTags` (Kubernetes labels CCE puts on the node): the claim's uid, which a
/// retried create and List find it by, and its NodePool.
pub fn k8s_tags(claim: &NodeClaim) -> BTreeMap<String, String> {
    let mut tags = BTreeMap::new();
    tags.insert(
        NODE_CLAIM_UID_TAG.to_string(),
        claim.metadata.uid.clone().unwrap_or_default(),
    );
    if let Some(pool) = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODE_POOL_LABEL))
    {
        tags.insert(NODE_POOL_LABEL.to_string(), pool.clone());
    }
    tags
}

/// Whether CCE accepts `name` as a node name: 1 to 56 lower-case letters, digits and hyphens,
/// starting with a letter and not ending with a hyphen.
pub fn is_cce_node_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 56
        && bytes[0].is_ascii_lowercase()
        && !name.ends_with('-')
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// The providerID of the CCE node with this id: the id itself, as CCE registers the node.
pub fn provider_id(node_id: &str) -> String {
    node_id.to_string()
}

/// The CCE node id in a providerID; `None` for an empty one or another provider's (those carry
/// a scheme).
pub fn node_id(provider_id: &str) -> Option<&str> {
    let id = provider_id.trim();
    (!id.is_empty() && !id.contains("://") && !id.contains('/')).then_some(id)
}

/// A CCE timestamp (`2026-11-24 10:00:00.123456789 +0000 UTC`, Go's default time format).
pub fn parse_timestamp(s: &str) -> Option<k8s_openapi::jiff::Timestamp> {
    let s = s.trim();
    let s = s.strip_suffix(" UTC").unwrap_or(s);
    k8s_openapi::jiff::fmt::strtime::parse("%Y-%m-%d %H:%M:%S%.f %z", s)
        .ok()?
        .to_timestamp()
        .ok()
}

/// A CCE node's metadata.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetadata {
    /// The node's name (the ECS server's).
    #[serde(default)]
    pub name: String,
    /// The CCE node id.
    #[serde(default)]
    pub uid: String,
    /// When it was created, `2026-11-24 10:00:00.123456 +0000 UTC`.
    #[serde(default)]
    pub creation_timestamp: Option<String>,
}

/// A CCE node's primary NIC.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrimaryNic {
    /// The subnet it is in.
    #[serde(default)]
    pub subnet_id: Option<String>,
}

/// A CCE node's NICs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeNicSpec {
    /// The primary NIC.
    #[serde(default)]
    pub primary_nic: Option<PrimaryNic>,
}

/// What a CCE node was created as.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    /// The ECS flavor.
    #[serde(default)]
    pub flavor: String,
    /// The zone.
    #[serde(default)]
    pub az: String,
    /// The OS.
    #[serde(default)]
    pub os: Option<String>,
    /// Its NICs.
    #[serde(default)]
    pub node_nic_spec: Option<NodeNicSpec>,
    /// The Kubernetes labels it was created with.
    #[serde(default)]
    pub k8s_tags: BTreeMap<String, String>,
}

/// Where a CCE node is in its life.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// `Build`, `Installing`, `Installed`, `Active`, `Abnormal`, `Deleting`, `Error`, …
    #[serde(default)]
    pub phase: Option<String>,
    /// The job creating or deleting it.
    #[serde(default, rename = "jobID")]
    pub job_id: Option<String>,
    /// The ECS server behind it.
    #[serde(default)]
    pub server_id: Option<String>,
    /// Its private IP (CCE names the Kubernetes node after it).
    #[serde(default, rename = "privateIP")]
    pub private_ip: Option<String>,
}

/// A CCE node, as `CreateNode`, `ShowNode` and `ListNodes` answer.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Node {
    /// Name and id.
    #[serde(default)]
    pub metadata: NodeMetadata,
    /// What it was created as.
    #[serde(default)]
    pub spec: NodeSpec,
    /// Where it is.
    #[serde(default)]
    pub status: NodeStatus,
}

impl Node {
    /// The uid of the NodeClaim it was created for, if Karpenter created it.
    pub fn node_claim_uid(&self) -> Option<&str> {
        self.spec
            .k8s_tags
            .get(NODE_CLAIM_UID_TAG)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// The NodePool it was created for.
    pub fn node_pool(&self) -> Option<&str> {
        self.spec.k8s_tags.get(NODE_POOL_LABEL).map(String::as_str)
    }

    /// Whether Karpenter created it (this provider or upstream's, which tags the claim's uid
    /// alone): only those are Karpenter's to list and collect, never the nodes of CCE's own
    /// node pools.
    pub fn is_karpenters(&self) -> bool {
        self.node_claim_uid().is_some()
    }

    /// The subnet of its primary NIC.
    pub fn subnet_id(&self) -> Option<&str> {
        self.spec
            .node_nic_spec
            .as_ref()
            .and_then(|n| n.primary_nic.as_ref())
            .and_then(|n| n.subnet_id.as_deref())
    }

    /// Whether it is going away.
    pub fn is_deleting(&self) -> bool {
        self.status.phase.as_deref() == Some("Deleting")
    }

    /// Whether CCE gave up creating it.
    pub fn is_failed(&self) -> bool {
        self.status.phase.as_deref() == Some("Error")
    }
}

/// `ListNodes`' answer.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeList {
    /// The cluster's nodes.
    #[serde(default)]
    pub items: Vec<Node>,
}

/// A CCE job's state.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct JobStatus {
    /// `Initializing`, `Running`, `Success` or `Failed`.
    #[serde(default)]
    pub phase: String,
    /// Why it failed.
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a CCE job works on.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    /// `CreateNode`, `DeleteNode`, …
    #[serde(default, rename = "type")]
    pub type_: String,
    /// The node it works on.
    #[serde(default, rename = "resourceID")]
    pub resource_id: Option<String>,
    /// Its sub-jobs (the ECS server's creation, the node's install).
    #[serde(default)]
    pub sub_jobs: Vec<Job>,
}

/// A CCE job (`ShowJob`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Job {
    /// What it works on.
    #[serde(default)]
    pub spec: JobSpec,
    /// Where it is.
    #[serde(default)]
    pub status: JobStatus,
}

impl Job {
    /// Whether it failed.
    pub fn failed(&self) -> bool {
        self.status.phase == "Failed"
    }

    /// Whether it finished well.
    pub fn succeeded(&self) -> bool {
        self.status.phase == "Success"
    }

    /// Why it failed: its own reason, else the first failed sub-job's.
    pub fn failure_reason(&self) -> Option<String> {
        if let Some(r) = self.status.reason.as_deref().filter(|r| !r.is_empty()) {
            return Some(r.to_string());
        }
        self.spec
            .sub_jobs
            .iter()
            .filter(|j| j.failed())
            .find_map(Job::failure_reason)
    }
}

#[cfg(test)]
#[path = "cce_tests.rs"]
mod tests;
