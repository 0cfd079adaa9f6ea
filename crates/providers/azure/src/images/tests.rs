//! Upstream's image-selection tables: the images each family lists per Kubernetes version,
//! FIPS mode, Trusted Launch and gallery, and the image each kind of instance type boots.

use karpenter_api::Operator;
use karpenter_api::labels::{ARCH_LABEL, INSTANCE_TYPE_LABEL};
use karpenter_core::instancetype::{InstanceType, Overhead};
use karpenter_core::resources::Resources;
use karpenter_core::scheduling::{Requirement, Requirements};

use super::*;
use crate::aksnodeclass::{AKSNodeClassSpec, NodeImage, Security, TrustedLaunch};
use crate::instancetype::LABEL_SKU_HYPERV_GENERATION;

use ImageSource::{CommunityGallery as Cig, SharedImageGallery as Sig};

const UBUNTU_2204: [&str; 3] = [
    "2204gen2containerd",
    "2204containerd",
    "2204gen2arm64containerd",
];
const UBUNTU_2404: [&str; 3] = [
    "2404gen2containerd",
    "2404containerd",
    "2404gen2arm64containerd",
];
const AZURE_LINUX_2: [&str; 3] = ["V2gen2", "V2", "V2gen2arm64"];
const AZURE_LINUX_3: [&str; 3] = ["V3gen2", "V3", "V3gen2arm64"];

/// A spec: `family` (`None` for the CRD default), `spec.fipsMode`, Trusted Launch.
fn spec(family: Option<&str>, fips_mode: Option<&str>, trusted_launch: bool) -> AKSNodeClassSpec {
    let mut spec = AKSNodeClassSpec::default();
    if let Some(family) = family {
        spec.image_family = family.into();
    }
    spec.fips_mode = fips_mode.map(str::to_string);
    if trusted_launch {
        spec.security = Some(Security {
            trusted_launch: Some(TrustedLaunch {
                vtpm: Some(true),
                secure_boot: Some(true),
            }),
            ..Default::default()
        });
    }
    spec
}

fn definitions(
    spec: &AKSNodeClassSpec,
    kubernetes_version: &str,
    source: ImageSource,
) -> Vec<&'static str> {
    default_images(spec, kubernetes_version, source)
        .iter()
        .map(|i| i.definition)
        .collect()
}

/// (family, fipsMode, Trusted Launch, Kubernetes version, gallery, definitions).
type DefinitionsCase = (
    Option<&'static str>,
    Option<&'static str>,
    bool,
    &'static str,
    ImageSource,
    &'static [&'static str],
);

/// From upstream's node image provider tests.
#[test]
fn each_family_lists_upstreams_definitions_in_order() {
    let cases: &[DefinitionsCase] = &[
        // Community galleries, upstream's default.
        (Some("Ubuntu2204"), None, false, "1.31.0", Cig, &UBUNTU_2204),
        (Some("Ubuntu2404"), None, false, "1.31.0", Cig, &UBUNTU_2404),
        (
            Some("AzureLinux"),
            None,
            false,
            "1.31.0",
            Cig,
            &AZURE_LINUX_2,
        ),
        (
            Some("AzureLinux"),
            None,
            false,
            "1.32.0",
            Cig,
            &AZURE_LINUX_3,
        ),
        (
            Some("Ubuntu2204"),
            None,
            true,
            "1.31.0",
            Cig,
            &["2204gen2TLcontainerd"],
        ),
        (
            Some("Ubuntu2404"),
            None,
            true,
            "1.31.0",
            Cig,
            &["2404gen2TLcontainerd"],
        ),
        (Some("AzureLinux"), None, true, "1.31.0", Cig, &["V2gen2TL"]),
        (Some("AzureLinux"), None, true, "1.32.0", Cig, &["V3gen2TL"]),
        // The community galleries have no FIPS images.
        (Some("Ubuntu"), Some("FIPS"), false, "1.31.0", Cig, &[]),
        (Some("AzureLinux"), Some("FIPS"), false, "1.32.0", Cig, &[]),
        (Some("Ubuntu2204"), Some("FIPS"), true, "1.31.0", Cig, &[]),
        // Shared image galleries: Trusted Launch.
        (
            Some("Ubuntu2204"),
            None,
            true,
            "1.31.0",
            Sig,
            &["2204gen2TLcontainerd"],
        ),
        (
            Some("Ubuntu2404"),
            None,
            true,
            "1.31.0",
            Sig,
            &["2404gen2TLcontainerd"],
        ),
        (Some("AzureLinux"), None, true, "1.31.0", Sig, &["V2gen2TL"]),
        (Some("AzureLinux"), None, true, "1.32.0", Sig, &["V3gen2TL"]),
        // FIPS.
        (
            Some("Ubuntu"),
            Some("FIPS"),
            false,
            "1.33.0",
            Sig,
            &["2004gen2fipscontainerd", "2004fipscontainerd"],
        ),
        (
            Some("Ubuntu"),
            Some("FIPS"),
            false,
            "1.34.0",
            Sig,
            &["2004gen2fipscontainerd", "2004fipscontainerd"],
        ),
        (
            Some("Ubuntu"),
            Some("FIPS"),
            true,
            "1.31.0",
            Sig,
            &["2204gen2fipsTLcontainerd"],
        ),
        (Some("Ubuntu2204"), Some("FIPS"), false, "1.31.0", Sig, &[]),
        (
            Some("Ubuntu2204"),
            Some("FIPS"),
            true,
            "1.31.0",
            Sig,
            &["2204gen2fipsTLcontainerd"],
        ),
        (Some("Ubuntu2404"), Some("FIPS"), false, "1.34.0", Sig, &[]),
        (
            Some("AzureLinux"),
            Some("FIPS"),
            false,
            "1.31.0",
            Sig,
            &["V2gen2fips", "V2fips"],
        ),
        (
            Some("AzureLinux"),
            Some("FIPS"),
            true,
            "1.31.0",
            Sig,
            &["V2gen2fips", "V2fips"],
        ),
        (
            Some("AzureLinux"),
            Some("FIPS"),
            false,
            "1.32.0",
            Sig,
            &["V3gen2fips", "V3fips", "V3gen2arm64fips"],
        ),
        // FIPS disabled, explicitly or not set.
        (
            Some("AzureLinux"),
            Some("Disabled"),
            false,
            "1.31.0",
            Sig,
            &AZURE_LINUX_2,
        ),
        (
            Some("AzureLinux"),
            None,
            false,
            "1.31.0",
            Sig,
            &AZURE_LINUX_2,
        ),
        (
            Some("AzureLinux"),
            Some("Disabled"),
            false,
            "1.32.0",
            Sig,
            &AZURE_LINUX_3,
        ),
        (
            Some("AzureLinux"),
            None,
            false,
            "1.32.0",
            Sig,
            &AZURE_LINUX_3,
        ),
        (
            Some("Ubuntu2204"),
            Some("Disabled"),
            false,
            "1.34.0",
            Sig,
            &UBUNTU_2204,
        ),
        (
            Some("Ubuntu2404"),
            Some("Disabled"),
            false,
            "1.31.0",
            Sig,
            &UBUNTU_2404,
        ),
        // Generic Ubuntu: 22.04 before Kubernetes 1.34, 24.04 from it; the default family too.
        (Some("Ubuntu"), None, false, "1.33.0", Sig, &UBUNTU_2204),
        (
            Some("Ubuntu"),
            Some("Disabled"),
            false,
            "1.33.0",
            Cig,
            &UBUNTU_2204,
        ),
        (Some("Ubuntu"), None, false, "1.34.0", Sig, &UBUNTU_2404),
        (
            Some("Ubuntu"),
            Some("Disabled"),
            false,
            "1.34.0",
            Cig,
            &UBUNTU_2404,
        ),
        (None, None, false, "1.33.0", Sig, &UBUNTU_2204),
        (None, None, false, "1.34.0", Sig, &UBUNTU_2404),
        (None, None, false, "1.34.0", Cig, &UBUNTU_2404),
        // Trusted Launch keeps generic Ubuntu on 22.04, which has the build.
        (
            Some("Ubuntu"),
            None,
            true,
            "1.34.0",
            Cig,
            &["2204gen2TLcontainerd"],
        ),
    ];
    for &(family, fips_mode, trusted_launch, version, source, expected) in cases {
        let spec = spec(family, fips_mode, trusted_launch);
        assert_eq!(
            definitions(&spec, version, source),
            expected,
            "{family:?} fips={fips_mode:?} trustedLaunch={trusted_launch} k8s={version} {source:?}"
        );
    }
}

#[test]
fn families_resolve_and_are_named_as_upstream() {
    let cases = [
        (
            Some("Ubuntu"),
            Some("FIPS"),
            false,
            "1.31.0",
            ResolvedFamily::Ubuntu2004,
            "Ubuntu",
        ),
        (
            Some("Ubuntu"),
            Some("FIPS"),
            true,
            "1.31.0",
            ResolvedFamily::Ubuntu2204,
            "Ubuntu2204",
        ),
        (
            Some("Ubuntu"),
            None,
            false,
            "1.33.9",
            ResolvedFamily::Ubuntu2204,
            "Ubuntu2204",
        ),
        (
            Some("Ubuntu"),
            None,
            false,
            "1.34.0",
            ResolvedFamily::Ubuntu2404,
            "Ubuntu2404",
        ),
        (
            Some("Ubuntu2204"),
            Some("FIPS"),
            false,
            "1.34.0",
            ResolvedFamily::Ubuntu2204,
            "Ubuntu2204",
        ),
        (
            Some("AzureLinux"),
            None,
            false,
            "1.31.0",
            ResolvedFamily::AzureLinux2,
            "AzureLinux2",
        ),
        (
            Some("AzureLinux"),
            None,
            false,
            "v1.32.0",
            ResolvedFamily::AzureLinux3,
            "AzureLinux3",
        ),
        (
            Some("AzureLinux"),
            None,
            false,
            "unparseable",
            ResolvedFamily::AzureLinux2,
            "AzureLinux2",
        ),
    ];
    for (family, fips_mode, trusted_launch, version, expected, name) in cases {
        let resolved = resolve_family(&spec(family, fips_mode, trusted_launch), version);
        assert_eq!(
            resolved, expected,
            "{family:?} {fips_mode:?} {trusted_launch} {version}"
        );
        assert_eq!(resolved.name(), name);
    }
}

#[test]
fn images_live_in_their_familys_gallery() {
    for family in [
        ResolvedFamily::Ubuntu2004,
        ResolvedFamily::Ubuntu2204,
        ResolvedFamily::Ubuntu2404,
        ResolvedFamily::AzureLinux2,
        ResolvedFamily::AzureLinux3,
    ] {
        let gallery = match family {
            ResolvedFamily::AzureLinux2 | ResolvedFamily::AzureLinux3 => Gallery::AksAzureLinux,
            _ => Gallery::AksUbuntu,
        };
        for (fips, trusted_launch) in [(false, false), (false, true), (true, false), (true, true)] {
            for image in family.images(fips, trusted_launch, Sig) {
                assert_eq!(image.gallery, gallery, "{}", image.definition);
                // Definitions name their architecture and generation; check they agree.
                let arm = image.definition.contains("arm64");
                assert_eq!(image.arch == Arch::Arm64, arm, "{}", image.definition);
                let gen2 = image.definition.contains("gen2");
                assert_eq!(
                    image.hyperv_generation == HyperVGeneration::V2,
                    gen2,
                    "{}",
                    image.definition
                );
            }
        }
    }
}

fn instance_type(name: &str, arch: &str, generations: &[&str]) -> InstanceType {
    let requirements: Requirements = [
        Requirement::new(INSTANCE_TYPE_LABEL, Operator::In, &[name]),
        Requirement::new(ARCH_LABEL, Operator::In, &[arch]),
        if generations.is_empty() {
            Requirement::new(
                LABEL_SKU_HYPERV_GENERATION,
                Operator::DoesNotExist,
                &[] as &[&str],
            )
        } else {
            Requirement::new(LABEL_SKU_HYPERV_GENERATION, Operator::In, generations)
        },
    ]
    .into_iter()
    .collect();
    InstanceType::new(
        name,
        requirements,
        vec![],
        Resources::default(),
        Overhead::default(),
    )
}

fn status_images(
    spec: &AKSNodeClassSpec,
    kubernetes_version: &str,
    source: ImageSource,
) -> Vec<NodeImage> {
    default_images(spec, kubernetes_version, source)
        .iter()
        .map(|i| match source {
            Cig => i.community_node_image("202505.27.0"),
            Sig => i.shared_node_image("10945678-1234-1234-1234-123456789012", "202512.18.0"),
        })
        .collect()
}

fn picked(images: &[NodeImage], instance_type: &InstanceType) -> String {
    let image = pick_image(images, instance_type).unwrap();
    ImageId::parse(&image.id).unwrap().definition().to_string()
}

/// Upstream's instance type provider table: a gen1-and-gen2 size boots the gen2 image, a
/// gen1-only size the gen1 image, an Arm size the Arm image, from either gallery.
#[test]
fn each_instance_type_boots_the_first_image_it_can() {
    let d2_v5 = instance_type("Standard_D2_v5", "amd64", &["1", "2"]);
    let d2_v3 = instance_type("Standard_D2_v3", "amd64", &["1"]);
    let d16plds_v5 = instance_type("Standard_D16plds_v5", "arm64", &["2"]);
    let cases = [
        (Some("Ubuntu2204"), "1.31.0", &UBUNTU_2204),
        (Some("Ubuntu2404"), "1.31.0", &UBUNTU_2404),
        (Some("AzureLinux"), "1.31.0", &AZURE_LINUX_2),
        (Some("AzureLinux"), "1.32.0", &AZURE_LINUX_3),
        (None, "1.34.0", &UBUNTU_2404),
    ];
    for (family, version, [gen2, gen1, arm]) in cases {
        for source in [Cig, Sig] {
            let images = status_images(&spec(family, None, false), version, source);
            assert_eq!(
                picked(&images, &d2_v5),
                *gen2,
                "{family:?} {version} {source:?}"
            );
            assert_eq!(
                picked(&images, &d2_v3),
                *gen1,
                "{family:?} {version} {source:?}"
            );
            assert_eq!(
                picked(&images, &d16plds_v5),
                *arm,
                "{family:?} {version} {source:?}"
            );
        }
    }
    let fips = status_images(
        &spec(Some("AzureLinux"), Some("FIPS"), false),
        "1.32.0",
        Sig,
    );
    assert_eq!(picked(&fips, &d2_v3), "V3fips");
    assert_eq!(picked(&fips, &d16plds_v5), "V3gen2arm64fips");
}

#[test]
fn an_instance_type_no_image_boots_is_an_error() {
    let d2_v3 = instance_type("Standard_D2_v3", "amd64", &["1"]);
    // Trusted Launch images are gen2 only.
    let trusted = status_images(&spec(Some("Ubuntu2204"), None, true), "1.31.0", Cig);
    assert_eq!(
        pick_image(&trusted, &d2_v3),
        Err(ImageError::NoCompatibleImage("Standard_D2_v3".into()))
    );
    let unknown_generation = instance_type("Standard_X1", "amd64", &[]);
    let images = status_images(&spec(None, None, false), "1.33.0", Cig);
    assert!(pick_image(&images, &unknown_generation).is_err());
    assert!(pick_image(&[], &d2_v3).is_err());
    assert_eq!(
        ImageError::NoCompatibleImage("Standard_D2_v3".into()).to_string(),
        "no compatible images found for instance type Standard_D2_v3"
    );
}

#[test]
fn an_instance_type_without_the_generation_label_boots_the_first_matching_arch() {
    // The label is the provider's own: an instance type that does not define it is not ruled
    // out by it, as upstream allows its well-known labels to be undefined.
    let requirements: Requirements = [Requirement::new(ARCH_LABEL, Operator::In, &["arm64"])]
        .into_iter()
        .collect();
    let bare = InstanceType::new(
        "bare",
        requirements,
        vec![],
        Resources::default(),
        Overhead::default(),
    );
    let images = status_images(&spec(Some("Ubuntu2204"), None, false), "1.31.0", Cig);
    assert_eq!(picked(&images, &bare), "2204gen2arm64containerd");
}

#[test]
fn the_distro_of_an_image_is_its_definitions() {
    let spec = spec(Some("Ubuntu2204"), None, false);
    let images = default_images(&spec, "1.31.0", Cig);
    let status = status_images(&spec, "1.31.0", Cig);
    assert_eq!(
        distro(&status[0].id, images),
        Ok("aks-ubuntu-containerd-22.04-gen2")
    );
    assert_eq!(
        distro(&status[2].id, images),
        Ok("aks-ubuntu-arm64-containerd-22.04-gen2")
    );
    let other = community_image_id(Gallery::AksAzureLinux.community_name(), "V3gen2", "1.0.0");
    assert_eq!(
        distro(&other, images),
        Err(ImageError::UnknownDistro(other.clone()))
    );
    assert!(matches!(
        distro("garbage", images),
        Err(ImageError::InvalidImageId(_))
    ));
}
