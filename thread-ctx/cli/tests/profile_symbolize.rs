//! Symbolizer against a real process: a C program compiled here (frame
//! pointers on) prints the addresses of its own functions; each must resolve
//! to its name, also from inside the function and as a return address.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use thread_ctx_profile::{FrameKind, Symbolizer};

const PROGRAM: &str = r#"
#include <stdio.h>
#include <unistd.h>
__attribute__((noinline)) long burn_alpha(long n) { long x = 0; for (long i = 0; i < n; i++) x += i * 31 % 7; return x; }
__attribute__((noinline)) long burn_beta(long n) { long x = 1; for (long i = 0; i < n; i++) x ^= i * 17 % 5; return x; }
int main(void) {
    printf("alpha %lx\nbeta %lx\n", (unsigned long)&burn_alpha, (unsigned long)&burn_beta);
    printf("ready\n");
    fflush(stdout);
    for (;;) { burn_alpha(1000); burn_beta(1000); usleep(1000); }
}
"#;

#[test]
fn resolves_a_c_programs_functions_by_address() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("profile-sym-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("burn.c"), dir.join("burn"));
    std::fs::write(&src, PROGRAM).unwrap();
    let cc = Command::new("cc").args(["-O1", "-fno-omit-frame-pointer", "-o"]).arg(&exe).arg(&src).output().expect("running cc");
    assert!(cc.status.success(), "expected cc to build the test program: {}", String::from_utf8_lossy(&cc.stderr));

    let mut child = Command::new(&exe).stdout(Stdio::piped()).spawn().unwrap();
    let mut addrs = std::collections::HashMap::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line == "ready" {
            break;
        }
        let (name, hex) = line.split_once(' ').unwrap();
        addrs.insert(name.to_string(), u64::from_str_radix(hex, 16).unwrap());
    }
    let pid = child.id() as i32;
    let mut sym = Symbolizer::new(pid).unwrap();
    let (a, b) = (addrs["alpha"], addrs["beta"]);
    // Leaf at the entry and 4 bytes in; a return address one past the start still names the function.
    let frames = sym.user_frames(&[a, b + 4, a + 1]);
    let _ = child.kill();
    let _ = child.wait();
    let seen: Vec<(FrameKind, &str)> = frames.iter().map(|f| (f.kind, f.name.as_str())).collect();
    assert_eq!(
        seen,
        vec![(FrameKind::Native, "burn_alpha"), (FrameKind::Native, "burn_beta"), (FrameKind::Native, "burn_alpha")],
        "expected the printed addresses to resolve to their functions; frames {frames:#?}"
    );
    assert!(frames[0].file.as_deref().is_some_and(|f| f.ends_with("burn") || f.contains("map_files")), "module {:?}", frames[0].file);
    assert!(
        sym.perf_map_note().is_some_and(|n| n.contains("--perf-basic-prof-only-functions")),
        "a C program has no perf map: expected a note saying so"
    );
}
