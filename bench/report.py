"""Markdown tables, ratios to aiokafka and the PASS/FAIL targets of a benchmark run."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .harness import CONSUMER_PROTOCOL_PEERS, PEERS

BASE = "aiokafka_getmany"


def _f(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


def _ratio(a: Any, b: Any) -> float | None:
    if a is None or b is None or not b:
        return None
    return float(a) / float(b)


#: A cooperative rebalance must not pause the partitions that stay: their longest gap
#: after the join may be at most this multiple of their longest gap before it.
NO_PAUSE = 2.0


#: The rebalance peers that rebalance incrementally (the no-pause and hand-over targets
#: apply to them; an eager member revokes everything by design).
INCREMENTAL = ("cg_messages_coop", "confluent_coop", *CONSUMER_PROTOCOL_PEERS)
#: Ours vs librdkafka on the same protocol: join/leave -> all flowing may be at most theirs.
SAME_PROTOCOL = {
    "cg_messages": "confluent",
    "cg_messages_coop": "confluent_coop",
    "cg_messages_consumer": "confluent_consumer",
}
#: A moved partition flows again at most one heartbeat interval plus this after its
#: previous owner committed it.
HANDOVER_SLACK = 1.0
PHASES = ("join", "leave")


def _heartbeat(setup: dict[str, Any], peer: str) -> float | None:
    """The heartbeat interval ``peer`` ran with: the broker's for the consumer protocol."""
    if peer in CONSUMER_PROTOCOL_PEERS:
        value = setup.get("consumer_heartbeat_s")
    else:
        value = setup.get("client_heartbeat_s")
    return None if value is None else float(value)


def _rebalance_heading(setup: dict[str, Any]) -> str:
    """What a rebalance table ran under: partitions and heartbeat intervals."""
    hb = setup.get("consumer_heartbeat_s")
    named = {"fixture": "the test fixture's", "default": "Kafka's default"}.get(
        setup.get("setting") or "", "as configured"
    )
    kip848 = f"consumer-group heartbeat {hb:g} s ({named})" if hb else "broker as configured"
    return f"{setup['partitions']} partitions, {kip848}"


def _short(setup: dict[str, Any]) -> str:
    """The setting in a target's name: partitions and the consumer-group heartbeat."""
    hb = setup.get("consumer_heartbeat_s")
    return f"{setup['partitions']} p" + (f", hb {hb:g} s" if hb else "")


def rebalance_targets(rb: dict[str, Any]) -> list[tuple[str, float | None, float, str]]:
    """``(target, measured, need, verdict)`` of one rebalance table (a partition count
    under one heartbeat setting)."""
    med, setup = rb["median"], rb["setup"]
    where = _short(setup)
    out: list[tuple[str, float | None, float, str]] = []
    for peer in med:
        if peer not in INCREMENTAL:
            continue
        for phase in PHASES:
            m = med[peer].get(phase, {})
            gap = m.get("unmoved_pause_vs_gap")
            out.append(
                (f"{PEERS[peer]}, {phase}, {where}: unmoved pause vs steady gap", gap, NO_PAUSE,
                 _verdict(gap, NO_PAUSE))
            )  # fmt: skip
            hb = _heartbeat(setup, peer)
            handover = m.get("moved_after_commit_s")
            if hb is not None:
                need = hb + HANDOVER_SLACK
                out.append(
                    (f"{PEERS[peer]}, {phase}, {where}: moved flowing after the revoker's "
                     "commit (s)", handover, need, _verdict(handover, need))
                )  # fmt: skip
    for ours, theirs in SAME_PROTOCOL.items():
        if ours not in med or theirs not in med:
            continue
        for phase in PHASES:
            a = med[ours].get(phase, {}).get("to_all_flowing_s")
            b = med[theirs].get(phase, {}).get("to_all_flowing_s")
            ratio = _ratio(a, b)
            out.append(
                (f"{PEERS[ours]} vs {PEERS[theirs]}, {phase} -> all flowing, {where}", ratio,
                 1.0, _verdict(ratio, 1.0))
            )  # fmt: skip
    return out


def _verdict(value: float | None, need: float, higher: bool = False) -> str:
    """PASS/FAIL of ``value`` against ``need`` (n/a without a value)."""
    if value is None:
        return "n/a"
    return "PASS" if (value >= need if higher else value <= need) else "FAIL"


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets of one broker's run, each with the measured ratio and PASS/FAIL (or n/a)."""
    out: list[dict[str, Any]] = []
    med = results.get("throughput", {}).get("median", {})

    def metric(key: str) -> Callable[[str], float | None]:
        """A peer's median ``key`` (None where it was not measured)."""

        def of(peer: str) -> float | None:
            value = med.get(peer, {}).get(key)
            return None if value is None else float(value)

        return of

    rate, cpu, rss = metric("msgs_per_s"), metric("steady_cpu_us_per_msg"), metric("rss_mb")

    def add(name: str, value: float | None, need: float, higher: bool = True) -> None:
        op = ">=" if higher else "<="
        verdict = _verdict(value, need, higher)
        out.append({"target": name, "measured": value, "need": f"{op} {need}", "verdict": verdict})

    add("batches() msgs/s vs aiokafka getmany()", _ratio(rate("cg_batches"), rate(BASE)), 2.5)
    add("messages()+mark msgs/s vs aiokafka", _ratio(rate("cg_messages"), rate(BASE)), 1.5)
    cg_rss = [v for v in (rss("cg_batches"), rss("cg_messages")) if v is not None]
    add(
        "peak RSS (worse consumergroup peer) vs aiokafka",
        _ratio(max(cg_rss), rss(BASE)) if cg_rss else None,
        1.5,
        higher=False,
    )
    add("batches() msgs/s vs confluent-kafka", _ratio(rate("cg_batches"), rate("confluent")), 1.0)
    add(
        "batches() steady CPU/msg vs kcat (C)",
        _ratio(cpu("cg_batches"), cpu("kcat")),
        1.2,
        higher=False,
    )
    add(
        "messages()+mark steady CPU/msg vs kcat (C)",
        _ratio(cpu("cg_messages"), cpu("kcat")),
        1.5,
        higher=False,
    )
    add(
        "keeping all: batches() steady CPU/msg vs not keeping",
        _ratio(cpu("cg_batches_keep"), cpu("cg_batches")),
        1.2,
        higher=False,
    )
    add(
        "keeping all: batches() msgs/s vs aiokafka keeping all",
        _ratio(rate("cg_batches_keep"), rate("aiokafka_keep")),
        2.5,
    )
    add(
        "batches() steady CPU/msg vs franz-go",
        _ratio(cpu("cg_batches"), cpu("franz")),
        1.0,
        higher=False,
    )
    add(
        "messages()+mark steady CPU/msg vs franz-go",
        _ratio(cpu("cg_messages"), cpu("franz")),
        1.3,
        higher=False,
    )
    add("batches() msgs/s vs the Java consumer", _ratio(rate("cg_batches"), rate("java")), 1.0)
    parts = results.get("scaling", {}).get("partitions", {})
    if parts:
        keys = sorted(parts, key=int)
        lo, hi = keys[0], keys[-1]
        r_lo = parts[lo].get("cg_batches", {}).get("msgs_per_s")
        r_hi = parts[hi].get("cg_batches", {}).get("msgs_per_s")
        add(f"batches() {hi} partitions vs {lo} partitions msgs/s", _ratio(r_hi, r_lo), 0.7)
        c_lo = parts[lo].get("cg_batches", {}).get("steady_cpu_us_per_msg")
        c_hi = parts[hi].get("cg_batches", {}).get("steady_cpu_us_per_msg")
        add(
            f"batches() steady CPU/msg at {hi} partitions vs {lo}",
            _ratio(c_hi, c_lo),
            1.3,
            higher=False,
        )
    else:
        add("batches() 1000 partitions vs 8 partitions msgs/s", None, 0.7)
        add("batches() steady CPU/msg at 1000 partitions vs 8", None, 1.3, higher=False)
    few = results.get("scaling_cpu", {}).get("partitions", {})
    if few:
        keys = sorted(few, key=int)
        lo, hi = keys[0], keys[-1]
        add(
            f"batches() steady CPU/msg at {hi} partitions vs {lo}, "
            f"{results['scaling_cpu']['loads'].get(hi, {}).get('n', 0):,} msgs",
            _ratio(
                few[hi].get("cg_batches", {}).get("steady_cpu_us_per_msg"),
                few[lo].get("cg_batches", {}).get("steady_cpu_us_per_msg"),
            ),
            1.3,
            higher=False,
        )
    wide = results.get("scaling", {}).get("wide") or {}
    wide_rss = {p: m["rss_mb_total"] for p, m in wide.get("peers", {}).items()}
    add(
        f"peak RSS, {wide.get('partitions', 5000):,} partitions over {wide.get('members', 4)} "
        "members, batches() vs aiokafka",
        _ratio(wide_rss.get("cg_batches"), wide_rss.get(BASE)),
        1.0,
        higher=False,
    )
    for rb in results.get("rebalance") or []:
        for name, value, need, verdict in rebalance_targets(rb):
            out.append(
                {"target": name, "measured": value, "need": f"<= {need}", "verdict": verdict}
            )
    return out


def markdown(results: dict[str, Any]) -> str:
    """The whole report as markdown: every broker's tables in turn."""
    meta = results["meta"]
    lines = [
        f"# Benchmark {meta['timestamp']}",
        "",
        f"Brokers: {', '.join(r['broker'] for r in results['runs'].values()) or 'none'}. "
        f"Machine: {meta['cpus']} CPUs, Python {meta['python']}, "
        f"aiokafka {meta['aiokafka']}, confluent-kafka {meta['confluent_kafka']} "
        f"(librdkafka {meta['librdkafka']}), franz-go {meta['franz_go']}, sarama "
        f"{meta['sarama']}, kafka-clients {meta['kafka_clients']}. Reps: {meta['reps']} "
        f"(medians shown). Session timeout {meta['session_timeout']} s.",
        "",
    ]
    for run in results["runs"].values():
        lines += _run_markdown(run, bool(meta.get("quick")))
    return "\n".join(lines)


def _run_markdown(results: dict[str, Any], quick: bool) -> list[str]:
    """One broker's tables, each heading naming the broker."""
    on = f" — {results['broker']}"
    lines: list[str] = []
    tp = results.get("throughput")
    if tp:
        d = tp["data"]
        lines += [
            f"## Throughput: {d['n']:,} x {d['size']} B values ({d['key_size']} B keys), "
            f"{d['partitions']} partitions, compression {d['compression']}{on}",
            "",
            f"Loaded in {d['load_seconds']:.1f} s ({_f(d['load_msgs_per_s'], ',.0f')} msgs/s) "
            "with aiokafka's producer, whole batches.",
            "",
            "| peer | msgs/s | MB/s | vs aiokafka | start -> first msg (s) | peak RSS (MB) "
            "| RSS vs aiokafka | CPU total (s) | steady CPU us/msg | steady CPU share |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        med = tp["median"]
        base = med.get(BASE, {})
        for peer, m in med.items():
            lines.append(
                f"| {PEERS[peer]} | {_f(m['msgs_per_s'], ',.0f')} | {_f(m['mb_per_s'], '.1f')} "
                f"| {_f(_ratio(m['msgs_per_s'], base.get('msgs_per_s')), '.2f')}x "
                f"| {_f(m['first_msg_s'], '.2f')} | {_f(m['rss_mb'], '.0f')} "
                f"| {_f(_ratio(m['rss_mb'], base.get('rss_mb')), '.2f')}x "
                f"| {_f(m['cpu_s'], '.2f')} | {_f(m.get('steady_cpu_us_per_msg'), '.2f')} "
                f"| {_f(m.get('steady_cpu_share'), '.2f')} |"
            )
        for peer, err in tp["errors"].items():
            lines.append(f"| {PEERS[peer]} | FAILED: {err.splitlines()[0]} ||||||||| |")
        lines.append("")
    for rb in results.get("rebalance") or []:
        lines += _rebalance_markdown(rb, on)
    sc = results.get("scaling")
    if sc:
        mem = sc["members"]
        if mem:
            peers = sorted({p for row in mem.values() for p in row}, key=list(PEERS).index)
            lines += [
                f"## Scaling: members in one group (whole topic, msgs/s; RSS/CPU summed){on}",
                "",
                "| members | " + " | ".join(PEERS[p] for p in peers) + " |",
                "|---:|" + "---:|" * len(peers),
            ]
            for k, row in mem.items():
                cells = []
                for p in peers:
                    m = row.get(p)
                    cells.append(
                        "-"
                        if m is None
                        else f"{m['msgs_per_s']:,.0f} ({m['rss_mb_total']:.0f} MB, "
                        f"{m['cpu_s_total']:.1f} s CPU)"
                    )
                lines.append(f"| {k} | " + " | ".join(cells) + " |")
            lines.append("")
    for key, title in (("scaling", ""), ("scaling_cpu", ", few records per partition")):
        parts = results.get(key, {}).get("partitions")
        if parts:
            peers = sorted({p for row in parts.values() for p in row}, key=list(PEERS).index)
            n = next(iter(results[key]["loads"].values()), {}).get("n")
            size = f", {n:,} msgs" if n else ""
            lines += [
                "## Scaling: partitions on one member (msgs/s, peak RSS, steady CPU us/msg)"
                f"{title}{size}{on}",
                "",
                "| partitions | " + " | ".join(PEERS[p] for p in peers) + " |",
                "|---:|" + "---:|" * len(peers),
            ]
            for k, row in parts.items():
                cells = []
                for p in peers:
                    m = row.get(p)
                    cells.append(
                        "-"
                        if m is None
                        else f"{m['msgs_per_s']:,.0f} ({m['rss_mb']:.0f} MB, "
                        f"{_f(m.get('steady_cpu_us_per_msg'), '.2f')} us)"
                    )
                lines.append(f"| {k} | " + " | ".join(cells) + " |")
            lines.append("")
    if sc:
        wide = sc.get("wide")
        if wide:
            lines += [
                f"## Scaling: {wide['partitions']:,} partitions over {wide['members']} members "
                f"(whole topic, msgs/s; RSS/CPU summed){on}",
                "",
                "| peer | msgs/s | RSS (MB) | CPU (s) | CPU us/msg |",
                "|---|---:|---:|---:|---:|",
            ]
            for p, m in wide["peers"].items():
                lines.append(
                    f"| {PEERS[p]} | {m['msgs_per_s']:,.0f} | {m['rss_mb_total']:.0f} "
                    f"| {m['cpu_s_total']:.1f} | {m['cpu_s_total'] / wide['n'] * 1e6:.2f} |"
                )
            lines.append("")
        for what, err in sc["errors"].items():
            lines.append(f"- scaling {what} FAILED: {err.splitlines()[0]}")
        if sc["errors"]:
            lines.append("")
    lines += [f"## Targets{on}", ""]
    if quick:
        lines += [
            "*--quick run: windows of well under a second, so these verdicts are noise; "
            "only a full run (1,000,000 messages, 3 reps) counts.*",
            "",
        ]
    lines += ["| target | measured | need | verdict |", "|---|---:|---:|---|"]
    for t in results["targets"]:
        lines.append(
            f"| {t['target']} | {_f(t['measured'], '.2f')} | {t['need']} | {t['verdict']} |"
        )
    lines.append("")
    return lines


def _rebalance_markdown(rb: dict[str, Any], on: str) -> list[str]:
    """One rebalance table: each peer's join and leave rows (the comparisons with
    librdkafka are in the targets table)."""
    s = rb["setup"]
    lines = [
        f"## Rebalance: 2 members consume {s['rate']:,} msgs/s; a third joins, then the "
        f"first leaves — {_rebalance_heading(s)}{on}",
        "",
        "Classic peers heartbeat every "
        f"{_f(s.get('client_heartbeat_s'), 'g')} s (client setting). *Unmoved*: partitions "
        "delivered by the same member before and after the change; *pause*: the longest "
        "time a partition's records waited with none delivered (a gap in which the "
        "producer sent nothing is no pause); *raw gap*: the longest interval between "
        "deliveries, producer and broker hiccups included; *steady*: the unmoved partitions' "
        "longest pause in the 3 s before the change; *no pause*: unmoved pause <= "
        f"{NO_PAUSE}x steady gap; *after commit*: a moved partition's first delivery at its "
        "new owner after its previous owner committed it (worst partition), target <= "
        f"heartbeat interval + {HANDOVER_SLACK:g} s; *-> all flowing*: from the change (the "
        "newcomer's start, the leaver's stop request) until every partition delivers at its "
        "owner. The no-pause and hand-over targets apply to incremental peers only.",
        "",
        "| peer | change | moved / unmoved | unmoved: pause (s) | raw gap (s) | steady (s) "
        "| no pause | moved: pause (s) | moved: after commit (s) | <= hb + 1 s "
        "| -> all flowing (s) |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---|---:|",
    ]
    for peer, med in rb["median"].items():
        hb = _heartbeat(s, peer)
        for phase in PHASES:
            m = med.get(phase, {})
            incremental = peer in INCREMENTAL
            no_pause = _verdict(m.get("unmoved_pause_vs_gap"), NO_PAUSE) if incremental else "-"
            handover = (
                _verdict(m.get("moved_after_commit_s"), hb + HANDOVER_SLACK)
                if incremental and hb is not None
                else "-"
            )
            lines.append(
                f"| {PEERS[peer]} | {phase} | {_f(m.get('moved_partitions'), '.0f')} / "
                f"{_f(m.get('unmoved_partitions'), '.0f')} "
                f"| {_f(m.get('unmoved_max_pause_s'), '.2f')} "
                f"| {_f(m.get('unmoved_max_raw_gap_s'), '.2f')} "
                f"| {_f(m.get('unmoved_steady_gap_s'), '.2f')} | {no_pause} "
                f"| {_f(m.get('moved_max_pause_s'), '.2f')} "
                f"| {_f(m.get('moved_after_commit_s'), '.2f')} | {handover} "
                f"| {_f(m.get('to_all_flowing_s'), '.2f')} |"
            )
    for peer, err in rb["errors"].items():
        lines.append(f"| {PEERS[peer]} | FAILED: {err.splitlines()[0]} ||||||||| |")
    lines.append("")
    return lines
