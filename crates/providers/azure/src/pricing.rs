//! VM prices from the Azure Retail Prices API (`https://prices.azure.com/api/retail/prices`,
//! filtered to Linux-and-Windows consumption prices of Virtual Machines in one region), as
//! upstream reads them: Windows products and the Batch-only "Low Priority" meters are dropped,
//! a `skuName` ending in ` Spot` is a spot price, anything else on demand, keyed by
//! `armSkuName`. Until a refresh succeeds the embedded eastus list prices stand in for both
//! on-demand and spot, and a size with no price at all is offered at [`MISSING_PRICE`].

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::catalog::embedded_on_demand_prices;

/// The price of an offering whose price is unknown, or of a size upstream does not know: high
/// enough that it is never chosen for cost, but it can still be launched when nothing else
/// fits.
pub const MISSING_PRICE: f64 = 999.0;

/// Why a page could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PricingError {
    /// The body is not a Retail Prices page.
    #[error("parsing a Retail Prices page: {0}")]
    Parse(#[from] serde_json::Error),
}

/// One page of the Retail Prices API.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct RetailPricePage {
    /// The prices.
    #[serde(rename = "Items", default)]
    pub items: Vec<RetailPrice>,
    /// The URL of the next page; absent or null on the last.
    #[serde(rename = "NextPageLink", default)]
    pub next_page_link: Option<String>,
}

/// One price (a meter of a product in a region).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct RetailPrice {
    /// The VM size (`Standard_D2s_v3`).
    pub arm_sku_name: String,
    /// USD per hour (the filter asks for USD).
    pub retail_price: f64,
    /// Unit price before any tiering; the same as `retail_price` for VMs.
    pub unit_price: f64,
    /// `eastus`.
    pub arm_region_name: String,
    /// `Virtual Machines DSv3 Series` or `… Series Windows`.
    pub product_name: String,
    /// `D2s v3`, `D2s v3 Spot`, `D2s v3 Low Priority`.
    pub sku_name: String,
    /// `D2s v3`, `D2s v3 Spot`, `D2s v3 Low Priority`.
    pub meter_name: String,
    /// `Consumption`, `DevTestConsumption`, `Reservation`.
    #[serde(rename = "type")]
    pub price_type: String,
    /// `USD`.
    pub currency_code: String,
}

/// Parses one page.
pub fn parse_page(body: &str) -> Result<RetailPricePage, PricingError> {
    Ok(serde_json::from_str(body)?)
}

/// On-demand and spot prices by size name, USD per hour.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prices {
    /// Pay-as-you-go.
    pub on_demand: BTreeMap<String, f64>,
    /// Spot.
    pub spot: BTreeMap<String, f64>,
}

/// Sorts the items of `pages` into on-demand and spot prices. Later items win when a size has
/// several (upstream's choice among them is map order; this one is stable).
pub fn categorize<'a>(pages: impl IntoIterator<Item = &'a RetailPricePage>) -> Prices {
    let mut prices = Prices::default();
    for item in pages.into_iter().flat_map(|p| &p.items) {
        // The query asks for consumption prices only; a page with dev/test or reservation
        // prices is not the query's, and those prices are not what a launch costs.
        if !item.price_type.is_empty() && item.price_type != "Consumption" {
            continue;
        }
        if item.arm_sku_name.is_empty()
            || item.product_name.ends_with(" Windows")
            // Low priority is Batch's older spot; a VM launched as spot never pays it.
            || item.meter_name.ends_with(" Low Priority")
        {
            continue;
        }
        let map = if item.sku_name.ends_with(" Spot") {
            &mut prices.spot
        } else {
            &mut prices.on_demand
        };
        map.insert(item.arm_sku_name.clone(), item.retail_price);
    }
    prices
}

/// What [`PriceTable::update`] changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PriceUpdate {
    /// On-demand prices were replaced.
    pub on_demand: bool,
    /// Spot prices were replaced.
    pub spot: bool,
}

/// The prices offerings are priced from, refreshed from the Retail Prices API.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceTable {
    prices: Prices,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self::embedded()
    }
}

impl PriceTable {
    /// The embedded eastus list prices, which also stand in for spot prices: before the first
    /// refresh a spot offering is priced as its on-demand one, as upstream starts.
    pub fn embedded() -> Self {
        let on_demand: BTreeMap<String, f64> = embedded_on_demand_prices()
            .map(|(name, price)| (name.to_string(), price))
            .collect();
        Self::new(Prices {
            spot: on_demand.clone(),
            on_demand,
        })
    }

    /// A table of the given prices.
    pub fn new(prices: Prices) -> Self {
        Self { prices }
    }

    /// Replaces the on-demand prices with those of `pages`, and the spot prices likewise; a
    /// kind the pages have no price of keeps its old prices (an empty or failed refresh must
    /// not leave every size at the penalty price).
    pub fn update<'a>(
        &mut self,
        pages: impl IntoIterator<Item = &'a RetailPricePage>,
    ) -> PriceUpdate {
        let fresh = categorize(pages);
        let changed = PriceUpdate {
            on_demand: !fresh.on_demand.is_empty(),
            spot: !fresh.spot.is_empty(),
        };
        if changed.on_demand {
            self.prices.on_demand = fresh.on_demand;
        }
        if changed.spot {
            self.prices.spot = fresh.spot;
        }
        changed
    }

    /// The known on-demand price.
    pub fn on_demand(&self, size: &str) -> Option<f64> {
        self.prices.on_demand.get(size).copied()
    }

    /// The known spot price.
    pub fn spot(&self, size: &str) -> Option<f64> {
        self.prices.spot.get(size).copied()
    }

    /// The on-demand price offerings carry: [`MISSING_PRICE`] when unknown.
    pub fn on_demand_or_missing(&self, size: &str) -> f64 {
        self.on_demand(size).unwrap_or(MISSING_PRICE)
    }

    /// The spot price offerings carry: [`MISSING_PRICE`] when unknown.
    pub fn spot_or_missing(&self, size: &str) -> f64 {
        self.spot(size).unwrap_or(MISSING_PRICE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages() -> Vec<RetailPricePage> {
        [
            include_str!("../testdata/retail-prices-eastus-1.json"),
            include_str!("../testdata/retail-prices-eastus-2.json"),
        ]
        .into_iter()
        .map(|body| parse_page(body).expect("the fixture parses"))
        .collect()
    }

    #[test]
    fn pages_chain_by_next_link() {
        let pages = pages();
        assert_eq!(
            pages[0].next_page_link.as_deref(),
            Some(
                "https://prices.azure.com:443/api/retail/prices?$filter=armRegionName%20eq%20%27eastus%27&$skip=100"
            )
        );
        assert_eq!(pages[1].next_page_link, None);
        assert!(parse_page(r#"{"Items": 3}"#).is_err());
    }

    #[test]
    fn items_sort_into_on_demand_and_spot() {
        let prices = categorize(&pages());
        let cases = [
            // (size, on demand, spot)
            ("Standard_D2s_v3", Some(0.096), Some(0.0192)),
            // Only Windows and Low Priority meters: no price.
            ("Standard_D2_v2", None, None),
            // Only a spot meter.
            ("Standard_NC6s_v3", None, Some(0.918)),
            // Dev/test and reservation prices are not consumption prices.
            ("Standard_B20ms", Some(0.832), None),
            // On the second page.
            ("Standard_NC24ads_A100_v4", Some(3.673), Some(0.7346)),
        ];
        for (size, on_demand, spot) in cases {
            assert_eq!(prices.on_demand.get(size).copied(), on_demand, "{size}");
            assert_eq!(prices.spot.get(size).copied(), spot, "{size}");
        }
        assert_eq!(prices.on_demand.len(), 3);
        assert_eq!(prices.spot.len(), 3);
    }

    #[test]
    fn embedded_prices_stand_in_for_spot_until_refreshed() {
        let table = PriceTable::embedded();
        assert_eq!(table.on_demand("Standard_D2s_v3"), Some(0.096));
        assert_eq!(table.spot("Standard_D2s_v3"), Some(0.096));
        assert_eq!(table.on_demand("Standard_Nope_v9"), None);
        assert_eq!(
            table.on_demand_or_missing("Standard_Nope_v9"),
            MISSING_PRICE
        );
        assert_eq!(table.spot_or_missing("Standard_Nope_v9"), MISSING_PRICE);
    }

    #[test]
    fn update_replaces_each_kind_only_when_the_refresh_has_it() {
        let mut table = PriceTable::embedded();
        let embedded_d2_v2 = table.on_demand("Standard_D2_v2");
        assert!(embedded_d2_v2.is_some());

        // Nothing at all: both kinds keep the old prices.
        let empty = RetailPricePage::default();
        let changed = table.update([&empty]);
        assert_eq!(
            changed,
            PriceUpdate {
                on_demand: false,
                spot: false
            }
        );
        assert_eq!(table, PriceTable::embedded());

        // Only spot prices: on-demand stays, spot is replaced wholesale.
        let spot_only = RetailPricePage {
            items: vec![RetailPrice {
                arm_sku_name: "Standard_D2s_v3".into(),
                retail_price: 0.02,
                sku_name: "D2s v3 Spot".into(),
                meter_name: "D2s v3 Spot".into(),
                product_name: "Virtual Machines DSv3 Series".into(),
                price_type: "Consumption".into(),
                ..RetailPrice::default()
            }],
            next_page_link: None,
        };
        let changed = table.update([&spot_only]);
        assert_eq!(
            changed,
            PriceUpdate {
                on_demand: false,
                spot: true
            }
        );
        assert_eq!(table.on_demand("Standard_D2s_v3"), Some(0.096));
        assert_eq!(table.spot("Standard_D2s_v3"), Some(0.02));
        assert_eq!(
            table.spot("Standard_D2_v2"),
            None,
            "a refresh replaces the spot prices; it does not merge"
        );

        // A full refresh replaces on-demand too: sizes it does not price lose their price.
        table.update(&pages());
        assert_eq!(table.on_demand("Standard_D2s_v3"), Some(0.096));
        assert_eq!(table.on_demand("Standard_D2_v2"), None);
        assert_eq!(table.on_demand_or_missing("Standard_D2_v2"), MISSING_PRICE);
        assert_eq!(table.spot("Standard_NC6s_v3"), Some(0.918));
    }
}
