"""The graph model: step graphs for PyG, a heterogeneous GAT, its training, inference, baselines and scores."""
