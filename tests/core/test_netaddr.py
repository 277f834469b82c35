"""Address classification: every special-purpose range refused, public addresses allowed."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.core.netaddr import (
    DENIED_RANGES,
    HostName,
    InvalidHost,
    check_address,
    embedded_ipv4,
    format_address,
    format_host,
    parse_host,
)

DENIED = {
    "0.0.0.0": "0.0.0.0/32",
    "0.1.2.3": "0.0.0.0/8",
    "10.1.2.3": "10.0.0.0/8",
    "100.64.0.1": "100.64.0.0/10",
    "100.127.255.254": "100.64.0.0/10",
    "127.0.0.1": "127.0.0.0/8",
    "127.255.255.254": "127.0.0.0/8",
    "169.254.169.254": "169.254.0.0/16",
    "172.16.0.1": "172.16.0.0/12",
    "172.31.255.255": "172.16.0.0/12",
    "192.0.0.170": "192.0.0.0/24",
    "192.0.2.1": "192.0.2.0/24",
    "192.88.99.1": "192.88.99.0/24",
    "192.168.1.1": "192.168.0.0/16",
    "198.18.0.1": "198.18.0.0/15",
    "198.19.255.255": "198.18.0.0/15",
    "198.51.100.7": "198.51.100.0/24",
    "203.0.113.9": "203.0.113.0/24",
    "224.0.0.251": "224.0.0.0/4",
    "239.255.255.250": "224.0.0.0/4",
    "240.0.0.1": "240.0.0.0/4",
    "255.255.255.255": "255.255.255.255/32",
    "::": "::/128",
    "::1": "::1/128",
    "::7f00:1": "::/96",
    "::ffff:127.0.0.1": "::ffff:0:0/96",
    "::ffff:8.8.8.8": "::ffff:0:0/96",
    "::ffff:0:808:808": "::ffff:0:0:0/96",
    "64:ff9b::7f00:1": "64:ff9b::/96",
    "64:ff9b::808:808": "64:ff9b::/96",
    "64:ff9b:1::1": "64:ff9b:1::/48",
    "100::1": "100::/64",
    "2001::1": "2001::/32",
    "2001:2::1": "2001:2::/48",
    "2001:10::1": "2001:10::/28",
    "2001:20::1": "2001:20::/28",
    "2001:100::1": "2001::/23",
    "2001:db8::1": "2001:db8::/32",
    "2002:7f00:1::": "2002::/16",
    "2002:808:808::1": "2002::/16",
    "3ffe::1": "3ffe::/16",
    "3fff::1": "3fff::/20",
    "5f00::1": "5f00::/16",
    "fc00::1": "fc00::/7",
    "fd00:ec2::254": "fc00::/7",
    "fe80::1": "fe80::/10",
    "fec0::1": "fec0::/10",
    "ff02::1": "ff00::/8",
    "1::": "::/3",
    "4000::1": "4000::/2",
    "8000::1": "8000::/1",
}

PUBLIC = [
    "1.1.1.1",
    "8.8.8.8",
    "93.184.215.14",
    "100.63.255.255",
    "100.128.0.0",
    "172.32.0.1",
    "192.0.1.1",
    "198.20.0.1",
    "223.255.255.255",
    "2606:4700:4700::1111",
    "2a00:1450:4001:81c::200e",
    "2001:4860:4860::8888",
]


@pytest.mark.parametrize(("address", "network"), sorted(DENIED.items()))
def test_denied_address_names_its_most_specific_range(address: str, network: str) -> None:
    denial = check_address(address)
    assert denial is not None
    assert str(denial.range.network) == network
    assert network in denial.reason


@pytest.mark.parametrize("address", PUBLIC)
def test_public_address_is_allowed(address: str) -> None:
    assert check_address(address) is None


@pytest.mark.parametrize(
    ("address", "inner", "inner_range"),
    [
        ("::ffff:127.0.0.1", "127.0.0.1", "127.0.0.0/8"),
        ("::ffff:a9fe:a9fe", "169.254.169.254", "169.254.0.0/16"),
        ("::7f00:1", "127.0.0.1", "127.0.0.0/8"),
        ("64:ff9b::7f00:1", "127.0.0.1", "127.0.0.0/8"),
        ("2002:7f00:1::", "127.0.0.1", "127.0.0.0/8"),
        ("2002:a00:1::", "10.0.0.1", "10.0.0.0/8"),
        # Teredo stores the client address inverted: ~0x7f000001 == 0x80fffffe.
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1", "127.0.0.0/8"),
    ],
)
def test_embedded_ipv4_is_classified_too(address: str, inner: str, inner_range: str) -> None:
    denial = check_address(address)
    assert denial is not None and denial.embedded is not None
    assert denial.embedded[0] == inner
    assert denial.embedded[1] is not None
    assert str(denial.embedded[1].range.network) == inner_range
    assert inner in denial.reason


def test_embedded_ipv4_of_plain_addresses_is_none() -> None:
    assert embedded_ipv4(ipaddress.IPv6Address("::1")) is None
    assert embedded_ipv4(ipaddress.IPv6Address("2606:4700::1")) is None


def test_zone_id_is_refused_whatever_the_address() -> None:
    denial = check_address("2606:4700::1%eth0")
    assert denial is not None and "zone" in denial.reason


def test_every_range_refuses_its_own_network_address() -> None:
    for row in DENIED_RANGES:
        assert check_address(row.network.network_address) is not None, row
        assert check_address(row.network.broadcast_address) is not None, row


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_ipv4_mapped_never_more_permissive_than_ipv4(value: int) -> None:
    v4 = ipaddress.IPv4Address(value)
    mapped = ipaddress.IPv6Address(f"::ffff:{v4}")
    assert check_address(mapped) is not None  # mapped form is always refused
    assert check_address(ipaddress.IPv6Address(f"64:ff9b::{v4}")) is not None


@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_ipv6_outside_global_unicast_is_always_refused(value: int) -> None:
    address = ipaddress.IPv6Address(value)
    if address not in ipaddress.IPv6Network("2000::/3"):
        assert check_address(address) is not None


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("0xA9.0xFE.0xA9.0xFE", "169.254.169.254"),
        ("0251.00376.000251.0000376", "169.254.169.254"),
        ("3232235521", "192.168.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("０Ｘｃ０．０２５０．０１", "192.168.0.1"),
        ("[::ffff:127.0.0.1]", "[::ffff:7f00:1]"),
        ("[0000::1]", "[::1]"),
        ("ⓔⓧⓐⓜⓟⓛⓔ.ⓒⓞⓜ", "example.com"),
        ("%6c%6f%63%61%6c%68%6f%73%74", "localhost"),
        ("EXAMPLE.com.", "example.com."),
        ("bücher.example", "xn--bcher-kva.example"),
    ],
)
def test_parse_host_reads_legacy_forms(host: str, expected: str) -> None:
    assert format_host(parse_host(host)) == expected


@pytest.mark.parametrize(
    "host",
    [
        "",
        "[fe80::1%25eth0]",
        "[fe80::1%eth0]",
        "[::1",
        "425.510.425.510",
        "7147006462",
        "0x41414141A9FEA9FE",
        "1.2.3.4.5",
        "09.1",
        "a b",
        "a<b",
        "%zz%",
        "%ff.example",
    ],
)
def test_parse_host_refuses_invalid(host: str) -> None:
    with pytest.raises(InvalidHost):
        parse_host(host)


def test_name_canonical_drops_trailing_dot() -> None:
    assert HostName("a.example.").canonical == "a.example"
    assert HostName("a.example").canonical == "a.example"


def test_format_address_matches_rfc5952() -> None:
    assert format_address(ipaddress.IPv6Address("2001:db8:0:0:1:0:0:1")) == "2001:db8::1:0:0:1"
    assert format_address(ipaddress.IPv6Address("2001:db8:0:1:1:1:1:1")) == "2001:db8:0:1:1:1:1:1"
    assert format_address(ipaddress.IPv6Address("::")) == "::"
    assert format_address(ipaddress.IPv4Address("1.2.3.4")) == "1.2.3.4"
