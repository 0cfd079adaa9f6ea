//! Versions: of AKS node images (`202411.12.0`), ordered to find the newest, and of Kubernetes,
//! which decides the OS release some families boot.

use std::str::FromStr;

use super::ImageError;

/// An AKS node image version: dot-separated numbers, `yyyymm.dd.build` (`202411.12.0`), older
/// images `yyyy.mm.dd` (`2022.10.03`). Ordered number by number; when one is a prefix of the
/// other, the longer is newer. The year-and-month first number makes every current version
/// newer than every legacy one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageVersion(Vec<u64>);

impl FromStr for ImageVersion {
    type Err = ImageError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.split('.')
            .map(|segment| segment.parse::<u64>())
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
            .map_err(|_| ImageError::InvalidVersion(s.to_string()))
    }
}

/// Whether image version `a` is newer than `b`; false when either does not parse, so a
/// malformed version never displaces a good one.
pub fn is_newer_version(a: &str, b: &str) -> bool {
    match (a.parse::<ImageVersion>(), b.parse::<ImageVersion>()) {
        (Ok(a), Ok(b)) => a > b,
        _ => false,
    }
}

/// Whether a cluster at `kubernetes_version` boots Azure Linux 3 for `AzureLinux` (from 1.32).
/// A version that does not parse keeps Azure Linux 2.
pub fn use_azure_linux3(kubernetes_version: &str) -> bool {
    at_least(kubernetes_version, 1, 32)
}

/// Whether a cluster at `kubernetes_version` boots Ubuntu 24.04 for `Ubuntu` (from 1.34).
/// A version that does not parse keeps Ubuntu 22.04.
pub fn use_ubuntu2404(kubernetes_version: &str) -> bool {
    at_least(kubernetes_version, 1, 34)
}

/// A Kubernetes version, read leniently as upstream reads it (`v1.32`, `1.32.0`, `1.32.1-rc.0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KubernetesVersion {
    release: (u64, u64, u64),
    prerelease: bool,
}

fn parse_kubernetes_version(s: &str) -> Option<KubernetesVersion> {
    let s = s.trim();
    let s = s.strip_prefix('v').unwrap_or(s);
    // Build metadata does not order; a prerelease orders before its release.
    let s = s.split_once('+').map_or(s, |(version, _)| version);
    let (core, prerelease) = match s.split_once('-') {
        Some((core, _)) => (core, true),
        None => (s, false),
    };
    let numbers: Vec<u64> = core
        .split('.')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // A short version (`1.32`) means `.0`, but then it may not carry a prerelease.
    let release = match numbers[..] {
        [major, minor, patch] => (major, minor, patch),
        [major, minor] if !prerelease => (major, minor, 0),
        [major] if !prerelease => (major, 0, 0),
        _ => return None,
    };
    Some(KubernetesVersion {
        release,
        prerelease,
    })
}

fn at_least(kubernetes_version: &str, major: u64, minor: u64) -> bool {
    parse_kubernetes_version(kubernetes_version).is_some_and(|v| {
        let threshold = (major, minor, 0);
        v.release > threshold || (v.release == threshold && !v.prerelease)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's table for its version comparison, as (a, b, a is newer).
    #[test]
    fn image_versions_order_as_upstreams() {
        let cases = [
            ("202308.28.0", "202411.12.0", false),
            ("202411.12.0", "202308.28.0", true),
            ("202202.08.29", "202405.20.0", false),
            ("202404.09.0", "202411.12.0", false),
            ("202405.20.0", "202404.09.0", true),
            ("2022.10.03", "2022.12.15", false),
            ("202411.12.0", "2022.12.15", true),
            ("2022.12.15", "2022.10.03", true),
            ("202411.12.0", "202411.12.0", false),
            ("2o2411.12.0", "202411.12.0", false),
        ];
        for (a, b, newer) in cases {
            assert_eq!(is_newer_version(a, b), newer, "{a} newer than {b}");
        }
    }

    #[test]
    fn a_longer_version_with_the_same_prefix_is_newer() {
        assert!(is_newer_version("2022.10.03.1", "2022.10.03"));
        assert!(!is_newer_version("2022.10.03", "2022.10.03.1"));
    }

    #[test]
    fn image_versions_parse_number_by_number() {
        assert_eq!(
            "202411.12.0".parse::<ImageVersion>(),
            Ok(ImageVersion(vec![202411, 12, 0]))
        );
        assert_eq!(
            "2022.10.03".parse::<ImageVersion>(),
            Ok(ImageVersion(vec![2022, 10, 3]))
        );
        for bad in ["", "202411..0", "202411.12.x", "v1.2"] {
            assert_eq!(
                bad.parse::<ImageVersion>(),
                Err(ImageError::InvalidVersion(bad.to_string())),
                "{bad}"
            );
        }
    }

    #[test]
    fn azure_linux_3_from_kubernetes_1_32() {
        let cases = [
            ("1.31.0", false),
            ("1.31.9", false),
            ("1.32.0", true),
            ("v1.32.0", true),
            ("1.32", true),
            ("1.33.2", true),
            ("2.0.0", true),
            ("1.32.0-rc.1", false),
            ("1.32.1-rc.1", true),
            ("1.32.0+aks.1", true),
            ("", false),
            ("not-a-version", false),
        ];
        for (version, expected) in cases {
            assert_eq!(use_azure_linux3(version), expected, "{version:?}");
        }
    }

    #[test]
    fn ubuntu_2404_from_kubernetes_1_34() {
        let cases = [
            ("1.33.0", false),
            ("1.33.10", false),
            ("1.34.0", true),
            ("v1.34.1", true),
            ("1.35.0", true),
            ("1.34-rc.0", false),
            ("garbage", false),
        ];
        for (version, expected) in cases {
            assert_eq!(use_ubuntu2404(version), expected, "{version:?}");
        }
    }
}
