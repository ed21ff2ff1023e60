"""GenEval-style scorer for argen's shape scenes (classical CV, no learned detector)."""
