//! `karpenter-rs`: a Kubernetes node autoscaler, drop-in for Karpenter.

mod commands;
mod registry;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "karpenter-rs",
    version,
    about = "A Kubernetes node autoscaler, drop-in for Karpenter"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a scenario (or the built-in one) against an in-memory cluster: what karpenter
    /// would launch, when, and what it would cost. Exit 1 when an expectation fails.
    Simulate {
        /// The scenario file; the built-in `cpu-burst` scenario when omitted.
        scenario: Option<PathBuf>,
        /// The instance-type catalog (overrides the scenario's).
        #[arg(long)]
        catalog: Option<String>,
        /// Report format.
        #[arg(long, value_enum, default_value_t = commands::simulate::Output::Text)]
        output: commands::simulate::Output,
        /// Also draw nodes, pending pods and cost over time into this SVG file.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Also run the scenario under another autoscaler's policy and print both side by side.
        #[arg(long, value_enum)]
        compare: Option<commands::simulate::Compare>,
        /// Run the scenario twice, its NodePools and NodeClasses replaced by those of A, then
        /// by those of B (by name; the others stay), and print both side by side (`--svg`: both
        /// charts in one file).
        #[arg(long, num_args = 2, value_names = ["A", "B"], conflicts_with = "compare")]
        compare_nodepools: Option<Vec<PathBuf>>,
        /// Upstream's feature gates (`SpotToSpotConsolidation=true`); the scenario's own
        /// `spec.featureGates` win for the gates they name.
        #[arg(long, env = "FEATURE_GATES", default_value = "", value_parser = <karpenter_core::feature_gates::FeatureGates as std::str::FromStr>::from_str)]
        feature_gates: karpenter_core::feature_gates::FeatureGates,
    },
    /// What karpenter would do now: the NodeClaims provisioning would launch, where pending
    /// pods would go and why the rest cannot be scheduled, the disruption command it would
    /// start and why every other node stays. Without `-f`, from the live cluster of the
    /// kubeconfig (or in-cluster), read-only, through the controller's own code; with `-f`,
    /// from a dump (`kubectl get nodes,pods,nodepools,nodeclaims,pdb,daemonsets -A -o yaml`).
    Plan {
        /// A dump to plan from, YAML or JSON (`-` for standard input; a directory for every
        /// manifest under it), instead of the live cluster.
        #[arg(short = 'f', long = "filename")]
        file: Option<PathBuf>,
        /// With `-f`: the instance-type catalog to plan launches from (kwok, aws, …).
        #[arg(long, default_value = "kwok")]
        catalog: String,
        /// Report format.
        #[arg(long, value_enum, default_value_t = commands::simulate::Output::Text)]
        output: commands::simulate::Output,
        /// Explain one pod (`NAMESPACE/NAME`, or `NAME` with `-n`): where it would go, or, per
        /// NodePool, why not and what would change it.
        #[arg(long)]
        pod: Option<String>,
        /// The namespace of `--pod NAME` (`default` without it).
        #[arg(short = 'n', long, requires = "pod")]
        namespace: Option<String>,
        /// Exit 1 when pods would stay pending (with `--pod`: that pod), for CI pipelines.
        #[arg(long)]
        exit_code: bool,
        /// Upstream's feature gates, as the controller takes them (`SpotToSpotConsolidation=true`).
        #[arg(long, env = "FEATURE_GATES", default_value = "", value_parser = <karpenter_core::feature_gates::FeatureGates as std::str::FromStr>::from_str)]
        feature_gates: karpenter_core::feature_gates::FeatureGates,
        /// The cluster's kube-scheduler default topology spread, as the controller takes it
        /// (a YAML or JSON `podTopologySpread.defaultConstraints` document).
        #[arg(long, env = "SCHEDULER_CONFIG", default_value = "", value_parser = karpenter_controller::options::scheduler_config)]
        scheduler_config:
            karpenter_core::provisioning::scheduling::default_constraints::SchedulerConfiguration,
        /// Leave pods' Dynamic Resource Allocation claims to kube-scheduler, as the controller
        /// does by default; `false` allocates them against the cluster's ResourceSlices.
        #[arg(long, env = "IGNORE_DRA_REQUESTS", default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
        ignore_dra_requests: bool,
        /// Without `-f`: the cloud provider whose instance types launches come from.
        #[arg(long, env = "CLOUD_PROVIDER", default_value = "kwok", value_parser = clap::builder::PossibleValuesParser::new(registry::CONTROLLERS))]
        cloud_provider: String,
        #[command(flatten)]
        settings: Box<registry::ProviderSettings>,
        /// What if: NodePools and NodeClasses that replace the cluster's of the same name (the
        /// others stay). Shows the nodes that would drift and what replaces them, the launches
        /// and the cost per hour, before and after.
        #[arg(long, value_name = "FILE", conflicts_with = "pod")]
        nodepools: Option<PathBuf>,
    },
    /// Print the CustomResourceDefinitions (NodePool, NodeClaim and every provider's
    /// NodeClasses) as YAML.
    Crds {
        /// Write one file per CRD into this directory instead of printing.
        #[arg(long)]
        output_dir: Option<PathBuf>,
    },
    /// Check NodePool, NodeClaim and NodeClass manifests as the API server and karpenter
    /// would: one line per problem, exit 1 if any, 2 if a file cannot be read.
    Validate {
        /// Manifest files (multi-document YAML or JSON; `-` for standard input; a directory
        /// for every manifest under it).
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// Also warn about requirement values no instance type of this catalog has (kwok,
        /// aws, azure, …).
        #[arg(long)]
        catalog: Option<String>,
    },
    /// Measure performance on fixed workloads.
    Bench {
        #[command(subcommand)]
        bench: Bench,
    },
    /// Run the controller against the cluster in the kubeconfig (or the one it runs in);
    /// `/metrics` and `/healthz`, `/readyz` on their ports.
    Controller {
        #[command(flatten)]
        options: Box<karpenter_controller::Options>,
        /// The cloud provider.
        #[arg(long, env = "CLOUD_PROVIDER", default_value = "kwok", value_parser = clap::builder::PossibleValuesParser::new(registry::CONTROLLERS))]
        cloud_provider: String,
        #[command(flatten)]
        settings: Box<registry::ProviderSettings>,
        /// Log filter: `info`, `debug`, or any tracing filter.
        #[arg(long, env = "LOG_LEVEL", default_value = "info")]
        log_level: String,
        /// Log format.
        #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = commands::controller::LogFormat::Json)]
        log_format: commands::controller::LogFormat,
    },
    /// Print the karpenter.sh/v1 form of karpenter.sh/v1beta1 NodePools and NodeClaims, and
    /// what changed (on standard error).
    Convert {
        /// Manifest files (multi-document YAML or JSON; `-` for standard input; a directory
        /// for every manifest under it).
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// The NodeClass as GROUP/KIND, when neither the nodeClassRef nor the requirements
        /// say which provider a NodePool is for.
        #[arg(long)]
        nodeclass: Option<String>,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// Upstream's scheduling benchmark: 400 fake instance types, one NodePool, and a five-way
    /// mix of generic, zonal-spread, hostname-spread, zonal-affinity and anti-affinity pods.
    Scheduling {
        /// How many pods.
        #[arg(long, default_value_t = 10_000)]
        pods: usize,
        /// How many fake instance types.
        #[arg(long, default_value_t = 400)]
        instance_types: usize,
        /// Seed of the pod generator.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Use upstream's pod dump (pods-N.csv) instead of generating pods.
        #[arg(long, conflicts_with = "preferences")]
        pods_csv: Option<PathBuf>,
        /// Run upstream's preference workload (every pod relaxes its preferences) instead.
        #[arg(long)]
        preferences: bool,
    },
    /// The scheduling benchmark at 1k, 2k, 5k, 10k, 20k, 50k and 100k pods (up to `--pods`),
    /// with how the time grows between sizes.
    SchedulingGrowth {
        /// The largest size to run.
        #[arg(long, default_value_t = 100_000)]
        pods: usize,
        /// How many fake instance types.
        #[arg(long, default_value_t = 400)]
        instance_types: usize,
        /// Seed of the pod generator.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// One full disruption pass (emptiness, drift, multi- and single-node consolidation) over a
    /// generated cluster of 8-, 16- and 32-CPU nodes with generic pods packed round-robin.
    Consolidation {
        /// How many nodes.
        #[arg(long, default_value_t = 1_000)]
        nodes: usize,
        /// How many pods.
        #[arg(long, default_value_t = 20_000)]
        pods: usize,
        /// Seed of the cluster generator.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// `plan -f` on a generated dump of KWOK nodes (each with its NodeClaim) and pods, every
    /// object with `managedFields`, as `kubectl get -o yaml|json` writes it: the time to read
    /// it, the time to plan, and the peak memory.
    PlanDump {
        /// How many pods (a hundredth pending, the rest bound).
        #[arg(long, default_value_t = 100_000)]
        pods: usize,
        /// How many nodes.
        #[arg(long, default_value_t = 10_000)]
        nodes: usize,
        /// The dump's format.
        #[arg(long, value_enum, default_value_t = commands::bench::DumpFormat::Yaml)]
        format: commands::bench::DumpFormat,
    },
    /// The AWS provider resolving the embedded catalog (1345 EC2 types) into instance types
    /// for a NodeClass: what a launch or provisioning pass pays when nothing is cached.
    AwsInstanceTypes {
        /// How many resolutions to time.
        #[arg(long, default_value_t = 20)]
        rounds: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // The message and its causes; a backtrace would only bury them.
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Crds {
            output_dir: Some(dir),
        } => {
            commands::crds::write(&dir)?;
            eprintln!("wrote CRDs to {}", dir.display());
        }
        Command::Crds { output_dir: None } => print!("{}", commands::crds::print()),
        Command::Validate { files, catalog } => {
            let catalog = catalog.map(|name| registry::catalog(&name)).transpose()?;
            let outcome = commands::validate::run(&files, catalog.as_ref());
            for line in &outcome.lines {
                println!("{line}");
            }
            for error in &outcome.unreadable {
                eprintln!("{error}");
            }
            eprintln!("{}", outcome.summary());
            return Ok(ExitCode::from(outcome.exit_code()));
        }
        Command::Bench {
            bench:
                Bench::Scheduling {
                    pods,
                    instance_types,
                    seed,
                    pods_csv,
                    preferences,
                },
        } => {
            let options = commands::bench::SchedulingBench {
                pods,
                instance_types,
                seed,
                pods_csv,
                preferences,
            };
            for line in commands::bench::scheduling(&options)? {
                println!("{line}");
            }
        }
        Command::Bench {
            bench:
                Bench::SchedulingGrowth {
                    pods,
                    instance_types,
                    seed,
                },
        } => {
            let options = commands::bench::SchedulingBench {
                pods,
                instance_types,
                seed,
                pods_csv: None,
                preferences: false,
            };
            for line in commands::bench::scheduling_growth(&options)? {
                println!("{line}");
            }
        }
        Command::Bench {
            bench: Bench::Consolidation { nodes, pods, seed },
        } => {
            for line in commands::bench::consolidation(nodes, pods, seed)? {
                println!("{line}");
            }
        }
        Command::Bench {
            bench:
                Bench::PlanDump {
                    pods,
                    nodes,
                    format,
                },
        } => {
            for line in commands::bench::plan_dump(pods, nodes, format)? {
                println!("{line}");
            }
        }
        Command::Bench {
            bench: Bench::AwsInstanceTypes { rounds },
        } => {
            println!("{}", commands::bench::aws_instance_types(rounds));
        }
        Command::Controller {
            options,
            cloud_provider,
            settings,
            log_level,
            log_format,
        } => {
            commands::controller::init_logging(&log_level, log_format)?;
            commands::controller::run(*options, &cloud_provider, *settings)?;
        }
        Command::Simulate {
            scenario,
            catalog,
            output,
            svg,
            compare: None,
            compare_nodepools: Some(files),
            feature_gates,
        } => {
            let (a, b) = (&files[0], &files[1]);
            let (left, right) = commands::what_if::compare_node_pools(
                scenario.as_deref(),
                catalog.as_deref(),
                feature_gates,
                a,
                b,
            )?;
            let (a, b) = (commands::what_if::label(a), commands::what_if::label(b));
            match output {
                commands::simulate::Output::Text => print!(
                    "{}",
                    karpenter_sim::report::compare_text(&left, &a, &right, &b)
                ),
                commands::simulate::Output::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "nodepools": [{"file": a, "report": left}, {"file": b, "report": right}]
                    }))?
                ),
            }
            if let Some(path) = svg {
                let chart = karpenter_sim::compare::side_by_side_svg(&left, &a, &right, &b);
                std::fs::write(&path, chart)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            }
        }
        Command::Simulate {
            scenario,
            catalog,
            output,
            svg,
            compare: Some(_),
            compare_nodepools: _,
            feature_gates,
        } => {
            let (karpenter, other) = commands::simulate::compare(
                scenario.as_deref(),
                catalog.as_deref(),
                feature_gates,
            )?;
            match output {
                commands::simulate::Output::Text => print!(
                    "{}",
                    karpenter_sim::report::compare_text(
                        &karpenter,
                        "karpenter-rs",
                        &other,
                        "cluster-autoscaler"
                    )
                ),
                commands::simulate::Output::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &serde_json::json!({"karpenter": karpenter, "cluster_autoscaler": other})
                    )?
                ),
            }
            if let Some(path) = svg {
                std::fs::write(&path, karpenter.to_svg())
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            }
        }
        Command::Simulate {
            scenario,
            catalog,
            output,
            svg,
            compare: None,
            compare_nodepools: None,
            feature_gates,
        } => {
            use std::io::IsTerminal;
            let report = commands::simulate::run(
                scenario.as_deref(),
                catalog.as_deref(),
                feature_gates,
                std::io::stderr().is_terminal(),
            )?;
            match output {
                commands::simulate::Output::Text => print!("{}", report.to_text()),
                commands::simulate::Output::Json => {
                    println!("{}", serde_json::to_string_pretty(&report)?)
                }
            }
            if let Some(path) = svg {
                std::fs::write(&path, report.to_svg())
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            }
            if !report.failures.is_empty() {
                return Ok(ExitCode::from(1));
            }
        }
        Command::Plan {
            file,
            catalog,
            output,
            pod,
            namespace,
            exit_code,
            feature_gates,
            scheduler_config,
            ignore_dra_requests,
            cloud_provider,
            settings,
            nodepools,
        } => {
            let options = karpenter_controller::Options {
                feature_gates,
                scheduler_config,
                ignore_dra_requests,
                ..Default::default()
            };
            if let Some(pod) = pod {
                let key = commands::plan::pod_key(&pod, namespace.as_deref())?;
                let why = match &file {
                    Some(file) => commands::plan::why_from_file(file, &catalog, &options, &key)?,
                    None => {
                        commands::plan::why_from_cluster(&cloud_provider, *settings, options, &key)?
                    }
                };
                match output {
                    commands::simulate::Output::Text => print!("{}", why.to_text()),
                    commands::simulate::Output::Json => {
                        println!("{}", serde_json::to_string_pretty(&why)?)
                    }
                }
                return Ok(if exit_code && why.pending {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                });
            }
            if let Some(nodepools) = nodepools {
                let what_if = match &file {
                    Some(file) => {
                        commands::what_if::from_file(file, &nodepools, &catalog, &options)?
                    }
                    None => commands::what_if::from_cluster(
                        &cloud_provider,
                        *settings,
                        options,
                        &nodepools,
                    )?,
                };
                match output {
                    commands::simulate::Output::Text => print!("{}", what_if.to_text()),
                    commands::simulate::Output::Json => {
                        println!("{}", serde_json::to_string_pretty(&what_if)?)
                    }
                }
                return Ok(
                    if exit_code && commands::plan::stays_pending(&what_if.after) {
                        ExitCode::from(1)
                    } else {
                        ExitCode::SUCCESS
                    },
                );
            }
            let plan = match file {
                Some(file) => commands::plan::from_file(&file, &catalog, &options)?,
                None => commands::plan::from_cluster(&cloud_provider, *settings, options)?,
            };
            match output {
                commands::simulate::Output::Text => print!("{}", plan.to_text()),
                commands::simulate::Output::Json => {
                    println!("{}", serde_json::to_string_pretty(&plan)?)
                }
            }
            if exit_code && commands::plan::stays_pending(&plan) {
                return Ok(ExitCode::from(1));
            }
        }
        Command::Convert { files, nodeclass } => {
            let converted = commands::convert::run(&files, nodeclass.as_deref())?;
            print!("{}", converted.yaml);
            for note in &converted.notes {
                eprintln!("{note}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod cli_tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every subcommand's flags, the providers' settings flattened in included: no two share
    /// an id or a flag (clap would abort a debug build and mis-wire a release one).
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
