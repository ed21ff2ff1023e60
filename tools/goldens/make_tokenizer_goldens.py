#!/usr/bin/env python3
"""Tokenizer goldens for engine/tokenizer tests, from HF `tokenizers` and
`transformers` (the independent reference).

Writes under tests/goldens/tokenizer/:
  bpe_deepseek/tokenizer.json   byte-level BPE trained here on a small corpus, with
                                DeepSeek-LLM's (Janus-Pro's) pre-tokenizer, decoder,
                                BOS post-processor and the Janus special tokens;
                                merges stored as [a, b] pairs
  bpe_deepseek_string_merges.json  the same tokenizer with merges as "a b" strings
  bpe_gpt2_pretok.json          the same model behind GPT-2's ByteLevel(use_regex) split
  wordlevel/tokenizer.json      WordLevel with the Whitespace pre-tokenizer and added tokens
                                exercising normalized / single_word / lstrip / rstrip
  pretokenizers.json            the pre-tokenizers of public tokenizers (GPT-2's ByteLevel
                                regex, Llama-3 / cl100k, Qwen2, GPT-4o / o200k: the
                                tokenizer.json "pre_tokenizer" objects as HF serializes
                                them) with HF's pieces for a set of hard strings;
                                `--pretokenizers` writes only this file (needs only
                                `tokenizers`)
  goldens.json                  ids (with/without special tokens) and decoded text for
                                every test string and tokenizer; Janus-Pro generation
                                prompt ids (cond and CFG uncond) for a few captions.
                                Also covers the tiny checkpoints' tokenizer
                                (tests/goldens/tiny/tiny-mha/tokenizer.json) when present:
                                re-run this script after regenerating it.

Run: .venv/bin/python tools/goldens/make_tokenizer_goldens.py [--pretokenizers]
"""
import json
import os
import pathlib
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "goldens" / "tokenizer"
TINY_TOKENIZER = ROOT / "tests" / "goldens" / "tiny" / "tiny-mha" / "tokenizer.json"

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
JANUS_SPECIALS = [BOS, EOS, PAD, "<|User|>", "<|Assistant|>", "<begin_of_image>", "<end_of_image>",
                  "<image_placeholder>"]

# DeepSeek-LLM's pre-tokenizer (as in the Janus-Pro / deepseek-llm tokenizer.json). The
# letter class is written as code point ranges: typed literally, some of its
# characters (U+1F7D, U+1FBE, U+2126, U+212A...) would be NFC-folded by editors.
LETTER_RANGES = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA), (0x1BC, 0x1BF),
    (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377), (0x37B, 0x37D), (0x37F, 0x37F),
    (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481),
    (0x48A, 0x52F), (0x531, 0x556), (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA),
    (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D),
    (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC),
    (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102),
    (0x2107, 0x2107), (0x210A, 0x2113), (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126),
    (0x2128, 0x2128), (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF3),
    (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF),
    (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F),
    (0x104B0, 0x104D3), (0x104D8, 0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF),
    (0x1E900, 0x1E943),
]
PUNCT_RANGES = [(0x21, 0x2F), (0x3A, 0x7E), (0xFF01, 0xFF0F), (0xFF1A, 0xFF5E), (0x2018, 0x201F), (0x3000, 0x3002)]
CJK_RANGES = [(0x4E00, 0x9FA5), (0x800, 0x4E00), (0xAC00, 0xD7FF)]


def char_class(ranges) -> str:
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


DEEPSEEK_PRE_TOKENIZER = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex("[\r\n]"), "isolated"),
    pre_tokenizers.Split(Regex("\\s?[" + char_class(LETTER_RANGES) + "]+"), "isolated"),
    pre_tokenizers.Split(Regex("\\s?[" + char_class(PUNCT_RANGES) + "]+"), "isolated"),
    pre_tokenizers.Split(Regex("\\s+$"), "isolated"),
    pre_tokenizers.Split(Regex("[" + char_class(CJK_RANGES) + "]+"), "isolated"),
    pre_tokenizers.Digits(individual_digits=True),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
])

CORPUS_BASE = [
    "A close-up high-contrast photo of Sydney Opera House sitting next to Eiffel tower.",
    "a red cube to the left of a blue sphere on a wooden table",
    "two green triangles and three yellow circles on a white background",
    "A stunning princess from kabul in red, white traditional clothing, blue eyes, brown hair",
    "The quick brown fox jumps over the lazy dog. Don't panic; it's fine!",
    "In 2026 there were 365 days, 12 months and 52 weeks; pi is 3.14159.",
    "She said: \"hello, world\" -- and left (quietly) at 10:25 UTC.",
    "Prices: $5.99, €12, ¥300, 50% off! #sale @shop",
    "def f(x):\n    return x * 2  # double\n\tprint(f(21))",
    "一只红色的猫坐在蓝色的椅子上。天空很蓝。",
    "日本語のテキストも少し含めます。東京タワー。",
    "한국어 문장도 조금 있습니다. 서울의 밤.",
    "Ça va très bien, merci! Über den Wolken. Señor niño.",
    "Привет, мир! Как дела?",
    "Emoji: 🎨🖼️ 😀 👍🏽 — and a snowman ☃.",
    "ＦＵＬＬＷＩＤＴＨ ｌｅｔｔｅｒｓ and （brackets）！",
    "a photo of a cat, a photo of a dog, a painting of a horse, a drawing of a bird",
    "striped, dotted, checkered, gradient patterns in purple, orange, pink and gray",
]
CORPUS = CORPUS_BASE * 20 + [" ".join(CORPUS_BASE[i:i + 3]) for i in range(len(CORPUS_BASE))]

TEST_STRINGS = [
    "",
    " ",
    "   ",
    "\n",
    "\n\n\n",
    "\t",
    "\r\n",
    "a",
    "Hello world",
    "Hello  world",
    "Hello     world   ",
    "  leading spaces",
    "trailing spaces   ",
    "tabs\tand\ttabs",
    "line one\nline two\r\nline three",
    "mixed \t \n whitespace \u3000 ideographic space",
    "no-break\u00a0space and\u2009thin space",
    "0",
    "123",
    "3.14159",
    "12345678901234567890",
    "year 2026, 10:25 UTC",
    "1,000,000 and 1_000",
    "Don't, can't, won't, it's, I'm, you're, we've, they'll, he'd",
    "DON'T SHOUT",
    "Hello, world! How are you? (fine) [ok] {yes} <no>",
    "a--b...c!!!d???e;;;f:::g",
    "\"quoted\" 'single' `backtick`",
    "email@example.com https://example.org/path?q=1&r=2#frag",
    "$5.99 €12 ¥300 £7 50%",
    "x = (a + b) * c / d - e ^ f | g & h ~ i",
    "def f(x):\n    return x * 2",
    "一只红色的猫",
    "天空很蓝。今天是晴天！",
    "中文English混合text",
    "東京タワーとスカイツリー",
    "한국어 문장",
    "Привет, мир!",
    "Ça va très bien, Señor niño, Über",
    "Ελληνικά γράμματα",
    "עברית ועربية",
    "हिन्दी पाठ",
    "🎨",
    "Emoji 😀👍🏽🖼️ mix",
    "👨‍👩‍👧‍👦 family",
    "ＦＵＬＬＷＩＤＴＨ ｌｅｔｔｅｒｓ（ｘ）！",
    "½ ² ³ Ⅻ ⑤ ٣ ۴ ༣",
    "combining e\u0301 and a\u0308",
    "zero\u200bwidth\u200djoiner",
    "<｜begin▁of▁sentence｜>Hello",
    "text <|User|>: caption\n\n<|Assistant|>:<begin_of_image>",
    "<begin_of_image><end_of_image>",
    "before<｜▁pad▁｜>after <｜end▁of▁sentence｜>",
    "almost <begin_of_image special",
    "<image_placeholder> is Figure 1.",
    "a red cube to the left of a blue sphere",
    "A close-up high-contrast photo of Sydney Opera House sitting next to Eiffel tower, under a blue night sky of roiling energy, exploding yellow stars, and radiating swirls of blue.",
    "UPPER lower MiXeD CamelCase snake_case kebab-case",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "!!!!!!!!!!!!!!!!!!!!",
    "end with newline\n",
    "ends with spaces and newline  \n  ",
    "a red cube to the left",
    "leftover left, left_ left",
    "x [R]   y   [L] z",
    "[L][R]  [L]",
]

CAPTIONS = [
    "a red cube to the left of a blue sphere",
    "A stunning princess from kabul in red, white traditional clothing, blue eyes, brown hair",
    "  two cats, 3 dogs and 一只鸟  ",
    "photo\nwith\ttabs and newlines 😀",
]


def deepseek_prompt(caption: str) -> str:
    """Re-statement of Janus's VLChatProcessor.apply_sft_template_for_multi_turn_prompts
    with sft_format "deepseek", system_prompt "" and the README's conversation,
    followed by the image start tag."""
    roles_and_messages = [("<|User|>", caption.strip()), ("<|Assistant|>", "")]
    seps = ["\n\n", EOS]
    ret = ""  # empty system prompt
    for i, (role, message) in enumerate(roles_and_messages):
        if message:
            ret += role + ": " + message + seps[i % 2]
        else:
            ret += role + ":"
    return ret.strip() + "<begin_of_image>"


def train_bpe() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = DEEPSEEK_PRE_TOKENIZER
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    tok.add_special_tokens(JANUS_SPECIALS[2:])
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, bos_id)])
    return tok


def train_wordlevel() -> Tokenizer:
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=400, min_frequency=1, special_tokens=["[UNK]", "[PAD]"],
                                        show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    # Added-token matching rules: specials (normalized=false) are extracted before
    # normalized=true tokens; single_word, lstrip and rstrip.
    tok.add_special_tokens(["<begin_of_image>", "cube to"])
    tok.add_tokens([AddedToken("red cube", normalized=True), AddedToken("left", single_word=True, normalized=False),
                    AddedToken("[R]", rstrip=True, normalized=False), AddedToken("[L]", lstrip=True, normalized=False)])
    return tok


def cases(tok: Tokenizer) -> list:
    out = []
    for text in TEST_STRINGS:
        ids = tok.encode(text).ids
        plain = tok.encode(text, add_special_tokens=False).ids
        out.append({"text": text, "ids": ids, "ids_no_special": plain,
                    "decoded": tok.decode(ids, skip_special_tokens=False),
                    "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    return out


def prompt_cases(path: pathlib.Path) -> dict:
    from transformers import LlamaTokenizerFast

    llama = LlamaTokenizerFast(tokenizer_file=str(path), bos_token=BOS, eos_token=EOS, add_bos_token=True,
                               add_eos_token=False)
    pad_id = llama.vocab.get(PAD)
    plain = Tokenizer.from_file(str(path))
    out = []
    for caption in CAPTIONS:
        text = deepseek_prompt(caption)
        cond = llama.encode(text)
        # Cross-check: the official class adds exactly BOS to the plain tokenizers encoding.
        assert cond == [llama.convert_tokens_to_ids(BOS)] + plain.encode(text, add_special_tokens=False).ids
        uncond = list(cond)
        uncond[1:-1] = [pad_id] * (len(cond) - 2)
        out.append({"caption": caption, "text": text, "cond": cond, "uncond": uncond})
    return {"file": os.path.relpath(path, OUT), "cases": out}


# Pre-tokenizer patterns of public tokenizers, as their tokenizer.json files
# carry them (Split + ByteLevel without its own regex), and GPT-2's ByteLevel regex.
CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
PUBLIC_PRE_TOKENIZERS = {
    "gpt2": pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    "llama3_cl100k": pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                                   r"|\s*[\r\n]+|\s+(?!\S)|\s+"), "isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ]),
    "qwen2": pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                                   r"|\s*[\r\n]+|\s+(?!\S)|\s+"), "isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ]),
    "gpt4o_o200k": pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+" + CONTRACTIONS + "?"
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*" + CONTRACTIONS + "?"
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"), "isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ]),
}
PRE_TOKENIZER_STRINGS = [
    "Hello world! I'M here, you'LL see: it's 12345678 o'clock.",
    "   leading spaces and trailing   ",
    "tabs\tand\nnewlines\r\n\r\nand\n\n\n  gaps",
    "CamelCaseWords and HTTPServer and iPhone's",
    "数字１２３ and 中文 mixed with English, 한국어, русский, ελληνικά",
    "emoji 😀👍🏽 and ZWJ 👨‍👩‍👧 sequences",
    "combining e\u0301 and precomposed é; Arabic ٣٤٥ and Devanagari नमस्ते",
    "punctuation!!! ...?? (brackets) [x] {y} <z> a/b/c\n/path",
    "numbers 1 22 333 4444 55555 3.14159 1e10 ½ ² Ⅻ",
    "don't DON'T Don'T we've WE'VE",
    "",
    "x",
    " ",
    "\n",
]


def pretokenizer_goldens() -> list:
    out = []
    for name, pre in PUBLIC_PRE_TOKENIZERS.items():
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre
        config = json.loads(tok.to_str())["pre_tokenizer"]  # exactly as in a tokenizer.json
        cases_out = [{"text": t, "pieces": [p for p, _ in pre.pre_tokenize_str(t)]} for t in PRE_TOKENIZER_STRINGS]
        out.append({"name": name, "pre_tokenizer": config, "cases": cases_out})
    return out


def write_pretokenizer_goldens() -> None:
    path = OUT / "pretokenizers.json"
    path.write_text(json.dumps(pretokenizer_goldens(), ensure_ascii=False, indent=1) + "\n")
    print(path)


def main() -> None:
    if "--pretokenizers" in sys.argv[1:]:
        write_pretokenizer_goldens()
        return
    write_pretokenizer_goldens()
    (OUT / "bpe_deepseek").mkdir(parents=True, exist_ok=True)
    (OUT / "wordlevel").mkdir(parents=True, exist_ok=True)

    bpe = train_bpe()
    bpe_path = OUT / "bpe_deepseek" / "tokenizer.json"
    bpe.save(str(bpe_path))
    data = json.loads(bpe_path.read_text())
    assert isinstance(data["model"]["merges"][0], list), "expected [a, b] merges from this tokenizers version"

    string_merges = json.loads(bpe_path.read_text())
    string_merges["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
    string_path = OUT / "bpe_deepseek_string_merges.json"
    string_path.write_text(json.dumps(string_merges, ensure_ascii=False))
    assert cases(Tokenizer.from_file(str(string_path))) == cases(bpe)

    gpt2 = json.loads(bpe_path.read_text())
    gpt2["pre_tokenizer"] = json.loads(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True).__getstate__())
    gpt2_path = OUT / "bpe_gpt2_pretok.json"
    gpt2_path.write_text(json.dumps(gpt2, ensure_ascii=False))

    wl = train_wordlevel()
    wl_path = OUT / "wordlevel" / "tokenizer.json"
    wl.save(str(wl_path))

    # Prompts through the official tokenizer class (LlamaTokenizerFast, add_bos_token), for this
    # tokenizer and for the tiny test checkpoints' tokenizer (tools/goldens/make_tiny_checkpoint.py).
    prompt_sets = [prompt_cases(bpe_path)]
    if TINY_TOKENIZER.exists():
        prompt_sets.append(prompt_cases(TINY_TOKENIZER))
        tiny_cases = cases(Tokenizer.from_file(str(TINY_TOKENIZER)))

    goldens = {
        "generator": "tools/goldens/make_tokenizer_goldens.py",
        "tokenizers": {
            "bpe_deepseek": {"file": "bpe_deepseek/tokenizer.json", "cases": cases(Tokenizer.from_file(str(bpe_path)))},
            "bpe_deepseek_string_merges": {"file": "bpe_deepseek_string_merges.json",
                                           "cases": cases(Tokenizer.from_file(str(string_path)))},
            "bpe_gpt2_pretok": {"file": "bpe_gpt2_pretok.json", "cases": cases(Tokenizer.from_file(str(gpt2_path)))},
            "wordlevel": {"file": "wordlevel/tokenizer.json", "cases": cases(Tokenizer.from_file(str(wl_path)))},
        },
        "prompts": prompt_sets,
    }
    if TINY_TOKENIZER.exists():
        goldens["tokenizers"]["tiny_checkpoint"] = {"file": os.path.relpath(TINY_TOKENIZER, OUT), "cases": tiny_cases}
    (OUT / "goldens.json").write_text(json.dumps(goldens, ensure_ascii=False, indent=1))
    for p in sorted(OUT.rglob("*.json")):
        print(f"{p.relative_to(ROOT)}: {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
