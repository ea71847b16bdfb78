"""``python -m bottleneck_oracle`` runs the ``oracle`` command line."""

from bottleneck_oracle.cli import main

main()
