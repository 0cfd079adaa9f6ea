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
}

/// The SSM parameters holding an alias's AMIs for a Kubernetes minor version (`1.33`):
/// `(parameter, architecture, variant)`, each variant a family publishes. `None` for families
/// without aliases here.
pub fn alias_parameters(
    family: &str,
    version: &str,
    k8s: &str,
) -> Option<Vec<(String, &'static str, Variant)>> {
    let mut out = Vec::new();
    match family {
        "al2023" => {
            for (arch, variant, name) in [
                ("x86_64", Variant::Standard, "standard"),
                ("arm64", Variant::Standard, "standard"),
                ("x86_64", Variant::Nvidia, "nvidia"),
                ("arm64", Variant::Nvidia, "nvidia"),
                ("x86_64", Variant::Neuron, "neuron"),
            ] {
                let leaf = if version == "latest" {
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
        _ => return None,
    }
    Some(out)
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
        assert!(alias_parameters("windows2022", "latest", "1.33").is_none());
    }
}
