//! One decoded event: a CPU sample (who was running) or an off-CPU interval
//! (who was switched out, for how long), and the thread context it published.

use super::abi::{CtxState, RawEvent, EVENT_CPU_SAMPLE, EVENT_FLAG_PREEMPTED, EVENT_OFF_CPU};
use crate::record::{decode_attrs, hex, Header};
use serde_json::{json, Value};

/// Which BPF program sent the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A cpu-clock tick on the thread (sampler.bpf.c).
    Cpu,
    /// The thread was switched out for `duration_ns` from `time_ns` (off_cpu.bpf.c).
    OffCpu,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub kind: EventKind,
    /// CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns), comparable to process.hrtime().
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub state: CtxState,
    /// The thread's TLS pointer (record address), 0 when it was not reached.
    pub record_addr: u64,
    /// The header as copied, when the record was reachable (`state.has_header()`).
    pub header: Option<Header>,
    /// attrs-data bytes; only for `CtxState::Valid`.
    pub attrs: Vec<u8>,
    /// Id in the sampler's stack map, or the negative errno bpf_get_stackid returned.
    pub user_stack_id: Result<u32, i32>,
    /// Likewise for the kernel stack (-ENOENT without --kernel, -EFAULT for a sample taken in user mode).
    pub kernel_stack_id: Result<u32, i32>,
    /// Off-CPU: nanoseconds the thread was switched out; 0 for CPU samples.
    pub duration_ns: u64,
    /// Off-CPU: switched out while runnable (waited for a CPU) rather than blocked.
    pub preempted: bool,
}

fn stack_id(raw: i32) -> Result<u32, i32> {
    if raw >= 0 {
        Ok(raw as u32)
    } else {
        Err(raw)
    }
}

impl Sample {
    pub fn decode(bytes: &[u8]) -> Result<Sample, String> {
        let raw = RawEvent::from_bytes(bytes)
            .ok_or_else(|| format!("ring buffer event of {} bytes, expected {}", bytes.len(), super::abi::RAW_EVENT_SIZE))?;
        let kind = match raw.kind {
            EVENT_CPU_SAMPLE => EventKind::Cpu,
            EVENT_OFF_CPU => EventKind::OffCpu,
            k => return Err(format!("event kind {k}, expected {EVENT_CPU_SAMPLE} (CPU sample) or {EVENT_OFF_CPU} (off-CPU)")),
        };
        let state = CtxState::from_raw(raw.state).ok_or_else(|| format!("event state {} out of range", raw.state))?;
        let header = state.has_header().then(|| Header::parse(&raw.header));
        let attrs = match (state, header) {
            (CtxState::Valid, Some(h)) => raw.attrs[..h.attrs_size as usize].to_vec(),
            _ => Vec::new(),
        };
        Ok(Sample {
            kind,
            time_ns: raw.time_ns,
            pid: raw.pid,
            tid: raw.tid,
            cpu: raw.cpu,
            state,
            record_addr: raw.record_addr,
            header,
            attrs,
            user_stack_id: stack_id(raw.user_stack_id),
            kernel_stack_id: stack_id(raw.kernel_stack_id),
            duration_ns: raw.duration_ns,
            preempted: raw.flags & EVENT_FLAG_PREEMPTED != 0,
        })
    }

    /// (trace id, span id, flags) when the sample carries a span context.
    pub fn span(&self) -> Option<([u8; 16], [u8; 8], u8)> {
        let h = self.header.filter(|_| self.state == CtxState::Valid)?;
        (h.trace_id != [0; 16] || h.span_id != [0; 8]).then_some((h.trace_id, h.span_id, h.flags))
    }

    /// One `--format jsonl` line.
    pub fn to_json(&self, key_map: Option<&[String]>) -> Value {
        let span = self.span();
        let attrs = (self.state == CtxState::Valid).then(|| {
            let (entries, problems) = decode_attrs(&self.attrs, key_map);
            json!({ "hex": hex(&self.attrs), "entries": entries, "problems": problems })
        });
        json!({
            "kind": match self.kind { EventKind::Cpu => "cpu", EventKind::OffCpu => "off_cpu" },
            "time_ns": self.time_ns,
            "duration_ns": (self.kind == EventKind::OffCpu).then_some(self.duration_ns),
            "preempted": (self.kind == EventKind::OffCpu).then_some(self.preempted),
            "pid": self.pid,
            "tid": self.tid,
            "cpu": self.cpu,
            "state": self.state.name(),
            "valid": self.header.map(|h| h.valid),
            "record_address": (self.record_addr != 0).then(|| format!("{:#x}", self.record_addr)),
            "trace_id": span.map(|s| hex(&s.0)),
            "span_id": span.map(|s| hex(&s.1)),
            "flags": span.map(|s| s.2),
            "attrs": attrs,
            "stack_id": self.user_stack_id.ok(),
            "stack_error": self.user_stack_id.err(),
            "kernel_stack_id": self.kernel_stack_id.ok(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::abi::RAW_EVENT_SIZE;

    fn raw(state: u8, valid: u8, attrs: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; RAW_EVENT_SIZE];
        b[0..8].copy_from_slice(&123u64.to_ne_bytes());
        b[20..24].copy_from_slice(&77u32.to_ne_bytes());
        b[24..28].copy_from_slice(&(-14i32).to_ne_bytes());
        b[28..32].copy_from_slice(&5i32.to_ne_bytes());
        b[37] = state;
        b[48..64].fill(0xaa);
        b[64..72].fill(0xbb);
        b[72] = valid;
        b[73] = 1;
        b[74..76].copy_from_slice(&(attrs.len() as u16).to_ne_bytes());
        b[76..76 + attrs.len()].copy_from_slice(attrs);
        b
    }

    #[test]
    fn valid_sample_decodes_ids_and_attrs() {
        let s = Sample::decode(&raw(CtxState::Valid as u8, 1, &[0, 2, b'/', b'a'])).unwrap();
        assert_eq!((s.time_ns, s.tid), (123, 77));
        assert_eq!(s.span(), Some(([0xaa; 16], [0xbb; 8], 1)));
        assert_eq!((s.user_stack_id, s.kernel_stack_id), (Err(-14), Ok(5)));
        assert_eq!((s.kind, s.duration_ns, s.preempted), (EventKind::Cpu, 0, false));
        let j = s.to_json(Some(&["http.route".to_string()]));
        assert_eq!(j["trace_id"], "aa".repeat(16));
        assert_eq!(j["attrs"]["hex"], "00022f61");
        assert_eq!(j["attrs"]["entries"][0]["key"], "http.route");
        assert_eq!(j["state"], "valid");
        assert_eq!((j["kind"].as_str(), j["duration_ns"].as_u64()), (Some("cpu"), None));
    }

    #[test]
    fn off_cpu_events_carry_duration_and_preemption() {
        let mut b = raw(CtxState::Valid as u8, 1, &[]);
        b[36] = 1; // kind
        b[38..40].copy_from_slice(&1u16.to_ne_bytes()); // flags: preempted
        b[40..48].copy_from_slice(&50_000_000u64.to_ne_bytes());
        let s = Sample::decode(&b).unwrap();
        assert_eq!((s.kind, s.duration_ns, s.preempted), (EventKind::OffCpu, 50_000_000, true));
        let j = s.to_json(None);
        assert_eq!((j["kind"].as_str(), j["duration_ns"].as_u64(), j["preempted"].as_bool()), (Some("off_cpu"), Some(50_000_000), Some(true)));
    }

    #[test]
    fn invalid_and_torn_samples_carry_no_span() {
        let s = Sample::decode(&raw(CtxState::Invalid as u8, 0, &[])).unwrap();
        assert_eq!(s.span(), None);
        assert_eq!(s.header.unwrap().valid, 0);
        let t = Sample::decode(&raw(CtxState::Torn as u8, 1, &[1, 0])).unwrap();
        assert_eq!(t.span(), None);
        assert!(t.attrs.is_empty());
        assert_eq!(t.to_json(None)["trace_id"], Value::Null);
    }

    #[test]
    fn bad_events_are_rejected_with_reason() {
        assert!(Sample::decode(&[0; 10]).unwrap_err().contains("expected 688"));
        assert!(Sample::decode(&raw(42, 1, &[])).unwrap_err().contains("state 42"));
        let mut k = raw(CtxState::Valid as u8, 1, &[]);
        k[36] = 9;
        assert!(Sample::decode(&k).unwrap_err().contains("event kind 9"));
    }
}
