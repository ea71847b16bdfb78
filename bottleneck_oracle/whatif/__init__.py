"""What-if engine: edits compiled onto a trace's DAG, predicted, explained and optimized."""
