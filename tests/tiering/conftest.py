"""The tier the tiering tests run against: a file tier in a temporary directory, or a bucket on a
real S3-compatible server (moto's) started once per test process."""

import pytest

from store.tier.opening import tier_for
from streams import tiering


@pytest.fixture(autouse=True)
def small_chunks(settings):
    settings.CBR_CHUNK_BYTES = 1024  # a few events a chunk: many sealed chunks from little data
    tier_for.cache_clear()
    yield
    tier_for.cache_clear()


@pytest.fixture(params=["file", "s3"])
def tier(request, settings, tmp_path, monkeypatch):
    """The deployment's tier, as CBR_TIER_URL (and for S3 the standard AWS variables) set it."""
    if request.param == "file":
        settings.CBR_TIER_URL = f"file://{tmp_path}/tier"
    else:
        server = request.getfixturevalue("s3_server")
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        settings.CBR_TIER_URL = f"s3://{server.new_bucket()}/cbr"
    return tiering.tier()
