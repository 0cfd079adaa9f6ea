//! The ECSNodeClass status, as upstream's status controller writes it: the vSwitches,
//! security groups and images the selectors resolve to, the conditions `VSwitchesReady`,
//! `SecurityGroupsReady` and `ImagesReady`, and `Ready` over them, each stamped with the
//! generation it was computed for.
//!
//! A pass is [`observe`] (the cloud calls, with the `cloud` feature), then the pure [`status`],
//! then writing it; [`requeue_after`] says when to look again. A part whose listing failed is
//! left as it was, as upstream leaves it, and the failure is returned for the loop's backoff.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use karpenter_cloudprovider::conditions::ConditionSet;
pub use karpenter_cloudprovider::conditions::{
    CONDITION_READY, MESSAGE_AWAITING_RECONCILIATION, REASON_AWAITING_RECONCILIATION,
    REASON_RECONCILING_DEPENDENTS, REASON_UNHEALTHY_DEPENDENTS,
};

use crate::ecsnodeclass::{
    CONDITION_IMAGES_READY, CONDITION_SECURITY_GROUPS_READY, CONDITION_VSWITCHES_READY,
    ECSNodeClass, ECSNodeClassSpec, ECSNodeClassStatus, Image, READY_CONDITIONS,
};
use crate::securitygroup::SecurityGroupInfo;
use crate::vswitch::VSwitchInfo;

/// When to look again after every selector matched: vSwitches' free addresses change with
/// every launch, so upstream looks at them every minute.
pub const REQUEUE_RESOLVED: Duration = Duration::from_secs(60);
/// When to look again after the vSwitch or security group selectors matched nothing: soon,
/// so tags added afterwards are noticed without a restart.
pub const REQUEUE_NOT_FOUND: Duration = Duration::from_secs(15);

/// `VSwitchesReady`'s reason when nothing matched. Upstream spells it with a lower-case `v`.
pub const REASON_VSWITCHES_NOT_FOUND: &str = "vSwitchesNotFound";
/// `VSwitchesReady`'s message when nothing matched.
pub const MESSAGE_VSWITCHES_NOT_FOUND: &str = "VSwitchSelector did not match any VSwitches";
/// `SecurityGroupsReady`'s reason when nothing matched.
pub const REASON_SECURITY_GROUPS_NOT_FOUND: &str = "SecurityGroupsNotFound";
/// `SecurityGroupsReady`'s message when nothing matched.
pub const MESSAGE_SECURITY_GROUPS_NOT_FOUND: &str =
    "SecurityGroupSelector did not match any SecurityGroups";
/// `ImagesReady`'s reason when nothing matched.
pub const REASON_IMAGES_NOT_FOUND: &str = "ImagesNotFound";
/// `ImagesReady`'s message when nothing matched.
pub const MESSAGE_IMAGES_NOT_FOUND: &str = "ImageSelector did not match any Images";

/// What one pass found out; an `Err` is the message of a failed listing.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The vSwitches, in status order (most free addresses first).
    pub v_switches: Result<Vec<VSwitchInfo>, String>,
    /// The security groups, by id.
    pub security_groups: Result<Vec<SecurityGroupInfo>, String>,
    /// The images, one per set of requirements, preferred first.
    pub images: Result<Vec<Image>, String>,
}

/// The listings of a pass that failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("resolving the ECSNodeClass: {}", .0.join("; "))]
pub struct ResolutionFailed(pub Vec<String>);

impl Observed {
    /// The failed listings, if any.
    pub fn failure(&self) -> Option<ResolutionFailed> {
        let errors: Vec<String> = [
            self.v_switches.as_ref().err(),
            self.security_groups.as_ref().err(),
            self.images.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        (!errors.is_empty()).then_some(ResolutionFailed(errors))
    }
}

/// Resolves `spec`'s selectors: vSwitches (VPC), security groups and images by id (ECS) at
/// once; alias images among `cluster_images`, what ACK offers for the cluster's Kubernetes
/// version. When ACK could not be asked, the loop sets `images` to that error itself.
#[cfg(feature = "cloud")]
pub async fn observe(
    client: &crate::client::Client,
    spec: &ECSNodeClassSpec,
    cluster_images: &[crate::imagefamily::ClusterImage],
) -> Observed {
    let (v_switches, security_groups, images) = tokio::join!(
        crate::vswitch::describe(client, &spec.v_switch_selector_terms),
        crate::securitygroup::describe(client, &spec.security_group_selector_terms),
        crate::imagefamily::resolve(client, &spec.image_selector_terms, cluster_images),
    );
    Observed {
        v_switches: v_switches.map_err(|e| e.to_string()),
        security_groups: security_groups.map_err(|e| e.to_string()),
        images: images.map_err(|e| e.to_string()),
    }
}

/// The status after a pass over `class` that found `observed`, at `now`.
pub fn status(class: &ECSNodeClass, observed: &Observed, now: Timestamp) -> ECSNodeClassStatus {
    let mut out = class.status.clone().unwrap_or_default();
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

    match &observed.v_switches {
        Ok(found) if found.is_empty() => {
            out.v_switches = Vec::new();
            c.set(
                CONDITION_VSWITCHES_READY,
                "False",
                REASON_VSWITCHES_NOT_FOUND,
                MESSAGE_VSWITCHES_NOT_FOUND,
            );
        }
        Ok(found) => {
            out.v_switches = found.iter().map(VSwitchInfo::to_status).collect();
            c.set_true(CONDITION_VSWITCHES_READY);
        }
        Err(_) => {}
    }

    match &observed.security_groups {
        // No terms select no groups, and that is fine.
        Ok(found) if found.is_empty() && !class.spec.security_group_selector_terms.is_empty() => {
            out.security_groups = Vec::new();
            c.set(
                CONDITION_SECURITY_GROUPS_READY,
                "False",
                REASON_SECURITY_GROUPS_NOT_FOUND,
                MESSAGE_SECURITY_GROUPS_NOT_FOUND,
            );
        }
        Ok(found) => {
            out.security_groups = found.iter().map(SecurityGroupInfo::to_status).collect();
            c.set_true(CONDITION_SECURITY_GROUPS_READY);
        }
        Err(_) => {}
    }

    match &observed.images {
        Ok(found) if found.is_empty() => {
            out.images = Vec::new();
            c.set(
                CONDITION_IMAGES_READY,
                "False",
                REASON_IMAGES_NOT_FOUND,
                MESSAGE_IMAGES_NOT_FOUND,
            );
        }
        Ok(found) => {
            out.images = found.clone();
            c.set_true(CONDITION_IMAGES_READY);
        }
        Err(_) => {}
    }

    // A pass in which every listing failed leaves the conditions as they were.
    c.finish();
    out
}

/// When to look at the NodeClass again: [`REQUEUE_NOT_FOUND`] while its vSwitch or (non-empty)
/// security group selectors match nothing, else [`REQUEUE_RESOLVED`]; an `Err` when a listing
/// failed, for the loop to retry with backoff (after writing the status: the other parts
/// may have changed).
pub fn requeue_after(
    spec: &ECSNodeClassSpec,
    observed: &Observed,
) -> Result<Duration, ResolutionFailed> {
    if let Some(failure) = observed.failure() {
        return Err(failure);
    }
    let no_v_switches = observed.v_switches.as_ref().is_ok_and(Vec::is_empty);
    let no_security_groups = !spec.security_group_selector_terms.is_empty()
        && observed.security_groups.as_ref().is_ok_and(Vec::is_empty);
    Ok(if no_v_switches || no_security_groups {
        REQUEUE_NOT_FOUND
    } else {
        REQUEUE_RESOLVED
    })
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

    use crate::ecsnodeclass::ECSNodeClass;
    use crate::provider::{AlibabaCloudProvider, ClusterState};

    karpenter_controller::impl_stored!(ECSNodeClass);

    async fn reconcile<S: ClusterState>(
        ctx: &Context<AlibabaCloudProvider<S>>,
        class: &ECSNodeClass,
    ) -> Result<Option<std::time::Duration>, Error> {
        let provider = &ctx.provider;
        // ACK's images only matter to alias terms: asked for only then, and a failure to
        // list them fails those.
        let images = if class.spec.alias().is_none() {
            Ok(Vec::new())
        } else {
            match ctx.client.apiserver_version().await {
                Ok(info) => provider
                    .cluster()
                    .supported_images(&info.git_version)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(format!("reading the API server's version: {e}")),
            }
        };
        let mut observed = super::observe(
            provider.client(),
            &class.spec,
            images.as_deref().unwrap_or_default(),
        )
        .await;
        if let (Err(e), Some(_)) = (&images, class.spec.alias()) {
            observed.images = Err(e.clone());
        }
        let next = super::status(class, &observed, ctx.clock.now());
        nodeclass_status::write(&ctx.client, class, class.status.as_ref(), &next).await?;
        super::requeue_after(&class.spec, &observed)
            .map(Some)
            .map_err(|e| Error::Cloud(CloudProviderError::other(e)))
    }

    /// Keeps every ECSNodeClass's status current while this replica leads.
    pub async fn run<S: ClusterState>(
        ctx: Arc<Context<AlibabaCloudProvider<S>>>,
        shutdown: CancellationToken,
    ) {
        nodeclass_status::run(
            ctx,
            shutdown,
            "ecsnodeclass.status",
            Arc::new(Index::<ECSNodeClass>::default()),
            |ctx, class| async move { reconcile(&ctx, &class).await },
        )
        .await;
    }
}

#[cfg(test)]
#[path = "nodeclass_status_tests.rs"]
mod tests;
