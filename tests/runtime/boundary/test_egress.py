"""The egress guard: refused destinations are never dialled; allowed ones keep Host and SNI.

Every test uses a stub resolver; nothing here performs a real DNS lookup. Refusals are proven
with counting loopback servers: a ``sinkhole`` pool sends anything the guard lets through to a
counting server, so a count of zero means no request passed the guard.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from proctor.errors import ConfigError, EgressRefused
from proctor.runtime.boundary.egress import (
    EgressAllow,
    StaticResolver,
    canonical_url,
    load_egress_allow,
)
from proctor.runtime.boundary.transport import EgressTransport
from tests.corpora import corpus_dir
from tests.runtime.boundary.test_egress_helpers import Seen, self_signed, serve, sinkhole


class RebindingResolver:
    """Answers every name with loopback (an attacker controlling DNS); records the names."""

    def __init__(self, answer: Sequence[str] = ("127.0.0.1",)) -> None:
        self.answer = list(answer)
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append(host)
        return self.answer


def _client(transport: EgressTransport) -> httpx.Client:
    return httpx.Client(transport=transport, follow_redirects=False, trust_env=False, timeout=5)


def _corpus_urls() -> list[str]:
    path = corpus_dir("payloadsallthethings") / "Server Side Request Forgery" / "extracted_urls.txt"
    lines = [line.rstrip("\n") for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line.strip()]


REFUSAL_KINDS = {"scheme", "userinfo", "address", "invalid_host", "invalid_url"}


def test_every_ssrf_corpus_url_is_refused_and_nothing_connects() -> None:
    urls = _corpus_urls()
    assert len(urls) >= 100
    resolver = RebindingResolver()
    kinds: dict[str, int] = {}
    with serve() as server:
        transport = EgressTransport(resolver=resolver, pool_factory=sinkhole(server))
        with _client(transport) as client:
            for line in urls:
                with pytest.raises(EgressRefused) as caught:
                    client.get(canonical_url(line))
                assert caught.value.code == "egress_refused"
                kind = caught.value.details["kind"]
                assert kind in REFUSAL_KINDS, (line, kind)
                kinds[kind] = kinds.get(kind, 0) + 1
        assert server.connections == 0
        assert server.requests == []
    # The corpus exercises every layer of the guard, not only one of them.
    assert kinds.keys() >= {"scheme", "address", "invalid_host", "invalid_url"}, kinds


def test_sinkhole_control_counts_what_the_guard_lets_through() -> None:
    # Without this the zero above could come from a harness that cannot see a request.
    resolver = StaticResolver({"public.test": ["93.184.215.14"]})
    with serve() as server:
        transport = EgressTransport(resolver=resolver, pool_factory=sinkhole(server))
        with _client(transport) as client:
            assert client.get("http://public.test/x").status_code == 200
        assert server.connections == 1
        assert server.requests[0].host == "public.test"


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://2130706433/", "127.0.0.1"),
        ("http://0177.0.0.1/", "127.0.0.1"),
        ("http://0x7f.1/", "127.0.0.1"),
        ("http://0x7f000001/", "127.0.0.1"),
        ("http://127.1/", "127.0.0.1"),
        ("http://0/", "0.0.0.0"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:7f00:1"),
        ("http://[64:ff9b::7f00:1]/", "64:ff9b::7f00:1"),
        ("http://[2002:7f00:1::]/", "2002:7f00:1::"),
        ("http://[::7f00:1]/", "::7f00:1"),
        ("https://[fd00:ec2::254]/", "fd00:ec2::254"),
        ("http://0xA9.0xFE.0xA9.0xFE/", "169.254.169.254"),
    ],
)
def test_literal_forms_are_refused_by_address(url: str, address: str) -> None:
    with serve() as server:
        transport = EgressTransport(resolver=RebindingResolver(), pool_factory=sinkhole(server))
        with _client(transport) as client, pytest.raises(EgressRefused) as caught:
            client.get(canonical_url(url))
        assert caught.value.details["kind"] == "address"
        assert caught.value.details["address"] == address
        said = caught.value.message  # the address is not named twice in a row
        assert f"{address} {address}" not in said and f"{address}] {address}" not in said, said
        assert server.connections == 0


def test_embedded_loopback_is_named_in_the_reason() -> None:
    transport = EgressTransport(resolver=RebindingResolver())
    with _client(transport) as client, pytest.raises(EgressRefused) as caught:
        client.get(canonical_url("http://[2002:7f00:1::]/"))
    assert "6to4" in caught.value.message and "127.0.0.1" in caught.value.message


def test_name_with_one_public_and_one_private_address_is_refused() -> None:
    resolver = StaticResolver({"mixed.test": ["93.184.215.14", "10.0.0.7"]})
    with serve() as server:
        transport = EgressTransport(resolver=resolver, pool_factory=sinkhole(server))
        with _client(transport) as client, pytest.raises(EgressRefused) as caught:
            client.get("http://mixed.test/")
        assert caught.value.details["address"] == "10.0.0.7"
        assert "mixed.test" in caught.value.message
        assert server.connections == 0


def test_unresolvable_name_is_refused() -> None:
    transport = EgressTransport(resolver=StaticResolver({}))
    with _client(transport) as client, pytest.raises(EgressRefused) as caught:
        client.get("http://nowhere.test/")
    assert caught.value.details["kind"] == "unresolved"


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "gopher://127.0.0.1:6379/_save", "ftp://public.test/",
     "http://user:pass@public.test/", "http://127.1.1.1:80\\@127.2.2.2:80/", "http:// x/",
     "http:///path", "http://[fe80::1%25eth0]/"],
)  # fmt: skip
def test_canonical_url_refuses_before_any_request(url: str) -> None:
    with pytest.raises(EgressRefused) as caught:
        canonical_url(url)
    assert "pass" not in caught.value.message  # the URL text is never echoed


def test_transport_refuses_scheme_and_userinfo_it_is_handed_directly() -> None:
    transport = EgressTransport(resolver=StaticResolver({"public.test": ["93.184.215.14"]}))
    for url, kind in [
        ("ftp://public.test/", "scheme"),
        ("http://u:secretpw@public.test/", "userinfo"),
    ]:
        with pytest.raises(EgressRefused) as caught:
            transport.handle_request(httpx.Request("GET", url))
        assert caught.value.details["kind"] == kind
        assert "secretpw" not in caught.value.message


def test_allowed_loopback_call_works_and_keeps_the_host_header() -> None:
    resolver = StaticResolver({"svc.internal": ["127.0.0.1"]})
    with serve() as server:
        transport = EgressTransport(allow=EgressAllow.parse(["svc.internal"]), resolver=resolver)
        with _client(transport) as client:
            response = client.get(f"http://svc.internal:{server.port}/hello?x=1")
        assert response.status_code == 200
        assert server.requests[0].host == f"svc.internal:{server.port}"
        assert server.requests[0].path == "/hello?x=1"
        # The allowed name does not open its address to other names.
        other = EgressTransport(
            allow=EgressAllow.parse(["svc.internal"]),
            resolver=StaticResolver({"other.internal": ["127.0.0.1"]}),
        )
        with _client(other) as client, pytest.raises(EgressRefused):
            client.get(f"http://other.internal:{server.port}/")
        assert server.connections == 1


def test_allowed_network_admits_literal_addresses_in_it() -> None:
    with serve() as server:
        transport = EgressTransport(allow=EgressAllow.parse(["127.0.0.0/8"]))
        with _client(transport) as client:
            assert client.get(f"http://127.0.0.1:{server.port}/").status_code == 200
        assert server.requests[0].host == f"127.0.0.1:{server.port}"


def test_redirect_from_allowed_server_to_denied_address_never_connects() -> None:
    with serve() as victim:

        def to_victim(_seen: Seen) -> tuple[int, dict[str, str], bytes]:
            return 302, {"Location": f"http://victim.test:{victim.port}/secret"}, b""

        with serve(to_victim) as allowed:
            resolver = StaticResolver({"allowed.test": ["127.0.0.1"], "victim.test": ["127.0.0.1"]})
            transport = EgressTransport(
                allow=EgressAllow.parse(["allowed.test"]), resolver=resolver
            )
            client = httpx.Client(transport=transport, follow_redirects=True, trust_env=False,
                                  timeout=5)  # fmt: skip
            with client, pytest.raises(EgressRefused) as caught:
                client.get(f"http://allowed.test:{allowed.port}/start")
            assert caught.value.details["host"] == "victim.test"
            assert allowed.connections == 1
        assert victim.connections == 0


def test_tls_sni_and_certificate_follow_the_original_name(tmp_path: Path) -> None:
    server_tls, client_tls = self_signed(tmp_path, "secure.test")
    resolver = StaticResolver({"secure.test": ["127.0.0.1"], "impostor.test": ["127.0.0.1"]})
    allow = EgressAllow.parse(["secure.test", "impostor.test"])
    with serve(tls=server_tls) as server:
        transport = EgressTransport(allow=allow, resolver=resolver, verify=client_tls)
        with _client(transport) as client:
            response = client.get(f"https://secure.test:{server.port}/tls")
            assert response.status_code == 200
            # The certificate is checked against the name, not the dialled address.
            with pytest.raises(httpx.ConnectError):
                client.get(f"https://impostor.test:{server.port}/tls")
        assert server.sni[0] == "secure.test"
        assert [r.host for r in server.requests] == [f"secure.test:{server.port}"]


def test_allow_list_parsing_and_authority_form(tmp_path: Path) -> None:
    allow = EgressAllow.parse(["Svc.Internal.", "10.1.0.0/16", "192.168.1.5", "[fd00::1]"])
    assert allow.to_authority() == {
        "hosts": ["svc.internal"],
        "networks": ["10.1.0.0/16", "192.168.1.5/32", "fd00::1/128"],
    }
    assert allow.allows_address(ipaddress.ip_address("10.1.2.3"))
    assert not allow.allows_address(ipaddress.ip_address("10.2.0.1"))
    for wide in ["0.0.0.0/0", "::/0", "10.0.0.0/7"]:
        with pytest.raises(ConfigError):
            EgressAllow.parse([wide])
    with pytest.raises(ConfigError):
        EgressAllow.parse(["not a host"])
    (tmp_path / "proctor.toml").write_text('[egress]\nallow = ["svc.internal", "10.9.0.0/16"]\n')
    assert load_egress_allow(tmp_path).to_authority() == {
        "hosts": ["svc.internal"],
        "networks": ["10.9.0.0/16"],
    }
    (tmp_path / "proctor.toml").write_text('[egress]\nallow = "svc"\n')
    with pytest.raises(ConfigError):
        load_egress_allow(tmp_path)
    assert load_egress_allow(tmp_path / "absent").to_authority() == {"hosts": [], "networks": []}
