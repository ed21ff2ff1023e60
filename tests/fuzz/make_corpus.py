#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ (small, committed).

Standard library only. Run from anywhere: python3 tests/fuzz/make_corpus.py
Each target's seeds are valid inputs of its format plus a few near-misses, so
mutation starts close to the parser's interesting paths. Files libFuzzer finds
later and that are worth keeping may be added by hand (keep each under 4 KiB).
"""
import json
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(ROOT, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None, pad=0):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header, blob = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    text = json.dumps(header, separators=(",", ":")).encode() + b" " * pad
    return struct.pack("<Q", len(text)) + text + blob


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def make_safetensors():
    t = "fuzz_safetensors"
    write(t, "f32_2x3", safetensors([("w", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6))]))
    write(t, "mixed_dtypes", safetensors([
        ("a", "F16", [4], struct.pack("<4H", 0x3C00, 0x7C00, 0xFC00, 0x7E00)),   # 1, inf, -inf, nan
        ("b", "BF16", [2, 2], struct.pack("<4H", 0x3F80, 0x7F80, 0x0001, 0x8000)),
        ("c", "F32", [], f32(0.5)),
        ("empty", "F32", [0, 7], b""),
    ], metadata={"format": "pt"}, pad=5))
    write(t, "bad_dtype", safetensors([("x", "I64", [1], b"\0" * 8)]))
    write(t, "short_data", safetensors([("x", "F32", [4], f32(1, 2))]))
    write(t, "not_object", struct.pack("<Q", 2) + b"[]")
    write(t, "huge_len", struct.pack("<Q", 1 << 60) + b"{}")
    write(t, "tiny", b"\x02\0\0\0")


def make_checkpoint_index():
    t = "fuzz_checkpoint_index"
    s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    def index(weight_map, **extra):
        d = {"metadata": {"total_size": 48}, "weight_map": weight_map}
        d.update(extra)
        return json.dumps(d)
    write(t, "valid", index({"a.weight": s1, "b.weight": s1, "c.weight": s2}))
    write(t, "subset", index({"c.weight": s2}))
    write(t, "missing_tensor", index({"a.weight": s1, "d.weight": s2}))
    write(t, "wrong_shard", index({"a.weight": s2}))
    write(t, "no_such_shard", index({"a.weight": "model-00009-of-00009.safetensors"}))
    write(t, "traversal", index({"a.weight": "../" + s1, "b.weight": "/etc/passwd", "c.weight": ".."}))
    write(t, "not_strings", index({"a.weight": 1, "b.weight": None}))
    write(t, "empty_map", index({}))
    write(t, "no_map", json.dumps({"metadata": {}}))


def make_janus_config():
    t = "fuzz_janus_config"
    root = os.path.dirname(os.path.dirname(ROOT))
    for name, path in [("tiny_mha", "tests/goldens/tiny/tiny-mha/config.json"),
                       ("scenes_v1", "models/argen-scenes-v1/config.json")]:
        with open(os.path.join(root, path), "rb") as f:
            write(t, name, f.read())
    with open(os.path.join(root, "tests/goldens/tiny/tiny-mha/config.json")) as f:
        base = json.load(f)
    def variant(name, edit):
        c = json.loads(json.dumps(base))
        edit(c)
        write(t, name, json.dumps(c))
    variant("gqa", lambda c: c["language_config"].update(num_key_value_heads=1))
    variant("negative_hidden", lambda c: c["language_config"].update(hidden_size=-64))
    variant("huge_layers", lambda c: c["language_config"].update(num_hidden_layers=2**31 - 1))
    variant("string_heads", lambda c: c["language_config"].update(num_attention_heads="4"))
    variant("no_gen_head", lambda c: c.pop("gen_head_config", None))
    variant("empty_ch_mult", lambda c: c["gen_vision_config"].setdefault("params", {}).update(decoder_ch_mult=[]))
    variant("float_size", lambda c: c["gen_vision_config"].setdefault("params", {}).update(image_size=32.5))


def tokenizer_json(model, pre_tokenizer, decoder, added=(), post_processor=None, normalizer=None):
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [dict(id=i, content=c, single_word=False, lstrip=False, rstrip=False,
                              normalized=False, special=sp) for i, c, sp in added],
        "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": post_processor,
        "decoder": decoder, "model": model,
    }, ensure_ascii=False)


def make_tokenizer_json():
    t = "fuzz_tokenizer_json"
    letters = "abcdefghijklmnopqrstuvwxyz"
    # Byte-level BPE over a small alphabet (\u0120 is the byte-level space).
    vocab = {c: i for i, c in enumerate(["\u0120"] + list(letters) + list("0123456789"))}
    merges = [["\u0120", "a"], ["r", "e"], ["\u0120", "re"], ["\u0120re", "d"]]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    added = [(len(vocab), "<|User|>", True), (len(vocab) + 1, "<begin_of_image>", True),
             (len(vocab) + 2, "<\uff5cbegin\u2581of\u2581sentence\uff5c>", True),
             (len(vocab) + 3, "<\uff5c\u2581pad\u2581\uff5c>", True)]
    bpe = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
           "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
           "merges": merges}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    write(t, "bpe_byte_level", tokenizer_json(bpe, byte_level, byte_level, added))
    bpe_strings = dict(bpe, merges=[a + " " + b for a, b in merges])
    split_seq = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "[\r\n]"}, "behavior": "Isolated", "invert": False},
        {"type": "Digits", "individual_digits": True},
        dict(byte_level, use_regex=False)]}
    post = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<\uff5cbegin\u2581of\u2581sentence\uff5c>": {
                "id": "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "ids": [added[2][0]],
                "tokens": ["<\uff5cbegin\u2581of\u2581sentence\uff5c>"]}}}
    write(t, "bpe_string_merges_sequence", tokenizer_json(bpe_strings, split_seq, byte_level, added, post))
    words = {w: i for i, w in enumerate(["[UNK]", "a", "red", "circle", "above", "blue", "square", ","])}
    word_level = {"type": "WordLevel", "vocab": words, "unk_token": "[UNK]"}
    write(t, "word_level", tokenizer_json(word_level, {"type": "Whitespace"},
                                          {"type": "Fuse"}, [(0, "[UNK]", True)]))
    write(t, "word_level_split", tokenizer_json(word_level, {"type": "WhitespaceSplit"}, None))
    write(t, "unsupported_model", tokenizer_json({"type": "Unigram", "vocab": [["a", 0.0]]}, None, None))
    write(t, "normalizer", tokenizer_json(word_level, {"type": "Whitespace"}, None,
                                          normalizer={"type": "Lowercase"}))
    write(t, "not_json", "{\"model\": ")
    # Found by the driver: a non-string normalizer type threw out of LoadFromJson.
    write(t, "regress_normalizer_type_number", tokenizer_json(word_level, {"type": "Whitespace"}, None,
                                                              normalizer={"type": 3, "squ": "Lowercase"}))
    # Found by the driver: a template piece or special_tokens entry without
    # its "id" / "ids" member was read through a const operator[] (undefined).
    no_id = dict(post, single=[{"SpecialToken": {"type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}])
    write(t, "regress_template_special_without_id", tokenizer_json(bpe_strings, split_seq, byte_level, added, no_id))
    no_ids = dict(post, special_tokens={"<\uff5cbegin\u2581of\u2581sentence\uff5c>": {"tokens": []}})
    write(t, "regress_template_entry_without_ids", tokenizer_json(bpe_strings, split_seq, byte_level, added, no_ids))


def make_tokenizer_encode():
    t = "fuzz_tokenizer_encode"
    for i, text in enumerate([
            "a red circle above a blue square",
            "  two  spaces, tabs\t\tand\nnew lines\r\n",
            "numbers 1234567890 and 3.14159",
            "\u00e9t\u00e9 na\u00efve \u4e2d\u6587 \U0001F600 \u200d\u2764",
            "<|User|>: <begin_of_image> <\uff5c\u2581pad\u2581\uff5c>",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "'s 're 've 'll 'd n't ?!... --- ___",
            "\x00\x01\x1f control",
    ]):
        write(t, "text%d" % i, text)
    write(t, "invalid_utf8", b"a \xff\xfe\xc3(")


def make_server_config():
    t = "fuzz_server_config"
    root = os.path.dirname(os.path.dirname(ROOT))
    with open(os.path.join(root, "configs/argen.yaml"), "rb") as f:
        write(t, "argen_yaml", f.read())
    write(t, "minimal", "model_dir: m\nport: 0\nmetrics_port: -1\n")
    write(t, "sections", "model_dir: m\ndefault_policy:\n  name: diagonal\n  sparsity: 0.75\n"
                         "connections:\n  max_threads: 8\n  keepalive_time_s: 1.5\n")
    write(t, "bad_values", "model_dir: m\nkv_budget_bytes: 1.5 GiB\nallow_port_sharing: maybe\n")
    write(t, "list_and_deep", "model_dir: [a, b]\ndefault_policy:\n  x:\n    y: 1\n")
    write(t, "anchors", "a: &x 1\nport: *x\nmodel_dir: m\n")
    write(t, "flags", "--model_dir=m\n--port\n0\n--default_policy.name=dense\n--max_prompt_bytes=4KiB\n")
    write(t, "kv_cache_dtype", "model_dir: m\ndefault_policy:\n  kv_cache_dtype: fp8\n")


def make_generate_request():
    t = "fuzz_generate_request"
    # Wire format, hand-encoded (field numbers of argen.v1.GenerateRequest).
    def varint(n):
        out = b""
        while True:
            b = n & 0x7f
            n >>= 7
            if n:
                out += bytes([b | 0x80])
            else:
                return out + bytes([b])
    def field(num, wire, payload):
        key = varint((num << 3) | wire)
        if wire == 2:
            return key + varint(len(payload)) + payload
        return key + payload
    def s(num, text):
        return field(num, 2, text.encode() if isinstance(text, str) else text)
    def v(num, n):
        return field(num, 0, varint(n))
    def f32(num, x):
        return field(num, 5, struct.pack("<f", x))
    def f64(num, x):
        return field(num, 1, struct.pack("<d", x))
    policy = s(1, "diagonal") + f64(2, 0.9) + v(4, 16)
    write(t, "wire_full", s(1, "a red circle") + v(2, 2) + v(3, 7) + f32(4, 3.0) + f32(5, 1.0) +
          v(6, 8) + f32(7, 0.9) + s(8, policy) + s(9, "req-1") + v(10, 5))
    write(t, "wire_minimal", s(1, "a cat"))
    write(t, "wire_bad_utf8", b"\x0a\x06\x61\x20\xff\xfe\xc3\x28\x18\x01")
    write(t, "wire_bad_policy_name", s(1, "ok") + s(8, s(1, b"\xc0\x80")))
    write(t, "wire_negative_images", s(1, "x") + v(2, (1 << 64) - 3))
    write(t, "text_full", "# text format\nprompt: \"a blue square\" num_images: 3 seed: 11 cfg_weight: 5\n"
                          "temperature: 0.7 top_k: 4 top_p: 0.5 request_id: \"id-9\" progress_interval_ms: 3\n"
                          "policy { name: \"streaming_llm\" sparsity: 0.5 n_sink: 4 }\n")
    write(t, "text_n_att", "# n_att\nprompt: \"p\" policy { name: \"h2o\" n_att: 10 n_recent: 5 }\n")
    write(t, "text_kv_cache_dtype", "# fp8 KV\nprompt: \"p\" policy { name: \"dense\" kv_cache_dtype: \"fp8\" }\n")
    write(t, "text_bad_ranges", "# ranges\nprompt: \" \" num_images: 100 temperature: -1 top_p: 2 "
                                "policy { sparsity: 1.5 n_sink: -2 }\n")


def make_http_request():
    t = "fuzz_http_request"
    base = {"prompt": "a red circle above a blue square", "n": 2, "size": "32x32"}
    def w(name, body):
        write(t, name, body if isinstance(body, str) else json.dumps(body))
    w("minimal", {"prompt": "a cat"})
    w("openai_fields", dict(base, model="tiny", response_format="b64_json", quality="auto", background="auto",
                            moderation="auto", output_format="jpeg", output_compression=80, user="u1"))
    w("argen_fields", dict(base, seed=7, guidance_scale=3.5, temperature=0.8, top_k=16, top_p=0.9,
                           policy={"name": "diagonal", "sparsity": 0.9, "n_recent": 16}, priority="high"))
    w("stream", dict(base, stream=True, partial_images=2))
    w("kv_cache_dtype", dict(base, policy={"name": "dense", "kv_cache_dtype": "fp8"}))
    w("bad_types", {"prompt": 5, "n": "two", "size": [32, 32], "stream": "yes"})
    w("bad_values", dict(base, size="64x64", response_format="url", partial_images=9, n=-1))
    w("unknown_field", dict(base, colour="red"))
    w("deep", "[" * 40 + "]" * 40)
    w("not_json", "{\"prompt\": ")
    w("unicode", {"prompt": "\u00e9t\u00e9 \u4e2d\u6587 \U0001F600", "user": "\u0000"})


def main():
    targets = {
        "fuzz_http_request": make_http_request,
        "fuzz_safetensors": make_safetensors,
        "fuzz_checkpoint_index": make_checkpoint_index,
        "fuzz_janus_config": make_janus_config,
        "fuzz_tokenizer_json": make_tokenizer_json,
        "fuzz_tokenizer_encode": make_tokenizer_encode,
        "fuzz_server_config": make_server_config,
        "fuzz_generate_request": make_generate_request,
    }
    wanted = sys.argv[1:] or list(targets)
    for name in wanted:
        shutil.rmtree(os.path.join(CORPUS, name), ignore_errors=True)
        targets[name]()
        print("wrote", os.path.join(CORPUS, name))


if __name__ == "__main__":
    main()
