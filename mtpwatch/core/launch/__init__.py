"""Starting and stopping servers mtpwatch owns.

Owns: process-group ownership and the stop-on-exit registry (`process`), vLLM and simulator command
lines (`vllm_cmd`), start-up log parsing (`logparse`) and the one launcher that starts a server,
follows its log and waits for `/health` (`launcher`), used by `start`, the app and the A/B bench;
the memory plan of launched servers (`memplan`, pure), what one server needs (`memneeds`), the GPU's
memory (`gpumem`) and the servers of an experiment with their command lines (`servers`). May import:
`mtpwatch.core.http` (health checks), `mtpwatch.core.roofline` (model configs, the GPU table,
/proc/meminfo), the standard library."""
