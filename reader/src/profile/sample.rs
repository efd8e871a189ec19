//! One sample as the profile outputs take it: when, which thread, the span
//! context that thread had published, its stacks as raw addresses and how
//! much time it stands for.

use crate::ctx_record::Attr;

/// What a sample's weight measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SampleKind {
    /// A CPU sample: the thread was running this stack.
    Cpu,
    /// Off-CPU: the thread blocked here (sleep, I/O wait, lock, futex).
    Blocked,
    /// Off-CPU: the thread was preempted here while runnable (waited for a CPU).
    Preempted,
}

impl SampleKind {
    pub fn is_off_cpu(self) -> bool {
        self != SampleKind::Cpu
    }

    /// Value of the `off_cpu` pprof label and the flame graph's marker frame.
    pub fn off_cpu_label(self) -> Option<&'static str> {
        match self {
            SampleKind::Cpu => None,
            SampleKind::Blocked => Some("blocked"),
            SampleKind::Preempted => Some("preempted"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub kind: SampleKind,
    /// CLOCK_MONOTONIC ns (as the BPF program's bpf_ktime_get_ns).
    pub time_ns: u64,
    pub tid: u32,
    /// None when the thread had no valid record (or an all-zero trace id).
    pub trace_id: Option<[u8; 16]>,
    pub span_id: Option<[u8; 8]>,
    pub flags: u8,
    /// Record attributes with key names from the process context key map.
    pub attrs: Vec<(String, String)>,
    /// User stack, leaf first (frame 0 is the sampled instruction, the rest are return addresses).
    pub user_stack: Vec<u64>,
    /// Kernel stack, leaf first; empty unless kernel stacks were captured.
    pub kernel_stack: Vec<u64>,
    /// Time this sample stands for: the sampling period for CPU samples,
    /// the blocked time for off-CPU samples.
    pub weight_ns: u64,
}

impl Sample {
    /// Ids as the BPF program copies them: all-zero means "none".
    pub fn ids_from_record(trace_id: [u8; 16], span_id: [u8; 8]) -> (Option<[u8; 16]>, Option<[u8; 8]>) {
        let trace = (trace_id != [0; 16]).then_some(trace_id);
        let span = (span_id != [0; 8]).then_some(span_id);
        (trace, span)
    }

    /// Record attrs decoded by [`crate::ctx_record::decode_attrs`] as (key, value)
    /// pairs; a key index missing from the key map is named `attr.N`.
    pub fn attrs_from_record(attrs: &[Attr]) -> Vec<(String, String)> {
        attrs.iter().map(|a| (a.key.clone().unwrap_or_else(|| format!("attr.{}", a.key_index)), a.value.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_ids_mean_none_and_unknown_keys_get_an_index_name() {
        assert_eq!(Sample::ids_from_record([0; 16], [0; 8]), (None, None));
        assert_eq!(Sample::ids_from_record([1; 16], [2; 8]), (Some([1; 16]), Some([2; 8])));
        let attrs =
            [Attr { key_index: 0, key: Some("http.route".into()), value: "/users/:id".into() }, Attr { key_index: 7, key: None, value: "x".into() }];
        assert_eq!(
            Sample::attrs_from_record(&attrs),
            vec![("http.route".to_string(), "/users/:id".to_string()), ("attr.7".to_string(), "x".to_string())]
        );
    }
}
