"""The memory-bandwidth side: bytes per verify step, GPU peaks, ceilings, and NVML readings.

Owns: the analytic byte model (`bytemodel`), reading and finding a model's `config.json`
(`modelconfig`), the GPU peak table (`gpus`), ceilings and the binding term (`ceilings`) and the
optional NVML/GPM sampler (`nvml`).
May import: the standard library and, lazily where a GPU is present, pynvml. No HTTP, no metrics.
"""
