//! The node images each image family boots: AKS's image definitions in its galleries, in the
//! order upstream prefers them, and the instance types (architecture, Hyper-V generation) each
//! boots. The family a NodeClass asks for resolves to a concrete OS release by its FIPS mode,
//! Trusted Launch and the cluster's Kubernetes version.

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use karpenter_api::Operator;
use karpenter_api::labels::ARCH_LABEL;
use karpenter_core::scheduling::{Requirement, Requirements};

use super::version::{use_azure_linux3, use_ubuntu2404};
use crate::aksnodeclass::{AKSNodeClassSpec, ImageFamily};
use crate::instancetype::LABEL_SKU_HYPERV_GENERATION;
use Arch::{Amd64, Arm64};
use Gallery::{AksAzureLinux, AksUbuntu};
use HyperVGeneration::{V1, V2};

/// A gallery AKS publishes node images to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gallery {
    /// The Ubuntu images.
    AksUbuntu,
    /// The Azure Linux images.
    AksAzureLinux,
}

impl Gallery {
    /// The gallery's public name as a community gallery.
    pub fn community_name(self) -> &'static str {
        match self {
            Self::AksUbuntu => "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2",
            Self::AksAzureLinux => "AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b",
        }
    }

    /// The resource group of the gallery as a shared image gallery.
    pub fn resource_group(self) -> &'static str {
        match self {
            Self::AksUbuntu => "AKS-Ubuntu",
            Self::AksAzureLinux => "AKS-AzureLinux",
        }
    }

    /// The gallery's name as a shared image gallery.
    pub fn name(self) -> &'static str {
        match self {
            Self::AksUbuntu => "AKSUbuntu",
            Self::AksAzureLinux => "AKSAzureLinux",
        }
    }
}

/// A CPU architecture, as `kubernetes.io/arch` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// x86-64.
    Amd64,
    /// 64-bit Arm.
    Arm64,
}

impl Arch {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Amd64 => "amd64",
            Self::Arm64 => "arm64",
        }
    }
}

/// A Hyper-V generation, as `karpenter.azure.com/sku-hyperv-generation` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HyperVGeneration {
    /// Generation 1 (BIOS).
    V1,
    /// Generation 2 (UEFI).
    V2,
}

impl HyperVGeneration {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1 => "1",
            Self::V2 => "2",
        }
    }
}

/// Where images are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageSource {
    /// AKS's public community galleries: upstream's default, and the only source a self-hosted
    /// Karpenter can read. They carry no FIPS images.
    CommunityGallery,
    /// AKS's shared image galleries, readable by AKS's managed Karpenter (node auto-provisioning)
    /// only; the FIPS images are there.
    SharedImageGallery,
}

/// An image definition a family boots, and the instance types it boots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DefaultImage {
    /// The gallery holding the definition.
    pub gallery: Gallery,
    /// The image definition (`2204gen2containerd`).
    pub definition: &'static str,
    /// AKS's name for the OS build, which node bootstrapping asks for.
    pub distro: &'static str,
    /// The architecture it runs on.
    pub arch: Arch,
    /// The Hyper-V generation it boots on.
    pub hyperv_generation: HyperVGeneration,
}

impl DefaultImage {
    const fn new(
        gallery: Gallery,
        definition: &'static str,
        distro: &'static str,
        arch: Arch,
        hyperv_generation: HyperVGeneration,
    ) -> Self {
        Self {
            gallery,
            definition,
            distro,
            arch,
            hyperv_generation,
        }
    }

    /// What an instance type must satisfy to boot the image.
    pub fn requirements(&self) -> Requirements {
        [
            Requirement::new(ARCH_LABEL, Operator::In, &[self.arch.as_str()]),
            Requirement::new(
                LABEL_SKU_HYPERV_GENERATION,
                Operator::In,
                &[self.hyperv_generation.as_str()],
            ),
        ]
        .into_iter()
        .collect()
    }

    /// The requirements as `status.images` lists them: sorted by key length, then key, as
    /// upstream sorts them so the status does not churn.
    pub fn node_selector_requirements(&self) -> Vec<NodeSelectorRequirement> {
        let mut requirements = vec![
            in_values(ARCH_LABEL, self.arch.as_str()),
            in_values(LABEL_SKU_HYPERV_GENERATION, self.hyperv_generation.as_str()),
        ];
        requirements.sort_by(|a, b| a.key.len().cmp(&b.key.len()).then(a.key.cmp(&b.key)));
        requirements
    }
}

fn in_values(key: &str, value: &str) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_string(),
        operator: Operator::In.as_str().to_string(),
        values: Some(vec![value.to_string()]),
    }
}

/// The OS release an image family resolves to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResolvedFamily {
    /// Ubuntu 20.04: reached only by `Ubuntu` with FIPS and without Trusted Launch.
    Ubuntu2004,
    /// Ubuntu 22.04.
    Ubuntu2204,
    /// Ubuntu 24.04.
    Ubuntu2404,
    /// Azure Linux 2, before Kubernetes 1.32.
    AzureLinux2,
    /// Azure Linux 3, from Kubernetes 1.32.
    AzureLinux3,
}

impl ResolvedFamily {
    /// The release `family` boots with these settings. `Ubuntu` follows AKS's default: 20.04
    /// for FIPS (22.04 with Trusted Launch, which 20.04 lacks), else 22.04 with Trusted
    /// Launch, else 24.04 from Kubernetes 1.34 and 22.04 before.
    pub fn resolve(
        family: ImageFamily,
        fips: bool,
        trusted_launch: bool,
        kubernetes_version: &str,
    ) -> Self {
        match family {
            ImageFamily::Ubuntu2204 => Self::Ubuntu2204,
            ImageFamily::Ubuntu2404 => Self::Ubuntu2404,
            ImageFamily::AzureLinux if use_azure_linux3(kubernetes_version) => Self::AzureLinux3,
            ImageFamily::AzureLinux => Self::AzureLinux2,
            ImageFamily::Ubuntu => default_ubuntu(fips, trusted_launch, kubernetes_version),
        }
    }

    /// Upstream's name for the release, which its image-selection metric is labelled with
    /// (20.04 keeps the generic `Ubuntu`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Ubuntu2004 => "Ubuntu",
            Self::Ubuntu2204 => "Ubuntu2204",
            Self::Ubuntu2404 => "Ubuntu2404",
            Self::AzureLinux2 => "AzureLinux2",
            Self::AzureLinux3 => "AzureLinux3",
        }
    }

    /// The images the release boots, most preferred first. FIPS images live in the shared
    /// image galleries only, so FIPS from the community galleries is none; otherwise FIPS
    /// wins over Trusted Launch, which replaces the standard images.
    pub fn images(
        self,
        fips: bool,
        trusted_launch: bool,
        source: ImageSource,
    ) -> &'static [DefaultImage] {
        if fips {
            return match source {
                ImageSource::CommunityGallery => &[],
                ImageSource::SharedImageGallery => self.fips_images(trusted_launch),
            };
        }
        if trusted_launch {
            return self.trusted_launch_images();
        }
        self.standard_images()
    }

    fn fips_images(self, trusted_launch: bool) -> &'static [DefaultImage] {
        match self {
            // 20.04 has no Trusted Launch build at all.
            Self::Ubuntu2004 if trusted_launch => &[],
            Self::Ubuntu2004 => UBUNTU_2004_FIPS,
            // 22.04 has a FIPS build with Trusted Launch only.
            Self::Ubuntu2204 if trusted_launch => UBUNTU_2204_FIPS_TRUSTED_LAUNCH,
            Self::Ubuntu2204 | Self::Ubuntu2404 => &[],
            Self::AzureLinux2 => AZURE_LINUX_2_FIPS,
            Self::AzureLinux3 => AZURE_LINUX_3_FIPS,
        }
    }

    fn trusted_launch_images(self) -> &'static [DefaultImage] {
        match self {
            Self::Ubuntu2004 => &[],
            Self::Ubuntu2204 => UBUNTU_2204_TRUSTED_LAUNCH,
            Self::Ubuntu2404 => UBUNTU_2404_TRUSTED_LAUNCH,
            Self::AzureLinux2 => AZURE_LINUX_2_TRUSTED_LAUNCH,
            Self::AzureLinux3 => AZURE_LINUX_3_TRUSTED_LAUNCH,
        }
    }

    fn standard_images(self) -> &'static [DefaultImage] {
        match self {
            Self::Ubuntu2004 => &[],
            Self::Ubuntu2204 => UBUNTU_2204,
            Self::Ubuntu2404 => UBUNTU_2404,
            Self::AzureLinux2 => AZURE_LINUX_2,
            Self::AzureLinux3 => AZURE_LINUX_3,
        }
    }
}

fn default_ubuntu(fips: bool, trusted_launch: bool, kubernetes_version: &str) -> ResolvedFamily {
    match (fips, trusted_launch) {
        (_, true) => ResolvedFamily::Ubuntu2204,
        (true, false) => ResolvedFamily::Ubuntu2004,
        (false, false) if use_ubuntu2404(kubernetes_version) => ResolvedFamily::Ubuntu2404,
        (false, false) => ResolvedFamily::Ubuntu2204,
    }
}

/// The release a NodeClass's spec boots on a cluster at `kubernetes_version`.
pub fn resolve_family(spec: &AKSNodeClassSpec, kubernetes_version: &str) -> ResolvedFamily {
    ResolvedFamily::resolve(
        spec.image_family(),
        spec.fips(),
        spec.trusted_launch(),
        kubernetes_version,
    )
}

/// The images a NodeClass's spec boots on a cluster at `kubernetes_version`, most preferred
/// first: what `status.images` lists, each at its latest version.
pub fn default_images(
    spec: &AKSNodeClassSpec,
    kubernetes_version: &str,
    source: ImageSource,
) -> &'static [DefaultImage] {
    resolve_family(spec, kubernetes_version).images(spec.fips(), spec.trusted_launch(), source)
}

// Each list is in upstream's preference order: the first image an instance type can boot is
// the one it boots, so generation 2 comes before generation 1.

const UBUNTU_2004_FIPS: &[DefaultImage] = &[
    DefaultImage::new(
        AksUbuntu,
        "2004gen2fipscontainerd",
        "aks-ubuntu-fips-containerd-20.04-gen2",
        Amd64,
        V2,
    ),
    DefaultImage::new(
        AksUbuntu,
        "2004fipscontainerd",
        "aks-ubuntu-fips-containerd-20.04",
        Amd64,
        V1,
    ),
];

const UBUNTU_2204: &[DefaultImage] = &[
    DefaultImage::new(
        AksUbuntu,
        "2204gen2containerd",
        "aks-ubuntu-containerd-22.04-gen2",
        Amd64,
        V2,
    ),
    DefaultImage::new(
        AksUbuntu,
        "2204containerd",
        "aks-ubuntu-containerd-22.04",
        Amd64,
        V1,
    ),
    DefaultImage::new(
        AksUbuntu,
        "2204gen2arm64containerd",
        "aks-ubuntu-arm64-containerd-22.04-gen2",
        Arm64,
        V2,
    ),
];

const UBUNTU_2204_TRUSTED_LAUNCH: &[DefaultImage] = &[DefaultImage::new(
    AksUbuntu,
    "2204gen2TLcontainerd",
    "aks-ubuntu-containerd-22.04-tl-gen2",
    Amd64,
    V2,
)];

const UBUNTU_2204_FIPS_TRUSTED_LAUNCH: &[DefaultImage] = &[DefaultImage::new(
    AksUbuntu,
    "2204gen2fipsTLcontainerd",
    "aks-ubuntu-fips-containerd-22.04-tl-gen2",
    Amd64,
    V2,
)];

const UBUNTU_2404: &[DefaultImage] = &[
    DefaultImage::new(
        AksUbuntu,
        "2404gen2containerd",
        "aks-ubuntu-containerd-24.04-gen2",
        Amd64,
        V2,
    ),
    DefaultImage::new(
        AksUbuntu,
        "2404containerd",
        "aks-ubuntu-containerd-24.04",
        Amd64,
        V1,
    ),
    DefaultImage::new(
        AksUbuntu,
        "2404gen2arm64containerd",
        "aks-ubuntu-arm64-containerd-24.04-gen2",
        Arm64,
        V2,
    ),
];

const UBUNTU_2404_TRUSTED_LAUNCH: &[DefaultImage] = &[DefaultImage::new(
    AksUbuntu,
    "2404gen2TLcontainerd",
    "aks-ubuntu-containerd-24.04-tl-gen2",
    Amd64,
    V2,
)];

const AZURE_LINUX_2: &[DefaultImage] = &[
    DefaultImage::new(AksAzureLinux, "V2gen2", "aks-azurelinux-v2-gen2", Amd64, V2),
    DefaultImage::new(AksAzureLinux, "V2", "aks-azurelinux-v2", Amd64, V1),
    DefaultImage::new(
        AksAzureLinux,
        "V2gen2arm64",
        "aks-azurelinux-v2-arm64-gen2",
        Arm64,
        V2,
    ),
];

const AZURE_LINUX_2_TRUSTED_LAUNCH: &[DefaultImage] = &[DefaultImage::new(
    AksAzureLinux,
    "V2gen2TL",
    "aks-azurelinux-v2-gen2-tl",
    Amd64,
    V2,
)];

const AZURE_LINUX_2_FIPS: &[DefaultImage] = &[
    DefaultImage::new(
        AksAzureLinux,
        "V2gen2fips",
        "aks-azurelinux-v2-gen2-fips",
        Amd64,
        V2,
    ),
    DefaultImage::new(AksAzureLinux, "V2fips", "aks-azurelinux-v2-fips", Amd64, V1),
];

const AZURE_LINUX_3: &[DefaultImage] = &[
    DefaultImage::new(AksAzureLinux, "V3gen2", "aks-azurelinux-v3-gen2", Amd64, V2),
    DefaultImage::new(AksAzureLinux, "V3", "aks-azurelinux-v3", Amd64, V1),
    DefaultImage::new(
        AksAzureLinux,
        "V3gen2arm64",
        "aks-azurelinux-v3-arm64-gen2",
        Arm64,
        V2,
    ),
];

const AZURE_LINUX_3_TRUSTED_LAUNCH: &[DefaultImage] = &[DefaultImage::new(
    AksAzureLinux,
    "V3gen2TL",
    "aks-azurelinux-v3-gen2-tl",
    Amd64,
    V2,
)];

const AZURE_LINUX_3_FIPS: &[DefaultImage] = &[
    DefaultImage::new(
        AksAzureLinux,
        "V3gen2fips",
        "aks-azurelinux-v3-gen2-fips",
        Amd64,
        V2,
    ),
    DefaultImage::new(AksAzureLinux, "V3fips", "aks-azurelinux-v3-fips", Amd64, V1),
    DefaultImage::new(
        AksAzureLinux,
        "V3gen2arm64fips",
        "aks-azurelinux-v3-arm64-gen2-fips",
        Arm64,
        V2,
    ),
];
