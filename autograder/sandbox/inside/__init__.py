"""Code that runs inside the sandbox child. Stdlib + NumPy only (torch imported lazily).

These files are copied into each sandbox's working directory and run from there, so they
import each other as top-level modules; the parent imports `wire` as
`autograder.sandbox.inside.wire`.
"""
