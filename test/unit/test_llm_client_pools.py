"""The model client's small pools (modules/llm/client_pools.py): a lone request always finds the first pool and
the connection it kept alive; concurrent ones spread, so no pool's walk covers more than POOL_SIZE connections."""

from __future__ import annotations

from contextlib import ExitStack

from modules.llm.client_pools import POOL_SIZE, ClientPools


def test_the_pools_share_max_connections_in_parts_of_at_most_pool_size() -> None:
    for total in (1, 2, POOL_SIZE, POOL_SIZE + 1, 1000):
        shares = ClientPools(total, lambda share: share).clients
        assert sum(shares) == total and max(shares) <= POOL_SIZE and min(shares) >= 1


def test_requests_one_after_another_use_the_first_pool() -> None:
    pools = ClientPools(1000, lambda share: object())
    for _ in range(5):
        with pools.client() as client:
            assert client is pools.clients[0]


def test_concurrent_requests_go_to_the_least_busy_pool() -> None:
    pools = ClientPools(3 * POOL_SIZE, lambda share: object())
    with ExitStack() as held:
        taken = [held.enter_context(pools.client()) for _ in range(7)]
    assert [pools.clients.index(c) for c in taken] == [0, 1, 2, 0, 1, 2, 0]
    with pools.client() as client:  # all released: the first again
        assert client is pools.clients[0]
