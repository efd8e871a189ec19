//! Text a target chose (paths, thread names, service names, attribute keys,
//! messages quoting them) made safe to print on a terminal or into a log:
//! control characters, terminal escape sequences among them, are shown
//! escaped instead of being interpreted by the operator's terminal.

use std::borrow::Cow;

pub fn printable(s: &str) -> Cow<'_, str> {
    if s.chars().any(char::is_control) {
        s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect::<String>().into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_control_characters_only() {
        assert_eq!(super::printable("svc\u{1b}]0;pwned\u{7}"), "svc\\u{1b}]0;pwned\\u{7}");
        assert_eq!(super::printable("/a b/caf\u{e9}\n"), "/a b/caf\u{e9}\\n");
        assert!(matches!(super::printable("plain"), std::borrow::Cow::Borrowed(_)));
    }
}
