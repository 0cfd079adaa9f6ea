//! Wires a `{metadata, spec, status}` struct up as a Kubernetes resource: `apiVersion` and
//! `kind` on the wire, and the `k8s_openapi` traits that let `kube::Api` use it.

/// Declares the resource traits and the wire form for a cluster-scoped custom resource with
/// `metadata`, `spec` (defaulted when absent) and optional `status` fields: the
/// `k8s_openapi` traits `kube::Api` needs, and serde that writes `apiVersion` and `kind` and
/// refuses another kind's. Providers declare their NodeClasses with it.
///
/// ```ignore
/// karpenter_api::cluster_resource!(
///     KWOKNodeClass, KwokNodeClassSpec, KwokNodeClassStatus,
///     group: "karpenter.kwok.sh", version: "v1alpha1", plural: "kwoknodeclasses"
/// );
/// ```
#[macro_export]
macro_rules! cluster_resource {
    ($ty:ident, $spec:ty, $status:ty, group: $group:literal, version: $version:literal, plural: $plural:literal) => {
        $crate::cluster_resource!(@scoped $ty, $spec, $status, $group, $version, $plural, ClusterResourceScope);
    };
    // The same for a namespaced resource (CapacityBuffer).
    ($ty:ident, $spec:ty, $status:ty, group: $group:literal, version: $version:literal, plural: $plural:literal, namespaced) => {
        $crate::cluster_resource!(@scoped $ty, $spec, $status, $group, $version, $plural, NamespaceResourceScope);
    };
    (@scoped $ty:ident, $spec:ty, $status:ty, $group:literal, $version:literal, $plural:literal, $scope:ident) => {
        impl $crate::__private::k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = stringify!($ty);
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $crate::__private::k8s_openapi::$scope;
        }

        impl $crate::__private::k8s_openapi::ListableResource for $ty {
            const LIST_KIND: &'static str = concat!(stringify!($ty), "List");
        }

        impl $crate::__private::k8s_openapi::Metadata for $ty {
            type Ty = $crate::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }

        impl $crate::__private::serde::Serialize for $ty {
            fn serialize<S: $crate::__private::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use $crate::__private::serde::ser::SerializeStruct;
                let fields = if self.status.is_some() { 5 } else { 4 };
                let mut s = serializer.serialize_struct(stringify!($ty), fields)?;
                s.serialize_field("apiVersion", <Self as $crate::__private::k8s_openapi::Resource>::API_VERSION)?;
                s.serialize_field("kind", <Self as $crate::__private::k8s_openapi::Resource>::KIND)?;
                s.serialize_field("metadata", &self.metadata)?;
                s.serialize_field("spec", &self.spec)?;
                if let Some(status) = &self.status {
                    s.serialize_field("status", status)?;
                }
                s.end()
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $ty {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                #[derive($crate::__private::serde::Deserialize)]
                #[serde(crate = "karpenter_api::__private::serde")]
                #[serde(rename_all = "camelCase")]
                struct Wire {
                    api_version: Option<String>,
                    kind: Option<String>,
                    #[serde(default)]
                    metadata: $crate::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                    #[serde(default)]
                    spec: $spec,
                    #[serde(default)]
                    status: Option<$status>,
                }
                let wire = Wire::deserialize(deserializer)?;
                let expected = <Self as $crate::__private::k8s_openapi::Resource>::API_VERSION;
                if let Some(v) = wire.api_version.filter(|v| v != expected) {
                    return Err($crate::__private::serde::de::Error::custom(format!(
                        "apiVersion {v:?} is not {expected:?}"
                    )));
                }
                let kind = <Self as $crate::__private::k8s_openapi::Resource>::KIND;
                if let Some(k) = wire.kind.filter(|k| k != kind) {
                    return Err($crate::__private::serde::de::Error::custom(format!(
                        "kind {k:?} is not {kind:?}"
                    )));
                }
                Ok(Self {
                    metadata: wire.metadata,
                    spec: wire.spec,
                    status: wire.status,
                })
            }
        }
    };
}
