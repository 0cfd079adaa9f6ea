//! What a simulation reports: a summary, the NodeClaims launched, a timeline, events; as text
//! for people and JSON for tools.

use std::fmt::Write;
use std::sync::Arc;

use karpenter_cloudprovider::catalog::format_price;

use karpenter_core::instancetype::InstanceType;
use serde::Serialize;

/// Totals over the run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    /// Workload pods created (DaemonSet pods excluded).
    pub pods_total: usize,
    /// Of those, how many were ever bound to a node.
    pub pods_scheduled: usize,
    /// Pods still waiting at the end.
    pub pods_pending: usize,
    /// NodeClaims launched.
    pub nodes_launched: usize,
    /// Nodes terminated.
    pub nodes_terminated: usize,
    /// What the nodes cost, in the catalog's currency.
    pub cost_total: f64,
    /// The least any autoscaler could have paid for the same demand (see `lp_lower_bound`).
    pub cost_lower_bound: f64,
    /// What the spot nodes saved: the on-demand price of the same instance types in the same
    /// zones, less what they cost.
    pub spot_saving: f64,
    /// Median seconds from a pod's creation to its binding.
    pub time_to_schedule_p50_s: f64,
    /// 95th percentile of the same.
    pub time_to_schedule_p95_s: f64,
    /// The longest wait.
    pub time_to_schedule_max_s: f64,
}

/// A NodeClaim the simulation launched.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LaunchedNodeClaim {
    /// Its name.
    pub name: String,
    /// Its NodePool.
    pub nodepool: String,
    /// The instance type launched.
    pub instance_type: String,
    /// `spot` or `on-demand`.
    pub capacity_type: String,
    /// The zone.
    pub zone: String,
    /// Its price.
    pub price_per_hour: f64,
    /// When it was created.
    pub launched_at_s: u64,
    /// When it went away, if it did.
    pub terminated_at_s: Option<u64>,
    /// Why it was launched.
    pub reason: String,
    /// The capacity reservation it was launched into, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

/// The cluster at one moment.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Sample {
    /// Seconds from the start.
    pub t_s: u64,
    /// Nodes (launched and not terminated).
    pub nodes: usize,
    /// Pods waiting for a node.
    pub pods_pending: usize,
    /// Pods bound and running.
    pub pods_running: usize,
    /// What the nodes cost per hour.
    pub cost_per_hour: f64,
    /// The linear-programming lower bound for the demand at that moment.
    pub lower_bound_per_hour: f64,
}

/// Something that happened.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Event {
    /// Seconds from the start.
    pub t_s: u64,
    /// What kind (`Launched`, `Ready`, `Scaled`, `Interrupted`, `FailedScheduling`, …).
    pub kind: String,
    /// Details.
    pub message: String,
}

/// The outcome of a simulation.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// The catalog used.
    pub catalog: String,
    /// The currency of every price and cost in the report (ISO 4217: `USD`, `CNY`).
    pub currency: String,
    /// Simulated seconds.
    pub duration_s: u64,
    /// Totals.
    pub summary: Summary,
    /// NodeClaims launched.
    pub nodeclaims: Vec<LaunchedNodeClaim>,
    /// The cluster over time.
    pub timeline: Vec<Sample>,
    /// Disruption decisions (consolidation, drift, expiration).
    pub disruptions: Vec<Event>,
    /// Everything that happened, in order.
    pub events: Vec<Event>,
    /// Expectations that failed; the run fails when there are any.
    pub failures: Vec<String>,
    /// Where the simulation decided what a controller would not (see `Scenario::warnings`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// An instance type as the lower bound sees it: allocatable cores, allocatable bytes, and the
/// price of its cheapest offering the NodePools allow.
pub type Shape = (f64, f64, f64);

/// The shapes of `types` at `price_of` each (types without a price are left out).
pub fn shapes(
    types: &[Arc<InstanceType>],
    price_of: impl Fn(&InstanceType) -> Option<f64>,
) -> Vec<Shape> {
    types
        .iter()
        .filter_map(|it| {
            let price = price_of(it)?;
            let a = it.allocatable();
            (a.cpu > 0 && a.memory > 0)
                .then(|| (a.cpu as f64 / 1000.0, a.memory as f64 / 1000.0, price))
        })
        .collect()
}

/// The least cost per hour of capacity holding `cpu` cores and `memory` bytes if instances
/// could be bought in fractions: the optimum of the linear program "minimise Σ xᵢ·priceᵢ with
/// Σ xᵢ·cpuᵢ ≥ cpu, Σ xᵢ·memᵢ ≥ memory, x ≥ 0" over every instance type's allocatable and
/// cheapest offering. No real packing can cost less.
pub fn lp_lower_bound(cpu: f64, memory: f64, shapes: &[Shape]) -> f64 {
    lp_lower_bound_with_reservations(cpu, memory, shapes, &[])
}

/// Reservations the exact bound enumerates; past them, further reservations count as if
/// unlimited, which only lowers the bound (it stays a bound).
const EXACT_RESERVATIONS: usize = 6;

/// [`lp_lower_bound`] with capacity reservations: shapes of which at most `count` instances
/// exist, at the reservation's price. A basic optimum has every variable but two at a bound,
/// so each set of reservations used in full is tried, with the others (up to their count)
/// and the unlimited shapes filling the rest.
pub fn lp_lower_bound_with_reservations(
    cpu: f64,
    memory: f64,
    shapes: &[Shape],
    reserved: &[(Shape, f64)],
) -> f64 {
    if cpu <= 0.0 && memory <= 0.0 {
        return 0.0;
    }
    let (exact, loose) = reserved.split_at(reserved.len().min(EXACT_RESERVATIONS));
    let mut unlimited: Vec<(Shape, f64)> = shapes
        .iter()
        .chain(loose.iter().map(|(s, _)| s))
        .map(|&s| (s, f64::INFINITY))
        .collect();
    unlimited = frontier(unlimited);
    let mut best = f64::INFINITY;
    for full in 0u32..(1 << exact.len()) {
        let (mut c0, mut m0, mut cost0) = (0.0, 0.0, 0.0);
        let mut candidates = unlimited.clone();
        for (i, &((c, m, p), n)) in exact.iter().enumerate() {
            if full & (1 << i) != 0 {
                c0 += c * n;
                m0 += m * n;
                cost0 += p * n;
            } else {
                candidates.push(((c, m, p), n));
            }
        }
        let (rc, rm) = ((cpu - c0).max(0.0), (memory - m0).max(0.0));
        let rest = if rc <= 0.0 && rm <= 0.0 {
            0.0
        } else {
            two_constraint_optimum(rc, rm, &candidates)
        };
        best = best.min(cost0 + rest);
    }
    if best.is_finite() { best } else { 0.0 }
}

/// The shapes worth buying: a shape that gives less of both per unit of price than another is
/// never in an optimum, unless it is scarce (bounded) — those are all kept.
fn frontier(mut shapes: Vec<(Shape, f64)>) -> Vec<(Shape, f64)> {
    shapes.retain(|((c, m, p), _)| *c > 0.0 && *m > 0.0 && *p >= 0.0);
    let per_price = |&((c, m, p), _): &(Shape, f64)| {
        let p = p.max(f64::MIN_POSITIVE);
        (c / p, m / p)
    };
    shapes.sort_by(|a, b| per_price(b).0.total_cmp(&per_price(a).0));
    let mut kept: Vec<(Shape, f64)> = Vec::new();
    let mut best_memory = f64::NEG_INFINITY;
    for s in shapes {
        let (_, m) = per_price(&s);
        if m > best_memory {
            best_memory = m;
            kept.push(s);
        }
    }
    kept
}

/// The optimum over `candidates` (each with how many instances exist) with both constraints,
/// trying every single shape and every pair with both constraints tight.
fn two_constraint_optimum(cpu: f64, memory: f64, candidates: &[(Shape, f64)]) -> f64 {
    let mut best = f64::INFINITY;
    for &((c, m, p), n) in candidates {
        let x = (cpu / c).max(memory / m);
        if x <= n {
            best = best.min(x * p);
        }
    }
    for (i, &((c1, m1, p1), n1)) in candidates.iter().enumerate() {
        for &((c2, m2, p2), n2) in &candidates[i + 1..] {
            // Both constraints tight: x1·c1 + x2·c2 = cpu, x1·m1 + x2·m2 = memory.
            let det = c1 * m2 - c2 * m1;
            if det.abs() < 1e-12 {
                continue;
            }
            let x1 = (cpu * m2 - c2 * memory) / det;
            let x2 = (c1 * memory - cpu * m1) / det;
            if (0.0..=n1).contains(&x1) && (0.0..=n2).contains(&x2) {
                best = best.min(x1 * p1 + x2 * p2);
            }
        }
    }
    best
}

fn clock(t: u64) -> String {
    format!("{:02}:{:02}:{:02}", t / 3600, (t / 60) % 60, t % 60)
}

impl Report {
    /// The report for people: events, a coarse timeline, the NodeClaims and the summary.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let s = &self.summary;
        let _ = writeln!(
            out,
            "Scenario {} on catalog {} ({} simulated, prices in {})",
            self.scenario,
            self.catalog,
            clock(self.duration_s),
            self.currency
        );
        if !self.warnings.is_empty() {
            let _ = writeln!(out, "\nWarnings: {}", self.warnings.len());
            for w in &self.warnings {
                let _ = writeln!(out, "  {w}");
            }
        }
        let _ = writeln!(out, "\nEvents");
        for e in &self.events {
            let _ = writeln!(out, "  {}  {:<18} {}", clock(e.t_s), e.kind, e.message);
        }
        let _ = writeln!(out, "\nTimeline");
        let _ = writeln!(
            out,
            "  {:>8}  {:>5}  {:>7}  {:>7}  {:>10}  {:>10}",
            "time", "nodes", "pending", "running", "cost/h", "bound/h"
        );
        let step = (self.timeline.len() / 20).max(1);
        for (i, t) in self.timeline.iter().enumerate() {
            if i % step == 0 || i + 1 == self.timeline.len() {
                let _ = writeln!(
                    out,
                    "  {:>8}  {:>5}  {:>7}  {:>7}  {:>10.4}  {:>10.4}",
                    clock(t.t_s),
                    t.nodes,
                    t.pods_pending,
                    t.pods_running,
                    t.cost_per_hour,
                    t.lower_bound_per_hour
                );
            }
        }
        let _ = writeln!(out, "\nNodeClaims");
        for n in &self.nodeclaims {
            let until = n.terminated_at_s.map_or("-".to_string(), clock);
            let reservation = n
                .reservation
                .as_ref()
                .map_or(String::new(), |r| format!("  in {r}"));
            let _ = writeln!(
                out,
                "  {:<22} {:<22} {:<9} {:<12} {:>8.4}/h  {} → {}{reservation}",
                n.name,
                n.instance_type,
                n.capacity_type,
                n.zone,
                n.price_per_hour,
                clock(n.launched_at_s),
                until
            );
        }
        let _ = writeln!(out, "\nSummary");
        let _ = writeln!(
            out,
            "  pods: {} created, {} scheduled, {} pending at the end",
            s.pods_total, s.pods_scheduled, s.pods_pending
        );
        let _ = writeln!(
            out,
            "  nodes: {} launched, {} terminated",
            s.nodes_launched, s.nodes_terminated
        );
        let gap = if s.cost_lower_bound > 0.0 {
            format!(
                " ({:+.0}% over)",
                (s.cost_total / s.cost_lower_bound - 1.0) * 100.0
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  cost: {} total; lower bound {}{gap}",
            format_price(&self.currency, s.cost_total),
            format_price(&self.currency, s.cost_lower_bound)
        );
        let reserved = self
            .nodeclaims
            .iter()
            .filter(|n| n.reservation.is_some())
            .count();
        if reserved > 0 {
            let _ = writeln!(
                out,
                "  reserved: {reserved} launched into capacity reservations"
            );
        }
        if s.spot_saving > 0.0 {
            let on_demand = s.cost_total + s.spot_saving;
            let _ = writeln!(
                out,
                "  spot: saved {} against on-demand prices ({:.0}% of {})",
                format_price(&self.currency, s.spot_saving),
                s.spot_saving / on_demand * 100.0,
                format_price(&self.currency, on_demand)
            );
        }
        let _ = writeln!(
            out,
            "  time to schedule: p50 {:.0}s, p95 {:.0}s, max {:.0}s",
            s.time_to_schedule_p50_s, s.time_to_schedule_p95_s, s.time_to_schedule_max_s
        );
        let mut by_kind: std::collections::BTreeMap<&str, usize> = Default::default();
        for d in &self.disruptions {
            *by_kind.entry(d.kind.as_str()).or_default() += 1;
        }
        let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(
            out,
            "  disruptions: {}{}",
            self.disruptions.len(),
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            }
        );
        if self.failures.is_empty() {
            let _ = writeln!(out, "  expectations: all met");
        } else {
            let _ = writeln!(out, "  expectations: {} failed", self.failures.len());
            for f in &self.failures {
                let _ = writeln!(out, "    - {f}");
            }
        }
        out
    }
}

/// Two runs of one scenario side by side (karpenter and another autoscaler).
pub fn compare_text(left: &Report, left_name: &str, right: &Report, right_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Scenario {} on catalog {} ({} simulated, prices in {})\n",
        left.scenario,
        left.catalog,
        clock(left.duration_s),
        left.currency
    );
    let _ = writeln!(out, "  {:<30} {:>18} {:>18}", "", left_name, right_name);
    let (a, b) = (&left.summary, &right.summary);
    let row = |out: &mut String, what: &str, x: String, y: String| {
        let _ = writeln!(out, "  {what:<30} {x:>18} {y:>18}");
    };
    row(
        &mut out,
        "cost",
        format_price(&left.currency, a.cost_total),
        format_price(&right.currency, b.cost_total),
    );
    row(
        &mut out,
        "cost lower bound",
        format_price(&left.currency, a.cost_lower_bound),
        format_price(&right.currency, b.cost_lower_bound),
    );
    let over = |s: &Summary| {
        if s.cost_lower_bound > 0.0 {
            format!("{:+.0}%", (s.cost_total / s.cost_lower_bound - 1.0) * 100.0)
        } else {
            "-".into()
        }
    };
    row(&mut out, "over the bound", over(a), over(b));
    row(
        &mut out,
        "nodes launched",
        a.nodes_launched.to_string(),
        b.nodes_launched.to_string(),
    );
    row(
        &mut out,
        "nodes terminated",
        a.nodes_terminated.to_string(),
        b.nodes_terminated.to_string(),
    );
    let peak = |r: &Report| {
        r.timeline
            .iter()
            .map(|t| t.nodes)
            .max()
            .unwrap_or(0)
            .to_string()
    };
    row(&mut out, "peak nodes", peak(left), peak(right));
    row(
        &mut out,
        "pods scheduled",
        format!("{}/{}", a.pods_scheduled, a.pods_total),
        format!("{}/{}", b.pods_scheduled, b.pods_total),
    );
    row(
        &mut out,
        "pods pending at the end",
        a.pods_pending.to_string(),
        b.pods_pending.to_string(),
    );
    row(
        &mut out,
        "time to schedule p50",
        format!("{:.0}s", a.time_to_schedule_p50_s),
        format!("{:.0}s", b.time_to_schedule_p50_s),
    );
    row(
        &mut out,
        "time to schedule p95",
        format!("{:.0}s", a.time_to_schedule_p95_s),
        format!("{:.0}s", b.time_to_schedule_p95_s),
    );
    row(
        &mut out,
        "time to schedule max",
        format!("{:.0}s", a.time_to_schedule_max_s),
        format!("{:.0}s", b.time_to_schedule_max_s),
    );
    let types = |r: &Report| {
        let mut t: Vec<&str> = r
            .nodeclaims
            .iter()
            .map(|n| n.instance_type.as_str())
            .collect();
        t.sort_unstable();
        t.dedup();
        t.len().to_string()
    };
    row(
        &mut out,
        "distinct instance types",
        types(left),
        types(right),
    );
    row(
        &mut out,
        "scale-downs",
        left.disruptions.len().to_string(),
        right.disruptions.len().to_string(),
    );
    if let Some(groups) = right.events.iter().find(|e| e.kind == "NodeGroups") {
        let _ = writeln!(out, "\n  {right_name} node groups: {}", groups.message);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_core::instancetype::fake::FakeInstanceType;

    #[test]
    fn lower_bound_mixes_shapes() {
        let cpu_heavy = Arc::new(
            FakeInstanceType::new("cpu")
                .resources(&[("cpu", "8100m"), ("memory", "8202Mi")])
                .offerings(&[("on-demand", "z", 1.0)])
                .build(),
        );
        let mem_heavy = Arc::new(
            FakeInstanceType::new("mem")
                .resources(&[("cpu", "1100m"), ("memory", "32778Mi")])
                .offerings(&[("on-demand", "z", 1.0)])
                .build(),
        );
        let gib = (1u64 << 30) as f64;
        // 8 cores and 32 GiB: one of each covers it exactly, for 2.0; each alone would need 4 of
        // the cpu type (32 GiB) or 8 of the memory type (8 cores).
        let cheapest =
            |it: &InstanceType| it.offerings.iter().map(|o| o.price).min_by(f64::total_cmp);
        let both = shapes(&[cpu_heavy.clone(), mem_heavy.clone()], cheapest);
        let bound = lp_lower_bound(8.0, 40.0 * gib, &both);
        assert!(bound < 4.0 && bound > 1.5, "{bound}");
        let only_cpu = shapes(&[cpu_heavy], cheapest);
        assert_eq!(lp_lower_bound(0.0, 0.0, &only_cpu), 0.0);
        // Exactly one type's worth costs that type's price.
        let one = lp_lower_bound(8.0, 8.0 * gib, &only_cpu);
        assert!((one - 1.0).abs() < 1e-9, "{one}");
    }

    /// A shape dominated by another (less of both per unit of price) changes nothing; a
    /// reservation counts for as many instances as it holds, at its price.
    #[test]
    fn reservations_count_up_to_their_size() {
        let gib = (1u64 << 30) as f64;
        let on_demand = (4.0, 16.0 * gib, 1.0);
        let dominated = (2.0, 4.0 * gib, 1.0);
        assert_eq!(
            lp_lower_bound(40.0, 160.0 * gib, &[on_demand, dominated]),
            lp_lower_bound(40.0, 160.0 * gib, &[on_demand]),
        );
        // Ten instances' worth of demand; two are reserved at a thousandth of the price.
        let reserved = ((4.0, 16.0 * gib, 0.001), 2.0);
        let bound = lp_lower_bound_with_reservations(
            40.0,
            160.0 * gib,
            &[on_demand, dominated],
            &[reserved],
        );
        assert!((bound - (8.0 + 0.002)).abs() < 1e-9, "{bound}");
        // Less demand than the reservation holds: only the reservation is paid, pro rata.
        let bound = lp_lower_bound_with_reservations(4.0, 16.0 * gib, &[on_demand], &[reserved]);
        assert!((bound - 0.001).abs() < 1e-9, "{bound}");
        // Brute force over whole instances never beats the bound.
        for n_reserved in 0..=2u32 {
            for n_on_demand in 0..=10u32 {
                let cpu = 4.0 * f64::from(n_reserved + n_on_demand);
                if cpu >= 40.0 {
                    let cost = 0.001 * f64::from(n_reserved) + f64::from(n_on_demand);
                    assert!(cost + 1e-9 >= 8.002, "{n_reserved} {n_on_demand}");
                }
            }
        }
    }
}
