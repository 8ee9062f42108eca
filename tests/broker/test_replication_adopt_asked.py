"""A lost owner's first backup came back wiped: it holds none of the owner's copies, so
nothing of its own makes it adopt, while the owner's second backup holds them all and,
not being the first live backup, does not adopt either. The second backup asks the
first (in its PINGs) to adopt; the first pulls the copies from it and delivers every
acknowledged message. Before, the copies waited for ever.

Then the owner comes back at once with an empty disk too (another life of it): the
second backup fences the copies of its former life and asks with the fence said, so the
first adopts them although it hears the owner, with what the new life published
through it meanwhile."""
from __future__ import annotations

import shutil
import time

import pytest

from tests.broker.load import Consumer, Published, publish
from tests.broker.replicas import Cluster, cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import wait_for

pytestmark = pytest.mark.timeout(90)


async def held_by_both_backups_then_owner_and_first_wiped(c: Cluster) -> list[bytes]:
    """600 messages published to nsqd 0 and held by both its backups; then its first
    backup and itself killed with kill -9, their data directories deleted (both left
    down). What was acknowledged."""
    owner, first, _ = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    bodies = [b"o-%05d" % i for i in range(600)]
    assert (await publish(owner.tcp_address, "orders", bodies, batch=50)).acked == bodies
    for i in (1, 2):
        wait_for(lambda i=i: c.replication(i)["held_copies"].get(c.peers[0]) == len(bodies), 10,
                 message=f"backup {i} holds every copy")
    for node in (first, owner):
        node.kill()
        shutil.rmtree(node.workdir / "data")
    return bodies


async def test_a_wiped_first_backup_adopts_what_only_the_second_holds_when_asked(cluster) -> None:
    c = cluster(3)
    owner, first, second = c.nodes
    owner_peer = c.peers[0]
    acked = await held_by_both_backups_then_owner_and_first_wiped(c)  # the owner stays lost
    first.start()  # empty: silent for a while, then a live peer holding nothing of the owner

    wait_for(lambda: c.replication(1)["adopted"].get(owner_peer) == len(acked), 40, interval=0.2,
             message="the wiped first backup adopted what the second holds")
    assert c.replication(2)["adopted"] == {}
    consumer = await Consumer(first.tcp_address, "orders", "billing", rdy=200).start()
    await consumer.wait_until(lambda: set(acked) <= consumer.bodies(), 30, "every acknowledged message")
    await consumer.quiesce()
    await consumer.stop()
    delivered = [d.body for d in consumer.deliveries]
    assert len(delivered) == len(set(delivered)) == len(acked), "duplicates, or messages never published"
    # the adopted messages are the first backup's own now: the second dropped the old copies
    wait_for(lambda: c.replication(2)["held_copies"].get(owner_peer, 0) == 0, 20, message="the DROP")


async def test_an_owner_back_wiped_has_both_lives_adopted_by_its_wiped_first_backup(cluster) -> None:
    """The owner comes back empty while its first backup (wiped too) is back: its new life
    publishes through the first backup (the second refuses it, holding its former life's
    copies) until the first, asked by the second, adopts both lives' messages; the owner
    learns and goes on in its next generation. Nothing acknowledged in either life is lost."""
    c = cluster(3)
    owner, first, second = c.nodes
    owner_peer = c.peers[0]
    former = await held_by_both_backups_then_owner_and_first_wiped(c)
    first.start()
    owner.start()
    new_life = Published()
    deadline = time.monotonic() + 40
    n = 0
    while time.monotonic() < deadline:  # one PUB at a time until some are acknowledged after the adoption
        adopted = c.replication(1)["adopted"].get(owner_peer)
        if adopted is not None and len(new_life.acked) >= adopted - len(former) + 20:
            break
        await publish(owner.tcp_address, "orders", [b"n-%05d" % n], batch=1, result=new_life)
        n += 1
    adopted = c.replication(1)["adopted"].get(owner_peer)
    assert adopted is not None, "no adoption"
    assert adopted > len(former), "no publish of the new life was acknowledged before the adoption: case not exercised"

    acked = set(former) | set(new_life.acked)
    readers = [await Consumer(node.tcp_address, "orders", "billing", rdy=200).start() for node in (first, owner)]
    await readers[0].wait_until(lambda: acked <= readers[0].bodies() | readers[1].bodies(), 30,
                                "every acknowledged message, of both lives")
    for reader in readers:
        await reader.quiesce()
        await reader.stop()
    print(f"\n{len(new_life.acked)} of {n} publishes of the new life acknowledged, {adopted} messages adopted")
