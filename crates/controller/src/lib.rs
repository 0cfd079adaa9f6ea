//! The karpenter-rs controller: cluster state fed by watches, and the loops that act on it —
//! provisioning, the NodeClaim lifecycle, node termination, disruption, garbage collection —
//! behind leader election, with upstream's metrics and events.
//!
//! Decisions come from `karpenter-core` (pure); this crate reads the cluster, asks, and
//! carries out the answers through the Kubernetes API and a [`CloudProvider`].

pub mod admin;
pub mod capacity_buffer;
pub mod clock;
pub mod cloudprovider;
pub mod conditions;
pub mod consistency;
pub mod disruption;
pub mod drift;
pub mod dry_run;
pub mod events;
pub mod garbage;
pub mod kube_client;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod nodeclass_status;
pub mod nodeclasses;
pub mod nodeoverlay;
pub mod nodepool_status;
pub mod options;
pub mod podevents;
pub mod provisioning;
pub mod queue;
pub mod repair;
pub mod state;
pub mod static_capacity;
pub mod termination;
#[cfg(test)]
mod testing;
mod writes;

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;

use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use clock::Clock;
pub use cloudprovider::{CloudProvider, CloudProviderError, Provider, ProviderLoop};
pub use options::Options;

/// Why a reconcile did not finish; it is retried on the next pass.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Kubernetes API refused or failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The cloud provider failed.
    #[error("cloud provider: {0}")]
    Cloud(CloudProviderError),
    /// Cluster state is not complete enough to decide.
    #[error("cluster state not synced: {0}")]
    NotSynced(String),
    /// A reconcile panicked (the loop caught it and retries the object).
    #[error("panic: {0} [recovered]")]
    Panicked(String),
}

impl Error {
    /// A write lost a race with another; the next pass sees the winner.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(e)) if e.code == 409)
    }
}

/// Everything the loops share.
pub struct Context<P> {
    /// The Kubernetes client.
    pub client: Client,
    /// Cluster state.
    pub cluster: Arc<state::Cluster>,
    /// The cloud provider.
    pub provider: Arc<P>,
    /// Settings.
    pub options: Options,
    /// Metrics.
    pub metrics: Arc<metrics::Metrics>,
    /// Events.
    pub recorder: events::Recorder,
    /// Where the loops read the time.
    pub clock: Clock,
    /// Whether each NodePool's recent nodes registered (its `NodeRegistrationHealthy`).
    pub registration_health: nodepool_status::RegistrationHealth,
    /// The NodeOverlays last listed (feature gate `NodeOverlay`).
    pub overlays: nodeoverlay::OverlayStore,
    /// The CapacityBuffers last listed and their virtual pods (feature gate `CapacityBuffer`).
    pub buffers: capacity_buffer::BufferStore,
    /// The loops that stopped before shutdown: `/healthz` fails while there is one, so the
    /// kubelet restarts a controller that can no longer do part of its job.
    pub stopped_loops: StoppedLoops,
    leader: watch::Receiver<bool>,
    launches: lifecycle::LaunchCache,
    drains: termination::DrainClock,
    evictions: termination::EvictionBackoff,
}

impl<P: CloudProvider> Context<P> {
    /// Whether this replica acts (standbys only keep state).
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    /// Calls the provider, timing it and counting failures under upstream's metric names
    /// (labelled with the controller whose task calls, see [`metrics::in_controller`]).
    pub async fn call<T>(
        &self,
        method: &str,
        call: impl Future<Output = cloudprovider::Result<T>>,
    ) -> cloudprovider::Result<T> {
        let started = self.clock.instant();
        let result = call.await;
        let (controller, method) = (
            metrics::current_controller(),
            metrics::upstream_method(method),
        );
        let provider = self.provider.name();
        self.metrics
            .cloudprovider_duration
            .with(&[controller, method, provider])
            .observe(started.elapsed().as_secs_f64());
        if let Err(e) = &result {
            self.metrics
                .cloudprovider_errors
                .with(&[controller, method, provider, e.metric_label()])
                .inc();
        }
        result
    }
}

impl<P: Provider> Controller<P> {
    /// Runs every loop and the provider's own controllers ([`Provider::controllers`]) until
    /// `shutdown` is cancelled.
    pub async fn run_with_provider_controllers(self, shutdown: CancellationToken) {
        let provider_loops = P::controllers(&self.ctx, &shutdown);
        self.run_with(shutdown, provider_loops).await;
    }
}

/// `cluster`, keeping only the NodeClaims and NodePools of the NodeClasses `provider`
/// supports: another controller's (another Karpenter with another provider in the same
/// cluster) are not this one's to launch, register, drain, expire, disrupt or count.
fn managed_by<P: CloudProvider>(cluster: state::Cluster, provider: &Arc<P>) -> state::Cluster {
    let p = provider.clone();
    cluster
        .node_claims
        .keep_only(move |c| p.supports(&c.spec.node_class_ref));
    let p = provider.clone();
    cluster
        .node_pools
        .keep_only(move |np| p.supports(&np.spec.template.spec.node_class_ref));
    cluster
}

/// Runs the control loop `name` and records it in [`Context::stopped_loops`] when it ends or
/// panics before `shutdown`.
async fn watch_loop<P>(
    ctx: Arc<Context<P>>,
    shutdown: CancellationToken,
    name: &'static str,
    loop_: ProviderLoop,
) {
    let ended = std::panic::AssertUnwindSafe(loop_).catch_unwind().await;
    if !shutdown.is_cancelled() {
        ctx.stopped_loops.stopped(name);
        tracing::error!(
            controller = name,
            panicked = ended.is_err(),
            "a control loop stopped; /healthz fails until the controller restarts"
        );
    }
}

/// The names of the control loops that stopped while the controller runs.
#[derive(Debug, Default)]
pub struct StoppedLoops(std::sync::Mutex<Vec<&'static str>>);

impl StoppedLoops {
    /// Records that the loop `name` stopped.
    pub fn stopped(&self, name: &'static str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(name);
    }

    /// The loops that stopped, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The controller, ready to run.
pub struct Controller<P> {
    ctx: Arc<Context<P>>,
    leader: watch::Sender<bool>,
}

impl<P: CloudProvider> Controller<P> {
    /// A controller acting through `client` and `provider`, on the system clock.
    pub fn new(client: Client, provider: Arc<P>, options: Options) -> Self {
        Self::with_clock(client, provider, options, Clock::system())
    }

    /// A controller whose loops read the time from `clock` (tests: [`Clock::following_tokio`]).
    pub fn with_clock(client: Client, provider: Arc<P>, options: Options, clock: Clock) -> Self {
        let (leader, leader_rx) = watch::channel(false);
        let labels = metrics::ProviderLabels {
            well_known: provider.provider_labels(),
            node_classes: provider
                .node_classes()
                .iter()
                .map(|c| (c.group().to_string(), c.kind().to_string()))
                .collect(),
        };
        let ctx = Context {
            recorder: events::Recorder::new(client.clone(), clock.clone()),
            clock,
            client,
            cluster: Arc::new(managed_by(
                state::Cluster::default()
                    .with_selector_sources(!options.scheduler_config.default_constraints.is_empty())
                    .with_dynamic_resources(!options.ignore_dra_requests),
                &provider,
            )),
            provider,
            options,
            metrics: Arc::new(metrics::Metrics::for_provider(&labels)),
            leader: leader_rx,
            launches: Default::default(),
            drains: Default::default(),
            evictions: Default::default(),
            registration_health: Default::default(),
            overlays: Default::default(),
            buffers: Default::default(),
            stopped_loops: Default::default(),
        };
        Self {
            ctx: Arc::new(ctx),
            leader,
        }
    }

    /// The shared context (state, metrics) for the admin server and tests.
    pub fn context(&self) -> Arc<Context<P>> {
        self.ctx.clone()
    }

    /// Runs every loop until `shutdown` is cancelled, then stops them and releases the lease.
    pub async fn run(self, shutdown: CancellationToken) {
        self.run_with(shutdown, Vec::new()).await;
    }

    async fn run_with(self, shutdown: CancellationToken, provider_loops: Vec<ProviderLoop>) {
        let ctx = self.ctx;
        let defaults = &ctx.options.scheduler_config.default_constraints;
        if !defaults.is_empty() {
            tracing::info!(
                default_topology_spread_constraints = %serde_json::to_string(defaults).unwrap_or_default(),
                "scheduler-config is set: applying these default topology spread constraints during scheduling to pods that declare none of their own"
            );
        }
        let watches = ctx.cluster.watch(&ctx.client);
        let mut loops = tokio::task::JoinSet::new();
        if ctx.options.disable_leader_election {
            self.leader.send_replace(true);
        } else {
            let identity = if ctx.options.identity.is_empty() {
                format!("karpenter-{}", std::process::id())
            } else {
                ctx.options.identity.clone()
            };
            loops.spawn(watch_loop(
                ctx.clone(),
                shutdown.clone(),
                "leaderelection",
                Box::pin(leader::run(
                    ctx.client.clone(),
                    leader::LeaseRef {
                        namespace: ctx.options.lease_namespace().to_string(),
                        name: ctx.options.leader_election_name.clone(),
                        identity,
                    },
                    self.leader,
                    ctx.clock.clone(),
                    ctx.metrics.clone(),
                    shutdown.clone(),
                )),
            ));
        }
        for said in ctx.options.not_acted_on() {
            tracing::warn!("{said}");
        }
        use metrics::in_controller;
        let watched = |name: &'static str, loop_: ProviderLoop| {
            watch_loop(ctx.clone(), shutdown.clone(), name, loop_)
        };
        loops.spawn(watched(
            "provisioner",
            Box::pin(in_controller(
                "provisioner",
                provisioning::run(ctx.clone(), shutdown.clone()),
            )),
        ));
        loops.spawn(watched(
            "nodeclaim.lifecycle",
            Box::pin(lifecycle::run(ctx.clone(), shutdown.clone())),
        ));
        loops.spawn(watched(
            "nodeclaim.consistency",
            Box::pin(consistency::run(ctx.clone(), shutdown.clone())),
        ));
        loops.spawn(watched(
            "nodepool.status",
            Box::pin(nodepool_status::run(ctx.clone(), shutdown.clone())),
        ));
        loops.spawn(watched(
            "nodeoverlay",
            Box::pin(nodeoverlay::run(ctx.clone(), shutdown.clone())),
        ));
        if ctx.options.feature_gates.capacity_buffer {
            loops.spawn(watched(
                "capacitybuffer",
                Box::pin(capacity_buffer::run(ctx.clone(), shutdown.clone())),
            ));
        }
        if ctx.options.feature_gates.static_capacity {
            loops.spawn(watched(
                "static.provisioning",
                Box::pin(static_capacity::run(ctx.clone(), shutdown.clone())),
            ));
        }
        loops.spawn(watched(
            "node.termination",
            Box::pin(termination::run(ctx.clone(), shutdown.clone())),
        ));
        loops.spawn(watched(
            "nodeclaim.podevents",
            Box::pin(podevents::run(ctx.clone(), shutdown.clone())),
        ));
        loops.spawn(watched(
            "nodeclaim.garbagecollection",
            Box::pin(in_controller(
                "nodeclaim.garbagecollection",
                garbage::run(ctx.clone(), shutdown.clone()),
            )),
        ));
        loops.spawn(watched(
            "nodeclaim.disruption",
            Box::pin(in_controller(
                "nodeclaim.disruption",
                drift::run(ctx.clone(), shutdown.clone()),
            )),
        ));
        loops.spawn(watched(
            "disruption",
            Box::pin(in_controller(
                "disruption",
                disruption::run(ctx.clone(), shutdown.clone()),
            )),
        ));
        if ctx.options.feature_gates.node_repair && !ctx.provider.repair_policies().is_empty() {
            loops.spawn(watched(
                "node.health",
                Box::pin(in_controller(
                    "node.health",
                    repair::run(ctx.clone(), shutdown.clone()),
                )),
            ));
        }
        loops.spawn(watched(
            "metrics",
            Box::pin(metrics::observe::run(ctx.clone(), shutdown.clone())),
        ));
        for provider_loop in provider_loops {
            loops.spawn(watched(ctx.provider.name(), provider_loop));
        }
        while loops.join_next().await.is_some() {}
        for w in watches {
            w.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use tower_service::Service;

    use super::*;

    async fn healthz(ctx: &Arc<Context<testing::NoCloud>>) -> (u16, String) {
        let mut router = admin::health_router(ctx.clone());
        let response = router
            .call(
                axum::http::Request::get("/healthz")
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn healthz_fails_once_a_loop_stops_or_panics_but_not_at_shutdown() {
        let ctx = testing::context(Options::default());
        let shutdown = CancellationToken::new();
        assert_eq!(healthz(&ctx).await.0, 200);
        watch_loop(
            ctx.clone(),
            shutdown.clone(),
            "provisioner",
            Box::pin(async {}),
        )
        .await;
        watch_loop(
            ctx.clone(),
            shutdown.clone(),
            "disruption",
            Box::pin(async { panic!("a bug") }),
        )
        .await;
        let (status, body) = healthz(&ctx).await;
        assert_eq!(status, 500);
        assert_eq!(body, "control loops stopped: provisioner, disruption");

        let ctx = testing::context(Options::default());
        shutdown.cancel();
        watch_loop(ctx.clone(), shutdown, "provisioner", Box::pin(async {})).await;
        assert_eq!(healthz(&ctx).await.0, 200, "loops end at shutdown");
    }
}
