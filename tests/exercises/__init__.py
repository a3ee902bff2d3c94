"""Tests per exercise: references, build, checks against fakes, mistakes and alternatives."""
