//! Which NVIDIA driver a GPU node installs. The node pulls it as the image
//! `mcr.microsoft.com/aks/aks-gpu-<type>:<version>-<image sha>`; the versions are AgentBaker's,
//! and the CUDA one must match the userspace libraries AKS's GPU images are built with, or
//! NVML reports a driver/library mismatch and the device plugin sees no GPU.

use crate::gpus;

/// The NVIDIA driver a node installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuDriver {
    /// `cuda-lts`, `cuda`, `grid` or `grid-v20`: the image flavour.
    pub driver_type: &'static str,
    /// The driver version (`580.159.04`).
    pub version: &'static str,
    /// The image's version suffix (a timestamp).
    pub image_sha: &'static str,
}

/// The R580 LTS CUDA driver: the default for compute sizes (T4, V100, A100, H100, …).
const CUDA_LTS: GpuDriver = GpuDriver {
    driver_type: "cuda-lts",
    version: "580.159.04",
    image_sha: "20260629214430",
};

/// The R470 CUDA driver, the last with the NCv1's K80; its image suffix is the LTS one.
const CUDA_470: GpuDriver = GpuDriver {
    driver_type: "cuda",
    version: "470.82.01",
    image_sha: CUDA_LTS.image_sha,
};

/// The converged GRID driver, for sizes whose GPUs serve both graphics and compute and on
/// which the CUDA driver fails to install.
const GRID: GpuDriver = GpuDriver {
    driver_type: "grid",
    version: "570.211.01",
    image_sha: "20260522192315",
};

/// The GRID v20 driver, which the RTX PRO 6000 Blackwell sizes need.
const GRID_V20: GpuDriver = GpuDriver {
    driver_type: "grid-v20",
    version: "595.58.03",
    image_sha: "20260609172331",
};

/// Sizes on the converged GRID driver (lower case).
const GRID_SIZES: [&str; 9] = [
    "standard_nv6ads_a10_v5",
    "standard_nv12ads_a10_v5",
    "standard_nv18ads_a10_v5",
    "standard_nv36ads_a10_v5",
    "standard_nv72ads_a10_v5",
    "standard_nv36adms_a10_v5",
    "standard_nc8ads_a10_v4",
    "standard_nc16ads_a10_v4",
    "standard_nc32ads_a10_v4",
];

/// Sizes on the GRID v20 driver (lower case).
const GRID_V20_SIZES: [&str; 9] = [
    "standard_nc24lds_xl_rtxpro6000bse_v6",
    "standard_nc36ds_xl_rtxpro6000bse_v6",
    "standard_nc36lds_xl_rtxpro6000bse_v6",
    "standard_nc72ds_xl_rtxpro6000bse_v6",
    "standard_nc72lds_xl_rtxpro6000bse_v6",
    "standard_nc144ds_xl_rtxpro6000bse_v6",
    "standard_nc144lds_xl_rtxpro6000bse_v6",
    "standard_nc288ds_xl_rtxpro6000bse_v6",
    "standard_nc288lds_xl_rtxpro6000bse_v6",
];

/// The driver for an NVIDIA size, matched case-insensitively. A size upstream does not list
/// gets the CUDA LTS driver; unlike the GPU registry, a `_Promo` suffix is not stripped here,
/// so a promo size of a GRID size gets CUDA, as upstream's.
pub fn gpu_driver(vm_size: &str) -> GpuDriver {
    let size = vm_size.to_ascii_lowercase();
    if GRID_V20_SIZES.contains(&size.as_str()) {
        GRID_V20
    } else if GRID_SIZES.contains(&size.as_str()) {
        GRID
    } else if is_ncv1(&size) {
        CUDA_470
    } else {
        CUDA_LTS
    }
}

/// The original NC series (`Standard_NC6`, `Standard_NC24r`): no `_v` version.
fn is_ncv1(lower_size: &str) -> bool {
    lower_size.starts_with("standard_nc") && !lower_size.contains("_v")
}

/// The driver the node installs: one for an NVIDIA size whose NodeClass wants it, none for
/// other sizes (AMD drivers are not installed by the bootstrap) or with `gpu.mode: None`,
/// where the node also runs plain runc instead of the NVIDIA runtime.
pub(super) fn driver_to_install(vm_size: &str, wanted: bool) -> Option<GpuDriver> {
    (wanted && gpus::driver_install_supported(vm_size)).then(|| gpu_driver(vm_size))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's `TestGetAKSGPUImageSHA` and `TestGetGPUDriverVersion`, in one table.
    #[test]
    fn drivers_by_size() {
        let cases = [
            ("standard_nc8ads_a10_v4", GRID),
            ("standard_nc144ds_xl_rtxpro6000bse_v6", GRID_V20),
            ("standard_nc144lds_xl_rtxpro6000bse_v6", GRID_V20),
            ("Standard_NC24lds_xl_RTXPRO6000BSE_v6", GRID_V20),
            ("standard_nv6", CUDA_LTS),
            ("standard_nc6s_v3", CUDA_LTS),
            ("standard_nv6ads_a10_v5", GRID),
            ("unknown_sku", CUDA_LTS),
            ("standard_nc6s_v2", CUDA_LTS),
            ("standard_nv12s_v3", CUDA_LTS),
            ("standard_nc6s", CUDA_470),
            ("Standard_NC6", CUDA_470),
            ("Standard_NC16as_T4_v3", CUDA_LTS),
        ];
        for (size, want) in cases {
            assert_eq!(gpu_driver(size), want, "{size}");
        }
        assert_eq!(CUDA_470.image_sha, "20260629214430");
    }

    /// Upstream's `TestIsNvidiaEnabledSKU` through the decision, and `gpu.mode`.
    #[test]
    fn drivers_installed() {
        let cases = [
            ("standard_nc6s_v3", true, Some(CUDA_LTS)),
            ("standard_nc6s_v2_promo", true, Some(CUDA_LTS)),
            ("non_existent_sku", true, None),
            ("standard_nv6", true, Some(CUDA_LTS)),
            ("standard_d2_v2", true, None),
            ("standard_nc4as_t4_v3", true, Some(CUDA_LTS)),
            ("Standard_NC24lds_xl_RTXPRO6000BSE_v6", true, Some(GRID_V20)),
            ("", true, None),
            // AMD: the node installs no driver.
            ("Standard_NV4ads_V710_v5", true, None),
            // `gpu.mode: None`.
            ("standard_nc6s_v3", false, None),
        ];
        for (size, wanted, want) in cases {
            assert_eq!(driver_to_install(size, wanted), want, "{size} {wanted}");
        }
    }
}
