//! What a failed VM create says about capacity, as upstream's offering error handlers read
//! ARM's errors: which offerings (size × zone × capacity type) to mark unavailable, and for how
//! long — a spot quota blocks spot everywhere, a size the region does not sell now blocks it
//! for an hour (a day on demand), an allocation failure blocks the zone or the size.

use std::time::Duration;

/// Spot or family quota close to its limit: try again in ten minutes.
pub const LOW_QUOTA_TTL: Duration = Duration::from_secs(10 * 60);
/// A quota whose limit is zero, or the spot quota: an hour.
pub const SUBSCRIPTION_QUOTA_REACHED_TTL: Duration = Duration::from_secs(3600);
/// An allocation failure: an hour.
pub const ALLOCATION_FAILURE_TTL: Duration = Duration::from_secs(3600);
/// A spot size the region does not sell now: an hour.
pub const SKU_NOT_AVAILABLE_SPOT_TTL: Duration = Duration::from_secs(3600);
/// An on-demand size the region does not sell now: most of a day.
pub const SKU_NOT_AVAILABLE_ON_DEMAND_TTL: Duration = Duration::from_secs(23 * 3600);

/// A capacity failure ARM reported for a VM create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityFailure {
    /// The subscription's spot (low-priority) vCPU quota is used up.
    LowPriorityQuota,
    /// The size family's vCPU quota is used up (`zero_limit`: the quota is 0, not just full).
    FamilyQuota {
        /// The quota's limit is zero.
        zero_limit: bool,
    },
    /// The size is not sold in this place now.
    SkuNotAvailable,
    /// The zone could not allocate the size.
    ZonalAllocation,
    /// The size could not be allocated.
    Allocation,
    /// The zone could not allocate the size with these constraints.
    OverconstrainedZonalAllocation,
    /// No zone could allocate the size with these constraints.
    OverconstrainedAllocation,
    /// The subscription's regional vCPU quota is used up.
    RegionalQuota,
}

impl CapacityFailure {
    /// The failure ARM's error code and message describe, if they describe one (quota errors
    /// come as `OperationNotAllowed` with the quota named in the message).
    pub fn classify(code: &str, message: &str) -> Option<Self> {
        match code {
            "SkuNotAvailable" => Some(Self::SkuNotAvailable),
            "ZonalAllocationFailed" => Some(Self::ZonalAllocation),
            "AllocationFailed" => Some(Self::Allocation),
            "OverconstrainedZonalAllocationRequest" => Some(Self::OverconstrainedZonalAllocation),
            "OverconstrainedAllocationRequest" => Some(Self::OverconstrainedAllocation),
            "OperationNotAllowed" if message.contains("LowPriorityCores") => {
                Some(Self::LowPriorityQuota)
            }
            "OperationNotAllowed" if message.contains("Family Cores quota") => {
                Some(Self::FamilyQuota {
                    zero_limit: message.contains("Current Limit: 0"),
                })
            }
            "OperationNotAllowed" if message.contains("Total Regional Cores quota") => {
                Some(Self::RegionalQuota)
            }
            _ => None,
        }
    }

    /// Upstream's reason for it (the launch error's reason).
    pub fn reason(self) -> &'static str {
        match self {
            Self::LowPriorityQuota | Self::FamilyQuota { .. } => "SubscriptionQuotaReached",
            Self::SkuNotAvailable => "SKUNotAvailable",
            Self::ZonalAllocation => "ZonalAllocationFailure",
            Self::Allocation => "AllocationFailure",
            Self::OverconstrainedZonalAllocation => "OverconstrainedZonalAllocationFailure",
            Self::OverconstrainedAllocation => "OverconstrainedAllocationFailure",
            Self::RegionalQuota => "RegionalQuotaReached",
        }
    }
}

/// Which offerings a failure blocks: `(size, zone, capacity type, for how long)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// The VM size; `None` for every size.
    pub size: Option<String>,
    /// The zone; `None` for every zone.
    pub zone: Option<String>,
    /// The capacity type; `None` for both.
    pub capacity_type: Option<&'static str>,
    /// How long.
    pub ttl: Duration,
}

/// What a failure to create `size` in `zone` as `capacity_type` blocks.
pub fn blocks(failure: CapacityFailure, size: &str, zone: &str, capacity_type: &str) -> Vec<Block> {
    let ct = |c: &str| -> &'static str { if c == "spot" { "spot" } else { "on-demand" } };
    let block = |zone: Option<&str>, capacity_type: Option<&'static str>, ttl| Block {
        size: Some(size.to_string()),
        zone: zone.map(str::to_string),
        capacity_type,
        ttl,
    };
    match failure {
        CapacityFailure::LowPriorityQuota => vec![Block {
            size: None,
            zone: None,
            capacity_type: Some("spot"),
            ttl: SUBSCRIPTION_QUOTA_REACHED_TTL,
        }],
        CapacityFailure::FamilyQuota { zero_limit } => vec![block(
            None,
            Some(ct(capacity_type)),
            if zero_limit {
                SUBSCRIPTION_QUOTA_REACHED_TTL
            } else {
                LOW_QUOTA_TTL
            },
        )],
        CapacityFailure::SkuNotAvailable => vec![block(
            Some(zone),
            Some(ct(capacity_type)),
            if ct(capacity_type) == "spot" {
                SKU_NOT_AVAILABLE_SPOT_TTL
            } else {
                SKU_NOT_AVAILABLE_ON_DEMAND_TTL
            },
        )],
        CapacityFailure::ZonalAllocation => vec![block(Some(zone), None, ALLOCATION_FAILURE_TTL)],
        CapacityFailure::Allocation => vec![block(None, None, ALLOCATION_FAILURE_TTL)],
        CapacityFailure::OverconstrainedZonalAllocation => vec![block(
            Some(zone),
            Some(ct(capacity_type)),
            ALLOCATION_FAILURE_TTL,
        )],
        CapacityFailure::OverconstrainedAllocation => {
            vec![block(None, Some(ct(capacity_type)), ALLOCATION_FAILURE_TTL)]
        }
        // Nothing to block: every size shares the regional quota; the launch just fails.
        CapacityFailure::RegionalQuota => Vec::new(),
    }
}

/// A size's quota family and vCPUs (`standardDSv3Family`, 8), when known.
pub type FamilyOf<'a> = &'a dyn Fn(&str) -> Option<(String, i64)>;

/// The offerings of `types` that `blocks` cover, each with how long it stays unavailable:
/// `(size, zone, capacity type, ttl)`. A block without a size, zone or capacity type covers
/// every one the types offer. A block of one size also covers the sizes of its quota family
/// with at least as many vCPUs, as upstream marks the family: what one size could not get,
/// a larger one of the same family will not get either.
pub fn expand(
    blocks: &[Block],
    types: &[std::sync::Arc<karpenter_core::instancetype::InstanceType>],
    family_of: FamilyOf<'_>,
) -> Vec<(String, String, String, Duration)> {
    let mut out = Vec::new();
    for block in blocks {
        let blocked_family = block.size.as_deref().and_then(family_of);
        let covers = |name: &str| match block.size.as_deref() {
            None => true,
            Some(size) if size == name => true,
            Some(_) => blocked_family.as_ref().is_some_and(|(family, cpus)| {
                family_of(name).is_some_and(|(f, c)| f.eq_ignore_ascii_case(family) && c >= *cpus)
            }),
        };
        for it in types.iter().filter(|it| covers(&it.name)) {
            for o in it.offerings.iter().filter(|o| {
                block.zone.as_deref().is_none_or(|z| z == o.zone)
                    && block.capacity_type.is_none_or(|c| c == o.capacity_type)
            }) {
                out.push((
                    it.name.clone(),
                    o.zone.clone(),
                    o.capacity_type.clone(),
                    block.ttl,
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's error handler table, by ARM error.
    #[test]
    fn arm_errors_block_what_upstream_blocks() {
        let h = Duration::from_secs(3600);
        /// (size, zone, capacity type, TTL) blocked.
        type Blocked = (
            Option<&'static str>,
            Option<&'static str>,
            Option<&'static str>,
            Duration,
        );
        let cases: Vec<(&str, &str, &str, Vec<Blocked>)> = vec![
            (
                "SkuNotAvailable",
                "The requested VM size Standard_D2s_v5 is currently not available in location 'eastus' zones '1'.",
                "spot",
                vec![(Some("Standard_D2s_v5"), Some("eastus-1"), Some("spot"), h)],
            ),
            (
                "SkuNotAvailable",
                "not available",
                "on-demand",
                vec![(
                    Some("Standard_D2s_v5"),
                    Some("eastus-1"),
                    Some("on-demand"),
                    Duration::from_secs(23 * 3600),
                )],
            ),
            (
                "ZonalAllocationFailed",
                "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone.",
                "on-demand",
                vec![(Some("Standard_D2s_v5"), Some("eastus-1"), None, h)],
            ),
            (
                "AllocationFailed",
                "Allocation failed.",
                "spot",
                vec![(Some("Standard_D2s_v5"), None, None, h)],
            ),
            (
                "OverconstrainedZonalAllocationRequest",
                "Allocation failed. VM(s) with the following constraints cannot be allocated",
                "spot",
                vec![(Some("Standard_D2s_v5"), Some("eastus-1"), Some("spot"), h)],
            ),
            (
                "OverconstrainedAllocationRequest",
                "Allocation failed.",
                "on-demand",
                vec![(Some("Standard_D2s_v5"), None, Some("on-demand"), h)],
            ),
            (
                "OperationNotAllowed",
                "Operation could not be completed as it results in exceeding approved LowPriorityCores quota.",
                "spot",
                vec![(None, None, Some("spot"), h)],
            ),
            (
                "OperationNotAllowed",
                "Operation could not be completed as it results in exceeding approved standardDSv5Family Cores quota. Current Limit: 0, Current Usage: 0",
                "on-demand",
                vec![(Some("Standard_D2s_v5"), None, Some("on-demand"), h)],
            ),
            (
                "OperationNotAllowed",
                "exceeding approved standardDSv5Family Cores quota. Current Limit: 100, Current Usage: 98",
                "on-demand",
                vec![(
                    Some("Standard_D2s_v5"),
                    None,
                    Some("on-demand"),
                    Duration::from_secs(600),
                )],
            ),
            (
                "OperationNotAllowed",
                "exceeding approved Total Regional Cores quota",
                "on-demand",
                vec![],
            ),
        ];
        for (code, message, capacity_type, expected) in cases {
            let failure = CapacityFailure::classify(code, message)
                .unwrap_or_else(|| panic!("{code}: {message}"));
            let got: Vec<_> = blocks(failure, "Standard_D2s_v5", "eastus-1", capacity_type)
                .into_iter()
                .map(|b| (b.size, b.zone, b.capacity_type, b.ttl))
                .collect();
            let expected: Vec<_> = expected
                .into_iter()
                .map(|(s, z, c, t)| (s.map(str::to_string), z.map(str::to_string), c, t))
                .collect();
            assert_eq!(got, expected, "{code}: {message}");
        }
        assert_eq!(
            CapacityFailure::classify("InvalidParameter", "bad subnet"),
            None,
            "not a capacity error: the NodeClaim fails, offerings stay"
        );
        assert_eq!(
            CapacityFailure::classify("OperationNotAllowed", "The resource is locked"),
            None
        );
    }

    #[test]
    fn blocks_expand_to_the_offerings_they_cover() {
        use karpenter_core::instancetype::{InstanceType, Offering, Overhead};
        let offering = |zone: &str, ct: &str| Offering {
            zone: zone.into(),
            capacity_type: ct.into(),
            price: 1.0,
            available: true,
            reservation: None,
        };
        let it = |name: &str| {
            std::sync::Arc::new(InstanceType::new(
                name,
                Default::default(),
                vec![
                    offering("eastus-1", "spot"),
                    offering("eastus-1", "on-demand"),
                    offering("eastus-2", "spot"),
                ],
                Default::default(),
                Overhead::default(),
            ))
        };
        let types = vec![
            it("Standard_D2s_v5"),
            it("Standard_D4s_v5"),
            it("Standard_D8s_v5"),
            it("Standard_E8s_v5"),
        ];
        let family_of = |name: &str| -> Option<(String, i64)> {
            let cpus = name.trim_start_matches("Standard_")[1..]
                .split('s')
                .next()?
                .parse()
                .ok()?;
            let family = if name.starts_with("Standard_D") {
                "standardDSv5Family"
            } else {
                "standardESv5Family"
            };
            Some((family.to_string(), cpus))
        };
        let h = Duration::from_secs(3600);
        let spot_quota = blocks(
            CapacityFailure::LowPriorityQuota,
            "Standard_D2s_v5",
            "eastus-1",
            "spot",
        );
        let got = expand(&spot_quota, &types, &family_of);
        assert_eq!(got.len(), 8, "every size's spot offerings: {got:?}");
        assert!(got.iter().all(|(_, _, ct, ttl)| ct == "spot" && *ttl == h));
        // D4 cannot be allocated in zone 1: D4 and the larger D8 of its family are blocked
        // there, the smaller D2 and the other family are not.
        let zonal = blocks(
            CapacityFailure::ZonalAllocation,
            "Standard_D4s_v5",
            "eastus-1",
            "on-demand",
        );
        let got: Vec<(String, String, String)> = expand(&zonal, &types, &family_of)
            .into_iter()
            .map(|(s, z, c, _)| (s, z, c))
            .collect();
        let offering = |s: &str, c: &str| (s.to_string(), "eastus-1".to_string(), c.to_string());
        assert_eq!(
            got,
            [
                offering("Standard_D4s_v5", "spot"),
                offering("Standard_D4s_v5", "on-demand"),
                offering("Standard_D8s_v5", "spot"),
                offering("Standard_D8s_v5", "on-demand"),
            ]
        );
        // Without a known family only the size itself is blocked.
        let got = expand(&zonal, &types, &|_| None);
        assert!(got.iter().all(|(s, _, _, _)| s == "Standard_D4s_v5") && got.len() == 2);
    }
}
