//! The EC2NodeClass status: what its selectors resolve to now, and whether it can launch —
//! `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`, `InstanceProfileReady` and `Ready`, as
//! upstream reports them, so `kubectl get ec2nodeclass` says why a NodeClass launches nothing.
//! The same pass deletes the launch templates of NodeClasses that are gone.

use std::sync::Arc;
use std::time::Duration;

use crate::ec2nodeclass::{
    Ami, CapacityReservation, EC2NodeClass, EC2NodeClassStatus, SecurityGroup, Subnet,
};
use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::jiff::Timestamp;
use karpenter_controller::state::Index;
use karpenter_controller::{Context, Error, conditions, nodeclass_status};
use tokio_util::sync::CancellationToken;

use crate::nodeclass::{NodeClassError, ResolvedNodeClass};
use crate::provider::{AwsApi, AwsCloudProvider, NodeClassStore};

/// How often every EC2NodeClass is resolved again.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(60);

const PARTS: [(&str, &str); 4] = [
    ("SubnetsReady", "spec.subnetSelectorTerms"),
    ("SecurityGroupsReady", "spec.securityGroupSelectorTerms"),
    ("AMIsReady", "spec.amiSelectorTerms"),
    ("InstanceProfileReady", "spec"),
];

/// The status for a resolution (or its failure), keeping transition times of `previous`.
pub fn status(
    previous: Option<&EC2NodeClassStatus>,
    resolved: Result<&ResolvedNodeClass, &NodeClassError>,
    now: Timestamp,
) -> EC2NodeClassStatus {
    let mut out = previous.cloned().unwrap_or_default();
    match resolved {
        Ok(r) => {
            out.subnets = r
                .subnets
                .iter()
                .map(|s| Subnet {
                    id: s.id.clone(),
                    zone: s.zone.clone(),
                    zone_id: s.zone_id.clone(),
                })
                .collect();
            out.security_groups = r
                .security_groups
                .iter()
                .map(|g| SecurityGroup {
                    id: g.id.clone(),
                    name: Some(g.name.clone()).filter(|n| !n.is_empty()),
                })
                .collect();
            out.amis = r
                .images
                .iter()
                .map(|i| Ami {
                    id: i.id.clone(),
                    name: Some(i.name.clone()).filter(|n| !n.is_empty()),
                    deprecated: i.deprecated,
                    requirements: crate::nodeclass::image_requirements(i)
                        .into_iter()
                        .map(|(key, op, values)| NodeSelectorRequirement {
                            key: key.into(),
                            operator: op.as_str().into(),
                            values: (!values.is_empty()).then_some(values),
                        })
                        .collect(),
                })
                .collect();
            out.instance_profile = Some(r.instance_profile.clone());
            out.capacity_reservations = r
                .capacity_reservations
                .iter()
                .map(|c| CapacityReservation {
                    availability_zone: c.zone.clone(),
                    end_time: c
                        .end_date
                        .as_deref()
                        .and_then(|d| d.parse::<Timestamp>().ok())
                        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
                    id: c.id.clone(),
                    instance_match_criteria: c.instance_match_criteria.clone(),
                    instance_type: c.instance_type.clone(),
                    interruptible: false,
                    owner_id: c.owner_id.clone(),
                    reservation_type: Some(c.reservation_type.clone()),
                    state: Some("active".into()),
                })
                .collect();
            for (condition, _) in PARTS {
                conditions::set(&mut out.conditions, condition, "True", condition, "", now);
            }
            conditions::set(&mut out.conditions, "Ready", "True", "Ready", "", now);
        }
        Err(e) => {
            let message = e.to_string();
            // The failing part is the one whose field the message names; the parts before it
            // resolved (resolution goes in PARTS' order).
            let failing = match e {
                NodeClassError::NotReady(m) => PARTS
                    .iter()
                    .position(|(_, field)| m.starts_with(field))
                    .unwrap_or(PARTS.len() - 1),
                NodeClassError::Aws(_) => PARTS.len() - 1,
            };
            for (i, (condition, _)) in PARTS.iter().enumerate() {
                match i.cmp(&failing) {
                    std::cmp::Ordering::Less => {
                        conditions::set(&mut out.conditions, condition, "True", condition, "", now)
                    }
                    std::cmp::Ordering::Equal => conditions::set(
                        &mut out.conditions,
                        condition,
                        "False",
                        "ResolutionFailed",
                        &message,
                        now,
                    ),
                    std::cmp::Ordering::Greater => conditions::set(
                        &mut out.conditions,
                        condition,
                        "Unknown",
                        "AwaitingReconciliation",
                        "",
                        now,
                    ),
                };
            }
            conditions::set(
                &mut out.conditions,
                "Ready",
                "False",
                "NotReady",
                &message,
                now,
            );
        }
    }
    out
}

karpenter_controller::impl_stored!(EC2NodeClass);

/// Resolves one EC2NodeClass and writes its status when it changed. Asks to be looked at
/// again after [`STATUS_INTERVAL`]: what its selectors match changes in EC2, not in the API.
async fn reconcile<A, S>(
    ctx: &Context<AwsCloudProvider<A, S>>,
    class: &EC2NodeClass,
) -> Result<Option<Duration>, Error>
where
    A: AwsApi,
    S: NodeClassStore,
{
    let resolved = ctx.provider.resolve_node_class(class).await;
    let next = status(class.status.as_ref(), resolved.as_ref(), ctx.clock.now());
    nodeclass_status::write(&ctx.client, class, class.status.as_ref(), &next).await?;
    Ok(Some(STATUS_INTERVAL))
}

/// Keeps every EC2NodeClass's status current while this replica leads: each one is resolved
/// when it changes, again every [`STATUS_INTERVAL`], and after a failed write with per-object
/// backoff. Every [`STATUS_INTERVAL`] the launch templates of NodeClasses that are gone are
/// deleted.
pub async fn run<A, S>(ctx: Arc<Context<AwsCloudProvider<A, S>>>, shutdown: CancellationToken)
where
    A: AwsApi,
    S: NodeClassStore,
{
    let classes = Arc::new(Index::<EC2NodeClass>::default());
    let statuses = nodeclass_status::run(
        ctx.clone(),
        shutdown.clone(),
        "ec2nodeclass.status",
        classes.clone(),
        |ctx, class| async move { reconcile(&ctx, &class).await },
    );
    let templates = async {
        loop {
            let collected = ctx.is_leader() && classes.synced();
            if collected {
                let names: Vec<String> = classes
                    .all()
                    .iter()
                    .filter_map(|c| c.metadata.name.clone())
                    .collect();
                if let Err(e) = ctx.provider.collect_launch_templates(&names).await {
                    tracing::warn!(error = %e, "collecting launch templates");
                }
            }
            let wait = if collected {
                STATUS_INTERVAL
            } else {
                ctx.options.resync
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    };
    tokio::join!(statuses, templates);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ec2::{Image, SecurityGroupInfo, SubnetInfo};

    fn resolved() -> ResolvedNodeClass {
        ResolvedNodeClass {
            subnets: vec![SubnetInfo {
                id: "subnet-a".into(),
                zone: "us-east-1a".into(),
                zone_id: Some("use1-az1".into()),
                available_ips: 10,
            }],
            security_groups: vec![SecurityGroupInfo {
                id: "sg-1".into(),
                name: "nodes".into(),
            }],
            images: vec![Image {
                id: "ami-1".into(),
                name: "al2023".into(),
                architecture: "arm64".into(),
                creation_date: String::new(),
                deprecated: false,
                variant: crate::ssm::Variant::Standard,
                ..Default::default()
            }],
            instance_profile: "test_0123".into(),
            capacity_reservations: Vec::new(),
        }
    }

    fn condition<'a>(s: &'a EC2NodeClassStatus, t: &str) -> (&'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == t).unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn resolved_is_ready_with_what_it_found() {
        let s = status(None, Ok(&resolved()), Timestamp::now());
        assert_eq!(condition(&s, "Ready"), ("True", "Ready"));
        assert_eq!(s.subnets[0].zone_id.as_deref(), Some("use1-az1"));
        assert_eq!(
            s.amis[0].requirements[0].values.as_deref(),
            Some(&["arm64".to_string()][..])
        );
        let gpu = &s.amis[0].requirements[1];
        assert_eq!(
            (gpu.key.as_str(), gpu.operator.as_str()),
            ("karpenter.k8s.aws/instance-gpu-count", "DoesNotExist")
        );
        assert_eq!(gpu.values, None);
        assert_eq!(s.instance_profile.as_deref(), Some("test_0123"));
    }

    #[test]
    fn a_failing_selector_names_its_condition() {
        let e = NodeClassError::NotReady(
            "spec.securityGroupSelectorTerms: no security group matches".into(),
        );
        let s = status(None, Err(&e), Timestamp::now());
        assert_eq!(condition(&s, "SubnetsReady").0, "True");
        assert_eq!(
            condition(&s, "SecurityGroupsReady"),
            ("False", "ResolutionFailed")
        );
        assert_eq!(condition(&s, "AMIsReady").0, "Unknown");
        let ready = s.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "False");
        assert!(ready.message.contains("no security group matches"));
        // Recovering keeps the list-map shape and flips every condition.
        let s = status(Some(&s), Ok(&resolved()), Timestamp::now());
        assert!(
            s.conditions.iter().all(|c| c.status == "True"),
            "{:?}",
            s.conditions
        );
        assert_eq!(s.conditions.len(), 5);
    }
}
