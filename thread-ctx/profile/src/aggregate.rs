//! The aggregate stage: one process's samples merged by kind x raw stack x
//! thread x span x attributes, before any address is named. Stacks are
//! interned (a repeated stack costs a hash lookup, no allocation), and every
//! address is handed out for naming once per window ([`Aggregate::take_unnamed`]),
//! while the process and its JIT code are still there. It never reads the
//! target: the agent runs it on its sampling thread.

use super::decode::StackLosses;
use super::js_key::JsKey;
use super::sample::{Attrs, Sample, SampleKind};
use super::symbolized::Observation;
use foldhash::{HashMap, HashSet};

/// Distinct entries kept; samples that would open more are counted in
/// [`Aggregate::dropped_samples`] so memory stays bounded.
pub const MAX_ENTRIES: usize = 200_000;
/// Sample times kept per window (16 bytes each); past this, entries only count
/// and [`Aggregate::times_complete`] turns false.
pub const MAX_OBSERVATIONS: usize = 2_000_000;

/// Which address space a stack address is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    User,
    Kernel,
}

/// Non-leaf frames are return addresses, one past the call: names come from
/// the byte before, so a call ending a function names the caller, not its neighbour.
pub fn lookup_addr(addr: u64, depth: usize) -> u64 {
    if depth == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryKey {
    pub kind: SampleKind,
    /// Index of the stack ([`Aggregate::stack`]).
    pub stack: u32,
    pub tid: u32,
    pub trace_id: Option<[u8; 16]>,
    pub span_id: Option<[u8; 8]>,
    pub attrs: Attrs,
}

#[derive(Debug, Clone)]
pub struct RawEntry {
    pub key: EntryKey,
    pub count: u64,
    pub weight: u64,
    pub times: Vec<Observation>,
}

/// Addresses, JS frames and threads first seen since the last [`Aggregate::take_unnamed`].
#[derive(Debug, Default, Clone)]
pub struct Unnamed {
    /// Lookup addresses (see [`lookup_addr`]), each once.
    pub user: Vec<u64>,
    pub kernel: Vec<u64>,
    /// JS frames the sampler read, each once.
    pub js: Vec<JsKey>,
    pub tids: Vec<u32>,
}

impl Unnamed {
    pub fn is_empty(&self) -> bool {
        self.user.is_empty() && self.kernel.is_empty() && self.js.is_empty() && self.tids.is_empty()
    }

    pub fn len(&self) -> usize {
        self.user.len() + self.kernel.len() + self.js.len() + self.tids.len()
    }
}

#[derive(Debug, Default)]
pub struct Aggregate {
    /// `[kernel frame count, user frame count, kernel frames..., user frames..., JS words...]`
    /// -> index in `stack_list` (the JS words: [`JsKey::push_words`]).
    stacks: HashMap<Box<[u64]>, u32>,
    stack_list: Vec<Box<[u64]>>,
    index: HashMap<EntryKey, u32>,
    entries: Vec<RawEntry>,
    seen: HashSet<(Space, u64)>,
    seen_js: HashSet<JsKey>,
    tids: HashSet<u32>,
    unnamed: Unnamed,
    observations: usize,
    times_dropped: bool,
    scratch: Vec<u64>,
    /// Samples not kept because [`MAX_ENTRIES`] distinct entries existed already.
    pub dropped_samples: u64,
    /// The process samples its allocations (it published its sampling interval): its window
    /// has an allocation profile even without an allocation sample in it.
    pub allocations_on: bool,
    /// Samples without the stacks asked for.
    pub losses: StackLosses,
}

impl Aggregate {
    pub fn new() -> Aggregate {
        Aggregate::default()
    }

    /// Samples aggregated (kept ones).
    pub fn sample_count(&self) -> u64 {
        self.entries.iter().map(|e| e.count).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.dropped_samples == 0
    }

    pub fn entries(&self) -> &[RawEntry] {
        &self.entries
    }

    /// Every entry's `times` holds all its samples.
    pub fn times_complete(&self) -> bool {
        !self.times_dropped
    }

    /// A stack by index: (kernel frames, user frames), leaf first.
    pub fn stack(&self, id: u32) -> (&[u64], &[u64]) {
        let s = &self.stack_list[id as usize];
        let (k, u) = (s[0] as usize, s[1] as usize);
        (&s[2..2 + k], &s[2 + k..2 + k + u])
    }

    /// The JS frames of a stack, by their depth in its user stack.
    pub fn js_keys(&self, id: u32) -> Vec<JsKey> {
        let s = &self.stack_list[id as usize];
        let (k, u) = (s[0] as usize, s[1] as usize);
        JsKey::from_words(&s[2 + k + u..], &s[2 + k..2 + k + u])
    }

    pub fn add(&mut self, s: &Sample) {
        self.scratch.clear();
        self.scratch.push(s.kernel_stack.len() as u64);
        self.scratch.push(s.user_stack.len() as u64);
        self.scratch.extend_from_slice(s.kernel_stack);
        self.scratch.extend_from_slice(s.user_stack);
        JsKey::push_words(s.js_frames, s.leaf_words, &mut self.scratch);
        let stack = match self.stacks.get(self.scratch.as_slice()) {
            Some(&id) => id,
            None => {
                if self.entries.len() >= MAX_ENTRIES {
                    self.dropped_samples += 1;
                    return;
                }
                self.intern_stack()
            }
        };
        let key = EntryKey { kind: s.kind, stack, tid: s.tid, trace_id: s.trace_id, span_id: s.span_id, attrs: s.attrs.clone() };
        let observation = self.observe(s);
        if let Some(&i) = self.index.get(&key) {
            let e = &mut self.entries[i as usize];
            e.count += 1;
            e.weight += s.weight;
            e.times.extend(observation);
            return;
        }
        if self.entries.len() >= MAX_ENTRIES {
            self.dropped_samples += 1;
            return;
        }
        if self.tids.insert(s.tid) {
            self.unnamed.tids.push(s.tid);
        }
        self.index.insert(key.clone(), self.entries.len() as u32);
        self.entries.push(RawEntry { key, count: 1, weight: s.weight, times: observation.into_iter().collect() });
    }

    fn intern_stack(&mut self) -> u32 {
        let id = self.stack_list.len() as u32;
        let stack: Box<[u64]> = self.scratch.as_slice().into();
        let (k, u) = (stack[0] as usize, stack[1] as usize);
        for key in JsKey::from_words(&stack[2 + k + u..], &stack[2 + k..2 + k + u]) {
            if self.seen_js.insert(key) {
                self.unnamed.js.push(key);
            }
        }
        for (space, frames) in [(Space::Kernel, &stack[2..2 + k]), (Space::User, &stack[2 + k..2 + k + u])] {
            for (depth, &addr) in frames.iter().enumerate() {
                let lookup = lookup_addr(addr, depth);
                if self.seen.insert((space, lookup)) {
                    match space {
                        Space::User => self.unnamed.user.push(lookup),
                        Space::Kernel => self.unnamed.kernel.push(lookup),
                    }
                }
            }
        }
        self.stacks.insert(stack.clone(), id);
        self.stack_list.push(stack);
        id
    }

    fn observe(&mut self, s: &Sample) -> Option<Observation> {
        if self.observations >= MAX_OBSERVATIONS {
            self.times_dropped = true;
            return None;
        }
        self.observations += 1;
        Some(Observation { time_ns: s.time_ns, weight: s.weight })
    }

    /// Addresses and threads waiting to be named.
    pub fn unnamed_len(&self) -> usize {
        self.unnamed.len()
    }

    /// Addresses and threads first seen since the last call, for naming now.
    pub fn take_unnamed(&mut self) -> Unnamed {
        std::mem::take(&mut self.unnamed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(tid: u32, user: &[u64], span: u8) -> Sample<'_> {
        Sample {
            kind: SampleKind::Cpu,
            time_ns: 1,
            tid,
            trace_id: Some([span; 16]),
            span_id: Some([span; 8]),
            flags: 1,
            attrs: Attrs::from([("http.route".to_string(), "/a".to_string())]),
            ctx_state: thread_ctx_sampler::CtxState::Valid,
            user_stack: user,
            kernel_stack: &[],
            js_frames: &[],
            leaf_words: &[],
            weight: 10,
        }
    }

    #[test]
    fn samples_merge_by_stack_thread_span_and_addresses_are_named_once() {
        let mut a = Aggregate::new();
        a.add(&sample(1, &[0x10, 0x21], 1));
        a.add(&sample(1, &[0x10, 0x21], 1));
        a.add(&sample(1, &[0x10, 0x21], 2));
        a.add(&sample(2, &[0x10, 0x31], 1));
        assert_eq!(a.entries().len(), 3);
        assert_eq!((a.entries()[0].count, a.entries()[0].weight, a.entries()[0].times.len()), (2, 20, 2));
        let u = a.take_unnamed();
        assert_eq!(u.user, vec![0x10, 0x20, 0x30], "return addresses are looked up a byte before, each once");
        assert_eq!(u.tids, vec![1, 2]);
        a.add(&sample(3, &[0x10, 0x21], 1));
        let u = a.take_unnamed();
        assert!(u.user.is_empty() && u.tids == vec![3]);
        assert_eq!(a.stack(a.entries()[0].key.stack), (&[][..], &[0x10, 0x21][..]));
    }
}
