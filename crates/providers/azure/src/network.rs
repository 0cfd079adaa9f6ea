//! What a node's NIC joins besides its subnet, as upstream's `loadbalancer` and
//! `networksecuritygroup` providers decide it: the backend pools of AKS's standard load
//! balancers (the outbound pool is how a node reaches the internet), the managed network
//! security group when the subnet is the user's own, accelerated networking when the size has
//! it, and one secondary IP per pod for Azure CNI on the node subnet.

use serde_json::Value;

use crate::bootstrap::{NETWORK_PLUGIN_AZURE, NETWORK_PLUGIN_MODE_OVERLAY, Network};

/// AKS's public standard load balancer.
pub const SLB_NAME: &str = "kubernetes";
/// The internal load balancer AKS's cloud provider makes for internal Services; joining it at
/// launch saves the cloud provider from editing every new VM.
pub const INTERNAL_SLB_NAME: &str = "kubernetes-internal";
/// The IPv6 pools, which would have to go on a non-primary NIC: left out, as upstream.
const IPV6_POOLS: [&str; 2] = ["aksOutboundBackendPool-ipv6", "kubernetes-ipv6"];

/// How long the load balancers are trusted before they are listed again (upstream's TTL).
pub const LOAD_BALANCERS_TTL: std::time::Duration = std::time::Duration::from_secs(2 * 60 * 60);

/// The IPv4 backend pool IDs a new node's NIC joins, from a list of the node resource group's
/// load balancers (ARM's `LoadBalancer` shape). Pools of IP addresses (NodeIP mode) are left
/// out: AKS fills those itself.
pub fn backend_pool_ids(load_balancers: &[Value]) -> Vec<String> {
    load_balancers
        .iter()
        .filter(|lb| {
            lb.get("name").and_then(Value::as_str).is_some_and(|n| {
                n.eq_ignore_ascii_case(SLB_NAME) || n.eq_ignore_ascii_case(INTERNAL_SLB_NAME)
            })
        })
        .flat_map(|lb| {
            lb.pointer("/properties/backendAddressPools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter(|pool| pool_applies(pool))
        .filter_map(|pool| pool.get("id").and_then(Value::as_str))
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .collect()
}

fn pool_applies(pool: &Value) -> bool {
    let (Some(name), Some(properties)) = (
        pool.get("name").and_then(Value::as_str),
        pool.get("properties"),
    ) else {
        return false;
    };
    if IPV6_POOLS.iter().any(|p| p.eq_ignore_ascii_case(name)) {
        return false;
    }
    let ip_based = properties
        .get("loadBalancerBackendAddresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|a| {
            a.pointer("/properties/ipAddress")
                .and_then(Value::as_str)
                .is_some_and(|ip| !ip.is_empty())
        });
    !ip_based
}

/// Whether a failed NIC PUT failed because one of the pools it named is gone (the load
/// balancer changed since it was listed), so a fresh list and one more try can succeed. Other
/// bad references (subnet, NSG) are not retried.
pub fn is_missing_backend_pool(code: &str, message: &str, pools: &[String]) -> bool {
    if !code.eq_ignore_ascii_case("InvalidResourceReference") {
        return false;
    }
    let message = message.to_ascii_lowercase();
    pools
        .iter()
        .any(|p| message.contains(&p.to_ascii_lowercase()))
}

/// The secondary IP configurations a NIC needs: Azure CNI on the node subnet gives each pod an
/// IP of the node's NIC, so a node has `max_pods - 1` besides its own; overlay and other
/// plugins need none.
pub fn secondary_ip_configs(network: &Network, max_pods: i32) -> u32 {
    let pods_on_subnet = network.plugin == NETWORK_PLUGIN_AZURE
        && network.plugin_mode != NETWORK_PLUGIN_MODE_OVERLAY;
    if pods_on_subnet {
        u32::try_from(max_pods.saturating_sub(1)).unwrap_or(0)
    } else {
        0
    }
}

/// What a node's NIC joins and carries besides its subnet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicOptions {
    /// The load balancers' backend pool IDs ([`backend_pool_ids`]).
    pub backend_pools: Vec<String>,
    /// The managed network security group's ID, set only when the subnet is not the VNet AKS
    /// manages (whose subnet already carries the NSG).
    pub network_security_group_id: Option<String>,
    /// Whether the size supports accelerated networking.
    pub accelerated_networking: bool,
    /// See [`secondary_ip_configs`].
    pub secondary_ip_configs: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool(lb: &str, name: &str, addresses: Value) -> Value {
        json!({
            "id": format!("/subscriptions/s/resourceGroups/mc/providers/Microsoft.Network/loadBalancers/{lb}/backendAddressPools/{name}"),
            "name": name,
            "properties": {"loadBalancerBackendAddresses": addresses},
        })
    }

    fn lb(name: &str, pools: Vec<Value>) -> Value {
        json!({"name": name, "properties": {"backendAddressPools": pools}})
    }

    /// Upstream's cases: the cluster's two load balancers only, no IPv6 pools, no pools of IPs.
    #[test]
    fn backend_pools_are_the_cluster_load_balancers_ipv4_nic_pools() {
        let lbs = [
            lb(
                "kubernetes",
                vec![
                    pool("kubernetes", "aksOutboundBackendPool", json!([])),
                    pool("kubernetes", "kubernetes", json!(null)),
                    pool("kubernetes", "aksOutboundBackendPool-ipv6", json!([])),
                    pool("kubernetes", "KUBERNETES-IPV6", json!([])),
                    pool(
                        "kubernetes",
                        "nodeip",
                        json!([{"properties": {"ipAddress": "10.0.0.4"}}]),
                    ),
                    pool(
                        "kubernetes",
                        "empty-ip",
                        json!([{"properties": {"ipAddress": ""}}, {"properties": {}}]),
                    ),
                ],
            ),
            lb(
                "Kubernetes-Internal",
                vec![pool("kubernetes-internal", "kubernetes", json!([]))],
            ),
            lb(
                "someone-elses",
                vec![pool("someone-elses", "pool", json!([]))],
            ),
            json!({"name": "kubernetes", "properties": {"backendAddressPools": [{"name": "no-properties", "id": "x"}]}}),
        ];
        let names: Vec<String> = backend_pool_ids(&lbs)
            .iter()
            .map(|id| id.rsplit_once("/loadBalancers/").unwrap().1.to_string())
            .collect();
        assert_eq!(
            names,
            [
                "kubernetes/backendAddressPools/aksOutboundBackendPool",
                "kubernetes/backendAddressPools/kubernetes",
                "kubernetes/backendAddressPools/empty-ip",
                "kubernetes-internal/backendAddressPools/kubernetes",
            ]
        );
        assert!(backend_pool_ids(&[]).is_empty());
    }

    #[test]
    fn only_a_reference_to_a_submitted_pool_is_retried() {
        let pools = vec!["/subscriptions/s/resourceGroups/mc/providers/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/aksOutboundBackendPool".to_string()];
        let cases = [
            (
                "InvalidResourceReference",
                "Resource /subscriptions/s/resourceGroups/MC/providers/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/aksOutboundBackendPool referenced by resource x was not found.",
                true,
            ),
            (
                "invalidresourcereference",
                "RESOURCE /SUBSCRIPTIONS/S/RESOURCEGROUPS/MC/PROVIDERS/MICROSOFT.NETWORK/LOADBALANCERS/KUBERNETES/BACKENDADDRESSPOOLS/AKSOUTBOUNDBACKENDPOOL WAS NOT FOUND",
                true,
            ),
            (
                "InvalidResourceReference",
                "Resource /subscriptions/s/…/subnets/nodes referenced by resource x was not found.",
                false,
            ),
            (
                "ResourceNotFound",
                "…/loadBalancers/kubernetes/backendAddressPools/aksOutboundBackendPool…",
                false,
            ),
        ];
        for (code, message, want) in cases {
            assert_eq!(
                is_missing_backend_pool(code, message, &pools),
                want,
                "{code}: {message}"
            );
        }
        assert!(!is_missing_backend_pool(
            "InvalidResourceReference",
            "anything",
            &[]
        ));
    }

    #[test]
    fn pods_on_the_node_subnet_take_secondary_ips() {
        let network = |plugin: &str, mode: &str| Network {
            plugin: plugin.into(),
            plugin_mode: mode.into(),
            ..Network::default()
        };
        let cases = [
            ("azure", "", 30, 29),
            ("azure", "overlay", 250, 0),
            ("kubenet", "", 110, 0),
            ("none", "", 250, 0),
            ("azure", "", 0, 0),
        ];
        for (plugin, mode, max_pods, want) in cases {
            assert_eq!(
                secondary_ip_configs(&network(plugin, mode), max_pods),
                want,
                "{plugin}/{mode}/{max_pods}"
            );
        }
    }
}
