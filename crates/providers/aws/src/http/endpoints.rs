//! Where each service answers: the SDKs' partition rules (commercial `aws`, China `aws-cn`,
//! GovCloud `aws-us-gov`, the isolated `aws-iso*` partitions, the European sovereign cloud) and
//! the configured overrides (`AWS_ENDPOINT_URL_<SERVICE>`, `AWS_ENDPOINT_URL`, a profile's
//! `services` section and `endpoint_url`), in the SDKs' order of precedence.
//!
//! Pure: the settings are passed in.

use std::collections::BTreeMap;

/// A partition: a set of regions sharing DNS names and global services.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    /// `aws`, `aws-cn`, `aws-us-gov`, …
    pub id: &'static str,
    /// The domain of its endpoints.
    pub dns_suffix: &'static str,
    /// The domain of its dual-stack (IPv4 and IPv6) endpoints, where it has them.
    pub dual_stack_dns_suffix: Option<&'static str>,
    /// Where IAM, a global service, answers.
    pub iam_host: &'static str,
    /// The region IAM's requests are signed for.
    pub iam_signing_region: &'static str,
}

/// The region prefixes of each partition (the SDKs' `regionRegex`), the more specific first;
/// a region matching none is in `aws`, as the SDKs default.
const PARTITIONS: &[(&str, Partition)] = &[
    (
        "us-gov-",
        Partition {
            id: "aws-us-gov",
            dns_suffix: "amazonaws.com",
            dual_stack_dns_suffix: Some("api.aws"),
            iam_host: "iam.us-gov.amazonaws.com",
            iam_signing_region: "us-gov-west-1",
        },
    ),
    (
        "us-isob-",
        Partition {
            id: "aws-iso-b",
            dns_suffix: "sc2s.sgov.gov",
            dual_stack_dns_suffix: None,
            iam_host: "iam.us-isob-east-1.sc2s.sgov.gov",
            iam_signing_region: "us-isob-east-1",
        },
    ),
    (
        "us-isof-",
        Partition {
            id: "aws-iso-f",
            dns_suffix: "csp.hci.ic.gov",
            dual_stack_dns_suffix: None,
            iam_host: "iam.us-isof-south-1.csp.hci.ic.gov",
            iam_signing_region: "us-isof-south-1",
        },
    ),
    (
        "us-iso-",
        Partition {
            id: "aws-iso",
            dns_suffix: "c2s.ic.gov",
            dual_stack_dns_suffix: None,
            iam_host: "iam.us-iso-east-1.c2s.ic.gov",
            iam_signing_region: "us-iso-east-1",
        },
    ),
    (
        "eu-isoe-",
        Partition {
            id: "aws-iso-e",
            dns_suffix: "cloud.adc-e.uk",
            dual_stack_dns_suffix: None,
            iam_host: "iam.eu-isoe-west-1.cloud.adc-e.uk",
            iam_signing_region: "eu-isoe-west-1",
        },
    ),
    (
        "eusc-",
        Partition {
            id: "aws-eusc",
            dns_suffix: "amazonaws.eu",
            dual_stack_dns_suffix: None,
            iam_host: "iam.eusc-de-east-1.amazonaws.eu",
            iam_signing_region: "eusc-de-east-1",
        },
    ),
    (
        "cn-",
        Partition {
            id: "aws-cn",
            dns_suffix: "amazonaws.com.cn",
            dual_stack_dns_suffix: Some("api.amazonwebservices.com.cn"),
            iam_host: "iam.cn-north-1.amazonaws.com.cn",
            iam_signing_region: "cn-north-1",
        },
    ),
];

const AWS: Partition = Partition {
    id: "aws",
    dns_suffix: "amazonaws.com",
    dual_stack_dns_suffix: Some("api.aws"),
    iam_host: "iam.amazonaws.com",
    iam_signing_region: "us-east-1",
};

/// The partition `region` belongs to.
pub fn partition(region: &str) -> Partition {
    PARTITIONS
        .iter()
        .find(|(prefix, _)| region.starts_with(prefix))
        .map_or(AWS, |(_, p)| *p)
}

/// The Price List API answers in a few regions only; upstream Karpenter asks the one nearest:
/// `ap-south-1` for Asia Pacific, `eu-central-1` for Europe, `cn-northwest-1` for China and
/// `us-east-1` for everything else.
pub fn pricing_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else {
        "us-east-1"
    }
}

/// Where the services are: the real endpoints of a region, or one override for all (moto,
/// VPC endpoints behind a proxy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// The region requests are signed for.
    pub region: String,
    /// One URL for every service (`http://127.0.0.1:5000`), instead of the public endpoints.
    pub override_url: Option<String>,
}

impl Endpoints {
    /// The base URL of a service (`ec2`, `sqs`, `ssm`, `sts`, `iam`, `pricing`, `eks`): the
    /// override, else the partition's endpoint.
    pub fn url(&self, service: &str) -> String {
        if let Some(url) = &self.override_url {
            return url.trim_end_matches('/').to_string();
        }
        standard_url(service, &self.region, Variant::default())
    }

    /// The region a service's requests are signed for.
    pub fn signing_region(&self, service: &str) -> String {
        match service {
            "iam" => partition(&self.region).iam_signing_region.into(),
            "pricing" => pricing_region(&self.region).into(),
            _ => self.region.clone(),
        }
    }
}

/// FIPS and dual-stack endpoint variants (`AWS_USE_FIPS_ENDPOINT`, `AWS_USE_DUALSTACK_ENDPOINT`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Variant {
    /// FIPS 140 validated endpoints (`ec2-fips.us-gov-west-1.amazonaws.com`).
    pub fips: bool,
    /// Endpoints reachable over IPv6 too (`ec2.us-east-1.api.aws`).
    pub dual_stack: bool,
}

/// The partition's endpoint of `service` in `region`.
pub fn standard_url(service: &str, region: &str, variant: Variant) -> String {
    let p = partition(region);
    let suffix = match (variant.dual_stack, p.dual_stack_dns_suffix) {
        (true, Some(dual)) => dual,
        _ => p.dns_suffix,
    };
    let fips = if variant.fips { "-fips" } else { "" };
    match service {
        "iam" if variant.fips && p.id == "aws" => "https://iam-fips.amazonaws.com".into(),
        "iam" => format!("https://{}", p.iam_host),
        "pricing" => {
            let pricing = pricing_region(region);
            format!(
                "https://api.pricing.{pricing}.{}",
                partition(pricing).dns_suffix
            )
        }
        _ => format!("https://{service}{fips}.{region}.{suffix}"),
    }
}

/// The SDKs' service id of a service as the environment spells it (`EC2`, `PRICING`):
/// upper-cased, spaces as underscores.
pub fn env_service_id(service: &str) -> String {
    service.trim().replace(' ', "_").to_ascii_uppercase()
}

/// Endpoints configured outside the flags: each service's own, the profile's, and the
/// variants.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointSettings {
    /// `AWS_ENDPOINT_URL_<SERVICE>`, by service (lower-case, as the code names services).
    pub env_services: BTreeMap<String, String>,
    /// The profile's `services` section, by service.
    pub profile_services: BTreeMap<String, String>,
    /// The profile's `endpoint_url`.
    pub profile_global: Option<String>,
    /// FIPS or dual-stack endpoints.
    pub variant: Variant,
}

/// The services the provider calls, as the code names them.
pub const SERVICES: &[&str] = &["ec2", "ssm", "sqs", "sts", "iam", "pricing", "eks", "sso"];

impl EndpointSettings {
    /// The settings from environment variables (`get`) and the profile's `endpoint_url` and
    /// `services` section (`profile_global`, `profile_services` keyed by lower-case service
    /// id). `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true` (or the profile's
    /// `ignore_configured_endpoint_urls`) drops all of them.
    pub fn from_settings(
        get: impl Fn(&str) -> Option<String>,
        profile_global: Option<String>,
        profile_services: BTreeMap<String, String>,
        ignore: bool,
    ) -> Self {
        let flag = |name: &str| get(name).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let variant = Variant {
            fips: flag("AWS_USE_FIPS_ENDPOINT"),
            dual_stack: flag("AWS_USE_DUALSTACK_ENDPOINT"),
        };
        if ignore || flag("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") {
            return Self {
                variant,
                ..Self::default()
            };
        }
        let env_services = SERVICES
            .iter()
            .filter_map(|s| {
                get(&format!("AWS_ENDPOINT_URL_{}", env_service_id(s)))
                    .filter(|v| !v.trim().is_empty())
                    .map(|v| (s.to_string(), v))
            })
            .collect();
        Self {
            env_services,
            profile_services,
            profile_global,
            variant,
        }
    }

    /// The base URL of `service`: `AWS_ENDPOINT_URL_<SERVICE>`, then `AWS_ENDPOINT_URL` (the
    /// endpoints' override), then the profile's service endpoint, then its `endpoint_url`,
    /// then the partition's endpoint.
    pub fn url(&self, service: &str, endpoints: &Endpoints) -> String {
        let configured = self
            .env_services
            .get(service)
            .or(endpoints.override_url.as_ref())
            .or_else(|| self.profile_services.get(service))
            .or(self.profile_global.as_ref());
        match configured {
            Some(url) => url.trim().trim_end_matches('/').to_string(),
            None => standard_url(service, &endpoints.region, self.variant),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(region: &str) -> Endpoints {
        Endpoints {
            region: region.into(),
            override_url: None,
        }
    }

    #[test]
    fn partitions_of_regions() {
        for (region, id, suffix) in [
            ("us-east-1", "aws", "amazonaws.com"),
            ("il-central-1", "aws", "amazonaws.com"),
            ("mx-central-1", "aws", "amazonaws.com"),
            ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
            ("cn-northwest-1", "aws-cn", "amazonaws.com.cn"),
            ("us-gov-west-1", "aws-us-gov", "amazonaws.com"),
            ("us-gov-east-1", "aws-us-gov", "amazonaws.com"),
            ("us-iso-east-1", "aws-iso", "c2s.ic.gov"),
            ("us-isob-east-1", "aws-iso-b", "sc2s.sgov.gov"),
            ("us-isof-south-1", "aws-iso-f", "csp.hci.ic.gov"),
            ("eu-isoe-west-1", "aws-iso-e", "cloud.adc-e.uk"),
            ("eusc-de-east-1", "aws-eusc", "amazonaws.eu"),
            ("xx-future-9", "aws", "amazonaws.com"),
        ] {
            let p = partition(region);
            assert_eq!((p.id, p.dns_suffix), (id, suffix), "{region}");
        }
    }

    /// The SDKs' endpoint tests for the services the provider calls.
    #[test]
    fn endpoints_per_partition() {
        for (service, region, url, signing) in [
            (
                "ec2",
                "eu-west-1",
                "https://ec2.eu-west-1.amazonaws.com",
                "eu-west-1",
            ),
            (
                "ec2",
                "cn-northwest-1",
                "https://ec2.cn-northwest-1.amazonaws.com.cn",
                "cn-northwest-1",
            ),
            (
                "ec2",
                "us-gov-west-1",
                "https://ec2.us-gov-west-1.amazonaws.com",
                "us-gov-west-1",
            ),
            (
                "ec2",
                "us-iso-east-1",
                "https://ec2.us-iso-east-1.c2s.ic.gov",
                "us-iso-east-1",
            ),
            (
                "sts",
                "us-east-1",
                "https://sts.us-east-1.amazonaws.com",
                "us-east-1",
            ),
            (
                "sts",
                "cn-north-1",
                "https://sts.cn-north-1.amazonaws.com.cn",
                "cn-north-1",
            ),
            (
                "sts",
                "us-gov-west-1",
                "https://sts.us-gov-west-1.amazonaws.com",
                "us-gov-west-1",
            ),
            (
                "sqs",
                "cn-north-1",
                "https://sqs.cn-north-1.amazonaws.com.cn",
                "cn-north-1",
            ),
            (
                "ssm",
                "us-isob-east-1",
                "https://ssm.us-isob-east-1.sc2s.sgov.gov",
                "us-isob-east-1",
            ),
            (
                "eks",
                "ap-southeast-2",
                "https://eks.ap-southeast-2.amazonaws.com",
                "ap-southeast-2",
            ),
            ("iam", "eu-west-1", "https://iam.amazonaws.com", "us-east-1"),
            (
                "iam",
                "cn-northwest-1",
                "https://iam.cn-north-1.amazonaws.com.cn",
                "cn-north-1",
            ),
            (
                "iam",
                "us-gov-east-1",
                "https://iam.us-gov.amazonaws.com",
                "us-gov-west-1",
            ),
            (
                "iam",
                "us-iso-east-1",
                "https://iam.us-iso-east-1.c2s.ic.gov",
                "us-iso-east-1",
            ),
            (
                "iam",
                "us-isob-east-1",
                "https://iam.us-isob-east-1.sc2s.sgov.gov",
                "us-isob-east-1",
            ),
            (
                "pricing",
                "eu-west-1",
                "https://api.pricing.eu-central-1.amazonaws.com",
                "eu-central-1",
            ),
            (
                "pricing",
                "ap-northeast-1",
                "https://api.pricing.ap-south-1.amazonaws.com",
                "ap-south-1",
            ),
            (
                "pricing",
                "cn-north-1",
                "https://api.pricing.cn-northwest-1.amazonaws.com.cn",
                "cn-northwest-1",
            ),
            (
                "pricing",
                "us-west-2",
                "https://api.pricing.us-east-1.amazonaws.com",
                "us-east-1",
            ),
            (
                "pricing",
                "us-gov-west-1",
                "https://api.pricing.us-east-1.amazonaws.com",
                "us-east-1",
            ),
        ] {
            let e = at(region);
            assert_eq!(e.url(service), url, "{service} in {region}");
            assert_eq!(e.signing_region(service), signing, "{service} in {region}");
        }
    }

    #[test]
    fn fips_and_dual_stack_variants() {
        let fips = Variant {
            fips: true,
            dual_stack: false,
        };
        let dual = Variant {
            fips: false,
            dual_stack: true,
        };
        assert_eq!(
            standard_url("ec2", "us-gov-west-1", fips),
            "https://ec2-fips.us-gov-west-1.amazonaws.com"
        );
        assert_eq!(
            standard_url("sts", "us-east-1", fips),
            "https://sts-fips.us-east-1.amazonaws.com"
        );
        assert_eq!(
            standard_url("iam", "us-east-1", fips),
            "https://iam-fips.amazonaws.com"
        );
        assert_eq!(
            standard_url("ec2", "us-east-1", dual),
            "https://ec2.us-east-1.api.aws"
        );
        assert_eq!(
            standard_url("ec2", "cn-north-1", dual),
            "https://ec2.cn-north-1.api.amazonwebservices.com.cn"
        );
        assert_eq!(
            standard_url("ec2", "us-iso-east-1", dual),
            "https://ec2.us-iso-east-1.c2s.ic.gov",
            "no dual-stack names there"
        );
    }

    #[test]
    fn configured_endpoints_in_the_sdks_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let profile_services: BTreeMap<String, String> = [
            ("ec2".to_string(), "http://profile-ec2".to_string()),
            ("sqs".to_string(), "http://profile-sqs".to_string()),
        ]
        .into();
        let s = EndpointSettings::from_settings(
            env(&[("AWS_ENDPOINT_URL_EC2", "http://env-ec2:4566/")]),
            Some("http://profile-all".into()),
            profile_services.clone(),
            false,
        );
        let plain = at("us-east-1");
        let global = Endpoints {
            override_url: Some("http://env-all".into()),
            ..at("us-east-1")
        };
        assert_eq!(
            s.url("ec2", &global),
            "http://env-ec2:4566",
            "service env first"
        );
        assert_eq!(
            s.url("sqs", &global),
            "http://env-all",
            "then AWS_ENDPOINT_URL"
        );
        assert_eq!(
            s.url("sqs", &plain),
            "http://profile-sqs",
            "then the profile's service"
        );
        assert_eq!(
            s.url("ssm", &plain),
            "http://profile-all",
            "then its endpoint_url"
        );
        let none = EndpointSettings::default();
        assert_eq!(
            none.url("ssm", &plain),
            "https://ssm.us-east-1.amazonaws.com"
        );
        let ignored = EndpointSettings::from_settings(
            env(&[
                ("AWS_ENDPOINT_URL_EC2", "http://env-ec2"),
                ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
            ]),
            Some("http://profile-all".into()),
            profile_services,
            false,
        );
        assert_eq!(
            ignored.url("ec2", &plain),
            "https://ec2.us-east-1.amazonaws.com"
        );
        assert_eq!(env_service_id("pricing"), "PRICING");
        assert_eq!(
            env_service_id("elastic load balancing"),
            "ELASTIC_LOAD_BALANCING"
        );
        let fips = EndpointSettings::from_settings(
            env(&[("AWS_USE_FIPS_ENDPOINT", "true")]),
            None,
            BTreeMap::new(),
            false,
        );
        assert_eq!(
            fips.url("sts", &at("us-gov-east-1")),
            "https://sts-fips.us-gov-east-1.amazonaws.com"
        );
    }
}
