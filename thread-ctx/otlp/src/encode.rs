//! A window of profiles as one OTLP/Profiles export request
//! (`opentelemetry.proto.profiles.v1development`, the messages of the
//! `opentelemetry-proto` crate): one `ResourceProfiles` per process, its
//! resource from the process context, and one dictionary the whole request
//! shares (element 0 of every table is the zero value).
//!
//! Per process: a CPU profile (`samples`/`count`, period `cpu`/`nanoseconds`),
//! when off-CPU time was traced an off-CPU one (`off_cpu`/`nanoseconds`), and
//! when allocations were, two sibling allocation profiles (`alloc_objects`/`count`
//! and `alloc_space`/`bytes`: the proto allows one sample type per profile) whose
//! samples are the same stacks, links and attributes.
//! Each sample: a stack, the trace and span the thread had published as a
//! `Link` (bytes as the record holds them: W3C order), the record's attributes
//! under their key names, `thread.id` and `thread.name` (and `thread.vid`, the
//! thread's id in the process's own PID namespace, where it has one), and one value and
//! wall-clock timestamp per event aggregated into it. Locations carry
//! `profile.frame.type` (`native`, `kernel`, `v8js`), mappings their file
//! name and `process.executable.build_id.gnu`.

use foldhash::{HashMap, HashMapExt};
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::profiles::v1development as otlp;
use thread_ctx_discovery::cgroup_cpu::CpuThrottling;
use thread_ctx_discovery::maps::Mapping as MapsLine;
use thread_ctx_discovery::process_context_proto::Resource;
use thread_ctx_model::symbolized::StackFrame;
use thread_ctx_model::{Entry, FrameKind, Profile, Value};

pub const FRAME_TYPE: &str = "profile.frame.type";
pub const BUILD_ID_GNU: &str = "process.executable.build_id.gnu";
pub const THREAD_ID: &str = "thread.id";
pub const THREAD_NAME: &str = "thread.name";
/// For a process in a PID namespace of its own: the thread's id there (what its spans say as
/// `thread.id`; the connector maps one to the other).
pub const THREAD_VID: &str = "thread.vid";
/// Off-CPU samples: `blocked` or `preempted`.
pub const OFF_CPU_STATE: &str = "thread.off_cpu.state";
/// Profile attributes, where the agent read the process's cgroup: how long its CPU quota
/// throttled it in the window (ns, and quota periods), and which cgroup's quota that was.
pub const CGROUP_THROTTLED_NS: &str = "thread_ctx.cgroup.cpu.throttled_ns";
pub const CGROUP_NR_THROTTLED: &str = "thread_ctx.cgroup.cpu.nr_throttled";
pub const CGROUP_PATH: &str = "thread_ctx.cgroup.path";
use thread_ctx_model::symbolized::{KERNEL_MAPPING, KERNEL_START};

/// One process's profile over one window.
pub struct ProcessWindow<'a> {
    pub resource: &'a Resource,
    pub profile: &'a Profile,
    /// The window, wall clock.
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    /// Its cgroup's CPU throttling over the window, where the agent read it.
    pub throttling: Option<&'a CpuThrottling>,
}

/// The export request for one window of processes.
pub fn export_request(windows: &[ProcessWindow]) -> ExportProfilesServiceRequest {
    let mut dict = Dictionary::new();
    let resource_profiles = windows
        .iter()
        .map(|w| otlp::ResourceProfiles {
            resource: Some(crate::to_otlp::resource(w.resource)),
            scope_profiles: vec![otlp::ScopeProfiles {
                scope: Some(InstrumentationScope { name: "thread-ctx".into(), version: env!("CARGO_PKG_VERSION").into(), ..Default::default() }),
                profiles: profiles_of(&mut dict, w),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        })
        .collect();
    ExportProfilesServiceRequest { resource_profiles, dictionary: Some(dict.table) }
}

fn profiles_of(dict: &mut Dictionary, w: &ProcessWindow) -> Vec<otlp::Profile> {
    let p = w.profile;
    let mappings = ProcessMappings::new(dict, p);
    let mut known = KnownStacks::default();
    let mut out = Vec::new();
    let attribute_indices: Vec<i32> = match w.throttling {
        Some(t) => vec![
            dict.attribute(CGROUP_THROTTLED_NS, AttrValue::Int(t.throttled_ns.min(i64::MAX as u64) as i64)),
            dict.attribute(CGROUP_NR_THROTTLED, AttrValue::Int(t.nr_throttled.min(i64::MAX as u64) as i64)),
            dict.attribute(CGROUP_PATH, AttrValue::Str(&t.cgroup)),
        ],
        None => Vec::new(),
    };
    for measure in p.measures() {
        let entries: Vec<&Entry> = p.entries.iter().filter(|e| e.kind.measure() == measure).collect();
        for &value in measure.otlp_values() {
            let samples = entries.iter().map(|e| sample_of(dict, &mappings, &mut known, p, e, value)).collect();
            let (kind, unit) = measure.value_type(value);
            out.push(otlp::Profile {
                sample_type: Some(dict.value_type(kind, unit)),
                samples,
                time_unix_nano: w.start_unix_ns,
                duration_nano: w.duration_ns,
                period_type: Some(dict.value_type("cpu", "nanoseconds")),
                period: p.cpu_period_ns as i64,
                attribute_indices: attribute_indices.clone(),
                ..Default::default()
            });
        }
    }
    out
}

fn sample_of<'p>(
    dict: &mut Dictionary,
    mappings: &ProcessMappings,
    known: &mut KnownStacks<'p>,
    p: &Profile,
    e: &'p Entry,
    value: Value,
) -> otlp::Sample {
    let stack_index = known.stack_index(dict, mappings, p, &e.stack);
    let mut attribute_indices = Vec::with_capacity(2 + e.attrs.len());
    attribute_indices.push(dict.attribute(THREAD_ID, AttrValue::Int(e.tid as i64)));
    if let Some(name) = p.thread_name(e.tid) {
        attribute_indices.push(dict.attribute(THREAD_NAME, AttrValue::Str(name)));
    }
    if let Some(vtid) = p.thread_vid(e.tid) {
        attribute_indices.push(dict.attribute(THREAD_VID, AttrValue::Int(vtid as i64)));
    }
    for (k, v) in &e.attrs {
        attribute_indices.push(dict.attribute(k, AttrValue::Str(v)));
    }
    if let Some(state) = e.kind.off_cpu_label() {
        attribute_indices.push(dict.attribute(OFF_CPU_STATE, AttrValue::Str(state)));
    }
    let link_index = match (e.trace_id, e.span_id) {
        (Some(t), Some(s)) => dict.link(t, s),
        _ => 0,
    };
    let weighs = value == Value::Weight;
    // One value (and timestamp) per event while the profile kept every event's time;
    // otherwise one aggregated value, for every sample of the profile alike.
    let (values, timestamps_unix_nano) = if p.times_complete && e.times.len() as u64 == e.count {
        let values = e.times.iter().map(|o| if weighs { o.weight as i64 } else { 1 }).collect();
        (values, e.times.iter().map(|o| p.unix_ns(o.time_ns)).collect())
    } else {
        (vec![if weighs { e.weight as i64 } else { e.count as i64 }], Vec::new())
    };
    otlp::Sample { stack_index, attribute_indices, link_index, values, timestamps_unix_nano }
}

/// One process's stacks and frames already in the dictionary: entries of a window repeat few
/// stacks (one per span, thread and attributes), so each stack and frame is looked up in the
/// shared tables once per process, not once per sample.
#[derive(Default)]
struct KnownStacks<'p> {
    stacks: HashMap<&'p [StackFrame], i32>,
    locations: HashMap<StackFrame, i32>,
}

impl<'p> KnownStacks<'p> {
    fn stack_index(&mut self, dict: &mut Dictionary, mappings: &ProcessMappings, p: &Profile, stack: &'p [StackFrame]) -> i32 {
        if let Some(&i) = self.stacks.get(stack) {
            return i;
        }
        let locations: Vec<i32> = stack.iter().map(|sf| *self.locations.entry(*sf).or_insert_with(|| dict.location(mappings, p, sf))).collect();
        let i = dict.stack(locations);
        self.stacks.insert(stack, i);
        i
    }
}

/// A profile's executable mappings (sorted, for address lookup) and their dictionary indices.
struct ProcessMappings<'p> {
    exec: Vec<&'p MapsLine>,
    indices: Vec<i32>,
    kernel: i32,
}

impl<'p> ProcessMappings<'p> {
    fn new(dict: &mut Dictionary, p: &'p Profile) -> Self {
        let mut exec: Vec<&MapsLine> = p.mappings.iter().filter(|m| m.is_file_backed() && m.perms.contains('x')).collect();
        exec.sort_by_key(|m| m.start);
        let indices = exec
            .iter()
            .map(|m| {
                let build_id = p.build_id(m).map(|id| dict.attribute(BUILD_ID_GNU, AttrValue::Str(id)));
                let filename_strindex = dict.string(m.path());
                dict.mapping(otlp::Mapping {
                    memory_start: m.start,
                    memory_limit: m.end,
                    file_offset: m.offset,
                    filename_strindex,
                    attribute_indices: build_id.into_iter().collect(),
                })
            })
            .collect();
        let uses_kernel = p.entries.iter().any(|e| e.stack.iter().any(|f| f.kernel));
        let kernel = if uses_kernel {
            let filename_strindex = dict.string(KERNEL_MAPPING);
            dict.mapping(otlp::Mapping { memory_start: KERNEL_START, memory_limit: u64::MAX, filename_strindex, ..Default::default() })
        } else {
            0
        };
        ProcessMappings { exec, indices, kernel }
    }

    fn index_of(&self, sf: &StackFrame) -> i32 {
        if sf.kernel {
            return self.kernel;
        }
        let i = self.exec.partition_point(|m| m.start <= sf.addr);
        if i > 0 && self.exec[i - 1].contains(sf.addr) {
            self.indices[i - 1]
        } else {
            0
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum AttrValue<'a> {
    Str(&'a str),
    Int(i64),
}

/// The request's shared tables, each deduplicated, with its zero value at index 0.
struct Dictionary {
    table: otlp::ProfilesDictionary,
    strings: HashMap<String, i32>,
    /// String and integer attributes by key index, then value (looked up without a copy of the value).
    str_attributes: HashMap<i32, HashMap<String, i32>>,
    int_attributes: HashMap<(i32, i64), i32>,
    functions: HashMap<(i32, i32, i64), i32>,
    locations: HashMap<(i32, u64, i32, i64, i64, i32), i32>,
    stacks: HashMap<Vec<i32>, i32>,
    links: HashMap<([u8; 16], [u8; 8]), i32>,
}

impl Dictionary {
    fn new() -> Self {
        let table = otlp::ProfilesDictionary {
            mapping_table: vec![otlp::Mapping::default()],
            location_table: vec![otlp::Location::default()],
            function_table: vec![otlp::Function::default()],
            link_table: vec![otlp::Link::default()],
            string_table: vec![String::new()],
            attribute_table: vec![otlp::KeyValueAndUnit::default()],
            stack_table: vec![otlp::Stack::default()],
        };
        let mut d = Dictionary {
            table,
            strings: HashMap::new(),
            str_attributes: HashMap::new(),
            int_attributes: HashMap::new(),
            functions: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::new(),
            links: HashMap::new(),
        };
        d.strings.insert(String::new(), 0);
        d.stacks.insert(Vec::new(), 0);
        d
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.table.string_table.len() as i32;
        self.table.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> otlp::ValueType {
        otlp::ValueType { type_strindex: self.string(kind), unit_strindex: self.string(unit) }
    }

    fn attribute(&mut self, key: &str, value: AttrValue) -> i32 {
        let key = self.string(key);
        let known = match value {
            AttrValue::Str(s) => self.str_attributes.get(&key).and_then(|m| m.get(s)),
            AttrValue::Int(n) => self.int_attributes.get(&(key, n)),
        };
        if let Some(&i) = known {
            return i;
        }
        let i = self.table.attribute_table.len() as i32;
        let any = match value {
            AttrValue::Str(s) => {
                self.str_attributes.entry(key).or_default().insert(s.to_string(), i);
                AnyValue { value: Some(any_value::Value::StringValue(s.to_string())) }
            }
            AttrValue::Int(n) => {
                self.int_attributes.insert((key, n), i);
                AnyValue { value: Some(any_value::Value::IntValue(n)) }
            }
        };
        self.table.attribute_table.push(otlp::KeyValueAndUnit { key_strindex: key, value: Some(any), unit_strindex: 0 });
        i
    }

    fn mapping(&mut self, m: otlp::Mapping) -> i32 {
        self.table.mapping_table.push(m);
        self.table.mapping_table.len() as i32 - 1
    }

    fn location(&mut self, mappings: &ProcessMappings, p: &Profile, sf: &StackFrame) -> i32 {
        let f = p.frame(sf);
        let mapping_index = mappings.index_of(sf);
        let frame_type = match f.kind {
            FrameKind::Native => "native",
            FrameKind::Js => "v8js",
            FrameKind::Kernel => "kernel",
            // Unnamed code outside any file of a V8 process is V8's (JIT code, builtins, stubs).
            FrameKind::Unknown if mapping_index == 0 && f.file.is_none() && p.runs_v8 => "v8js",
            FrameKind::Unknown => "native",
        };
        let frame_type = self.attribute(FRAME_TYPE, AttrValue::Str(frame_type));
        let name = self.string(&f.name);
        let file = f.file.as_deref().map_or(0, |s| self.string(s));
        let start_line = f.line.unwrap_or(0) as i64;
        let function_index = match self.functions.get(&(name, file, start_line)) {
            Some(&i) => i,
            None => {
                let i = self.table.function_table.len() as i32;
                let system_name = self.string(&f.system_name()); // a source-mapped frame's generated script and line
                self.table.function_table.push(otlp::Function {
                    name_strindex: name,
                    system_name_strindex: system_name,
                    filename_strindex: file,
                    start_line,
                });
                self.functions.insert((name, file, start_line), i);
                i
            }
        };
        // The sampled line when V8's jitdump gave it, else the function's own.
        let (line, column) = match f.pos {
            Some(pos) => (pos.line as i64, pos.column.unwrap_or(0) as i64),
            None => (start_line, f.column.unwrap_or(0) as i64),
        };
        let key = (mapping_index, sf.addr, function_index, line, column, frame_type);
        if let Some(&i) = self.locations.get(&key) {
            return i;
        }
        let i = self.table.location_table.len() as i32;
        self.table.location_table.push(otlp::Location {
            mapping_index,
            address: sf.addr,
            lines: vec![otlp::Line { function_index, line, column }],
            attribute_indices: vec![frame_type],
        });
        self.locations.insert(key, i);
        i
    }

    fn stack(&mut self, locations: Vec<i32>) -> i32 {
        if let Some(&i) = self.stacks.get(&locations) {
            return i;
        }
        let i = self.table.stack_table.len() as i32;
        self.table.stack_table.push(otlp::Stack { location_indices: locations.clone() });
        self.stacks.insert(locations, i);
        i
    }

    fn link(&mut self, trace_id: [u8; 16], span_id: [u8; 8]) -> i32 {
        if let Some(&i) = self.links.get(&(trace_id, span_id)) {
            return i;
        }
        let i = self.table.link_table.len() as i32;
        self.table.link_table.push(otlp::Link { trace_id: trace_id.to_vec(), span_id: span_id.to_vec() });
        self.links.insert((trace_id, span_id), i);
        i
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use thread_ctx_discovery::process_context_proto::{string_value, KeyValue};

    fn kv(key: &str, value: thread_ctx_discovery::process_context_proto::AnyValue) -> KeyValue {
        KeyValue { key: key.to_string(), value: Some(value) }
    }

    fn as_str(v: &AnyValue) -> Option<&str> {
        match &v.value {
            Some(any_value::Value::StringValue(s)) => Some(s),
            _ => None,
        }
    }
    use thread_ctx_model::symbolized::{Observation, StackFrame};
    use thread_ctx_model::{Frame, SampleKind};

    /// A V8 process's window: JS, JIT and native frames (a mapping with a build id), a CPU entry
    /// with a span and attributes, an off-CPU one without.
    pub(crate) fn profile() -> Profile {
        let mut p = Profile::new(42);
        (p.cpu_period_ns, p.off_cpu_traced, p.runs_v8, p.monotonic_to_unix_ns) = (10_000_000, true, true, 1_000_000_000_000);
        p.mappings = vec![Profile::test_node_mapping()];
        p.build_ids.insert(("08:01".into(), 7), "abcd".into());
        p.thread_names.insert(42, "node".into());
        let native = p.intern(Frame::native("uv_run", Some("/usr/bin/node")));
        let js = p.intern(Frame::js("burn", Some("/app/a.js"), Some(3), Some(9)));
        let jit = p.intern(Frame::unknown("[anon:jit]".into(), None));
        let stack = vec![
            StackFrame { addr: 0x7f00_0000_0000, frame: js, kernel: false },
            StackFrame { addr: 0x7f00_0000_0100, frame: jit, kernel: false },
            StackFrame { addr: 0x1100, frame: native, kernel: false },
        ];
        let at = |t: u64, w: u64| Observation { time_ns: t, weight: w };
        p.push_entry(Entry {
            tid: 42,
            weight: 20_000_000,
            times: vec![at(5, 10_000_000), at(7, 10_000_000)],
            ..Entry::test(stack.clone(), Some((0xab, 0xcd)), &[("http.route", "/users/:id")], 2)
        });
        p.push_entry(Entry {
            kind: SampleKind::Blocked,
            tid: 42,
            weight: 50_000_000,
            times: vec![at(9, 50_000_000)],
            ..Entry::test(stack, None, &[], 1)
        });
        p
    }

    /// A process whose cgroup's quota throttled it: every profile of its window says how long,
    /// how often and which cgroup; a process without the reading says nothing.
    #[test]
    fn cgroup_throttling_rides_on_the_window_profiles() {
        let p = profile();
        let t = CpuThrottling { cgroup: "/kubepods/pod1".into(), version: 2, nr_throttled: 7, throttled_ns: 2_500_000 };
        let req = export_request(&[
            ProcessWindow { resource: &Resource::default(), profile: &p, start_unix_ns: 1, duration_ns: 10, throttling: Some(&t) },
            ProcessWindow { resource: &Resource::default(), profile: &p, start_unix_ns: 1, duration_ns: 10, throttling: None },
        ]);
        let d = req.dictionary.as_ref().unwrap();
        let attrs = |prof: &otlp::Profile| -> Vec<(String, String)> {
            prof.attribute_indices
                .iter()
                .map(|&i| {
                    let a = &d.attribute_table[i as usize];
                    let v = a.value.as_ref().unwrap();
                    let text = match &v.value {
                        Some(any_value::Value::IntValue(n)) => n.to_string(),
                        _ => as_str(v).unwrap().to_string(),
                    };
                    (d.string_table[a.key_strindex as usize].clone(), text)
                })
                .collect()
        };
        let throttled = &req.resource_profiles[0].scope_profiles[0].profiles;
        assert_eq!(throttled.len(), 2);
        for prof in throttled {
            assert_eq!(
                attrs(prof),
                [(CGROUP_THROTTLED_NS, "2500000"), (CGROUP_NR_THROTTLED, "7"), (CGROUP_PATH, "/kubepods/pod1")]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            );
        }
        assert!(req.resource_profiles[1].scope_profiles[0].profiles.iter().all(|p| p.attribute_indices.is_empty()));
    }

    #[test]
    fn a_window_becomes_one_request_with_shared_tables() {
        let p = profile();
        let resource = Resource { attributes: vec![kv("service.name", string_value("shop"))], ..Default::default() };
        let req = export_request(&[ProcessWindow {
            resource: &resource,
            profile: &p,
            start_unix_ns: 1_000_000_000_000,
            duration_ns: 10,
            throttling: None,
        }]);
        let d = req.dictionary.as_ref().unwrap();
        let s = |i: i32| d.string_table[i as usize].as_str();
        assert_eq!(
            (s(0), &d.link_table[0], &d.mapping_table[0], &d.stack_table[0]),
            ("", &otlp::Link::default(), &otlp::Mapping::default(), &otlp::Stack::default())
        );
        let rp = &req.resource_profiles[0];
        assert_eq!(rp.resource.as_ref().unwrap().attributes[0].key, "service.name");
        let profiles = &rp.scope_profiles[0].profiles;
        assert_eq!(profiles.len(), 2, "CPU and off-CPU");
        let (cpu, off) = (&profiles[0], &profiles[1]);
        let vt = |v: &Option<otlp::ValueType>| v.as_ref().map(|v| (s(v.type_strindex), s(v.unit_strindex)));
        assert_eq!((vt(&cpu.sample_type), vt(&off.sample_type)), (Some(("samples", "count")), Some(("off_cpu", "nanoseconds"))));
        assert_eq!((vt(&cpu.period_type), cpu.period), (Some(("cpu", "nanoseconds")), 10_000_000));

        let sample = &cpu.samples[0];
        let link = &d.link_table[sample.link_index as usize];
        assert_eq!((link.trace_id.as_slice(), link.span_id.as_slice()), (&[0xab; 16][..], &[0xcd; 8][..]), "ids as the record holds them");
        assert_eq!(sample.values, vec![1, 1]);
        assert_eq!(sample.timestamps_unix_nano, vec![1_000_000_000_005, 1_000_000_000_007], "wall clock");
        let attrs: Vec<(String, String)> = sample
            .attribute_indices
            .iter()
            .map(|&i| {
                let a = &d.attribute_table[i as usize];
                let v = a.value.as_ref().unwrap();
                let text = match &v.value {
                    Some(any_value::Value::IntValue(n)) => n.to_string(),
                    _ => as_str(v).unwrap().to_string(),
                };
                (s(a.key_strindex).to_string(), text)
            })
            .collect();
        assert_eq!(attrs, [("thread.id", "42"), ("thread.name", "node"), ("http.route", "/users/:id")].map(|(k, v)| (k.to_string(), v.to_string())));

        let stack = &d.stack_table[sample.stack_index as usize];
        let frames: Vec<(String, &str, i32)> = stack
            .location_indices
            .iter()
            .map(|&l| {
                let loc = &d.location_table[l as usize];
                let f = &d.function_table[loc.lines[0].function_index as usize];
                let ty = d.attribute_table[loc.attribute_indices[0] as usize].value.as_ref().and_then(as_str).unwrap().to_string();
                (ty, s(f.name_strindex), loc.mapping_index)
            })
            .collect();
        assert_eq!(frames, vec![("v8js".into(), "burn", 0), ("v8js".into(), "[anon:jit]", 0), ("native".into(), "uv_run", 1)], "leaf first");
        let mapping = &d.mapping_table[1];
        assert_eq!(s(mapping.filename_strindex), "/usr/bin/node");
        let build_id = &d.attribute_table[mapping.attribute_indices[0] as usize];
        assert_eq!((s(build_id.key_strindex), build_id.value.as_ref().and_then(as_str)), (BUILD_ID_GNU, Some("abcd")));

        let blocked = &off.samples[0];
        assert_eq!((blocked.link_index, blocked.values.as_slice()), (0, &[50_000_000][..]), "no span: the null link");
        assert_eq!(blocked.stack_index, sample.stack_index, "the same stack is stored once");
    }

    #[test]
    fn without_every_time_samples_carry_one_aggregated_value() {
        let mut p = profile();
        p.times_complete = false;
        let req =
            export_request(&[ProcessWindow { resource: &Resource::default(), profile: &p, start_unix_ns: 0, duration_ns: 0, throttling: None }]);
        let profiles = &req.resource_profiles[0].scope_profiles[0].profiles;
        assert_eq!((profiles[0].samples[0].values.as_slice(), profiles[0].samples[0].timestamps_unix_nano.len()), (&[2][..], 0));
        assert_eq!(profiles[1].samples[0].values, vec![50_000_000]);
    }

    #[test]
    fn allocations_go_out_as_two_sibling_profiles_linked_like_cpu_samples() {
        let mut p = profile();
        p.alloc_traced = true;
        let cpu = p.entries[0].clone();
        let at = |t: u64| Observation { time_ns: t, weight: 600_000 };
        p.push_entry(Entry { kind: SampleKind::Alloc, count: 3, weight: 1_800_000, times: vec![at(1), at(2), at(3)], ..cpu });
        let req =
            export_request(&[ProcessWindow { resource: &Resource::default(), profile: &p, start_unix_ns: 0, duration_ns: 0, throttling: None }]);
        let d = req.dictionary.as_ref().unwrap();
        let s = |i: i32| d.string_table[i as usize].as_str();
        let profiles = &req.resource_profiles[0].scope_profiles[0].profiles;
        let types: Vec<(&str, &str)> =
            profiles.iter().map(|p| p.sample_type.as_ref().map(|v| (s(v.type_strindex), s(v.unit_strindex))).unwrap()).collect();
        assert_eq!(types, [("samples", "count"), ("off_cpu", "nanoseconds"), ("alloc_objects", "count"), ("alloc_space", "bytes")]);
        let (objects, space) = (&profiles[2].samples[0], &profiles[3].samples[0]);
        assert_eq!((objects.values.as_slice(), space.values.as_slice()), (&[1, 1, 1][..], &[600_000, 600_000, 600_000][..]));
        let cpu_sample = &profiles[0].samples[0];
        for a in [objects, space] {
            assert_eq!(
                (a.link_index, a.stack_index, &a.attribute_indices),
                (cpu_sample.link_index, cpu_sample.stack_index, &cpu_sample.attribute_indices)
            );
            assert_eq!(a.timestamps_unix_nano.len(), 3);
        }
    }
}
