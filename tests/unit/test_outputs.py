"""What the child says a demo cell showed is untrusted: only bounded text and real PNGs pass."""

from __future__ import annotations

import base64
import struct
import zlib

from autograder.grading import outputs
from autograder.grading.outputs import checked_outputs


def png(width: int = 4, height: int = 3, padding: int = 0) -> bytes:
    header = struct.pack(">II", width, height) + bytes([8, 2, 0, 0, 0])
    ihdr = b"IHDR" + header
    chunk = struct.pack(">I", len(header)) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
    return outputs.PNG_MAGIC + chunk + b"\0" * padding


def kinds(outputs: list[dict]) -> list[str]:
    return [
        o["output_type"] + ("/png" if "image/png" in o.get("data", {}) else "") for o in outputs
    ]


def test_text_and_png_pass_as_notebook_outputs():
    outputs = [{"type": "stream", "text": "loss 0.1\n"}, {"type": "png", "blob": 0}]
    result = checked_outputs(outputs, [png()])
    assert kinds(result) == ["stream", "display_data/png"]
    assert base64.b64decode(result[1]["data"]["image/png"]) == png()


def test_forged_or_oversized_images_are_dropped_with_a_note():
    blobs = [
        b"<svg onload=alert(1)>" + b"\0" * 40,  # not a PNG
        png(width=100_000),  # a decompression bomb's header
        png(padding=outputs.MAX_PNG_BYTES),  # too many bytes
        png(),
    ]
    items = [{"type": "png", "blob": i} for i in range(4)]
    items += [{"type": "png", "blob": 9}, {"type": "png", "blob": True}]  # no such blob
    result = checked_outputs(items, blobs)
    assert kinds(result).count("display_data/png") == 1
    assert sum("a figure was left out" in o.get("text", "") for o in result) == 5


def test_shapes_other_than_the_protocol_are_ignored():
    assert "could not be read" in checked_outputs({"type": "stream"}, [])[0]["text"]
    junk = [42, None, {"type": "html", "text": "<b>x</b>"}, {"type": "stream", "text": 7}]
    assert checked_outputs(junk, []) == []


def test_text_is_bounded_and_loses_control_and_bidi_characters():
    loud = "\x1b]0;title\x07\x1b[31mred\u202eevil\r\n" + "x" * (2 * outputs.MAX_TEXT)
    result = checked_outputs([{"type": "stream", "text": loud}] * 3, [])
    text = "".join(o["text"] for o in result)
    assert "\x1b" not in text and "\u202e" not in text and "\r" not in text
    assert len(text) <= outputs.MAX_TEXT + 20
    too_many = [{"type": "stream", "text": "a"}] * (outputs.MAX_OUTPUTS + 5)
    assert "5 more outputs not shown" in checked_outputs(too_many, [])[-1]["text"]


def test_a_demo_cell_shows_what_jupyter_would():
    """Printed text, figures shown with plt.show() or left open, a Figure as the last
    expression, in order; an exception ends the cell's outputs; the submission's state
    (a function defined by the program) is used."""
    from autograder.grading.submission import ProgramCell, Submission

    program = [ProgramCell("cell 1", "def double(x):\n    return 2 * x\n")]
    cell = ProgramCell(
        "demo",
        "import matplotlib.pyplot as plt\nfrom matplotlib.figure import Figure\n"
        "print('first', double(21))\nplt.plot([1, 2]); plt.show()\n"
        "print('second')\nplt.figure(); plt.plot([3, 1])\n"
        "figure = Figure(); figure.subplots().plot([0, 1])\nfigure\n",
    )
    failing = ProgramCell("demo 2", "print('before')\nraise ValueError('<b>bad</b>')\n")
    with Submission(program) as submission:
        shown = submission.display(cell)
        failed = submission.display(failing)
    png_, text = "display_data/png", "stream"
    assert kinds(shown) == [text, png_, text, png_, png_]
    assert shown[0]["text"] == "first 42\n" and shown[2]["text"] == "second\n"
    assert [o["name"] for o in failed] == ["stdout", "stderr"]
    assert failed[1]["text"] == "ValueError: <b>bad</b>\n"
