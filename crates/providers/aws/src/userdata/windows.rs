//! Windows: a PowerShell block that runs the user's commands, then `Start-EKSBootstrap.ps1`
//! with the cluster, the CA, the kubelet flags and the cluster DNS.

use super::Bootstrap;
use super::kubelet_args::{cluster_dns, kubelet_extra_args};

/// The Windows user data.
pub fn render(b: &Bootstrap) -> String {
    let mut s = String::from("<powershell>\n");
    if let Some(custom) = b.custom.as_deref().filter(|c| !c.is_empty()) {
        s.push_str(custom);
        s.push('\n');
    }
    s.push_str(
        "[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n",
    );
    s.push_str(&format!(
        "& $EKSBootstrapScriptFile -EKSClusterName '{}' -APIServerEndpoint '{}'",
        b.cluster_name, b.cluster_endpoint
    ));
    if let Some(ca) = &b.ca_bundle {
        s.push_str(&format!(" -Base64ClusterCA '{ca}'"));
    }
    let args = kubelet_extra_args(b);
    if !args.is_empty() {
        s.push_str(&format!(" -KubeletExtraArgs '{}'", args.join(" ")));
    }
    if let Some(ip) = cluster_dns(b) {
        s.push_str(&format!(" -DNSClusterIP '{ip}'"));
    }
    s.push_str("\n</powershell>");
    s
}
