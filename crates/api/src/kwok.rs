//! `karpenter.kwok.sh/v1alpha1` KWOKNodeClass: the NodeClass of the KWOK provider, which makes
//! fake nodes so karpenter can run on any cluster without a cloud.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

use crate::duration::Duration;

/// The API group of KWOKNodeClass.
pub const GROUP: &str = "karpenter.kwok.sh";

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

crate::resource::cluster_resource!(
    KWOKNodeClass, KwokNodeClassSpec, KwokNodeClassStatus,
    group: "karpenter.kwok.sh", version: "v1alpha1", plural: "kwoknodeclasses"
);
