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
}
