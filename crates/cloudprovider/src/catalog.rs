//! A provider's instance types as the simulator and the dry-run planner launch from them, and
//! the helpers providers build embedded catalogs with.

use std::sync::Arc;

use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL, ZONE_LABEL,
};
use karpenter_core::instancetype::{InstanceType, Offering, RepairPolicy};
use karpenter_core::scheduling::{Requirement, Requirements};

/// `amount` in `currency` (ISO 4217), as reports print it: `$0.1234` in US dollars,
/// `0.1234 CNY` otherwise.
pub fn format_price(currency: &str, amount: f64) -> String {
    if currency == "USD" {
        format!("${amount:.4}")
    } else {
        format!("{amount:.4} {currency}")
    }
}

/// A catalog: a provider's instance types, prices and allocatable as its own formula computes
/// them, and the labels it defines.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// The catalog's name (`--catalog NAME`).
    pub name: String,
    /// Every instance type.
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Provider labels pods may require (`karpenter.k8s.aws/instance-family`, …).
    pub provider_labels: Vec<String>,
    /// The provider's node repair policies (gate `NodeRepair`), as its `CloudProvider`
    /// declares them; none by default.
    pub repair_policies: Vec<RepairPolicy>,
    /// The node label a node launched into a capacity reservation carries its id in
    /// (`karpenter.k8s.aws/capacity-reservation-id` on AWS), when the provider has one.
    pub reservation_label: Option<String>,
    /// The currency of its prices, as ISO 4217 (`USD`; `CNY` for Alibaba's and Huawei's).
    pub currency: &'static str,
    /// The NodeClass its NodePools name (`karpenter.k8s.aws`/`EC2NodeClass`), when known: a
    /// NodePool naming another kind would not launch from it.
    pub node_class: Option<karpenter_api::crd::GroupKind>,
}

impl Catalog {
    /// A catalog from owned instance types.
    pub fn new(
        name: impl Into<String>,
        instance_types: impl IntoIterator<Item = InstanceType>,
        provider_labels: &[&str],
    ) -> Self {
        Self {
            name: name.into(),
            instance_types: instance_types.into_iter().map(Arc::new).collect(),
            provider_labels: provider_labels.iter().map(|s| s.to_string()).collect(),
            repair_policies: Vec::new(),
            reservation_label: None,
            currency: "USD",
            node_class: None,
        }
    }

    /// The catalog with its prices in `currency` (ISO 4217).
    pub fn with_currency(mut self, currency: &'static str) -> Self {
        self.currency = currency;
        self
    }

    /// The catalog with the NodeClass its NodePools name.
    pub fn with_node_class(mut self, node_class: karpenter_api::crd::GroupKind) -> Self {
        self.node_class = Some(node_class);
        self
    }

    /// `amount` in the catalog's currency, as reports print it: `$0.1234` in US dollars,
    /// `0.1234 CNY` otherwise.
    pub fn price(&self, amount: f64) -> String {
        format_price(self.currency, amount)
    }

    /// The catalog with the provider's reservation-id label.
    pub fn with_reservation_label(mut self, label: &str) -> Self {
        self.reservation_label = Some(label.to_string());
        self
    }

    /// The catalog with the provider's node repair policies.
    pub fn with_repair_policies(mut self, policies: Vec<RepairPolicy>) -> Self {
        self.repair_policies = policies;
        self
    }

    /// The catalog with a spot offering beside every on-demand one that has none, priced at
    /// `ratio` of it. The cloud catalogs' data has no spot prices (no source publishes them
    /// offline), so a scenario that wants to weigh spot states its assumption this way.
    pub fn with_assumed_spot_prices(mut self, ratio: f64) -> Self {
        for it in &mut self.instance_types {
            let spot_zones: Vec<String> = it
                .offerings
                .iter()
                .filter(|o| o.capacity_type == SPOT)
                .map(|o| o.zone.clone())
                .collect();
            let added: Vec<Offering> = it
                .offerings
                .iter()
                .filter(|o| o.capacity_type == ON_DEMAND && !spot_zones.contains(&o.zone))
                .map(|o| Offering {
                    capacity_type: SPOT.into(),
                    price: o.price * ratio,
                    reservation: None,
                    ..o.clone()
                })
                .collect();
            if added.is_empty() {
                continue;
            }
            let it = Arc::make_mut(it);
            it.offerings.extend(added);
            let mut capacity_types: Vec<&str> = it
                .offerings
                .iter()
                .map(|o| o.capacity_type.as_str())
                .collect();
            capacity_types.sort_unstable();
            capacity_types.dedup();
            let capacity_types: Vec<String> =
                capacity_types.into_iter().map(str::to_string).collect();
            it.requirements.remove(CAPACITY_TYPE_LABEL);
            it.requirements.add(Requirement::new(
                CAPACITY_TYPE_LABEL,
                Operator::In,
                &capacity_types,
            ));
        }
        self
    }
}

const SPOT: &str = "spot";
const ON_DEMAND: &str = "on-demand";

/// The requirements of an embedded catalog's instance type: name, architecture, Linux, the
/// zones and capacity types it is offered in, and the provider's labels (`None`: the label
/// does not exist on this type, as upstream marks labels a type lacks).
pub fn requirements(
    name: &str,
    arch: &str,
    zones: &[String],
    capacity_types: &[&str],
    labels: &[(&str, Option<String>)],
) -> Requirements {
    let mut r: Requirements = [
        Requirement::new(INSTANCE_TYPE_LABEL, Operator::In, &[name]),
        Requirement::new(ARCH_LABEL, Operator::In, &[arch]),
        Requirement::new(OS_LABEL, Operator::In, &["linux"]),
        Requirement::new(ZONE_LABEL, Operator::In, zones),
        Requirement::new(CAPACITY_TYPE_LABEL, Operator::In, capacity_types),
    ]
    .into_iter()
    .collect();
    for (key, value) in labels {
        r.add(match value {
            Some(v) => Requirement::new(key, Operator::In, &[v.as_str()]),
            None => Requirement::new(key, Operator::DoesNotExist, &[] as &[&str]),
        });
    }
    r
}

/// One on-demand offering per zone at `price`: what a catalog without spot prices offers.
pub fn on_demand(zones: &[String], price: f64) -> Vec<Offering> {
    zones
        .iter()
        .map(|z| Offering {
            zone: z.clone(),
            capacity_type: ON_DEMAND.into(),
            price,
            available: true,
            reservation: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assumed_spot_prices_go_beside_on_demand_offerings_that_lack_them() {
        let zones = vec!["z1".to_string(), "z2".to_string()];
        let mut both = InstanceType::new(
            "both",
            requirements("both", "amd64", &zones, &["on-demand", "spot"], &[]),
            on_demand(&zones, 1.0),
            Default::default(),
            Default::default(),
        );
        both.offerings.push(Offering {
            zone: "z1".into(),
            capacity_type: "spot".into(),
            price: 0.5,
            available: true,
            reservation: None,
        });
        let plain = InstanceType::new(
            "plain",
            requirements("plain", "amd64", &zones, &["on-demand"], &[]),
            on_demand(&zones, 2.0),
            Default::default(),
            Default::default(),
        );
        let catalog = Catalog::new("c", [both, plain], &[]).with_assumed_spot_prices(0.2);
        let offered = |i: usize| -> Vec<(String, String, f64)> {
            catalog.instance_types[i]
                .offerings
                .iter()
                .map(|o| (o.zone.clone(), o.capacity_type.clone(), o.price))
                .collect()
        };
        assert_eq!(
            offered(0),
            [
                ("z1".into(), "on-demand".into(), 1.0),
                ("z2".into(), "on-demand".into(), 1.0),
                ("z1".into(), "spot".into(), 0.5),
                ("z2".into(), "spot".into(), 0.2),
            ],
            "a known spot price is kept"
        );
        assert_eq!(
            offered(1),
            [
                ("z1".into(), "on-demand".into(), 2.0),
                ("z2".into(), "on-demand".into(), 2.0),
                ("z1".into(), "spot".into(), 0.4),
                ("z2".into(), "spot".into(), 0.4),
            ]
        );
        let capacity_types = catalog.instance_types[1]
            .requirements
            .get(CAPACITY_TYPE_LABEL)
            .unwrap();
        assert!(capacity_types.has("spot") && capacity_types.has("on-demand"));
    }
}
