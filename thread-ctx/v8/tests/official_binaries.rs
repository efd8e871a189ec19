//! The official node binaries of every supported version carry the
//! postmortem symbols, and this crate's layout of their V8 agrees with every
//! one they publish; a binary that disagrees, or carries none, is refused.

mod common;

use common::{majors, node_binary, symbols};
use thread_ctx_v8::{Layout, LayoutError, PostmortemSymbols, V8Version};

#[test]
fn every_official_binary_passes_its_layout_check() {
    for major in majors() {
        let Some(bin) = node_binary(major) else { continue };
        let s = symbols(&bin);
        let layout = Layout::checked(&s).unwrap_or_else(|e| panic!("Node {major}: {e}"));
        let v = layout.version;
        let listed = thread_ctx_v8::supported::for_node(major).unwrap().layout.version;
        assert_eq!((v.major, v.minor), (listed.major, listed.minor), "Node {major}");
        assert!(s.values.len() > 400, "Node {major}: {} v8dbg symbols", s.values.len());
        assert!(s.bytecode_sizes.as_ref().is_some_and(|b| b.count() > 150), "Node {major}: kBytecodeSizes");
        let handlers = s.bytecode_handlers.unwrap();
        let builtins = s.builtins.unwrap();
        assert!(builtins.start < handlers.start && handlers.end == builtins.end, "Node {major}: handlers are the builtins' tail");
    }
}

#[test]
fn a_binary_that_disagrees_or_says_nothing_is_refused() {
    let Some(bin) = node_binary(24) else { return };
    let good = symbols(&bin);
    let mut lying = good.clone();
    lying.values.insert("v8dbg_class_JSFunction__shared__SharedFunctionInfo".into(), 40);
    let e = Layout::checked(&lying).unwrap_err();
    assert!(matches!(&e, LayoutError::Mismatch { symbol, published: 40, expected: 32, .. } if symbol.contains("JSFunction__shared")), "{e}");
    assert!(e.to_string().contains("refusing"), "{e}");
    let mut compressed = good.clone();
    compressed.values.insert("v8dbg_TaggedSize".into(), 4);
    assert!(matches!(Layout::checked(&compressed), Err(LayoutError::Mismatch { .. })), "a pointer-compressed build");
    let mut missing = good.clone();
    missing.values.remove("v8dbg_off_fp_function");
    assert!(matches!(Layout::checked(&missing), Err(LayoutError::Missing { .. })));
    let mut newer = good.clone();
    newer.version = Some(V8Version::new(15, 1, 0, 0));
    let e = Layout::checked(&newer).unwrap_err();
    assert!(matches!(e, LayoutError::UnknownVersion { .. }));
    assert!(
        e.to_string().contains("V8 15.1.0.0 has no known layout (this reader knows V8 10.2 (Node 18), 11.3 (Node 20)"),
        "the message names the list: {e}"
    );
    let none = PostmortemSymbols { path: "/usr/bin/node-stripped".into(), ..Default::default() };
    let e = Layout::checked(&none).unwrap_err();
    assert!(e.to_string().contains("no v8dbg symbols"), "{e}");
}
