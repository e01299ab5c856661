#!/bin/sh
# The UI tests on the lowest Textual the runtime pin allows (`textual>=8.2,<9`: 8.2.0), in a throwaway
# venv (removed on exit). The snapshot tests are left out: their SVGs are made with the pinned 8.2.8.
# On 8.2.0 the fast paint is off (not a checked release: mtpwatch/ui/fastpaint/gate.py), so this runs
# the plain-Textual paint; tests that hold the fast paint itself need it on and skip, saying so.
#   sh tests/lowest_textual.sh            # LOWEST_TEXTUAL=8.2.1 sh tests/lowest_textual.sh: another
#   sh tests/lowest_textual.sh -x -k fit  # extra arguments go to pytest
set -eu
cd "$(dirname "$0")/.."
lowest=${LOWEST_TEXTUAL:-8.2.0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev]'
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "textual==$lowest"
"$tmp/venv/bin/python" -c "import textual, importlib.metadata as m; print('textual', m.version('textual'))"
"$tmp/venv/bin/python" -m pytest -q -p no:randomly tests/ui -k "not snapshot" "$@"
