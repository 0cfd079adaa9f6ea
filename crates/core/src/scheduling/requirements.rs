//! A set of requirements keyed by label: what a node's labels must satisfy, as the
//! intersection of everything that constrains it (NodePool, instance type, pods).

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::fmt;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Pod, PodSpec};
use karpenter_api::labels::is_well_known_label;
use karpenter_api::{NodeSelectorRequirementWithMinValues, Operator};

use super::Requirement;

/// Requirements by label key; a key without a requirement allows anything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Requirements(BTreeMap<String, Requirement>);

/// Which keys may be required by the incoming side although the receiving side does not
/// define them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllowUndefined<'a> {
    /// Every key must be defined (an existing node's labels are all there is).
    Nothing,
    /// Well-known labels (zone, arch, capacity type, …) and the provider's own (listed) may be
    /// undefined: the instance type decides them later.
    WellKnownLabels(&'a [String]),
}

impl AllowUndefined<'_> {
    fn allows(&self, key: &str) -> bool {
        match self {
            AllowUndefined::Nothing => false,
            AllowUndefined::WellKnownLabels(provider) => {
                is_well_known_label(key) || provider.iter().any(|k| k == key)
            }
        }
    }
}

/// Why two sets of requirements conflict.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Incompatible {
    /// The incoming side requires a custom label the receiving side never sets.
    #[error("label {0:?} does not have known values")]
    Undefined(String),
    /// Both sides constrain a key and no value satisfies both.
    #[error("key {key}, {incoming} not in {existing}")]
    NoIntersection {
        /// The label key.
        key: String,
        /// The incoming requirement.
        incoming: String,
        /// The receiving side's requirement.
        existing: String,
    },
}

fn is_negative(r: &Requirement) -> bool {
    matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist)
}

/// Whether two requirements on one key can both hold: some value satisfies both, or both are
/// negative (`NotIn`, `DoesNotExist`) and the label can simply be absent.
pub fn agree(a: &Requirement, b: &Requirement) -> bool {
    a.intersects(b) || (is_negative(a) && is_negative(b))
}

/// The labels a NodeClaim's node is known to carry before its instance is: the claim's own
/// labels, and a value for every requirement key they do not set (see
/// [`Requirements::labels`]).
/// `provider_labels` are the cloud provider's well-known labels, which its instances decide.
pub fn node_claim_labels<S: AsRef<str>>(
    claim: &karpenter_api::NodeClaim,
    provider_labels: &[S],
) -> BTreeMap<String, String> {
    let mut labels =
        Requirements::from_node_claim(&claim.spec.requirements).labels(provider_labels);
    labels.extend(claim.metadata.labels.clone().unwrap_or_default());
    labels
}

/// Keys that exist only to simulate DaemonSet scheduling on a node to be (upstream's
/// `schedulingSimulationKeys`): a node never takes them from a requirement.
const SIMULATION_KEYS: [&str; 2] = ["karpenter.sh/registered", "karpenter.sh/initialized"];

/// Whether a node's label `key` may come from a requirement the node was launched with, as
/// upstream's `resolveCustomLabelsFromRequirements`: any key but the hostname (a restricted
/// label) and the simulation keys (a well-known label is decided apart). Keys in the
/// `kubernetes.io` and `k8s.io` domains are labels like any other.
fn labelable(key: &str) -> bool {
    !karpenter_api::labels::RESTRICTED_LABELS.contains(&key) && !SIMULATION_KEYS.contains(&key)
}

impl Requirements {
    /// No requirements.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requirements that labels equal these values (`In [value]`).
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        let mut r = Self::new();
        for (k, v) in labels {
            r.add(Requirement::new(k, Operator::In, &[v]));
        }
        r
    }

    /// Requirements from Kubernetes node selector expressions. An operator Kubernetes does not
    /// know allows nothing.
    pub fn from_node_selector(expressions: &[NodeSelectorRequirement]) -> Self {
        let mut r = Self::new();
        for e in expressions {
            let op = Operator::ALL
                .into_iter()
                .find(|op| op.as_str() == e.operator)
                .unwrap_or(Operator::DoesNotExist);
            r.add(Requirement::new(
                &e.key,
                op,
                e.values.as_deref().unwrap_or_default(),
            ));
        }
        r
    }

    /// Requirements from a NodePool's or NodeClaim's requirement list.
    pub fn from_node_claim(requirements: &[NodeSelectorRequirementWithMinValues]) -> Self {
        let mut r = Self::new();
        for req in requirements {
            r.add(Requirement::from_node_selector(req));
        }
        r
    }

    /// What a pod requires of its node: its nodeSelector, the first required node-affinity
    /// term (OR-ed terms are relaxed away one at a time), and — when `with_preferences` — its
    /// heaviest preferred node-affinity term, treated as required until relaxed.
    pub fn for_pod(pod: &Pod, with_preferences: bool) -> Self {
        Self::for_spec(pod.spec.as_ref(), with_preferences)
    }

    /// [`Requirements::for_pod`] of a pod with this spec.
    pub fn for_spec(spec: Option<&PodSpec>, with_preferences: bool) -> Self {
        let mut r = spec
            .and_then(|s| s.node_selector.as_ref())
            .map(Self::from_labels)
            .unwrap_or_default();
        let Some(affinity) = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
        else {
            return r;
        };
        if with_preferences
            && let Some(preferred) = affinity.preferred_during_scheduling_ignored_during_execution.as_ref()
            // The first of the heaviest, as a stable sort by weight would pick.
            && let Some(heaviest) = preferred.iter().rev().max_by_key(|p| p.weight)
        {
            r.add_all(&Self::from_node_selector(
                heaviest
                    .preference
                    .match_expressions
                    .as_deref()
                    .unwrap_or_default(),
            ));
        }
        if let Some(term) = affinity
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .and_then(|s| s.node_selector_terms.first())
        {
            r.add_all(&Self::from_node_selector(
                term.match_expressions.as_deref().unwrap_or_default(),
            ));
        }
        r
    }

    /// Narrows the requirement on `requirement`'s key to the intersection.
    pub fn add(&mut self, requirement: Requirement) {
        match self.0.entry(requirement.key().to_string()) {
            Entry::Occupied(mut e) => {
                let narrowed = e.get().intersection(&requirement);
                e.insert(narrowed);
            }
            Entry::Vacant(e) => {
                e.insert(requirement);
            }
        }
    }

    /// Narrows by every requirement of `other`.
    pub fn add_all(&mut self, other: &Requirements) {
        for r in other.0.values() {
            self.add(r.clone());
        }
    }

    /// The requirement on `key`, if any (no requirement means anything is allowed).
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.0.get(key)
    }

    /// Removes the requirement on `key`.
    pub fn remove(&mut self, key: &str) -> Option<Requirement> {
        self.0.remove(key)
    }

    /// Whether `key` is constrained.
    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Whether a label `key=value` is allowed.
    pub fn allows(&self, key: &str, value: &str) -> bool {
        self.0.get(key).is_none_or(|r| r.has(value))
    }

    /// The requirements, by key.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> {
        self.0.values()
    }

    /// How many keys are constrained.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing is constrained.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks that `incoming` (a pod's requirements) can be met here: every custom key it
    /// requires is defined here (unless allowed undefined), and every shared key intersects.
    pub fn compatible(
        &self,
        incoming: &Requirements,
        allow: AllowUndefined<'_>,
    ) -> Result<(), Incompatible> {
        for (key, r) in &incoming.0 {
            let allowed_undefined = allow.allows(key);
            if !allowed_undefined && !self.has(key) && !is_negative(r) {
                return Err(Incompatible::Undefined(key.clone()));
            }
        }
        self.intersects(incoming)
    }

    /// Checks that every key constrained on both sides has a value both allow (two negative
    /// requirements, such as `NotIn` and `DoesNotExist`, always agree: the label can be absent).
    pub fn intersects(&self, other: &Requirements) -> Result<(), Incompatible> {
        let (small, large, swapped) = if self.0.len() <= other.0.len() {
            (self, other, false)
        } else {
            (other, self, true)
        };
        for (key, a) in &small.0 {
            let Some(b) = large.0.get(key) else { continue };
            let agree = agree(a, b);
            if !agree {
                let (existing, incoming) = if swapped { (b, a) } else { (a, b) };
                return Err(Incompatible::NoIntersection {
                    key: key.clone(),
                    incoming: incoming.to_string(),
                    existing: existing.to_string(),
                });
            }
        }
        Ok(())
    }

    /// The labels a node launched with these requirements carries, as upstream's
    /// `Requirements.Labels()`: a well-known label (karpenter's, or one of the provider's
    /// `provider_labels`) when pinned to one value (otherwise the instance decides it), and for
    /// any other key it may set, a value the requirement allows —
    /// the first of an `In`, or the smallest number an `Exists` or `NotIn` allows. So a node of
    /// a NodePool requiring `team In [a, b]` or `team Exists` carries the label, satisfies its
    /// NodePool (no requirement drift) and takes the pods that require it.
    pub fn labels<S: AsRef<str>>(&self, provider_labels: &[S]) -> BTreeMap<String, String> {
        self.0
            .iter()
            .filter_map(|(k, r)| {
                let well_known =
                    is_well_known_label(k) || provider_labels.iter().any(|l| l.as_ref() == k);
                let value = if well_known {
                    (r.operator() == Operator::In && r.values().len() == 1)
                        .then(|| r.values().next().map(str::to_string))
                        .flatten()
                } else if labelable(k) {
                    r.any()
                } else {
                    None
                };
                value.map(|v| (k.clone(), v))
            })
            .collect()
    }

    /// The labels these requirements pin to one value (`In [v]`).
    pub fn single_valued_labels(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .filter(|(_, r)| r.operator() == Operator::In && r.values().len() == 1)
            .filter_map(|(k, r)| r.values().next().map(|v| (k.clone(), v.to_string())))
            .collect()
    }

    /// The requirements as written in a NodeClaim.
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirementWithMinValues> {
        self.0
            .values()
            .flat_map(Requirement::to_node_selector_requirements)
            .collect()
    }
}

impl FromIterator<Requirement> for Requirements {
    fn from_iter<I: IntoIterator<Item = Requirement>>(iter: I) -> Self {
        let mut r = Self::new();
        for req in iter {
            r.add(req);
        }
        r
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.values().map(ToString::to_string).collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorTerm, PodSpec, PreferredSchedulingTerm,
    };

    fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
        Requirement::new(key, op, values)
    }

    fn reqs(items: &[(&str, Operator, &[&str])]) -> Requirements {
        items.iter().map(|(k, op, v)| req(k, *op, v)).collect()
    }

    const ZONE: &str = "topology.kubernetes.io/zone";

    #[test]
    fn labels_take_a_value_for_every_key_a_node_may_carry() {
        use Operator::*;
        let cases: &[(&str, Operator, &[&str], Option<&str>)] = &[
            // Custom keys: any value the requirement allows (upstream's Any()).
            ("example.com/team", In, &["b", "a"], Some("a")),
            ("example.com/team", In, &["a"], Some("a")),
            ("example.com/team", Exists, &[], Some("0")),
            ("example.com/team", NotIn, &["0", "1"], Some("2")),
            ("example.com/team", DoesNotExist, &[], None),
            ("example.com/size", Gt, &["4"], Some("5")),
            // A provider's well-known label is decided by the instance unless pinned.
            ("example.com/family", In, &["m5", "c5"], None),
            ("example.com/family", In, &["m5"], Some("m5")),
            ("node.kubernetes.io/pool", In, &["x", "y"], Some("x")),
            // Well-known labels: only when pinned, else the instance decides.
            (ZONE, In, &["z1"], Some("z1")),
            (ZONE, In, &["z1", "z2"], None),
            (ZONE, Exists, &[], None),
            // Restricted and simulation-only keys: never from a requirement.
            ("kubernetes.io/hostname", In, &["h"], None),
            ("karpenter.sh/initialized", In, &["true"], None),
            ("karpenter.sh/registered", In, &["true"], None),
            // Kubernetes domains are custom keys like any other (upstream's suite: "label in
            // the kubernetes domains").
            ("kubernetes.io/custom", Exists, &[], Some("0")),
            ("sub.k8s.io/custom", In, &["v"], Some("v")),
        ];
        for (key, op, values, want) in cases {
            let labels = reqs(&[(key, *op, values)]).labels(&["example.com/family"]);
            assert_eq!(
                labels.get(*key).map(String::as_str),
                *want,
                "{key} {op:?} {values:?}"
            );
            if let Some(v) = want {
                assert!(
                    reqs(&[(key, *op, values)]).get(key).unwrap().has(v),
                    "{key}: the value chosen must satisfy the requirement"
                );
            }
        }
    }

    #[test]
    fn compatibility_table() {
        use Operator::*;
        let node = reqs(&[(ZONE, In, &["a", "b"]), ("custom", In, &["x"])]);
        // (incoming, allow, compatible)
        let cases: Vec<(Requirements, AllowUndefined<'_>, bool)> = vec![
            (reqs(&[(ZONE, In, &["a"])]), AllowUndefined::Nothing, true),
            (reqs(&[(ZONE, In, &["c"])]), AllowUndefined::Nothing, false),
            (
                reqs(&[(ZONE, NotIn, &["a", "b"])]),
                AllowUndefined::Nothing,
                false,
            ),
            (
                reqs(&[("custom", Exists, &[])]),
                AllowUndefined::Nothing,
                true,
            ),
            (
                reqs(&[("custom", DoesNotExist, &[])]),
                AllowUndefined::Nothing,
                false,
            ),
            (
                reqs(&[("other", In, &["y"])]),
                AllowUndefined::Nothing,
                false,
            ),
            (
                reqs(&[("other", In, &["y"])]),
                AllowUndefined::WellKnownLabels(&[]),
                false,
            ),
            (
                reqs(&[("other", NotIn, &["y"])]),
                AllowUndefined::Nothing,
                true,
            ),
            (
                reqs(&[("other", DoesNotExist, &[])]),
                AllowUndefined::Nothing,
                true,
            ),
            (
                reqs(&[("kubernetes.io/arch", In, &["arm64"])]),
                AllowUndefined::Nothing,
                false,
            ),
            (
                reqs(&[("kubernetes.io/arch", In, &["arm64"])]),
                AllowUndefined::WellKnownLabels(&[]),
                true,
            ),
            (reqs(&[(ZONE, Exists, &[])]), AllowUndefined::Nothing, true),
            (
                reqs(&[(ZONE, DoesNotExist, &[])]),
                AllowUndefined::Nothing,
                false,
            ),
        ];
        for (incoming, allow, want) in cases {
            assert_eq!(
                node.compatible(&incoming, allow).is_ok(),
                want,
                "{incoming} against {node} ({allow:?})"
            );
        }
        // Two negative requirements agree even with no value in common.
        let a = reqs(&[("custom", DoesNotExist, &[])]);
        let b = reqs(&[("custom", NotIn, &["x"])]);
        assert!(a.intersects(&b).is_ok());
    }

    #[test]
    fn add_intersects() {
        let mut r = reqs(&[(ZONE, Operator::In, &["a", "b", "c"])]);
        r.add(req(ZONE, Operator::NotIn, &["b"]));
        assert_eq!(
            r.get(ZONE).unwrap().values().collect::<Vec<_>>(),
            ["a", "c"]
        );
        r.add(req(
            "failure-domain.beta.kubernetes.io/zone",
            Operator::In,
            &["c"],
        ));
        assert_eq!(
            r.single_valued_labels().get(ZONE).map(String::as_str),
            Some("c")
        );
        assert!(r.allows("anything", "goes"));
        assert!(!r.allows(ZONE, "a"));
    }

    fn term(key: &str, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: "In".into(),
                values: Some(values.iter().map(|s| s.to_string()).collect()),
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn pod_requirements() {
        let pod = Pod {
            spec: Some(PodSpec {
                node_selector: Some(
                    [("beta.kubernetes.io/arch".to_string(), "arm64".to_string())].into(),
                ),
                affinity: Some(Affinity {
                    node_affinity: Some(NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                            node_selector_terms: vec![term(ZONE, &["a", "b"]), term(ZONE, &["c"])],
                        }),
                        preferred_during_scheduling_ignored_during_execution: Some(vec![
                            PreferredSchedulingTerm {
                                weight: 1,
                                preference: term("custom", &["light"]),
                            },
                            PreferredSchedulingTerm {
                                weight: 10,
                                preference: term(ZONE, &["b"]),
                            },
                            PreferredSchedulingTerm {
                                weight: 10,
                                preference: term("custom", &["tie"]),
                            },
                        ]),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let strict = Requirements::for_pod(&pod, false);
        assert_eq!(
            strict.to_string(),
            "kubernetes.io/arch In [arm64], topology.kubernetes.io/zone In [a b]"
        );
        let preferred = Requirements::for_pod(&pod, true);
        assert_eq!(
            preferred.to_string(),
            "kubernetes.io/arch In [arm64], topology.kubernetes.io/zone In [b]",
            "the first heaviest preference applies"
        );
    }
}
