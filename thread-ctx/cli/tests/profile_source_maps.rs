//! Source maps, sampled from outside (eBPF, as root): a TypeScript service
//! (tests/fixtures/ts_service) compiled by the project's own `tsc`, once with
//! map files next to the scripts and once with inline data-URL maps, runs
//! with plain `node`; its frames must name the `.ts` files and lines in the
//! summary, the pprof (decoded by protoc), folded stacks and `--frames` jsonl,
//! the generated position kept beside them. Its two hot functions live in two
//! files both named `index.ts`: the summary tells them apart.

use thread_ctx_test_support::process as common;
mod profile_common;

use common::*;
use profile_common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ts_src(rel: &str) -> PathBuf {
    fixture("ts_service/src").join(rel)
}

/// 1-based line of the line of `file` (under the fixture's src/) ending with `marker`.
fn ts_line(file: &str, marker: &str) -> i64 {
    let src = std::fs::read_to_string(ts_src(file)).unwrap();
    src.lines().position(|l| l.ends_with(marker)).unwrap_or_else(|| panic!("no {marker} in {file}")) as i64 + 1
}

/// Compiles the fixture with the project's tsc into `out` (`map`: --sourceMap or --inlineSourceMap).
fn compile(out: &Path, map: &str) {
    let tsc = package_dir().join("node_modules/.bin/tsc");
    assert!(tsc.exists(), "expected TypeScript's tsc at {} (a devDependency): run `npm ci`", tsc.display());
    let r = Command::new(&tsc).arg("-p").arg(fixture("ts_service/tsconfig.json")).arg("--outDir").arg(out).arg(map).output().unwrap();
    assert!(r.status.success(), "tsc {map} failed: {}{}", String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
}

fn service(dist: &Path, cwd: &Path) -> WriterProcess {
    let mut cmd = node_command(&dist.join("service.js"), &[], &[package_dir().to_str().unwrap()], &[]);
    cmd.current_dir(cwd);
    start_writer(cmd, false)
}

/// Records `pid` until `rankProducts` has `min` samples (at most 8 recordings of 2 s, added up; the
/// machine may be busy): its samples by (file, line), and the last recording's summary and notes.
fn record_ts(pid: i32, dir: &Path, tag: &str, min: i64) -> (BTreeMap<(String, i64), i64>, PprofView, String, String) {
    let mut by_line = BTreeMap::new();
    let mut last = None;
    for attempt in 1..=8 {
        let pprof = dir.join(format!("{tag}-{attempt}.pb.gz"));
        let folded = dir.join(format!("{tag}-{attempt}.folded"));
        let pid = pid.to_string();
        let r = thread_ctx(&[
            "record",
            &pid,
            "--hz",
            "499",
            "--duration",
            "2s",
            "--pprof",
            pprof.to_str().unwrap(),
            "--folded",
            folded.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "record failed: {}", r.stderr);
        let view = decode_pprof(&pprof);
        for s in &view.samples {
            if let Some(i) = s.functions.iter().position(|f| f == "rankProducts") {
                let file = view.functions["rankProducts"].0.clone();
                *by_line.entry((file, s.lines[i])).or_default() += s.values["samples"];
            }
        }
        let folded = std::fs::read_to_string(&folded).unwrap();
        assert!(folded.contains("rankProducts ") && folded.contains("routes/index.ts:"), "folded stacks name the .ts function:\n{folded}");
        last = Some((view, r.stdout, r.stderr));
        if by_line.values().sum::<i64>() >= min {
            break;
        }
        let _ = writeln_stderr(&format!("{tag}: {} rankProducts samples after recording {attempt}; recording again", by_line.values().sum::<i64>()));
    }
    let (view, summary, notes) = last.unwrap();
    (by_line, view, summary, notes)
}

#[test]
fn a_typescript_service_is_named_by_its_ts_files_and_lines() {
    let test = "a_typescript_service_is_named_by_its_ts_files_and_lines";
    if !ebpf_or_skip(test) {
        return;
    }
    let _one = one_at_a_time();
    let dir = scratch("profile-source-maps");
    let (loop_a, loop_b) = (ts_line("routes/index.ts", "// LOOP-A"), ts_line("routes/index.ts", "// LOOP-B"));
    let start = ts_line("routes/index.ts", "export function rankProducts(n: number): number {");
    let score = ts_line("lib/index.ts", "// SCORE");
    let routes_ts = ts_src("routes/index.ts").display().to_string();

    // Map files next to the scripts.
    let dist = dir.join("dist-files");
    compile(&dist, "--sourceMap");
    assert!(dist.join("routes/index.js.map").exists(), "tsc wrote map files");
    let w = service(&dist, &dir);
    let (by_line, view, summary, notes) = record_ts(w.pid, &dir, "files", 200);
    let total: i64 = by_line.values().sum();
    let _ = writeln_stderr(&format!("rankProducts samples by (file, line) (LOOP-A {loop_a}, LOOP-B {loop_b}): {by_line:?}"));
    assert!(total >= 200, "expected 200 rankProducts samples within 8 recordings, got {total}: {by_line:?}");
    assert!(by_line.keys().all(|(f, _)| *f == routes_ts), "every rankProducts frame names {routes_ts}: {by_line:?}");
    let on = |l: i64| by_line.get(&(routes_ts.clone(), l)).copied().unwrap_or(0);
    assert!((on(loop_a) + on(loop_b)) * 100 >= total * 80, "the two .ts loop lines hold >= 80% of {total} samples: {by_line:?}");
    assert!(on(loop_a) * 100 >= total * 15 && on(loop_b) * 100 >= total * 15, "each loop holds >= 15%: {by_line:?}");
    let (file, line) = &view.functions["rankProducts"];
    assert_eq!((file.as_str(), *line), (routes_ts.as_str(), start), "the function starts at its .ts line");
    let generated = view.strings.iter().find(|s| s.starts_with("rankProducts (") && s.contains("dist-files/routes/index.js:"));
    assert!(generated.is_some(), "the pprof keeps the generated script as the function's system name: {:?}", view.strings);
    assert!(summary.contains("rankProducts (routes/index.ts:"), "the summary tells routes/index.ts from lib/index.ts:\n{summary}");
    assert!(
        summary.contains(&format!("scoreAll (lib/index.ts:{score})")) || !summary.contains("/score"),
        "scoreAll is named by lib/index.ts and its loop line:\n{summary}"
    );
    assert!(!notes.contains("source map of"), "every map was usable: {notes}");

    // jsonl --frames: the .ts position, and the generated one beside it.
    let r = thread_ctx_until(&["record", &w.pid.to_string(), "--hz", "199", "--duration", "20s", "--format", "jsonl", "--frames"], |out| {
        out.is_some_and(|o| o.contains("\"rankProducts\""))
    });
    assert_eq!(r.code, 0, "record --frames failed: {}", r.stderr);
    let frame = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .flat_map(|v| v["frames"].as_array().cloned().unwrap_or_default())
        .find(|f| f["name"] == "rankProducts")
        .expect("a rankProducts frame in the jsonl");
    assert_eq!((frame["file"].as_str(), frame["function_line"].as_i64()), (Some(routes_ts.as_str()), Some(start)), "{frame}");
    let g = &frame["generated"];
    assert!(g["file"].as_str().is_some_and(|f| f.ends_with("dist-files/routes/index.js")) && g["line"].as_i64().is_some(), "{frame}");
    drop(w);

    // Inline data-URL maps: the same names.
    let dist = dir.join("dist-inline");
    compile(&dist, "--inlineSourceMap");
    assert!(!dist.join("routes/index.js.map").exists() && std::fs::read_to_string(dist.join("routes/index.js")).unwrap().contains("base64,"));
    let w = service(&dist, &dir);
    let (by_line, _, summary, _) = record_ts(w.pid, &dir, "inline", 100);
    assert!(by_line.keys().all(|(f, _)| *f == routes_ts), "inline maps name {routes_ts} too: {by_line:?}");
    let total: i64 = by_line.values().sum();
    let on = |l: i64| by_line.get(&(routes_ts.clone(), l)).copied().unwrap_or(0);
    assert!((on(loop_a) + on(loop_b)) * 100 >= total * 80, "the loop lines hold >= 80% of {total} samples: {by_line:?}");
    assert!(summary.contains("rankProducts (routes/index.ts:"), "{summary}");
}
