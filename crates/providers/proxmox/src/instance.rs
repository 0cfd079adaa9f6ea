//! The Proxmox calls that make and unmake one VM, in upstream's order: clone the template to
//! the node, size it (cores, memory, boot disk), attach its security groups and cloud-init
//! CD-ROM, start it; stop it and destroy it. Each task is waited on; a create that fails
//! halfway destroys what it made, so no half-made VM is left behind.

use std::time::Duration;

use crate::pve::form::Params;
use crate::pve::types::{CloneOptions, DeleteOptions, FirewallRule, VmConfig};
use crate::pve::{PveClient, PveError};

pub use crate::inplace::MARKER_TAG;

/// How long a task may run, and how often its status is asked.
#[derive(Clone, Copy, Debug)]
pub struct TaskTiming {
    /// The longest a clone, start, stop or destroy is waited for.
    pub wait: Duration,
    /// The pause between two status reads.
    pub poll: Duration,
}

/// One VM to make.
#[derive(Clone, Debug)]
pub struct VmPlan {
    /// The node (zone) it goes on; the template is on it.
    pub node: String,
    /// The template's VM id.
    pub template: u32,
    /// The new VM's id.
    pub vmid: u32,
    /// Its name: the NodeClaim's.
    pub name: String,
    /// Its description (what it is and for whom).
    pub description: String,
    /// The storage of its disks; the template's when empty.
    pub storage: String,
    /// The resource pool; none when empty.
    pub pool: String,
    /// vCPUs.
    pub cores: u32,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// The boot disk's size, GB (`{n}G`); the template's when `None` or smaller.
    pub disk_gb: Option<u64>,
    /// Tags (the marker included).
    pub tags: Vec<String>,
    /// Firewall rules: the NodeClass's security groups.
    pub firewall_rules: Vec<FirewallRule>,
}

/// The cloud-init CD-ROM a VM boots with: uploaded to `storage` on the VM's node as `file`.
#[derive(Clone, Debug)]
pub struct CloudInitIso {
    /// An ISO-capable storage of the node.
    pub storage: String,
    /// The file name in it.
    pub file: String,
    /// The image.
    pub data: Vec<u8>,
}

/// The file name of a VM's cloud-init ISO.
pub fn iso_file(vmid: u32) -> String {
    format!("karpenter-{vmid}-cloud-init.iso")
}

/// The cloud-init ISO's volume, as the VM's `ide2` names it.
pub fn iso_volume(storage: &str, file: &str) -> String {
    format!("{storage}:iso/{file}")
}

/// Why a create failed.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// A Proxmox call or task failed.
    #[error(transparent)]
    Pve(#[from] PveError),
    /// The cloud-init data could not be made (the NodeClass's templates, its Secrets).
    #[error("cloud-init: {0}")]
    CloudInit(String),
}

/// Clones the template, then has `cloud_init` make the VM's CD-ROM from the clone's config
/// (its MAC addresses), configures and starts it. On failure after the clone, the VM (and its
/// ISO) are destroyed before the error returns.
pub async fn create(
    client: &PveClient,
    plan: &VmPlan,
    timing: TaskTiming,
    cloud_init: impl AsyncFnOnce(&VmConfig) -> Result<Option<CloudInitIso>, String>,
) -> Result<(), CreateError> {
    let clone = CloneOptions {
        newid: plan.vmid,
        name: plan.name.clone(),
        description: plan.description.clone(),
        full: Some(true),
        storage: plan.storage.clone(),
        pool: plan.pool.clone(),
        ..Default::default()
    };
    let upid = client.clone_vm(&plan.node, plan.template, &clone).await?;
    let mut iso = None;
    let outcome: Result<(), CreateError> = async {
        client.wait_task(&upid, timing.wait, timing.poll).await?;
        let config = client.vm_config(&plan.node, plan.vmid).await?;
        iso = cloud_init(&config).await.map_err(CreateError::CloudInit)?;
        configure_and_start(client, plan, &config, iso.as_ref(), timing).await?;
        Ok(())
    }
    .await;
    if let Err(e) = outcome {
        // The clone may have made the VM even when its task failed late.
        if let Err(cleanup) = destroy(client, &plan.node, plan.vmid, timing).await
            && !cleanup.is_not_found()
        {
            tracing::warn!(vmid = plan.vmid, node = %plan.node, error = %cleanup, "cleaning up a VM whose create failed");
        }
        if let Some(iso) = &iso {
            remove_iso(client, &plan.node, &iso.storage, &iso.file).await;
        }
        return Err(e);
    }
    Ok(())
}

async fn configure_and_start(
    client: &PveClient,
    plan: &VmPlan,
    config: &VmConfig,
    cloud_init: Option<&CloudInitIso>,
    timing: TaskTiming,
) -> Result<(), PveError> {
    let mut params = Params::new()
        .set("cores", plan.cores)
        .set("memory", plan.memory_mib)
        .set("tags", plan.tags.join(";"));
    if let Some(iso) = cloud_init {
        client
            .upload_iso(&plan.node, &iso.storage, &iso.file, &iso.data)
            .await
            .map(drop)?;
        params.push(
            "ide2",
            format!("{},media=cdrom", iso_volume(&iso.storage, &iso.file)),
        );
    }
    if let Some(digest) = config.digest() {
        params.push("digest", digest);
    }
    let upid = client
        .set_vm_config_async(&plan.node, plan.vmid, params)
        .await?;
    client
        .wait_optional_task(upid.as_ref(), timing.wait, timing.poll)
        .await?;
    if let (Some(gb), Some(disk)) = (plan.disk_gb, config.boot_disk()) {
        let current = config.get(disk).and_then(|v| disk_size_gb(&v)).unwrap_or(0);
        if gb > current {
            let upid = client
                .resize_disk(&plan.node, plan.vmid, disk, &format!("{gb}G"))
                .await?;
            client
                .wait_optional_task(upid.as_ref(), timing.wait, timing.poll)
                .await?;
        }
    }
    for rule in &plan.firewall_rules {
        client
            .create_vm_firewall_rule(&plan.node, plan.vmid, rule)
            .await?;
    }
    let upid = client.start_vm(&plan.node, plan.vmid).await?;
    client.wait_task(&upid, timing.wait, timing.poll).await?;
    Ok(())
}

/// A disk's size in GB from its config value (`local-lvm:vm-100-disk-0,size=32G`).
pub fn disk_size_gb(value: &str) -> Option<u64> {
    let size = value
        .split(',')
        .find_map(|p| p.strip_prefix("size="))?
        .trim();
    let (number, unit) = size.split_at(size.find(|c: char| !c.is_ascii_digit())?.min(size.len()));
    let n: u64 = number.parse().ok()?;
    Some(match unit {
        "T" => n * 1024,
        "G" => n,
        "M" => n.div_ceil(1024),
        "K" => n.div_ceil(1024 * 1024),
        _ => return None,
    })
}

/// Stops the VM (at once: it is being removed) and destroys it with its disks, waiting on
/// both. NotFound when it is already gone.
pub async fn destroy(
    client: &PveClient,
    node: &str,
    vmid: u32,
    timing: TaskTiming,
) -> Result<(), PveError> {
    let status = client.vm_status(node, vmid).await?;
    if status.status != "stopped" {
        let upid = client.stop_vm(node, vmid).await?;
        client.wait_task(&upid, timing.wait, timing.poll).await?;
    }
    let upid = client
        .delete_vm(
            node,
            vmid,
            DeleteOptions {
                purge: true,
                destroy_unreferenced_disks: true,
                skiplock: false,
            },
        )
        .await?;
    client.wait_task(&upid, timing.wait, timing.poll).await?;
    Ok(())
}

/// Removes a cloud-init ISO; one that is gone (or cannot be removed) is only logged: it is
/// small and named after its VM, so the next VM of that id replaces it.
pub async fn remove_iso(client: &PveClient, node: &str, storage: &str, file: &str) {
    let volume = iso_volume(storage, file);
    if let Err(e) = client.delete_volume(node, storage, &volume).await
        && !e.is_not_found()
    {
        tracing::debug!(%volume, error = %e, "removing a cloud-init ISO");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_sizes() {
        let cases = [
            ("local-lvm:vm-100-disk-0,size=32G", Some(32)),
            ("local-lvm:vm-100-disk-0,iothread=1,size=2T", Some(2048)),
            ("ceph:vm-100-disk-0,size=2252M", Some(3)),
            ("local:100/vm-100-disk-0.qcow2,size=4194304K", Some(4)),
            ("local-lvm:vm-100-disk-0", None),
            ("local-lvm:vm-100-disk-0,size=12", None),
        ];
        for (value, want) in cases {
            assert_eq!(disk_size_gb(value), want, "{value}");
        }
    }

    #[test]
    fn iso_names() {
        assert_eq!(iso_file(20001), "karpenter-20001-cloud-init.iso");
        assert_eq!(
            iso_volume("local", &iso_file(20001)),
            "local:iso/karpenter-20001-cloud-init.iso"
        );
    }
}
