//! A symbolized stack frame and how it is named in flame graphs and tables.

/// Where a frame's name came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameKind {
    /// ELF symbol of the executable or a shared library.
    Native,
    /// V8 jitdump or perf map entry (JIT-compiled JS, or a V8 stub/builtin logged there).
    Js,
    /// Kernel symbol (kallsyms).
    Kernel,
    /// No symbol: named after its mapping.
    Unknown,
}

/// Where in its source a JS frame was: the position of the sampled
/// instruction (for a caller frame, of the call), from V8's jitdump debug info.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourcePos {
    /// 1-based.
    pub line: u32,
    /// 1-based; None when V8 gave none.
    pub column: Option<u32>,
}

/// Where a source-mapped JS frame is in the generated script V8 ran (the
/// frame's own file and lines then name the original source).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Generated {
    pub file: String,
    /// Where the function starts in the generated script.
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// The sampled position in the generated script.
    pub pos: Option<SourcePos>,
}

/// The V8 tier whose code a JS frame ran in, as V8's heap says (the code object at its pc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JsTier {
    /// Ignition, the bytecode interpreter.
    Interpreted,
    /// Sparkplug, the baseline compiler.
    Baseline,
    Maglev,
    Turbofan,
}

impl JsTier {
    /// Its name in `record --format jsonl --frames` lines.
    pub fn name(self) -> &'static str {
        match self {
            JsTier::Interpreted => "interpreted",
            JsTier::Baseline => "baseline",
            JsTier::Maglev => "maglev",
            JsTier::Turbofan => "turbofan",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    pub kind: FrameKind,
    /// Function name (demangled for native frames); for Unknown, a bracketed mapping name.
    pub name: String,
    /// JS: the script path or URL; native: the ELF object's path; kernel: None.
    pub file: Option<String>,
    /// JS: the line where the function starts in its script.
    pub line: Option<u32>,
    /// JS: the column where the function starts.
    pub column: Option<u32>,
    /// JS with line-level info: the sampled position inside the function.
    pub pos: Option<SourcePos>,
    /// JS renamed by its script's source map: the generated position.
    pub generated: Option<Box<Generated>>,
    /// JS named from V8's heap: the tier its code ran in (None: named otherwise, or not said).
    pub tier: Option<JsTier>,
}

impl Frame {
    pub fn unknown(name: String, file: Option<String>) -> Self {
        Frame { kind: FrameKind::Unknown, name, file, line: None, column: None, pos: None, generated: None, tier: None }
    }

    pub fn native(name: &str, file: Option<&str>) -> Self {
        Frame {
            kind: FrameKind::Native,
            name: name.into(),
            file: file.map(str::to_string),
            line: None,
            column: None,
            pos: None,
            generated: None,
            tier: None,
        }
    }

    pub fn kernel(name: &str) -> Self {
        Frame { kind: FrameKind::Kernel, name: name.into(), file: None, line: None, column: None, pos: None, generated: None, tier: None }
    }

    /// A JS function starting at `line`:`column` of `file`, position unknown.
    pub fn js(name: &str, file: Option<&str>, line: Option<u32>, column: Option<u32>) -> Self {
        Frame { kind: FrameKind::Js, name: name.into(), file: file.map(str::to_string), line, column, pos: None, generated: None, tier: None }
    }

    /// The line to show for this frame: where it was sampled, else where its function starts.
    pub fn source_line(&self) -> Option<u32> {
        self.pos.map(|p| p.line).or(self.line)
    }

    /// Name for folded stacks / SVG: JS frames carry their function's
    /// location (a flame graph's boxes are functions, not lines), and the
    /// FlameGraph annotations (`_[j]` JIT, `_[k]` kernel) pick the colours.
    /// Folded stacks reserve ';' and newlines, so those are replaced.
    pub fn flame_name(&self) -> String {
        let s = match self.kind {
            FrameKind::Js => match (&self.file, self.line) {
                (Some(f), Some(l)) => format!("{} {f}:{l}_[j]", self.name),
                (Some(f), None) => format!("{} {f}_[j]", self.name),
                _ => format!("{}_[j]", self.name),
            },
            FrameKind::Kernel => format!("{}_[k]", self.name),
            FrameKind::Native | FrameKind::Unknown => self.name.clone(),
        };
        s.replace([';', '\n', '\r'], ":")
    }

    /// Short label for summary tables: a JS frame with its sampled line when known.
    pub fn short_name(&self) -> String {
        let base = self.file.as_deref().map(|f| f.rsplit('/').next().unwrap_or(f));
        self.short_name_in(base)
    }

    /// [`Frame::short_name`] with the file shown as `file` (e.g. from [`unique_suffixes`]).
    pub fn short_name_in(&self, file: Option<&str>) -> String {
        match (self.kind, file, self.source_line()) {
            (FrameKind::Js, Some(f), Some(l)) => format!("{} ({f}:{l})", self.name),
            _ => self.name.clone(),
        }
    }

    /// The name the system ran: a source-mapped frame's generated script and line
    /// (pprof and OTLP functions keep it beside the original name), else the name.
    pub fn system_name(&self) -> String {
        match &self.generated {
            Some(g) => match g.line {
                Some(l) => format!("{} ({}:{l})", self.name, g.file),
                None => format!("{} ({})", self.name, g.file),
            },
            None => self.name.clone(),
        }
    }
}

/// For each path, its shortest suffix of whole components that no other path
/// ends with: enough to tell two `index.js` apart (`router/index.js`,
/// `express/index.js`), a basename when that is unique.
pub fn unique_suffixes<'a>(paths: impl IntoIterator<Item = &'a str>) -> std::collections::HashMap<&'a str, &'a str> {
    // Only paths with the same basename can share a longer suffix: compare within those groups.
    let mut by_base: std::collections::HashMap<&str, Vec<&str>> = std::collections::HashMap::new();
    for p in paths {
        let group = by_base.entry(p.rsplit('/').next().unwrap_or(p)).or_default();
        if !group.contains(&p) {
            group.push(p);
        }
    }
    // The last `n` components of `p` (all of it when it has fewer).
    let suffix = |p: &'a str, n: usize| -> &'a str { p.rmatch_indices('/').nth(n - 1).map_or(p, |(i, _)| &p[i + 1..]) };
    let ends_with_component = |o: &str, s: &str| o.ends_with(s) && (o.len() == s.len() || o.as_bytes()[o.len() - s.len() - 1] == b'/');
    let mut out = std::collections::HashMap::new();
    for group in by_base.values() {
        for &p in group {
            let depth = p.matches('/').count() + 1;
            let unique = (1..=depth).map(|n| suffix(p, n)).find(|s| group.iter().filter(|o| ends_with_component(o, s)).count() == 1);
            out.insert(p, unique.unwrap_or(p));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flame_names_annotate_js_and_kernel_and_escape_separators() {
        let js = Frame::js("burn", Some("/app/a.js"), Some(3), Some(9));
        assert_eq!(js.flame_name(), "burn /app/a.js:3_[j]");
        assert_eq!(js.short_name(), "burn (a.js:3)");
        let sampled = Frame { pos: Some(SourcePos { line: 7, column: Some(5) }), ..js };
        assert_eq!(sampled.flame_name(), "burn /app/a.js:3_[j]", "flame graph boxes stay functions");
        assert_eq!(sampled.short_name(), "burn (a.js:7)", "tables show the sampled line");
        assert_eq!(Frame::kernel("do_syscall_64").flame_name(), "do_syscall_64_[k]");
        let odd = Frame::unknown("a;b\nc".into(), None);
        assert_eq!(odd.flame_name(), "a:b:c");
    }

    #[test]
    fn suffixes_tell_files_of_one_name_apart() {
        let paths = [
            "/app/node_modules/express/index.js",
            "/app/node_modules/router/index.js",
            "/app/src/heavy.ts",
            "/app/lib/a/index.js",
            "/app/lib/b/a/index.js",
        ];
        let s = unique_suffixes(paths);
        assert_eq!(s["/app/src/heavy.ts"], "heavy.ts");
        assert_eq!(s["/app/node_modules/express/index.js"], "express/index.js");
        assert_eq!(s["/app/node_modules/router/index.js"], "router/index.js");
        assert_eq!(s["/app/lib/a/index.js"], "lib/a/index.js", "b/a/index.js ends with a/index.js too");
        assert_eq!(s["/app/lib/b/a/index.js"], "b/a/index.js");
        let same = unique_suffixes(["x/a.js", "x/a.js"]);
        assert_eq!(same["x/a.js"], "a.js");
    }
}
