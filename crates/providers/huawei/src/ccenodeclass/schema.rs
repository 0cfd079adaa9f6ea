//! The CCENodeClass schema: upstream's fields, required lists, enums, patterns, bounds and CEL
//! rules (with their messages), as its generated CRD has them, so a manifest written for
//! huaweicloud-samples' provider is judged the same way here. The CRD declares no defaults.

use serde_json::{Value, json};

use karpenter_api::crd::{CONDITION_REASON_PATTERN, conditions, object_root, rule};

use super::{
    MAX_MAX_PODS, MIN_KUBERNETES_VOLUME_SIZE_GIB, MIN_MAX_PODS, MIN_ROOT_VOLUME_SIZE_GIB,
    MIN_USER_VOLUME_SIZE_GIB, RESERVED_RESOURCES, RUNTIMES,
};

/// A VPC subnet's id: the UUID of its neutron network.
const SUBNET_ID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

fn string(description: &str) -> Value {
    json!({"description": description, "type": "string"})
}

fn non_empty(description: &str) -> Value {
    json!({"description": description, "minLength": 1, "type": "string"})
}

fn int32(description: &str) -> Value {
    json!({"description": description, "format": "int32", "type": "integer"})
}

fn subnet_selector_terms() -> Value {
    json!({
        "description": "Which VPC subnets nodes go into; a subnet matching any term is used. Huawei Cloud subnets span the region's zones.",
        "items": {
            "description": "A subnet, by id or by name; both set must both match.",
            "properties": {
                "id": {
                    "description": "The subnet's id (its network id, a UUID).",
                    "pattern": SUBNET_ID_PATTERN,
                    "type": "string",
                },
                "name": non_empty("The subnet's name."),
            },
            "type": "object",
        },
        "maxItems": 30,
        "type": "array",
        "x-kubernetes-validations": [
            rule("self.size() != 0", "subnetSelectorTerms cannot be empty"),
            rule(
                "self.all(x, has(x.name) || has(x.id))",
                "expected at least one, got none, ['name', 'id']",
            ),
        ],
    })
}

fn kubelet() -> Value {
    let keys = RESERVED_RESOURCES
        .iter()
        .map(|r| format!("x=='{r}'"))
        .collect::<Vec<_>>()
        .join(" || ");
    let listed = RESERVED_RESOURCES
        .iter()
        .map(|r| format!("'{r}'"))
        .collect::<Vec<_>>()
        .join(",");
    let reserved = |field: &str, description: &str| {
        json!({
            "additionalProperties": {"type": "string"},
            "description": description,
            "type": "object",
            "x-kubernetes-validations": [
                rule(
                    &format!("self.all(x, {keys})"),
                    &format!("valid keys for {field} are [{listed}]"),
                ),
                rule(
                    "self.all(x, !self[x].startsWith('-'))",
                    &format!("{field} value cannot be a negative resource quantity"),
                ),
            ],
        })
    };
    json!({
        "description": "Kubelet settings, as CCE's CreateNode takes them in extendParam.",
        "properties": {
            "kubeReserved": reserved(
                "kubeReserved",
                "Resources kept for Kubernetes' daemons: cpu (whole millicores), memory (whole Mi), ephemeral-storage (whole Gi), pid.",
            ),
            "maxPods": {
                "description": "The most pods a node runs (extendParam.maxPods).",
                "format": "int32",
                "maximum": MAX_MAX_PODS,
                "minimum": MIN_MAX_PODS,
                "type": "integer",
            },
            "systemReserved": reserved(
                "systemReserved",
                "Resources kept for the operating system, under the same keys as kubeReserved.",
            ),
        },
        "type": "object",
    })
}

fn block_device(description: &str) -> Value {
    json!({
        "description": description,
        "properties": {
            "iops": int32("Provisioned IOPS; GPSSD2 and ESSD2 disks need it."),
            "throughput": int32("Provisioned throughput, MiB/s; GPSSD2 disks need it."),
            // Every disk's floor (the smallest user disk); the root and k8s disks' larger
            // floors are the mappings' rules.
            "volumeSize": {
                "description": "The size, GiB.",
                "format": "int32",
                "minimum": MIN_USER_VOLUME_SIZE_GIB,
                "type": "integer",
            },
            "volumeType": non_empty("The EVS disk type: SSD, GPSSD, ESSD, SAS, GPSSD2, ESSD2, …"),
        },
        "required": ["volumeSize", "volumeType"],
        "type": "object",
    })
}

fn block_device_mappings() -> Value {
    let users = json!({
        "description": "More data disks, left to the user.",
        "items": block_device("An EVS disk."),
        "type": "array",
    });
    json!({
        "description": "The node's disks.",
        "properties": {
            "k8s": block_device("The data disk CCE gives the container runtime and the kubelet; 100 GiB of the root disk's type when unset."),
            "root": block_device("The system disk."),
            "users": users,
        },
        "required": ["root"],
        "type": "object",
        "x-kubernetes-validations": [
            rule(
                &format!("self.root.volumeSize >= {MIN_ROOT_VOLUME_SIZE_GIB}"),
                &format!("blockDeviceMappings.root.volumeSize must be at least {MIN_ROOT_VOLUME_SIZE_GIB}Gi"),
            ),
            rule(
                &format!("!has(self.k8s) || self.k8s.volumeSize >= {MIN_KUBERNETES_VOLUME_SIZE_GIB}"),
                &format!("blockDeviceMappings.k8s.volumeSize must be at least {MIN_KUBERNETES_VOLUME_SIZE_GIB}Gi when specified"),
            ),
            rule(
                &format!("!has(self.users) || self.users.all(x, x.volumeSize >= {MIN_USER_VOLUME_SIZE_GIB})"),
                &format!("blockDeviceMappings.users volumeSize must be at least {MIN_USER_VOLUME_SIZE_GIB}Gi"),
            ),
        ],
    })
}

fn login() -> Value {
    json!({
        "description": "How one logs in to the nodes: a password or a key pair.",
        "properties": {
            "sshKey": non_empty("The name of an existing key pair."),
            "userPassword": {
                "description": "A password login.",
                "properties": {
                    "password": non_empty("The password, salted and encrypted as CCE's API takes it."),
                    "username": {
                        "description": "The user; root, the only one, when unset.",
                        "enum": ["root"],
                        "type": "string",
                    },
                },
                "required": ["password"],
                "type": "object",
            },
        },
        "type": "object",
        "x-kubernetes-validations": [rule(
            "(has(self.userPassword) && !has(self.sshKey)) || (!has(self.userPassword) && has(self.sshKey))",
            "exactly one of login.userPassword or login.sshKey must be set",
        )],
    })
}

fn spec() -> Value {
    json!({
        "description": "How the Huawei Cloud provider has CCE create nodes.",
        "properties": {
            "blockDeviceMappings": block_device_mappings(),
            "ecsGroupId": string("The ECS server group nodes join."),
            "imsSelector": {
                "description": "The nodes' operating system.",
                "properties": {
                    "imsFamily": non_empty("The OS as CCE names it: Huawei Cloud EulerOS 2.0, Ubuntu 22.04, …"),
                },
                "required": ["imsFamily"],
                "type": "object",
            },
            "kubelet": kubelet(),
            "login": login(),
            "runtimeConfiguration": {
                "description": "The container runtime.",
                "properties": {
                    "type": {
                        "description": "docker or containerd; CCE's default (containerd) when unset.",
                        "enum": RUNTIMES,
                        "type": "string",
                    },
                },
                "type": "object",
            },
            "subnetSelectorTerms": subnet_selector_terms(),
        },
        "required": ["blockDeviceMappings", "imsSelector", "login", "subnetSelectorTerms"],
        "type": "object",
    })
}

fn status() -> Value {
    // Upstream's conditions are a plain list, not a map keyed by type.
    let mut conditions = conditions(CONDITION_REASON_PATTERN, true);
    if let Some(fields) = conditions.as_object_mut() {
        fields.remove("x-kubernetes-list-map-keys");
        fields.remove("x-kubernetes-list-type");
    }
    json!({
        "description": "What the selectors resolved to.",
        "properties": {
            "conditions": conditions,
            "subnets": {
                "description": "Subnets nodes may go into.",
                "items": {
                    "properties": {"id": string("The subnet's id.")},
                    "required": ["id"],
                    "type": "object",
                },
                "type": "array",
            },
        },
        "type": "object",
    })
}

/// The `openAPIV3Schema` of CCENodeClass.
pub(super) fn schema() -> Value {
    object_root(
        "CCENodeClass is the Huawei Cloud provider's NodeClass: how CCE creates nodes.",
        spec(),
        status(),
        true,
    )
}
