//! The controller benchmark: the controller's memory and time to decide NodeClaims for many
//! pending pods with many nodes already in state, against the test kit's fake API server
//! running in a child process (so its memory is not counted) over HTTP on 127.0.0.1.
//!
//! ```sh
//! cargo run --release -p karpenter-cli --example bench-controller -- --pending 10000 --nodes 2000 --bound 20000
//! ```
//!
//! An example, not a subcommand, so the production binary does not link the fake API server.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use karpenter_controller::{Controller, Options, provisioning};
use karpenter_kwok::{KWOKNodeClass, KwokProvider};
use karpenter_testkit::FakeApiServer;
use serde_json::json;

/// The workload.
#[derive(Clone, Copy, Debug, clap::Args)]
struct Workload {
    /// Unschedulable pods waiting for capacity.
    #[arg(long, default_value_t = 10_000)]
    pending: usize,
    /// Existing (full) nodes, each with a NodeClaim.
    #[arg(long, default_value_t = 2_000)]
    nodes: usize,
    /// Pods running on those nodes.
    #[arg(long, default_value_t = 20_000)]
    bound: usize,
}

#[derive(clap::Parser)]
struct Args {
    /// Serve the seeded fake API server (the benchmark's child process).
    #[arg(long, hide = true)]
    fake_apiserver: bool,
    #[command(flatten)]
    workload: Workload,
}

fn main() -> anyhow::Result<()> {
    let args = <Args as clap::Parser>::parse();
    if args.fake_apiserver {
        return serve_fake(args.workload);
    }
    for line in run(args.workload)? {
        println!("{line}");
    }
    Ok(())
}

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn must<T>(v: Result<T, karpenter_testkit::ApiError>) -> anyhow::Result<T> {
    v.map_err(|e| anyhow::anyhow!("seeding the fake API server: {}", e.message))
}

/// Fills a fake API server with the workload: a KWOK NodePool, `nodes` full 8-CPU nodes with
/// their NodeClaims and `bound` pods, and `pending` pods marked Unschedulable.
fn seed(server: &FakeApiServer, w: Workload) -> anyhow::Result<()> {
    let create = |v: serde_json::Value| -> anyhow::Result<()> {
        let kind = v["kind"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "KWOKNodeClass" => must(server.create(&serde_json::from_value::<KWOKNodeClass>(v)?))?,
            "NodePool" => {
                must(server.create(&serde_json::from_value::<karpenter_api::NodePool>(v)?))?
            }
            "NodeClaim" => {
                must(server.create(&serde_json::from_value::<karpenter_api::NodeClaim>(v)?))?
            }
            "Node" => must(server.create(&serde_json::from_value::<
                k8s_openapi::api::core::v1::Node,
            >(v)?))?,
            _ => must(
                server.create(&serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(
                    v,
                )?),
            )?,
        };
        Ok(())
    };
    create(
        json!({"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}, "spec": {}}),
    )?;
    create(
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"}, "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
        }}}}),
    )?;
    let zones = ["test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"];
    for n in 0..w.nodes {
        let name = format!("node-{n}");
        let labels = json!({
            "karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true", "karpenter.sh/registered": "true",
            "node.kubernetes.io/instance-type": "c-8x-amd64-linux", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
            "topology.kubernetes.io/zone": zones[n % 4], "karpenter.sh/capacity-type": "on-demand", "kubernetes.io/hostname": name,
        });
        let resources = json!({"cpu": "8", "memory": "16Gi", "pods": "128"});
        create(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": format!("kwok://{name}")},
            "status": {"capacity": resources, "allocatable": resources, "conditions": [{"type": "Ready", "status": "True"}]}}),
        )?;
        create(
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name, "labels": labels},
            "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": format!("kwok://{name}"), "nodeName": name, "capacity": resources, "allocatable": resources}}),
        )?;
    }
    // Bound pods share each node's 7.9 CPU, so the pending ones need new nodes.
    let per_node = w.bound.div_ceil(w.nodes.max(1)).max(1);
    let cpu = format!("{}m", 7_900 / per_node);
    for p in 0..w.bound {
        create(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("bound-{p}"), "namespace": "default", "labels": {"app": format!("app-{}", p % 50)}},
            "spec": {"nodeName": format!("node-{}", p / per_node), "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
            "status": {"phase": "Running"}}),
        )?;
    }
    for p in 0..w.pending {
        let cpu = ["250m", "500m", "1", "2"][p % 4];
        create(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("pending-{p}"), "namespace": "default", "labels": {"app": format!("pending-{}", p % 50)}},
            "spec": {"containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
        )?;
    }
    Ok(())
}

/// The child process: seeds, serves on 127.0.0.1, prints `listening ADDR`, and exits when its
/// standard input closes.
fn serve_fake(w: Workload) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let server = FakeApiServer::with_history(1_000);
        server
            .install_crds(karpenter_kwok::CRDS.iter().map(|c| c.definition()))
            .map_err(|e| anyhow::anyhow!("installing the KWOK CRDs: {e:?}"))?;
        seed(&server, w)?;
        let (addr, _task) = server.serve(([127, 0, 0, 1], 0).into()).await?;
        println!("listening {addr}");
        std::io::stdout().flush()?;
        tokio::task::spawn_blocking(|| std::io::read_to_string(std::io::stdin())).await??;
        Ok(())
    })
}

/// Runs the benchmark; the last line is
/// `controller pending=P nodes=N bound=B sync_seconds=S provision_seconds=T nodeclaims=C peak_rss_mb=M`.
fn run(w: Workload) -> anyhow::Result<Vec<String>> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args([
            "--fake-apiserver",
            "--pending",
            &w.pending.to_string(),
            "--nodes",
            &w.nodes.to_string(),
            "--bound",
            &w.bound.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the fake API server")?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("child stdout")?).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .context("the fake API server did not start")?
        .to_string();
    let baseline_kib = rss_kib("VmRSS:");
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(async move {
        let config = kube::Config::new(format!("http://{addr}").parse()?);
        let client = kube::Client::try_from(config)?;
        let provider = Arc::new(KwokProvider::new(client.clone()));
        let options = Options {
            disable_leader_election: true,
            ..Options::default()
        };
        let ctx = Controller::new(client.clone(), provider, options).context();
        let started = Instant::now();
        let watches = ctx.cluster.watch(&client);
        while !ctx.cluster.synced() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let synced = started.elapsed();
        let state_kib = rss_kib("VmRSS:");
        let sync_peak_kib = rss_kib("VmHWM:");
        let provisioned_at = Instant::now();
        let result = provisioning::provision(&ctx).await?;
        let provision = provisioned_at.elapsed();
        for w in watches {
            w.abort();
        }
        anyhow::Ok((
            synced,
            state_kib,
            sync_peak_kib,
            provision,
            result.node_claims.len(),
            result.unschedulable,
        ))
    });
    drop(child.stdin.take());
    let _ = child.wait();
    let (synced, state_kib, sync_peak_kib, provision, claims, unschedulable) = result?;
    let peak = rss_kib("VmHWM:");
    Ok(vec![
        format!(
            "baseline_rss_mb={:.0} state_rss_mb={:.0} sync_peak_rss_mb={:.0} unschedulable={unschedulable}",
            baseline_kib as f64 / 1024.0,
            state_kib as f64 / 1024.0,
            sync_peak_kib as f64 / 1024.0
        ),
        format!(
            "controller pending={} nodes={} bound={} sync_seconds={:.2} provision_seconds={:.2} nodeclaims={claims} peak_rss_mb={:.0}",
            w.pending,
            w.nodes,
            w.bound,
            synced.as_secs_f64(),
            provision.as_secs_f64(),
            peak as f64 / 1024.0
        ),
    ])
}
