//! The EC2 calls beside the launch path: finding a NodeClass's placement group
//! (DescribePlacementGroups) and the dry runs behind `ValidationSucceeded` (CreateFleet and
//! RunInstances with `DryRun=true`). Each is a trait a test can fake; [`crate::ec2::Ec2Client`]
//! implements them over the Query protocol.

use std::collections::BTreeMap;
use std::future::Future;

use crate::ec2::FleetOverride;
use crate::http::{AwsError, Result};

/// The error code EC2 answers a permitted dry run with.
pub const DRY_RUN_OPERATION: &str = "DryRunOperation";

/// A placement group as EC2 describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementGroupInfo {
    /// `pg-…`.
    pub id: String,
    /// The group's name.
    pub name: String,
    /// `cluster`, `partition` or `spread`.
    pub strategy: String,
    /// Partitions of a `partition` group (0 otherwise).
    pub partition_count: i32,
    /// `rack` or `host` for `spread` groups.
    pub spread_level: Option<String>,
}

impl PlacementGroupInfo {
    /// Whether instances land in numbered partitions.
    pub fn is_partition(&self) -> bool {
        self.strategy == "partition"
    }
}

/// Which placement group to describe: by id when set, else by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementGroupQuery {
    /// `pg-…`.
    pub id: Option<String>,
    /// The group's name.
    pub name: Option<String>,
}

/// DescribePlacementGroups.
pub trait PlacementGroups: Send + Sync + 'static {
    /// The `available` placement groups matching `query`.
    fn describe_placement_groups(
        &self,
        query: PlacementGroupQuery,
    ) -> impl Future<Output = Result<Vec<PlacementGroupInfo>>> + Send;
}

/// One RunInstances dry run: one instance of `instance_type` from `launch_template` in
/// `subnet_id`, tagged as a launch would tag it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunInstancesDryRun {
    /// The launch template's name.
    pub launch_template: String,
    /// `m5.large`.
    pub instance_type: String,
    /// The subnet the interfaces are made in.
    pub subnet_id: String,
    /// The launch template's interfaces: each is named (card, device, type) with the subnet,
    /// as upstream does, and EC2 merges it with the template's; with none, interface 0.
    pub network_interfaces: Vec<crate::interfaces::LaunchTemplateInterface>,
    /// Tags for the instance, its volumes and its interfaces.
    pub tags: BTreeMap<String, String>,
}

/// One CreateFleet dry run (instant, one on-demand instance).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CreateFleetDryRun {
    /// The launch template's name.
    pub launch_template: String,
    /// One override per instance type and subnet.
    pub overrides: Vec<FleetOverride>,
    /// Tags for the instance, its volumes and the fleet.
    pub tags: BTreeMap<String, String>,
}

/// The dry runs: `Ok(())` when EC2 says the call would have succeeded (`DryRunOperation`),
/// the error it answered otherwise (`UnauthorizedOperation`, a throttle, …).
pub trait DryRuns: Send + Sync + 'static {
    /// CreateFleet with `DryRun=true`.
    fn dry_run_create_fleet(
        &self,
        request: CreateFleetDryRun,
    ) -> impl Future<Output = Result<()>> + Send;
    /// RunInstances with `DryRun=true`.
    fn dry_run_run_instances(
        &self,
        request: RunInstancesDryRun,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// A dry run's answer as the traits return it: EC2 reports a permitted dry run as the error
/// `DryRunOperation`, and a call that went through (an emulator ignoring `DryRun`) permitted
/// it too.
pub fn dry_run_answer(answer: Result<String>) -> Result<()> {
    match answer {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some(DRY_RUN_OPERATION) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether an error says the caller lacks a permission (what a dry run exists to find).
pub fn is_unauthorized(e: &AwsError) -> bool {
    e.code().is_some_and(|c| {
        c == "UnauthorizedOperation"
            || c.starts_with("AccessDenied")
            || c.starts_with("AuthFailure")
    })
}

/// Whether an error is passing: throttling or a fault on AWS's side, worth asking again soon
/// rather than reporting.
pub fn is_transient(e: &AwsError) -> bool {
    match e {
        AwsError::Api { code, status, .. } => {
            *status >= 500
                || code == "RequestLimitExceeded"
                || code == "Throttling"
                || code == "InternalError"
                || code == "ServiceUnavailable"
        }
        AwsError::Transport(_) => true,
        AwsError::Parse(_) | AwsError::Credentials(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: &str, status: u16) -> AwsError {
        AwsError::Api {
            code: code.into(),
            message: String::new(),
            status,
        }
    }

    #[test]
    fn dry_run_operation_is_success_and_other_errors_pass_through() {
        assert_eq!(dry_run_answer(Err(api(DRY_RUN_OPERATION, 412))), Ok(()));
        assert_eq!(dry_run_answer(Ok(String::new())), Ok(()));
        let denied = api("UnauthorizedOperation", 403);
        assert_eq!(dry_run_answer(Err(denied.clone())), Err(denied));
    }

    #[test]
    fn errors_are_sorted_into_unauthorized_and_transient() {
        for code in ["UnauthorizedOperation", "AccessDenied", "AuthFailure"] {
            assert!(is_unauthorized(&api(code, 403)), "{code}");
            assert!(!is_transient(&api(code, 403)), "{code}");
        }
        for (code, status) in [
            ("RequestLimitExceeded", 503),
            ("InternalError", 500),
            ("Anything", 502),
        ] {
            assert!(is_transient(&api(code, status)), "{code}");
            assert!(!is_unauthorized(&api(code, status)), "{code}");
        }
        assert!(is_transient(&AwsError::Transport("reset".into())));
        assert!(!is_unauthorized(&api("InvalidParameterValue", 400)));
        assert!(!is_transient(&api("InvalidParameterValue", 400)));
    }
}
