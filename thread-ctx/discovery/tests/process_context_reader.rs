//! The library's reader of the OTEP 4719 process context (`read_process_context`), outside a C
//! writer that republishes it in a tight loop: every read is one payload whole, never a mix.
//! (What `thread-ctx dump` and `inspect` print of it: the binary's tests/process_context.rs.)

use thread_ctx_test_support::process::{c_writer, fixtures};
use thread_ctx_test_support::process_context::{payload, write_file, GAVE_UP};

#[test]
fn library_reader_in_a_tight_loop_sees_only_whole_payloads() {
    let a = write_file("la.pb", &payload("service-a", &["k1"]));
    let b = write_file("lb.pb", &payload("service-bbbbbbbbbbbbbbbbbbbb", &["k1", "k2", "k3"]));
    let w = c_writer(&fixtures().writer_le, &["--proc-ctx", a.to_str().unwrap(), "--churn-ctx", b.to_str().unwrap()], &[]);
    let maps = thread_ctx_discovery::maps::read_maps(w.pid).unwrap();
    let (mut counts, mut gave_up) = ([0usize; 2], 0);
    for i in 0..5000 {
        let pc = match thread_ctx_discovery::process_context::read_process_context(w.pid, &maps) {
            // A reader gives up (and says so) when the writer stays mid-update for its whole retry budget
            // (~40 ms; a writer preempted there on a busy machine): at most 1 % of reads.
            Err(e) if e.to_string().contains(GAVE_UP) && gave_up < 50 => {
                gave_up += 1;
                continue;
            }
            r => r.unwrap_or_else(|e| panic!("read {i}: expected a whole payload, saw error {e}")).expect("an OTEL_CTX mapping"),
        };
        match (pc.resource["service.name"].as_str(), pc.attribute_key_map.as_ref().map(Vec::len)) {
            (Some("service-a"), Some(1)) => counts[0] += 1,
            (Some("service-bbbbbbbbbbbbbbbbbbbb"), Some(3)) => counts[1] += 1,
            other => panic!("read {i}: expected payload A or B whole, saw {other:?}"),
        }
    }
    assert!(counts[0] > 0 && counts[1] > 0, "expected both payloads over 5000 reads, saw {counts:?}");
}
