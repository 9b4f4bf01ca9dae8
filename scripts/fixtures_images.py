"""Writes the image fixtures of tests/vision_io.rs with Pillow (pip install pillow):
PNG files in L, RGB and RGBA mode with known pixels, and a JPEG (4:4:4, quality 95) whose
pixels as Pillow decodes them (libjpeg) are recorded, one line per file in expected.txt:
`name C H W v0 v1 ...` with the values in channel-first order (torchvision.io's layout)."""

import os
from PIL import Image

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "images")


def pixel(mode, x, y):
    v = [(x * 37 + y * 11) % 256, (x * 13 + y * 71 + 40) % 256, (x * 101 + y * 7 + 90) % 256, (x * 29 + y * 53) % 256]
    return v[0] if mode == "L" else tuple(v[: len(mode)])


def smooth(x, y):
    return (20 + 25 * x, 40 + 20 * y, 200 - 10 * x - 8 * y)


def chw(img):
    w, h = img.size
    bands = len(img.getbands())
    px = img.load()
    at = (lambda x, y, c: px[x, y]) if bands == 1 else (lambda x, y, c: px[x, y][c])
    return bands, h, w, [at(x, y, c) for c in range(bands) for y in range(h) for x in range(w)]


def main():
    os.makedirs(OUT, exist_ok=True)
    lines = []
    for name, mode, (w, h) in [("gray.png", "L", (5, 4)), ("rgb.png", "RGB", (5, 4)), ("rgba.png", "RGBA", (3, 2))]:
        img = Image.new(mode, (w, h))
        img.putdata([pixel(mode, x, y) for y in range(h) for x in range(w)])
        img.save(os.path.join(OUT, name))
        lines.append((name, chw(Image.open(os.path.join(OUT, name)))))
    img = Image.new("RGB", (8, 8))
    img.putdata([smooth(x, y) for y in range(8) for x in range(8)])
    img.save(os.path.join(OUT, "photo.jpg"), quality=95, subsampling=0)
    lines.append(("photo.jpg", chw(Image.open(os.path.join(OUT, "photo.jpg")).convert("RGB"))))
    with open(os.path.join(OUT, "expected.txt"), "w") as f:
        f.write("# written by scripts/fixtures_images.py (Pillow %s): name C H W values (CHW)\n" % Image.__version__)
        for name, (c, h, w, vals) in lines:
            f.write(" ".join([name, str(c), str(h), str(w)] + [str(v) for v in vals]) + "\n")


if __name__ == "__main__":
    main()
