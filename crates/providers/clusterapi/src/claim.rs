//! The decisions behind a launch and a deletion, apart from the API calls that carry them out.
//!
//! A launch scales a MachineDeployment up only by what the launches waiting on it lack: the
//! Machines no NodeClaim claimed yet, plus the replicas the MachineSet has yet to make, are
//! theirs first (upstream counts only the unclaimed Machines, so a launch that saw the
//! replica of another still being made scaled up again). A launch that gives up after
//! scaling up leaves its replica for the next launch on that MachineDeployment, as upstream
//! does, rather than scaling down under a Machine another launch may be claiming.
//!
//! A Machine is claimed by one write that carries the resourceVersion it was read at: the
//! member label (upstream's mark) and the NodeClaim's name. Of two launches after one Machine,
//! the second's write is refused and it claims another.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, ZONE_LABEL};
use karpenter_api::{NodeClaim, NodeClaimStatus};
use karpenter_core::instancetype::{InstanceType, Offering, launch_labels};
use serde_json::{Value, json};

use crate::capi::{
    DELETE_MACHINE_ANNOTATION, MACHINE_ANNOTATION, MEMBER_LABEL, Machine, NODE_CLAIM_ANNOTATION,
    TEMPLATE_HASH_ANNOTATION, TEMPLATE_HASH_VERSION, TEMPLATE_HASH_VERSION_ANNOTATION,
};
use crate::instancetype::{self, Offer};

/// Whether a NodeClaim may claim `machine`: not leaving, not claimed. Where the
/// MachineDeployment's template gives every Machine the member label, only the NodeClaim
/// annotation marks a claim.
pub fn is_claimable(machine: &Machine, template_marks_members: bool) -> bool {
    let member = machine
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(MEMBER_LABEL));
    !machine.is_leaving() && machine.node_claim().is_none() && (template_marks_members || !member)
}

/// Whether `machine` belongs to a NodeClaim (see [`is_claimable`] for the template case).
pub fn is_claimed(machine: &Machine, template_marks_members: bool) -> bool {
    machine.node_claim().is_some() || (!template_marks_members && machine.is_claimed())
}

/// The Machines a launch may claim, oldest first (then by name): a Machine made for an
/// earlier launch that gave up goes before a newer one.
pub fn claimable(machines: &[Machine], template_marks_members: bool) -> Vec<&Machine> {
    let mut out: Vec<&Machine> = machines
        .iter()
        .filter(|m| is_claimable(m, template_marks_members))
        .collect();
    out.sort_by(|a, b| {
        let at = |m: &Machine| m.metadata.creation_timestamp.as_ref().map(|t| t.0);
        at(a).cmp(&at(b)).then_with(|| a.name().cmp(b.name()))
    });
    out
}

/// How many replicas to add so that `waiting + 1` launches each find a Machine: the
/// MachineDeployment has `replicas` desired and `machines` now; the Machines nobody claimed
/// and the replicas not yet made into Machines are spoken for by the `waiting` launches first.
pub fn replicas_to_add(
    replicas: i32,
    machines: &[Machine],
    template_marks_members: bool,
    waiting: usize,
) -> i32 {
    let staying = machines.iter().filter(|m| !m.is_leaving()).count();
    let free = machines
        .iter()
        .filter(|m| is_claimable(m, template_marks_members))
        .count();
    let to_be_made = usize::try_from(replicas)
        .unwrap_or(0)
        .saturating_sub(staying);
    let wanted = waiting + 1;
    i32::try_from(wanted.saturating_sub(free + to_be_made)).unwrap_or(i32::MAX)
}

/// The write that claims `machine` for the NodeClaim `claim`: the member label and the
/// NodeClaim annotation, refused when the Machine changed since it was read.
pub fn claim_patch(machine: &Machine, claim: &str) -> Value {
    json!({"metadata": {
        "resourceVersion": machine.metadata.resource_version,
        "labels": {MEMBER_LABEL: ""},
        "annotations": {NODE_CLAIM_ANNOTATION: claim},
    }})
}

/// The write that marks `machine` to go first when the replicas go down (the value is when,
/// as upstream writes it), refused when the Machine changed since it was read.
pub fn delete_mark_patch(machine: &Machine, now: &str) -> Value {
    json!({"metadata": {
        "resourceVersion": machine.metadata.resource_version,
        "annotations": {DELETE_MACHINE_ANNOTATION: now},
    }})
}

/// The write that takes the mark back, when the replicas could not go down.
pub fn unmark_patch() -> Value {
    json!({"metadata": {"annotations": {DELETE_MACHINE_ANNOTATION: null}}})
}

/// What a deletion does with the NodeClaim's Machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// It is already leaving: the replicas went down for it before; nothing more to do.
    Leaving,
    /// Mark it and take its MachineDeployment down by one.
    ScaleDown,
    /// It cannot be done: the reason.
    Refused(String),
}

/// What deleting the NodeClaim `claim`'s `machine` takes, its MachineDeployment (`md`) at
/// `replicas` (`None`: unset), as upstream decides it.
pub fn deletion(claim: &str, machine: &Machine, md: &str, replicas: Option<i32>) -> Deletion {
    if machine.is_leaving() {
        return Deletion::Leaving;
    }
    match replicas {
        None => Deletion::Refused(format!(
            "unable to delete NodeClaim {claim:?}, MachineDeployment {md:?} has nil replicas"
        )),
        Some(0) => Deletion::Refused(format!(
            "unable to delete NodeClaim {claim:?}, MachineDeployment {md:?} is already at zero replicas"
        )),
        Some(_) => Deletion::ScaleDown,
    }
}

/// The labels a node of `it` launched in `offer` carries for `claim`.
fn labels_for(claim: &NodeClaim, it: &InstanceType, offer: &Offer) -> BTreeMap<String, String> {
    let offering = Offering {
        zone: offer.zone.clone(),
        capacity_type: offer.capacity_type.clone(),
        price: offer.price,
        available: true,
        reservation: None,
    };
    launch_labels(claim, it, &offering, &instancetype::LABELS)
}

/// The NodeClaim as launched on `machine` of `offer`'s MachineDeployment: the node's labels,
/// the Machine annotation (upstream's), the hash of the template the Machine was made from
/// (`template_hash`) for drift, and the providerID, capacity and allocatable.
pub fn launched(
    claim: &NodeClaim,
    it: &InstanceType,
    offer: &Offer,
    machine: &Machine,
    template_hash: &str,
) -> NodeClaim {
    let annotations = BTreeMap::from([
        (MACHINE_ANNOTATION.to_string(), machine.key()),
        (
            TEMPLATE_HASH_ANNOTATION.to_string(),
            template_hash.to_string(),
        ),
        (
            TEMPLATE_HASH_VERSION_ANNOTATION.to_string(),
            TEMPLATE_HASH_VERSION.to_string(),
        ),
    ]);
    NodeClaim {
        metadata: ObjectMeta {
            labels: Some(labels_for(claim, it, offer)),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Default::default(),
        status: Some(NodeClaimStatus {
            provider_id: machine.provider_id().map(str::to_string),
            capacity: it.capacity.to_list(),
            allocatable: it.allocatable().to_list(),
            ..Default::default()
        }),
    }
}

/// A claimed Machine as a NodeClaim, for get and list: named after the NodeClaim that claimed
/// it (so garbage collection knows it before the claim records the providerID), its labels,
/// capacity and allocatable from its MachineDeployment's type when known, its creation and
/// deletion as the Machine's.
pub fn as_node_claim(machine: &Machine, found: Option<(&InstanceType, &Offer)>) -> NodeClaim {
    let mut labels = BTreeMap::new();
    if let Some((it, offer)) = found {
        labels = it.requirements.single_valued_labels();
        labels.insert(INSTANCE_TYPE_LABEL.into(), it.name.clone());
        labels.insert(ZONE_LABEL.into(), offer.zone.clone());
        labels.insert(CAPACITY_TYPE_LABEL.into(), offer.capacity_type.clone());
    }
    NodeClaim {
        metadata: ObjectMeta {
            name: machine.node_claim().map(str::to_string),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                MACHINE_ANNOTATION.to_string(),
                machine.key(),
            )])),
            creation_timestamp: machine.metadata.creation_timestamp.clone(),
            deletion_timestamp: machine
                .metadata
                .deletion_timestamp
                .as_ref()
                .map(|t| Time(t.0)),
            ..Default::default()
        },
        spec: Default::default(),
        status: Some(NodeClaimStatus {
            provider_id: machine.provider_id().map(str::to_string),
            capacity: found
                .map(|(it, _)| it.capacity.to_list())
                .unwrap_or_default(),
            allocatable: found
                .map(|(it, _)| it.allocatable().to_list())
                .unwrap_or_default(),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::capi::DELETE_MACHINE_ANNOTATION;

    /// A Machine of MachineDeployment md-0: `state` is `free`, `ours` (claimed by a NodeClaim),
    /// `upstream` (only the member label), `marked` (delete-machine) or `deleting`.
    fn machine(name: &str, state: &str, created: i64) -> Machine {
        let mut m: Machine = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "7",
                         "creationTimestamp": k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + created).unwrap().to_string(),
                         "labels": {"cluster.x-k8s.io/deployment-name": "md-0"}},
            "spec": {"providerID": format!("test://{name}")},
        }))
        .unwrap();
        let meta = &mut m.metadata;
        match state {
            "free" => {}
            "ours" => {
                meta.labels
                    .as_mut()
                    .unwrap()
                    .insert(MEMBER_LABEL.into(), String::new());
                meta.annotations =
                    Some([(NODE_CLAIM_ANNOTATION.to_string(), "c".to_string())].into());
            }
            "upstream" => {
                meta.labels
                    .as_mut()
                    .unwrap()
                    .insert(MEMBER_LABEL.into(), String::new());
            }
            "marked" => {
                meta.annotations =
                    Some([(DELETE_MACHINE_ANNOTATION.to_string(), "t".to_string())].into());
            }
            "deleting" => {
                meta.deletion_timestamp = meta.creation_timestamp.clone();
            }
            other => panic!("{other}"),
        }
        m
    }

    #[test]
    fn which_machines_a_launch_may_claim() {
        let machines = [
            machine("new", "free", 20),
            machine("old", "free", 10),
            machine("ours", "ours", 0),
            machine("upstream", "upstream", 0),
            machine("marked", "marked", 0),
            machine("deleting", "deleting", 0),
        ];
        let names = |marks: bool| -> Vec<&str> {
            claimable(&machines, marks)
                .iter()
                .map(|m| m.name())
                .collect()
        };
        assert_eq!(names(false), ["old", "new"], "oldest first");
        // The template labels every Machine a member: the label says nothing.
        assert_eq!(names(true), ["upstream", "old", "new"]);
        assert!(is_claimed(&machines[3], false));
        assert!(!is_claimed(&machines[3], true));
        assert!(is_claimed(&machines[2], true));
    }

    #[test]
    fn scale_up_only_by_what_waiting_launches_lack() {
        // (replicas, machines, launches already waiting, replicas to add)
        let cases: [(i32, &[&str], usize, i32); 9] = [
            (0, &[], 0, 1),
            (2, &["ours", "ours"], 0, 1),
            // A free Machine (an earlier launch gave up): take it.
            (3, &["ours", "ours", "free"], 0, 0),
            // A replica the MachineSet has not made yet: wait for it.
            (3, &["ours", "ours"], 0, 0),
            // …unless another launch is already waiting for it.
            (3, &["ours", "ours"], 1, 1),
            (3, &["ours", "ours", "free"], 2, 2),
            // A Machine on its way out counts for nothing; its replica is already gone.
            (2, &["ours", "ours", "marked"], 0, 1),
            (2, &["ours", "ours", "deleting"], 0, 1),
            // Upstream's claimed Machines are taken.
            (1, &["upstream"], 0, 1),
        ];
        for (replicas, states, waiting, want) in cases {
            let machines: Vec<Machine> = states
                .iter()
                .enumerate()
                .map(|(i, s)| machine(&format!("m{i}"), s, i as i64))
                .collect();
            assert_eq!(
                replicas_to_add(replicas, &machines, false, waiting),
                want,
                "{replicas} replicas, {states:?}, {waiting} waiting"
            );
        }
    }

    #[test]
    fn claims_and_marks_carry_the_resource_version() {
        let m = machine("m", "free", 0);
        let p = claim_patch(&m, "default-abcde");
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        assert_eq!(p["metadata"]["labels"][MEMBER_LABEL], "");
        assert_eq!(
            p["metadata"]["annotations"][NODE_CLAIM_ANNOTATION],
            "default-abcde"
        );
        let p = delete_mark_patch(&m, "2026-01-01T00:00:00Z");
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        assert_eq!(
            p["metadata"]["annotations"][DELETE_MACHINE_ANNOTATION],
            "2026-01-01T00:00:00Z"
        );
        assert!(unmark_patch()["metadata"]["annotations"][DELETE_MACHINE_ANNOTATION].is_null());
    }

    /// Upstream's Delete cases: nil replicas, zero replicas, already deleting.
    #[test]
    fn deletions_as_upstream() {
        let m = machine("m-1", "ours", 0);
        assert_eq!(
            deletion("c", &m, "md-1", None),
            Deletion::Refused(
                "unable to delete NodeClaim \"c\", MachineDeployment \"md-1\" has nil replicas"
                    .into()
            )
        );
        assert_eq!(
            deletion("c", &m, "md-1", Some(0)),
            Deletion::Refused(
                "unable to delete NodeClaim \"c\", MachineDeployment \"md-1\" is already at zero replicas"
                    .into()
            )
        );
        assert_eq!(deletion("c", &m, "md-1", Some(2)), Deletion::ScaleDown);
        for state in ["marked", "deleting"] {
            assert_eq!(
                deletion("c", &machine("m", state, 0), "md-1", Some(0)),
                Deletion::Leaving,
                "{state}"
            );
        }
    }
}
