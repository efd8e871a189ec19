//! `inspect`, `dump` and `validate`: what discovery finds in a process, and
//! every thread's record read through ptrace (no eBPF needed).

use crate::console::{print_stdout, println_stdout, say};
use crate::exit_codes::{TargetError, EXIT_MALFORMED, EXIT_READER_FAILED};
use crate::render;
use crate::target::{self, permission_hint, Access};
use anyhow::Result;
use clap::Args;
use std::process::ExitCode;
use thread_ctx_discovery::error::ErrorKind;
use thread_ctx_discovery::ptrace::{read_all_threads, State};

#[derive(Args)]
pub struct PidArgs {
    /// Target process id.
    #[arg(value_parser = clap::value_parser!(i32).range(1..))]
    pub pid: i32,
    /// Machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn inspect(a: PidArgs) -> Result<ExitCode> {
    let d = target::discover(a.pid, Access::Ptrace)?;
    if a.json {
        println_stdout(&serde_json::to_string_pretty(&render::discovery_json(&d))?)?;
    } else {
        print_stdout(&render::discovery_text(&d))?;
    }
    if d.writers.is_empty() {
        return Err(target::no_writer(d.no_writer(), Access::Ptrace));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn dump(a: PidArgs, validate: bool) -> Result<ExitCode> {
    let d = target::discover(a.pid, Access::Ptrace)?;
    if d.writers.is_empty() {
        if a.json {
            let mut j = render::discovery_json(&d);
            j["threads"] = serde_json::json!([]);
            j["verdict"] = "no_symbol".into();
            println_stdout(&serde_json::to_string_pretty(&j)?)?;
        }
        return Err(target::no_writer(d.no_writer(), Access::Ptrace));
    }
    let threads = read_all_threads(&d).map_err(|e| match e.kind() {
        ErrorKind::NoPermission => {
            TargetError { kind: ErrorKind::NoPermission, message: format!("{e}: {}", permission_hint(a.pid, Access::Ptrace)) }.into()
        }
        _ => anyhow::Error::new(e).context(format!("reading the threads of process {}", a.pid)),
    })?;
    // ptrace refused on every thread: that is the reader's permission, not the target's state.
    if !threads.is_empty() && threads.iter().all(|t| t.state == State::Error && t.error_kind == Some(ErrorKind::NoPermission)) {
        if a.json {
            print_threads_json(&d, &threads, "unreadable")?;
        }
        let message = format!("process {}: ptrace was refused on every thread: {}", a.pid, permission_hint(a.pid, Access::Ptrace));
        return Err(TargetError { kind: ErrorKind::NoPermission, message }.into());
    }
    let malformed = threads.iter().any(|t| t.state == State::Malformed);
    let unreadable = threads.iter().any(|t| t.state == State::Error);
    let verdict = match (malformed, unreadable) {
        (true, _) => "malformed",
        (false, true) => "unreadable",
        _ => "ok",
    };
    if a.json {
        print_threads_json(&d, &threads, verdict)?;
    } else {
        let verdict_line = if validate { format!("verdict: {verdict}\n") } else { String::new() };
        print_stdout(&format!("{}{}{verdict_line}", render::discovery_text(&d), render::threads_text(&threads)))?;
    }
    if !validate {
        return Ok(ExitCode::SUCCESS);
    }
    Ok(match verdict {
        "malformed" => ExitCode::from(EXIT_MALFORMED),
        "unreadable" => {
            say!("thread-ctx: some threads could not be read (see their problems); validation is incomplete");
            ExitCode::from(EXIT_READER_FAILED)
        }
        _ => ExitCode::SUCCESS,
    })
}

fn print_threads_json(d: &thread_ctx_discovery::Discovery, threads: &[thread_ctx_discovery::ptrace::ThreadRecord], verdict: &str) -> Result<()> {
    let mut j = render::discovery_json(d);
    j["threads"] = serde_json::to_value(threads)?;
    j["verdict"] = verdict.into();
    println_stdout(&serde_json::to_string_pretty(&j)?)?;
    Ok(())
}
