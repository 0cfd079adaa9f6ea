//! Reading the identifiers the options carry: the API server URL, the Kubernetes version,
//! subnet and network security group names.

/// A subnet's ARM id in parts
/// (`/subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{vnet}/subnets/{subnet}`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubnetId {
    /// The subscription.
    pub subscription_id: String,
    /// The virtual network's resource group.
    pub resource_group: String,
    /// The virtual network.
    pub virtual_network: String,
    /// The subnet.
    pub subnet: String,
}

impl SubnetId {
    /// Splits a subnet id; `None` for anything else. The fixed segments match in any case, as
    /// ARM ids do, and the names keep their spelling.
    pub fn parse(id: &str) -> Option<Self> {
        let parts: Vec<&str> = id.split('/').collect();
        let [
            "",
            subscriptions,
            subscription_id,
            resource_groups,
            resource_group,
            providers,
            namespace,
            virtual_networks,
            virtual_network,
            subnets,
            subnet,
        ] = parts.as_slice()
        else {
            return None;
        };
        let fixed = [
            (*subscriptions, "subscriptions"),
            (*resource_groups, "resourceGroups"),
            (*providers, "providers"),
            (*namespace, "Microsoft.Network"),
            (*virtual_networks, "virtualNetworks"),
            (*subnets, "subnets"),
        ];
        if !fixed
            .iter()
            .all(|(got, want)| got.eq_ignore_ascii_case(want))
        {
            return None;
        }
        Some(Self {
            subscription_id: subscription_id.to_string(),
            resource_group: resource_group.to_string(),
            virtual_network: virtual_network.to_string(),
            subnet: subnet.to_string(),
        })
    }
}

impl SubnetId {
    /// Whether both are in the same virtual network.
    pub fn same_vnet(&self, other: &Self) -> bool {
        self.subscription_id
            .eq_ignore_ascii_case(&other.subscription_id)
            && self
                .resource_group
                .eq_ignore_ascii_case(&other.resource_group)
            && self
                .virtual_network
                .eq_ignore_ascii_case(&other.virtual_network)
    }

    /// Whether this is the VNet AKS made and manages (`aks-vnet-<8 digits>/aks-subnet` in
    /// the node resource group).
    pub fn is_aks_managed(&self, node_resource_group: &str) -> bool {
        let vnet = self.virtual_network.to_ascii_lowercase();
        vnet.strip_prefix("aks-vnet-")
            .is_some_and(|d| d.len() == 8 && d.bytes().all(|b| b.is_ascii_digit()))
            && self
                .resource_group
                .eq_ignore_ascii_case(node_resource_group)
            && self.subnet.eq_ignore_ascii_case("aks-subnet")
    }
}

/// The host of a URL (`https://host:443/` → `host`; an IPv6 literal without brackets), or
/// `None` when it has no scheme or no host.
pub(super) fn api_server_name(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']')?.0,
        None => host_port.split(':').next().unwrap_or_default(),
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// A semantic version's `(major, minor, patch)` (`1.33.2`, `1.33.0-rc.1+build`); `None` for
/// anything else.
pub(crate) fn semantic_version(version: &str) -> Option<(u64, u64, u64)> {
    let core = version.split_once('+').map_or(version, |(c, _)| c);
    let core = core.split_once('-').map_or(core, |(c, _)| c);
    let numbers: Vec<&str> = core.split('.').collect();
    let [major, minor, patch] = numbers.as_slice() else {
        return None;
    };
    if !(numeric(major) && numeric(minor) && numeric(patch)) {
        return None;
    }
    Some((
        major.parse().ok()?,
        minor.parse().ok()?,
        patch.parse().ok()?,
    ))
}

/// The minor version of a semantic version, which picks the kubelet flags and artifacts a
/// node gets; `None` for anything else.
pub(super) fn minor_version(version: &str) -> Option<u64> {
    semantic_version(version).map(|(_, minor, _)| minor)
}

fn numeric(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
}

/// The route table of a cluster whose managed NSG is `nsg`: both carry the cluster's 8-digit
/// id (`aks-agentpool-12345678-nsg` → `aks-agentpool-12345678-routetable`). An NSG of another
/// name gives no id, and the name is built without one, as upstream builds it.
pub(super) fn route_table(nsg: &str) -> String {
    format!("aks-agentpool-{}-routetable", cluster_id(nsg).unwrap_or(""))
}

fn cluster_id(nsg: &str) -> Option<&str> {
    const PREFIX: &str = "aks-agentpool-";
    const SUFFIX: &str = "-nsg";
    let head = nsg.get(..PREFIX.len())?;
    let tail = nsg.get(nsg.len().checked_sub(SUFFIX.len())?..)?;
    let id = nsg.get(PREFIX.len()..nsg.len() - SUFFIX.len())?;
    let matches = head.eq_ignore_ascii_case(PREFIX)
        && tail.eq_ignore_ascii_case(SUFFIX)
        && id.len() == 8
        && id.bytes().all(|b| b.is_ascii_digit());
    matches.then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnet_ids() {
        let ok = |sub: &str, rg: &str, vnet: &str, subnet: &str| {
            Some(SubnetId {
                subscription_id: sub.into(),
                resource_group: rg.into(),
                virtual_network: vnet.into(),
                subnet: subnet.into(),
            })
        };
        let cases = [
            (
                "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/test-resourceGroup/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/aks-subnet",
                ok(
                    "12345678-1234-1234-1234-123456789012",
                    "test-resourceGroup",
                    "aks-vnet-12345678",
                    "aks-subnet",
                ),
            ),
            (
                "/SUBSCRIPTIONS/sub/RESOURCEGROUPS/rg/PROVIDERS/MICROSOFT.NETWORK/VIRTUALNETWORKS/vnet/SUBNETS/subnet",
                ok("sub", "rg", "vnet", "subnet"),
            ),
            (
                "/subscriptions/sub/resourceGroups/MC_rg(1)/providers/Microsoft.Network/virtualNetworks/vnet/subnets/s",
                ok("sub", "MC_rg(1)", "vnet", "s"),
            ),
            // Too few or too many segments, or a segment of another resource type.
            (
                "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet",
                None,
            ),
            (
                "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/s/extra",
                None,
            ),
            (
                "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualNetworks/vnet/subnets/s",
                None,
            ),
            (
                "subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/s/",
                None,
            ),
            ("", None),
        ];
        for (id, want) in cases {
            assert_eq!(SubnetId::parse(id), want, "{id}");
        }
    }

    #[test]
    fn api_server_names() {
        let cases = [
            (
                "https://test-cluster-dns-abc123.hcp.eastus.azmk8s.io:443",
                Some("test-cluster-dns-abc123.hcp.eastus.azmk8s.io"),
            ),
            ("https://10.0.0.1", Some("10.0.0.1")),
            ("https://user@host:6443/path?q", Some("host")),
            ("https://[fd00::1]:443", Some("fd00::1")),
            ("https://", None),
            ("host:443", None),
            ("", None),
        ];
        for (url, want) in cases {
            assert_eq!(api_server_name(url).as_deref(), want, "{url}");
        }
    }

    #[test]
    fn minor_versions() {
        let cases = [
            ("1.33.2", Some(33)),
            ("1.30.0", Some(30)),
            ("1.34.0-rc.1+build.5", Some(34)),
            ("1.29.10", Some(29)),
            ("v1.30.0", None),
            ("1.30", None),
            ("1.030.0", None),
            ("1.30.x", None),
            ("", None),
        ];
        for (version, want) in cases {
            assert_eq!(minor_version(version), want, "{version}");
        }
    }

    #[test]
    fn route_tables() {
        let cases = [
            (
                "aks-agentpool-46593302-nsg",
                "aks-agentpool-46593302-routetable",
            ),
            (
                "AKS-AGENTPOOL-46593302-NSG",
                "aks-agentpool-46593302-routetable",
            ),
            ("aks-agentpool-4659330-nsg", "aks-agentpool--routetable"),
            ("my-nsg", "aks-agentpool--routetable"),
            ("", "aks-agentpool--routetable"),
        ];
        for (nsg, want) in cases {
            assert_eq!(route_table(nsg), want, "{nsg}");
        }
    }
}
