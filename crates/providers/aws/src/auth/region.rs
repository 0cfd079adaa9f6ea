//! The region, as the SDKs find it: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's
//! `region`, then the instance's region from IMDS (unless `AWS_EC2_METADATA_DISABLED=true`).

use super::config::SharedConfig;
use super::credentials::{IMDS_IPV4, IMDS_IPV6};
use super::metadata;
use crate::http::{AwsError, AwsHttp};

/// The region from the settings alone, and where it was found.
pub fn from_settings(config: &SharedConfig) -> Option<(String, String)> {
    config
        .env("AWS_REGION")
        .map(|r| ("AWS_REGION".to_string(), r))
        .or_else(|| {
            config
                .env("AWS_DEFAULT_REGION")
                .map(|r| ("AWS_DEFAULT_REGION".to_string(), r))
        })
        .or_else(|| {
            config
                .profile_value("region")
                .map(|r| (format!("the profile {:?}'s region", config.profile), r))
        })
}

/// The IMDS endpoint the settings name.
pub fn imds_endpoint(config: &SharedConfig) -> String {
    if let Some((_, e)) = config.setting(
        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        "ec2_metadata_service_endpoint",
    ) {
        return e.trim_end_matches('/').to_string();
    }
    match config.setting(
        "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
        "ec2_metadata_service_endpoint_mode",
    ) {
        Some((_, mode)) if mode.eq_ignore_ascii_case("ipv6") => IMDS_IPV6.into(),
        _ => IMDS_IPV4.into(),
    }
}

/// The region: from the settings, else from IMDS through `http` (whose own region does not
/// matter: IMDS is unsigned). The error names every source tried.
pub async fn resolve(config: &SharedConfig, http: &AwsHttp) -> Result<String, AwsError> {
    if let Some((_, region)) = from_settings(config) {
        return Ok(region);
    }
    let tried = format!(
        "AWS_REGION, AWS_DEFAULT_REGION, the profile {:?}'s region",
        config.profile
    );
    if config
        .env("AWS_EC2_METADATA_DISABLED")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Err(AwsError::Credentials(format!(
            "no region: tried {tried}; IMDS is disabled by AWS_EC2_METADATA_DISABLED"
        )));
    }
    let endpoint = imds_endpoint(config);
    metadata::imds_region(http, &endpoint).await.map_err(|e| {
        AwsError::Credentials(format!(
            "no region: tried {tried} and IMDS at {endpoint} ({e}); set AWS_REGION"
        ))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::profile::FileKind;
    use super::*;

    #[test]
    fn settings_in_order() {
        let cfg = "[default]\nregion = eu-west-1\n[profile other]\nregion = ap-south-1\n";
        let at = |vars: &[(&str, &str)]| {
            let env: BTreeMap<String, String> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            from_settings(&SharedConfig::from_parts(
                env,
                &[(FileKind::Config, cfg.into())],
            ))
            .map(|(_, r)| r)
        };
        assert_eq!(
            at(&[("AWS_REGION", "us-west-2"), ("AWS_DEFAULT_REGION", "x")]).as_deref(),
            Some("us-west-2")
        );
        assert_eq!(
            at(&[("AWS_DEFAULT_REGION", "ca-central-1")]).as_deref(),
            Some("ca-central-1")
        );
        assert_eq!(at(&[]).as_deref(), Some("eu-west-1"));
        assert_eq!(
            at(&[("AWS_PROFILE", "other")]).as_deref(),
            Some("ap-south-1")
        );
        let none = SharedConfig::from_parts(BTreeMap::new(), &[]);
        assert_eq!(from_settings(&none), None);
        assert_eq!(imds_endpoint(&none), IMDS_IPV4);
    }
}
