"""Look-ups in the language catalogues (gettext `.po`, read with Babel).

Two kinds of entry, both plain msgid/msgstr pairs:
- words: a fixed text (`"Score"`, or with `%s` filled in after translation), looked up exactly;
- messages: a check's message as written in Python, an f-string or a `+` of strings, whose
  values become `{0}`, `{1}`, ... (extract.py). A message is translated by finding the entry
  whose fixed text it has around its values (the most specific entry first), translating each
  value the same way when it is a text of ours (a description inside a message), and putting
  the values into the translation, in the order the translator chose.
Anything not in the catalogue stays as it is (English), never garbled: a partial catalogue is
a partly English page, and tests/unit/test_i18n.py keeps the Korean one complete.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from babel.messages.pofile import read_po

LOCALE_DIR = Path(__file__).parent / "locale"
DOMAIN = "attn_grade"
SOURCE_LANGUAGE = "en"
_PLACEHOLDER = re.compile(r"\{(\d+)\}")
_MIN_FIXED_LETTERS = 4  # "{0}: {1}" would match any text; such an entry is words only
_DEPTH = 4  # a value inside a value inside ...: messages nest at most a few levels
# A value inside a message is translated only as a whole text of ours, or by an entry this
# specific: a short pattern ("the {0} of {1}") would rewrite a student's own exception text.
_MIN_FIXED_INSIDE = 10
# Bounds of what a process keeps (a batch's process translates many students' messages): at
# most _MEMO readings, each of a text of at most _MEMO_TEXT characters (a longer one, which
# holds a student's text, is read every time), and _ENDS template lists (about 2 KB each)
_MEMO = 4096
_MEMO_TEXT = 1000
_ENDS = 1024
_UNREAD = object()


def po_path(lang: str) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def languages() -> tuple[str, ...]:
    """English and every language that has a catalogue."""
    found = sorted(path.name for path in LOCALE_DIR.iterdir() if po_path(path.name).is_file())
    return (SOURCE_LANGUAGE, *found)


@dataclass(frozen=True)
class _Template:
    pattern: re.Pattern[str]
    order: tuple[int, ...]  # placeholder number of each group, in the English order
    translation: str
    fixed: int  # characters outside the placeholders: the more, the more specific
    texts: tuple[str, ...]  # the fixed texts, in order (around and between the values)
    breaks: int  # line breaks in the fixed texts

    def may_match(self, text: str) -> bool:
        """False where `pattern` cannot match: it needs `text` to start and end with the
        outer fixed texts, to hold the inner ones, to have a character for every value, and
        all its line breaks in fixed texts (a value is one line). Substring tests, which cost
        far less than the pattern's backtracking over a long text that does not fit."""
        first, last = self.texts[0], self.texts[-1]
        return (
            len(text) >= self.fixed + len(self.order)
            and text.startswith(first)
            and text.endswith(last)
            and text.count("\n") == self.breaks
            and all(inner in text for inner in self.texts[1:-1])
        )


@dataclass(frozen=True)
class Catalogue:
    exact: dict[str, str]
    templates: tuple[_Template, ...]
    # (text, depth, data) -> its best reading: the values of one message are read again for
    # every entry that fits it, and a page shows the same messages again (a report, then the
    # feedback); cleared when full (_MEMO)
    memo: dict[tuple[str, int, str | None], tuple[str, int] | None] = field(
        default_factory=dict, compare=False, repr=False
    )
    # (first, last character of a text) -> the templates that can fit such a text, in order
    by_ends: dict[tuple[str, str], tuple[_Template, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def fitting(self, text: str) -> tuple[_Template, ...]:
        """The templates, in order, whose outer fixed texts can begin and end `text`."""
        ends = (text[0], text[-1])
        # one look-up, no test-then-read: another thread may empty the dict in between
        found = self.by_ends.get(ends)
        if found is None:
            found = tuple(
                template
                for template in self.templates
                if template.texts[0][:1] in ("", ends[0])
                and template.texts[-1][-1:] in ("", ends[1])
            )
            if len(self.by_ends) >= _ENDS:
                self.by_ends.clear()
            self.by_ends[ends] = found
        return found


def _template(msgid: str, msgstr: str) -> _Template | None:
    parts = _PLACEHOLDER.split(msgid)
    fixed_texts = [part.replace("{{", "{").replace("}}", "}") for part in parts[0::2]]
    order = tuple(int(number) for number in parts[1::2])
    letters = sum(ch.isalpha() for text in fixed_texts for ch in text)
    if not order or letters < _MIN_FIXED_LETTERS:
        return None
    pattern = "([^\n]+?)".join(re.escape(text) for text in fixed_texts)  # values: one line
    fixed = sum(len(text) for text in fixed_texts)
    breaks = sum(text.count("\n") for text in fixed_texts)
    return _Template(re.compile(pattern + r"\Z"), order, msgstr, fixed, tuple(fixed_texts), breaks)


@functools.cache
def catalogue(lang: str) -> Catalogue:
    """The catalogue of `lang` (empty for English or a language without one)."""
    path = po_path(lang)
    if lang == SOURCE_LANGUAGE or not path.is_file():
        return Catalogue({}, ())
    with path.open("rb") as handle:
        po = read_po(handle, locale=lang, domain=DOMAIN)
    exact: dict[str, str] = {}
    templates = []
    for entry in po:
        if not entry.id or not isinstance(entry.id, str) or not entry.string or entry.fuzzy:
            continue
        exact[entry.id] = str(entry.string)
        if (made := _template(entry.id, str(entry.string))) is not None:
            templates.append(made)
    templates.sort(key=lambda template: -template.fixed)
    return Catalogue(exact, tuple(templates))


def words(text: str, lang: str) -> str:
    """A fixed text in `lang` (the text itself when there is no translation)."""
    return catalogue(lang).exact.get(text, text)


def message(text: str, lang: str, data: str | None = None) -> str:
    """A message of the grader (its values filled in) in `lang`; line by line when the whole
    is not an entry (a message's later lines are details, each its own text). With `data`,
    every value that is no text of ours (a number, a student's exception text) is shown as
    `data`: what is left is the grader's own words (tests/unit/test_i18n.py)."""
    found = _translated(text, catalogue(lang), _DEPTH, data)
    if found is not None or "\n" not in text:
        return found if found is not None else (text if data is None else data)
    return "\n".join(message(line, lang, data) for line in text.split("\n"))


def _translated(text: str, found: Catalogue, depth: int, data: str | None) -> str | None:
    best = _best(text, found, depth, data)
    return best[0] if best is not None else None


def _best(text: str, found: Catalogue, depth: int, data: str | None) -> tuple[str, int] | None:
    """(translation, characters of `text` that entries account for) of the reading of `text`
    that accounts for the most: a message wrapped around another ("{0}. Looks like a {1}")
    reads as the wrapper with both values translated, not as the inner message with the
    wrapper's words swallowed by its last value."""
    if not text or depth <= 0:
        return None
    if text in found.exact:
        return found.exact[text], len(text)
    if len(text) > _MEMO_TEXT:
        return _read(text, found, depth, data)
    key = (text, depth, data)
    kept = found.memo.get(key, _UNREAD)  # one look-up: another thread may empty it meanwhile
    if kept is not _UNREAD:
        return kept  # type: ignore[return-value]
    best = _read(text, found, depth, data)
    if len(found.memo) >= _MEMO:
        found.memo.clear()
    found.memo[key] = best
    return best


def _read(text: str, found: Catalogue, depth: int, data: str | None) -> tuple[str, int] | None:
    """`_best` without the memo."""
    best: tuple[str, int] | None = None
    for template in found.fitting(text):
        if depth < _DEPTH and template.fixed < _MIN_FIXED_INSIDE:
            break  # sorted: the rest are shorter still
        if best is not None and template.fixed + (len(text) - template.fixed) <= best[1]:
            continue
        match = template.pattern.match(text) if template.may_match(text) else None
        if match is None:
            continue
        values: dict[int, str] = {}
        covered = template.fixed
        for number, value in zip(template.order, match.groups(), strict=True):
            inner = _best(value, found, depth - 1, data)
            shown = value if data is None else data
            values[number] = inner[0] if inner is not None else shown
            covered += inner[1] if inner is not None else 0
        if best is None or covered > best[1]:
            best = (_fill(template.translation, values), covered)
    return best


def _fill(translation: str, values: dict[int, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values.get(int(m.group(1)), m.group(0)), translation)
