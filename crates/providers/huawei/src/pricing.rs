//! On-demand flavor prices, as huaweicloud-samples' provider reads them
//! (`pkg/providers/pricing/pricing.go`): BSS `ListOnDemandResourceRatings`
//! (`POST /v2/bills/ratings/on-demand-resources` on the global BSS endpoint) asked for one
//! hour of each flavor's Linux spec (`<flavor id>.linux`) in the region, at most
//! [`MAX_PRODUCTS_PER_REQUEST`] flavors a request ([`ratings_request`], [`price_batches`]);
//! the answer's `amount` per product id (the flavor's name), else its
//! `official_website_amount` ([`parse_ratings`]). BSS refuses a whole request when one spec is
//! unknown to it (`CBC.6006` "Can not find product …"); [`unsupported_resource_spec`] names
//! that spec so the caller drops its flavors, remembers them as unpriceable, and asks again.
//!
//! Until BSS answers, [`PriceTable::embedded`] holds prices of a few dozen flavors in
//! [`EMBEDDED_REGION`] (upstream has no such table and starts with no price at all). A flavor
//! without a price is still offered, at [`MISSING_PRICE`], as upstream does: chosen last, but
//! launchable when nothing priced fits (and launchable at all when BSS is unreachable).
//!
//! ## Currency
//! BSS answers in the account's currency: CNY on the China site (an answer without `currency`
//! is CNY), USD on the international site. Prices are only compared with each other, so what
//! matters is that one table has one currency: a table is replaced whole by each refresh
//! ([`PriceTable::from_ratings`]), never merged across answers, and records its currency.
//! The embedded table is in [`EMBEDDED_CURRENCY`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::instancetype::Flavor;

/// BSS's cloud service type of ECS.
pub const CLOUD_SERVICE_TYPE_ECS: &str = "hws.service.type.ec2";
/// BSS's resource type of an ECS server.
pub const RESOURCE_TYPE_VM: &str = "hws.resource.type.vm";
/// The usage factor of a server: how long it runs.
pub const USAGE_FACTOR_DURATION: &str = "Duration";
/// BSS's measure id of an hour.
pub const USAGE_MEASURE_HOUR: i32 = 4;
/// `inquiry_precision` 1: amounts to ten decimals (the default cuts at six).
pub const INQUIRY_PRECISION_HIGH: i32 = 1;
/// Products upstream prices in one request.
pub const MAX_PRODUCTS_PER_REQUEST: usize = 100;
/// The suffix of a flavor's Linux spec (`c7.large.2.linux`).
pub const LINUX_SPEC_SUFFIX: &str = ".linux";
/// BSS's "product not found" code, and the code it wraps it in.
pub const PRODUCT_NOT_FOUND_CODES: [&str; 2] = ["CBC.6006", "CBC.99006006"];
/// What precedes the spec in BSS's "product not found" message.
const PRODUCT_NOT_FOUND_PREFIX: &str = "Can not find product ";
/// The price of an offering whose flavor has no price (upstream's `math.MaxFloat64`).
pub const MISSING_PRICE: f64 = f64::MAX;
/// The currency an answer without `currency` is in.
pub const DEFAULT_CURRENCY: &str = "CNY";

/// The region of the embedded table.
pub const EMBEDDED_REGION: &str = "cn-north-4";
/// The currency of the embedded table.
pub const EMBEDDED_CURRENCY: &str = "CNY";

const EMBEDDED: &str = include_str!("../data/flavors.json");

/// Why prices could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PricingError {
    /// The body is not a `ListOnDemandResourceRatings` answer.
    #[error("unreadable ListOnDemandResourceRatings answer: {0}")]
    Parse(String),
}

/// One flavor of the embedded data (`data/flavors.json`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub(crate) struct EmbeddedFlavor {
    pub name: String,
    pub vcpus: i64,
    pub ram_mib: i64,
    pub architecture: String,
    pub on_demand_price_per_hour: f64,
}

/// The embedded data: its region, currency and flavors.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub(crate) struct EmbeddedData {
    pub region: String,
    pub currency: String,
    pub zones: Vec<String>,
    pub flavors: Vec<EmbeddedFlavor>,
}

/// The embedded data, parsed.
pub(crate) fn embedded_data() -> EmbeddedData {
    serde_json::from_str(EMBEDDED).expect("the embedded Huawei Cloud flavors parse")
}

/// On-demand prices per hour of one region's flavors, in one currency.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceTable {
    region: String,
    currency: String,
    on_demand: BTreeMap<String, f64>,
}

impl PriceTable {
    /// A table of `prices` (flavor → price per hour) for `region` in `currency`. Zero,
    /// negative and non-finite prices are left out: BSS means "no price" by them, and a zero
    /// would make the flavor look free.
    pub fn new(
        region: impl Into<String>,
        currency: impl Into<String>,
        prices: impl IntoIterator<Item = (String, f64)>,
    ) -> Self {
        Self {
            region: region.into(),
            currency: currency.into(),
            on_demand: prices
                .into_iter()
                .filter(|(_, p)| p.is_finite() && *p > 0.0)
                .collect(),
        }
    }

    /// The embedded prices when `region` is [`EMBEDDED_REGION`] (derived from a comparable
    /// cloud's list prices, not Huawei's: `data/README.md`); for any other region an
    /// empty table (prices differ by region, and another region's would mislead more than
    /// none: every flavor is then offered at [`MISSING_PRICE`] until BSS answers).
    pub fn embedded(region: &str) -> Self {
        let data = embedded_data();
        if region != data.region {
            return Self::new(region, data.currency, []);
        }
        Self::new(
            data.region,
            data.currency,
            data.flavors
                .into_iter()
                .map(|f| (f.name, f.on_demand_price_per_hour)),
        )
    }

    /// The prices a live provider in `region` starts from until BSS answers (or when it may
    /// not ask): the embedded figures, which are estimates for [`EMBEDDED_REGION`]
    /// (`data/README.md`), relabelled for `region`. They order flavors roughly as their real
    /// prices do, which beats offering every flavor at [`MISSING_PRICE`].
    pub fn fallback(region: &str) -> Self {
        let embedded = Self::embedded(EMBEDDED_REGION);
        Self::new(region, embedded.currency.clone(), embedded.on_demand)
    }

    /// The table a refresh makes from BSS's answers for `region`: it replaces the previous
    /// table whole, so a flavor BSS no longer prices loses its price (as upstream's refresh
    /// does).
    pub fn from_ratings(region: impl Into<String>, ratings: Ratings) -> Self {
        Self::new(region, ratings.currency, ratings.prices)
    }

    /// The region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The currency (`CNY`, `USD`).
    pub fn currency(&self) -> &str {
        &self.currency
    }

    /// The on-demand price per hour of a flavor.
    pub fn on_demand(&self, flavor: &str) -> Option<f64> {
        self.on_demand.get(flavor).copied()
    }

    /// The on-demand price per hour, or [`MISSING_PRICE`].
    pub fn on_demand_or_missing(&self, flavor: &str) -> f64 {
        self.on_demand(flavor).unwrap_or(MISSING_PRICE)
    }

    /// The flavors with a price.
    pub fn flavors(&self) -> impl Iterator<Item = &str> {
        self.on_demand.keys().map(String::as_str)
    }

    /// How many flavors have a price.
    pub fn len(&self) -> usize {
        self.on_demand.len()
    }

    /// Whether no flavor has a price.
    pub fn is_empty(&self) -> bool {
        self.on_demand.is_empty()
    }
}

/// The spec BSS prices a flavor by: its id (its name when the id is empty) and `.linux`.
pub fn resource_spec(flavor: &Flavor) -> String {
    let id = if flavor.id.is_empty() {
        &flavor.name
    } else {
        &flavor.id
    };
    format!("{id}{LINUX_SPEC_SUFFIX}")
}

/// The flavors to price: one per name (the last listed), without those BSS refused before
/// (`unsupported`, by name), sorted by name as upstream asks for them.
pub fn flavors_to_price<'a>(
    flavors: &'a [Flavor],
    unsupported: &BTreeSet<String>,
) -> Vec<&'a Flavor> {
    let by_name: BTreeMap<&str, &Flavor> = flavors
        .iter()
        .filter(|f| !f.name.is_empty())
        .map(|f| (f.name.as_str(), f))
        .collect();
    by_name
        .into_iter()
        .filter(|(name, _)| !unsupported.contains(*name))
        .map(|(_, f)| f)
        .collect()
}

/// The requests' batches: [`MAX_PRODUCTS_PER_REQUEST`] flavors each, in order.
pub fn price_batches<'a, 'f>(
    flavors: &'a [&'f Flavor],
) -> impl Iterator<Item = &'a [&'f Flavor]> + 'a {
    flavors.chunks(MAX_PRODUCTS_PER_REQUEST)
}

/// The body of `ListOnDemandResourceRatings` for one batch of flavors: one hour of each
/// flavor's Linux spec in `region`, one server, ten-decimal amounts; each product's id is the
/// flavor's name, which the answer's results carry back.
pub fn ratings_request(project_id: &str, region: &str, flavors: &[&Flavor]) -> Value {
    let products: Vec<Value> = flavors
        .iter()
        .map(|f| {
            json!({
                "id": f.name,
                "cloud_service_type": CLOUD_SERVICE_TYPE_ECS,
                "resource_type": RESOURCE_TYPE_VM,
                "resource_spec": resource_spec(f),
                "region": region,
                "usage_factor": USAGE_FACTOR_DURATION,
                "usage_value": 1,
                "usage_measure_id": USAGE_MEASURE_HOUR,
                "subscription_num": 1,
            })
        })
        .collect();
    json!({
        "project_id": project_id,
        "inquiry_precision": INQUIRY_PRECISION_HIGH,
        "product_infos": products,
    })
}

/// The flavors of a batch without those whose spec is `spec` (BSS refused it), and those
/// removed. When none is removed the refusal is about something else: the caller must stop
/// rather than ask again.
pub fn without_resource_spec<'f>(
    flavors: &[&'f Flavor],
    spec: &str,
) -> (Vec<&'f Flavor>, Vec<&'f Flavor>) {
    flavors.iter().partition(|f| resource_spec(f) != spec)
}

/// One pricing refresh, as upstream runs it: the flavors not refused before, in batches of
/// [`MAX_PRODUCTS_PER_REQUEST`]; `ask` sends a batch's [`ratings_request`] and reads the
/// answer. A batch refused for a spec BSS does not know (`refused_spec` reads it off the
/// error) is asked again without that spec's flavors, which are remembered in `unsupported`
/// so later refreshes leave them out; any other refusal (or one naming no flavor of the batch,
/// which would only loop) ends the refresh with that error. Pure: the I/O is `ask`'s.
pub async fn rate<E, F, Fut>(
    project_id: &str,
    region: &str,
    flavors: &[Flavor],
    unsupported: &mut BTreeSet<String>,
    mut ask: F,
    refused_spec: impl Fn(&E) -> Option<String>,
) -> Result<Ratings, E>
where
    F: FnMut(Value) -> Fut,
    Fut: std::future::Future<Output = Result<Ratings, E>>,
{
    let wanted = flavors_to_price(flavors, unsupported);
    let mut out = Ratings::default();
    for batch in price_batches(&wanted) {
        let mut batch: Vec<&Flavor> = batch.to_vec();
        while !batch.is_empty() {
            match ask(ratings_request(project_id, region, &batch)).await {
                Ok(ratings) => {
                    out.merge(ratings);
                    break;
                }
                Err(e) => {
                    let Some(spec) = refused_spec(&e) else {
                        return Err(e);
                    };
                    let (kept, removed) = without_resource_spec(&batch, &spec);
                    if removed.is_empty() {
                        return Err(e);
                    }
                    unsupported.extend(removed.iter().map(|f| f.name.clone()));
                    batch = kept;
                }
            }
        }
    }
    Ok(out)
}

/// A decimal amount, which BSS writes as a number (the SDK also reads a quoted one).
fn amount<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        N(f64),
        S(String),
    }
    Ok(match Option::<Either>::deserialize(d)? {
        Some(Either::N(n)) => Some(n),
        Some(Either::S(s)) => s.trim().parse().ok(),
        None => None,
    })
}

/// One product's result (the SDK's `DemandProductRatingResult`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DemandProductRatingResult {
    /// The request's product id (the flavor's name).
    pub id: Option<String>,
    /// BSS's product id.
    pub product_id: Option<String>,
    /// What the account pays, discounts applied.
    #[serde(deserialize_with = "amount")]
    pub amount: Option<f64>,
    /// The discount.
    #[serde(deserialize_with = "amount")]
    pub discount_amount: Option<f64>,
    /// The list price.
    #[serde(deserialize_with = "amount")]
    pub official_website_amount: Option<f64>,
    /// The unit of the amounts (1: yuan or dollars).
    pub measure_id: Option<i32>,
}

impl DemandProductRatingResult {
    /// The price: `amount`, else `official_website_amount`, as upstream reads it.
    pub fn price(&self) -> Option<f64> {
        self.amount.or(self.official_website_amount)
    }
}

/// `ListOnDemandResourceRatings`' answer (the SDK's `ListOnDemandResourceRatingsResponse`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ListOnDemandResourceRatingsResponse {
    /// The total the account pays.
    #[serde(deserialize_with = "amount")]
    pub amount: Option<f64>,
    /// The total discount.
    #[serde(deserialize_with = "amount")]
    pub discount_amount: Option<f64>,
    /// The total list price.
    #[serde(deserialize_with = "amount")]
    pub official_website_amount: Option<f64>,
    /// The unit of the amounts.
    pub measure_id: Option<i32>,
    /// `CNY` (also when absent) or `USD`.
    pub currency: Option<String>,
    /// One result per product.
    pub product_rating_results: Vec<DemandProductRatingResult>,
}

/// What answers said: prices by flavor name, and their currency.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ratings {
    /// The answers' currency.
    pub currency: String,
    /// Price per hour by flavor name.
    pub prices: BTreeMap<String, f64>,
}

impl Ratings {
    /// Adds another batch's answer; a flavor priced twice keeps the later price.
    pub fn merge(&mut self, other: Ratings) {
        if self.prices.is_empty() || self.currency.is_empty() {
            self.currency = other.currency;
        }
        self.prices.extend(other.prices);
    }
}

/// Reads one `ListOnDemandResourceRatings` answer: each result with an id and a positive,
/// finite price gives that flavor's price per hour.
pub fn parse_ratings(body: &[u8]) -> Result<Ratings, PricingError> {
    let answer: ListOnDemandResourceRatingsResponse =
        serde_json::from_slice(body).map_err(|e| PricingError::Parse(e.to_string()))?;
    Ok(ratings(&answer))
}

/// The prices of a parsed answer (see [`parse_ratings`]).
pub fn ratings(answer: &ListOnDemandResourceRatingsResponse) -> Ratings {
    Ratings {
        currency: answer
            .currency
            .clone()
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| DEFAULT_CURRENCY.into()),
        prices: answer
            .product_rating_results
            .iter()
            .filter_map(|r| Some((r.id.clone()?, r.price()?)))
            .filter(|(_, p)| p.is_finite() && *p > 0.0)
            .collect(),
    }
}

/// A BSS error body: `{"error_code": …, "error_msg": …}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct BssError {
    /// `CBC.6006`, `CBC.99006006`, …
    pub error_code: String,
    /// The message.
    pub error_msg: String,
}

/// The spec a "product not found" message names: what follows `Can not find product ` up to
/// a quote, backslash, space, comma or bracket.
pub fn spec_in_message(message: &str) -> Option<String> {
    let start = message.find(PRODUCT_NOT_FOUND_PREFIX)? + PRODUCT_NOT_FOUND_PREFIX.len();
    let rest = &message[start..];
    let end = rest.find(['"', '\\', ' ', ',', ']']).unwrap_or(rest.len());
    Some(rest[..end].trim().to_string()).filter(|s| !s.is_empty())
}

/// The spec BSS refused, from an error's code and message; `None` when the error is not
/// "product not found". BSS wraps its rating service's error: the outer code is
/// `CBC.99006006` and the message embeds the inner `{"error_code":"CBC.6006",…}`; when such a
/// payload is embedded its code and message decide, else the outer ones do.
pub fn unsupported_resource_spec(error_code: &str, error_msg: &str) -> Option<String> {
    let embedded = error_msg
        .find(r#"{"error_code":"#)
        .zip(error_msg.rfind('}'))
        .filter(|(start, end)| end >= start)
        .and_then(|(start, end)| serde_json::from_str::<BssError>(&error_msg[start..=end]).ok())
        .filter(|e| !e.error_code.is_empty());
    let (code, message) = match &embedded {
        Some(e) => (e.error_code.as_str(), e.error_msg.as_str()),
        None => (error_code, error_msg),
    };
    if !PRODUCT_NOT_FOUND_CODES.contains(&code) {
        return None;
    }
    spec_in_message(message)
}

/// The spec BSS refused, from an error answer's body (see [`unsupported_resource_spec`]);
/// `None` for a body that is not a BSS error or not "product not found".
pub fn unsupported_resource_spec_in_body(body: &[u8]) -> Option<String> {
    let error: BssError = serde_json::from_slice(body).ok()?;
    unsupported_resource_spec(&error.error_code, &error.error_msg)
}

#[cfg(test)]
#[path = "pricing_tests.rs"]
mod tests;
