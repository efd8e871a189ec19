//! Native (C++) function names as tables and flame graphs show them: without their parameter list
//! and return type, as `perf report` prints them (it demangles without parameters unless asked
//! to be verbose). A V8 template function's demangled name runs to hundreds of characters, most
//! of them its parameters' types; the name, its class and its template arguments stay. pprof and
//! OTLP keep the full name.

use std::borrow::Cow;

/// `name` without the parameter list of the function it names (and what follows it: `const`,
/// `[clone .cold]`), and without the return type a template function's name starts with.
/// Anything that is not such a name (C, Rust, a JS or kernel frame) comes back as it is.
pub fn short_native_name(name: &str) -> Cow<'_, str> {
    let Some(params) = parameter_list(name) else {
        return Cow::Borrowed(name);
    };
    let head = &name[..params];
    let start = return_type_end(head).unwrap_or(0);
    Cow::Owned(head[start..].to_string())
}

/// Nesting of `<>`, `()`, `[]` and `{}` at one place in a name.
#[derive(Default)]
struct Depth {
    angle: usize,
    paren: usize,
    other: usize,
}

impl Depth {
    fn top(&self) -> bool {
        self.angle == 0 && self.paren == 0 && self.other == 0
    }

    fn step(&mut self, c: u8) {
        match c {
            b'<' => self.angle += 1,
            b'>' => self.angle = self.angle.saturating_sub(1),
            b'(' => self.paren += 1,
            b')' => self.paren = self.paren.saturating_sub(1),
            b'[' | b'{' => self.other += 1,
            b']' | b'}' => self.other = self.other.saturating_sub(1),
            _ => {}
        }
    }
}

/// The length of an operator's symbol at `at` (`<<` of `operator<<`, `()` of `operator()`), 0 when
/// `at` does not follow the word `operator`: its brackets are not brackets.
fn operator_symbol(b: &[u8], at: usize) -> usize {
    let word = b[..at].ends_with(b"operator") && (at == 8 || !(b[at - 9].is_ascii_alphanumeric() || b[at - 9] == b'_'));
    if !word {
        return 0;
    }
    let rest = &b[at..];
    if rest.starts_with(b"()") || rest.starts_with(b"[]") {
        return 2;
    }
    rest.iter().take_while(|c| b"<>=!+-*/%&|^~,".contains(c)).count()
}

/// Each byte of `name` with the depth before it, operator symbols stepped over.
fn walk(name: &[u8], mut at: impl FnMut(usize, &Depth) -> bool) {
    let mut depth = Depth::default();
    let mut i = 0;
    while i < name.len() {
        let symbol = operator_symbol(name, i);
        if symbol > 0 {
            i += symbol;
            continue;
        }
        if !at(i, &depth) {
            return;
        }
        depth.step(name[i]);
        i += 1;
    }
}

/// Where the function's parameter list starts: the first `(` at the top level that is not part
/// of a scope name (`(anonymous namespace)::`, `Env::RunCleanup()::{lambda…}`) and does not
/// start the name.
fn parameter_list(name: &str) -> Option<usize> {
    let b = name.as_bytes();
    let mut found = None;
    walk(b, |i, depth| {
        if b[i] == b'(' && depth.top() && i > 0 {
            let scope = matching_paren(b, i).is_none_or(|close| name[close + 1..].starts_with("::"));
            if !scope {
                found = Some(i);
                return false;
            }
        }
        true
    });
    found
}

/// The `)` that closes the `(` at `open`.
fn matching_paren(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `head` ends in the word `operator` or in an operator's name (`operator<`): a space after it is
/// part of the name.
fn names_an_operator(head: &[u8]) -> bool {
    let symbols = head.iter().rev().take_while(|c| b"<>=!+-*/%&|^~,()[]".contains(c)).count();
    head[..head.len() - symbols].ends_with(b"operator")
}

/// Where the name starts after a return type (`void `, `v8::internal::Handle<…> `): past the last
/// space at the top level, unless that space is part of the name (`operator new`, `operator bool`).
fn return_type_end(head: &str) -> Option<usize> {
    let b = head.as_bytes();
    let mut last = None;
    walk(b, |i, depth| {
        if b[i] == b' ' && depth.top() && !names_an_operator(&b[..i]) {
            last = Some(i + 1);
        }
        true
    });
    last
}

#[cfg(test)]
mod tests {
    use super::short_native_name;

    #[test]
    fn parameters_and_return_types_go_the_name_and_its_template_arguments_stay() {
        let cases = [
            ("v8::internal::Heap::Scavenge()", "v8::internal::Heap::Scavenge"),
            (
                "void v8::internal::BodyDescriptorBase::IteratePointers<v8::internal::YoungGenerationMarkingVisitor<(v8::internal::YoungGenerationMarkingVisitationMode)0> >(v8::internal::Tagged<v8::internal::HeapObject>, int, int, v8::internal::YoungGenerationMarkingVisitor<(v8::internal::YoungGenerationMarkingVisitationMode)0>*)",
                "v8::internal::BodyDescriptorBase::IteratePointers<v8::internal::YoungGenerationMarkingVisitor<(v8::internal::YoungGenerationMarkingVisitationMode)0> >",
            ),
            ("v8::internal::(anonymous namespace)::Invoke(v8::internal::Isolate*, v8::internal::(anonymous namespace)::InvokeParams const&)", "v8::internal::(anonymous namespace)::Invoke"),
            ("std::vector<int, std::allocator<int> >::push_back(int const&)", "std::vector<int, std::allocator<int> >::push_back"),
            ("node::Foo::Bar() const", "node::Foo::Bar"),
            ("std::function<void ()>::operator()() const", "std::function<void ()>::operator()"),
            ("bool std::operator< <char>(std::basic_string<char> const&, char const*)", "std::operator< <char>"),
            ("v8::internal::Foo::operator<<(int)", "v8::internal::Foo::operator<<"),
            ("operator new(unsigned long)", "operator new"),
            ("node::Env::RunCleanup()::{lambda(void*)#1}::operator()(void*) const", "node::Env::RunCleanup()::{lambda(void*)#1}::operator()"),
            ("foo(int) [clone .cold]", "foo"),
        ];
        for (full, short) in cases {
            assert_eq!(short_native_name(full), short, "{full}");
        }
    }

    #[test]
    fn names_that_are_not_cpp_functions_stay_as_they_are() {
        for name in ["uv_run", "__libc_start_main", "core::ptr::drop_in_place<alloc::vec::Vec<u8>>", "[anon:jit]", "(anonymous)", ""] {
            assert_eq!(short_native_name(name), name);
        }
    }
}
