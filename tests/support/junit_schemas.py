"""The two JUnit schemas CI servers read, as copied into tests/data/junit/ (see its README)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import xmlschema

SCHEMAS = Path(__file__).resolve().parents[1] / "data" / "junit"


@cache
def junit_schemas() -> tuple[xmlschema.XMLSchema, ...]:
    """pytest's xunit2 `junit-10.xsd` (the Jenkins xunit-plugin schema) and the Ant `JUnit.xsd`."""
    return (
        xmlschema.XMLSchema(SCHEMAS / "pytest-junit-10.xsd"),
        xmlschema.XMLSchema(SCHEMAS / "windyroad-JUnit.xsd"),
    )
