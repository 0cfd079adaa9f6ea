//! The cluster's calls: its name and nodes, what runs where (`/cluster/resources`), free VM
//! ids, resource pools and nodes' networks.

use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::client::PveClient;
use super::error::PveError;
use super::form::{Params, encode_segment};
use super::types::{
    ClusterResource, ClusterStatusEntry, Node, NodeNetwork, NodeStatus, Pool, Version,
};

/// How long a VM id [`PveClient::next_id_from`] handed out is not handed out again
/// (sergelogvinov/go-proxmox's cache).
pub const HANDED_OUT_TTL: Duration = Duration::from_secs(5 * 60);

/// The most ids [`PveClient::next_id_from`] tries before giving up.
pub const MAX_ID_TRIES: u32 = 1000;

/// A VM id, which PVE sends as a number or a string (`/cluster/nextid` has done both).
fn vmid<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    match Value::deserialize(d)? {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| serde::de::Error::custom("not a VM id"))
}

#[derive(Deserialize)]
struct NextId(#[serde(deserialize_with = "vmid")] u32);

impl PveClient {
    /// `GET /version`.
    pub async fn version(&self) -> Result<Version, PveError> {
        self.get("/version", &Params::new()).await
    }

    /// `GET /cluster/status`: the cluster's entry and its nodes'.
    pub async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>, PveError> {
        self.get("/cluster/status", &Params::new()).await
    }

    /// The cluster's name; `None` for a single node that is in no cluster.
    pub async fn cluster_name(&self) -> Result<Option<String>, PveError> {
        Ok(self
            .cluster_status()
            .await?
            .into_iter()
            .find(|e| e.kind == "cluster")
            .map(|e| e.name))
    }

    /// `GET /nodes`: every node, with its CPUs and memory.
    pub async fn nodes(&self) -> Result<Vec<NodeStatus>, PveError> {
        self.get("/nodes", &Params::new()).await
    }

    /// `GET /nodes/{node}/status`: a node's CPUs (threads, cores, sockets) and memory.
    pub async fn node_status(&self, node: &str) -> Result<Node, PveError> {
        self.get(
            &format!("/nodes/{}/status", encode_segment(node)),
            &Params::new(),
        )
        .await
    }

    /// `GET /nodes/{node}/network[?type=kind]`: a node's interfaces (upstream asks for
    /// `any_bridge`).
    pub async fn node_networks(
        &self,
        node: &str,
        kind: Option<&str>,
    ) -> Result<Vec<NodeNetwork>, PveError> {
        self.get(
            &format!("/nodes/{}/network", encode_segment(node)),
            &Params::new().opt("type", kind),
        )
        .await
    }

    /// `GET /cluster/resources[?type=kind]` (`vm`, `node`, `storage`, …).
    pub async fn resources(&self, kind: Option<&str>) -> Result<Vec<ClusterResource>, PveError> {
        self.get("/cluster/resources", &Params::new().opt("type", kind))
            .await
    }

    /// The QEMU VMs and templates (`/cluster/resources?type=vm`, containers left out).
    pub async fn vm_resources(&self) -> Result<Vec<ClusterResource>, PveError> {
        Ok(self
            .resources(Some("vm"))
            .await?
            .into_iter()
            .filter(ClusterResource::is_vm)
            .collect())
    }

    /// The VM (not a template) with this id, wherever it runs, as go-proxmox's `GetVMByID`
    /// finds it; `None` when there is none.
    pub async fn vm_by_id(&self, vmid: u32) -> Result<Option<ClusterResource>, PveError> {
        Ok(self
            .vm_resources()
            .await?
            .into_iter()
            .find(|r| !r.template && r.vmid == Some(vmid)))
    }

    /// `GET /cluster/nextid`: the lowest free VM id.
    pub async fn next_id(&self) -> Result<u32, PveError> {
        let NextId(id) = self.get("/cluster/nextid", &Params::new()).await?;
        Ok(id)
    }

    /// `GET /cluster/nextid?vmid=…`: whether `vmid` is free now. PVE answers a taken id with
    /// a 400.
    pub async fn check_id(&self, vmid: u32) -> Result<bool, PveError> {
        match self
            .get::<NextId>("/cluster/nextid", &Params::new().set("vmid", vmid))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.status() == Some(400) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The first free VM id from `min` up that this client has not handed out within
    /// [`HANDED_OUT_TTL`], as upstream's `GetNextID` picks ids for new nodes (`--proxmox-vmid`,
    /// 20000 by default) and templates (1000). The id is then handed out: two creates at once
    /// get two ids, though neither VM exists yet.
    pub async fn next_id_from(&self, min: u32) -> Result<u32, PveError> {
        let mut candidate = min;
        for _ in 0..MAX_ID_TRIES {
            if !self.recently_handed_out(candidate) && self.check_id(candidate).await? {
                let now = self.now();
                let mut handed = self.handed_out.lock().unwrap_or_else(|e| e.into_inner());
                handed.retain(|_, at| now.saturating_duration_since(*at) < HANDED_OUT_TTL);
                // Another call may have taken it while this one asked.
                if let std::collections::hash_map::Entry::Vacant(slot) = handed.entry(candidate) {
                    slot.insert(now);
                    return Ok(candidate);
                }
            }
            candidate = candidate
                .checked_add(1)
                .ok_or_else(|| PveError::Request("no VM id left above the minimum".into()))?;
        }
        Err(PveError::Request(format!(
            "no free VM id in {min}..{candidate}"
        )))
    }

    /// Counts `vmid` as handed out now: after deleting a VM, so its id is not reused at once
    /// (upstream does the same).
    pub fn mark_id_used(&self, vmid: u32) {
        let now = self.now();
        self.handed_out
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(vmid, now);
    }

    fn recently_handed_out(&self, vmid: u32) -> bool {
        let now = self.now();
        self.handed_out
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&vmid)
            .is_some_and(|at| now.saturating_duration_since(*at) < HANDED_OUT_TTL)
    }

    /// `GET /pools/{poolid}[?type=kind]`: a resource pool and its members (upstream asks for
    /// `qemu`). The per-pool path works on every PVE version (PVE 8.1 added `/pools?poolid=`
    /// for nested pools, which upstream does not use).
    pub async fn pool(&self, poolid: &str, kind: Option<&str>) -> Result<Pool, PveError> {
        let mut pool: Pool = self
            .get(
                &format!("/pools/{}", encode_segment(poolid)),
                &Params::new().opt("type", kind),
            )
            .await?;
        pool.poolid = poolid.to_string();
        Ok(pool)
    }

    /// `PUT /pools/{poolid}` adding the VMs to the pool, or removing them with `remove`.
    pub async fn update_pool_vms(
        &self,
        poolid: &str,
        vmids: &[u32],
        remove: bool,
    ) -> Result<(), PveError> {
        let vms = vmids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let mut body = Params::new().set("vms", vms);
        if remove {
            body.push("delete", 1);
        }
        self.put(&format!("/pools/{}", encode_segment(poolid)), body)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn vm_ids_come_as_numbers_or_strings() {
        let id = |v: Value| serde_json::from_value::<NextId>(v).map(|NextId(n)| n);
        assert_eq!(id(json!("100")).unwrap(), 100);
        assert_eq!(id(json!(20001)).unwrap(), 20001);
        assert!(id(json!("abc")).is_err());
        assert!(id(json!(-1)).is_err());
        assert!(id(json!(5_000_000_000u64)).is_err());
    }
}
