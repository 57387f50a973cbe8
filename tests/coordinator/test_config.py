"""The coordinator URL forms (``cronwheel.node.backends.etcd_config``, docs/cluster.md) and how etcd's
answers are classified: by gRPC status code (``cronwheel.coordinator.etcd_api.error_for``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwheel.coordinator.etcd_api import (
    Code,
    EtcdConfig,
    EtcdRequestError,
    EtcdUnavailableError,
    LeaseNotFoundError,
    error_for,
)
from cronwheel.coordinator.etcd_client import EtcdClient
from cronwheel.errors import InvalidInputError
from cronwheel.node.backends import etcd_config
from cronwheel.tls import TlsConfigError


def test_plain_urls_name_http_endpoints() -> None:
    assert etcd_config("etcd://h1:2379,h2:2379") == EtcdConfig(("http://h1:2379", "http://h2:2379"))
    assert etcd_config("etcd+http://h1:2379/") == EtcdConfig(("http://h1:2379",))


def test_https_urls_carry_credentials_and_tls_files() -> None:
    config = etcd_config(
        "etcd+https://root:p%40ss%3Aw0rd@h1:2379,h2:2379?cacert=/etc/ca.pem&cert=/etc/me.pem&key=/etc/me.key"
    )
    assert config.endpoints == ("https://h1:2379", "https://h2:2379")
    assert (config.user, config.password) == ("root", "p@ss:w0rd")
    assert (config.ca_file, config.cert_file, config.key_file) == (
        "/etc/ca.pem",
        "/etc/me.pem",
        "/etc/me.key",
    )
    assert config.tls
    assert "p@ss" not in repr(config)
    assert etcd_config("etcd://reader@h1:2379").user == "reader"
    assert etcd_config("etcd://reader@h1:2379").password == ""


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://h:6379", "must look like"),
        ("etcd://", "must look like"),
        ("etcd://h:2379/path", "must look like"),
        ("etcd+https://h:2379?tls=1", "not one of"),
        ("etcd+https://h:2379?cacert=", "not one of"),
        ("etcd+https://h:2379?cacert=/a&cacert=/b", "not one of"),
        ("etcd://h:2379?cacert=/ca.pem", r"need an etcd\+https://"),
        ("etcd+https://h:2379?key=/k.pem", "needs cert="),
        ("etcd://:secret@h:2379", "no user"),
    ],
)
def test_bad_urls_are_refused_whole_without_echoing_a_password(url: str, says: str) -> None:
    with pytest.raises(InvalidInputError, match=says) as raised:
        etcd_config(url)
    assert "secret" not in str(raised.value)


def test_a_refused_url_with_credentials_is_shown_without_them() -> None:
    with pytest.raises(InvalidInputError) as raised:
        etcd_config("zookeeper://root:hunter2@h:2181")
    assert "hunter2" not in str(raised.value)
    assert "***@h:2181" in str(raised.value)


def test_tls_files_that_cannot_be_read_are_refused_at_start(tmp_path: Path) -> None:
    """Each error names the file and the URL parameter that gave it (cronwheel.tls)."""
    missing = EtcdConfig(("https://h:2379",), ca_file=str(tmp_path / "nowhere.pem"))
    with pytest.raises(TlsConfigError, match=r"nowhere.pem \(coordinator URL cacert\): no such file"):
        EtcdClient(missing)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(TlsConfigError, match=r"garbage.pem \(coordinator URL cert\): not a PEM certificate"):
        EtcdClient(EtcdConfig(("https://h:2379",), cert_file=str(garbage)))


def test_endpoints_are_all_http_or_all_https() -> None:
    with pytest.raises(ValueError, match="all http"):
        EtcdConfig(("http://a:1", "https://b:2"))
    with pytest.raises(ValueError, match="at least one"):
        EtcdConfig(())


def test_errors_are_classified_by_code_not_by_message() -> None:
    assert isinstance(error_for(Code.NOT_FOUND, "whatever the text says"), LeaseNotFoundError)
    assert not isinstance(error_for(Code.INVALID_ARGUMENT, "requested lease not found"), LeaseNotFoundError)
    for code in (Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED, Code.RESOURCE_EXHAUSTED, Code.UNKNOWN):
        assert isinstance(error_for(code, "etcdserver: no leader"), EtcdUnavailableError)
    for code in (Code.INVALID_ARGUMENT, Code.PERMISSION_DENIED, Code.OUT_OF_RANGE, Code.FAILED_PRECONDITION):
        error = error_for(code, "etcdserver: request timed out")
        assert isinstance(error, EtcdRequestError)
        assert not error.retryable
        assert error.code == code
