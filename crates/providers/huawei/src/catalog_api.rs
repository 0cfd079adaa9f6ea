//! The calls that feed the catalog and the status loop: ECS flavors and zones, BSS on-demand
//! ratings, and VPC subnets. The answers go to the pure [`crate::instancetype`],
//! [`crate::pricing`] and [`crate::subnet`].

use std::collections::BTreeSet;

use crate::client::{Client, ClientError};
use crate::endpoint::Service;
use crate::instancetype::{self, Flavor, ListServerAzInfoResponse};
use crate::pricing::{self, Ratings};
use crate::subnet::SubnetInfo;

/// Subnets per `ListSubnets` page (VPC's largest).
const SUBNET_PAGE: u32 = 2000;

/// Reads the items of a paged listing into `T`.
fn items<T: serde::de::DeserializeOwned>(
    values: Vec<serde_json::Value>,
    service: Service,
    path: &str,
) -> Result<Vec<T>, ClientError> {
    values
        .into_iter()
        .map(|v| {
            serde_json::from_value(v).map_err(|e| ClientError::Decode {
                service,
                path: path.to_string(),
                reason: e.to_string(),
            })
        })
        .collect()
}

/// Every flavor of the region (`GET /v1/{project_id}/cloudservers/flavors`, paged by `limit`
/// and `marker` as upstream asks).
pub async fn list_flavors(client: &Client) -> Result<Vec<Flavor>, ClientError> {
    let project = client.project_id().await?;
    let path = format!("/v1/{project}/cloudservers/flavors");
    let found = client
        .list_by_marker(
            Service::Ecs,
            &path,
            &[],
            "flavors",
            instancetype::LIST_FLAVORS_PAGE_SIZE,
        )
        .await?;
    items(found, Service::Ecs, &path)
}

/// The region's zones (`ListServerAzInfo`, `GET /v1/{project_id}/availability-zones`).
pub async fn availability_zones(client: &Client) -> Result<Vec<String>, ClientError> {
    let project = client.project_id().await?;
    let answer: ListServerAzInfoResponse = client
        .get(
            Service::Ecs,
            &format!("/v1/{project}/availability-zones"),
            &[],
        )
        .await?;
    Ok(answer.zone_ids())
}

/// Every subnet of the project (`GET /v1/{project_id}/subnets`, paged by `marker`).
pub async fn list_subnets(client: &Client) -> Result<Vec<SubnetInfo>, ClientError> {
    let project = client.project_id().await?;
    let path = format!("/v1/{project}/subnets");
    let found = client
        .list_by_marker(Service::Vpc, &path, &[], "subnets", SUBNET_PAGE)
        .await?;
    items(found, Service::Vpc, &path)
}

/// On-demand prices of `flavors` in `region` from BSS (`ListOnDemandResourceRatings` on the
/// global endpoint), through [`pricing::rate`]: a spec BSS does not know is dropped and
/// remembered in `unsupported`, as upstream.
pub async fn on_demand_ratings(
    client: &Client,
    region: &str,
    flavors: &[Flavor],
    unsupported: &mut BTreeSet<String>,
) -> Result<Ratings, ClientError> {
    let project = client.project_id().await?;
    pricing::rate(
        &project,
        region,
        flavors,
        unsupported,
        |body| async move {
            client
                .post_idempotent::<pricing::ListOnDemandResourceRatingsResponse>(
                    Service::Bss,
                    "/v2/bills/ratings/on-demand-resources",
                    &body,
                )
                .await
                .map(|answer| pricing::ratings(&answer))
        },
        |e: &ClientError| {
            let a = e.api_error()?;
            pricing::unsupported_resource_spec(a.code.as_deref().unwrap_or_default(), &a.message)
        },
    )
    .await
}
