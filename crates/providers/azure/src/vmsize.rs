//! VM size names by Azure's naming convention (`<family><subfamily><vCPUs>[-<constrained
//! vCPUs>]<features>[_<accelerator>][_v<version>]`), parsed from a Resource SKU's `size`
//! (`D2s_v3`, no `Standard_` prefix) the way upstream's SKU library parses them: the family,
//! series and version labels come from here, and sizes that do not parse are not offered.

use std::sync::OnceLock;

use regex::Regex;

/// The parts of a VM size name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VmSize {
    /// The family letter (`D`).
    pub family: String,
    /// The sub-family letters (`C` in `NC24ads_A100_v4`), if any.
    pub subfamily: Option<String>,
    /// The vCPUs in the name.
    pub cpus: String,
    /// The vCPUs a constrained size exposes (`2` in `M8-2ms`).
    pub cpus_constrained: Option<String>,
    /// The additive feature letters (`ads`).
    pub features: String,
    /// The accelerator (`A100`, `V710`), if named.
    pub accelerator: Option<String>,
    /// The version with its `v` (`v4`), empty when the name has none.
    pub version: String,
    /// Family, sub-family, features and version (`NCads_v4`).
    pub series: String,
}

impl VmSize {
    /// The `karpenter.azure.com/sku-version` value: the version without its `v`, `1` for a
    /// size without one.
    pub fn version_label(&self) -> String {
        match self.version.strip_prefix(['v', 'V']) {
            Some(v) => v.to_string(),
            None => "1".to_string(),
        }
    }
}

fn pattern() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN.get_or_init(|| {
        // The grammar of size names, as the SKU library accepts them. The optional groups
        // after the accelerator (`_cc_`, `_<n>_`, `_MI300X_`, `_H100_`, `_Promo`) only have to
        // match; they do not change the labels.
        Regex::new(concat!(
            r"^(?P<family>[A-Z])(?P<sub>[A-Z]?[A-Z]?)(?P<cpus>[0-9]+)-?(?P<constrained>[0-9]*)",
            r"(?P<features>[abcdeilmtspPr]+|C+|NP)?_?(?:(?P<accel>[A-Z][0-9]+)_?)?",
            r"(?:_cc_)?(?:_[0-9]+_)?(?:_MI300X_)?(?:_H100_)?(?P<version>[vV][1-9])?(?:_Promo)?$",
        ))
        .expect("the VM size pattern compiles")
    })
}

/// Parses a Resource SKU's `size` (`D2s_v3`); `None` when the name does not follow the
/// convention (such sizes are skipped).
pub fn parse(size: &str) -> Option<VmSize> {
    let caps = pattern().captures(size)?;
    let text = |name: &str| caps.name(name).map_or("", |m| m.as_str()).to_string();
    let nonempty = |s: String| Some(s).filter(|s| !s.is_empty());
    let (family, sub, features, version) = (
        text("family"),
        text("sub"),
        text("features"),
        text("version"),
    );
    let series = if version.is_empty() {
        format!("{family}{sub}{features}")
    } else {
        format!("{family}{sub}{features}_{version}")
    };
    Some(VmSize {
        family,
        subfamily: nonempty(sub),
        cpus: text("cpus"),
        cpus_constrained: nonempty(text("constrained")),
        features,
        accelerator: nonempty(text("accel")),
        version,
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_into_series_and_version() {
        // (size, series, version label, constrained, accelerator)
        type Case = (
            &'static str,
            &'static str,
            &'static str,
            Option<&'static str>,
            Option<&'static str>,
        );
        let cases: [Case; 11] = [
            ("D2s_v3", "Ds_v3", "3", None, None),
            ("D2_v2", "D_v2", "2", None, None),
            ("D4pls_v6", "Dpls_v6", "6", None, None),
            ("NC24ads_A100_v4", "NCads_v4", "4", None, Some("A100")),
            ("NV4ads_V710_v5", "NVads_v5", "5", None, Some("V710")),
            ("ND96isr_H100_v5", "NDisr_v5", "5", None, Some("H100")),
            ("M8-2ms", "Mms", "1", Some("2"), None),
            ("E8-4ds_v5", "Eds_v5", "5", Some("4"), None),
            ("F8", "F", "1", None, None),
            ("NC6_Promo", "NC", "1", None, None),
            ("M416s_8_v2", "Ms_v2", "2", None, None),
        ];
        for (size, series, version, constrained, accel) in cases {
            let parsed = parse(size).unwrap_or_else(|| panic!("{size} parses"));
            assert_eq!(parsed.series, series, "{size}");
            assert_eq!(parsed.version_label(), version, "{size}");
            assert_eq!(parsed.cpus_constrained.as_deref(), constrained, "{size}");
            assert_eq!(parsed.accelerator.as_deref(), accel, "{size}");
        }
    }

    #[test]
    fn unconventional_names_do_not_parse() {
        for size in ["", "d2s_v3", "Standard_D2s_v3", "D2s_v3_extra", "DS"] {
            assert_eq!(parse(size), None, "{size}");
        }
    }
}
