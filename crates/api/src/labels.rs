//! Well-known label, annotation, taint and finalizer names, in one place, spelled as upstream.

/// The API group of NodePool and NodeClaim.
pub const GROUP: &str = "karpenter.sh";
/// The group of compatibility annotations.
pub const COMPATIBILITY_GROUP: &str = "compatibility.karpenter.sh";

/// Label naming the NodePool a node or NodeClaim belongs to.
pub const NODE_POOL_LABEL: &str = "karpenter.sh/nodepool";
/// Label set to `"true"` once a node is initialized.
pub const NODE_INITIALIZED_LABEL: &str = "karpenter.sh/initialized";
/// Label set to `"true"` once a node has registered.
pub const NODE_REGISTERED_LABEL: &str = "karpenter.sh/registered";
/// Label telling karpenter that the provider manages the node's taints.
pub const NODE_DO_NOT_SYNC_TAINTS_LABEL: &str = "karpenter.sh/do-not-sync-taints";
/// Label holding the capacity type (`spot`, `on-demand`, `reserved`).
pub const CAPACITY_TYPE_LABEL: &str = "karpenter.sh/capacity-type";

/// Capacity type value for spot capacity.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
/// Capacity type value for on-demand capacity.
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
/// Capacity type value for reserved capacity.
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";
/// Architecture value for x86-64.
pub const ARCH_AMD64: &str = "amd64";
/// Architecture value for 64-bit ARM.
pub const ARCH_ARM64: &str = "arm64";

/// Kubernetes' zone label.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// Kubernetes' region label.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// Kubernetes' instance-type label.
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
/// Kubernetes' architecture label.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// Kubernetes' operating-system label.
pub const OS_LABEL: &str = "kubernetes.io/os";
/// Kubernetes' hostname label.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Kubernetes' Windows build label.
pub const WINDOWS_BUILD_LABEL: &str = "node.kubernetes.io/windows-build";
/// Label that keeps a terminating node out of external load balancers.
pub const EXCLUDE_FROM_LOAD_BALANCERS_LABEL: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";

/// Pod or node annotation that blocks voluntary disruption.
pub const DO_NOT_DISRUPT_ANNOTATION: &str = "karpenter.sh/do-not-disrupt";
/// Annotation holding the provider a NodeClaim was made for.
pub const PROVIDER_COMPATIBILITY_ANNOTATION: &str = "compatibility.karpenter.sh/provider";
/// Annotation holding the hash of the NodePool template a NodeClaim was made from.
pub const NODE_POOL_HASH_ANNOTATION: &str = "karpenter.sh/nodepool-hash";
/// Annotation holding the version of the hash algorithm (ours is
/// [`crate::hash::NODE_POOL_HASH_VERSION`]).
pub const NODE_POOL_HASH_VERSION_ANNOTATION: &str = "karpenter.sh/nodepool-hash-version";
/// Annotation holding the deadline (RFC 3339) by which a terminating NodeClaim is forced out.
pub const NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION: &str =
    "karpenter.sh/nodeclaim-termination-timestamp";
/// Annotation set when minValues had to be relaxed for a NodeClaim.
pub const NODE_CLAIM_MIN_VALUES_RELAXED_ANNOTATION: &str =
    "karpenter.sh/nodeclaim-min-values-relaxed";
/// Pod annotation that feeds the disruption cost.
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Finalizer on NodeClaims and Nodes that karpenter owns.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// Key of the taint put on nodes that are being disrupted (effect `NoSchedule`).
pub const DISRUPTED_TAINT_KEY: &str = "karpenter.sh/disrupted";
/// Key of the taint a node registers with (effect `NoExecute`) until karpenter adopts it.
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";

/// Labels karpenter knows the meaning of. A requirement on them is allowed even when an
/// instance type does not define them.
pub const WELL_KNOWN_LABELS: [&str; 8] = [
    NODE_POOL_LABEL,
    ZONE_LABEL,
    REGION_LABEL,
    INSTANCE_TYPE_LABEL,
    ARCH_LABEL,
    OS_LABEL,
    CAPACITY_TYPE_LABEL,
    WINDOWS_BUILD_LABEL,
];

/// Label domains no NodePool may set, except for the well-known labels in them.
pub const RESTRICTED_LABEL_DOMAINS: [&str; 1] = [GROUP];

/// Labels no NodePool may set.
pub const RESTRICTED_LABELS: [&str; 1] = [HOSTNAME_LABEL];

/// Deprecated label keys and their current names: a requirement on the old key means the new one.
pub const NORMALIZED_LABELS: [(&str, &str); 5] = [
    ("failure-domain.beta.kubernetes.io/zone", ZONE_LABEL),
    ("beta.kubernetes.io/arch", ARCH_LABEL),
    ("beta.kubernetes.io/os", OS_LABEL),
    ("beta.kubernetes.io/instance-type", INSTANCE_TYPE_LABEL),
    ("failure-domain.beta.kubernetes.io/region", REGION_LABEL),
];

/// The capacity types a `karpenter.sh/capacity-type` requirement may name.
pub const CAPACITY_TYPES: [&str; 3] = [
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    CAPACITY_TYPE_RESERVED,
];

/// Returns the current name of a label key, mapping deprecated keys to their replacement.
pub fn normalize_label(key: &str) -> &str {
    NORMALIZED_LABELS
        .iter()
        .find(|(old, _)| *old == key)
        .map_or(key, |(_, new)| new)
}

/// Returns whether `key` is one of [`WELL_KNOWN_LABELS`].
pub fn is_well_known_label(key: &str) -> bool {
    WELL_KNOWN_LABELS.contains(&key)
}

/// The domain (prefix) of a label key, or `""` when it has none.
pub fn label_domain(key: &str) -> &str {
    key.split_once('/').map_or("", |(domain, _)| domain)
}

/// The label of a node that names its NodeClass: `<group>/<lowercase kind>`.
pub fn node_class_label_key(group: &str, kind: &str) -> String {
    format!("{group}/{}", kind.to_lowercase())
}

/// Explains why `key` may not be used in a NodePool's labels or requirements, if it may not.
pub fn restricted_label_reason(key: &str) -> Option<String> {
    if is_well_known_label(key) {
        return None;
    }
    let domain = label_domain(key);
    let in_restricted_domain = RESTRICTED_LABEL_DOMAINS
        .iter()
        .any(|d| domain == *d || domain.ends_with(&format!(".{d}")));
    if in_restricted_domain || RESTRICTED_LABELS.contains(&key) {
        return Some(format!(
            "label {key:?} is restricted: it would interfere with provisioning; use a well-known \
             label ({}) or a custom label outside the domains {}",
            WELL_KNOWN_LABELS.join(", "),
            RESTRICTED_LABEL_DOMAINS.join(", ")
        ));
    }
    None
}

const NAME_MAX: usize = 63;
const SUBDOMAIN_MAX: usize = 253;

fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
        && b.iter()
            .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// Checks a DNS-1123 subdomain (lowercase labels joined by dots, at most 253 characters).
pub fn check_dns_subdomain(s: &str) -> Result<(), String> {
    if s.len() > SUBDOMAIN_MAX {
        return Err(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    };
    if s.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character"
                .into(),
        )
    }
}

/// Checks a Kubernetes qualified name (`[prefix/]name`), as label and taint keys must be.
pub fn check_qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split('/').collect::<Vec<_>>()[..] {
        [name] => (None, name),
        [prefix, name] => (Some(prefix), name),
        _ => {
            return Err(
                "a qualified name must be a name with an optional DNS subdomain prefix \
                        and '/' (e.g. 'example.com/MyName')"
                    .into(),
            );
        }
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("prefix part must be non-empty".into());
        }
        check_dns_subdomain(prefix).map_err(|e| format!("prefix part {e}"))?;
    }
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    if name.len() > NAME_MAX {
        return Err(format!(
            "name part must be no more than {NAME_MAX} characters"
        ));
    }
    if !is_name_part(name) {
        return Err(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and \
                    must start and end with an alphanumeric character"
                .into(),
        );
    }
    Ok(())
}

/// Checks a label value (empty, or at most 63 alphanumerics, '-', '_' and '.', starting and
/// ending with an alphanumeric).
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.len() > NAME_MAX {
        return Err(format!("must be no more than {NAME_MAX} characters"));
    }
    if !value.is_empty() && !is_name_part(value) {
        return Err(
            "a valid label must be an empty string or consist of alphanumeric \
                    characters, '-', '_' or '.', and must start and end with an alphanumeric \
                    character"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in [
            "Test",
            "test.com/Test",
            "test.com.com/test",
            "key-only",
            "a",
        ] {
            assert_eq!(check_qualified_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "test.com.com}",
            "Test.com/test",
            "test/test/test",
            "test/",
            "/test",
            "",
            "spaces are not allowed",
        ] {
            assert!(check_qualified_name(bad).is_err(), "{bad}");
        }
        let long = format!("test.com.test/test-{}", "a".repeat(250));
        assert!(check_qualified_name(&long).is_err());
        let long_prefix = format!("test.com.test.{}/test", "a".repeat(250));
        assert!(check_qualified_name(&long_prefix).is_err());
    }

    #[test]
    fn label_values() {
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("m5.large").is_ok());
        assert!(check_label_value("/ is not allowed").is_err());
        assert!(check_label_value(&"a".repeat(64)).is_err());
        assert!(check_label_value("-a").is_err());
    }

    #[test]
    fn restricted_labels() {
        assert!(restricted_label_reason(NODE_POOL_LABEL).is_none());
        assert!(restricted_label_reason(CAPACITY_TYPE_LABEL).is_none());
        assert!(restricted_label_reason("karpenter.sh/unknown").is_some());
        assert!(restricted_label_reason("sub.karpenter.sh/unknown").is_some());
        assert!(restricted_label_reason(HOSTNAME_LABEL).is_some());
        assert!(restricted_label_reason("kubernetes.io/custom").is_none());
        assert!(restricted_label_reason("notkarpenter.sh/x").is_none());
    }

    #[test]
    fn normalization() {
        assert_eq!(normalize_label("beta.kubernetes.io/arch"), ARCH_LABEL);
        assert_eq!(
            normalize_label("failure-domain.beta.kubernetes.io/zone"),
            ZONE_LABEL
        );
        assert_eq!(normalize_label("example.com/x"), "example.com/x");
        assert_eq!(
            node_class_label_key("karpenter.kwok.sh", "KWOKNodeClass"),
            "karpenter.kwok.sh/kwoknodeclass"
        );
    }
}
