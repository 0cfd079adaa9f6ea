//! Taints and tolerations with Kubernetes' matching rules.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether `toleration` tolerates `taint`: the effect matches (or is empty), the key matches
/// (an empty key with `Exists` matches every key), and the value is equal (`Equal`, the
/// default) or anything (`Exists`).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect_ok = toleration
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key = toleration.key.as_deref().unwrap_or_default();
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    let key_ok = if key.is_empty() {
        operator == "Exists"
    } else {
        key == taint.key
    };
    let value_ok = match operator {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    };
    effect_ok && key_ok && value_ok
}

/// The first taint none of the tolerations tolerate. Every effect counts, `PreferNoSchedule`
/// included: karpenter only ignores it once a pod's preferences are relaxed.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// `key=value:effect`, as Kubernetes prints a taint.
pub fn describe(taint: &Taint) -> String {
    match taint.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={}:{}", taint.key, v, taint.effect),
        _ => format!("{}:{}", taint.key, taint.effect),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration {
            key: opt(key),
            operator: opt(operator),
            value: opt(value),
            effect: opt(effect),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_table() {
        let t = taint("dedicated", "gpu", "NoSchedule");
        let cases = [
            (toleration("dedicated", "Equal", "gpu", "NoSchedule"), true),
            (toleration("dedicated", "", "gpu", "NoSchedule"), true),
            (toleration("dedicated", "Equal", "gpu", ""), true),
            (toleration("dedicated", "Exists", "", ""), true),
            (toleration("", "Exists", "", ""), true),
            (toleration("", "Exists", "", "NoSchedule"), true),
            (toleration("", "Exists", "", "NoExecute"), false),
            (toleration("", "Equal", "gpu", ""), false),
            (toleration("dedicated", "Equal", "cpu", "NoSchedule"), false),
            (toleration("dedicated", "Equal", "gpu", "NoExecute"), false),
            (toleration("other", "Exists", "", ""), false),
        ];
        for (tol, want) in cases {
            assert_eq!(tolerates(&tol, &t), want, "{tol:?}");
        }
        let empty_value = taint("key-only", "", "NoExecute");
        assert!(tolerates(
            &toleration("key-only", "Equal", "", "NoExecute"),
            &empty_value
        ));
        let taints = [t.clone(), taint("soft", "", "PreferNoSchedule")];
        let tols = [toleration("dedicated", "Exists", "", "")];
        assert_eq!(
            first_untolerated(&taints, &tols).map(describe),
            Some("soft:PreferNoSchedule".to_string())
        );
        assert_eq!(describe(&t), "dedicated=gpu:NoSchedule");
    }
}
