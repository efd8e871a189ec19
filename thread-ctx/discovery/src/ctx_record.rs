//! The OTEP 4947 thread-local context record: decoding and the validity rules
//! `validate` enforces.

use serde::Serialize;

pub const HEADER_SIZE: usize = 28;
/// 640-byte recommended record limit minus the header.
pub const MAX_ATTRS_SIZE: usize = 612;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub valid: u8,
    pub flags: u8,
    pub attrs_size: u16,
}

impl Header {
    pub fn parse(b: &[u8; HEADER_SIZE]) -> Self {
        Header {
            trace_id: b[0..16].try_into().unwrap(),
            span_id: b[16..24].try_into().unwrap(),
            valid: b[24],
            flags: b[25],
            attrs_size: u16::from_ne_bytes([b[26], b[27]]),
        }
    }

    /// Rule violations visible in the header alone (`valid` 0 is "no context", not a violation).
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.valid > 1 {
            p.push(format!("valid = {}, expected 0 or 1", self.valid));
        }
        if self.attrs_size as usize > MAX_ATTRS_SIZE {
            p.push(format!("attrs-data size = {}, expected at most {MAX_ATTRS_SIZE}", self.attrs_size));
        }
        let trace_set = self.trace_id != [0; 16];
        let span_set = self.span_id != [0; 8];
        if trace_set != span_set {
            p.push(format!("only the {} id is set, expected both or neither", if trace_set { "trace" } else { "span" }));
        }
        if !trace_set && !span_set && self.flags != 0 {
            p.push(format!("trace-flags = {:#04x} with no ids, expected 0", self.flags));
        }
        p
    }
}

/// One attrs-data entry, `[key u8][len u8][len bytes UTF-8]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attr {
    pub key_index: u8,
    /// Key name from the process context key map; None when absent or out of range.
    pub key: Option<String>,
    pub value: String,
}

/// Decodes attrs-data, stopping at a truncated entry (reported as a problem).
pub fn decode_attrs(data: &[u8], key_map: Option<&[String]>) -> (Vec<Attr>, Vec<String>) {
    let mut attrs = Vec::new();
    let mut problems = Vec::new();
    let mut i = 0;
    while i < data.len() {
        if i + 2 > data.len() {
            problems.push(format!("attrs entry at byte {i} truncated: header needs 2 bytes, {} left", data.len() - i));
            break;
        }
        let (key, len) = (data[i], data[i + 1] as usize);
        let Some(bytes) = data.get(i + 2..i + 2 + len) else {
            problems.push(format!("attrs entry at byte {i} (key {key}) truncated: value needs {len} bytes, {} left", data.len() - i - 2));
            break;
        };
        let value = match std::str::from_utf8(bytes) {
            Ok(s) => s.to_string(),
            Err(e) => {
                problems.push(format!("attrs entry at byte {i} (key {key}): value is not UTF-8 ({e})"));
                String::from_utf8_lossy(bytes).into_owned()
            }
        };
        let name = key_map.and_then(|m| m.get(key as usize)).cloned();
        attrs.push(Attr { key_index: key, key: name, value });
        i += 2 + len;
    }
    (attrs, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(valid: u8, trace: u8, span: u8, flags: u8, size: u16) -> Header {
        let mut b = [0u8; HEADER_SIZE];
        b[0..16].fill(trace);
        b[16..24].fill(span);
        b[24] = valid;
        b[25] = flags;
        b[26..28].copy_from_slice(&size.to_ne_bytes());
        Header::parse(&b)
    }

    #[test]
    fn header_rules() {
        assert!(header(1, 1, 2, 1, 0).problems().is_empty());
        assert!(header(1, 0, 0, 0, 10).problems().is_empty());
        assert!(header(7, 1, 2, 1, 0).problems()[0].contains("valid = 7"));
        assert!(header(1, 1, 2, 1, 613).problems()[0].contains("613"));
        assert!(header(1, 1, 0, 1, 0).problems()[0].contains("only the trace id"));
        assert!(header(1, 0, 0, 1, 0).problems()[0].contains("trace-flags"));
    }

    #[test]
    fn attrs_decode_with_key_map_and_truncation() {
        let map = vec!["http.route".to_string()];
        let data = [0, 2, b'/', b'a', 5, 1, b'x', 0, 9, b'z'];
        let (attrs, problems) = decode_attrs(&data, Some(&map));
        assert_eq!(attrs.len(), 2);
        assert_eq!(attrs[0], Attr { key_index: 0, key: Some("http.route".into()), value: "/a".into() });
        assert_eq!(attrs[1].key, None);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("needs 9 bytes, 1 left"), "{problems:?}");
        let (_, p) = decode_attrs(&[3], None);
        assert!(p[0].contains("header needs 2 bytes"));
    }
}
