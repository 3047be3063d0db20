"""Following rank 0's log across a broken stream: every line once, in order
(cluster/logstream.py)."""

from __future__ import annotations

import pytest

from fluxhop.cluster.logstream import (
    MAX_BREAKS,
    STATUS_EVERY,
    STATUS_LAG,
    follow_log,
    stamp_key,
)
from fluxhop.errors import ClusterError, Unreachable


def stamped(n: int, text: str) -> str:
    return f"2026-12-01T10:00:0{n // 10}.{n % 10}Z {text}\n"  # Go trims the fraction's zeros


class Kube:
    """Hands out prepared streams, one per call to log(), and the container's
    state, one per call to get() (the last one again when they run out)."""

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
        running = self.running.pop(0) if len(self.running) > 1 else self.running[0]
        state = {"running": {}} if running else {"terminated": {"exitCode": 0}}
        return {"status": {"containerStatuses": [{"name": "c", "state": state}]}}


class Time:
    """A clock that moves only when slept on."""

    def __init__(self):
        self.now = 0.0
        self.slept = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


def follow(kube: Kube, time: Time | None = None) -> list[str]:
    time = time or Time()
    return list(follow_log(kube, "p", "c", clock=time.clock, sleep=time.sleep))


def test_a_broken_stream_is_followed_again_without_repeats():
    lines = [stamped(n, f"line {n}") for n in range(1, 6)]
    kube = Kube(
        [lines[0], lines[1], Unreachable("lost the log stream")],
        [lines[0], lines[1], lines[2], lines[3]],  # asked again: from before the last line
        [lines[2], lines[3]],  # the container has ended: read once more, not followed
        running=(False,),
    )
    seen = list(follow_log(kube, "p", "c", clock=iter(range(100)).__next__))
    assert seen == ["line 1\n", "line 2\n", "line 3\n", "line 4\n"]
    assert kube.calls[0]["since_seconds"] is None and kube.calls[0]["timestamps"]
    assert kube.calls[1]["since_seconds"] is not None
    assert [call["follow"] for call in kube.calls] == [True, True, False]


def test_a_stream_that_ends_early_is_followed_until_the_container_ends():
    kube = Kube(
        [stamped(1, "a")],  # cut while the container runs on
        [stamped(1, "a"), stamped(2, "b")],
        [stamped(1, "a"), stamped(2, "b"), stamped(3, "c")],  # written after the second ended
        running=(True,) * 41 + (False,),
    )
    time = Time()
    assert follow(kube, time) == ["a\n", "b\n", "c\n"]
    assert [call["follow"] for call in kube.calls] == [True, True, False]


def test_a_container_whose_status_lags_its_end_is_not_followed_again():
    """A real kubelet reports the end a moment after the log's stream ends:
    the status is waited for, and the log read once more, not followed."""
    kube = Kube([stamped(1, "a")], [stamped(1, "a")], running=(True, True, True, False))
    time = Time()
    assert follow(kube, time) == ["a\n"]
    assert [call["follow"] for call in kube.calls] == [True, False]
    assert time.slept == 3 * STATUS_EVERY


def test_a_kubelet_that_cannot_be_reached_ends_the_stream_not_the_run():
    kube = Kube([stamped(1, "a"), Unreachable("x")], ClusterError("get pods/p failed: 500"))
    assert follow(kube) == ["a\n"]


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
        [stamped(30, "c")],
        running=(False,),
    )
    assert follow(kube) == ["a\n", "b\n", "c\n"]


def test_a_log_that_keeps_ending_early_is_an_error_not_a_silent_end():
    streams = [[stamped(1, "a")]] + [[stamped(1, "a")]] * 20
    kube = Kube(*streams, running=(True,))
    time = Time()
    with pytest.raises(Unreachable, match="gave up following it"):
        follow(kube, time)
    assert len(kube.calls) == MAX_BREAKS + 1  # each after the status had its time
    assert time.slept >= (MAX_BREAKS + 1) * STATUS_LAG


def test_the_kubelets_own_words_in_the_stream_are_not_the_containers():
    """A real kubelet that cannot read a container's log any more (removed
    under an eviction) writes so into the stream, without a timestamp: it
    is not passed on as the job's output."""
    kube = Kube(
        [stamped(1, "first"), "unable to retrieve container logs for containerd://12ab"],
        [stamped(1, "first")],
        running=(False,),
    )
    assert follow(kube) == ["first\n"]
