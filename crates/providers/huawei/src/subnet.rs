//! The subnets a CCENodeClass's selectors resolve to, and the one a node goes into.
//!
//! Huawei Cloud's VPC subnets span the region's zones, so unlike AWS or Alibaba a subnet does
//! not pin the node's zone: any status subnet serves any offering. A term matches by id, by
//! name, or by both (ANDed); terms are ORed; a term naming neither matches nothing, as
//! upstream's. The subnet `id` here is the one VPC's v1 API calls `id` (the network id), which
//! is what CCE's `nodeNicSpec.primaryNic.subnetId` takes.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::ccenodeclass::{Subnet as StatusSubnet, SubnetSelectorTerm};

/// A subnet as VPC's `ListSubnets` (`GET /v1/{project_id}/subnets`) answers it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct SubnetInfo {
    /// The subnet's (network) id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its CIDR.
    #[serde(default)]
    pub cidr: String,
    /// `ACTIVE`, `UNKNOWN` or `ERROR`.
    #[serde(default)]
    pub status: String,
    /// The VPC it is in.
    #[serde(default)]
    pub vpc_id: String,
    /// Free addresses, when VPC reports them.
    #[serde(default)]
    pub available_ip_address_count: Option<i64>,
}

impl SubnetInfo {
    /// The subnet as the status records it.
    pub fn to_status(&self) -> StatusSubnet {
        StatusSubnet {
            id: self.id.clone(),
        }
    }
}

/// Whether `subnet` matches `term`.
pub fn matches(term: &SubnetSelectorTerm, subnet: &SubnetInfo) -> bool {
    let id = term.id.as_deref().filter(|s| !s.is_empty());
    let name = term.name.as_deref().filter(|s| !s.is_empty());
    if id.is_none() && name.is_none() {
        return false;
    }
    id.is_none_or(|id| subnet.id == id) && name.is_none_or(|name| subnet.name == name)
}

/// The subnets any of `terms` matches, usable ones only (a subnet VPC reports in `ERROR` takes
/// no node), roomiest first and then by id, so the status reads the same every pass.
pub fn resolve(terms: &[SubnetSelectorTerm], subnets: &[SubnetInfo]) -> Vec<SubnetInfo> {
    let mut out: Vec<SubnetInfo> = subnets
        .iter()
        .filter(|s| s.status.is_empty() || s.status == "ACTIVE")
        .filter(|s| terms.iter().any(|t| matches(t, s)))
        .cloned()
        .collect();
    out.sort_by(|a, b| {
        b.available_ip_address_count
            .unwrap_or(0)
            .cmp(&a.available_ip_address_count.unwrap_or(0))
            .then_with(|| a.id.cmp(&b.id))
    });
    out.dedup_by(|a, b| a.id == b.id);
    out
}

/// The subnet a node goes into, as upstream picks it: among the status's subnets, the one with
/// the most free addresses once the creates still in flight are counted (`free` as last read,
/// `in_flight` creates per subnet); ties go to the earlier status entry. `None` without
/// subnets.
pub fn pick_for_launch<'a>(
    status: &'a [StatusSubnet],
    free: &BTreeMap<String, i64>,
    in_flight: &BTreeMap<String, i64>,
) -> Option<&'a str> {
    let mut best: Option<(&str, i64)> = None;
    for s in status {
        let room =
            free.get(&s.id).copied().unwrap_or(0) - in_flight.get(&s.id).copied().unwrap_or(0);
        if best.is_none_or(|(_, b)| room > b) {
            best = Some((s.id.as_str(), room));
        }
    }
    best.map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(id: &str, name: &str, free: Option<i64>) -> SubnetInfo {
        SubnetInfo {
            id: id.into(),
            name: name.into(),
            status: "ACTIVE".into(),
            available_ip_address_count: free,
            ..Default::default()
        }
    }

    fn term(id: Option<&str>, name: Option<&str>) -> SubnetSelectorTerm {
        SubnetSelectorTerm {
            id: id.map(str::to_string),
            name: name.map(str::to_string),
        }
    }

    #[test]
    fn terms_match_as_upstreams() {
        let s = subnet("id-1", "subnet-a", None);
        for (t, want) in [
            (term(Some("id-1"), None), true),
            (term(None, Some("subnet-a")), true),
            (term(Some("id-1"), Some("subnet-a")), true),
            (term(Some("id-1"), Some("subnet-b")), false),
            (term(Some("id-2"), None), false),
            (term(None, None), false),
            (term(Some(""), Some("")), false),
        ] {
            assert_eq!(matches(&t, &s), want, "{t:?}");
        }
    }

    #[test]
    fn resolve_ors_the_terms_and_puts_the_roomiest_first() {
        let mut broken = subnet("id-4", "subnet-d", Some(500));
        broken.status = "ERROR".into();
        let subnets = [
            subnet("id-1", "subnet-a", Some(10)),
            subnet("id-2", "subnet-b", Some(200)),
            subnet("id-3", "subnet-c", Some(50)),
            broken,
        ];
        let terms = [
            term(Some("id-1"), None),
            term(None, Some("subnet-b")),
            term(None, Some("subnet-d")),
            term(Some("id-1"), None),
        ];
        let got: Vec<String> = resolve(&terms, &subnets)
            .iter()
            .map(|s| s.id.clone())
            .collect();
        assert_eq!(got, ["id-2", "id-1"]);
        assert!(resolve(&[term(None, None)], &subnets).is_empty());
    }

    #[test]
    fn launch_picks_the_most_free_addresses_counting_creates_in_flight() {
        let status = [
            StatusSubnet { id: "a".into() },
            StatusSubnet { id: "b".into() },
        ];
        let free = BTreeMap::from([("a".to_string(), 10), ("b".to_string(), 9)]);
        assert_eq!(pick_for_launch(&status, &free, &BTreeMap::new()), Some("a"));
        let busy = BTreeMap::from([("a".to_string(), 2)]);
        assert_eq!(pick_for_launch(&status, &free, &busy), Some("b"));
        // Nothing known about free addresses: the status order decides.
        assert_eq!(
            pick_for_launch(&status, &BTreeMap::new(), &BTreeMap::new()),
            Some("a")
        );
        assert_eq!(pick_for_launch(&[], &free, &BTreeMap::new()), None);
    }
}
