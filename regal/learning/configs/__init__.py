"""Training configurations (ml_collections) for `python -m regal.train`."""
