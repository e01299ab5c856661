"""Deterministic output text for the simulator: a small built-in corpus cut into word pieces.

A prompt picks a category by what it asks for — its language (Japanese, Chinese, French, German,
Spanish: written in it, or named as in 'in French'), then its form (code, math, a haiku or poem, a
list, a story), else an explanation in English — and, within it, the answer whose topic its words
match (a haiku about GPUs gets the GPU haiku), ties broken by a stable hash. So at temperature 0 the
same prompt always yields the same tokens, with speculation on or off (the A/B lossless check relies
on it: the text depends on the prompt alone, never on the arm). Token ids are a stable hash of the
piece (CRC32), never a vocabulary index, so adding text does not renumber anything. At temperature
> 0 the start and occasional jumps depend on the request seed.
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

Entry = tuple[tuple[str, ...], str]
"""One answer of the corpus: its topic stems (a prompt word starting with one picks it) and its text."""

_PROSE: list[Entry] = [
    (
        ("specul", "decod", "guess", "draft"),
        "Speculative decoding lets a small drafter guess the next few tokens while the large target "
        "model checks them all in one pass. When the guesses are right, several tokens arrive for the "
        "price of one forward step; when they are wrong, the target keeps its own token and nothing is "
        "lost but a little time.",
    ),
    (
        ("bandwid", "memory", "gpu", "roofline", "byte"),
        "Memory bandwidth sets the pace of decoding at batch one. Every step streams the weights of the "
        "model from memory, so a model of nine gigabytes on a machine that moves two hundred and "
        "seventy gigabytes per second cannot produce more than about thirty tokens per second, however "
        "fast its arithmetic units are.",
    ),
    (
        ("gemma", "mtp", "multi", "drafter", "assistant"),
        "The drafter in Gemma 4 is a compact four-layer network that reads the target's last hidden "
        "state and its token embedding. It shares the key and value cache of the target, so drafting "
        "costs little memory, and its predictions are verified exactly, which keeps the output identical "
        "to ordinary decoding at temperature zero.",
    ),
    (
        ("benchm", "measur", "compar", "median"),
        "A good benchmark alternates the two configurations, repeats each prompt several times and "
        "reports the median ratio with a confidence interval. Single runs mislead, because the first "
        "request after a start pays for compilation and warm-up, and background work can slow any step.",
    ),
    (
        ("accept", "positi", "probab"),
        "Acceptance falls with the draft position. The first guess is right most of the time, the second "
        "a little less often, and by the eighth position only a small share of drafts survive, because "
        "each position is accepted only if every earlier one was accepted too.",
    ),
    (
        ("long", "short", "length", "answer"),
        "Long answers benefit the most. A short reply of a few tokens spends most of its time in prefill "
        "and in the first steps, where the drafter has little context, so the extra cost of drafting is "
        "not recovered and the speed-up can even turn into a small slowdown.",
    ),
    (
        ("transfo", "attenti", "token", "history", "print"),
        "A transformer writes one token at a time. For each new token it looks back at everything "
        "written so far through attention, picks the most likely next piece, appends it and starts "
        "again. The history it looks back at is kept in a cache, so each step only pays for the newest "
        "token, not for the whole text again.",
    ),
    (
        ("tide", "ocean", "moon", "coast", "sea"),
        "Tides are the ocean's response to the pull of the Moon and, to a lesser degree, the Sun. The "
        "Moon pulls the near side of the Earth a little harder than its centre, and the centre a little "
        "harder than the far side, so the water is stretched into two bulges: one facing the Moon and "
        "one on the opposite side. As the Earth turns once a day beneath these two bulges, most coasts "
        "pass through both, which is why they see two high tides and two low tides roughly every "
        "twenty-four hours and fifty minutes. When the Sun and Moon line up, the bulges add and the "
        "tides are larger.",
    ),
    (
        ("compil", "jit", "interp", "program", "runtime"),
        "A just-in-time compiler turns parts of a program into machine code while the program runs. "
        "At first the code is interpreted, which is slow but starts at once. Meanwhile the runtime "
        "counts which functions and loops run most often and which types actually flow through them. "
        "Those hot paths are then compiled with that knowledge: a call that always receives integers "
        "can skip every type check, and a small function can be inlined into its caller. That is why a "
        "program often gets faster after it has run for a while.",
    ),
    (
        ("yeast", "bread", "dough", "bake", "flour"),
        "Yeast is a living fungus that feeds on the sugars in flour. As it eats, it releases carbon "
        "dioxide and a little alcohol. Kneading builds a stretchy network of gluten that traps the gas "
        "in countless small bubbles, so the dough swells. Letting the dough rest gives the yeast time "
        "to produce enough gas and lets the gluten relax, so the loaf rises evenly instead of tearing. "
        "In the oven the bubbles expand once more, the yeast dies, and the starch sets around the holes "
        "into a light crumb.",
    ),
    (
        ("heat", "pump", "energy", "electr", "fridge"),
        "A heat pump does not make heat from electricity; it moves heat that is already there. A fluid "
        "evaporates in a coil outside, absorbing heat even from cold air, then a compressor squeezes "
        "the vapour, which makes it hotter than the room. Indoors it condenses and gives that heat "
        "away. The electricity only drives the compressor and the fans, so for every unit of "
        "electrical energy, three or four units of heat can arrive indoors, most of them taken from "
        "outside.",
    ),
]

_CREATIVE: list[Entry] = [
    (
        ("lighth", "ship", "sea", "fog", "letter"),
        "The lighthouse keeper counted the ships by their lanterns, one amber, two green, and a pale blue "
        "one that never seemed to reach the harbour. On the third night she rowed out to meet it and "
        "found only fog, a coil of rope, and a letter addressed to her grandmother.",
    ),
    (
        ("rain", "valley", "child", "village"),
        "Rain came to the valley like an old friend, knocking softly before it entered. The orchards "
        "drank, the river rose to the second stone of the mill, and the children raced paper boats "
        "along the gutters until the bells called them home for supper.",
    ),
    (
        ("city", "book", "shop", "map"),
        "In the city of glass towers, the last bookseller kept a shop below the street, where the light "
        "arrived late and left early. People came for maps of places that had changed their names, and "
        "she sold each one with a story about the road that used to lead there.",
    ),
    (
        ("robot", "gpu", "machin", "comput", "server"),
        "Every night at three, when the data centre was quiet, the oldest GPU in rack nine told the "
        "younger ones about the days of single cores. They did not believe her. Then the cooling failed, "
        "and she alone knew how to run slowly enough to keep the answers coming until dawn.",
    ),
]

_POEM: list[Entry] = [
    (
        ("gpu", "chip", "silic", "core", "comput", "card"),
        "Fans hum in the dark\nten thousand cores wake at once\nthe answer arrives",
    ),
    (
        ("specul", "draft", "token", "mtp", "decod", "guess"),
        "A small voice guesses\nthe great mind nods, word by word\nfour tokens in one",
    ),
    (
        ("memory", "bandwid", "byte", "speed", "fast"),
        "Bytes flow like water\nthe pipe sets the pace, not the\nspeed of the mill wheel",
    ),
    (("rain", "storm", "tea", "kettle"), "Rain on the tin roof\nthe kettle answers softly\nnobody is late"),
    (
        ("ocean", "sea", "tide", "beach", "wave"),
        "The tide counts the stones\npatient as a metronome\nthe gull does not care",
    ),
    (
        ("autumn", "fall", "leaf", "leave", "maple", "season"),
        "Maple leaves let go\neach one a small red letter\naddressed to the ground",
    ),
    (
        ("cat", "kitten", "sun", "dog", "pet"),
        "The cat claims the sun\nmoving with it, inch by inch\nacross the warm floor",
    ),
    (
        ("night", "city", "moon", "train", "neon"),
        "Neon on wet streets\nthe last train hums its one note\nthe moon keeps the time",
    ),
]

_LIST: list[Entry] = [
    (
        ("specul", "mtp", "draft", "decod", "faster", "speed"),
        "Five ways to make speculative decoding pay off:\n"
        "1. Pair the target with the drafter trained for it (an -it target, its -it assistant).\n"
        "2. Start with k = 2 and raise it only while the mean acceptance length keeps growing.\n"
        "3. Measure long answers: short replies never recover the drafting cost.\n"
        "4. Keep the batch small; at high load the verify step stops being free.\n"
        "5. Check the outputs at temperature 0: they must be identical with and without drafts.",
    ),
    (
        ("gpu", "memory", "bandwid", "limit", "slow"),
        "What limits decode speed on one GPU:\n"
        "- the bytes read per step: weights, the drafter and the KV cache;\n"
        "- the memory bandwidth, which divides those bytes into seconds;\n"
        "- the kernel launch overhead between steps, visible on small models;\n"
        "- the batch size, once compute rather than memory becomes the bound.",
    ),
    (
        ("benchm", "measur", "test", "compar"),
        "A checklist for a fair benchmark:\n"
        "- warm up both servers and drop the first run;\n"
        "- alternate A and B in ABBA order, never run them at once;\n"
        "- repeat each prompt at least ten times;\n"
        "- report the median ratio with a 95 % confidence interval;\n"
        "- write down the model, the GPU, k and the software versions.",
    ),
    (
        ("soup", "recipe", "cook", "ingred", "dinner", "food"),
        "Ingredients for a simple tomato soup:\n"
        "- 1 kg ripe tomatoes, halved;\n"
        "- 1 onion and 2 cloves of garlic, chopped;\n"
        "- 2 tablespoons of olive oil;\n"
        "- 500 ml vegetable stock;\n"
        "- salt, pepper and a handful of basil.",
    ),
    (
        ("trip", "travel", "pack", "holiday", "hike"),
        "What to pack for a weekend hike:\n"
        "1. Water, two litres at least.\n"
        "2. A rain jacket, whatever the forecast says.\n"
        "3. A map and a charged phone.\n"
        "4. Snacks that do not melt.\n"
        "5. A small first-aid kit and a whistle.",
    ),
]

_CODE: list[Entry] = [
    (
        ("rate", "second", "tok", "speed"),
        "def tokens_per_second(tokens: int, seconds: float) -> float:\n"
        '    """Return the decode rate, or zero when no time has passed."""\n'
        "    if seconds <= 0:\n"
        "        return 0.0\n"
        "    return tokens / seconds\n",
    ),
    (
        ("stream", "http", "async", "request", "api", "client"),
        "async def stream(client, prompt):\n"
        '    async with client.stream("POST", "/v1/completions", json={"prompt": prompt}) as r:\n'
        "        async for line in r.aiter_lines():\n"
        '            if line.startswith("data: ") and line != "data: [DONE]":\n'
        "                yield json.loads(line[6:])\n",
    ),
    (
        ("window", "class", "average", "queue"),
        "class Window:\n"
        "    def __init__(self, size: int) -> None:\n"
        "        self.size = size\n"
        "        self.items: list[float] = []\n\n"
        "    def add(self, value: float) -> None:\n"
        "        self.items.append(value)\n"
        "        del self.items[:-self.size]\n",
    ),
    (
        ("specul", "draft", "decod", "loop", "verify"),
        "for step in range(num_steps):\n"
        "    drafts = drafter.propose(hidden, k)\n"
        "    accepted = target.verify(drafts)\n"
        "    output.extend(drafts[:accepted] + [target.bonus_token()])\n",
    ),
    (
        ("merge", "sort", "list"),
        "def merge_sorted(a: list[int], b: list[int]) -> list[int]:\n"
        '    """Merge two sorted lists into one sorted list in linear time."""\n'
        "    out, i, j = [], 0, 0\n"
        "    while i < len(a) and j < len(b):\n"
        "        if a[i] <= b[j]:\n"
        "            out.append(a[i])\n"
        "            i += 1\n"
        "        else:\n"
        "            out.append(b[j])\n"
        "            j += 1\n"
        "    return out + a[i:] + b[j:]\n",
    ),
    (
        ("lru", "cache", "ordered"),
        "from collections import OrderedDict\n\n\n"
        "class LRUCache:\n"
        "    def __init__(self, capacity: int) -> None:\n"
        "        self.capacity = capacity\n"
        "        self.items: OrderedDict[int, int] = OrderedDict()\n\n"
        "    def get(self, key: int) -> int:\n"
        "        if key not in self.items:\n"
        "            return -1\n"
        "        self.items.move_to_end(key)\n"
        "        return self.items[key]\n\n"
        "    def put(self, key: int, value: int) -> None:\n"
        "        self.items[key] = value\n"
        "        self.items.move_to_end(key)\n"
        "        if len(self.items) > self.capacity:\n"
        "            self.items.popitem(last=False)\n",
    ),
    (
        ("csv", "month", "amount", "date", "total"),
        "import csv\n"
        "from collections import defaultdict\n\n\n"
        "def totals_per_month(path: str) -> dict[str, float]:\n"
        '    """Sum the amount column per YYYY-MM month, sorted by month."""\n'
        "    totals: defaultdict[str, float] = defaultdict(float)\n"
        '    with open(path, newline="") as f:\n'
        "        for date, amount in csv.reader(f):\n"
        "            totals[date[:7]] += float(amount)\n"
        "    return dict(sorted(totals.items()))\n",
    ),
    (
        ("sql", "query", "customer", "order", "recent"),
        "SELECT customer_id, order_id, order_date, total\n"
        "FROM (\n"
        "    SELECT o.*, ROW_NUMBER() OVER (\n"
        "        PARTITION BY customer_id ORDER BY order_date DESC\n"
        "    ) AS rn\n"
        "    FROM orders AS o\n"
        ") AS ranked\n"
        "WHERE rn <= 3\n"
        "ORDER BY customer_id, order_date DESC;\n",
    ),
    (
        ("rust", "durati", "parse", "string"),
        "use std::time::Duration;\n\n"
        "fn parse_duration(s: &str) -> Result<Duration, String> {\n"
        "    let mut total = 0u64;\n"
        "    let mut number = String::new();\n"
        "    for c in s.chars() {\n"
        "        if c.is_ascii_digit() {\n"
        "            number.push(c);\n"
        "            continue;\n"
        "        }\n"
        '        let n: u64 = number.parse().map_err(|_| format!("missing number before {c}"))?;\n'
        "        number.clear();\n"
        "        total += match c {\n"
        "            'h' => n * 3600,\n"
        "            'm' => n * 60,\n"
        "            's' => n,\n"
        '            _ => return Err(format!("unknown unit {c}")),\n'
        "        };\n"
        "    }\n"
        "    if !number.is_empty() {\n"
        '        return Err("a number without a unit at the end".to_string());\n'
        "    }\n"
        "    Ok(Duration::from_secs(total))\n"
        "}\n",
    ),
    (
        ("fibon", "recurs", "sequence"),
        "def fibonacci(n: int) -> list[int]:\n"
        '    """The first n Fibonacci numbers."""\n'
        "    numbers = [0, 1]\n"
        "    while len(numbers) < n:\n"
        "        numbers.append(numbers[-1] + numbers[-2])\n"
        "    return numbers[:n]\n",
    ),
]

_MATH: list[Entry] = [
    (
        ("accept", "draft", "expect", "probab", "specul"),
        "Let a be the probability that one draft token is accepted. With k drafts the expected number "
        "of tokens per step is 1 + a + a^2 + ... + a^k = (1 - a^(k+1)) / (1 - a). For a = 0.8 and k = 4 "
        "this gives 3.36 tokens per step.",
    ),
    (
        ("bandwid", "step", "byte", "second", "ceiling"),
        "If a step reads W bytes at a bandwidth of B bytes per second, the step takes W / B seconds. "
        "With W = 9.3e9 and B = 2.73e11 we get 0.034 seconds, so the ceiling is 1 / 0.034 = 29.4 steps "
        "per second.",
    ),
    (
        ("solve", "quadra", "equati", "factor", "x"),
        "To solve x^2 - 5x + 6 = 0, factor the left side as (x - 2)(x - 3) = 0. Therefore x = 2 or "
        "x = 3. Check: 2^2 - 5 * 2 + 6 = 0 and 3^2 - 5 * 3 + 6 = 0.",
    ),
]

_JAPANESE: list[Entry] = [
    (
        (),
        "投機的デコーディングでは、小さな下書きモデルが次の数トークンを予測し、大きな本体モデルがそれらを一度に検証します。"
        "予測が当たれば一回の処理で複数のトークンが得られ、外れても本体モデルのトークンが使われるので品質は変わりません。",
    ),
    (
        (),
        "メモリ帯域はバッチサイズ一のデコード速度を決めます。各ステップでモデルの重みをメモリから読み出すため、"
        "帯域が狭い機械では演算性能がどれだけ高くても生成速度には上限があります。",
    ),
    (
        (),
        "長い文章ほど効果が大きく、短い応答では下書きのコストを回収できないことがあります。"
        "用途に合わせて有効と無効を切り替えるのが現実的です。",
    ),
]

_CHINESE: list[Entry] = [
    (
        (),
        "推测解码让一个小型草稿模型先猜出接下来的几个词元，再由大模型一次性验证。"
        "猜对时，一次前向计算就能得到多个词元；猜错时，大模型保留自己的结果，输出质量不变。",
    ),
    (
        (),
        "在批量为一的情况下，解码速度由显存带宽决定。每一步都要从显存读取全部权重，"
        "所以无论算力多强，生成速度都有一个上限。",
    ),
    (
        (),
        "回答越长，收益越大。很短的回答大部分时间花在预填充上，草稿模型的开销无法收回。",
    ),
]

_FRENCH: list[Entry] = [
    (
        ("spécul", "specul", "décod", "decod", "brouil"),
        "Le décodage spéculatif confie à un petit modèle le soin de deviner les prochains jetons, puis le "
        "grand modèle les vérifie tous en une seule passe. Quand les suppositions sont justes, plusieurs "
        "jetons arrivent pour le prix d'une étape ; sinon, rien n'est perdu sauf un peu de temps.",
    ),
    (
        ("mémoire", "memoire", "bande", "gpu", "vitesse"),
        "La bande passante de la mémoire fixe le rythme du décodage. À chaque étape, le modèle relit tous "
        "ses poids, si bien qu'une machine qui déplace deux cent soixante-dix gigaoctets par seconde ne "
        "peut pas dépasser une trentaine de jetons par seconde pour un modèle de neuf gigaoctets.",
    ),
    (
        ("bonjour", "matin", "jour", "merci", "salut"),
        "Bonjour à tous ! Merci d'être venus ce matin. Aujourd'hui, nous allons voir comment un modèle "
        "de langue écrit ses réponses, un morceau après l'autre, et pourquoi un petit assistant peut "
        "l'aider à aller plus vite sans rien changer au texte final.",
    ),
]

_GERMAN: list[Entry] = [
    (
        ("spekul", "dekod", "entwurf", "specul", "decod"),
        "Beim spekulativen Dekodieren rät ein kleines Modell die nächsten Token, und das große Modell "
        "prüft sie alle in einem einzigen Durchlauf. Stimmen die Vermutungen, kommen mehrere Token zum "
        "Preis eines Schritts; stimmen sie nicht, geht nur ein wenig Zeit verloren.",
    ),
    (
        ("speicher", "bandbr", "gpu", "geschw"),
        "Die Speicherbandbreite bestimmt das Tempo des Dekodierens. In jedem Schritt liest das Modell "
        "alle seine Gewichte aus dem Speicher, deshalb schafft ein Rechner mit zweihundertsiebzig "
        "Gigabyte pro Sekunde bei einem Modell von neun Gigabyte kaum mehr als dreißig Token pro Sekunde.",
    ),
    (
        ("morgen", "hallo", "guten", "danke", "tag"),
        "Guten Morgen und herzlich willkommen! Heute schauen wir uns an, wie ein Sprachmodell seine "
        "Antworten Stück für Stück schreibt und warum ein kleiner Helfer es schneller machen kann, ohne "
        "am Ergebnis ein einziges Wort zu ändern.",
    ),
]

_SPANISH: list[Entry] = [
    (
        ("especul", "decodif", "borrad", "specul", "decod"),
        "La decodificación especulativa deja que un modelo pequeño adivine los próximos tokens y que el "
        "modelo grande los verifique todos en una sola pasada. Si acierta, llegan varios tokens por el "
        "precio de un paso; si falla, solo se pierde un poco de tiempo.",
    ),
    (
        ("memoria", "ancho", "gpu", "velocid"),
        "El ancho de banda de la memoria marca el ritmo de la decodificación. En cada paso el modelo lee "
        "todos sus pesos, así que una máquina que mueve doscientos setenta gigabytes por segundo no "
        "supera unos treinta tokens por segundo con un modelo de nueve gigabytes.",
    ),
    (
        ("hola", "buenos", "días", "dias", "gracias"),
        "¡Buenos días a todos! Gracias por venir. Hoy veremos cómo un modelo de lenguaje escribe sus "
        "respuestas pieza a pieza y por qué un pequeño ayudante puede acelerarlo sin cambiar ni una "
        "palabra del resultado.",
    ),
]

CATEGORIES: dict[str, list[Entry]] = {
    "prose": _PROSE,
    "creative": _CREATIVE,
    "poem": _POEM,
    "list": _LIST,
    "code": _CODE,
    "math": _MATH,
    "japanese": _JAPANESE,
    "chinese": _CHINESE,
    "french": _FRENCH,
    "german": _GERMAN,
    "spanish": _SPANISH,
}
"""Built-in answers per category: what the prompt asks for (a poem, code, a list, a story, an
explanation) or the language it asks in or for."""

CATEGORY_ACCEPTANCE: dict[str, float] = {
    "prose": 1.0,
    "japanese": 1.0,
    "chinese": 1.0,
    "french": 0.95,
    "german": 0.95,
    "spanish": 0.95,
    "code": 1.12,
    "math": 1.08,
    "list": 1.05,
    "creative": 0.85,
    "poem": 0.8,
}
"""Acceptance multiplier per prompt category (code/math are more predictable than fiction)."""

SHORT_FORMS = frozenset({"poem", "list"})
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
    "french": frozenset(
        [
            "le",
            "la",
            "les",
            "des",
            "une",
            "est",
            "et",
            "pour",
            "pourquoi",
            "comment",
            "explique",
            "expliquez",
            "écris",
            "écrivez",
            "quel",
            "quelle",
            "avec",
            "sur",
            "dans",
            "qu'est-ce",
        ]
    ),
    "german": frozenset(
        [
            "der",
            "die",
            "das",
            "und",
            "ist",
            "ein",
            "eine",
            "wie",
            "warum",
            "erkläre",
            "erklär",
            "schreibe",
            "schreib",
            "mit",
            "für",
            "nicht",
        ]
    ),
    "spanish": frozenset(
        [
            "el",
            "los",
            "las",
            "la",
            "un",
            "una",
            "es",
            "y",
            "por",
            "qué",
            "cómo",
            "explica",
            "escribe",
            "con",
            "para",
            "del",
            "sobre",
            "funciona",
            "cuál",
        ]
    ),
}
"""Common words of prompts written in French, German or Spanish (two make the language)."""

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


_KANA = re.compile(r"[\u3040-\u30ff]")
_HAN = re.compile(r"[\u3400-\u9fff]")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def _words(lowered: str) -> list[str]:
    return _WORD.findall(lowered)


def categorize(prompt: str) -> str:
    """Pick the corpus category a prompt asks for: its script or the language it names, then the
    form (code, math, a poem, a list, a story), else an explanation."""
    lowered = prompt.lower()
    if _KANA.search(prompt):
        return "japanese"
    if len(_HAN.findall(prompt)) >= 2:
        return "chinese"
    for language, names in LANGUAGES.items():  # 'in French', 'translate … into German'
        if any(re.search(rf"\b(in|into|to|en|auf|al)\s+{re.escape(n)}\b", lowered) for n in names):
            return language
    words = [w.strip(",.!?;:¿¡") for w in lowered.split()]
    scores = {language: sum(w in common for w in words) for language, common in _FUNCTION_WORDS.items()}
    if "¿" in prompt or "¡" in prompt:
        scores["spanish"] += 2
    language, score = max(scores.items(), key=lambda item: item[1])
    if score >= 2:  # a prompt written in that language (the first of a tie)
        return language
    if "translat" in lowered:  # no language named: one of the corpus's, by the prompt
        return ("french", "german", "spanish")[stable_hash(prompt) % 3]
    if any(
        w in lowered for w in ("def ", "python", "code", "function", "```", "class ", "script", "rust", "sql")
    ):
        return "code"
    if any(w in lowered for w in ("solve", "equation", "math", "prove", "integral", "calculate", "=")):
        return "math"
    stems = _words(lowered)
    if any(w.startswith(("haiku", "poem", "verse", "sonnet", "limerick", "rhyme")) for w in stems):
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
    words = _words(prompt.lower())
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
            self._pos = starts[pick_entry(self.category, prompt)]
        if ignore_eos:
            self.natural_length: int | None = None
        elif self.category in SHORT_FORMS:
            # a poem or a list ends with itself: its pieces, then the first line break after them
            entry = pick_entry(self.category, prompt)
            nxt = starts[entry + 1] if entry + 1 < len(starts) else len(self._pieces)
            self.natural_length = nxt - starts[entry] - 1
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
