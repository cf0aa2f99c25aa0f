"""The store's owner may date a version (`modified`, for imported history) through a
service opened with `dates_versions`; the store keeps it between the previous version's
time and now, and nobody else may send it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from demarkus.service import Service

T0 = 1_700_000_000


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_a_trusted_store_takes_the_time_and_never_goes_backwards_or_ahead(tmp_path: Path):
    (tmp_path / "store").mkdir()
    service = Service.open(tmp_path / "store", trusted=True, dates_versions=True)
    try:
        first = await service.publish("/a.md", "one\n", metadata={"modified": iso(T0)})
        assert first.status == "created" and first.metadata["modified"] == iso(T0)
        earlier = await service.publish("/a.md", "two\n", metadata={"modified": iso(T0 - 500)})
        assert earlier.metadata["modified"] == iso(T0)  # not before v1
        future = await service.publish("/a.md", "three\n", metadata={"modified": "2999-01-01T00:00:00Z"})
        assert datetime.fromisoformat(future.metadata["modified"]) <= datetime.now(UTC)
        fetched = await service.fetch("/a.md/v1")
        assert fetched.metadata["modified"] == iso(T0) and "modified" not in service.store.read("/a.md").metadata
        assert service.store.verify("/a.md") is None
        bad = await service.publish("/a.md", "four\n", metadata={"modified": "yesterday"})
        assert bad.status == "bad-request" and "RFC 3339" in bad.text
    finally:
        service.close()


async def test_an_untrusted_publisher_may_not_date_a_version(service: Service, tokens):  # type: ignore[no-untyped-def]
    refused = await service.publish("/a.md", "x\n", metadata={"modified": iso(T0)}, token=tokens.writer)
    assert refused.status == "bad-request" and "`modified` is reserved" in refused.text
    assert not service.store.is_document("/a.md")


async def test_a_trusted_service_not_asked_to_date_versions_refuses_the_key(tmp_path: Path):
    (tmp_path / "store").mkdir()
    service = Service.open(tmp_path / "store", trusted=True)  # e.g. demarkus mcp --root
    try:
        refused = await service.publish("/a.md", "x\n", metadata={"modified": iso(T0)})
        assert refused.status == "bad-request" and "`modified` is reserved" in refused.text
    finally:
        service.close()
