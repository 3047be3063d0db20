"""Following rank 0's log across a broken stream: every line once, in order
(cluster/logstream.py)."""

from __future__ import annotations

import pytest

from fluxhop.cluster.logstream import follow_log, stamp_key
from fluxhop.errors import ClusterError, Unreachable


def stamped(n: int, text: str) -> str:
    return f"2026-12-01T10:00:0{n // 10}.{n % 10}Z {text}\n"  # Go trims the fraction's zeros


class Kube:
    """Hands out prepared streams, one per call to log()."""

    def __init__(self, *streams, running=(True,)):
        self.streams = list(streams)
        self.running = list(running)
        self.calls: list[dict] = []

    def log(self, pod, container, **options):
        self.calls.append(options)
        stream = self.streams.pop(0)
        if isinstance(stream, Exception):
            raise stream
        for item in stream:
            if isinstance(item, Exception):
                raise item
            yield item

    def get(self, kind, name):
        state = {"running": {}} if self.running.pop(0) else {"terminated": {"exitCode": 0}}
        return {"status": {"containerStatuses": [{"name": "c", "state": state}]}}


def test_a_broken_stream_is_followed_again_without_repeats():
    lines = [stamped(n, f"line {n}") for n in range(1, 6)]
    kube = Kube(
        [lines[0], lines[1], Unreachable("lost the log stream")],
        [lines[0], lines[1], lines[2], lines[3]],  # asked again: from before the last line
        running=(False,),
    )
    seen = list(follow_log(kube, "p", "c", clock=iter(range(100)).__next__))
    assert seen == ["line 1\n", "line 2\n", "line 3\n", "line 4\n"]
    assert kube.calls[0]["since_seconds"] is None and kube.calls[0]["timestamps"]
    assert kube.calls[1]["since_seconds"] is not None


def test_a_stream_that_ends_early_is_followed_until_the_container_ends():
    kube = Kube([stamped(1, "a")], [stamped(1, "a"), stamped(2, "b")], running=(True, False))
    assert list(follow_log(kube, "p", "c")) == ["a\n", "b\n"]


def test_a_kubelet_that_cannot_be_reached_ends_the_stream_not_the_run():
    kube = Kube([stamped(1, "a"), Unreachable("x")], ClusterError("get pods/p failed: 500"))
    assert list(follow_log(kube, "p", "c")) == ["a\n"]


def test_the_first_refusal_is_the_callers():
    with pytest.raises(ClusterError):
        list(follow_log(Kube(ClusterError("pod p not found")), "p", "c"))


def test_stamps_sort_although_go_trims_their_zeros():
    assert stamp_key("2026-12-01T10:00:05.5Z") > stamp_key("2026-12-01T10:00:05.45Z")
    assert stamp_key("2026-12-01T10:00:05Z") < stamp_key("2026-12-01T10:00:05.000000001Z")


def test_lines_that_share_a_stamp_are_neither_lost_nor_repeated():
    same = "2026-12-01T10:00:01.5Z"
    kube = Kube(
        [f"{same} a\n", Unreachable("lost")],
        [f"{same} a\n", f"{same} b\n", stamped(30, "c")],
        running=(False,),
    )
    assert list(follow_log(kube, "p", "c")) == ["a\n", "b\n", "c\n"]


def test_a_log_that_keeps_ending_early_is_an_error_not_a_silent_end():
    streams = [[stamped(1, "a")]] + [[stamped(1, "a")]] * 20
    kube = Kube(*streams, running=(True,) * 21)
    with pytest.raises(Unreachable, match="gave up following it"):
        list(follow_log(kube, "p", "c"))
