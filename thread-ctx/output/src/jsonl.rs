//! `record --format jsonl`: one JSON object per sample. The event as the sampler read it (the
//! record's state, ids, attributes with their key indexes, hex and problems: what the record held,
//! the sampler's `Event::to_json`, which the caller gives), its wall-clock time, the bytes an allocation sample stands for (the
//! decode stage's weight: scaled in one place), and, asked for, its symbolized frames.

use serde_json::{json, Value};
use thread_ctx_model::{Frame, Sample};

/// The line of one sample: `event` as the sampler sent it (its JSON object), `s` as the decode
/// stage made it. `monotonic_to_unix_ns` turns its CLOCK_MONOTONIC time into wall-clock time;
/// `frames` (leaf first) are its symbolized stack, when asked for.
pub fn sample_line(event: Value, s: &Sample, monotonic_to_unix_ns: i64, frames: Option<&[Frame]>) -> Value {
    let mut line = event;
    line["time_unix_nano"] = json!((s.time_ns as i64).saturating_add(monotonic_to_unix_ns).max(0));
    if s.kind.is_alloc() {
        line["bytes"] = json!(s.weight);
    }
    if let Some(frames) = frames {
        line["frames"] = frames.iter().map(frame_json).collect();
    }
    line
}

/// One frame of a `--frames` line.
fn frame_json(f: &Frame) -> Value {
    json!({
        "kind": format!("{:?}", f.kind).to_lowercase(),
        "name": f.name,
        "file": f.file,
        "line": f.source_line(),
        "column": f.pos.map_or(f.column, |p| p.column),
        "function_line": f.line,
        // Named from V8's heap: the tier its code ran in.
        "tier": f.tier.map(|t| t.name()),
        // Source-mapped: where V8 ran it (file and lines above are the original source's).
        "generated": f.generated.as_ref().map(|g| json!({
            "file": g.file, "line": g.pos.map_or(g.line, |p| Some(p.line)), "column": g.pos.map_or(g.column, |p| p.column), "function_line": g.line,
        })),
    })
}
