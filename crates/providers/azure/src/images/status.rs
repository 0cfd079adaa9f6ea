//! `status.images`: the ids upstream writes for gallery image versions, the entries built from
//! a family's images at their latest versions, keeping versions outside a maintenance window,
//! and whether the status may be read (its conditions are current).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::ImageError;
use super::family::DefaultImage;
use crate::aksnodeclass::{AKSNodeClass, NodeImage};

/// The condition saying `status.images` is current.
pub const CONDITION_IMAGES_READY: &str = "ImagesReady";
/// The condition saying `status.kubernetesVersion` is current.
pub const CONDITION_KUBERNETES_VERSION_READY: &str = "KubernetesVersionReady";

/// The id of a community gallery image version:
/// `/CommunityGalleries/{gallery}/images/{definition}/versions/{version}`.
pub fn community_image_id(gallery: &str, definition: &str, version: &str) -> String {
    format!("/CommunityGalleries/{gallery}/images/{definition}/versions/{version}")
}

/// The ARM id of a shared image gallery image version.
pub fn shared_image_id(
    subscription_id: &str,
    resource_group: &str,
    gallery: &str,
    definition: &str,
    version: &str,
) -> String {
    format!(
        "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.Compute/galleries/{gallery}/images/{definition}/versions/{version}"
    )
}

/// A gallery image version id, read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageId<'a> {
    /// A community gallery image version.
    Community {
        /// The gallery's public name.
        gallery: &'a str,
        /// The image definition.
        definition: &'a str,
        /// The version.
        version: &'a str,
    },
    /// A shared image gallery image version.
    Shared {
        /// The gallery's subscription.
        subscription_id: &'a str,
        /// The gallery's resource group.
        resource_group: &'a str,
        /// The gallery.
        gallery: &'a str,
        /// The image definition.
        definition: &'a str,
        /// The version.
        version: &'a str,
    },
}

impl<'a> ImageId<'a> {
    /// Reads `id`, either form [`community_image_id`] and [`shared_image_id`] write.
    pub fn parse(id: &'a str) -> Result<Self, ImageError> {
        let parts: Vec<&str> = id.split('/').collect();
        let parsed = match parts[..] {
            [
                "",
                "CommunityGalleries",
                gallery,
                "images",
                definition,
                "versions",
                version,
            ] => Some(Self::Community {
                gallery,
                definition,
                version,
            }),
            [
                "",
                "subscriptions",
                subscription_id,
                "resourceGroups",
                resource_group,
                "providers",
                "Microsoft.Compute",
                "galleries",
                gallery,
                "images",
                definition,
                "versions",
                version,
            ] => Some(Self::Shared {
                subscription_id,
                resource_group,
                gallery,
                definition,
                version,
            }),
            _ => None,
        };
        parsed
            .filter(|p| !p.definition().is_empty() && !p.version().is_empty())
            .ok_or_else(|| ImageError::InvalidImageId(id.to_string()))
    }

    /// The image definition.
    pub fn definition(&self) -> &'a str {
        match self {
            Self::Community { definition, .. } | Self::Shared { definition, .. } => definition,
        }
    }

    /// The version.
    pub fn version(&self) -> &'a str {
        match self {
            Self::Community { version, .. } | Self::Shared { version, .. } => version,
        }
    }
}

/// An image id without its `/versions/{version}` suffix: the same image at any version.
pub fn without_version(id: &str) -> &str {
    id.rsplitn(3, '/').nth(2).unwrap_or(id)
}

impl DefaultImage {
    /// The `status.images` entry for this image at `version` of its community gallery.
    pub fn community_node_image(&self, version: &str) -> NodeImage {
        self.node_image(community_image_id(
            self.gallery.community_name(),
            self.definition,
            version,
        ))
    }

    /// The `status.images` entry for this image at `version` of AKS's shared image gallery,
    /// which lives in `subscription_id`.
    pub fn shared_node_image(&self, subscription_id: &str, version: &str) -> NodeImage {
        self.node_image(shared_image_id(
            subscription_id,
            self.gallery.resource_group(),
            self.gallery.name(),
            self.definition,
            version,
        ))
    }

    fn node_image(&self, id: String) -> NodeImage {
        NodeImage {
            id,
            requirements: self.node_selector_requirements(),
        }
    }
}

/// The images to write when no update to the latest versions is due (outside a maintenance
/// window, and the images already initialized): `discovered` in its order, but an image
/// already in `existing` keeps the version it has. So an image-family change or a newly
/// supported image takes effect at once, and versions move only when updates are allowed.
pub fn keep_existing_versions(
    existing: &[NodeImage],
    discovered: Vec<NodeImage>,
) -> Vec<NodeImage> {
    discovered
        .into_iter()
        .map(|image| {
            let base = without_version(&image.id);
            existing
                .iter()
                .find(|e| without_version(&e.id) == base)
                .cloned()
                .unwrap_or(image)
        })
        .collect()
}

/// `status.kubernetesVersion`, if it may be used: its condition is true for the NodeClass's
/// current generation and it is set.
pub fn kubernetes_version(node_class: &AKSNodeClass) -> Result<&str, ImageError> {
    require_condition(node_class, CONDITION_KUBERNETES_VERSION_READY)?;
    node_class
        .status
        .as_ref()
        .and_then(|s| s.kubernetes_version.as_deref())
        .filter(|v| !v.is_empty())
        .ok_or(ImageError::KubernetesVersionUnset)
}

/// `status.images`, most preferred first, if they may be used: their condition is true for the
/// NodeClass's current generation.
pub fn ready_images(node_class: &AKSNodeClass) -> Result<&[NodeImage], ImageError> {
    require_condition(node_class, CONDITION_IMAGES_READY)?;
    Ok(node_class
        .status
        .as_ref()
        .map_or(&[], |s| s.images.as_slice()))
}

/// Checks that the condition is `True` and observed the current generation; a missing
/// condition is `Unknown`.
fn require_condition(node_class: &AKSNodeClass, condition: &'static str) -> Result<(), ImageError> {
    let found: Option<&Condition> = node_class
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition));
    let Some(found) = found.filter(|c| c.status == "True") else {
        return Err(ImageError::ConditionNotTrue {
            condition,
            status: found.map_or_else(|| "Unknown".to_string(), |c| c.status.clone()),
            message: found.map(|c| c.message.clone()).unwrap_or_default(),
        });
    };
    let observed = found.observed_generation.unwrap_or(0);
    let generation = node_class.metadata.generation.unwrap_or(0);
    if observed != generation {
        return Err(ImageError::ConditionStale {
            condition,
            observed,
            generation,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aksnodeclass::AKSNodeClassStatus;
    use crate::images::family::{ImageSource, ResolvedFamily};
    use k8s_openapi::api::core::v1::NodeSelectorRequirement;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    const UBUNTU: &str = "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2";
    const SIG_SUBSCRIPTION: &str = "10945678-1234-1234-1234-123456789012";

    fn requirement(key: &str, value: &str) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: "In".into(),
            values: Some(vec![value.into()]),
        }
    }

    #[test]
    fn ids_are_written_as_upstream_writes_them() {
        assert_eq!(
            community_image_id(UBUNTU, "2204gen2containerd", "202505.27.0"),
            "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202505.27.0"
        );
        assert_eq!(
            shared_image_id(
                SIG_SUBSCRIPTION,
                "AKS-Ubuntu",
                "AKSUbuntu",
                "2204gen2containerd",
                "202512.18.0"
            ),
            "/subscriptions/10945678-1234-1234-1234-123456789012/resourceGroups/AKS-Ubuntu/providers/Microsoft.Compute/galleries/AKSUbuntu/images/2204gen2containerd/versions/202512.18.0"
        );
    }

    #[test]
    fn entries_carry_the_id_and_sorted_requirements() {
        let images = ResolvedFamily::Ubuntu2204.images(false, false, ImageSource::CommunityGallery);
        let entry = images[2].community_node_image("202505.27.0");
        assert_eq!(
            entry,
            NodeImage {
                id: community_image_id(UBUNTU, "2204gen2arm64containerd", "202505.27.0"),
                requirements: vec![
                    requirement("kubernetes.io/arch", "arm64"),
                    requirement("karpenter.azure.com/sku-hyperv-generation", "2"),
                ],
            }
        );
        let shared = images[1].shared_node_image(SIG_SUBSCRIPTION, "202512.18.0");
        assert_eq!(
            shared.id,
            shared_image_id(
                SIG_SUBSCRIPTION,
                "AKS-Ubuntu",
                "AKSUbuntu",
                "2204containerd",
                "202512.18.0"
            )
        );
        assert_eq!(
            shared.requirements[1],
            requirement("karpenter.azure.com/sku-hyperv-generation", "1")
        );
    }

    #[test]
    fn ids_read_back() {
        let community = community_image_id(UBUNTU, "2204gen2containerd", "202505.27.0");
        assert_eq!(
            ImageId::parse(&community),
            Ok(ImageId::Community {
                gallery: UBUNTU,
                definition: "2204gen2containerd",
                version: "202505.27.0",
            })
        );
        let shared = shared_image_id(
            SIG_SUBSCRIPTION,
            "AKS-AzureLinux",
            "AKSAzureLinux",
            "V3gen2",
            "202512.18.0",
        );
        let parsed = ImageId::parse(&shared).unwrap();
        assert_eq!(parsed.definition(), "V3gen2");
        assert_eq!(parsed.version(), "202512.18.0");
        assert!(matches!(
            parsed,
            ImageId::Shared {
                resource_group: "AKS-AzureLinux",
                ..
            }
        ));
        for bad in [
            "",
            "/CommunityGalleries/g/images/d",
            "/CommunityGalleries/g/images/d/versions/",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/images/d",
            "CommunityGalleries/g/images/d/versions/1",
        ] {
            assert_eq!(
                ImageId::parse(bad),
                Err(ImageError::InvalidImageId(bad.into())),
                "{bad}"
            );
        }
    }

    /// Upstream's examples for trimming the version.
    #[test]
    fn the_version_suffix_is_trimmed() {
        assert_eq!(
            without_version(
                "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/2022.10.03"
            ),
            "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd"
        );
        assert_eq!(
            without_version(
                "/subscriptions/10945678-1234-1234-1234-123456789012/resourceGroups/AKS-Ubuntu/providers/Microsoft.Compute/galleries/AKSUbuntu/images/2204gen2containerd/versions/2022.10.03"
            ),
            "/subscriptions/10945678-1234-1234-1234-123456789012/resourceGroups/AKS-Ubuntu/providers/Microsoft.Compute/galleries/AKSUbuntu/images/2204gen2containerd"
        );
        assert_eq!(without_version("nothing"), "nothing");
    }

    fn entries(family: ResolvedFamily, version: &str) -> Vec<NodeImage> {
        family
            .images(false, false, ImageSource::CommunityGallery)
            .iter()
            .map(|i| i.community_node_image(version))
            .collect()
    }

    #[test]
    fn outside_a_window_existing_versions_stay_and_new_images_come_in() {
        let existing = entries(ResolvedFamily::Ubuntu2204, "202410.09.0")[..2].to_vec();
        let discovered = entries(ResolvedFamily::Ubuntu2204, "202505.27.0");
        let kept = keep_existing_versions(&existing, discovered.clone());
        assert_eq!(kept[0], existing[0]);
        assert_eq!(kept[1], existing[1]);
        assert_eq!(
            kept[2], discovered[2],
            "the image not yet listed comes in at its latest"
        );
        // A family change replaces everything: nothing of the old family stays.
        let azure_linux = entries(ResolvedFamily::AzureLinux3, "202505.27.0");
        assert_eq!(
            keep_existing_versions(&existing, azure_linux.clone()),
            azure_linux
        );
    }

    fn condition(type_: &str, status: &str, observed: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            observed_generation: Some(observed),
            message: "testing".into(),
            reason: "Testing".into(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }
    }

    fn node_class(conditions: Vec<Condition>, kubernetes_version: Option<&str>) -> AKSNodeClass {
        let mut class = AKSNodeClass::default();
        class.metadata.generation = Some(2);
        class.status = Some(AKSNodeClassStatus {
            images: entries(ResolvedFamily::Ubuntu2204, "202505.27.0"),
            kubernetes_version: kubernetes_version.map(str::to_string),
            conditions,
            ..Default::default()
        });
        class
    }

    #[test]
    fn status_is_read_only_when_its_condition_is_current() {
        let ready = node_class(
            vec![
                condition(CONDITION_IMAGES_READY, "True", 2),
                condition(CONDITION_KUBERNETES_VERSION_READY, "True", 2),
            ],
            Some("1.33.1"),
        );
        assert_eq!(ready_images(&ready).unwrap().len(), 3);
        assert_eq!(kubernetes_version(&ready), Ok("1.33.1"));

        let stale = node_class(vec![condition(CONDITION_IMAGES_READY, "True", 1)], None);
        assert_eq!(
            ready_images(&stale),
            Err(ImageError::ConditionStale {
                condition: CONDITION_IMAGES_READY,
                observed: 1,
                generation: 2
            })
        );
        let not_ready = node_class(
            vec![condition(CONDITION_KUBERNETES_VERSION_READY, "False", 2)],
            Some("1.33.1"),
        );
        let err = kubernetes_version(&not_ready).unwrap_err();
        assert_eq!(
            err.to_string(),
            "NodeClass condition KubernetesVersionReady is False: testing"
        );
        assert!(matches!(
            ready_images(&not_ready),
            Err(ImageError::ConditionNotTrue { status, .. }) if status == "Unknown"
        ));
        let unset = node_class(
            vec![condition(CONDITION_KUBERNETES_VERSION_READY, "True", 2)],
            Some(""),
        );
        assert_eq!(
            kubernetes_version(&unset),
            Err(ImageError::KubernetesVersionUnset)
        );
    }
}
