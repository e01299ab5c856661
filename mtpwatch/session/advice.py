"""The k advisor's line in the A/B view: from the last prompt on both arms, which k would be best.

Reads the prompt window of each arm (`Source.state().prompt_rates`): the speculating arm's marginal
per-position acceptance and mean step time (ITL mean: vLLM observes one ITL per engine step), and
the baseline's (one token per step). `core.sweeps.advisor.advise` does the arithmetic. The console
sends one prompt at a time, so the advice is for concurrency 1, and the line says so; what the
speculating server runs (`core.sweeps.engine`: its command line when mtpwatch started it, the method
from its log, its /version) can limit the advice, and the line says that too.
"""

from __future__ import annotations

import dataclasses

from mtpwatch.config import ServerSpec
from mtpwatch.core.http.engines import EngineInfo
from mtpwatch.core.provenance import spec_config_from_argv
from mtpwatch.core.sweeps.advisor import Advice, advise
from mtpwatch.core.sweeps.engine import EngineMode, engine_mode, llamacpp_synthetic
from mtpwatch.session.sources import Source


def engine_mode_of(
    spec: ServerSpec, engine_info: EngineInfo | None, spec_method: str | None, version: str | None
) -> EngineMode:
    """What a server runs, from its command line (servers mtpwatch started), llama-server's /props
    (`engine_info`), the method from its log and its version."""
    argv = spec.launch.argv if spec.launch is not None else None
    config = spec_config_from_argv(argv) if argv is not None else None
    synthetic = engine_info.synthetic if engine_info is not None else None
    config = config or llamacpp_synthetic(argv, synthetic)
    return engine_mode(config, method=spec_method, vllm_version=version)


def engine_of(feed: Source) -> EngineMode:
    """What the feed's server runs, from its command line (servers mtpwatch started) and log."""
    state = feed.state()
    return engine_mode_of(state.spec, state.engine_info, state.spec_method, state.version)


def lossy_reason(speculative: Source) -> str | None:
    """Why the speculating server's output may differ from the baseline's by design ('fly
    verification is lossy'), or None where its verification keeps the target's output or is unknown."""
    mode = engine_of(speculative)
    return f"{mode.verification} verification is lossy" if mode.lossless is False else None


def advice_for(baseline: Source, speculative: Source) -> Advice | None:
    """Predictions for k' ≤ the running k from the last prompt; None until both arms measured one."""
    base, spec = baseline.state().prompt_rates, speculative.state().prompt_rates
    if base is None or spec is None or not (spec.per_position and base.mean_step_s and spec.mean_step_s):
        return None
    try:
        advice = advise(spec.per_position, spec.mean_step_s, base.mean_step_s)
    except ValueError:
        return None
    mode = engine_of(speculative)
    return dataclasses.replace(advice, caveat=mode.caveat(), withheld=mode.advice_withheld)
