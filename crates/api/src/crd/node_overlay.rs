//! `nodeoverlays.karpenter.sh` (`v1alpha1`): the schema with upstream's validation — the
//! price and price-adjustment patterns, capacity restricted to extended resources, weight
//! 1..10000, requirements as a NodePool's (without `minValues`, `NotIn` needing values).

use serde_json::{Value, json};

use super::{
    CONDITION_REASON_PATTERN, Crd, LABEL_VALUE_PATTERN, QUALIFIED_NAME_PATTERN, READY_COLUMN_PATH,
    conditions, object_root, resource_list, restricted_key_rules,
};

/// What `price` accepts: an unsigned decimal.
pub const PRICE_PATTERN: &str = r"^\d+(\.\d+)?$";

/// What `priceAdjustment` accepts: a signed decimal, a `+` percentage, or a `-` percentage
/// of at most 100.
pub const PRICE_ADJUSTMENT_PATTERN: &str =
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$";

/// `nodeoverlays.karpenter.sh`
pub const NODE_OVERLAY: Crd = Crd::new(
    crate::labels::GROUP,
    "v1alpha1",
    "NodeOverlay",
    "nodeoverlays",
    node_overlay_schema,
)
.with_short_names(&["overlays"])
.with_printer_columns(node_overlay_columns)
.with_runtime_checks(node_overlay_checks)
.with_label_restriction(super::label_domains::restrict_node_overlay);

fn node_overlay_columns() -> Value {
    json!([
        {"jsonPath": READY_COLUMN_PATH, "name": "Ready", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
        {"jsonPath": ".spec.weight", "name": "Weight", "priority": 1, "type": "integer"},
    ])
}

fn node_overlay_checks(object: &Value, problems: &mut Vec<crate::validation::Problem>) {
    crate::validation::typed(
        object,
        problems,
        crate::validation::runtime::validate_node_overlay,
    );
}

fn requirements() -> Value {
    json!({
        "description": "Which instance types the overlay applies to, matched against their labels, their NodePool's name (karpenter.sh/nodepool) and template labels; offerings by zone and capacity type.",
        "items": {
            "description": "A node selector requirement.",
            "properties": {
                "key": {
                    "description": "The label key the requirement applies to.",
                    "maxLength": 316,
                    "pattern": QUALIFIED_NAME_PATTERN,
                    "type": "string",
                    "x-kubernetes-validations": restricted_key_rules(true, false),
                },
                "operator": {
                    "description": "How the key relates to the values.",
                    "enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"],
                    "type": "string",
                },
                "values": {
                    "description": "The values: at least one for In and NotIn, one non-negative integer for Gt, Lt, Gte and Lte, none for Exists and DoesNotExist.",
                    "items": {"maxLength": 63, "pattern": LABEL_VALUE_PATTERN, "type": "string"},
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
                "message": "requirements with operator 'NotIn' must have a value defined",
                "rule": "self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
            },
            {
                "message": "requirements with operator 'In' must have a value defined",
                "rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
            },
            {
                "message": "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",
                "rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            },
        ],
    })
}

fn node_overlay_schema() -> Value {
    let mut capacity = resource_list(
        "Extended resources added to the matching instance types' capacity; cpu, memory, ephemeral-storage and pods may not be set.",
    );
    capacity["x-kubernetes-validations"] = json!([{
        "message": "invalid resource restricted",
        "rule": "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))",
    }]);
    let spec = json!({
        "description": "What the overlay changes, and for which instance types.",
        "properties": {
            "capacity": capacity,
            "price": {
                "description": "The matching offerings' price, replacing the provider's: an unsigned decimal.",
                "pattern": PRICE_PATTERN,
                "type": "string",
            },
            "priceAdjustment": {
                "description": "A change to the matching offerings' price: a signed amount (+0.5, -1) or percentage (+10%, -15%, at least -100%).",
                "pattern": PRICE_ADJUSTMENT_PATTERN,
                "type": "string",
            },
            "requirements": requirements(),
            "weight": {
                "description": "Precedence over other overlays: higher first, unset lowest. Overlays of one weight that set the same thing for an instance type conflict.",
                "format": "int32",
                "maximum": 10000,
                "minimum": 1,
                "type": "integer",
            },
        },
        "required": ["requirements"],
        "type": "object",
        "x-kubernetes-validations": [
            {"message": "cannot set both 'price' and 'priceAdjustment'", "rule": "!has(self.price) || !has(self.priceAdjustment)"},
        ],
    });
    let status = json!({
        "description": "The observed state of the NodeOverlay.",
        "properties": {"conditions": conditions(CONDITION_REASON_PATTERN, true)},
        "type": "object",
    });
    object_root(
        "NodeOverlay overrides the price and adds extended resources to the instance types that match its requirements (feature gate NodeOverlay).",
        spec,
        status,
        true,
    )
}
