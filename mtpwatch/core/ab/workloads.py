"""Benchmark workloads: the built-in prompt sets and loaders for the user's own prompt files.

Built-in sets live in `mtpwatch/data/prompts/*.jsonl` (written for mtpwatch): long-form
explanations in Japanese (~200 characters) and English (~150 words) with max_tokens 256, short
3-shot multiple-choice questions answered by one label with max_tokens 8, code and math.

User files are JSONL, one object per line. Accepted shapes:

- mtpwatch's own: ``{"prompt": "...", "category": "...", "max_tokens": 128, "id": "..."}``
  (only ``prompt`` is required; ``question`` or ``text`` may stand for it);
- SPEED-Bench style (the qualitative/throughput splits exported to JSONL):
  ``{"question_id": "...", "category": "coding", "turns": ["first user turn", ...]}``; the first
  turn is the prompt (later turns depend on the model's answer, so they are not replayed);
- `vllm bench serve`'s custom dataset (``--dataset-name custom``): ``{"prompt": "...",
  "output_tokens": 128}``; ``output_tokens`` becomes the prompt's max_tokens;
- ShareGPT style, as JSONL or as one JSON array (the file `vllm bench serve --dataset-name
  sharegpt` reads): ``{"id": "...", "conversations": [{"from": "human", "value": "..."},
  {"from": "gpt", "value": "..."}]}``; the first human turn is the prompt (later turns depend on
  the model's answers). OpenAI-style ``"messages": [{"role": "user", "content": "..."}]`` works the
  same way. The recorded answer's length is not used as max_tokens (that needs the model's
  tokenizer); use --max-tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from mtpwatch.core.jsonout import JsonFields

#: Built-in set name -> the data files it is made of.
BUILTIN_SETS: dict[str, tuple[str, ...]] = {
    "long": ("long_ja.jsonl", "long_en.jsonl"),
    "long-ja": ("long_ja.jsonl",),
    "long-en": ("long_en.jsonl",),
    "short": ("short.jsonl",),
    "code": ("code.jsonl",),
    "math": ("math.jsonl",),
    "all": ("long_ja.jsonl", "long_en.jsonl", "short.jsonl", "code.jsonl", "math.jsonl"),
}

DEFAULT_MAX_TOKENS = 256


class WorkloadError(ValueError):
    """A prompt file that cannot be used; `str()` is one line naming the file and line."""


@dataclass(frozen=True, slots=True)
class Prompt(JsonFields):
    id: str
    """Stable name used in reports ('ja-bandwidth', 'speed-0042', 'my.jsonl:3')."""
    text: str
    """The prompt sent as-is (completions) or as the single user message (chat)."""
    category: str
    """Results are also reported per category."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    """Output cap; the bench's --max-tokens / --lengths override it."""


_USER_ROLES = ("human", "user")


def _first_user_turn(turns: Any, where: str) -> str:
    """The first human/user message of a ShareGPT `conversations` or OpenAI `messages` list."""
    if not isinstance(turns, list) or not turns:
        raise WorkloadError(f"{where}: 'conversations'/'messages' must be a non-empty list")
    for turn in turns:
        if not isinstance(turn, dict):
            raise WorkloadError(f"{where}: each conversation turn must be an object")
        role = turn.get("from", turn.get("role"))
        if isinstance(role, str) and role.lower() in _USER_ROLES:
            value = turn.get("value", turn.get("content"))
            if not isinstance(value, str):
                raise WorkloadError(f"{where}: the first user turn has no text")
            return value
    raise WorkloadError(f"{where}: no human/user turn in the conversation")


def _prompt_from_obj(obj: Any, *, source: str, index: int) -> Prompt:
    where = f"{source}:{index}"
    if not isinstance(obj, dict):
        raise WorkloadError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    text: Any = next((obj[key] for key in ("prompt", "question", "text") if key in obj), None)
    for key in ("conversations", "conversation", "messages"):
        if text is None and key in obj:
            text = _first_user_turn(obj[key], where)
    if text is None and "turns" in obj:
        turns = obj["turns"]
        if not isinstance(turns, list) or not turns:
            raise WorkloadError(f"{where}: 'turns' must be a non-empty list of strings")
        text = turns[0]
    if text is None:
        raise WorkloadError(
            f"{where}: no prompt text (expected 'prompt', 'turns', 'conversations', 'messages', "
            "'question' or 'text')"
        )
    if not isinstance(text, str) or not text.strip():
        raise WorkloadError(f"{where}: the prompt must be a non-empty string")
    category = obj.get("category") or "default"
    if not isinstance(category, str):
        raise WorkloadError(f"{where}: 'category' must be a string")
    max_tokens = obj.get("max_tokens", obj.get("output_tokens", DEFAULT_MAX_TOKENS))
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise WorkloadError(
            f"{where}: 'max_tokens'/'output_tokens' must be a positive integer, got {max_tokens!r}"
        )
    pid = obj.get("id") or obj.get("question_id") or where
    return Prompt(id=str(pid), text=text, category=category, max_tokens=max_tokens)


def _lines(text: str) -> list[str]:
    # JSONL lines end at \n only: str.splitlines() also breaks on U+2028, U+0085, \x1c…, characters a
    # JSON string may carry unescaped (the file is read with universal newlines, so \r\n is \n here).
    return text.split("\n")


def parse_jsonl(lines: Iterable[str], *, source: str = "<prompts>") -> list[Prompt]:
    """Parse JSONL prompt lines (blank lines and lines starting with '#' are skipped)."""
    prompts: list[Prompt] = []
    for index, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{source}:{index}: not valid JSON ({exc.msg})") from None
        except (ValueError, RecursionError) as exc:
            # json's other refusals: an integer over Python's digit limit, nesting deeper than it reads.
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(":")[0]
            raise WorkloadError(f"{source}:{index}: not usable JSON ({why})") from None
        prompts.append(_prompt_from_obj(obj, source=source, index=index))
    return prompts


def parse_json_array(text: str, *, source: str = "<prompts>") -> list[Prompt]:
    """Parse a file holding one JSON array of prompt objects (ShareGPT's usual shape)."""
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{source}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # nesting or an integer past Python's limits
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(":")[0]
        raise WorkloadError(f"{source}: not valid JSON ({why})") from None
    if not isinstance(items, list):
        raise WorkloadError(f"{source}: expected a JSON array of prompt objects")
    # ShareGPT dumps hold entries with no conversation at all; vllm bench skips them, so do we.
    return [
        _prompt_from_obj(obj, source=source, index=i)
        for i, obj in enumerate(items, start=1)
        if not (isinstance(obj, dict) and obj.get("conversations") == [])
    ]


def load_jsonl(path: str | Path) -> list[Prompt]:
    """Load a user's prompt file: JSONL (any shape above) or a JSON array; raises `WorkloadError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        if p.suffix == "" and p.parent == Path("."):
            # A bare word is far more likely a mistyped set name than a missing file.
            raise WorkloadError(
                f"no built-in prompt set or file called {str(path)!r}; "
                f"built-in sets: {', '.join(BUILTIN_SETS)} (or give a .jsonl file)"
            ) from None
        raise WorkloadError(f"prompt file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"cannot read prompt file {p}: {exc}") from None
    if text.lstrip().startswith("["):
        prompts = parse_json_array(text, source=p.name)
    else:
        prompts = parse_jsonl(_lines(text), source=p.name)
    if not prompts:
        raise WorkloadError(f"{p}: no prompts in the file")
    return prompts


def builtin(name: str) -> list[Prompt]:
    """One of the built-in sets: long, long-ja, long-en, short, code, math, all."""
    files = BUILTIN_SETS.get(name)
    if files is None:
        raise WorkloadError(
            f"unknown prompt set {name!r}; choose one of {', '.join(BUILTIN_SETS)} or a .jsonl file"
        )
    folder = resources.files("mtpwatch.data").joinpath("prompts")
    prompts: list[Prompt] = []
    for fname in files:
        text = folder.joinpath(fname).read_text(encoding="utf-8")
        prompts.extend(parse_jsonl(_lines(text), source=fname))
    return prompts


def resolve(spec: str, *, limit: int | None = None, max_tokens: int | None = None) -> list[Prompt]:
    """Prompts for a CLI value: a built-in set name ('long', 'short', 'code', 'math', 'all', ...),
    else a path to a JSONL file; `limit` keeps the first `limit` prompts of each category (a quick
    run stays balanced), `max_tokens` overrides every prompt's."""
    prompts = builtin(spec) if spec in BUILTIN_SETS else load_jsonl(spec)
    if limit is not None:
        if limit < 1:
            raise WorkloadError(f"--limit must be at least 1, got {limit}")
        seen: dict[str, int] = {}
        kept: list[Prompt] = []
        for p in prompts:
            seen[p.category] = seen.get(p.category, 0) + 1
            if seen[p.category] <= limit:
                kept.append(p)
        prompts = kept
    if max_tokens is not None:
        prompts = [replace(p, max_tokens=max_tokens) for p in prompts]
    return prompts


def categories(prompts: Sequence[Prompt]) -> list[str]:
    """Distinct categories in first-seen order."""
    return list(dict.fromkeys(p.category for p in prompts))
