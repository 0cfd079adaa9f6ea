//! NodeOverlays applied to the instance types every decision sees (feature gate `NodeOverlay`),
//! by upstream's rules:
//!
//! - overlays are taken in order of weight, highest first, and among equal weights by name,
//!   the later in the alphabet first ([`order_by_weight`]);
//! - an overlay matches an instance type of a NodePool when its requirements are compatible
//!   with the type's requirements, the NodePool's name (`karpenter.sh/nodepool`) and the
//!   NodePool's template labels, and with at least one of the type's offerings (by zone and
//!   capacity type); a price overlay changes those offerings, a capacity overlay the type;
//! - the first (heaviest) overlay to set an offering's price, or a resource of a type, wins;
//!   later ones of lower weight only fill in what is still unset;
//! - an overlay that would set something an overlay of the *same* weight already set
//!   conflicts, and is applied nowhere (in no NodePool: validation and application are
//!   separate steps, so an overlay is never half applied); so is one failing runtime
//!   validation.
//!
//! [`evaluate`] computes that once over every NodePool's instance types; [`Evaluation::apply`]
//! returns the overlaid types for one NodePool; [`apply_to_pools`] does both for the NodePools
//! of a decision. The controller, the simulator and `plan` all call it and nothing else.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use karpenter_api::labels::NODE_POOL_LABEL;
use karpenter_api::nodeoverlay::NodeOverlay;
use karpenter_api::validation::runtime::validate_node_overlay;
use karpenter_api::{NodePool, Operator};

use super::NodePoolInput;
use super::{InstanceType, Offering};
use crate::resources::parse_milli;
use crate::scheduling::{AllowUndefined, Requirement, Requirements};

/// How an overlay changes a price.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PriceChange {
    /// `price`: this price instead.
    Set(f64),
    /// `priceAdjustment: "+0.5"` / `"-1"`: plus this amount.
    Add(f64),
    /// `priceAdjustment: "+10%"` / `"-15%"`: plus this percentage.
    Percent(f64),
}

impl PriceChange {
    /// Reads `price` or `priceAdjustment` (at most one is set: the CRD refuses both).
    /// `Ok(None)` when neither is set.
    pub fn parse(price: Option<&str>, adjustment: Option<&str>) -> Result<Option<Self>, String> {
        let number = |field: &str, s: &str| {
            s.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("{field} {s:?} is not a number"))
        };
        match (price, adjustment) {
            (Some(_), Some(_)) => Err("cannot set both price and priceAdjustment".into()),
            (Some(p), None) => {
                let v = number("price", p)?;
                if v < 0.0 {
                    return Err(format!("price {p:?} is negative"));
                }
                Ok(Some(Self::Set(v)))
            }
            (None, Some(a)) => {
                if !a.starts_with(['+', '-']) {
                    return Err(format!(
                        "priceAdjustment {a:?} must start with + or - (a price is set with price)"
                    ));
                }
                match a.strip_suffix('%') {
                    Some(p) => Ok(Some(Self::Percent(number("priceAdjustment", p)?))),
                    None => Ok(Some(Self::Add(number("priceAdjustment", a)?))),
                }
            }
            (None, None) => Ok(None),
        }
    }

    /// The price after the change; never below zero.
    pub fn apply(self, price: f64) -> f64 {
        let changed = match self {
            Self::Set(p) => p,
            Self::Add(d) => price + d,
            Self::Percent(p) => price * (1.0 + p / 100.0),
        };
        changed.max(0.0)
    }
}

/// Orders overlays as upstream applies them: weight descending, then name descending.
pub fn order_by_weight(overlays: &mut [&NodeOverlay]) {
    overlays.sort_by(|a, b| {
        b.weight()
            .cmp(&a.weight())
            .then_with(|| b.name().cmp(a.name()))
    });
}

/// What became of one overlay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Valid, and applied wherever it matches.
    Applied,
    /// Fails runtime validation (the message says why); applied nowhere.
    Invalid(String),
    /// Sets something an overlay of the same weight already set; applied nowhere.
    Conflict,
}

/// An offering's identity within its instance type (upstream keys it by its requirements).
type OfferingKey = (String, String, Option<String>);

fn offering_key(o: &Offering) -> OfferingKey {
    (
        o.zone.clone(),
        o.capacity_type.clone(),
        o.reservation.as_ref().map(|r| r.id.clone()),
    )
}

/// What the overlays change of one instance type in one NodePool.
#[derive(Clone, Debug, Default)]
struct TypeUpdate {
    /// Per offering: the change, and the lowest weight of an overlay that matched it.
    prices: HashMap<OfferingKey, (PriceChange, i32)>,
    /// Extended resources set, in thousandths.
    capacity: BTreeMap<String, i64>,
    /// The lowest weight of a capacity overlay that matched, and what overlays of that weight
    /// set.
    capacity_at: Option<(i32, BTreeSet<String>)>,
}

/// A valid overlay, read once.
struct Parsed<'a> {
    overlay: &'a NodeOverlay,
    requirements: Requirements,
    price: Option<PriceChange>,
    capacity: BTreeMap<String, i64>,
}

fn parse(overlay: &NodeOverlay) -> Result<Parsed<'_>, String> {
    let mut problems = Vec::new();
    validate_node_overlay(overlay, &mut problems);
    if !problems.is_empty() {
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Err(shown.join("; "));
    }
    let spec = &overlay.spec;
    let price = PriceChange::parse(spec.price.as_deref(), spec.price_adjustment.as_deref())?;
    let mut capacity = BTreeMap::new();
    for (name, q) in spec.capacity.iter().flatten() {
        let milli = parse_milli(&q.0).map_err(|e| format!("spec.capacity[{name}]: {e}"))?;
        capacity.insert(name.clone(), milli);
    }
    let requirements = Requirements::from_node_claim(
        &spec
            .requirements
            .iter()
            .map(|r| r.to_node_selector())
            .collect::<Vec<_>>(),
    );
    Ok(Parsed {
        overlay,
        requirements,
        price,
        capacity,
    })
}

/// The overlays judged against every NodePool's instance types.
#[derive(Clone, Debug, Default)]
pub struct Evaluation {
    /// Each overlay's outcome, by name.
    pub outcomes: BTreeMap<String, Outcome>,
    /// NodePool → instance type → what changes.
    updates: HashMap<String, HashMap<String, TypeUpdate>>,
    /// NodePool → the instance types it was judged with: a type missing from a NodePool's
    /// list (a short provider answer, a cold cache) says nothing about its overlays.
    covered: HashMap<String, BTreeSet<String>>,
}

/// A NodePool's instance types, as [`evaluate`] reads them.
pub struct PoolTypes<'a> {
    /// The NodePool.
    pub node_pool: &'a NodePool,
    /// Its instance types, before any overlay.
    pub instance_types: &'a [Arc<InstanceType>],
}

/// The offerings of `it` (of `pool`) the overlay matches; none when it does not match the type.
fn matched_offerings<'i>(
    pool: &NodePool,
    it: &'i InstanceType,
    overlay: &Requirements,
) -> Vec<&'i Offering> {
    // As upstream: the type's requirements, narrowed by what every node of the NodePool
    // carries (its name and template labels), must define and allow every key the overlay
    // requires.
    let mut labels = it.requirements.clone();
    labels.add(Requirement::new(
        NODE_POOL_LABEL,
        Operator::In,
        &[pool.name()],
    ));
    labels.add_all(&Requirements::from_labels(
        &pool.spec.template.metadata.labels,
    ));
    if labels.compatible(overlay, AllowUndefined::Nothing).is_err() {
        return Vec::new();
    }
    // Offerings only carry well-known labels, which the overlay may leave unconstrained.
    it.offerings
        .iter()
        .filter(|o| {
            let mut of = Requirements::new();
            of.add(Requirement::new(
                karpenter_api::labels::ZONE_LABEL,
                Operator::In,
                &[o.zone.as_str()],
            ));
            of.add(Requirement::new(
                karpenter_api::labels::CAPACITY_TYPE_LABEL,
                Operator::In,
                &[o.capacity_type.as_str()],
            ));
            overlay.intersects(&of).is_ok()
        })
        .collect()
}

impl TypeUpdate {
    fn price_conflicts(&self, offerings: &[&Offering], weight: i32) -> bool {
        offerings.iter().any(|o| {
            self.prices
                .get(&offering_key(o))
                .is_some_and(|(_, w)| *w == weight)
        })
    }

    fn capacity_conflicts(&self, capacity: &BTreeMap<String, i64>, weight: i32) -> bool {
        self.capacity_at
            .as_ref()
            .is_some_and(|(w, set)| *w == weight && capacity.keys().any(|name| set.contains(name)))
    }

    fn record(&mut self, parsed: &Parsed<'_>, offerings: &[&Offering]) {
        let weight = parsed.overlay.weight();
        if let Some(change) = parsed.price {
            for o in offerings {
                self.prices
                    .entry(offering_key(o))
                    // A heavier overlay set it: this one only lowers the weight that
                    // conflicts are judged at.
                    .and_modify(|(_, w)| *w = weight)
                    .or_insert((change, weight));
            }
        }
        if !parsed.capacity.is_empty() {
            for (name, milli) in &parsed.capacity {
                self.capacity.entry(name.clone()).or_insert(*milli);
            }
            let names = parsed.capacity.keys().cloned();
            match &mut self.capacity_at {
                Some((w, set)) if *w == weight => set.extend(names),
                other => *other = Some((weight, names.collect())),
            }
        }
    }
}

/// Judges `overlays` against every NodePool's instance types: which apply, which conflict or
/// are invalid, and what the applied ones change.
pub fn evaluate(overlays: &[NodeOverlay], pools: &[PoolTypes<'_>]) -> Evaluation {
    let mut ordered: Vec<&NodeOverlay> = overlays.iter().collect();
    order_by_weight(&mut ordered);
    let mut eval = Evaluation::default();
    for pool in pools {
        eval.covered
            .entry(pool.node_pool.name().to_string())
            .or_default()
            .extend(pool.instance_types.iter().map(|it| it.name.clone()));
    }
    for overlay in ordered {
        let parsed = match parse(overlay) {
            Ok(p) => p,
            Err(e) => {
                eval.outcomes
                    .insert(overlay.name().to_string(), Outcome::Invalid(e));
                continue;
            }
        };
        let weight = overlay.weight();
        // Every match, across every NodePool, before anything is recorded.
        let mut matches = Vec::new();
        let mut conflict = false;
        'pools: for pool in pools {
            let name = pool.node_pool.name();
            for it in pool.instance_types {
                let offerings = matched_offerings(pool.node_pool, it, &parsed.requirements);
                if offerings.is_empty() {
                    continue;
                }
                if let Some(update) = eval.updates.get(name).and_then(|u| u.get(&it.name)) {
                    let price =
                        parsed.price.is_some() && update.price_conflicts(&offerings, weight);
                    let capacity = update.capacity_conflicts(&parsed.capacity, weight);
                    if price || capacity {
                        conflict = true;
                        break 'pools;
                    }
                }
                matches.push((name, it.name.as_str(), offerings));
            }
        }
        if conflict {
            eval.outcomes
                .insert(overlay.name().to_string(), Outcome::Conflict);
            continue;
        }
        if parsed.price.is_some() || !parsed.capacity.is_empty() {
            for (pool, it, offerings) in matches {
                eval.updates
                    .entry(pool.to_string())
                    .or_default()
                    .entry(it.to_string())
                    .or_default()
                    .record(&parsed, &offerings);
            }
        }
        eval.outcomes
            .insert(overlay.name().to_string(), Outcome::Applied);
    }
    eval
}

impl Evaluation {
    /// `pool`'s instance types with the overlays applied: a changed type is a new one, marked
    /// ([`InstanceType::price_overlaid`], [`InstanceType::capacity_overlaid`]); the others are
    /// shared.
    pub fn apply(&self, pool: &str, types: &[Arc<InstanceType>]) -> Vec<Arc<InstanceType>> {
        let Some(updates) = self.updates.get(pool) else {
            return types.to_vec();
        };
        types
            .iter()
            .map(|it| match updates.get(&it.name) {
                Some(update) => Arc::new(overlaid(it, update)),
                None => it.clone(),
            })
            .collect()
    }

    /// Whether any overlay changes anything.
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty()
    }

    /// Whether `instance_type` was among `pool`'s instance types when this was evaluated.
    pub fn covers(&self, pool: &str, instance_type: &str) -> bool {
        self.covered
            .get(pool)
            .is_some_and(|types| types.contains(instance_type))
    }

    /// What a launch of `instance_type` in `pool` records for overlay drift: the
    /// [`capacity_hash`](Self::capacity_hash) when capacity overlays apply to the type, else
    /// nothing (so adding a first capacity overlay later drifts no node, as upstream drifts
    /// none for overlays).
    pub fn capacity_record(&self, pool: &str, instance_type: &str) -> Option<String> {
        self.updates
            .get(pool)
            .and_then(|u| u.get(instance_type))
            .is_some_and(|u| !u.capacity.is_empty())
            .then(|| self.capacity_hash(pool, instance_type))
    }

    /// What the overlays make of `instance_type`'s capacity in `pool`, as the value of
    /// [`CAPACITY_OVERLAY_HASH_ANNOTATION`](karpenter_api::nodeoverlay::CAPACITY_OVERLAY_HASH_ANNOTATION):
    /// a hash of the extended resources set (the same value when none is). Prices are left
    /// out: a new price changes what a node costs, not what it is.
    pub fn capacity_hash(&self, pool: &str, instance_type: &str) -> String {
        let mut hasher = karpenter_api::hash::Fnv::default();
        let capacity = self
            .updates
            .get(pool)
            .and_then(|u| u.get(instance_type))
            .map(|u| &u.capacity);
        for (name, milli) in capacity.into_iter().flatten() {
            hasher.str(name);
            hasher.str(&milli.to_string());
        }
        format!("{:016x}", hasher.0)
    }
}

/// Evaluates `overlays` over `pools` and replaces each NodePool's instance types with the
/// overlaid ones: what the controller, the simulator and `plan` each call before a decision
/// when the `NodeOverlay` gate is on. Returns the evaluation (each overlay's outcome).
pub fn apply_to_pools(overlays: &[NodeOverlay], pools: &mut [NodePoolInput]) -> Evaluation {
    let eval = {
        let views: Vec<PoolTypes<'_>> = pools
            .iter()
            .map(|p| PoolTypes {
                node_pool: &p.node_pool,
                instance_types: &p.instance_types,
            })
            .collect();
        evaluate(overlays, &views)
    };
    if !eval.is_empty() {
        for pool in pools.iter_mut() {
            pool.instance_types = eval.apply(pool.node_pool.name(), &pool.instance_types);
        }
    }
    eval
}

fn overlaid(it: &InstanceType, update: &TypeUpdate) -> InstanceType {
    let mut capacity = it.capacity.clone();
    for (name, milli) in &update.capacity {
        capacity.set(name, *milli);
    }
    let mut price_overlaid = false;
    let offerings = it
        .offerings
        .iter()
        .map(|o| match update.prices.get(&offering_key(o)) {
            Some((change, _)) => {
                price_overlaid = true;
                Offering {
                    price: change.apply(o.price),
                    ..o.clone()
                }
            }
            None => o.clone(),
        })
        .collect();
    let mut out = InstanceType::new(
        it.name.clone(),
        it.requirements.clone(),
        offerings,
        capacity,
        it.overhead.clone(),
    );
    out.price_overlaid = price_overlaid || it.price_overlaid;
    out.capacity_overlaid = !update.capacity.is_empty() || it.capacity_overlaid;
    out
}

#[cfg(test)]
mod tests;
