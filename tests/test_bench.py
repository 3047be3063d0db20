"""The benchmarks under bench/ still import (they run by hand, not here:
timings are for `python bench/...`, never for assertions)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conformance import REPO

BENCHES = sorted((REPO / "bench").glob("bench_*.py"))


@pytest.mark.parametrize("path", BENCHES, ids=lambda p: p.name)
def test_a_benchmark_imports(path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines main(); runs nothing
    assert callable(module.main)
