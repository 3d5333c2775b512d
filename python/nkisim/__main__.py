"""``python3 -m nkisim api-table``: prints the supported-API table of docs/python.md."""
import sys

import nkisim

if __name__ == "__main__":
    if sys.argv[1:] != ["api-table"]:
        sys.exit("usage: python3 -m nkisim api-table")
    sys.stdout.write(nkisim.api_table())
