//! The soak's picture: one panel per figure over time, as a plain SVG (no plotting
//! dependency; a browser or the README shows it).

use std::fmt::Write;

use crate::soak::Sample;

const WIDTH: f64 = 900.0;
const PANEL: f64 = 170.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;

/// One line of a panel: its name, colour and value per sample.
type Series = (&'static str, &'static str, fn(&Sample) -> f64);

const PANELS: &[(&str, &[Series])] = &[
    (
        "throughput (operations/s)",
        &[("ops/s", "#1f77b4", |s| s.ops_per_s)],
    ),
    (
        "latency (ms)",
        &[
            ("p50", "#2ca02c", |s| s.p50_ms),
            ("p99", "#d62728", |s| s.p99_ms),
        ],
    ),
    ("server RSS (MiB)", &[("RSS", "#9467bd", |s| s.rss_mib)]),
    (
        "storage (MiB)",
        &[
            ("database", "#8c564b", |s| s.db_mib),
            ("WAL", "#ff7f0e", |s| s.wal_mib),
        ],
    ),
];

pub fn draw(samples: &[Sample]) -> String {
    let height = TOP + PANELS.len() as f64 * (PANEL + 40.0);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="18" font-size="14">Switchboard soak: {} samples over {:.1} minutes</text>
"#,
        samples.len(),
        samples.last().map_or(0.0, |s| s.seconds / 60.0)
    );
    let end = samples.last().map_or(1.0, |s| s.seconds).max(1.0);
    for (n, (title, series)) in PANELS.iter().enumerate() {
        let y0 = TOP + n as f64 * (PANEL + 40.0) + 20.0;
        panel(&mut svg, samples, (title, series), y0, end);
    }
    svg.push_str("</svg>\n");
    svg
}

fn panel(
    svg: &mut String,
    samples: &[Sample],
    (title, series): (&str, &[Series]),
    y0: f64,
    end: f64,
) {
    let max = samples
        .iter()
        .flat_map(|s| series.iter().map(move |(_, _, f)| f(s)))
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.1;
    let plot_w = WIDTH - LEFT - RIGHT;
    let x = |seconds: f64| LEFT + seconds / end * plot_w;
    let y = |v: f64| y0 + PANEL - (v / max) * PANEL;
    let _ = writeln!(
        svg,
        r##"<text x="{LEFT}" y="{}">{title}</text><rect x="{LEFT}" y="{y0}" width="{plot_w}" height="{PANEL}" fill="none" stroke="#999"/>"##,
        y0 - 5.0
    );
    for frac in [0.0, 0.5, 1.0] {
        let v = max * frac / 1.1;
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{:.1}" text-anchor="end" fill="#555">{v:.1}</text>"##,
            LEFT - 5.0,
            y(v) + 4.0
        );
    }
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="{}" text-anchor="end" fill="#555">{:.0} min</text>"##,
        WIDTH - RIGHT,
        y0 + PANEL + 14.0,
        end / 60.0
    );
    for (k, (name, colour, f)) in series.iter().enumerate() {
        let points: Vec<String> = samples
            .iter()
            .filter(|s| f(s).is_finite())
            .map(|s| format!("{:.1},{:.1}", x(s.seconds), y(f(s))))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/><text x="{}" y="{}" fill="{colour}">{name}</text>"#,
            points.join(" "),
            WIDTH - RIGHT - 80.0,
            y0 + 14.0 + k as f64 * 14.0
        );
    }
}
