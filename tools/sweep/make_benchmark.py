"""Writes the held-out GenEval-style benchmark prompt set (tools/sweep/benchmark_prompts.jsonl).

  python -m tools.sweep.make_benchmark

One JSON object a line in GenEval's evaluation_metadata.jsonl shape:
{"tag", "include": [{"class", "count", "color"?, "position"?: [relation, index]}], "exclude"?, "prompt"}.
Shapes play GenEval's object classes. Training captions never equal these prompts
(tools/scenes/grammar.py HoldOut); color_attr contents are held out in either order.
"""

import json
import os

from tools.scenes.grammar import benchmark_specs, geneval_metadata

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmark_prompts.jsonl")


def main():
    specs = benchmark_specs()
    with open(OUT, "w", encoding="utf-8") as f:
        for spec in specs:
            f.write(json.dumps(geneval_metadata(spec)) + "\n")
    counts = {}
    for s in specs:
        counts[s["tag"]] = counts.get(s["tag"], 0) + 1
    print(f"{len(specs)} prompts -> {OUT}: {counts}")


if __name__ == "__main__":
    main()
