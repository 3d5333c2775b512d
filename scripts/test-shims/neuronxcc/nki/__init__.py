"""TEST-ONLY: `neuronxcc.nki` holds only `typing` here (scripts/test-shims/README.md)."""
