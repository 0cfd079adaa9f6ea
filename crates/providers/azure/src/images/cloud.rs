//! The latest version of each image definition, read from AKS's community galleries over ARM
//! (`CommunityGalleryImageVersions_List`, paged by `nextLink`), as upstream's default mode
//! reads them, and kept for a while: the status controller asks every few minutes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::ImageError;
use super::family::{DefaultImage, ImageSource, default_images};
use super::gallery::{CommunityImageVersion, latest_community_version};
use super::status::kubernetes_version;
use crate::aksnodeclass::{AKSNodeClass, NodeImage};
use crate::arm::{Arm, ArmError};

/// The Compute Gallery API version upstream's SDK lists community gallery versions with.
pub const COMMUNITY_GALLERY_API_VERSION: &str = "2024-03-03";

/// How long listed images are reused, as upstream caches them (3 days). A Kubernetes upgrade
/// or a different family lists afresh at once: both are part of what is cached by.
pub const IMAGE_CACHE_TTL: Duration = Duration::from_secs(3 * 24 * 60 * 60);

/// Why images could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// The NodeClass's status cannot be used yet.
    #[error(transparent)]
    NodeClass(#[from] ImageError),
    /// ARM refused or did not answer.
    #[error("listing versions of community image {gallery}/{definition}: {source}")]
    Arm {
        /// The gallery's public name.
        gallery: String,
        /// The image definition.
        definition: String,
        /// ARM's error.
        #[source]
        source: ArmError,
    },
    /// ARM's answer is not a list of versions.
    #[error("reading versions of community image {gallery}/{definition}: {reason}")]
    Parse {
        /// The gallery's public name.
        gallery: String,
        /// The image definition.
        definition: String,
        /// What did not parse.
        reason: String,
    },
    /// The definition has no version to boot.
    #[error("community image {gallery}/{definition} has no versions in {location}")]
    NoVersions {
        /// The gallery's public name.
        gallery: String,
        /// The image definition.
        definition: String,
        /// The region listed.
        location: String,
    },
}

impl ListError {
    /// ARM's error code, when ARM gave one.
    pub fn arm_code(&self) -> Option<&str> {
        match self {
            Self::Arm { source, .. } => source.code(),
            _ => None,
        }
    }
}

/// What a list of images is cached by: the definitions, in order, and the Kubernetes version.
type CacheKey = (Vec<(&'static str, &'static str)>, String);

/// Reads node images from AKS's community galleries in one region.
#[derive(Debug)]
pub struct CommunityImages {
    arm: Arm,
    subscription_id: String,
    location: String,
    ttl: Duration,
    cache: Mutex<HashMap<CacheKey, (Instant, Vec<NodeImage>)>>,
}

impl CommunityImages {
    /// Lists with `arm` as `subscription_id` (any subscription may read community galleries)
    /// in `location`, the cluster's region.
    pub fn new(arm: Arm, subscription_id: impl Into<String>, location: impl Into<String>) -> Self {
        Self {
            arm,
            subscription_id: subscription_id.into(),
            location: location.into(),
            ttl: IMAGE_CACHE_TTL,
            cache: Mutex::default(),
        }
    }

    /// The same reader keeping listed images for `ttl` instead.
    pub fn with_cache_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The `status.images` a NodeClass should have, most preferred first, each at its latest
    /// version. Empty for FIPS, which the community galleries do not carry (upstream then sets
    /// `ImagesReady` false: FIPS needs AKS's shared image galleries).
    pub async fn node_images_for(
        &self,
        node_class: &AKSNodeClass,
    ) -> Result<Vec<NodeImage>, ListError> {
        let kubernetes_version = kubernetes_version(node_class)?;
        let images = default_images(
            &node_class.spec,
            kubernetes_version,
            ImageSource::CommunityGallery,
        );
        self.node_images(images, kubernetes_version).await
    }

    /// `images` at their latest versions, in their order, for a cluster at
    /// `kubernetes_version`. Served from the cache when listed within the TTL.
    pub async fn node_images(
        &self,
        images: &[DefaultImage],
        kubernetes_version: &str,
    ) -> Result<Vec<NodeImage>, ListError> {
        let key = cache_key(images, kubernetes_version);
        if let Some(cached) = self.cached(&key) {
            return Ok(cached);
        }
        let mut listed = Vec::with_capacity(images.len());
        for image in images {
            let version = self
                .latest_version(image.gallery.community_name(), image.definition)
                .await?;
            listed.push(image.community_node_image(&version));
        }
        self.remember(key, &listed);
        Ok(listed)
    }

    /// The latest version of `definition` in the community gallery `gallery` (its public
    /// name): the one published last.
    pub async fn latest_version(
        &self,
        gallery: &str,
        definition: &str,
    ) -> Result<String, ListError> {
        let versions = self.list_versions(gallery, definition).await?;
        latest_community_version(&versions)
            .map(|v| v.name.clone())
            .ok_or_else(|| ListError::NoVersions {
                gallery: gallery.to_string(),
                definition: definition.to_string(),
                location: self.location.clone(),
            })
    }

    /// Every version of `definition`, all pages.
    async fn list_versions(
        &self,
        gallery: &str,
        definition: &str,
    ) -> Result<Vec<CommunityImageVersion>, ListError> {
        let path = format!(
            "/subscriptions/{}/providers/Microsoft.Compute/locations/{}/communityGalleries/{gallery}/images/{definition}/versions",
            self.subscription_id, self.location
        );
        let items = self
            .arm
            .list(&path, COMMUNITY_GALLERY_API_VERSION, &[])
            .await
            .map_err(|source| ListError::Arm {
                gallery: gallery.to_string(),
                definition: definition.to_string(),
                source,
            })?;
        items
            .into_iter()
            .map(serde_json::from_value)
            .collect::<Result<_, _>>()
            .map_err(|e| ListError::Parse {
                gallery: gallery.to_string(),
                definition: definition.to_string(),
                reason: e.to_string(),
            })
    }

    fn cached(&self, key: &CacheKey) -> Option<Vec<NodeImage>> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(key)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, images)| images.clone())
    }

    fn remember(&self, key: CacheKey, images: &[NodeImage]) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        // Entries of a former family or Kubernetes version would otherwise stay forever.
        cache.retain(|_, (at, _)| at.elapsed() < self.ttl);
        cache.insert(key, (Instant::now(), images.to_vec()));
    }
}

fn cache_key(images: &[DefaultImage], kubernetes_version: &str) -> CacheKey {
    let definitions = images
        .iter()
        .map(|i| (i.gallery.community_name(), i.definition))
        .collect();
    (definitions, kubernetes_version.to_string())
}
