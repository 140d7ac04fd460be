"""The long-term storage tier's promises (store/tier), on both tiers: a file tier in a temporary
directory and an S3 tier on a real S3-compatible server the tests start (moto's): objects
written once and never overwritten, checksums verified on read, ranged reads, listing, deletion,
and an unreachable tier told apart from a missing object."""

import threading

import boto3
import pytest
from tier_servers import free_port

from store.tier.base import TierConflict, TierCorrupt, TierMissing, TierUnavailable, checksum
from store.tier.files import TEMPORARY, FileTier
from store.tier.opening import open_tier
from store.tier.s3 import S3Tier


@pytest.fixture(params=["file", "s3"])
def tier(request, tmp_path):
    if request.param == "file":
        return FileTier(tmp_path / "tier")
    server = request.getfixturevalue("s3_server")
    return S3Tier(server.new_bucket(), "cbr/prod", client=server.client())


def corrupt(tier, key: str, data: bytes) -> None:
    """Change an object's bytes behind the tier's back (a disk or a store gone bad)."""
    if isinstance(tier, FileTier):
        (tier.root / key).write_bytes(data)
    else:
        tier.client.put_object(Bucket=tier.bucket, Key=tier.prefix + key, Body=data)


def test_an_object_is_read_back_whole_and_by_range(tier):
    data = bytes(range(256)) * 40
    stored = tier.put("s1/0/00000000000000000000.chunk", data)
    assert (stored.size, stored.crc32c) == (len(data), checksum(data))
    assert tier.get(stored.key, stored.crc32c) == data
    assert tier.get(stored.key, start=1000, length=24) == data[1000:1024]
    assert tier.get(stored.key, start=len(data) - 5) == data[-5:]  # to its end
    assert tier.get(stored.key, start=len(data) - 5, length=100) == data[-5:]  # a range past the end: what there is
    assert tier.size(stored.key) == len(data)


def test_an_object_is_written_once(tier):
    first = tier.put("k/a", b"first")
    again = tier.put("k/a", b"first")  # an upload resumed after a crash: the same bytes, a no-op
    assert again == first
    with pytest.raises(TierConflict):
        tier.put("k/a", b"other bytes")
    assert tier.get("k/a", first.crc32c) == b"first"


def test_two_writers_of_one_key_one_wins_and_the_other_is_refused(tier):
    outcomes: dict[bytes, object] = {}

    def write(data: bytes) -> None:
        try:
            outcomes[data] = tier.put("race/x", data)
        except TierConflict as e:
            outcomes[data] = e

    threads = [threading.Thread(target=write, args=(f"writer {i}".encode() * 1000,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [data for data, outcome in outcomes.items() if not isinstance(outcome, TierConflict)]
    assert len(won) == 1 and tier.get("race/x") == won[0]


def test_a_corrupted_object_is_detected_by_its_checksum(tier):
    stored = tier.put("k/b", b"the bytes as written")
    corrupt(tier, "k/b", b"the bytes as wrItten")
    with pytest.raises(TierCorrupt, match="k/b"):
        tier.get("k/b", stored.crc32c)


def test_a_missing_object_deletion_and_listing(tier):
    tier.check()  # a file tier's directory made (a file tier whose directory is not there is unavailable)
    with pytest.raises(TierMissing):
        tier.get("nowhere/x")
    assert tier.size("nowhere/x") is None
    for key in ("s1/0/a", "s1/0/b", "s1/1/a", "s2/0/a"):
        tier.put(key, key.encode())
    assert sorted(tier.list_keys("s1/")) == ["s1/0/a", "s1/0/b", "s1/1/a"]
    tier.delete("s1/0/a")
    tier.delete("s1/0/a")  # gone already: no error
    assert sorted(tier.list_keys()) == ["s1/0/b", "s1/1/a", "s2/0/a"]
    with pytest.raises(TierMissing):
        tier.get("s1/0/a")


def test_many_objects_are_deleted_at_once(tier):
    keys = [f"s/0/{i:020d}.chunk" for i in range(1203)] if tier.kind == "s3" else ["s/0/a", "s/0/b", "s/0/c"]
    for key in keys:
        tier.put(key, key.encode())
    assert tier.delete_many(keys[:-1] + ["s/0/never-there"]) == []  # more than one S3 request's worth
    assert list(tier.list_keys("s/")) == [keys[-1]]


@pytest.mark.parametrize("key", ["", "/abs", "a//b", "a/../b", "./a"])
def test_a_bad_key_is_refused(tier, key):
    with pytest.raises(ValueError, match="bad tier key"):
        tier.put(key, b"x")


def test_a_file_tier_never_shows_a_half_written_object(tmp_path):
    tier = FileTier(tmp_path / "tier")
    # what a crash mid-write leaves: a temporary beside where the object would be
    (tmp_path / "tier" / "s1").mkdir(parents=True)
    (tmp_path / "tier" / "s1" / f"{TEMPORARY}0123").write_bytes(b"half an obj")
    assert list(tier.list_keys()) == [] and tier.size("s1/x") is None
    stored = tier.put("s1/x", b"the whole object")  # and the upload, done again, lands
    assert tier.get("s1/x", stored.crc32c) == b"the whole object"
    assert sorted(p.name for p in (tmp_path / "tier" / "s1").iterdir()) == [f"{TEMPORARY}0123", "x"]


def test_an_unreachable_s3_tier_is_unavailable_not_missing(s3_server):
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    client = boto3.client(
        "s3",
        endpoint_url=closed,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=boto3.session.Config(connect_timeout=1, retries={"max_attempts": 1}),
    )
    tier = S3Tier("nobucket", client=client)
    for attempt in (
        lambda: tier.put("k", b"x"),
        lambda: tier.get("k"),
        lambda: tier.size("k"),
        lambda: list(tier.list_keys()),
    ):
        with pytest.raises(TierUnavailable, match="s3://nobucket"):
            attempt()


def test_the_tier_url_names_the_tier(tmp_path, s3_server, monkeypatch):
    assert open_tier(None) is None and open_tier("") is None
    tier = open_tier(f"file://{tmp_path}/t")
    assert isinstance(tier, FileTier) and tier.root == tmp_path / "t"
    for name, value in s3_server.env.items():  # the standard variables, as a deployment sets them
        monkeypatch.setenv(name, value)
    bucket = s3_server.new_bucket()
    tier = open_tier(f"s3://{bucket}/cbr/prod")
    assert isinstance(tier, S3Tier) and (tier.bucket, tier.prefix) == (bucket, "cbr/prod/")
    stored = tier.put("s/0/c", b"through the standard variables")
    raw = s3_server.client().get_object(Bucket=bucket, Key="cbr/prod/s/0/c")
    assert raw["Body"].read() == b"through the standard variables" and raw["Metadata"]["crc32c"] == stored.crc32c


@pytest.mark.parametrize("url", ["file://host/p", "file:relative", "s3:///p", "gs://b/p", "/plain/path"])
def test_a_bad_tier_url_is_refused_naming_the_setting(url):
    with pytest.raises(ValueError, match="CBR_TIER_URL"):
        open_tier(url)
