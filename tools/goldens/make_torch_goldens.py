#!/usr/bin/env python3
"""Writes the torch.save goldens for engine/checkpoint's PyTorch reader under tests/goldens/torch/.

Run with the development Python:  .venv/bin/python tools/goldens/make_torch_goldens.py

Every file is made by torch.save itself (or, for zip64.bin, by Python's zipfile
re-writing a torch.save archive), so the C++ reader is checked against what
PyTorch writes, not against our idea of it. Files (a few KB each):

  state/pytorch_model.bin          a tiny Janus-layout state dict (official names,
                                   tiny shapes) mixing BF16 / F16 / F32, plus F64,
                                   I64 (a BatchNorm counter), a scalar, an empty
                                   tensor, a transposed (non-contiguous) view, a
                                   view at a storage offset, two views of one
                                   storage and an nn.Parameter
  sharded/                         the same tensors as pytorch_model-0000N-of-00002.bin
                                   + pytorch_model.bin.index.json (the 7B layout)
  zip64.bin                        state/pytorch_model.bin re-written with ZIP64
                                   records everywhere (central directory extra
                                   fields, ZIP64 end record and locator)
  protocol4.bin                    torch.save(..., pickle_protocol=4): SHORT_BINUNICODE,
                                   MEMOIZE, FRAME, STACK_GLOBAL
  nocrc.bin                        saved with torch.serialization.set_crc32_options(False)
  lightning.ckpt                   a Lightning-2 style checkpoint: state_dict next to
                                   epoch, global_step, optimizer_states (Adam), callbacks,
                                   loops, hyper_parameters, lr_schedulers, bytes and a set
  lightning_v1.ckpt                an old-Lightning style one: callbacks keyed by the
                                   ModelCheckpoint class, a numpy scalar score and an
                                   argparse.Namespace of hyper-parameters (names the
                                   reader does not interpret, in entries it skips)
  legacy.bin                       _use_new_zipfile_serialization=False (must be refused)
  ../../fuzz/corpus/fuzz_torch_checkpoint/   seeds for the fuzz target: some of the
                                   archives above and their data.pkl streams
  golden.json                      per tensor (the same in every file): dtype, shape, the
                                   row-major bytes (hex) and, for F64 / integer tensors,
                                   PyTorch's f32 values; per file, the entries next to
                                   the state dict

Deterministic tensors (fixed seed); torch.save adds a random serialization id,
so the archives differ byte-wise between runs but not in content.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]

DTYPE_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
               torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
               torch.bool: "BOOL"}


def state_dict() -> "collections.OrderedDict[str, torch.Tensor]":
    g = torch.Generator().manual_seed(20251201)

    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype)

    sd = collections.OrderedDict()
    sd["language_model.model.embed_tokens.weight"] = rand(16, 8)
    sd["language_model.model.layers.0.input_layernorm.weight"] = rand(8, dtype=torch.bfloat16)
    sd["language_model.model.layers.0.self_attn.q_proj.weight"] = rand(8, 8, dtype=torch.bfloat16)
    sd["language_model.model.layers.0.self_attn.k_proj.weight"] = rand(4, 8, dtype=torch.float16)
    # A transposed view: torch.save keeps the whole storage and the strides (1, 8).
    sd["language_model.model.layers.0.self_attn.o_proj.weight"] = rand(8, 8, dtype=torch.float16).t()
    sd["language_model.model.norm.weight"] = rand(8)
    # A view at an offset into a larger storage (rows 2..4 of a 6 x 4 tensor).
    big = rand(6, 4, dtype=torch.bfloat16)
    sd["gen_embed.weight"] = big[2:5]
    # Two views of one storage (tied weights).
    tied = rand(4, 8)
    sd["gen_head.vision_head.weight"] = tied
    sd["gen_head.vision_head.weight_tied_view"] = tied.view(8, 4)
    sd["gen_head.vision_head.bias"] = torch.nn.Parameter(rand(4), requires_grad=False)
    sd["gen_vision_model.decoder.conv_out.weight"] = rand(3, 2, 3, 3, dtype=torch.float16)
    sd["gen_vision_model.quantize.codebook_used"] = rand(4, dtype=torch.float64)
    sd["gen_vision_model.decoder.norm_out.num_batches_tracked"] = torch.tensor(1234, dtype=torch.int64)
    sd["gen_vision_model.decoder.scale"] = torch.tensor(0.5)  # a 0-d tensor
    sd["gen_vision_model.decoder.empty"] = torch.zeros(0, 3)
    sd["vision_model.vision_tower.pos_embed"] = rand(1, 4, 8, dtype=torch.bfloat16)
    return sd


def tensor_golden(t: torch.Tensor) -> dict:
    c = t.detach().contiguous()
    data = c.reshape(-1).view(torch.uint8).numpy().tobytes()
    g = {"dtype": DTYPE_NAMES[c.dtype], "shape": list(c.shape), "hex": data.hex()}
    if c.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        g["f32"] = [float(x) for x in c.float().reshape(-1)]
    return g


def golden_of(sd: dict) -> dict:
    return {k: tensor_golden(v) for k, v in sd.items() if isinstance(v, torch.Tensor)}


def rewrite_zip64(src: Path, dst: Path) -> None:
    """Re-writes a torch.save archive with ZIP64 records everywhere, as Python's zipfile writes them for >4 GiB."""
    saved = (zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT)
    zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = 0, 0  # every size, offset and count "exceeds" it
    try:
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_STORED) as zout:
            for info in zin.infolist():
                data = zin.read(info)
                out = zipfile.ZipInfo(info.filename, date_time=(2025, 12, 1, 0, 0, 0))
                out.compress_type = zipfile.ZIP_STORED
                with zout.open(out, "w", force_zip64=True) as f:
                    f.write(data)
    finally:
        zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = saved
    raw = dst.read_bytes()
    assert raw.rfind(b"PK\x06\x06") > 0 and raw.rfind(b"PK\x06\x07") > 0, "no ZIP64 end records"


def lightning_checkpoint(sd: dict) -> dict:
    g = torch.Generator().manual_seed(7)
    params = list(sd.values())[:2]
    return {
        "epoch": 3,
        "global_step": 120,
        "pytorch-lightning_version": "2.1.0",
        "state_dict": sd,
        "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 4, "completed": 3}},
                               "epoch_loop.batch_progress": {"is_last_batch": False}}},
        "callbacks": {"ModelCheckpoint{'monitor': 'val/rec_loss', 'mode': 'min'}": {
            "monitor": "val/rec_loss", "best_model_score": torch.tensor(0.25), "best_model_path": "/ckpt/best.ckpt",
            "current_score": torch.tensor(0.3), "dirpath": "/ckpt", "best_k_models": {"/ckpt/best.ckpt": torch.tensor(0.25)},
            "kth_best_model_path": "", "kth_value": torch.tensor(float("inf")), "last_model_path": ""}},
        "optimizer_states": [{
            "state": {i: {"step": torch.tensor(120.0), "exp_avg": torch.randn(p.shape, generator=g),
                          "exp_avg_sq": torch.rand(p.shape, generator=g)} for i, p in enumerate(params)},
            "param_groups": [{"lr": 4.5e-6, "betas": (0.5, 0.9), "eps": 1e-8, "weight_decay": 0.0, "amsgrad": False,
                              "foreach": None, "maximize": False, "capturable": False, "differentiable": False,
                              "fused": None, "params": [0, 1]}]}],
        "lr_schedulers": [],
        "hparams_name": "kwargs",
        "hyper_parameters": {"embed_dim": 8, "n_embed": 64, "ddconfig": {"ch": 128, "ch_mult": [1, 1, 2, 2, 4]},
                             "ignore_keys": [], "tags": {"vq", "gan"}, "blob": b"\x00\x01\xfe\xff"},
    }


def old_lightning_checkpoint(sd: dict) -> dict:
    """Old Lightning (1.x) keyed callbacks by class; scores were numpy scalars; hparams a Namespace."""
    import argparse as ap
    mod = types.ModuleType("pytorch_lightning.callbacks.model_checkpoint")

    class ModelCheckpoint:  # a stand-in with the real qualified name; only the name is pickled
        pass

    ModelCheckpoint.__module__ = mod.__name__
    ModelCheckpoint.__qualname__ = "ModelCheckpoint"
    mod.ModelCheckpoint = ModelCheckpoint
    for name in ["pytorch_lightning", "pytorch_lightning.callbacks", mod.__name__]:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules[mod.__name__] = mod
    return {
        "epoch": 10, "global_step": 5000, "pytorch-lightning_version": "1.0.8",
        "callbacks": {ModelCheckpoint: {"best_model_score": np.float64(0.125), "best_model_path": "/x/last.ckpt"}},
        "optimizer_states": [], "lr_schedulers": [],
        "state_dict": sd,
        "hparams_name": "args",
        "hyper_parameters": ap.Namespace(lr=4.5e-6, base_learning_rate=4.5e-6),
    }


def write_fuzz_corpus(goldens: Path, corpus: Path) -> None:
    """Seeds for tests/fuzz/fuzz_torch_checkpoint: a few archives and their data.pkl streams (flat, small)."""
    corpus.mkdir(parents=True, exist_ok=True)
    for rel in ["state/pytorch_model.bin", "zip64.bin", "protocol4.bin", "lightning.ckpt", "lightning_v1.ckpt"]:
        data = (goldens / rel).read_bytes()
        stem = rel.replace("/", "_").split(".")[0]
        (corpus / (stem + ".zip")).write_bytes(data)
        if rel == "zip64.bin":
            continue  # the same data.pkl as state/
        with zipfile.ZipFile(goldens / rel) as z:
            pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
            (corpus / (stem + ".pkl")).write_bytes(z.read(pkl))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "goldens" / "torch")
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests" / "fuzz" / "corpus" / "fuzz_torch_checkpoint")
    args = ap.parse_args()
    out: Path = args.out
    for sub in ["state", "sharded"]:
        (out / sub).mkdir(parents=True, exist_ok=True)
    sd = state_dict()
    # Every file holds the same state dict: its tensors are listed once.
    golden = {"note": "made by tools/goldens/make_torch_goldens.py with torch " + torch.__version__ +
                      "; hex = row-major bytes PyTorch holds for each tensor", "tensors": golden_of(sd), "files": {}}

    torch.save(sd, out / "state" / "pytorch_model.bin")
    golden["files"]["state/pytorch_model.bin"] = {}

    names = list(sd)
    shards = {1: names[: len(names) // 2], 2: names[len(names) // 2:]}
    weight_map = {}
    for i, part in shards.items():
        fname = f"pytorch_model-{i:05d}-of-00002.bin"
        torch.save(collections.OrderedDict((k, sd[k]) for k in part), out / "sharded" / fname)
        weight_map.update({k: fname for k in part})
    total = sum(v.numel() * v.element_size() for v in sd.values())
    (out / "sharded" / "pytorch_model.bin.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n")
    golden["files"]["sharded"] = {}

    rewrite_zip64(out / "state" / "pytorch_model.bin", out / "zip64.bin")
    golden["files"]["zip64.bin"] = {}

    torch.save(sd, out / "protocol4.bin", pickle_protocol=4)
    golden["files"]["protocol4.bin"] = {}

    torch.serialization.set_crc32_options(False)
    torch.save(sd, out / "nocrc.bin")
    torch.serialization.set_crc32_options(True)
    golden["files"]["nocrc.bin"] = {}

    ckpt = lightning_checkpoint(sd)
    torch.save(ckpt, out / "lightning.ckpt")
    golden["files"]["lightning.ckpt"] = {"skipped": sorted(k for k in ckpt if k != "state_dict")}
    old = old_lightning_checkpoint(sd)
    torch.save(old, out / "lightning_v1.ckpt")
    golden["files"]["lightning_v1.ckpt"] = {"skipped": sorted(k for k in old if k != "state_dict")}

    torch.save(sd, out / "legacy.bin", _use_new_zipfile_serialization=False)

    # Round trips through PyTorch itself: every archive loads back to the same tensors.
    for rel in ["state/pytorch_model.bin", "zip64.bin", "protocol4.bin", "nocrc.bin"]:
        back = torch.load(out / rel, weights_only=rel != "protocol4.bin")  # its weights-only unpickler lacks FRAME
        assert all(torch.equal(back[k], sd[k]) for k in sd), rel
    back = torch.load(out / "lightning.ckpt", weights_only=False)["state_dict"]
    assert all(torch.equal(back[k], sd[k]) for k in sd)

    (out / "golden.json").write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    write_fuzz_corpus(out, args.corpus)
    for p in sorted(out.rglob("*")):
        if p.is_file():
            print(f"{p.stat().st_size:>8}  {p.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
