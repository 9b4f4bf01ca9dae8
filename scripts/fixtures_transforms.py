"""Writes tests/fixtures/transforms.safetensors for tests/vision_transforms.rs with torchvision
(pip install torch torchvision safetensors): two random images (RGB 3x13x17 and grey 1x13x17,
uint8, channel-first) and what torchvision.transforms.functional makes of them, on PIL images
(`pil_rgb`, `pil_grey`: uint8 results, Pillow's arithmetic) and on float tensors (`t_rgb`:
the RGB image / 255 as f32). Each case's name is `{op}_{case}_{kind}`; the cases are listed
here and in the test."""

import os
import numpy as np
import torch
import torchvision.transforms.functional as F
from PIL import Image
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "transforms.safetensors")

RESIZE = {"down": [7, 9], "up": [30, 40], "width": [13, 5], "height": [6, 17], "edge": 10}
CENTER = {"small": [5, 8], "tall": [20, 9], "same": [13, 17], "square": [4, 4]}
FACTORS = {"f0": 0.0, "f03": 0.3, "f1": 1.0, "f17": 1.7}
HUES = {"m05": -0.5, "m03": -0.3, "m005": -0.05, "p005": 0.05, "p027": 0.27, "p05": 0.5}


def chw(pil):
    a = np.asarray(pil)
    a = a[:, :, None] if a.ndim == 2 else a
    return torch.from_numpy(a.transpose(2, 0, 1).copy())


def main():
    rng = np.random.default_rng(7)
    rgb = rng.integers(0, 256, size=(13, 17, 3), dtype=np.uint8)
    # A smooth ramp in part of the image, so the colour ops meet saturated and grey pixels too.
    rgb[0:4, 0:6] = np.stack(np.meshgrid(np.arange(6) * 50, np.arange(4) * 80), -1)[..., [0, 1, 0]]
    rgb[5, :] = 128
    grey = rng.integers(0, 256, size=(13, 17), dtype=np.uint8)
    pil = {"rgb": Image.fromarray(rgb, "RGB"), "grey": Image.fromarray(grey, "L")}
    t = torch.from_numpy(rgb.transpose(2, 0, 1).copy()).float() / 255
    out = {"input_rgb": chw(pil["rgb"]), "input_grey": chw(pil["grey"]), "input_t_rgb": t}

    def both(op, case, f):
        for name, img in pil.items():
            out[f"{op}_{case}_pil_{name}"] = chw(f(img))
        out[f"{op}_{case}_t_rgb"] = f(t).contiguous()

    for case, size in RESIZE.items():
        both("resize", case, lambda x: F.resize(x, size, antialias=True))
    both("resize", "max", lambda x: F.resize(x, 8, max_size=11, antialias=True))
    for case, size in CENTER.items():
        both("center_crop", case, lambda x: F.center_crop(x, size))
    both("crop", "outside", lambda x: F.crop(x, -2, 3, 6, 20))
    both("resized_crop", "a", lambda x: F.resized_crop(x, 2, 3, 8, 9, [5, 6], antialias=True))
    for case, f in FACTORS.items():
        both("brightness", case, lambda x: F.adjust_brightness(x, f))
        both("contrast", case, lambda x: F.adjust_contrast(x, f))
        both("saturation", case, lambda x: F.adjust_saturation(x, f))
    for case, h in HUES.items():
        both("hue", case, lambda x: F.adjust_hue(x, h))
    save_file({k: v.contiguous().clone() for k, v in out.items()}, OUT)
    print(f"wrote {len(out)} tensors to {OUT}")


if __name__ == "__main__":
    main()
