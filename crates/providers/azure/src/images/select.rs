//! Which of `status.images` a NodeClaim boots: the first its instance type can run, and the
//! OS build that image is, which bootstrapping asks for.

use std::sync::LazyLock;

use karpenter_core::instancetype::InstanceType;
use karpenter_core::scheduling::{AllowUndefined, Requirements};

use super::ImageError;
use super::family::DefaultImage;
use super::status::ImageId;
use crate::aksnodeclass::NodeImage;
use crate::instancetype::AZURE_LABELS;

/// The provider's labels, which an instance type may leave undefined and an image still
/// require (upstream allows every well-known and restricted label to be undefined).
static PROVIDER_LABELS: LazyLock<Vec<String>> =
    LazyLock::new(|| AZURE_LABELS.iter().map(|l| l.to_string()).collect());

/// The image an instance type boots: the first of `images` (most preferred first, as
/// `status.images` lists them) whose requirements the instance type's are compatible with.
pub fn pick_image<'a>(
    images: &'a [NodeImage],
    instance_type: &InstanceType,
) -> Result<&'a NodeImage, ImageError> {
    images
        .iter()
        .find(|image| boots(image, &instance_type.requirements))
        .ok_or_else(|| ImageError::NoCompatibleImage(instance_type.name.clone()))
}

/// Whether an instance type with `requirements` can boot `image`.
pub fn boots(image: &NodeImage, requirements: &Requirements) -> bool {
    let image_requirements = Requirements::from_node_selector(&image.requirements);
    requirements
        .compatible(
            &image_requirements,
            AllowUndefined::WellKnownLabels(&PROVIDER_LABELS),
        )
        .is_ok()
}

/// The OS build (`aks-ubuntu-containerd-22.04-gen2`) of the image `image_id`, looked up by its
/// definition among `images` (the family's, as [`super::default_images`] lists them).
pub fn distro(image_id: &str, images: &[DefaultImage]) -> Result<&'static str, ImageError> {
    let definition = ImageId::parse(image_id)?.definition();
    images
        .iter()
        .find(|i| i.definition == definition)
        .map(|i| i.distro)
        .ok_or_else(|| ImageError::UnknownDistro(image_id.to_string()))
}
