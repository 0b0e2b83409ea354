"""The records and the report of bench/notifications.py: per wave, per repetition, per row of the table, and
the comparison against the goals."""

from __future__ import annotations

from dataclasses import dataclass, field

GOAL_LATENCY_MS = 50.0


@dataclass
class WaveResult:
    latency_ms: float  # last completion (command's own clock) -> first model request that saw the whole wave
    detect_ms: float  # -> the last finished_at recorded by the product
    settle_wake_ms: float  # -> created_at of the task that made that request
    start_ms: float  # -> that task's `ai_message_start` event (notice events, inline drain, history build)
    call_ms: float  # -> the model request's receipt (the client builds and sends the request)
    spread_ms: float  # first to last completion of the wave
    max_gap_ms: float  # the longest quiet gap between two finishes the product recorded (what the settle window sees)


@dataclass
class RepResult:
    turns: int
    waves: list[WaveResult]
    slack_ms: float  # the first turn ended this long before the first completion (must be > 0)
    retried: int = 0


def quantile(values: list[float], q: float) -> float:
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class Row:
    n: int
    waves: int
    mode: str
    reps: list[RepResult] = field(default_factory=list)

    def all_waves(self) -> list[WaveResult]:
        return [w for r in self.reps for w in r.waves]

    def turns_text(self) -> str:
        turns = sorted(r.turns for r in self.reps)
        return str(turns[0]) if turns[0] == turns[-1] else f"{turns[0]}-{turns[-1]}"

    def median(self, attr: str) -> float:
        return quantile([getattr(w, attr) for w in self.all_waves()], 0.5)

    def p90(self, attr: str) -> float:
        return quantile([getattr(w, attr) for w in self.all_waves()], 0.9)


def print_table(rows: list[Row]) -> None:
    head = (f"{'N':>4} | {'mode':<8} | {'follow-up turns':>15} | {'waves':>5} | {'latency median ms':>17} | "
            f"{'p90 ms':>8} | {'detect':>7} | {'settle+wake':>11} | {'start':>6} | {'call':>6} | {'spread':>6} | reps")
    print(head)
    print("-" * len(head))
    for row in rows:
        med = row.median
        print(f"{row.n:>4} | {row.mode:<8} | {row.turns_text():>15} | {row.waves:>5} | "
              f"{med('latency_ms'):>17.1f} | {row.p90('latency_ms'):>8.1f} | {med('detect_ms'):>7.1f} | "
              f"{med('settle_wake_ms'):>11.1f} | {med('start_ms'):>6.1f} | {med('call_ms'):>6.1f} | "
              f"{med('spread_ms'):>6.1f} | {len(row.reps)}")
    print("latency = detect + settle+wake + start + call (medians in ms, per wave over all reps):\n"
          "  detect      last command's own finish (date in the command) -> its finished_at (reaped by the server)\n"
          "  settle+wake -> created_at of the follow-up task that made the measured request (finish transaction, "
          "settle, wake)\n"
          "  start       -> that task's ai_message_start event (notice events, inline drain, history build)\n"
          "  call        -> the scripted model server received the request\n"
          "  spread      first -> last completion of the wave, by the commands' own clocks")


def print_comparison_and_goals(rows: list[Row], settle_ms: float) -> bool:
    by_key = {(r.n, r.waves, r.mode): r for r in rows}
    print("\nnaive / product (same run, same measurement):")
    for (n, waves, mode), product in by_key.items():
        naive = by_key.get((n, waves, "naive"))
        if mode != "product" or naive is None:
            continue
        p_turns = sum(r.turns for r in product.reps) / len(product.reps)
        n_turns = sum(r.turns for r in naive.reps) / len(naive.reps)
        p_lat, n_lat = product.median("latency_ms"), naive.median("latency_ms")
        print(f"  N={n:<3} waves={waves}: turns {n_turns:.1f} vs {p_turns:.1f} (x{n_turns / p_turns:.1f}), "
              f"latency median {n_lat:.1f} vs {p_lat:.1f} ms (x{n_lat / p_lat:.1f})")

    print(f"\ngoals (product, settle window NOTICE_SETTLE_MS={settle_ms:g}):")
    all_met = True
    parts = {"detect": "detect_ms", "settle+wake": "settle_wake_ms", "start": "start_ms", "call": "call_ms"}
    for row in rows:
        if row.mode != "product":
            continue
        bad = [r.turns for r in row.reps if r.turns != row.waves]
        turns_ok = not bad
        med = row.median("latency_ms")
        lat_ok = med < GOAL_LATENCY_MS
        all_met &= turns_ok and lat_ok
        label = f"  N={row.n:<3} waves={row.waves}:"
        print(f"{label} turns == waves: {'met' if turns_ok else f'MISSED in {len(bad)} of {len(row.reps)} reps'}; "
              f"latency median {med:.1f} ms < {GOAL_LATENCY_MS:g} ms: {'met' if lat_ok else 'MISSED'}")
        if not turns_ok:
            gaps = [max(w.max_gap_ms for w in r.waves) for r in row.reps if r.turns != row.waves]
            ok_gaps = [max(w.max_gap_ms for w in r.waves) for r in row.reps if r.turns == row.waves]
            print(f"{' ' * len(label)} the reps with extra turns had a {max(gaps):.0f} ms quiet gap between two "
                  f"recorded finishes (the others at most {max(ok_gaps, default=0):.0f} ms): a gap longer than the "
                  f"settle window ({settle_ms:g} ms) ends the wave early, and a straggler that misses the follow-up's "
                  "first model call costs a turn of its own")
        if not lat_ok:
            shares = {name: row.median(attr) for name, attr in parts.items()}
            top = max(shares, key=shares.get)
            detail = ", ".join(f"{name} {v:.1f} ms" for name, v in shares.items())
            why = {
                "detect": "N shells exit and are reaped on 2 cores; each command's green thread reads its output "
                          "tail once its shell is reaped",
                "settle+wake": f"the batched finish transaction, the settle window ({settle_ms:g} ms) and the wake's "
                               "claim",
                "start": "the follow-up drains N notices into the history, logs one user_message event per "
                         "notice (one transaction each) and reads the history before its first model call",
                "call": "the model client builds and sends a request that carries every notice",
            }[top]
            print(f"{' ' * len(label)} dominated by {top} ({detail}): {why}")
    return all_met


