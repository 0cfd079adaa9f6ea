//! The report as a picture: nodes, pending pods, and cost against the lower bound over time,
//! as three stacked charts in one SVG (no plotting library needed for lines and labels).

use std::fmt::Write;

use crate::report::Report;

const WIDTH: f64 = 900.0;
const PANEL: f64 = 170.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 60.0;
const GAP: f64 = 40.0;

struct Series<'a> {
    values: Vec<f64>,
    color: &'a str,
    dashed: bool,
    label: &'a str,
}

fn polyline(
    out: &mut String,
    times: &[f64],
    series: &Series<'_>,
    x: impl Fn(f64) -> f64,
    y: impl Fn(f64) -> f64,
) {
    let points: Vec<String> = times
        .iter()
        .zip(&series.values)
        .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
        .collect();
    let dash = if series.dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    };
    let _ = writeln!(
        out,
        r#"<polyline fill="none" stroke="{}" stroke-width="2"{dash} points="{}"/>"#,
        series.color,
        points.join(" ")
    );
}

fn panel(
    out: &mut String,
    index: usize,
    title: &str,
    times: &[f64],
    end: f64,
    series: &[Series<'_>],
) {
    let top = TOP + index as f64 * (PANEL + GAP);
    let plot_width = WIDTH - LEFT - RIGHT;
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let x = |t: f64| LEFT + t / end.max(1.0) * plot_width;
    let y = |v: f64| top + PANEL - v / max * PANEL;
    let _ = writeln!(
        out,
        r##"<text x="{LEFT}" y="{:.1}" font-size="14" font-weight="bold">{title}</text>"##,
        top - 8.0
    );
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{top:.1}" width="{plot_width:.1}" height="{PANEL}" fill="#fafafa" stroke="#ccc"/>"##
    );
    for i in 0..=4 {
        let v = max * i as f64 / 4.0;
        let label = if max >= 10.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        };
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#555">{label}</text>"##,
            LEFT - 6.0,
            y(v) + 4.0
        );
    }
    for s in series {
        polyline(out, times, s, x, y);
    }
    for (i, s) in series.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" fill="{}">{}</text>"#,
            WIDTH - RIGHT - 190.0,
            top + 16.0 + 15.0 * i as f64,
            s.color,
            s.label
        );
    }
}

impl Report {
    /// Nodes, pending pods and cost per hour (with the lower bound) over time, as SVG.
    pub fn to_svg(&self) -> String {
        let times: Vec<f64> = self.timeline.iter().map(|t| t.t_s as f64).collect();
        let end = self.duration_s as f64;
        let height = TOP + 3.0 * PANEL + 2.0 * GAP + 40.0;
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">"#
        );
        let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            out,
            r#"<text x="{LEFT}" y="20" font-size="16">{} on {} — cost {:.4}, lower bound {:.4}</text>"#,
            self.scenario, self.catalog, self.summary.cost_total, self.summary.cost_lower_bound
        );
        let nodes = Series {
            values: self.timeline.iter().map(|t| t.nodes as f64).collect(),
            color: "#1f77b4",
            dashed: false,
            label: "nodes",
        };
        panel(&mut out, 0, "Nodes", &times, end, &[nodes]);
        let pending = Series {
            values: self
                .timeline
                .iter()
                .map(|t| t.pods_pending as f64)
                .collect(),
            color: "#d62728",
            dashed: false,
            label: "pending pods",
        };
        let running = Series {
            values: self
                .timeline
                .iter()
                .map(|t| t.pods_running as f64)
                .collect(),
            color: "#2ca02c",
            dashed: false,
            label: "running pods",
        };
        panel(&mut out, 1, "Pods", &times, end, &[pending, running]);
        let cost = Series {
            values: self.timeline.iter().map(|t| t.cost_per_hour).collect(),
            color: "#9467bd",
            dashed: false,
            label: "cost per hour",
        };
        let bound = Series {
            values: self
                .timeline
                .iter()
                .map(|t| t.lower_bound_per_hour)
                .collect(),
            color: "#7f7f7f",
            dashed: true,
            label: "lower bound per hour",
        };
        panel(&mut out, 2, "Cost", &times, end, &[cost, bound]);
        let axis_y = TOP + 3.0 * PANEL + 2.0 * GAP + 20.0;
        for i in 0..=6 {
            let t = end * i as f64 / 6.0;
            let x = LEFT + (WIDTH - LEFT - RIGHT) * i as f64 / 6.0;
            let _ = writeln!(
                out,
                r##"<text x="{x:.1}" y="{axis_y:.1}" font-size="11" text-anchor="middle" fill="#555">{:.0}m</text>"##,
                t / 60.0
            );
        }
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn draws_three_panels_with_every_sample() {
        let report = crate::engine::Simulation::new(
            &crate::scenario::built_in(),
            karpenter_kwok::catalog::catalog(),
        )
        .run(&mut |_| {});
        let svg = report.to_svg();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 5);
        let points = svg
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(points.split(' ').count(), report.timeline.len());
        for title in ["Nodes", "Pods", "Cost"] {
            assert!(svg.contains(&format!(">{title}</text>")), "{title}");
        }
    }
}
