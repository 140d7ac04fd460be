"""Long-term storage: a second tier for sealed data (chunks, their columnar copies, delayed-index
snapshots, compacted views), so a stream outlives its host's disk (docs/design/long-term-storage.md).

`opening.open_tier(url)` gives the tier `CBR_TIER_URL` names (`urls.parse_tier_url` reads it, with
nothing else imported, for the settings to check at start): `file:///path` (a mounted file
system, `files.py`) or `s3://bucket/prefix` (any S3-compatible store, `s3.py`; endpoint, region
and credentials from the standard `AWS_*` variables). Every kind keeps the promises of
`base.Tier`; `offload.py` copies a stream's sealed files. No Django: callers pass the URL in.
"""
