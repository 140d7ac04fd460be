"""Cycles whose process died are marked failed by the next cycle (`sweep_dead_cycles`): at once
when the process was on this machine, after `DEAD_AFTER_S` of silence when it was elsewhere. A
live cycle is never touched. (A cycle really killed -9: tests/faults/test_retention_killed.py.)"""

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from retention.cycle.lifecycle import DEAD_AFTER_S, sweep_dead_cycles
from retention.models import RetentionCycle
from store import locks

pytestmark = pytest.mark.django_db


def running(runner: str, silent_s: float) -> RetentionCycle:
    at = timezone.now() - timedelta(seconds=silent_s)
    return RetentionCycle.objects.create(trigger="beat", state="running", runner=runner, started_at=at, heartbeat_at=at)


def test_it_fails_the_cycles_whose_process_is_gone_or_silent_and_leaves_the_live_ones():
    here = locks._this_machine()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_here = running(f"{here}|{gone.stdout.strip()}|x", silent_s=1)
    alive_here = running(f"{here}|{os.getppid()}|x", silent_s=DEAD_AFTER_S * 2)  # alive: its silence is not looked at
    silent_elsewhere = running("another-host/boot/pid:[1]|42|x", silent_s=DEAD_AFTER_S + 5)
    beating_elsewhere = running("another-host/boot/pid:[1]|43|x", silent_s=DEAD_AFTER_S - 30)

    assert sweep_dead_cycles() == 2

    states = {c.pk: c.state for c in RetentionCycle.objects.all()}
    assert states == {
        dead_here.pk: "failed",
        alive_here.pk: "running",
        silent_elsewhere.pk: "failed",
        beating_elsewhere.pk: "running",
    }
    assert "process died" in RetentionCycle.objects.get(pk=silent_elsewhere.pk).error
