"""turnstile.channels.ChannelLayer's own tests, beyond channels_redis's:
bad input, the server's limits, cancelled receives, several loops, and the
cost of a call (printed; run with -s to see it). Run inside the server by
tests/chlayer_test.go (TestChannelLayer_OwnTests, which starts it with
--channel-layer-memory 1 --channel-layer-max-message 65536)."""

import asyncio
import threading
import time

import pytest
from asgiref.sync import async_to_sync
from channels.exceptions import ChannelFull

from turnstile.channels import ChannelLayer, LayerMemoryFull


@pytest.fixture()
async def layer():
    layer = ChannelLayer(prefix="own", capacity=5)
    yield layer
    await layer.flush()


async def test_bad_input_stores_nothing(layer):
    for bad in (None, "text", ["a"], b"x"):
        with pytest.raises(TypeError):
            await layer.send("c1", bad)
        with pytest.raises(TypeError):
            await layer.group_send("g", bad)
    for name in ("", "=+bad!", "x" * 100, 42):
        with pytest.raises(TypeError):
            await layer.send(name, {"type": "t"})
        with pytest.raises(TypeError):
            await layer.group_add(name, "c1")
    with pytest.raises(TypeError):
        await layer.group_add("g", "bad name")
    with pytest.raises(TypeError):
        await layer.send("c1", {"type": "t", "obj": object()})  # msgpack cannot pack it
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive("c1"), 0.2)


async def test_size_limit(layer):
    with pytest.raises(ValueError, match="size limit"):
        await layer.send("c1", {"type": "t", "blob": b"x" * 70000})
    with pytest.raises(ValueError, match="size limit"):
        await layer.group_send("g", {"type": "t", "blob": b"x" * 70000})
    await layer.send("c1", {"type": "t", "blob": b"x" * 60000})
    assert len((await layer.receive("c1"))["blob"]) == 60000


async def test_memory_limit(layer):
    # 1 MiB for the worker: 17 channels of 60 kB fill it.
    big = ChannelLayer(prefix="own-mem", capacity=100)
    try:
        with pytest.raises(LayerMemoryFull, match="limit of queued message bytes"):
            for i in range(100):
                await big.send("m%d" % i, {"type": "t", "blob": b"x" * 60000})
        assert issubclass(LayerMemoryFull, ChannelFull)
    finally:
        await big.flush()
    await big.send("m0", {"type": "t"})  # room again after the flush
    assert (await big.receive("m0"))["type"] == "t"


async def test_group_send_at_memory_limit(layer):
    # The worker's 1 MiB full: a group_send still reaches a member whose
    # receive is waiting, though it sorts after one that would have to
    # queue it, and raises LayerMemoryFull saying how many it reached.
    big = ChannelLayer(prefix="own-gmem", capacity=100)
    blob = b"x" * 60000
    try:
        with pytest.raises(LayerMemoryFull):
            for i in range(100):
                await big.send("m%d" % i, {"type": "t", "blob": blob})
        await big.group_add("g", "a-queues")
        await big.group_add("g", "z-waits")
        waiter = asyncio.ensure_future(big.receive("z-waits"))
        await asyncio.sleep(0.05)
        with pytest.raises(LayerMemoryFull, match="reached 1 member"):
            await big.group_send("g", {"type": "g", "blob": blob})
        assert (await asyncio.wait_for(waiter, 5))["type"] == "g"
    finally:
        await big.flush()


async def test_cancelled_receive_consumes_nothing(layer):
    ch = await layer.new_channel()
    for i in range(50):
        task = asyncio.ensure_future(layer.receive(ch))
        await asyncio.sleep(0)
        await layer.send(ch, {"type": "t", "n": i})
        if i % 2:
            await asyncio.sleep(0)  # let the loop's reader deliver first
        task.cancel()
        try:
            got = await task
        except asyncio.CancelledError:
            got = await layer.receive(ch)
        assert got["n"] == i


async def test_receivers_on_other_loops():
    """Each receive resolves on its own loop (threads with their loops,
    as async_to_sync or turnstile's --loops run them)."""
    layer = ChannelLayer(prefix="own-loops", capacity=100)
    names = [await layer.new_channel() for _ in range(4)]
    results = {}

    def run(name):
        async def recv():
            return [(await layer.receive(name))["n"] for _ in range(20)]

        results[name] = async_to_sync(recv)()

    threads = [threading.Thread(target=run, args=(n,)) for n in names]
    for t in threads:
        t.start()
    await asyncio.sleep(0.1)
    await layer.group_add("fan", names[0])
    for n in names:
        await layer.group_add("fan", n)
    for i in range(20):
        await layer.group_send("fan", {"type": "t", "n": i})
    for t in threads:
        await asyncio.to_thread(t.join, 10)
    assert all(results[n] == list(range(20)) for n in names), results


async def test_call_costs(layer):
    """Per call, measured (printed): send then receive with the message
    waiting (two crossings), and a group_send to 100 members."""
    ch = await layer.new_channel()
    n = 5000
    t0 = time.perf_counter()
    for i in range(n):
        await layer.send(ch, {"type": "t", "n": i})
        await layer.receive(ch)
    pair = (time.perf_counter() - t0) / n
    members = [await layer.new_channel() for _ in range(100)]
    for m in members:
        await layer.group_add("cost", m)
    big = ChannelLayer(prefix="own", capacity=1000)
    t0 = time.perf_counter()
    for i in range(200):
        await big.group_send("cost", {"type": "t", "n": i})
    gs = (time.perf_counter() - t0) / 200
    # A receive already waiting: send wakes the loop through the
    # endpoint's eventfd, the reader takes the delivery (ping-pong of two
    # tasks, so every message takes that path).
    a, b = await layer.new_channel(), await layer.new_channel()

    async def echo():
        for _ in range(2000):
            m = await layer.receive(a)
            await layer.send(b, m)

    task = asyncio.ensure_future(echo())
    t0 = time.perf_counter()
    for i in range(2000):
        await layer.send(a, {"type": "t", "n": i})
        await layer.receive(b)
    rtt = (time.perf_counter() - t0) / 2000
    await task
    print("\nLAYER-COST send+receive %.1f us/pair; group_send to 100 members %.1f us; "
          "ping-pong through waiting receives %.1f us/round trip" % (pair * 1e6, gs * 1e6, rtt * 1e6))
