//! `capacitybuffers.autoscaling.x-k8s.io` (`v1beta1`, namespaced): the schema upstream ships
//! (SIG Autoscaling's API) — the strategy defaulted, replicas and percentage not negative,
//! the references' names required, and the two CEL rules on the spec.

use serde_json::{Value, json};

use super::{CONDITION_REASON_PATTERN, Crd, conditions, object_root, resource_list, rule};
use crate::capacitybuffer::ACTIVE_PROVISIONING_STRATEGY;

/// `capacitybuffers.autoscaling.x-k8s.io`
pub const CAPACITY_BUFFER: Crd = Crd::new(
    crate::capacitybuffer::GROUP,
    "v1beta1",
    "CapacityBuffer",
    "capacitybuffers",
    capacity_buffer_schema,
)
.namespaced()
.with_categories(&["autoscaling"])
.with_short_names(&["cb"])
.with_printer_columns(capacity_buffer_columns);

fn capacity_buffer_columns() -> Value {
    json!([
        {"description": "The strategy used.", "jsonPath": ".spec.provisioningStrategy", "name": "Strategy", "type": "string"},
        {"description": "The PodTemplate used.", "jsonPath": ".status.podTemplateRef.name", "name": "PodTemplate", "type": "string"},
        {"description": "How many chunks the buffer keeps.", "jsonPath": ".status.replicas", "name": "Replicas", "type": "integer"},
        {"description": "The condition types.", "jsonPath": ".status.conditions[*].type", "name": "ConditionsType", "type": "string"},
        {"description": "The condition statuses.", "jsonPath": ".status.conditions[*].status", "name": "ConditionsStatus", "type": "string"},
        {"description": "The condition reasons.", "jsonPath": ".status.conditions[*].reason", "name": "ConditionsReason", "type": "string"},
        {"description": "The buffer's age.", "jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    ])
}

fn local_object_ref(description: &str) -> Value {
    json!({
        "description": description,
        "properties": {
            "name": {"description": "The referent's name.", "minLength": 1, "type": "string"},
        },
        "required": ["name"],
        "type": "object",
    })
}

fn capacity_buffer_schema() -> Value {
    let spec = json!({
        "description": "What capacity the buffer keeps spare.",
        "properties": {
            "limits": resource_list("The most the buffer's chunks may request in total, by resource; without replicas or percentage, as many chunks as fit within them."),
            "percentage": {
                "description": "How many chunks, as a percentage of the scalableRef's replicas, rounded up (at least 1).",
                "format": "int32",
                "minimum": 0,
                "type": "integer",
            },
            "podTemplateRef": local_object_ref("The PodTemplate in the buffer's namespace that shapes one chunk. Exactly one of podTemplateRef and scalableRef is set."),
            "provisioningStrategy": {
                "default": ACTIVE_PROVISIONING_STRATEGY,
                "description": "How the buffer is used: buffer.x-k8s.io/active-capacity launches capacity for placeholder pods.",
                "type": "string",
            },
            "replicas": {
                "description": "How many chunks. With percentage, the larger of the two; limits cap either.",
                "format": "int32",
                "minimum": 0,
                "type": "integer",
            },
            "scalableRef": {
                "description": "A workload with a scale subresource (Deployment, StatefulSet, ReplicaSet) whose pod template shapes one chunk. Exactly one of podTemplateRef and scalableRef is set.",
                "properties": {
                    "apiGroup": {"description": "The referent's API group; empty for the core group.", "type": "string"},
                    "kind": {"description": "The referent's kind.", "minLength": 1, "type": "string"},
                    "name": {"description": "The referent's name.", "minLength": 1, "type": "string"},
                },
                "required": ["kind", "name"],
                "type": "object",
            },
        },
        "type": "object",
        "x-kubernetes-validations": [
            rule(
                "!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",
                "If podTemplateRef is set, replicas or limits must also be set",
            ),
            rule(
                "!(has(self.podTemplateRef) && has(self.scalableRef))",
                "You must define either PodTemplateRef or ScalableRef, but not both",
            ),
        ],
    });
    let status = json!({
        "description": "What the autoscaler made of the buffer.",
        "properties": {
            "conditions": conditions(CONDITION_REASON_PATTERN, true),
            "podTemplateGeneration": {"description": "The generation of the PodTemplate used.", "format": "int64", "type": "integer"},
            "podTemplateRef": local_object_ref("The PodTemplate used."),
            "provisioningStrategy": {"description": "The strategy observed.", "type": "string"},
            "replicas": {"description": "How many chunks the buffer keeps.", "format": "int32", "type": "integer"},
        },
        "type": "object",
    });
    object_root(
        "Spare capacity kept ready by placeholder pods that the autoscaler schedules like pending pods.",
        spec,
        status,
        true,
    )
}
