"""The web UI in a real browser over a real cluster: what a person sees on the overview,
topic, channel, node and lookup pages; numbers moving as messages flow; the buttons and
their confirmation; an nsqd that stopped answering. Saves a screenshot of each page (to
$NSQADMIN_SCREENSHOTS when set: the README's pictures come from there)."""
from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.conftest import Servers
from tests.servers import Nsqd, Nsqlookupd, http

from .browser import eventually, find_browser, start_browser
from .cluster import post, registered
from .processes import AdminProcess, Consumer, start_admin


class Ui:
    def __init__(self, driver: Any, admin: AdminProcess, shots: Path) -> None:
        self.driver, self.admin, self.shots = driver, admin, shots

    def open(self, path: str) -> None:
        self.driver.get(self.admin.url(path))  # a new document: its refresh count starts at 0
        eventually(lambda: self.refreshes() >= 1, message=f"{path} drawn")

    def refreshes(self) -> int:
        return int(self.driver.execute_script("return Number(document.body.dataset.refreshes || 0)"))

    def text(self, css: str) -> str:
        from selenium.webdriver.common.by import By
        return str(self.driver.find_element(By.CSS_SELECTOR, css).text)

    def texts(self, css: str) -> list[str]:
        from selenium.webdriver.common.by import By
        return [str(e.text) for e in self.driver.find_elements(By.CSS_SELECTOR, css)]

    def number(self, css: str) -> int:
        return int(self.text(css).replace(",", ""))

    def click(self, css: str) -> None:
        from selenium.webdriver.common.by import By
        eventually(lambda: self.driver.find_element(By.CSS_SELECTOR, css).click() or True, message=f"click {css}")

    def confirm(self, expected_question: str, answer: str = "ok") -> None:
        eventually(lambda: self.driver.execute_script("return document.getElementById('confirm').open"),
                   message="the confirmation dialog")
        assert expected_question in self.text("#confirm-text")
        self.click(f"#confirm-{answer}")

    def screenshot(self, name: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"{name}.png"))


def mpub(nsqd: Nsqd, topic: str, count: int) -> None:
    body = b"\n".join(b"message %d" % i for i in range(count))
    status, answer = http("POST", nsqd.url(f"/mpub?topic={topic}"), body)
    assert status == 200, answer


@pytest.fixture(scope="module")
def site(module_servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    find_browser()  # skip before starting anything when there is no browser
    lookupd: Nsqlookupd = module_servers.lookupd()
    nsqds = [module_servers.nsqd(lookupd_tcp_address=lookupd.tcp_address) for _ in range(3)]
    for nsqd in nsqds[:2]:
        post(nsqd, "/topic/create?topic=clicks")
        post(nsqd, "/channel/create?topic=clicks&channel=reader")
        mpub(nsqd, "clicks", 10)
    post(nsqds[2], "/topic/create?topic=audit")
    registered(lookupd, "clicks", 2)
    registered(lookupd, "audit", 1)
    consumer = Consumer(nsqds[0], "clicks", "reader")
    tmp = tmp_path_factory.mktemp("ui")
    admin = start_admin(tmp / "admin", {"lookupd-http-address": lookupd.http_address,
                                        "http-client-request-timeout": "1s", "http-client-connect-timeout": "1s"})
    shots = Path(os.environ.get("NSQADMIN_SCREENSHOTS") or tmp / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    driver = start_browser(tmp / "chromium-profile")
    try:
        yield {"ui": Ui(driver, admin, shots), "nsqds": nsqds, "lookupd": lookupd}
    finally:
        driver.quit()
        consumer.stop()
        admin.stop()


def test_overview_lists_topics_and_counts_move(site: dict[str, Any]) -> None:
    ui, nsqds = site["ui"], site["nsqds"]
    ui.open("/")
    eventually(lambda: ui.number('tr[data-topic="clicks"] td[data-col="messages"]') == 20, message="20 messages")
    assert ui.text('[data-testid="card-nodes"] .value') == "3 / 3"
    assert "audit" in ui.texts("tr[data-topic] td:first-child")
    for _ in range(3):  # messages flow: the counts and the rate follow
        mpub(nsqds[0], "clicks", 50)
        mpub(nsqds[1], "clicks", 50)
        eventually(lambda: ui.refreshes() >= 2, message="a refresh")
    eventually(lambda: ui.number('tr[data-topic="clicks"] td[data-col="messages"]') == 320, message="320 messages")
    eventually(lambda: float(ui.text('tr[data-topic="clicks"] td[data-col="rate"]').replace(",", "")) > 0,
               message="a message rate")
    assert int(ui.driver.execute_script(
        "return Number(document.querySelector('[data-testid=chart-rate] svg').dataset.points)")) >= 1
    ui.screenshot("overview")


def test_topic_and_channel_pages_show_nodes_channels_and_clients(site: dict[str, Any]) -> None:
    ui, nsqds = site["ui"], site["nsqds"]
    ui.click('tr[data-topic="clicks"] a')
    eventually(lambda: ui.text("h1").startswith("Topic clicks"), message="the topic page")
    nodes = [nsqds[0].http_address, nsqds[1].http_address]
    assert sorted(t.split("(")[1].split(")")[0] for t in ui.texts('[data-testid="topic-nodes"] tr[data-node] td:first-child')) == sorted(nodes)
    eventually(lambda: ui.number('tr[data-channel="reader"] td[data-col="clients"]') == 1, message="the consumer")
    ui.screenshot("topic")
    ui.click('tr[data-channel="reader"] a')
    eventually(lambda: ui.text("h1").startswith("Channel reader"), message="the channel page")
    eventually(lambda: "nsq_tail/" in ui.text('[data-testid="clients"] tbody'), message="the consumer's user agent")


def test_pausing_a_channel_from_its_page(site: dict[str, Any]) -> None:
    ui, nsqds = site["ui"], site["nsqds"]
    ui.open("/topics/clicks/reader")
    assert ui.text('[data-testid="channel-status"]') == "Active"
    ui.click('button[data-action="empty"]')
    ui.confirm("Empty channel reader?", answer="cancel")
    ui.click('button[data-action="pause"]')
    ui.confirm("Pause channel reader of clicks on every node?")
    eventually(lambda: ui.text('[data-testid="channel-status"]') == "Paused", message="the channel shown paused")
    assert ui.text('[data-testid="banner-info"]') == "Pause channel: done"
    assert all(n.channel("clicks", "reader")["paused"] for n in nsqds[:2])
    mpub(nsqds[0], "clicks", 5)  # a paused channel keeps its messages: the depth shows them
    eventually(lambda: ui.number('td[data-col="depth"]') >= 5, message="depth while paused")
    ui.screenshot("channel")
    ui.click('button[data-action="unpause"]')
    ui.confirm("Unpause channel reader")
    eventually(lambda: ui.text('[data-testid="channel-status"]') == "Active", message="the channel shown active")
    assert not any(n.channel("clicks", "reader")["paused"] for n in nsqds[:2])


def test_an_unreachable_nsqd_is_shown_as_such(site: dict[str, Any]) -> None:
    ui, nsqds = site["ui"], site["nsqds"]
    stuck = nsqds[2]
    stuck.signal(signal.SIGSTOP)  # registered with lookupd, answers nothing
    try:
        ui.open("/nodes")
        status = f'tr[data-node="{stuck.http_address}"] [data-testid="node-status"]'
        eventually(lambda: ui.text(status) == "unreachable", message="the stopped nsqd shown unreachable")
        assert ui.text(f'tr[data-node="{nsqds[0].http_address}"] [data-testid="node-status"]') == "OK"
        assert any(stuck.http_address in w for w in ui.texts('[data-testid="banner-warning"]'))
        ui.screenshot("nodes")
        ui.open(f"/nodes/{stuck.http_address}")
        eventually(lambda: "unreachable" in ui.text('[data-testid="error"]'), message="the node page's error")
        ui.open("/")
        eventually(lambda: ui.text('[data-testid="card-nodes"] .value') == "2 / 3", message="2 of 3 nodes answering")
        assert ui.number('tr[data-topic="clicks"] td[data-col="messages"]') >= 325
    finally:
        stuck.signal(signal.SIGCONT)
    ui.open(f"/nodes/{nsqds[0].http_address}")
    eventually(lambda: "clicks" in ui.texts('[data-testid="node-topics"] tr[data-topic] td:first-child')[0],
               message="the node's topics")
    ui.screenshot("node")


def test_creating_a_topic_from_the_lookup_page(site: dict[str, Any]) -> None:
    ui, lookupd = site["ui"], site["lookupd"]
    ui.open("/lookup")
    from selenium.webdriver.common.by import By
    ui.driver.find_element(By.CSS_SELECTOR, '[data-testid="new-topic"]').send_keys("signups")
    ui.driver.find_element(By.CSS_SELECTOR, '[data-testid="new-channel"]').send_keys("mailer")
    ui.click('[data-testid="create"]')
    ui.confirm("Create topic signups and channel mailer?")
    eventually(lambda: "signups" in ui.texts('[data-testid="inactive"] tr[data-topic] td:first-child'),
               message="the new topic listed as known to lookupd only")
    assert "mailer" in lookupd.get_json("/channels?topic=signups")["channels"]
    ui.screenshot("lookup")


def test_an_unknown_topic_or_channel_is_said_so(site: dict[str, Any]) -> None:
    ui = site["ui"]
    ui.open("/topics/nope")
    eventually(lambda: ui.text('[data-testid="error"]').startswith("Topic nope not found"), message="not found")
    ui.open("/topics/clicks/nope")
    eventually(lambda: ui.text('[data-testid="error"]').startswith("Channel nope not found in topic clicks"),
               message="channel not found")
