"""Extracts a checkpoint's VQ (gen_vision_model.*, config.json) into a small folder that
`tools.train.pipeline --vq-from` reads, so a device call can reuse the shipped VQ (and its image
token ids) without carrying the whole model:

  python -m tools.train.vq_only models/argen-scenes-v1 build/testbed-vq
"""

from __future__ import annotations

import argparse

from tools.train.export import write_vq_only


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="checkpoint folder (Janus-Pro layout)")
    ap.add_argument("dst", help="output folder")
    args = ap.parse_args()
    size = write_vq_only(args.src, args.dst)
    print(f"{args.dst}: VQ tensors {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
