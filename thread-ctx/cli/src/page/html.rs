//! The page as one HTML document: its own script and style and the vendored flame-graph
//! component (d3 and d3-flame-graph, committed under `assets/vendor/` with their licenses;
//! `scripts/vendor-page-assets.sh` copies them again from the npm packages), all inline, so that
//! the served page and the exported file are the same page and neither fetches anything but,
//! when served, its data.

use super::flames::{Flames, Of, KINDS};
use super::summary::Summary;
use serde_json::{Map, Value};

const TEMPLATE: &str = include_str!("assets/index.html");
const STYLE: &str = include_str!("assets/page.css");
const SCRIPT: &str = include_str!("assets/page.js");
const D3: &str = include_str!("assets/vendor/d3.min.js");
const FLAME_GRAPH: &str = include_str!("assets/vendor/d3-flamegraph.min.js");
const FLAME_GRAPH_STYLE: &str = include_str!("assets/vendor/d3-flamegraph.css");

/// JSON that may sit inside a `<script>` element: no `<` to end it early (JSON strings may
/// spell it `\u003c`).
fn inline_json(v: &Value) -> String {
    v.to_string().replace('<', "\\u003c")
}

/// The page; `data` inline for an export, None for the server (the page fetches `/api/data`).
pub fn page(data: Option<&Value>) -> String {
    // A vendored script cannot end the script element it is in either.
    let script = |s: &str| format!("<script>{}</script>", s.replace("</script", "<\\/script"));
    TEMPLATE
        .replace("{{STYLE}}", &format!("<style>{FLAME_GRAPH_STYLE}\n{STYLE}</style>"))
        .replace(
            "{{DATA}}",
            &data.map_or(String::new(), |d| format!("<script id=\"page-data\" type=\"application/json\">{}</script>", inline_json(d))),
        )
        .replace("{{SCRIPTS}}", &[script(D3), script(FLAME_GRAPH), script(SCRIPT)].join("\n"))
}

/// The page with everything it shows inside: the summary, and the flame graph of each trace and
/// route it lists, of each kind the profiles hold.
pub fn export(summary: &Summary, flames: Option<&Flames>, meta: &Value) -> String {
    let mut drawn = Map::new();
    if let Some(f) = flames {
        let of = summary.traces.iter().map(|t| (Of::Trace, "trace", t)).chain(summary.routes.iter().map(|r| (Of::Route, "route", r)));
        for (of, name, key) in of {
            for kind in KINDS {
                if let Some(v) = f.folded(of, key, kind).filter(|v| v["total"].as_u64() != Some(0)) {
                    drawn.insert(format!("{name}:{}:{key}", kind.name()), v);
                }
            }
        }
    }
    let mut data = summary.data.clone();
    data["meta"] = meta.clone();
    data["flames"] = Value::Object(drawn);
    page(Some(&data))
}
