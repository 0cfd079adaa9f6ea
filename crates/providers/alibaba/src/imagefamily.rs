//! Which images an `ECSNodeClass` boots: its `imageSelectorTerms` resolved — an alias among
//! the images ACK offers for the cluster's Kubernetes version ([`ClusterImage`]), an id through
//! ECS's `DescribeImages` — into status [`Image`]s that say which architecture they boot, and
//! the image an instance type boots ([`pick_image`]).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use karpenter_api::Operator;
use karpenter_api::labels::{ARCH_AMD64, ARCH_ARM64, ARCH_LABEL};
use karpenter_core::instancetype::InstanceType;
use karpenter_core::scheduling::{AllowUndefined, Requirements};
use serde_json::Value;

use crate::ecsnodeclass::{Alias, Image, ImageFamily, ImageSelectorTerm};

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

/// Alibaba's architecture names and the `kubernetes.io/arch` values they are. Images of any
/// other architecture (`i386`) are never offered.
pub const ARCHITECTURES: [(&str, &str); 2] = [("x86_64", ARCH_AMD64), ("arm64", ARCH_ARM64)];

/// The `DescribeImages` action, which resolves an id term.
pub const DESCRIBE_IMAGES: &str = "DescribeImages";

/// The `kubernetes.io/arch` value of an Alibaba architecture name.
pub fn kube_architecture(alibaba: &str) -> Option<&'static str> {
    ARCHITECTURES
        .iter()
        .find(|(name, _)| *name == alibaba)
        .map(|(_, arch)| *arch)
}

/// Why the images could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// An alias naming no family this provider knows.
    #[error("spec.imageSelectorTerms[{index}].alias: unsupported image family {alias:?}")]
    UnknownAlias {
        /// The term's position.
        index: usize,
        /// The alias as written.
        alias: String,
    },
    /// A term with neither an alias nor an id: asked as is, ECS would list every image.
    #[error("spec.imageSelectorTerms[{index}]: a term needs an alias or an id")]
    EmptyTerm {
        /// The term's position.
        index: usize,
    },
    /// ECS refused `DescribeImages` or could not be reached.
    #[cfg(feature = "cloud")]
    #[error("describing image {id} of spec.imageSelectorTerms[{index}]: {source}")]
    Describe {
        /// The term's position.
        index: usize,
        /// The image id asked for.
        id: String,
        /// What ECS said.
        source: crate::client::AlibabaError,
    },
}

/// An image of `architecture`, which boots only instance types of that architecture; `None`
/// for an architecture Kubernetes has no name for.
pub fn image(id: &str, name: &str, architecture: &str) -> Option<Image> {
    let arch = kube_architecture(architecture)?;
    Some(Image {
        id: id.to_string(),
        name: Some(name.to_string()).filter(|n| !n.is_empty()),
        requirements: sorted_requirements(vec![NodeSelectorRequirement {
            key: ARCH_LABEL.to_string(),
            operator: Operator::In.as_str().to_string(),
            values: Some(vec![arch.to_string()]),
        }]),
    })
}

/// Requirements in status order: shorter keys first, then by key.
pub fn sorted_requirements(
    mut requirements: Vec<NodeSelectorRequirement>,
) -> Vec<NodeSelectorRequirement> {
    requirements.sort_by(|a, b| {
        a.key
            .len()
            .cmp(&b.key.len())
            .then_with(|| a.key.cmp(&b.key))
    });
    requirements
}

/// Whether ACK's image belongs to `family`. Alibaba Cloud Linux 3 images are told by their
/// id (`aliyun_3_arm64_20G_alibase_20240819.vhd`), ContainerOS ones by their name.
pub fn in_family(family: ImageFamily, image: &ClusterImage) -> bool {
    match family {
        ImageFamily::AlibabaCloudLinux3 => is_alibaba_cloud_linux_3_id(&image.id),
        ImageFamily::ContainerOS => image.name.starts_with("ContainerOS"),
    }
}

/// `aliyun_3_`, then `G_alibase_`, then `vhd`, anywhere in the id and in that order.
fn is_alibaba_cloud_linux_3_id(id: &str) -> bool {
    let mut rest = id;
    for part in ["aliyun_3_", "G_alibase_", "vhd"] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The images of `family` among those the cluster's Kubernetes version offers, in ACK's
/// order. An alias's `@version` chooses nothing: ACK offers the images of the cluster's
/// version, and every one of the family is a candidate (so `@latest` and `@v1` alike).
pub fn family_images(family: ImageFamily, cluster_images: &[ClusterImage]) -> Vec<Image> {
    cluster_images
        .iter()
        .filter(|i| in_family(family, i))
        .filter_map(|i| image(&i.id, &i.name, &i.architecture))
        .collect()
}

/// The images an alias term selects.
pub fn alias_images(
    index: usize,
    alias: &str,
    cluster_images: &[ClusterImage],
) -> Result<Vec<Image>, ImageError> {
    let parsed = Alias::parse(alias).ok_or_else(|| ImageError::UnknownAlias {
        index,
        alias: alias.to_string(),
    })?;
    Ok(family_images(parsed.family, cluster_images))
}

/// The images of a `DescribeImages` answer's items for the id term `id`, each under the id
/// asked for; an image of an unknown architecture is left out.
pub fn described_images(id: &str, items: &[Value]) -> Vec<Image> {
    let text = |item: &Value, field: &str| {
        item.get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    items
        .iter()
        .filter_map(|item| image(id, &text(item, "ImageName"), &text(item, "Architecture")))
        .collect()
}

/// One image per set of requirements, the first found: an earlier term, and an earlier image
/// of a term, is preferred.
pub fn first_per_requirements(images: impl IntoIterator<Item = Image>) -> Vec<Image> {
    let mut seen = BTreeSet::new();
    images
        .into_iter()
        .filter(|i| seen.insert(requirements_key(&i.requirements)))
        .collect()
}

type RequirementKey = BTreeSet<(String, String, BTreeSet<String>)>;

/// Requirements compared as sets: order does not matter.
fn requirements_key(requirements: &[NodeSelectorRequirement]) -> RequirementKey {
    requirements
        .iter()
        .map(|r| {
            (
                r.key.clone(),
                r.operator.clone(),
                r.values.iter().flatten().cloned().collect(),
            )
        })
        .collect()
}

/// Checks every term before any is asked about.
pub fn check_terms(terms: &[ImageSelectorTerm]) -> Result<(), ImageError> {
    for (index, term) in terms.iter().enumerate() {
        let alias = term.alias.as_deref().filter(|a| !a.is_empty());
        let id = term.id.as_deref().filter(|i| !i.is_empty());
        match (alias, id) {
            (Some(alias), _) if Alias::parse(alias).is_none() => {
                return Err(ImageError::UnknownAlias {
                    index,
                    alias: alias.to_string(),
                });
            }
            (None, None) => return Err(ImageError::EmptyTerm { index }),
            _ => {}
        }
    }
    Ok(())
}

/// The images `terms` select: alias terms among `cluster_images` (what ACK offers for the
/// cluster's Kubernetes version), id terms through ECS's `DescribeImages`; one per set of
/// requirements (see [`first_per_requirements`]), in term order.
#[cfg(feature = "cloud")]
pub async fn resolve(
    client: &crate::client::Client,
    terms: &[ImageSelectorTerm],
    cluster_images: &[ClusterImage],
) -> Result<Vec<Image>, ImageError> {
    use crate::client::{Params, at_path};
    use crate::endpoint::Product;

    check_terms(terms)?;
    let mut found = Vec::new();
    for (index, term) in terms.iter().enumerate() {
        if let Some(alias) = term.alias.as_deref().filter(|a| !a.is_empty()) {
            found.extend(alias_images(index, alias, cluster_images)?);
            continue;
        }
        let id = term.id.clone().unwrap_or_default();
        let params = Params::new()
            .with("RegionId", client.endpoints().region.clone())
            .with("ImageId", id.clone())
            // A NodeClass keeps booting an image past its expiry, as upstream does.
            .with("ShowExpired", "true");
        let answer = client
            .call(Product::Ecs, DESCRIBE_IMAGES, &params)
            .await
            .map_err(|source| ImageError::Describe {
                index,
                id: id.clone(),
                source,
            })?;
        let items = match at_path(&answer, "Images.Image") {
            Some(Value::Array(items)) => items.as_slice(),
            _ => &[],
        };
        found.extend(described_images(&id, items));
    }
    Ok(first_per_requirements(found))
}

/// The provider's labels, which an instance type may leave undefined while an image requires
/// them (as upstream allows every well-known label to be).
static PROVIDER_LABELS: LazyLock<Vec<String>> = LazyLock::new(|| {
    crate::instancetype::LABELS
        .iter()
        .map(|l| l.to_string())
        .collect()
});

/// The image `instance_type` boots: the first of `images` (status order) whose requirements
/// its own are compatible with.
pub fn pick_image<'a>(images: &'a [Image], instance_type: &InstanceType) -> Option<&'a Image> {
    images.iter().find(|image| {
        instance_type
            .requirements
            .compatible(
                &Requirements::from_node_selector(&image.requirements),
                AllowUndefined::WellKnownLabels(&PROVIDER_LABELS),
            )
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::labels::ZONE_LABEL;
    use karpenter_core::instancetype::Overhead;
    use karpenter_core::resources::Resources;
    use karpenter_core::scheduling::Requirement;
    use serde_json::json;

    fn cluster_image(id: &str, name: &str, arch: &str) -> ClusterImage {
        ClusterImage {
            id: id.into(),
            name: name.into(),
            architecture: arch.into(),
            ..ClusterImage::default()
        }
    }

    /// What ACK offers for a Kubernetes version: both Alibaba Cloud Linux 3 architectures,
    /// ContainerOS, an i386 build and an Ubuntu image.
    fn offered() -> Vec<ClusterImage> {
        vec![
            cluster_image(
                "aliyun_3_x64_20G_alibase_20240819.vhd",
                "Alibaba Cloud Linux 3.2104 LTS 64 bit",
                "x86_64",
            ),
            cluster_image(
                "aliyun_3_arm64_20G_alibase_20240819.vhd",
                "Alibaba Cloud Linux 3.2104 LTS 64 bit ARM",
                "arm64",
            ),
            cluster_image("aliyun_3_x86_20G_alibase_20240819.vhd", "32 bit", "i386"),
            cluster_image(
                "lifsea_3_x64_10G_containerd_1_6_28_alibase_20240805.vhd",
                "ContainerOS 3.3 64 bit",
                "x86_64",
            ),
            cluster_image(
                "ubuntu_22_04_x64_20G_alibase_20240812.vhd",
                "Ubuntu 22.04",
                "x86_64",
            ),
        ]
    }

    fn arch_of(image: &Image) -> &str {
        let r = &image.requirements[0];
        assert_eq!((r.key.as_str(), r.operator.as_str()), (ARCH_LABEL, "In"));
        &r.values.as_ref().unwrap()[0]
    }

    #[test]
    fn families_pick_their_images_as_upstream_does() {
        let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
            (
                "AlibabaCloudLinux3",
                vec![
                    ("aliyun_3_x64_20G_alibase_20240819.vhd", "amd64"),
                    ("aliyun_3_arm64_20G_alibase_20240819.vhd", "arm64"),
                ],
            ),
            // The version picks nothing: every image of the family is a candidate.
            (
                "AlibabaCloudLinux3@v20240819",
                vec![
                    ("aliyun_3_x64_20G_alibase_20240819.vhd", "amd64"),
                    ("aliyun_3_arm64_20G_alibase_20240819.vhd", "arm64"),
                ],
            ),
            (
                "ContainerOS@latest",
                vec![(
                    "lifsea_3_x64_10G_containerd_1_6_28_alibase_20240805.vhd",
                    "amd64",
                )],
            ),
        ];
        for (alias, expected) in cases {
            let images = alias_images(0, alias, &offered()).unwrap();
            let got: Vec<(&str, &str)> =
                images.iter().map(|i| (i.id.as_str(), arch_of(i))).collect();
            assert_eq!(got, expected, "{alias}");
        }
        let e = alias_images(3, "Ubuntu", &offered()).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"spec.imageSelectorTerms[3].alias: unsupported image family "Ubuntu""#
        );
    }

    #[test]
    fn alibaba_cloud_linux_3_is_told_by_its_id() {
        for (id, matches) in [
            ("aliyun_3_arm64_20G_alibase_20240819.vhd", true),
            ("aliyun_3_9_x64_20G_alibase_20231219.vhd", true),
            ("m-aliyun_3_x64_40G_alibase_vhd", true),
            ("aliyun_2_1903_x64_20G_alibase_20240819.vhd", false),
            ("aliyun_3_x64_20G_uefi_20240819.vhd", false),
            ("aliyun_3_x64_20G_alibase_20240819.qcow2", false),
            ("G_alibase_aliyun_3_.vhd", false),
        ] {
            assert_eq!(is_alibaba_cloud_linux_3_id(id), matches, "{id}");
        }
    }

    #[test]
    fn described_images_keep_the_id_asked_and_skip_unknown_architectures() {
        let items = vec![
            json!({"ImageId": "m-bp1", "ImageName": "custom-node", "Architecture": "arm64",
                   "OSType": "linux", "Status": "Available", "Size": 20}),
            json!({"ImageId": "m-bp1", "ImageName": "old", "Architecture": "i386"}),
        ];
        let images = described_images("m-bp1", &items);
        assert_eq!(images.len(), 1);
        assert_eq!(images[0].id, "m-bp1");
        assert_eq!(images[0].name.as_deref(), Some("custom-node"));
        assert_eq!(arch_of(&images[0]), "arm64");
        assert!(described_images("m-x", &[]).is_empty());
    }

    #[test]
    fn one_image_per_requirements_the_earliest_wins() {
        let a = image("m-a", "a", "x86_64").unwrap();
        let b = image("m-b", "b", "arm64").unwrap();
        let c = image("m-c", "c", "x86_64").unwrap();
        let kept = first_per_requirements([a.clone(), b.clone(), c]);
        assert_eq!(kept, [a, b]);
    }

    #[test]
    fn requirements_are_ordered_by_key_length_then_key() {
        let req = |key: &str| NodeSelectorRequirement {
            key: key.into(),
            operator: "Exists".into(),
            values: None,
        };
        let sorted = sorted_requirements(vec![req("kubernetes.io/arch"), req("b/x"), req("a/x")]);
        let keys: Vec<&str> = sorted.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["a/x", "b/x", "kubernetes.io/arch"]);
    }

    #[test]
    fn terms_are_checked_before_any_call() {
        let term = |alias: Option<&str>, id: Option<&str>| ImageSelectorTerm {
            alias: alias.map(str::to_string),
            id: id.map(str::to_string),
        };
        assert!(check_terms(&[term(Some("ContainerOS"), None)]).is_ok());
        assert!(check_terms(&[term(None, Some("m-1")), term(None, Some("m-2"))]).is_ok());
        assert_eq!(
            check_terms(&[term(None, Some("m-1")), term(Some(""), Some(""))]),
            Err(ImageError::EmptyTerm { index: 1 })
        );
        assert_eq!(
            check_terms(&[term(Some("ContainerOS@a@b"), None)]),
            Err(ImageError::UnknownAlias {
                index: 0,
                alias: "ContainerOS@a@b".into()
            })
        );
    }

    fn instance_type(arch: &str, extra: Option<Requirement>) -> InstanceType {
        let mut requirements = Requirements::new();
        requirements.add(Requirement::new(ARCH_LABEL, Operator::In, &[arch]));
        requirements.add(Requirement::new(
            ZONE_LABEL,
            Operator::In,
            &["cn-hangzhou-h"],
        ));
        if let Some(r) = extra {
            requirements.add(r);
        }
        InstanceType::new(
            "ecs.g7.large",
            requirements,
            Vec::new(),
            Resources::default(),
            Overhead::default(),
        )
    }

    #[test]
    fn an_instance_type_boots_the_first_image_of_its_architecture() {
        let images = family_images(ImageFamily::AlibabaCloudLinux3, &offered());
        let arm = instance_type(ARCH_ARM64, None);
        let amd = instance_type(ARCH_AMD64, None);
        assert_eq!(
            pick_image(&images, &arm).map(|i| i.id.as_str()),
            Some("aliyun_3_arm64_20G_alibase_20240819.vhd")
        );
        assert_eq!(
            pick_image(&images, &amd).map(|i| i.id.as_str()),
            Some("aliyun_3_x64_20G_alibase_20240819.vhd")
        );
        let container_os = family_images(ImageFamily::ContainerOS, &offered());
        assert_eq!(pick_image(&container_os, &arm), None);
        assert_eq!(pick_image(&[], &amd), None);
    }

    #[test]
    fn an_image_may_require_a_provider_label_the_type_leaves_undefined() {
        let gpu = crate::instancetype::LABEL_INSTANCE_GPU_COUNT;
        let mut image = image("m-gpu", "gpu", "x86_64").unwrap();
        image.requirements.push(NodeSelectorRequirement {
            key: gpu.into(),
            operator: "Exists".into(),
            values: None,
        });
        // Undefined on the type: allowed, the provider's label is well known.
        assert!(
            pick_image(
                std::slice::from_ref(&image),
                &instance_type(ARCH_AMD64, None)
            )
            .is_some()
        );
        // Defined and disjoint: not this image.
        let no_gpu = Requirement::new(gpu, Operator::DoesNotExist, &[] as &[&str]);
        assert!(
            pick_image(
                std::slice::from_ref(&image),
                &instance_type(ARCH_AMD64, Some(no_gpu))
            )
            .is_none()
        );
        // A custom label the type does not define is not allowed.
        image.requirements.push(NodeSelectorRequirement {
            key: "example.com/team".into(),
            operator: "In".into(),
            values: Some(vec!["a".into()]),
        });
        assert!(pick_image(&[image], &instance_type(ARCH_AMD64, None)).is_none());
    }
}
