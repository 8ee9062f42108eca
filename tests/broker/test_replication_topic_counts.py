"""A topic's own number of copies, with three real nsqd processes (127.0.33.1-3): set
through ``POST /topic/create?replicas=N`` or ``--topic-replicas-for``, it overrides
``--topic-replicas`` both ways. What each backup holds is read from ``GET /replication``
(``held_topics``: copies held per owner and topic); what survives is what a consumer of
the adopter receives after the owner's kill -9 and the deletion of its data directory."""
from __future__ import annotations

import shutil

import pytest

from tests.broker.load import Consumer, V2Connection, publish
from tests.broker.replicas import cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import wait_for

pytestmark = pytest.mark.timeout(60)


def held(c, i: int, owner: int = 0) -> dict[str, int]:
    return c.replication(i)["held_topics"].get(c.peers[owner], {})


async def test_default_one_a_topic_of_three_survives_its_owner_and_one_of_one_costs_nothing(cluster) -> None:
    c = cluster(1)
    owner, adopter, other = c.nodes
    post(owner, "/topic/create?topic=safe&replicas=3")
    post(owner, "/topic/create?topic=plain")  # the default: one copy
    assert c.replication(0)["topic_replicas"] == {"safe": 3, "plain": 1}
    wait_for(lambda: all(b["connected"] for b in c.replication(0)["backups"]), 10, message="links to both backups")
    safe = [b"safe-%04d" % i for i in range(500)]
    plain = [b"plain-%04d" % i for i in range(500)]
    assert (await publish(owner.tcp_address, "safe", safe, batch=50)).acked == safe
    assert (await publish(owner.tcp_address, "plain", plain, batch=50)).acked == plain
    for i in (1, 2):  # the other nsqds hold every copy of safe, none of plain
        wait_for(lambda: held(c, i) == {"safe": 500}, 10, message=f"nsqd {i} holds the copies of safe only")

    owner.kill()
    shutil.rmtree(owner.workdir / "data")
    after = await Consumer(adopter.tcp_address, "safe", "reader", rdy=200).start()
    await after.wait_until(lambda: set(safe) <= after.bodies(), 20, "every acknowledged message of safe")
    await after.quiesce()
    await after.stop()
    assert sorted(d.body for d in after.deliveries) == safe  # all of them, once each
    assert c.replication(1)["adopted"] == {c.peers[0]: 500}
    assert adopter.topic("plain") is None  # nothing of it was ever sent there


async def test_default_three_a_topic_of_one_costs_nothing_and_one_of_two_is_on_one_backup(cluster) -> None:
    c = cluster(3, topic_replicas_for="cheap:1,pair:2")
    owner, first, second = c.nodes
    for topic, bodies in (("full", 100), ("pair", 200), ("cheap", 300)):
        sent = [b"%s-%04d" % (topic.encode(), i) for i in range(bodies)]
        assert (await publish(owner.tcp_address, topic, sent, batch=50)).acked == sent
    wait_for(lambda: held(c, 1) == {"full": 100, "pair": 200}, 10, message="the first backup holds full and pair")
    wait_for(lambda: held(c, 2) == {"full": 100}, 10, message="the second backup holds full only")
    assert c.replication(0)["topic_replicas"] == {"full": 3, "pair": 2, "cheap": 1}

    second.kill()  # pair's quorum is its one backup, still up
    assert (await publish(owner.tcp_address, "pair", [b"pair-more"])).acked == [b"pair-more"]
    first.kill()  # no backup left: the one-copy topic publishes as if unreplicated...
    assert (await publish(owner.tcp_address, "cheap", [b"cheap-more"])).acked == [b"cheap-more"]
    conn = await V2Connection.open(owner.tcp_address)  # ...while pair has no quorum
    try:
        conn.send(b"PUB pair\n" + (4).to_bytes(4, "big") + b"lost")
        frame = await conn.frame(timeout=10)
        assert frame.is_error and frame.data.startswith(b"E_PUB_FAILED"), frame.data
    finally:
        await conn.close()


async def test_a_count_raised_from_one_copies_what_the_topic_holds_and_survives_a_restart(cluster) -> None:
    c = cluster(1)
    owner = c.nodes[0]
    post(owner, "/topic/create?topic=t&replicas=1")
    wait_for(lambda: all(b["connected"] for b in c.replication(0)["backups"]), 10, message="links to both backups")
    sent = [b"m-%d" % i for i in range(20)]
    assert (await publish(owner.tcp_address, "t", sent, batch=10)).acked == sent
    assert owner.post("/topic/create?topic=t&replicas=6").status == 400
    assert owner.post("/topic/create?topic=t%23ephemeral&replicas=2").status == 400
    assert held(c, 1) == {} and c.replication(0)["topic_replicas"] == {"t": 1}

    post(owner, "/topic/create?topic=t&replicas=3")  # what its queue holds is copied
    for i in (1, 2):
        wait_for(lambda i=i: held(c, i) == {"t": 20}, 10, message=f"nsqd {i} holds t's 20 messages")
    assert (await publish(owner.tcp_address, "t", [b"copied"])).acked == [b"copied"]
    wait_for(lambda: held(c, 1) == {"t": 21}, 10, message="a copy of the next one on the first backup")
    post(owner, "/topic/create?topic=t&replicas=1")  # lowered to 1 while it holds a message
    for i in (1, 2):  # the copies are forgotten
        wait_for(lambda: held(c, i) == {}, 10, message=f"nsqd {i} forgot t")
    assert (await publish(owner.tcp_address, "t", [b"alone"])).acked == [b"alone"]
    owner.stop()
    owner.start()
    assert c.replication(0)["topic_replicas"] == {"t": 1}  # kept in replication/topics.json
    metadata = (owner.workdir / "data" / "nsqd.dat").read_text()
    assert "replicas" not in metadata  # NSQ's own file is unchanged
