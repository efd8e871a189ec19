//! One sample as the profile stages take it: when, which thread, the span
//! context that thread had published (or why it had none), its stacks as raw
//! addresses and what it weighs. Every kind of sample (CPU, off-CPU, and any
//! kind added later) is one [`SampleKind`] and travels the same path: decode,
//! aggregate, symbolize, then an output renders it by its [`Measure`].

use crate::{CtxState, JsFrameSlots};
use std::sync::Arc;

/// What a sample is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SampleKind {
    /// A CPU sample: the thread was running this stack.
    Cpu,
    /// Off-CPU: the thread blocked here (sleep, I/O wait, lock, futex).
    Blocked,
    /// Off-CPU: the thread was preempted here while runnable (waited for a CPU).
    Preempted,
    /// V8's sampling heap profiler sampled an allocation made here; the weight is the bytes
    /// the sample stands for (see `thread_ctx_sampler::alloc_probe::scale`).
    Alloc,
}

impl SampleKind {
    pub fn is_off_cpu(self) -> bool {
        self.measure() == Measure::OffCpu
    }

    pub fn is_cpu(self) -> bool {
        self == SampleKind::Cpu
    }

    pub fn is_alloc(self) -> bool {
        self == SampleKind::Alloc
    }

    /// The profile this kind of sample is counted in.
    pub fn measure(self) -> Measure {
        match self {
            SampleKind::Cpu => Measure::Cpu,
            SampleKind::Blocked | SampleKind::Preempted => Measure::OffCpu,
            SampleKind::Alloc => Measure::Alloc,
        }
    }

    /// Value of the `off_cpu` pprof label and the flame graph's marker frame.
    pub fn off_cpu_label(self) -> Option<&'static str> {
        match self {
            SampleKind::Cpu | SampleKind::Alloc => None,
            SampleKind::Blocked => Some("blocked"),
            SampleKind::Preempted => Some("preempted"),
        }
    }
}

/// What a profile's values measure. Each has a count (how many samples) and a
/// weight (what they stand for): time, or for allocations bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Measure {
    Cpu,
    OffCpu,
    Alloc,
}

/// An OTLP/pprof sample type: (type, unit).
pub type ValueType = (&'static str, &'static str);

impl Measure {
    pub const ALL: [Measure; 3] = [Measure::Cpu, Measure::OffCpu, Measure::Alloc];

    /// How many samples (or intervals) were taken.
    pub fn count_type(self) -> ValueType {
        match self {
            Measure::Cpu => ("samples", "count"),
            Measure::OffCpu => ("off_cpu_switches", "count"),
            Measure::Alloc => ("alloc_objects", "count"),
        }
    }

    /// What they weigh: the time they stand for.
    pub fn weight_type(self) -> ValueType {
        match self {
            Measure::Cpu => ("cpu", "nanoseconds"),
            Measure::OffCpu => ("off_cpu", "nanoseconds"),
            Measure::Alloc => ("alloc_space", "bytes"),
        }
    }

    /// The values an OTLP profile of this measure carries, one `Profile` each (the proto
    /// allows one sample type per profile): CPU samples count (the period gives the time),
    /// off-CPU intervals weigh their time, allocation samples go out twice (how many objects
    /// were sampled, and the bytes they stand for), as pprof's heap profiles have them.
    pub fn otlp_values(self) -> &'static [Value] {
        match self {
            Measure::Cpu => &[Value::Count],
            Measure::OffCpu => &[Value::Weight],
            Measure::Alloc => &[Value::Count, Value::Weight],
        }
    }

    /// The (type, unit) of one of its values.
    pub fn value_type(self, v: Value) -> ValueType {
        match v {
            Value::Count => self.count_type(),
            Value::Weight => self.weight_type(),
        }
    }

    /// The measure and value an OTLP or pprof sample type names, if it is one of ours.
    pub fn of_type(kind: &str) -> Option<(Measure, Value)> {
        Measure::ALL.into_iter().find_map(|m| [Value::Count, Value::Weight].into_iter().find(|v| m.value_type(*v).0 == kind).map(|v| (m, v)))
    }
}

/// Which of a measure's two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    Count,
    Weight,
}

/// A record's attributes, decoded once per distinct attrs-data and shared by every sample that carries them.
pub type Attrs = Arc<[(String, String)]>;

/// A sample lives while its event does: its stacks are the event's, borrowed (the aggregate
/// stage copies what it keeps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample<'e> {
    pub kind: SampleKind,
    /// CLOCK_MONOTONIC ns (as the BPF program's bpf_ktime_get_ns).
    pub time_ns: u64,
    pub tid: u32,
    /// None when the thread had no valid record (or an all-zero trace id).
    pub trace_id: Option<[u8; 16]>,
    pub span_id: Option<[u8; 8]>,
    pub flags: u8,
    /// Record attributes with key names from the process context key map, sorted by key.
    pub attrs: Attrs,
    /// What the sampler found reading the thread's record: `Valid` with a span, else why the
    /// sample has none (the summary says why).
    pub ctx_state: CtxState,
    /// User stack, leaf first (frame 0 is the sampled instruction, the rest are return addresses).
    pub user_stack: &'e [u64],
    /// Kernel stack, leaf first; empty unless kernel stacks were captured.
    pub kernel_stack: &'e [u64],
    /// What the sampler read of the user stack's JS frames (a node process whose V8 it walks).
    pub js_frames: &'e [JsFrameSlots],
    /// The words at the stack pointer, when the innermost JS frame's flags say they are there.
    pub leaf_words: &'e [u64],
    /// What this sample stands for, in its measure's weight unit: the sampling period for CPU
    /// samples, the time switched out for off-CPU ones (ns), the unbiased bytes for allocations.
    pub weight: u64,
}

impl Sample<'_> {
    /// Ids as the BPF program copies them: all-zero means "none".
    pub fn ids_from_record(trace_id: [u8; 16], span_id: [u8; 8]) -> (Option<[u8; 16]>, Option<[u8; 8]>) {
        let trace = (trace_id != [0; 16]).then_some(trace_id);
        let span = (span_id != [0; 8]).then_some(span_id);
        (trace, span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_ids_mean_none() {
        assert_eq!(Sample::ids_from_record([0; 16], [0; 8]), (None, None));
        assert_eq!(Sample::ids_from_record([1; 16], [2; 8]), (Some([1; 16]), Some([2; 8])));
    }

    #[test]
    fn kinds_map_to_their_measure() {
        assert_eq!(SampleKind::Cpu.measure(), Measure::Cpu);
        assert!(SampleKind::Blocked.is_off_cpu() && SampleKind::Preempted.is_off_cpu() && !SampleKind::Cpu.is_off_cpu());
        assert_eq!(Measure::OffCpu.weight_type(), ("off_cpu", "nanoseconds"));
        assert_eq!(SampleKind::Alloc.measure(), Measure::Alloc);
        assert!(SampleKind::Alloc.is_alloc() && !SampleKind::Alloc.is_cpu() && !SampleKind::Alloc.is_off_cpu());
        assert_eq!(Measure::of_type("alloc_space"), Some((Measure::Alloc, Value::Weight)));
        assert_eq!(Measure::of_type("alloc_objects"), Some((Measure::Alloc, Value::Count)));
        assert_eq!(Measure::of_type("samples"), Some((Measure::Cpu, Value::Count)));
    }
}
