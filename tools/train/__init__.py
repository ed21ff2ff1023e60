"""Training, export and sampling of argen's embedded default model (dev tooling, PyTorch)."""
