//! The parameters of `POST /nodes/{node}/qemu` that make a template's VM, as upstream builds them
//! from the spec: its fixed base (one core, 1 GiB, a VirtIO SCSI controller booting `scsi0`),
//! the boot disk imported from the downloaded image, the firmware disks, and the spec's
//! hardware.

use std::collections::BTreeSet;

use crate::apis::{Network, ProxmoxTemplateSpec};
use crate::pve::form::Params;

use super::plan::CONTENT_IMPORT;

/// The description's text when the spec has none; the `Hash: N` follows it.
pub const DEFAULT_DESCRIPTION: &str = "Template VM managed by Karpenter; it is rebuilt when its ProxmoxTemplate changes, do not edit or delete it.";

/// The fixed part of every template VM, upstream's: what a clone starts from before the
/// instance type sizes it.
const BASE: [(&str, &str); 10] = [
    ("acpi", "1"),
    ("cores", "1"),
    ("sockets", "1"),
    ("numa", "1"),
    ("memory", "1024"),
    ("balloon", "0"),
    ("ostype", "l26"),
    ("scsihw", "virtio-scsi-single"),
    ("boot", "order=scsi0"),
    ("tablet", "0"),
];

fn flag(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// The VM description: the spec's (or [`DEFAULT_DESCRIPTION`]) followed by `Hash: <hash>`,
/// which is how the template VM is later known to be current.
///
/// The inventory reads the first `Hash:` of a description, so one in the spec's text is
/// written `hash:`: else the template would never read as current and be rebuilt every pass.
pub fn description(spec: &ProxmoxTemplateSpec, hash: &str) -> String {
    let text = spec
        .description
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map_or_else(
            || DEFAULT_DESCRIPTION.to_string(),
            |d| d.replace("Hash:", "hash:"),
        );
    format!("{text} Hash: {hash}")
}

/// The spec's tags once, sorted, as the VM gets them.
pub fn template_tags(spec: &ProxmoxTemplateSpec) -> Vec<String> {
    spec.tags
        .iter()
        .filter(|t| !t.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .cloned()
        .collect()
}

/// A `netN` value: `bridge=…[,firewall=0|1],mtu=…,model=…[,tag=…]`, PVE's keys in upstream's
/// order; PVE picks the MAC address.
pub fn network_device(n: &Network) -> String {
    let mut parts = vec![format!("bridge={}", n.bridge)];
    if let Some(f) = n.firewall {
        parts.push(format!("firewall={}", flag(f)));
    }
    parts.push(format!("mtu={}", n.mtu));
    parts.push(format!("model={}", n.model));
    if let Some(tag) = n.vlan {
        parts.push(format!("tag={tag}"));
    }
    parts.join(",")
}

/// An `ipconfigN` value: `gw=…,gw6=…,ip=…,ip6=…` as set; an address not given is DHCP for IPv4
/// (`ip=dhcp`) and SLAAC for IPv6 (`ip6=auto`), as the API documents.
pub fn ipconfig(n: &Network) -> String {
    let ip = &n.ip_config;
    let given = |v: &Option<String>| v.as_deref().filter(|s| !s.is_empty()).map(str::to_string);
    [
        ("gw", given(&ip.gateway4)),
        ("gw6", given(&ip.gateway6)),
        ("ip", given(&ip.address4).or_else(|| Some("dhcp".into()))),
        ("ip6", given(&ip.address6).or_else(|| Some("auto".into()))),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
    .collect::<Vec<_>>()
    .join(",")
}

/// Everything that makes a template VM.
#[derive(Clone, Copy, Debug)]
pub struct VmOptions<'a> {
    /// The VM's name: the `ProxmoxTemplate`'s.
    pub name: &'a str,
    /// Its hardware.
    pub spec: &'a ProxmoxTemplateSpec,
    /// The spec's hash, for the description.
    pub hash: &'a str,
    /// The downloaded image's file name.
    pub image_id: &'a str,
    /// The VM id.
    pub vmid: u32,
    /// The storage holding the image (content `import`).
    pub image_storage: &'a str,
    /// The storage the disks go to (content `images`).
    pub template_storage: &'a str,
}

impl VmOptions<'_> {
    /// The create call's parameters, in a fixed order: `vmid`, `name`, `description`, the base,
    /// `machine`, `bios`, the disks (`scsi0` imported from the image; `efidisk0` for OVMF,
    /// `tpmstate0` with a TPM), `agent`, `cpu`, `vga` (and `serial0` for a serial console),
    /// each interface's `netN` and `ipconfigN`, `nameserver`, `hostpciN`, `tags`, `pool`,
    /// `onboot`. The VM is made a template afterwards, by its own call.
    pub fn params(&self) -> Params {
        let spec = self.spec;
        let disks = self.template_storage;
        let mut p = Params::new()
            .set("vmid", self.vmid)
            .set("name", self.name)
            .set("description", description(spec, self.hash));
        for (k, v) in BASE {
            p.push(k, v);
        }
        p.push("machine", &spec.machine);
        p.push("bios", &spec.bios);
        // `<storage>:0` asks PVE for a new volume; import-from fills it (and sizes it) from the
        // image.
        p.push(
            "scsi0",
            format!(
                "file={disks}:0,format=raw,import-from={}:{CONTENT_IMPORT}/{},iothread=on",
                self.image_storage, self.image_id
            ),
        );
        if spec.bios == "ovmf" {
            p.push("efidisk0", format!("{disks}:0,efitype=4m"));
        }
        if let Some(tpm) = &spec.tpm {
            p.push(
                "tpmstate0",
                format!("file={disks}:4,version={}", tpm.version),
            );
        }
        if let Some(agent) = &spec.qemu_guest_agent {
            let mut value = vec![format!("enabled={}", flag(agent.enabled))];
            if let Some(b) = agent.fs_freeze_on_backup {
                value.push(format!("freeze-fs-on-backup={}", flag(b)));
            }
            if let Some(b) = agent.fs_trim_cloned_disks {
                value.push(format!("fstrim_cloned_disks={}", flag(b)));
            }
            if !agent.type_.is_empty() {
                value.push(format!("type={}", agent.type_));
            }
            p.push("agent", value.join(","));
        }
        let mut cpu = format!("cputype={}", spec.cpu.type_);
        if !spec.cpu.flags.is_empty() {
            // PVE separates flags with `;`; a `,` would end the option.
            cpu.push_str(&format!(",flags={}", spec.cpu.flags.join(";")));
        }
        p.push("cpu", cpu);
        if let Some(vga) = &spec.vga {
            let mut value = format!("type={}", vga.type_);
            if let Some(m) = vga.memory {
                value.push_str(&format!(",memory={m}"));
            }
            p.push("vga", value);
            if vga.type_ == "serial0" {
                p.push("serial0", "socket");
            }
        }
        let mut dns = Vec::new();
        for (i, n) in spec.network.iter().enumerate() {
            let key = n
                .name
                .clone()
                .filter(|k| !k.is_empty())
                .unwrap_or_else(|| format!("net{i}"));
            let index = key.strip_prefix("net").unwrap_or(&key);
            p.push(&key, network_device(n));
            p.push(&format!("ipconfig{index}"), ipconfig(n));
            dns.extend(n.ip_config.dns_servers.iter().cloned());
        }
        if !dns.is_empty() {
            p.push("nameserver", dns.join(" "));
        }
        for (i, d) in spec.pci_devices.iter().enumerate() {
            let mut value = vec![format!("mapping={}", d.mapping)];
            if let Some(mdev) = d.mdev.as_deref().filter(|m| !m.is_empty()) {
                value.push(format!("mdev={mdev}"));
            }
            if let Some(b) = d.pcie {
                value.push(format!("pcie={}", flag(b)));
            }
            if let Some(b) = d.xvga {
                value.push(format!("x-vga={}", flag(b)));
            }
            p.push(&format!("hostpci{i}"), value.join(","));
        }
        let tags = template_tags(spec);
        if !tags.is_empty() {
            p.push("tags", tags.join(";"));
        }
        if let Some(pool) = spec.resource_pool.as_deref().filter(|p| !p.is_empty()) {
            p.push("pool", pool);
        }
        if let Some(on) = spec.on_boot {
            p.push("onboot", flag(on));
        }
        p
    }
}
