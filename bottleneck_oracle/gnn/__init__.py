"""The graph model: step graphs for PyG, a heterogeneous GAT, its training, inference, baselines and scores.

Imports ``job/``, ``replay/``, ``analysis/`` and below, and reads the recorders' ground truth (``capture/``, ``synth/``).
"""
