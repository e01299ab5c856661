"""The vLLM simulator: a real HTTP server on loopback that speaks vLLM 0.32's formats."""
