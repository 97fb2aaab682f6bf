//! The call-site profile in the report (Cilkprof): the JSON `call_sites` and `call_contexts`
//! arrays (docs/json-schema.md), present only when the run was profiled.

use cilkview_engine::{Profile, SiteKind, SiteProfile, WorkSpan};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::RunReport;

/// A work and a span.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkSpanReport {
    pub work: u64,
    pub span: u64,
}

impl WorkSpanReport {
    /// work / span (0 / 0 = 1).
    pub fn parallelism(&self) -> f64 {
        WorkSpan::new(self.work, self.span).parallelism()
    }
}

impl From<WorkSpan> for WorkSpanReport {
    fn from(w: WorkSpan) -> Self {
        WorkSpanReport {
            work: w.work,
            span: w.span,
        }
    }
}

/// One call site (docs/engine.md, "Call-site profiles", for the definitions).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CallSiteReport {
    /// `file:line` of the call site, or `symbol+0xoff`, or the address.
    pub location: String,
    /// The function that contains the call site.
    pub function: String,
    /// The function it calls (a call of a marked function), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callee: Option<String>,
    /// `"spawn"` or `"call"`.
    pub kind: String,
    pub invocations: u64,
    pub on_work: WorkSpanReport,
    pub on_span: WorkSpanReport,
    pub local_on_span: WorkSpanReport,
    /// Sums over the site's top-caller invocations (its caller function had no other active
    /// instance). Absent in reports written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_caller: Option<WorkSpanReport>,
}

impl CallSiteReport {
    /// `function location` (with `[spawn]` for a spawn): how the site is drawn in stacks.
    pub fn label(&self) -> String {
        let spawn = if self.kind == "spawn" { " [spawn]" } else { "" };
        format!("{} {}{spawn}", self.function, self.location).replace(';', ":")
    }
}

/// One node of the calling-context tree (recursion folded); the first one is the root, the code
/// under no call site. In JSON a row of numbers ([`ContextRow`]: one line per context, so that a
/// profile of 60,000 contexts stays a few megabytes); reports of format version 1 wrote an object
/// with these keys, which still reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(into = "ContextRow", from = "ContextForm")]
pub struct CallContextReport {
    /// Index of the parent context (absent for the root).
    pub parent: Option<usize>,
    /// Index into `call_sites` (absent for the root).
    pub site: Option<usize>,
    pub invocations: u64,
    pub on_work: WorkSpanReport,
    /// Work of the context's invocations outside nested call sites (all invocations).
    pub local_work: u64,
    pub on_span: WorkSpanReport,
    pub local_on_span: WorkSpanReport,
}

/// A calling context in JSON (format version 2): `[parent, site, invocations, on_work.work,
/// on_work.span, local_work, on_span.work, on_span.span, local_on_span.work,
/// local_on_span.span]`, `parent` and `site` `null` for the root (docs/json-schema.md).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContextRow(
    Option<usize>,
    Option<usize>,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
);

/// A context as format version 1 wrote it: an object.
#[derive(Clone, Debug, Default, Deserialize)]
struct ContextObject {
    #[serde(default)]
    parent: Option<usize>,
    #[serde(default)]
    site: Option<usize>,
    invocations: u64,
    on_work: WorkSpanReport,
    local_work: u64,
    on_span: WorkSpanReport,
    local_on_span: WorkSpanReport,
}

/// What a context reads from: a row, or an object of version 1.
#[derive(Deserialize)]
#[serde(untagged)]
enum ContextForm {
    Row(ContextRow),
    Object(ContextObject),
}

impl From<CallContextReport> for ContextRow {
    fn from(c: CallContextReport) -> ContextRow {
        ContextRow(
            c.parent,
            c.site,
            c.invocations,
            c.on_work.work,
            c.on_work.span,
            c.local_work,
            c.on_span.work,
            c.on_span.span,
            c.local_on_span.work,
            c.local_on_span.span,
        )
    }
}

impl From<ContextForm> for CallContextReport {
    fn from(f: ContextForm) -> CallContextReport {
        let ws = |work, span| WorkSpanReport { work, span };
        match f {
            ContextForm::Row(ContextRow(
                parent,
                site,
                invocations,
                ww,
                ws_,
                lw,
                sw,
                ss,
                lsw,
                lss,
            )) => CallContextReport {
                parent,
                site,
                invocations,
                on_work: ws(ww, ws_),
                local_work: lw,
                on_span: ws(sw, ss),
                local_on_span: ws(lsw, lss),
            },
            ContextForm::Object(o) => CallContextReport {
                parent: o.parent,
                site: o.site,
                invocations: o.invocations,
                on_work: o.on_work,
                local_work: o.local_work,
                on_span: o.on_span,
                local_on_span: o.local_on_span,
            },
        }
    }
}

impl JsonSchema for CallContextReport {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CallContext".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = ContextRow::json_schema(generator);
        schema.insert(
            "description".into(),
            "A calling context: [parent, site, invocations, on_work.work, on_work.span, \
             local_work, on_span.work, on_span.span, local_on_span.work, local_on_span.span]; \
             parent and site are null for the root (the first context)."
                .into(),
        );
        schema
    }
}

/// How the producer of the report names one call site.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SiteName {
    pub function: String,
    pub location: String,
    /// The site's address in its file (the call's return address, the spawn's mark), which
    /// tells apart sites that share a function, a location and a kind (a function the compiler
    /// inlined into itself has many call sites on one source line).
    pub address: Option<u64>,
    /// The function the site calls, when known (not for a spawn).
    pub callee: Option<String>,
}

impl RunReport {
    /// Adds the engine's call-site profile; `name` gives each site's function and location
    /// (symbolication is the caller's business).
    pub fn with_profile(
        mut self,
        profile: &Profile,
        mut name: impl FnMut(&SiteProfile) -> SiteName,
    ) -> RunReport {
        let names: Vec<SiteName> = profile.sites.iter().map(&mut name).collect();
        let mut seen: std::collections::HashMap<(&str, &str, SiteKind), usize> =
            std::collections::HashMap::new();
        for (n, s) in names.iter().zip(&profile.sites) {
            *seen
                .entry((n.function.as_str(), n.location.as_str(), s.kind))
                .or_default() += 1;
        }
        let shared: Vec<bool> = names
            .iter()
            .zip(&profile.sites)
            .map(|(n, s)| seen[&(n.function.as_str(), n.location.as_str(), s.kind)] > 1)
            .collect();
        self.call_sites = Some(
            profile
                .sites
                .iter()
                .zip(names.iter().zip(shared))
                .map(|(s, (n, shared))| {
                    let n = n.clone();
                    // Sites that would read the same are told apart by their address.
                    let location = match n.address {
                        Some(a) if shared => format!("{} @{a:#x}", n.location),
                        _ => n.location,
                    };
                    CallSiteReport {
                        location,
                        function: n.function,
                        callee: n.callee,
                        kind: match s.kind {
                            SiteKind::Spawn => "spawn",
                            SiteKind::Call => "call",
                        }
                        .to_string(),
                        invocations: s.invocations,
                        on_work: s.on_work.into(),
                        on_span: s.on_span.into(),
                        local_on_span: s.local_on_span.into(),
                        top_caller: Some(s.top_caller.into()),
                    }
                })
                .collect(),
        );
        self.call_contexts = Some(
            profile
                .contexts
                .iter()
                .map(|c| CallContextReport {
                    parent: c.parent,
                    site: c.site,
                    invocations: c.invocations,
                    on_work: c.on_work.into(),
                    local_work: c.local_work,
                    on_span: c.on_span.into(),
                    local_on_span: c.local_on_span.into(),
                })
                .collect(),
        );
        self
    }

    /// The call sites from the root to context `i` (indices into `call_sites`).
    pub fn context_stack(&self, i: usize) -> Vec<usize> {
        let contexts = self.call_contexts.as_deref().unwrap_or_default();
        let mut out = Vec::new();
        let mut c = contexts.get(i);
        while let Some(ctx) = c {
            out.extend(ctx.site);
            c = ctx.parent.and_then(|p| contexts.get(p));
        }
        out.reverse();
        out
    }

    /// The work and the span the profile covers: the whole run's, or with `profile_region`
    /// the region's (the root context's).
    pub fn profiled(&self) -> WorkSpanReport {
        match (&self.profile_region, self.call_contexts.as_deref()) {
            (Some(_), Some([root, ..])) => root.on_work,
            _ => WorkSpanReport {
                work: self.measures.work,
                span: self.measures.span,
            },
        }
    }

    /// What the profile covers, for titles: `PROGRAM` or `PROGRAM [region LABEL]`.
    pub fn profiled_subject(&self) -> String {
        match &self.profile_region {
            Some(label) => format!("{} [region {label}]", self.program),
            None => self.program.clone(),
        }
    }

    /// The root's local work and span on span (the code under no call site).
    pub fn outside_call_sites(&self) -> WorkSpanReport {
        self.call_contexts
            .as_deref()
            .and_then(|c| c.first())
            .map(|r| r.local_on_span)
            .unwrap_or_default()
    }
}
