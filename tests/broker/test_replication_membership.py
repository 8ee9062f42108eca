"""The peer list changed while the nsqds run (``PUT /replication/peers``), as the operator
scales a replicated cluster, with real nsqd processes on 127.0.33.1-4 and topics on 2
copies. A held topic's copies move to its owner's new backups before the old ones
forget them; a node left out keeps its own backups until it is gone, then its messages
are adopted through the last list it was in. What survives is what consumers receive
after owners are killed (kill -9) and their data directories deleted."""
from __future__ import annotations

import json
import shutil
import signal
import time

import pytest

from tests.broker.load import Consumer, publish
from tests.broker.replicas import Cluster, cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import Nsqd, http, wait_for

pytestmark = pytest.mark.timeout(90)


def held(c: Cluster, i: int, owner: int, topic: str = "orders") -> int:
    return c.replication(i)["held_topics"].get(c.peers[owner], {}).get(topic, 0)


def put_peers(node: Nsqd, peers: list[str], epoch: int) -> tuple[int, dict]:
    status, body = http("PUT", node.url("/replication/peers"), json.dumps({"epoch": epoch, "peers": peers}).encode())
    return status, json.loads(body) if status == 200 else {"error": body}


def settled(c: Cluster, i: int, epoch: int) -> bool:
    return c.replication(i)["membership"]["settled"] == epoch


async def drained(node: Nsqd, topic: str, want: set[bytes]) -> None:
    """Every one of ``want`` delivered by ``node``, once each, and nothing else."""
    consumer = await Consumer(node.tcp_address, topic, "billing", rdy=200).start()
    await consumer.wait_until(lambda: want <= consumer.bodies(), 30, f"{len(want)} messages from {node.host}")
    await consumer.quiesce()
    await consumer.stop()
    delivered = [d.body for d in consumer.deliveries]
    assert set(delivered) == want, "a message never published came out"
    assert len(delivered) == len(want), f"{len(delivered) - len(want)} duplicates"


def orders_everywhere(c: Cluster) -> None:
    for node in c.nodes:
        post(node, "/topic/create?topic=orders")
        post(node, "/channel/create?topic=orders&channel=billing")


async def published_to_node_2(c: Cluster, prefix: str, count: int) -> list[bytes]:
    """``count`` messages acknowledged by node 2, once its backup in a list of three
    (node 0) holds them."""
    sent = [b"%s-%04d" % (prefix.encode(), i) for i in range(count)]
    assert (await publish(c.nodes[2].tcp_address, "orders", sent, batch=50)).acked == sent
    wait_for(lambda: held(c, 0, 2) == count, 10, message="node 0 backs node 2 up")
    return sent


def stopped_node_added(c: Cluster) -> Nsqd:
    """A fourth node, stopped (SIGSTOP) once it joined, then the list of four given to the
    others: node 2's new backup takes no snapshot until it is let go on (SIGCONT)."""
    added = c.grow(epoch=1)
    wait_for(lambda: not added.get_json("/replication")["silent"], 20, message="the node added joined")
    added.freeze()
    for node in c.nodes[:3]:
        assert put_peers(node, c.peers, 1)[0] == 200
    return added


def lose(node: Nsqd) -> None:
    node.kill()
    shutil.rmtree(node.workdir / "data")


async def test_a_node_added_takes_over_the_copies_its_place_in_the_ring_gives_it(cluster) -> None:
    c = cluster(2)
    owner = c.nodes[2]  # backed up by node 0 in a list of three, by node 3 in a list of four
    orders_everywhere(c)
    before = await published_to_node_2(c, "a", 300)

    added = c.grow(epoch=1)
    for node in c.nodes[:3]:
        status, answer = put_peers(node, c.peers, 1)
        assert status == 200 and answer["epoch"] == 1, answer
    wait_for(lambda: held(c, 3, 2) == 300, 30, message="the node added holds node 2's live messages")
    wait_for(lambda: all(settled(c, i, 1) for i in range(4)), 20, message="every node settled at epoch 1")
    wait_for(lambda: held(c, 0, 2) == 0, 10, message="node 0 forgot node 2's copies")
    after = [b"b-%04d" % i for i in range(100)]
    assert (await publish(owner.tcp_address, "orders", after, batch=20)).acked == after
    wait_for(lambda: held(c, 3, 2) == 400, 10, message="the node added holds every new copy")
    assert held(c, 0, 2) == 0

    lose(owner)
    await drained(added, "orders", set(before) | set(after))


async def test_an_owner_lost_while_its_copies_move_loses_nothing(cluster) -> None:
    """The node added is stopped (SIGSTOP) before it takes the snapshot: node 2's old
    backup must keep its copies (and count in its quorum) meanwhile. Node 2 is lost
    then; once the node added runs again it adopts, pulling the old backup's copies."""
    c = cluster(2)
    owner = c.nodes[2]
    orders_everywhere(c)
    before = await published_to_node_2(c, "a", 300)
    added = stopped_node_added(c)
    try:
        more = [b"b-%04d" % i for i in range(50)]
        assert (await publish(owner.tcp_address, "orders", more, batch=10)).acked == more, \
            "the old backup counts in the quorum while the new one has no snapshot"
        deadline = time.monotonic() + 2.0  # eight of the owner's ticks
        while time.monotonic() < deadline:
            assert held(c, 0, 2) == 350, "the old backup forgot before the new one held the copies"
        assert c.replication(2)["membership"]["moving_topics"] == ["orders"]
        lose(owner)
    finally:
        added.signal(signal.SIGCONT)
    wait_for(lambda: added.get_json("/replication")["adopted"].get(c.peers[2]) == 350, 30,
             message="the node added adopted node 2's messages")
    await drained(added, "orders", set(before) | set(more))


async def test_an_owner_restarted_while_its_copies_move_settles_only_once_they_moved(cluster) -> None:
    c = cluster(2)
    owner = c.nodes[2]
    orders_everywhere(c)
    await published_to_node_2(c, "a", 100)
    added = stopped_node_added(c)
    try:
        owner.restart()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # its new backup holds nothing yet
            assert c.replication(2)["membership"]["settled"] == 0, "settled before its copies moved"
    finally:
        added.signal(signal.SIGCONT)
    wait_for(lambda: settled(c, 2, 1), 20, message="settled once the node added holds the copies")
    assert held(c, 3, 2) == 100


async def test_a_node_left_out_hands_its_backups_on_and_its_own_messages_are_adopted(cluster) -> None:
    c = cluster(2, size=4)
    orders_everywhere(c)
    of_2 = [b"two-%04d" % i for i in range(200)]  # backed up by node 3, by node 0 once 3 is left out
    of_3 = [b"three-%04d" % i for i in range(200)]  # backed up by node 0 in either list
    assert (await publish(c.nodes[2].tcp_address, "orders", of_2, batch=50)).acked == of_2
    assert (await publish(c.nodes[3].tcp_address, "orders", of_3, batch=50)).acked == of_3
    wait_for(lambda: held(c, 3, 2) == 200 and held(c, 0, 3) == 200, 10, message="the backups hold the copies")

    three = c.peers[:3]
    for node in c.nodes:  # the node left out is told too: it stops being anyone's backup
        status, answer = put_peers(node, three, 1)
        assert status == 200 and answer["peers"] == three, answer
    wait_for(lambda: held(c, 0, 2) == 200, 30, message="node 0 holds node 2's copies")
    wait_for(lambda: all(settled(c, i, 1) for i in range(4)), 20, message="every node settled at epoch 1")
    wait_for(lambda: held(c, 3, 2) == 0, 10, message="the node left out forgot node 2's copies")
    assert held(c, 0, 3) == 200, "the node left out keeps its own backup until it is gone"

    lose(c.nodes[3])  # the scale-down's pod goes: what it accepted is adopted by node 0
    wait_for(lambda: c.replication(0)["adopted"].get(c.peers[3]) == 200, 20,
             message="node 0 adopted the messages of the node left out")
    lose(c.nodes[2])
    await drained(c.nodes[0], "orders", set(of_2) | set(of_3))


async def test_no_adoption_while_the_peers_run_different_lists(cluster) -> None:
    """Node 0 is on epoch 1, the others still on 0: an owner lost meanwhile is adopted
    only once every live peer runs the same list (who adopts follows the list)."""
    c = cluster(2)
    orders_everywhere(c)
    sent = await published_to_node_2(c, "m", 100)
    rotated = [c.peers[1], c.peers[2], c.peers[0]]  # the same ring, another list
    status, answer = put_peers(c.nodes[1], rotated, 1)
    assert status == 200, answer
    lose(c.nodes[2])
    wait_for(lambda: not c.replication(0)["peers"][2]["alive"], 10, message="node 2 found lost")
    deadline = time.monotonic() + 3.0  # three failover timeouts: node 0 would have adopted by then
    while time.monotonic() < deadline:
        assert not c.replication(0)["adopted"], "adopted while the peers' lists differ"
    status, answer = put_peers(c.nodes[0], rotated, 1)
    assert status == 200, answer
    wait_for(lambda: c.replication(0)["adopted"].get(c.peers[2]) == 100, 20,
             message="node 0 adopted once the lists agree")
    await drained(c.nodes[0], "orders", set(sent))


def test_a_list_is_refused_for_a_stale_epoch_too_few_peers_or_a_bad_body(cluster) -> None:
    c = cluster(3)
    node = c.nodes[0]
    status, answer = put_peers(node, c.peers, 0)
    assert status == 200 and answer["epoch"] == 0, "the same list again is accepted, as a no-op"
    status, answer = put_peers(node, c.peers[:2], 0)
    assert status == 409 and b"MEMBERSHIP_REFUSED" in answer["error"], answer
    status, answer = put_peers(node, c.peers[:2], 1)
    assert status == 409 and b"copies" in answer["error"], "two peers cannot hold three copies"
    for body in (b"", b"{}", b'{"epoch": -1, "peers": []}', b'{"epoch": 1, "peers": "a:1"}', b"[1]"):
        status, _ = http("PUT", node.url("/replication/peers"), body)
        assert status == 400, body
    status, answer = put_peers(node, [*c.peers, "127.0.33.4:1"], 2)
    assert status == 200 and answer["epoch"] == 2
    status, answer = put_peers(node, c.peers, 1)
    assert status == 409, "an older epoch"
    node.stop()
    node.start()  # the list set live outlives a restart with the flags' older one
    assert node.get_json("/replication/peers")["epoch"] == 2


def test_a_node_left_out_restarts_with_the_newer_list_it_was_not_in(cluster) -> None:
    """As a leaving pod made again from a template that already names the new list: it
    runs on with the last list it was in, from its data path; without one it refuses."""
    c = cluster(2)
    two = c.peers[:2]
    for node in c.nodes:
        assert put_peers(node, two, 1)[0] == 200
    left = c.nodes[2]
    left.stop()
    left.flags.update({"replication-peer": ",".join(two), "replication-membership-epoch": 1})
    left.start()
    assert left.get_json("/replication/peers") == {"epoch": 1, "peers": two, "settled": 1}
    assert [b["peer"] for b in left.get_json("/replication")["backups"]] == [c.peers[0]], \
        "its own copies stay with its backup of the last list it was in"
    left.stop()
    shutil.rmtree(left.workdir / "data")
    with pytest.raises(RuntimeError, match="is in none of the peer lists it knows"):
        left.start()


async def test_a_node_handing_off_its_messages_has_its_backups_forget_them(cluster) -> None:
    """A scale-down's drain (POST /drain?handoff=): what node 2 hands off to node 1 is
    published and replicated there, and node 2's backup (node 0) forgets its copies
    before the handoff says it is done, so nothing is adopted once node 2 is gone."""
    c = cluster(2)
    orders_everywhere(c)
    sent = await published_to_node_2(c, "h", 200)
    leaving = c.nodes[2]
    post(leaving, f"/drain?handoff={c.nodes[1].http_address}")
    wait_for(lambda: (leaving.get_json("/drain").get("handoff") or {}).get("finished"), 30,
             message="the handoff finished")
    assert leaving.get_json("/drain")["handoff"]["error"] is None
    assert held(c, 0, 2) == 0, "the backup kept the copies of what was handed off"
    leaving.stop()
    await drained(c.nodes[1], "orders", set(sent))
