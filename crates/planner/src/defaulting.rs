//! What the API server sets on objects when they are created, applied to hand-written
//! manifests and scenarios before anything decides, so the simulator and `plan` read them as
//! the controller would read them from a cluster. A real dump has been through the API server
//! already; defaulting it again changes nothing. (A claim that names no StorageClass is given
//! the cluster's default where volumes are read, in `karpenter_core::state::volumes`, for
//! every caller alike.)

use serde_json::{Map, Value};

/// Applies the API server's defaults that change what an object asks the scheduler for: each
/// container's (and init container's) requests default to its limits, resource by resource,
/// and a pod-level limit (`spec.resources`, Kubernetes 1.32+) becomes the pod-level request
/// where no container requests that resource. Pods and the pod templates of Deployments,
/// ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs and PodTemplates are defaulted;
/// other objects are left alone.
pub fn object(object: &mut Value) {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let spec = match kind {
        "Pod" => object.get_mut("spec"),
        "PodTemplate" => object.pointer_mut("/template/spec"),
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" => {
            object.pointer_mut("/spec/template/spec")
        }
        "CronJob" => object.pointer_mut("/spec/jobTemplate/spec/template/spec"),
        _ => None,
    };
    if let Some(Value::Object(spec)) = spec {
        pod_spec(spec);
    }
}

fn pod_spec(spec: &mut Map<String, Value>) {
    let mut requested = std::collections::BTreeSet::new();
    for list in ["containers", "initContainers"] {
        let Some(Value::Array(containers)) = spec.get_mut(list) else {
            continue;
        };
        for container in containers {
            if let Some(Value::Object(resources)) = container.get_mut("resources") {
                requests_from_limits(resources, |_| true);
                if let Some(Value::Object(requests)) = resources.get("requests") {
                    requested.extend(requests.keys().cloned());
                }
            }
        }
    }
    if let Some(Value::Object(resources)) = spec.get_mut("resources") {
        // With containers that request a resource, the API server sets the pod-level request to
        // what they add up to: what the scheduler counts with no pod-level request anyway.
        requests_from_limits(resources, |name| !requested.contains(name));
    }
}

/// Copies each limit `copy` admits into the requests, where no request is given.
fn requests_from_limits(resources: &mut Map<String, Value>, copy: impl Fn(&str) -> bool) {
    let Some(Value::Object(limits)) = resources.get("limits") else {
        return;
    };
    let limits = limits.clone();
    let requests = resources
        .entry("requests")
        .or_insert_with(|| Value::Object(Map::new()));
    if requests.is_null() {
        *requests = Value::Object(Map::new());
    }
    let Value::Object(requests) = requests else {
        return;
    };
    for (name, quantity) in limits {
        if copy(&name) && !requests.contains_key(&name) {
            requests.insert(name, quantity);
        }
    }
    if requests.is_empty() {
        resources.remove("requests");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The API server's own defaulting, as `kubectl create` then `kubectl get -o yaml` shows it.
    #[test]
    fn requests_default_to_limits() {
        // (what is written, what the API server stores)
        let cases = [
            (
                json!({"limits": {"nvidia.com/gpu": "1"}}),
                json!({"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}),
            ),
            (
                json!({"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "500m"}}),
                json!({"limits": {"cpu": "2", "memory": "1Gi"},
                    "requests": {"cpu": "500m", "memory": "1Gi"}}),
            ),
            (
                json!({"requests": {"cpu": "1"}}),
                json!({"requests": {"cpu": "1"}}),
            ),
            (
                json!({"limits": {"cpu": "1"}, "requests": null}),
                json!({"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}),
            ),
        ];
        for (written, stored) in cases {
            let mut pod = json!({"kind": "Pod", "spec": {
                "containers": [{"name": "a", "resources": written.clone()}],
                "initContainers": [{"name": "i", "resources": written.clone()}]}});
            object(&mut pod);
            assert_eq!(
                pod["spec"]["containers"][0]["resources"], stored,
                "{written}"
            );
            assert_eq!(
                pod["spec"]["initContainers"][0]["resources"], stored,
                "{written}"
            );
        }
    }

    #[test]
    fn workload_templates_are_defaulted_and_other_kinds_left_alone() {
        let spec = json!({"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]});
        for (kind, at) in [
            ("Deployment", "/spec/template/spec"),
            ("StatefulSet", "/spec/template/spec"),
            ("DaemonSet", "/spec/template/spec"),
            ("Job", "/spec/template/spec"),
            ("CronJob", "/spec/jobTemplate/spec/template/spec"),
            ("PodTemplate", "/template/spec"),
        ] {
            let mut o = json!({"kind": kind});
            let mut slot = &mut o;
            for part in at.trim_start_matches('/').split('/') {
                slot = &mut slot[part];
            }
            *slot = spec.clone();
            object(&mut o);
            let requests = o.pointer(&format!("{at}/containers/0/resources/requests/cpu"));
            assert_eq!(requests, Some(&json!("1")), "{kind}");
        }
        let mut other = json!({"kind": "ConfigMap", "spec": spec.clone()});
        object(&mut other);
        assert_eq!(other["spec"], spec);
    }

    /// Pod-level limits (Kubernetes 1.32+) become pod-level requests only for the resources no
    /// container requests.
    #[test]
    fn pod_level_requests_default_where_no_container_requests() {
        let mut pod = json!({"kind": "Pod", "spec": {
            "resources": {"limits": {"cpu": "4", "memory": "8Gi"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}});
        object(&mut pod);
        assert_eq!(
            pod["spec"]["resources"]["requests"],
            json!({"memory": "8Gi"})
        );
    }
}
