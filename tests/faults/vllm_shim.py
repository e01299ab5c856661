"""A stand-in for the `vllm` command: `vllm_shim.py serve MODEL [vLLM flags] [sim flags]` runs the simulator.

`mtpwatch start --vllm "python tests/faults/vllm_shim.py"` then launches, watches and stops a
simulator exactly as it would a vLLM: same command line, same log lines, same process handling.
The speculative config's ``num_speculative_tokens`` becomes the simulator's ``-k``; without a
config the simulator runs its no-speculation twin. Other arguments go to `mtpwatch sim` as they are
(e.g. ``--startup-delay 30`` or ``--speed 20``). An unknown ``--no-such-flag`` fails as vLLM does.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "serve":
        print("usage: vllm_shim.py serve MODEL [flags]", file=sys.stderr)
        return 2
    out = [sys.executable, "-m", "mtpwatch", "sim", "--served-model-name", argv[1]]
    spec = False
    it = iter(argv[2:])
    for arg in it:
        if arg == "--speculative-config":
            config = json.loads(next(it))
            spec = True
            if "num_speculative_tokens" in config:
                out += ["-k", str(config["num_speculative_tokens"])]
        elif arg == "--no-such-flag":
            print("vllm: error: unrecognized arguments: --no-such-flag", file=sys.stderr)
            return 2
        else:
            out.append(arg)
    if not spec:
        out.append("--no-spec")
    os.execv(sys.executable, out)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
