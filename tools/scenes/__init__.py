"""Procedural scenes for argen's embedded default model: shapes on light backgrounds with captions."""
