"""Every function that returns Textual markup: the one package where plain text becomes markup and is escaped.

The session layer hands over frozen view models and plain strings (`session.views.ServerView`,
`PromptSummary`, `StartupView`, `Answer`, the k advisor's `Advice`, a measurement's `MeasureUpdate`);
the modules here draw them for the widgets and screens, colour them with the theme's variables, and
escape every string that came from a server, a log or the user.
"""
