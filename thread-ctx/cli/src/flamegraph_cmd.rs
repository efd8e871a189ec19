//! `thread-ctx flamegraph PROFILE`: a flame graph (or folded stacks) from a
//! pprof profile `record --pprof` wrote, restricted by --trace/--span/--attr:
//! record once, then draw any trace found slow afterwards.

use crate::console::say;
use crate::exit_codes::usage;
use crate::profile_args::{check_writable, FilterArgs};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use thread_ctx_output::{flame, pprof};

#[derive(clap::Args, Debug)]
pub struct FlamegraphArgs {
    /// A profile written by `thread-ctx record --pprof` (gzipped or not).
    pub profile: PathBuf,
    /// Write the SVG flame graph here.
    #[arg(long, short, value_name = "FILE.svg")]
    pub output: Option<PathBuf>,
    /// Write folded stacks here.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    #[command(flatten)]
    pub select: FilterArgs,
}

pub fn run(args: FlamegraphArgs) -> Result<ExitCode> {
    let filter = args.select.filter()?;
    if args.output.is_none() && args.folded.is_none() {
        return Err(usage("--output: give --output FILE.svg and/or --folded FILE"));
    }
    if let Some(p) = &args.output {
        check_writable("--output", p)?;
    }
    if let Some(p) = &args.folded {
        check_writable("--folded", p)?;
    }
    if !args.profile.is_file() {
        let what = if args.profile.exists() { "is not a file" } else { "does not exist" };
        return Err(usage(format!("PROFILE: {} {what}", args.profile.display())));
    }
    // read_file's errors name the file already.
    let profile = pprof::read_file(&args.profile)?;
    args.select.check_selection(&profile, &filter)?;
    let kind = args.select.kind(&profile);
    if let Some(p) = &args.folded {
        let n = flame::write_folded(p, &profile, &filter, kind).context("--folded")?;
        say!("thread-ctx: wrote folded stacks {} ({n} stacks of {}, {}; {})", p.display(), kind.samples_name(), filter.describe(), kind.describe());
    }
    if let Some(p) = &args.output {
        let counted = kind.count_text(&profile, &filter);
        flame::write_svg(p, &profile, &filter, kind, &format!("{counted}, from {}", args.profile.display())).context("--output")?;
        say!("thread-ctx: wrote flame graph {} ({counted}, {})", p.display(), filter.describe());
    }
    Ok(ExitCode::SUCCESS)
}
