//! The EC2NodeClass schema: upstream's fields, patterns, defaults and CEL rules (with their
//! messages), so a manifest written for upstream Karpenter is judged the same way here.

use serde_json::{Value, json};

use karpenter_api::crd::{
    CONDITION_REASON_PATTERN, conditions, object_root, one_of, rule, status_requirement,
};

const VOLUME_SIZE_PATTERN: &str = r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$";
const AMI_FAMILIES: [&str; 6] = [
    "al2",
    "al2023",
    "bottlerocket",
    "windows2019",
    "windows2022",
    "windows2025",
];

fn string(description: &str) -> Value {
    json!({"description": description, "type": "string"})
}

fn pattern(description: &str, pattern: &str) -> Value {
    json!({"description": description, "pattern": pattern, "type": "string"})
}

fn integer(description: &str, format: &str, min: Option<i64>, max: Option<i64>) -> Value {
    let mut v = json!({"description": description, "format": format, "type": "integer"});
    if let Some(min) = min {
        v["minimum"] = json!(min);
    }
    if let Some(max) = max {
        v["maximum"] = json!(max);
    }
    v
}

fn selector_tags() -> Value {
    json!({
        "additionalProperties": {"type": "string"},
        "description": "Tags the resource must carry; \"*\" matches any value.",
        "maxProperties": 20,
        "type": "object",
        "x-kubernetes-validations": [rule(
            "self.all(k, k != '' && self[k] != '')",
            "empty tag keys or values aren't supported",
        )],
    })
}

fn selector_terms(description: &str, properties: Value, rules: Vec<Value>, min1: bool) -> Value {
    let mut v = json!({
        "description": description,
        "items": {"properties": properties, "type": "object"},
        "maxItems": 30,
        "type": "array",
        "x-kubernetes-validations": rules,
    });
    if min1 {
        v["minItems"] = json!(1);
    }
    v
}

fn ami_selector_terms() -> Value {
    let families = AMI_FAMILIES
        .iter()
        .map(|f| format!("'{f}'"))
        .collect::<Vec<_>>()
        .join(",");
    let family_list = AMI_FAMILIES
        .iter()
        .map(|f| format!("'{f}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let alias = json!({
        "description": "An EKS-optimized AMI as family@version (al2023@latest, bottlerocket@v1.20.0).",
        "maxLength": 30,
        "type": "string",
        "x-kubernetes-validations": [
            rule("self.matches('^[a-zA-Z0-9]+@.+$')",
                "'alias' is improperly formatted, must match the format 'family@version'"),
            rule(&format!("self.split('@')[0] in [{families}]"),
                &format!("family is not supported, must be one of the following: {family_list}")),
            rule("self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true",
                "windows families may only specify version 'latest'"),
        ],
    });
    selector_terms(
        "Which AMIs instances boot; an image matching any term is used.",
        json!({
            "alias": alias,
            "id": pattern("The image id.", "ami-[0-9a-z]+"),
            "name": string("The image name; * is a wildcard."),
            "owner": string("The owning account id, or self or amazon."),
            "ssmParameter": string("An SSM parameter holding the image id."),
            "tags": selector_tags(),
        }),
        vec![
            rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))",
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
            ),
            rule(
                "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
            ),
            rule(
                "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))",
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
            ),
            rule(
                "!(self.exists(x, has(x.alias)) && self.size() != 1)",
                "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
            ),
        ],
        true,
    )
}

fn block_device_mappings() -> Value {
    let ebs = json!({
        "description": "The EBS volume.",
        "properties": {
            "deleteOnTermination": {"description": "Whether the volume goes with the instance.", "type": "boolean"},
            "encrypted": {"description": "Whether the volume is encrypted.", "type": "boolean"},
            "iops": integer("Provisioned IOPS.", "int64", None, None),
            "kmsKeyID": string("The KMS key encrypting the volume."),
            "snapshotID": string("The snapshot the volume starts from."),
            "throughput": integer("Throughput in MiB/s (gp3).", "int64", None, None),
            "volumeInitializationRate": integer("Snapshot restore rate, MiB/s.", "int32", Some(100), Some(300)),
            "volumeSize": pattern("The size: 1-59000Gi, 1-64000G, 1-58Ti or 1-64T.", VOLUME_SIZE_PATTERN),
            "volumeType": one_of("The volume type.", &["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]),
        },
        "type": "object",
        "x-kubernetes-validations": [
            rule("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined"),
            rule("!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')",
                "snapshotID must be set when volumeInitializationRate is set"),
        ],
    });
    json!({
        "description": "Disks attached at launch.",
        "items": {
            "properties": {
                "deviceName": string("The device name (/dev/xvda)."),
                "ebs": ebs,
                "rootVolume": {"description": "Whether this is the root volume; its size is the node's ephemeral storage.", "type": "boolean"},
            },
            "type": "object",
        },
        "maxItems": 50,
        "type": "array",
        "x-kubernetes-validations": [rule(
            "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1",
            "must have only one blockDeviceMappings with rootVolume",
        )],
    })
}

fn metadata_options() -> Value {
    json!({
        "default": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"},
        "description": "The instance metadata service's settings.",
        "properties": {
            "httpEndpoint": {"default": "enabled", "description": "Whether the metadata service is on.", "enum": ["enabled", "disabled"], "type": "string"},
            "httpProtocolIPv6": {"default": "disabled", "description": "Whether it answers on IPv6.", "enum": ["enabled", "disabled"], "type": "string"},
            "httpPutResponseHopLimit": {"default": 1, "description": "How many hops a response may travel; 1 keeps it from pods.", "format": "int64", "maximum": 64, "minimum": 1, "type": "integer"},
            "httpTokens": {"default": "required", "description": "required: IMDSv2 only.", "enum": ["required", "optional"], "type": "string"},
        },
        "type": "object",
    })
}

fn network_interfaces() -> Value {
    json!({
        "description": "Network interfaces attached at launch (EFA).",
        "items": {
            "properties": {
                "deviceIndex": integer("The device index on the card.", "int32", Some(0), None),
                "interfaceType": one_of("interface or efa-only.", &["interface", "efa-only"]),
                "networkCardIndex": integer("The network card.", "int32", Some(0), None),
            },
            "required": ["deviceIndex", "interfaceType", "networkCardIndex"],
            "type": "object",
        },
        "maxItems": 150,
        "type": "array",
        "x-kubernetes-validations": [
            rule("self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')",
                "networkInterfaces must include a primary interface with interfaceType='interface'"),
            rule("self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
                "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"),
        ],
    })
}

fn tags() -> Value {
    let mut rules = vec![rule(
        "self.all(k, k != '')",
        "empty tag keys aren't supported",
    )];
    for (rule_text, tag) in [
        (
            "self.all(k, k !='eks:eks-cluster-name')",
            "eks:eks-cluster-name",
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
            "self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')",
            "karpenter.k8s.aws/ec2nodeclass",
        ),
    ] {
        rules.push(rule(
            rule_text,
            &format!("tag contains a restricted tag matching {tag}"),
        ));
    }
    json!({
        "additionalProperties": {"type": "string"},
        "description": "Tags on instances, volumes and launch templates.",
        "type": "object",
        "x-kubernetes-validations": rules,
    })
}

fn spec_rules() -> Vec<Value> {
    let mut rules = vec![rule(
        "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
        "must specify exactly one of ['role', 'instanceProfile']",
    )];
    for (alias, family, name) in [
        ("al2", "AL2", "AL2"),
        ("al2023", "AL2023", "AL2023"),
        ("bottlerocket", "Bottlerocket", "Bottlerocket"),
        ("windows2019", "Windows2019", "Windows2019"),
        ("windows2022", "Windows2022", "Windows2022"),
        ("windows2025", "Windows2025", "Windows2025"),
    ] {
        rules.push(rule(
            &format!("!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == '{alias}') ? (self.amiFamily == 'Custom' || self.amiFamily == '{family}') : true)"),
            &format!("if set, amiFamily must be '{family}' or 'Custom' when using an {name} alias")
                .replace("an Bottlerocket", "a Bottlerocket")
                .replace("an Windows", "a Windows"),
        ));
    }
    rules.push(rule(
        "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
    ));
    rules
}

fn spec() -> Value {
    let non_empty = |field: &str| rule("self != ''", &format!("{field} cannot be empty"));
    json!({
        "description": "How the AWS provider launches instances.",
        "properties": {
            "amiFamily": one_of("The bootstrap format when no alias says it.",
                &["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"]),
            "amiSelectorTerms": ami_selector_terms(),
            "associatePublicIPAddress": {"description": "Whether instances get a public IPv4 address.", "type": "boolean"},
            "blockDeviceMappings": block_device_mappings(),
            "capacityReservationSelectorTerms": selector_terms(
                "Which capacity reservations may be used.",
                json!({
                    "id": pattern("The reservation id.", "^cr-[0-9a-z]+$"),
                    "instanceMatchCriteria": one_of("open or targeted.", &["open", "targeted"]),
                    "ownerID": pattern("The owning account.", "^[0-9]{12}$"),
                    "tags": selector_tags(),
                }),
                vec![
                    rule("self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))",
                        "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"),
                    rule("!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))",
                        "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"),
                ],
                false,
            ),
            "connectionTracking": {
                "description": "Connection tracking timeouts of the primary interface, in seconds.",
                "properties": {
                    "tcpEstablishedTimeout": integer("Established TCP connections.", "int32", Some(60), Some(432_000)),
                    "udpStreamTimeout": integer("UDP flows seen both ways.", "int32", Some(60), Some(180)),
                    "udpTimeout": integer("UDP flows seen one way.", "int32", Some(30), Some(60)),
                },
                "type": "object",
                "x-kubernetes-validations": [rule(
                    "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
                    "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
                )],
            },
            "context": string("The CreateFleet context."),
            "cpuOptions": {
                "description": "CPU options.",
                "properties": {"nestedVirtualization": one_of("enabled or disabled.", &["enabled", "disabled"])},
                "type": "object",
            },
            "detailedMonitoring": {"description": "One-minute CloudWatch metrics.", "type": "boolean"},
            "instanceProfile": {"description": "An existing instance profile, instead of role.", "type": "string",
                "x-kubernetes-validations": [non_empty("instanceProfile")]},
            "instanceStorePolicy": one_of("RAID0: the instance store holds the kubelet's and runtime's data.", &["RAID0"]),
            "ipPrefixCount": integer("IPv4 prefixes on the primary interface.", "int32", Some(0), None),
            "kubelet": {
                "additionalProperties": {"x-kubernetes-preserve-unknown-fields": true},
                "description": "Kubelet configuration keys passed to the node's bootstrap.",
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
            },
            "metadataOptions": metadata_options(),
            "networkInterfaces": network_interfaces(),
            "placementGroupSelector": {
                "description": "The placement group.",
                "properties": {
                    "id": pattern("The group id.", "^pg-[0-9a-z]+$"),
                    "name": {"description": "The group name.", "minLength": 1, "type": "string"},
                },
                "type": "object",
                "x-kubernetes-validations": [
                    rule("has(self.name) || has(self.id)", "expected at least one, got none, ['name', 'id']"),
                    rule("!(has(self.name) && has(self.id))", "'name' and 'id' are mutually exclusive"),
                ],
            },
            "role": {"description": "The IAM role; an instance profile is managed for it.", "type": "string",
                "x-kubernetes-validations": [non_empty("role")]},
            "securityGroupSelectorTerms": selector_terms(
                "Which security groups instances get.",
                json!({
                    "id": pattern("The group id.", "sg-[0-9a-z]+"),
                    "name": string("The group name."),
                    "tags": selector_tags(),
                }),
                vec![
                    rule("self.size() != 0", "securityGroupSelectorTerms cannot be empty"),
                    rule("self.all(x, has(x.tags) || has(x.id) || has(x.name))",
                        "expected at least one, got none, ['tags', 'id', 'name']"),
                    rule("!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))",
                        "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
                    rule("!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))",
                        "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
                ],
                false,
            ),
            "subnetSelectorTerms": selector_terms(
                "Which subnets instances launch into.",
                json!({
                    "id": pattern("The subnet id.", "subnet-[0-9a-z]+"),
                    "tags": selector_tags(),
                }),
                vec![
                    rule("self.size() != 0", "subnetSelectorTerms cannot be empty"),
                    rule("self.all(x, has(x.tags) || has(x.id))", "expected at least one, got none, ['tags', 'id']"),
                    rule("!self.all(x, has(x.id) && has(x.tags))",
                        "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"),
                ],
                false,
            ),
            "tags": tags(),
            "userData": string("User data merged with what the AMI family generates."),
        },
        "required": ["amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"],
        "type": "object",
        "x-kubernetes-validations": spec_rules(),
    })
}

fn status() -> Value {
    let requirement = status_requirement();
    json!({
        "description": "What the selectors resolved to.",
        "properties": {
            "amis": {
                "description": "AMIs instances may boot.",
                "items": {
                    "properties": {
                        "deprecated": {"type": "boolean"},
                        "id": {"type": "string"},
                        "name": {"type": "string"},
                        "requirements": {"items": requirement, "type": "array"},
                    },
                    "required": ["id", "requirements"],
                    "type": "object",
                },
                "type": "array",
            },
            "capacityReservations": {
                "description": "Capacity reservations that may be used.",
                "items": {
                    "properties": {
                        "availabilityZone": {"type": "string"},
                        "endTime": {"format": "date-time", "type": "string"},
                        "id": {"pattern": "^cr-[0-9a-z]+$", "type": "string"},
                        "instanceMatchCriteria": {"enum": ["open", "targeted"], "type": "string"},
                        "instanceType": {"type": "string"},
                        "interruptible": {"type": "boolean"},
                        "ownerID": {"pattern": "^[0-9]{12}$", "type": "string"},
                        "reservationType": {"default": "default", "enum": ["default", "capacity-block"], "type": "string"},
                        "state": {"default": "active", "enum": ["active", "expiring"], "type": "string"},
                    },
                    "required": ["availabilityZone", "id", "instanceMatchCriteria", "instanceType", "ownerID"],
                    "type": "object",
                },
                "type": "array",
            },
            "conditions": conditions(CONDITION_REASON_PATTERN, true),
            "instanceProfile": {"description": "The instance profile instances get.", "type": "string"},
            "securityGroups": {
                "description": "Security groups instances get.",
                "items": {
                    "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
                    "required": ["id"],
                    "type": "object",
                },
                "type": "array",
            },
            "subnets": {
                "description": "Subnets instances may launch into.",
                "items": {
                    "properties": {"id": {"type": "string"}, "zone": {"type": "string"}, "zoneID": {"type": "string"}},
                    "required": ["id", "zone"],
                    "type": "object",
                },
                "type": "array",
            },
        },
        "type": "object",
    })
}

/// The `openAPIV3Schema` of `karpenter.k8s.aws/v1` EC2NodeClass.
pub(super) fn schema() -> Value {
    object_root(
        "EC2NodeClass is the AWS provider's NodeClass: how instances are launched.",
        spec(),
        status(),
        false,
    )
}
