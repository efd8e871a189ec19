#!/bin/sh
# Installs the thread-ctx agent on this host as a systemd service, from the agent tarball that
# scripts/release.sh writes (thread-ctx-agent-VERSION-linux-x64.tar.gz, this script beside the
# binary and the unit):
#
#   sudo ./install.sh [--endpoint URL] [--protocol grpc|http/protobuf] [--no-start]
#   sudo ./install.sh --uninstall
#
#   PREFIX/bin/thread-ctx                        the binary (PREFIX: --prefix, default /usr/local)
#   /etc/systemd/system/thread-ctx-agent.service the unit
#   /etc/thread-ctx/agent.env                    its settings; an existing one is kept, with only
#                                                --endpoint/--protocol written into it
#
# Then `systemctl daemon-reload` and `systemctl enable --now thread-ctx-agent` when systemd runs
# this host (not with --no-start or --root). --root DIR installs into DIR instead of / (a staging
# tree or a machine image); the unit still names PREFIX/bin/thread-ctx.
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
root=""
prefix=/usr/local
endpoint=""
protocol=""
start=yes
uninstall=no
unit_name=thread-ctx-agent.service

usage() {
  echo "install.sh: $1" >&2
  echo "usage: install.sh [--endpoint URL] [--protocol grpc|http/protobuf] [--prefix DIR] [--root DIR] [--no-start] [--uninstall]" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --endpoint) [ $# -ge 2 ] || usage "--endpoint needs a URL"; endpoint="$2"; shift 2 ;;
    --protocol) [ $# -ge 2 ] || usage "--protocol needs grpc or http/protobuf"; protocol="$2"; shift 2 ;;
    --prefix) [ $# -ge 2 ] || usage "--prefix needs a directory"; prefix="$2"; shift 2 ;;
    --root) [ $# -ge 2 ] || usage "--root needs a directory"; root="$(cd "$2" && pwd)"; shift 2 ;;
    --no-start) start=no; shift ;;
    --uninstall) uninstall=yes; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage "unknown argument '$1'" ;;
  esac
done
case "$endpoint" in
  ""|http://*) ;;
  *) usage "--endpoint: expected a URL such as http://collector:4317, got '$endpoint'" ;;
esac
case "$protocol" in
  ""|grpc|http/protobuf) ;;
  *) usage "--protocol: expected grpc or http/protobuf, got '$protocol'" ;;
esac
case "$prefix" in
  /*) ;;
  *) usage "--prefix: expected an absolute directory, got '$prefix'" ;;
esac

bin="$prefix/bin/thread-ctx"
unit="/etc/systemd/system/$unit_name"
env_file=/etc/thread-ctx/agent.env
systemd_runs=no
if [ -z "$root" ] && [ -d /run/systemd/system ]; then systemd_runs=yes; fi

if [ "$uninstall" = yes ]; then
  if [ "$systemd_runs" = yes ]; then systemctl disable --now "$unit_name" 2>/dev/null || true; fi
  rm -f "$root$unit" "$root$bin"
  if [ "$systemd_runs" = yes ]; then systemctl daemon-reload; fi
  echo "install.sh: removed $root$unit and $root$bin (kept $root$env_file)"
  exit 0
fi

for f in thread-ctx thread-ctx-agent.service agent.env; do
  [ -f "$here/$f" ] || { echo "install.sh: $here/$f is missing: run this script from the unpacked agent tarball" >&2; exit 1; }
done
if [ -z "$root" ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: installing into / needs root (run it with sudo), or give --root DIR" >&2
  exit 5
fi

install -d -m 0755 "$root$prefix/bin" "$root/etc/systemd/system" "$root/etc/thread-ctx"
# A new file moved over the old one: a running agent keeps its binary until it restarts.
install -m 0755 "$here/thread-ctx" "$root$bin.new"
mv -f "$root$bin.new" "$root$bin"
sed "s|/usr/local/bin/thread-ctx|$bin|" "$here/thread-ctx-agent.service" > "$root$unit.new"
chmod 0644 "$root$unit.new"
mv -f "$root$unit.new" "$root$unit"
if [ ! -f "$root$env_file" ]; then
  install -m 0644 "$here/agent.env" "$root$env_file"
fi
set_setting() { # NAME VALUE: replaces the line NAME=... of the settings file (or appends it)
  if grep -q "^$1=" "$root$env_file"; then
    sed "s|^$1=.*|$1=$2|" "$root$env_file" > "$root$env_file.new"
    cat "$root$env_file.new" > "$root$env_file"
    rm -f "$root$env_file.new"
  else
    echo "$1=$2" >> "$root$env_file"
  fi
}
[ -z "$endpoint" ] || set_setting OTEL_EXPORTER_OTLP_ENDPOINT "$endpoint"
[ -z "$protocol" ] || set_setting OTEL_EXPORTER_OTLP_PROTOCOL "$protocol"

echo "install.sh: installed $root$bin ($("$root$bin" --version)), $root$unit and $root$env_file"
if [ "$start" = yes ] && [ "$systemd_runs" = yes ]; then
  systemctl daemon-reload
  systemctl enable "$unit_name"
  systemctl restart "$unit_name" # starts it, or restarts a running one on the new binary
  echo "install.sh: $unit_name enabled and started; its log: journalctl -u $unit_name"
else
  echo "install.sh: to start it: systemctl daemon-reload && systemctl enable --now $unit_name"
fi
