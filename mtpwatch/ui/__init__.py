"""The Textual app: one client of mtpwatch.core."""
