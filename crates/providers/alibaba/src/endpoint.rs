//! Where each Alibaba Cloud API answers, resolved as the SDKs resolve it: a per-product table
//! of special regions first, then the regional rule `<product>[-vpc].<region>.aliyuncs.com`,
//! with an explicit endpoint per product overriding both (a proxy, a private endpoint, a mock
//! in tests).
//!
//! | product | API version | public | `network = vpc` | override |
//! |---|---|---|---|---|
//! | ECS | 2014-05-26 | `ecs.<region>.aliyuncs.com` (`ecs-cn-hangzhou.aliyuncs.com` in cn-hangzhou) | `ecs-vpc.<region>.aliyuncs.com` | `ALIBABA_CLOUD_ECS_ENDPOINT` |
//! | VPC | 2016-04-28 | `vpc.<region>.aliyuncs.com` (`vpc.aliyuncs.com` in cn-hangzhou) | `vpc-vpc.<region>.aliyuncs.com` | `ALIBABA_CLOUD_VPC_ENDPOINT` |
//! | STS | 2015-04-01 | `sts.<region>.aliyuncs.com` (`sts.aliyuncs.com` without a region) | `sts-vpc.<region>.aliyuncs.com` | `ALIBABA_CLOUD_STS_ENDPOINT` |
//! | ACK (CS) | 2015-12-15 | `cs.<region>.aliyuncs.com` | `cs-vpc.<region>.aliyuncs.com` | `ALIBABA_CLOUD_CS_ENDPOINT` |
//!
//! The network is `ALIBABA_CLOUD_NETWORK` (`public` or `vpc`, the setting behind the
//! cloudpilot-ai provider's `--alibaba-cloud-network`); the credentials library's
//! `ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED=true` and `ALIBABA_CLOUD_STS_REGION` steer STS alone.
//! The AliyunContainerService provider's unprefixed `ECS_ENDPOINT`, `VPC_ENDPOINT`,
//! `STS_ENDPOINT` and `CS_ENDPOINT` are read too, after the prefixed names.

use std::collections::BTreeMap;

/// An Alibaba Cloud API the provider calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Product {
    /// Elastic Compute Service (RPC).
    Ecs,
    /// Virtual Private Cloud: vSwitches (RPC).
    Vpc,
    /// Security Token Service: temporary credentials (RPC).
    Sts,
    /// Container Service for Kubernetes, ACK (ROA).
    Cs,
}

impl Product {
    /// Every product.
    pub const ALL: [Product; 4] = [Product::Ecs, Product::Vpc, Product::Sts, Product::Cs];

    /// The product code in endpoint names (`ecs`).
    pub fn code(self) -> &'static str {
        match self {
            Product::Ecs => "ecs",
            Product::Vpc => "vpc",
            Product::Sts => "sts",
            Product::Cs => "cs",
        }
    }

    /// The API version sent as `x-acs-version` (`Version` in RPC v1).
    pub fn version(self) -> &'static str {
        match self {
            Product::Ecs => "2014-05-26",
            Product::Vpc => "2016-04-28",
            Product::Sts => "2015-04-01",
            Product::Cs => "2015-12-15",
        }
    }

    /// The settings that override the endpoint, first found wins.
    pub fn endpoint_settings(self) -> &'static [&'static str] {
        match self {
            Product::Ecs => &["ALIBABA_CLOUD_ECS_ENDPOINT", "ECS_ENDPOINT"],
            Product::Vpc => &["ALIBABA_CLOUD_VPC_ENDPOINT", "VPC_ENDPOINT"],
            Product::Sts => &["ALIBABA_CLOUD_STS_ENDPOINT", "STS_ENDPOINT"],
            Product::Cs => &["ALIBABA_CLOUD_CS_ENDPOINT", "CS_ENDPOINT"],
        }
    }

    /// The SDK's endpoint table for the public network: regions whose endpoint is not the
    /// regional rule's. Only the regions a customer can create clusters in are listed; the
    /// SDK's internal and test regions are not.
    fn special_region(self, region: &str) -> Option<&'static str> {
        let finance_or_hangzhou = matches!(
            region,
            "cn-hangzhou" | "cn-shanghai-finance-1" | "cn-shenzhen-finance-1"
        );
        match self {
            Product::Ecs if finance_or_hangzhou => Some("ecs-cn-hangzhou.aliyuncs.com"),
            Product::Ecs if region == "cn-north-2-gov-1" => Some("ecs.aliyuncs.com"),
            Product::Vpc if finance_or_hangzhou || region == "cn-north-2-gov-1" => {
                Some("vpc.aliyuncs.com")
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for Product {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// Which endpoints to use: the internet-facing ones, or those reachable only from inside a VPC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Network {
    /// `ecs.<region>.aliyuncs.com`.
    #[default]
    Public,
    /// `ecs-vpc.<region>.aliyuncs.com`: no internet access needed.
    Vpc,
}

impl std::str::FromStr for Network {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "public" => Ok(Network::Public),
            "vpc" => Ok(Network::Vpc),
            other => Err(format!("network {other:?}: expected \"public\" or \"vpc\"")),
        }
    }
}

/// The endpoints of one region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// The region (`cn-hangzhou`).
    pub region: String,
    /// Public or VPC endpoints.
    pub network: Network,
    /// STS's network, which the credentials library lets be VPC on its own.
    pub sts_network: Network,
    /// STS's region when it differs from the cluster's (`ALIBABA_CLOUD_STS_REGION`).
    pub sts_region: Option<String>,
    overrides: BTreeMap<Product, String>,
}

impl Endpoints {
    /// The endpoints of `region` on `network`.
    pub fn new(region: impl Into<String>, network: Network) -> Self {
        Self {
            region: region.into(),
            network,
            sts_network: network,
            sts_region: None,
            overrides: BTreeMap::new(),
        }
    }

    /// The endpoints the settings describe for `region` (see the module's table); `get` reads a
    /// setting (the environment in the binary, a map in tests).
    pub fn from_env(region: &str, get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let get = |k: &str| {
            get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let network: Network = get("ALIBABA_CLOUD_NETWORK")
            .unwrap_or_default()
            .parse()
            .map_err(|e| format!("ALIBABA_CLOUD_NETWORK: {e}"))?;
        let mut endpoints = Self::new(region, network);
        if get("ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            endpoints.sts_network = Network::Vpc;
        }
        endpoints.sts_region = get("ALIBABA_CLOUD_STS_REGION");
        for product in Product::ALL {
            if let Some(url) = product.endpoint_settings().iter().find_map(|k| get(k)) {
                endpoints = endpoints.with_override(product, url);
            }
        }
        Ok(endpoints)
    }

    /// The same endpoints with `product` at `endpoint` (a host, or a URL with its scheme).
    pub fn with_override(mut self, product: Product, endpoint: impl Into<String>) -> Self {
        self.overrides.insert(product, endpoint.into());
        self
    }

    /// The same endpoints with every product at `endpoint` (a mock in tests).
    pub fn all_at(mut self, endpoint: &str) -> Self {
        for product in Product::ALL {
            self.overrides.insert(product, endpoint.to_string());
        }
        self
    }

    /// The host name the SDK would resolve for `product`, overrides aside.
    pub fn resolved_host(&self, product: Product) -> String {
        let (region, network) = match product {
            Product::Sts => (
                self.sts_region.as_deref().unwrap_or(&self.region),
                self.sts_network,
            ),
            _ => (self.region.as_str(), self.network),
        };
        let code = product.code();
        if region.is_empty() {
            // Without a region the SDKs fall back to the central endpoint.
            return format!("{code}.aliyuncs.com");
        }
        match network {
            Network::Public => product
                .special_region(region)
                .map(str::to_string)
                .unwrap_or_else(|| format!("{code}.{region}.aliyuncs.com")),
            // The SDK's table takes precedence over the network, which would send a cluster in
            // cn-hangzhou asking for VPC endpoints to the public one; every region has its
            // `-vpc` endpoint, so the rule applies throughout.
            Network::Vpc => format!("{code}-vpc.{region}.aliyuncs.com"),
        }
    }

    /// The base URL of `product`: the override as given (`https://` added to a bare host), else
    /// `https://` and the resolved host.
    pub fn url(&self, product: Product) -> String {
        match self.overrides.get(&product) {
            Some(o) if o.contains("://") => o.trim_end_matches('/').to_string(),
            Some(o) => format!("https://{}", o.trim_end_matches('/')),
            None => format!("https://{}", self.resolved_host(product)),
        }
    }

    /// The `host` header's value for `product` (with the port of an override that has one).
    pub fn host(&self, product: Product) -> String {
        let url = self.url(product);
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        rest.split('/').next().unwrap_or_default().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn regional_endpoints_as_the_sdk_resolves_them() {
        let e = Endpoints::new("cn-shanghai", Network::Public);
        assert_eq!(e.url(Product::Ecs), "https://ecs.cn-shanghai.aliyuncs.com");
        assert_eq!(e.url(Product::Vpc), "https://vpc.cn-shanghai.aliyuncs.com");
        assert_eq!(e.url(Product::Sts), "https://sts.cn-shanghai.aliyuncs.com");
        assert_eq!(e.url(Product::Cs), "https://cs.cn-shanghai.aliyuncs.com");
        let hangzhou = Endpoints::new("cn-hangzhou", Network::Public);
        assert_eq!(hangzhou.host(Product::Ecs), "ecs-cn-hangzhou.aliyuncs.com");
        assert_eq!(hangzhou.host(Product::Vpc), "vpc.aliyuncs.com");
        assert_eq!(hangzhou.host(Product::Cs), "cs.cn-hangzhou.aliyuncs.com");
        assert_eq!(
            Endpoints::new("cn-north-2-gov-1", Network::Public).host(Product::Ecs),
            "ecs.aliyuncs.com"
        );
        assert_eq!(
            Endpoints::new("", Network::Public).host(Product::Sts),
            "sts.aliyuncs.com"
        );
    }

    #[test]
    fn vpc_endpoints_when_asked_for() {
        let e = Endpoints::new("cn-hangzhou", Network::Vpc);
        assert_eq!(e.host(Product::Ecs), "ecs-vpc.cn-hangzhou.aliyuncs.com");
        assert_eq!(e.host(Product::Vpc), "vpc-vpc.cn-hangzhou.aliyuncs.com");
        assert_eq!(e.host(Product::Sts), "sts-vpc.cn-hangzhou.aliyuncs.com");
        assert_eq!(e.host(Product::Cs), "cs-vpc.cn-hangzhou.aliyuncs.com");
    }

    #[test]
    fn settings_choose_the_network_and_override_endpoints() {
        let e = Endpoints::from_env(
            "ap-southeast-1",
            env(&[
                ("ALIBABA_CLOUD_NETWORK", "vpc"),
                ("ALIBABA_CLOUD_ECS_ENDPOINT", "http://127.0.0.1:8080/"),
                ("VPC_ENDPOINT", "vpc.example.internal"),
                ("ALIBABA_CLOUD_STS_REGION", "cn-shanghai"),
            ]),
        )
        .unwrap();
        assert_eq!(e.url(Product::Ecs), "http://127.0.0.1:8080");
        assert_eq!(e.host(Product::Ecs), "127.0.0.1:8080");
        assert_eq!(e.url(Product::Vpc), "https://vpc.example.internal");
        assert_eq!(e.host(Product::Sts), "sts-vpc.cn-shanghai.aliyuncs.com");
        assert_eq!(e.host(Product::Cs), "cs-vpc.ap-southeast-1.aliyuncs.com");

        let sts_only = Endpoints::from_env(
            "eu-central-1",
            env(&[("ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED", "true")]),
        )
        .unwrap();
        assert_eq!(
            sts_only.host(Product::Sts),
            "sts-vpc.eu-central-1.aliyuncs.com"
        );
        assert_eq!(sts_only.host(Product::Ecs), "ecs.eu-central-1.aliyuncs.com");

        let prefixed_first = Endpoints::from_env(
            "cn-beijing",
            env(&[
                ("ALIBABA_CLOUD_CS_ENDPOINT", "cs.one"),
                ("CS_ENDPOINT", "cs.two"),
            ]),
        )
        .unwrap();
        assert_eq!(prefixed_first.host(Product::Cs), "cs.one");

        let err = Endpoints::from_env("cn-beijing", env(&[("ALIBABA_CLOUD_NETWORK", "intranet")]))
            .unwrap_err();
        assert!(
            err.contains("ALIBABA_CLOUD_NETWORK") && err.contains("vpc"),
            "{err}"
        );
    }

    #[test]
    fn every_product_has_its_api_version() {
        let versions: Vec<_> = Product::ALL.iter().map(|p| p.version()).collect();
        assert_eq!(
            versions,
            ["2014-05-26", "2016-04-28", "2015-04-01", "2015-12-15"]
        );
    }
}
