"""Deterministic output text for the simulator: a small built-in corpus cut into word pieces.

A prompt picks a category (English prose, Japanese, code, math, creative) and a starting paragraph
through a stable hash, so at temperature 0 the same prompt always yields the same tokens, with
speculation on or off. Token ids are a stable hash of the piece (CRC32), never a vocabulary index,
so adding text does not renumber anything. At temperature > 0 the start and occasional jumps
depend on the request seed.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

VOCAB_SIZE = 262_144
"""Gemma 4's vocabulary size; every id is below it."""

_PROSE = [
    "Speculative decoding lets a small drafter guess the next few tokens while the large target "
    "model checks them all in one pass. When the guesses are right, several tokens arrive for the "
    "price of one forward step; when they are wrong, the target keeps its own token and nothing is "
    "lost but a little time.",
    "Memory bandwidth sets the pace of decoding at batch one. Every step streams the weights of the "
    "model from memory, so a model of nine gigabytes on a machine that moves two hundred and "
    "seventy gigabytes per second cannot produce more than about thirty tokens per second, however "
    "fast its arithmetic units are.",
    "The drafter in Gemma 4 is a compact four-layer network that reads the target's last hidden "
    "state and its token embedding. It shares the key and value cache of the target, so drafting "
    "costs little memory, and its predictions are verified exactly, which keeps the output identical "
    "to ordinary decoding at temperature zero.",
    "A good benchmark alternates the two configurations, repeats each prompt several times and "
    "reports the median ratio with a confidence interval. Single runs mislead, because the first "
    "request after a start pays for compilation and warm-up, and background work can slow any step.",
    "Acceptance falls with the draft position. The first guess is right most of the time, the second "
    "a little less often, and by the eighth position only a small share of drafts survive, because "
    "each position is accepted only if every earlier one was accepted too.",
    "Long answers benefit the most. A short reply of a few tokens spends most of its time in prefill "
    "and in the first steps, where the drafter has little context, so the extra cost of drafting is "
    "not recovered and the speed-up can even turn into a small slowdown.",
]

_CREATIVE = [
    "The lighthouse keeper counted the ships by their lanterns, one amber, two green, and a pale blue "
    "one that never seemed to reach the harbour. On the third night she rowed out to meet it and "
    "found only fog, a coil of rope, and a letter addressed to her grandmother.",
    "Rain came to the valley like an old friend, knocking softly before it entered. The orchards "
    "drank, the river rose to the second stone of the mill, and the children raced paper boats "
    "along the gutters until the bells called them home for supper.",
    "In the city of glass towers, the last bookseller kept a shop below the street, where the light "
    "arrived late and left early. People came for maps of places that had changed their names, and "
    "she sold each one with a story about the road that used to lead there.",
]

_CODE = [
    "def tokens_per_second(tokens: int, seconds: float) -> float:\n"
    '    """Return the decode rate, or zero when no time has passed."""\n'
    "    if seconds <= 0:\n"
    "        return 0.0\n"
    "    return tokens / seconds\n",
    "async def stream(client, prompt):\n"
    '    async with client.stream("POST", "/v1/completions", json={"prompt": prompt}) as r:\n'
    "        async for line in r.aiter_lines():\n"
    '            if line.startswith("data: ") and line != "data: [DONE]":\n'
    "                yield json.loads(line[6:])\n",
    "class Window:\n"
    "    def __init__(self, size: int) -> None:\n"
    "        self.size = size\n"
    "        self.items: list[float] = []\n\n"
    "    def add(self, value: float) -> None:\n"
    "        self.items.append(value)\n"
    "        del self.items[:-self.size]\n",
    "for step in range(num_steps):\n"
    "    drafts = drafter.propose(hidden, k)\n"
    "    accepted = target.verify(drafts)\n"
    "    output.extend(drafts[:accepted] + [target.bonus_token()])\n",
]

_MATH = [
    "Let a be the probability that one draft token is accepted. With k drafts the expected number "
    "of tokens per step is 1 + a + a^2 + ... + a^k = (1 - a^(k+1)) / (1 - a). For a = 0.8 and k = 4 "
    "this gives 3.36 tokens per step.",
    "If a step reads W bytes at a bandwidth of B bytes per second, the step takes W / B seconds. "
    "With W = 9.3e9 and B = 2.73e11 we get 0.034 seconds, so the ceiling is 1 / 0.034 = 29.4 steps "
    "per second.",
    "To solve x^2 - 5x + 6 = 0, factor the left side as (x - 2)(x - 3) = 0. Therefore x = 2 or "
    "x = 3. Check: 2^2 - 5 * 2 + 6 = 0 and 3^2 - 5 * 3 + 6 = 0.",
]

_JAPANESE = [
    "投機的デコーディングでは、小さな下書きモデルが次の数トークンを予測し、大きな本体モデルがそれらを一度に検証します。"
    "予測が当たれば一回の処理で複数のトークンが得られ、外れても本体モデルのトークンが使われるので品質は変わりません。",
    "メモリ帯域はバッチサイズ一のデコード速度を決めます。各ステップでモデルの重みをメモリから読み出すため、"
    "帯域が狭い機械では演算性能がどれだけ高くても生成速度には上限があります。",
    "長い文章ほど効果が大きく、短い応答では下書きのコストを回収できないことがあります。"
    "用途に合わせて有効と無効を切り替えるのが現実的です。",
]

CATEGORIES: dict[str, list[str]] = {
    "prose": _PROSE,
    "creative": _CREATIVE,
    "code": _CODE,
    "math": _MATH,
    "japanese": _JAPANESE,
}
"""Built-in paragraphs per category."""

CATEGORY_ACCEPTANCE: dict[str, float] = {
    "prose": 1.0,
    "japanese": 1.0,
    "code": 1.12,
    "math": 1.08,
    "creative": 0.85,
}
"""Acceptance multiplier per prompt category (code/math are more predictable than fiction)."""

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef\u3000-\u303f]")
_PIECE = re.compile(
    r"\n|[ \t]+(?=\n)|[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef\u3000-\u303f]"
    r"|[ \t]*[A-Za-z]+|[ \t]*\d|[ \t]*[^\sA-Za-z\d]|[ \t]+"
)
_MAX_PIECE_LETTERS = 6
_SENTENCE_END = (".", "。", "\n")


def split_pieces(text: str) -> list[str]:
    """Cut text into word pieces: words of up to 6 letters (longer ones split), digits, punctuation, CJK."""
    pieces: list[str] = []
    for match in _PIECE.finditer(text):
        piece = match.group(0)
        core = piece.lstrip(" \t")
        if core.isalpha() and core.isascii() and len(core) > _MAX_PIECE_LETTERS:
            lead = piece[: len(piece) - len(core)]
            chunks = [core[i : i + _MAX_PIECE_LETTERS] for i in range(0, len(core), _MAX_PIECE_LETTERS)]
            pieces.append(lead + chunks[0])
            pieces.extend(chunks[1:])
        else:
            pieces.append(piece)
    return pieces


def token_id(piece: str) -> int:
    """Stable id of a piece (CRC32 folded into the vocabulary, clear of the first 100 special ids)."""
    return 100 + zlib.crc32(piece.encode("utf-8")) % (VOCAB_SIZE - 100)


def count_tokens(text: str) -> int:
    """Number of pieces `split_pieces` makes of ``text``."""
    return len(split_pieces(text))


def prompt_token_ids(text: str) -> list[int]:
    """Token ids of a prompt (BOS = 2 first, as Gemma)."""
    return [2, *(token_id(p) for p in split_pieces(text))]


def stable_hash(text: str) -> int:
    """A process-independent 32-bit hash (Python's hash() is salted per process)."""
    return zlib.crc32(text.encode("utf-8"))


def categorize(prompt: str) -> str:
    """Pick the corpus category a prompt asks for."""
    lowered = prompt.lower()
    if len(_CJK.findall(prompt)) >= 2:
        return "japanese"
    if any(w in lowered for w in ("def ", "python", "code", "function", "```", "class ", "script", "rust")):
        return "code"
    if any(w in lowered for w in ("solve", "equation", "math", "prove", "integral", "calculate", "=")):
        return "math"
    if any(w in lowered for w in ("story", "poem", "imagine", "once upon", "fiction", "novel")):
        return "creative"
    return "prose"


@cache
def _stream(category: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """All pieces of a category (paragraphs joined by a blank line) and each paragraph's start index."""
    pieces: list[str] = []
    starts: list[int] = []
    for para in CATEGORIES[category]:
        starts.append(len(pieces))
        pieces.extend(split_pieces(para.rstrip("\n")))
        pieces.extend(["\n", "\n"])
    return tuple(pieces), tuple(starts)


@dataclass(frozen=True, slots=True)
class Token:
    """One output token."""

    text: str
    token_id: int
    natural_end: bool
    """True on the last token of the answer (the simulated EOS comes right after it)."""


class TextSource:
    """The token sequence answering one prompt; identical with speculation on and off at T=0."""

    def __init__(
        self, prompt: str, *, temperature: float = 0.0, seed: int | None = None, ignore_eos: bool = False
    ) -> None:
        self.category = categorize(prompt)
        self._pieces, starts = _stream(self.category)
        h = stable_hash(prompt)
        self.temperature = max(0.0, temperature)
        self._rng: random.Random | None = None
        if self.temperature > 0:
            self._rng = random.Random(h ^ (seed if seed is not None else random.getrandbits(32)))
            self._pos = self._rng.randrange(len(self._pieces))
        else:
            self._pos = starts[h % len(starts)]
        # the answer ends at the first sentence end after a prompt-dependent length
        self.natural_length = None if ignore_eos else 120 + (h >> 8) % 600

    @property
    def acceptance_factor(self) -> float:
        """Acceptance multiplier for this prompt's category."""
        return CATEGORY_ACCEPTANCE[self.category]

    def tokens(self) -> Iterator[Token]:
        """Yield output tokens (stops by itself at the natural end unless ignore_eos)."""
        n = 0
        pieces = self._pieces
        while True:
            if self._rng is not None and self._rng.random() < min(0.3, 0.05 * self.temperature):
                self._pos = self._rng.randrange(len(pieces))
            piece = pieces[self._pos % len(pieces)]
            self._pos += 1
            n += 1
            end = (
                self.natural_length is not None and n >= self.natural_length and piece.endswith(_SENTENCE_END)
            )
            yield Token(piece, token_id(piece), end)
            if end:
                return
