#!/usr/bin/env bash
# Fetch Debian's victoria-metrics package with `apt-get download` and unpack it with `dpkg -x` into
# ~/.cache/mtpwatch/victoria-metrics (no root, no install; cached), as setup_prometheus.sh does for
# Prometheus. Prints `export MTPWATCH_VICTORIA=PATH`.
#
#   bash tests/real_prometheus/setup_victoria.sh
set -euo pipefail
CACHE=${MTPWATCH_CACHE:-$HOME/.cache/mtpwatch}/victoria-metrics
BIN=$CACHE/root/usr/bin/victoria-metrics
if [ ! -x "$BIN" ]; then
  mkdir -p "$CACHE/debs"
  cd "$CACHE/debs"
  rm -f victoria-metrics_*.deb
  if ! apt-get download victoria-metrics >"$CACHE/download.log" 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      apt-get update -q >>"$CACHE/download.log" 2>&1
      apt-get download victoria-metrics >>"$CACHE/download.log" 2>&1
    else
      LISTS=$CACHE/apt-lists
      mkdir -p "$LISTS/partial" "$CACHE/apt-cache/archives/partial"
      OPTS=(-o "Dir::State::Lists=$LISTS" -o "Dir::Cache=$CACHE/apt-cache")
      apt-get "${OPTS[@]}" update -q >>"$CACHE/download.log" 2>&1
      apt-get "${OPTS[@]}" download victoria-metrics >>"$CACHE/download.log" 2>&1
    fi
  fi
  deb=$(ls victoria-metrics_*.deb 2>/dev/null | head -1)
  if [ -z "$deb" ]; then
    echo "error: apt-get download victoria-metrics failed; see $CACHE/download.log" >&2
    tail -5 "$CACHE/download.log" >&2
    exit 1
  fi
  rm -rf "$CACHE/root.tmp"
  dpkg -x "$deb" "$CACHE/root.tmp"
  rm -rf "$CACHE/root"
  mv "$CACHE/root.tmp" "$CACHE/root"
fi
"$BIN" --version 2>&1 | head -1 >&2
echo "export MTPWATCH_VICTORIA=$BIN"
