"""Deterministic output text for the simulator: a small built-in corpus cut into word pieces.

A prompt picks a category by what it asks for (`categorize`: its language, then its form, else an
explanation in English) and, within it, the answer whose topic its words match (`pick_entry`: a haiku
about GPUs gets the GPU haiku). So at temperature 0 the same prompt always yields the same tokens,
with speculation on or off (the A/B lossless check relies on it: the text depends on the prompt
alone, never on the arm). Token ids are a stable hash of the piece (CRC32), never a vocabulary index,
so adding text does not renumber anything. At temperature > 0 the start and occasional jumps depend
on the request seed.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources

VOCAB_SIZE = 262_144
"""Gemma 4's vocabulary size; every id is below it."""

Entry = tuple[tuple[str, ...], str]
"""One answer of the corpus: its topic stems (a prompt word starting with one picks it) and its text."""

_DATA = json.loads(resources.files(__package__).joinpath("corpus.json").read_text(encoding="utf-8"))

CATEGORIES: dict[str, list[Entry]] = {
    name: [(tuple(stems), text) for stems, text in entries] for name, entries in _DATA["categories"].items()
}
"""Built-in answers per category: what the prompt asks for (a poem, code, a list, a story, an
explanation) or the language it asks in or for."""

CATEGORY_ACCEPTANCE: dict[str, float] = {
    **dict.fromkeys(("prose", "japanese", "chinese"), 1.0),
    **dict.fromkeys(("french", "german", "spanish"), 0.95),
    **{f"{language}-poem": 0.8 for language in ("french", "german", "spanish", "japanese", "chinese")},
    "code": 1.12,
    "math": 1.08,
    "list": 1.05,
    "creative": 0.85,
    "poem": 0.8,
}
"""Acceptance multiplier per prompt category (code/math are more predictable than fiction)."""

SHORT_FORMS = frozenset({"poem", "list", *(name for name in CATEGORIES if name.endswith("-poem"))})
"""Categories whose answer is one entry: it ends where the poem or the list ends."""

LANGUAGES: dict[str, tuple[str, ...]] = {
    "french": ("french", "français", "francais", "en français"),
    "german": ("german", "deutsch", "auf deutsch"),
    "spanish": ("spanish", "español", "espanol", "castellano"),
    "japanese": ("japanese", "日本語"),
    "chinese": ("chinese", "mandarin", "中文"),
}
"""Words that name a language the answer should be in ('in French', 'into German')."""

_FUNCTION_WORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words) for lang, words in _DATA["function_words"].items()
}
"""Common words of prompts written in French, German or Spanish (two make the language)."""

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


def prompt_token_ids(text: str) -> list[int]:
    """Token ids of a prompt (BOS = 2 first, as Gemma)."""
    return [2, *(token_id(p) for p in split_pieces(text))]


def stable_hash(text: str) -> int:
    """A process-independent 32-bit hash (Python's hash() is salted per process)."""
    return zlib.crc32(text.encode("utf-8"))


_KANA = re.compile(r"[\u3040-\u30ff]")
_HAN = re.compile(r"[\u3400-\u9fff]")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


_EN_POEM_WORDS = ("haiku", "poem", "verse", "sonnet", "limerick", "rhyme")
"""Stems of the English words that ask for a poem."""
_POEM_WORDS = (*_EN_POEM_WORDS, "haïku", "poèm", "poés", "poes", "gedicht", "reim", "poema", "poesía", "rima")
"""Stems of the words that ask for a poem, in the corpus's Latin-script languages."""
_CJK_POEM = ("俳句", "詩", "诗")


def _language(prompt: str, lowered: str) -> str | None:
    """The language an answer should be in: the one the prompt names ('in French', 'en 日本語'),
    else its script where most of its letters are in it, else two of its words; None: English."""
    for language, names in LANGUAGES.items():  # 'in French', 'translate … into German'
        if any(re.search(rf"\b(in|into|to|en|auf|al)\s+{re.escape(n)}\b", lowered) for n in names):
            return language
    # A few CJK characters in a prompt written in French (a word it quotes) do not make it Japanese.
    letters = sum(map(len, _WORD.findall(prompt)))
    kana, han = len(_KANA.findall(prompt)), len(_HAN.findall(prompt))
    if kana and 2 * (kana + han) > letters:
        return "japanese"
    if han >= 2 and 2 * han > letters:
        return "chinese"
    words = [w.strip(",.!?;:¿¡") for w in lowered.split()]
    scores = {language: sum(w in common for w in words) for language, common in _FUNCTION_WORDS.items()}
    if "¿" in prompt or "¡" in prompt:
        scores["spanish"] += 2
    language, score = max(scores.items(), key=lambda item: item[1])
    return language if score >= 2 else None  # a prompt written in that language (the first of a tie)


def categorize(prompt: str) -> str:
    """Pick the corpus category a prompt asks for: its language (a poem in it: '<language>-poem'),
    then the form (code, math, a poem, a list, a story), else an explanation."""
    lowered = prompt.lower()
    language = _language(prompt, lowered)
    if language is not None:
        asks_poem = any(c in prompt for c in _CJK_POEM) or any(
            w.startswith(_POEM_WORDS) for w in _WORD.findall(lowered)
        )
        return f"{language}-poem" if asks_poem else language
    if "translat" in lowered:  # no language named: one of the corpus's, by the prompt
        return ("french", "german", "spanish")[stable_hash(prompt) % 3]
    if any(
        w in lowered for w in ("def ", "python", "code", "function", "```", "class ", "script", "rust", "sql")
    ):
        return "code"
    if any(w in lowered for w in ("solve", "equation", "math", "prove", "integral", "calculate", "=")):
        return "math"
    stems = _WORD.findall(lowered)
    if any(w.startswith(_EN_POEM_WORDS) for w in stems):
        return "poem"
    if any(w.startswith(("list", "bullet", "checklist", "steps", "tips", "ingredient")) for w in stems):
        return "list"
    if "once upon" in lowered or any(
        w.startswith(("story", "stori", "imagin", "fiction", "novel", "tale", "fairy")) for w in stems
    ):
        return "creative"
    return "prose"


def pick_entry(category: str, prompt: str) -> int:
    """The entry of `category` that answers `prompt`: the one whose topic stems the prompt's words
    match most (ties and no match: by a stable hash of the prompt, so every prompt has one answer)."""
    entries = CATEGORIES[category]
    words = _WORD.findall(prompt.lower())
    scores = [sum(any(w.startswith(t) for w in words) for t in tags) for tags, _ in entries]
    best = max(scores)
    tied = [i for i, score in enumerate(scores) if score == best]
    return tied[stable_hash(prompt) % len(tied)]


@cache
def _stream(category: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """All pieces of a category (paragraphs joined by a blank line) and each paragraph's start index."""
    pieces: list[str] = []
    starts: list[int] = []
    for _tags, para in CATEGORIES[category]:
        starts.append(len(pieces))
        pieces.extend(split_pieces(para.rstrip("\n")))
        pieces.extend(["\n", "\n"])
    return tuple(pieces), tuple(starts)


@dataclass(frozen=True, slots=True)
class Token:
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
        entry = pick_entry(self.category, prompt)
        self.temperature = max(0.0, temperature)
        self._rng: random.Random | None = None
        if self.temperature > 0:
            self._rng = random.Random(h ^ (seed if seed is not None else random.getrandbits(32)))
            self._pos = self._rng.randrange(len(self._pieces))
        else:
            self._pos = starts[entry]
        if ignore_eos:
            self.natural_length: int | None = None
        elif self.category in SHORT_FORMS:
            # a poem or a list ends with itself: its pieces, then the first line break after them
            self.natural_length = (*starts, len(self._pieces))[entry + 1] - starts[entry] - 1
        else:
            # the answer ends at the first sentence end after a prompt-dependent length
            self.natural_length = 120 + (h >> 8) % 600

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
