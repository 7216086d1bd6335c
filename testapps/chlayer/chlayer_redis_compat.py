"""A pytest plugin that runs channels_redis's own generic layer tests
(tests/test_core.py of its sdist, unmodified) against
turnstile.channels.ChannelLayer, inside the server (conformance.py runs
pytest there; tests/chlayer_test.go drives it).

The test module builds its layers with ``RedisChannelLayer(hosts=..., ...)``
imported from ``channels_redis.core``: this plugin, loaded before the
module is collected, puts turnstile's layer under that name (hosts, Redis's
addresses, are ignored; ``close_pools`` has nothing to close). The tests
that look at channels_redis's insides, not at the layer's behaviour, are
skipped by name with the reason.
"""

import channels_redis.core
import pytest

from turnstile.channels import ChannelLayer


class RedisChannelLayer(ChannelLayer):
    """channels_redis's constructor over turnstile's layer."""

    def __init__(self, hosts=None, prefix="asgi", **kwargs):
        super().__init__(prefix=prefix, **kwargs)

    async def close_pools(self):
        pass


channels_redis.core.RedisChannelLayer = RedisChannelLayer

REDIS_ONLY = {
    "test_receive_buffer_respects_capacity": "channels_redis's receive_buffer (its Python-side BoundedQueue per channel)",
    "test_default_group_key_format": "the Redis key of a group (_group_key)",
    "test_custom_group_key_format": "the Redis key of a group (_group_key)",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = REDIS_ONLY.get(getattr(item, "originalname", item.name))
        if reason:
            item.add_marker(pytest.mark.skip(reason="Redis-specific: " + reason))
