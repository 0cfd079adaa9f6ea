//! The three kinds' `openAPIV3Schema`s: upstream's fields, required lists, defaults, enums,
//! patterns, bounds and CEL rules (with their messages) as its generated CRDs have them, so a
//! manifest written for upstream is judged the same way here. The descriptions are this
//! project's own.
//!
//! One deliberate simplification: upstream's boot disk size carries two patterns (the generic
//! quantity pattern and its own) under `allOf` beside a `type: string` that its int-or-string
//! contradicts. Every string its own pattern admits is a quantity, so the size here carries
//! that one pattern on a plain int-or-string, which admits the same values.

use serde_json::{Value, json};

use karpenter_api::crd::{CONDITION_REASON_PATTERN, conditions, object_root, resource_list, rule};

use super::nodeclass::{DEFAULT_BOOT_DEVICE_SIZE, defaults as class_defaults};
use super::template::defaults;

/// A Proxmox resource pool: up to three `/`-separated levels.
const RESOURCE_POOL_PATTERN: &str =
    r"^[a-zA-Z0-9][a-zA-Z0-9._-]*(/[a-zA-Z0-9][a-zA-Z0-9._-]*){0,2}$";
/// A boot disk size: a whole number of G, Gi, T or Ti.
const DISK_SIZE_PATTERN: &str = r"^\d+(T|G|Ti|Gi)$";
/// A source image URL: http(s) and a dotted host name. (Not anchored to IP addresses.)
const URL_PATTERN: &str = r"^https?://[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}(/\S*)?$";
/// A security group's interface; upstream's pattern is not anchored.
const INTERFACE_PATTERN: &str = "net[0-9]+";

const ZONE_BALANCES: [&str; 2] = ["Balanced", "AvailabilityFirst"];
const TEMPLATE_KINDS: [&str; 2] = ["ProxmoxTemplate", "ProxmoxUnmanagedTemplate"];
const METADATA_TYPES: [&str; 2] = ["none", "cdrom"];
const CPU_MANAGER_POLICIES: [&str; 2] = ["none", "static"];
const TOPOLOGY_MANAGER_POLICIES: [&str; 4] =
    ["restricted", "best-effort", "none", "single-numa-node"];
const TOPOLOGY_MANAGER_SCOPES: [&str; 2] = ["container", "pod"];
const CHECKSUM_TYPES: [&str; 6] = ["md5", "sha1", "sha224", "sha256", "sha384", "sha512"];
const MACHINES: [&str; 2] = ["pc", "q35"];
const BIOSES: [&str; 2] = ["seabios", "ovmf"];
const TPM_VERSIONS: [&str; 2] = ["v1.2", "v2.0"];
const AGENT_TYPES: [&str; 2] = ["virtio", "isa"];
const CPU_TYPES: [&str; 6] = [
    "host",
    "kvm64",
    "x86-64-v2",
    "x86-64-v2-AES",
    "x86-64-v3",
    "x86-64-v4",
];
const VGA_TYPES: [&str; 4] = ["none", "serial0", "std", "vmware"];
const NETWORK_MODELS: [&str; 5] = ["e1000", "e1000e", "rtl8139", "virtio", "vmxnet3"];

fn string(description: &str) -> Value {
    json!({"description": description, "type": "string"})
}

fn non_empty(description: &str) -> Value {
    json!({"description": description, "minLength": 1, "type": "string"})
}

fn boolean(description: &str) -> Value {
    json!({"description": description, "type": "boolean"})
}

fn one_of(description: &str, values: &[&str]) -> Value {
    json!({"description": description, "enum": values, "type": "string"})
}

fn defaulted_one_of(description: &str, values: &[&str], default: &str) -> Value {
    json!({"default": default, "description": description, "enum": values, "type": "string"})
}

fn strings(description: &str, max_items: u64) -> Value {
    json!({
        "description": description,
        "items": {"type": "string"},
        "maxItems": max_items,
        "type": "array",
    })
}

fn int32(description: &str, minimum: i64, maximum: i64) -> Value {
    json!({
        "description": description,
        "format": "int32",
        "maximum": maximum,
        "minimum": minimum,
        "type": "integer",
    })
}

fn resource_pool(description: &str) -> Value {
    json!({
        "description": description,
        "maxLength": 64,
        "pattern": RESOURCE_POOL_PATTERN,
        "type": "string",
    })
}

fn secret_reference(description: &str) -> Value {
    json!({
        "description": description,
        "properties": {
            "name": string("The Secret's name."),
            "namespace": string("The Secret's namespace."),
        },
        "type": "object",
        "x-kubernetes-map-type": "atomic",
    })
}

fn status_conditions() -> Value {
    // Upstream's conditions are a plain list, not a map keyed by type.
    let mut conditions = conditions(CONDITION_REASON_PATTERN, true);
    if let Some(fields) = conditions.as_object_mut() {
        fields.remove("x-kubernetes-list-map-keys");
        fields.remove("x-kubernetes-list-type");
    }
    conditions
}

fn kubelet_configuration() -> Value {
    json!({
        "description": "Kubelet settings for the nodes, under the kubelet's own names.",
        "properties": {
            "allowedUnsafeSysctls": {
                "description": "Unsafe sysctls, or patterns ending in *, that pods may set.",
                "items": {"type": "string"},
                "type": "array",
            },
            "clusterDNS": strings("The cluster DNS servers' addresses.", 3),
            "cpuCFSQuota": boolean("Whether CPU limits are enforced with CFS quota."),
            "cpuCFSQuotaPeriod": string("The CFS quota period, a duration from 1ms to 1s."),
            "cpuManagerPolicy": one_of("The CPU manager policy.", &CPU_MANAGER_POLICIES),
            "failSwapOn": boolean("Whether the kubelet refuses to start with swap on."),
            "imageGCHighThresholdPercent": int32(
                "Disk use, percent, above which images are always garbage collected; above imageGCLowThresholdPercent.",
                0,
                100,
            ),
            "imageGCLowThresholdPercent": int32(
                "Disk use, percent, that image garbage collection brings the disk down to.",
                0,
                100,
            ),
            "maxPods": int32("The most pods a node runs.", 10, 250),
            "shutdownGracePeriod": string("How long node shutdown waits for pods, a duration."),
            "topologyManagerPolicy": one_of(
                "How the topology manager aligns NUMA resources.",
                &TOPOLOGY_MANAGER_POLICIES,
            ),
            "topologyManagerScope": one_of(
                "Whether topology hints are per container or per pod.",
                &TOPOLOGY_MANAGER_SCOPES,
            ),
        },
        "type": "object",
    })
}

fn node_class_spec() -> Value {
    let default_options = serde_json::to_value(class_defaults::metadata_options())
        .expect("metadata options serialize");
    json!({
        "description": "How the Proxmox provider makes nodes.",
        "properties": {
            "bootDevice": {
                "default": {"size": DEFAULT_BOOT_DEVICE_SIZE},
                "description": "The boot disk; a device left out keeps the template's.",
                "properties": {
                    "size": {
                        "anyOf": [{"type": "integer"}, {"type": "string"}],
                        "description": "The size: a whole number of G, Gi, T or Ti.",
                        "pattern": DISK_SIZE_PATTERN,
                        "x-kubernetes-int-or-string": true,
                    },
                    "storage": {
                        "description": "The Proxmox storage the disk is made on.",
                        "maxLength": 30,
                        "type": "string",
                    },
                },
                "type": "object",
            },
            "instanceTemplateRef": {
                "description": "The template nodes are cloned from.",
                "properties": {
                    "kind": one_of("The template's kind.", &TEMPLATE_KINDS),
                    "name": non_empty("The template's name."),
                },
                "required": ["kind", "name"],
                "type": "object",
            },
            "kubeletConfiguration": kubelet_configuration(),
            "metadataOptions": {
                "default": default_options,
                "description": "How the VMs get their cloud-init metadata.",
                "properties": {
                    "templatesRef": secret_reference(
                        "The Secret of cloud-init templates (keys user-data, meta-data and network-config, each optional); required for cdrom.",
                    ),
                    "type": defaulted_one_of(
                        "none leaves the template's cloud-init as it is; cdrom attaches a NoCloud CD-ROM rendered from templatesRef.",
                        &METADATA_TYPES,
                        "none",
                    ),
                    "valuesRef": secret_reference(
                        "A Secret of values the templates read as .Values.<key>.",
                    ),
                },
                "type": "object",
            },
            "placementStrategy": {
                "default": {"zoneBalance": "Balanced"},
                "description": "How nodes spread over the zones.",
                "properties": {
                    "zoneBalance": defaulted_one_of(
                        "Balanced spreads nodes evenly over the zones; AvailabilityFirst puts them where there is room first.",
                        &ZONE_BALANCES,
                        "Balanced",
                    ),
                },
                "type": "object",
            },
            "region": non_empty("The Proxmox cluster nodes go to; unset is any."),
            "resourcePool": resource_pool(
                "The Proxmox resource pool VMs join, up to three levels (a/b/c); it must exist.",
            ),
            "securityGroups": {
                "description": "Proxmox firewall security groups applied to the VMs.",
                "items": {
                    "properties": {
                        "interface": {
                            "default": class_defaults::security_group_interface(),
                            "description": "The interface the group applies to.",
                            "pattern": INTERFACE_PATTERN,
                            "type": "string",
                        },
                        "name": {
                            "description": "The security group's name in Proxmox.",
                            "maxLength": 30,
                            "type": "string",
                        },
                    },
                    "required": ["name"],
                    "type": "object",
                },
                "maxItems": 10,
                "type": "array",
            },
            "tags": strings("Tags put on the VMs.", 10),
        },
        "required": ["instanceTemplateRef"],
        "type": "object",
    })
}

fn node_class_status() -> Value {
    json!({
        "description": "What the provider found for the class.",
        "properties": {
            "conditions": status_conditions(),
            "resources": resource_list("Counts of what the class can use: zones, the zones it is ready in."),
            "selectedZones": {
                "description": "The region/zone/vmid entries where the class's template is ready.",
                "items": {"type": "string"},
                "type": "array",
            },
        },
        "type": "object",
    })
}

/// The `openAPIV3Schema` of ProxmoxNodeClass.
pub(super) fn node_class() -> Value {
    object_root(
        "ProxmoxNodeClass is the Proxmox provider's NodeClass: how VMs are cloned for nodes.",
        node_class_spec(),
        node_class_status(),
        false,
    )
}

fn network() -> Value {
    json!({
        "description": "The VM's network interfaces.",
        "items": {
            "properties": {
                "address4": non_empty("The IPv4 address with its prefix length; unset is DHCP."),
                "address6": non_empty("The IPv6 address with its prefix length; unset is SLAAC."),
                "bridge": non_empty("The bridge the interface attaches to."),
                "dnsServers": {
                    "description": "DNS servers.",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "type": "array",
                },
                "firewall": boolean("Whether Proxmox's firewall guards the interface."),
                "gateway4": non_empty("The IPv4 default gateway."),
                "gateway6": non_empty("The IPv6 default gateway."),
                "model": defaulted_one_of("The network card.", &NETWORK_MODELS, defaults::NETWORK_MODEL),
                "mtu": {
                    "default": defaults::MTU,
                    "description": "The MTU: 1 for the bridge's, or 576 to 65520.",
                    "type": "integer",
                    // Upstream's rule has no message.
                    "x-kubernetes-validations": [{"rule": "self == 1 || ( self >= 576 && self <= 65520)"}],
                },
                "name": non_empty("The Proxmox interface (net0)."),
                "vlan": {
                    "description": "The VLAN tag.",
                    "maximum": 4094,
                    "minimum": 1,
                    "type": "integer",
                },
            },
            "required": ["bridge"],
            "type": "object",
        },
        "maxItems": 6,
        "minItems": 1,
        "type": "array",
    })
}

fn template_spec() -> Value {
    json!({
        "description": "A VM template the provider builds from a cloud image.",
        "properties": {
            "agent": {
                "description": "The QEMU guest agent.",
                "properties": {
                    "enabled": {"default": false, "description": "Whether the agent's channel is there.", "type": "boolean"},
                    "fsFreezeOnBackup": boolean("Whether backups freeze the file systems."),
                    "fsTrimClonedDisks": boolean("Whether cloned disks are trimmed."),
                    "type": defaulted_one_of("The agent's channel.", &AGENT_TYPES, defaults::AGENT_TYPE),
                },
                "type": "object",
            },
            "bios": defaulted_one_of("The firmware.", &BIOSES, defaults::BIOS),
            "cpu": {
                "default": {"type": defaults::CPU_TYPE},
                "description": "The CPU.",
                "properties": {
                    "flags": strings("More CPU flags, such as +pdpe1gb.", 10),
                    "type": defaulted_one_of("The emulated CPU type.", &CPU_TYPES, defaults::CPU_TYPE),
                },
                "type": "object",
            },
            "description": non_empty("The VM template's description."),
            "machine": defaulted_one_of("The machine type.", &MACHINES, defaults::MACHINE),
            "network": network(),
            "onBoot": boolean("Whether the VMs start when their Proxmox node boots; clones inherit it."),
            "pciDevices": {
                "description": "PCI devices passed through, by Proxmox resource mapping.",
                "items": {
                    "properties": {
                        "mapping": non_empty("The resource mapping's name."),
                        "mdev": string("The mediated device type."),
                        "pcie": boolean("Whether the device is attached as PCI Express."),
                        "xvga": boolean("Whether the device is the primary display."),
                    },
                    "required": ["mapping"],
                    "type": "object",
                },
                "maxItems": 6,
                "type": "array",
            },
            "region": non_empty("The Proxmox cluster the template is built in; unset is every one."),
            "resourcePool": resource_pool("The Proxmox resource pool the template joins; it must exist."),
            "sourceImage": {
                "description": "The cloud image the template boots.",
                "properties": {
                    "checksum": {
                        "description": "The image's checksum, checked after the download.",
                        "maxLength": 128,
                        "minLength": 32,
                        "type": "string",
                    },
                    "checksumType": one_of("The checksum's algorithm.", &CHECKSUM_TYPES),
                    "imageName": {
                        "description": "The file name the image is stored under, with its extension; the URL's hash is added before the extension.",
                        "maxLength": 64,
                        "minLength": 1,
                        "type": "string",
                    },
                    "url": {
                        "description": "Where Proxmox downloads the image from (qcow2 or raw).",
                        "pattern": URL_PATTERN,
                        "type": "string",
                    },
                },
                "required": ["url"],
                "type": "object",
            },
            "storageIDs": {
                "description": "Storages for the image and the template, best first; they must hold images and import content.",
                "items": {"type": "string"},
                "minItems": 1,
                "type": "array",
            },
            "tags": strings("Tags on the VM template.", 10),
            "tpm": {
                "description": "The trusted platform module.",
                "properties": {
                    "version": defaulted_one_of("The TPM's version.", &TPM_VERSIONS, defaults::TPM_VERSION),
                },
                "type": "object",
            },
            "vga": {
                "description": "The display.",
                "properties": {
                    "memory": {
                        "description": "The display's memory, MiB.",
                        "maximum": 512,
                        "minimum": 4,
                        "type": "integer",
                    },
                    "type": defaulted_one_of("The display type.", &VGA_TYPES, defaults::VGA_TYPE),
                },
                "type": "object",
            },
        },
        "required": ["network", "sourceImage", "storageIDs"],
        "type": "object",
    })
}

fn template_status() -> Value {
    json!({
        "description": "What the provider made of the template.",
        "properties": {
            "conditions": status_conditions(),
            "imageID": string("The image the VM templates boot."),
            "resources": resource_list("Counts of what the template offers: zones, the zones it is ready in."),
            "zones": {
                "description": "The region/zone/vmid entries where the VM template is.",
                "items": {"type": "string"},
                "type": "array",
            },
        },
        "type": "object",
    })
}

/// The `openAPIV3Schema` of ProxmoxTemplate.
pub(super) fn template() -> Value {
    object_root(
        "ProxmoxTemplate is a VM template the Proxmox provider builds on each Proxmox node from a cloud image.",
        template_spec(),
        template_status(),
        false,
    )
}

/// The `openAPIV3Schema` of ProxmoxUnmanagedTemplate.
pub(super) fn unmanaged_template() -> Value {
    let spec = json!({
        "description": "How to find a VM template the user made.",
        "properties": {
            "region": non_empty("The Proxmox cluster to look in; unset is every one."),
            "tags": {
                "description": "Tags the VM template must all have.",
                "items": {"type": "string"},
                "maxItems": 10,
                "minItems": 1,
                "type": "array",
            },
            "templateName": non_empty("The VM template's name."),
        },
        "type": "object",
        "x-kubernetes-validations": [rule(
            "has(self.templateName) || has(self.tags)",
            "at least one of templateName or tags must be specified",
        )],
    });
    object_root(
        "ProxmoxUnmanagedTemplate is a VM template the user made, which the Proxmox provider finds by name or tags.",
        spec,
        template_status(),
        false,
    )
}
