"""d_k values given to the Python API as numbers or lists: what is not a whole number in range,
nor an iterable of them, is refused with a message naming it."""

from __future__ import annotations

import pytest

from varcheck.core.ranges import resolve_dks
from varcheck.errors import VarcheckError


@pytest.mark.parametrize("dk", [True, 2.5, None, [4, False]])
def test_a_value_that_is_no_whole_number_is_refused_by_name(dk: object) -> None:
    with pytest.raises(VarcheckError, match=r"dk must be whole numbers in 1\.\.\d+, got"):
        resolve_dks(dk)


@pytest.mark.parametrize(("dk", "values"), [(8, [8]), ([2, 4], [2, 4]), (range(2, 5), [2, 3, 4])])
def test_a_number_or_an_iterable_of_numbers_is_read(dk: object, values: list[int]) -> None:
    assert resolve_dks(dk) == values
