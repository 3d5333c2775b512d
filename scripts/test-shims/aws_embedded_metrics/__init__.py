"""TEST-ONLY stand-in for aws-embedded-metrics (scripts/test-shims/README.md): the NKI library's
metrics collector keeps its metrics in a MetricsContext; here one that only stores them."""
