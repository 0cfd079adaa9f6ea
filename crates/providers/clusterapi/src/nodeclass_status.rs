//! The ClusterAPINodeClass status: `MachineDeploymentsReady` says whether the selector finds
//! MachineDeployments to launch from (naming those left out for bad annotations), and `Ready`
//! summarises it. Upstream sets `Ready` unconditionally; a class that selects nothing usable
//! is not Ready here, so its NodePools say why instead of launching nothing in silence.
//!
//! A pass is the management cluster's listing (with the `cloud` feature), then the pure
//! [`status`], then writing it; MachineDeployments change in the management cluster, not in
//! the class, so it looks again every [`REQUEUE`]. A failed listing leaves the status as it was.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use karpenter_cloudprovider::conditions::ConditionSet;

use crate::capi::MEMBER_LABEL;
use crate::instancetype::{self, Options};
use crate::nodeclass::{
    CONDITION_MACHINE_DEPLOYMENTS_READY, ClusterAPINodeClass, ClusterAPINodeClassStatus,
    READY_CONDITIONS,
};

/// When to look again.
pub const REQUEUE: Duration = Duration::from_secs(60);
/// `MachineDeploymentsReady`'s reason when the selector selects no member MachineDeployment.
pub const REASON_NOT_FOUND: &str = "MachineDeploymentsNotFound";
/// `MachineDeploymentsReady`'s reason when every selected MachineDeployment was left out.
pub const REASON_INVALID: &str = "MachineDeploymentsInvalid";
/// The longest message written (a condition's message may be 32768 bytes).
const MESSAGE_LIMIT: usize = 4096;

fn truncated(mut message: String) -> String {
    if message.len() > MESSAGE_LIMIT {
        let mut end = MESSAGE_LIMIT;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// The status after a pass over `class` that listed the management cluster's member
/// MachineDeployments as `listed` (a failed listing leaves the status as it was), at `now`.
pub fn status(
    class: &ClusterAPINodeClass,
    listed: Result<&[crate::capi::MachineDeployment], &str>,
    options: &Options,
    now: Timestamp,
) -> ClusterAPINodeClassStatus {
    let mut out = class.status.clone().unwrap_or_default();
    let Ok(listed) = listed else {
        return out;
    };
    let resolved = instancetype::resolve(
        listed,
        class.spec.scalable_resource_selector.as_ref(),
        options,
    );
    let skipped = resolved
        .skipped
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let created = class
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let mut c = ConditionSet::new(
        &mut out.conditions,
        &READY_CONDITIONS,
        class.metadata.generation,
        created,
        now,
    );
    if resolved.selected == 0 {
        c.set(
            CONDITION_MACHINE_DEPLOYMENTS_READY,
            "False",
            REASON_NOT_FOUND,
            &format!(
                "scalableResourceSelector selects no MachineDeployment labelled {MEMBER_LABEL}"
            ),
        );
    } else if resolved.offers.is_empty() {
        c.set(
            CONDITION_MACHINE_DEPLOYMENTS_READY,
            "False",
            REASON_INVALID,
            &truncated(skipped),
        );
    } else {
        // Usable ones exist; those left out are named, not fatal.
        c.set(
            CONDITION_MACHINE_DEPLOYMENTS_READY,
            "True",
            CONDITION_MACHINE_DEPLOYMENTS_READY,
            &truncated(skipped),
        );
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

    use crate::nodeclass::ClusterAPINodeClass;
    use crate::provider::{ClusterApiCloudProvider, NodeClassSource};

    karpenter_controller::impl_stored!(ClusterAPINodeClass);

    async fn reconcile<S: NodeClassSource>(
        ctx: &Context<ClusterApiCloudProvider<S>>,
        class: &ClusterAPINodeClass,
    ) -> Result<Option<std::time::Duration>, Error> {
        let listed = ctx
            .provider
            .machine_deployments_now()
            .await
            .map_err(|e| format!("listing MachineDeployments: {e}"));
        let next = super::status(
            class,
            listed.as_deref().map(Vec::as_slice).map_err(String::as_str),
            &ctx.provider.options().instance_types,
            ctx.clock.now(),
        );
        nodeclass_status::write(&ctx.client, class, class.status.as_ref(), &next).await?;
        match listed {
            Ok(_) => Ok(Some(super::REQUEUE)),
            Err(e) => Err(Error::Cloud(CloudProviderError::Other(e.into()))),
        }
    }

    /// Keeps every ClusterAPINodeClass's status current while this replica leads.
    pub async fn run<S: NodeClassSource>(
        ctx: Arc<Context<ClusterApiCloudProvider<S>>>,
        shutdown: CancellationToken,
    ) {
        nodeclass_status::run(
            ctx,
            shutdown,
            "clusterapinodeclass.status",
            Arc::new(Index::<ClusterAPINodeClass>::default()),
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
    use crate::capi::MachineDeployment;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).unwrap()
    }

    fn class(selector: serde_json::Value) -> ClusterAPINodeClass {
        let mut c: ClusterAPINodeClass = serde_json::from_value(json!({
            "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
            "kind": "ClusterAPINodeClass",
            "metadata": {"name": "default", "generation": 1},
            "spec": {"scalableResourceSelector": selector},
        }))
        .unwrap();
        c.metadata.creation_timestamp = Some(Time(at(0)));
        c
    }

    fn md(name: &str, memory: &str) -> MachineDeployment {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default",
                         "labels": {MEMBER_LABEL: "", "pool": "general"},
                         "annotations": {
                             "capacity.cluster-autoscaler.kubernetes.io/cpu": "2",
                             "capacity.cluster-autoscaler.kubernetes.io/memory": memory}},
        }))
        .unwrap()
    }

    fn condition<'a>(s: &'a ClusterAPINodeClassStatus, type_: &str) -> (&'a str, &'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.as_str(), c.reason.as_str(), c.message.as_str())
    }

    /// Upstream: "adds the ready condition to a new NodeClass" (given something to launch from).
    #[test]
    fn a_class_that_selects_usable_machine_deployments_is_ready() {
        let s = status(
            &class(json!({"matchLabels": {"pool": "general"}})),
            Ok(&[md("md-0", "4Gi")]),
            &Options::default(),
            at(10),
        );
        assert_eq!(
            condition(&s, CONDITION_MACHINE_DEPLOYMENTS_READY),
            ("True", CONDITION_MACHINE_DEPLOYMENTS_READY, "")
        );
        assert_eq!(condition(&s, CONDITION_READY).0, "True");
        assert_eq!(s.conditions.last().unwrap().type_, CONDITION_READY);
    }

    #[test]
    fn what_is_left_out_is_named() {
        let listed = [md("md-0", "4Gi"), md("md-bad", "4GiB")];
        let s = status(
            &class(json!(null)),
            Ok(&listed),
            &Options::default(),
            at(10),
        );
        let (st, _, message) = condition(&s, CONDITION_MACHINE_DEPLOYMENTS_READY);
        assert_eq!(st, "True");
        assert!(
            message.contains("MachineDeployment default/md-bad skipped")
                && message.contains("capacity.cluster-autoscaler.kubernetes.io/memory"),
            "{message}"
        );

        let s = status(
            &class(json!(null)),
            Ok(&[md("md-bad", "4GiB")]),
            &Options::default(),
            at(10),
        );
        let (st, reason, message) = condition(&s, CONDITION_MACHINE_DEPLOYMENTS_READY);
        assert_eq!((st, reason), ("False", REASON_INVALID));
        assert!(message.contains("default/md-bad"), "{message}");
        assert_eq!(condition(&s, CONDITION_READY).0, "False");
    }

    #[test]
    fn a_selector_that_finds_nothing_is_not_ready() {
        let s = status(
            &class(json!({"matchLabels": {"pool": "gpu"}})),
            Ok(&[md("md-0", "4Gi")]),
            &Options::default(),
            at(10),
        );
        assert_eq!(
            condition(&s, CONDITION_MACHINE_DEPLOYMENTS_READY),
            (
                "False",
                REASON_NOT_FOUND,
                "scalableResourceSelector selects no MachineDeployment labelled node.cluster.x-k8s.io/karpenter-member"
            )
        );
    }

    #[test]
    fn a_failed_listing_keeps_the_last_status() {
        let mut c = class(json!(null));
        let s = status(&c, Ok(&[md("md-0", "4Gi")]), &Options::default(), at(10));
        c.status = Some(s.clone());
        assert_eq!(
            status(&c, Err("connection refused"), &Options::default(), at(20)),
            s
        );
        assert_eq!(
            status(
                &class(json!(null)),
                Err("down"),
                &Options::default(),
                at(20)
            ),
            ClusterAPINodeClassStatus::default()
        );
    }

    #[test]
    fn long_messages_are_cut() {
        let long = "é".repeat(MESSAGE_LIMIT);
        let cut = truncated(long);
        assert!(cut.len() <= MESSAGE_LIMIT + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
