//! Where each Huawei Cloud API answers, resolved as huaweicloud-sdk-go-v3 resolves it for the
//! services upstream builds (`services/{cce/v3,ecs/v2,vpc/v2,bss/v2}/region/region.go`, and
//! for IAM the table its credentials use, `core/auth/internal/iam_endpoint.go`):
//!
//! | service | endpoint | exceptions | override |
//! |---|---|---|---|
//! | CCE | `https://cce.<region>.myhuaweicloud.com` | `cce.eu-west-101.myhuaweicloud.eu` | `HUAWEICLOUD_SDK_REGION_CCE_<REGION>` |
//! | ECS | `https://ecs.<region>.myhuaweicloud.com` | | `HUAWEICLOUD_SDK_REGION_ECS_<REGION>` |
//! | VPC | `https://vpc.<region>.myhuaweicloud.com` | | `HUAWEICLOUD_SDK_REGION_VPC_<REGION>` |
//! | BSS | `https://bss.myhuaweicloud.com`, every region | | `HUAWEICLOUD_BSS_ENDPOINT` (upstream's), then `HUAWEICLOUD_SDK_REGION_BSS_<REGION>` |
//! | IAM | `https://iam.<region>.myhuaweicloud.com` where the SDK lists one, else the global `https://iam.myhuaweicloud.com` | `iam.eu-west-101.myhuaweicloud.eu` | `HUAWEICLOUD_SDK_IAM_ENDPOINT`, then `HUAWEICLOUD_SDK_REGION_IAM_<REGION>` |
//!
//! `<REGION>` is the region id upper-cased with `_` for `-` (`CN_NORTH_4`); a value holding
//! several endpoints separated by commas uses the first, and one without a scheme gets
//! `https://`. The OIDC token exchange always goes to the global IAM endpoint, as the SDK
//! sends it, unless `HUAWEICLOUD_SDK_IAM_ENDPOINT` points elsewhere.
//!
//! The SDK refuses a region its tables do not list; here the rule above applies to any region
//! and [`Endpoints::unlisted`] says which services had to guess, so the operator can warn.

use std::collections::BTreeMap;

/// A Huawei Cloud API the provider calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Service {
    /// Cloud Container Engine: nodes, jobs, the cluster.
    Cce,
    /// Elastic Cloud Server: flavors, availability zones, server tags.
    Ecs,
    /// Virtual Private Cloud: subnets.
    Vpc,
    /// Business Support System: on-demand prices. Global.
    Bss,
    /// Identity and Access Management: the project and domain ids, federated tokens.
    Iam,
}

/// What a service's calls are scoped to, which decides the scope header they carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A regional project: `X-Project-Id` (the SDK's "basic" credentials).
    Project,
    /// The account (domain): `X-Domain-Id` (the SDK's "global" credentials).
    Domain,
    /// Neither: IAM's own lookups.
    Unscoped,
}

impl Service {
    /// Every service.
    pub const ALL: [Service; 5] = [
        Service::Cce,
        Service::Ecs,
        Service::Vpc,
        Service::Bss,
        Service::Iam,
    ];

    /// The service's code in host names (`cce`).
    pub fn code(self) -> &'static str {
        match self {
            Service::Cce => "cce",
            Service::Ecs => "ecs",
            Service::Vpc => "vpc",
            Service::Bss => "bss",
            Service::Iam => "iam",
        }
    }

    /// The scope header the service's calls carry.
    pub fn scope(self) -> Scope {
        match self {
            Service::Cce | Service::Ecs | Service::Vpc => Scope::Project,
            Service::Bss => Scope::Domain,
            Service::Iam => Scope::Unscoped,
        }
    }

    /// The regions the SDK's table lists for the service (none for global BSS).
    pub fn listed_regions(self) -> &'static [&'static str] {
        match self {
            Service::Cce => CCE_REGIONS,
            Service::Ecs => ECS_REGIONS,
            Service::Vpc => VPC_REGIONS,
            Service::Bss => &[],
            Service::Iam => IAM_REGIONS,
        }
    }

    /// The SDK's per-region override setting, `HUAWEICLOUD_SDK_REGION_<SERVICE>_<REGION>`.
    pub fn region_setting(self, region: &str) -> String {
        format!(
            "HUAWEICLOUD_SDK_REGION_{}_{}",
            self.code().to_ascii_uppercase(),
            region.replace('-', "_").to_ascii_uppercase()
        )
    }
}

impl std::fmt::Display for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Service::Cce => "CCE",
            Service::Ecs => "ECS",
            Service::Vpc => "VPC",
            Service::Bss => "BSS",
            Service::Iam => "IAM",
        })
    }
}

/// CCE's regions in the SDK (`services/cce/v3/region/region.go`).
const CCE_REGIONS: &[&str] = &[
    "ae-ad-1",
    "af-north-1",
    "af-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "cn-east-2",
    "cn-east-3",
    "cn-east-4",
    "cn-east-5",
    "cn-north-1",
    "cn-north-11",
    "cn-north-12",
    "cn-north-2",
    "cn-north-4",
    "cn-north-9",
    "cn-south-1",
    "cn-south-2",
    "cn-south-4",
    "cn-southwest-2",
    "eu-west-0",
    "eu-west-101",
    "la-north-2",
    "la-south-2",
    "me-east-1",
    "my-kualalumpur-1",
    "na-mexico-1",
    "ru-moscow-1",
    "ru-northwest-2",
    "sa-brazil-1",
    "tr-west-1",
];

/// ECS's regions in the SDK: CCE's without ru-northwest-2, with cn-southwest-3.
const ECS_REGIONS: &[&str] = &[
    "ae-ad-1",
    "af-north-1",
    "af-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "cn-east-2",
    "cn-east-3",
    "cn-east-4",
    "cn-east-5",
    "cn-north-1",
    "cn-north-11",
    "cn-north-12",
    "cn-north-2",
    "cn-north-4",
    "cn-north-9",
    "cn-south-1",
    "cn-south-2",
    "cn-south-4",
    "cn-southwest-2",
    "cn-southwest-3",
    "eu-west-0",
    "eu-west-101",
    "la-north-2",
    "la-south-2",
    "me-east-1",
    "my-kualalumpur-1",
    "na-mexico-1",
    "ru-moscow-1",
    "sa-brazil-1",
    "tr-west-1",
];

/// VPC's regions in the SDK: CCE's with cn-southwest-3.
const VPC_REGIONS: &[&str] = &[
    "ae-ad-1",
    "af-north-1",
    "af-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "cn-east-2",
    "cn-east-3",
    "cn-east-4",
    "cn-east-5",
    "cn-north-1",
    "cn-north-11",
    "cn-north-12",
    "cn-north-2",
    "cn-north-4",
    "cn-north-9",
    "cn-south-1",
    "cn-south-2",
    "cn-south-4",
    "cn-southwest-2",
    "cn-southwest-3",
    "eu-west-0",
    "eu-west-101",
    "la-north-2",
    "la-south-2",
    "me-east-1",
    "my-kualalumpur-1",
    "na-mexico-1",
    "ru-moscow-1",
    "ru-northwest-2",
    "sa-brazil-1",
    "tr-west-1",
];

/// The regions with their own IAM endpoint: the SDK credentials' table, which is what the
/// project-id lookup uses, and eu-west-101 from the IAM service's own table (the credentials'
/// table omits it and would send that region's lookups to the global endpoint).
const IAM_REGIONS: &[&str] = &[
    "ae-ad-1",
    "af-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "cn-east-2",
    "cn-east-3",
    "cn-east-4",
    "cn-east-5",
    "cn-north-1",
    "cn-north-12",
    "cn-north-2",
    "cn-north-4",
    "cn-north-9",
    "cn-south-1",
    "cn-south-2",
    "cn-southwest-2",
    "eu-west-0",
    "eu-west-101",
    "la-north-2",
    "la-south-2",
    "me-east-1",
    "my-kualalumpur-1",
    "na-mexico-1",
    "ru-moscow-1",
    "sa-brazil-1",
    "tr-west-1",
];

/// The global IAM endpoint: the OIDC token exchange, and IAM for unlisted regions.
pub const GLOBAL_IAM_ENDPOINT: &str = "https://iam.myhuaweicloud.com";

/// BSS's endpoint for every region (upstream's `BillingEndpoint`, the SDK's only BSS region).
pub const BSS_ENDPOINT: &str = "https://bss.myhuaweicloud.com";

/// Upstream's BSS override.
pub const BSS_ENDPOINT_SETTING: &str = "HUAWEICLOUD_BSS_ENDPOINT";

/// The SDK's IAM override (the credentials' lookups and token exchange).
pub const IAM_ENDPOINT_SETTING: &str = "HUAWEICLOUD_SDK_IAM_ENDPOINT";

/// An endpoint as a base URL: the first of a comma-separated list, `https://` added to a bare
/// host, no trailing `/`.
fn normalize(endpoint: &str) -> String {
    let first = endpoint.split(',').next().unwrap_or_default().trim();
    let first = first.trim_end_matches('/');
    if first.contains("://") {
        first.to_string()
    } else {
        format!("https://{first}")
    }
}

/// The endpoints of one region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoints {
    region: String,
    overrides: BTreeMap<Service, String>,
    global_iam: Option<String>,
}

impl Endpoints {
    /// The SDK's endpoints of `region` (`cn-north-4`).
    pub fn new(region: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            overrides: BTreeMap::new(),
            global_iam: None,
        }
    }

    /// Every service of `region`, the global IAM endpoint included, at `base_url` (a test's
    /// mock server).
    pub fn single(region: impl Into<String>, base_url: &str) -> Self {
        let mut endpoints = Self::new(region);
        for service in Service::ALL {
            endpoints = endpoints.with_override(service, base_url);
        }
        endpoints.with_global_iam(base_url)
    }

    /// The endpoints the settings describe for `region` (see the module's table); `get` reads
    /// a setting (the environment in the binary, a map in tests).
    pub fn from_env(region: impl Into<String>, get: impl Fn(&str) -> Option<String>) -> Self {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let mut endpoints = Self::new(region);
        for service in Service::ALL {
            let named = match service {
                Service::Bss => get(BSS_ENDPOINT_SETTING),
                Service::Iam => get(IAM_ENDPOINT_SETTING),
                _ => None,
            };
            if let Some(url) = named.or_else(|| get(&service.region_setting(&endpoints.region))) {
                endpoints = endpoints.with_override(service, &url);
            }
        }
        if let Some(url) = get(IAM_ENDPOINT_SETTING) {
            endpoints = endpoints.with_global_iam(&url);
        }
        endpoints
    }

    /// The same endpoints with `service` at `endpoint` (a URL, or a host for `https://`).
    pub fn with_override(mut self, service: Service, endpoint: &str) -> Self {
        self.overrides.insert(service, normalize(endpoint));
        self
    }

    /// The same endpoints with the global IAM endpoint (the OIDC exchange's) at `endpoint`.
    pub fn with_global_iam(mut self, endpoint: &str) -> Self {
        self.global_iam = Some(normalize(endpoint));
        self
    }

    /// The region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The base URL of `service`, without a trailing `/`.
    pub fn url(&self, service: Service) -> String {
        if let Some(url) = self.overrides.get(&service) {
            return url.clone();
        }
        let region = self.region.as_str();
        match service {
            Service::Bss => BSS_ENDPOINT.to_string(),
            Service::Iam if !IAM_REGIONS.contains(&region) => self.global_iam_url(),
            Service::Cce | Service::Iam if region == "eu-west-101" => {
                format!("https://{}.eu-west-101.myhuaweicloud.eu", service.code())
            }
            _ => format!("https://{}.{region}.myhuaweicloud.com", service.code()),
        }
    }

    /// The global IAM endpoint, where the OIDC token is exchanged.
    pub fn global_iam_url(&self) -> String {
        self.global_iam
            .clone()
            .unwrap_or_else(|| GLOBAL_IAM_ENDPOINT.to_string())
    }

    /// The host (with the port of an override that has one) of `service`'s URL.
    pub fn host(&self, service: Service) -> String {
        let url = self.url(service);
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        rest.split('/').next().unwrap_or_default().to_string()
    }

    /// The services whose endpoint is guessed from the rule because the SDK's table does not
    /// list the region and no override names one (upstream would refuse to start).
    pub fn unlisted(&self) -> Vec<Service> {
        [Service::Cce, Service::Ecs, Service::Vpc]
            .into_iter()
            .filter(|s| {
                !self.overrides.contains_key(s)
                    && !s.listed_regions().contains(&self.region.as_str())
            })
            .collect()
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
    fn regional_endpoints_as_the_sdk_lists_them() {
        let e = Endpoints::new("cn-north-4");
        assert_eq!(
            e.url(Service::Cce),
            "https://cce.cn-north-4.myhuaweicloud.com"
        );
        assert_eq!(
            e.url(Service::Ecs),
            "https://ecs.cn-north-4.myhuaweicloud.com"
        );
        assert_eq!(
            e.url(Service::Vpc),
            "https://vpc.cn-north-4.myhuaweicloud.com"
        );
        assert_eq!(
            e.url(Service::Iam),
            "https://iam.cn-north-4.myhuaweicloud.com"
        );
        assert_eq!(e.url(Service::Bss), "https://bss.myhuaweicloud.com");
        assert_eq!(e.global_iam_url(), "https://iam.myhuaweicloud.com");
        assert_eq!(e.host(Service::Ecs), "ecs.cn-north-4.myhuaweicloud.com");
        assert!(e.unlisted().is_empty());
        assert_eq!(
            Endpoints::new("ap-southeast-1").url(Service::Bss),
            "https://bss.myhuaweicloud.com",
            "BSS is global"
        );
    }

    #[test]
    fn the_sovereign_and_iam_exceptions() {
        let eu = Endpoints::new("eu-west-101");
        assert_eq!(
            eu.url(Service::Cce),
            "https://cce.eu-west-101.myhuaweicloud.eu"
        );
        assert_eq!(
            eu.url(Service::Iam),
            "https://iam.eu-west-101.myhuaweicloud.eu"
        );
        // ECS and VPC stay on .com in the SDK's tables.
        assert_eq!(
            eu.url(Service::Ecs),
            "https://ecs.eu-west-101.myhuaweicloud.com"
        );
        assert_eq!(
            eu.url(Service::Vpc),
            "https://vpc.eu-west-101.myhuaweicloud.com"
        );
        // Regions without a regional IAM endpoint use the global one.
        for region in [
            "cn-north-11",
            "cn-southwest-3",
            "ap-southeast-5",
            "af-north-1",
        ] {
            assert_eq!(
                Endpoints::new(region).url(Service::Iam),
                "https://iam.myhuaweicloud.com",
                "{region}"
            );
        }
    }

    #[test]
    fn unlisted_regions_follow_the_rule_and_say_so() {
        let e = Endpoints::new("xx-moon-1");
        assert_eq!(
            e.url(Service::Cce),
            "https://cce.xx-moon-1.myhuaweicloud.com"
        );
        assert_eq!(e.unlisted(), [Service::Cce, Service::Ecs, Service::Vpc]);
        assert_eq!(Endpoints::new("cn-southwest-3").unlisted(), [Service::Cce]);
        assert_eq!(Endpoints::new("ru-northwest-2").unlisted(), [Service::Ecs]);
        assert!(
            Endpoints::new("xx-moon-1")
                .with_override(Service::Cce, "cce.internal")
                .with_override(Service::Ecs, "ecs.internal")
                .with_override(Service::Vpc, "vpc.internal")
                .unlisted()
                .is_empty()
        );
    }

    #[test]
    fn settings_override_endpoints() {
        let e = Endpoints::from_env(
            "cn-north-4",
            env(&[
                (
                    "HUAWEICLOUD_SDK_REGION_CCE_CN_NORTH_4",
                    "https://cce.proxy.internal/,https://second",
                ),
                (
                    "HUAWEICLOUD_SDK_REGION_ECS_CN_NORTH_4",
                    "ecs.proxy.internal",
                ),
                (
                    "HUAWEICLOUD_SDK_REGION_VPC_CN_NORTH_1",
                    "https://wrong-region",
                ),
                (
                    "HUAWEICLOUD_BSS_ENDPOINT",
                    "https://bss-intl.myhuaweicloud.com",
                ),
                (
                    "HUAWEICLOUD_SDK_REGION_BSS_CN_NORTH_4",
                    "https://loses-to-upstreams-setting",
                ),
                ("HUAWEICLOUD_SDK_IAM_ENDPOINT", "iam.proxy.internal"),
            ]),
        );
        assert_eq!(e.url(Service::Cce), "https://cce.proxy.internal");
        assert_eq!(e.url(Service::Ecs), "https://ecs.proxy.internal");
        assert_eq!(
            e.url(Service::Vpc),
            "https://vpc.cn-north-4.myhuaweicloud.com"
        );
        assert_eq!(e.url(Service::Bss), "https://bss-intl.myhuaweicloud.com");
        assert_eq!(e.url(Service::Iam), "https://iam.proxy.internal");
        assert_eq!(e.global_iam_url(), "https://iam.proxy.internal");

        let sdk_bss = Endpoints::from_env(
            "ap-southeast-3",
            env(&[
                (
                    "HUAWEICLOUD_SDK_REGION_BSS_AP_SOUTHEAST_3",
                    "https://bss.example",
                ),
                (
                    "HUAWEICLOUD_SDK_REGION_IAM_AP_SOUTHEAST_3",
                    "http://127.0.0.1:9/",
                ),
                ("HUAWEICLOUD_BSS_ENDPOINT", " "),
            ]),
        );
        assert_eq!(sdk_bss.url(Service::Bss), "https://bss.example");
        assert_eq!(sdk_bss.url(Service::Iam), "http://127.0.0.1:9");
        assert_eq!(sdk_bss.host(Service::Iam), "127.0.0.1:9");
        assert_eq!(sdk_bss.global_iam_url(), GLOBAL_IAM_ENDPOINT);
        assert_eq!(
            Service::Vpc.region_setting("my-kualalumpur-1"),
            "HUAWEICLOUD_SDK_REGION_VPC_MY_KUALALUMPUR_1"
        );
    }

    #[test]
    fn one_mock_for_everything() {
        let e = Endpoints::single("cn-north-4", "http://127.0.0.1:8080/");
        for service in Service::ALL {
            assert_eq!(e.url(service), "http://127.0.0.1:8080", "{service}");
        }
        assert_eq!(e.global_iam_url(), "http://127.0.0.1:8080");
        assert_eq!(e.region(), "cn-north-4");
    }

    #[test]
    fn scopes() {
        assert_eq!(Service::Cce.scope(), Scope::Project);
        assert_eq!(Service::Ecs.scope(), Scope::Project);
        assert_eq!(Service::Vpc.scope(), Scope::Project);
        assert_eq!(Service::Bss.scope(), Scope::Domain);
        assert_eq!(Service::Iam.scope(), Scope::Unscoped);
    }
}
