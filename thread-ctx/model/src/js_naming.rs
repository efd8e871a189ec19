//! How a profile's JS frames were named, counted once per CPU sample they are in: what the
//! agent's status line says (a frame named once and sampled a thousand times counts a thousand).

use std::collections::BTreeMap;

/// Why a frame in V8's generated code has no name: the short labels the status line prints.
pub mod why {
    /// The sampler sent no slots of the frame (past the JS frames it reads per sample, or a
    /// frame whose slots held no JSFunction), and no perf map or jitdump names its pc.
    pub const NOT_READ: &str = "not read by the sampler";
    /// The process's V8 is not read (no `v8dbg_*` layout), and it writes no perf map or jitdump.
    pub const NO_SOURCE: &str = "no V8 layout, perf map or jitdump";
}

/// JS frames of a profile's CPU samples, by how they were named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsNaming {
    /// Named from the process's V8 heap (function, script, line).
    pub from_heap: u64,
    /// Named from V8's perf map or jitdump: the heap did not name them, or is not read.
    pub from_perf_map: u64,
    /// In V8's generated code and named by nothing, by why: a [`why`] label, or the heap
    /// reader's miss (`no_code`, `code_mismatch`, `fault`, ...).
    pub unnamed: BTreeMap<&'static str, u64>,
}

impl JsNaming {
    pub fn named(&self) -> u64 {
        self.from_heap + self.from_perf_map
    }

    pub fn unnamed_total(&self) -> u64 {
        self.unnamed.values().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.named() + self.unnamed_total() == 0
    }

    /// Adds `other` counted `times` over (a stack's frames, once per sample of it).
    pub fn add(&mut self, other: &JsNaming, times: u64) {
        self.from_heap += other.from_heap * times;
        self.from_perf_map += other.from_perf_map * times;
        for (why, n) in &other.unnamed {
            *self.unnamed.entry(why).or_default() += n * times;
        }
    }
}

impl std::fmt::Display for JsNaming {
    /// `1200 named (1150 from V8 heaps, 50 from perf maps), 30 unnamed (20 not read by the sampler, 10 no_code)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} named ({} from V8 heaps, {} from perf maps), {} unnamed",
            self.named(),
            self.from_heap,
            self.from_perf_map,
            self.unnamed_total()
        )?;
        if !self.unnamed.is_empty() {
            let each: Vec<String> = self.unnamed.iter().map(|(why, n)| format!("{n} {why}")).collect();
            write!(f, " ({})", each.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_counts_once_per_sample_and_says_why() {
        let stack = JsNaming { from_heap: 3, from_perf_map: 1, unnamed: [(why::NOT_READ, 2)].into() };
        let mut window = JsNaming::default();
        window.add(&stack, 10);
        window.add(&JsNaming { unnamed: [("no_code", 1)].into(), ..Default::default() }, 4);
        assert_eq!(window.to_string(), "40 named (30 from V8 heaps, 10 from perf maps), 24 unnamed (4 no_code, 20 not read by the sampler)");
        assert!(JsNaming::default().is_empty());
    }
}
