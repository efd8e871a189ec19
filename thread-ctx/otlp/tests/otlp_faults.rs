//! The OTLP exporter when the endpoint misbehaves, against a real OpenTelemetry Collector: absent
//! at start, killed and restarted mid-run, and a listener that accepts connections but never
//! answers. Each over gRPC and HTTP. The exporter must keep its caller unblocked, keep memory
//! bounded (a full queue drops the oldest, counted), deliver once the endpoint is back, and
//! account for every request.

use thread_ctx_test_support::collector as collector_common;
use thread_ctx_test_support::otlp_request as otlp_common;

use std::time::{Duration, Instant};

use collector_common::{Collector, Received, SilentListener};
use otlp_common::{config, example_request, quick_retries, tag_of};
use thread_ctx_otlp::{Count, Exporter, ExporterStats};

const PROTOCOLS: [&str; 2] = ["grpc", "http/protobuf"];
const PATIENCE: Duration = Duration::from_secs(90);

fn endpoint(collector: &Collector, protocol: &str) -> String {
    if protocol == "grpc" {
        collector.grpc_endpoint()
    } else {
        collector.http_endpoint()
    }
}

/// Polls the exporter's counters until `done`, for at most [`PATIENCE`].
fn wait_stats(exporter: &Exporter, what: &str, done: impl Fn(&ExporterStats) -> bool) -> ExporterStats {
    let start = Instant::now();
    loop {
        let stats = exporter.stats();
        if done(&stats) {
            return stats;
        }
        assert!(start.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}: {stats:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `test.request` tags the Collector received, in order, one per request.
fn tags(received: &Received) -> Vec<String> {
    let mut tags: Vec<String> = received.samples().iter().map(|s| tag_of(s).to_string()).collect();
    tags.dedup();
    tags
}

/// Nothing listens at first: the first request is retried; four more arrive while it is in
/// flight and the queue holds two, so the two oldest of them are dropped. Once the Collector
/// starts, the one in flight and the two newest are delivered.
#[test]
fn absent_at_start_then_started_delivers_after_retries_and_drops_the_oldest() {
    for protocol in PROTOCOLS {
        let mut collector = Collector::new();
        let mut cfg = config(&endpoint(&collector, protocol), protocol, "gzip");
        cfg.queue_capacity = 2;
        cfg.retry = quick_retries(PATIENCE * 2);
        let exporter = Exporter::start(cfg).unwrap();

        exporter.export(example_request("r1"));
        wait_stats(&exporter, "the first request to fail and be retried", |s| s.retries >= 2 && s.in_flight.requests == 1);
        let before = Instant::now();
        for tag in ["r2", "r3", "r4", "r5"] {
            exporter.export(example_request(tag));
        }
        // Queueing never waits for the network (generous bound: a retry alone takes 100 ms+).
        assert!(before.elapsed() < Duration::from_secs(1), "{protocol}: export() blocked for {:?}", before.elapsed());
        let stats = exporter.stats();
        assert_eq!(stats.dropped_queue_full, Count { requests: 2, samples: 6 }, "{protocol}: {stats:?}");
        assert_eq!(stats.queued.requests, 2, "{protocol}: {stats:?}");
        assert!(stats.last_error.as_deref().unwrap_or("").starts_with("retrying in"), "{protocol}: {stats:?}");

        collector.start();
        assert!(exporter.flush(PATIENCE), "{protocol}: not delivered after the Collector started: {:?}", exporter.stats());
        let stats = exporter.shutdown(Duration::from_secs(5));
        assert_eq!(stats.sent, Count { requests: 3, samples: 9 }, "{protocol}: {stats:?}");
        assert_eq!((stats.failed.requests, stats.dropped().requests), (0, 2), "{protocol}: {stats:?}");
        assert_eq!(stats.last_error, None, "{protocol}");
        let received = collector.wait_for(PATIENCE, "three requests", |r| r.messages.len() >= 3);
        assert_eq!(tags(&received), ["r1", "r4", "r5"], "{protocol}");
    }
}

/// Killed (SIGKILL) after one delivery: the next requests are retried on the dead connection
/// and against a refused port, then delivered to the restarted Collector, in order, none lost.
#[test]
fn killed_and_restarted_mid_run_loses_nothing() {
    for protocol in PROTOCOLS {
        let mut collector = Collector::running();
        let mut cfg = config(&endpoint(&collector, protocol), protocol, "none");
        cfg.retry = quick_retries(PATIENCE * 2);
        let exporter = Exporter::start(cfg).unwrap();

        exporter.export(example_request("before"));
        assert!(exporter.flush(PATIENCE), "{protocol}: {:?}", exporter.stats());
        collector.wait_for(PATIENCE, "the first request", |r| r.messages.len() == 1);

        collector.kill();
        exporter.export(example_request("during-1"));
        exporter.export(example_request("during-2"));
        let stats = wait_stats(&exporter, "retries against the dead Collector", |s| s.retries >= 3);
        assert_eq!(stats.sent.requests, 1, "{protocol}: {stats:?}");

        collector.start();
        assert!(exporter.flush(PATIENCE), "{protocol}: not delivered after the restart: {:?}", exporter.stats());
        let stats = exporter.shutdown(Duration::from_secs(5));
        assert_eq!(stats.sent.requests, 3, "{protocol}: {stats:?}");
        assert_eq!((stats.failed.requests, stats.dropped().requests), (0, 0), "{protocol}: {stats:?}");
        let received = collector.wait_for(PATIENCE, "three requests", |r| r.messages.len() >= 3);
        assert_eq!(tags(&received), ["before", "during-1", "during-2"], "{protocol}");
    }
}

/// A listener that accepts and never answers: every attempt times out, is retried until the
/// request's retry budget runs out, and is then dropped and counted; the queue stays bounded;
/// shutdown returns by its deadline with every request accounted for.
#[test]
fn an_endpoint_that_never_answers_times_out_retries_and_drops() {
    for protocol in PROTOCOLS {
        let silent = SilentListener::start();
        let mut cfg = config(&silent.endpoint(), protocol, "none");
        cfg.timeout = Duration::from_secs(1);
        cfg.queue_capacity = 2;
        // Room for three attempts (1 s each, 100 and 200 ms apart), not four.
        cfg.retry = quick_retries(Duration::from_secs(4));
        let exporter = Exporter::start(cfg).unwrap();

        let before = Instant::now();
        for i in 0..6 {
            exporter.export(example_request(&format!("r{i}")));
        }
        // Six exports waiting on a 1 s timeout would take 6 s.
        assert!(before.elapsed() < Duration::from_secs(1), "{protocol}: export() blocked for {:?}", before.elapsed());
        let stats = exporter.stats();
        assert!(stats.queued.requests <= 2 && stats.dropped_queue_full.requests >= 3, "{protocol}: {stats:?}");

        let stats = wait_stats(&exporter, "a request to run out of retries", |s| s.dropped_retries_exhausted.requests >= 1);
        assert!(stats.retries >= 2, "{protocol}: {stats:?}");
        let error = stats.last_error.clone().unwrap_or_default();
        assert!(error.contains("no answer within 1000 ms"), "{protocol}: {error}");
        assert!(silent.connections() >= 1, "{protocol}: the exporter never connected");

        let before = Instant::now();
        let stats = exporter.shutdown(Duration::from_millis(500));
        assert!(before.elapsed() < Duration::from_secs(10), "{protocol}: shutdown took {:?}", before.elapsed());
        assert_eq!((stats.sent.requests, stats.failed.requests), (0, 0), "{protocol}: {stats:?}");
        assert_eq!(stats.dropped().requests, 6, "{protocol}: every request accounted for: {stats:?}");
        assert_eq!((stats.queued, stats.in_flight), (Count::default(), Count::default()), "{protocol}");
    }
}

/// Shutdown (the agent's SIGTERM path) sends what is queued before it returns.
#[test]
fn shutdown_sends_what_is_queued() {
    for protocol in PROTOCOLS {
        let collector = Collector::running();
        let exporter = Exporter::start(config(&endpoint(&collector, protocol), protocol, "gzip")).unwrap();
        for tag in ["a", "b", "c"] {
            exporter.export(example_request(tag));
        }
        let stats = exporter.shutdown(PATIENCE);
        assert_eq!((stats.sent.requests, stats.dropped().requests), (3, 0), "{protocol}: {stats:?}");
        let received = collector.wait_for(PATIENCE, "three requests", |r| r.messages.len() >= 3);
        assert_eq!(tags(&received), ["a", "b", "c"], "{protocol}");
    }
}

/// Each protocol pointed at the other's receiver (gRPC at the OTLP/HTTP port, OTLP/HTTP at the
/// gRPC port): the error says the endpoint answers in another protocol and names the usual ports
/// and the flag, instead of an HTTP/2 framing error alone.
#[test]
fn each_protocol_sent_to_the_other_ones_port_gets_a_hint() {
    let collector = Collector::running();
    for (protocol, wrong_port, names) in [
        ("grpc", collector.http_endpoint(), ["like a receiver of http/protobuf", "use the grpc port (4317), or --protocol http/protobuf"]),
        ("http/protobuf", collector.grpc_endpoint(), ["like a receiver of grpc", "use the http/protobuf port (4318), or --protocol grpc"]),
    ] {
        let mut cfg = config(&wrong_port, protocol, "none");
        cfg.retry = quick_retries(PATIENCE * 2);
        let exporter = Exporter::start(cfg).unwrap();
        exporter.export(example_request("wrong-port"));
        // The server's answer races with the request's own writes: an attempt may end in a broken
        // pipe instead, which says nothing about protocols; the retries that follow read the answer.
        let seen = std::cell::RefCell::new(Vec::new());
        let stats = wait_stats(&exporter, "an attempt that read the other protocol's answer", |s| {
            let error = s.last_error.clone().unwrap_or_default();
            if !seen.borrow().contains(&error) {
                seen.borrow_mut().push(error.clone());
            }
            names.iter().all(|name| error.contains(name))
        });
        eprintln!("{protocol} to {wrong_port}: after {} retries: {:?}", stats.retries, seen.borrow());
        exporter.shutdown(Duration::from_millis(100));
    }
    assert!(collector.received().messages.is_empty(), "nothing was delivered: {}", collector.log());
}
