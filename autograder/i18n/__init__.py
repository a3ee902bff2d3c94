"""What a student reads, in the notebook's language: one gettext catalogue per language
(`locale/<lang>/LC_MESSAGES/attn_grade.po`), which a translator edits without reading Python.

English is the source language and the record: results.json, the gradebook and the instructor's
files keep English; a notebook built in another language (`attn-grade build --lang ko`) shows
its check messages, mistake names and page words translated when it is autograded. A third
language is one more `.po` file (docs/languages.md).
"""
