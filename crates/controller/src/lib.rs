//! The karpenter-rs controller: cluster state fed by watches, and the loops that act on it —
//! provisioning, the NodeClaim lifecycle, node termination, disruption, garbage collection —
//! behind leader election, with upstream's metrics and events.
//!
//! Decisions come from `karpenter-core` (pure); this crate reads the cluster, asks, and
//! carries out the answers through the Kubernetes API and a [`CloudProvider`].

pub mod admin;
pub mod clock;
pub mod cloudprovider;
pub mod conditions;
pub mod disruption;
pub mod drift;
pub mod dry_run;
pub mod events;
pub mod garbage;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod nodeclass_status;
pub mod nodeclasses;
pub mod nodepool_status;
pub mod options;
pub mod podevents;
pub mod provisioning;
pub mod queue;
pub mod state;
pub mod termination;
#[cfg(test)]
mod testing;
mod writes;

use std::future::Future;
use std::sync::Arc;

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
            cluster: Arc::new(state::Cluster::default()),
            provider,
            options,
            metrics: Arc::new(metrics::Metrics::for_provider(&labels)),
            leader: leader_rx,
            launches: Default::default(),
            drains: Default::default(),
            evictions: Default::default(),
            registration_health: Default::default(),
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
            loops.spawn(leader::run(
                ctx.client.clone(),
                ctx.options.system_namespace.clone(),
                identity,
                self.leader,
                ctx.clock.clone(),
                shutdown.clone(),
            ));
        }
        use metrics::in_controller;
        loops.spawn(in_controller(
            "provisioner",
            provisioning::run(ctx.clone(), shutdown.clone()),
        ));
        loops.spawn(lifecycle::run(ctx.clone(), shutdown.clone()));
        loops.spawn(nodepool_status::run(ctx.clone(), shutdown.clone()));
        loops.spawn(termination::run(ctx.clone(), shutdown.clone()));
        loops.spawn(podevents::run(ctx.clone(), shutdown.clone()));
        loops.spawn(in_controller(
            "nodeclaim.garbagecollection",
            garbage::run(ctx.clone(), shutdown.clone()),
        ));
        loops.spawn(in_controller(
            "nodeclaim.disruption",
            drift::run(ctx.clone(), shutdown.clone()),
        ));
        loops.spawn(in_controller(
            "disruption",
            disruption::run(ctx.clone(), shutdown.clone()),
        ));
        loops.spawn(metrics::observe::run(ctx.clone(), shutdown.clone()));
        for provider_loop in provider_loops {
            loops.spawn(provider_loop);
        }
        while loops.join_next().await.is_some() {}
        for w in watches {
            w.abort();
        }
    }
}
