//! The ARM Resource SKUs list (`GET /subscriptions/{sub}/providers/Microsoft.Compute/skus`,
//! api-version 2021-07-01) as parsed data, and the questions the provider asks of a SKU: its
//! capabilities, the zones it can be placed in, whether the region restricts it. The wire
//! client lives elsewhere; these functions take the response body.

use std::collections::BTreeSet;

use serde::{Deserialize, Deserializer};

/// The `resourceType` of VM sizes; the list also has disks, availability sets and more.
pub const VIRTUAL_MACHINES: &str = "virtualMachines";

/// Why a response could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SkuError {
    /// The body is not a Resource SKUs list.
    #[error("parsing the Resource SKUs list: {0}")]
    Parse(#[from] serde_json::Error),
}

/// One page of the list (`ResourceSkusResult`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSkuPage {
    /// The SKUs.
    #[serde(default, deserialize_with = "nullable")]
    pub value: Vec<ResourceSku>,
    /// The next page, when there is one.
    #[serde(default)]
    pub next_link: Option<String>,
}

/// A SKU (`ResourceSku`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSku {
    /// `virtualMachines`, `disks`, …
    #[serde(default, deserialize_with = "nullable")]
    pub resource_type: String,
    /// `Standard_D2s_v3`.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// `Standard`.
    #[serde(default)]
    pub tier: Option<String>,
    /// `D2s_v3`: the name without its tier, which the size grammar parses.
    #[serde(default)]
    pub size: Option<String>,
    /// The quota family (`standardDSv3Family`).
    #[serde(default)]
    pub family: Option<String>,
    /// The regions the entry describes (one, with a location filter).
    #[serde(default, deserialize_with = "nullable")]
    pub locations: Vec<String>,
    /// Zones per region.
    #[serde(default, deserialize_with = "nullable")]
    pub location_info: Vec<LocationInfo>,
    /// `{name, value}` pairs: `vCPUs`, `MemoryGB`, `HyperVGenerations`, …
    #[serde(default, deserialize_with = "nullable")]
    pub capabilities: Vec<Capability>,
    /// Where the subscription may not deploy the SKU.
    #[serde(default, deserialize_with = "nullable")]
    pub restrictions: Vec<Restriction>,
}

/// A region's zones for a SKU.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocationInfo {
    /// `eastus`.
    #[serde(default, deserialize_with = "nullable")]
    pub location: String,
    /// ARM zone numbers (`"1"`); empty for a region without zones.
    #[serde(default, deserialize_with = "nullable")]
    pub zones: Vec<String>,
    /// Capabilities that hold in some zones only (`UltraSSDAvailable`).
    #[serde(default, deserialize_with = "nullable")]
    pub zone_details: Vec<ZoneDetails>,
}

/// Capabilities of a set of zones.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ZoneDetails {
    /// The zones (`"1"`).
    #[serde(default, deserialize_with = "nullable")]
    pub name: Vec<String>,
    /// What holds in them.
    #[serde(default, deserialize_with = "nullable")]
    pub capabilities: Vec<Capability>,
}

/// A capability; values are strings whatever they mean (`"2"`, `"True"`, `"V1,V2"`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Capability {
    /// `vCPUs`.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// `"2"`.
    #[serde(default)]
    pub value: Option<String>,
}

/// A restriction on deploying the SKU.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Restriction {
    /// `Location` (the whole region) or `Zone` (the zones in `restriction_info`).
    #[serde(rename = "type", default, deserialize_with = "nullable")]
    pub kind: String,
    /// The regions it applies to.
    #[serde(default, deserialize_with = "nullable")]
    pub values: Vec<String>,
    /// The regions and zones it applies to.
    #[serde(default)]
    pub restriction_info: Option<RestrictionInfo>,
    /// `QuotaId` or `NotAvailableForSubscription`.
    #[serde(default)]
    pub reason_code: Option<String>,
}

/// Where a restriction applies.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct RestrictionInfo {
    /// Regions.
    #[serde(default, deserialize_with = "nullable")]
    pub locations: Vec<String>,
    /// Zones.
    #[serde(default, deserialize_with = "nullable")]
    pub zones: Vec<String>,
}

/// ARM writes `null` for absent lists as often as it leaves them out.
fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Parses one page of the Resource SKUs list.
pub fn parse_page(body: &str) -> Result<ResourceSkuPage, SkuError> {
    Ok(serde_json::from_str(body)?)
}

/// Region names compare without case or spaces (`East US` is `eastus`).
fn same_location(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    norm(a) == norm(b)
}

/// Whether a capability value says yes (`True`, any case).
fn is_true(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

impl ResourceSku {
    /// A capability's value, by its exact name (the numeric capabilities are looked up so).
    pub fn capability(&self, name: &str) -> Option<&str> {
        self.capabilities
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.value.as_deref())
    }

    /// An integer capability; `None` when absent or not an integer.
    pub fn capability_i64(&self, name: &str) -> Option<i64> {
        self.capability(name)?.parse().ok()
    }

    /// A yes/no capability (`EncryptionAtHostSupported`): true only when present and `True`;
    /// the name matches without case.
    pub fn has_capability(&self, name: &str) -> bool {
        let found = self
            .capabilities
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name));
        is_true(found.and_then(|c| c.value.as_deref()))
    }

    /// Whether a list capability (`HyperVGenerations` = `V1,V2`) contains `value`, ignoring
    /// case and spaces.
    pub fn capability_contains(&self, name: &str, value: &str) -> bool {
        let norm = |s: &str| {
            s.chars()
                .filter(|c| !c.is_whitespace())
                .flat_map(char::to_lowercase)
                .collect::<String>()
        };
        self.capabilities
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .and_then(|c| c.value.as_deref())
            .is_some_and(|v| norm(v).contains(&norm(value)))
    }

    /// Whether a yes/no capability holds in an ARM zone (`"1"`), from `zoneDetails`.
    pub fn has_capability_in_zone(&self, name: &str, zone: &str) -> bool {
        self.location_info
            .iter()
            .flat_map(|l| &l.zone_details)
            .filter(|d| d.name.iter().any(|z| z.eq_ignore_ascii_case(zone)))
            .flat_map(|d| &d.capabilities)
            .any(|c| c.name.eq_ignore_ascii_case(name) && is_true(c.value.as_deref()))
    }

    /// vCPUs.
    pub fn vcpus(&self) -> Option<i64> {
        self.capability_i64("vCPUs")
    }

    /// Memory in GiB (ARM calls it `MemoryGB`, but the unit is GiB).
    pub fn memory_gib(&self) -> Option<f64> {
        self.capability("MemoryGB")?.parse().ok()
    }

    /// Memory in MiB, truncated: the `sku-memory` label.
    pub fn memory_mib(&self) -> Option<i64> {
        self.memory_gib().map(|g| (g * 1024.0) as i64)
    }

    /// GPUs; `None` when the SKU reports none.
    pub fn gpus(&self) -> Option<i64> {
        self.capability_i64("GPUs")
    }

    /// `x64` or `Arm64`.
    pub fn cpu_architecture(&self) -> Option<&str> {
        self.capability("CpuArchitectureType")
    }

    /// Whether spot (low priority) VMs of this size can be had in the region.
    pub fn low_priority_capable(&self) -> bool {
        self.has_capability("LowPriorityCapable")
    }

    /// Whether Hyper-V generation 1 images boot on it.
    pub fn hyperv_gen1(&self) -> bool {
        self.capability_contains("HyperVGenerations", "V1")
    }

    /// Whether Hyper-V generation 2 images boot on it.
    pub fn hyperv_gen2(&self) -> bool {
        self.capability_contains("HyperVGenerations", "V2")
    }

    /// Trusted launch: generation 2 sizes support it unless `TrustedLaunchDisabled` says so.
    pub fn trusted_launch_supported(&self) -> bool {
        self.hyperv_gen2() && !self.capability_contains("TrustedLaunchDisabled", "True")
    }

    /// Whether a `Location` restriction names the region: the SKU cannot be deployed there.
    pub fn location_restricted(&self, region: &str) -> bool {
        self.restrictions
            .iter()
            .filter(|r| r.kind == "Location")
            .any(|r| r.values.iter().any(|v| same_location(v, region)))
    }

    /// The ARM zones (`"1"`) the SKU can be placed in within the region: its zones less those
    /// a `Zone` restriction names. `None` when a `Location` restriction rules out the region;
    /// empty for a region (or SKU) without zones.
    pub fn available_zones(&self, region: &str) -> Option<BTreeSet<String>> {
        let mut zones = BTreeSet::new();
        let mut restricted = BTreeSet::new();
        for info in self
            .location_info
            .iter()
            .filter(|l| same_location(&l.location, region))
        {
            zones.extend(info.zones.iter().cloned());
            for r in &self.restrictions {
                if !r.values.iter().any(|v| same_location(v, region)) {
                    continue;
                }
                if r.kind == "Location" {
                    return None;
                }
                if let Some(info) = &r.restriction_info {
                    restricted.extend(info.zones.iter().cloned());
                }
            }
        }
        Some(zones.difference(&restricted).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Vec<ResourceSku> {
        parse_page(include_str!("../testdata/resource-skus-eastus.json"))
            .expect("the fixture parses")
            .value
    }

    fn sku(name: &str) -> ResourceSku {
        fixture()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} is in the fixture"))
    }

    #[test]
    fn page_parses_with_nulls_and_next_link() {
        let page = parse_page(
            r#"{"value":[{"resourceType":"virtualMachines","name":"Standard_X","locations":null,
                "capabilities":[{"name":"vCPUs","value":"4"},{"name":"MemoryGB","value":null}],
                "restrictions":null}],"nextLink":"https://management.azure.com/next"}"#,
        )
        .expect("parses");
        assert_eq!(
            page.next_link.as_deref(),
            Some("https://management.azure.com/next")
        );
        let sku = &page.value[0];
        assert_eq!(sku.vcpus(), Some(4));
        assert_eq!(sku.memory_gib(), None);
        assert!(sku.locations.is_empty() && sku.restrictions.is_empty());
        assert!(parse_page(r#"{"value": 3}"#).is_err());
    }

    #[test]
    fn capabilities_read_as_upstream() {
        let d2s = sku("Standard_D2s_v3");
        assert_eq!(d2s.vcpus(), Some(2));
        assert_eq!(d2s.memory_mib(), Some(8192));
        assert_eq!(d2s.cpu_architecture(), Some("x64"));
        assert!(d2s.hyperv_gen1() && d2s.hyperv_gen2());
        assert!(d2s.trusted_launch_supported());
        assert!(d2s.low_priority_capable());
        assert!(d2s.has_capability("encryptionathostsupported"));
        assert!(d2s.has_capability_in_zone("UltraSSDAvailable", "2"));
        assert!(!d2s.has_capability_in_zone("UltraSSDAvailable", "1"));

        let d2v2 = sku("Standard_D2_v2");
        assert!(d2v2.hyperv_gen1() && !d2v2.hyperv_gen2());
        assert!(!d2v2.trusted_launch_supported(), "generation 1 only");
        assert!(!d2v2.has_capability("EncryptionAtHostSupported"), "False");

        let a100 = sku("Standard_NC24ads_A100_v4");
        assert!(
            !a100.trusted_launch_supported(),
            "TrustedLaunchDisabled=True"
        );
        assert_eq!(a100.gpus(), Some(1));
        assert!(!sku("Standard_B20ms").low_priority_capable());
    }

    #[test]
    fn zones_less_restrictions() {
        let set = |zones: &[&str]| zones.iter().map(|z| z.to_string()).collect();
        for (name, expected) in [
            ("Standard_D2s_v3", Some(set(&["1", "2", "3"]))),
            // A Zone restriction on zone 3.
            ("Standard_D2_v2", Some(set(&["1", "2"]))),
            // No zones in the region: regional only.
            ("Standard_NC6s_v3", Some(set(&[]))),
            // A Location restriction rules the region out.
            ("Standard_F2s_v2", None),
        ] {
            assert_eq!(sku(name).available_zones("eastus"), expected, "{name}");
        }
        let f2 = sku("Standard_F2s_v2");
        assert!(f2.location_restricted("East US"));
        assert!(!f2.location_restricted("westus2"));
        assert!(!sku("Standard_D2_v2").location_restricted("eastus"));
        // Another region: no location info there, so no zones.
        assert_eq!(
            sku("Standard_D2s_v3").available_zones("westus2"),
            Some(set(&[]))
        );
    }
}
