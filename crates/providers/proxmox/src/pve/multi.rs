//! A client per region, made from the clusters config: upstream's `proxmoxpool.ProxmoxPool`.

use std::collections::BTreeMap;
use std::time::Duration;

use karpenter_cloudprovider::http::{HttpClient, TlsOptions};

use super::client::PveClient;
use super::config::{Cluster, ClustersConfig, ConfigError};
use super::error::PveError;

impl PveClient {
    /// The client for the `index`th cluster of the config (from 1, for errors): its token
    /// files read, its certificates checked against its `ca_file`, or not at all when
    /// `insecure`, else against the system's roots; `timeout` per attempt.
    pub fn for_cluster(
        cluster: &Cluster,
        index: usize,
        timeout: Duration,
    ) -> Result<Self, PveError> {
        let credentials = cluster.credentials(index)?;
        let tls = if cluster.insecure {
            TlsOptions::InsecureSkipVerify
        } else if let Some(path) = cluster.ca_file() {
            let pem = std::fs::read(&path).map_err(|e| ConfigError::Read {
                path: path.display().to_string(),
                reason: format!("cluster #{index}: ca_file: {e}"),
            })?;
            TlsOptions::CustomRoots(pem)
        } else {
            TlsOptions::SystemRoots
        };
        let http = HttpClient::with_tls(timeout, tls).map_err(|e| {
            PveError::Request(format!("cluster #{index} ({}): {e}", cluster.region))
        })?;
        PveClient::new(&cluster.url, credentials, http)
    }
}

/// The clients of every configured cluster, by region.
#[derive(Clone, Debug)]
pub struct PvePool {
    clients: BTreeMap<String, PveClient>,
}

impl PvePool {
    /// A client per cluster of the config; an error when it names none (upstream's
    /// `ErrClustersNotFound`) or a cluster's credentials or CA cannot be read.
    pub fn from_config(config: &ClustersConfig, timeout: Duration) -> Result<Self, PveError> {
        if config.clusters.is_empty() {
            return Err(PveError::NoClusters);
        }
        let clients = config
            .clusters
            .iter()
            .enumerate()
            .map(|(i, c)| Ok((c.region.clone(), PveClient::for_cluster(c, i + 1, timeout)?)))
            .collect::<Result<_, PveError>>()?;
        Ok(Self { clients })
    }

    /// A pool of these clients (tests, or clients made otherwise).
    pub fn new(clients: impl IntoIterator<Item = (String, PveClient)>) -> Self {
        Self {
            clients: clients.into_iter().collect(),
        }
    }

    /// The regions, sorted.
    pub fn regions(&self) -> Vec<&str> {
        self.clients.keys().map(String::as_str).collect()
    }

    /// The client of `region` (upstream's `ErrRegionNotFound` when there is none).
    pub fn get(&self, region: &str) -> Result<&PveClient, PveError> {
        self.clients
            .get(region)
            .ok_or_else(|| PveError::RegionNotFound(region.to_string()))
    }

    /// Every region's client.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &PveClient)> {
        self.clients.iter().map(|(r, c)| (r.as_str(), c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pve::config::Credentials;

    #[test]
    fn one_client_per_region_and_unknown_regions_are_errors() {
        let cfg = ClustersConfig::parse(
            "clusters:\n  - url: https://127.0.0.1:8006/api2/json\n    token_id: user!token-id\n    token_secret: secret\n    region: cluster-1\n  - url: https://127.0.0.2:8006/api2/json\n    insecure: true\n    username: root@pam\n    password: secret\n    region: cluster-2\n",
        )
        .unwrap();
        let pool = PvePool::from_config(&cfg, Duration::from_secs(5)).unwrap();
        assert_eq!(pool.regions(), ["cluster-1", "cluster-2"]);
        assert_eq!(
            pool.get("cluster-2").unwrap().url(),
            "https://127.0.0.2:8006/api2/json"
        );
        assert!(matches!(
            pool.get("cluster-2").unwrap().credentials(),
            Credentials::Password { .. }
        ));
        assert_eq!(
            pool.get("cluster-3").unwrap_err(),
            PveError::RegionNotFound("cluster-3".into())
        );
        assert_eq!(
            PvePool::from_config(&ClustersConfig::default(), Duration::from_secs(5)).unwrap_err(),
            PveError::NoClusters
        );
    }

    #[test]
    fn a_ca_file_that_cannot_be_used_is_an_error_naming_the_cluster() {
        let missing = ClustersConfig::parse(
            "clusters:\n  - url: https://a\n    region: a\n    token_id: u@pam!k\n    token_secret: s\n    ca_file: /nonexistent/ca.pem\n",
        )
        .unwrap();
        let err = PvePool::from_config(&missing, Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("reading /nonexistent/ca.pem: cluster #1: ca_file: "),
            "{err}"
        );
        let dir = std::env::temp_dir().join(format!("pve-multi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, "not a certificate").unwrap();
        let bad = ClustersConfig::parse(&format!(
            "clusters:\n  - url: https://a\n    region: a\n    token_id: u@pam!k\n    token_secret: s\n    ca_file: {}\n",
            ca.display()
        ))
        .unwrap();
        let err = PvePool::from_config(&bad, Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cluster #1 (a): ") && err.contains("no CERTIFICATE"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
