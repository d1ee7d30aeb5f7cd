"""The one adaptive stopping rule (core.estimation.draw_rounds), with fake draws.

A fake ``draw`` records the (chunk, blocks) tasks it is given and yields one result per task, a
fake ``widest`` returns scripted relative widths, so every branch can be checked exactly: the
chunk numbers, the round sizes, the fixed budget, the block cap, the time cap.
"""

from __future__ import annotations

import pytest

from varcheck.core.estimation import MIN_BLOCKS, Rounds, StopRule, draw_rounds


class _Fake:
    def __init__(self, widths: list[float]) -> None:
        self.widths = list(widths)
        self.tasks: list[tuple[int, int]] = []
        self.absorbed: list[int] = []

    def draw(self, tasks):
        for chunk, blocks in tasks:
            self.tasks.append((chunk, blocks))
            if len(self.tasks) > 10_000:
                raise RuntimeError("the rule does not stop")
            yield blocks

    def absorb(self, results) -> None:
        self.absorbed.append(sum(results))

    def widest(self) -> float:
        return self.widths.pop(0)

    def run(self, rule: StopRule, per_chunk: int = 10, **kwargs) -> Rounds:
        return draw_rounds(rule, per_chunk, self.draw, self.absorb, self.widest, **kwargs)


def test_a_width_equal_to_the_target_stops() -> None:
    """Guards against `<` for `<=` in the stopping test: a width exactly at the target is
    reached, after the first round of MIN_BLOCKS blocks."""
    fake = _Fake([0.05])
    assert fake.run(StopRule(precision=0.05, first_round=MIN_BLOCKS)) == (MIN_BLOCKS, "precision")
    assert sum(b for _, b in fake.tasks) == MIN_BLOCKS


def test_rounds_grow_from_the_measured_width() -> None:
    """Round sizes: (width / precision)^2 * 1.1 times the blocks so far, at most 16 times; the
    blocks reported are those drawn, and chunk numbers never repeat."""
    fake = _Fake([0.2, 0.12, 0.01])
    rounds = fake.run(StopRule(precision=0.1, first_round=100))
    # 100 blocks; then ceil(100 * 2^2 * 1.1) = 441 (4.4 is 4.4000000000000004 in floating
    # point); then ceil(441 * 1.2^2 * 1.1) = 699
    assert rounds == Rounds(699, "precision")
    chunks = [c for c, _ in fake.tasks]
    assert chunks == list(range(len(chunks)))
    assert sum(b for _, b in fake.tasks) == 699


def test_infinite_width_grows_by_the_cap() -> None:
    fake = _Fake([float("inf"), 0.0])
    assert fake.run(StopRule(precision=0.1, first_round=10)) == Rounds(160, "precision")


def test_block_cap_stops_a_run_that_cannot_converge() -> None:
    """Guards against `>` for `>=` at the block cap (the run would then ask for zero more
    blocks forever): a run whose width never reaches the target stops at max_blocks."""
    fake = _Fake([1.0] * 10)
    rule = StopRule(precision=0.01, first_round=4, max_blocks=50)
    assert fake.run(rule, per_chunk=3) == Rounds(50, "precision")
    assert sum(b for _, b in fake.tasks) == 50


def test_fixed_budget_is_one_round() -> None:
    fake = _Fake([])
    rule = StopRule(precision=None, first_round=25, fixed="samples")
    assert fake.run(rule, per_chunk=10) == Rounds(25, "samples")
    assert fake.tasks == [(0, 10), (1, 10), (2, 5)]
    assert fake.absorbed == [10, 10, 5]


def test_per_round_merges_once_per_round() -> None:
    fake = _Fake([0.5, 0.0])
    fake.run(StopRule(precision=0.25, first_round=20), per_chunk=8, per_round=True)
    assert fake.absorbed == [20, 68]  # 20, then ceil(20 * 4 * 1.1) - 20 = 68


def test_time_cap_stops_after_two_blocks() -> None:
    fake = _Fake([])
    rule = StopRule(precision=0.01, first_round=100, max_seconds=0.0)
    assert fake.run(rule, per_chunk=1) == Rounds(2, "max-seconds")


def test_progress_is_the_round_fraction() -> None:
    seen: list[float] = []
    _Fake([0.0]).run(StopRule(precision=0.1, first_round=40), per_chunk=10, progress=seen.append)
    assert seen == [0.25, 0.5, 0.75, 1.0]


@pytest.mark.parametrize("bad", [0, -1])
def test_first_round_must_draw(bad: int) -> None:
    """A first round of no blocks draws nothing and reports nothing (no division by zero)."""
    fake = _Fake([])
    rounds = fake.run(StopRule(precision=None, first_round=bad, fixed="blocks"))
    assert rounds == Rounds(0, "blocks") and fake.tasks == []
