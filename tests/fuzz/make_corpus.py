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


def main():
    targets = {
        "fuzz_safetensors": make_safetensors,
    }
    wanted = sys.argv[1:] or list(targets)
    for name in wanted:
        shutil.rmtree(os.path.join(CORPUS, name), ignore_errors=True)
        targets[name]()
        print("wrote", os.path.join(CORPUS, name))


if __name__ == "__main__":
    main()
