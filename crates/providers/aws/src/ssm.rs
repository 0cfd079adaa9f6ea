//! SSM Parameter Store reads: the EKS-optimized AMI aliases (`al2023@latest`) resolve through
//! AWS's public parameters, and `amiSelectorTerms[].ssmParameter` names one directly.

use std::future::Future;

use serde_json::json;

use crate::ec2::Ec2Client;
use crate::http::{AwsError, Result};

/// Reads SSM parameters.
pub trait ParameterStore: Send + Sync + 'static {
    /// The value of a parameter; `AwsError::Api { code: "ParameterNotFound" }` when absent.
    fn get_parameter(&self, name: String) -> impl Future<Output = Result<String>> + Send;
}

impl ParameterStore for Ec2Client {
    async fn get_parameter(&self, name: String) -> Result<String> {
        let body = self
            .http()
            .send(
                "ssm",
                "POST",
                "/",
                &[],
                &[
                    ("content-type", "application/x-amz-json-1.1"),
                    ("x-amz-target", "AmazonSSM.GetParameter"),
                ],
                json!({"Name": name}).to_string().into_bytes(),
            )
            .await?;
        let value: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| AwsError::Parse(e.to_string()))?;
        value["Parameter"]["Value"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| AwsError::Parse(format!("GetParameter {name}: no Parameter.Value")))
    }
}

/// Which instance types an EKS-optimized AMI is built for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Variant {
    /// Not an alias image: any type of its architecture.
    #[default]
    Any,
    /// Types without GPUs or accelerators.
    Standard,
    /// NVIDIA GPU types (drivers installed).
    Nvidia,
    /// AWS Neuron (Inferentia, Trainium) types.
    Neuron,
    /// Windows nodes of this build (`10.0.20348`).
    Windows(&'static str),
}

/// Why an alias cannot be resolved for this cluster.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    /// No such alias family.
    #[error("{0} aliases are not supported")]
    UnknownFamily(String),
    /// The family has no AMIs for the cluster's Kubernetes version.
    #[error("{family} aliases are not supported on Kubernetes {k8s}: {reason}")]
    Version {
        /// The alias family.
        family: String,
        /// The cluster's minor version.
        k8s: String,
        /// Why.
        reason: &'static str,
    },
}

/// The Windows Server version, and the build its nodes report, of a Windows alias family.
fn windows_release(family: &str) -> Option<(&'static str, &'static str)> {
    match family {
        "windows2019" => Some(("2019", "10.0.17763")),
        "windows2022" => Some(("2022", "10.0.20348")),
        "windows2025" => Some(("2025", "10.0.26100")),
        _ => None,
    }
}

/// The minor of a `1.33` version, if it reads as one.
fn minor(k8s: &str) -> Option<u32> {
    k8s.split('.').nth(1)?.parse().ok()
}

/// The SSM parameters holding an alias's AMIs for a Kubernetes minor version (`1.33`):
/// `(parameter, architecture, variant)`, each variant a family publishes (a parameter whose
/// image serves two variants is listed once per variant).
pub fn alias_parameters(
    family: &str,
    version: &str,
    k8s: &str,
) -> std::result::Result<Vec<(String, &'static str, Variant)>, AliasError> {
    let mut out = Vec::new();
    let latest = version == "latest";
    match family {
        "al2023" => {
            for (arch, variant, name) in [
                ("x86_64", Variant::Standard, "standard"),
                ("arm64", Variant::Standard, "standard"),
                ("x86_64", Variant::Nvidia, "nvidia"),
                ("arm64", Variant::Nvidia, "nvidia"),
                ("x86_64", Variant::Neuron, "neuron"),
            ] {
                let leaf = if latest {
                    "recommended".to_string()
                } else {
                    format!("amazon-eks-node-al2023-{arch}-{name}-{k8s}-{version}")
                };
                out.push((
                    format!("/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{name}/{leaf}/image_id"),
                    arch,
                    variant,
                ));
            }
        }
        "al2" => {
            // AWS publishes no AL2 AMIs from Kubernetes 1.33 on.
            if minor(k8s).is_some_and(|m| m >= 33) {
                return Err(AliasError::Version {
                    family: family.into(),
                    k8s: k8s.into(),
                    reason: "AL2 AMIs end with Kubernetes 1.32",
                });
            }
            for (path, arch, variants, node) in [
                ("amazon-linux-2", "x86_64", &[Variant::Standard][..], "node"),
                (
                    "amazon-linux-2-arm64",
                    "arm64",
                    &[Variant::Standard][..],
                    "arm64-node",
                ),
                (
                    "amazon-linux-2-gpu",
                    "x86_64",
                    &[Variant::Neuron, Variant::Nvidia][..],
                    "gpu-node",
                ),
            ] {
                let leaf = if latest {
                    "recommended".to_string()
                } else {
                    format!("amazon-eks-{node}-{k8s}-{version}")
                };
                for variant in variants {
                    out.push((
                        format!("/aws/service/eks/optimized-ami/{k8s}/{path}/{leaf}/image_id"),
                        arch,
                        *variant,
                    ));
                }
            }
        }
        "bottlerocket" => {
            let version = version.trim_start_matches('v');
            for (arch, variant, suffix) in [
                ("x86_64", Variant::Standard, ""),
                ("arm64", Variant::Standard, ""),
                ("x86_64", Variant::Nvidia, "-nvidia"),
                ("arm64", Variant::Nvidia, "-nvidia"),
            ] {
                out.push((
                    format!(
                        "/aws/service/bottlerocket/aws-k8s-{k8s}{suffix}/{arch}/{version}/image_id"
                    ),
                    arch,
                    variant,
                ));
            }
        }
        windows => {
            let (release, build) =
                windows_release(windows).ok_or_else(|| AliasError::UnknownFamily(family.into()))?;
            if release == "2025" && minor(k8s).is_some_and(|m| m < 35) {
                return Err(AliasError::Version {
                    family: family.into(),
                    k8s: k8s.into(),
                    reason: "Windows Server 2025 AMIs start with Kubernetes 1.35",
                });
            }
            // Windows aliases are always `@latest` (the CRD allows nothing else).
            out.push((
                format!("/aws/service/ami-windows-latest/Windows_Server-{release}-English-Core-EKS_Optimized-{k8s}/image_id"),
                "x86_64",
                Variant::Windows(build),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_parameters_per_variant() {
        let al = alias_parameters("al2023", "latest", "1.33").unwrap();
        assert_eq!(
            al[0],
            (
                "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id".to_string(),
                "x86_64",
                Variant::Standard
            )
        );
        assert!(al.iter().any(|(p, a, v)| *v == Variant::Nvidia
            && *a == "arm64"
            && p.contains("/arm64/nvidia/recommended/")));
        assert!(
            al.iter()
                .any(|(p, _, v)| *v == Variant::Neuron && p.contains("/x86_64/neuron/"))
        );
        let pinned = alias_parameters("al2023", "v20250101", "1.33").unwrap();
        assert_eq!(
            pinned[1].0,
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.33-v20250101/image_id"
        );
        let br = alias_parameters("bottlerocket", "v1.20.0", "1.33").unwrap();
        assert_eq!(
            br[1].0,
            "/aws/service/bottlerocket/aws-k8s-1.33/arm64/1.20.0/image_id"
        );
        assert_eq!(
            br[2].0,
            "/aws/service/bottlerocket/aws-k8s-1.33-nvidia/x86_64/1.20.0/image_id"
        );
    }

    /// Upstream's AL2 parameter paths; the GPU image serves NVIDIA and Neuron types; no AL2
    /// aliases from 1.33.
    #[test]
    fn al2_alias_parameters() {
        let al2 = alias_parameters("al2", "latest", "1.32").unwrap();
        let paths: Vec<(&str, Variant)> = al2.iter().map(|(p, _, v)| (p.as_str(), *v)).collect();
        assert_eq!(
            paths,
            [
                (
                    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id",
                    Variant::Standard
                ),
                (
                    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id",
                    Variant::Standard
                ),
                (
                    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id",
                    Variant::Neuron
                ),
                (
                    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id",
                    Variant::Nvidia
                ),
            ]
        );
        let pinned = alias_parameters("al2", "v20240807", "1.30").unwrap();
        assert_eq!(
            pinned[1].0,
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/amazon-eks-arm64-node-1.30-v20240807/image_id"
        );
        assert_eq!(
            pinned[2].0,
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/amazon-eks-gpu-node-1.30-v20240807/image_id"
        );
        let err = alias_parameters("al2", "latest", "1.33").unwrap_err();
        assert!(err.to_string().contains("Kubernetes 1.33"), "{err}");
    }

    #[test]
    fn windows_alias_parameters() {
        for (family, release, build) in [
            ("windows2019", "2019", "10.0.17763"),
            ("windows2022", "2022", "10.0.20348"),
            ("windows2025", "2025", "10.0.26100"),
        ] {
            let p = alias_parameters(family, "latest", "1.35").unwrap();
            assert_eq!(
                p,
                [(
                    format!(
                        "/aws/service/ami-windows-latest/Windows_Server-{release}-English-Core-EKS_Optimized-1.35/image_id"
                    ),
                    "x86_64",
                    Variant::Windows(build)
                )]
            );
        }
        assert!(alias_parameters("windows2025", "latest", "1.34").is_err());
        assert!(alias_parameters("windows2022", "latest", "1.34").is_ok());
        assert_eq!(
            alias_parameters("ubuntu", "latest", "1.33").unwrap_err(),
            AliasError::UnknownFamily("ubuntu".into())
        );
    }
}
