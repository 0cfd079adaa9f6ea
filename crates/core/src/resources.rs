//! Resource quantities as exact integers, and the resource lists of pods, nodes and instance
//! types. Every quantity is held in thousandths of its unit (millicores for `cpu`, millibytes
//! for `memory`), as Kubernetes' `MilliValue` does, so `100m` CPU and `1.5Gi` memory are both
//! exact and sums never drift.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Resource names with a fixed slot (the rest are "extended" resources such as GPUs).
pub const CPU: &str = "cpu";
/// Memory, in bytes.
pub const MEMORY: &str = "memory";
/// The number of pods a node can run; every pod requests one.
pub const PODS: &str = "pods";
/// Local ephemeral storage, in bytes.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// The NodePool limit on the number of nodes.
pub const NODES: &str = "nodes";

/// Why a quantity could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}: {reason}")]
pub struct QuantityError {
    input: String,
    reason: &'static str,
}

/// Parses a Kubernetes quantity (`"100m"`, `"1.5Gi"`, `"2"`, `"1e3"`, `"500k"`) into
/// thousandths of its unit, rounding up as Kubernetes does.
pub fn parse_milli(input: &str) -> Result<i64, QuantityError> {
    let err = |reason| QuantityError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    let (negative, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let number_len = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_len);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(err("expected a number"));
    }
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = format!("{whole}{fraction}");
    let mantissa: i128 = digits.parse().map_err(|_| err("number too large"))?;
    // value = mantissa * 10^exp10 * 2^exp2
    let mut exp10: i32 = -(fraction.len() as i32);
    let mut exp2: u32 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        other if other.starts_with(['e', 'E']) => {
            let exponent: i32 = other[1..].parse().map_err(|_| err("bad exponent"))?;
            exp10 += exponent;
        }
        _ => {
            return Err(err(
                "unknown suffix (use m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)",
            ));
        }
    }
    exp10 += 3; // to thousandths
    if !(-40..=40).contains(&exp10) {
        return Err(err("exponent out of range"));
    }
    let mut value = mantissa
        .checked_shl(exp2)
        .filter(|v| v >> exp2 == mantissa)
        .ok_or_else(|| err("too large"))?;
    if exp10 >= 0 {
        value = value
            .checked_mul(10i128.pow(exp10 as u32))
            .ok_or_else(|| err("too large"))?;
    } else {
        let divisor = 10i128.pow((-exp10) as u32);
        value = (value + divisor - 1) / divisor;
    }
    let value = i64::try_from(value).map_err(|_| err("too large"))?;
    Ok(if negative { -value } else { value })
}

/// Like [`parse_milli`], but a quantity too large for the representation becomes `i64::MAX`
/// (for limits, where "more than can be counted" means unlimited).
pub fn parse_milli_saturating(input: &str) -> Result<i64, QuantityError> {
    match parse_milli(input) {
        Err(e) if e.reason == "too large" => Ok(if input.trim_start().starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        }),
        other => other,
    }
}

/// Upper bounds on some resources (a NodePool's `limits`); resources without a bound are
/// unlimited. `nodes` counts nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits(Vec<(String, i64)>);

impl Limits {
    /// Reads a NodePool's limits.
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Result<Self, QuantityError> {
        list.iter()
            .map(|(n, q)| Ok((n.clone(), parse_milli_saturating(&q.0)?)))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// The first bounded resource that `capacity` exceeds.
    pub fn exceeded_by(&self, capacity: &Resources) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, limit)| n != NODES && capacity.get(n) > *limit)
            .map(|(n, _)| n.as_str())
    }

    /// Takes `used` off every bounded resource.
    pub fn subtract(&mut self, used: &Resources) {
        for (n, limit) in &mut self.0 {
            *limit = limit.saturating_sub(used.get(n));
        }
    }

    /// The bound on `name`, if any.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// Sets the bound on `name`.
    pub fn set(&mut self, name: &str, value: i64) {
        match self.0.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = value,
            None => self.0.push((name.to_string(), value)),
        }
    }
}

/// Formats thousandths of a unit the way Kubernetes prints a canonical quantity for `name`.
pub fn format_milli(name: &str, milli: i64) -> String {
    let binary = matches!(name, MEMORY | EPHEMERAL_STORAGE) || name.starts_with("hugepages-");
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let whole = milli / 1000;
    if binary && whole != 0 {
        for (suffix, shift) in [
            ("Ei", 60),
            ("Pi", 50),
            ("Ti", 40),
            ("Gi", 30),
            ("Mi", 20),
            ("Ki", 10),
        ] {
            if whole % (1i64 << shift) == 0 {
                return format!("{}{suffix}", whole >> shift);
            }
        }
    }
    whole.to_string()
}

/// A list of resource quantities. The four resources every pod and node has live in fixed
/// fields so the scheduler's hot path does no lookups; others are kept sorted by name.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// Millicores.
    pub cpu: i64,
    /// Millibytes.
    pub memory: i64,
    /// Thousandths of a pod.
    pub pods: i64,
    /// Millibytes.
    pub ephemeral_storage: i64,
    extended: Vec<(String, i64)>,
}

impl Resources {
    /// No resources.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a Kubernetes resource list.
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Result<Self, QuantityError> {
        let mut r = Self::new();
        for (name, q) in list {
            r.set(name, parse_milli(&q.0)?);
        }
        Ok(r)
    }

    /// Builds resources from `(name, quantity)` pairs; panics on a bad quantity, so only for
    /// literals in tests and catalogs.
    pub fn parse(pairs: &[(&str, &str)]) -> Self {
        let mut r = Self::new();
        for (name, q) in pairs {
            r.set(name, parse_milli(q).unwrap_or_else(|e| panic!("{e}")));
        }
        r
    }

    /// The quantity of `name` in thousandths (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu,
            MEMORY => self.memory,
            PODS => self.pods,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            _ => self
                .extended
                .binary_search_by(|(n, _)| n.as_str().cmp(name))
                .map_or(0, |i| self.extended[i].1),
        }
    }

    /// Sets the quantity of `name` in thousandths.
    pub fn set(&mut self, name: &str, milli: i64) {
        match name {
            CPU => self.cpu = milli,
            MEMORY => self.memory = milli,
            PODS => self.pods = milli,
            EPHEMERAL_STORAGE => self.ephemeral_storage = milli,
            _ => match self
                .extended
                .binary_search_by(|(n, _)| n.as_str().cmp(name))
            {
                Ok(i) => self.extended[i].1 = milli,
                Err(i) => self.extended.insert(i, (name.to_string(), milli)),
            },
        }
    }

    /// Every named quantity that is set, including zeros of extended resources.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        [
            (CPU, self.cpu),
            (MEMORY, self.memory),
            (PODS, self.pods),
            (EPHEMERAL_STORAGE, self.ephemeral_storage),
        ]
        .into_iter()
        .filter(|(_, v)| *v != 0)
        .chain(self.extended.iter().map(|(n, v)| (n.as_str(), *v)))
    }

    fn zip_with(&mut self, other: &Resources, f: impl Fn(i64, i64) -> i64) {
        self.cpu = f(self.cpu, other.cpu);
        self.memory = f(self.memory, other.memory);
        self.pods = f(self.pods, other.pods);
        self.ephemeral_storage = f(self.ephemeral_storage, other.ephemeral_storage);
        for (name, v) in &other.extended {
            let current = self.get(name);
            self.set(name, f(current, *v));
        }
        // Names only on our side combine with an implicit zero.
        for (name, v) in &mut self.extended {
            if other
                .extended
                .binary_search_by(|(n, _)| n.cmp(name))
                .is_err()
            {
                *v = f(*v, 0);
            }
        }
    }

    /// Adds `other` to these resources.
    pub fn add(&mut self, other: &Resources) {
        self.zip_with(other, |a, b| a + b);
    }

    /// Subtracts `other` from these resources.
    pub fn sub(&mut self, other: &Resources) {
        self.zip_with(other, |a, b| a - b);
    }

    /// Raises every quantity to at least `other`'s.
    pub fn max_with(&mut self, other: &Resources) {
        self.zip_with(other, i64::max);
    }

    /// The sum of two lists.
    pub fn plus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.add(other);
        r
    }

    /// Whether `self` (requests) fits in `available`: every requested quantity is at most what
    /// is available (absent means zero) and nothing available is negative.
    pub fn fits(&self, available: &Resources) -> bool {
        self.cpu <= available.cpu
            && self.memory <= available.memory
            && self.pods <= available.pods
            && self.ephemeral_storage <= available.ephemeral_storage
            && available.cpu >= 0
            && available.memory >= 0
            && available.pods >= 0
            && available.ephemeral_storage >= 0
            && self.extended.iter().all(|(n, v)| *v <= available.get(n))
            && available.extended.iter().all(|(_, v)| *v >= 0)
    }

    /// Whether `self + extra` fits in `available`, without building the sum.
    pub fn fits_with(&self, extra: &Resources, available: &Resources) -> bool {
        if extra.extended.is_empty() && self.extended.is_empty() {
            return self.cpu + extra.cpu <= available.cpu
                && self.memory + extra.memory <= available.memory
                && self.pods + extra.pods <= available.pods
                && self.ephemeral_storage + extra.ephemeral_storage <= available.ephemeral_storage
                && available.cpu >= 0
                && available.memory >= 0
                && available.pods >= 0
                && available.ephemeral_storage >= 0
                && available.extended.iter().all(|(_, v)| *v >= 0);
        }
        self.plus(extra).fits(available)
    }

    /// Writes the list as Kubernetes quantities.
    pub fn to_list(&self) -> BTreeMap<String, Quantity> {
        self.iter()
            .map(|(n, v)| (n.to_string(), Quantity(format_milli(n, v))))
            .collect()
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (n, v)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n}: {}", format_milli(n, v))?;
        }
        f.write_str("}")
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

fn container_requests(c: &Container) -> Result<Resources, QuantityError> {
    match c.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        Some(requests) => Resources::from_list(requests),
        None => Ok(Resources::new()),
    }
}

/// What a pod asks the scheduler for, as Kubernetes computes it: the larger of the containers'
/// sum and each init container's peak (restartable "sidecar" init containers run alongside the
/// others and add up) — or, for a resource the pod's own `spec.resources` requests, that —
/// plus the pod overhead, plus one `pods`.
pub fn pod_requests(pod: &Pod) -> Result<Resources, QuantityError> {
    let spec = pod.spec.as_ref();
    let mut requests = Resources::new();
    for c in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
        requests.add(&container_requests(c)?);
    }
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for c in spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
    {
        let own = container_requests(c)?;
        let during = if c.restart_policy.as_deref() == Some("Always") {
            requests.add(&own);
            sidecars.add(&own);
            sidecars.clone()
        } else {
            own.plus(&sidecars)
        };
        init_peak.max_with(&during);
    }
    requests.max_with(&init_peak);
    // Pod-level requests (Kubernetes 1.32+, `spec.resources`) stand for the pod as a whole:
    // each one named replaces what the containers add up to.
    if let Some(pod_level) = spec
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
    {
        let stated = Resources::from_list(pod_level)?;
        for name in pod_level.keys() {
            requests.set(name, stated.get(name));
        }
    }
    if let Some(overhead) = spec.and_then(|s| s.overhead.as_ref()) {
        requests.add(&Resources::from_list(overhead)?);
    }
    requests.pods += 1000;
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};

    /// Kubernetes' pod-level resources: what the pod requests for itself replaces what its
    /// containers add up to, resource by resource; the overhead still adds.
    #[test]
    fn pod_level_requests_stand_for_the_pod() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "spec": {
                "resources": {"requests": {"cpu": "3", "memory": "1Gi"}, "limits": {"cpu": "4"}},
                "overhead": {"cpu": "100m"},
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
                ],
            },
        }))
        .unwrap();
        let r = pod_requests(&pod).unwrap();
        assert_eq!(r.cpu, 3100, "the pod's 3 CPUs and the overhead");
        assert_eq!(
            r.memory,
            1024 * 1024 * 1024 * 1000,
            "the pod's 1Gi, not the containers' 4Gi"
        );
        assert_eq!(
            r.get("nvidia.com/gpu"),
            1000,
            "not stated at the pod level: the containers'"
        );
        assert_eq!(r.pods, 1000);
    }

    #[test]
    fn parses_every_quantity_form() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("1", 1000),
            ("100m", 100),
            ("1.5", 1500),
            ("0.1", 100),
            (".5", 500),
            ("1Ki", 1024 * 1000),
            ("1Mi", 1_048_576_000),
            ("1.5Gi", 1_610_612_736_000),
            ("1k", 1_000_000),
            ("1M", 1_000_000_000),
            ("1G", 1_000_000_000_000),
            ("1e3", 1_000_000),
            ("1E3", 1_000_000),
            ("2e-3", 2),
            ("1n", 1),
            ("1u", 1),
            ("1500u", 2),
            ("-1", -1000),
            ("+2", 2000),
            ("10Ti", 10 * (1i64 << 40) * 1000),
            ("4000", 4_000_000),
        ];
        for (input, want) in cases {
            assert_eq!(parse_milli(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn rejects_bad_quantities() {
        for bad in [
            "",
            "abc",
            "1.2.3",
            "1Qi",
            "1 Gi",
            "1x",
            "100000000000000000000Ei",
            "m",
            "1e",
        ] {
            assert!(parse_milli(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_canonically() {
        assert_eq!(format_milli(CPU, 1500), "1500m");
        assert_eq!(format_milli(CPU, 2000), "2");
        assert_eq!(format_milli(MEMORY, (1i64 << 30) * 1000), "1Gi");
        assert_eq!(format_milli(MEMORY, 1_000_000 * 1000), "1000000");
        assert_eq!(format_milli(PODS, 110_000), "110");
    }

    #[test]
    fn arithmetic_and_fit() {
        let mut a = Resources::parse(&[("cpu", "1"), ("memory", "1Gi"), ("nvidia.com/gpu", "1")]);
        let b = Resources::parse(&[("cpu", "500m"), ("example.com/foo", "2")]);
        a.add(&b);
        assert_eq!(a.get("cpu"), 1500);
        assert_eq!(a.get("example.com/foo"), 2000);
        assert_eq!(a.get("nvidia.com/gpu"), 1000);
        let node = Resources::parse(&[
            ("cpu", "2"),
            ("memory", "2Gi"),
            ("nvidia.com/gpu", "1"),
            ("example.com/foo", "2"),
            ("pods", "10"),
        ]);
        assert!(a.fits(&node));
        let gpu2 = Resources::parse(&[("nvidia.com/gpu", "2")]);
        assert!(!gpu2.fits(&node), "an extended resource beyond allocatable");
        let mut negative = node.clone();
        negative.sub(&Resources::parse(&[("memory", "3Gi")]));
        assert!(
            !Resources::new().fits(&negative),
            "nothing fits where allocatable is negative"
        );
        let mut m = Resources::parse(&[("cpu", "1")]);
        m.max_with(&Resources::parse(&[("cpu", "500m"), ("memory", "1Gi")]));
        assert_eq!((m.cpu, m.memory), (1000, (1i64 << 30) * 1000));
    }

    fn container(cpu: &str, memory: &str, restart_policy: Option<&str>) -> Container {
        Container {
            name: "c".into(),
            restart_policy: restart_policy.map(str::to_string),
            resources: Some(ResourceRequirements {
                requests: Some(
                    [
                        ("cpu".to_string(), Quantity(cpu.into())),
                        ("memory".to_string(), Quantity(memory.into())),
                    ]
                    .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn pod_requests_follow_kubernetes() {
        let pod = |containers, init: Vec<Container>, overhead: Option<&str>| Pod {
            spec: Some(PodSpec {
                containers,
                init_containers: Some(init),
                overhead: overhead.map(|o| [("cpu".to_string(), Quantity(o.into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        // Sum of containers beats a small init container.
        let p = pod(
            vec![container("1", "1Gi", None), container("500m", "1Gi", None)],
            vec![container("1", "512Mi", None)],
            None,
        );
        let r = pod_requests(&p).unwrap();
        assert_eq!((r.cpu, (r.memory / 1000) >> 30, r.pods), (1500, 2, 1000));
        // A large init container sets the floor.
        let p = pod(
            vec![container("1", "1Gi", None)],
            vec![container("4", "512Mi", None)],
            Some("250m"),
        );
        let r = pod_requests(&p).unwrap();
        assert_eq!(r.cpu, 4250, "init peak plus overhead");
        assert_eq!(r.memory, (1i64 << 30) * 1000);
        // A sidecar runs for the pod's whole life and adds to the containers; a later init
        // container runs beside it.
        let p = pod(
            vec![container("1", "1Gi", None)],
            vec![
                container("500m", "100Mi", Some("Always")),
                container("2", "100Mi", None),
            ],
            None,
        );
        let r = pod_requests(&p).unwrap();
        assert_eq!(r.cpu, 2500, "max(1 + 0.5 sidecar, 2 init + 0.5 sidecar)");
    }
}
