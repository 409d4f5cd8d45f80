"""Headless Chromium (Debian's `chromium`) for looking at the HTML report as a reader
would: the DOM it built, what its console said, and a screenshot. Used by
tests/e2e/test_html_report.py and bench/report_speed.py.

The report has no script, so a clean page logs nothing to the console; any CONSOLE line
Chromium prints (it logs every console message to stderr with --enable-logging) is a
failure. Network access is cut (every host name resolves to nothing), so a page that
reached for an external file would show it missing in the screenshot as well as fail
the static checks of offline_problems().
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = ("chromium", "chromium-browser")
TIMEOUT_S = 180
# Chromium logs each console message as `...:INFO:CONSOLE:12] "text", source: ...`
# (the level is not in the line); everything else on its stderr (D-Bus, GPU) is noise.
CONSOLE = re.compile(r":CONSOLE[:(\]]")


def chromium() -> str:
    for name in CHROMIUM:
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no chromium on PATH: install Debian's chromium (make debian)")


@dataclass(frozen=True)
class Page:
    dom: str  # the DOM after loading, serialized
    console: list[str]  # console messages Chromium logged


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="dbregress-chromium-") as profile:
        return subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )


def load(page: Path) -> Page:
    """Open a local file; its DOM and the console messages it caused."""
    out = _run(["--enable-logging=stderr", "--v=0", "--dump-dom", page.resolve().as_uri()])
    assert out.returncode == 0, out.stderr[-3000:]
    console = [line for line in out.stderr.splitlines() if CONSOLE.search(line)]
    return Page(out.stdout, console)


def screenshot(page: Path, png: Path, width: int = 1400, height: int = 3000) -> Path:
    """A PNG of the page's top `height` pixels at this window width."""
    png.parent.mkdir(parents=True, exist_ok=True)
    out = _run([f"--screenshot={png}", f"--window-size={width},{height}", page.resolve().as_uri()])
    assert out.returncode == 0 and png.is_file(), out.stderr[-3000:]
    return png


# What would make a page depend on something beyond its own file: a tag that runs or
# loads something, an attribute that names another file or runs script, a stylesheet
# that imports or points at a URL.
LOADING_TAGS = {"script", "link", "iframe", "frame", "object", "embed", "img", "image", "video",
                "audio", "source", "track", "use", "base"}  # fmt: skip
TAG = re.compile(r"<([a-zA-Z][a-zA-Z0-9-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>")
ATTR = re.compile(r"([a-zA-Z_:][-a-zA-Z0-9_:.]*)\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)")
URL = re.compile(r"url\(\s*[\"']?(?!data:|#)|@import", re.I)
STYLE = re.compile(r"<style\b[^>]*>(.*?)</style>", re.S | re.I)


def offline_problems(html: str) -> list[str]:
    """Anything in the page that is script or would load another file."""
    found = []
    for tag in TAG.finditer(html):
        name, attrs = tag.group(1).lower(), tag.group(2)
        if name in LOADING_TAGS:
            found.append(tag.group(0)[:120])
        for attr in ATTR.finditer(attrs):
            key, value = attr.group(1).lower(), attr.group(2).strip("\"'")
            loads = key in ("src", "srcset", "data", "poster", "action", "formaction", "http-equiv")
            links = key in ("href", "xlink:href") and not value.startswith("#")
            if loads or links or key.startswith("on") or (key == "style" and URL.search(value)):
                found.append(tag.group(0)[:120])
    for css in STYLE.findall(html):
        found += [css[max(0, m.start() - 30) : m.end() + 30] for m in URL.finditer(css)]
    return found


SVG = re.compile(r"<svg\b[^>]*>(.*?)</svg>", re.S)
MARKS = re.compile(r"<(?:polyline|circle|rect|path)\b")


def charts(dom: str) -> list[str]:
    """The inner markup of every <svg> in a DOM."""
    return SVG.findall(dom)


def colours(png: Path) -> dict[tuple[int, int, int], list[tuple[int, int]]]:
    """Where each colour is in a screenshot: (r, g, b) -> [(x, y), ...]. Reads the
    8-bit RGB or RGBA, non-interlaced PNG that Chromium writes (no image library)."""
    import struct
    import zlib

    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", png
    pos, idat, head = 8, b"", b""
    while pos < len(data):
        (size,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + size]
        if kind == b"IHDR":
            head = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + size
    width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", head)
    assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev = bytearray(stride)
    out: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for y in range(height):
        start = y * (stride + 1)
        f, row = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                row[i] = (row[i] + a) & 255
            elif f == 2:
                row[i] = (row[i] + b) & 255
            elif f == 3:
                row[i] = (row[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(width):
            px = (row[x * bpp], row[x * bpp + 1], row[x * bpp + 2])
            out.setdefault(px, []).append((x, y))
        prev = row
    return out


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return (int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16))
