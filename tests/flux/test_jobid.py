"""F58 job IDs: round trips, bad input in one line, and flux-core's own
encoding where a real flux is installed."""

from __future__ import annotations

import random
import subprocess

import pytest

from fluxhop.errors import InputError
from fluxhop.flux.jobid import f58, parse
from tests.realflux import flux_prefix, missing_flux

IDS = [0, 1, 57, 58, 8891924481, 2**63, 2**64 - 1]


@pytest.mark.parametrize("jobid", IDS)
def test_round_trip(jobid):
    assert parse(f58(jobid)) == jobid
    assert parse(f58(jobid, ascii=False)) == jobid
    assert parse(str(jobid)) == jobid


@pytest.mark.parametrize("text", ["", "f", "f0", "fI", "x12", "f" + "z" * 12, "-1", "ƒO"])
def test_bad_ids_are_one_line(text):
    with pytest.raises(InputError, match="job ID"):
        parse(text)


def test_out_of_range():
    with pytest.raises(InputError, match="64-bit"):
        f58(2**64)


@pytest.mark.skipif(missing_flux() is not None, reason=missing_flux() or "")
def test_the_same_as_flux_job_id():
    flux = str(flux_prefix() / "bin" / "flux")
    ids = IDS + [random.Random(7).randrange(2**64) for _ in range(20)]
    out = subprocess.run(
        [flux, "job", "id", "--to=f58", *map(str, ids)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    assert out == [f58(i, ascii=False) for i in ids]
