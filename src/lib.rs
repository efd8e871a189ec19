//! otel-thread-ctx: publishes the active OpenTelemetry span of each JS thread as an OTEP 4947
//! Thread-Local Context Record behind the exported TLS symbol `otel_thread_ctx_v1`.

// Every unsafe operation sits in its own `unsafe` block with a `// SAFETY:` comment, also inside
// unsafe functions.
#![deny(unsafe_op_in_unsafe_fn)]
// Unit-test builds leave out the Node-API layer, which is what uses most of the helpers.
#![cfg_attr(test, allow(dead_code))]

mod ids;
mod page;
mod process_ctx;
mod record;
mod thread_state;
mod tls;

// The Node-API surface is left out of unit-test builds: those run as a plain executable.
#[cfg(not(test))]
mod js_api;
