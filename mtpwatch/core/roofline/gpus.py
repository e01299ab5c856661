"""Peak memory bandwidth of the GPUs mtpwatch knows (GB/s, 1 GB = 1e9 bytes), keyed by the names NVML
reports, and the fuzzy lookup from an NVML device name (`"NVIDIA GeForce RTX 4090"`) or a short name
a user types for a remote server (`--gpu GB10`, `--gpu "H100 PCIe"`). Values and sources are from
the project's research notes (`bandwidth.md` §3); where NVML exposes the memory clock,
`core.roofline.nvml` prefers the NVML-derived 2·clock·bus value, which is exactly GPM's denominator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class UnknownGpuError(ValueError):
    """A GPU name matched nothing (or several entries) in the peak-bandwidth table."""


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU product: its NVML name(s), its peak DRAM bandwidth and where that number comes from."""

    key: str
    """Short display name, e.g. 'H100 SXM', 'GB10'."""
    nvml_names: tuple[str, ...]
    """Exact strings `nvmlDeviceGetName` returns for this product."""
    peak_gbps: float
    """Theoretical peak DRAM bandwidth, GB/s."""
    memory: str
    """Memory type and size, for display."""
    source: str
    aliases: tuple[str, ...] = ()
    """Short names a user may type besides the key and the NVML names (whose tokens match already)."""
    peak_bf16_tflops: float | None = None
    """Dense BF16 tensor throughput, TFLOP/s, where a datasheet figure is known (compute term)."""


# Sources are those gathered in the team's bandwidth research notes (§3). Where a figure was not
# re-fetched there, the comment says so. Names are matched as whole tokens, so "h200" never
# matches "gh200" and "l4" never matches "l40s".
GPUS: tuple[GpuSpec, ...] = (
    # NVIDIA DGX Spark spec sheet (273 GB/s LPDDR5X, 256-bit); name from k8s-device-plugin#1482.
    # BF16: ~124 TFLOP/s FP16 tensor (hmc-tech GB10 sheet, FP16 accumulate).
    GpuSpec(
        "GB10",
        ("NVIDIA GB10",),
        273.0,
        "128 GB LPDDR5X unified",
        "NVIDIA DGX Spark spec",
        ("dgx spark", "spark"),
        124.0,
    ),
    # AnandTech SC23 table: H100 SXM5 3.35 TB/s. BF16 dense ~990 TFLOP/s (NVIDIA datasheet).
    GpuSpec(
        "H100 SXM",
        ("NVIDIA H100 80GB HBM3",),
        3350.0,
        "80 GB HBM3",
        "AnandTech SC23 (NVIDIA)",
        ("h100", "h100 sxm5"),
        990.0,
    ),
    # NVIDIA H100 PCIe product brief PB-11133-001 ("greater than 2,000 GBps").
    GpuSpec("H100 PCIe", ("NVIDIA H100 PCIe",), 2000.0, "80 GB HBM2e", "NVIDIA H100 PCIe brief PB-11133-001"),
    # chipBandwidth test table in public code (3938 GB/s, 94 GB HBM3).
    GpuSpec("H100 NVL", ("NVIDIA H100 NVL",), 3938.0, "94 GB HBM3", "NVIDIA H100 NVL spec"),
    # AnandTech SC23 (4.8 TB/s); measured name and NVML 2·3201 MHz·6016 bit = 4814 GB/s on an H200.
    GpuSpec(
        "H200",
        ("NVIDIA H200",),
        4800.0,
        "141 GB HBM3e",
        "NVIDIA H200 datasheet (4.8 TB/s)",
        ("h200 sxm",),
        990.0,
    ),
    # RunPod GPU list (name); NVIDIA H200 datasheet value.
    GpuSpec("H200 NVL", ("NVIDIA H200 NVL",), 4800.0, "141 GB HBM3e", "NVIDIA H200 datasheet (4.8 TB/s)"),
    # NVIDIA GH200 announcement: 96 GB HBM3 at 4 TB/s (the HBM3e variant is ~5 TB/s: use --peak-gbps).
    GpuSpec("GH200", ("NVIDIA GH200 480GB",), 4000.0, "96 GB HBM3", "NVIDIA GH200 announcement (HBM3 SKU)"),
    # "8 TB/s" (H100/H200/B200 comparison); HGX B200 180 GB SKUs are sometimes quoted lower.
    GpuSpec("B200", ("NVIDIA B200",), 8000.0, "180-192 GB HBM3e", "NVIDIA B200 (8 TB/s)"),
    # NVIDIA A100 datasheet via glennklockwood.com: 1555 GB/s (40 GB), 2039 (80 GB SXM4), 1935 (80 GB PCIe,
    # not re-fetched).
    GpuSpec(
        "A100 40GB",
        ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"),
        1555.0,
        "40 GB HBM2",
        "NVIDIA A100 datasheet",
    ),
    GpuSpec("A100 80GB SXM", ("NVIDIA A100-SXM4-80GB",), 2039.0, "80 GB HBM2e", "NVIDIA A100 datasheet"),
    GpuSpec(
        "A100 80GB PCIe",
        ("NVIDIA A100 80GB PCIe",),
        1935.0,
        "80 GB HBM2e",
        "NVIDIA A100 datasheet (not re-fetched)",
    ),
    # NVIDIA L40/L40S/L4 spec tables (reseller copies).
    GpuSpec("L40S", ("NVIDIA L40S",), 864.0, "48 GB GDDR6", "NVIDIA L40S spec"),
    GpuSpec("L4", ("NVIDIA L4",), 300.0, "24 GB GDDR6", "NVIDIA L4 spec"),
    GpuSpec(
        "RTX 4090", ("NVIDIA GeForce RTX 4090",), 1008.0, "24 GB GDDR6X", "NVIDIA RTX 4090 spec", ("4090",)
    ),
    GpuSpec(
        "RTX 5090", ("NVIDIA GeForce RTX 5090",), 1792.0, "32 GB GDDR7", "NVIDIA RTX 5090 spec", ("5090",)
    ),
    # NVIDIA spec (not re-fetched).
    GpuSpec(
        "RTX 6000 Ada",
        ("NVIDIA RTX 6000 Ada Generation",),
        960.0,
        "48 GB GDDR6",
        "NVIDIA RTX 6000 Ada spec (not re-fetched)",
    ),
    # GTC 2025 coverage (1792 GB/s, 512-bit GDDR7); one deployment write-up quotes 1597 for Server Edition.
    GpuSpec(
        "RTX PRO 6000 Blackwell",
        (
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        ),
        1792.0,
        "96 GB GDDR7",
        "NVIDIA GTC 2025 (RTX PRO 6000 Blackwell)",
        ("rtx pro 6000", "pro 6000"),
    ),
    # NVIDIA Jetson Thor spec (273 GB/s, value not found in the stored corpus: verify); name jetson_stats#885.
    GpuSpec(
        "Jetson Thor",
        ("NVIDIA Thor",),
        273.0,
        "128 GB LPDDR5X unified",
        "NVIDIA Jetson AGX Thor spec",
        ("agx thor",),
    ),
)

_NOISE = {"nvidia", "geforce", "tesla", "generation", "edition"}


def _tokens(name: str) -> frozenset[str]:
    """Lower-case word tokens of a GPU name, without vendor noise words."""
    words = re.split(r"[^a-z0-9]+", name.lower())
    return frozenset(w for w in words if w and w not in _NOISE)


def lookup_gpu(name: str) -> GpuSpec:
    """The entry of an NVML device name or a short name: an exact NVML name or key wins; else the
    entry whose key, NVML name or alias has the most word tokens, all in the query. UnknownGpuError
    when nothing matches (the message lists the known names) or several entries tie (ambiguous)."""
    query = name.strip().lower()
    for gpu in GPUS:
        if query in (gpu.key.lower(), *(n.lower() for n in gpu.nvml_names)):
            return gpu
    q = _tokens(query)

    def score(gpu: GpuSpec) -> int:  # 0: none of its names fits
        return max(
            (len(t) for c in (gpu.key, *gpu.nvml_names, *gpu.aliases) if (t := _tokens(c)) <= q), default=0
        )

    top = max(map(score, GPUS))
    if top:
        hits = [g for g in GPUS if score(g) == top]
    else:  # a bare family name ("A100", "RTX 6000") shares a token with several entries: say so
        hits = [g for g in GPUS if q & _tokens(g.key) - {"rtx", "pro"}]
    if len(hits) > 1:
        raise UnknownGpuError(
            f"GPU name {name!r} is ambiguous ({', '.join(g.key for g in hits)}); be more specific"
        )
    if not top:
        raise UnknownGpuError(
            f"unknown GPU {name!r}; known: {', '.join(g.key for g in GPUS)} (or give --peak-gbps)"
        )
    return hits[0]
