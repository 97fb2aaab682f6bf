//! `--fail-below`: CI gates on parallelism and burdened parallelism.

use crate::RunReport;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateMeasure {
    Parallelism,
    BurdenedParallelism,
}

impl GateMeasure {
    const ALL: [GateMeasure; 2] = [GateMeasure::Parallelism, GateMeasure::BurdenedParallelism];

    /// The measure named `name`, or the line that says what was meant (the measure most like
    /// it, as clap suggests a misspelt option: Jaro-Winkler similarity above 0.7).
    fn parse(name: &str) -> Result<GateMeasure, String> {
        if let Some(m) = Self::ALL.into_iter().find(|m| m.name() == name) {
            return Ok(m);
        }
        let closest = Self::ALL
            .into_iter()
            .map(|m| (strsim::jaro_winkler(name, m.name()), m))
            .filter(|(score, _)| *score > 0.7)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        Err(match closest {
            Some((_, m)) => format!(
                "unknown measure `{name}`: did you mean `{}`? ({FORM})",
                m.name()
            ),
            None => FORM.to_string(),
        })
    }

    fn name(self) -> &'static str {
        match self {
            GateMeasure::Parallelism => "parallelism",
            GateMeasure::BurdenedParallelism => "burdened_parallelism",
        }
    }
}

/// One `--fail-below [region:LABEL:]MEASURE=N`.
#[derive(Clone, Debug, PartialEq)]
pub struct Gate {
    pub region: Option<String>,
    pub measure: GateMeasure,
    pub threshold: f64,
}

const FORM: &str = "expected MEASURE=N or region:LABEL:MEASURE=N, with MEASURE parallelism or \
                    burdened_parallelism and N a number, e.g. parallelism=8";

impl Gate {
    pub fn parse(s: &str) -> Result<Gate, String> {
        let (lhs, n) = s.rsplit_once('=').ok_or(FORM)?;
        let threshold: f64 = n.trim().parse().map_err(|_| FORM.to_string())?;
        if !threshold.is_finite() {
            return Err(FORM.into());
        }
        let (region, measure) = match lhs.strip_prefix("region:") {
            Some(rest) => {
                let (label, measure) = rest.rsplit_once(':').ok_or(FORM)?;
                (Some(label.to_string()), measure)
            }
            None => (None, lhs),
        };
        let measure = GateMeasure::parse(measure)?;
        Ok(Gate {
            region,
            measure,
            threshold,
        })
    }

    /// `None` when the gate passes; otherwise the line that says why it failed.
    pub fn check(&self, report: &RunReport) -> Option<String> {
        let (what, par, bpar) = match &self.region {
            None => (
                String::new(),
                report.measures.parallelism,
                report.measures.burdened_parallelism,
            ),
            Some(label) => match report.regions.iter().find(|r| &r.label == label) {
                Some(r) => (
                    format!("region \"{label}\": "),
                    r.measures.parallelism,
                    r.measures.burdened_parallelism,
                ),
                None => {
                    return Some(format!(
                        "region \"{label}\" was never measured, so its {} cannot be checked \
                         (is the label spelled as in cv_region_begin?)",
                        self.measure.name()
                    ))
                }
            },
        };
        let value = match self.measure {
            GateMeasure::Parallelism => par,
            GateMeasure::BurdenedParallelism => bpar,
        };
        (value < self.threshold).then(|| {
            format!(
                "{what}{} {value:.2} is below the required {} (--fail-below)",
                self.measure.name(),
                self.threshold
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!(
            Gate::parse("parallelism=8").unwrap(),
            Gate {
                region: None,
                measure: GateMeasure::Parallelism,
                threshold: 8.0
            }
        );
        let g = Gate::parse("region:sort:phase:burdened_parallelism=1.5").unwrap();
        assert_eq!(g.region.as_deref(), Some("sort:phase"));
        assert_eq!(g.measure, GateMeasure::BurdenedParallelism);
        for bad in [
            "nonsense",
            "parallelism",
            "parallelism=x",
            "span=3",
            "region:x=3",
            "parallelism=inf",
        ] {
            assert!(Gate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_misspelt_measure_gets_a_did_you_mean() {
        let err = Gate::parse("paralelism=1").unwrap_err();
        assert!(
            err.starts_with("unknown measure `paralelism`: did you mean `parallelism`?"),
            "{err}"
        );
        let err = Gate::parse("region:r:burdend_parallelism=1").unwrap_err();
        assert!(
            err.contains("did you mean `burdened_parallelism`?"),
            "{err}"
        );
        assert_eq!(Gate::parse("span=3").unwrap_err(), FORM);
    }
}
