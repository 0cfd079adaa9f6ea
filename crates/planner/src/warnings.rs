//! Where `plan` and the simulator would decide something the controller would not: they launch
//! from a catalog whatever the cluster lacks, so each such gap is said once, in the report's
//! Warnings, rather than silently planned around.

use std::collections::BTreeSet;

use karpenter_api::NodePool;
use karpenter_api::labels::CAPACITY_TYPE_LABEL;
use karpenter_cloudprovider::Catalog;
use serde_json::Value;

/// A NodeClass's `(group, kind, name)`, if it names them.
pub fn node_class_key(object: &Value) -> Option<(String, String, String)> {
    let group = object
        .get("apiVersion")?
        .as_str()?
        .split('/')
        .next()?
        .to_string();
    let kind = object.get("kind")?.as_str()?.to_string();
    let name = object.pointer("/metadata/name")?.as_str()?.to_string();
    Some((group, kind, name))
}

/// The NodeClasses among a dump's or a scenario's objects, as `(group, kind, name)`.
pub fn node_class_keys<'a>(
    objects: impl IntoIterator<Item = &'a Value>,
) -> BTreeSet<(String, String, String)> {
    objects.into_iter().filter_map(node_class_key).collect()
}

/// Whether `object` is a provider's NodeClass (a `*NodeClass` kind of a karpenter group).
pub fn is_node_class(object: &Value) -> bool {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    kind.ends_with("NodeClass") && api_version.contains("karpenter")
}

/// What the NodePools ask of the cluster and the catalog that a controller would refuse:
/// a NodeClass of another provider than the catalog's, a NodeClass that does not exist (when
/// `node_classes` is known), spot on a catalog without spot prices.
pub fn node_pools(
    node_pools: &[NodePool],
    node_classes: Option<&BTreeSet<(String, String, String)>>,
    catalog: &Catalog,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let has_spot = catalog
        .instance_types
        .iter()
        .any(|it| it.offerings.iter().any(|o| o.capacity_type == "spot"));
    for np in node_pools {
        let name = np.metadata.name.as_deref().unwrap_or_default();
        let r = &np.spec.template.spec.node_class_ref;
        if let Some(expected) = catalog.node_class
            && (r.group != expected.group || r.kind != expected.kind)
        {
            warnings.push(format!(
                "NodePool {name} names a {}/{} NodeClass, but catalog {} is {}/{}'s: the {} provider's controller would launch nothing for it",
                r.group, r.kind, catalog.name, expected.group, expected.kind, catalog.name
            ));
        } else if let Some(classes) = node_classes
            && !classes.contains(&(r.group.clone(), r.kind.clone(), r.name.clone()))
        {
            warnings.push(format!(
                "NodePool {name}: its NodeClass {}/{} is not among the objects read; the controller launches nothing for it until that NodeClass exists and is Ready",
                r.kind, r.name
            ));
        }
        let asks_spot = np.spec.template.spec.requirements.iter().any(|req| {
            req.key == CAPACITY_TYPE_LABEL
                && req.operator == karpenter_api::Operator::In
                && req.values.iter().any(|v| v == "spot")
        });
        if asks_spot && !has_spot {
            warnings.push(format!(
                "NodePool {name} allows spot, but catalog {} has no spot prices: it is planned on-demand only (a scenario's spec.spotPriceRatio assumes a spot price)",
                catalog.name
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_core::instancetype::fake;
    use serde_json::json;

    fn pool(name: &str, group: &str, kind: &str, capacity_types: &[&str]) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": group, "kind": kind, "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                    "values": capacity_types}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn what_a_controller_would_refuse_is_said() {
        let on_demand_only = fake::default_instance_types().into_iter().map(|mut it| {
            it.offerings.retain(|o| o.capacity_type == "on-demand");
            it
        });
        let catalog = Catalog::new("kwok", on_demand_only, &[]).with_node_class(
            karpenter_api::crd::GroupKind::new("karpenter.kwok.sh", "KWOKNodeClass"),
        );
        let classes = node_class_keys(&[json!({"apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass", "metadata": {"name": "default"}})]);
        let pools = [
            pool("fine", "karpenter.kwok.sh", "KWOKNodeClass", &["on-demand"]),
            pool("aws", "karpenter.k8s.aws", "EC2NodeClass", &["on-demand"]),
            pool(
                "spot",
                "karpenter.kwok.sh",
                "KWOKNodeClass",
                &["spot", "on-demand"],
            ),
        ];
        let warnings = node_pools(&pools, Some(&classes), &catalog);
        assert_eq!(warnings.len(), 2, "{warnings:#?}");
        assert!(warnings[0].starts_with("NodePool aws names a karpenter.k8s.aws/EC2NodeClass NodeClass, but catalog kwok is karpenter.kwok.sh/KWOKNodeClass's"), "{}", warnings[0]);
        assert!(
            warnings[1]
                .starts_with("NodePool spot allows spot, but catalog kwok has no spot prices"),
            "{}",
            warnings[1]
        );

        let missing = node_pools(&pools[..1], Some(&BTreeSet::new()), &catalog);
        assert_eq!(missing.len(), 1);
        assert!(
            missing[0]
                .contains("its NodeClass KWOKNodeClass/default is not among the objects read"),
            "{}",
            missing[0]
        );
        assert!(
            node_pools(&pools[..1], None, &catalog).is_empty(),
            "NodeClasses unknown: nothing said"
        );
    }
}
