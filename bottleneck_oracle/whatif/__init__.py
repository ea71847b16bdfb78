"""What-if predictions: each predictor's answer to edits (the replay of ``replay/``, the graph model), the one
to trust, ``optimize``'s ranked plan, and their accuracy against real and simulated re-runs.

Imports the replay engine, the graph model, the playbook (``graphdb/``) and the recorders; never the service layer.
"""
