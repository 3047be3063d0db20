"""MkDocs hooks: the reference pages come from the code at build time
(docs/reference_gen.py), and the architecture page is CONTRIBUTING.md, so
neither can drift from what they describe."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))

import reference_gen  # noqa: E402

GENERATED = {
    "reference/cli.md": reference_gen.cli_page,
    "reference/minicluster.md": reference_gen.minicluster_page,
    "reference/rabbit.md": reference_gen.rabbit_page,
    "contributing.md": lambda: (DOCS.parent / "CONTRIBUTING.md").read_text(),
}


def on_page_read_source(page: Any, config: Any) -> str | None:
    make = GENERATED.get(page.file.src_path)
    return make() if make else None
