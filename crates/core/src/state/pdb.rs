//! PodDisruptionBudget arithmetic as kube-controller-manager's disruption controller does it:
//! which pods a budget selects and how many of them may go now. Shared by whatever stands in for
//! the API server's eviction subresource (the simulator, the test kit) and by disruption.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::scheduling::selector;

/// How many more pods a budget lets go when `healthy` of its `expected` pods are running.
/// Percentages round up, as kube-controller-manager rounds them.
pub fn disruptions_allowed(pdb: &PodDisruptionBudget, expected: usize, healthy: usize) -> i32 {
    let spec = pdb.spec.clone().unwrap_or_default();
    let scaled = |v: &IntOrString| -> i64 {
        match v {
            IntOrString::Int(i) => i64::from(*i),
            IntOrString::String(s) => {
                let percent: i64 = s.trim_end_matches('%').parse().unwrap_or(100);
                (percent * expected as i64 + 99) / 100
            }
        }
    };
    let desired_healthy = match (&spec.min_available, &spec.max_unavailable) {
        (Some(min), _) => scaled(min),
        (None, Some(max)) => expected as i64 - scaled(max),
        (None, None) => expected as i64,
    };
    (healthy as i64 - desired_healthy).clamp(0, i64::from(i32::MAX)) as i32
}

/// Whether a budget covers a pod: same namespace and its selector matches the pod's labels. A
/// budget without a selector covers nothing.
pub fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    let namespace = |ns: &Option<String>| ns.as_deref().unwrap_or("default").to_string();
    namespace(&pdb.metadata.namespace) == namespace(&pod.metadata.namespace)
        && pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .is_some_and(|sel| {
                selector::matches(
                    sel,
                    pod.metadata.labels.as_ref().unwrap_or(&Default::default()),
                )
            })
}

/// Whether a budget allows no voluntary disruption at all, whatever the pods' health:
/// `maxUnavailable: 0` (or `0%`) or `minAvailable: 100%` — upstream's fully blocking PDB.
pub fn fully_blocking(pdb: &PodDisruptionBudget) -> bool {
    let spec = pdb.spec.as_ref();
    let zero = |v: &IntOrString| match v {
        IntOrString::Int(i) => *i == 0,
        IntOrString::String(s) => s.trim() == "0%" || s.trim() == "0",
    };
    let all = |v: &IntOrString| match v {
        IntOrString::Int(_) => false,
        IntOrString::String(s) => s.trim() == "100%",
    };
    spec.and_then(|s| s.max_unavailable.as_ref())
        .is_some_and(zero)
        || spec.and_then(|s| s.min_available.as_ref()).is_some_and(all)
}

/// Whether `pod` will not leave its node until something forces it (upstream's
/// `IsCurrentlyReschedulable`): a fully blocking budget ([`fully_blocking`]) selects it, or
/// more than one budget does (the Eviction API refuses those). A budget at zero allowed
/// disruptions only for now (mid-drain, say) does not hold it, nor one whose
/// `unhealthyPodEvictionPolicy: AlwaysAllow` lets a pod that is not Ready go.
pub fn holds<'a>(pod: &Pod, pdbs: impl IntoIterator<Item = &'a PodDisruptionBudget>) -> bool {
    let matching: Vec<&PodDisruptionBudget> =
        pdbs.into_iter().filter(|b| selects(b, pod)).collect();
    match matching[..] {
        [] => false,
        [budget] => !evicts_unhealthy(budget, pod) && fully_blocking(budget),
        _ => true,
    }
}

/// Whether the budget lets `pod` be evicted whatever its arithmetic: its
/// `unhealthyPodEvictionPolicy` is `AlwaysAllow` and the pod reports `Ready=False`.
fn evicts_unhealthy(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    let always = pdb
        .spec
        .as_ref()
        .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
        == Some("AlwaysAllow");
    always
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "False"))
}

/// Whether `pod` would leave its node now if the node went (upstream's
/// `IsCurrentlyReschedulable`): reschedulable, no active `do-not-disrupt`, no fully blocking
/// budget holding it. The pods of deleting nodes that provisioning places and those
/// disruption moves are these.
pub fn can_leave_now<'a>(
    pod: &Pod,
    pdbs: impl IntoIterator<Item = &'a PodDisruptionBudget>,
    now: k8s_openapi::jiff::Timestamp,
) -> bool {
    use super::pods;
    pods::is_reschedulable(pod) && !pods::do_not_disrupt(pod, now) && !holds(pod, pdbs)
}

/// Why the Eviction API would refuse `pod` now, if it would: more than one budget selects it,
/// or the one that does allows no disruption and does not evict it as unhealthy (upstream's
/// `CanEvictPods`, which the candidates' check and the pods of deleting nodes share).
pub fn blocks_eviction<'a>(
    pod: &Pod,
    pdbs: impl IntoIterator<Item = &'a PodDisruptionBudget>,
) -> Option<String> {
    let matching: Vec<&PodDisruptionBudget> =
        pdbs.into_iter().filter(|b| selects(b, pod)).collect();
    if matching.len() > 1 {
        return Some(
            "selected by more than one PodDisruptionBudget; eviction does not support multiple PDBs"
                .into(),
        );
    }
    let budget = matching.first()?;
    if evicts_unhealthy(budget, pod) {
        return None;
    }
    budget
        .status
        .as_ref()
        .is_none_or(|s| s.disruptions_allowed <= 0)
        .then(|| {
            format!(
                "pdb prevents pod evictions (PodDisruptionBudget=[{}/{}])",
                budget.metadata.namespace.as_deref().unwrap_or("default"),
                budget.metadata.name.as_deref().unwrap_or("?")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn pdb(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            spec: Some(PodDisruptionBudgetSpec {
                min_available: min,
                max_unavailable: max,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn pdb_disruptions_allowed() {
        use IntOrString::{Int, String as Pct};
        let cases = [
            (Some(Int(2)), None, 3, 3, 1),
            (Some(Int(3)), None, 3, 3, 0),
            (Some(Int(3)), None, 3, 2, 0),
            (None, Some(Int(1)), 4, 4, 1),
            (None, Some(Int(1)), 4, 3, 0),
            (Some(Pct("50%".into())), None, 5, 5, 2), // 50% of 5 rounds up to 3
            (None, Some(Pct("50%".into())), 5, 5, 3), // 50% of 5 rounds up to 3 unavailable
            (None, Some(Pct("0%".into())), 5, 5, 0),
            (None, None, 2, 2, 0),
        ];
        for (min, max, expected, healthy, want) in cases {
            assert_eq!(
                disruptions_allowed(&pdb(min.clone(), max.clone()), expected, healthy),
                want,
                "min={min:?} max={max:?} expected={expected} healthy={healthy}"
            );
        }
    }

    #[test]
    fn a_budget_selects_pods_of_its_namespace_only() {
        let mut budget = pdb(Some(IntOrString::Int(1)), None);
        budget.metadata.namespace = Some("web".into());
        budget.spec.as_mut().unwrap().selector = Some(LabelSelector {
            match_labels: Some([("app".to_string(), "a".to_string())].into()),
            ..Default::default()
        });
        let mut pod = Pod::default();
        pod.metadata.labels = Some([("app".to_string(), "a".to_string())].into());
        assert!(!selects(&budget, &pod), "pod in default, budget in web");
        pod.metadata.namespace = Some("web".into());
        assert!(selects(&budget, &pod));
        budget.spec.as_mut().unwrap().selector = None;
        assert!(!selects(&budget, &pod), "no selector selects nothing");
    }

    /// Upstream's `isEvictable`, both ways it is asked: whether a budget holds a pod for good
    /// (fully blocking, or several budgets) and whether eviction is refused now (no disruption
    /// allowed) — and `unhealthyPodEvictionPolicy: AlwaysAllow` letting a pod that is not Ready go.
    #[test]
    fn budgets_that_hold_and_block_pods() {
        use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
        let budget = |name: &str, max_unavailable: i32, allowed: i32, always_allow: bool| {
            let mut b = pdb(None, Some(IntOrString::Int(max_unavailable)));
            b.metadata.name = Some(name.into());
            let spec = b.spec.as_mut().unwrap();
            spec.selector = Some(LabelSelector {
                match_labels: Some([("app".to_string(), "a".to_string())].into()),
                ..Default::default()
            });
            spec.unhealthy_pod_eviction_policy = always_allow.then(|| "AlwaysAllow".into());
            b.status = Some(k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus {
                disruptions_allowed: allowed,
                ..Default::default()
            });
            b
        };
        let pod = |ready: Option<&str>| {
            let mut p = Pod::default();
            p.metadata.labels = Some([("app".to_string(), "a".to_string())].into());
            p.status = ready.map(|status| PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: status.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            p
        };
        // (case, budgets, pod's Ready, holds, blocks eviction now)
        let cases = [
            ("no budget", vec![], Some("True"), false, false),
            (
                "maxUnavailable 0",
                vec![budget("b", 0, 0, false)],
                Some("True"),
                true,
                true,
            ),
            (
                "no disruption allowed now",
                vec![budget("b", 1, 0, false)],
                Some("True"),
                false,
                true,
            ),
            (
                "a disruption allowed",
                vec![budget("b", 1, 1, false)],
                Some("True"),
                false,
                false,
            ),
            (
                "AlwaysAllow, pod not ready",
                vec![budget("b", 0, 0, true)],
                Some("False"),
                false,
                false,
            ),
            (
                "AlwaysAllow, pod ready",
                vec![budget("b", 0, 0, true)],
                Some("True"),
                true,
                true,
            ),
            (
                "AlwaysAllow, readiness unknown",
                vec![budget("b", 0, 0, true)],
                None,
                true,
                true,
            ),
            (
                "IfHealthyBudget, pod not ready",
                vec![budget("b", 0, 0, false)],
                Some("False"),
                true,
                true,
            ),
            (
                "two budgets",
                vec![budget("b", 1, 1, false), budget("c", 1, 1, true)],
                Some("False"),
                true,
                true,
            ),
        ];
        for (case, budgets, ready, held, blocked) in cases {
            let p = pod(ready);
            assert_eq!(holds(&p, &budgets), held, "{case}: holds");
            assert_eq!(
                blocks_eviction(&p, &budgets).is_some(),
                blocked,
                "{case}: blocks eviction"
            );
        }
    }
}
