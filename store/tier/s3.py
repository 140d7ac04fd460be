"""A tier in an S3-compatible object store (`s3://bucket/prefix`), through boto3: AWS S3, MinIO,
Ceph RGW, moto's server. Endpoint, region and credentials come from the standard `AWS_*`
variables (`AWS_ENDPOINT_URL` for a store that is not AWS). An object is created once by a PUT
with `If-None-Match: *`, which the store refuses (412) when the key exists: a PUT is atomic, so a
crash mid-upload leaves no object. Each object carries its CRC-32C in its metadata as well, so a
restore can check what it finds without the database."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from store.tier.base import Tier, TierMissing, TierUnavailable

# a tier that does not answer is retried by the caller's next round, not held in a request
_CONFIG = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 3, "mode": "standard"})
_MISSING = {"404", "NoSuchKey", "NotFound"}
DELETE_BATCH = 1000  # the most keys one DeleteObjects takes
# readiness's question: one try, answered within seconds
_QUICK = Config(connect_timeout=2, read_timeout=2, retries={"max_attempts": 1})


class S3Tier(Tier):
    kind = "s3"

    def __init__(self, bucket: str, prefix: str = "", client=None):
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.url = f"s3://{bucket}/{prefix}".rstrip("/")
        self.client = client or boto3.client("s3", config=_CONFIG)
        self._quick = client or boto3.client("s3", config=_QUICK)

    def check(self) -> None:
        try:
            self._quick.head_bucket(Bucket=self.bucket)
        except (ClientError, BotoCoreError) as e:
            raise self._fail("reach", "its bucket", e) from e

    def _key(self, key: str) -> str:
        return self.prefix + key

    def _fail(self, what: str, key: str, e: Exception) -> TierUnavailable:
        return TierUnavailable(f"{self.url}: cannot {what} {key}: {e}")

    def _create(self, key: str, data: bytes, crc: str) -> bool:
        try:
            self.client.put_object(
                Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*", Metadata={"crc32c": crc}
            )
            return True
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                return False
            raise self._fail("write", key, e) from e
        except BotoCoreError as e:
            raise self._fail("write", key, e) from e

    def _read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        extra = {}
        if start or length is not None:
            if length == 0:
                return b""
            extra["Range"] = f"bytes={start}-" + ("" if length is None else str(start + length - 1))
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key), **extra)
            return answer["Body"].read()
        except ClientError as e:
            if e.response.get("Error", {}).get("Code", "") in _MISSING:
                raise TierMissing(f"{self.url}: no object {key}") from e
            if e.response.get("Error", {}).get("Code", "") == "InvalidRange":
                return b""  # a range that starts at or after the object's end: nothing there
            raise self._fail("read", key, e) from e
        except BotoCoreError as e:
            raise self._fail("read", key, e) from e

    def size(self, key: str) -> int | None:
        try:
            return self.client.head_object(Bucket=self.bucket, Key=self._key(key))["ContentLength"]
        except ClientError as e:
            if e.response.get("Error", {}).get("Code", "") in _MISSING:
                return None
            raise self._fail("look at", key, e) from e
        except BotoCoreError as e:
            raise self._fail("look at", key, e) from e

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))  # (none there: no error)
        except (ClientError, BotoCoreError) as e:
            raise self._fail("delete", key, e) from e

    def delete_many(self, keys: list[str]) -> list[str]:
        """One request per thousand keys (S3's DeleteObjects)."""
        failed: list[str] = []
        for at in range(0, len(keys), DELETE_BATCH):
            batch = keys[at : at + DELETE_BATCH]
            objects = [{"Key": self._key(k)} for k in batch]
            try:
                answer = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})
            except (ClientError, BotoCoreError) as e:
                raise self._fail("delete", f"{len(batch)} objects", e) from e
            failed += [e["Key"][len(self.prefix) :] for e in answer.get("Errors", ())]
        return failed

    def list_keys(self, prefix: str = "") -> Iterator[str]:
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key(prefix))
            for page in pages:
                for item in page.get("Contents", ()):
                    yield item["Key"][len(self.prefix) :]
        except (ClientError, BotoCoreError) as e:
            raise self._fail("list", prefix or "/", e) from e
