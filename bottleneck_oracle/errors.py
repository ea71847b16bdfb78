"""Exceptions of Bottleneck Oracle: one root and one class per kind of failure."""

from __future__ import annotations

__all__ = [
    "OracleError", "TraceFormatError", "ConfigError", "NotFoundError", "GraphError", "CaptureError", "GraphStoreError",
    "StoreUnavailableError", "QueryError", "ModelError", "SetupError", "one_line",
]


def one_line(error: object) -> str:
    """An error text on one line (drivers and servers put newlines in theirs)."""
    return " ".join(str(error).split())


class OracleError(Exception):
    """Root of every error the tool reports as bad input (exit code 2)."""


class TraceFormatError(OracleError):
    """A trace file is unreadable, truncated, of the wrong schema, or inconsistent."""


class ConfigError(OracleError):
    """A setting, flag or environment value is invalid."""


class NotFoundError(ConfigError):
    """A trace, step or rank asked for is not there (the message lists those that are)."""


class GraphError(OracleError):
    """The execution graph cannot be built or analysed (for example it has a cycle)."""


class CaptureError(OracleError):
    """A training job run under the profiler failed."""


class GraphStoreError(OracleError):
    """The graph database is unreachable, not running, or cannot start, stop or store data."""


class StoreUnavailableError(GraphStoreError):
    """The graph database dropped the connection or is busy: the same write may pass when sent again."""


class QueryError(OracleError):
    """A graph query is unknown, refused (a write on the read-only path), or rejected by the server."""


class ModelError(OracleError):
    """The chat model's server refused or failed a request (key, rate limit, time-out, bad reply)."""


class SetupError(OracleError):
    """Something the tool needs is missing from this machine (``oracle doctor`` says what and how to get it)."""
