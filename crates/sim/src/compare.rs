//! `simulate --compare-nodepools A.yaml B.yaml`: one scenario run twice, its NodePools and
//! NodeClasses replaced by A's and then by B's, for the reports side by side.
//!
//! The replacement is `plan --nodepools`'s: an object of the file replaces the scenario's
//! object of the same kind and name, objects the scenario does not have are added at the
//! start, and everything else (workloads, steps) stays as it is.

use std::path::Path;

use karpenter_api::crd::Crd;
use karpenter_core::feature_gates::FeatureGates;
use karpenter_planner::manifest::{ManifestError, parse_documents};
use karpenter_planner::warnings::node_class_key;

use crate::catalog::Catalog;
use crate::engine::Simulation;
use crate::report::Report;
use crate::scenario::{Object, Scenario, ScenarioError, parse_object};

/// Reads the NodePools and NodeClasses of `file`, each checked as a scenario's objects are
/// (`crds`: the NodeClasses' definitions). Any other kind is an error: the comparison changes
/// NodePools and NodeClasses only.
pub fn read_node_pools(file: &Path, crds: &[Crd]) -> Result<Vec<Object>, ScenarioError> {
    let text = std::fs::read_to_string(file).map_err(|source| ManifestError::Read {
        path: file.to_path_buf(),
        source,
    })?;
    let mut objects = Vec::new();
    for doc in parse_documents(file, &text)? {
        let object = parse_object(file, doc.index, "", doc.object, crds)?;
        match object {
            Object::NodePool(_) | Object::NodeClass(_) => objects.push(object),
            _ => {
                return Err(ScenarioError::Invalid {
                    file: file.to_path_buf(),
                    document: doc.index,
                    path: "kind".into(),
                    message: "only NodePools and NodeClasses may be compared".into(),
                });
            }
        }
    }
    if !objects.iter().any(|o| matches!(o, Object::NodePool(_))) {
        return Err(ScenarioError::Structure {
            file: file.to_path_buf(),
            message: "holds no NodePool".into(),
        });
    }
    Ok(objects)
}

/// Whether `a` and `b` are the same NodePool or the same NodeClass (by kind and name).
fn same(a: &Object, b: &Object) -> bool {
    match (a, b) {
        (Object::NodePool(a), Object::NodePool(b)) => a.name() == b.name(),
        (Object::NodeClass(a), Object::NodeClass(b)) => {
            let key = node_class_key(a);
            key.is_some() && key == node_class_key(b)
        }
        _ => false,
    }
}

/// `scenario` with its NodePools and NodeClasses replaced by `objects` of the same name (where
/// it creates them at the start), and the others of `objects` created at the start too.
pub fn with_node_pools(scenario: &Scenario, objects: &[Object]) -> Scenario {
    let mut out = scenario.clone();
    for object in objects {
        match out.objects.iter_mut().find(|o| same(o, object)) {
            Some(o) => *o = object.clone(),
            None => out.objects.push(object.clone()),
        }
    }
    out
}

/// Runs `scenario` on `catalog` with its NodePools replaced by `a`, then by `b`.
pub fn compare_node_pools(
    scenario: &Scenario,
    catalog: &Catalog,
    gates: FeatureGates,
    a: &[Object],
    b: &[Object],
) -> (Report, Report) {
    let run = |objects: &[Object]| {
        Simulation::with_gates(&with_node_pools(scenario, objects), catalog.clone(), gates)
            .run(&mut |_| {})
    };
    (run(a), run(b))
}

/// Two reports' SVGs side by side, each under its name.
pub fn side_by_side_svg(
    left: &Report,
    left_name: &str,
    right: &Report,
    right_name: &str,
) -> String {
    let size = |svg: &str, attribute: &str| -> f64 {
        let key = format!("{attribute}=\"");
        svg.find(&key)
            .and_then(|i| {
                let rest = &svg[i + key.len()..];
                rest[..rest.find('"')?].parse().ok()
            })
            .unwrap_or(0.0)
    };
    let (l, r) = (left.to_svg(), right.to_svg());
    let width = size(&l, "width");
    let height = size(&l, "height").max(size(&r, "height"));
    let title = 24.0;
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
"#,
        w = 2.0 * width,
        h = height + title,
    );
    for (i, (name, svg)) in [(left_name, &l), (right_name, &r)].into_iter().enumerate() {
        let x = i as f64 * width;
        out.push_str(&format!(
            "<text x=\"{}\" y=\"18\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
            x + 10.0,
            escape(name)
        ));
        // A nested <svg> placed at its column.
        out.push_str(&svg.replacen("<svg ", &format!("<svg x=\"{x}\" y=\"{title}\" "), 1));
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"
apiVersion: simulation.karpenter-rs.dev/v1alpha1
kind: Scenario
metadata: {name: zones}
spec:
  duration: 10m
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
spec: {}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: web
        resources: {requests: {cpu: "1", memory: 1Gi}}
"#;

    fn pool_file(dir: &Path, name: &str, instance_types: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [{instance_types}]}}
"#
            ),
        )
        .unwrap();
        path
    }

    #[test]
    fn each_side_runs_the_scenario_with_its_own_nodepools() {
        let crds: Vec<Crd> = karpenter_api::crd::CORE
            .into_iter()
            .chain(karpenter_kwok::CRDS.iter().copied())
            .collect();
        let scenario = crate::scenario::parse(Path::new("zones.yaml"), SCENARIO, &crds).unwrap();
        let dir = std::env::temp_dir().join(format!("compare-nodepools-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = read_node_pools(&pool_file(&dir, "a.yaml", "c-2x-amd64-linux"), &crds).unwrap();
        let b = read_node_pools(&pool_file(&dir, "b.yaml", "c-8x-amd64-linux"), &crds).unwrap();
        let replaced = with_node_pools(&scenario, &a);
        let pools = replaced
            .objects
            .iter()
            .filter(|o| matches!(o, Object::NodePool(_)))
            .count();
        assert_eq!(pools, 1, "the NodePool is replaced, not added");
        let catalog = karpenter_kwok::catalog::catalog();
        let (left, right) =
            compare_node_pools(&scenario, &catalog, FeatureGates::default(), &a, &b);
        let types = |r: &Report| {
            r.nodeclaims
                .iter()
                .map(|c| c.instance_type.clone())
                .collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(
            types(&left).into_iter().collect::<Vec<_>>(),
            ["c-2x-amd64-linux"]
        );
        assert_eq!(
            types(&right).into_iter().collect::<Vec<_>>(),
            ["c-8x-amd64-linux"]
        );
        // Six 1-CPU pods: two-CPU nodes hold one each (after overhead), an eight-CPU node
        // holds them all.
        assert!(left.summary.nodes_launched > right.summary.nodes_launched);
        let text = crate::report::compare_text(&left, "a.yaml", &right, "b.yaml");
        assert!(text.contains("a.yaml") && text.contains("b.yaml"), "{text}");
        let svg = side_by_side_svg(&left, "a.yaml", &right, "b.yaml");
        assert_eq!(svg.matches("<svg ").count(), 3, "{svg}");
        assert!(svg.contains(">a.yaml</text>") && svg.contains(">b.yaml</text>"));
        // Anything but NodePools and NodeClasses is refused.
        let other = dir.join("other.yaml");
        std::fs::write(
            &other,
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n",
        )
        .unwrap();
        assert!(read_node_pools(&other, &crds).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
