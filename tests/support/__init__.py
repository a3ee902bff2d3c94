"""Helpers the tests share: servers, browsers, venvs, the adversarial harness and corpus."""

import pytest

pytest.register_assert_rewrite("tests.support.outcome", "tests.support.harness")
