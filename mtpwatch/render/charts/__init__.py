"""Pictures of saved bench reports: terminal plots (plotext, optional) and their table fallback."""
