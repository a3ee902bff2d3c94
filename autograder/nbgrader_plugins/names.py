"""A student's name as an LMS download shows it ("Jane Doe", "Siobhan O'Brien", "Luis García,
Jr.", "김 민준"): whether the gradebook may record it, and nbgrader's first and last name of it.

- `recordable`: nbgrader's formgrader writes the gradebook's names into its pages without
  escaping (formgrade_macros.html.j2 puts `{{ resources.last_name }}` in a text node), so a
  name with markup (`< > &`), quotes that could end an attribute (`"` and backticks), a
  formula start (`= + @`) or control characters is not recorded there. An apostrophe is only
  text (O'Brien, O’Brien). The LMS files (lms_students.json, the grades CSV, the feedback zip)
  use the download's name whatever it holds: they escape or quote it themselves.
- `split_name`: the download gives one full name; nbgrader wants a first and a last name.
  A name in an East Asian script (Hangul, Han, Kana) is written family name first ("김 민준":
  last 김, first 민준); otherwise the last word is the last name, with a generational suffix
  ("Jr.", "Sr.", "II", "III", "IV") kept with it ("Luis García, Jr.": last "García, Jr.").
  A single word is the last name only.
"""

from __future__ import annotations

import re

_RECORDABLE = re.compile(r"[^\x00-\x1f\x7f<>&\"`=+@]{1,100}")
_SUFFIX = re.compile(r",?\s+(?:jr\.?|sr\.?|ii|iii|iv)$", re.IGNORECASE)
# Hangul syllables and jamo, CJK ideographs, Hiragana, Katakana
_EAST_ASIAN = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u9fff\uac00-\ud7af]")


def recordable(name: str) -> bool:
    """Whether the gradebook may record this display name (module doc)."""
    return _RECORDABLE.fullmatch(name) is not None


def _east_asian(name: str) -> bool:
    letters = [c for c in name if c.isalpha()]
    return bool(letters) and all(_EAST_ASIAN.match(c) for c in letters)


def split_name(name: str) -> tuple[str, str]:
    """(first name, last name) of a full display name (module doc)."""
    name = " ".join(name.split())
    if " " in name and _east_asian(name):
        last, _, first = name.partition(" ")
        return first, last
    suffix = _SUFFIX.search(name)
    core, tail = (name[: suffix.start()], name[suffix.start() :]) if suffix else (name, "")
    first, _, last = core.rpartition(" ")
    return first, last + tail


def full_name(first: str | None, last: str | None) -> str:
    """The display name of a first and a last name, in the order split_name read it."""
    first, last = (first or "").strip(), (last or "").strip()
    ordered = [last, first] if _east_asian(first + last) else [first, last]
    return " ".join(part for part in ordered if part)
