"""The Textual app: widgets, screens, CSS, and `markup` (the one package that writes Textual markup).

A client of `mtpwatch.session` (the sources, views and recorder it shows) and of `mtpwatch.core`;
never of `mtpwatch.sim` or `mtpwatch.commands`.
"""
