//! Text and JSON rendering of discovery results and thread records for the CLI.

use serde_json::{json, Value};
use std::fmt::Write;
use thread_ctx_discovery::printable::printable;
use thread_ctx_discovery::ptrace::{State, ThreadRecord};
use thread_ctx_discovery::TlsAccess;
use thread_ctx_discovery::{Discovery, Writer};

fn access_json(a: &TlsAccess) -> Value {
    match *a {
        TlsAccess::Static { tp_offset } => json!({ "kind": "static", "tp_offset": tp_offset }),
        TlsAccess::Dtv { dtv_offset, dtv_entry_size, module_id, offset } => json!({
            "kind": "dtv", "dtv_offset": dtv_offset, "dtv_entry_size": dtv_entry_size,
            "module_id": module_id, "offset": offset,
        }),
    }
}

fn writer_json(w: &Writer) -> Value {
    json!({
        "path": w.path,
        "symbol": w.symbol_name(),
        "load_bias": format!("{:#x}", w.load_bias),
        "symbol_offset": w.object.symbol_value,
        "model": w.model,
        "relocations": w.object.relocations,
        "got_address": w.got_address.map(|a| format!("{a:#x}")),
        "access": w.access.as_ref().ok().map(access_json),
        "error": w.access.as_ref().err().map(ToString::to_string),
        "nodejs_layout": w.nodejs.as_ref().and_then(|l| l.as_ref().ok()),
        "nodejs_error": w.nodejs.as_ref().and_then(|l| l.as_ref().err()).map(ToString::to_string),
    })
}

pub fn discovery_json(d: &Discovery) -> Value {
    let (pc, pc_err) = match &d.process_context {
        None => (Value::Null, Value::Null),
        Some(Ok(pc)) => (serde_json::to_value(pc).unwrap_or(Value::Null), Value::Null),
        Some(Err(e)) => (Value::Null, e.to_string().into()),
    };
    json!({
        "pid": d.pid,
        "writers": d.writers.iter().map(writer_json).collect::<Vec<_>>(),
        "skipped_objects": d.skipped_objects.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "process_context": pc,
        "process_context_error": pc_err,
    })
}

pub fn discovery_text(d: &Discovery) -> String {
    let mut s = String::new();
    if d.writers.is_empty() {
        let _ = writeln!(s, "process {}: no otel_thread_ctx_v1 (or otel_thread_ctx_nodejs_v1) writer", d.pid);
    }
    for w in &d.writers {
        let model = w.model.map_or("unsupported".to_string(), |m| m.to_string());
        let _ = writeln!(s, "writer {} ({})", printable(&w.path), w.symbol_name());
        let _ = writeln!(s, "  model:  {model}");
        let _ = writeln!(s, "  symbol: offset {:#x} in the module's TLS block, load bias {:#x}", w.object.symbol_value, w.load_bias);
        if let Some(g) = w.got_address {
            let _ = writeln!(s, "  got:    {g:#x}");
        }
        match &w.access {
            Ok(a) => {
                let _ = writeln!(s, "  access: {a}");
            }
            Err(e) => {
                let _ = writeln!(s, "  access: UNRESOLVED: {}", printable(&e.to_string()));
            }
        }
        match &w.nodejs {
            None => {}
            Some(Ok(layout)) => {
                let _ = writeln!(s, "  schema: nodejs_v1_dev, walked through the async-context frame");
                let _ = writeln!(s, "  layout: {layout}");
            }
            Some(Err(e)) => {
                let _ = writeln!(s, "  schema: NOT READ: {}", printable(&e.to_string()));
            }
        }
    }
    for o in &d.skipped_objects {
        let _ = writeln!(s, "skipped object: {}", printable(&o.to_string()));
    }
    match &d.process_context {
        None => {
            let _ = writeln!(s, "process context: none (no OTEL_CTX mapping)");
        }
        Some(Err(e)) => {
            let _ = writeln!(s, "process context: UNREADABLE: {}", printable(&e.to_string()));
        }
        Some(Ok(pc)) => {
            let _ = writeln!(
                s,
                "process context: {} at {:#x}, version {}, published at {} ns, payload {} bytes",
                pc.mapping, pc.address, pc.version, pc.published_at_ns, pc.payload_size
            );
            for (k, v) in &pc.resource {
                let _ = writeln!(s, "  resource  {} = {v}", printable(k));
            }
            for (k, v) in &pc.attributes {
                let _ = writeln!(s, "  attribute {} = {v}", printable(k));
            }
        }
    }
    s
}

pub fn threads_text(threads: &[ThreadRecord]) -> String {
    let mut s = String::new();
    let multi_writer = threads.iter().any(|t| t.writer != threads[0].writer);
    let _ = writeln!(s, "{:<8} {:<16} {:<10} {:<32} {:<16} {:<5} ATTRS", "TID", "NAME", "STATE", "TRACE_ID", "SPAN_ID", "FLAGS");
    for t in threads {
        let state = match t.state {
            State::Valid => "valid",
            State::NoContext => "none",
            State::Malformed => "MALFORMED",
            State::Exited => "exited",
            State::Error => "ERROR",
        };
        let attrs: Vec<String> = t
            .attrs
            .iter()
            .map(|a| match &a.key {
                Some(k) => format!("{}={:?}", printable(k), a.value),
                None => format!("#{}={:?}", a.key_index, a.value),
            })
            .collect();
        let _ = writeln!(
            s,
            "{:<8} {:<16} {:<10} {:<32} {:<16} {:<5} {}",
            t.tid,
            printable(&t.name),
            state,
            t.trace_id.as_deref().unwrap_or("-"),
            t.span_id.as_deref().unwrap_or("-"),
            t.flags.map_or("-".into(), |f| format!("{f:02x}")),
            attrs.join(" ")
        );
        if multi_writer {
            let _ = writeln!(s, "         writer {}", printable(&t.writer));
        }
        for p in &t.problems {
            let _ = writeln!(s, "         {}: {}", if t.state == State::NoContext { "note" } else { "problem" }, printable(p));
        }
    }
    s
}
