//! EKS `DescribeCluster`: what the controller learns about its cluster when the settings do
//! not say — the API server endpoint, the CA bundle, the service CIDR (and from it the
//! cluster DNS address and the IP family), and the Kubernetes version, as upstream does.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::Value;

use crate::http::{AwsError, AwsHttp, Result};

/// What `DescribeCluster` says of a cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The API server's URL.
    pub endpoint: Option<String>,
    /// The CA bundle, base64.
    pub certificate_authority: Option<String>,
    /// The IPv4 service CIDR (`10.100.0.0/16`).
    pub service_ipv4_cidr: Option<String>,
    /// The IPv6 service CIDR (`fd30:1c53:5f8a::/108`).
    pub service_ipv6_cidr: Option<String>,
    /// `ipv4` or `ipv6`.
    pub ip_family: Option<String>,
    /// The control plane's Kubernetes version (`1.33`).
    pub version: Option<String>,
}

impl ClusterInfo {
    /// The service CIDR nodes get: IPv4 when the cluster has one, else IPv6 (upstream's order).
    pub fn service_cidr(&self) -> Option<&str> {
        self.service_ipv4_cidr
            .as_deref()
            .or(self.service_ipv6_cidr.as_deref())
    }
}

/// Reads EKS clusters.
pub trait ClusterApi: Send + Sync + 'static {
    /// `DescribeCluster` for `name`.
    fn describe_cluster(&self, name: String) -> impl Future<Output = Result<ClusterInfo>> + Send;
}

/// EKS over its REST-JSON API.
#[derive(Clone)]
pub struct EksClient {
    http: AwsHttp,
}

impl EksClient {
    /// A client sending through `http`.
    pub fn new(http: AwsHttp) -> Self {
        Self { http }
    }
}

impl ClusterApi for EksClient {
    async fn describe_cluster(&self, name: String) -> Result<ClusterInfo> {
        let body = self
            .http
            .send(
                "eks",
                "GET",
                &format!("/clusters/{name}"),
                &[],
                &[("accept", "application/json")],
                Vec::new(),
            )
            .await?;
        parse_cluster(&body)
    }
}

/// Reads a `DescribeCluster` answer.
pub fn parse_cluster(body: &[u8]) -> Result<ClusterInfo> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| AwsError::Parse(format!("DescribeCluster: {e}")))?;
    let cluster = value
        .get("cluster")
        .ok_or_else(|| AwsError::Parse("DescribeCluster: no cluster in the answer".into()))?;
    let text = |path: &[&str]| {
        path.iter()
            .try_fold(cluster, |v, k| v.get(k))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    Ok(ClusterInfo {
        endpoint: text(&["endpoint"]),
        certificate_authority: text(&["certificateAuthority", "data"]),
        service_ipv4_cidr: text(&["kubernetesNetworkConfig", "serviceIpv4Cidr"]),
        service_ipv6_cidr: text(&["kubernetesNetworkConfig", "serviceIpv6Cidr"]),
        ip_family: text(&["kubernetesNetworkConfig", "ipFamily"]),
        version: text(&["version"]),
    })
}

/// The cluster DNS address EKS gives a service CIDR: the tenth address of an IPv4 CIDR
/// (`10.100.0.10`), the `a` (tenth) address of an IPv6 one (`fd30:1c53:5f8a::a`). `None` when
/// the CIDR does not read.
pub fn cluster_dns_ip(service_cidr: &str) -> Option<IpAddr> {
    let (network, bits) = service_cidr.trim().split_once('/')?;
    let bits: u32 = bits.parse().ok()?;
    match network.parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) if bits <= 30 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            Some(IpAddr::V4(Ipv4Addr::from((u32::from(v4) & mask) + 10)))
        }
        IpAddr::V6(v6) if bits <= 124 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            Some(IpAddr::V6(Ipv6Addr::from((u128::from(v6) & mask) + 10)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_cluster_answer_is_read() {
        let body =
            br#"{"cluster":{"name":"test","endpoint":"https://ABC.gr7.us-east-1.eks.amazonaws.com",
            "certificateAuthority":{"data":"Y2EK"},"version":"1.33",
            "kubernetesNetworkConfig":{"serviceIpv4Cidr":"172.20.0.0/16","ipFamily":"ipv4"}}}"#;
        let info = parse_cluster(body).unwrap();
        assert_eq!(
            info,
            ClusterInfo {
                endpoint: Some("https://ABC.gr7.us-east-1.eks.amazonaws.com".into()),
                certificate_authority: Some("Y2EK".into()),
                service_ipv4_cidr: Some("172.20.0.0/16".into()),
                service_ipv6_cidr: None,
                ip_family: Some("ipv4".into()),
                version: Some("1.33".into()),
            }
        );
        assert_eq!(info.service_cidr(), Some("172.20.0.0/16"));
        let v6 = parse_cluster(
            br#"{"cluster":{"kubernetesNetworkConfig":{"serviceIpv6Cidr":"fd30:1c53:5f8a::/108","ipFamily":"ipv6"}}}"#,
        )
        .unwrap();
        assert_eq!(v6.service_cidr(), Some("fd30:1c53:5f8a::/108"));
        assert!(parse_cluster(b"{}").is_err());
    }

    #[test]
    fn cluster_dns_is_the_tenth_address() {
        assert_eq!(
            cluster_dns_ip("10.100.0.0/16").unwrap().to_string(),
            "10.100.0.10"
        );
        assert_eq!(
            cluster_dns_ip("172.20.0.0/16").unwrap().to_string(),
            "172.20.0.10"
        );
        assert_eq!(
            cluster_dns_ip("fd30:1c53:5f8a::/108").unwrap().to_string(),
            "fd30:1c53:5f8a::a"
        );
        assert_eq!(cluster_dns_ip("nonsense"), None);
        assert_eq!(cluster_dns_ip("10.0.0.0/32"), None);
    }
}
