"""The billing tool every framework test wraps in its own way."""

from __future__ import annotations

from typing import Any

charged: list[int] = []


async def create_charge(amount: int, order_id: str) -> dict[str, Any]:
    """Charge a customer."""
    charged.append(amount)
    return {"id": f"ch_{order_id}", "amount": amount}
