"""docs/python.md's supported-API table is the one the package generates (python3 -m nkisim
api-table), and every name of the NKI 0.6 reference exists in the package."""
import os
import re

import nkisim
from nki import _api

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


def test_docs_table_matches_the_package():
    text = open(DOC).read()
    found = re.search(r"<!-- api-table:begin -->\n(.*?)<!-- api-table:end -->", text, re.S)
    assert found, "docs/python.md lacks the api-table markers"
    assert found.group(1) == nkisim.api_table(), (
        "docs/python.md is stale: regenerate the table with "
        "PYTHONPATH=build/python /usr/bin/python3 -m nkisim api-table")


def test_every_reference_name_exists():
    table = nkisim.api_table()
    assert "missing" not in table
    assert sum(len(v) for v in _api._REFERENCE.values()) > 200
