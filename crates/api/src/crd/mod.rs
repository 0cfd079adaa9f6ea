//! The CustomResourceDefinitions, built from one description of each schema so that
//! `karpenter-rs crds` and `karpenter-rs validate` can never disagree. Field names, defaults,
//! patterns, enums and CEL rules are upstream's, so a manifest the upstream CRDs accept is
//! accepted here and one they reject is rejected.

use serde_json::{Value, json};

use crate::validation::Problem;

mod capacity_buffer;
mod label_domains;
mod node_overlay;

pub use capacity_buffer::CAPACITY_BUFFER;
pub use label_domains::RestrictedLabelDomain;
pub use node_overlay::{NODE_OVERLAY, PRICE_ADJUSTMENT_PATTERN, PRICE_PATTERN};

/// `"720h"`, `"1h30m"` or `"Never"`.
pub const DURATION_OR_NEVER_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";
/// `"30s"`, `"1h30m"`.
pub const DURATION_PATTERN: &str = r"^([0-9]+(s|m|h))+$";
/// A budget window: hours and/or minutes (`"8h"`, `"30m"`, `"2h20m"`).
pub const BUDGET_DURATION_PATTERN: &str = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$";
/// A node count or a percentage up to 100.
pub const BUDGET_NODES_PATTERN: &str = r"^((100|[0-9]{1,2})%|[0-9]+)$";
/// Five cron fields or a descriptor.
pub const CRON_PATTERN: &str =
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$";
/// A Kubernetes resource quantity.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// A qualified name, as label and taint keys are.
pub const QUALIFIED_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
/// A label value.
pub const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
/// A condition type.
pub const CONDITION_TYPE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";
/// A condition reason (required).
pub const CONDITION_REASON_PATTERN: &str = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$";
/// A condition reason that may be empty.
pub const OPTIONAL_CONDITION_REASON_PATTERN: &str = r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$";

/// An API group and kind, as a NodeClass reference names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKind {
    /// The API group (`karpenter.k8s.aws`).
    pub group: &'static str,
    /// The kind (`NodePool`, a provider's NodeClass).
    pub kind: &'static str,
}

impl GroupKind {
    /// A group and kind.
    pub const fn new(group: &'static str, kind: &'static str) -> Self {
        Self { group, kind }
    }
}

/// The checks karpenter runs on an object the API server accepted, appending what fails
/// (see [`crate::validation::typed`] to run them on the typed object).
pub type RuntimeChecks = fn(&Value, &mut Vec<Problem>);

/// A version a [`Crd`] serves besides the one it stores (an older version kept for manifests
/// written against it).
///
/// It has the stored version's schema, printer columns and subresources: the CRDs declare no
/// conversion webhook, so the API server converts between versions by rewriting `apiVersion`
/// alone, which is only lossless when every version has the same schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServedVersion {
    name: &'static str,
    deprecated: bool,
    deprecation_warning: Option<&'static str>,
}

impl ServedVersion {
    /// A served, not deprecated version.
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            deprecated: false,
            deprecation_warning: None,
        }
    }

    /// Deprecated: the API server answers requests for it with its default deprecation warning.
    pub const fn deprecated(mut self) -> Self {
        self.deprecated = true;
        self
    }

    /// Deprecated, with `warning` as the warning the API server returns for requests to it.
    pub const fn deprecated_with_warning(mut self, warning: &'static str) -> Self {
        self.deprecated = true;
        self.deprecation_warning = Some(warning);
        self
    }

    /// The version name (`v1alpha2`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the version is deprecated.
    pub fn is_deprecated(&self) -> bool {
        self.deprecated
    }

    /// The warning the API server returns for requests to the version, if not its default.
    pub fn deprecation_warning(&self) -> Option<&'static str> {
        self.deprecation_warning
    }
}

/// `str` equality usable in `const fn` (`PartialEq` for `str` is not `const`).
const fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A CustomResourceDefinition this project ships: the NodePool and NodeClaim here, and each
/// provider's NodeClasses from its crate. Built in `const` context, so a provider declares its
/// CRDs as constants and the binary's registry lists them.
#[derive(Clone, Copy, Debug)]
pub struct Crd {
    group: &'static str,
    /// The storage version, always served.
    version: &'static str,
    /// Served besides `version`, never stored; so exactly one version is stored.
    also_served: &'static [ServedVersion],
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    schema: fn() -> Value,
    printer_columns: Option<fn() -> Value>,
    scale: Option<(&'static str, &'static str)>,
    runtime_checks: Option<RuntimeChecks>,
    /// Namespaced rather than cluster-scoped.
    namespaced: bool,
    /// The `kubectl get <category>` groups it belongs to.
    categories: &'static [&'static str],
    /// The providers' restricted label domains, added to the schema by `restrict_labels`.
    label_domains: &'static [RestrictedLabelDomain],
    /// Adds the rules that restrict `label_domains` to the schema (karpenter's own CRDs).
    restrict_labels: Option<fn(&mut Value, &[RestrictedLabelDomain])>,
}

impl PartialEq for Crd {
    fn eq(&self, other: &Self) -> bool {
        (self.group, self.version, self.kind) == (other.group, other.version, other.kind)
    }
}

impl Eq for Crd {}

/// `nodepools.karpenter.sh`
pub const NODE_POOL: Crd = Crd::new(
    crate::labels::GROUP,
    "v1",
    "NodePool",
    "nodepools",
    node_pool_schema,
)
.with_printer_columns(node_pool_columns)
.with_scale(".spec.replicas", ".status.nodes")
.with_runtime_checks(node_pool_checks)
.with_label_restriction(label_domains::restrict_node_pool);

/// `nodeclaims.karpenter.sh`
pub const NODE_CLAIM: Crd = Crd::new(
    crate::labels::GROUP,
    "v1",
    "NodeClaim",
    "nodeclaims",
    node_claim_schema,
)
.with_printer_columns(node_claim_columns)
.with_runtime_checks(node_claim_checks)
.with_label_restriction(label_domains::restrict_node_claim);

/// karpenter's own CRDs, before any provider's, without any provider's restricted label
/// domains (see [`core_with_label_domains`]).
pub const CORE: [Crd; 4] = [NODE_POOL, NODE_CLAIM, NODE_OVERLAY, CAPACITY_BUFFER];

/// karpenter's own CRDs with the providers' restricted label domains: what a binary that
/// ships those providers applies and validates against.
///
/// The CEL rules of a CRD are compiled once per process for each set of domains.
pub const fn core_with_label_domains(domains: &'static [RestrictedLabelDomain]) -> [Crd; 4] {
    [
        NODE_POOL.with_label_domains(domains),
        NODE_CLAIM.with_label_domains(domains),
        NODE_OVERLAY.with_label_domains(domains),
        CAPACITY_BUFFER.with_label_domains(domains),
    ]
}

/// The CRD in `crds` that serves `kind` at `api_version` (its stored version or another it
/// serves), if there is one.
pub fn find<'a>(crds: &'a [Crd], api_version: &str, kind: &str) -> Option<&'a Crd> {
    let (group, version) = api_version.split_once('/')?;
    crds.iter()
        .find(|crd| crd.kind == kind && crd.group == group && crd.serves(version))
}

impl Crd {
    /// A cluster-scoped CRD with a status subresource, served and stored at `version`.
    pub const fn new(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
        schema: fn() -> Value,
    ) -> Self {
        Self {
            group,
            version,
            also_served: &[],
            kind,
            plural,
            short_names: &[],
            schema,
            printer_columns: None,
            scale: None,
            runtime_checks: None,
            namespaced: false,
            categories: &["karpenter"],
            label_domains: &[],
            restrict_labels: None,
        }
    }

    /// Restricting `domains` to their well-known keys, as each provider's upstream patches
    /// karpenter's CRDs: the NodePool's requirements and labels, the NodeClaim's
    /// requirements and the NodeOverlay's requirements get one CEL rule per domain. Other
    /// CRDs are unchanged. Replaces any domains given before.
    ///
    /// ```
    /// use karpenter_api::crd::{NODE_POOL, RestrictedLabelDomain};
    /// const DOMAINS: &[RestrictedLabelDomain] =
    ///     &[RestrictedLabelDomain::new("example.com", &["example.com/size"])];
    /// let schema = NODE_POOL.with_label_domains(DOMAINS).schema().to_string();
    /// assert!(schema.contains(r#"label domain \"example.com\" is restricted"#));
    /// ```
    pub const fn with_label_domains(mut self, domains: &'static [RestrictedLabelDomain]) -> Self {
        self.label_domains = domains;
        self
    }

    /// The restricted label domains given by [`Crd::with_label_domains`].
    pub fn label_domains(&self) -> &'static [RestrictedLabelDomain] {
        self.label_domains
    }

    const fn with_label_restriction(
        mut self,
        patch: fn(&mut Value, &[RestrictedLabelDomain]),
    ) -> Self {
        self.restrict_labels = Some(patch);
        self
    }

    /// Namespaced instead of cluster-scoped.
    pub const fn namespaced(mut self) -> Self {
        self.namespaced = true;
        self
    }

    /// In these categories instead of `karpenter`.
    pub const fn with_categories(mut self, categories: &'static [&'static str]) -> Self {
        self.categories = categories;
        self
    }

    /// Whether objects of this kind live in a namespace.
    pub fn is_namespaced(&self) -> bool {
        self.namespaced
    }

    /// Also serving `versions`, not stored, with the stored version's schema (see
    /// [`ServedVersion`]). Replaces any versions given before.
    ///
    /// # Panics
    ///
    /// If a name is empty, is the stored version's or is listed twice: the API server would
    /// refuse such a CRD. In a `const` this fails the build instead.
    ///
    /// ```
    /// use karpenter_api::crd::{Crd, ServedVersion};
    /// # fn schema() -> serde_json::Value { serde_json::json!({"type": "object"}) }
    /// const WIDGET_CLASS: Crd = Crd::new("example.com", "v1", "WidgetClass", "widgetclasses", schema)
    ///     .with_served_versions(&[ServedVersion::new("v1beta1").deprecated()]);
    /// assert!(WIDGET_CLASS.serves("v1beta1"));
    /// ```
    ///
    /// ```compile_fail
    /// use karpenter_api::crd::{Crd, ServedVersion};
    /// # fn schema() -> serde_json::Value { serde_json::json!({"type": "object"}) }
    /// // v1 is already the stored version.
    /// const WIDGET_CLASS: Crd = Crd::new("example.com", "v1", "WidgetClass", "widgetclasses", schema)
    ///     .with_served_versions(&[ServedVersion::new("v1")]);
    /// # let _ = WIDGET_CLASS;
    /// ```
    pub const fn with_served_versions(mut self, versions: &'static [ServedVersion]) -> Self {
        let mut i = 0;
        while i < versions.len() {
            let name = versions[i].name;
            assert!(!name.is_empty(), "a served version needs a name");
            assert!(
                !same_name(name, self.version),
                "a served version repeats the stored version"
            );
            let mut j = 0;
            while j < i {
                assert!(
                    !same_name(name, versions[j].name),
                    "a served version is listed twice"
                );
                j += 1;
            }
            i += 1;
        }
        self.also_served = versions;
        self
    }

    /// With `kubectl` short names.
    pub const fn with_short_names(mut self, names: &'static [&'static str]) -> Self {
        self.short_names = names;
        self
    }

    /// With `additionalPrinterColumns` (the columns `kubectl get` prints).
    pub const fn with_printer_columns(mut self, columns: fn() -> Value) -> Self {
        self.printer_columns = Some(columns);
        self
    }

    /// With a scale subresource reading these paths.
    pub const fn with_scale(
        mut self,
        spec_replicas: &'static str,
        status_replicas: &'static str,
    ) -> Self {
        self.scale = Some((spec_replicas, status_replicas));
        self
    }

    /// With karpenter's runtime checks, run after the schema and CEL rules pass.
    pub const fn with_runtime_checks(mut self, checks: RuntimeChecks) -> Self {
        self.runtime_checks = Some(checks);
        self
    }

    /// The kind.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The API group.
    pub fn group(&self) -> &'static str {
        self.group
    }

    /// The group and kind.
    pub fn group_kind(&self) -> GroupKind {
        GroupKind::new(self.group, self.kind)
    }

    /// The stored version: the one karpenter reads and writes.
    pub fn version(&self) -> &'static str {
        self.version
    }

    /// The versions served besides the stored one.
    pub fn served_versions(&self) -> &'static [ServedVersion] {
        self.also_served
    }

    /// Whether `version` is served: the stored version or one of [`Crd::served_versions`].
    pub fn serves(&self, version: &str) -> bool {
        version == self.version || self.also_served.iter().any(|v| v.name == version)
    }

    /// `group/version` of the stored version.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// The plural resource name.
    pub fn plural(&self) -> &'static str {
        self.plural
    }

    /// The file name upstream gives this CRD (`karpenter.sh_nodepools.yaml`).
    pub fn file_name(&self) -> String {
        format!("{}_{}.yaml", self.group, self.plural)
    }

    /// The `openAPIV3Schema`, the same for every served version.
    pub fn schema(&self) -> Value {
        let mut schema = (self.schema)();
        if let Some(restrict) = self.restrict_labels
            && !self.label_domains.is_empty()
        {
            restrict(&mut schema, self.label_domains);
        }
        schema
    }

    /// Runs karpenter's runtime checks on an object the schema accepted, as karpenter would
    /// read it: at the stored version whichever served version it was written at.
    pub fn runtime_checks(&self, object: &Value, problems: &mut Vec<Problem>) {
        let Some(checks) = self.runtime_checks else {
            return;
        };
        // Without a conversion webhook the API server stores an object written at an older
        // version by rewriting its apiVersion, so that is all that changes for karpenter.
        let older = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.split_once('/'))
            .is_some_and(|(group, version)| {
                group == self.group && version != self.version && self.serves(version)
            });
        if older {
            let mut stored = object.clone();
            stored["apiVersion"] = json!(self.api_version());
            checks(&stored, problems);
        } else {
            checks(object, problems);
        }
    }

    /// The whole CustomResourceDefinition object.
    pub fn definition(&self) -> Value {
        let kind = self.kind;
        let singular = kind.to_lowercase();
        let mut names = json!({
            "categories": self.categories,
            "kind": kind,
            "listKind": format!("{kind}List"),
            "plural": self.plural,
            "singular": singular,
        });
        if !self.short_names.is_empty() {
            names["shortNames"] = json!(self.short_names);
        }
        let columns = self.printer_columns.map(|columns| columns());
        let schema = json!({ "openAPIV3Schema": self.schema() });
        let subresources = match self.scale {
            Some((spec, status)) => json!({
                "scale": {"specReplicasPath": spec, "statusReplicasPath": status},
                "status": {},
            }),
            None => json!({ "status": {} }),
        };
        let stored = ServedVersion::new(self.version);
        let mut served: Vec<&ServedVersion> =
            std::iter::once(&stored).chain(self.also_served).collect();
        // By name, as controller-gen lists them, so a multi-version CRD reads like upstream's.
        served.sort_by_key(|v| v.name);
        let versions: Vec<Value> = served
            .into_iter()
            .map(|v| {
                let mut version = json!({
                    "name": v.name,
                    "served": true,
                    "storage": v.name == self.version,
                });
                if v.deprecated {
                    version["deprecated"] = json!(true);
                }
                if let Some(warning) = v.deprecation_warning {
                    version["deprecationWarning"] = json!(warning);
                }
                if let Some(columns) = &columns {
                    version["additionalPrinterColumns"] = columns.clone();
                }
                version["schema"] = schema.clone();
                version["subresources"] = subresources.clone();
                version
            })
            .collect();
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": format!("{}.{}", self.plural, self.group) },
            "spec": {
                "group": self.group,
                "names": names,
                "scope": if self.namespaced { "Namespaced" } else { "Cluster" },
                "versions": versions,
            },
        })
    }
}

/// The `Ready` printer column every NodeClass and NodePool shows.
pub const READY_COLUMN_PATH: &str = r#".status.conditions[?(@.type=="Ready")].status"#;

fn node_pool_columns() -> Value {
    json!([
        {"jsonPath": ".spec.template.spec.nodeClassRef.name", "name": "NodeClass", "type": "string"},
        {"jsonPath": ".status.nodes", "name": "Nodes", "type": "string"},
        {"jsonPath": READY_COLUMN_PATH, "name": "Ready", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
        {"jsonPath": ".spec.weight", "name": "Weight", "priority": 1, "type": "integer"},
        {"jsonPath": ".status.resources.cpu", "name": "CPU", "priority": 1, "type": "string"},
        {"jsonPath": ".status.resources.memory", "name": "Memory", "priority": 1, "type": "string"},
    ])
}

fn node_claim_columns() -> Value {
    json!([
        {"jsonPath": r".metadata.labels.node\.kubernetes\.io/instance-type", "name": "Type", "type": "string"},
        {"jsonPath": r".metadata.labels.karpenter\.sh/capacity-type", "name": "Capacity", "type": "string"},
        {"jsonPath": r".metadata.labels.topology\.kubernetes\.io/zone", "name": "Zone", "type": "string"},
        {"jsonPath": ".status.nodeName", "name": "Node", "type": "string"},
        {"jsonPath": READY_COLUMN_PATH, "name": "Ready", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
        {"jsonPath": ".status.imageID", "name": "ImageID", "priority": 1, "type": "string"},
        {"jsonPath": ".status.providerID", "name": "ID", "priority": 1, "type": "string"},
        {"jsonPath": r".metadata.labels.karpenter\.sh/nodepool", "name": "NodePool", "priority": 1, "type": "string"},
        {"jsonPath": ".spec.nodeClassRef.name", "name": "NodeClass", "priority": 1, "type": "string"},
        {"jsonPath": r#".status.conditions[?(@.type=="Drifted")].status"#, "name": "Drifted", "priority": 1, "type": "string"},
    ])
}

fn node_pool_checks(object: &Value, problems: &mut Vec<Problem>) {
    crate::validation::typed(
        object,
        problems,
        crate::validation::runtime::validate_node_pool,
    );
}

fn node_claim_checks(object: &Value, problems: &mut Vec<Problem>) {
    crate::validation::typed(
        object,
        problems,
        crate::validation::runtime::validate_node_claim,
    );
}

/// A CEL validation rule with its message.
pub fn rule(rule: &str, message: &str) -> Value {
    json!({"message": message, "rule": rule})
}

/// A string field that takes one of `values`.
pub fn one_of(description: &str, values: &[&str]) -> Value {
    json!({"description": description, "enum": values, "type": "string"})
}

/// A node selector requirement as NodeClass statuses report them (an image's requirements):
/// key, operator and values, unvalidated.
pub fn status_requirement() -> Value {
    json!({
        "properties": {
            "key": {"type": "string"},
            "operator": {"type": "string"},
            "values": {"items": {"type": "string"}, "type": "array", "x-kubernetes-list-type": "atomic"},
        },
        "required": ["key", "operator"],
        "type": "object",
    })
}

/// The root of a CRD schema: `apiVersion`, `kind`, `metadata`, `spec` and `status`.
pub fn object_root(description: &str, spec: Value, status: Value, spec_required: bool) -> Value {
    let mut root = json!({
        "description": description,
        "properties": {
            "apiVersion": {"description": "The versioned schema of this object.", "type": "string"},
            "kind": {"description": "The REST resource this object represents.", "type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "type": "object",
    });
    if spec_required {
        root["required"] = json!(["spec"]);
    }
    root
}

/// A `ResourceList` (quantities by resource name).
pub fn resource_list(description: &str) -> Value {
    json!({
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        },
        "description": description,
        "type": "object",
    })
}

/// A list of taints.
pub fn taints(description: &str) -> Value {
    json!({
        "description": description,
        "items": {
            "description": "A taint: pods that do not tolerate it are kept off the node.",
            "properties": {
                "effect": {
                    "description": "What happens to pods that do not tolerate the taint.",
                    "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"],
                    "type": "string",
                },
                "key": {
                    "description": "The taint key.",
                    "minLength": 1,
                    "pattern": QUALIFIED_NAME_PATTERN,
                    "type": "string",
                },
                "timeAdded": {
                    "description": "When the taint was added (NoExecute taints only).",
                    "format": "date-time",
                    "type": "string",
                },
                "value": {
                    "description": "The taint value.",
                    "pattern": QUALIFIED_NAME_PATTERN,
                    "type": "string",
                },
            },
            "required": ["effect", "key"],
            "type": "object",
        },
        "type": "array",
        "x-kubernetes-list-type": "atomic",
    })
}

fn restricted_key_rules(allow_node_pool_label: bool, over_list: bool) -> Value {
    // Label maps check every key (`self.all(x, ...)`); a requirement key is checked alone.
    let wrap = |rule: &str| {
        if over_list {
            format!("self.all(x, {})", rule.replace("self", "x"))
        } else {
            rule.to_string()
        }
    };
    let mut rules = vec![json!({
        "message": "label domain \"karpenter.sh\" is restricted",
        "rule": wrap(r#"self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")"#),
    })];
    if !allow_node_pool_label {
        rules.push(json!({
            "message": "label \"karpenter.sh/nodepool\" is restricted",
            "rule": wrap(r#"self != "karpenter.sh/nodepool""#),
        }));
    }
    rules.push(json!({
        "message": "label \"kubernetes.io/hostname\" is restricted",
        "rule": wrap(r#"self != "kubernetes.io/hostname""#),
    }));
    Value::Array(rules)
}

fn requirements(allow_node_pool_label: bool) -> Value {
    json!({
        "description": "Requirements on the labels of the node; combined with the pods' node affinity.",
        "items": {
            "description": "A node selector requirement with an optional minimum number of distinct values.",
            "properties": {
                "key": {
                    "description": "The label key the requirement applies to.",
                    "maxLength": 316,
                    "pattern": QUALIFIED_NAME_PATTERN,
                    "type": "string",
                    "x-kubernetes-validations": restricted_key_rules(allow_node_pool_label, false),
                },
                "minValues": {
                    "description": "The minimum number of distinct values of the key that the launch must keep open.",
                    "maximum": 50,
                    "minimum": 1,
                    "type": "integer",
                },
                "operator": {
                    "description": "How the key relates to the values.",
                    "enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"],
                    "type": "string",
                },
                "values": {
                    "description": "The values: one non-negative integer for Gt, Lt, Gte and Lte; none for Exists and DoesNotExist.",
                    "items": {
                        "maxLength": 63,
                        "pattern": LABEL_VALUE_PATTERN,
                        "type": "string",
                    },
                    "type": "array",
                    "x-kubernetes-list-type": "atomic",
                },
            },
            "required": ["key", "operator"],
            "type": "object",
        },
        "maxItems": 100,
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "x-kubernetes-validations": [
            {
                "message": "requirements with operator 'In' must have a value defined",
                "rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
            },
            {
                "message": "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
                "rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            },
            {
                "message": "requirements with 'minValues' must have at least that many values specified in the 'values' field",
                "rule": "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
            },
        ],
    })
}

fn node_class_ref(immutable_group_kind: bool) -> Value {
    let not_empty = |field: &str| json!([{"message": format!("{field} may not be empty"), "rule": "self != ''"}]);
    let mut schema = json!({
        "description": "The provider's NodeClass that holds cloud-specific settings.",
        "properties": {
            "group": {"description": "The API group of the NodeClass.", "pattern": "^[^/]*$", "type": "string", "x-kubernetes-validations": not_empty("group")},
            "kind": {"description": "The kind of the NodeClass.", "type": "string", "x-kubernetes-validations": not_empty("kind")},
            "name": {"description": "The name of the NodeClass.", "type": "string", "x-kubernetes-validations": not_empty("name")},
        },
        "required": ["group", "kind", "name"],
        "type": "object",
    });
    if immutable_group_kind {
        schema["x-kubernetes-validations"] = json!([
            {"message": "nodeClassRef.group is immutable", "rule": "self.group == oldSelf.group"},
            {"message": "nodeClassRef.kind is immutable", "rule": "self.kind == oldSelf.kind"},
        ]);
    }
    schema
}

fn expire_after() -> Value {
    json!({
        "default": "720h",
        "description": "How long a node lives before it is replaced, or Never. Takes effect through terminationGracePeriod when draining blocks.",
        "pattern": DURATION_OR_NEVER_PATTERN,
        "type": "string",
    })
}

fn termination_grace_period() -> Value {
    json!({
        "description": "How long draining may take before the remaining pods are deleted regardless of PodDisruptionBudgets and do-not-disrupt. Unset waits forever.",
        "pattern": DURATION_PATTERN,
        "type": "string",
    })
}

/// The `status.conditions` list of a CRD.
pub fn conditions(reason_pattern: &str, reason_and_message_required: bool) -> Value {
    let mut reason = json!({
        "description": "A CamelCase identifier of why the condition last changed.",
        "maxLength": 1024,
        "pattern": reason_pattern,
        "type": "string",
    });
    let mut required = vec!["lastTransitionTime", "status", "type"];
    if reason_and_message_required {
        reason["minLength"] = json!(1);
        required = vec!["lastTransitionTime", "message", "reason", "status", "type"];
    }
    json!({
        "description": "The latest observations of the object's state.",
        "items": {
            "description": "One observation of the object's state.",
            "properties": {
                "lastTransitionTime": {"description": "When the status last changed.", "format": "date-time", "type": "string"},
                "message": {"description": "A human-readable explanation.", "maxLength": 32768, "type": "string"},
                "observedGeneration": {"description": "The generation the condition was computed from.", "format": "int64", "minimum": 0, "type": "integer"},
                "reason": reason,
                "status": {"description": "True, False or Unknown.", "enum": ["True", "False", "Unknown"], "type": "string"},
                "type": {"description": "The condition type.", "maxLength": 316, "pattern": CONDITION_TYPE_PATTERN, "type": "string"},
            },
            "required": required,
            "type": "object",
        },
        "type": "array",
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map",
    })
}

fn node_pool_schema() -> Value {
    let budgets = json!({
        "default": [{"nodes": "10%"}],
        "description": "Limits on how many nodes may be disrupted at once. The most restrictive active budget applies; unset means one budget of 10%.",
        "items": {
            "description": "How many nodes may be disrupted at once, optionally only during a schedule and for some reasons.",
            "properties": {
                "duration": {
                    "description": "How long the budget is active after each schedule firing (hours and minutes). Required with schedule.",
                    "pattern": BUDGET_DURATION_PATTERN,
                    "type": "string",
                },
                "nodes": {
                    "default": "10%",
                    "description": "How many nodes may be disrupted at once: a count, or a percentage of the NodePool's nodes rounded up.",
                    "pattern": BUDGET_NODES_PATTERN,
                    "type": "string",
                },
                "reasons": {
                    "description": "The disruption reasons this budget limits; unset means all of them.",
                    "items": {
                        "description": "A disruption reason.",
                        "enum": ["Underutilized", "Empty", "Drifted"],
                        "type": "string",
                    },
                    "maxItems": 50,
                    "type": "array",
                    "x-kubernetes-list-type": "set",
                },
                "schedule": {
                    "description": "When the budget becomes active: cron syntax in UTC, or @daily-style descriptors. Required with duration.",
                    "pattern": CRON_PATTERN,
                    "type": "string",
                },
            },
            "required": ["nodes"],
            "type": "object",
        },
        "maxItems": 50,
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "x-kubernetes-validations": [
            {"message": "'schedule' must be set with 'duration'", "rule": "self.all(x, has(x.schedule) == has(x.duration))"},
        ],
    });
    let disruption = json!({
        "default": {"consolidateAfter": "0s"},
        "description": "How and when the NodePool's nodes may be disrupted.",
        "properties": {
            "budgets": budgets,
            "consolidateAfter": {
                "default": "0s",
                "description": "How long a node must see no pod scheduled or removed before consolidation considers it; Never turns consolidation off.",
                "pattern": DURATION_OR_NEVER_PATTERN,
                "type": "string",
            },
            "consolidationPolicy": {
                "default": "WhenEmptyOrUnderutilized",
                "description": "Which nodes consolidation may remove or replace: WhenEmpty, WhenEmptyOrUnderutilized or Balanced.",
                "enum": ["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"],
                "type": "string",
            },
        },
        "type": "object",
    });
    let label_map = json!({
        "additionalProperties": {"maxLength": 63, "pattern": LABEL_VALUE_PATTERN, "type": "string"},
        "description": "Labels given to every node.",
        "maxProperties": 100,
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "x-kubernetes-validations": restricted_key_rules(false, true),
    });
    let template = json!({
        "description": "The template of the NodeClaims this NodePool launches.",
        "properties": {
            "metadata": {
                "description": "Labels and annotations given to every node.",
                "properties": {
                    "annotations": {
                        "additionalProperties": {"type": "string"},
                        "description": "Annotations given to every node.",
                        "type": "object",
                        "x-kubernetes-map-type": "granular",
                    },
                    "labels": label_map,
                },
                "type": "object",
            },
            "spec": {
                "description": "The NodeClaim spec every node is launched with.",
                "properties": {
                    "expireAfter": expire_after(),
                    "nodeClassRef": node_class_ref(true),
                    "requirements": requirements(false),
                    "startupTaints": taints("Taints removed by something else once the node is ready; pods need not tolerate them to cause a launch."),
                    "taints": taints("Taints every node is created with."),
                    "terminationGracePeriod": termination_grace_period(),
                },
                "required": ["nodeClassRef", "requirements"],
                "type": "object",
            },
        },
        "required": ["spec"],
        "type": "object",
    });
    let spec = json!({
        "description": "The desired behaviour of the NodePool.",
        "properties": {
            "disruption": disruption,
            "limits": resource_list("The most capacity the NodePool may hold (cpu, memory, nodes, …); only limits.nodes with replicas."),
            "replicas": {
                "description": "A fixed number of nodes instead of demand-driven scaling (alpha). Ignores consolidation settings; not allowed with weight.",
                "format": "int64",
                "minimum": 0,
                "type": "integer",
            },
            "template": template,
            "weight": {
                "description": "Priority among NodePools that fit a pod: higher first. Unset is lowest.",
                "format": "int32",
                "maximum": 100,
                "minimum": 1,
                "type": "integer",
            },
        },
        "required": ["template"],
        "type": "object",
        "x-kubernetes-validations": [
            {"message": "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes", "rule": "has(self.replicas) == has(oldSelf.replicas)"},
            {"message": "only 'limits.nodes' is supported on static NodePools", "rule": "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))"},
            {"message": "'weight' is not supported on static NodePools", "rule": "!has(self.replicas) || !has(self.weight)"},
        ],
    });
    let status = json!({
        "description": "The observed state of the NodePool.",
        "properties": {
            "conditions": conditions(CONDITION_REASON_PATTERN, true),
            "nodeClassObservedGeneration": {"description": "The NodeClass generation last observed.", "format": "int64", "type": "integer"},
            "nodes": {"default": 0, "description": "How many nodes the NodePool has.", "format": "int64", "type": "integer"},
            "resources": resource_list("The capacity of the NodePool's nodes."),
        },
        "type": "object",
    });
    object_root(
        "NodePool is a pool of nodes karpenter launches and disrupts under one set of rules.",
        spec,
        status,
        true,
    )
}

fn node_claim_schema() -> Value {
    let spec = json!({
        "description": "The desired node. Immutable.",
        "properties": {
            "expireAfter": expire_after(),
            "nodeClassRef": node_class_ref(false),
            "requirements": requirements(true),
            "resources": {
                "description": "The resources the node must provide.",
                "properties": {"requests": resource_list("The minimum resources the node must have.")},
                "type": "object",
            },
            "startupTaints": taints("Taints removed by something else once the node is ready."),
            "taints": taints("Taints the node is created with."),
            "terminationGracePeriod": termination_grace_period(),
        },
        "required": ["nodeClassRef", "requirements"],
        "type": "object",
        "x-kubernetes-validations": [{"message": "spec is immutable", "rule": "self == oldSelf"}],
    });
    let status = json!({
        "description": "What is known about the launched node.",
        "properties": {
            "allocatable": resource_list("The node's allocatable resources."),
            "capacity": resource_list("The node's capacity."),
            "conditions": conditions(OPTIONAL_CONDITION_REASON_PATTERN, false),
            "imageID": {"description": "The image the instance booted from.", "type": "string"},
            "lastPodEventTime": {"description": "When a pod was last scheduled to or removed from the node.", "format": "date-time", "type": "string"},
            "nodeName": {"description": "The name of the Node that registered.", "type": "string"},
            "providerID": {"description": "The cloud provider's ID of the instance.", "type": "string"},
        },
        "type": "object",
    });
    object_root(
        "NodeClaim is a request for one node, made by karpenter from a NodePool.",
        spec,
        status,
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        fn walk(v: &Value, found: &mut Vec<String>) {
            match v {
                Value::Object(map) => {
                    if let Some(Value::String(p)) = map.get("pattern") {
                        found.push(p.clone());
                    }
                    map.values().for_each(|v| walk(v, found));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
                _ => {}
            }
        }
        for crd in CORE {
            let mut patterns = Vec::new();
            walk(&crd.schema(), &mut patterns);
            assert!(!patterns.is_empty());
            for p in patterns {
                regex::Regex::new(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
            }
        }
    }

    #[test]
    fn crds_name_their_resources() {
        let np = NODE_POOL.definition();
        assert_eq!(np["metadata"]["name"], "nodepools.karpenter.sh");
        assert_eq!(np["spec"]["scope"], "Cluster");
        let v1 = &np["spec"]["versions"][0];
        assert_eq!(
            v1["subresources"]["scale"]["specReplicasPath"],
            ".spec.replicas"
        );
        let columns: Vec<&str> = v1["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            columns,
            [
                "NodeClass",
                "Nodes",
                "Ready",
                "Age",
                "Weight",
                "CPU",
                "Memory"
            ]
        );
        assert_eq!(
            find(&CORE, "karpenter.sh/v1", "NodeClaim"),
            Some(&NODE_CLAIM)
        );
        assert_eq!(find(&CORE, "karpenter.sh/v1beta1", "NodePool"), None);
        assert_eq!(NODE_CLAIM.file_name(), "karpenter.sh_nodeclaims.yaml");
    }

    fn widget_schema() -> Value {
        json!({"type": "object"})
    }

    const WIDGET: Crd = Crd::new("example.com", "v1beta1", "Widget", "widgets", widget_schema);

    #[test]
    fn one_version_is_served_and_stored() {
        let versions = WIDGET.definition()["spec"]["versions"].clone();
        assert_eq!(
            versions,
            json!([{
                "name": "v1beta1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}},
                "subresources": {"status": {}},
            }])
        );
        assert!(WIDGET.served_versions().is_empty());
        assert!(WIDGET.serves("v1beta1"));
        assert!(!WIDGET.serves("v1alpha2"));
    }

    #[test]
    fn other_versions_are_served_but_only_one_is_stored() {
        const OLDER: [ServedVersion; 2] = [
            ServedVersion::new("v1alpha2").deprecated_with_warning("use v1beta1 instead"),
            ServedVersion::new("v1alpha1").deprecated(),
        ];
        let crd = WIDGET
            .with_printer_columns(node_pool_columns)
            .with_served_versions(&OLDER);
        let definition = crd.definition();
        let versions = definition["spec"]["versions"].as_array().unwrap();
        let names: Vec<&str> = versions
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["v1alpha1", "v1alpha2", "v1beta1"]);
        let stored: Vec<&str> = versions
            .iter()
            .filter(|v| v["storage"] == true)
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(stored, ["v1beta1"]);
        assert!(versions.iter().all(|v| v["served"] == true));
        assert_eq!(versions[0]["deprecated"], true);
        assert!(versions[0].get("deprecationWarning").is_none());
        assert_eq!(versions[1]["deprecated"], true);
        assert_eq!(versions[1]["deprecationWarning"], "use v1beta1 instead");
        assert!(versions[2].get("deprecated").is_none());
        for v in versions {
            assert_eq!(v["schema"], versions[2]["schema"]);
            assert_eq!(v["subresources"], versions[2]["subresources"]);
            assert_eq!(v["additionalPrinterColumns"], node_pool_columns());
        }
        // karpenter itself reads and writes the stored version.
        assert_eq!(crd.version(), "v1beta1");
        assert_eq!(crd.api_version(), "example.com/v1beta1");
        assert_eq!(crd.served_versions(), OLDER);
        assert!(crd.served_versions()[0].is_deprecated());
        let crds = [crd];
        for api_version in [
            "example.com/v1beta1",
            "example.com/v1alpha2",
            "example.com/v1alpha1",
        ] {
            assert_eq!(
                find(&crds, api_version, "Widget"),
                Some(&crd),
                "{api_version}"
            );
        }
        assert_eq!(find(&crds, "example.com/v1", "Widget"), None);
        assert_eq!(find(&crds, "other.com/v1beta1", "Widget"), None);
        assert_eq!(find(&crds, "v1beta1", "Widget"), None);
    }

    #[test]
    fn runtime_checks_read_the_stored_version() {
        fn report_api_version(object: &Value, problems: &mut Vec<Problem>) {
            problems.push(Problem {
                path: "apiVersion".into(),
                message: object["apiVersion"].as_str().unwrap_or_default().into(),
                kind: crate::validation::ProblemKind::Rejected,
            });
        }
        const OLDER: [ServedVersion; 1] = [ServedVersion::new("v1alpha2")];
        let crd = WIDGET
            .with_runtime_checks(report_api_version)
            .with_served_versions(&OLDER);
        let seen = |api_version: &str| {
            let mut problems = Vec::new();
            crd.runtime_checks(&json!({"apiVersion": api_version}), &mut problems);
            problems.pop().unwrap().message
        };
        assert_eq!(seen("example.com/v1alpha2"), "example.com/v1beta1");
        assert_eq!(seen("example.com/v1beta1"), "example.com/v1beta1");
        // Only a version the CRD serves is relabelled.
        assert_eq!(seen("example.com/v1alpha1"), "example.com/v1alpha1");
        assert_eq!(seen("other.com/v1alpha2"), "other.com/v1alpha2");
    }

    #[test]
    #[should_panic(expected = "repeats the stored version")]
    fn the_stored_version_cannot_be_listed_again() {
        const AGAIN: [ServedVersion; 1] = [ServedVersion::new("v1beta1")];
        let _ = WIDGET.with_served_versions(&AGAIN);
    }

    #[test]
    #[should_panic(expected = "listed twice")]
    fn a_version_cannot_be_listed_twice() {
        const TWICE: [ServedVersion; 3] = [
            ServedVersion::new("v1alpha2"),
            ServedVersion::new("v1alpha1"),
            ServedVersion::new("v1alpha2").deprecated(),
        ];
        let _ = WIDGET.with_served_versions(&TWICE);
    }

    #[test]
    #[should_panic(expected = "needs a name")]
    fn a_version_needs_a_name() {
        const UNNAMED: [ServedVersion; 1] = [ServedVersion::new("")];
        let _ = WIDGET.with_served_versions(&UNNAMED);
    }
}
