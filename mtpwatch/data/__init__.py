"""Data files shipped with mtpwatch: built-in prompt sets (`prompts/`) and model configs (`configs/`)."""
