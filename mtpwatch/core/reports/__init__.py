"""Bench reports as files: writing them (`reportio`), reading them back (`reportfile`), several side
by side (`compare`) and the data behind each plot (`figures`).

May import: `mtpwatch.core.ab` and what it may import; never `mtpwatch.core.sweeps`.
"""
