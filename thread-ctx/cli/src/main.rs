//! `thread-ctx`: the command-line front of the library's pipeline.
//!
//! Argument parsing: clap derive (`Cli` below). Each subcommand is one variant of
//! `Command`, its args a struct in its own file; the handler returns the process
//! exit code, or an error whose exit code exit_codes.rs finds (clap's own usage
//! errors exit 2, like ours).

#[cfg(feature = "ebpf")]
mod agent_cmd;
#[cfg(feature = "ebpf")]
mod agent_metrics;
mod console;
#[cfg(feature = "ebpf")]
mod duration;
mod exit_codes;
mod flamegraph_cmd;
mod http_request;
mod inspect_cmd;
#[cfg(feature = "ebpf")]
mod metrics_server;
mod page;
mod profile_args;
#[cfg(feature = "ebpf")]
mod record_cmd;
mod render;
mod report_cmd;
mod report_tally;
#[cfg(feature = "ebpf")]
mod sampling_args;
mod shim_parent;
mod target;
mod traces_cmd;

use clap::{Parser, Subcommand};
use exit_codes::{code_of, EXIT_CODES_HELP};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "thread-ctx",
    version,
    about = "Reads OTEP 4947 thread contexts (otel_thread_ctx_v1) of live processes and profiles them",
    after_help = EXIT_CODES_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print each writer object, its TLS access model and resolved access, and the process context.
    #[command(after_help = EXIT_CODES_HELP)]
    Inspect(inspect_cmd::PidArgs),
    /// Stop each thread in turn and print its record.
    #[command(after_help = EXIT_CODES_HELP)]
    Dump(inspect_cmd::PidArgs),
    /// Like dump; exit 1 if any record is malformed.
    #[command(after_help = EXIT_CODES_HELP)]
    Validate(inspect_cmd::PidArgs),
    /// Sample the process's CPU with the eBPF sampler, tagging samples with their trace and span.
    #[cfg(feature = "ebpf")]
    #[command(after_help = EXIT_CODES_HELP)]
    Record(record_cmd::RecordArgs),
    /// Draw a flame graph of one trace, span or attribute value from a `record --pprof` profile.
    #[command(after_help = EXIT_CODES_HELP)]
    Flamegraph(flamegraph_cmd::FlamegraphArgs),
    /// Profile every process that publishes span context, continuously, and stream OTLP/Profiles.
    #[cfg(feature = "ebpf")]
    Agent(agent_cmd::AgentArgs),
    /// Summarize what an OpenTelemetry Collector received (its file exporter's output): CPU per
    /// route, trace or span, links, resource, build ids; flame graphs of it.
    #[command(after_help = EXIT_CODES_HELP)]
    Report(report_cmd::ReportArgs),
    /// A command this build does not have: built without feature `ebpf`, it cannot sample.
    #[cfg(not(feature = "ebpf"))]
    #[command(external_subcommand)]
    Missing(Vec<String>),
}

fn main() -> ExitCode {
    let command = Cli::parse().command;
    shim_parent::end_with_shim();
    let result = match command {
        Command::Inspect(a) => inspect_cmd::inspect(a),
        Command::Dump(a) => inspect_cmd::dump(a, false),
        Command::Validate(a) => inspect_cmd::dump(a, true),
        #[cfg(feature = "ebpf")]
        Command::Record(a) => record_cmd::run(a),
        Command::Flamegraph(a) => flamegraph_cmd::run(a),
        #[cfg(feature = "ebpf")]
        Command::Agent(a) => agent_cmd::run(a),
        Command::Report(a) => report_cmd::run(a),
        #[cfg(not(feature = "ebpf"))]
        Command::Missing(args) => Err(exit_codes::not_built(&args[0])),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            console::say!("thread-ctx: error: {e:#}");
            ExitCode::from(code_of(&e))
        }
    }
}
