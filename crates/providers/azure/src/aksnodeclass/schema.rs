//! The AKSNodeClass schema: upstream's fields, enums, bounds, defaults and CEL rules (with
//! their messages), so a manifest written for upstream's Azure provider is judged the same way.
//! v1beta1 and v1alpha2 share it: upstream serves one schema under both names.

use serde_json::{Value, json};

use karpenter_api::crd::{
    CONDITION_REASON_PATTERN, DURATION_PATTERN, conditions, object_root, one_of, rule,
    status_requirement,
};

use super::{ImageFamily, defaults};

/// An ARM subnet id, case-insensitive as ARM is; the resource group name follows ARM's rules
/// (up to 90 characters, not ending in a dot).
pub(super) const SUBNET_ID_PATTERN: &str = r"(?i)^\/subscriptions\/[^\/]+\/resourceGroups\/[a-zA-Z0-9_\-().]{0,89}[a-zA-Z0-9_\-()]\/providers\/Microsoft\.Network\/virtualNetworks\/[^\/]+\/subnets\/[^\/]+$";
/// A size with a binary or decimal suffix, as AKS accepts it (`50Mi`, `2Gi`).
const SIZE_PATTERN: &str = r"^\d+(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)$";
/// A DNS zone: the root `.` or dotted labels, optionally fully qualified.
const ZONE_PATTERN: &str = r"^(\.|[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*\.?)$";

fn boolean(description: &str) -> Value {
    json!({"description": description, "type": "boolean"})
}

fn int32(description: &str, min: i64, max: Option<i64>) -> Value {
    let mut v =
        json!({"description": description, "format": "int32", "minimum": min, "type": "integer"});
    if let Some(max) = max {
        v["maximum"] = json!(max);
    }
    v
}

/// `a <= b` when both are set, as upstream words it.
fn at_most(a: &str, b: &str) -> Value {
    rule(
        &format!("has(self.{a}) && has(self.{b}) ? self.{a} <= self.{b} : true"),
        &format!("{a} must be <= {b}"),
    )
}

fn kubelet() -> Value {
    json!({
        "description": "Kubelet settings of the nodes (a subset of the kubelet's configuration, as AKS exposes it).",
        "properties": {
            "allowedUnsafeSysctls": {
                "description": "Unsafe sysctls or patterns ending in `*` pods may set.",
                "items": {"type": "string"},
                "type": "array",
            },
            "containerLogMaxFiles": {
                "default": defaults::CONTAINER_LOG_MAX_FILES,
                "description": "How many log files a container may keep.",
                "format": "int32",
                "minimum": 2,
                "type": "integer",
            },
            "containerLogMaxSize": {
                "default": defaults::CONTAINER_LOG_MAX_SIZE,
                "description": "How large a container log grows before it is rotated.",
                "pattern": SIZE_PATTERN,
                "type": "string",
            },
            "cpuCFSQuota": {
                "default": true,
                "description": "Whether CPU limits are enforced with CFS quota.",
                "type": "boolean",
            },
            "cpuCFSQuotaPeriod": {
                "default": defaults::CPU_CFS_QUOTA_PERIOD,
                "description": "The CFS quota period, a duration between 1ms and 1s.",
                "type": "string",
            },
            "cpuManagerPolicy": {
                "default": defaults::NONE,
                "description": "The CPU manager policy.",
                "enum": ["none", "static"],
                "type": "string",
            },
            "failSwapOn": boolean("Whether the kubelet refuses to start with swap on; must be false for linuxOSConfig.swapFileSize."),
            "imageGCHighThresholdPercent": {
                "description": "Disk usage above which images are always garbage collected.",
                "format": "int32", "maximum": 100, "minimum": 0, "type": "integer",
            },
            "imageGCLowThresholdPercent": {
                "description": "Disk usage below which images are never garbage collected.",
                "format": "int32", "maximum": 100, "minimum": 0, "type": "integer",
            },
            "podPidsLimit": {
                "description": "The most PIDs a pod may use.",
                "format": "int64",
                "type": "integer",
            },
            "topologyManagerPolicy": {
                "default": defaults::NONE,
                "description": "The topology manager policy (NUMA alignment).",
                "enum": ["restricted", "best-effort", "none", "single-numa-node"],
                "type": "string",
            },
        },
        "type": "object",
        "x-kubernetes-validations": [rule(
            "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
            "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
        )],
    })
}

/// The sysctls AKS lets a node set, with AKS's bounds.
const SYSCTLS: &[(&str, &str, i64, i64)] = &[
    ("fsAioMaxNr", "fs.aio-max-nr", 65_536, 6_553_500),
    ("fsFileMax", "fs.file-max", 8_192, 12_000_500),
    (
        "fsInotifyMaxUserWatches",
        "fs.inotify.max_user_watches",
        781_250,
        2_097_152,
    ),
    ("fsNrOpen", "fs.nr_open", 8_192, 20_000_500),
    ("kernelThreadsMax", "kernel.threads-max", 20, 513_785),
    (
        "netCoreNetdevMaxBacklog",
        "net.core.netdev_max_backlog",
        1_000,
        3_240_000,
    ),
    ("netCoreOptmemMax", "net.core.optmem_max", 20_480, 4_194_304),
    (
        "netCoreRmemDefault",
        "net.core.rmem_default",
        212_992,
        134_217_728,
    ),
    ("netCoreRmemMax", "net.core.rmem_max", 212_992, 134_217_728),
    ("netCoreSomaxconn", "net.core.somaxconn", 4_096, 3_240_000),
    (
        "netCoreWmemDefault",
        "net.core.wmem_default",
        212_992,
        134_217_728,
    ),
    ("netCoreWmemMax", "net.core.wmem_max", 212_992, 134_217_728),
    (
        "netIPv4NeighDefaultGcThresh1",
        "net.ipv4.neigh.default.gc_thresh1",
        128,
        80_000,
    ),
    (
        "netIPv4NeighDefaultGcThresh2",
        "net.ipv4.neigh.default.gc_thresh2",
        512,
        90_000,
    ),
    (
        "netIPv4NeighDefaultGcThresh3",
        "net.ipv4.neigh.default.gc_thresh3",
        1_024,
        100_000,
    ),
    ("netIPv4TCPFinTimeout", "net.ipv4.tcp_fin_timeout", 5, 120),
    (
        "netIPv4TCPKeepaliveIntvl",
        "net.ipv4.tcp_keepalive_intvl",
        10,
        90,
    ),
    (
        "netIPv4TCPKeepaliveProbes",
        "net.ipv4.tcp_keepalive_probes",
        1,
        15,
    ),
    (
        "netIPv4TCPKeepaliveTime",
        "net.ipv4.tcp_keepalive_time",
        30,
        432_000,
    ),
    (
        "netIPv4TCPMaxSynBacklog",
        "net.ipv4.tcp_max_syn_backlog",
        128,
        3_240_000,
    ),
    (
        "netIPv4TCPMaxTwBuckets",
        "net.ipv4.tcp_max_tw_buckets",
        8_000,
        1_440_000,
    ),
    (
        "netNetfilterNfConntrackBuckets",
        "net.netfilter.nf_conntrack_buckets",
        65_536,
        524_288,
    ),
    (
        "netNetfilterNfConntrackMax",
        "net.netfilter.nf_conntrack_max",
        131_072,
        2_097_152,
    ),
    ("vmMaxMapCount", "vm.max_map_count", 65_530, 262_144),
    ("vmSwappiness", "vm.swappiness", 0, 100),
    ("vmVfsCachePressure", "vm.vfs_cache_pressure", 0, 100),
];

fn sysctls() -> Value {
    let mut properties = serde_json::Map::new();
    for (field, sysctl, min, max) in SYSCTLS {
        properties.insert(
            (*field).into(),
            int32(&format!("{sysctl}."), *min, Some(*max)),
        );
    }
    properties.insert(
        "netIPv4IPLocalPortRange".into(),
        json!({
            "description": "net.ipv4.ip_local_port_range, \"FIRST LAST\": FIRST in 1024-60999, LAST in 32768-65535.",
            "pattern": r"^\d+ \d+$",
            "type": "string",
        }),
    );
    properties.insert(
        "netIPv4TCPTwReuse".into(),
        boolean("net.ipv4.tcp_tw_reuse."),
    );
    let first = "int(self.netIPv4IPLocalPortRange.split(' ')[0])";
    let last = "int(self.netIPv4IPLocalPortRange.split(' ')[1])";
    json!({
        "description": "Kernel settings of the nodes.",
        "properties": properties,
        "type": "object",
        "x-kubernetes-validations": [
            at_most("netCoreRmemDefault", "netCoreRmemMax"),
            at_most("netCoreWmemDefault", "netCoreWmemMax"),
            at_most("netIPv4NeighDefaultGcThresh1", "netIPv4NeighDefaultGcThresh2"),
            at_most("netIPv4NeighDefaultGcThresh2", "netIPv4NeighDefaultGcThresh3"),
            rule(&format!("!has(self.netIPv4IPLocalPortRange) || ({first} >= 1024 && {first} <= 60999)"),
                "netIPv4IPLocalPortRange first port must be in [1024, 60999]"),
            rule(&format!("!has(self.netIPv4IPLocalPortRange) || ({last} >= 32768 && {last} <= 65535)"),
                "netIPv4IPLocalPortRange last port must be in [32768, 65535]"),
            rule(&format!("!has(self.netIPv4IPLocalPortRange) || {first} <= {last}"),
                "netIPv4IPLocalPortRange first port must be <= last port"),
        ],
    })
}

fn linux_os_config() -> Value {
    json!({
        "description": "Linux settings of the nodes (AKS's custom node configuration).",
        "properties": {
            "swapFileSize": {
                "description": "The size of a swap file each node gets, rounded to megabytes.",
                "pattern": SIZE_PATTERN,
                "type": "string",
            },
            "sysctls": sysctls(),
            "transparentHugePageDefrag": one_of(
                "/sys/kernel/mm/transparent_hugepage/defrag.",
                &["always", "defer", "defer+madvise", "madvise", "never"],
            ),
            "transparentHugePageEnabled": one_of(
                "/sys/kernel/mm/transparent_hugepage/enabled.",
                &["always", "madvise", "never"],
            ),
        },
        "type": "object",
    })
}

fn zone_override() -> Value {
    let duration = |description: &str| json!({"description": description, "pattern": DURATION_PATTERN, "type": "string"});
    json!({
        "description": "How LocalDNS answers for one zone.",
        "properties": {
            "cacheDuration": duration("The longest time an answer is cached."),
            "forwardDestination": one_of("Where queries are forwarded.", &["ClusterCoreDNS", "VnetDNS"]),
            "forwardPolicy": one_of("How an upstream server is picked.", &["Sequential", "RoundRobin", "Random"]),
            "maxConcurrent": int32("The most queries in flight.", 0, None),
            "protocol": one_of("TCP always, or UDP first.", &["PreferUDP", "ForceTCP"]),
            "queryLogging": one_of("What is logged of queries.", &["Error", "Log"]),
            "serveStale": one_of("Whether and how stale answers are served.", &["Verify", "Immediate", "Disable"]),
            "serveStaleDuration": duration("How long stale answers may be served."),
            "zone": {
                "description": "The zone (`.`, `cluster.local`).",
                "maxLength": 254,
                "minLength": 1,
                "pattern": ZONE_PATTERN,
                "type": "string",
            },
        },
        "required": [
            "cacheDuration", "forwardDestination", "forwardPolicy", "maxConcurrent", "protocol",
            "queryLogging", "serveStale", "serveStaleDuration", "zone",
        ],
        "type": "object",
        "x-kubernetes-validations": [
            rule("!(self.zone.endsWith('cluster.local') && self.forwardDestination == 'VnetDNS')",
                "'cluster.local' cannot be forwarded to VnetDNS"),
            rule("!(self.serveStale == 'Verify' && self.protocol == 'ForceTCP')",
                "serveStale Verify cannot be used with protocol ForceTCP"),
        ],
    })
}

fn overrides(description: &str, mut rules: Vec<Value>) -> Value {
    rules.insert(
        0,
        rule(
            "['.', 'cluster.local'].all(z, self.exists(x, x.zone == z))",
            "must contain required zones '.' and 'cluster.local'",
        ),
    );
    json!({
        "description": description,
        "items": zone_override(),
        "maxItems": 100,
        "type": "array",
        "x-kubernetes-list-map-keys": ["zone"],
        "x-kubernetes-list-type": "map",
        "x-kubernetes-validations": rules,
    })
}

fn local_dns() -> Value {
    json!({
        "description": "The node-local DNS cache and its per-zone overrides.",
        "properties": {
            "kubeDNSOverrides": overrides("Overrides for pods with dnsPolicy ClusterFirst.", vec![]),
            "mode": one_of("Whether LocalDNS is on; Preferred lets the provider decide.", &["Preferred", "Required", "Disabled"]),
            "vnetDNSOverrides": overrides(
                "Overrides for pods with dnsPolicy Default and the kubelet.",
                vec![
                    rule("!self.exists(x, x.zone == '.' && x.forwardDestination == 'ClusterCoreDNS')",
                        "root zone '.' cannot be forwarded to ClusterCoreDNS from vnetDNSOverrides"),
                    rule("!self.exists(x, x.zone != '.' && !x.zone.endsWith('cluster.local') && x.forwardDestination == 'ClusterCoreDNS')",
                        "external domains cannot be forwarded to ClusterCoreDNS from vnetDNSOverrides"),
                ],
            ),
        },
        "required": ["kubeDNSOverrides", "mode", "vnetDNSOverrides"],
        "type": "object",
    })
}

fn tags() -> Value {
    json!({
        "additionalProperties": {"type": "string"},
        "description": "Tags on the Azure resources of a node.",
        "type": "object",
        "x-kubernetes-validations": [
            rule("self.all(k, size(k) <= 512)", "tags keys must be less than 512 characters"),
            rule("self.all(k, !k.matches('[<>%&?]'))", "tags keys must not contain '<', '>', '%', '&', or '?'"),
            rule(r"self.all(k, !k.contains('\\'))", r"tags keys must not contain '\'"),
            rule("self.all(k, size(self[k]) <= 256)", "tags values must be less than 256 characters"),
        ],
    })
}

/// FIPS images exist only for some families, and with Trusted Launch for fewer.
fn spec_rules() -> Vec<Value> {
    let fips = "has(self.fipsMode) && self.fipsMode == 'FIPS'";
    let trusted_launch = "has(self.security) && has(self.security.trustedLaunch) && ((has(self.security.trustedLaunch.vtpm) && self.security.trustedLaunch.vtpm) || (has(self.security.trustedLaunch.secureBoot) && self.security.trustedLaunch.secureBoot))";
    vec![
        rule(
            &format!("{fips} ? (has(self.imageFamily) && self.imageFamily != 'Ubuntu2404') : true"),
            "FIPS is not yet supported for Ubuntu2404",
        ),
        rule(
            &format!(
                "{fips} ? (has(self.imageFamily) && (self.imageFamily != 'Ubuntu2204' || ({trusted_launch}))) : true"
            ),
            "TrustedLaunch is required for FIPS support with Ubuntu2204",
        ),
        rule(
            &format!(
                "{fips} && {trusted_launch} ? (!has(self.imageFamily) || self.imageFamily == 'Ubuntu' || self.imageFamily == 'Ubuntu2204') : true"
            ),
            "TrustedLaunch with FIPSMode FIPS is only supported for Ubuntu and Ubuntu2204",
        ),
        rule(
            "!has(self.linuxOSConfig) || !has(self.linuxOSConfig.swapFileSize) || (has(self.kubelet) && has(self.kubelet.failSwapOn) && self.kubelet.failSwapOn == false)",
            "kubelet.failSwapOn must be set to false when linuxOSConfig.swapFileSize is specified",
        ),
    ]
}

fn spec() -> Value {
    let families: Vec<&str> = ImageFamily::ALL.iter().map(|f| f.as_str()).collect();
    json!({
        "description": "How the Azure provider launches nodes.",
        "properties": {
            "artifactStreaming": {
                "description": "Artifact streaming: images pulled on demand instead of before start.",
                "properties": {"enabled": boolean("Whether it is on (the images must enable it in ACR too); off when unset.")},
                "type": "object",
            },
            "fipsMode": one_of("Whether nodes run a FIPS-compliant image.", &["FIPS", "Disabled"]),
            "gpu": {
                "description": "GPU nodes.",
                "properties": {
                    "mode": {
                        "default": defaults::GPU_MODE,
                        "description": "Driver: AKS installs the GPU driver (only sizes it can do so for are used); None: it does not, for a GPU operator to.",
                        "enum": ["Driver", "None"],
                        "type": "string",
                    },
                },
                "type": "object",
            },
            "imageFamily": {
                "default": defaults::IMAGE_FAMILY,
                "description": "The node image family.",
                "enum": families,
                "type": "string",
            },
            "kubelet": kubelet(),
            "linuxOSConfig": linux_os_config(),
            "localDNS": local_dns(),
            "maxPods": int32("The most pods a node runs; unset, it depends on the network plugin (30 for Azure CNI, 250 for overlay or none, else 110).", 10, Some(250)),
            "osDiskSizeGB": {
                "default": defaults::OS_DISK_SIZE_GB,
                "description": "The OS disk's size in GB.",
                "format": "int32",
                "maximum": 2048,
                "minimum": 30,
                "type": "integer",
            },
            "security": {
                "description": "Security settings of the nodes.",
                "properties": {
                    "encryptionAtHost": boolean("Whether the host encrypts the node's disks and caches."),
                    "trustedLaunch": {
                        "description": "Trusted Launch.",
                        "properties": {
                            "secureBoot": boolean("Whether Secure Boot is on."),
                            "vtpm": boolean("Whether the virtual TPM is on."),
                        },
                        "type": "object",
                    },
                },
                "type": "object",
            },
            "tags": tags(),
            "vnetSubnetID": {
                "description": "The subnet of the nodes' NICs; unset, the controller's --vnet-subnet-id.",
                "pattern": SUBNET_ID_PATTERN,
                "type": "string",
            },
        },
        "type": "object",
        "x-kubernetes-validations": spec_rules(),
    })
}

fn status() -> Value {
    let requirement = status_requirement();
    // Upstream's conditions are a plain list, not a map keyed by type.
    let mut conditions = conditions(CONDITION_REASON_PATTERN, true);
    if let Some(fields) = conditions.as_object_mut() {
        fields.remove("x-kubernetes-list-map-keys");
        fields.remove("x-kubernetes-list-type");
    }
    json!({
        "description": "What the AKSNodeClass resolved to.",
        "properties": {
            "conditions": conditions,
            "images": {
                "description": "Images nodes may boot.",
                "items": {
                    "properties": {
                        "id": {"description": "The image's gallery id.", "type": "string"},
                        "requirements": {"description": "The instance types it boots.", "items": requirement, "type": "array"},
                    },
                    "required": ["id", "requirements"],
                    "type": "object",
                },
                "type": "array",
            },
            "kubernetesVersion": {"description": "The Kubernetes version nodes get.", "type": "string"},
            "localDNSState": one_of("Whether LocalDNS is on for new nodes (what Preferred resolved to).", &["Enabled", "Disabled"]),
        },
        "type": "object",
    })
}

/// The `openAPIV3Schema` of AKSNodeClass.
pub(super) fn schema() -> Value {
    object_root(
        "AKSNodeClass is the Azure provider's NodeClass: how AKS nodes are launched.",
        spec(),
        status(),
        false,
    )
}
