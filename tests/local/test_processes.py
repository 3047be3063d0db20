"""Broker sessions and held interrupts (fluxhop.local.processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import pytest

from fluxhop.local.processes import interrupts_held, session_alive, started_after, stop_sessions


def test_an_interrupt_while_held_is_raised_after():
    steps = []
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a CLI run has it
    try:
        with pytest.raises(KeyboardInterrupt), interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("recorded")  # not cut short by the interrupt
        assert steps == ["recorded"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_nothing_held_raises_nothing():
    before = signal.getsignal(signal.SIGTERM)
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_session_ends_with_the_groups_it_started():
    """A broker's session, with a child in a process group of its own (as
    Flux starts rc scripts and job shells), ends whole."""
    leader = subprocess.Popen(
        ["bash", "-c", "set -m; sleep 300 & echo $!; wait"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    try:
        assert os.getpgid(child) != leader.pid  # set -m: a group of its own
        assert session_alive(leader.pid)
        stop_sessions([leader.pid])
        leader.wait()
    finally:
        leader.stdout.close()
        for pid in (child, leader.pid):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert not session_alive(leader.pid)
    assert not running(child)


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_a_session_whose_number_was_given_again_is_left_alone():
    """A broker's number, given again after a reboot to someone's shell: a
    leader started after the instance was made is not stopped."""
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        made = time.time() - 60  # the instance was made a minute ago
        assert started_after(stranger.pid, made)
        stop_sessions([stranger.pid], started_by=made)
        assert stranger.poll() is None
        assert not started_after(stranger.pid, time.time())
    finally:
        stranger.kill()
        stranger.wait()


def test_sigterm_wins_over_ctrl_c_when_both_were_held():
    caught: list[int] = []
    before = {
        s: signal.signal(s, lambda sig, _: caught.append(sig))
        for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)
        assert caught == [signal.SIGTERM]
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
