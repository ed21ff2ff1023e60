"""GenEval-style pass/fail of one image against one prompt's metadata, and the aggregate score.

Rules (GenEval's evaluate_images, restated for shapes):
  include {class, count[, color][, position: [rel, i]]}: at least `count` objects of the class;
    with color, at least `count` of them in that color; with position, every object of the
    class stands in `rel` to every object of include[i]'s class (GenEval's relation rule).
  exclude {class, count}: fewer than `count` objects of the class (counting asks for exactly N).
Overall score = mean of the per-category accuracies (as GenEval reports it).
"""

from __future__ import annotations

from tools.scenes.relations import relations


def evaluate(meta: dict, objects: list[dict]) -> tuple[bool, str]:
    """(passed, reason for failure or "")."""
    by_class: dict[str, list[dict]] = {}
    for o in objects:
        by_class.setdefault(o["shape"], []).append(o)
    include = meta.get("include", [])
    for req in include:
        found = by_class.get(req["class"], [])
        if len(found) < req["count"]:
            return False, f"expected {req['count']} {req['class']}, found {len(found)}"
        if "color" in req:
            colored = [o for o in found if o["color"] == req["color"]]
            if len(colored) < req["count"]:
                got = ",".join(o["color"] for o in found)
                return False, f"expected {req['count']} {req['color']} {req['class']}, colors found: {got}"
        if "position" in req:
            rel, idx = req["position"]
            targets = by_class.get(include[idx]["class"], [])
            for o in found:
                for t in targets:
                    if rel not in relations(o["bbox"], t["bbox"]):
                        return False, f"{req['class']} not {rel} {include[idx]['class']}"
    for req in meta.get("exclude", []):
        found = by_class.get(req["class"], [])
        if len(found) >= req["count"]:
            return False, f"expected fewer than {req['count']} {req['class']}, found {len(found)}"
    return True, ""


def aggregate(results: list[tuple[str, bool]]) -> dict:
    """[(tag, passed)] -> {"per_category": {tag: (accuracy, n)}, "overall": mean of category accuracies}."""
    per: dict[str, list[int]] = {}
    for tag, ok in results:
        per.setdefault(tag, []).append(int(ok))
    per_cat = {t: (sum(v) / len(v), len(v)) for t, v in per.items()}
    overall = sum(a for a, _ in per_cat.values()) / max(len(per_cat), 1)
    return {"per_category": per_cat, "overall": overall}


def format_table(summary: dict) -> str:
    order = ["single_object", "two_object", "counting", "colors", "position", "color_attr"]
    lines = ["| category | accuracy | images |", "|---|---|---|"]
    for tag in order + sorted(set(summary["per_category"]) - set(order)):
        if tag in summary["per_category"]:
            acc, n = summary["per_category"][tag]
            lines.append(f"| {tag} | {acc:.3f} | {n} |")
    lines.append(f"| **overall** | **{summary['overall']:.3f}** | |")
    return "\n".join(lines)
