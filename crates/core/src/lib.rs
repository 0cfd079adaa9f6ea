//! The decisions of karpenter as pure functions over a snapshot of the cluster: resources,
//! the requirements algebra, instance types, the scheduling simulation and disruption. Nothing
//! here performs I/O, reads a clock or needs a runtime.
//!
//! The modules are layered, each using only those before it: the model (`resources`,
//! `scheduling` — the requirements algebra, taints, selectors — and `instancetype`), `state`
//! (pods, budgets and the snapshot of observed objects), `provisioning` (the scheduling
//! simulation, static capacity, capacity buffers), `disruption` and `termination`, and
//! `round`, which composes them.
//!
//! Time comes in as values: wall time (budget schedules, `consolidateAfter`, `expireAfter`,
//! termination deadlines, repair tolerations) as a [`k8s_openapi::jiff::Timestamp`], and
//! monotonic time (batching windows, validation and replacement waits) as a
//! [`std::time::Duration`] since an origin the caller keeps.

pub mod benchmark;
pub mod disruption;
pub mod feature_gates;
pub mod instancetype;
pub mod provisioning;
pub mod resources;
pub mod round;
pub mod scheduling;
pub mod state;
pub mod termination;
