//! `inspect`, `dump` and `validate`: what discovery finds in a process, and
//! every thread's record read through ptrace (no eBPF needed).

use crate::exit_codes::{code_of, discover_live, no_symbol, permission_hint, Failure, EXIT_MALFORMED, EXIT_NO_PERMISSION, EXIT_READER_FAILED};
use crate::render;
use anyhow::Result;
use clap::Args;
use std::process::ExitCode;
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
    let d = discover_live(a.pid)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&render::discovery_json(&d))?);
    } else {
        print!("{}", render::discovery_text(&d));
    }
    if d.writers.is_empty() {
        return Err(no_symbol(&d));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn dump(a: PidArgs, validate: bool) -> Result<ExitCode> {
    let d = discover_live(a.pid)?;
    if d.writers.is_empty() {
        if a.json {
            let mut j = render::discovery_json(&d);
            j["threads"] = serde_json::json!([]);
            j["verdict"] = "no_symbol".into();
            println!("{}", serde_json::to_string_pretty(&j)?);
        }
        return Err(no_symbol(&d));
    }
    let threads = read_all_threads(&d).map_err(anyhow::Error::from).map_err(|e| match code_of(&e) {
        EXIT_NO_PERMISSION => Failure { code: EXIT_NO_PERMISSION, message: format!("{e}: {}", permission_hint(a.pid)) }.into(),
        _ => e.context(format!("reading the threads of process {}", a.pid)),
    })?;
    // ptrace refused on every thread: that is the reader's permission, not the target's state.
    if !threads.is_empty() && threads.iter().all(|t| t.state == State::Error && t.problems.iter().any(|p| p.contains("Operation not permitted"))) {
        if a.json {
            print_threads_json(&d, &threads, "unreadable")?;
        }
        return Err(Failure {
            code: EXIT_NO_PERMISSION,
            message: format!("process {}: ptrace was refused on every thread: {}", a.pid, permission_hint(a.pid)),
        }
        .into());
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

fn print_threads_json(d: &thread_ctx_discovery::Discovery, threads: &[thread_ctx_discovery::ptrace::ThreadRecord], verdict: &str) -> Result<()> {
    let mut j = render::discovery_json(d);
    j["threads"] = serde_json::to_value(threads)?;
    j["verdict"] = verdict.into();
    println!("{}", serde_json::to_string_pretty(&j)?);
    Ok(())
}
