//! What the Proxmox VE API answers and takes, typed, with the names its JSON and upstream's
//! Go clients (luthermonson/go-proxmox, sergelogvinov/go-proxmox) use; `type` fields are
//! `kind`. Numbers are read whether PVE sends them as numbers or as strings (it does both, by
//! version and by endpoint: `memory` is a string in a VM's config, `vmid` a number in the
//! resources list), and flags whether as `0`/`1` or booleans. Fields an answer lacks are
//! zero or empty.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::form::Params;

/// Lenient readers for PVE's loosely typed JSON.
mod lenient {
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    fn number(v: &Value) -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }

    /// A count or a size: a number or a numeric string; null and anything else is 0.
    pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        Ok(number(&Value::deserialize(d)?).map_or(0, |n| n.max(0.0) as u64))
    }

    /// As [`u64`], kept apart from zero when missing.
    pub fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        Ok(number(&Value::deserialize(d)?).map(|n| n.max(0.0) as u32))
    }

    /// A share or a load: a number or a numeric string; anything else is 0.
    pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(number(&Value::deserialize(d)?).unwrap_or(0.0))
    }

    /// A flag: `1`, `"1"` or `true`.
    pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        Ok(number(&Value::deserialize(d)?).is_some_and(|n| n != 0.0))
    }

    /// A flag kept apart from "not said".
    pub fn opt_flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        Ok(number(&Value::deserialize(d)?).map(|n| n != 0.0))
    }

    /// Text: a string, or a number as written; null is empty.
    pub fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => u8::from(b).to_string(),
            _ => String::new(),
        })
    }

    /// Text that may be missing.
    pub fn opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => Some(s),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(u8::from(b).to_string()),
            _ => None,
        })
    }
}

/// PVE's tag list (`a;b;c`; older versions also split on `,` and spaces), empty tags dropped.
pub fn split_tags(tags: &str) -> Vec<String> {
    tags.split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// An entry of `GET /cluster/resources` (a VM, a container, a node, a storage, a pool).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ClusterResource {
    /// `qemu/100`, `node/pve1`, `storage/pve1/local`.
    #[serde(deserialize_with = "lenient::text")]
    pub id: String,
    /// `type`: `qemu`, `lxc`, `node`, `storage`, `pool`, `sdn`.
    #[serde(rename = "type", deserialize_with = "lenient::text")]
    pub kind: String,
    /// The node it is on.
    #[serde(deserialize_with = "lenient::text")]
    pub node: String,
    /// A guest's name.
    #[serde(deserialize_with = "lenient::text")]
    pub name: String,
    /// `running`, `stopped`, `online`, `available`, `unknown` (its node is unreachable).
    #[serde(deserialize_with = "lenient::text")]
    pub status: String,
    /// A guest's tags, `;`-separated.
    #[serde(deserialize_with = "lenient::text")]
    pub tags: String,
    /// A guest that is a template.
    #[serde(deserialize_with = "lenient::flag")]
    pub template: bool,
    /// A guest's id.
    #[serde(deserialize_with = "lenient::opt_u32")]
    pub vmid: Option<u32>,
    /// CPUs (a node's, or a guest's cores × sockets).
    #[serde(deserialize_with = "lenient::u64")]
    pub maxcpu: u64,
    /// CPU use, a share of `maxcpu`.
    #[serde(deserialize_with = "lenient::f64")]
    pub cpu: f64,
    /// Memory, bytes.
    #[serde(deserialize_with = "lenient::u64")]
    pub maxmem: u64,
    /// Memory used, bytes.
    #[serde(deserialize_with = "lenient::u64")]
    pub mem: u64,
    /// Disk (a guest's first disk, a node's root, a storage's size), bytes.
    #[serde(deserialize_with = "lenient::u64")]
    pub maxdisk: u64,
    /// Disk used, bytes.
    #[serde(deserialize_with = "lenient::u64")]
    pub disk: u64,
    /// Seconds running.
    #[serde(deserialize_with = "lenient::u64")]
    pub uptime: u64,
    /// A guest's resource pool.
    #[serde(deserialize_with = "lenient::text")]
    pub pool: String,
    /// A guest's config lock (`clone`, `backup`, `migrate`, …).
    #[serde(deserialize_with = "lenient::text")]
    pub lock: String,
    /// A guest's HA state, when HA manages it.
    #[serde(deserialize_with = "lenient::text")]
    pub hastate: String,
    /// A storage's name.
    #[serde(deserialize_with = "lenient::text")]
    pub storage: String,
    /// What a storage holds: `images,iso,import,…`.
    #[serde(deserialize_with = "lenient::text")]
    pub content: String,
    /// A storage's type: `dir`, `lvmthin`, `rbd`, `zfspool`, …
    #[serde(deserialize_with = "lenient::text")]
    pub plugintype: String,
    /// A storage every node sees.
    #[serde(deserialize_with = "lenient::flag")]
    pub shared: bool,
}

impl ClusterResource {
    /// A QEMU VM (a template included).
    pub fn is_vm(&self) -> bool {
        self.kind == "qemu"
    }

    /// The tags, one by one.
    pub fn tag_list(&self) -> Vec<String> {
        split_tags(&self.tags)
    }

    /// The content types of a storage, one by one.
    pub fn content_list(&self) -> Vec<&str> {
        self.content.split(',').filter(|c| !c.is_empty()).collect()
    }
}

/// An entry of `GET /nodes`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NodeStatus {
    /// The node's name.
    #[serde(deserialize_with = "lenient::text")]
    pub node: String,
    /// `online`, `offline`, `unknown`.
    #[serde(deserialize_with = "lenient::text")]
    pub status: String,
    /// CPU threads.
    #[serde(deserialize_with = "lenient::u64")]
    pub maxcpu: u64,
    /// CPU use, a share.
    #[serde(deserialize_with = "lenient::f64")]
    pub cpu: f64,
    /// Memory, bytes.
    #[serde(deserialize_with = "lenient::u64")]
    pub maxmem: u64,
    /// Memory used, bytes.
    #[serde(deserialize_with = "lenient::u64")]
    pub mem: u64,
    /// Root disk, bytes.
    #[serde(deserialize_with = "lenient::u64")]
    pub maxdisk: u64,
    /// Root disk used, bytes.
    #[serde(deserialize_with = "lenient::u64")]
    pub disk: u64,
    /// Seconds up.
    #[serde(deserialize_with = "lenient::u64")]
    pub uptime: u64,
    /// The node's certificate fingerprint.
    #[serde(deserialize_with = "lenient::text")]
    pub ssl_fingerprint: String,
}

impl NodeStatus {
    /// The node answers.
    pub fn is_online(&self) -> bool {
        self.status == "online"
    }
}

/// A node's `cpuinfo`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CpuInfo {
    /// CPU threads.
    #[serde(deserialize_with = "lenient::u64")]
    pub cpus: u64,
    /// Cores per socket.
    #[serde(deserialize_with = "lenient::u64")]
    pub cores: u64,
    /// Sockets.
    #[serde(deserialize_with = "lenient::u64")]
    pub sockets: u64,
    /// The CPU model.
    #[serde(deserialize_with = "lenient::text")]
    pub model: String,
    /// MHz, as PVE writes it.
    #[serde(deserialize_with = "lenient::text")]
    pub mhz: String,
    /// CPU flags, space-separated.
    #[serde(deserialize_with = "lenient::text")]
    pub flags: String,
}

/// A node's memory or swap.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Memory {
    /// Bytes in all.
    #[serde(deserialize_with = "lenient::u64")]
    pub total: u64,
    /// Bytes used.
    #[serde(deserialize_with = "lenient::u64")]
    pub used: u64,
    /// Bytes free.
    #[serde(deserialize_with = "lenient::u64")]
    pub free: u64,
}

/// `GET /nodes/{node}/status`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Node {
    /// CPU use, a share.
    #[serde(deserialize_with = "lenient::f64")]
    pub cpu: f64,
    /// The CPUs.
    pub cpuinfo: CpuInfo,
    /// Memory.
    pub memory: Memory,
    /// Swap.
    pub swap: Memory,
    /// Seconds up.
    #[serde(deserialize_with = "lenient::u64")]
    pub uptime: u64,
    /// Load averages, as PVE writes them.
    pub loadavg: Vec<String>,
    /// The kernel.
    #[serde(deserialize_with = "lenient::text")]
    pub kversion: String,
    /// `pve-manager/8.2.4/…`.
    #[serde(deserialize_with = "lenient::text")]
    pub pveversion: String,
}

/// An entry of `GET /cluster/status`: the cluster itself, or a node of it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ClusterStatusEntry {
    /// `type`: `cluster` or `node`.
    #[serde(rename = "type", deserialize_with = "lenient::text")]
    pub kind: String,
    /// `cluster`, `node/pve1`.
    #[serde(deserialize_with = "lenient::text")]
    pub id: String,
    /// The cluster's or the node's name.
    #[serde(deserialize_with = "lenient::text")]
    pub name: String,
    /// The cluster has quorum.
    #[serde(deserialize_with = "lenient::flag")]
    pub quorate: bool,
    /// The cluster's nodes.
    #[serde(deserialize_with = "lenient::u64")]
    pub nodes: u64,
    /// A node is online.
    #[serde(deserialize_with = "lenient::flag")]
    pub online: bool,
    /// A node is the one that answered.
    #[serde(deserialize_with = "lenient::flag")]
    pub local: bool,
    /// A node's address.
    #[serde(deserialize_with = "lenient::text")]
    pub ip: String,
    /// A node's id in the cluster.
    #[serde(deserialize_with = "lenient::u64")]
    pub nodeid: u64,
}

/// `GET /version`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Version {
    /// `8.2.4`.
    #[serde(deserialize_with = "lenient::text")]
    pub version: String,
    /// `8.2`.
    #[serde(deserialize_with = "lenient::text")]
    pub release: String,
    /// The build.
    #[serde(deserialize_with = "lenient::text")]
    pub repoid: String,
}

/// `GET /nodes/{node}/tasks/{upid}/status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TaskStatus {
    /// The task's id.
    #[serde(deserialize_with = "lenient::text")]
    pub upid: String,
    /// The node running it.
    #[serde(deserialize_with = "lenient::text")]
    pub node: String,
    /// `type`: `qmclone`, `qmstart`, …
    #[serde(rename = "type", deserialize_with = "lenient::text")]
    pub kind: String,
    /// What it works on.
    #[serde(deserialize_with = "lenient::text")]
    pub id: String,
    /// Who started it.
    #[serde(deserialize_with = "lenient::text")]
    pub user: String,
    /// `running` or `stopped`.
    #[serde(deserialize_with = "lenient::text")]
    pub status: String,
    /// Once stopped: `OK`, `WARNINGS: n`, or the error (`clone failed: …`).
    #[serde(deserialize_with = "lenient::opt_text")]
    pub exitstatus: Option<String>,
    /// When it started, Unix seconds.
    #[serde(deserialize_with = "lenient::u64")]
    pub starttime: u64,
}

impl TaskStatus {
    /// Still running.
    pub fn is_running(&self) -> bool {
        self.status != "stopped"
    }

    /// Stopped, having done its work: `OK`, or `WARNINGS: n`, which PVE counts as done
    /// (`PVE::Tools::upid_status_is_error`).
    pub fn is_successful(&self) -> bool {
        !self.is_running()
            && self
                .exitstatus
                .as_deref()
                .is_some_and(|s| s == "OK" || s.starts_with("WARNINGS"))
    }

    /// Stopped without doing its work.
    pub fn is_failed(&self) -> bool {
        !self.is_running() && !self.is_successful()
    }
}

/// `GET /nodes/{node}/qemu/{vmid}/status/current`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct VmStatus {
    /// The VM's id.
    #[serde(deserialize_with = "lenient::opt_u32")]
    pub vmid: Option<u32>,
    /// The name.
    #[serde(deserialize_with = "lenient::text")]
    pub name: String,
    /// `running` or `stopped`.
    #[serde(deserialize_with = "lenient::text")]
    pub status: String,
    /// QEMU's own: `running`, `paused`, `prelaunch`, …
    #[serde(deserialize_with = "lenient::text")]
    pub qmpstatus: String,
    /// The config lock.
    #[serde(deserialize_with = "lenient::text")]
    pub lock: String,
    /// The tags, `;`-separated.
    #[serde(deserialize_with = "lenient::text")]
    pub tags: String,
    /// A template.
    #[serde(deserialize_with = "lenient::flag")]
    pub template: bool,
    /// CPUs.
    #[serde(deserialize_with = "lenient::u64")]
    pub cpus: u64,
    /// Memory, bytes.
    #[serde(deserialize_with = "lenient::u64")]
    pub maxmem: u64,
    /// Seconds running.
    #[serde(deserialize_with = "lenient::u64")]
    pub uptime: u64,
}

impl VmStatus {
    /// Running and not paused, as go-proxmox's `IsRunning` has it.
    pub fn is_running(&self) -> bool {
        self.status == "running" && (self.qmpstatus.is_empty() || self.qmpstatus == "running")
    }
}

/// A VM's config (`GET /nodes/{node}/qemu/{vmid}/config`): PVE's keys (`cores`, `memory`,
/// `scsi0`, `net0`, `smbios1`, `tags`, …) and their values as sent.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct VmConfig(pub BTreeMap<String, Value>);

impl VmConfig {
    /// The value of `key` as text (a number as written).
    pub fn get(&self, key: &str) -> Option<String> {
        match self.0.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(u8::from(*b).to_string()),
            _ => None,
        }
    }

    /// The digest to send back with a change, so a concurrent one is refused.
    pub fn digest(&self) -> Option<String> {
        self.get("digest")
    }

    /// The tags, one by one.
    pub fn tags(&self) -> Vec<String> {
        self.get("tags").map(|t| split_tags(&t)).unwrap_or_default()
    }

    /// The keys matching `prefix` followed by digits (`net` → `net0`, `net1`), in number order.
    pub fn numbered(&self, prefix: &str) -> Vec<(String, String)> {
        let mut found: Vec<(u32, String, String)> = self
            .0
            .keys()
            .filter_map(|k| {
                let n = k.strip_prefix(prefix)?.parse::<u32>().ok()?;
                Some((n, k.clone(), self.get(k)?))
            })
            .collect();
        found.sort();
        found.into_iter().map(|(_, k, v)| (k, v)).collect()
    }

    /// The boot disk to resize after a clone, as sergelogvinov/go-proxmox detects it: the first
    /// of `virtio0`, `scsi0`, `sata0`, `ide0` the config has.
    pub fn boot_disk(&self) -> Option<&'static str> {
        ["virtio0", "scsi0", "sata0", "ide0"]
            .into_iter()
            .find(|k| self.get(k).is_some_and(|v| !v.is_empty()))
    }
}

/// An entry of `GET /nodes/{node}/storage`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Storage {
    /// The storage's name.
    #[serde(deserialize_with = "lenient::text")]
    pub storage: String,
    /// `type`: `dir`, `lvmthin`, `rbd`, …
    #[serde(rename = "type", deserialize_with = "lenient::text")]
    pub kind: String,
    /// What it holds: `images,iso,…`.
    #[serde(deserialize_with = "lenient::text")]
    pub content: String,
    /// Mounted and usable on this node.
    #[serde(deserialize_with = "lenient::flag")]
    pub active: bool,
    /// Enabled on this node.
    #[serde(deserialize_with = "lenient::flag")]
    pub enabled: bool,
    /// Every node sees it.
    #[serde(deserialize_with = "lenient::flag")]
    pub shared: bool,
    /// Bytes in all.
    #[serde(deserialize_with = "lenient::u64")]
    pub total: u64,
    /// Bytes used.
    #[serde(deserialize_with = "lenient::u64")]
    pub used: u64,
    /// Bytes free.
    #[serde(deserialize_with = "lenient::u64")]
    pub avail: u64,
}

impl Storage {
    /// The content types, one by one.
    pub fn content_list(&self) -> Vec<&str> {
        self.content.split(',').filter(|c| !c.is_empty()).collect()
    }
}

/// An entry of `GET /nodes/{node}/storage/{storage}/content`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct StorageContent {
    /// `local:iso/user-data-100.iso`.
    #[serde(deserialize_with = "lenient::text")]
    pub volid: String,
    /// `iso`, `images`, `import`, `vztmpl`, `backup`.
    #[serde(deserialize_with = "lenient::text")]
    pub content: String,
    /// `raw`, `qcow2`, `iso`, …
    #[serde(deserialize_with = "lenient::text")]
    pub format: String,
    /// Bytes.
    #[serde(deserialize_with = "lenient::u64")]
    pub size: u64,
    /// The owning guest, for disks.
    #[serde(deserialize_with = "lenient::opt_u32")]
    pub vmid: Option<u32>,
    /// Created, Unix seconds.
    #[serde(deserialize_with = "lenient::u64")]
    pub ctime: u64,
}

/// A firewall rule of a VM (`…/qemu/{vmid}/firewall/rules`) or of a security group. Upstream
/// puts a node class's security groups on a VM as rules of type `group` whose `action` is the
/// group's name, on the interface the class names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct FirewallRule {
    /// Its place in the list, from 0.
    #[serde(deserialize_with = "lenient::opt_u32")]
    pub pos: Option<u32>,
    /// `type`: `in`, `out`, `forward` or `group`.
    #[serde(rename = "type", deserialize_with = "lenient::text")]
    pub kind: String,
    /// `ACCEPT`, `DROP`, `REJECT`, or the security group's name.
    #[serde(deserialize_with = "lenient::text")]
    pub action: String,
    /// Switched on.
    #[serde(deserialize_with = "lenient::flag")]
    pub enable: bool,
    /// The interface, `net0`.
    #[serde(deserialize_with = "lenient::text")]
    pub iface: String,
    /// A comment.
    #[serde(deserialize_with = "lenient::text")]
    pub comment: String,
    /// A macro (`SSH`).
    #[serde(rename = "macro", deserialize_with = "lenient::text")]
    pub macro_name: String,
    /// Source address or set.
    #[serde(deserialize_with = "lenient::text")]
    pub source: String,
    /// Destination address or set.
    #[serde(deserialize_with = "lenient::text")]
    pub dest: String,
    /// Protocol.
    #[serde(deserialize_with = "lenient::text")]
    pub proto: String,
    /// Destination ports.
    #[serde(deserialize_with = "lenient::text")]
    pub dport: String,
    /// Source ports.
    #[serde(deserialize_with = "lenient::text")]
    pub sport: String,
    /// Log level.
    #[serde(deserialize_with = "lenient::text")]
    pub log: String,
}

impl FirewallRule {
    /// A rule putting the security group `group` on `iface` (upstream's only kind of rule).
    pub fn group(group: &str, iface: &str, pos: u32) -> Self {
        Self {
            pos: Some(pos),
            kind: "group".into(),
            action: group.into(),
            enable: true,
            iface: iface.into(),
            ..Self::default()
        }
    }

    /// The rule as a create or update sends it: what is set, `pos` included when given.
    pub fn params(&self) -> Params {
        Params::new()
            .non_empty("type", &self.kind)
            .non_empty("action", &self.action)
            .opt("pos", self.pos)
            .flag("enable", self.enable)
            .non_empty("iface", &self.iface)
            .non_empty("comment", &self.comment)
            .non_empty("macro", &self.macro_name)
            .non_empty("source", &self.source)
            .non_empty("dest", &self.dest)
            .non_empty("proto", &self.proto)
            .non_empty("dport", &self.dport)
            .non_empty("sport", &self.sport)
            .non_empty("log", &self.log)
    }

    /// The same rule, whatever its place: what upstream compares to decide an update.
    pub fn same_rule(&self, other: &FirewallRule) -> bool {
        let unplaced = |r: &FirewallRule| FirewallRule {
            pos: None,
            ..r.clone()
        };
        unplaced(self) == unplaced(other)
    }
}

/// A VM's firewall options (`…/qemu/{vmid}/firewall/options`); what is `None` is not sent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct FirewallOptions {
    /// The VM's firewall is on.
    #[serde(deserialize_with = "lenient::opt_flag")]
    pub enable: Option<bool>,
    /// DHCP allowed.
    #[serde(deserialize_with = "lenient::opt_flag")]
    pub dhcp: Option<bool>,
    /// IP filter.
    #[serde(deserialize_with = "lenient::opt_flag")]
    pub ipfilter: Option<bool>,
    /// MAC filter.
    #[serde(deserialize_with = "lenient::opt_flag")]
    pub macfilter: Option<bool>,
    /// Neighbour discovery allowed.
    #[serde(deserialize_with = "lenient::opt_flag")]
    pub ndp: Option<bool>,
    /// Router advertisements allowed.
    #[serde(deserialize_with = "lenient::opt_flag")]
    pub radv: Option<bool>,
    /// Policy for incoming traffic: `ACCEPT`, `DROP`, `REJECT`.
    #[serde(deserialize_with = "lenient::opt_text")]
    pub policy_in: Option<String>,
    /// Policy for outgoing traffic.
    #[serde(deserialize_with = "lenient::opt_text")]
    pub policy_out: Option<String>,
    /// Log level in.
    #[serde(deserialize_with = "lenient::opt_text")]
    pub log_level_in: Option<String>,
    /// Log level out.
    #[serde(deserialize_with = "lenient::opt_text")]
    pub log_level_out: Option<String>,
}

impl FirewallOptions {
    /// The options that are set, as `PUT …/firewall/options` takes them.
    pub fn params(&self) -> Params {
        let flag = |v: Option<bool>| v.map(|b| if b { "1" } else { "0" });
        Params::new()
            .opt("enable", flag(self.enable))
            .opt("dhcp", flag(self.dhcp))
            .opt("ipfilter", flag(self.ipfilter))
            .opt("macfilter", flag(self.macfilter))
            .opt("ndp", flag(self.ndp))
            .opt("radv", flag(self.radv))
            .opt("policy_in", self.policy_in.as_deref())
            .opt("policy_out", self.policy_out.as_deref())
            .opt("log_level_in", self.log_level_in.as_deref())
            .opt("log_level_out", self.log_level_out.as_deref())
    }
}

/// An entry of `GET /cluster/firewall/groups`: a security group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct FirewallGroup {
    /// The group's name.
    #[serde(deserialize_with = "lenient::text")]
    pub group: String,
    /// Its comment.
    #[serde(deserialize_with = "lenient::text")]
    pub comment: String,
}

/// `GET /pools/{poolid}`: a resource pool and its members.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Pool {
    /// The pool's name (PVE sends it only in listings; the client fills it in).
    #[serde(deserialize_with = "lenient::text")]
    pub poolid: String,
    /// Its comment.
    #[serde(deserialize_with = "lenient::text")]
    pub comment: String,
    /// Its guests and storages.
    pub members: Vec<ClusterResource>,
}

impl Pool {
    /// The pool holds the guest `vmid`.
    pub fn has_vm(&self, vmid: u32) -> bool {
        self.members.iter().any(|m| m.vmid == Some(vmid))
    }
}

/// An entry of `GET /nodes/{node}/network`: a bridge, a bond, a NIC.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct NodeNetwork {
    /// `vmbr0`.
    #[serde(deserialize_with = "lenient::text")]
    pub iface: String,
    /// `type`: `bridge`, `OVSBridge`, `eth`, `bond`, …
    #[serde(rename = "type", deserialize_with = "lenient::text")]
    pub kind: String,
    /// Up.
    #[serde(deserialize_with = "lenient::flag")]
    pub active: bool,
    /// IPv4 address with prefix.
    #[serde(deserialize_with = "lenient::text")]
    pub cidr: String,
    /// IPv6 address with prefix.
    #[serde(deserialize_with = "lenient::text")]
    pub cidr6: String,
    /// IPv4 gateway.
    #[serde(deserialize_with = "lenient::text")]
    pub gateway: String,
    /// IPv6 gateway.
    #[serde(deserialize_with = "lenient::text")]
    pub gateway6: String,
    /// MTU; `None` when not set (1500 then).
    #[serde(deserialize_with = "lenient::opt_u32")]
    pub mtu: Option<u32>,
}

/// Options of `POST /nodes/{node}/qemu/{vmid}/clone`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloneOptions {
    /// The new VM's id.
    pub newid: u32,
    /// Its name (upstream: the node claim's name).
    pub name: String,
    /// Its description.
    pub description: String,
    /// A full copy rather than a linked clone (upstream: always).
    pub full: Option<bool>,
    /// The node to put it on, when not the template's.
    pub target: String,
    /// The storage for its disks (full clones only).
    pub storage: String,
    /// The resource pool to add it to.
    pub pool: String,
    /// The disks' format (`raw`, `qcow2`), full clones only.
    pub format: String,
    /// Clone this snapshot rather than the current state.
    pub snapname: String,
}

impl CloneOptions {
    /// The parameters, as the clone call sends them.
    pub fn params(&self) -> Params {
        Params::new()
            .set("newid", self.newid)
            .non_empty("name", &self.name)
            .non_empty("description", &self.description)
            .opt("full", self.full.map(u8::from))
            .non_empty("target", &self.target)
            .non_empty("storage", &self.storage)
            .non_empty("pool", &self.pool)
            .non_empty("format", &self.format)
            .non_empty("snapname", &self.snapname)
    }
}

/// Options of `DELETE /nodes/{node}/qemu/{vmid}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Also remove the VM from backup jobs, replication, HA and pools.
    pub purge: bool,
    /// Also destroy disks of the VM's id that its config does not name.
    pub destroy_unreferenced_disks: bool,
    /// Ignore a config lock (root only).
    pub skiplock: bool,
}

impl DeleteOptions {
    /// The query parameters; only those that are on.
    pub fn params(&self) -> Params {
        let mut p = Params::new();
        for (name, on) in [
            ("purge", self.purge),
            (
                "destroy-unreferenced-disks",
                self.destroy_unreferenced_disks,
            ),
            ("skiplock", self.skiplock),
        ] {
            if on {
                p.push(name, 1);
            }
        }
        p
    }
}

/// Options of `POST /nodes/{node}/storage/{storage}/download-url` (upstream: a template's
/// source image, content `import`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DownloadUrlOptions {
    /// `iso`, `vztmpl` or `import`.
    pub content: String,
    /// The file name in the storage.
    pub filename: String,
    /// Where to download from.
    pub url: String,
    /// The file's expected checksum.
    pub checksum: String,
    /// `md5`, `sha1`, `sha224`, `sha256`, `sha384` or `sha512`.
    pub checksum_algorithm: String,
    /// Decompress with `gz`, `lzo`, `zst`, `bz2`.
    pub compression: String,
    /// Check the source's TLS certificate (PVE's default: yes).
    pub verify_certificates: Option<bool>,
}

impl DownloadUrlOptions {
    /// The parameters, as the download call sends them.
    pub fn params(&self) -> Params {
        Params::new()
            .set("content", &self.content)
            .set("filename", &self.filename)
            .set("url", &self.url)
            .non_empty("checksum", &self.checksum)
            .non_empty("checksum-algorithm", &self.checksum_algorithm)
            .non_empty("compression", &self.compression)
            .opt(
                "verify-certificates",
                self.verify_certificates.map(u8::from),
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resources_read_numbers_and_flags_in_either_form() {
        let items: Vec<ClusterResource> = serde_json::from_value(json!([
            {"id": "qemu/100", "type": "qemu", "node": "pve1", "name": "node-a", "vmid": 100,
             "status": "running", "template": 0, "maxcpu": 2, "maxmem": 4294967296u64,
             "tags": "k8s;karpenter", "pool": "kube", "cpu": 0.02},
            {"id": "qemu/9000", "type": "qemu", "node": "pve2", "name": "tmpl", "vmid": "9000",
             "status": "stopped", "template": "1", "maxmem": "1073741824", "maxcpu": 1.0},
            {"id": "storage/pve1/local", "type": "storage", "node": "pve1", "storage": "local",
             "content": "iso,vztmpl,import", "plugintype": "dir", "shared": 0, "status": "available",
             "maxdisk": 1.5e12},
            {"id": "node/pve1", "type": "node", "node": "pve1", "status": "online", "maxcpu": 16,
             "maxmem": 68719476736u64, "mem": null, "unknown-new-field": [1, 2]}
        ]))
        .unwrap();
        let vm = &items[0];
        assert!(vm.is_vm() && !vm.template);
        assert_eq!((vm.vmid, vm.maxcpu, vm.maxmem), (Some(100), 2, 4 << 30));
        assert_eq!(vm.tag_list(), ["k8s", "karpenter"]);
        assert_eq!(vm.pool, "kube");
        let tmpl = &items[1];
        assert!(tmpl.template);
        assert_eq!(
            (tmpl.vmid, tmpl.maxmem, tmpl.maxcpu),
            (Some(9000), 1 << 30, 1)
        );
        let storage = &items[2];
        assert_eq!(storage.content_list(), ["iso", "vztmpl", "import"]);
        assert_eq!(
            (storage.shared, storage.maxdisk),
            (false, 1_500_000_000_000)
        );
        let node = &items[3];
        assert_eq!((node.vmid, node.mem, node.maxcpu), (None, 0, 16));
    }

    #[test]
    fn tags_split_on_every_separator_pve_has_used() {
        assert_eq!(split_tags("a;b,c d;;"), ["a", "b", "c", "d"]);
        assert!(split_tags("").is_empty());
    }

    #[test]
    fn a_task_with_warnings_is_done_one_with_an_error_is_not() {
        let task = |status: &str, exit: Option<&str>| TaskStatus {
            status: status.into(),
            exitstatus: exit.map(str::to_string),
            ..TaskStatus::default()
        };
        let running = task("running", None);
        assert!(running.is_running() && !running.is_successful() && !running.is_failed());
        assert!(task("stopped", Some("OK")).is_successful());
        assert!(task("stopped", Some("WARNINGS: 2")).is_successful());
        let failed = task("stopped", Some("clone failed: no space"));
        assert!(failed.is_failed() && !failed.is_successful());
        assert!(
            task("stopped", None).is_failed(),
            "no exit status is no success"
        );
    }

    #[test]
    fn vm_config_values_read_as_text_and_the_boot_disk_is_found() {
        let cfg: VmConfig = serde_json::from_value(json!({
            "cores": 2, "memory": "4096", "tags": "a;b", "digest": "abc",
            "net1": "virtio=AA,bridge=vmbr1", "net0": "virtio=BB,bridge=vmbr0", "net10": "x",
            "scsi0": "local-lvm:vm-100-disk-0,size=30G", "ide2": "none,media=cdrom",
            "agent": true
        }))
        .unwrap();
        assert_eq!(cfg.get("cores").as_deref(), Some("2"));
        assert_eq!(cfg.get("memory").as_deref(), Some("4096"));
        assert_eq!(cfg.get("agent").as_deref(), Some("1"));
        assert_eq!(cfg.get("nothing"), None);
        assert_eq!(cfg.tags(), ["a", "b"]);
        assert_eq!(cfg.digest().as_deref(), Some("abc"));
        let nets: Vec<String> = cfg.numbered("net").into_iter().map(|(k, _)| k).collect();
        assert_eq!(nets, ["net0", "net1", "net10"]);
        assert_eq!(cfg.boot_disk(), Some("scsi0"));
        for (disks, want) in [
            (json!({"virtio0": "a", "scsi0": "b"}), Some("virtio0")),
            (json!({"sata0": "a", "ide0": "b"}), Some("sata0")),
            (json!({"ide0": "a"}), Some("ide0")),
            (json!({"scsi1": "a", "virtio0": ""}), None),
        ] {
            let cfg: VmConfig = serde_json::from_value(disks.clone()).unwrap();
            assert_eq!(cfg.boot_disk(), want, "{disks}");
        }
    }

    #[test]
    fn options_send_only_what_is_set() {
        let clone = CloneOptions {
            newid: 20001,
            name: "node-a".into(),
            description: "Karpenter managed instance".into(),
            full: Some(true),
            storage: "local-lvm".into(),
            pool: "kube".into(),
            ..CloneOptions::default()
        };
        assert_eq!(
            clone.params().encode(),
            "newid=20001&name=node-a&description=Karpenter%20managed%20instance&full=1&storage=local-lvm&pool=kube"
        );
        assert_eq!(DeleteOptions::default().params().encode(), "");
        assert_eq!(
            DeleteOptions {
                purge: true,
                destroy_unreferenced_disks: true,
                skiplock: false
            }
            .params()
            .encode(),
            "purge=1&destroy-unreferenced-disks=1"
        );
        let download = DownloadUrlOptions {
            content: "import".into(),
            filename: "noble.qcow2".into(),
            url: "https://cloud-images.example/noble.img".into(),
            checksum: "abc".into(),
            checksum_algorithm: "sha256".into(),
            verify_certificates: Some(false),
            ..DownloadUrlOptions::default()
        };
        assert_eq!(
            download.params().encode(),
            "content=import&filename=noble.qcow2&url=https%3A%2F%2Fcloud-images.example%2Fnoble.img&checksum=abc&checksum-algorithm=sha256&verify-certificates=0"
        );
        let options = FirewallOptions {
            enable: Some(true),
            policy_in: Some("DROP".into()),
            ..FirewallOptions::default()
        };
        assert_eq!(options.params().encode(), "enable=1&policy_in=DROP");
    }

    #[test]
    fn security_group_rules_are_upstreams() {
        let rule = FirewallRule::group("k8s-nodes", "net0", 0);
        assert_eq!(
            rule.params().encode(),
            "type=group&action=k8s-nodes&pos=0&enable=1&iface=net0"
        );
        let listed: FirewallRule = serde_json::from_value(json!({
            "pos": 3, "type": "group", "action": "k8s-nodes", "enable": 1, "iface": "net0",
            "digest": "x", "ipversion": 4
        }))
        .unwrap();
        assert!(listed.same_rule(&rule));
        assert!(!listed.same_rule(&FirewallRule::group("k8s-nodes", "net1", 3)));
    }
}
