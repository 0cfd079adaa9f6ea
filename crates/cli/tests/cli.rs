//! The `karpenter-rs` binary, run as a user would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn karpenter_rs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_karpenter-rs"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("karpenter-rs-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn example_nodepools_validate() {
    let out = karpenter_rs(&[
        "validate",
        "-f",
        "examples/nodepools/aws-general-purpose.yaml",
        "examples/nodepools/huawei-cpu-burst.yaml",
        "examples/nodepools/kwok.yaml",
        "examples/nodepools/clusterapi.yaml",
        "examples/nodeclasses/aws-default.yaml",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).contains("8 objects checked, 0 invalid"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn problems_are_one_line_each_naming_file_object_and_field() {
    let path = temp_file(
        "bad.yaml",
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: broken\nspec:\n  weight: 0\n  disruption:\n    budgets:\n    - nodes: \"110%\"\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}\n      requirements: []\n      taints:\n      - key: dedicated\n",
    );
    let out = karpenter_rs(&["validate", "-f", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let file = path.display().to_string();
    assert_eq!(lines.len(), 3, "{text}");
    // In the order the fields appear in the file.
    for (line, field) in lines.iter().zip([
        "spec.weight",
        "spec.disruption.budgets[0].nodes",
        "spec.template.spec.taints[0].effect",
    ]) {
        assert!(
            line.starts_with(&format!("{file}: NodePool/broken: {field}: ")),
            "{line}"
        );
    }
}

#[test]
fn unparseable_and_missing_files_exit_2_with_a_location() {
    let path = temp_file(
        "unclosed.yaml",
        "kind: NodePool\nmetadata:\n  name: [unclosed\n",
    );
    let out = karpenter_rs(&[
        "validate",
        "-f",
        path.to_str().unwrap(),
        "does-not-exist.yaml",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}:", path.display())) && err.contains("invalid YAML"),
        "{err}"
    );
    assert!(err.contains("does-not-exist.yaml: cannot read"), "{err}");
}

#[test]
fn v1beta1_aws_nodepool_and_ec2nodeclass_convert_to_valid_v1() {
    let out = karpenter_rs(&["convert", "-f", "examples/v1beta1/aws.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let notes = stderr(&out);
    assert!(notes.contains("alias: al2023@latest"), "{notes}");
    assert!(!notes.contains("still invalid"), "{notes}");
    let converted = temp_file("aws-v1.yaml", &stdout(&out));
    let out = karpenter_rs(&["validate", "-f", converted.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("2 objects checked, 0 invalid"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn v1beta1_is_pointed_at_convert_and_converts_to_valid_v1() {
    let input = "examples/v1beta1/aks-nodepools.yaml";
    let out = karpenter_rs(&["validate", "-f", input]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("karpenter-rs convert"));

    let out = karpenter_rs(&["convert", "-f", input]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let notes = stderr(&out);
    assert!(
        notes.contains("WhenUnderutilized is now WhenEmptyOrUnderutilized"),
        "{notes}"
    );
    assert!(
        notes.contains("moved to spec.template.spec.expireAfter"),
        "{notes}"
    );
    assert!(
        notes.contains("group: karpenter.azure.com, kind: AKSNodeClass"),
        "{notes}"
    );
    // The seed's "ondemand" was always wrong; convert says so rather than hiding it.
    assert!(
        notes.contains("still invalid") && notes.contains("ondemand"),
        "{notes}"
    );

    let converted = temp_file("converted.yaml", &stdout(&out));
    let out = karpenter_rs(&["validate", "-f", converted.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(
        text.lines().count(),
        1,
        "only the ondemand capacity type remains: {text}"
    );
    assert!(
        text.contains("NodePool/ondemand: spec.template.spec.requirements[2]"),
        "{text}"
    );
}

#[test]
fn crds_print_all_thirteen() {
    let out = karpenter_rs(&["crds"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    for name in [
        "nodepools.karpenter.sh",
        "nodeclaims.karpenter.sh",
        "nodeoverlays.karpenter.sh",
        "capacitybuffers.autoscaling.x-k8s.io",
        "kwoknodeclasses.karpenter.kwok.sh",
        "ec2nodeclasses.karpenter.k8s.aws",
        "aksnodeclasses.karpenter.azure.com",
        "ecsnodeclasses.karpenter.k8s.alibabacloud",
        "ccenodeclasses.karpenter.k8s.huawei",
        "proxmoxnodeclasses.karpenter.proxmox.sinextra.dev",
        "proxmoxtemplates.karpenter.proxmox.sinextra.dev",
        "proxmoxunmanagedtemplates.karpenter.proxmox.sinextra.dev",
        "clusterapinodeclasses.karpenter.cluster.x-k8s.io",
    ] {
        assert!(text.contains(&format!("name: {name}")), "{name}");
    }
    assert_eq!(
        text.matches("\n---\n").count() + usize::from(text.starts_with("---\n")),
        13
    );
}

#[test]
fn simulate_runs_the_built_in_scenario() {
    let out = karpenter_rs(&["simulate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("Scenario cpu-burst")
            && text.contains("Summary")
            && text.contains("expectations: all met"),
        "{text}"
    );

    let out = karpenter_rs(&["simulate", "--output", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    for key in ["summary", "nodeclaims", "timeline", "disruptions", "events"] {
        assert!(report.get(key).is_some(), "{key}");
    }
    for key in [
        "pods_total",
        "pods_scheduled",
        "pods_pending",
        "nodes_launched",
        "nodes_terminated",
        "cost_total",
        "cost_lower_bound",
        "spot_saving",
        "time_to_schedule_p50_s",
        "time_to_schedule_p95_s",
        "time_to_schedule_max_s",
    ] {
        assert!(report["summary"].get(key).is_some(), "summary.{key}");
    }
}

/// Seed 004's point: the same workload on Azure spot, with what it saved against on-demand.
#[test]
fn simulate_prints_what_azure_spot_saves_under_the_stated_spot_ratio() {
    let out = karpenter_rs(&[
        "simulate",
        "examples/scenarios/azure-spot-vs-on-demand.yaml",
        "--output",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let claims = report["nodeclaims"].as_array().unwrap();
    assert!(!claims.is_empty());
    assert!(
        claims
            .iter()
            .all(|c| c["capacity_type"] == "spot" && c["nodepool"] == "spot"),
        "the weight-100 spot NodePool takes the workload: {claims:?}"
    );
    let s = &report["summary"];
    let (cost, saving) = (
        s["cost_total"].as_f64().unwrap(),
        s["spot_saving"].as_f64().unwrap(),
    );
    // Spot at 0.2 of on-demand: the saving is four times what was paid.
    assert!(
        (saving / cost - 4.0).abs() < 1e-6,
        "cost {cost}, saving {saving}"
    );

    // Without the stated ratio the catalog has no spot, and on-demand serves everything.
    let text =
        std::fs::read_to_string(repo().join("examples/scenarios/azure-spot-vs-on-demand.yaml"))
            .unwrap()
            .replace("  spotPriceRatio: 0.2\n", "");
    let path = temp_file("azure-on-demand.yaml", &text);
    let out = karpenter_rs(&["simulate", path.to_str().unwrap()]);
    let text = stdout(&out);
    assert!(text.contains("on-demand-0"), "{text}");
    assert!(!text.contains("spot: saved"), "{text}");

    let text =
        std::fs::read_to_string(repo().join("examples/scenarios/azure-spot-vs-on-demand.yaml"))
            .unwrap()
            .replace("spotPriceRatio: 0.2", "spotPriceRatio: 1.5");
    let path = temp_file("azure-bad-ratio.yaml", &text);
    let out = karpenter_rs(&["simulate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("spotPriceRatio") && stderr(&out).contains("at most 1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn simulate_fails_when_an_expectation_fails() {
    let text = std::fs::read_to_string(repo().join("examples/scenarios/zone-spread.yaml"))
        .unwrap()
        .replace("nodes: {min: 3, max: 3}", "nodes: {max: 1}");
    let path = temp_file("failing.yaml", &text);
    let out = karpenter_rs(&["simulate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("expected nodes at most 1, got 3"),
        "{}",
        stdout(&out)
    );
    let out = karpenter_rs(&["simulate", "no-such-scenario.yaml"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("no-such-scenario.yaml"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bench_commands_end_with_their_figures_line() {
    let out = karpenter_rs(&["bench", "consolidation", "--nodes", "20", "--pods", "200"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let last = text.lines().last().unwrap_or_default();
    let fields: Vec<&str> = last.split(' ').collect();
    assert_eq!(fields[0], "consolidation", "{last}");
    assert_eq!(&fields[1..3], ["nodes=20", "pods=200"]);
    let actions: usize = fields[4].strip_prefix("actions=").unwrap().parse().unwrap();
    let savings: f64 = fields[5]
        .strip_prefix("savings_per_hour=")
        .unwrap()
        .parse()
        .unwrap();
    // Half-empty generated nodes always leave something to consolidate.
    assert!(actions >= 1 && savings > 0.0, "{last}");

    // More pods than the nodes hold is an error that says so.
    let out = karpenter_rs(&["bench", "consolidation", "--nodes", "2", "--pods", "1000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("do not fit on 2 nodes"),
        "{}",
        stderr(&out)
    );
}

/// `simulate --feature-gates` (and `FEATURE_GATES`) set the gates a scenario does not name;
/// the scenario's own `featureGates` win for those it names.
#[test]
fn simulate_takes_feature_gates_under_the_scenarios_own() {
    let text =
        std::fs::read_to_string(repo().join("examples/scenarios/static-capacity.yaml")).unwrap();
    let without = temp_file(
        "static-no-gates.yaml",
        &text.replace("  featureGates: StaticCapacity=true\n", ""),
    );
    let off = temp_file(
        "static-gate-off.yaml",
        &text.replace(
            "featureGates: StaticCapacity=true",
            "featureGates: StaticCapacity=false",
        ),
    );
    let path = |p: &PathBuf| p.to_str().unwrap().to_string();
    // The scenario expects three static nodes by 4m: only with the gate on.
    let out = karpenter_rs(&["simulate", &path(&without)]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "gate off by default: {}",
        stdout(&out)
    );
    let out = karpenter_rs(&[
        "simulate",
        &path(&without),
        "--feature-gates",
        "StaticCapacity=true",
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-rs"))
        .args(["simulate", &path(&without)])
        .env("FEATURE_GATES", "StaticCapacity=true")
        .output()
        .unwrap();
    assert!(out.status.success(), "FEATURE_GATES: {}", stdout(&out));
    let out = karpenter_rs(&[
        "simulate",
        &path(&off),
        "--feature-gates",
        "StaticCapacity=true",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the scenario wins: {}",
        stdout(&out)
    );
    let out = karpenter_rs(&["simulate", &path(&without), "--feature-gates", "Bogus=true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown feature gate \"Bogus\""),
        "{}",
        stderr(&out)
    );
}

/// `plan -f` reads JSON as well as YAML, and a directory of manifests recursively; `bench
/// plan-dump` ends with its figures.
#[test]
fn plan_reads_json_dumps_and_directories() {
    let yaml =
        std::fs::read_to_string(repo().join("examples/snapshots/small-cluster.yaml")).unwrap();
    let as_yaml = karpenter_rs(&[
        "plan",
        "-f",
        "examples/snapshots/small-cluster.yaml",
        "--output",
        "json",
    ]);
    assert!(as_yaml.status.success(), "{}", stderr(&as_yaml));
    // The example is a List (as `kubectl get -o yaml` writes), or documents.
    let objects: Vec<serde_json::Value> = serde_saphyr::from_multiple::<serde_json::Value>(&yaml)
        .unwrap()
        .into_iter()
        .flat_map(|o| match o.get("items") {
            Some(serde_json::Value::Array(items)) => items.clone(),
            _ => vec![o],
        })
        .collect();
    assert!(objects.len() > 4, "{objects:?}");
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let json = temp_file(
        "small-cluster.json",
        &serde_json::to_string_pretty(&list).unwrap(),
    );
    let as_json = karpenter_rs(&["plan", "-f", json.to_str().unwrap(), "--output", "json"]);
    assert!(as_json.status.success(), "{}", stderr(&as_json));
    assert_eq!(stdout(&as_json), stdout(&as_yaml));

    let dir = std::env::temp_dir().join(format!("karpenter-cli-plan-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("nested")).unwrap();
    let (first, rest) = objects.split_at(objects.len() / 2);
    let write = |p: PathBuf, objects: &[serde_json::Value]| {
        let text: String = objects
            .iter()
            .map(|o| format!("---\n{}", serde_saphyr::to_string(o).unwrap()))
            .collect();
        std::fs::write(p, text).unwrap();
    };
    write(dir.join("a.yaml"), first);
    write(dir.join("nested/b.yml"), rest);
    let as_dir = karpenter_rs(&["plan", "-f", dir.to_str().unwrap(), "--output", "json"]);
    assert!(as_dir.status.success(), "{}", stderr(&as_dir));
    assert_eq!(stdout(&as_dir), stdout(&as_yaml));
    std::fs::remove_dir_all(&dir).unwrap();

    let out = karpenter_rs(&[
        "bench",
        "plan-dump",
        "--pods",
        "300",
        "--nodes",
        "20",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("plan-dump format=json pods=300 nodes=20 ")
            && last.contains(" peak_rss_mb="),
        "{last}"
    );
    assert!(
        text.contains("20 nodes, 297 bound pods, 3 pending"),
        "{text}"
    );
}
