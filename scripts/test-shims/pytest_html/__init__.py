"""TEST-ONLY stand-in for the pytest-html plugin (scripts/test-shims/README.md): the NKI
library's conftest imports `pytest_html.extras` to attach report links; no HTML report is made."""
