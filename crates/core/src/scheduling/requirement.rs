//! One label requirement as a set of allowed values: a finite set (`In`), the complement of a
//! finite set (`NotIn`, `Exists`), optionally bounded by integers (`Gt`, `Lt`, `Gte`, `Lte`).
//! Intersections of requirements are exact, so the scheduler can narrow a node's labels as pods
//! are added and know when nothing is left.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use karpenter_api::labels::normalize_label;
use karpenter_api::{NodeSelectorRequirementWithMinValues, Operator};

/// The set of values a label may take.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    /// When true the allowed set is everything except `values`.
    complement: bool,
    values: ValueSet,
    /// Inclusive integer bounds; a value outside them (or not an integer) is not allowed.
    gte: Option<i64>,
    lte: Option<i64>,
    min_values: Option<i32>,
}

impl Requirement {
    /// A requirement from an operator and its values, as written in a node selector. The key is
    /// normalized (`beta.kubernetes.io/arch` means `kubernetes.io/arch`). A numeric operator with
    /// a value that is not an integer allows nothing.
    pub fn new<S: AsRef<str>>(key: &str, operator: Operator, values: &[S]) -> Self {
        Self::with_min_values(key, operator, values, None)
    }

    /// Like [`Requirement::new`], with the `minValues` flexibility.
    pub fn with_min_values<S: AsRef<str>>(
        key: &str,
        operator: Operator,
        values: &[S],
        min_values: Option<i32>,
    ) -> Self {
        let key = normalize_label(key).to_string();
        let set = || values.iter().map(|v| v.as_ref().to_string()).collect();
        let mut r = Self {
            key,
            complement: true,
            values: ValueSet::default(),
            gte: None,
            lte: None,
            min_values,
        };
        let bound = values.first().and_then(|v| v.as_ref().parse::<i64>().ok());
        match operator {
            Operator::In => {
                r.complement = false;
                r.values = set();
            }
            Operator::NotIn => r.values = set(),
            Operator::Exists => {}
            Operator::DoesNotExist => r.complement = false,
            Operator::Gt => r.gte = bound.and_then(|n| n.checked_add(1)),
            Operator::Lt => r.lte = bound.and_then(|n| n.checked_sub(1)),
            Operator::Gte => r.gte = bound,
            Operator::Lte => r.lte = bound,
        }
        if operator.is_numeric() && r.gte.is_none() && r.lte.is_none() {
            // Unparseable, or Gt the largest integer: nothing qualifies.
            r.complement = false;
        }
        r
    }

    /// A requirement read from a NodePool or NodeClaim.
    pub fn from_node_selector(r: &NodeSelectorRequirementWithMinValues) -> Self {
        Self::with_min_values(&r.key, r.operator, &r.values, r.min_values)
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The `minValues` flexibility, if any.
    pub fn min_values(&self) -> Option<i32> {
        self.min_values
    }

    /// The inclusive lower bound, if any.
    pub fn gte(&self) -> Option<i64> {
        self.gte
    }

    /// The inclusive upper bound, if any.
    pub fn lte(&self) -> Option<i64> {
        self.lte
    }

    /// Whether the allowed set is everything except [`Requirement::values`].
    pub fn is_complement(&self) -> bool {
        self.complement
    }

    /// The listed values (allowed for `In`, excluded for `NotIn`), sorted.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &str> {
        self.values.iter().map(String::as_str)
    }

    /// The operator that describes the set (bounded sets read as `Exists`).
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    /// How many values are allowed; complements count as `i64::MAX` less their exclusions.
    pub fn len(&self) -> i64 {
        if self.complement {
            i64::MAX - self.values.len() as i64
        } else {
            self.values.len() as i64
        }
    }

    /// Whether no value is allowed (the label must be absent).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn within_bounds(&self, value: &str) -> bool {
        within(value, self.gte, self.lte)
    }

    /// Whether `value` is allowed.
    pub fn has(&self, value: &str) -> bool {
        self.values.contains(value) != self.complement && self.within_bounds(value)
    }

    /// A value the requirement allows, chosen deterministically (the smallest), or `None` when
    /// it allows none.
    pub fn any(&self) -> Option<String> {
        match self.operator() {
            Operator::In => self.values.first().cloned(),
            Operator::NotIn | Operator::Exists => {
                let (low, high) = (self.gte.unwrap_or(0), self.lte.unwrap_or(i64::MAX));
                (low..=high)
                    .map(|n| n.to_string())
                    .find(|v| !self.values.contains(v))
            }
            _ => None,
        }
    }

    /// The values both requirements allow. `minValues` takes the larger of the two.
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let gte = max_opt(self.gte, other.gte);
        let lte = min_opt(self.lte, other.lte);
        let min_values = max_opt(self.min_values, other.min_values);
        if let (Some(g), Some(l)) = (gte, lte)
            && g > l
        {
            return Self::does_not_exist(&self.key, min_values);
        }
        let keep = |v: &String| within(v, gte, lte);
        let values = match (self.complement, other.complement) {
            (true, true) => self.values.merge(&other.values, Merge::Union, keep),
            (true, false) => other.values.merge(&self.values, Merge::Difference, keep),
            (false, true) => self.values.merge(&other.values, Merge::Difference, keep),
            (false, false) => self.values.merge(&other.values, Merge::Intersection, keep),
        };
        let (gte, lte) = if complement { (gte, lte) } else { (None, None) };
        Requirement {
            key: self.key.clone(),
            complement,
            values,
            gte,
            lte,
            min_values,
        }
    }

    /// Whether some value is allowed by both, without building the intersection.
    pub fn intersects(&self, other: &Requirement) -> bool {
        let gte = max_opt(self.gte, other.gte);
        let lte = min_opt(self.lte, other.lte);
        if let (Some(g), Some(l)) = (gte, lte)
            && g > l
        {
            return false;
        }
        match (self.complement, other.complement) {
            (true, true) => true,
            (true, false) => other
                .values
                .iter()
                .any(|v| !self.values.contains(v) && within(v, gte, lte)),
            (false, true) => self
                .values
                .iter()
                .any(|v| !other.values.contains(v) && within(v, gte, lte)),
            (false, false) => self
                .values
                .iter()
                .any(|v| other.values.contains(v) && within(v, gte, lte)),
        }
    }

    /// The requirement as it is written in a NodeClaim: bounded sets become `Gte`/`Lte` (both
    /// when both bounds are set), everything else keeps its operator.
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirementWithMinValues> {
        let entry = |operator, values: Vec<String>| NodeSelectorRequirementWithMinValues {
            key: self.key.clone(),
            operator,
            values,
            min_values: self.min_values,
        };
        let mut out = Vec::new();
        if self.complement && (self.gte.is_some() || self.lte.is_some()) {
            if let Some(g) = self.gte {
                out.push(entry(Operator::Gte, vec![g.to_string()]));
            }
            if let Some(l) = self.lte {
                out.push(entry(Operator::Lte, vec![l.to_string()]));
            }
            if !self.values.is_empty() {
                out.push(entry(
                    Operator::NotIn,
                    self.values.iter().cloned().collect(),
                ));
            }
            return out;
        }
        let values = match self.operator() {
            Operator::In | Operator::NotIn => self.values.iter().cloned().collect(),
            _ => Vec::new(),
        };
        out.push(entry(self.operator(), values));
        out
    }

    fn does_not_exist(key: &str, min_values: Option<i32>) -> Self {
        Self {
            key: key.to_string(),
            complement: false,
            values: ValueSet::default(),
            gte: None,
            lte: None,
            min_values,
        }
    }
}

/// A requirement's listed values: sorted and distinct in one allocation. A node's labels
/// become one single-valued requirement each, and a tree set would allocate a node of eleven
/// slots for every one of them (a quarter of a kilobyte per label of every existing node).
#[derive(Clone, Default, PartialEq, Eq)]
struct ValueSet(Vec<String>);

/// Which values of two sets [`ValueSet::merge`] keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Merge {
    Union,
    Intersection,
    /// The first set's values that the second does not have.
    Difference,
}

impl ValueSet {
    fn contains(&self, value: &str) -> bool {
        self.0.binary_search_by(|v| v.as_str().cmp(value)).is_ok()
    }

    fn iter(&self) -> std::slice::Iter<'_, String> {
        self.0.iter()
    }

    fn first(&self) -> Option<&String> {
        self.0.first()
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The union, intersection or difference of two sets, less the values `keep` refuses.
    fn merge(&self, other: &ValueSet, how: Merge, keep: impl Fn(&String) -> bool) -> ValueSet {
        let (a, b) = (&self.0, &other.0);
        // A few values against many (a pod's zone against a NodePool's instance types): look
        // them up rather than walk the long list.
        if how != Merge::Union && a.len() * 16 < b.len() {
            let wanted = how == Merge::Intersection;
            return ValueSet(
                a.iter()
                    .filter(|v| other.contains(v) == wanted && keep(v))
                    .cloned()
                    .collect(),
            );
        }
        if how == Merge::Intersection && b.len() * 16 < a.len() {
            return ValueSet(
                b.iter()
                    .filter(|v| self.contains(v) && keep(v))
                    .cloned()
                    .collect(),
            );
        }
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        let mut push = |v: &String| {
            if keep(v) {
                out.push(v.clone());
            }
        };
        while i < a.len() && j < b.len() {
            match a[i].cmp(&b[j]) {
                Ordering::Less => {
                    if how != Merge::Intersection {
                        push(&a[i]);
                    }
                    i += 1;
                }
                Ordering::Greater => {
                    if how == Merge::Union {
                        push(&b[j]);
                    }
                    j += 1;
                }
                Ordering::Equal => {
                    if how != Merge::Difference {
                        push(&a[i]);
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        if how != Merge::Intersection {
            a[i..].iter().for_each(&mut push);
        }
        if how == Merge::Union {
            b[j..].iter().for_each(&mut push);
        }
        out.shrink_to_fit();
        ValueSet(out)
    }
}

impl FromIterator<String> for ValueSet {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Self {
        let mut values: Vec<String> = iter.into_iter().collect();
        values.sort_unstable();
        values.dedup();
        values.shrink_to_fit();
        ValueSet(values)
    }
}

/// Hashes as the `BTreeSet<String>` it replaces: the length, then the values in order.
impl Hash for ValueSet {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

/// Prints as a set, as before.
impl fmt::Debug for ValueSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(&self.0).finish()
    }
}

fn within(value: &str, gte: Option<i64>, lte: Option<i64>) -> bool {
    if gte.is_none() && lte.is_none() {
        return true;
    }
    // Bounds only admit integers.
    value
        .parse::<i64>()
        .is_ok_and(|n| gte.is_none_or(|g| n >= g) && lte.is_none_or(|l| n <= l))
}

fn max_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn min_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.operator();
        write!(f, "{} {}", self.key, op.as_str())?;
        if matches!(op, Operator::In | Operator::NotIn) {
            let shown: Vec<&str> = self.values.iter().take(5).map(String::as_str).collect();
            write!(f, " [{}", shown.join(" "))?;
            if self.values.len() > 5 {
                write!(f, " and {} others", self.values.len() - 5)?;
            }
            f.write_str("]")?;
        }
        if let Some(g) = self.gte {
            write!(f, " >={g}")?;
        }
        if let Some(l) = self.lte {
            write!(f, " <={l}")?;
        }
        if let Some(m) = self.min_values {
            write!(f, " minValues {m}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod requirement_cases;

#[cfg(test)]
mod tests {
    use super::*;

    /// What a table row expects: a named fixture, or the fields of a requirement.
    pub(super) enum Expected {
        Named(bool, &'static str),
        Raw {
            complement: bool,
            values: &'static [&'static str],
            gte: Option<i64>,
            lte: Option<i64>,
            min_values: Option<i32>,
        },
    }

    /// Upstream's fixtures: `flexible` ones carry minValues (the number of values, at least 1).
    fn fixture(flexible: bool, name: &str) -> Requirement {
        let (op, values): (Operator, &[&str]) = match name {
            "exists" => (Operator::Exists, &[]),
            "doesNotExist" => (Operator::DoesNotExist, &[]),
            "inA" => (Operator::In, &["A"]),
            "inB" => (Operator::In, &["B"]),
            "inAB" => (Operator::In, &["A", "B"]),
            "notInA" => (Operator::NotIn, &["A"]),
            "in1" => (Operator::In, &["1"]),
            "in9" => (Operator::In, &["9"]),
            "in19" => (Operator::In, &["1", "9"]),
            "notIn12" => (Operator::NotIn, &["1", "2"]),
            "greaterThan1" => (Operator::Gt, &["1"]),
            "greaterThan9" => (Operator::Gt, &["9"]),
            "lessThan1" => (Operator::Lt, &["1"]),
            "lessThan9" => (Operator::Lt, &["9"]),
            other => panic!("unknown fixture {other}"),
        };
        let min_values = flexible.then_some(match name {
            "inAB" | "in19" | "notIn12" => 2,
            _ => 1,
        });
        Requirement::with_min_values("key", op, values, min_values)
    }

    fn expected(e: &Expected) -> Requirement {
        match e {
            Expected::Named(flexible, name) => fixture(*flexible, name),
            Expected::Raw {
                complement,
                values,
                gte,
                lte,
                min_values,
            } => Requirement {
                key: "key".into(),
                complement: *complement,
                values: values.iter().map(|v| v.to_string()).collect(),
                gte: *gte,
                lte: *lte,
                min_values: *min_values,
            },
        }
    }

    #[test]
    fn upstream_intersection_table() {
        let mut failures = Vec::new();
        for (fa, a, fb, b, e) in super::requirement_cases::INTERSECTIONS {
            let got = fixture(*fa, a).intersection(&fixture(*fb, b));
            let want = expected(e);
            if got != want {
                failures.push(format!(
                    "{a}{} ∩ {b}{}: got {got}, want {want}",
                    if *fa { "(min)" } else { "" },
                    if *fb { "(min)" } else { "" }
                ));
            }
            // intersects() must agree with the materialized intersection.
            if got.is_empty() == fixture(*fa, a).intersects(&fixture(*fb, b)) {
                failures.push(format!("{a} intersects {b} disagrees with {got}"));
            }
        }
        assert!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn few_values_against_many_intersect_as_two_lists_of_equal_length_do() {
        let many: Vec<String> = (0..100).map(|i| format!("v{i:02}")).collect();
        let few = ["v03", "v17", "x"];
        let cases = [
            (Operator::In, Operator::In),
            (Operator::In, Operator::NotIn),
            (Operator::NotIn, Operator::In),
            (Operator::NotIn, Operator::NotIn),
        ];
        for (a, b) in cases {
            for (x, y) in [
                (
                    Requirement::new("k", a, &few),
                    Requirement::new("k", b, &many),
                ),
                (
                    Requirement::new("k", a, &many),
                    Requirement::new("k", b, &few),
                ),
            ] {
                let got = x.intersection(&y);
                let allowed = |v: &str| x.has(v) && y.has(v);
                for v in many.iter().map(String::as_str).chain(few).chain(["y"]) {
                    assert_eq!(got.has(v), allowed(v), "{x} ∩ {y} has {v}");
                }
                let listed: Vec<&str> = got.values().collect();
                let mut sorted = listed.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(listed, sorted, "{x} ∩ {y} lists sorted, distinct values");
            }
        }
    }

    #[test]
    fn upstream_has_table() {
        for (flexible, name, value, want) in super::requirement_cases::HAS {
            assert_eq!(
                fixture(*flexible, name).has(value),
                *want,
                "{name}.has({value})"
            );
        }
    }

    #[test]
    fn upstream_operator_len_and_string_tables() {
        for (name, op) in super::requirement_cases::OPERATORS {
            assert_eq!(fixture(false, name).operator(), *op, "{name}");
        }
        for (name, len) in super::requirement_cases::LENGTHS {
            assert_eq!(fixture(false, name).len(), *len, "{name}");
        }
        for (name, s) in super::requirement_cases::STRINGS {
            assert_eq!(fixture(false, name).to_string(), *s, "{name}");
        }
        let gt1 = fixture(false, "greaterThan1");
        assert_eq!(
            gt1.intersection(&fixture(false, "lessThan9")).to_string(),
            "key Exists >=2 <=8"
        );
        assert_eq!(
            fixture(false, "greaterThan9")
                .intersection(&fixture(false, "lessThan1"))
                .to_string(),
            "key DoesNotExist"
        );
    }

    #[test]
    fn upstream_node_selector_table() {
        for (flexible, name, op, values, min_values) in
            super::requirement_cases::NODE_SELECTOR_REQUIREMENTS
        {
            let written = fixture(*flexible, name).to_node_selector_requirements();
            let want = NodeSelectorRequirementWithMinValues {
                key: "key".into(),
                operator: *op,
                values: values.iter().map(|v| v.to_string()).collect(),
                min_values: *min_values,
            };
            assert_eq!(written, vec![want], "{name}");
        }
        // Both bounds are written as two entries.
        let both = fixture(false, "greaterThan1").intersection(&fixture(false, "lessThan9"));
        let ops: Vec<Operator> = both
            .to_node_selector_requirements()
            .iter()
            .map(|r| r.operator)
            .collect();
        assert_eq!(ops, [Operator::Gte, Operator::Lte]);
    }

    #[test]
    fn gte_and_lte() {
        let gte2 = Requirement::new("key", Operator::Gte, &["2"]);
        let lte8 = Requirement::new("key", Operator::Lte, &["8"]);
        for (v, want) in [
            ("2", true),
            ("3", true),
            ("100", true),
            ("1", false),
            ("0", false),
        ] {
            assert_eq!(gte2.has(v), want, "gte2 {v}");
        }
        for (v, want) in [
            ("8", true),
            ("7", true),
            ("0", true),
            ("9", false),
            ("10", false),
        ] {
            assert_eq!(lte8.has(v), want, "lte8 {v}");
        }
        let both = gte2.intersection(&lte8);
        for (v, want) in [
            ("2", true),
            ("5", true),
            ("8", true),
            ("1", false),
            ("9", false),
        ] {
            assert_eq!(both.has(v), want, "both {v}");
        }
        let gt1 = Requirement::new("key", Operator::Gt, &["1"]);
        let lt9 = Requirement::new("key", Operator::Lt, &["9"]);
        assert_eq!(gte2, gt1, "Gte 2 is Gt 1");
        assert_eq!(lte8, lt9, "Lte 8 is Lt 9");
        // Redundant bounds collapse to the tighter one, written canonically.
        let cases = [
            (Operator::Gt, "4", Operator::Gte, "5", Operator::Gte, "5"),
            (Operator::Gt, "5", Operator::Gte, "5", Operator::Gte, "6"),
            (Operator::Gt, "3", Operator::Gte, "6", Operator::Gte, "6"),
            (Operator::Lt, "5", Operator::Lte, "5", Operator::Lte, "4"),
            (Operator::Lt, "9", Operator::Lte, "5", Operator::Lte, "5"),
        ];
        for (op_a, a, op_b, b, want_op, want) in cases {
            let got = Requirement::new("key", op_a, &[a]).intersection(&Requirement::new(
                "key",
                op_b,
                &[b],
            ));
            let written = got.to_node_selector_requirements();
            assert_eq!(
                (written[0].operator, written[0].values[0].as_str()),
                (want_op, want),
                "{op_a:?} {a} ∩ {op_b:?} {b}"
            );
        }
        assert!(Requirement::new("key", Operator::Gte, &["0"]).has("0"));
        assert!(!Requirement::new("key", Operator::Gte, &["0"]).has("-1"));
        assert!(!Requirement::new("key", Operator::Lte, &["0"]).has("1"));
        let gt_max = Requirement::new("key", Operator::Gt, &[i64::MAX.to_string()]);
        assert_eq!(
            (gt_max.operator(), gt_max.len()),
            (Operator::DoesNotExist, 0)
        );
        assert_eq!(
            Requirement::new("key", Operator::Gt, &["a"]).operator(),
            Operator::DoesNotExist
        );
    }

    #[test]
    fn any_returns_an_allowed_value() {
        for name in [
            "exists",
            "inA",
            "inAB",
            "notInA",
            "in19",
            "notIn12",
            "greaterThan1",
            "greaterThan9",
            "lessThan1",
            "lessThan9",
        ] {
            let r = fixture(false, name);
            let v = r.any().unwrap_or_else(|| panic!("{name} allows something"));
            assert!(r.has(&v), "{name}: {v}");
        }
        assert_eq!(fixture(false, "doesNotExist").any(), None);
        assert_eq!(fixture(false, "lessThan1").any().as_deref(), Some("0"));
        assert_eq!(
            Requirement::new("key", Operator::Gte, &["5"])
                .any()
                .as_deref(),
            Some("5")
        );
    }

    #[test]
    fn keys_are_normalized() {
        for (old, new) in karpenter_api::labels::NORMALIZED_LABELS {
            assert_eq!(Requirement::new(old, Operator::In, &["test"]).key(), new);
        }
    }
}
