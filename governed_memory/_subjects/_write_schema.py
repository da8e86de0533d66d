"""Print the export schema: ``python -m governed_memory._subjects._write_schema > docs/export-schema.json``."""

from __future__ import annotations

import sys

from ._schema import render_schema

if __name__ == "__main__":
    sys.stdout.write(render_schema())
