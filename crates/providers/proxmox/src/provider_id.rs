//! This provider's providerIDs: `proxmox://<region>/<vmid>`, as upstream's nodes register them
//! (the kubelet's `--provider-id`, set by the node's cloud-init).

/// The scheme of this provider's providerIDs.
pub const PREFIX: &str = "proxmox://";

/// `proxmox://<region>/<vmid>`.
pub fn format(region: &str, vmid: u32) -> String {
    format!("{PREFIX}{region}/{vmid}")
}

/// The region and VM id of a providerID this provider made.
pub fn parse(id: &str) -> Option<(&str, u32)> {
    let (region, vmid) = id.strip_prefix(PREFIX)?.split_once('/')?;
    Some((region, vmid.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids() {
        assert_eq!(format("pve", 20001), "proxmox://pve/20001");
        let cases = [
            ("proxmox://pve/20001", Some(("pve", 20001))),
            ("proxmox://cluster-1/100", Some(("cluster-1", 100))),
            ("proxmox:///100", Some(("", 100))),
            ("proxmox://pve/x", None),
            ("proxmox://pve", None),
            ("aws:///us-east-1a/i-1", None),
            ("", None),
        ];
        for (id, want) in cases {
            assert_eq!(parse(id), want, "{id}");
        }
    }
}
