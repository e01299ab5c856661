"""Starting and stopping servers mtpwatch owns.

Owns: process-group ownership and the stop-on-exit registry (`process`), vLLM and simulator command
lines (`vllm_cmd`), start-up log parsing (`logparse`) and the one launcher that starts a server,
follows its log and waits for `/health` (`launcher`), used by `start`, the app and the A/B bench.
May import: `mtpwatch.core.http` (health checks), the standard library.
"""
