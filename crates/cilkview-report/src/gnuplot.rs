//! `--gnuplot PREFIX`: `PREFIX.dat` and `PREFIX.plt`; `gnuplot PREFIX.plt`, run from any folder,
//! draws the scalability profile of the Cilkview paper's Figure 2 into `PREFIX.png` (the script
//! first changes to its own folder, where the `.dat` is).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use cilkview_engine::speedup_with_task_cost;

use crate::{Artifact, Destination, ExportError, Exporter, RunReport};

/// The report's prediction (of region `region`, `--plot-region`, if named); the speedups
/// measured by `run --bench` are a second data block of the `.dat` (`index 1`), drawn as points
/// with min–max error bars.
pub struct GnuplotExporter {
    pub prefix: PathBuf,
    pub region: Option<String>,
}

impl GnuplotExporter {
    fn path(&self, extension: &str) -> PathBuf {
        let mut s = self.prefix.clone().into_os_string();
        s.push(".");
        s.push(extension);
        PathBuf::from(s)
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Quotes a string for a gnuplot single-quoted literal.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl Exporter for GnuplotExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![
            Destination::File(self.path("dat")),
            Destination::File(self.path("plt")),
        ]
    }

    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError> {
        let report = report.focused(self.region.as_deref())?;
        let widest = report.measured.iter().map(|m| m.cores).max().unwrap_or(1);
        let max = report.max_cores().max(2).max(widest);
        let what_if = what_if_range(&report, max);
        let dat = data(&report, max, what_if.as_deref());
        let plt = self.script(&report, max, y_top(&report, max, what_if.as_deref()));
        Ok(vec![
            Artifact {
                destination: Destination::File(self.path("dat")),
                bytes: dat.into_bytes(),
            },
            Artifact {
                destination: Destination::File(self.path("plt")),
                bytes: plt.into_bytes(),
            },
        ])
    }
}

/// The top of the y range: as in the plotters picture (plot/draw.rs), 1.45 times the highest
/// upper bound or measured point, leaving room for the legend.
fn y_top(report: &RunReport, max: u32, what_if: Option<&[crate::Speedup]>) -> f64 {
    let m = report.measures.measured();
    let top = (1..=max)
        .map(|p| {
            speedup_with_task_cost(&m, p, report.span_coefficient, report.task_cost())
                .within(report.lock_bound())
                .upper
        })
        .chain(report.measured.iter().map(|m| m.max))
        .chain(what_if.iter().copied().flatten().map(|w| w.upper))
        .fold(1.0f64, f64::max);
    top * 1.45
}

/// The `.dat` file: the prediction at P = 1..=max (`index 0`, with the what-if range's two
/// columns if there is one), then the measured speedups (`index 1`) if any.
fn data(report: &RunReport, max: u32, what_if: Option<&[crate::Speedup]>) -> String {
    let m = report.measures.measured();
    let mut dat = String::new();
    let _ = writeln!(
        dat,
        "# cilkview-rs scalability profile of {}\n# work {} span {} burdened_span {} span_coefficient {}\n# cores\twork_law\tspan_law\tburdened_lower\tupper{}",
        report.program, report.measures.work, report.measures.span, report.measures.burdened_span, report.span_coefficient,
        if what_if.is_some() { "\twhat_if_lower\twhat_if_upper" } else { "" }
    );
    for p in 1..=max {
        let s = speedup_with_task_cost(&m, p, report.span_coefficient, report.task_cost())
            .within(report.lock_bound());
        let _ = write!(
            dat,
            "{p}\t{p}\t{:.6}\t{:.6}\t{:.6}",
            report.measures.parallelism, s.lower, s.upper
        );
        if let Some(w) = what_if.and_then(|w| w.get(p as usize - 1)) {
            let _ = write!(dat, "\t{:.6}\t{:.6}", w.lower, w.upper);
        }
        dat.push('\n');
    }
    if !report.measured.is_empty() {
        let _ = writeln!(
            dat,
            "\n\n# measured speedup (index 1)\n# cores\tmedian\tmin\tmax"
        );
        for m in &report.measured {
            let _ = writeln!(
                dat,
                "{}\t{:.6}\t{:.6}\t{:.6}",
                m.cores, m.median, m.min, m.max
            );
        }
    }
    dat
}

impl GnuplotExporter {
    /// The `.plt` script: from its own folder, it draws the `.dat` into `PREFIX.png` with the
    /// plotters picture's title, axes (x to `max` cores, y to `top`) and legend.
    fn script(&self, report: &RunReport, max: u32, top: f64) -> String {
        let png = {
            let mut s = file_name(&self.prefix);
            s.push_str(".png");
            s
        };
        let program = file_name(Path::new(&report.program));
        let mut plt = String::new();
        let _ = writeln!(
            plt,
            "# cilkview-rs: `gnuplot {}` (from any folder) draws {png} beside it",
            file_name(&self.path("plt"))
        );
        // gnuplot sets ARG0 to the script's path as given on its command line: go to the
        // script's folder, where the .dat is and the .png goes (from stdin, ARG0 is empty).
        let _ = writeln!(
            plt,
            "here = ARG0; i = strlen(here)\nwhile (i > 0 && here[i:i] ne '/') {{ i = i - 1 }}\nif (i > 0) {{ cd here[1:i] }}"
        );
        let (width, height) = crate::PLOT_SIZE;
        let _ = writeln!(
            plt,
            "set encoding utf8\nset terminal pngcairo size {width},{height} noenhanced"
        );
        let _ = writeln!(plt, "set output {}", quoted(&png));
        // Title, axes and legend as in the plotters picture (`--plot`).
        let _ = writeln!(
            plt,
            "set title {}",
            quoted(&format!(
                "{program}: parallelism {:.2}, burdened parallelism {:.2}",
                report.measures.parallelism, report.measures.burdened_parallelism
            ))
        );
        let _ = writeln!(
            plt,
            "set xlabel 'Cores (P)'\nset ylabel 'Speedup T(1)/T(P)'\nset key top left\nset grid"
        );
        let _ = writeln!(
            plt,
            "set xrange [0.8:{:.1}]\nset yrange [0:{:.3}]",
            f64::from(max) + 0.2,
            top
        );
        let dat_name = quoted(&file_name(&self.path("dat")));
        let _ = writeln!(
            plt,
            "plot {dat_name} index 0 using 1:4:5 with filledcurves lc rgb '#bcd6ee' title 'Estimated speedup range', \\\n     {dat_name} index 0 using 1:2 with lines lw 2 lc rgb '#444444' title 'Work law: speedup ≤ P', \\\n     {dat_name} index 0 using 1:3 with lines lw 2 lc rgb '#d62728' title 'Span law: speedup ≤ parallelism ({:.2})', \\\n     {dat_name} index 0 using 1:4 with lines lw 2 lc rgb '#1f77b4' title 'Burdened speedup (lower bound)'{}",
            report.measures.parallelism,
            extra_series(report, &dat_name)
        );
        plt
    }
}

/// The speedup range after `--what-if` at P = 1..=max, if the report has one.
fn what_if_range(report: &RunReport, max: u32) -> Option<Vec<crate::Speedup>> {
    let after = report.what_if.as_ref()?.after.measures.measured();
    Some(
        (1..=max)
            .map(|p| speedup_with_task_cost(&after, p, report.span_coefficient, report.task_cost()))
            .collect(),
    )
}

/// The plot clauses after the prediction's: the what-if range (columns 6 and 7), the measured
/// speedups (index 1).
fn extra_series(report: &RunReport, dat_name: &str) -> String {
    let mut out = String::new();
    if let Some(w) = &report.what_if {
        let _ = write!(
            out,
            ", \\\n     {dat_name} index 0 using 1:7 with lines lw 3 dt 2 lc rgb '#2ca02c' title 'What-if: upper bound (parallelism {:.2})', \\\n     {dat_name} index 0 using 1:6 with lines lw 3 dt 2 lc rgb '#2ca02c' title 'What-if: burdened lower bound'",
            w.after.measures.parallelism
        );
    }
    if !report.measured.is_empty() {
        let _ = write!(out, ", \\\n     {dat_name} index 1 using 1:2:3:4 with yerrorbars pt 2 ps 1.5 lw 2 lc rgb '#e06c00' title 'Measured speedup (median; bar: fastest to slowest trial)'");
    }
    out
}
