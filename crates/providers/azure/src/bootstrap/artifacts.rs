//! Where the node downloads what its image may lack: the Kubernetes node binaries, the ACR
//! credential provider and the CNI plugins, from AKS's mirror.

use super::Arch;

const MIRROR: &str = "https://acs-mirror.azureedge.net";

/// The Azure CNI and CNI plugin releases node images install from.
const AZURE_CNI_VERSION: &str = "1.4.32";
const CNI_PLUGINS_VERSION: &str = "1.1.1";

/// The kubelet and kubectl of `version`; empty from 1.34, whose images carry them at a path
/// the provisioning scripts know.
pub(super) fn kube_binary_url(version: &str, minor: u64, arch: Arch) -> String {
    if minor >= 34 {
        return String::new();
    }
    format!(
        "{MIRROR}/kubernetes/v{version}/binaries/kubernetes-node-linux-{}.tar.gz",
        arch.as_str()
    )
}

/// Whether the kubelet pulls from ACR with the out-of-tree credential provider: from 1.30
/// (1.29 could, but upstream never tested it there).
pub(super) fn uses_credential_provider(minor: u64) -> bool {
    minor >= 30
}

/// The out-of-tree ACR credential provider for the minor version, when it is used. It is
/// released with cloud-provider-azure, one pinned release per Kubernetes minor.
pub(super) fn credential_provider_url(minor: u64, arch: Arch) -> Option<String> {
    if !uses_credential_provider(minor) {
        return None;
    }
    let release = match minor {
        30 => "1.30.12",
        31 => "1.31.6",
        32 => "1.32.5",
        _ => "1.33.0",
    };
    Some(format!(
        "{MIRROR}/cloud-provider-azure/v{release}/binaries/azure-acr-credential-provider-linux-{}-v{release}.tar.gz",
        arch.as_str()
    ))
}

/// The Azure CNI plugin.
pub(super) fn vnet_cni_plugins_url(arch: Arch) -> String {
    format!(
        "{MIRROR}/azure-cni/v{AZURE_CNI_VERSION}/binaries/azure-vnet-cni-linux-{}-v{AZURE_CNI_VERSION}.tgz",
        arch.as_str()
    )
}

/// The reference CNI plugins.
pub(super) fn cni_plugins_url(arch: Arch) -> String {
    format!(
        "{MIRROR}/cni-plugins/v{CNI_PLUGINS_VERSION}/binaries/cni-plugins-linux-{}-v{CNI_PLUGINS_VERSION}.tgz",
        arch.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::super::parse::minor_version;
    use super::*;

    /// Upstream's `TestKubeBinaryURL`.
    #[test]
    fn kube_binary_urls() {
        let url = |v: &str| {
            format!(
                "https://acs-mirror.azureedge.net/kubernetes/v{v}/binaries/kubernetes-node-linux-amd64.tar.gz"
            )
        };
        let cases = [
            ("1.24.5", url("1.24.5")),
            ("1.25.2", url("1.25.2")),
            ("1.26.0", url("1.26.0")),
            ("1.27.1", url("1.27.1")),
            ("1.33.7", url("1.33.7")),
            ("1.34.0", String::new()),
            ("1.35.5", String::new()),
        ];
        for (version, want) in cases {
            let minor = minor_version(version).unwrap();
            assert_eq!(
                kube_binary_url(version, minor, Arch::Amd64),
                want,
                "{version}"
            );
        }
    }

    /// Upstream's `TestGetCredentialProviderURL`.
    #[test]
    fn credential_provider_urls() {
        let url = |release: &str, arch: &str| {
            format!(
                "https://acs-mirror.azureedge.net/cloud-provider-azure/v{release}/binaries/azure-acr-credential-provider-linux-{arch}-v{release}.tar.gz"
            )
        };
        let cases = [
            ("1.33.0", Arch::Amd64, Some(url("1.33.0", "amd64"))),
            ("1.32.0", Arch::Amd64, Some(url("1.32.5", "amd64"))),
            ("1.31.0", Arch::Amd64, Some(url("1.31.6", "amd64"))),
            ("1.30.2", Arch::Amd64, Some(url("1.30.12", "amd64"))),
            ("1.30.0", Arch::Amd64, Some(url("1.30.12", "amd64"))),
            ("1.30.0", Arch::Arm64, Some(url("1.30.12", "arm64"))),
            ("1.35.1", Arch::Amd64, Some(url("1.33.0", "amd64"))),
            ("1.29.2", Arch::Amd64, None),
            ("1.29.0", Arch::Amd64, None),
            ("1.29.0", Arch::Arm64, None),
            ("1.28.7", Arch::Amd64, None),
        ];
        for (version, arch, want) in cases {
            let minor = minor_version(version).unwrap();
            assert_eq!(
                credential_provider_url(minor, arch),
                want,
                "{version} {arch:?}"
            );
        }
    }

    #[test]
    fn cni_urls_follow_the_architecture() {
        assert_eq!(
            vnet_cni_plugins_url(Arch::Arm64),
            "https://acs-mirror.azureedge.net/azure-cni/v1.4.32/binaries/azure-vnet-cni-linux-arm64-v1.4.32.tgz"
        );
        assert_eq!(
            cni_plugins_url(Arch::Amd64),
            "https://acs-mirror.azureedge.net/cni-plugins/v1.1.1/binaries/cni-plugins-linux-amd64-v1.1.1.tgz"
        );
    }
}
