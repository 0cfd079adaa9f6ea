//! The custom data script: wait for the image's provisioning scripts, set their variables,
//! start them. The variables, their order and their quoting are those AKS node images are
//! provisioned with; most are fixed, since Karpenter's nodes use no custom cloud, proxy,
//! custom CA, swap, Kata or teleport.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::kubelet::{join_flags, kubelet_flags, node_labels};
use super::{GpuDriver, Node, artifacts, parse};

/// Before the variables: export everything set below to the provisioning scripts, mark the
/// manifest and create the directory the custom script extension would have, log the start,
/// and wait (up to 20 minutes) for the image's `provision.sh` to be complete.
const PREAMBLE: &str = "#!/bin/bash

set -o allexport
echo '#EOF' >> /opt/azure/manifest.json
mkdir -p /var/log/azure/Microsoft.Azure.Extensions.CustomScript/events

echo $(date),$(hostname) > /var/log/azure/cluster-provision-cse-output.log;
for i in $(seq 1 1200); do
grep -Fq \"EOF\" /opt/azure/containers/provision.sh && break;
if [ $i -eq 1200 ]; then exit 100; else sleep 1; fi;
done;

";

/// After the variables: provisioning runs detached, so cloud-init finishes.
const START: &str =
    "/usr/bin/nohup /bin/bash -c \"/bin/bash /opt/azure/containers/provision_start.sh\"\n";

/// The containerd configuration, with its default runtime's name and binary to fill in.
const CONTAINERD_CONFIG: &str = include_str!("containerd.toml");

/// Kernel settings every node gets: shorter TCP retries so a dead API server connection is
/// noticed in minutes instead of a quarter hour, and room for many connections and neighbours.
const SYSCTL_CONFIG: &str = include_str!("sysctl.conf");

/// The admin account the provisioning scripts configure.
const ADMIN_USERNAME: &str = "azureuser";

/// The credential the cloud config names: the node authenticates with managed identity.
const SERVICE_PRINCIPAL: &str = "msi";

/// How a variable's value is written: as one word, or inside double quotes.
enum Line {
    Bare(&'static str, String),
    Quoted(&'static str, String),
    /// An empty line, where a list the nodes never get (custom CA certificates) would be.
    Blank,
}

fn bare(name: &'static str, value: impl ToString) -> Line {
    Line::Bare(name, value.to_string())
}

fn quoted(name: &'static str, value: impl ToString) -> Line {
    Line::Quoted(name, value.to_string())
}

/// The script.
pub(super) fn render(node: &Node) -> String {
    let mut script = String::from(PREAMBLE);
    for line in variables(node) {
        write_line(&mut script, &line);
    }
    script.push_str(START);
    script
}

fn write_line(script: &mut String, line: &Line) {
    match line {
        Line::Bare(name, value) => {
            script.push_str(&format!("{name}={}\n", shell_word(value)));
        }
        Line::Quoted(name, value) => {
            script.push_str(&format!("{name}=\"{}\"\n", double_quoted(value)));
        }
        Line::Blank => script.push('\n'),
    }
}

/// Every variable, in the order node images are given them.
fn variables(node: &Node) -> Vec<Line> {
    let mut lines = cluster_variables(node);
    lines.extend(node_feature_variables());
    lines.extend(node_configuration_variables(node));
    lines
}

/// The cluster, its cloud config and the node's identity and network.
fn cluster_variables(node: &Node) -> Vec<Line> {
    let o = node.options;
    let arch = o.arch;
    let kube_binary_url =
        artifacts::kube_binary_url(&o.kubernetes_version, node.minor_version, arch);
    let gpu = node.gpu_driver.is_some();
    vec![
        bare("ADMINUSER", ADMIN_USERNAME),
        bare("MOBY_VERSION", ""),
        bare("TENANT_ID", &o.tenant_id),
        bare("KUBERNETES_VERSION", &o.kubernetes_version),
        bare("HYPERKUBE_URL", ""),
        bare("KUBE_BINARY_URL", &kube_binary_url),
        bare("CUSTOM_KUBE_BINARY_URL", ""),
        bare(
            "CREDENTIAL_PROVIDER_DOWNLOAD_URL",
            artifacts::credential_provider_url(node.minor_version, arch).unwrap_or_default(),
        ),
        bare("KUBEPROXY_URL", ""),
        bare("APISERVER_PUBLIC_KEY", ""),
        bare("SUBSCRIPTION_ID", &o.subscription_id),
        bare("RESOURCE_GROUP", &o.node_resource_group),
        bare("LOCATION", &o.location),
        bare("VM_TYPE", "standard"),
        bare("SUBNET", &node.subnet.subnet),
        bare("NETWORK_SECURITY_GROUP", &o.network_security_group),
        bare("VIRTUAL_NETWORK", &node.subnet.virtual_network),
        bare(
            "VIRTUAL_NETWORK_RESOURCE_GROUP",
            &node.subnet.resource_group,
        ),
        bare("ROUTE_TABLE", parse::route_table(&o.network_security_group)),
        bare("PRIMARY_AVAILABILITY_SET", ""),
        bare("PRIMARY_SCALE_SET", ""),
        bare("SERVICE_PRINCIPAL_CLIENT_ID", SERVICE_PRINCIPAL),
        bare("NETWORK_PLUGIN", o.network.node_network_plugin()),
        quoted("NETWORK_POLICY", &o.network.policy),
        bare(
            "VNET_CNI_PLUGINS_URL",
            artifacts::vnet_cni_plugins_url(arch),
        ),
        bare("CNI_PLUGINS_URL", artifacts::cni_plugins_url(arch)),
        // The cloud provider's ARM client: retries with backoff, and rate limits.
        bare("CLOUDPROVIDER_BACKOFF", true),
        bare("CLOUDPROVIDER_BACKOFF_MODE", "v2"),
        bare("CLOUDPROVIDER_BACKOFF_RETRIES", 6),
        bare("CLOUDPROVIDER_BACKOFF_EXPONENT", 0),
        bare("CLOUDPROVIDER_BACKOFF_DURATION", 5),
        bare("CLOUDPROVIDER_BACKOFF_JITTER", 0),
        bare("CLOUDPROVIDER_RATELIMIT", true),
        bare("CLOUDPROVIDER_RATELIMIT_QPS", 10),
        bare("CLOUDPROVIDER_RATELIMIT_QPS_WRITE", 10),
        bare("CLOUDPROVIDER_RATELIMIT_BUCKET", 100),
        bare("CLOUDPROVIDER_RATELIMIT_BUCKET_WRITE", 100),
        bare("LOAD_BALANCER_DISABLE_OUTBOUND_SNAT", false),
        bare("USE_MANAGED_IDENTITY_EXTENSION", true),
        bare("USE_INSTANCE_METADATA", true),
        bare("LOAD_BALANCER_SKU", "Standard"),
        bare("EXCLUDE_MASTER_FROM_STANDARD_LB", true),
        bare("MAXIMUM_LOADBALANCER_RULE_COUNT", 250),
        bare("CONTAINER_RUNTIME", "containerd"),
        bare("CLI_TOOL", "ctr"),
        bare("CONTAINERD_DOWNLOAD_URL_BASE", ""),
        bare("NETWORK_MODE", ""),
        bare("KUBE_BINARY_URL", &kube_binary_url),
        bare("USER_ASSIGNED_IDENTITY_ID", &o.kubelet_identity_client_id),
        bare("API_SERVER_NAME", &node.api_server_name),
        bare("IS_VHD", true),
        bare("GPU_NODE", gpu),
        bare("SGX_NODE", false),
        bare("MIG_NODE", false),
        bare("CONFIG_GPU_DRIVER_IF_NEEDED", gpu),
        bare("ENABLE_GPU_DEVICE_PLUGIN_IF_NEEDED", false),
        bare("TELEPORTD_PLUGIN_DOWNLOAD_URL", ""),
        bare("CONTAINERD_VERSION", ""),
        bare("CONTAINERD_PACKAGE_URL", ""),
        bare("RUNC_VERSION", ""),
        bare("RUNC_PACKAGE_URL", ""),
    ]
}

/// Image features Karpenter's nodes do not use, all off.
fn node_feature_variables() -> Vec<Line> {
    vec![
        quoted("ENABLE_HOSTS_CONFIG_AGENT", false),
        quoted("DISABLE_SSH", false),
        quoted("NEEDS_CONTAINERD", true),
        quoted("TELEPORT_ENABLED", false),
        quoted("SHOULD_CONFIGURE_HTTP_PROXY", false),
        quoted("SHOULD_CONFIGURE_HTTP_PROXY_CA", false),
        quoted("HTTP_PROXY_TRUSTED_CA", ""),
        quoted("SHOULD_CONFIGURE_CUSTOM_CA_TRUST", false),
        quoted("CUSTOM_CA_TRUST_COUNT", 0),
        Line::Blank,
        quoted("IS_KRUSTLET", false),
        quoted("GPU_NEEDS_FABRIC_MANAGER", false),
        quoted("NEEDS_DOCKER_LOGIN", false),
        quoted("IPV6_DUAL_STACK_ENABLED", false),
        quoted(
            "OUTBOUND_COMMAND",
            "curl -v --insecure --proxy-insecure https://mcr.microsoft.com/v2/",
        ),
        quoted("ENABLE_UNATTENDED_UPGRADES", false),
        // Only kubenet clusters need it, and Karpenter does not support kubenet.
        quoted("ENSURE_NO_DUPE_PROMISCUOUS_BRIDGE", false),
        quoted("SHOULD_CONFIG_SWAP_FILE", false),
        quoted("SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE", false),
        quoted("TARGET_CLOUD", "AzurePublicCloud"),
        quoted("TARGET_ENVIRONMENT", "AzurePublicCloud"),
        quoted("CUSTOM_ENV_JSON", ""),
        quoted("IS_CUSTOM_CLOUD", false),
        quoted(
            "CSE_HELPERS_FILEPATH",
            "/opt/azure/containers/provision_source.sh",
        ),
        quoted(
            "CSE_DISTRO_HELPERS_FILEPATH",
            "/opt/azure/containers/provision_source_distro.sh",
        ),
        quoted(
            "CSE_INSTALL_FILEPATH",
            "/opt/azure/containers/provision_installs.sh",
        ),
        quoted(
            "CSE_DISTRO_INSTALL_FILEPATH",
            "/opt/azure/containers/provision_installs_distro.sh",
        ),
        quoted(
            "CSE_CONFIG_FILEPATH",
            "/opt/azure/containers/provision_configs.sh",
        ),
        quoted("AZURE_PRIVATE_REGISTRY_SERVER", ""),
        quoted("HAS_CUSTOM_SEARCH_DOMAIN", false),
        quoted(
            "CUSTOM_SEARCH_DOMAIN_FILEPATH",
            "/opt/azure/containers/setup-custom-search-domains.sh",
        ),
        quoted("HTTP_PROXY_URLS", ""),
        quoted("HTTPS_PROXY_URLS", ""),
        quoted("NO_PROXY_URLS", ""),
        quoted("ENABLE_TLS_BOOTSTRAPPING", true),
        quoted("ENABLE_SECURE_TLS_BOOTSTRAPPING", false),
        quoted("ENABLE_KUBELET_SERVING_CERTIFICATE_ROTATION", false),
        quoted("DHCPV6_SERVICE_FILEPATH", ""),
        quoted("DHCPV6_CONFIG_FILEPATH", ""),
        quoted("THP_ENABLED", ""),
        quoted("THP_DEFRAG", ""),
        quoted(
            "SERVICE_PRINCIPAL_FILE_CONTENT",
            STANDARD.encode(SERVICE_PRINCIPAL),
        ),
        quoted("KUBELET_CLIENT_CONTENT", ""),
        quoted("KUBELET_CLIENT_CERT_CONTENT", ""),
        // The kubelet is configured by flags, not a config file.
        quoted("KUBELET_CONFIG_FILE_ENABLED", false),
        quoted("KUBELET_CONFIG_FILE_CONTENT", ""),
        quoted("SWAP_FILE_SIZE_MB", 0),
    ]
}

/// The node's own configuration: GPU driver, kernel, bootstrap credentials, kubelet and
/// containerd.
fn node_configuration_variables(node: &Node) -> Vec<Line> {
    let o = node.options;
    let driver = node.gpu_driver;
    let field = |f: fn(&GpuDriver) -> &'static str| driver.as_ref().map_or("", f);
    let flags = kubelet_flags(o, node.minor_version);
    vec![
        quoted("GPU_IMAGE_SHA", field(|d| d.image_sha)),
        quoted("GPU_DRIVER_VERSION", field(|d| d.version)),
        quoted("GPU_DRIVER_TYPE", field(|d| d.driver_type)),
        quoted("GPU_INSTANCE_PROFILE", ""),
        quoted("CUSTOM_SEARCH_DOMAIN_NAME", ""),
        quoted("CUSTOM_SEARCH_REALM_USER", ""),
        quoted("CUSTOM_SEARCH_REALM_PASSWORD", ""),
        quoted("MESSAGE_OF_THE_DAY", ""),
        quoted("HAS_KUBELET_DISK_TYPE", false),
        // Karpenter's node images all run cgroup v2.
        quoted("NEEDS_CGROUPV2", true),
        quoted("SYSCTL_CONTENT", STANDARD.encode(SYSCTL_CONFIG)),
        quoted("TLS_BOOTSTRAP_TOKEN", &o.tls_bootstrap_token),
        quoted("KUBELET_FLAGS", join_flags(&flags)),
        quoted("KUBELET_NODE_LABELS", node_labels(&o.labels)),
        quoted("AZURE_ENVIRONMENT_FILEPATH", ""),
        quoted("KUBE_CA_CRT", &o.ca_bundle),
        quoted(
            "CONTAINERD_CONFIG_CONTENT",
            STANDARD.encode(containerd_config(driver.is_some())),
        ),
        quoted("IS_KATA", false),
        quoted("MCR_REPOSITORY_BASE", "mcr.microsoft.com"),
        bare("ENABLE_IMDS_RESTRICTION", false),
        bare("INSERT_IMDS_RESTRICTION_RULE_TO_MANGLE_TABLE", false),
        bare("CSE_TIMEOUT", "15m"),
    ]
}

/// containerd's configuration: with a GPU driver, containers run under the NVIDIA runtime
/// (which the driver installation brings); otherwise under runc.
fn containerd_config(nvidia: bool) -> String {
    let (runtime, binary) = if nvidia {
        (
            "nvidia-container-runtime",
            "/usr/bin/nvidia-container-runtime",
        )
    } else {
        ("runc", "/usr/bin/runc")
    };
    CONTAINERD_CONFIG
        .replace("{runtime}", runtime)
        .replace("{binary}", binary)
}

/// A value as one shell word: as it is when the shell would read it so (every value node
/// images are normally given), else single-quoted. Upstream writes values unquoted, which
/// breaks the script for a resource group like `MC_rg(1)`.
fn shell_word(value: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "._-/:,=+@%".contains(c);
    if value.chars().all(plain) {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(format!("'{}'", value.replace('\'', r"'\''")))
    }
}

/// A value inside double quotes, with the characters the shell still interprets there
/// escaped; valid labels, flags and tokens hold none.
fn double_quoted(value: &str) -> Cow<'_, str> {
    if !value.contains(['\\', '"', '$', '`']) {
        return Cow::Borrowed(value);
    }
    let mut escaped = String::with_capacity(value.len() + 2);
    for c in value.chars() {
        if matches!(c, '\\' | '"' | '$' | '`') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    Cow::Owned(escaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words() {
        let cases = [
            ("", ""),
            ("eastus", "eastus"),
            (
                "https://acs-mirror.azureedge.net/x-v1.4.32.tgz",
                "https://acs-mirror.azureedge.net/x-v1.4.32.tgz",
            ),
            ("MC_rg(1)_eastus", "'MC_rg(1)_eastus'"),
            ("a b", "'a b'"),
            ("it's", r"'it'\''s'"),
        ];
        for (value, want) in cases {
            assert_eq!(shell_word(value), want, "{value}");
        }
    }

    #[test]
    fn double_quoted_values() {
        let cases = [
            ("", ""),
            (
                "--eviction-hard=memory.available<750Mi",
                "--eviction-hard=memory.available<750Mi",
            ),
            ("a\"b", r#"a\"b"#),
            ("$(reboot)", r"\$(reboot)"),
            ("`x`\\", r"\`x\`\\"),
        ];
        for (value, want) in cases {
            assert_eq!(double_quoted(value), want, "{value}");
        }
    }

    #[test]
    fn containerd_runtimes() {
        let runc = containerd_config(false);
        assert!(runc.contains("default_runtime_name = \"runc\"\n"));
        assert!(runc.contains("containerd.runtimes.runc.options]\n      BinaryName = \"/usr/bin/runc\"\n      SystemdCgroup = true\n"));
        let nvidia = containerd_config(true);
        assert!(nvidia.contains("default_runtime_name = \"nvidia-container-runtime\"\n"));
        assert!(nvidia.contains(
            "untrusted.options]\n      BinaryName = \"/usr/bin/nvidia-container-runtime\"\n"
        ));
        for config in [runc, nvidia] {
            assert!(!config.contains('{'), "every placeholder filled");
            assert!(config.ends_with("address = \"0.0.0.0:10257\"\n"));
        }
    }
}
