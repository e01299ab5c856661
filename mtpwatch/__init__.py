"""mtpwatch: watch vLLM speculative decoding (MTP, EAGLE, ngram) live in a terminal."""

__version__ = "0.1.0"
