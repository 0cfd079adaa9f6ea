//! What each Proxmox node keeps for itself, and the node settings file that changes it
//! (`--node-setting-file` / `NODE_SETTING_FILE`, upstream's `docs/noderesource.md`).
//!
//! The file maps region → node name (or `*` for the region's other nodes) → settings:
//!
//! ```json
//! {"pve": {"pve1": {"reservedcpus": [0, 1], "reservedmemory": 4294967296},
//!          "*": {"nodes": {"0": {"cpus": "0-15", "memsize": 68719476736}}}}}
//! ```
//!
//! `reservedcpus` and `reservedmemory` (bytes) are kept from the VMs; `nodes` (NUMA node id →
//! `cpus`, `memsize` bytes) replaces the node's CPUs and memory as the API reports them.
//! `cores`, `sockets`, `threads` and `uncorecaches` describe the topology for upstream's
//! `static` CPU-pinning policy, which this provider does not implement: they are accepted and
//! not used.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::cpuset::CpuSet;

/// What a node keeps from the VMs when the settings file says nothing: 1 GiB of memory
/// (upstream's `nodeSettingsFromCluster`), no CPUs.
pub const DEFAULT_RESERVED_MEMORY: u64 = 1 << 30;

/// One NUMA node of a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaNode {
    /// Its CPUs.
    pub cpus: CpuSet,
    /// Its memory, bytes.
    pub memory: u64,
}

/// The settings of one Proxmox node that shape its capacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSettings {
    /// CPUs no VM is counted on.
    pub reserved_cpus: CpuSet,
    /// Memory kept for the host, bytes.
    pub reserved_memory: u64,
    /// The host's NUMA nodes when the settings file describes them; their CPUs and memory
    /// then replace what the API reports. Empty: the API's figures.
    pub numa_nodes: BTreeMap<u32, NumaNode>,
}

impl Default for HostSettings {
    fn default() -> Self {
        Self {
            reserved_cpus: CpuSet::new(),
            reserved_memory: DEFAULT_RESERVED_MEMORY,
            numa_nodes: BTreeMap::new(),
        }
    }
}

/// Why a node settings file is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeSettingsError {
    /// Not JSON, or a value of the wrong type or an unknown key (serde names it and where).
    #[error("node settings file: {0}")]
    Json(String),
    /// A value that is JSON of the right type but not valid.
    #[error("node settings file: {path}: {reason}")]
    Field {
        /// Where: `region.node.nodes.0.cpus`.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNuma {
    #[serde(default)]
    cpus: String,
    // Upstream's code reads `memsize`; its documentation writes `memory`. Both are taken.
    #[serde(default, alias = "memory")]
    memsize: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // The topology fields are read so that they are accepted, not used.
struct RawHost {
    #[serde(default)]
    cores: u32,
    #[serde(default)]
    sockets: u32,
    #[serde(default)]
    threads: u32,
    #[serde(default)]
    uncorecaches: u32,
    #[serde(default)]
    nodes: BTreeMap<String, RawNuma>,
    #[serde(default)]
    reservedcpus: Vec<u32>,
    #[serde(default)]
    reservedmemory: u64,
}

/// A host's entry of the file, validated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct HostEntry {
    reserved_cpus: CpuSet,
    reserved_memory: u64,
    numa_nodes: BTreeMap<u32, NumaNode>,
}

/// The node settings file, parsed and validated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSettingsFile {
    regions: BTreeMap<String, BTreeMap<String, HostEntry>>,
}

/// The key that stands for every node of a region without an entry of its own.
pub const ANY_NODE: &str = "*";

impl NodeSettingsFile {
    /// Parses the file. Keys upstream does not know are refused (upstream ignores them, so a
    /// misspelt `reservedmemory` would silently reserve the default); NUMA node ids must be
    /// numbers and their `cpus` CPU lists.
    pub fn parse(text: &str) -> Result<Self, NodeSettingsError> {
        let raw: BTreeMap<String, BTreeMap<String, RawHost>> =
            serde_json::from_str(text).map_err(|e| NodeSettingsError::Json(e.to_string()))?;
        let mut regions = BTreeMap::new();
        for (region, hosts) in raw {
            let mut entries = BTreeMap::new();
            for (host, raw) in hosts {
                let path = format!("{region}.{host}");
                let mut numa_nodes = BTreeMap::new();
                for (id, node) in raw.nodes {
                    let field = |name: &str| format!("{path}.nodes.{id}{name}");
                    let numeric: u32 = id.parse().map_err(|_| NodeSettingsError::Field {
                        path: field(""),
                        reason: "a NUMA node id is a number".into(),
                    })?;
                    let cpus = CpuSet::parse(&node.cpus).map_err(|e| NodeSettingsError::Field {
                        path: field(".cpus"),
                        reason: e.to_string(),
                    })?;
                    if cpus.is_empty() {
                        return Err(NodeSettingsError::Field {
                            path: field(".cpus"),
                            reason: "a NUMA node needs CPUs".into(),
                        });
                    }
                    numa_nodes.insert(
                        numeric,
                        NumaNode {
                            cpus,
                            memory: node.memsize,
                        },
                    );
                }
                entries.insert(
                    host,
                    HostEntry {
                        reserved_cpus: raw.reservedcpus.into_iter().collect(),
                        reserved_memory: raw.reservedmemory,
                        numa_nodes,
                    },
                );
            }
            regions.insert(region, entries);
        }
        Ok(Self { regions })
    }

    /// The settings of node `node` in `region`: the defaults, with what the file's entry for
    /// the node (else the region's `*` entry) sets. As upstream, a value the entry leaves
    /// empty or zero keeps the default, so `reservedmemory: 0` still reserves 1 GiB.
    pub fn host_settings(&self, region: &str, node: &str) -> HostSettings {
        let mut settings = HostSettings::default();
        let entry = self
            .regions
            .get(region)
            .and_then(|hosts| hosts.get(node).or_else(|| hosts.get(ANY_NODE)));
        if let Some(entry) = entry {
            if !entry.reserved_cpus.is_empty() {
                settings.reserved_cpus = entry.reserved_cpus.clone();
            }
            if entry.reserved_memory != 0 {
                settings.reserved_memory = entry.reserved_memory;
            }
            if !entry.numa_nodes.is_empty() {
                settings.numa_nodes = entry.numa_nodes.clone();
            }
        }
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// Upstream's documented example, with `memory` as its documentation writes it.
    const DOCUMENTED: &str = r#"{
      "region-1": {
        "node1": {
          "sockets": 1, "threads": 2, "uncorecaches": 1,
          "nodes": {
            "0": {"cpus": "0-15", "memory": 4294967296},
            "1": {"cpus": "16-31", "memory": 4294967296}
          },
          "reservedcpus": [0,4],
          "reservedmemory": 1073741824
        },
        "node2": {"reservedcpus": [1,5], "reservedmemory": 4294967296},
        "*": {"reservedcpus": [1,5], "reservedmemory": 4294967296}
      },
      "region-2": {
        "node3": {"reservedcpus": [0,1], "reservedmemory": 1073741824}
      }
    }"#;

    #[test]
    fn nodes_get_their_entry_else_the_regions_wildcard_else_the_defaults() {
        let file = NodeSettingsFile::parse(DOCUMENTED).unwrap();
        // (region, node, reserved CPUs, reserved memory GiB, NUMA CPUs)
        let cases = [
            ("region-1", "node1", "0,4", 1, "0-15|16-31"),
            ("region-1", "node2", "1,5", 4, ""),
            ("region-1", "node9", "1,5", 4, ""),
            ("region-2", "node3", "0-1", 1, ""),
            ("region-2", "node4", "", 1, ""),
            ("region-3", "node1", "", 1, ""),
        ];
        for (region, node, cpus, memory, numa) in cases {
            let s = file.host_settings(region, node);
            assert_eq!(s.reserved_cpus.to_string(), cpus, "{region}/{node}");
            assert_eq!(s.reserved_memory, memory * GIB, "{region}/{node}");
            let numa_cpus: Vec<String> =
                s.numa_nodes.values().map(|n| n.cpus.to_string()).collect();
            assert_eq!(numa_cpus.join("|"), numa, "{region}/{node}");
            assert!(s.numa_nodes.values().all(|n| n.memory == 4 * GIB));
        }
    }

    #[test]
    fn zero_and_empty_values_keep_the_defaults() {
        let file =
            NodeSettingsFile::parse(r#"{"pve": {"*": {"reservedmemory": 0, "reservedcpus": []}}}"#)
                .unwrap();
        assert_eq!(file.host_settings("pve", "pve1"), HostSettings::default());
    }

    #[test]
    fn invalid_files_are_refused_naming_the_field() {
        let cases = [
            (
                r#"{"pve": {"pve1": {"reservedmemroy": 1}}}"#,
                "unknown field `reservedmemroy`",
            ),
            (
                r#"{"pve": {"pve1": {"reservedmemory": "1Gi"}}}"#,
                "invalid type: string",
            ),
            (
                r#"{"pve": {"pve1": {"reservedcpus": [-1]}}}"#,
                "invalid value: integer `-1`",
            ),
            (
                r#"{"pve": {"pve1": {"nodes": {"zero": {"cpus": "0-3"}}}}}"#,
                "pve.pve1.nodes.zero: a NUMA node id is a number",
            ),
            (
                r#"{"pve": {"pve1": {"nodes": {"0": {"cpus": "3-0"}}}}}"#,
                "pve.pve1.nodes.0.cpus: \"3-0\" is not a CPU list",
            ),
            (
                r#"{"pve": {"pve1": {"nodes": {"0": {"memsize": 1}}}}}"#,
                "pve.pve1.nodes.0.cpus: a NUMA node needs CPUs",
            ),
            (r#"[]"#, "invalid type: sequence"),
        ];
        for (text, expected) in cases {
            let e = NodeSettingsFile::parse(text).unwrap_err().to_string();
            assert!(e.contains(expected), "{text}: {e}");
        }
    }
}
