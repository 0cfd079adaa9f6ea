//! The GPU sizes AKS can run a node on: which vendor makes the GPU and which node images have
//! its drivers. A size with GPUs that is not listed here is not offered at all, and a listed
//! one only with an image family that supports it, as upstream's provider decides.

/// `nvidia`: the value of `karpenter.azure.com/sku-gpu-manufacturer`.
pub const NVIDIA: &str = "nvidia";
/// `amd`.
pub const AMD: &str = "amd";

/// The OS identifiers upstream keys image support by.
const UBUNTU: &str = "ubuntu";
const AZURE_LINUX: &str = "azurelinux";
const AZURE_LINUX_3: &str = "azurelinux3";
const WINDOWS: &str = "windows";

/// A supported GPU size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuSku {
    /// [`NVIDIA`] or [`AMD`].
    pub manufacturer: &'static str,
    /// The images with drivers for it (`ubuntu`, `azurelinux`, `azurelinux3`, `windows`).
    pub os: &'static [&'static str],
}

/// The registry, grouped by vendor and image support; names lower-case.
const GROUPS: &[(GpuSku, &[&str])] = &[
    (
        GpuSku {
            manufacturer: NVIDIA,
            os: &[UBUNTU, WINDOWS, AZURE_LINUX_3],
        },
        &[
            "standard_nc8ads_a10_v4",
            "standard_nc16ads_a10_v4",
            "standard_nc32ads_a10_v4",
            "standard_nc24ads_a100_v4",
            "standard_nc48ads_a100_v4",
            "standard_nc96ads_a100_v4",
            "standard_nc40ads_h100_v5",
            "standard_nc80adis_h100_v5",
            "standard_nd96asr_v4",
            "standard_nd112asr_a100_v4",
            "standard_nd120asr_a100_v4",
            "standard_nv6ads_a10_v5",
            "standard_nv12ads_a10_v5",
            "standard_nv18ads_a10_v5",
            "standard_nv36ads_a10_v5",
            "standard_nv36adms_a10_v5",
            "standard_nv72ads_a10_v5",
            "standard_nd96amsr_a100_v4",
            "standard_nd112amsr_a100_v4",
            "standard_nd120amsr_a100_v4",
            "standard_nd96isr_h100_v5",
            "standard_nd96is_h100_v5",
            "standard_nd96is_noib_h100_v5",
            "standard_nd96is_flex_h100_v5",
            "standard_nd96isf_h100_v5",
            "standard_nd96isrf_h100_v5",
            "standard_nd96ams_v4",
            "standard_nd96ams_a100_flex_v4",
            "standard_nd96ams_a100_v4",
            "standard_nd96amsf_a100_v4",
            "standard_nd96amsrf_a100_v4",
            "standard_nd96isr_h200_v5",
            "standard_nd96is_h200_v5",
            "standard_nd96isf_h200_v5",
            "standard_nd96isrf_h200_v5",
        ],
    ),
    (
        GpuSku {
            manufacturer: NVIDIA,
            os: &[UBUNTU, WINDOWS, AZURE_LINUX, AZURE_LINUX_3],
        },
        &[
            "standard_nc4as_t4_v3",
            "standard_nc8as_t4_v3",
            "standard_nc16as_t4_v3",
            "standard_nc64as_t4_v3",
            "standard_nc6s_v3",
            "standard_nc12s_v3",
            "standard_nc24s_v3",
            "standard_nc24rs_v3",
            "standard_nd40rs_v2",
            "standard_nd40s_v3",
        ],
    ),
    (
        GpuSku {
            manufacturer: NVIDIA,
            os: &[UBUNTU, WINDOWS],
        },
        &[
            "standard_nc6",
            "standard_nc12",
            "standard_nc24",
            "standard_nc24r",
            "standard_nc6s_v2",
            "standard_nc12s_v2",
            "standard_nc24s_v2",
            "standard_nc24rs_v2",
            "standard_nd6s",
            "standard_nd12s",
            "standard_nd24s",
            "standard_nd24rs",
            "standard_nv6",
            "standard_nv12",
            "standard_nv24",
            "standard_nv24r",
            "standard_nv12s_v3",
            "standard_nv24s_v3",
            "standard_nv48s_v3",
        ],
    ),
    (
        GpuSku {
            manufacturer: NVIDIA,
            os: &[UBUNTU],
        },
        &[
            "standard_nd128isr_ndr_gb200_v6",
            "standard_nd128isr_gb300_v6",
            "standard_nc24lds_xl_rtxpro6000bse_v6",
            "standard_nc36ds_xl_rtxpro6000bse_v6",
            "standard_nc36lds_xl_rtxpro6000bse_v6",
            "standard_nc72ds_xl_rtxpro6000bse_v6",
            "standard_nc72lds_xl_rtxpro6000bse_v6",
            "standard_nc144ds_xl_rtxpro6000bse_v6",
            "standard_nc144lds_xl_rtxpro6000bse_v6",
            "standard_nc288ds_xl_rtxpro6000bse_v6",
            "standard_nc288lds_xl_rtxpro6000bse_v6",
        ],
    ),
    (
        GpuSku {
            manufacturer: AMD,
            os: &[UBUNTU],
        },
        &[
            "standard_nv4ads_v710_v5",
            "standard_nv8ads_v710_v5",
            "standard_nv12ads_v710_v5",
            "standard_nv24ads_v710_v5",
            "standard_nv28adms_v710_v5",
            "standard_nd96isr_mi300x_v5",
            "standard_nd96is_mi300x_v5",
        ],
    ),
];

/// The registry entry of a size, matched case-insensitively; a `_Promo` size is its base size.
pub fn gpu_sku(vm_size: &str) -> Option<GpuSku> {
    let lower = vm_size.to_ascii_lowercase();
    let name = lower.strip_suffix("_promo").unwrap_or(&lower);
    GROUPS
        .iter()
        .find(|(_, names)| names.contains(&name))
        .map(|(sku, _)| *sku)
}

/// Whether the size is a supported GPU size (of any vendor).
pub fn is_gpu_sku(vm_size: &str) -> bool {
    gpu_sku(vm_size).is_some()
}

/// The GPU vendor of a supported GPU size.
pub fn manufacturer(vm_size: &str) -> Option<&'static str> {
    gpu_sku(vm_size).map(|s| s.manufacturer)
}

/// Whether images of `os` (`ubuntu`, `azurelinux`, `azurelinux3`) have drivers for the size.
pub fn supported_on_os(vm_size: &str, os: &str) -> bool {
    gpu_sku(vm_size).is_some_and(|s| s.os.contains(&os))
}

/// Whether the node bootstrap can install the size's GPU driver: NVIDIA only, so far.
pub fn driver_install_supported(vm_size: &str) -> bool {
    manufacturer(vm_size) == Some(NVIDIA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_lookups() {
        // (size, manufacturer, ubuntu, azurelinux, azurelinux3, driver installable)
        let cases = [
            (
                "Standard_NC24ads_A100_v4",
                Some(NVIDIA),
                true,
                false,
                true,
                true,
            ),
            ("Standard_NC6s_v3", Some(NVIDIA), true, true, true, true),
            ("STANDARD_NC6_PROMO", Some(NVIDIA), true, false, false, true),
            (
                "Standard_NV4ads_V710_v5",
                Some(AMD),
                true,
                false,
                false,
                false,
            ),
            (
                "Standard_ND128isr_GB300_v6",
                Some(NVIDIA),
                true,
                false,
                false,
                true,
            ),
            ("Standard_NG8ads_V620_v1", None, false, false, false, false),
            ("Standard_D2s_v3", None, false, false, false, false),
        ];
        for (name, vendor, ubuntu, al2, al3, driver) in cases {
            assert_eq!(manufacturer(name), vendor, "{name}");
            assert_eq!(is_gpu_sku(name), vendor.is_some(), "{name}");
            assert_eq!(supported_on_os(name, "ubuntu"), ubuntu, "{name}");
            assert_eq!(supported_on_os(name, "azurelinux"), al2, "{name}");
            assert_eq!(supported_on_os(name, "azurelinux3"), al3, "{name}");
            assert_eq!(driver_install_supported(name), driver, "{name}");
        }
    }

    #[test]
    fn registry_has_every_size_once() {
        let mut names: Vec<&str> = GROUPS.iter().flat_map(|(_, n)| n.iter().copied()).collect();
        let total = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), total);
        assert_eq!(total, 82);
    }
}
