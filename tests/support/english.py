"""English left in a translated text: three English words in a row outside code.

Code is what a translation keeps as it is: anything in backticks, a call with its arguments
(`make_qkv(seq_len=3)`), a dotted or underscored identifier, a quoted value (a student's own
text, a type name), numbers and shapes."""

from __future__ import annotations

import re

_CODE = (
    re.compile(r"`[^`]*`"),
    re.compile(r"'[^'\n]*'|\"[^\"\n]*\""),
    re.compile(r"\b[\w.]+\((?:[^()]|\([^()]*\))*\)"),
    re.compile(r"\b\w+(?:[._]\w+)+\b"),
)
_SENTENCE = re.compile(r"(?<![\w-])[A-Za-z]{2,}(?:[,;:]?\s+[A-Za-z]{2,}){2,}(?![\w-])")


def english_sentences(text: str) -> list[str]:
    """Every run of three or more English words in `text` outside code (module doc)."""
    for pattern in _CODE:
        text = pattern.sub(" ", text)
    return _SENTENCE.findall(text)
