"""What a bulk run hands back: one ``ItemResult`` per item, and ``RunResults``, their list with sums."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from chatclient.models.base import Usage

__all__ = ["ItemResult", "RunResults"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ItemResult(Generic[T]):
    """The outcome of one item: ``value`` when it succeeded, else ``error`` (the exception object).

    ``usage`` sums the model calls the item made (``None`` when none was seen); ``cost`` is their
    price when ``prices=`` was given and every model had one.
    """

    index: int
    value: T | None = None
    error: BaseException | None = None
    usage: Usage | None = None
    cost: float | None = None

    @property
    def ok(self) -> bool:
        """True when the item succeeded."""
        return self.error is None

    def unwrap(self) -> T:
        """The value, or raise the item's error."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class RunResults(list[ItemResult[Any]]):
    """The ``ItemResult``s of a run in input order, with ``usage`` and ``cost`` summed over them."""

    @property
    def usage(self) -> Usage:
        """Every item's usage added up."""
        total = Usage()
        for r in self:
            if r.usage is not None:
                total = total + r.usage
        return total

    @property
    def cost(self) -> float | None:
        """Every item's cost added up (``None`` when no item had a price)."""
        costs = [r.cost for r in self if r.cost is not None]
        return sum(costs) if costs else None

    @property
    def failed(self) -> list[ItemResult[Any]]:
        """The items that failed."""
        return [r for r in self if r.error is not None]
