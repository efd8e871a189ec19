//! A symbolized stack frame and how it is named in flame graphs.

/// Where a frame's name came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameKind {
    /// ELF symbol of the executable or a shared library.
    Native,
    /// V8 perf map entry (JIT-compiled JS, or a V8 stub/builtin logged there).
    Js,
    /// Kernel symbol (kallsyms).
    Kernel,
    /// No symbol: named after its mapping.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    pub kind: FrameKind,
    /// Function name (demangled for native frames); for Unknown, a bracketed mapping name.
    pub name: String,
    /// JS: the script path or URL; native: the ELF object's path; kernel: None.
    pub file: Option<String>,
    /// JS: the function's line in its script.
    pub line: Option<u32>,
    /// JS: the function's column in its script.
    pub column: Option<u32>,
}

impl Frame {
    pub fn unknown(name: String, file: Option<String>) -> Self {
        Frame { kind: FrameKind::Unknown, name, file, line: None, column: None }
    }

    /// Name for folded stacks / SVG: JS frames carry their location, and the
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

    /// Short label for summary tables.
    pub fn short_name(&self) -> String {
        match (self.kind, &self.file, self.line) {
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
        let js = Frame { kind: FrameKind::Js, name: "burn".into(), file: Some("/app/a.js".into()), line: Some(3), column: Some(9) };
        assert_eq!(js.flame_name(), "burn /app/a.js:3_[j]");
        assert_eq!(js.short_name(), "burn (a.js:3)");
        let k = Frame { kind: FrameKind::Kernel, name: "do_syscall_64".into(), file: None, line: None, column: None };
        assert_eq!(k.flame_name(), "do_syscall_64_[k]");
        let odd = Frame::unknown("a;b\nc".into(), None);
        assert_eq!(odd.flame_name(), "a:b:c");
    }
}
