//! The decode stage: one sampler event of a tracked process becomes a
//! [`Sample`]: its ids (or why it has none), its record's attributes named
//! through the process's key map (decoded once per distinct attrs-data), its
//! kind and weight (the one place an allocation sample is scaled to the bytes
//! it stands for), and its stacks (borrowed from the event, not copied; those
//! the kernel could not take are counted). It never reads the target: the
//! agent runs it on its sampling thread.

use super::sample::{Attrs, Sample, SampleKind};
use foldhash::{HashMap, HashMapExt};
use thread_ctx_discovery::ctx_record::decode_attrs;
use thread_ctx_sampler::alloc_probe::{unbiased_bytes, DEFAULT_INTERVAL};
use thread_ctx_sampler::{Event, EventKind, SamplerOptions};

/// Distinct attrs-data decodings kept per process; past this the cache starts over (counted).
const MAX_CACHED_ATTRS: usize = 4096;

/// Samples whose stack the kernel could not take (bpf_get_stack failed).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StackLosses {
    pub user: u64,
    pub kernel: u64,
}

impl std::ops::AddAssign for StackLosses {
    fn add_assign(&mut self, other: StackLosses) {
        self.user += other.user;
        self.kernel += other.kernel;
    }
}

pub struct Decoder {
    key_map: Option<Vec<String>>,
    user_stacks: bool,
    kernel_stacks: bool,
    cpu_period_ns: u64,
    /// V8's mean heap sampling interval in the process (bytes): scales allocation samples.
    alloc_interval: u64,
    attrs: HashMap<Vec<u8>, Attrs>,
    no_attrs: Attrs,
    /// Samples without the stacks asked for, since the last [`Decoder::take_losses`].
    losses: StackLosses,
    /// Decoded attribute sets dropped from the cache (it starts over past its bound).
    pub attrs_evicted: u64,
}

impl Decoder {
    pub fn new(key_map: Option<&[String]>, opts: &SamplerOptions) -> Decoder {
        Decoder {
            key_map: key_map.map(<[String]>::to_vec),
            user_stacks: opts.user_stacks,
            kernel_stacks: opts.kernel_stacks,
            cpu_period_ns: opts.cpu_period_ns(),
            alloc_interval: DEFAULT_INTERVAL,
            attrs: HashMap::new(),
            no_attrs: Attrs::from([]),
            losses: StackLosses::default(),
            attrs_evicted: 0,
        }
    }

    /// A newer key map (the process registered attribute keys since).
    pub fn set_key_map(&mut self, key_map: Option<&[String]>) {
        if self.key_map.as_deref() != key_map {
            self.key_map = key_map.map(<[String]>::to_vec);
            self.attrs.clear();
        }
    }

    /// Decoded attribute sets cached now.
    pub fn attrs_cached(&self) -> usize {
        self.attrs.len()
    }

    pub fn key_map(&self) -> Option<&[String]> {
        self.key_map.as_deref()
    }

    /// The mean sampling interval the process publishes (None: the package's default).
    pub fn set_alloc_interval(&mut self, interval: Option<u64>) {
        self.alloc_interval = interval.unwrap_or(DEFAULT_INTERVAL);
    }

    pub fn alloc_interval(&self) -> u64 {
        self.alloc_interval
    }

    pub fn take_losses(&mut self) -> StackLosses {
        std::mem::take(&mut self.losses)
    }

    /// The event as a sample (borrowing its stacks).
    pub fn decode<'e>(&mut self, e: &'e Event) -> Sample<'e> {
        let span = e.span();
        let user_stack = if self.user_stacks { stack(&e.user_stack, &mut self.losses.user, false) } else { &[] };
        let (js_frames, leaf_words): (&[_], &[_]) = if self.user_stacks { (&e.js_frames, &e.leaf_words) } else { (&[], &[]) };
        let kernel_stack = if self.kernel_stacks { stack(&e.kernel_stack, &mut self.losses.kernel, true) } else { &[] };
        let (trace_id, span_id, flags, attrs) = match span {
            Some((t, s, f)) => {
                let (t, s) = Sample::ids_from_record(t, s);
                (t, s, f, self.attrs_of(&e.attrs))
            }
            None => (None, None, 0, self.no_attrs.clone()),
        };
        let (kind, weight) = match (e.kind, e.preempted) {
            (EventKind::Cpu, _) => (SampleKind::Cpu, self.cpu_period_ns),
            (EventKind::OffCpu, false) => (SampleKind::Blocked, e.value),
            (EventKind::OffCpu, true) => (SampleKind::Preempted, e.value),
            (EventKind::Alloc, _) => (SampleKind::Alloc, unbiased_bytes(e.value, self.alloc_interval)),
        };
        Sample {
            kind,
            time_ns: e.time_ns,
            tid: e.tid,
            trace_id,
            span_id,
            flags,
            attrs,
            ctx_state: e.state,
            user_stack,
            kernel_stack,
            js_frames,
            leaf_words,
            weight,
        }
    }

    /// The attrs-data as (key, value) pairs sorted by key; a key index missing from the key map is named `attr.N`.
    fn attrs_of(&mut self, raw: &[u8]) -> Attrs {
        if raw.is_empty() {
            return self.no_attrs.clone();
        }
        if let Some(a) = self.attrs.get(raw) {
            return a.clone();
        }
        let (decoded, _) = decode_attrs(raw, self.key_map.as_deref());
        let mut pairs: Vec<(String, String)> =
            decoded.into_iter().map(|a| (a.key.unwrap_or_else(|| format!("attr.{}", a.key_index)), a.value)).collect();
        pairs.sort();
        let attrs: Attrs = pairs.into();
        if self.attrs.len() >= MAX_CACHED_ATTRS {
            self.attrs_evicted += self.attrs.len() as u64;
            self.attrs.clear();
        }
        self.attrs.insert(raw.to_vec(), attrs.clone());
        attrs
    }
}

fn stack<'e>(stack: &'e Result<Vec<u64>, i32>, lost: &mut u64, kernel: bool) -> &'e [u64] {
    match stack {
        Ok(s) => s,
        // A kernel stack of a sample taken in user mode is empty (-EFAULT): not a loss.
        Err(e) if kernel && -e == libc::EFAULT => &[],
        Err(_) => {
            *lost += 1;
            &[]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thread_ctx_discovery::ctx_record::Header;
    use thread_ctx_sampler::CtxState;

    fn event(attrs: &[u8]) -> Event {
        let mut h = [0u8; thread_ctx_discovery::ctx_record::HEADER_SIZE];
        h[..16].fill(1);
        h[16..24].fill(2);
        (h[24], h[25]) = (1, 1);
        h[26..28].copy_from_slice(&(attrs.len() as u16).to_ne_bytes());
        Event {
            kind: EventKind::Cpu,
            time_ns: 5,
            pid: 1,
            tid: 2,
            cpu: 0,
            state: CtxState::Valid,
            record_addr: 0x1000,
            header: Some(Header::parse(&h)),
            attrs: attrs.to_vec(),
            user_stack: Ok(vec![0x10, 0x20]),
            kernel_stack: Err(-libc::EFAULT),
            js_frames: vec![],
            leaf_words: vec![],
            value: 0,
            preempted: false,
        }
    }

    #[test]
    fn attributes_are_named_sorted_and_decoded_once() {
        let opts = SamplerOptions { hz: 100, user_stacks: true, kernel_stacks: true, off_cpu: false, alloc: false };
        let mut d = Decoder::new(Some(&["http.route".to_string()]), &opts);
        let raw = [7, 1, b'x', 0, 2, b'/', b'a'];
        let (ea, eb) = (event(&raw), event(&raw));
        let (a, b) = (d.decode(&ea), d.decode(&eb));
        assert_eq!(&*a.attrs, &[("attr.7".to_string(), "x".to_string()), ("http.route".to_string(), "/a".to_string())]);
        assert!(Attrs::ptr_eq(&a.attrs, &b.attrs), "one decoding shared by both samples");
        assert_eq!((a.trace_id, a.span_id, a.weight, a.user_stack), (Some([1; 16]), Some([2; 8]), 10_000_000, &[0x10, 0x20][..]));
        assert_eq!(a.ctx_state, CtxState::Valid);
        assert_eq!(d.take_losses(), StackLosses::default(), "a user-mode sample's missing kernel stack is no loss");
    }

    #[test]
    fn an_allocation_weighs_the_bytes_it_stands_for_at_the_published_interval() {
        let opts = SamplerOptions { hz: 100, user_stacks: true, kernel_stacks: false, off_cpu: false, alloc: true };
        let mut d = Decoder::new(None, &opts);
        let alloc = |size: u64| Event { kind: EventKind::Alloc, value: size, ..event(&[]) };
        let e = alloc(2048);
        let a = d.decode(&e).weight;
        assert_eq!((d.decode(&e).kind, a), (SampleKind::Alloc, unbiased_bytes(2048, DEFAULT_INTERVAL)));
        d.set_alloc_interval(Some(16 * 1024));
        assert_eq!(d.decode(&e).weight, unbiased_bytes(2048, 16 * 1024));
        assert!(d.decode(&e).weight < a, "a shorter interval: each sample stands for fewer bytes");
    }
}
