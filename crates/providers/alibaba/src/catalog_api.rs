//! Where instance types, availability and prices come from in a cluster: ECS's
//! `DescribeInstanceTypes`, `DescribeAvailableResource` (on demand and spot) and
//! `DescribeSpotPriceHistory` through the signed [`Client`], and the price server's public
//! (unsigned) JSON. Each call is read whole, every page; what the answers mean is
//! [`crate::instancetype`]'s and [`crate::pricing`]'s business.

use bytes::Bytes;
use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};

use crate::client::{AlibabaError, Client, MAX_PAGES, Params, parse};
use crate::endpoint::Product;
use crate::instancetype::{
    Availability, DescribeAvailableResourceAnswer, EcsInstanceType, InstanceTypesError,
    ZonesByType, zones_with_stock,
};
use crate::pricing::{
    self, PriceServerPrices, PricingError, SpotPriceHistoryPage, SpotPriceRecord,
};

/// Types per `DescribeInstanceTypes` page: ECS's most since November 2023 (a call without a
/// token gets only the first page).
pub const INSTANCE_TYPES_PAGE_SIZE: u32 = 100;
/// The spot strategy whose stock `DescribeAvailableResource` is asked for: pay the market
/// price, as the provider's spot launches do.
pub const SPOT_STRATEGY: &str = "SpotAsPriceGo";

/// Why a catalog call failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogApiError {
    /// ECS refused or could not be reached.
    #[error(transparent)]
    Alibaba(#[from] AlibabaError),
    /// An availability answer without zones.
    #[error(transparent)]
    Availability(#[from] InstanceTypesError),
    /// The price server refused or could not be reached.
    #[error("reading prices from {url}: {reason}")]
    PriceServer {
        /// The URL asked.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The price server's answer is unusable.
    #[error(transparent)]
    Pricing(#[from] PricingError),
}

/// Every instance type ECS describes in the client's region, every page.
pub async fn describe_instance_types(
    client: &Client,
) -> Result<Vec<EcsInstanceType>, AlibabaError> {
    const ACTION: &str = "DescribeInstanceTypes";
    client
        .pages_by_token(
            Product::Ecs,
            ACTION,
            &Params::new(),
            "InstanceTypes.InstanceType",
            Some(INSTANCE_TYPES_PAGE_SIZE),
        )
        .await?
        .into_iter()
        .map(|item| parse(ACTION, item))
        .collect()
}

/// The zones with stock of each type in the client's region, on demand or (`spot`) at the
/// market price.
pub async fn describe_available_resource(
    client: &Client,
    spot: bool,
) -> Result<ZonesByType, CatalogApiError> {
    const ACTION: &str = "DescribeAvailableResource";
    let mut params = Params::new()
        .with("RegionId", client.endpoints().region.clone())
        .with("DestinationResource", "InstanceType")
        .with("InstanceChargeType", "PostPaid");
    if spot {
        params.set("SpotStrategy", SPOT_STRATEGY);
    }
    let answer = client.call(Product::Ecs, ACTION, &params).await?;
    let answer: DescribeAvailableResourceAnswer = parse(ACTION, answer)?;
    Ok(zones_with_stock(&answer)?)
}

/// On-demand then spot availability; either failing fails both, so a refresh never pairs
/// fresh on-demand stock with stale spot stock.
pub async fn availability(client: &Client) -> Result<Availability, CatalogApiError> {
    Ok(Availability {
        on_demand: describe_available_resource(client, false).await?,
        spot: describe_available_resource(client, true).await?,
    })
}

/// A type's spot prices of the last three hours (ECS's default window) in every zone of the
/// client's region, every page (`Offset` / `NextOffset`), for Linux in a VPC: the answer's
/// currency and its records.
pub async fn spot_price_history(
    client: &Client,
    instance_type: &str,
) -> Result<(Option<String>, Vec<SpotPriceRecord>), AlibabaError> {
    const ACTION: &str = "DescribeSpotPriceHistory";
    let mut params = Params::new()
        .with("RegionId", client.endpoints().region.clone())
        .with("InstanceType", instance_type)
        .with("NetworkType", "vpc")
        .with("OSType", "linux");
    let mut currency = None;
    let mut records = Vec::new();
    let mut offset = 0;
    for _ in 0..MAX_PAGES {
        let page = client.call(Product::Ecs, ACTION, &params).await?;
        let page: SpotPriceHistoryPage = parse(ACTION, page)?;
        currency = currency.or(page.currency);
        let empty = page.spot_prices.spot_price_type.is_empty();
        records.extend(page.spot_prices.spot_price_type);
        // A next offset that does not move on would ask for the same page forever.
        match page.next_offset {
            Some(next) if next > offset && !empty => {
                offset = next;
                params.set("Offset", next.to_string());
            }
            _ => return Ok((currency, records)),
        }
    }
    Err(AlibabaError::Parse {
        action: ACTION.into(),
        reason: format!("more than {MAX_PAGES} pages"),
    })
}

/// What a spot price refresh of several types found.
#[derive(Debug, Default)]
pub struct SpotHistory {
    /// The answers' currency.
    pub currency: Option<String>,
    /// Every record of every type asked.
    pub records: Vec<SpotPriceRecord>,
    /// The types whose history could not be read, and why; the others' prices still count
    /// (the price server skips such types the same way).
    pub failed: Vec<(String, AlibabaError)>,
}

/// The spot price history of each of `instance_types`, one call (or more pages) per type:
/// ECS has no call for a region's spot prices at once, which is why upstream reads them from
/// its price server instead. Callers ask for the types they may launch.
pub async fn spot_price_histories<'a>(
    client: &Client,
    instance_types: impl IntoIterator<Item = &'a str>,
) -> SpotHistory {
    let mut history = SpotHistory::default();
    for name in instance_types {
        match spot_price_history(client, name).await {
            Ok((currency, records)) => {
                history.currency = history.currency.or(currency);
                history.records.extend(records);
            }
            Err(e) => history.failed.push((name.to_string(), e)),
        }
    }
    history
}

/// The price server's URL for `region` under `base` ([`pricing::PRICE_SERVER_URL`]).
pub fn price_server_url(base: &str, region: &str) -> String {
    format!(
        "{}/api/v1/alibabacloud/ecs/regions/{region}/price",
        base.trim_end_matches('/')
    )
}

/// The price server's on-demand and spot prices of `region`, retried on server errors as
/// `retry` says ([`RetryPolicy::STANDARD`] in the operator).
pub async fn price_server(
    http: &HttpClient,
    base: &str,
    region: &str,
    retry: RetryPolicy,
) -> Result<PriceServerPrices, CatalogApiError> {
    let url = price_server_url(base, region);
    let failed = |reason: String| CatalogApiError::PriceServer {
        url: url.clone(),
        reason,
    };
    let request = http::Request::get(&url)
        .header("accept", "application/json")
        .header("user-agent", crate::client::USER_AGENT)
        .body(Bytes::new())
        .map_err(|e| failed(e.to_string()))?;
    let response = http
        .send_with_retries(&request, retry)
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !response.is_success() {
        let body = String::from_utf8_lossy(&response.body[..response.body.len().min(300)]);
        return Err(failed(format!("HTTP {}: {body}", response.status)));
    }
    Ok(pricing::parse_price_server(&response.body, region)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_price_server_url_is_upstreams() {
        assert_eq!(
            price_server_url(pricing::PRICE_SERVER_URL, "cn-beijing"),
            "https://price.cloudpilot.ai/api/v1/alibabacloud/ecs/regions/cn-beijing/price"
        );
        assert_eq!(
            price_server_url("http://127.0.0.1:8080/", "us-east-1"),
            "http://127.0.0.1:8080/api/v1/alibabacloud/ecs/regions/us-east-1/price"
        );
    }
}
