//! Script-less node bootstrap: the `osProfile.customData` a node VM boots with, as upstream's
//! default provision mode (`aksscriptless`) writes it.
//!
//! AKS node images carry their provisioning scripts pre-baked under `/opt/azure/containers`.
//! The custom data is a bash script that waits for those scripts, sets the variables they read
//! (cluster, identity, network, kubelet command line, node labels, containerd and sysctl
//! configuration, GPU driver) and starts `provision_start.sh`. [`script`] renders it from
//! [`Options`]; [`custom_data`] base64-encodes it for the VM's `osProfile.customData`.
//!
//! The variables and their values are upstream's, so an AKS node image boots from this as
//! from upstream's. Where upstream iterates a map (kubelet flags, node labels, reservation
//! lists) the order here is sorted by key; the kubelet reads flags and labels as sets.
//! Values are quoted for the shell only when they hold a character the shell would read
//! (upstream pastes them as they are), so valid input renders byte for byte as upstream's.

mod artifacts;
mod gpu;
mod kubelet;
mod parse;
mod script;

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::core::v1::Taint;
use karpenter_core::instancetype::Overhead;

use crate::aksnodeclass::KubeletConfiguration;

pub use gpu::{GpuDriver, gpu_driver};
pub use kubelet::{can_kubelet_set_label, node_taints};
pub use parse::SubnetId;
pub(crate) use parse::semantic_version;

/// The CPU architecture of the node, as Kubernetes names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Arch {
    /// `amd64` (Azure's `x64`).
    #[default]
    Amd64,
    /// `arm64`.
    Arm64,
}

impl Arch {
    /// Reads `kubernetes.io/arch`'s spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "amd64" => Some(Self::Amd64),
            "arm64" => Some(Self::Arm64),
            _ => None,
        }
    }

    /// `amd64` or `arm64`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Amd64 => "amd64",
            Self::Arm64 => "arm64",
        }
    }
}

/// `azure`: Azure CNI.
pub const NETWORK_PLUGIN_AZURE: &str = "azure";
/// `none`: no CNI installed by AKS (bring your own), and what node images are told for
/// overlay and Cilium clusters, whose CNI AKS installs as a DaemonSet.
pub const NETWORK_PLUGIN_NONE: &str = "none";
/// `overlay`: pods get IPs from an overlay range, not the subnet.
pub const NETWORK_PLUGIN_MODE_OVERLAY: &str = "overlay";
/// `cilium`: the Cilium eBPF dataplane.
pub const NETWORK_DATAPLANE_CILIUM: &str = "cilium";

/// The cluster's network settings, as the controller's flags give them (`--network-plugin`,
/// `--network-plugin-mode`, `--network-dataplane`, `--network-policy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Network {
    /// `azure`, `none` or `kubenet`.
    pub plugin: String,
    /// `overlay`, or empty for pods on the node subnet.
    pub plugin_mode: String,
    /// `cilium`, `azure`, or empty.
    pub dataplane: String,
    /// `cilium`, `calico`, `azure`, or empty; passed to the node as it is.
    pub policy: String,
}

impl Default for Network {
    /// Upstream's flag defaults: Azure CNI overlay with Cilium, no network policy.
    fn default() -> Self {
        Self {
            plugin: NETWORK_PLUGIN_AZURE.into(),
            plugin_mode: NETWORK_PLUGIN_MODE_OVERLAY.into(),
            dataplane: NETWORK_DATAPLANE_CILIUM.into(),
            policy: String::new(),
        }
    }
}

impl Network {
    /// The `NETWORK_PLUGIN` the node image is told: `none` when it must not configure a CNI
    /// itself (overlay, Cilium on the node subnet, or no plugin), else `azure`.
    pub fn node_network_plugin(&self) -> &'static str {
        let azure = self.plugin == NETWORK_PLUGIN_AZURE;
        let overlay = azure && self.plugin_mode == NETWORK_PLUGIN_MODE_OVERLAY;
        let cilium_node_subnet =
            azure && self.plugin_mode.is_empty() && self.dataplane == NETWORK_DATAPLANE_CILIUM;
        if overlay || cilium_node_subnet || self.plugin == NETWORK_PLUGIN_NONE {
            NETWORK_PLUGIN_NONE
        } else {
            NETWORK_PLUGIN_AZURE
        }
    }

    /// Pods per node when the AKSNodeClass sets no `maxPods`: AKS's default for the network
    /// (250 for overlay or no plugin, 30 on the node subnet, 110 for kubenet).
    pub fn default_max_pods(&self) -> i32 {
        match (self.plugin.as_str(), self.plugin_mode.as_str()) {
            (NETWORK_PLUGIN_NONE, _) => 250,
            (NETWORK_PLUGIN_AZURE, NETWORK_PLUGIN_MODE_OVERLAY) => 250,
            (NETWORK_PLUGIN_AZURE, "") => 30,
            _ => 110,
        }
    }

    /// The pods a node runs: the AKSNodeClass's `maxPods`, else [`Self::default_max_pods`].
    pub fn max_pods(&self, node_class_max_pods: Option<i32>) -> i32 {
        node_class_max_pods.unwrap_or_else(|| self.default_max_pods())
    }
}

/// Everything the custom data of one node VM is rendered from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// The API server's URL (`--cluster-endpoint`, `https://<fqdn>:443`); the node is given
    /// its host name.
    pub cluster_endpoint: String,
    /// The cluster CA bundle, base64-encoded PEM (as in a kubeconfig's
    /// `certificate-authority-data`).
    pub ca_bundle: String,
    /// The TLS bootstrap token the kubelet joins with (`--kubelet-bootstrap-token`).
    pub tls_bootstrap_token: String,
    /// The node's Kubernetes version, `MAJOR.MINOR.PATCH` (the AKSNodeClass status's).
    pub kubernetes_version: String,
    /// The VM size's architecture.
    pub arch: Arch,
    /// The Entra ID tenant of the cluster's identities.
    pub tenant_id: String,
    /// The subscription the nodes are created in.
    pub subscription_id: String,
    /// The region (`eastus`).
    pub location: String,
    /// The resource group the node VMs live in (AKS's `MC_…` group,
    /// `--node-resource-group`).
    pub node_resource_group: String,
    /// The client id of the kubelet's managed identity (`--kubelet-identity-client-id`).
    pub kubelet_identity_client_id: String,
    /// The subnet of the node's NIC, an ARM id: the AKSNodeClass's `vnetSubnetID`, else
    /// `--vnet-subnet-id`.
    pub subnet_id: String,
    /// The name of the cluster's managed network security group
    /// (`aks-agentpool-<8 digits>-nsg` in the node resource group); the route table's name
    /// derives from it.
    pub network_security_group: String,
    /// The cluster's network settings.
    pub network: Network,
    /// The cluster DNS service IP (`--dns-service-ip`); unset or empty, the kubelet's
    /// default `10.0.0.10`.
    pub cluster_dns: Option<String>,
    /// The labels the node registers with. Labels the kubelet may not set on itself
    /// (`kubernetes.io`/`k8s.io` outside the kubelet's own namespaces) are left out, as
    /// upstream does, since the kubelet would refuse to start with them.
    pub labels: BTreeMap<String, String>,
    /// The taints the node registers with, in order; see [`node_taints`].
    pub taints: Vec<Taint>,
    /// The AKSNodeClass's `kubelet` block, defaults applied; `None` when it has none.
    pub kubelet: Option<KubeletConfiguration>,
    /// The pods the node runs; see [`Network::max_pods`].
    pub max_pods: i32,
    /// The instance type's overhead: its kube-reserved CPU and memory, system-reserved and
    /// memory eviction threshold become the kubelet's flags (as [`crate::catalog::overhead`]
    /// computes them for a size).
    pub overhead: Overhead,
    /// The VM size (`Standard_NC6s_v3`): decides whether and which NVIDIA driver is installed.
    pub vm_size: String,
    /// Whether AKS installs the GPU driver on GPU sizes: the AKSNodeClass's `gpu.mode` is
    /// `Driver`, its default (see
    /// [`AKSNodeClassSpec::gpu_driver_installed`](crate::aksnodeclass::AKSNodeClassSpec::gpu_driver_installed)).
    /// `false` in `Options::default()`.
    pub install_gpu_driver: bool,
}

/// Why custom data could not be rendered; names the [`Options`] field at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A field the node cannot join without is empty.
    #[error("bootstrap option {field} is required")]
    Missing {
        /// The field.
        field: &'static str,
    },
    /// A field does not have the form it must.
    #[error("bootstrap option {field} is {value:?}, not {expected}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
}

/// The custom data, base64-encoded as `osProfile.customData` takes it.
pub fn custom_data(options: &Options) -> Result<String, Error> {
    let script = script(options)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(script))
}

/// The custom data in plain text: the bash script the node runs.
pub fn script(options: &Options) -> Result<String, Error> {
    let node = Node::new(options)?;
    Ok(script::render(&node))
}

/// What rendering needs beyond the options: the parts of them that had to be parsed.
struct Node<'a> {
    options: &'a Options,
    api_server_name: String,
    minor_version: u64,
    subnet: SubnetId,
    gpu_driver: Option<GpuDriver>,
}

impl<'a> Node<'a> {
    fn new(options: &'a Options) -> Result<Self, Error> {
        // The token is a secret: only its absence is reported, never its value.
        required("tls_bootstrap_token", &options.tls_bootstrap_token)?;
        required("ca_bundle", &options.ca_bundle)?;
        required("tenant_id", &options.tenant_id)?;
        required("subscription_id", &options.subscription_id)?;
        required("location", &options.location)?;
        required("node_resource_group", &options.node_resource_group)?;
        Ok(Self {
            options,
            api_server_name: parsed(
                "cluster_endpoint",
                &options.cluster_endpoint,
                "a URL with a host (https://<fqdn>:443)",
                parse::api_server_name,
            )?,
            minor_version: parsed(
                "kubernetes_version",
                &options.kubernetes_version,
                "a version MAJOR.MINOR.PATCH",
                parse::minor_version,
            )?,
            subnet: parsed(
                "subnet_id",
                &options.subnet_id,
                "a subnet's ARM id",
                SubnetId::parse,
            )?,
            gpu_driver: gpu::driver_to_install(&options.vm_size, options.install_gpu_driver),
        })
    }
}

fn required(field: &'static str, value: &str) -> Result<(), Error> {
    if value.is_empty() {
        return Err(Error::Missing { field });
    }
    Ok(())
}

fn parsed<T>(
    field: &'static str,
    value: &str,
    expected: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, Error> {
    required(field, value)?;
    parse(value).ok_or_else(|| Error::Invalid {
        field,
        value: value.to_string(),
        expected,
    })
}

#[cfg(test)]
mod tests;
