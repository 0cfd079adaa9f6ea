//! The kubelet's reservations as CCE's `CreateNode` takes them: `extendParam`'s
//! `kubeReservedCpu` (millicores), `kubeReservedMem` (MiB), `kubeReservedStorage` (GiB) and
//! `kubeReservedPid`, and the same four `systemReserved*`, all 32-bit integers.
//!
//! A quantity is admitted only if it is a whole number of the field's unit, as upstream checks:
//! CCE would otherwise get a rounded reservation the user never wrote (`1G` of memory is not a
//! whole number of MiB; `0.5m` of CPU is not a whole millicore).

use std::collections::BTreeMap;

use karpenter_core::resources::parse_milli_saturating;

use super::KubeletConfiguration;

/// One set of reservations (kube or system) in CCE's units; `None` where the class names none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reserved {
    /// CPU, millicores.
    pub cpu_milli: Option<i32>,
    /// Memory, MiB.
    pub memory_mib: Option<i32>,
    /// Ephemeral storage, GiB.
    pub storage_gib: Option<i32>,
    /// Process ids.
    pub pid: Option<i32>,
}

impl Reserved {
    /// Whether nothing is reserved (then upstream sends no `extendParam` for it).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A reservation CCE cannot take, and its field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} {reason}")]
pub struct ReservedError {
    /// The field, as `spec.kubelet.kubeReserved.memory`.
    pub field: String,
    /// What is wrong with its value.
    pub reason: ReservedReason,
}

/// What is wrong with a reservation's value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReservedReason {
    /// The key is none of [`super::RESERVED_RESOURCES`] (the CRD refuses it too).
    #[error("is not a resource CCE reserves (cpu, memory, ephemeral-storage or pid)")]
    UnsupportedKey,
    /// The value is not a Kubernetes quantity.
    #[error("must be a resource quantity: {0}")]
    NotAQuantity(String),
    /// The value is not a whole number of the unit CCE takes (`millicores`, `Mi`, `Gi`).
    #[error("must be a whole number of {0}")]
    NotWhole(&'static str),
    /// A `pid` value that is not a plain decimal integer.
    #[error("must be an integer")]
    NotAnInteger,
    /// A negative value (the CRD refuses one written with a leading `-`).
    #[error("must not be negative")]
    Negative,
    /// More than CCE's 32-bit fields hold.
    #[error("must be at most {}", i32::MAX)]
    TooLarge,
}

impl KubeletConfiguration {
    /// The reservations in CCE's units, `(kube, system)`, as upstream converts them for
    /// `extendParam`: `cpu` to millicores, `memory` to MiB, `ephemeral-storage` to GiB, `pid`
    /// as is. The first value CCE cannot take (kube before system, keys in order) is the error.
    ///
    /// ```
    /// # use karpenter_huawei::ccenodeclass::KubeletConfiguration;
    /// let kubelet = KubeletConfiguration {
    ///     kube_reserved: [("cpu".to_string(), "0.5".to_string())].into(),
    ///     system_reserved: [("memory".to_string(), "1.5Gi".to_string())].into(),
    ///     ..Default::default()
    /// };
    /// let (kube, system) = kubelet.reserved().unwrap();
    /// assert_eq!(kube.cpu_milli, Some(500));
    /// assert_eq!(system.memory_mib, Some(1536));
    /// ```
    pub fn reserved(&self) -> Result<(Reserved, Reserved), ReservedError> {
        let kube = convert("spec.kubelet.kubeReserved", &self.kube_reserved);
        let system = convert("spec.kubelet.systemReserved", &self.system_reserved);
        Ok((kube?, system?))
    }

    /// Every reservation CCE cannot take, kube before system, keys in order.
    pub(super) fn reserved_errors(&self) -> Vec<ReservedError> {
        [
            ("spec.kubelet.kubeReserved", &self.kube_reserved),
            ("spec.kubelet.systemReserved", &self.system_reserved),
        ]
        .into_iter()
        .flat_map(|(path, values)| {
            values.iter().filter_map(move |(key, value)| {
                let reason = entry(key, value).err()?;
                Some(ReservedError {
                    field: format!("{path}.{key}"),
                    reason,
                })
            })
        })
        .collect()
    }
}

/// One map of reservations; its first error.
fn convert(path: &str, values: &BTreeMap<String, String>) -> Result<Reserved, ReservedError> {
    let mut out = Reserved::default();
    for (key, value) in values {
        let converted = entry(key, value).map_err(|reason| ReservedError {
            field: format!("{path}.{key}"),
            reason,
        })?;
        let slot = match key.as_str() {
            "cpu" => &mut out.cpu_milli,
            "memory" => &mut out.memory_mib,
            "ephemeral-storage" => &mut out.storage_gib,
            _ => &mut out.pid,
        };
        *slot = Some(converted);
    }
    Ok(out)
}

/// One reservation in its CCE unit.
fn entry(key: &str, value: &str) -> Result<i32, ReservedReason> {
    match key {
        // A millicore is 10^-3; a MiB 2^20 bytes; a GiB 2^30.
        "cpu" => whole_units(value, Unit::new(-3, 0, "millicores")),
        "memory" => whole_units(value, Unit::new(0, 20, "Mi")),
        "ephemeral-storage" => whole_units(value, Unit::new(0, 30, "Gi")),
        "pid" => pid(value),
        _ => Err(ReservedReason::UnsupportedKey),
    }
}

/// As Go's `strconv.ParseInt(value, 10, 32)` reads it: an optional sign and decimal digits.
fn pid(value: &str) -> Result<i32, ReservedReason> {
    use std::num::IntErrorKind;
    match value.parse::<i64>() {
        Ok(n) if n < 0 => Err(ReservedReason::Negative),
        Ok(n) => i32::try_from(n).map_err(|_| ReservedReason::TooLarge),
        Err(e) if *e.kind() == IntErrorKind::PosOverflow => Err(ReservedReason::TooLarge),
        Err(e) if *e.kind() == IntErrorKind::NegOverflow => Err(ReservedReason::Negative),
        Err(_) => Err(ReservedReason::NotAnInteger),
    }
}

/// A unit of `10^exp10 × 2^exp2` of the quantity's base unit (cores, bytes).
#[derive(Clone, Copy)]
struct Unit {
    exp10: i32,
    exp2: i32,
    name: &'static str,
}

impl Unit {
    const fn new(exp10: i32, exp2: i32, name: &'static str) -> Self {
        Self { exp10, exp2, name }
    }
}

/// The quantity `value` in whole `unit`s. `karpenter_core`'s parser decides what is a quantity
/// (so this admits exactly what the rest of karpenter-rs does); it rounds to thousandths, so
/// whether the value is *exactly* a whole number of units is read off the digits here.
fn whole_units(value: &str, unit: Unit) -> Result<i32, ReservedReason> {
    parse_milli_saturating(value).map_err(|e| ReservedReason::NotAQuantity(e.to_string()))?;
    let Some(exact) = Exact::read(value) else {
        // Accepted by the parser but with digits beyond 128 bits: far above any 32-bit field.
        return Err(ReservedReason::TooLarge);
    };
    let units = exact.in_units(unit)?;
    if exact.negative && units != 0 {
        return Err(ReservedReason::Negative);
    }
    i32::try_from(units).map_err(|_| ReservedReason::TooLarge)
}

/// A quantity's exact value: `±mantissa × 10^exp10 × 2^exp2`.
#[derive(Debug, PartialEq, Eq)]
struct Exact {
    negative: bool,
    mantissa: u128,
    exp10: i32,
    exp2: i32,
}

impl Exact {
    /// Splits a quantity the parser accepted into its exact parts (the same grammar: a sign,
    /// digits with at most one point, then a decimal or binary suffix or a decimal exponent).
    /// `None` only for digits that do not fit 128 bits.
    fn read(value: &str) -> Option<Self> {
        let s = value.trim();
        let (negative, s) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(split);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let mantissa: u128 = format!("{whole}{fraction}").parse().ok()?;
        let (suffix10, exp2) = match suffix {
            "" => (0, 0),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            exponent => (exponent.get(1..)?.parse().ok()?, 0),
        };
        Some(Self {
            negative,
            mantissa,
            exp10: suffix10 - i32::try_from(fraction.len()).ok()?,
            exp2,
        })
    }

    /// The magnitude in whole `unit`s; an error if it is not a whole number of them, or does not
    /// fit 128 bits (then it is [`ReservedReason::TooLarge`] for any 32-bit field).
    fn in_units(&self, unit: Unit) -> Result<u128, ReservedReason> {
        if self.mantissa == 0 {
            return Ok(0);
        }
        // value / unit = mantissa × 10^a × 2^b = mantissa × 5^a × 2^(a+b)
        let a = self.exp10 - unit.exp10;
        let twos = a + (self.exp2 - unit.exp2);
        let not_whole = ReservedReason::NotWhole(unit.name);
        let fives = 5u128.checked_pow(a.unsigned_abs());
        let n = if a >= 0 {
            fives
                .and_then(|f| self.mantissa.checked_mul(f))
                .ok_or(ReservedReason::TooLarge)?
        } else {
            match fives {
                Some(f) if self.mantissa.is_multiple_of(f) => self.mantissa / f,
                // A power of five beyond 128 bits divides no non-zero mantissa.
                _ => return Err(not_whole),
            }
        };
        if twos >= 0 {
            let shift = twos.unsigned_abs();
            if shift >= n.leading_zeros() {
                return Err(ReservedReason::TooLarge);
            }
            Ok(n << shift)
        } else if n.trailing_zeros() >= twos.unsigned_abs() {
            Ok(n >> twos.unsigned_abs())
        } else {
            Err(not_whole)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ReservedReason::*;
    use super::*;

    fn kubelet(kube: &[(&str, &str)], system: &[(&str, &str)]) -> KubeletConfiguration {
        let map = |entries: &[(&str, &str)]| {
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        KubeletConfiguration {
            kube_reserved: map(kube),
            system_reserved: map(system),
            ..Default::default()
        }
    }

    /// One value under `key`, converted as a kube reservation.
    fn one(key: &str, value: &str) -> Result<Option<i32>, ReservedError> {
        let (kube, system) = kubelet(&[(key, value)], &[]).reserved()?;
        assert!(system.is_empty());
        Ok(match key {
            "cpu" => kube.cpu_milli,
            "memory" => kube.memory_mib,
            "ephemeral-storage" => kube.storage_gib,
            _ => kube.pid,
        })
    }

    #[test]
    fn conversions() {
        let max = i32::MAX;
        let cases: &[(&str, &str, i32)] = &[
            ("cpu", "100m", 100),
            ("cpu", "0.5", 500),
            ("cpu", "1", 1000),
            ("cpu", "2.25", 2250),
            ("cpu", "0", 0),
            ("cpu", "1000u", 1),
            ("cpu", "1e-3", 1),
            ("cpu", "+1", 1000),
            ("cpu", "2147483647m", max),
            ("memory", "1Gi", 1024),
            ("memory", "1.5Gi", 1536),
            ("memory", "512Mi", 512),
            ("memory", "1024Ki", 1),
            ("memory", "1048576", 1),
            ("memory", "1048576000m", 1),
            ("memory", "0", 0),
            ("memory", "2047Ti", 2047 << 20),
            ("ephemeral-storage", "10Gi", 10),
            ("ephemeral-storage", "1Ti", 1024),
            ("ephemeral-storage", "0.5Ti", 512),
            ("ephemeral-storage", "1073741824", 1),
            // Above what karpenter_core's thousandths hold, still exact here.
            ("ephemeral-storage", "1Ei", 1 << 30),
            ("pid", "1000", 1000),
            ("pid", "0", 0),
            ("pid", "+7", 7),
            ("pid", "2147483647", max),
        ];
        for (key, value, want) in cases {
            assert_eq!(one(key, value), Ok(Some(*want)), "{key}: {value}");
        }
    }

    #[test]
    fn refusals() {
        let cases: &[(&str, &str, ReservedReason)] = &[
            ("cpu", "0.5m", NotWhole("millicores")),
            ("cpu", "100u", NotWhole("millicores")),
            ("cpu", "0.0001", NotWhole("millicores")),
            ("cpu", "1e-4", NotWhole("millicores")),
            ("cpu", "2147484", TooLarge),
            ("cpu", "-1", Negative),
            ("memory", "1G", NotWhole("Mi")),
            ("memory", "1000Ki", NotWhole("Mi")),
            ("memory", "0.5Mi", NotWhole("Mi")),
            ("memory", "1048575.5", NotWhole("Mi")),
            ("memory", "2Pi", TooLarge),
            ("memory", "-10Mi", Negative),
            ("ephemeral-storage", "512Mi", NotWhole("Gi")),
            ("ephemeral-storage", "10G", NotWhole("Gi")),
            ("ephemeral-storage", "2Ei", TooLarge),
            ("pid", "-1", Negative),
            ("pid", "1k", NotAnInteger),
            ("pid", "1.5", NotAnInteger),
            ("pid", "1e3", NotAnInteger),
            ("pid", " 10", NotAnInteger),
            ("pid", "", NotAnInteger),
            ("pid", "2147483648", TooLarge),
            ("pid", "99999999999999999999", TooLarge),
        ];
        for (key, value, reason) in cases {
            let err = one(key, value).unwrap_err();
            assert_eq!(&err.reason, reason, "{key}: {value}");
            assert_eq!(err.field, format!("spec.kubelet.kubeReserved.{key}"));
        }
    }

    #[test]
    fn values_that_are_not_quantities() {
        for (key, value) in [
            ("cpu", "one"),
            ("cpu", ""),
            ("memory", "1GB"),
            ("memory", "1gi"),
            ("ephemeral-storage", "10 Gi"),
        ] {
            let err = one(key, value).unwrap_err();
            assert!(
                matches!(err.reason, NotAQuantity(_)),
                "{key}: {value}: {err}"
            );
            assert!(
                err.to_string().starts_with(&format!(
                    "spec.kubelet.kubeReserved.{key} must be a resource quantity"
                )),
                "{err}"
            );
        }
    }

    #[test]
    fn kube_and_system_are_converted_apart() {
        let (kube, system) = kubelet(
            &[
                ("cpu", "200m"),
                ("memory", "256Mi"),
                ("ephemeral-storage", "1Gi"),
                ("pid", "100"),
            ],
            &[("memory", "1Gi")],
        )
        .reserved()
        .unwrap();
        assert_eq!(
            kube,
            Reserved {
                cpu_milli: Some(200),
                memory_mib: Some(256),
                storage_gib: Some(1),
                pid: Some(100)
            }
        );
        assert_eq!(
            system,
            Reserved {
                memory_mib: Some(1024),
                ..Default::default()
            }
        );
        assert!(
            KubeletConfiguration::default()
                .reserved()
                .unwrap()
                .0
                .is_empty()
        );
    }

    #[test]
    fn the_error_names_the_map_and_key() {
        let err = kubelet(&[], &[("memory", "1G")]).reserved().unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.kubelet.systemReserved.memory must be a whole number of Mi"
        );
        let err = kubelet(&[("gpu", "1")], &[]).reserved().unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.reason),
            ("spec.kubelet.kubeReserved.gpu", UnsupportedKey)
        );
        // Kube first, then system; keys in order.
        let both = kubelet(&[("pid", "x"), ("cpu", "1u")], &[("memory", "1G")]);
        assert_eq!(
            both.reserved().unwrap_err().field,
            "spec.kubelet.kubeReserved.cpu"
        );
        let fields: Vec<String> = both
            .reserved_errors()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.kubelet.kubeReserved.cpu",
                "spec.kubelet.kubeReserved.pid",
                "spec.kubelet.systemReserved.memory"
            ]
        );
    }
}
