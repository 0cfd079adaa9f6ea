//! The AKS labels every node VM registers with (upstream's base labels): its role, cluster,
//! kubelet identity, mode, priority, OS SKU (requested and effective), network and LocalDNS
//! state — what AKS's own node pools carry, so workloads and add-ons that select on them run.

use std::collections::BTreeMap;

use karpenter_api::labels::NODE_DO_NOT_SYNC_TAINTS_LABEL;

use crate::aksnodeclass::AKSNodeClassSpec;
use crate::bootstrap::{NETWORK_DATAPLANE_CILIUM, Network, SubnetId, semantic_version};
use crate::drift::LABEL_KUBELET_IDENTITY_CLIENT_ID;
use crate::instancetype::{
    AKS_LABEL_FIPS_ENABLED, AKS_LABEL_MODE, AKS_LABEL_OS_SKU, AKS_LABEL_PRIORITY,
    AKS_LABEL_SCALE_SET_PRIORITY, os_sku,
};

/// What the labels depend on besides the NodeClass.
#[derive(Clone, Debug, PartialEq)]
pub struct LabelInputs<'a> {
    /// The node resource group (`kubernetes.azure.com/cluster`).
    pub node_resource_group: &'a str,
    /// The kubelet identity's client id.
    pub kubelet_identity_client_id: &'a str,
    /// The cluster's network.
    pub network: &'a Network,
    /// The subnet the node's NIC is in.
    pub subnet_id: &'a str,
    /// The node VNet's GUID (`VNET_GUID`), for Azure CNI overlay.
    pub vnet_guid: &'a str,
    /// The Kubernetes version nodes get (`1.33.2`).
    pub kubernetes_version: &'a str,
    /// The OS build the image family resolves to (`Ubuntu2204`, `AzureLinux3`, …).
    pub effective_os_sku: &'a str,
    /// Whether LocalDNS is enabled on the NodeClass's nodes (its status's state).
    pub local_dns_enabled: bool,
    /// The node's architecture (`amd64`, `arm64`).
    pub arch: &'a str,
}

/// The node resource group as a label value: parentheses become dashes, at most 63
/// characters, and a value may not end in `-`, `_` or `.` (a `z` is put there instead).
pub fn cluster_label(resource_group: &str) -> String {
    let mut value: String = resource_group.replace(['(', ')'], "-");
    value.truncate(63);
    if value.ends_with(['-', '_', '.']) {
        if value.len() > 62 {
            value.pop();
        }
        value.push('z');
    }
    value
}

/// The base labels of a node of `spec`.
pub fn base_labels(spec: &AKSNodeClassSpec, inputs: &LabelInputs) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut set = |k: &str, v: &str| {
        labels.insert(k.to_string(), v.to_string());
    };
    set("kubernetes.azure.com/role", "agent");
    set(
        "kubernetes.azure.com/cluster",
        &cluster_label(inputs.node_resource_group),
    );
    set(
        LABEL_KUBELET_IDENTITY_CLIENT_ID,
        inputs.kubelet_identity_client_id,
    );
    set(AKS_LABEL_MODE, "user");
    set(NODE_DO_NOT_SYNC_TAINTS_LABEL, "true");
    set(AKS_LABEL_SCALE_SET_PRIORITY, "regular");
    set(AKS_LABEL_PRIORITY, "regular");
    set(AKS_LABEL_OS_SKU, os_sku(&spec.image_family));
    if spec.fips() {
        set(AKS_LABEL_FIPS_ENABLED, "true");
    }
    set("kubernetes.azure.com/os-sku-requested", &spec.image_family);
    set(
        "kubernetes.azure.com/os-sku-effective",
        inputs.effective_os_sku,
    );
    let network = inputs.network;
    if network.plugin == crate::bootstrap::NETWORK_PLUGIN_AZURE
        && network.plugin_mode == crate::bootstrap::NETWORK_PLUGIN_MODE_OVERLAY
    {
        if let Some(subnet) = SubnetId::parse(inputs.subnet_id) {
            set("kubernetes.azure.com/network-subnet", &subnet.subnet);
        }
        set(
            "kubernetes.azure.com/nodenetwork-vnetguid",
            inputs.vnet_guid,
        );
        set("kubernetes.azure.com/azure-cni-overlay", "true");
        set("kubernetes.azure.com/podnetwork-type", "overlay");
        let stateless = semantic_version(inputs.kubernetes_version.trim_start_matches('v'))
            .is_some_and(|(major, minor, _)| (major, minor) >= (1, 34));
        set(
            "kubernetes.azure.com/network-stateless-cni",
            if stateless { "true" } else { "false" },
        );
    }
    if network.dataplane == NETWORK_DATAPLANE_CILIUM {
        set(
            "kubernetes.azure.com/ebpf-dataplane",
            NETWORK_DATAPLANE_CILIUM,
        );
    }
    set(
        "kubernetes.azure.com/localdns-state",
        if inputs.local_dns_enabled {
            "enabled"
        } else {
            "disabled"
        },
    );
    if spec.artifact_streaming_enabled() && inputs.arch != "arm64" {
        set("kubernetes.azure.com/artifactstreaming-enabled", "true");
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_labels_are_valid_label_values() {
        let cases = [
            ("MC_rg_cluster_eastus", "MC_rg_cluster_eastus"),
            ("MC_rg(1)_c_eastus", "MC_rg-1-_c_eastus"),
            ("MC_rg_", "MC_rg_z"),
            (&"a".repeat(70), &"a".repeat(63)),
        ];
        for (rg, want) in cases {
            assert_eq!(cluster_label(rg), want, "{rg}");
        }
        let long_dash = format!("{}-", "a".repeat(62));
        assert_eq!(cluster_label(&long_dash), format!("{}z", "a".repeat(62)));
    }

    #[test]
    fn base_labels_as_upstream() {
        let network = Network::default();
        let spec = AKSNodeClassSpec::default();
        let inputs = LabelInputs {
            node_resource_group: "MC_rg_c_eastus",
            kubelet_identity_client_id: "61f71907-753f-4802-a901-47361c3664f2",
            network: &network,
            subnet_id: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes",
            vnet_guid: "a519e60a-cac0-40b2-b883-084477fe6f5c",
            kubernetes_version: "1.34.1",
            effective_os_sku: "Ubuntu2404",
            local_dns_enabled: false,
            arch: "amd64",
        };
        let labels = base_labels(&spec, &inputs);
        let get = |k: &str| labels.get(k).map(String::as_str);
        assert_eq!(get("kubernetes.azure.com/role"), Some("agent"));
        assert_eq!(get("kubernetes.azure.com/mode"), Some("user"));
        assert_eq!(get("kubernetes.azure.com/os-sku"), Some("Ubuntu"));
        assert_eq!(get("kubernetes.azure.com/os-sku-requested"), Some("Ubuntu"));
        assert_eq!(
            get("kubernetes.azure.com/os-sku-effective"),
            Some("Ubuntu2404")
        );
        assert_eq!(get("kubernetes.azure.com/network-subnet"), Some("nodes"));
        assert_eq!(
            get("kubernetes.azure.com/network-stateless-cni"),
            Some("true")
        );
        assert_eq!(get("kubernetes.azure.com/ebpf-dataplane"), Some("cilium"));
        assert_eq!(get("kubernetes.azure.com/localdns-state"), Some("disabled"));
        assert_eq!(get("kubernetes.azure.com/fips_enabled"), None);
        let older = LabelInputs {
            kubernetes_version: "1.33.2",
            ..inputs
        };
        assert_eq!(
            base_labels(&spec, &older)
                .get("kubernetes.azure.com/network-stateless-cni")
                .map(String::as_str),
            Some("false")
        );
    }
}
