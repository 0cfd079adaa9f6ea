//! Node images: which AKS node image a NodeClaim boots, as upstream's default (self-hosted)
//! mode resolves it.
//!
//! A NodeClass's image family, FIPS mode and Trusted Launch, with the cluster's Kubernetes
//! version, resolve to an OS release and its image definitions in AKS's galleries, most
//! preferred first ([`default_images`]). The status controller writes each at its latest
//! version into `status.images` ([`DefaultImage::community_node_image`], and with the `cloud`
//! feature `CommunityImages` reads the versions from the community galleries), keeping
//! versions outside a maintenance window ([`keep_existing_versions`]). At launch a NodeClaim
//! boots the first of `status.images` its instance type can run ([`ready_images`],
//! [`pick_image`]).

mod family;
mod gallery;
mod select;
mod status;
mod version;

#[cfg(feature = "cloud")]
mod cloud;

#[cfg(feature = "cloud")]
pub use cloud::{COMMUNITY_GALLERY_API_VERSION, CommunityImages, IMAGE_CACHE_TTL, ListError};
pub use family::{
    Arch, DefaultImage, Gallery, HyperVGeneration, ImageSource, ResolvedFamily, default_images,
    resolve_family,
};
pub use gallery::{
    CommunityImageVersion, CommunityImageVersionPage, CommunityImageVersionProperties,
    latest_community_version,
};
pub use select::{boots, distro, pick_image};
pub use status::{
    CONDITION_IMAGES_READY, CONDITION_KUBERNETES_VERSION_READY, ImageId, community_image_id,
    keep_existing_versions, kubernetes_version, ready_images, shared_image_id, without_version,
};
pub use version::{ImageVersion, is_newer_version, use_azure_linux3, use_ubuntu2404};

/// Why an image could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// An image version that is not dot-separated numbers.
    #[error("image version {0:?} is not dot-separated numbers")]
    InvalidVersion(String),
    /// An image id of neither gallery form.
    #[error("image id {0:?} is not a community or shared gallery image version")]
    InvalidImageId(String),
    /// A status condition the value depends on is not `True`.
    #[error("NodeClass condition {condition} is {status}: {message}")]
    ConditionNotTrue {
        /// The condition type.
        condition: &'static str,
        /// Its status (`False`, `Unknown`).
        status: String,
        /// Its message.
        message: String,
    },
    /// A status condition was set for an older generation of the NodeClass.
    #[error(
        "NodeClass condition {condition} observed generation {observed}, the NodeClass is at {generation}"
    )]
    ConditionStale {
        /// The condition type.
        condition: &'static str,
        /// The generation the condition observed.
        observed: i64,
        /// The NodeClass's generation.
        generation: i64,
    },
    /// `status.kubernetesVersion` is not set.
    #[error("NodeClass status.kubernetesVersion is not set")]
    KubernetesVersionUnset,
    /// No image in `status.images` boots the instance type.
    #[error("no compatible images found for instance type {0}")]
    NoCompatibleImage(String),
    /// The image is not one of the family's, so its OS build is unknown.
    #[error("no distro found for image id {0}")]
    UnknownDistro(String),
}

#[cfg(test)]
mod tests;
