"""The cluster file as written and found: ``write_clusters`` gives TOML that parses back to what was given, for
any cluster name and any path; the default path follows XDG_CONFIG_HOME."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from connector.accumulo.options import GatewayOptions
from connector.clusters_config import CONFIG_ENV, config_path, load_clusters, write_clusters

# any text a setting takes (not blank) that UTF-8 can encode (no lone surrogates)
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20).filter(str.strip)


@settings(max_examples=60)
@given(clusters=st.dictionaries(_TEXT, st.tuples(_TEXT, st.integers(1, 65535), _TEXT, st.one_of(st.none(), _TEXT),
                                                 st.one_of(st.none(), st.floats(0.5, 1e6))),
                                min_size=1, max_size=3))
def test_written_clusters_parse_back_to_what_was_given(tmp_path_factory, clusters):
    path = tmp_path_factory.mktemp("toml") / "clusters.toml"
    given_ = {name: GatewayOptions(host=host, port=port, secret_file=secret, tls_ca_file=ca, server_wait=wait,
                                   name=name)
              for name, (host, port, secret, ca, wait) in clusters.items()}
    write_clusters(path, given_)
    read = load_clusters(path)
    assert list(read) == list(given_)
    for name, options in given_.items():
        got = read[name]
        assert (got.name, got.host, got.port, got.secret_file, got.tls_ca_file, got.server_wait) == (
            options.name, options.host, options.port, options.secret_file, options.tls_ca_file, options.server_wait)


def test_a_dotted_name_and_quotes_and_backslashes_in_paths_stay_what_they_are(tmp_path):
    """The review's cases: a '"' or '\\' in a path, and a cluster name with a dot (once a nested table)."""
    path = tmp_path / "clusters.toml"
    write_clusters(path, {"prod.east": GatewayOptions(host="gw", port=1, secret_file='C:\\keys\\"a".secret')})
    (name, got), = load_clusters(path).items()
    assert (name, got.secret_file) == ("prod.east", 'C:\\keys\\"a".secret')


def test_the_default_path_follows_xdg_config_home(tmp_path, monkeypatch):
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_path() == tmp_path / "xdg" / "accumulo-export" / "clusters.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", "")  # unset or empty: ~/.config
    assert config_path() == Path("~/.config/accumulo-export/clusters.toml").expanduser()
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # the spec: a relative path is ignored
    assert config_path() == Path("~/.config/accumulo-export/clusters.toml").expanduser()
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "given.toml"))  # the explicit variable wins
    assert config_path() == tmp_path / "given.toml"
