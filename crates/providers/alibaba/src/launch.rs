//! What one `CreateAutoProvisioningGroup` asks for, decided from the NodeClaim, the NodeClass's
//! instance types and its resolved status: the capacity type (spot when the claim allows it and
//! a spot offering is available, else pay-as-you-go), and up to [`MAX_INSTANCE_TYPES`]
//! launch template configs (type × vSwitch), cheapest first, all bootable by the one image the
//! group launches with.
//!
//! Upstream's choices, kept: exotic types (bare metal, GPUs) only when nothing else fits, spot
//! types dearer than the cheapest on-demand one dropped from a launch that could go either way,
//! at most 20 types. Where upstream is loose, this is stricter:
//!
//! * a type's vSwitch is in a zone the claim allows and where the type has an available
//!   offering (upstream picks a random zone for on-demand and `balanced`, whatever the claim's
//!   zone requirement or the type's stock there);
//! * only types the chosen image boots are offered (upstream launches every type with the
//!   cheapest type's image, so an arm64 type could get an x86-64 image).

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_api::NodeClaim;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT};
use karpenter_core::instancetype::{InstanceType, Offering, launchable};
use karpenter_core::scheduling::Requirements;

use crate::ecsnodeclass::{Image, VSwitch, VSwitchSelectionPolicy};
use crate::imagefamily::pick_image;
use crate::instancetype::{LABEL_INSTANCE_SIZE, RESOURCE_AMD_GPU, RESOURCE_NVIDIA_GPU};

/// At most this many instance types go into one group (upstream's `maxInstanceTypes`).
pub const MAX_INSTANCE_TYPES: usize = 20;

/// Fewer types than this, when the claim could have gone spot but goes on-demand, is worth a
/// warning: one stock-out and the launch fails (upstream's `instanceTypeFlexibilityThreshold`).
pub const INSTANCE_TYPE_FLEXIBILITY_THRESHOLD: usize = 5;

/// One `LaunchTemplateConfig.N`: a type in a vSwitch.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchConfig {
    /// `ecs.g7.large`.
    pub instance_type: String,
    /// `vsw-…`.
    pub v_switch_id: String,
    /// The vSwitch's zone.
    pub zone: String,
    /// The offering's price there.
    pub price: f64,
}

/// The group to ask for.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupPlan {
    /// `spot` or `on-demand`.
    pub capacity_type: String,
    /// Cheapest first.
    pub configs: Vec<LaunchConfig>,
    /// The image every instance of the group boots.
    pub image_id: String,
}

impl GroupPlan {
    /// Whether the group launches spot.
    pub fn spot(&self) -> bool {
        self.capacity_type == CAPACITY_TYPE_SPOT
    }
}

/// Why no group can be asked for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// No type, offering and vSwitch satisfies the claim.
    #[error(
        "no instance type, offering and vSwitch satisfies the claim's requirements and requests"
    )]
    NothingFits,
    /// The NodeClass resolved no image the fitting types can boot.
    #[error("status.images: no image boots instance type {0}")]
    NoImage(String),
}

/// Whether an instance type is one a general launch should avoid when others fit: bare metal
/// and GPUs (upstream's `filterExoticInstanceTypes`).
pub fn is_exotic(it: &InstanceType) -> bool {
    let metal = it
        .requirements
        .get(LABEL_INSTANCE_SIZE)
        .is_some_and(|r| r.values().any(|size| size.contains("metal")));
    let gpus = [RESOURCE_NVIDIA_GPU, RESOURCE_AMD_GPU]
        .iter()
        .any(|name| it.capacity.get(name) > 0);
    metal || gpus
}

/// The capacity type of the launch: spot when the claim allows it and some type has a spot
/// offering the claim allows, else on-demand (upstream's `getCapacityType`).
pub fn capacity_type(requirements: &Requirements, types: &[&InstanceType]) -> &'static str {
    let spot = requirements.allows(CAPACITY_TYPE_LABEL, CAPACITY_TYPE_SPOT)
        && types.iter().any(|t| {
            t.compatible_offerings(requirements)
                .any(|o| o.capacity_type == CAPACITY_TYPE_SPOT)
        });
    if spot {
        CAPACITY_TYPE_SPOT
    } else {
        CAPACITY_TYPE_ON_DEMAND
    }
}

/// Whether the claim could launch either spot or on-demand with what is available.
fn is_mixed_capacity(requirements: &Requirements, types: &[&InstanceType]) -> bool {
    if !requirements.allows(CAPACITY_TYPE_LABEL, CAPACITY_TYPE_SPOT)
        || !requirements.allows(CAPACITY_TYPE_LABEL, CAPACITY_TYPE_ON_DEMAND)
    {
        return false;
    }
    let offered = |ct: &str| {
        types.iter().any(|t| {
            t.compatible_offerings(requirements)
                .any(|o| o.capacity_type == ct)
        })
    };
    offered(CAPACITY_TYPE_SPOT) && offered(CAPACITY_TYPE_ON_DEMAND)
}

/// In a launch that could go either way, drops the types whose cheapest offering costs more
/// than the cheapest on-demand one: a big spot type is no bargain next to a small on-demand
/// type that fits (upstream's `filterUnwantedSpot`).
fn drop_unwanted_spot<'a>(
    requirements: &Requirements,
    types: Vec<&'a InstanceType>,
) -> Vec<&'a InstanceType> {
    let cheapest_on_demand = types
        .iter()
        .flat_map(|t| t.compatible_offerings(requirements))
        .filter(|o| o.capacity_type == CAPACITY_TYPE_ON_DEMAND)
        .map(|o| o.price)
        .min_by(f64::total_cmp)
        .unwrap_or(f64::MAX);
    types
        .into_iter()
        .filter(|t| {
            t.cheapest_price(requirements)
                .is_some_and(|p| p <= cheapest_on_demand)
        })
        .collect()
}

/// The vSwitch a type launches into: among the zones where it has an available offering of
/// `capacity_type` the claim allows and the NodeClass has a vSwitch, the cheapest, `spread`
/// choosing among equally cheap ones (on-demand is priced per region, so that spreads
/// on-demand launches over the zones); with `balanced`, `spread` chooses among them all.
fn zone_for<'a>(
    it: &'a InstanceType,
    requirements: &'a Requirements,
    capacity_type: &str,
    v_switch_by_zone: &BTreeMap<&str, &'a VSwitch>,
    policy: VSwitchSelectionPolicy,
    spread: u64,
) -> Option<(&'a Offering, &'a VSwitch)> {
    let mut candidates: Vec<(&Offering, &VSwitch)> = it
        .compatible_offerings(requirements)
        .filter(|o| o.capacity_type == capacity_type)
        .filter_map(|o| Some((o, *v_switch_by_zone.get(o.zone.as_str())?)))
        .collect();
    candidates.sort_by(|a, b| {
        a.0.price
            .total_cmp(&b.0.price)
            .then(a.0.zone.cmp(&b.0.zone))
    });
    let cheapest = candidates.first()?.0.price;
    if policy != VSwitchSelectionPolicy::Balanced {
        candidates.retain(|(o, _)| o.price <= cheapest);
    }
    Some(candidates[(spread % candidates.len() as u64) as usize])
}

/// Plans the group for `claim` from the NodeClass's instance types and its resolved vSwitches
/// and images. `spread` varies the zone among equally cheap ones (the claim's name hashed, so
/// a retry asks for the same group).
pub fn plan(
    claim: &NodeClaim,
    types: &[Arc<InstanceType>],
    v_switches: &[VSwitch],
    images: &[Image],
    policy: VSwitchSelectionPolicy,
    spread: u64,
) -> Result<GroupPlan, PlanError> {
    let (requirements, fitting) = launchable(types, claim);
    let mut fitting: Vec<&InstanceType> = fitting
        .into_iter()
        .map(|t| &**t)
        .filter(|t| t.compatible_offerings(&requirements).next().is_some())
        .collect();
    if fitting.is_empty() {
        return Err(PlanError::NothingFits);
    }
    // minValues asks for that many distinct values among the launch's types: filtering would
    // undo what the scheduler counted.
    if !requirements.iter().any(|r| r.min_values().is_some()) {
        let general: Vec<&InstanceType> =
            fitting.iter().copied().filter(|t| !is_exotic(t)).collect();
        if !general.is_empty() {
            fitting = general;
        }
        if is_mixed_capacity(&requirements, &fitting) {
            fitting = drop_unwanted_spot(&requirements, fitting);
        }
    }
    let capacity_type = capacity_type(&requirements, &fitting);
    let v_switch_by_zone = crate::vswitch::first_per_zone(v_switches);
    let mut configs: Vec<(&InstanceType, LaunchConfig)> = fitting
        .iter()
        .filter_map(|t| {
            let (offering, v_switch) = zone_for(
                t,
                &requirements,
                capacity_type,
                &v_switch_by_zone,
                policy,
                spread,
            )?;
            Some((
                *t,
                LaunchConfig {
                    instance_type: t.name.clone(),
                    v_switch_id: v_switch.id.clone(),
                    zone: offering.zone.clone(),
                    price: offering.price,
                },
            ))
        })
        .collect();
    configs.sort_by(|a, b| {
        a.1.price
            .total_cmp(&b.1.price)
            .then_with(|| a.1.instance_type.cmp(&b.1.instance_type))
    });
    let Some((cheapest, _)) = configs.first() else {
        return Err(PlanError::NothingFits);
    };
    // The group launches with one image: the cheapest type's, and only the types it boots.
    let image = pick_image(images, cheapest).ok_or_else(|| {
        let arch = cheapest
            .requirements
            .get(karpenter_api::labels::ARCH_LABEL)
            .and_then(|r| r.values().next().map(str::to_string))
            .unwrap_or_default();
        PlanError::NoImage(format!("{} ({arch})", cheapest.name))
    })?;
    let configs: Vec<LaunchConfig> = configs
        .into_iter()
        .filter(|(t, _)| pick_image(images, t).is_some_and(|i| i.id == image.id))
        .map(|(_, c)| c)
        .take(MAX_INSTANCE_TYPES)
        .collect();
    Ok(GroupPlan {
        capacity_type: capacity_type.to_string(),
        configs,
        image_id: image.id.clone(),
    })
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
