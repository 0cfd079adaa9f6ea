//! The EC2NodeClass status: what its selectors resolve to now, and whether it can launch —
//! `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`, `InstanceProfileReady`,
//! `PlacementGroupReady`, `ValidationSucceeded` and `Ready`, as upstream reports them, so
//! `kubectl get ec2nodeclass` says why a NodeClass launches nothing. Capacity blocks in their
//! last 40 minutes are listed `expiring`. The same pass deletes the launch templates of
//! NodeClasses that are gone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ec2nodeclass::{
    Ami, CapacityReservation, EC2NodeClass, EC2NodeClassStatus, SecurityGroup, Subnet,
};
use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use karpenter_controller::state::Index;
use karpenter_controller::{Context, Error, conditions, nodeclass_status};
use tokio_util::sync::CancellationToken;

use crate::nodeclass::{NodeClassError, ResolvedNodeClass};
use crate::provider::{AwsApi, AwsCloudProvider, NodeClassStore};
use crate::validation::{self, Outcome, ValidationCache};

/// How often every EC2NodeClass is resolved again.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(60);

/// How long before a capacity block ends its instances are reclaimed: from then on it is
/// `expiring` (EC2 starts reclaiming 30 minutes before the end and warns 10 minutes earlier).
pub const CAPACITY_BLOCK_EXPIRY_WINDOW: SignedDuration = SignedDuration::from_mins(40);

/// The resolution parts, in the order they are resolved, with the field each reads.
const PARTS: [(&str, &str); 5] = [
    ("SubnetsReady", "spec.subnetSelectorTerms"),
    ("SecurityGroupsReady", "spec.securityGroupSelectorTerms"),
    ("AMIsReady", "spec.amiSelectorTerms"),
    ("InstanceProfileReady", "spec"),
    ("PlacementGroupReady", crate::placementgroup::FIELD),
];

/// The part an AWS error (which names no field) is put on.
const AWS_ERROR_PART: usize = 3;

/// Every condition `Ready` summarizes.
const READY_DEPENDS_ON: [&str; 6] = [
    "SubnetsReady",
    "SecurityGroupsReady",
    "AMIsReady",
    "InstanceProfileReady",
    "PlacementGroupReady",
    validation::CONDITION,
];

/// A reservation's state as upstream lists it: a capacity block within
/// [`CAPACITY_BLOCK_EXPIRY_WINDOW`] of its end is `expiring`, anything else `active`.
pub fn reservation_state(
    reservation_type: &str,
    end: Option<Timestamp>,
    now: Timestamp,
) -> &'static str {
    match end {
        Some(end)
            if reservation_type == "capacity-block"
                && now >= end - CAPACITY_BLOCK_EXPIRY_WINDOW =>
        {
            "expiring"
        }
        _ => "active",
    }
}

/// The reason a failing part's condition gets.
fn failure_reason(part: &str, message: &str) -> &'static str {
    match part {
        "PlacementGroupReady" if message.contains("not found") => "PlacementGroupNotFound",
        "PlacementGroupReady" => "PlacementGroupResolutionFailed",
        _ => "ResolutionFailed",
    }
}

/// The status for a resolution (or its failure) and what validating it concluded, keeping
/// transition times of `previous`.
pub fn status(
    previous: Option<&EC2NodeClassStatus>,
    resolved: Result<&ResolvedNodeClass, &NodeClassError>,
    validation: &Outcome,
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
                .map(|c| {
                    let end = c
                        .end_date
                        .as_deref()
                        .and_then(|d| d.parse::<Timestamp>().ok());
                    CapacityReservation {
                        availability_zone: c.zone.clone(),
                        end_time: end.map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
                        id: c.id.clone(),
                        instance_match_criteria: c.instance_match_criteria.clone(),
                        instance_type: c.instance_type.clone(),
                        interruptible: false,
                        owner_id: c.owner_id.clone(),
                        reservation_type: Some(c.reservation_type.clone()),
                        state: Some(reservation_state(&c.reservation_type, end, now).into()),
                    }
                })
                .collect();
            for (condition, _) in PARTS {
                conditions::set(&mut out.conditions, condition, "True", condition, "", now);
            }
        }
        Err(e) => {
            let message = e.to_string();
            // The failing part is the one whose field the message names most precisely (the
            // instance profile's is all of `spec`); the parts before it resolved (resolution
            // goes in PARTS' order).
            let failing = match e {
                NodeClassError::NotReady(m) => PARTS
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, field))| m.starts_with(field))
                    .max_by_key(|(_, (_, field))| field.len())
                    .map_or(AWS_ERROR_PART, |(i, _)| i),
                NodeClassError::Aws(_) => AWS_ERROR_PART,
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
                        failure_reason(condition, &message),
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
        }
    }
    let condition = validation::CONDITION;
    match validation {
        Outcome::Succeeded => {
            conditions::set(&mut out.conditions, condition, "True", condition, "", now);
        }
        Outcome::Failed { reason, message } => {
            conditions::set(
                &mut out.conditions,
                condition,
                "False",
                reason,
                message,
                now,
            );
        }
        // No verdict: the last one stands.
        Outcome::Retry(_) if out.conditions.iter().any(|c| c.type_ == condition) => {}
        Outcome::Retry(_) => {
            conditions::set(
                &mut out.conditions,
                condition,
                "Unknown",
                "AwaitingReconciliation",
                "",
                now,
            );
        }
    }
    set_ready(&mut out, now);
    out
}

/// `Ready`: True when every condition it summarizes is; else False (or Unknown while none is
/// False) with the first condition that is not True, as `Type=Status` when it says nothing.
fn set_ready(out: &mut EC2NodeClassStatus, now: Timestamp) {
    let blocking = |status: &str| {
        READY_DEPENDS_ON.iter().find_map(|t| {
            out.conditions
                .iter()
                .find(|c| c.type_ == *t && c.status == status)
                .map(|c| {
                    if c.message.is_empty() {
                        format!("{}={}", c.type_, c.status)
                    } else {
                        c.message.clone()
                    }
                })
        })
    };
    let (status, reason, message) = match (blocking("False"), blocking("Unknown")) {
        (Some(m), _) => ("False", "NotReady", m),
        (None, Some(m)) => ("Unknown", "AwaitingReconciliation", m),
        (None, None) => ("True", "Ready", String::new()),
    };
    conditions::set(&mut out.conditions, "Ready", status, reason, &message, now);
}

karpenter_controller::impl_stored!(EC2NodeClass);

/// Resolves and validates one EC2NodeClass and writes its status when it changed. Asks to be
/// looked at again after [`STATUS_INTERVAL`] (what its selectors match changes in EC2, not in
/// the API), or sooner, backing off, when validation reached no verdict
/// ([`ValidationCache::retry_after`]).
async fn reconcile<A, S>(
    ctx: &Context<AwsCloudProvider<A, S>>,
    validations: &ValidationCache,
    class: &EC2NodeClass,
) -> Result<Option<Duration>, Error>
where
    A: AwsApi,
    S: NodeClassStore,
{
    let resolved = ctx.provider.resolve_node_class(class).await;
    let outcome = match &resolved {
        Ok(r) => validation::validate(&ctx.provider, class, r, validations, Instant::now()).await,
        Err(_) => Outcome::dependencies_not_ready(),
    };
    if let Outcome::Retry(why) = &outcome {
        tracing::warn!(ec2nodeclass = ?class.metadata.name, reason = %why, "validation reached no verdict; trying again");
    }
    let next = status(
        class.status.as_ref(),
        resolved.as_ref(),
        &outcome,
        ctx.clock.now(),
    );
    nodeclass_status::write(&ctx.client, class, class.status.as_ref(), &next).await?;
    Ok(Some(match outcome {
        Outcome::Retry(_) => {
            validations.retry_after(class.metadata.name.as_deref().unwrap_or_default())
        }
        _ => STATUS_INTERVAL,
    }))
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
    let validations = Arc::new(ValidationCache::default());
    let statuses = nodeclass_status::run(
        ctx.clone(),
        shutdown.clone(),
        "ec2nodeclass.status",
        classes.clone(),
        move |ctx, class| {
            let validations = validations.clone();
            async move { reconcile(&ctx, &validations, &class).await }
        },
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
            ..Default::default()
        }
    }

    fn condition<'a>(s: &'a EC2NodeClassStatus, t: &str) -> (&'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == t).unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn resolved_is_ready_with_what_it_found() {
        let s = status(None, Ok(&resolved()), &Outcome::Succeeded, Timestamp::now());
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
        let s = status(
            None,
            Err(&e),
            &Outcome::dependencies_not_ready(),
            Timestamp::now(),
        );
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
        let s = status(
            Some(&s),
            Ok(&resolved()),
            &Outcome::Succeeded,
            Timestamp::now(),
        );
        assert!(
            s.conditions.iter().all(|c| c.status == "True"),
            "{:?}",
            s.conditions
        );
        assert_eq!(s.conditions.len(), 7);
    }

    #[test]
    fn a_failed_validation_keeps_the_class_from_ready_with_its_reason() {
        let denied = Outcome::Failed {
            reason: validation::REASON_CREATE_FLEET.into(),
            message: "Controller isn't authorized to call ec2:CreateFleet: no".into(),
        };
        let s = status(None, Ok(&resolved()), &denied, Timestamp::now());
        assert_eq!(
            condition(&s, validation::CONDITION),
            ("False", "CreateFleetAuthCheckFailed")
        );
        let ready = s.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "NotReady")
        );
        assert!(
            ready.message.contains("ec2:CreateFleet"),
            "{}",
            ready.message
        );
        // No verdict (a throttle) keeps the last one, and the class stays not Ready.
        let again = status(
            Some(&s),
            Ok(&resolved()),
            &Outcome::Retry("throttled".into()),
            Timestamp::now(),
        );
        assert_eq!(condition(&again, validation::CONDITION).0, "False");
        // A first look with no verdict is Unknown, and so is Ready.
        let first = status(
            None,
            Ok(&resolved()),
            &Outcome::Retry("throttled".into()),
            Timestamp::now(),
        );
        assert_eq!(condition(&first, validation::CONDITION).0, "Unknown");
        assert_eq!(condition(&first, "Ready").0, "Unknown");
    }

    #[test]
    fn a_missing_placement_group_names_its_condition() {
        let e = NodeClassError::NotReady(format!(
            "{}: placement group \"training\" not found",
            crate::placementgroup::FIELD
        ));
        let s = status(
            None,
            Err(&e),
            &Outcome::dependencies_not_ready(),
            Timestamp::now(),
        );
        for part in ["SubnetsReady", "AMIsReady", "InstanceProfileReady"] {
            assert_eq!(condition(&s, part).0, "True", "{part}");
        }
        assert_eq!(
            condition(&s, "PlacementGroupReady"),
            ("False", "PlacementGroupNotFound")
        );
        let e = NodeClassError::NotReady(format!(
            "{}: failed to resolve placement group \"training\": throttled",
            crate::placementgroup::FIELD
        ));
        let s = status(
            None,
            Err(&e),
            &Outcome::dependencies_not_ready(),
            Timestamp::now(),
        );
        assert_eq!(
            condition(&s, "PlacementGroupReady"),
            ("False", "PlacementGroupResolutionFailed")
        );
        assert_eq!(condition(&s, "Ready").0, "False");
    }

    #[test]
    fn capacity_blocks_expire_forty_minutes_before_their_end() {
        let end: Timestamp = "2026-11-25T12:00:00Z".parse().unwrap();
        let at = |t: &str| t.parse::<Timestamp>().unwrap();
        let cases = [
            (
                "capacity-block",
                Some(end),
                at("2026-11-25T11:19:59Z"),
                "active",
            ),
            (
                "capacity-block",
                Some(end),
                at("2026-11-25T11:20:00Z"),
                "expiring",
            ),
            (
                "capacity-block",
                Some(end),
                at("2026-11-25T11:59:00Z"),
                "expiring",
            ),
            ("default", Some(end), at("2026-11-25T11:59:00Z"), "active"),
            ("capacity-block", None, at("2026-11-25T11:59:00Z"), "active"),
        ];
        for (kind, end, now, want) in cases {
            assert_eq!(reservation_state(kind, end, now), want, "{kind} at {now}");
        }
        let mut r = resolved();
        r.capacity_reservations
            .push(crate::ec2::CapacityReservationInfo {
                id: "cr-1".into(),
                reservation_type: "capacity-block".into(),
                end_date: Some("2026-11-25T12:00:00Z".into()),
                ..Default::default()
            });
        let s = status(
            None,
            Ok(&r),
            &Outcome::Succeeded,
            at("2026-11-25T11:30:00Z"),
        );
        assert_eq!(
            s.capacity_reservations[0].state.as_deref(),
            Some("expiring")
        );
    }
}
