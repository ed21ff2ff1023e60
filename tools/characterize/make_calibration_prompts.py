"""Writes ssd's calibration prompt set (tools/characterize/calibration_prompts.txt): captions in
the benchmark's "a photo of ..." form drawn from the training distribution (tools/scenes/grammar.py),
none equal to a benchmark prompt (tools/sweep/benchmark_prompts.jsonl, HoldOut), so classifying
the heads on them does not look at the benchmark.

  /usr/bin/python3 -m tools.characterize.make_calibration_prompts [--count 16] [--seed 2027]
"""

import argparse
import os

import numpy as np

from tools.scenes.grammar import HoldOut, caption, sample_training_spec

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "calibration_prompts.txt")
BENCHMARK = os.path.join(HERE, "..", "sweep", "benchmark_prompts.jsonl")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--seed", type=int, default=2027)
    args = parser.parse_args()
    holdout = HoldOut.from_jsonl(BENCHMARK)
    rng = np.random.default_rng(args.seed)
    prompts: list[str] = []
    while len(prompts) < args.count:
        spec = sample_training_spec(rng)
        text = caption(spec)
        if holdout.allows(spec, text) and text not in prompts:
            prompts.append(text)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write("\n".join(prompts) + "\n")
    print(f"{len(prompts)} prompts -> {OUT}")


if __name__ == "__main__":
    main()
