//! Which images an `ECSNodeClass` boots.

/// An image the cluster offers for its Kubernetes version, as ACK lists it
/// (`DescribeKubernetesVersionMetadata`'s `Images`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterImage {
    /// `ImageId`: `aliyun_3_x64_20G_alibase_20240819.vhd`, `m-…`.
    pub id: String,
    /// `ImageName`.
    pub name: String,
    /// `Platform`: `AliyunLinux`, `ContainerOS`, …
    pub platform: String,
    /// `OSVersion`.
    pub os_version: String,
    /// `ImageType`: `AliyunLinux3`, `ContainerOS`, …
    pub image_type: String,
    /// `OSType`: `Linux`, `Windows`.
    pub os_type: String,
    /// `Architecture`: `x86_64`, `arm64`.
    pub architecture: String,
}
