"""One click command per module; mtpwatch.cli loads each lazily."""
