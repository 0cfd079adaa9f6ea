//! The CCENodeClass status, as upstream's status controller writes it: the subnets the
//! selectors resolve to (roomiest first), the condition `SubnetsReady`, and `Ready` over it,
//! stamped with the generation it was computed for. Upstream looks again every minute either
//! way (free addresses change with every node).
//!
//! A pass is the VPC listing (with the `cloud` feature), then the pure [`status`], then writing
//! it. A failed listing leaves the status as it was and is returned for the loop's backoff.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use karpenter_cloudprovider::conditions::ConditionSet;

use crate::ccenodeclass::{
    CCENodeClass, CCENodeClassStatus, CONDITION_SUBNETS_READY, READY_CONDITIONS,
};
use crate::subnet::{self, SubnetInfo};

/// When to look again.
pub const REQUEUE: Duration = Duration::from_secs(60);
/// `SubnetsReady`'s reason when nothing matched.
pub const REASON_SUBNETS_NOT_FOUND: &str = "SubnetsNotFound";
/// `SubnetsReady`'s message when nothing matched.
pub const MESSAGE_SUBNETS_NOT_FOUND: &str = "SubnetSelector did not match any Subnets";

/// The status after a pass over `class` that listed the region's subnets as `listed` (an
/// `Err` leaves the status as it was), at `now`.
pub fn status(
    class: &CCENodeClass,
    listed: &Result<Vec<SubnetInfo>, String>,
    now: Timestamp,
) -> CCENodeClassStatus {
    let mut out = class.status.clone().unwrap_or_default();
    let Ok(listed) = listed else {
        return out;
    };
    let created = class
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let found = subnet::resolve(&class.spec.subnet_selector_terms, listed);
    out.subnets = found.iter().map(SubnetInfo::to_status).collect();
    let mut c = ConditionSet::new(
        &mut out.conditions,
        &READY_CONDITIONS,
        class.metadata.generation,
        created,
        now,
    );
    if found.is_empty() {
        c.set(
            CONDITION_SUBNETS_READY,
            "False",
            REASON_SUBNETS_NOT_FOUND,
            MESSAGE_SUBNETS_NOT_FOUND,
        );
    } else {
        c.set_true(CONDITION_SUBNETS_READY);
    }
    c.finish();
    out
}

#[cfg(feature = "cloud")]
pub use run::run;

#[cfg(feature = "cloud")]
mod run {
    use std::sync::Arc;

    use karpenter_cloudprovider::CloudProviderError;
    use karpenter_controller::state::Index;
    use karpenter_controller::{Context, Error, nodeclass_status};
    use tokio_util::sync::CancellationToken;

    use crate::ccenodeclass::CCENodeClass;
    use crate::provider::{ClusterState, HuaweiCloudProvider};

    karpenter_controller::impl_stored!(CCENodeClass);

    async fn reconcile<S: ClusterState>(
        ctx: &Context<HuaweiCloudProvider<S>>,
        class: &CCENodeClass,
    ) -> Result<Option<std::time::Duration>, Error> {
        let listed = ctx
            .provider
            .subnets()
            .await
            .map_err(|e| format!("listing subnets: {e}"));
        let next = super::status(class, &listed, ctx.clock.now());
        nodeclass_status::write(&ctx.client, class, class.status.as_ref(), &next).await?;
        match listed {
            Ok(_) => Ok(Some(super::REQUEUE)),
            Err(e) => Err(Error::Cloud(CloudProviderError::Other(e.into()))),
        }
    }

    /// Keeps every CCENodeClass's status current while this replica leads.
    pub async fn run<S: ClusterState>(
        ctx: Arc<Context<HuaweiCloudProvider<S>>>,
        shutdown: CancellationToken,
    ) {
        nodeclass_status::run(
            ctx,
            shutdown,
            "ccenodeclass.status",
            Arc::new(Index::<CCENodeClass>::default()),
            |ctx, class| async move { reconcile(&ctx, &class).await },
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use karpenter_cloudprovider::conditions::CONDITION_READY;
    use serde_json::json;

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).unwrap()
    }

    fn class() -> CCENodeClass {
        let mut c: CCENodeClass = serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.huawei/v1alpha1",
            "kind": "CCENodeClass",
            "metadata": {"name": "default", "generation": 1},
            "spec": {
                "subnetSelectorTerms": [{"name": "subnet-a"}, {"id": "id-2"}],
                "imsSelector": {"imsFamily": "Huawei Cloud EulerOS 2.0"},
                "blockDeviceMappings": {"root": {"volumeSize": 40, "volumeType": "SSD"}},
                "login": {"sshKey": "ops"},
            },
        }))
        .unwrap();
        c.metadata.creation_timestamp = Some(Time(at(0)));
        c
    }

    fn subnet(id: &str, name: &str, free: i64) -> SubnetInfo {
        SubnetInfo {
            id: id.into(),
            name: name.into(),
            status: "ACTIVE".into(),
            available_ip_address_count: Some(free),
            ..Default::default()
        }
    }

    fn condition<'a>(s: &'a CCENodeClassStatus, type_: &str) -> (&'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn found_subnets_make_the_class_ready_roomiest_first() {
        let listed = Ok(vec![
            subnet("id-1", "subnet-a", 5),
            subnet("id-2", "subnet-b", 50),
            subnet("id-3", "subnet-c", 500),
        ]);
        let s = status(&class(), &listed, at(10));
        let ids: Vec<&str> = s.subnets.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["id-2", "id-1"]);
        assert_eq!(
            condition(&s, CONDITION_SUBNETS_READY),
            ("True", "SubnetsReady")
        );
        assert_eq!(condition(&s, CONDITION_READY), ("True", "Ready"));
        assert_eq!(s.conditions.last().unwrap().type_, CONDITION_READY);
        let ready = s
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_READY)
            .unwrap();
        assert_eq!(ready.observed_generation, Some(1));
    }

    #[test]
    fn no_match_is_upstreams_subnets_not_found() {
        let mut c = class();
        let s = status(&c, &Ok(vec![subnet("id-1", "subnet-a", 5)]), at(10));
        c.status = Some(s);
        // The subnet is deleted: the status empties and the class stops being Ready.
        let s = status(&c, &Ok(vec![subnet("id-9", "other", 5)]), at(20));
        assert!(s.subnets.is_empty());
        assert_eq!(
            condition(&s, CONDITION_SUBNETS_READY),
            ("False", REASON_SUBNETS_NOT_FOUND)
        );
        let not_found = s
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_SUBNETS_READY)
            .unwrap();
        assert_eq!(not_found.message, MESSAGE_SUBNETS_NOT_FOUND);
        assert_eq!(not_found.last_transition_time.0, at(20));
        assert_eq!(condition(&s, CONDITION_READY).0, "False");
    }

    #[test]
    fn a_failed_listing_keeps_the_last_status() {
        let mut c = class();
        let s = status(&c, &Ok(vec![subnet("id-2", "subnet-b", 5)]), at(10));
        c.status = Some(s.clone());
        assert_eq!(status(&c, &Err("VPC is down".into()), at(20)), s);
        // Never resolved: no conditions are invented either.
        let fresh = class();
        assert_eq!(
            status(&fresh, &Err("VPC is down".into()), at(20)),
            CCENodeClassStatus::default()
        );
    }
}
