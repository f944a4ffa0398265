"""``python -m mgmatch.app …`` is the ``mgmatch`` command (for images without console scripts)."""

from mgmatch.app.cli import main

main()
