//! `thread-ctx` CLI.
//!
//! Argument parsing: clap derive (`Cli` below). Each subcommand is one variant of
//! `Command`, its args a struct; the handler returns the process exit code.
//! Exit codes: 0 ok; 1 `validate` found a malformed record; 2 the process has no
//! `otel_thread_ctx_v1` (inspect/dump/validate); 3 the reader itself failed
//! (process gone, permission denied...); clap's own usage errors exit 2.
//!
//! `record`'s arguments are `thread_ctx::record_cmd::RecordArgs` (a `clap::Args`
//! struct owned by the sampler, pid first) and its handler is
//! `record_cmd::run(args) -> anyhow::Result<ExitCode>`; this file only dispatches.

mod render;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;
use thread_ctx::cli_support::{discover_live, report_no_symbol, EXIT_MALFORMED, EXIT_NO_SYMBOL, EXIT_READER_FAILED};
use thread_ctx::thread_reader::{read_all_threads, State};

#[derive(Parser)]
#[command(name = "thread-ctx", version, about = "Reads OTEP 4947 thread contexts (otel_thread_ctx_v1) of a live process")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print each writer object, its TLS access model and resolved access, and the process context.
    Inspect(PidArgs),
    /// Stop each thread in turn and print its record.
    Dump(PidArgs),
    /// Like dump; exit 1 if any record is malformed, 2 if there is no otel_thread_ctx_v1.
    Validate(PidArgs),
    /// Sample the process's CPU with the eBPF sampler, tagging samples with their trace and span.
    Record(thread_ctx::record_cmd::RecordArgs),
    /// Draw a flame graph of one trace, span or attribute value from a `record --pprof` profile.
    Flamegraph(thread_ctx::flamegraph_cmd::FlamegraphArgs),
}

#[derive(Args)]
struct PidArgs {
    /// Target process id.
    #[arg(value_parser = clap::value_parser!(i32).range(1..))]
    pid: i32,
    /// Machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}


fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("thread-ctx: error: {e:#}");
            ExitCode::from(EXIT_READER_FAILED)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Inspect(a) => inspect(a),
        Command::Dump(a) => dump(a, false),
        Command::Validate(a) => dump(a, true),
        Command::Record(a) => thread_ctx::record_cmd::run(a),
        Command::Flamegraph(a) => thread_ctx::flamegraph_cmd::run(a),
    }
}

fn inspect(a: PidArgs) -> Result<ExitCode> {
    let d = discover_live(a.pid)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&render::discovery_json(&d))?);
    } else {
        print!("{}", render::discovery_text(&d));
    }
    Ok(if d.writers.is_empty() { ExitCode::from(EXIT_NO_SYMBOL) } else { ExitCode::SUCCESS })
}

fn dump(a: PidArgs, validate: bool) -> Result<ExitCode> {
    let d = discover_live(a.pid)?;
    if d.writers.is_empty() {
        if a.json {
            let mut j = render::discovery_json(&d);
            j["threads"] = serde_json::json!([]);
            j["verdict"] = "no_symbol".into();
            println!("{}", serde_json::to_string_pretty(&j)?);
        }
        report_no_symbol(a.pid);
        return Ok(ExitCode::from(EXIT_NO_SYMBOL));
    }
    let threads = read_all_threads(&d).with_context(|| format!("reading the threads of process {}", a.pid))?;
    let malformed = threads.iter().any(|t| t.state == State::Malformed);
    let unreadable = threads.iter().any(|t| t.state == State::Error);
    let verdict = match (malformed, unreadable) {
        (true, _) => "malformed",
        (false, true) => "unreadable",
        _ => "ok",
    };
    if a.json {
        let mut j = render::discovery_json(&d);
        j["threads"] = serde_json::to_value(&threads)?;
        j["verdict"] = verdict.into();
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        print!("{}", render::discovery_text(&d));
        print!("{}", render::threads_text(&threads));
        if validate {
            println!("verdict: {verdict}");
        }
    }
    if !validate {
        return Ok(ExitCode::SUCCESS);
    }
    Ok(match verdict {
        "malformed" => ExitCode::from(EXIT_MALFORMED),
        "unreadable" => {
            eprintln!("thread-ctx: some threads could not be read (see their problems); validation is incomplete");
            ExitCode::from(EXIT_READER_FAILED)
        }
        _ => ExitCode::SUCCESS,
    })
}
