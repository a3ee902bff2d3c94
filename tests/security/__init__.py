"""Security tests: the sandbox, the perimeter, the adversarial corpus (see README.md here)."""
