"""CLI command modules; each registers itself on mgmatch.app.cli."""
