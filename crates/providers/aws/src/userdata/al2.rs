//! Amazon Linux 2: a MIME multipart document whose last part runs `/etc/eks/bootstrap.sh`
//! with the cluster, the CA, the cluster DNS (and `--ip-family ipv6` when that address is
//! IPv6), and the kubelet flags; the user's own parts (a MIME document or a script) run first.

use super::kubelet_args::{cluster_dns, kubelet_extra_args, max_pods};
use super::{Bootstrap, mime_document, mime_parts};

/// The bootstrap script.
fn bootstrap_script(b: &Bootstrap) -> String {
    let mut s = String::from("#!/bin/bash -xe\n");
    s.push_str("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n");
    s.push_str(&format!(
        "/etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}'",
        b.cluster_name, b.cluster_endpoint
    ));
    if let Some(ca) = &b.ca_bundle {
        s.push_str(&format!(" --b64-cluster-ca '{ca}'"));
    }
    let dns = cluster_dns(b);
    // An IPv6 cluster is one whose DNS service has an IPv6 address, as upstream decides.
    if dns.is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok()) {
        s.push_str(" \\\n--ip-family ipv6");
    }
    if let Some(ip) = dns {
        s.push_str(&format!(" \\\n--dns-cluster-ip '{ip}'"));
    }
    if max_pods(b).is_some() {
        // The kubelet flag below sets it; the script's own ENI table must not.
        s.push_str(" \\\n--use-max-pods false");
    }
    let args = kubelet_extra_args(b);
    if !args.is_empty() {
        s.push_str(&format!(" \\\n--kubelet-extra-args '{}'", args.join(" ")));
    }
    if b.instance_store_raid0 {
        s.push_str(" \\\n--local-disks raid0");
    }
    s
}

/// The AL2 user data.
pub fn render(b: &Bootstrap) -> String {
    let mut parts = Vec::new();
    if let Some(custom) = b.custom.as_deref().filter(|c| !c.trim().is_empty()) {
        let trimmed = custom.trim_start();
        if trimmed.starts_with("MIME-Version:") || trimmed.starts_with("Content-Type:") {
            parts.extend(mime_parts(custom));
        } else {
            parts.push(shell_part(custom));
        }
    }
    parts.push(shell_part(&bootstrap_script(b)));
    mime_document(&parts).replace('\r', "")
}

fn shell_part(script: &str) -> String {
    format!(
        "Content-Type: text/x-shellscript; charset=\"us-ascii\"\n\n{}",
        script.trim_end_matches('\n')
    )
}
