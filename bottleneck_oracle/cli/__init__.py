"""The ``oracle`` command line: one small module per command group, each parsing its flags,
calling one library function and rendering the result (rich on stderr, ``--json`` on stdout).
Imports any package below it; nothing imports it.
"""

from bottleneck_oracle.cli.app import app, main

__all__ = ["app", "main"]
