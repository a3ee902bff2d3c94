"""The adversarial corpus (see README.md here)."""

import pytest

pytest.register_assert_rewrite("tests.adversarial.outcome", "tests.adversarial.harness")
