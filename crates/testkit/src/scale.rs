//! The `scale` subresource of custom resources whose CRD declares one (Cluster API's
//! MachineDeployments): an `autoscaling/v1` `Scale` read from and written to the paths the CRD
//! names. A scale update carrying a `resourceVersion` is refused with 409 when the object moved
//! on, as a real API server does, so read-modify-write scaling is safe between writers.

use http::StatusCode;
use serde_json::{Value, json};

use crate::resources::{ResourceType, ScalePaths};
use crate::store::{ApiError, PatchType, Store};

fn no_scale(rt: &ResourceType) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!(
            "the server could not find the requested resource ({}.{} has no scale subresource)",
            rt.plural, rt.group
        ),
    )
}

fn paths(rt: &ResourceType) -> Result<ScalePaths, ApiError> {
    rt.scale().ok_or_else(|| no_scale(rt))
}

/// The `Scale` of an object.
fn to_scale(object: &Value, paths: &ScalePaths) -> Value {
    let meta = &object["metadata"];
    let int = |p: &str| object.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({"replicas": int(&paths.status_replicas)});
    if let Some(selector) = paths
        .label_selector
        .as_deref()
        .and_then(|p| object.pointer(p))
        .and_then(Value::as_str)
    {
        status["selector"] = json!(selector);
    }
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": int(&paths.spec_replicas)},
        "status": status,
    })
}

/// Sets `value` at the JSON pointer `path`, making the objects on the way.
fn set(object: &mut Value, path: &str, value: Value) {
    let mut at = object;
    let mut keys = path.trim_start_matches('/').split('/').peekable();
    while let Some(key) = keys.next() {
        if !at.is_object() {
            *at = json!({});
        }
        let map = at.as_object_mut().expect("made an object above");
        if keys.peek().is_none() {
            map.insert(key.to_string(), value);
            return;
        }
        at = map.entry(key.to_string()).or_insert_with(|| json!({}));
    }
}

/// `GET …/NAME/scale`.
pub(crate) fn get(
    store: &Store,
    rt: &ResourceType,
    ns: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let paths = paths(rt)?;
    Ok(to_scale(&*store.get(rt, ns, name)?, &paths))
}

/// `PUT …/NAME/scale`: the desired replicas of `scale` written to the object, refused with 409
/// when `scale` carries a resourceVersion the object no longer has.
pub(crate) fn update(
    store: &mut Store,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    scale: &Value,
) -> Result<Value, ApiError> {
    let paths = paths(rt)?;
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if replicas < 0 {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!(
                "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
            ),
        ));
    }
    let mut object = (*store.get(rt, ns, name)?).clone();
    // The precondition is the Scale's resourceVersion (the object's); `update` checks it.
    let rv = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|rv| !rv.is_empty());
    match rv {
        Some(rv) => object["metadata"]["resourceVersion"] = json!(rv),
        None => {
            if let Some(m) = object["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
        }
    }
    set(&mut object, &paths.spec_replicas, json!(replicas));
    let updated = store.update(rt, ns, name, object, false)?;
    Ok(to_scale(&updated, &paths))
}

/// `PATCH …/NAME/scale`: the patch applied to the current `Scale`, then written as an update.
pub(crate) fn patch(
    store: &mut Store,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    kind: PatchType,
    body: &Value,
) -> Result<Value, ApiError> {
    let mut scale = get(store, rt, ns, name)?;
    // Without a resourceVersion in the patch, the write is unconditional.
    if let Some(m) = scale["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    match kind {
        PatchType::Merge | PatchType::Apply => json_patch::merge(&mut scale, body),
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(body.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut scale, &ops).map_err(|e| {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    format!("the JSON patch failed: {e}"),
                )
            })?;
        }
    }
    update(store, rt, ns, name, &scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_makes_the_path() {
        let mut v = json!({"spec": {"template": {}}});
        set(&mut v, "/spec/replicas", json!(3));
        set(&mut v, "/status/observed/replicas", json!(1));
        assert_eq!(
            v,
            json!({"spec": {"template": {}, "replicas": 3}, "status": {"observed": {"replicas": 1}}})
        );
    }
}
