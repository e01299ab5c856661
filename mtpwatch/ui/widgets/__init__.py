"""Widgets of the mtpwatch app, one public widget per module."""
