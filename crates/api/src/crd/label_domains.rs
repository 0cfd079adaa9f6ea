//! The label domains providers reserve. Upstream's AWS, Azure and KWOK providers patch
//! karpenter's CRDs (`hack/validation/requirements.sh`, `labels.sh`) with one CEL rule per
//! domain: a requirement key, or a NodePool label, whose domain ends with the provider's
//! must be one of the provider's well-known labels. The other providers register the same
//! restriction with karpenter's runtime validation (`RestrictedLabelDomains` and
//! `WellKnownLabels`); here every provider's restriction is a CRD rule, so a mistyped key
//! (`karpenter.k8s.aws/instance-categry`) is refused when applied, not silently ignored.

use serde_json::{Value, json};

/// A label domain a provider reserves and the keys in it that NodePools, NodeClaims and
/// NodeOverlays may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestrictedLabelDomain {
    /// The domain (`karpenter.k8s.aws`); a key is in it when the part before its `/` ends
    /// with it, as upstream's rule (`key.find("^([^/]+)").endsWith(domain)`) reads it.
    pub domain: &'static str,
    /// The well-known keys NodePool and NodeClaim requirements may use.
    pub keys: &'static [&'static str],
    /// Whether a NodePool's `spec.template.metadata.labels` are restricted too (with the
    /// same keys); upstream's KWOK restricts only requirements.
    pub labels: bool,
    /// The keys NodeOverlay requirements may use, or `None` when NodeOverlays are not
    /// restricted.
    pub overlay_keys: Option<&'static [&'static str]>,
    /// Keys outside any domain (`agentpool`) refused in the requirements and labels of the
    /// NodePools and NodeClaims whose `nodeClassRef.group` is this domain: upstream refuses
    /// them in its provider's CRDs, and this binary's CRDs serve every provider, whose
    /// NodePools may use them.
    pub refused_keys: &'static [&'static str],
}

impl RestrictedLabelDomain {
    /// `domain` restricted to `keys` in NodePool requirements and labels, NodeClaim
    /// requirements and NodeOverlay requirements.
    pub const fn new(domain: &'static str, keys: &'static [&'static str]) -> Self {
        Self {
            domain,
            keys,
            labels: true,
            overlay_keys: Some(keys),
            refused_keys: &[],
        }
    }

    /// Also refusing `keys` on the NodePools and NodeClaims of this domain's NodeClasses.
    pub const fn refusing(mut self, keys: &'static [&'static str]) -> Self {
        self.refused_keys = keys;
        self
    }

    /// Restricting only NodePool and NodeClaim requirements, not labels or NodeOverlays.
    pub const fn requirements_only(mut self) -> Self {
        self.labels = false;
        self.overlay_keys = None;
        self
    }

    /// With other keys for NodeOverlay requirements (AWS leaves out the labels of
    /// capacity reservations and placement groups there).
    pub const fn with_overlay_keys(mut self, keys: &'static [&'static str]) -> Self {
        self.overlay_keys = Some(keys);
        self
    }

    /// Whether `key` is in this domain.
    pub fn contains(&self, key: &str) -> bool {
        let prefix = key.split('/').next().unwrap_or_default();
        prefix.ends_with(self.domain)
    }

    /// Whether a requirement on `key` passes this domain's rule: outside the domain, or one
    /// of its well-known keys.
    pub fn allows(&self, key: &str) -> bool {
        !self.contains(key) || self.keys.contains(&key)
    }

    fn message(&self) -> String {
        format!("label domain \"{}\" is restricted", self.domain)
    }

    fn list(keys: &[&str]) -> String {
        let quoted: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
        format!("[{}]", quoted.join(", "))
    }

    fn in_domain(&self, var: &str) -> String {
        format!("{var}.find(\"^([^/]+)\").endsWith(\"{}\")", self.domain)
    }

    fn allowed_text(keys: &[&str]) -> String {
        if keys.is_empty() {
            "none".into()
        } else {
            keys.join(", ")
        }
    }

    /// The rule on one requirement key.
    fn key_rule(&self, keys: &[&str]) -> Value {
        json!({
            "message": self.message(),
            "messageExpression": format!(
                "'{} to its well-known labels ({}); not well-known: \"' + self + '\"'",
                self.message(),
                Self::allowed_text(keys)
            ),
            "rule": format!("self in {} || !{}", Self::list(keys), self.in_domain("self")),
        })
    }

    /// The rule on a map of labels. Its message is static: a message expression over the
    /// map (which keys are not well-known) is far past the API server's cost budget for a map
    /// whose keys have no length bound, and the CRD would be refused.
    fn label_map_rule(&self) -> Value {
        let list = Self::list(self.keys);
        json!({
            "message": format!(
                "{} to its well-known labels ({})",
                self.message(),
                Self::allowed_text(self.keys)
            ),
            "rule": format!("self.all(x, x in {list} || !{})", self.in_domain("x")),
        })
    }
}

/// The rules refusing `domain.refused_keys` on requirements at `requirements` (a field of
/// the object the rule is on, next to its `nodeClassRef`), in upstream's words.
fn refused_requirement_rules<'a>(
    domains: &'a [RestrictedLabelDomain],
) -> impl Iterator<Item = Value> + 'a {
    domains.iter().flat_map(|d| {
        d.refused_keys.iter().map(move |key| {
            json!({
                "message": format!("label \"{key}\" is restricted"),
                "messageExpression": format!("'label \"{key}\" is restricted on NodePools and NodeClaims of {} NodeClasses'", d.domain),
                "rule": format!(
                    "!has(self.nodeClassRef) || self.nodeClassRef.group != '{}' || self.requirements.all(x, x.key != '{key}')",
                    d.domain
                ),
            })
        })
    })
}

fn push_rules(schema: &mut Value, pointer: &str, rules: impl IntoIterator<Item = Value>) {
    let node = schema
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("karpenter's schema has no {pointer}"));
    let validations = node
        .as_object_mut()
        .expect("schema nodes are objects")
        .entry("x-kubernetes-validations")
        .or_insert_with(|| json!([]));
    validations
        .as_array_mut()
        .expect("x-kubernetes-validations is a list")
        .extend(rules);
}

const NODE_POOL_KEY: &str = "/properties/spec/properties/template/properties/spec/properties/requirements/items/properties/key";
const NODE_POOL_LABELS: &str =
    "/properties/spec/properties/template/properties/metadata/properties/labels";
const NODE_POOL_TEMPLATE: &str = "/properties/spec/properties/template";
const NODE_POOL_SPEC: &str = "/properties/spec/properties/template/properties/spec";
const REQUIREMENT_KEY: &str = "/properties/spec/properties/requirements/items/properties/key";

/// Adds each domain's rules to the NodePool's requirement keys and template labels.
pub(super) fn restrict_node_pool(schema: &mut Value, domains: &[RestrictedLabelDomain]) {
    push_rules(
        schema,
        NODE_POOL_KEY,
        domains.iter().map(|d| d.key_rule(d.keys)),
    );
    push_rules(
        schema,
        NODE_POOL_LABELS,
        domains
            .iter()
            .filter(|d| d.labels)
            .map(RestrictedLabelDomain::label_map_rule),
    );
    push_rules(schema, NODE_POOL_SPEC, refused_requirement_rules(domains));
    let labels = domains.iter().flat_map(|d| {
        d.refused_keys.iter().map(move |key| {
            json!({
                "message": format!("label \"{key}\" is restricted"),
                "messageExpression": format!("'label \"{key}\" is restricted on NodePools of {} NodeClasses'", d.domain),
                "rule": format!(
                    "!has(self.metadata) || !has(self.metadata.labels) || !has(self.spec.nodeClassRef) || self.spec.nodeClassRef.group != '{}' || self.metadata.labels.all(x, x != '{key}')",
                    d.domain
                ),
            })
        })
    });
    push_rules(schema, NODE_POOL_TEMPLATE, labels);
}

/// Adds each domain's rule to the NodeClaim's requirement keys.
pub(super) fn restrict_node_claim(schema: &mut Value, domains: &[RestrictedLabelDomain]) {
    push_rules(
        schema,
        REQUIREMENT_KEY,
        domains.iter().map(|d| d.key_rule(d.keys)),
    );
    push_rules(
        schema,
        "/properties/spec",
        refused_requirement_rules(domains),
    );
}

/// Adds each domain's rule to the NodeOverlay's requirement keys.
pub(super) fn restrict_node_overlay(schema: &mut Value, domains: &[RestrictedLabelDomain]) {
    push_rules(
        schema,
        REQUIREMENT_KEY,
        domains
            .iter()
            .filter_map(|d| d.overlay_keys.map(|keys| d.key_rule(keys))),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOMAIN: RestrictedLabelDomain =
        RestrictedLabelDomain::new("example.com", &["example.com/size"]);

    #[test]
    fn a_key_is_in_a_domain_its_prefix_ends_with() {
        assert!(DOMAIN.contains("example.com/other"));
        assert!(DOMAIN.contains("sub.example.com/other"));
        assert!(!DOMAIN.contains("example.org/size"));
        assert!(!DOMAIN.contains("size"));
        assert!(DOMAIN.allows("example.com/size"));
        assert!(!DOMAIN.allows("example.com/sise"));
        assert!(DOMAIN.allows("team"));
    }

    #[test]
    fn rules_name_the_domain_and_its_keys() {
        let rule = DOMAIN.key_rule(DOMAIN.keys);
        assert_eq!(
            rule["rule"],
            r#"self in ["example.com/size"] || !self.find("^([^/]+)").endsWith("example.com")"#
        );
        assert_eq!(
            rule["message"],
            r#"label domain "example.com" is restricted"#
        );
        let map = DOMAIN.label_map_rule();
        assert_eq!(
            map["rule"],
            r#"self.all(x, x in ["example.com/size"] || !x.find("^([^/]+)").endsWith("example.com"))"#
        );
    }
}
