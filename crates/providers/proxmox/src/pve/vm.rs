//! A VM's calls: clone, config, resize, power, delete, template. What runs as a task answers
//! with its [`Upid`]; follow it with [`PveClient::wait_task`].

use super::client::PveClient;
use super::error::PveError;
use super::form::{Params, encode_segment};
use super::types::{CloneOptions, DeleteOptions, VmConfig, VmStatus};
use super::upid::Upid;

fn vm_path(node: &str, vmid: u32) -> String {
    format!("/nodes/{}/qemu/{vmid}", encode_segment(node))
}

impl PveClient {
    /// `GET /nodes/{node}/qemu/{vmid}/status/current` (go-proxmox's `Ping`).
    pub async fn vm_status(&self, node: &str, vmid: u32) -> Result<VmStatus, PveError> {
        self.get(
            &format!("{}/status/current", vm_path(node, vmid)),
            &Params::new(),
        )
        .await
    }

    /// `GET /nodes/{node}/qemu/{vmid}/config`: the current config (not what is pending).
    pub async fn vm_config(&self, node: &str, vmid: u32) -> Result<VmConfig, PveError> {
        self.get(&format!("{}/config", vm_path(node, vmid)), &Params::new())
            .await
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/config`: changes the config at once (go-proxmox's
    /// `ConfigSync`). `delete=a,b` in `options` removes keys; `digest` makes the change fail
    /// if the config changed since it was read.
    pub async fn set_vm_config(
        &self,
        node: &str,
        vmid: u32,
        options: Params,
    ) -> Result<(), PveError> {
        self.put(&format!("{}/config", vm_path(node, vmid)), options)
            .await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/config`: changes the config in a task (go-proxmox's
    /// `Config`, what upstream uses); `None` when PVE did it at once.
    pub async fn set_vm_config_async(
        &self,
        node: &str,
        vmid: u32,
        options: Params,
    ) -> Result<Option<Upid>, PveError> {
        self.post(&format!("{}/config", vm_path(node, vmid)), options)
            .await
    }

    /// `POST /nodes/{node}/qemu/{template}/clone`: a new VM from `template` on `node`.
    pub async fn clone_vm(
        &self,
        node: &str,
        template: u32,
        options: &CloneOptions,
    ) -> Result<Upid, PveError> {
        self.post(
            &format!("{}/clone", vm_path(node, template)),
            options.params(),
        )
        .await
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/resize`: grows `disk` (`scsi0`) to `size` (`30G`, or
    /// `+10G` to add); `None` when PVE did it at once (before PVE 8).
    pub async fn resize_disk(
        &self,
        node: &str,
        vmid: u32,
        disk: &str,
        size: &str,
    ) -> Result<Option<Upid>, PveError> {
        self.put(
            &format!("{}/resize", vm_path(node, vmid)),
            Params::new().set("disk", disk).set("size", size),
        )
        .await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/status/start`.
    pub async fn start_vm(&self, node: &str, vmid: u32) -> Result<Upid, PveError> {
        self.post(
            &format!("{}/status/start", vm_path(node, vmid)),
            Params::new(),
        )
        .await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/status/stop`: pulls the plug.
    pub async fn stop_vm(&self, node: &str, vmid: u32) -> Result<Upid, PveError> {
        self.post(
            &format!("{}/status/stop", vm_path(node, vmid)),
            Params::new(),
        )
        .await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/status/shutdown`: asks the guest (ACPI) to power off,
    /// within `timeout` seconds when given, then stops it when `force_stop`.
    pub async fn shutdown_vm(
        &self,
        node: &str,
        vmid: u32,
        timeout: Option<u32>,
        force_stop: bool,
    ) -> Result<Upid, PveError> {
        let mut body = Params::new().opt("timeout", timeout);
        if force_stop {
            body.push("forceStop", 1);
        }
        self.post(&format!("{}/status/shutdown", vm_path(node, vmid)), body)
            .await
    }

    /// `DELETE /nodes/{node}/qemu/{vmid}`; the VM must be stopped.
    pub async fn delete_vm(
        &self,
        node: &str,
        vmid: u32,
        options: DeleteOptions,
    ) -> Result<Upid, PveError> {
        self.delete(&vm_path(node, vmid), &options.params()).await
    }

    /// `POST /nodes/{node}/qemu`: a new VM from `options` (`vmid`, `name`, `scsi0`, …).
    pub async fn create_vm(&self, node: &str, options: Params) -> Result<Upid, PveError> {
        self.post(&format!("/nodes/{}/qemu", encode_segment(node)), options)
            .await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/template`: makes the (stopped) VM a template; `None`
    /// when PVE did it at once (before PVE 8).
    pub async fn convert_to_template(
        &self,
        node: &str,
        vmid: u32,
    ) -> Result<Option<Upid>, PveError> {
        self.post(&format!("{}/template", vm_path(node, vmid)), Params::new())
            .await
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/cloudinit`: rebuilds PVE's own cloud-init drive after
    /// its settings changed (upstream's `RegenerateVMCloudInit`).
    pub async fn regenerate_cloudinit(&self, node: &str, vmid: u32) -> Result<(), PveError> {
        self.put(&format!("{}/cloudinit", vm_path(node, vmid)), Params::new())
            .await
    }
}
