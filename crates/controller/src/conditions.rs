//! Status conditions as upstream's operatorpkg keeps them: the transition time moves only when
//! the status does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// Whether a condition is `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == "True")
}

/// A condition by type.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Sets a condition; returns whether anything changed.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status == status && c.reason == reason && c.message == message {
            return false;
        }
        if c.status != status {
            c.last_transition_time = Time(now);
        }
        c.status = status.into();
        c.reason = reason.into();
        c.message = message.into();
        return true;
    }
    conditions.push(Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Time(now),
        observed_generation: None,
    });
    true
}

/// operatorpkg's root condition (`Ready`) over its dependents, as it recomputes it after
/// every change: `True` once every dependent is, else `False` ("UnhealthyDependents") when one
/// is `False`, else `Unknown` ("ReconcilingDependents"); the message lists the dependents not
/// `True`, latest transition first. Returns whether anything changed.
pub fn set_root(
    conditions: &mut Vec<Condition>,
    root: &str,
    dependents: &[&str],
    now: Timestamp,
) -> bool {
    let mut unhealthy: Vec<&Condition> = dependents
        .iter()
        .filter_map(|d| get(conditions, d))
        .filter(|c| c.status != "True")
        .collect();
    if unhealthy.is_empty() {
        return set(conditions, root, "True", root, "", now);
    }
    unhealthy.sort_by_key(|c| std::cmp::Reverse(c.last_transition_time.0));
    let status = if unhealthy.iter().any(|c| c.status == "False") {
        "False"
    } else {
        "Unknown"
    };
    let reason = if status == "False" {
        "UnhealthyDependents"
    } else {
        "ReconcilingDependents"
    };
    let message = unhealthy
        .iter()
        .map(|c| format!("{}={}", c.type_, c.status))
        .collect::<Vec<_>>()
        .join(", ");
    set(conditions, root, status, reason, &message, now)
}

/// Removes a condition (operatorpkg's `Clear`, for conditions not always present such as
/// `DisruptionReason`); returns whether it was there.
pub fn clear(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_with_the_status_only() {
        let t0 = Timestamp::from_second(100).unwrap();
        let t1 = Timestamp::from_second(200).unwrap();
        let mut c = Vec::new();
        assert!(set(&mut c, "Launched", "Unknown", "LaunchFailed", "x", t0));
        assert!(set(&mut c, "Launched", "Unknown", "LaunchFailed", "y", t1));
        assert_eq!(
            c[0].last_transition_time.0, t0,
            "same status keeps the time"
        );
        assert!(set(&mut c, "Launched", "True", "Launched", "", t1));
        assert_eq!(c[0].last_transition_time.0, t1);
        assert!(!set(&mut c, "Launched", "True", "Launched", "", t1));
        assert!(is_true(&c, "Launched"));
    }

    #[test]
    fn the_root_condition_follows_its_dependents_as_operatorpkgs() {
        let t = |s| Timestamp::from_second(s).unwrap();
        let deps = ["Launched", "Registered", "Initialized"];
        let mut c = Vec::new();
        set(&mut c, "Launched", "True", "Launched", "", t(10));
        set(&mut c, "Registered", "Unknown", "NodeNotFound", "", t(20));
        set(
            &mut c,
            "Initialized",
            "Unknown",
            "AwaitingReconciliation",
            "",
            t(10),
        );
        assert!(set_root(&mut c, "Ready", &deps, t(20)));
        let ready = get(&c, "Ready").unwrap();
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_str(),
                ready.message.as_str()
            ),
            (
                "Unknown",
                "ReconcilingDependents",
                "Registered=Unknown, Initialized=Unknown"
            )
        );
        set(
            &mut c,
            "Registered",
            "False",
            "MultipleNodesFound",
            "",
            t(30),
        );
        set_root(&mut c, "Ready", &deps, t(30));
        let ready = get(&c, "Ready").unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "UnhealthyDependents")
        );
        set(&mut c, "Registered", "True", "Registered", "", t(40));
        set(&mut c, "Initialized", "True", "Initialized", "", t(40));
        set_root(&mut c, "Ready", &deps, t(40));
        let ready = get(&c, "Ready").unwrap();
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_str(),
                ready.message.as_str()
            ),
            ("True", "Ready", "")
        );
        assert!(!set_root(&mut c, "Ready", &deps, t(50)), "nothing changed");
        assert!(clear(&mut c, "Ready"));
        assert!(!clear(&mut c, "Ready"));
    }
}
