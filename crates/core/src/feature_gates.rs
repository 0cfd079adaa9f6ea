//! Upstream's `FEATURE_GATES`: `Name=bool` pairs separated by commas.

use std::str::FromStr;

/// The gates upstream knows, with its defaults; each is acted on as upstream does, and an
/// unknown name is an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// Replace spot nodes with cheaper spot nodes (off upstream).
    pub spot_to_spot_consolidation: bool,
    /// Replace unhealthy nodes (off upstream; see `disruption::repair`).
    pub node_repair: bool,
    /// Launch into capacity reservations (on upstream; see `provisioning::scheduling::reservation`).
    pub reserved_capacity: bool,
    /// NodeOverlay price and capacity overrides (off upstream).
    pub node_overlay: bool,
    /// Static NodePools with `replicas` (off upstream).
    pub static_capacity: bool,
    /// CapacityBuffer headroom (off upstream; see `provisioning::capacity_buffer`).
    pub capacity_buffer: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            spot_to_spot_consolidation: false,
            node_repair: false,
            reserved_capacity: true,
            node_overlay: false,
            static_capacity: false,
            capacity_buffer: false,
        }
    }
}

impl FromStr for FeatureGates {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(s.parse::<GateSettings>()?.over(Self::default()))
    }
}

/// The gates a `FEATURE_GATES` string names, with their values, checked: laid over other
/// settings, they change only the gates they name (a scenario's own gates over the command
/// line's, say).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateSettings(Vec<(Gate, bool)>);

/// One of upstream's gates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    SpotToSpotConsolidation,
    NodeRepair,
    ReservedCapacity,
    NodeOverlay,
    StaticCapacity,
    CapacityBuffer,
}

impl GateSettings {
    /// `gates` with these settings applied.
    pub fn over(&self, mut gates: FeatureGates) -> FeatureGates {
        for &(gate, value) in &self.0 {
            *match gate {
                Gate::SpotToSpotConsolidation => &mut gates.spot_to_spot_consolidation,
                Gate::NodeRepair => &mut gates.node_repair,
                Gate::ReservedCapacity => &mut gates.reserved_capacity,
                Gate::NodeOverlay => &mut gates.node_overlay,
                Gate::StaticCapacity => &mut gates.static_capacity,
                Gate::CapacityBuffer => &mut gates.capacity_buffer,
            } = value;
        }
        gates
    }
}

impl FromStr for GateSettings {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut settings = Vec::new();
        for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').ok_or_else(|| {
                format!("feature gate {pair:?} is not of the form Name=true|false")
            })?;
            let value = match value.trim() {
                "true" => true,
                "false" => false,
                other => {
                    return Err(format!(
                        "feature gate {name}: {other:?} is not true or false"
                    ));
                }
            };
            let gate = match name.trim() {
                "SpotToSpotConsolidation" => Gate::SpotToSpotConsolidation,
                "NodeRepair" => Gate::NodeRepair,
                "ReservedCapacity" => Gate::ReservedCapacity,
                "NodeOverlay" => Gate::NodeOverlay,
                "StaticCapacity" => Gate::StaticCapacity,
                "CapacityBuffer" => Gate::CapacityBuffer,
                other => {
                    return Err(format!(
                        "unknown feature gate {other:?}; known: SpotToSpotConsolidation, NodeRepair, ReservedCapacity, NodeOverlay, StaticCapacity, CapacityBuffer"
                    ));
                }
            };
            settings.push((gate, value));
        }
        Ok(Self(settings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_defaults_when_empty() {
        assert_eq!("".parse::<FeatureGates>().unwrap(), FeatureGates::default());
        assert!(FeatureGates::default().reserved_capacity);
        assert!(!FeatureGates::default().spot_to_spot_consolidation);
    }

    #[test]
    fn upstream_default_string_parses() {
        let gates: FeatureGates = "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"
            .parse()
            .unwrap();
        assert_eq!(gates, FeatureGates::default());
    }

    #[test]
    fn sets_named_gates_only() {
        let gates: FeatureGates = "SpotToSpotConsolidation=true, ReservedCapacity=false"
            .parse()
            .unwrap();
        assert!(gates.spot_to_spot_consolidation);
        assert!(!gates.reserved_capacity);
        assert!(!gates.node_repair);
    }

    #[test]
    fn settings_laid_over_others_change_only_the_gates_they_name() {
        let command_line: FeatureGates = "NodeRepair=true,SpotToSpotConsolidation=true"
            .parse()
            .unwrap();
        let scenario: GateSettings = "SpotToSpotConsolidation=false,StaticCapacity=true"
            .parse()
            .unwrap();
        let gates = scenario.over(command_line);
        assert!(gates.node_repair, "named on the command line only");
        assert!(!gates.spot_to_spot_consolidation, "the scenario wins");
        assert!(gates.static_capacity);
        assert!(
            gates.reserved_capacity,
            "named by neither: upstream's default"
        );
        assert_eq!(GateSettings::default().over(command_line), command_line);
    }

    #[test]
    fn bad_input_names_the_gate_and_the_reason() {
        let err = "Bogus=true".parse::<FeatureGates>().unwrap_err();
        assert!(err.contains("unknown feature gate \"Bogus\""), "{err}");
        let err = "SpotToSpotConsolidation=yes"
            .parse::<FeatureGates>()
            .unwrap_err();
        assert!(
            err.contains("SpotToSpotConsolidation") && err.contains("\"yes\""),
            "{err}"
        );
        let err = "SpotToSpotConsolidation"
            .parse::<FeatureGates>()
            .unwrap_err();
        assert!(err.contains("Name=true|false"), "{err}");
    }
}
