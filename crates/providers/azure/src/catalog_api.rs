//! Where instance types and prices come from in a cluster: the region's Resource SKUs through
//! ARM, and the public (unauthenticated) Retail Prices API. Both are read whole, every page.

use bytes::Bytes;
use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};

use crate::arm::{Arm, ArmError};
use crate::pricing::{self, RetailPricePage};
use crate::skus::{ResourceSku, VIRTUAL_MACHINES};

/// The Resource SKUs API version upstream reads (through Azure/skewer).
pub const SKUS_API: &str = "2021-07-01";
/// The Retail Prices API version upstream asks for.
pub const RETAIL_PRICES_API: &str = "2023-01-01-preview";
/// The public Retail Prices endpoint.
pub const RETAIL_PRICES_URL: &str = "https://prices.azure.com/api/retail/prices";
/// Pages followed at most: eastus has about 60; a link that never ends must not spin forever.
const MAX_PRICE_PAGES: usize = 1000;

/// Why prices could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PricesError {
    /// The request failed or was refused.
    #[error("reading retail prices from {url}: {reason}")]
    Http {
        /// The page's URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// A page is not a Retail Prices page.
    #[error(transparent)]
    Parse(#[from] pricing::PricingError),
    /// The pages did not end.
    #[error("retail prices: more than {MAX_PRICE_PAGES} pages")]
    TooManyPages,
}

/// The VM sizes the subscription sees in `location` (every other resource type dropped).
pub async fn resource_skus(
    arm: &Arm,
    subscription_id: &str,
    location: &str,
) -> Result<Vec<ResourceSku>, ArmError> {
    let filter = format!("location eq '{location}'");
    let items = arm
        .list(
            &format!("/subscriptions/{subscription_id}/providers/Microsoft.Compute/skus"),
            SKUS_API,
            &[("$filter", &filter)],
        )
        .await?;
    let mut skus = Vec::with_capacity(items.len());
    for item in items {
        let sku: ResourceSku =
            serde_json::from_value(item).map_err(|e| ArmError::Parse(e.to_string()))?;
        if sku.resource_type == VIRTUAL_MACHINES {
            skus.push(sku);
        }
    }
    Ok(skus)
}

/// The first page's URL for `region`'s VM consumption prices in USD, as upstream filters them.
pub fn retail_prices_url(base: &str, region: &str) -> String {
    let filter = format!(
        "priceType eq 'Consumption' and currencyCode eq 'USD' and serviceFamily eq 'Compute' and serviceName eq 'Virtual Machines' and armRegionName eq '{region}'"
    );
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("api-version", RETAIL_PRICES_API)
        .append_pair("$filter", &filter)
        .finish();
    format!("{base}?{query}")
}

/// Every page of `region`'s VM prices from the Retail Prices API at `base`.
pub async fn retail_prices(
    http: &HttpClient,
    base: &str,
    region: &str,
) -> Result<Vec<RetailPricePage>, PricesError> {
    let mut pages = Vec::new();
    let mut url = retail_prices_url(base, region);
    loop {
        if pages.len() >= MAX_PRICE_PAGES {
            return Err(PricesError::TooManyPages);
        }
        let failed = |reason: String| PricesError::Http {
            url: url.clone(),
            reason,
        };
        let request = http::Request::get(&url)
            .body(Bytes::new())
            .map_err(|e| failed(e.to_string()))?;
        let response = http
            .send_with_retries(&request, RetryPolicy::STANDARD)
            .await
            .map_err(|e| failed(e.to_string()))?;
        if !response.is_success() {
            let body = String::from_utf8_lossy(&response.body[..response.body.len().min(300)]);
            return Err(failed(format!("HTTP {}: {body}", response.status)));
        }
        let page = pricing::parse_page(&String::from_utf8_lossy(&response.body))?;
        let next = page.next_page_link.clone().filter(|l| !l.is_empty());
        pages.push(page);
        match next {
            Some(next) => url = next,
            None => return Ok(pages),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_price_query_is_upstreams_filter() {
        let url = retail_prices_url(RETAIL_PRICES_URL, "westeurope");
        let query = url.split_once('?').unwrap().1;
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        assert_eq!(pairs[0], ("api-version".into(), RETAIL_PRICES_API.into()));
        assert_eq!(pairs[1].0, "$filter");
        assert!(pairs[1].1.ends_with("armRegionName eq 'westeurope'"));
        assert!(pairs[1].1.starts_with("priceType eq 'Consumption'"));
    }
}
