//! EC2's capacity errors: which error codes mean "no capacity here" rather than "you asked
//! wrongly". The offerings they concern are marked in the providers' shared
//! [`karpenter_cloudprovider::unavailable::UnavailableOfferings`] cache.

/// The error codes that mean "no capacity here", not "you asked wrongly".
pub const INSUFFICIENT_CAPACITY_CODES: [&str; 7] = [
    "InsufficientInstanceCapacity",
    "InsufficientFreeAddressesInSubnet",
    "InsufficientCapacityOnHost",
    "MaxSpotInstanceCountExceeded",
    "UnfulfillableCapacity",
    "VcpuLimitExceeded",
    "ReservationCapacityExceeded",
];

/// Whether an error code is a capacity error.
pub fn is_insufficient_capacity(code: &str) -> bool {
    INSUFFICIENT_CAPACITY_CODES.contains(&code)
}
