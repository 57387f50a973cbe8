# ruff: noqa: RUF001 - look-alike characters are what the corpus is about
"""The SSRF corpus: URLs that must never make a worker connect, in every
spelling found in the wild, and URLs that must stay accepted.

Each refused entry is an authority-and-rest template: ``{port}`` is the port of the test's local
listener, so that an entry spelling loopback would reach that listener if the guard let it
through. The same corpus runs when a job is written (``test_save_time.py``) and when an attempt
is made (``test_send_time.py``). Names only a resolver can judge (``RESOLVED``) run at send time,
answered by a resolver the test controls.
"""

from __future__ import annotations

# (why, authority + path with {port})
REFUSED: list[tuple[str, str]] = [
    # -- IPv4 loopback: decimal, octal, hex, short forms and mixes -----------------------------
    ("dotted quad", "127.0.0.1:{port}/"),
    ("end of 127/8", "127.255.255.254:{port}/"),
    ("decimal", "2130706433:{port}/"),
    ("octal, one part", "017700000001:{port}/"),
    ("hex, one part", "0x7f000001:{port}/"),
    ("hex, upper case", "0X7F000001:{port}/"),
    ("hex, four parts", "0x7f.0x0.0x0.0x1:{port}/"),
    ("octal, four parts", "0177.0.0.1:{port}/"),
    ("octal, padded", "0177.0000.0000.0001:{port}/"),
    ("decimal, padded", "127.000.000.001:{port}/"),
    ("octal last part", "127.0.0.01:{port}/"),
    ("short, two parts", "127.1:{port}/"),
    ("short, three parts", "127.0.1:{port}/"),
    ("short octal", "0177.1:{port}/"),
    ("short hex", "0x7f.1:{port}/"),
    ("short hex, three parts", "0x7f.0.1:{port}/"),
    ("long octal zeros", "00000000000000000000177.1:{port}/"),
    # -- unspecified (this host) ----------------------------------------------------------------
    ("0.0.0.0", "0.0.0.0:{port}/"),
    ("0", "0:{port}/"),
    ("00", "00:{port}/"),
    ("0x0", "0x0:{port}/"),
    ("0.0", "0.0:{port}/"),
    ("0.0.0.0/8", "0.1.2.3:{port}/"),
    # -- private, shared and special IPv4 ---------------------------------------------------------
    ("10/8", "10.0.0.1:{port}/"),
    ("10/8 short", "10.1:{port}/"),
    ("10/8 octal short", "012.1:{port}/"),
    ("10/8 hex", "0x0a000001:{port}/"),
    ("172.16/12", "172.16.0.1:{port}/"),
    ("192.168/16", "192.168.1.1:{port}/"),
    ("192.168/16 decimal", "3232235777:{port}/"),
    ("carrier-grade NAT (Alibaba metadata)", "100.100.100.200:{port}/"),
    ("IETF protocol assignments", "192.0.0.192:{port}/"),
    ("documentation", "192.0.2.1:{port}/"),
    ("6to4 relay anycast", "192.88.99.1:{port}/"),
    ("benchmarking", "198.18.0.1:{port}/"),
    ("multicast", "224.0.0.1:{port}/"),
    ("reserved", "240.0.0.1:{port}/"),
    ("broadcast", "255.255.255.255:{port}/"),
    # -- link-local and cloud metadata ------------------------------------------------------------
    ("AWS/GCP/Azure metadata", "169.254.169.254/latest/meta-data/"),
    ("metadata with port", "169.254.169.254:{port}/"),
    ("metadata decimal", "2852039166/latest/meta-data/"),
    ("metadata hex", "0xa9fea9fe/"),
    ("metadata hex parts", "0xa9.0xfe.0xa9.0xfe/"),
    ("metadata octal", "0251.0376.0251.0376/"),
    ("metadata short", "169.254.43518/"),
    ("ECS task metadata", "169.254.170.2/v2/credentials"),
    ("GCP metadata name", "metadata.google.internal/computeMetadata/v1/"),
    ("GCP metadata name, dot", "metadata.google.internal./computeMetadata/v1/"),
    ("GCP metadata name, upper", "METADATA.GOOGLE.INTERNAL/"),
    ("GCP short metadata name", "metadata.goog/"),
    ("AWS metadata name", "instance-data.ec2.internal/"),
    ("AWS IPv6 metadata", "[fd00:ec2::254]/latest/meta-data/"),
    ("IPv6 link-local", "[fe80::1]:{port}/"),
    ("IPv6 link-local with zone", "[fe80::a9fe:a9fe%25eth0]:{port}/"),
    # -- IPv6 loopback and unspecified ----------------------------------------------------------
    ("::1", "[::1]:{port}/"),
    ("::1 long", "[0:0:0:0:0:0:0:1]:{port}/"),
    ("::", "[::]:{port}/"),
    ("0::", "[0::]:{port}/"),
    # -- IPv4 carried in IPv6 -----------------------------------------------------------------------
    ("IPv4-mapped dotted", "[::ffff:127.0.0.1]:{port}/"),
    ("IPv4-mapped hex", "[::ffff:7f00:1]:{port}/"),
    ("IPv4-mapped long", "[0:0:0:0:0:ffff:127.0.0.1]:{port}/"),
    ("IPv4-mapped metadata", "[::ffff:169.254.169.254]/"),
    ("IPv4-mapped metadata hex", "[::ffff:a9fe:a9fe]/"),
    ("IPv4-mapped private", "[::ffff:10.0.0.1]/"),
    ("IPv4-mapped unspecified", "[::ffff:0.0.0.0]:{port}/"),
    ("IPv4-mapped with zone", "[::ffff:127.0.0.1%25lo]:{port}/"),
    ("IPv4-compatible dotted", "[::127.0.0.1]:{port}/"),
    ("IPv4-compatible hex", "[::7f00:1]:{port}/"),
    ("IPv4-compatible public", "[::8.8.8.8]/"),
    ("IPv4-translated (SIIT)", "[::ffff:0:7f00:1]:{port}/"),
    ("NAT64 hex", "[64:ff9b::7f00:1]:{port}/"),
    ("NAT64 dotted", "[64:ff9b::127.0.0.1]:{port}/"),
    ("NAT64 metadata", "[64:ff9b::a9fe:a9fe]/"),
    ("local-use NAT64", "[64:ff9b:1::a9fe:a9fe]/"),
    ("6to4 loopback", "[2002:7f00:1::]:{port}/"),
    ("6to4 metadata", "[2002:a9fe:a9fe::1]/"),
    ("6to4 private", "[2002:c0a8:101::1]/"),
    ("Teredo", "[2001::7f00:1]/"),
    # -- other special IPv6 --------------------------------------------------------------------------
    ("unique local", "[fc00::1]/"),
    ("site-local", "[fec0::1]/"),
    ("multicast", "[ff02::1]/"),
    ("documentation", "[2001:db8::1]/"),
    ("documentation (RFC 9637)", "[3fff::1]/"),
    ("discard-only", "[100::1]/"),
    ("outside 2000::/3", "[5f00::1]/"),
    # -- names that are this machine -----------------------------------------------------------------
    ("localhost", "localhost:{port}/"),
    ("localhost, upper", "LOCALHOST:{port}/"),
    ("localhost, trailing dot", "localhost.:{port}/"),
    ("localhost, mixed case and dot", "LocalHost.:{port}/"),
    ("*.localhost", "hooks.localhost:{port}/"),
    ("*.localhost, trailing dot", "hooks.localhost.:{port}/"),
    ("localhost.localdomain", "localhost.localdomain:{port}/"),
    ("ip6-localhost", "ip6-localhost:{port}/"),
    ("ip6-loopback", "ip6-loopback:{port}/"),
    ("full-width localhost", "ｌｏｃａｌｈｏｓｔ:{port}/"),
    ("superscript localhost", "ᴸᴼᶜᴬᴸᴴᴼˢᵀ:{port}/"),
    # -- trailing dots on addresses ---------------------------------------------------------------------
    ("dotted quad, dot", "127.0.0.1.:{port}/"),
    ("metadata, dot", "169.254.169.254./latest/meta-data/"),
    ("hex, dot", "0x7f000001.:{port}/"),
    ("private, dot", "10.0.0.1./"),
    # -- Unicode digits and dots (IDNA maps them to ASCII) ----------------------------------------------
    ("full-width digits", "１２７.０.０.１:{port}/"),
    ("ideographic dots", "127。0。0。1:{port}/"),
    ("full-width dots", "127．0．0．1:{port}/"),
    ("half-width ideographic dots", "127｡0｡0｡1:{port}/"),
    ("circled digits", "①②⑦.⓪.⓪.①:{port}/"),
    ("mathematical digits", "𝟏𝟐𝟕.𝟎.𝟎.𝟏:{port}/"),
    ("full-width hex", "０ｘ７ｆ０００００１:{port}/"),
    # -- user info tricks (the host is what follows the last @) ----------------------------------------
    ("public name as user", "hooks.example.com@127.0.0.1:{port}/"),
    ("public name and port as user", "hooks.example.com:443@127.0.0.1:{port}/"),
    ("credentials on loopback", "admin:HUNTER2@127.0.0.1:{port}/?token=s3cr3t"),
    ("credentials on IPv6 loopback", "user:pass@[::1]:{port}/"),
    ("fragment hides the host", "127.0.0.1:{port}#@hooks.example.com/"),
    ("query hides the host", "127.0.0.1:{port}?@hooks.example.com/"),
    ("user info on metadata", "hooks.example.com@169.254.169.254/latest/meta-data/"),
    ("user info on hex", "hooks.example.com@0x7f000001:{port}/"),
]

# (why, host name, what the test's resolver answers for it): refused at send time only
RESOLVED: list[tuple[str, str, list[str]]] = [
    ("name to loopback", "loopback.attacker.example", ["127.0.0.1"]),
    ("name to metadata", "metadata.attacker.example", ["169.254.169.254"]),
    ("name to private", "private.attacker.example", ["10.0.0.1"]),
    ("name to unspecified", "zero.attacker.example", ["0.0.0.0"]),
    ("name to ::1", "v6.attacker.example", ["::1"]),
    ("name to IPv4-mapped", "mapped.attacker.example", ["::ffff:127.0.0.1"]),
    ("name to NAT64 metadata", "nat64.attacker.example", ["64:ff9b::a9fe:a9fe"]),
    ("name to AWS IPv6 metadata", "aws6.attacker.example", ["fd00:ec2::254"]),
    ("public first, private next", "rebind.attacker.example", ["93.184.215.14", "10.0.0.1"]),
    ("public first, loopback next", "rebind2.attacker.example", ["2606:2800:21f:cb07::1", "127.0.0.1"]),
]

ACCEPTED: list[str] = [
    "hooks.example.com/x",
    "hooks.example.com./x",
    "8.8.8.8/x",
    "[2606:4700:4700::1111]/x",
    "[::ffff:8.8.8.8]/x",  # IPv4-mapped public: judged as 8.8.8.8
    "[64:ff9b::808:808]/x",  # NAT64 of a public address
    "[2002:808:808::1]/x",  # 6to4 of a public address
    "bücher.example/x",
    "xn--bcher-kva.example/x",
    "user:pass@hooks.example.com/x",  # user info without an Authorization header
    "localhost.example.com/x",  # a name that only starts like localhost
    "127.0.0.1.example.com/x",
]


def corpus_size() -> int:
    return len(REFUSED) + len(RESOLVED)
