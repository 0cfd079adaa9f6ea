//! Relaxing a pod's soft constraints one at a time, in upstream's order, when it fits nowhere
//! as it is.

use k8s_openapi::api::core::v1::{Pod, Toleration};

/// Removes the next soft constraint of `pod` and says which, or returns `None` when nothing
/// is left to relax. The order: an extra required node-affinity term (they are OR-ed), the
/// heaviest preferred pod affinity, the heaviest preferred pod anti-affinity, the heaviest
/// preferred node affinity, a `ScheduleAnyway` spread constraint, and finally tolerating
/// `PreferNoSchedule` taints (only when some NodePool has one).
pub fn relax(pod: &mut Pod, tolerate_prefer_no_schedule: bool) -> Option<&'static str> {
    let spec = pod.spec.as_mut()?;
    if let Some(required) = spec
        .affinity
        .as_mut()
        .and_then(|a| a.node_affinity.as_mut())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_mut()
        })
        && required.node_selector_terms.len() > 1
    {
        required.node_selector_terms.remove(0);
        return Some("required node affinity term");
    }
    if let Some(affinity) = spec.affinity.as_mut() {
        if let Some(terms) = affinity.pod_affinity.as_mut().and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_mut()
        }) && let Some(i) = heaviest(terms.iter().map(|t| t.weight))
        {
            terms.remove(i);
            return Some("preferred pod affinity");
        }
        if let Some(terms) = affinity.pod_anti_affinity.as_mut().and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_mut()
        }) && let Some(i) = heaviest(terms.iter().map(|t| t.weight))
        {
            terms.remove(i);
            return Some("preferred pod anti-affinity");
        }
        if let Some(terms) = affinity.node_affinity.as_mut().and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_mut()
        }) && let Some(i) = heaviest(terms.iter().map(|t| t.weight))
        {
            terms.remove(i);
            return Some("preferred node affinity");
        }
    }
    if let Some(constraints) = spec.topology_spread_constraints.as_mut()
        && let Some(i) = constraints
            .iter()
            .position(|c| c.when_unsatisfiable == "ScheduleAnyway")
    {
        constraints.remove(i);
        return Some("ScheduleAnyway topology spread constraint");
    }
    if tolerate_prefer_no_schedule {
        let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
        let toleration = Toleration {
            operator: Some("Exists".into()),
            effect: Some("PreferNoSchedule".into()),
            ..Default::default()
        };
        if !tolerations.contains(&toleration) {
            tolerations.push(toleration);
            return Some("PreferNoSchedule taints");
        }
    }
    None
}

/// The index of the first term with the largest weight.
fn heaviest(weights: impl Iterator<Item = i32>) -> Option<usize> {
    let mut best: Option<(usize, i32)> = None;
    for (i, w) in weights.enumerate() {
        if best.is_none_or(|(_, bw)| w > bw) {
            best = Some((i, w));
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorTerm, PodAffinityTerm, PodAntiAffinity,
        PodSpec, PreferredSchedulingTerm, TopologySpreadConstraint, WeightedPodAffinityTerm,
    };

    #[test]
    fn relaxes_in_upstreams_order() {
        let weighted = |w| WeightedPodAffinityTerm {
            weight: w,
            pod_affinity_term: PodAffinityTerm {
                topology_key: format!("k{w}"),
                ..Default::default()
            },
        };
        let mut pod = Pod {
            spec: Some(PodSpec {
                affinity: Some(Affinity {
                    node_affinity: Some(NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                            node_selector_terms: vec![
                                NodeSelectorTerm::default(),
                                NodeSelectorTerm::default(),
                            ],
                        }),
                        preferred_during_scheduling_ignored_during_execution: Some(vec![
                            PreferredSchedulingTerm {
                                weight: 1,
                                preference: NodeSelectorTerm::default(),
                            },
                        ]),
                    }),
                    pod_anti_affinity: Some(PodAntiAffinity {
                        preferred_during_scheduling_ignored_during_execution: Some(vec![
                            weighted(1),
                            weighted(10),
                        ]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                topology_spread_constraints: Some(vec![
                    TopologySpreadConstraint {
                        when_unsatisfiable: "DoNotSchedule".into(),
                        ..Default::default()
                    },
                    TopologySpreadConstraint {
                        when_unsatisfiable: "ScheduleAnyway".into(),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut steps = Vec::new();
        while let Some(step) = relax(&mut pod, true) {
            steps.push(step);
        }
        assert_eq!(
            steps,
            [
                "required node affinity term",
                "preferred pod anti-affinity",
                "preferred pod anti-affinity",
                "preferred node affinity",
                "ScheduleAnyway topology spread constraint",
                "PreferNoSchedule taints"
            ]
        );
        let spec = pod.spec.unwrap();
        assert_eq!(
            spec.topology_spread_constraints.unwrap().len(),
            1,
            "DoNotSchedule stays"
        );
        assert_eq!(
            spec.affinity
                .unwrap()
                .node_affinity
                .unwrap()
                .required_during_scheduling_ignored_during_execution
                .unwrap()
                .node_selector_terms
                .len(),
            1,
            "the last required term stays"
        );
    }

    #[test]
    fn heaviest_first() {
        assert_eq!(heaviest([1, 10, 10, 5].into_iter()), Some(1));
        assert_eq!(heaviest(std::iter::empty()), None);
    }
}
