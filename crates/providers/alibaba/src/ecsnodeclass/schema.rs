//! The ECSNodeClass schema: upstream's fields, enums, patterns, bounds, defaults and CEL rules
//! (with their messages), as its generated CRD has them, so a manifest written for the
//! cloudpilot-ai provider is judged the same way here.

use serde_json::{Value, json};

use karpenter_api::crd::{
    CONDITION_REASON_PATTERN, conditions, object_root, rule, status_requirement,
};

use super::{
    DISK_CATEGORIES, EVICTION_SIGNALS, ImageFamily, RESERVED_RESOURCES, VSwitchSelectionPolicy,
    defaults,
};

/// A disk size: 1-59000Gi, 1-64000G, 1-58Ti or 1-64T (upstream's pattern, alternations and all).
const VOLUME_SIZE_PATTERN: &str = r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$";
/// ECS's rule for instance passwords: 8 to 30 letters, digits and these symbols.
const PASSWORD_PATTERN: &str = r#"^[A-Za-z\d~!@#$%^&*()_+\-=\[\]{}|\\:;"'<>,.?/]{8,30}$"#;
/// ECS's rule for key pair names.
const KEY_PAIR_NAME_PATTERN: &str = r"^[A-Za-z][A-Za-z\d._:-]{1,127}$";

fn string(description: &str) -> Value {
    json!({"description": description, "type": "string"})
}

fn pattern(description: &str, pattern: &str) -> Value {
    json!({"description": description, "pattern": pattern, "type": "string"})
}

fn int32(description: &str) -> Value {
    json!({"description": description, "format": "int32", "type": "integer"})
}

fn string_list(description: &str) -> Value {
    json!({"description": description, "items": {"type": "string"}, "type": "array"})
}

fn string_map(description: &str, rules: Vec<Value>) -> Value {
    json!({
        "additionalProperties": {"type": "string"},
        "description": description,
        "type": "object",
        "x-kubernetes-validations": rules,
    })
}

/// `'a','b'`, as a CEL list's items and upstream's messages spell them.
fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("'{i}'"))
        .collect::<Vec<_>>()
        .join(",")
}

fn selector_tags() -> Value {
    let mut tags = string_map(
        "Tags the resource must carry; \"*\" matches any value.",
        vec![rule(
            "self.all(k, k != '')",
            "empty tag keys aren't supported",
        )],
    );
    tags["maxProperties"] = json!(20);
    tags
}

fn selector_terms(description: &str, properties: Value, rules: Vec<Value>) -> Value {
    json!({
        "description": description,
        "items": {"properties": properties, "type": "object"},
        "maxItems": 30,
        "type": "array",
        "x-kubernetes-validations": rules,
    })
}

fn v_switch_selector_terms() -> Value {
    selector_terms(
        "Which vSwitches instances launch into; a vSwitch matching any term is used.",
        json!({
            "id": pattern("The vSwitch id.", "vsw-[0-9a-z]+"),
            "tags": selector_tags(),
        }),
        vec![
            rule("self.size() != 0", "vSwitchSelectorTerms cannot be empty"),
            rule(
                "self.all(x, has(x.tags) || has(x.id))",
                "expected at least one, got none, ['tags', 'id']",
            ),
            rule(
                "!self.all(x, has(x.id) && has(x.tags))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in vSwitchSelectorTerms",
            ),
        ],
    )
}

fn security_group_selector_terms() -> Value {
    selector_terms(
        "Which security groups instances get; a group matching any term is used.",
        json!({
            "id": pattern("The security group id.", "sg-[0-9a-z]+"),
            "name": string("The group's name field (not a Name tag)."),
            "tags": selector_tags(),
        }),
        vec![
            rule(
                "self.size() != 0",
                "securityGroupSelectorTerms cannot be empty",
            ),
            rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.name))",
                "expected at least one, got none, ['tags', 'id', 'name']",
            ),
            rule(
                "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms",
            ),
            rule(
                "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))",
                "'name' is mutually exclusive, cannot be set with a combination of other fields in securityGroupSelectorTerms",
            ),
        ],
    )
}

fn image_selector_terms() -> Value {
    let families: Vec<&str> = ImageFamily::ALL.iter().map(|f| f.as_str()).collect();
    // Upstream's CRD requires a bare family (its Go marker still reads `family@version`; the
    // CRD is what the API server enforces, and what the examples are written for).
    let alias = json!({
        "description": "An ACK image family whose latest image is used: AlibabaCloudLinux3 or ContainerOS.",
        "maxLength": 30,
        "type": "string",
        "x-kubernetes-validations": [
            rule("self.matches('^[a-zA-Z0-9]+$')",
                "'alias' is improperly formatted, must match the format 'family'"),
            rule(&format!("self.find('^[^@]+') in [{}]", families.iter().map(|f| format!("'{f}'")).collect::<Vec<_>>().join(", ")),
                &format!("family is not supported, must be one of the following: '{}'", families.join(","))),
        ],
    });
    let mut terms = selector_terms(
        "Which images instances boot; an image matching any term is used.",
        json!({
            "alias": alias,
            "id": string("The image id."),
        }),
        vec![
            rule(
                "self.all(x, has(x.id) || has(x.alias))",
                "expected at least one, got none, ['id', 'alias']",
            ),
            rule(
                "!self.exists(x, has(x.id) && (has(x.alias)))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in imageSelectorTerms",
            ),
            rule(
                "!self.exists(x, has(x.alias) && (has(x.id)))",
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in imageSelectorTerms",
            ),
            rule(
                "!(self.exists(x, has(x.alias)) && self.size() != 1)",
                "'alias' is mutually exclusive, cannot be set with a combination of other imageSelectorTerms",
            ),
        ],
    );
    terms["minItems"] = json!(1);
    terms
}

fn kubelet_configuration() -> Value {
    let percent = |description: &str| {
        let mut v = int32(description);
        v["minimum"] = json!(0);
        v["maximum"] = json!(100);
        v
    };
    let non_negative = |description: &str| {
        let mut v = int32(description);
        v["minimum"] = json!(0);
        v
    };
    let reserved = |field: &str, description: &str| {
        let keys = RESERVED_RESOURCES
            .iter()
            .map(|r| format!("x=='{r}'"))
            .collect::<Vec<_>>()
            .join(" || ");
        string_map(
            description,
            vec![
                rule(
                    &format!("self.all(x, {keys})"),
                    &format!(
                        "valid keys for {field} are [{}]",
                        quoted(&RESERVED_RESOURCES)
                    ),
                ),
                rule(
                    "self.all(x, !self[x].startsWith('-'))",
                    &format!("{field} value cannot be a negative resource quantity"),
                ),
            ],
        )
    };
    let signals = quoted(&EVICTION_SIGNALS);
    let eviction = |field: &str, description: &str| {
        string_map(
            description,
            vec![rule(
                &format!("self.all(x, x in [{signals}])"),
                &format!("valid keys for {field} are [{signals}]"),
            )],
        )
    };
    json!({
        "description": "Kubelet settings of the nodes, under the kubelet's own names.",
        "properties": {
            "clusterDNS": string_list("Cluster DNS server addresses."),
            "cpuCFSQuota": {"description": "Whether CPU limits are enforced with CFS quota.", "type": "boolean"},
            "evictionHard": eviction("evictionHard", "Hard eviction thresholds by signal."),
            "evictionMaxPodGracePeriod": int32("The longest grace period, in seconds, a pod evicted for a soft threshold gets."),
            "evictionSoft": eviction("evictionSoft", "Soft eviction thresholds by signal; each needs a grace period."),
            "evictionSoftGracePeriod": eviction("evictionSoftGracePeriod", "How long each soft threshold may be crossed before pods are evicted (Go durations)."),
            "imageGCHighThresholdPercent": percent("Disk usage above which images are always garbage collected; above imageGCLowThresholdPercent."),
            "imageGCLowThresholdPercent": percent("Disk usage below which images are never garbage collected."),
            "kubeReserved": reserved("kubeReserved", "Resources kept for Kubernetes' daemons."),
            "maxPods": non_negative("The most pods a node runs."),
            "podsPerCore": non_negative("Pods per CPU core; never more than maxPods."),
            "systemReserved": reserved("systemReserved", "Resources kept for the operating system."),
        },
        "type": "object",
        "x-kubernetes-validations": [
            rule(
                "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            ),
            rule(
                "has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true",
                "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
            ),
            rule(
                "has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true",
                "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
            ),
        ],
    })
}

fn system_disk() -> Value {
    json!({
        "description": "The system disk.",
        "properties": {
            // Upstream's Go marks the categories as an enum, but the marker never reached its
            // CRD; any string is admitted there, so here too.
            "categories": {
                "default": DISK_CATEGORIES,
                "description": "The disk categories a launch may use, tried in order: cloud, cloud_efficiency, cloud_ssd, cloud_essd, cloud_auto, cloud_essd_entry.",
                "items": {"type": "string"},
                "type": "array",
            },
            "performanceLevel": {
                "default": defaults::PERFORMANCE_LEVEL,
                "description": "The ESSD performance level.",
                "enum": ["PL0", "PL1", "PL2", "PL3"],
                "type": "string",
            },
            "size": {
                "description": "The size in GiB: 20 to 500 for cloud, to 2048 for the other categories.",
                "format": "int32",
                "type": "integer",
                "x-kubernetes-validations": [rule("self >= 20", "size invalid")],
            },
            "volumeSize": pattern("The size as a quantity (1-59000Gi, 1-64000G, 1-58Ti or 1-64T); wins over size.", VOLUME_SIZE_PATTERN),
        },
        "type": "object",
    })
}

fn data_disks() -> Value {
    json!({
        "description": "Data disks attached at launch.",
        "items": {
            "properties": {
                "device": string("The device (mount point) of the disk."),
                "volumeSize": {
                    "default": defaults::DATA_DISK_VOLUME_SIZE,
                    "description": "The size as a quantity (1-59000Gi, 1-64000G, 1-58Ti or 1-64T).",
                    "pattern": VOLUME_SIZE_PATTERN,
                    "type": "string",
                },
            },
            "type": "object",
        },
        "type": "array",
    })
}

fn tags() -> Value {
    let mut rules = vec![rule(
        "self.all(k, k != '')",
        "empty tag keys aren't supported",
    )];
    // Tags karpenter and ACK set themselves, spelled as upstream's rules spell them.
    for (rule_text, tag) in [
        (
            "self.all(k, k !='ecs:ecs-cluster-name')",
            "ecs:ecs-cluster-name",
        ),
        (
            "self.all(k, !k.startsWith('kubernetes.io/cluster') )",
            "kubernetes.io/cluster/",
        ),
        (
            "self.all(k, k != 'karpenter.sh/nodepool')",
            "karpenter.sh/nodepool",
        ),
        (
            "self.all(k, k !='karpenter.sh/nodeclaim')",
            "karpenter.sh/nodeclaim",
        ),
        (
            "self.all(k, k !='karpenter.k8s.alibabacloud/ecsnodeclass')",
            "karpenter.k8s.alibabacloud/ecsnodeclass",
        ),
    ] {
        rules.push(rule(
            rule_text,
            &format!("tag contains a restricted tag matching {tag}"),
        ));
    }
    string_map("Tags on the instances.", rules)
}

fn spec() -> Value {
    let policies: Vec<&str> = VSwitchSelectionPolicy::ALL
        .iter()
        .map(|p| p.as_str())
        .collect();
    json!({
        "description": "How the Alibaba Cloud provider launches ECS instances.",
        "properties": {
            "dataDiskCategories": string_list("The categories the data disks may use, tried in order."),
            "dataDisks": data_disks(),
            "formatDataDisk": {
                "default": false,
                "description": "Whether ACK formats the last data disk (ext4) and mounts it for containerd and the kubelet when it is not yet formatted.",
                "type": "boolean",
            },
            "imageSelectorTerms": image_selector_terms(),
            "keyPairName": pattern("The key pair for root logins.", KEY_PAIR_NAME_PATTERN),
            "kubeletConfiguration": kubelet_configuration(),
            "password": pattern("The root password.", PASSWORD_PATTERN),
            "passwordInherit": {
                "default": false,
                "description": "Whether the image's preset password is kept.",
                "type": "boolean",
            },
            "resourceGroupId": pattern("The resource group instances go to.", "rg-[0-9a-z]+"),
            "securityGroupSelectorTerms": security_group_selector_terms(),
            "systemDisk": system_disk(),
            "tags": tags(),
            "userData": string("User data run on the nodes, merged with the bootstrap."),
            "vSwitchSelectionPolicy": {
                "default": defaults::V_SWITCH_SELECTION_POLICY,
                "description": "How launches pick among the vSwitches: cheapest zone, or balanced across zones.",
                "enum": policies,
                "type": "string",
            },
            "vSwitchSelectorTerms": v_switch_selector_terms(),
        },
        "required": ["imageSelectorTerms", "securityGroupSelectorTerms", "vSwitchSelectorTerms"],
        "type": "object",
        "x-kubernetes-validations": [rule(
            "!(has(self.passwordInherit) ? (self.passwordInherit ? has(self.password) : false) : false)",
            "password cannot be set when passwordInherit is true",
        )],
    })
}

fn status() -> Value {
    let requirement = status_requirement();
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
            "images": {
                "description": "Images instances may boot.",
                "items": {
                    "properties": {
                        "id": string("The image id."),
                        "name": string("The image name."),
                        "requirements": {"description": "The instance types it boots.", "items": requirement, "type": "array"},
                    },
                    "required": ["id", "requirements"],
                    "type": "object",
                },
                "type": "array",
            },
            "securityGroups": {
                "description": "Security groups instances get.",
                "items": {
                    "properties": {"id": string("The group id."), "name": string("The group's name.")},
                    "required": ["id"],
                    "type": "object",
                },
                "type": "array",
            },
            "vSwitches": {
                "description": "vSwitches instances may launch into.",
                "items": {
                    "properties": {"id": string("The vSwitch id."), "zoneID": string("The zone it is in.")},
                    "required": ["id", "zoneID"],
                    "type": "object",
                },
                "type": "array",
            },
        },
        "type": "object",
    })
}

/// The `openAPIV3Schema` of ECSNodeClass.
pub(super) fn schema() -> Value {
    object_root(
        "ECSNodeClass is the Alibaba Cloud provider's NodeClass: how ECS instances are launched.",
        spec(),
        status(),
        false,
    )
}
