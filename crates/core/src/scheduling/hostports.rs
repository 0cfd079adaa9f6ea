//! Host ports a pod binds, and whether two pods' ports collide on one node.

use k8s_openapi::api::core::v1::{Pod, PodSpec};

/// One host port binding.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// The host IP (`0.0.0.0` when unspecified, meaning every address).
    pub ip: String,
    /// `TCP` (the default), `UDP` or `SCTP`.
    pub protocol: String,
    /// The port.
    pub port: i32,
}

const ANY_IP: &str = "0.0.0.0";

impl HostPort {
    /// Whether both bind the same port: same protocol and port, and the same IP or one of them
    /// binding every address.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == ANY_IP || other.ip == ANY_IP)
    }
}

/// The host ports of a pod's containers (init containers do not hold theirs).
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    spec_host_ports(pod.spec.as_ref())
}

/// The host ports of a pod spec's containers (see [`host_ports`]).
pub fn spec_host_ports(spec: Option<&PodSpec>) -> Vec<HostPort> {
    spec.into_iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|p| *p > 0)?;
            let ip = p
                .host_ip
                .clone()
                .filter(|ip| !ip.is_empty() && ip != "::")
                .unwrap_or_else(|| ANY_IP.to_string());
            Some(HostPort {
                ip,
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                port,
            })
        })
        .collect()
}

/// The first port in `incoming` that collides with one in `used`.
pub fn first_conflict<'a>(incoming: &'a [HostPort], used: &[HostPort]) -> Option<&'a HostPort> {
    incoming
        .iter()
        .find(|p| used.iter().any(|u| u.conflicts(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(ip: &str, protocol: &str, port: i32) -> HostPort {
        HostPort {
            ip: ip.into(),
            protocol: protocol.into(),
            port,
        }
    }

    #[test]
    fn conflicts() {
        let cases = [
            (hp("0.0.0.0", "TCP", 80), hp("10.0.0.1", "TCP", 80), true),
            (hp("10.0.0.1", "TCP", 80), hp("10.0.0.1", "TCP", 80), true),
            (hp("10.0.0.1", "TCP", 80), hp("10.0.0.2", "TCP", 80), false),
            (hp("0.0.0.0", "TCP", 80), hp("0.0.0.0", "UDP", 80), false),
            (hp("0.0.0.0", "TCP", 80), hp("0.0.0.0", "TCP", 8080), false),
        ];
        for (a, b, want) in cases {
            assert_eq!(a.conflicts(&b), want, "{a:?} {b:?}");
            assert_eq!(b.conflicts(&a), want, "symmetric");
        }
    }
}
