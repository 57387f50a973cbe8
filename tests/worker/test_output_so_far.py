"""``OutputSoFar``: what an executor shows of an attempt's output while it runs, bounded,
redacted, and read again only when what was written grew."""

from __future__ import annotations

from cronwheel.worker.executors.live import OutputSoFar


def test_nothing_until_attached_and_after_detached() -> None:
    live = OutputSoFar()
    assert live.text(100) is None
    live.attach(lambda: "")
    assert live.text(100) is None  # attached, nothing written yet
    live.attach(lambda: "a line\n")
    assert live.text(100) == "a line\n"
    live.detach()
    assert live.text(100) is None


def test_the_last_characters_redacted() -> None:
    live = OutputSoFar()
    live.attach(
        lambda: "token=abc123\nend\n", lambda text: None if text is None else text.replace("abc123", "[x]")
    )
    assert live.text(100) == "token=[x]\nend\n"
    assert live.text(4) == "end\n"


def test_read_again_only_when_the_size_grew() -> None:
    written = ["first\n"]
    reads: list[int] = []

    def read() -> str:
        reads.append(1)
        return "".join(written)

    live = OutputSoFar()
    live.attach(read, size=lambda: sum(map(len, written)))
    assert live.text(100) == "first\n"
    assert live.text(100) == "first\n"
    assert len(reads) == 1  # the same size: not read again
    written.append("second\n")
    assert live.text(100) == "first\nsecond\n"
    assert len(reads) == 2
