"""The corpus that `oracle train` and `oracle gnn-eval` run on: the graph model tests' own; and the
agent's workspace with the shipped example loaded, for `oracle ask`."""

from tests.agent.conftest import agent_home
from tests.gnn.conftest import tiny_corpus

__all__ = ["agent_home", "tiny_corpus"]
