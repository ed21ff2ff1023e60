"""Checks tools/lumina_torch/vqgan.py against Meta's published Chameleon VQGAN code.

  python -m tools.lumina_torch.check_vqgan --reference /path/to/chameleon/inference/vqgan.py

The reference file is imported at run time (never vendored). For the published
configuration and two small ones (one with attention blocks in the up/down
levels, one with a non-square latent), the state_dict names and shapes must be
identical, and with the same random weights encode (codes, latents) and
decode_code (pixels) must agree to float32 rounding. Prints a table; exit 1 on
any difference.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

import torch

from tools.lumina_torch.vqgan import VQModel, chameleon_params

CASES = {
    "published (512 px, 8192 x 256)": (chameleon_params(), (1, 32, 32), False),
    "small, attention at 8 and 16 px": (chameleon_params(embed_dim=8, n_embed=64, z_channels=16, resolution=64,
                                                         ch=32, num_res_blocks=1, attn_resolutions=(8, 16)),
                                        (2, 4, 4), True),
    "small, non-square 3 x 5 latent": (chameleon_params(embed_dim=8, n_embed=64, z_channels=16, resolution=64, ch=32,
                                                        num_res_blocks=2), (2, 3, 5), True),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", required=True, help="path to chameleon/inference/vqgan.py")
    ap.add_argument("--skip-published-forward", action="store_true",
                    help="compare only names and shapes for the published size (its forward is slow on a CPU)")
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("chameleon_vqgan_reference", args.reference)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    torch.manual_seed(0)
    ok = True
    print("| case | tensors | names+shapes | decode max abs diff | encode codes equal |")
    print("|---|---|---|---|---|")
    for name, (params, grid, run_encode) in CASES.items():
        ours = VQModel(**params).eval()
        theirs = ref.VQModel(ddconfig=params["ddconfig"], n_embed=params["n_embed"],
                             embed_dim=params["embed_dim"]).eval()
        a, b = ours.state_dict(), theirs.state_dict()
        same_layout = list(a) == list(b) and all(a[k].shape == b[k].shape for k in a)
        with torch.no_grad():  # random, larger-than-init weights so every path matters
            for v in a.values():
                v.copy_(torch.randn_like(v) * 0.2)
        theirs.load_state_dict(a, strict=True)
        diff, codes_equal = float("nan"), "-"
        if not (args.skip_published_forward and name.startswith("published")):
            b_, h, w = grid
            codes = torch.randint(0, params["n_embed"], grid)
            with torch.no_grad():
                x = ours.decode_code(codes)
                entry = theirs.quantize.get_codebook_entry(codes.reshape(-1), (b_, h, w, params["embed_dim"]))
                y = theirs.decode(entry)
                diff = float((x - y).abs().max())
                if run_encode:
                    zq, _, c = ours.encode(x.clamp(-1, 1))
                    zq2, _, (_, _, c2) = theirs.encode(x.clamp(-1, 1))
                    codes_equal = str(bool(torch.equal(c.reshape(-1), c2.reshape(-1))))
                    ok = ok and codes_equal == "True" and float((zq - zq2).abs().max()) < 1e-5
            ok = ok and diff < 1e-4 * max(1.0, float(y.abs().max()))
        ok = ok and same_layout
        print(f"| {name} | {len(a)} | {same_layout} | {diff:.2e} | {codes_equal} |")
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
