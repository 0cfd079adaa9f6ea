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

/// The SSM parameter holding the image id of an alias's AMI for an architecture (`x86_64`,
/// `arm64`) and Kubernetes minor version (`1.33`). `None` for families without aliases here.
pub fn alias_parameter(family: &str, version: &str, arch: &str, k8s: &str) -> Option<String> {
    match family {
        "al2023" => Some(if version == "latest" {
            format!(
                "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/standard/recommended/image_id"
            )
        } else {
            format!(
                "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/standard/amazon-eks-node-al2023-{arch}-standard-{k8s}-{version}/image_id"
            )
        }),
        "bottlerocket" => {
            let version = version.trim_start_matches('v');
            Some(format!(
                "/aws/service/bottlerocket/aws-k8s-{k8s}/{arch}/{version}/image_id"
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_parameters() {
        assert_eq!(
            alias_parameter("al2023", "latest", "x86_64", "1.33").unwrap(),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
        );
        assert_eq!(
            alias_parameter("al2023", "v20250101", "arm64", "1.33").unwrap(),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.33-v20250101/image_id"
        );
        assert_eq!(
            alias_parameter("bottlerocket", "v1.20.0", "arm64", "1.33").unwrap(),
            "/aws/service/bottlerocket/aws-k8s-1.33/arm64/1.20.0/image_id"
        );
        assert!(alias_parameter("windows2022", "latest", "x86_64", "1.33").is_none());
    }
}
