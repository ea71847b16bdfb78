"""Evaluation harness: case files with ground truth (``cases``), the default case set (``make_cases``),
the suites (``rootcause``, ``whatif_suite``, ``optimize_suite``, ``retrieval_suite``, ``gnn_suite``,
``latency``) run by ``run.run_suites``, the report (``report``) and the regression gate (``compare``).

Only the data types are imported here: ``oracle eval compare`` reads two reports without loading the
agent and its models.
Imports the agent, the service layer and everything below them; only the CLI imports it.
"""

from bottleneck_oracle.evals.types import METRIC_DIRECTIONS, Case, CaseResult, EditTruth, Expect, SuiteResult

__all__ = ["METRIC_DIRECTIONS", "Case", "CaseResult", "EditTruth", "Expect", "SuiteResult"]
