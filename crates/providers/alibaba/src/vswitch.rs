//! The vSwitches an `ECSNodeClass`'s `vSwitchSelectorTerms` select: one VPC
//! `DescribeVSwitches` listing per term (by id, by tags, or both), every page, merged by id.
//! Status lists them with the most free addresses first; a launch takes, per zone, the one
//! with the most ([`first_per_zone`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::ecsnodeclass::{VSwitch, VSwitchSelectorTerm};

/// The VPC action that lists vSwitches.
pub const ACTION: &str = "DescribeVSwitches";
/// vSwitches per page: the most VPC returns.
pub const PAGE_SIZE: u32 = 50;
/// Where the answer lists them.
pub const ITEMS: &str = "VSwitches.VSwitch";
/// A tag value that matches any value: the tag's value is left out of the filter.
pub const ANY_VALUE: &str = "*";

/// A vSwitch as `DescribeVSwitches` describes it: what status lists, and the free addresses a
/// launch weighs vSwitches by.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct VSwitchInfo {
    /// `VSwitchId`, `vsw-…`.
    #[serde(rename = "VSwitchId")]
    pub id: String,
    /// `ZoneId`, `cn-hangzhou-h`.
    #[serde(rename = "ZoneId")]
    pub zone_id: String,
    /// `AvailableIpAddressCount`: addresses still free in the vSwitch.
    #[serde(rename = "AvailableIpAddressCount", default)]
    pub available_ip_address_count: i64,
}

impl VSwitchInfo {
    /// The status entry.
    pub fn to_status(&self) -> VSwitch {
        VSwitch {
            id: self.id.clone(),
            zone_id: self.zone_id.clone(),
        }
    }
}

/// Why the vSwitches could not be listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VSwitchError {
    /// A term that selects nothing in particular: sent as is, it would list every vSwitch
    /// of the region.
    #[error("spec.vSwitchSelectorTerms[{index}]: a term needs an id or tags")]
    EmptyTerm {
        /// The term's position.
        index: usize,
    },
    /// A listed vSwitch that could not be read.
    #[error("{ACTION} answer: {reason}")]
    Parse {
        /// What was wrong.
        reason: String,
    },
    /// VPC refused the listing or could not be reached.
    #[cfg(feature = "cloud")]
    #[error("describing vSwitches for spec.vSwitchSelectorTerms[{index}]: {source}")]
    Describe {
        /// The term's position.
        index: usize,
        /// What VPC said.
        source: crate::client::AlibabaError,
    },
}

/// Checks that `term` (at `index`) selects by something.
pub fn check_term(index: usize, term: &VSwitchSelectorTerm) -> Result<(), VSwitchError> {
    if term.id.as_deref().is_none_or(str::is_empty) && term.tags.is_empty() {
        return Err(VSwitchError::EmptyTerm { index });
    }
    Ok(())
}

/// The filter of one term, as `(name, value)` pairs: `VSwitchId` when it names one, and
/// `Tag.N.Key` / `Tag.N.Value` per tag (in key order), the value left out for
/// [`ANY_VALUE`]. Both when the term has both: a vSwitch must then match both.
pub fn filter(term: &VSwitchSelectorTerm) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    if let Some(id) = term.id.as_deref().filter(|id| !id.is_empty()) {
        pairs.push(("VSwitchId".to_string(), id.to_string()));
    }
    pairs.extend(tag_filter(&term.tags));
    pairs
}

/// `Tag.N.Key` / `Tag.N.Value` pairs for `tags`, in key order; a [`ANY_VALUE`] value is left
/// out so any value matches. ECS's and VPC's listings spell their tag filters alike.
pub fn tag_filter(tags: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for (i, (key, value)) in tags.iter().enumerate() {
        let n = i + 1;
        pairs.push((format!("Tag.{n}.Key"), key.clone()));
        if value != ANY_VALUE {
            pairs.push((format!("Tag.{n}.Value"), value.clone()));
        }
    }
    pairs
}

/// The vSwitches of a listing's items.
pub fn parse(items: Vec<Value>) -> Result<Vec<VSwitchInfo>, VSwitchError> {
    items
        .into_iter()
        .map(|item| {
            serde_json::from_value(item).map_err(|e| VSwitchError::Parse {
                reason: e.to_string(),
            })
        })
        .collect()
}

/// The vSwitches of every term, each once (the latest listing of a vSwitch wins), ordered
/// as status lists them: most free addresses first, then by id.
pub fn merge(found: impl IntoIterator<Item = VSwitchInfo>) -> Vec<VSwitchInfo> {
    let by_id: BTreeMap<String, VSwitchInfo> =
        found.into_iter().map(|v| (v.id.clone(), v)).collect();
    let mut merged: Vec<VSwitchInfo> = by_id.into_values().collect();
    merged.sort_by(|a, b| {
        b.available_ip_address_count
            .cmp(&a.available_ip_address_count)
            .then_with(|| a.id.cmp(&b.id))
    });
    merged
}

/// Per zone, the vSwitch a launch into that zone goes to: the first of the zone in status
/// order, which [`merge`] made the one with the most free addresses (the first by id on a tie).
pub fn first_per_zone(v_switches: &[VSwitch]) -> BTreeMap<&str, &VSwitch> {
    let mut first: BTreeMap<&str, &VSwitch> = BTreeMap::new();
    for v in v_switches {
        first.entry(v.zone_id.as_str()).or_insert(v);
    }
    first
}

/// Every vSwitch `terms` select in the client's region, ordered as [`merge`] orders them.
/// No terms select nothing.
#[cfg(feature = "cloud")]
pub async fn describe(
    client: &crate::client::Client,
    terms: &[VSwitchSelectorTerm],
) -> Result<Vec<VSwitchInfo>, VSwitchError> {
    use crate::client::Params;
    use crate::endpoint::Product;

    for (index, term) in terms.iter().enumerate() {
        check_term(index, term)?;
    }
    let mut found = Vec::new();
    for (index, term) in terms.iter().enumerate() {
        let params: Params =
            std::iter::once(("RegionId".to_string(), client.endpoints().region.clone()))
                .chain(filter(term))
                .collect();
        let items = client
            .pages(Product::Vpc, ACTION, &params, ITEMS, PAGE_SIZE)
            .await
            .map_err(|source| VSwitchError::Describe { index, source })?;
        found.extend(parse(items)?);
    }
    Ok(merge(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn term(id: Option<&str>, tags: &[(&str, &str)]) -> VSwitchSelectorTerm {
        VSwitchSelectorTerm {
            id: id.map(str::to_string),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn info(id: &str, zone: &str, ips: i64) -> VSwitchInfo {
        VSwitchInfo {
            id: id.into(),
            zone_id: zone.into(),
            available_ip_address_count: ips,
        }
    }

    #[test]
    fn terms_become_filters_as_upstream_builds_them() {
        let cases: Vec<(VSwitchSelectorTerm, Vec<(&str, &str)>)> = vec![
            (term(Some("vsw-1"), &[]), vec![("VSwitchId", "vsw-1")]),
            (
                term(None, &[("karpenter.sh/discovery", "c1"), ("env", "*")]),
                vec![
                    ("Tag.1.Key", "env"),
                    ("Tag.2.Key", "karpenter.sh/discovery"),
                    ("Tag.2.Value", "c1"),
                ],
            ),
            (
                term(Some("vsw-2"), &[("team", "a")]),
                vec![
                    ("VSwitchId", "vsw-2"),
                    ("Tag.1.Key", "team"),
                    ("Tag.1.Value", "a"),
                ],
            ),
            // An explicitly empty value is a value: only vSwitches whose tag is empty.
            (
                term(None, &[("empty", "")]),
                vec![("Tag.1.Key", "empty"), ("Tag.1.Value", "")],
            ),
        ];
        for (t, expected) in cases {
            let expected: Vec<(String, String)> = expected
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(filter(&t), expected, "{t:?}");
        }
    }

    #[test]
    fn a_term_without_id_or_tags_is_refused() {
        assert!(check_term(0, &term(Some("vsw-1"), &[])).is_ok());
        assert!(check_term(0, &term(None, &[("a", "*")])).is_ok());
        let e = check_term(2, &term(Some(""), &[])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.vSwitchSelectorTerms[2]: a term needs an id or tags"
        );
    }

    #[test]
    fn answers_are_read_with_the_apis_names() {
        let items = vec![json!({
            "VSwitchId": "vsw-bp1",
            "ZoneId": "cn-hangzhou-h",
            "AvailableIpAddressCount": 251,
            "VpcId": "vpc-bp1",
            "CidrBlock": "172.16.0.0/24",
            "Status": "Available",
            "Tags": {"Tag": [{"Key": "karpenter.sh/discovery", "Value": "c1"}]},
        })];
        assert_eq!(
            parse(items).unwrap(),
            [info("vsw-bp1", "cn-hangzhou-h", 251)]
        );
        let e = parse(vec![json!({"ZoneId": "cn-hangzhou-h"})]).unwrap_err();
        assert!(e.to_string().contains("VSwitchId"), "{e}");
    }

    #[test]
    fn status_order_is_most_free_addresses_then_id() {
        // Found by two terms; vsw-b twice, its later listing (fewer addresses) wins.
        let merged = merge([
            info("vsw-c", "z1", 10),
            info("vsw-b", "z2", 100),
            info("vsw-a", "z1", 10),
            info("vsw-d", "z2", 50),
            info("vsw-b", "z2", 5),
        ]);
        let ids: Vec<&str> = merged.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["vsw-d", "vsw-a", "vsw-c", "vsw-b"]);
        assert_eq!(
            merged[0].to_status(),
            VSwitch {
                id: "vsw-d".into(),
                zone_id: "z2".into()
            }
        );
    }

    #[test]
    fn a_launch_takes_the_freest_vswitch_of_each_zone() {
        let v_switches = merge([
            info("vsw-a", "z1", 10),
            info("vsw-b", "z1", 30),
            info("vsw-c", "z2", 7),
            info("vsw-d", "z2", 7),
        ]);
        let status: Vec<VSwitch> = v_switches.iter().map(VSwitchInfo::to_status).collect();
        let best = first_per_zone(&status);
        assert_eq!(best.len(), 2);
        assert_eq!(best["z1"].id, "vsw-b");
        // A tie keeps the first in status order.
        assert_eq!(best["z2"].id, "vsw-c");
        assert!(first_per_zone(&[]).is_empty());
    }
}
