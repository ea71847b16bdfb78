"""The HTTP API of ``oracle serve`` (FastAPI) over the service layer, and the page it serves.

Imports the service layer, the agent and below; nothing imports it.
"""

from bottleneck_oracle.server.app import create_app

__all__ = ["create_app"]
