"""`cbr context` (saved servers and credentials, as `nats context`) and `cbr completion bash`:
a command uses each setting from its flag, else its environment variable, else the context, else
the default; the file holding them is its owner's only; the completion script completes every
command and option of the parser it was made from."""

import argparse
import io
import json
import stat
import subprocess
from contextlib import redirect_stderr, redirect_stdout

import factories
import pytest

from cbr_client import Client, cli
from domain.events import EventIn
from store.tier.opening import tier_for
from streams import logs, services, tiering
from streams.models import Stream

pytestmark = pytest.mark.django_db(transaction=True)


def cbr(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = cli.main(list(args))
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("CBR_CONFIG_DIR", str(tmp_path / "cfg"))
    for name in ("CBR_SERVER", "CBR_TOKEN", "CBR_API_KEY", "CBR_USER", "CBR_PASSWORD", "CBR_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cfg" / "contexts.json"


def test_a_context_gives_the_server_and_the_credentials_and_each_can_be_overridden(
    config, live_server, admin_user, monkeypatch
):
    token = factories.token_for(admin_user)
    assert cbr("context", "add", "dev", "--url", live_server.url, "--with-token", token)[0] == 0
    assert cbr("context", "add", "nowhere", "--url", "http://127.0.0.1:9", "--with-token", "x")[0] == 0
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text())["current"] == "dev"  # the first one added is in use

    # the context in use gives the server and the token
    status, out, _ = cbr("--json", "streams", "list")
    assert status == 0 and json.loads(out) == []
    # another context for one command, or from the environment
    assert cbr("--context", "nowhere", "streams", "list")[0] == 2
    monkeypatch.setenv("CBR_CONTEXT", "nowhere")
    assert cbr("streams", "list")[0] == 2
    # the environment's server beats the context's, and the flag beats both
    monkeypatch.setenv("CBR_SERVER", live_server.url)
    assert cbr("streams", "list")[0] == 1  # the right server, the context's wrong token: 401
    assert cbr("--server", "http://127.0.0.1:9", "--context", "dev", "streams", "list")[0] == 2
    monkeypatch.delenv("CBR_SERVER")
    monkeypatch.delenv("CBR_CONTEXT")

    # use, list, show (secrets masked), rm
    assert cbr("context", "use", "nowhere")[1] == "using context nowhere: http://127.0.0.1:9\n"
    listed = cbr("context", "list")[1].splitlines()
    assert listed[1].split() == ["dev", live_server.url, "token"] and listed[2].split()[:2] == ["*", "nowhere"]
    shown = cbr("--json", "context", "show", "dev")[1]
    assert token not in shown and json.loads(shown)["token"] == "****"
    assert cbr("context", "rm", "nowhere")[0] == 0
    monkeypatch.setenv("CBR_SERVER", "http://127.0.0.1:9")  # none in use: the environment, else the default
    status, _, err = cbr("streams", "list")
    assert status == 2 and "cannot reach the server at http://127.0.0.1:9" in err


def test_an_unknown_context_is_named(config):
    status, _, err = cbr("--context", "prod", "streams", "list")
    assert status == 2 and "no context 'prod' (cbr context list shows them)" in err
    assert "no context 'prod'" in cbr("context", "use", "prod")[2]


def test_the_bash_completion_completes_commands_and_options(tmp_path):
    status, script, _ = cbr("completion", "bash")
    assert status == 0
    (tmp_path / "cbr.bash").write_text(script)

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        probe = (
            f"source {tmp_path / 'cbr.bash'}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
            '_cbr; printf "%s\\n" "${COMPREPLY[@]}"'
        )
        return subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.split()

    assert "streams" in complete("cbr", "") and "context" in complete("cbr", "")
    assert complete("cbr", "streams", "cr") == ["create"]
    assert complete("cbr", "--json", "streams", "create", "shop/x", "--seg") == ["--segments"]
    assert complete("cbr", "groups", "create", "--retention") == ["--retention-type"]
    assert complete("cbr", "context", "") == ["add", "use", "list", "show", "rm", "--help"]


def test_every_option_and_argument_says_what_it_is():
    missing = []

    def walk(node, path):
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{path} {name}")
            elif not action.help and action.dest != "help":
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(cli._parser(), "cbr")
    assert missing == []


def test_cbr_streams_republish(config, live_server, admin_user, data_dir):
    token = factories.token_for(admin_user)
    source = services.do_create_stream(scope="shop", name="orders", segment_count=1)
    dlq = services.do_create_stream(scope="shop", name="orders-dlq", segment_count=1)
    origin = {"cbr-dlq-stream": "shop/orders", "cbr-dlq-segment": "0", "cbr-dlq-reason": "bad"}
    services.do_publish(
        dlq, [EventIn(f"d{i}".encode(), headers={**origin, "cbr-dlq-offset": str(i)}) for i in range(3)]
    )
    server = ("--server", live_server.url, "--token", token)

    assert cbr(*server, "streams", "republish", "shop/orders-dlq", "--event", "0:1") == (
        0,
        "republished 1 dead letter(s) from shop/orders-dlq\n",
        "",
    )
    status, out, _ = cbr(*server, "streams", "republish", "shop/orders-dlq", "--all")
    assert (
        status == 0
        and out
        == "republished 2 dead letter(s) from shop/orders-dlq, 1 skipped (republished before, or their stream is gone)\n"
    )
    records, _ = logs.read_events(source, {}, 10)
    assert [r.record.payload for r in records] == [b"d1", b"d0", b"d2"] and records[0].record.headers is None
    assert "give --all, or --event" in cbr(*server, "streams", "republish", "shop/orders-dlq")[2]
    status, _, err = cbr(*server, "streams", "republish", "shop/orders-dlq", "--event", "0:9")
    assert status == 1 and "events[0]" in err


def test_cbr_streams_scale_segments_and_scalings(config, live_server, admin_user, data_dir):
    """Split, merge and any scale from the command line, against the real server; the segments
    and the history as tables; a bad scale says which field."""
    token = factories.token_for(admin_user)
    services.do_create_stream(scope="shop", name="orders", segment_count=2)
    server = ("--server", live_server.url, "--token", token)

    status, out, _ = cbr(*server, "streams", "scale", "shop/orders", "--split", "0", "--parts", "3")
    assert status == 0 and out.splitlines()[0] == "epoch 1"
    assert [line.split()[0] for line in out.splitlines()[2:]] == ["2", "3", "4"]
    status, out, _ = cbr(*server, "streams", "scale", "shop/orders", "--merge", "3", "4")
    assert status == 0 and out.splitlines()[0] == "epoch 2" and "[0.1667, 0.5)" in out
    status, out, _ = cbr(
        *server, "streams", "scale", "shop/orders", "--seal", "1", "--ranges", "[[0.5, 0.9], [0.9, 1]]", "--epoch", "2"
    )
    assert status == 0 and out.splitlines()[0] == "epoch 3"

    status, out, _ = cbr(*server, "streams", "segments", "shop/orders")
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [(r[0], r[-2]) for r in rows] == [
        ("0", "sealed"),
        ("1", "sealed"),
        ("2", "active"),
        ("3", "sealed"),
        ("4", "sealed"),
        ("5", "active"),
        ("6", "active"),
        ("7", "active"),
    ]
    status, out, _ = cbr(*server, "streams", "scalings", "shop/orders")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["3", "2", "1"]

    status, _, err = cbr(*server, "streams", "scale", "shop/orders", "--seal", "1", "--ranges", "[[0.5, 1]]")
    assert status == 1 and "seal" in err and "already sealed" in err
    status, _, err = cbr(
        *server, "streams", "scale", "shop/orders", "--seal", "2", "--ranges", "[[0, 0.1]]", "--epoch", "1"
    )
    assert status == 1 and "epoch" in err
    assert cbr(*server, "streams", "scale", "shop/orders")[0] == 2

    # the scaling policy: shown, set, refused naming the field (nothing changed)
    status, out, _ = cbr(*server, "streams", "scaling-policy", "shop/orders")
    assert status == 0 and out.splitlines()[0].split() == ["type", "fixed"]
    status, out, _ = cbr(
        *server, "streams", "scaling-policy", "shop/orders", "--type", "by_event_rate", "--target-rate", "250",
        "--min-segments", "3",
    )  # fmt: skip
    assert status == 0 and "by_event_rate" in out and "250" in out
    assert Stream.objects.get(name="orders").scaling_policy == {
        "type": "by_event_rate", "target_rate": 250.0, "scale_factor": 2, "min_segments": 3,
    }  # fmt: skip
    status, _, err = cbr(*server, "streams", "scaling-policy", "shop/orders", "--type", "by_byte_rate")
    assert status == 1 and "target_rate" in err
    assert Stream.objects.get(name="orders").scaling_policy["type"] == "by_event_rate"
    answer = Client(live_server.url, token=token).set_scaling_policy("shop/orders", "fixed")
    assert answer["scaling_policy"]["type"] == "fixed" and Stream.objects.get(name="orders").scaling_policy == {}


def test_cbr_streams_offload(config, live_server, admin_user, data_dir, settings, tmp_path):
    """What is sealed, queued for long-term storage from the command line; refused naming the
    setting where there is none."""
    token = factories.token_for(admin_user)
    server = ("--server", live_server.url, "--token", token)
    settings.CBR_CHUNK_BYTES = 1024
    stream = services.do_create_stream(scope="shop", name="orders", segment_count=1)
    for i in range(12):
        services.do_publish(stream, [EventIn(f"{i}".encode() * 300)])
    tier_for.cache_clear()
    status, _, err = cbr(*server, "streams", "offload", "shop/orders")
    assert status == 1 and "CBR_TIER_URL" in err
    settings.CBR_TIER_URL = f"file://{tmp_path}/tier"
    tier_for.cache_clear()
    try:
        status, out, _ = cbr(*server, "streams", "offload", "shop/orders")
        files = len(tiering.pending(stream))
        assert status == 0 and files >= 3 and out.startswith(f"queued {files} sealed file(s), ")
    finally:
        tier_for.cache_clear()


def test_cbr_ordered_group_create_consume_and_its_assignments(config, live_server, admin_user, data_dir):
    """An ordered group from the command line: `cbr consume` says which segments the consumer
    reads, and the client shows each consumer's."""
    token = factories.token_for(admin_user)
    stream = services.do_create_stream(scope="shop", name="orders", segment_count=2)
    services.do_publish(stream, [EventIn(f"e{i}".encode(), routing_key=f"k{i}".encode()) for i in range(6)])
    server = ("--server", live_server.url, "--token", token)
    status, _, err = cbr(
        *server,
        "groups",
        "create",
        "shop/billing",
        "--stream",
        "shop/orders",
        "--delivery",
        "ordered",
        "--consumer-timeout-s",
        "60",
        "--subscriber-timeout-s",
        "2h",
        "--retention-type",
        "MANUAL_RELEASE_AT_USER_STREAMCUT",
    )
    assert status == 0, err
    status, out, err = cbr(*server, "consume", "shop/billing", "--consumer", "w1", "--count", "6", "--wait-ms", "0")
    assert status == 0 and len(out.splitlines()) == 6
    assert err.strip() == "cbr: w1 reads shop/orders:0, shop/orders:1"
    group = Client(live_server.url, token=token).reader_group("shop/billing")
    assert group.info()["delivery"] == "ordered" and group.info()["consumer_timeout_s"] == 60
    assert group.info()["subscriber_timeout_s"] == 7200  # its own, over its streams' policies
    assert group.assignments() == {"w1": ["shop/orders:0", "shop/orders:1"]}


def test_cbr_sets_tags_and_lists_by_them(config, live_server, admin_user, data_dir):
    token = factories.token_for(admin_user)
    server = ("--server", live_server.url, "--token", token)
    for name, tags in (("orders", ["team=payments", "env=prod"]), ("refunds", ["team=payments"]), ("clicks", [])):
        flags = [f for t in tags for f in ("--tag", t)]
        status, _, err = cbr(*server, "streams", "create", f"shop/{name}", *flags)
        assert status == 0, err
    status, out, _ = cbr(*server, "streams", "list", "--tag", "team:payments")
    assert status == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["shop/orders", "shop/refunds"]
    status, out, _ = cbr(*server, "streams", "list", "--tag", "team:payments", "--tag", "env")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["shop/orders"]
    status, _, err = cbr(
        *server, "groups", "create", "shop/billing", "--stream", "shop/orders", "--tag", "team=payments"
    )
    assert status == 0, err
    cbr(*server, "groups", "create", "shop/audit", "--stream", "shop/orders")
    status, out, _ = cbr(*server, "groups", "list", "--tag", "team:payments")
    assert status == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["shop/billing"]
    status, _, err = cbr(*server, "streams", "list", "--tag", "Team:x")
    assert status == 1 and "tag" in err
    with pytest.raises(SystemExit) as refused:  # argparse's refusal: usage and the reason on stderr
        cbr(*server, "streams", "create", "shop/other", "--tag", "team")
    assert refused.value.code == 2


def test_cbr_sets_publish_and_dispatch_rates(config, live_server, admin_user, data_dir):
    token = factories.token_for(admin_user)
    server = ("--server", live_server.url, "--token", token)
    status, _, err = cbr(
        *server, "streams", "create", "shop/orders", "--publish-events-per-s", "50", "--publish-bytes-per-s", "1MiB"
    )
    assert status == 0, err
    status, _, err = cbr(
        *server, "groups", "create", "shop/billing", "--stream", "shop/orders", "--dispatch-events-per-s", "2.5"
    )
    assert status == 0, err
    cbr_client = Client(live_server.url, token=token)
    assert cbr_client.stream("shop/orders")["publish_rate"] == {"events_per_s": 50.0, "bytes_per_s": 1048576.0}
    assert cbr_client.reader_group("shop/billing").info()["dispatch_rate"] == {"events_per_s": 2.5}
    with pytest.raises(SystemExit) as refused:  # argparse's refusal, before anything is sent
        cbr(*server, "streams", "create", "shop/clicks", "--publish-bytes-per-s", "2h")
    assert refused.value.code == 2 and len(list(cbr_client.streams())) == 1
