"""The testbed levers on the data side (docs/model.md, "Testbed candidates"):

* rich captions (tools/scenes/rich_caption.py): the words on hand-made scenes; in `generate`,
  rich captions extend the scene's short caption, name every object, leave the images and the
  default captions exactly as without them, and never name a held-out benchmark colour pair;
* the prompt template with a system prompt (tools/train/text_tokenizer.py): its text, and
  `load_prompt_encoder` taking the template from a model folder's config.json (needs the
  `tokenizers` package: that part is skipped without it).

  python3 tools/train/tests/testbed_data_test.py      (exit 77: numpy/PIL missing, skipped)
"""

import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, ROOT)

try:
    import numpy as np
    import PIL  # noqa: F401
except ImportError as e:  # CI without the dev venv
    print(f"testbed_data_test: skipped, {e} (needs numpy and pillow: scripts/dev-python.sh)")
    sys.exit(77)

from tools.scenes.generate import DEFAULT_BENCHMARK, generate  # noqa: E402
from tools.scenes.grammar import HoldOut  # noqa: E402
from tools.scenes.rich_caption import holdout_allows_scene, position_words, rich_caption, size_word  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def test_words():
    check(position_words([0, 0, 40, 40]) == "top left", position_words([0, 0, 40, 40]))
    check(position_words([80, 80, 112, 112]) == "center", position_words([80, 80, 112, 112]))
    check(position_words([150, 80, 190, 112]) == "right", position_words([150, 80, 190, 112]))
    check(position_words([80, 150, 112, 190]) == "bottom", position_words([80, 150, 112, 190]))
    check(size_word([0, 0, 40, 40]) == "small" and size_word([0, 0, 80, 80]) == "medium"
          and size_word([0, 0, 110, 110]) == "large", "size words")
    scene = {"background": {"kind": "texture"},
             "objects": [{"shape": "circle", "color": "red", "pattern": "striped", "bbox": [10, 10, 110, 110]},
                         {"shape": "square", "color": "blue", "pattern": "solid", "bbox": [150, 150, 190, 190]}]}
    got = rich_caption("a circle and a square", scene)
    want = ("a circle and a square: a large striped red circle at the top left, "
            "a small solid blue square at the bottom right, on a textured background")
    check(got == want, got)


def test_generate():
    n = 120
    images0, scenes0 = generate(n, base_seed=3, workers=1)
    images1, scenes1 = generate(n, base_seed=3, workers=1, rich_fraction=1.0)
    check(np.array_equal(images0, images1), "rich captions changed the images")
    check(not any(s.get("rich") for s in scenes0), "rich captions without asking")
    holdout = HoldOut.from_jsonl(DEFAULT_BENCHMARK)
    rich = 0
    for short, long_ in zip(scenes0, scenes1):
        check(short["objects"] == long_["objects"], "scene contents differ")
        if not long_.get("rich"):  # a held-out colour pair keeps the short caption
            check(long_["caption"] == short["caption"], long_["caption"])
            check(not holdout_allows_scene(long_, holdout), f"short caption without reason: {long_['caption']}")
            continue
        rich += 1
        check(long_["caption"].startswith(short["caption"] + ": "), long_["caption"])
        for obj in long_["objects"]:
            check(f"{obj['color']} {obj['shape']} at the" in long_["caption"], (obj, long_["caption"]))
        check(holdout_allows_scene(long_, holdout), f"held-out pair named: {long_['caption']}")
    check(rich > n // 2, f"only {rich} of {n} captions are rich")
    _, half = generate(n, base_seed=3, workers=1, rich_fraction=0.5)
    k = sum(1 for s in half if s.get("rich"))
    check(n // 4 < k < 3 * n // 4, f"rich_fraction 0.5 gave {k} of {n}")
    try:
        generate(1, rich_fraction=1.5)
        check(False, "rich_fraction 1.5 accepted")
    except ValueError:
        pass


def test_template():
    try:
        from tools.train.text_tokenizer import JANUS_SYSTEM_PROMPT, load_prompt_encoder, prompt_text
    except ImportError as e:
        print(f"testbed_data_test: template part skipped, {e}")
        return
    check(prompt_text("a cat") == "<|User|>: a cat\n\n<|Assistant|>:<begin_of_image>", prompt_text("a cat"))
    check(prompt_text("a cat", "Be brief.") == "Be brief.\n\n<|User|>: a cat\n\n<|Assistant|>:<begin_of_image>",
          prompt_text("a cat", "Be brief."))
    shipped = os.path.join(ROOT, "models", "argen-scenes-v1")
    official = load_prompt_encoder(shipped)
    check(official.system_prompt == "", "the shipped model has no system prompt")
    tmp = tempfile.mkdtemp()
    try:
        with open(os.path.join(shipped, "config.json")) as f:
            config = json.load(f)
        config["argen_system_prompt"] = JANUS_SYSTEM_PROMPT
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f)
        shutil.copy(os.path.join(shipped, "tokenizer.json"), tmp)
        enc = load_prompt_encoder(tmp)
        with open(os.path.join(ROOT, "engine", "families", "janus", "tests", "system_prompt_golden.json")) as f:
            golden = json.load(f)
        for case in golden["cases"]:  # the ids the engine is tested against
            check(enc.encode(case["caption"]) == case["cond"], case["caption"])
        config["argen_system_prompt"] = 3
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f)
        try:
            load_prompt_encoder(tmp)
            check(False, "a non-string system prompt was accepted")
        except ValueError as e:
            check("argen_system_prompt" in str(e), str(e))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    test_words()
    test_generate()
    test_template()
    print("testbed_data_test: ok")
