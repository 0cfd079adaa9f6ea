//! `karpenter.kwok.sh/v1alpha1` KWOKNodeClass: the NodeClass of the KWOK provider, which makes
//! fake nodes so karpenter can run on any cluster without a cloud.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

use karpenter_api::Duration;
use karpenter_api::crd::{
    CONDITION_REASON_PATTERN, Crd, DURATION_PATTERN, conditions, object_root,
};
use serde_json::{Value, json};

/// The API group of KWOKNodeClass.
pub const GROUP: &str = "karpenter.kwok.sh";

/// `kwoknodeclasses.karpenter.kwok.sh`: no printer columns, always Ready.
pub const CRD: Crd = Crd::new(
    GROUP,
    "v1alpha1",
    "KWOKNodeClass",
    "kwoknodeclasses",
    schema,
)
.with_short_names(&["kwoknc", "kwokncs"]);

/// How KWOK nodes behave.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KwokNodeClassSpec {
    /// How long a launched node takes to register, to mimic a real cloud.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_registration_delay: Option<Duration>,
}

/// The observed state of a KWOKNodeClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KwokNodeClassStatus {
    /// Conditions; a KWOKNodeClass is always `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The KWOK provider's NodeClass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KWOKNodeClass {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// How nodes behave.
    pub spec: KwokNodeClassSpec,
    /// The observed state.
    pub status: Option<KwokNodeClassStatus>,
}

karpenter_api::cluster_resource!(
    KWOKNodeClass, KwokNodeClassSpec, KwokNodeClassStatus,
    group: "karpenter.kwok.sh", version: "v1alpha1", plural: "kwoknodeclasses"
);

fn schema() -> Value {
    let spec = json!({
        "description": "How KWOK nodes behave.",
        "properties": {
            "nodeRegistrationDelay": {
                "description": "How long a launched node takes to register, to mimic a cloud.",
                "pattern": DURATION_PATTERN,
                "type": "string",
            },
        },
        "type": "object",
    });
    let mut status_conditions = conditions(CONDITION_REASON_PATTERN, true);
    status_conditions
        .as_object_mut()
        .expect("conditions schema is an object")
        .remove("x-kubernetes-list-map-keys");
    status_conditions
        .as_object_mut()
        .expect("conditions schema is an object")
        .remove("x-kubernetes-list-type");
    let status = json!({
        "default": {"conditions": [{
            "lastTransitionTime": "2024-01-01T01:01:01Z",
            "message": "",
            "reason": "Ready",
            "status": "True",
            "type": "Ready",
        }]},
        "description": "The observed state of the KWOKNodeClass; always Ready.",
        "properties": {"conditions": status_conditions},
        "type": "object",
    });
    object_root(
        "KWOKNodeClass is the NodeClass of the KWOK provider, which makes fake nodes.",
        spec,
        status,
        false,
    )
}
