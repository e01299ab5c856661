"""Entry point for ``python -m mtpwatch``."""

from mtpwatch.cli import main

main()
