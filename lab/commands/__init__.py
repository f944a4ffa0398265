"""The lab's CLI command modules; each registers itself on the groups of mgmatch.app.cli."""
