"""What a demo cell showed, as the child reported it: only text and PNG images pass, each
checked and bounded, as nbformat outputs (nbconvert escapes text in HTML). The child is
untrusted: nothing here believes a size, a type or a byte it sent."""

from __future__ import annotations

import base64
import re
import struct

MAX_OUTPUTS = 40  # per cell
MAX_TEXT = 32 * 1024  # characters of text per cell
MAX_PNGS = 8  # per cell
MAX_PNG_BYTES = 1 << 20
MAX_PNG_SIDE = 4096  # pixels
MAX_NOTEBOOK_PNG_BYTES = 6 << 20
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean_text(text: str, limit: int = MAX_TEXT) -> str:
    """Plain text for a notebook output: no control or bidi characters, at most `limit`."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text.encode("utf-8", "replace").decode("utf-8"))
    return text if len(text) <= limit else text[:limit] + "\n[... cut]\n"


def valid_png(blob: bytes) -> bool:
    """A PNG (by magic and IHDR) of at most MAX_PNG_BYTES and MAX_PNG_SIDE pixels a side."""
    if not isinstance(blob, bytes) or len(blob) > MAX_PNG_BYTES or len(blob) < 33:
        return False
    if blob[:8] != PNG_MAGIC or blob[12:16] != b"IHDR":
        return False
    width, height = struct.unpack(">II", blob[16:24])
    return 0 < width <= MAX_PNG_SIDE and 0 < height <= MAX_PNG_SIDE


def stream(text: str, name: str = "stdout") -> dict:
    return {"output_type": "stream", "name": name, "text": text}


def note(text: str) -> dict:
    return stream(f"[grader: {text}]\n")


def checked_outputs(outputs, blobs: list[bytes]) -> list[dict]:
    """The child's reply to a `display` request as nbformat outputs; anything else is dropped."""
    if not isinstance(outputs, list):
        return [note("the cell's outputs could not be read")]
    result: list[dict] = []
    text_left, pngs = MAX_TEXT, 0
    for item in outputs[:MAX_OUTPUTS]:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "png":
            index = item.get("blob")
            blob = blobs[index] if type(index) is int and 0 <= index < len(blobs) else None
            if pngs >= MAX_PNGS or blob is None or not valid_png(blob):
                result.append(note("a figure was left out (not a PNG within the size limits)"))
                continue
            pngs += 1
            data = {"image/png": base64.b64encode(blob).decode("ascii"), "text/plain": "<Figure>"}
            result.append({"output_type": "display_data", "data": data, "metadata": {}})
        elif kind in ("stream", "result", "error", "note") and isinstance(item.get("text"), str):
            if text_left <= 0:
                continue
            text = clean_text(item["text"], text_left)
            text_left -= len(text)
            if kind == "note":
                result.append(note(text))
            elif kind == "error":
                result.append(stream(text.rstrip("\n") + "\n", "stderr"))
            elif kind == "result":
                data = {"text/plain": text}
                result.append({"output_type": "display_data", "data": data, "metadata": {}})
            else:
                result.append(stream(text))
    if len(outputs) > MAX_OUTPUTS:
        result.append(note(f"{len(outputs) - MAX_OUTPUTS} more outputs not shown"))
    return result


def png_bytes(outputs: list[dict]) -> int:
    return sum(
        len(output["data"]["image/png"]) * 3 // 4
        for output in outputs
        if output.get("output_type") == "display_data" and "image/png" in output["data"]
    )
