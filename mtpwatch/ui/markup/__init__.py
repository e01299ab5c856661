"""Every function that returns Textual markup: the one package where plain text becomes markup and is escaped.

The session layer (`mtpwatch.session`) hands over frozen view models and plain strings
(`session.views.ServerView`, `PromptSummary`, `StartupView`, `session.views.Answer`, the k
advisor's `Advice`, a measurement's `MeasureUpdate`); the modules here draw them for the widgets
and screens, colour them with the theme's variables, and escape every string that came from a
server, a log or the user:

- `panel`: a server panel's header, key numbers, per-position bars, verdict, prompt summaries;
- `compact`: the same numbers at 80 columns, as labelled groups packed into the width;
- `roofline`: the roofline panel (bandwidth, ceilings, speed-up terms) and its one-phrase form;
- `ab`: the A/B view's speed-up line, k advisor, lossless check and F6 measurement;
- `titles`: the screens' title bars and status lines.
"""
