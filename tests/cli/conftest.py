"""The corpus that `oracle train` and `oracle gnn-eval` run on: the graph model tests' own."""

from tests.gnn.conftest import tiny_corpus

__all__ = ["tiny_corpus"]
