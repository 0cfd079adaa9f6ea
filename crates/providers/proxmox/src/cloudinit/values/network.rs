//! `.Network` (and the whole of `network-config`'s data): the VM's interfaces as upstream reads
//! them from the cloned VM's config (`GetNetworkConfigFromVirtualMachineConfig` in
//! `pkg/providers/instance/cloudinit/utils.go`):
//!
//! * `netN` (`virtio=BC:24:11:CD:B9:41,bridge=vmbr0,firewall=1,mtu=1500`) names interface
//!   `ethN` with the NIC's MAC and MTU;
//! * `ipconfigN` (`ip=dhcp,ip6=auto,gw=…,gw6=…`) gives its addresses: `dhcp` turns DHCP on,
//!   `ip6=auto` SLAAC, anything else is a static `address/prefix`;
//! * `nameserver` and `searchdomain` (space separated) are the DNS settings;
//! * the Proxmox node's own addresses on the NIC's bridge ([`NodeInterface`]) are copied in,
//!   and its MTU is used when the NIC has none or `mtu=1` ("inherit the bridge's"); 1500
//!   otherwise.
//!
//! An interface whose `netN` does not parse (a non-numeric `mtu`, `tag` or `trunks`) is left
//! out, as upstream's parser makes it.

use std::collections::BTreeMap;

use gtmpl::Value;

use super::strings;
use crate::cloudinit::template::GoStruct;

/// The address settings of one Proxmox node's bridge (upstream's
/// `cloudcapacity.NetworkIfaceInfo`), keyed by bridge name where it is used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeInterface {
    /// The node's IPv4 address on the bridge, `address/prefix`.
    pub address4: String,
    /// The node's IPv6 address on the bridge, `address/prefix`.
    pub address6: String,
    /// The bridge's IPv4 gateway.
    pub gateway4: String,
    /// The bridge's IPv6 gateway.
    pub gateway6: String,
    /// The bridge's MTU; 0 when unknown.
    pub mtu: u32,
}

/// One network interface of the VM (upstream's `InterfaceConfig`). In templates:
/// `.Name`, `.MacAddr`, `.DHCPv4`, `.DHCPv6`, `.SLAAC`, `.Address4`, `.Address6`, `.Gateway4`,
/// `.Gateway6`, `.MTU`, `.NodeAddress4`, `.NodeAddress6`, `.NodeGateway4`, `.NodeGateway6`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterfaceConfig {
    /// `ethN` for `netN`.
    pub name: String,
    /// The NIC's MAC address as Proxmox writes it (upper case).
    pub mac_addr: String,
    /// `ip=dhcp`.
    pub dhcp_v4: bool,
    /// `ip6=dhcp`.
    pub dhcp_v6: bool,
    /// `ip6=auto`.
    pub slaac: bool,
    /// Static IPv4 addresses, `address/prefix`.
    pub address4: Vec<String>,
    /// Static IPv6 addresses, `address/prefix`.
    pub address6: Vec<String>,
    /// `gw=`.
    pub gateway4: String,
    /// `gw6=`.
    pub gateway6: String,
    /// The MTU (see the module's rules).
    pub mtu: u32,
    /// The Proxmox node's IPv4 address on the NIC's bridge.
    pub node_address4: String,
    /// The Proxmox node's IPv6 address on the NIC's bridge.
    pub node_address6: String,
    /// The bridge's IPv4 gateway on the node.
    pub node_gateway4: String,
    /// The bridge's IPv6 gateway on the node.
    pub node_gateway6: String,
}

/// The VM's network (upstream's `NetworkConfig`): `.Interfaces`, `.SearchDomains`,
/// `.NameServers`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkConfig {
    /// The interfaces, by index (`eth0`, `eth1`, …).
    pub interfaces: Vec<InterfaceConfig>,
    /// `searchdomain`, split at spaces.
    pub search_domains: Vec<String>,
    /// `nameserver`, split at spaces.
    pub name_servers: Vec<String>,
}

/// The NIC models Proxmox writes as `<model>=<MAC>` at the head of `netN`. Upstream reads the
/// MAC of `virtio` only (other models got no MAC); any model is read here.
const NIC_MODELS: [&str; 14] = [
    "virtio",
    "e1000",
    "e1000e",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "vmxnet3",
];

/// The `key=value` pairs of a Proxmox property string as go-proxmox's parser takes them:
/// split at commas, pairs with exactly one `=`, keys compared without case.
fn pairs(s: &str) -> impl Iterator<Item = (String, &str)> {
    s.split(',').filter_map(|part| {
        let mut kv = part.trim().split('=');
        match (kv.next(), kv.next(), kv.next()) {
            (Some(k), Some(v), None) => Some((k.to_lowercase(), v)),
            _ => None,
        }
    })
}

/// Go's `fmt.Sscanf(s, "%d", …)`: leading spaces, an optional sign, digits; the rest ignored.
fn scan_int(s: &str) -> Option<i64> {
    let s = s.trim_start();
    let (sign, digits) = match s.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, s.strip_prefix('+').unwrap_or(s)),
    };
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse::<i64>().ok().map(|n| sign * n)
}

/// What upstream takes from a `netN` value: the MAC, the bridge and the MTU; `None` when
/// go-proxmox's parser would fail on it.
struct NetDevice {
    mac: String,
    bridge: String,
    mtu: Option<i64>,
}

impl NetDevice {
    fn parse(s: &str) -> Option<Self> {
        let mut device = NetDevice {
            mac: String::new(),
            bridge: String::new(),
            mtu: None,
        };
        let mut model_mac: Option<(usize, String)> = None;
        let mut macaddr = None;
        for (key, value) in pairs(s) {
            match key.as_str() {
                "bridge" => device.bridge = value.trim().to_string(),
                "mtu" => device.mtu = Some(scan_int(value)?),
                "tag" | "queues" => {
                    scan_int(value)?;
                }
                "trunks" => {
                    for t in value.split(';') {
                        t.parse::<i64>().ok()?;
                    }
                }
                "macaddr" => macaddr = Some(value.trim().to_string()),
                model => {
                    if let Some(rank) = NIC_MODELS.iter().position(|m| *m == model)
                        && model_mac.as_ref().is_none_or(|(r, _)| rank < *r)
                    {
                        model_mac = Some((rank, value.trim().to_string()));
                    }
                }
            }
        }
        device.mac = model_mac
            .map(|(_, mac)| mac)
            .or(macaddr)
            .unwrap_or_default();
        Some(device)
    }
}

/// The index `N` of a `<prefix>N` config key.
fn index_of(key: &str, prefix: &str) -> Option<u32> {
    let digits = key.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

impl NetworkConfig {
    /// The network of a VM from its config (`netN`, `ipconfigN`, `nameserver`,
    /// `searchdomain`; other keys ignored) and the node's bridges, by name.
    pub fn from_vm_config<K, V>(
        config: impl IntoIterator<Item = (K, V)>,
        node_interfaces: &BTreeMap<String, NodeInterface>,
    ) -> Self
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut nets = BTreeMap::new();
        let mut ipconfigs = BTreeMap::new();
        let mut network = NetworkConfig::default();
        for (key, value) in config {
            let (key, value) = (key.as_ref(), value.as_ref());
            if key == "nameserver" {
                network.name_servers = value.split_whitespace().map(String::from).collect();
            } else if key == "searchdomain" {
                network.search_domains = value.split_whitespace().map(String::from).collect();
            } else if let Some(i) = index_of(key, "net") {
                nets.insert(i, value.to_string());
            } else if let Some(i) = index_of(key, "ipconfig") {
                ipconfigs.insert(i, value.to_string());
            }
        }
        for (index, net) in nets {
            let Some(device) = NetDevice::parse(&net) else {
                continue;
            };
            let mut iface = InterfaceConfig {
                name: format!("eth{index}"),
                mac_addr: device.mac,
                // Go stores the int in a uint32: a negative MTU wraps as it does there.
                mtu: device.mtu.map_or(0, |m| m as u32),
                ..InterfaceConfig::default()
            };
            if let Some(node) = node_interfaces.get(&device.bridge) {
                iface.node_address4 = node.address4.clone();
                iface.node_address6 = node.address6.clone();
                iface.node_gateway4 = node.gateway4.clone();
                iface.node_gateway6 = node.gateway6.clone();
                if iface.mtu == 0 || iface.mtu == 1 {
                    iface.mtu = node.mtu;
                }
            }
            if iface.mtu == 0 {
                iface.mtu = 1500;
            }
            if let Some(ipconfig) = ipconfigs.get(&index) {
                // Each key's last value wins, as when go-proxmox fills its struct.
                let (mut ip, mut ip6) = (String::new(), String::new());
                for (key, value) in pairs(ipconfig) {
                    let value = value.trim().to_string();
                    match key.as_str() {
                        "gw" => iface.gateway4 = value,
                        "gw6" => iface.gateway6 = value,
                        "ip" => ip = value,
                        "ip6" => ip6 = value,
                        _ => {}
                    }
                }
                match ip.as_str() {
                    "" => {}
                    "dhcp" => iface.dhcp_v4 = true,
                    _ => iface.address4 = vec![ip],
                }
                match ip6.as_str() {
                    "" => {}
                    "dhcp" => iface.dhcp_v6 = true,
                    "auto" => iface.slaac = true,
                    _ => iface.address6 = vec![ip6],
                }
            }
            network.interfaces.push(iface);
        }
        network
    }
}

impl From<&InterfaceConfig> for Value {
    fn from(i: &InterfaceConfig) -> Self {
        GoStruct::new()
            .keyed("Name", "name", i.name.as_str())
            .omitempty("MacAddr", "mac_address", i.mac_addr.as_str())
            .omitempty("DHCPv4", "dhcp4", i.dhcp_v4)
            .omitempty("DHCPv6", "dhcp6", i.dhcp_v6)
            .omitempty("SLAAC", "slaac", i.slaac)
            .omitempty_collection("Address4", "addresses4", strings(&i.address4))
            .omitempty_collection("Address6", "addresses6", strings(&i.address6))
            .omitempty("Gateway4", "gateway4", i.gateway4.as_str())
            .omitempty("Gateway6", "gateway6", i.gateway6.as_str())
            .omitempty("MTU", "mtu", i.mtu)
            .omitempty("NodeAddress4", "node_address4", i.node_address4.as_str())
            .omitempty("NodeAddress6", "node_address6", i.node_address6.as_str())
            .omitempty("NodeGateway4", "node_gateway4", i.node_gateway4.as_str())
            .omitempty("NodeGateway6", "node_gateway6", i.node_gateway6.as_str())
            .build()
    }
}

impl From<&NetworkConfig> for Value {
    fn from(n: &NetworkConfig) -> Self {
        GoStruct::new()
            .collection(
                "Interfaces",
                Value::Array(n.interfaces.iter().map(Value::from).collect()),
            )
            .omitempty_collection(
                "SearchDomains",
                "search_domains",
                strings(&n.search_domains),
            )
            .omitempty_collection("NameServers", "name_servers", strings(&n.name_servers))
            .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_strings_parse_as_go_proxmox_parses_them() {
        let d = NetDevice::parse(
            "virtio=BC:24:11:CD:B9:41,bridge=vmbr0,firewall=1,mtu=1,tag=70,trunks=70,100,200",
        )
        .unwrap();
        assert_eq!(
            (d.mac.as_str(), d.bridge.as_str(), d.mtu),
            ("BC:24:11:CD:B9:41", "vmbr0", Some(1))
        );
        let d = NetDevice::parse("e1000=AA:BB:CC:DD:EE:FF,bridge=vmbr1,MTU=9000abc").unwrap();
        assert_eq!((d.mac.as_str(), d.mtu), ("AA:BB:CC:DD:EE:FF", Some(9000)));
        let d = NetDevice::parse("model=virtio,macaddr=AA:BB:CC:DD:EE:01,bridge=vmbr0").unwrap();
        assert_eq!(d.mac, "AA:BB:CC:DD:EE:01");
        for broken in [
            "virtio=AA,mtu=big",
            "virtio=AA,tag=x",
            "virtio=AA,trunks=1;x",
        ] {
            assert!(NetDevice::parse(broken).is_none(), "{broken}");
        }
        assert_eq!(scan_int(" -12x"), Some(-12));
        assert_eq!(index_of("net10", "net"), Some(10));
        assert_eq!(index_of("netx", "net"), None);
        assert_eq!(index_of("net", "net"), None);
    }
}
