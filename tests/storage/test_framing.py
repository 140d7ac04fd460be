from hypothesis import given, settings
from hypothesis import strategies as st

from domain.events import EventIn
from store import framing

events_strategy = st.builds(
    EventIn,
    # small payloads are copied into their records, large ones (COPY_BELOW and more) framed apart
    payload=st.binary(max_size=300) | st.binary(min_size=framing.COPY_BELOW, max_size=framing.COPY_BELOW + 40),
    routing_key=st.none() | st.binary(max_size=20),
    key=st.none() | st.binary(max_size=20),
    headers=st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
    deliver_at_ms=st.none() | st.integers(min_value=0, max_value=2**62),
)
batches_strategy = st.lists(st.lists(events_strategy, min_size=1, max_size=5), min_size=1, max_size=6)


def _encode(batches):
    out = bytearray(framing.encode_chunk_header(0, 0))
    offset, cum, ends = 0, 0, []
    for batch in batches:
        data, _, cum = framing.encode_batch(batch, offset, cum, 1_700_000_000_000)
        out += data
        offset += len(batch)
        ends.append((len(out), offset, cum))
    return bytes(out), ends


def test_it_round_trips_every_field():
    ev = EventIn(b"\x00payload\xff", b"route", b"key-1", {"h": "v"}, 1_800_000_000_123)
    data, positions, cum = framing.encode_batch([ev, EventIn(b"")], 7, 100, 1_700_000_000_000)
    recs = [r for _, r in framing.iter_records(data)]
    assert [p for p, _ in framing.iter_records(data)] == positions
    first = recs[0]
    assert (first.offset, first.published_ms, first.deliver_at_ms, first.cum_size) == (
        7,
        1_700_000_000_000,
        1_800_000_000_123,
        100,
    )
    assert (first.routing_key, first.key, first.headers, first.payload) == (
        b"route",
        b"key-1",
        {"h": "v"},
        b"\x00payload\xff",
    )
    assert not first.batch_end
    assert recs[1].routing_key is None and recs[1].key is None and recs[1].headers is None
    assert recs[1].cum_size == 100 + len(ev.payload) and recs[1].batch_end
    assert cum == recs[1].cum_size


def test_an_empty_key_is_not_an_absent_key():
    data, _, _ = framing.encode_batch([EventIn(b"x", b"", b"")], 0, 0, 0)
    ((_, rec),) = framing.iter_records(data)
    assert rec.routing_key == b"" and rec.key == b""


@given(batches_strategy)
def test_framing_round_trips_any_batches(batches):
    data, _ = _encode(batches)
    recs = [r for _, r in framing.iter_records(data, framing.CHUNK_HEADER_SIZE)]
    flat = [ev for b in batches for ev in b]
    assert len(recs) == len(flat)
    for rec, ev in zip(recs, flat):
        assert rec.payload == ev.payload
        assert rec.routing_key == ev.routing_key and rec.key == ev.key
        assert rec.headers == (ev.headers or None)
        assert rec.deliver_at_ms == ev.deliver_at_ms


@settings(max_examples=300)
@given(batches_strategy, st.data())
def test_any_cut_of_the_tail_recovers_a_prefix_of_whole_batches(batches, data):
    encoded, ends = _encode(batches)
    cut = data.draw(st.integers(min_value=framing.CHUNK_HEADER_SIZE, max_value=len(encoded)))
    found = framing.scan(encoded[:cut], framing.CHUNK_HEADER_SIZE, 0, 0)
    whole = [e for e in ends if e[0] <= cut]
    expected = whole[-1] if whole else (framing.CHUNK_HEADER_SIZE, 0, 0)
    assert (found.valid_len, found.next_offset, found.cum_size) == expected


@settings(max_examples=200)
@given(batches_strategy, st.data())
def test_a_flipped_byte_is_never_taken_for_data(batches, data):
    encoded, ends = _encode(batches)
    pos = data.draw(st.integers(min_value=framing.CHUNK_HEADER_SIZE, max_value=len(encoded) - 1))
    damaged = bytearray(encoded)
    damaged[pos] ^= 0x5A
    found = framing.scan(bytes(damaged), framing.CHUNK_HEADER_SIZE, 0, 0)
    # everything kept ends before the damage, at a batch boundary
    assert found.valid_len <= pos
    assert found.valid_len in [framing.CHUNK_HEADER_SIZE] + [e[0] for e in ends]


def _cut_maybe_damaged(batches, data) -> bytes:
    """The batches' records cut anywhere, and maybe one byte flipped."""
    encoded, _ = _encode(batches)
    body = bytearray(
        encoded[framing.CHUNK_HEADER_SIZE : data.draw(st.integers(framing.CHUNK_HEADER_SIZE, len(encoded)))]
    )
    if body and data.draw(st.booleans()):
        body[data.draw(st.integers(0, len(body) - 1))] ^= 0x40
    return bytes(body)


@settings(max_examples=300)
@given(batches_strategy, st.data())
def test_read_records_finds_what_iter_records_finds_in_any_cut_or_corruption(batches, data):
    """The read path's decoder: the same records as iter_records (every field), from any offset,
    up to any count, stopping at a torn tail or a flipped byte, with the bytes it consumed."""
    body = _cut_maybe_damaged(batches, data)
    every = list(framing.iter_records(body))
    min_offset = data.draw(st.integers(0, len(every) + 1))
    limit = data.draw(st.integers(1, len(every) + 2))
    got, consumed = framing.read_records(body, min_offset, limit)
    wanted = [(pos, rec) for pos, rec in every if rec.offset >= min_offset][:limit]
    assert got == [rec for _, rec in wanted]
    if len(wanted) == limit:  # stopped at the limit: just after the last record taken
        assert consumed == wanted[-1][0] + framing.FRAME_SIZE + framing.FRAME.unpack_from(body, wanted[-1][0])[0]
    else:  # stopped at the end of what decodes
        last = every[-1][0] + framing.FRAME_SIZE + framing.FRAME.unpack_from(body, every[-1][0])[0] if every else 0
        assert consumed == last


@settings(max_examples=300)
@given(batches_strategy, st.data())
def test_read_frames_finds_what_read_records_finds_left_as_stored(batches, data):
    """The binary read's decoder: the same records as read_records in any cut or corruption, from
    any offset, up to any count, the same bytes consumed; each frame is the stored bytes, decodes
    to its record, and is what frame_record makes of that record."""
    body = _cut_maybe_damaged(batches, data)
    min_offset = data.draw(st.integers(0, 40))
    limit = data.draw(st.integers(1, 40))
    records, consumed = framing.read_records(body, min_offset, limit)
    frames, frames_consumed = framing.read_frames(body, min_offset, limit)
    assert frames_consumed == consumed
    assert [f.record() for f in frames] == records
    for frame, rec in zip(frames, records, strict=True):
        assert (frame.offset, frame.deliver_at_ms, frame.cum_size) == (rec.offset, rec.deliver_at_ms, rec.cum_size)
        assert frame.data[frame.start : frame.stop] == framing.frame_record(rec)


def test_a_large_payload_is_framed_from_where_it_is_not_copied():
    big, small = b"b" * framing.COPY_BELOW, b"s" * 10
    parts, positions, size, _ = framing.frame_batch([EventIn(small), EventIn(big, b"rk")], 0, 0, 0)
    assert parts[-1] is big  # the payload object itself: a large batch is not held twice
    assert not any(p is small for p in parts)  # a small one is copied into its record
    data = b"".join(parts)
    assert size == len(data)
    recs = [r for _, r in framing.iter_records(data)]
    assert [r.payload for r in recs] == [small, big] and recs[1].routing_key == b"rk"
    assert [r.batch_end for r in recs] == [False, True]
