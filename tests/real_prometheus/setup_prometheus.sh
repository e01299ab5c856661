#!/usr/bin/env bash
# Fetch Debian's prometheus package with `apt-get download` and unpack it with `dpkg -x` into
# ~/.cache/mtpwatch/prometheus (no root, no install; cached). Prints `export MTPWATCH_PROMETHEUS=PATH`.
#
#   bash tests/real_prometheus/setup_prometheus.sh
set -euo pipefail
CACHE=${MTPWATCH_CACHE:-$HOME/.cache/mtpwatch}/prometheus
BIN=$CACHE/root/usr/bin/prometheus
if [ ! -x "$BIN" ]; then
  mkdir -p "$CACHE/debs"
  cd "$CACHE/debs"
  rm -f prometheus_*.deb
  if ! apt-get download prometheus >"$CACHE/download.log" 2>&1; then
    # No package lists yet (a fresh container): refresh them. Root updates the system lists; anyone
    # else keeps private lists under the cache, which `apt-get download` then reads too.
    if [ "$(id -u)" = 0 ]; then
      apt-get update -q >>"$CACHE/download.log" 2>&1
      apt-get download prometheus >>"$CACHE/download.log" 2>&1
    else
      LISTS=$CACHE/apt-lists
      mkdir -p "$LISTS/partial" "$CACHE/apt-cache/archives/partial"
      OPTS=(-o "Dir::State::Lists=$LISTS" -o "Dir::Cache=$CACHE/apt-cache")
      apt-get "${OPTS[@]}" update -q >>"$CACHE/download.log" 2>&1
      apt-get "${OPTS[@]}" download prometheus >>"$CACHE/download.log" 2>&1
    fi
  fi
  deb=$(ls prometheus_*.deb 2>/dev/null | head -1)
  if [ -z "$deb" ]; then
    echo "error: apt-get download prometheus failed; see $CACHE/download.log" >&2
    tail -5 "$CACHE/download.log" >&2
    exit 1
  fi
  rm -rf "$CACHE/root.tmp"
  dpkg -x "$deb" "$CACHE/root.tmp"
  rm -rf "$CACHE/root"
  mv "$CACHE/root.tmp" "$CACHE/root"
fi
"$BIN" --version 2>&1 | head -1 >&2
echo "export MTPWATCH_PROMETHEUS=$BIN"
