//! ECS prices as the cloudpilot-ai provider keeps them (`pkg/providers/pricing/pricing.go`).
//!
//! * On demand: an embedded per-region table ([`embedded_on_demand`], upstream's
//!   `initial-on-demand-prices.json`; a region it lacks uses `cn-qingdao`'s), refreshed from
//!   the price server upstream reads (`https://price.cloudpilot.ai`, cloudpilot-ai/priceserver:
//!   `GET /api/v1/alibabacloud/ecs/regions/<region>/price`, [`parse_price_server`]). ECS has no
//!   list-price API the provider's credentials can read cheaply; the server scrapes Alibaba's
//!   public price sheet.
//! * Spot: the on-demand price until the first spot refresh, then per zone — from the price
//!   server's `spotPricePerHour`, or from ECS's `DescribeSpotPriceHistory` directly
//!   ([`latest_spot_prices`], the latest price of each zone; the price server derives its own
//!   the same way).
//!
//! A type with no price has no offering of that kind: upstream prices nothing it does not know.
//!
//! ## Currency
//! Prices are only compared with each other, so what matters is that one table has one
//! currency. Upstream's table and the price server are CNY in every region — they come from
//! the China site's price sheet (`us-east-1`'s `ecs.g7.large` is 0.53578 against cn-hangzhou's
//! 0.52325, where a USD price would be about seven times smaller). `DescribeSpotPriceHistory`
//! answers in the account's currency (`Currency`: CNY on the China site, USD on the
//! international one); an answer in another currency than the table's is converted through
//! its own on-demand price (`OriginPrice`): the spot price keeps its discount on the table's
//! on-demand price.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

/// The region whose prices stand in for a region the embedded table lacks (upstream's).
pub const DEFAULT_PRICE_REGION: &str = "cn-qingdao";
/// The currency of the embedded table and the price server.
pub const EMBEDDED_CURRENCY: &str = "CNY";
/// The price server upstream reads.
pub const PRICE_SERVER_URL: &str = "https://price.cloudpilot.ai";

const EMBEDDED: &str = include_str!("../data/on-demand-prices.json");

/// Why prices could not be read or used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PricingError {
    /// The body is not what was expected.
    #[error("unreadable prices: {0}")]
    Parse(String),
    /// The source has no prices for the region.
    #[error("no price info available for region {0}")]
    NoPrices(String),
}

/// Prices per hour by instance type.
pub type PriceMap = BTreeMap<String, f64>;
/// Spot prices per hour by instance type, then zone.
pub type ZonalPriceMap = BTreeMap<String, BTreeMap<String, f64>>;

/// The regions of the embedded table.
pub fn embedded_regions() -> Vec<String> {
    let table: BTreeMap<String, serde::de::IgnoredAny> =
        serde_json::from_str(EMBEDDED).expect("the embedded prices parse");
    table.into_keys().collect()
}

/// The embedded on-demand prices of `region` (CNY per hour), or of [`DEFAULT_PRICE_REGION`]
/// when the table lacks the region.
pub fn embedded_on_demand(region: &str) -> PriceMap {
    let mut table: BTreeMap<String, PriceMap> =
        serde_json::from_str(EMBEDDED).expect("the embedded prices parse");
    table
        .remove(region)
        .or_else(|| table.remove(DEFAULT_PRICE_REGION))
        .unwrap_or_default()
}

/// A type's spot prices: a stand-in until the first refresh, then per zone.
#[derive(Clone, Debug, Default, PartialEq)]
struct Zonal {
    default: f64,
    zones: BTreeMap<String, f64>,
}

/// The prices offerings are priced from.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceTable {
    currency: String,
    on_demand: PriceMap,
    spot: BTreeMap<String, Zonal>,
    spot_updated: bool,
}

impl PriceTable {
    /// The embedded prices of `region`, which also stand in for spot until spot prices come
    /// (a spot offering is then priced as its on-demand one, as upstream starts).
    pub fn embedded(region: &str) -> Self {
        Self::new(EMBEDDED_CURRENCY, embedded_on_demand(region))
    }

    /// A table of `on_demand` prices in `currency`, spot standing in as on demand.
    pub fn new(currency: impl Into<String>, on_demand: PriceMap) -> Self {
        let spot = on_demand
            .iter()
            .map(|(name, price)| {
                (
                    name.clone(),
                    Zonal {
                        default: *price,
                        zones: BTreeMap::new(),
                    },
                )
            })
            .collect();
        Self {
            currency: currency.into(),
            on_demand,
            spot,
            spot_updated: false,
        }
    }

    /// The table's currency.
    pub fn currency(&self) -> &str {
        &self.currency
    }

    /// Whether spot prices have been refreshed (until then spot stands in as on demand).
    pub fn spot_updated(&self) -> bool {
        self.spot_updated
    }

    /// The on-demand price per hour.
    pub fn on_demand(&self, instance_type: &str) -> Option<f64> {
        self.on_demand.get(instance_type).copied()
    }

    /// The spot price per hour in `zone`: before the first spot refresh, the stand-in of any
    /// type the table knows; after it, the zone's price only.
    pub fn spot(&self, instance_type: &str, zone: &str) -> Option<f64> {
        let zonal = self.spot.get(instance_type)?;
        if self.spot_updated {
            zonal.zones.get(zone).copied()
        } else {
            Some(zonal.default)
        }
    }

    /// Every type with an on-demand or a spot price.
    pub fn instance_types(&self) -> BTreeSet<&str> {
        self.on_demand
            .keys()
            .chain(self.spot.keys())
            .map(String::as_str)
            .collect()
    }

    /// Replaces the on-demand prices with `prices`. Zero and negative prices are left out:
    /// the price server writes 0 for a type its sheet lacks, and upstream, which keeps them,
    /// would then launch that type first as free. An empty refresh is an error and changes
    /// nothing, so a failed source never leaves every type unpriced.
    pub fn update_on_demand(
        &mut self,
        region: &str,
        prices: PriceMap,
    ) -> Result<usize, PricingError> {
        let prices: PriceMap = prices.into_iter().filter(|(_, p)| *p > 0.0).collect();
        if prices.is_empty() {
            return Err(PricingError::NoPrices(region.to_string()));
        }
        self.on_demand = prices;
        Ok(self.on_demand.len())
    }

    /// Merges spot prices per type and zone into the table, as upstream does: a zone the
    /// refresh does not mention keeps its last price. From then on spot is priced per zone
    /// only. An empty refresh is an error and changes nothing.
    pub fn update_spot(
        &mut self,
        region: &str,
        prices: ZonalPriceMap,
    ) -> Result<usize, PricingError> {
        let mut merged = 0;
        for (name, zones) in prices {
            let zonal = self.spot.entry(name).or_default();
            for (zone, price) in zones.into_iter().filter(|(_, p)| *p > 0.0) {
                zonal.zones.insert(zone, price);
                merged += 1;
            }
        }
        if merged == 0 {
            return Err(PricingError::NoPrices(region.to_string()));
        }
        self.spot_updated = true;
        Ok(merged)
    }

    /// Spot prices from `DescribeSpotPriceHistory` answers in `currency`: the latest price of
    /// each type and zone, converted to the table's currency when it differs (through the
    /// answer's `OriginPrice`; a type the table has no on-demand price for is then left out).
    pub fn spot_from_history(
        &self,
        currency: Option<&str>,
        records: &[SpotPriceRecord],
    ) -> ZonalPriceMap {
        let foreign = currency.is_some_and(|c| !c.is_empty() && c != self.currency);
        let mut out = ZonalPriceMap::new();
        for (name, zones) in latest_spot_prices(records) {
            for (zone, record) in zones {
                let price = if foreign {
                    match self.on_demand(&name) {
                        Some(on_demand) if record.origin_price > 0.0 => {
                            record.spot_price / record.origin_price * on_demand
                        }
                        _ => continue,
                    }
                } else {
                    record.spot_price
                };
                out.entry(name.clone()).or_default().insert(zone, price);
            }
        }
        out
    }
}

/// One type's entry in the price server's answer (cloudpilot-ai/priceserver's
/// `InstanceTypePrice`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PriceServerType {
    /// `amd64` or `arm64`.
    pub arch: String,
    /// vCPUs.
    pub vcpu: f64,
    /// GiB.
    pub memory: f64,
    /// GPUs.
    pub gpu: f64,
    /// The region's zones.
    pub zones: Vec<String>,
    /// CNY per hour; 0 when the price sheet lacks the type.
    pub on_demand_price_per_hour: f64,
    /// CNY per hour by zone.
    pub spot_price_per_hour: BTreeMap<String, f64>,
}

/// A region's entry (`RegionalInstancePrice`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PriceServerRegion {
    /// By type.
    pub instance_type_prices: BTreeMap<String, PriceServerType>,
}

/// What the price server knows of one region.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PriceServerPrices {
    /// On-demand prices of every type it lists (zeros included, as it sends them).
    pub on_demand: PriceMap,
    /// Spot prices of the types it has them for.
    pub spot: ZonalPriceMap,
}

/// Reads the price server's answer for `region`: `{"<region>": {"instanceTypePrices": …}}`.
/// An answer without the region (the server returns `null` for a region it does not know) or
/// without types is [`PricingError::NoPrices`], as upstream treats it.
pub fn parse_price_server(body: &[u8], region: &str) -> Result<PriceServerPrices, PricingError> {
    let regions: Option<BTreeMap<String, PriceServerRegion>> =
        serde_json::from_slice(body).map_err(|e| PricingError::Parse(e.to_string()))?;
    let types = regions
        .and_then(|mut r| r.remove(region))
        .map(|r| r.instance_type_prices)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| PricingError::NoPrices(region.to_string()))?;
    let mut prices = PriceServerPrices::default();
    for (name, t) in types {
        prices
            .on_demand
            .insert(name.clone(), t.on_demand_price_per_hour);
        if !t.spot_price_per_hour.is_empty() {
            prices.spot.insert(name, t.spot_price_per_hour);
        }
    }
    Ok(prices)
}

/// One `DescribeSpotPriceHistory` answer.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SpotPriceHistoryPage {
    /// `CNY` (China site) or `USD` (international site).
    pub currency: Option<String>,
    /// Where the next page starts (the request's `Offset`); absent on the last page.
    pub next_offset: Option<i64>,
    /// The request's id.
    pub request_id: String,
    /// The prices.
    pub spot_prices: SpotPriceList,
}

/// `SpotPrices`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SpotPriceList {
    /// The items.
    pub spot_price_type: Vec<SpotPriceRecord>,
}

/// One price of one type in one zone at one time.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SpotPriceRecord {
    /// `ecs.g7.large`.
    pub instance_type: String,
    /// `cn-hangzhou-i`.
    pub zone_id: String,
    /// The spot price per hour.
    pub spot_price: f64,
    /// The on-demand price per hour, same currency.
    pub origin_price: f64,
    /// `2024-10-09T06:00:00Z`.
    pub timestamp: String,
    /// `vpc`.
    pub network_type: String,
    /// `optimized` or `none`.
    pub io_optimized: String,
}

/// The latest record of each type and zone (by `Timestamp`; a record whose time cannot be read
/// counts as oldest, and of equal times the later in the answer wins, as the price server's
/// map keeps the last).
pub fn latest_spot_prices(
    records: &[SpotPriceRecord],
) -> BTreeMap<String, BTreeMap<String, SpotPriceRecord>> {
    let mut out: BTreeMap<String, BTreeMap<String, SpotPriceRecord>> = BTreeMap::new();
    let time = |r: &SpotPriceRecord| crate::time::parse_iso8601(&r.timestamp).unwrap_or(0);
    for record in records {
        let zones = out.entry(record.instance_type.clone()).or_default();
        match zones.get(&record.zone_id) {
            Some(seen) if time(seen) > time(record) => {}
            _ => {
                zones.insert(record.zone_id.clone(), record.clone());
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "pricing_tests.rs"]
mod tests;
