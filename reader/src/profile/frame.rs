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
}

impl Frame {
    pub fn unknown(name: String, file: Option<String>) -> Self {
        Frame { kind: FrameKind::Unknown, name, file, line: None, column: None, pos: None }
    }

    pub fn native(name: &str, file: Option<&str>) -> Self {
        Frame { kind: FrameKind::Native, name: name.into(), file: file.map(str::to_string), line: None, column: None, pos: None }
    }

    pub fn kernel(name: &str) -> Self {
        Frame { kind: FrameKind::Kernel, name: name.into(), file: None, line: None, column: None, pos: None }
    }

    /// A JS function starting at `line`:`column` of `file`, position unknown.
    pub fn js(name: &str, file: Option<&str>, line: Option<u32>, column: Option<u32>) -> Self {
        Frame { kind: FrameKind::Js, name: name.into(), file: file.map(str::to_string), line, column, pos: None }
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
        match (self.kind, &self.file, self.source_line()) {
            (FrameKind::Js, Some(f), Some(l)) => {
                let base = f.rsplit('/').next().unwrap_or(f);
                format!("{} ({base}:{l})", self.name)
            }
            _ => self.name.clone(),
        }
    }
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
}
