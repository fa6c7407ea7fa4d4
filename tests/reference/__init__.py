"""Test-only reference implementations the package is checked against."""
