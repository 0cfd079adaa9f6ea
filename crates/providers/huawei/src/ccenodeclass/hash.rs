//! The CCENodeClass hash behind static drift, and the annotations a NodeClaim carries it in.
//!
//! Upstream leaves the subnet selectors out (drift of what they select is judged against the
//! node instead) and hashes the OS family, the disks, the runtime and the login not as written
//! but as CCE creates them: a disk's unset size and type as 40 GiB `SSD`, an unset runtime as
//! containerd, an unset user as `root`. So a change to any of them drifts nodes, but spelling
//! a default out does not. The kubelet settings and the ECS group are hashed as written, lists
//! as sets, and unset and zero fields alike. This hashes the same fields the same way, in this
//! project's own encoding (FNV-1a over canonical JSON, `karpenter_api::hash::json_hash`), so it
//! changes exactly when upstream's would, but not to the same number.

use serde_json::{Map, Value, json};

use karpenter_api::hash::json_hash;

use super::{BlockDevice, CCENodeClass, DEFAULT_RUNTIME, LoginMethod};

/// The annotation carrying the hash of the CCENodeClass a NodeClaim was created from.
pub const CCE_NODE_CLASS_HASH_ANNOTATION: &str = "karpenter.k8s.huawei/ccenodeclass-hash";
/// The hash algorithm's version, beside the hash.
pub const CCE_NODE_CLASS_HASH_VERSION_ANNOTATION: &str =
    "karpenter.k8s.huawei/ccenodeclass-hash-version";
/// This implementation's hash version. Upstream's is `v3`; the numbers differ, and a claim
/// stamped with another version is re-stamped rather than judged (upstream's hash controller
/// does so, and `karpenter_api::hash` explains it), so moving a cluster between upstream and
/// karpenter-rs drifts no node. Stamping `v3` beside a different number would drift them all.
pub const CCE_NODE_CLASS_HASH_VERSION: &str = "rs-v1";

impl CCENodeClass {
    /// The hash behind static drift: the kubelet settings and the ECS group as written, and the
    /// OS family, disks, runtime and login as CCE creates them. The subnet selectors are not
    /// hashed; neither are the order of the user disks, zero values, or defaults spelled out
    /// (`runtimeConfiguration: {type: containerd}`, `username: root`, `iops: 0`).
    pub fn hash(&self) -> String {
        let spec = &self.spec;
        let disks = &spec.block_device_mappings;
        let login = match spec.login.method() {
            Some(LoginMethod::SshKey(key)) => json!({"sshKey": key}),
            Some(LoginMethod::Password { username, password }) => {
                json!({"userPassword": {"username": username, "password": password}})
            }
            None => Value::Null,
        };
        let kubelet = spec.kubelet.as_ref().map(|kubelet| {
            let mut fields = Map::new();
            fields.insert("maxPods".into(), json!(kubelet.max_pods));
            // Upstream hashes every entry of a map, an empty value too (which the canonical
            // JSON would drop as a zero value): entries go in as text.
            for (name, map) in [
                ("kubeReserved", &kubelet.kube_reserved),
                ("systemReserved", &kubelet.system_reserved),
            ] {
                let entries: Vec<Value> = map
                    .iter()
                    .map(|(k, v)| Value::String(json!([k, v]).to_string()))
                    .collect();
                fields.insert(name.into(), Value::Array(entries));
            }
            Value::Object(fields)
        });
        let hashed = json!({
            "kubelet": kubelet,
            "ecsGroupId": spec.ecs_group_id(),
            "ims": {"family": spec.ims_selector.ims_family},
            "blockDeviceMappings": {
                "root": volume(&disks.root),
                // Unlike the runtime's default, an unset k8s disk is not hashed as the disk CCE
                // then creates: naming it drifts nodes, as upstream's hash does.
                "k8s": disks.k8s.as_ref().map(volume),
                "users": disks.users.iter().map(volume).collect::<Vec<_>>(),
            },
            "runtime": spec.runtime().unwrap_or(DEFAULT_RUNTIME),
            "login": login,
        });
        json_hash(&hashed)
    }
}

fn volume(device: &BlockDevice) -> Value {
    let device = device.effective();
    json!({
        "size": device.volume_size,
        "type": device.volume_type,
        "iops": device.iops,
        "throughput": device.throughput,
    })
}
