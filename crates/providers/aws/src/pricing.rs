//! Prices: on-demand from the embedded us-east-1 list (refreshed from the Pricing API when the
//! controller can reach it), spot from DescribeSpotPriceHistory per zone. A type without a
//! price has no offering of that capacity type, as upstream: launching blind is worse than
//! not launching.

use std::collections::HashMap;

use crate::instancetype::catalog;

/// Hourly prices in USD.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pricing {
    on_demand: HashMap<String, f64>,
    spot: HashMap<(String, String), f64>,
}

impl Pricing {
    /// The embedded on-demand list prices (us-east-1) and no spot prices.
    pub fn embedded() -> Self {
        Self {
            on_demand: catalog()
                .on_demand
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            spot: HashMap::new(),
        }
    }

    /// The on-demand price of a type.
    pub fn on_demand(&self, instance_type: &str) -> Option<f64> {
        self.on_demand.get(instance_type).copied()
    }

    /// The spot price of a type in a zone.
    pub fn spot(&self, instance_type: &str, zone: &str) -> Option<f64> {
        self.spot
            .get(&(instance_type.to_string(), zone.to_string()))
            .copied()
    }

    /// Replaces on-demand prices with fresher ones; types the update does not mention keep
    /// their price (the Pricing API leaves out types it no longer lists for a region).
    pub fn update_on_demand(&mut self, prices: impl IntoIterator<Item = (String, f64)>) {
        for (name, price) in prices {
            if price > 0.0 {
                self.on_demand.insert(name, price);
            }
        }
    }

    /// Records spot prices: `(type, zone, price, timestamp)` rows as DescribeSpotPriceHistory
    /// returns them; the newest row per type and zone wins.
    pub fn update_spot(&mut self, rows: impl IntoIterator<Item = SpotPrice>) {
        let mut newest: HashMap<(String, String), (String, f64)> = HashMap::new();
        for row in rows {
            if row.price <= 0.0 {
                continue;
            }
            let key = (row.instance_type, row.zone);
            match newest.get(&key) {
                Some((seen, _)) if *seen >= row.timestamp => {}
                _ => {
                    newest.insert(key, (row.timestamp, row.price));
                }
            }
        }
        for (key, (_, price)) in newest {
            self.spot.insert(key, price);
        }
    }

    /// How many spot prices are known.
    pub fn spot_prices(&self) -> usize {
        self.spot.len()
    }
}

/// One row of DescribeSpotPriceHistory.
#[derive(Clone, Debug, PartialEq)]
pub struct SpotPrice {
    /// `m5.large`.
    pub instance_type: String,
    /// `us-east-1a`.
    pub zone: String,
    /// USD per hour.
    pub price: f64,
    /// RFC 3339; compares in time order.
    pub timestamp: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: &str, zone: &str, price: f64, ts: &str) -> SpotPrice {
        SpotPrice {
            instance_type: t.into(),
            zone: zone.into(),
            price,
            timestamp: ts.into(),
        }
    }

    #[test]
    fn newest_spot_price_wins_per_zone() {
        let mut p = Pricing::default();
        p.update_spot([
            row("m5.large", "us-east-1a", 0.04, "2026-11-22T10:00:00Z"),
            row("m5.large", "us-east-1a", 0.03, "2026-11-22T09:00:00Z"),
            row("m5.large", "us-east-1b", 0.05, "2026-11-22T08:00:00Z"),
            row("m5.large", "us-east-1c", 0.0, "2026-11-22T08:00:00Z"),
        ]);
        assert_eq!(p.spot("m5.large", "us-east-1a"), Some(0.04));
        assert_eq!(p.spot("m5.large", "us-east-1b"), Some(0.05));
        assert_eq!(
            p.spot("m5.large", "us-east-1c"),
            None,
            "a zero price is no price"
        );
    }

    #[test]
    fn on_demand_updates_keep_unmentioned_types() {
        let mut p = Pricing::embedded();
        let before = p.on_demand("m5.large").expect("m5.large is in the catalog");
        assert!(
            (before - 0.096).abs() < 1e-9,
            "us-east-1 list price, got {before}"
        );
        p.update_on_demand([("m5.large".to_string(), 0.1)]);
        assert_eq!(p.on_demand("m5.large"), Some(0.1));
        assert!(p.on_demand("c5.large").is_some());
    }
}
