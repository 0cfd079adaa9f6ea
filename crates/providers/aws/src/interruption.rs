//! Interruption messages: the EventBridge events AWS sends to the interruption queue before it
//! reclaims or changes an instance, and what to do about each. Pure: the queue loop
//! ([`crate::interruption_controller`]) reads, decides here, and acts.
//!
//! | event | action |
//! |---|---|
//! | EC2 Spot Instance Interruption Warning (2 minutes' notice) | replace the node; the spot offering is unavailable for a while |
//! | AWS Health scheduled change (maintenance, retirement) | replace the node |
//! | EC2 Instance State-change: stopping, stopped, shutting-down, terminated | replace the node |
//! | EC2 Instance Rebalance Recommendation | an event; replace only when the NodePool opts in |
//! | EC2 Capacity Reservation Instance Interruption Warning | replace the node; the reservation takes no more launches until EC2 is asked again |

use serde_json::Value;

/// The NodePool annotation that makes rebalance recommendations replace nodes (a karpenter-rs
/// extension; upstream only records them).
pub const REPLACE_ON_REBALANCE_ANNOTATION: &str = "karpenter.k8s.aws/replace-on-rebalance";

/// What a message says happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A spot instance is about to be reclaimed.
    SpotInterruption,
    /// A spot instance is at elevated risk of interruption.
    RebalanceRecommendation,
    /// AWS scheduled maintenance or retirement.
    ScheduledChange,
    /// The instance changed state (`stopping`, `stopped`, `shutting-down`, `terminated`).
    StateChange(String),
    /// The capacity reservation the instance runs in is taking it back (an interruptible
    /// reservation reclaimed by its owner).
    CapacityReservationInterruption,
    /// Something this provider does not act on (a state change to `running`, another
    /// service's health event).
    Noop,
}

impl Kind {
    /// The `message_type` label of `karpenter_interruption_received_messages_total`, as
    /// upstream names them.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::SpotInterruption => "spot_interrupted",
            Self::RebalanceRecommendation => "rebalance_recommendation",
            Self::ScheduledChange => "scheduled_change",
            Self::StateChange(s) if s == "terminated" || s == "shutting-down" => {
                "instance_terminated"
            }
            Self::StateChange(_) => "instance_stopped",
            Self::CapacityReservationInterruption => "capacity_reservation_interrupted",
            Self::Noop => "no_op",
        }
    }

    /// The event reason published on the node and NodeClaim.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::SpotInterruption => "SpotInterrupted",
            Self::RebalanceRecommendation => "SpotRebalanceRecommendation",
            Self::ScheduledChange => "InstanceUnhealthy",
            Self::StateChange(s) if s == "terminated" || s == "shutting-down" => {
                "InstanceTerminating"
            }
            Self::StateChange(_) => "InstanceStopping",
            Self::CapacityReservationInterruption => "CapacityReservationInstanceInterrupted",
            Self::Noop => "",
        }
    }
}

/// One message from the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// What happened.
    pub kind: Kind,
    /// The instances it is about.
    pub instance_ids: Vec<String>,
    /// When AWS sent it (RFC 3339).
    pub time: String,
}

/// What to do for a message about one NodeClaim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Delete the NodeClaim: its node is tainted, drained and replaced before AWS takes it.
    Replace,
    /// Record an event only.
    Notify,
    /// Nothing.
    Ignore,
}

/// Why a message could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("interruption message: {0}")]
pub struct ParseError(String);

/// Reads an EventBridge envelope.
pub fn parse(body: &str) -> Result<Message, ParseError> {
    let v: Value = serde_json::from_str(body).map_err(|e| ParseError(e.to_string()))?;
    let source = v["source"].as_str().unwrap_or_default();
    let detail_type = v["detail-type"].as_str().unwrap_or_default();
    let detail = &v["detail"];
    let time = v["time"].as_str().unwrap_or_default().to_string();
    if source.is_empty() || detail_type.is_empty() {
        return Err(ParseError(
            "not an EventBridge event (no source or detail-type)".into(),
        ));
    }
    let instance = || {
        detail["instance-id"]
            .as_str()
            .map(|i| vec![i.to_string()])
            .unwrap_or_default()
    };
    let (kind, instance_ids) = match (source, detail_type) {
        ("aws.ec2", "EC2 Spot Instance Interruption Warning") => {
            (Kind::SpotInterruption, instance())
        }
        ("aws.ec2", "EC2 Instance Rebalance Recommendation") => {
            (Kind::RebalanceRecommendation, instance())
        }
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning") => {
            (Kind::CapacityReservationInterruption, instance())
        }
        ("aws.ec2", "EC2 Instance State-change Notification") => {
            let state = detail["state"].as_str().unwrap_or_default();
            let kind = match state {
                "stopping" | "stopped" | "shutting-down" | "terminated" => {
                    Kind::StateChange(state.into())
                }
                _ => Kind::Noop,
            };
            (kind, instance())
        }
        ("aws.health", "AWS Health Event") => {
            let ec2 = detail["service"].as_str() == Some("EC2");
            let scheduled = detail["eventTypeCategory"].as_str() == Some("scheduledChange");
            let ids = detail["affectedEntities"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|e| e["entityValue"].as_str())
                        .filter(|id| id.starts_with("i-"))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            (
                if ec2 && scheduled {
                    Kind::ScheduledChange
                } else {
                    Kind::Noop
                },
                ids,
            )
        }
        _ => (Kind::Noop, Vec::new()),
    };
    Ok(Message {
        kind,
        instance_ids,
        time,
    })
}

/// What to do about a message for a node of a NodePool that does (or does not) opt into
/// replacing on rebalance recommendations.
pub fn action(kind: &Kind, replace_on_rebalance: bool) -> Action {
    match kind {
        Kind::SpotInterruption
        | Kind::ScheduledChange
        | Kind::StateChange(_)
        | Kind::CapacityReservationInterruption => Action::Replace,
        Kind::RebalanceRecommendation if replace_on_rebalance => Action::Replace,
        Kind::RebalanceRecommendation => Action::Notify,
        Kind::Noop => Action::Ignore,
    }
}

/// The NodeClaims a message is about, and what to do with each: claims are matched by the
/// instance id in their providerID; a rebalance recommendation replaces only claims whose
/// NodePool carries [`REPLACE_ON_REBALANCE_ANNOTATION`]` = "true"`.
pub fn decide<'a>(
    message: &Message,
    claims: impl IntoIterator<Item = &'a karpenter_api::NodeClaim>,
    pool: impl Fn(&str) -> Option<&'a karpenter_api::NodePool>,
) -> Vec<(&'a karpenter_api::NodeClaim, Action)> {
    let mut out = Vec::new();
    for claim in claims {
        let Some(provider_id) = claim.status.as_ref().and_then(|s| s.provider_id.as_deref()) else {
            continue;
        };
        let Some(id) = provider_id.rsplit('/').next() else {
            continue;
        };
        if !message.instance_ids.iter().any(|i| i == id) {
            continue;
        }
        let opted_in = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(karpenter_api::labels::NODE_POOL_LABEL))
            .and_then(|name| pool(name))
            .and_then(|p| p.metadata.annotations.as_ref())
            .and_then(|a| a.get(REPLACE_ON_REBALANCE_ANNOTATION))
            .is_some_and(|v| v == "true");
        let act = action(&message.kind, opted_in);
        if act != Action::Ignore {
            out.push((claim, act));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str, pool: &str, provider_id: &str) -> karpenter_api::NodeClaim {
        let mut c = karpenter_api::NodeClaim::default();
        c.metadata.name = Some(name.into());
        c.metadata.labels = Some([("karpenter.sh/nodepool".to_string(), pool.to_string())].into());
        c.status = Some(karpenter_api::NodeClaimStatus {
            provider_id: Some(provider_id.into()),
            ..Default::default()
        });
        c
    }

    #[test]
    fn messages_reach_the_claims_of_their_instances() {
        let claims = [
            claim("a", "default", "aws:///us-east-1a/i-1"),
            claim("b", "batch", "aws:///us-east-1b/i-2"),
            claim("c", "default", "aws:///us-east-1a/i-3"),
        ];
        let mut batch = karpenter_api::NodePool::default();
        batch.metadata.name = Some("batch".into());
        batch.metadata.annotations = Some(
            [(
                REPLACE_ON_REBALANCE_ANNOTATION.to_string(),
                "true".to_string(),
            )]
            .into(),
        );
        let pools = [batch];
        let lookup = |name: &str| {
            pools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
        };
        let spot = Message {
            kind: Kind::SpotInterruption,
            instance_ids: vec!["i-1".into()],
            time: String::new(),
        };
        let decided: Vec<_> = decide(&spot, &claims, lookup)
            .into_iter()
            .map(|(c, a)| (c.metadata.name.clone().unwrap(), a))
            .collect();
        assert_eq!(decided, vec![("a".to_string(), Action::Replace)]);
        let rebalance = Message {
            kind: Kind::RebalanceRecommendation,
            instance_ids: vec!["i-1".into(), "i-2".into()],
            time: String::new(),
        };
        let decided: Vec<_> = decide(&rebalance, &claims, lookup)
            .into_iter()
            .map(|(c, a)| (c.metadata.name.clone().unwrap(), a))
            .collect();
        assert_eq!(
            decided,
            vec![
                ("a".to_string(), Action::Notify),
                ("b".to_string(), Action::Replace)
            ],
            "only the opted-in pool replaces"
        );
        let unknown = Message {
            kind: Kind::SpotInterruption,
            instance_ids: vec!["i-9".into()],
            time: String::new(),
        };
        assert!(decide(&unknown, &claims, lookup).is_empty());
    }

    fn ec2(detail_type: &str, detail: &str) -> String {
        format!(
            r#"{{"version":"0","id":"7e5b1f3e","detail-type":"{detail_type}","source":"aws.ec2","account":"123456789012","time":"2026-11-22T13:52:02Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1a:instance/i-0b662ef9931388ba0"],"detail":{detail}}}"#
        )
    }

    #[test]
    fn each_event_kind_and_its_action() {
        let cases = [
            (
                ec2(
                    "EC2 Spot Instance Interruption Warning",
                    r#"{"instance-id":"i-0b662ef9931388ba0","instance-action":"terminate"}"#,
                ),
                Kind::SpotInterruption,
                Action::Replace,
                "spot_interrupted",
            ),
            (
                ec2(
                    "EC2 Instance Rebalance Recommendation",
                    r#"{"instance-id":"i-0b662ef9931388ba0"}"#,
                ),
                Kind::RebalanceRecommendation,
                Action::Notify,
                "rebalance_recommendation",
            ),
            (
                ec2(
                    "EC2 Instance State-change Notification",
                    r#"{"instance-id":"i-0b662ef9931388ba0","state":"stopping"}"#,
                ),
                Kind::StateChange("stopping".into()),
                Action::Replace,
                "instance_stopped",
            ),
            (
                ec2(
                    "EC2 Instance State-change Notification",
                    r#"{"instance-id":"i-0b662ef9931388ba0","state":"terminated"}"#,
                ),
                Kind::StateChange("terminated".into()),
                Action::Replace,
                "instance_terminated",
            ),
            (
                ec2(
                    "EC2 Capacity Reservation Instance Interruption Warning",
                    r#"{"instance-id":"i-0b662ef9931388ba0","instance-action":"terminate"}"#,
                ),
                Kind::CapacityReservationInterruption,
                Action::Replace,
                "capacity_reservation_interrupted",
            ),
            (
                ec2(
                    "EC2 Instance State-change Notification",
                    r#"{"instance-id":"i-0b662ef9931388ba0","state":"running"}"#,
                ),
                Kind::Noop,
                Action::Ignore,
                "no_op",
            ),
        ];
        for (body, kind, act, label) in cases {
            let m = parse(&body).unwrap();
            assert_eq!(m.kind, kind, "{body}");
            assert_eq!(m.instance_ids, vec!["i-0b662ef9931388ba0"]);
            assert_eq!(m.time, "2026-11-22T13:52:02Z");
            assert_eq!(action(&m.kind, false), act, "{body}");
            assert_eq!(m.kind.metric_label(), label);
        }
        assert_eq!(
            action(&Kind::RebalanceRecommendation, true),
            Action::Replace,
            "the NodePool opted in"
        );
    }

    #[test]
    fn scheduled_changes_name_their_instances() {
        let body = r#"{"version":"0","id":"1","detail-type":"AWS Health Event","source":"aws.health","account":"123456789012","time":"2026-11-22T13:52:02Z","region":"us-east-1","resources":[],"detail":{"eventArn":"arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/x","service":"EC2","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-1"},{"entityValue":"i-2"}]}}"#;
        let m = parse(body).unwrap();
        assert_eq!(m.kind, Kind::ScheduledChange);
        assert_eq!(m.instance_ids, vec!["i-1", "i-2"]);
        let other = body.replace("\"service\":\"EC2\"", "\"service\":\"RDS\"");
        assert_eq!(parse(&other).unwrap().kind, Kind::Noop);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(parse("not json").is_err());
        assert!(
            parse("{}")
                .unwrap_err()
                .to_string()
                .contains("not an EventBridge event")
        );
        assert_eq!(
            parse(r#"{"source":"aws.s3","detail-type":"Object Created","detail":{}}"#)
                .unwrap()
                .kind,
            Kind::Noop
        );
    }
}
