//! What Alibaba's error codes mean to the provider: the codes that say "no capacity here" (the
//! offering is marked unavailable and the next cheapest one tried), those that say the resource
//! is gone, and throttling. Pure, so a launch's per-instance `LaunchResults[].ErrorCode` is
//! judged by the same lists as an API error.

/// Codes that mean the zone has no capacity for the instance type (or the account none for it
/// right now), not that the request was wrong:
///
/// * `OperationDenied.NoStock`, `NoInstanceStock` — the cloudpilot-ai provider's
///   (`pkg/providers/instance/instance.go`, from `CreateAutoProvisioningGroup`'s launch results);
/// * `Zone.NotOnSale`, `InvalidVSwitchId.IpNotEnough` — the AliyunContainerService provider's
///   `IsInsufficientCapacityError` (`pkg/errors/errors.go`);
/// * `InvalidResourceType.NotSupported` — ECS's answer when the zone does not offer the type;
/// * the quota codes `QuotaExceed.Instance`, `QuotaExceed.Spot`, `QuotaExceed.ElasticQuota`
///   (and the AliyunContainerService spelling `QuotaExceeded.ElasticQuota`): like AWS's
///   `VcpuLimitExceeded`, another type or capacity type may still launch.
pub const INSUFFICIENT_CAPACITY_CODES: [&str; 9] = [
    "OperationDenied.NoStock",
    "NoInstanceStock",
    "Zone.NotOnSale",
    "InvalidVSwitchId.IpNotEnough",
    "InvalidResourceType.NotSupported",
    "QuotaExceed.Instance",
    "QuotaExceed.Spot",
    "QuotaExceed.ElasticQuota",
    "QuotaExceeded.ElasticQuota",
];

/// Whether an error code is a capacity error.
pub fn is_insufficient_capacity(code: &str) -> bool {
    INSUFFICIENT_CAPACITY_CODES.contains(&code)
}

/// Whether a capacity error is an account quota rather than the zone's stock.
pub fn is_quota(code: &str) -> bool {
    code.starts_with("QuotaExceed")
}

/// `…NotFound` codes about the request itself rather than the resource it names: an unknown key,
/// action, version or region is a configuration error, and reading one as "the instance is gone"
/// would let garbage collection drop live nodes.
pub const NOT_A_MISSING_RESOURCE: [&str; 4] = [
    "InvalidAccessKeyId",
    "InvalidAction",
    "InvalidVersion",
    "InvalidRegionId",
];

/// Whether an error is about the request, not a missing resource (see
/// [`NOT_A_MISSING_RESOURCE`]).
pub fn is_request_error(code: &str) -> bool {
    NOT_A_MISSING_RESOURCE.iter().any(|prefix| {
        code.strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// Whether an error code says the resource does not exist: `InvalidInstanceId.NotFound`,
/// `InvalidVSwitchId.NotFound`, `InvalidSecurityGroupId.NotFound`, `InvalidImageId.NotFound`,
/// ACK's `ErrorClusterNotFound`, … — every code ending in `NotFound` (both upstream providers
/// match on that), except those about the request itself.
pub fn is_not_found(code: &str) -> bool {
    code.ends_with("NotFound") && !is_request_error(code)
}

/// Whether an error code is throttling (`Throttling`, `Throttling.User`, `Throttling.Api`, …):
/// the request was refused before it did anything, so it is always safe to send again.
pub fn is_throttling(code: &str) -> bool {
    code == "Throttling" || code.starts_with("Throttling.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_classified() {
        for code in [
            "OperationDenied.NoStock",
            "NoInstanceStock",
            "Zone.NotOnSale",
        ] {
            assert!(is_insufficient_capacity(code), "{code}");
            assert!(!is_quota(code), "{code}");
        }
        assert!(is_insufficient_capacity("QuotaExceed.Spot") && is_quota("QuotaExceed.Spot"));
        assert!(!is_insufficient_capacity("InvalidParameter"));
        assert!(is_not_found("InvalidInstanceId.NotFound"));
        assert!(is_not_found("ErrorClusterNotFound"));
        for code in [
            "InvalidAccessKeyId.NotFound",
            "InvalidAction.NotFound",
            "InvalidRegionId.NotFound",
        ] {
            assert!(!is_not_found(code), "{code} is about the request");
        }
        assert!(!is_not_found("OperationDenied.NoStock"));
        assert!(is_throttling("Throttling") && is_throttling("Throttling.User"));
        assert!(!is_throttling("ThrottlingSomething") && !is_throttling("ServiceUnavailable"));
    }
}
