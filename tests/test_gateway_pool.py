"""Several gateways per cluster: addresses, the order new sockets try them in, failover (pure logic), and the
options and config file that name them. The real-cluster failover tests are in test_gateway_failover.py."""

from __future__ import annotations

import pytest

from connector.accumulo import Connection, ConnectionLostError, RetryPolicy
from connector.accumulo.gateways import Address, Gateways, is_local, parse_address, parse_addresses
from connector.accumulo.options import GatewayOptions, OptionError
from connector.clusters_config import ConfigError, load_clusters, write_clusters


@pytest.mark.parametrize(("text", "expected"), [
    ("gw1:42424", Address("gw1", 42424)),
    (" 10.0.0.7:1 ", Address("10.0.0.7", 1)),
    ("[::1]:42424", Address("::1", 42424)),
    ("gw2", Address("gw2", 7)),
])
def test_addresses_parse(text, expected):
    assert parse_address(text, default_port=7) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("gw1", "has no port"), ("gw1:x", "is not a number"), ("gw1:0", "1-65535"), (":42424", "expected host:port"),
    ("[::1", r"\[ipv6\]:port"), ("::1:5", r"as \[address\]:port"),
])
def test_bad_addresses_are_named(text, message):
    with pytest.raises(ValueError, match=message) as err:
        parse_address(text)
    assert repr(text) in str(err.value)


def test_an_address_given_twice_is_refused():
    with pytest.raises(ValueError, match="gw:1 is given twice"):
        parse_addresses("gw:1, gw:1")
    assert parse_addresses("a:1,b:2") == (Address("a", 1), Address("b", 2))


def test_new_sockets_take_the_gateways_in_turn():
    pool = Gateways([Address("127.0.0.1", 1), Address("127.0.0.2", 2)])
    firsts = [pool.order()[0] for _ in range(4)]
    assert firsts[0] != firsts[1] and firsts[0] == firsts[2] and firsts[1] == firsts[3]


def test_host_local_gateways_come_first():
    remote, local = Address("203.0.113.5", 1), Address("127.0.0.1", 2)  # 203.0.113.0/24: documentation only
    assert not is_local(remote.host) and is_local(local.host) and is_local("localhost")
    pool = Gateways([remote, local])
    assert [pool.order() for _ in range(3)] == [[local, remote]] * 3


def test_a_gateway_that_failed_is_passed_over_then_tried_again():
    a, b = Address("127.0.0.1", 1), Address("127.0.0.1", 2)
    pool = Gateways([a, b], down_seconds=0.2)
    pool.mark_down(a)
    assert [pool.order()[0] for _ in range(4)] == [b] * 4
    import time

    time.sleep(0.25)
    assert {pool.order()[0] for _ in range(2)} == {a, b}


def test_open_fails_over_to_the_next_gateway_and_marks_the_dead_one():
    a, b = Address("127.0.0.1", 1), Address("127.0.0.1", 2)
    pool = Gateways([a, b])
    tried = []

    def connect(address: Address) -> str:
        tried.append(address)
        if address == a:
            raise ConnectionRefusedError(111, "refused")
        return f"client of {address}"

    for _ in range(3):
        client, address = pool.open(connect, lambda exc: isinstance(exc, ConnectionError))
        assert address == b and client == "client of 127.0.0.1:2"
    assert tried.count(a) == 1  # after its refusal it was passed over


def test_open_raises_the_last_error_when_every_gateway_fails_and_does_not_swallow_others():
    pool = Gateways([Address("127.0.0.1", 1), Address("127.0.0.1", 2)])

    def refuse(address: Address) -> str:
        raise ConnectionRefusedError(111, f"refused by {address}")

    with pytest.raises(ConnectionRefusedError):
        pool.open(refuse, lambda exc: True)

    def broken(address: Address) -> str:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        pool.open(broken, lambda exc: isinstance(exc, ConnectionError))


def test_a_connection_to_unreachable_gateways_names_them_all():
    conn = Connection(hosts=["127.0.0.1:1", "127.0.0.1:2"], shared_secret="s",
                      retry=RetryPolicy(attempts=2, initial_wait=0.01, max_wait=0.01))
    assert conn.host == "127.0.0.1" and conn.port == 1
    assert conn.describe() == "gateways 127.0.0.1:1, 127.0.0.1:2"
    with pytest.raises(ConnectionLostError, match="listTables on 127.0.0.1:1, 127.0.0.1:2: gateway unreachable"):
        conn.list_tables()
    with pytest.raises(ValueError, match="not both"):
        Connection("gw", hosts=["gw:1"], shared_secret="s")


def test_spark_options_name_several_gateways_and_round_trip(tmp_path):
    opts = GatewayOptions.parse({"dest.hosts": "gw1:42424, gw2", "dest.port": "9", "dest.secret_env": "X"}, "dest.")
    assert opts.hosts == ("gw1:42424", "gw2:9") and (opts.host, opts.port) == ("gw1", 42424)
    assert GatewayOptions.parse(opts.to_options("dest."), "dest.") == opts
    assert opts.describe() == "gateways gw1:42424, gw2:9"
    single = GatewayOptions.parse({"dest.host": "gw", "dest.port": "5"}, "dest.")
    assert single.hosts == () and GatewayOptions.parse(single.to_options("dest."), "dest.") == single
    with pytest.raises(OptionError, match="not both"):
        GatewayOptions.parse({"dest.host": "gw", "dest.hosts": "gw1:1"}, "dest.")
    with pytest.raises(OptionError, match="'gw1' has no port"):
        GatewayOptions.parse({"dest.hosts": "gw1,gw2:3"}, "dest.")
    secret = tmp_path / "s"
    secret.write_text("x")
    conn = GatewayOptions.pool(["127.0.0.1:1", "127.0.0.1:2"], secret_file=str(secret)).connect()
    assert [str(a) for a in conn.gateways.addresses] == ["127.0.0.1:1", "127.0.0.1:2"]


def test_cluster_file_names_several_gateways(tmp_path):
    path = tmp_path / "clusters.toml"
    path.write_text('[clusters.B]\nhosts = ["gw1:42424", "gw2"]\nport = 5\nsecret_env = "B_SECRET"\n'
                    '[clusters.A]\nhost = "gwa"\nport = 42424\nsecret_env = "A_SECRET"\n')
    clusters = load_clusters(path)
    assert clusters["B"].hosts == ("gw1:42424", "gw2:5") and clusters["A"].hosts == ()
    again = tmp_path / "again.toml"
    write_clusters(again, clusters)
    assert load_clusters(again) == clusters
    for bad, message in (('hosts = ["gw1:1"]\nhost = "gw"', "both host and hosts"),
                         ('hosts = "gw1:1"', "must be a list"), ('hosts = ["gw1"]', "'gw1' has no port")):
        path.write_text(f'[clusters.B]\n{bad}\nsecret_env = "B"\n')
        with pytest.raises(ConfigError, match=message) as err:
            load_clusters(path)
        assert "cluster 'B'" in str(err.value)
