#!/usr/bin/env python3
"""pipekeep's benchmark: the same workloads under every mode, each mode in a fresh process.

Modes: no layer and no cache (cold); no layer with one in-memory cache shared by every call, as a
real application passes (cold, app cache: the baseline a first run is judged against); no layer,
one monolithic application cache loaded whole (D744's way, the fastest a hit can be); the
driver's own disk cache, warm; then for each backend (--backends): pipekeep cold (empty store) and
warm, each without and with the application's in-memory cache; for the first backend, warm with
10% of the entries damaged. Workloads: the corpus databases through `pipekeep replay`, and the test
app's mix. Prints Markdown tables (ratios from one run) and writes them, the raw JSON and an SVG
plot a workload into --out.

With --rounds N (default 7), the warm modes (monolithic, driver cache, pipekeep warm) run N more
times, interleaved, and a second table gives the median of each round's ratio: on a shared machine
one run's ratio of two runs of a few milliseconds moves by tens of percent.

It leads with what users get: launches in a row (three unless --launches) with the driver's own disk cache on (a
fresh directory a mode, made first) and the application's cache, no layer / pipekeep,
with a plot of the launches (matplotlib, which scripts/bench.sh installs); then the modes above,
the driver's disk cache off, which isolate pipekeep. scripts/bench.sh is the entry point.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

DRIVERS = {
    "radv": {
        "env": {"RADV_FORCE_FAMILY": "navi21", "VK_DRIVER_FILES": "/usr/share/vulkan/icd.d/radeon_icd.json"},
        "cache_off": {"MESA_SHADER_CACHE_DISABLE": "true"},
        "cache_on": lambda d: {"MESA_SHADER_CACHE_DISABLE": "false", "MESA_SHADER_CACHE_DIR": d, "MESA_SHADER_CACHE_MAX_SIZE": "10G"},
        "ncnn": "ncnn-35nets-radv-sg64.foz",
    },
    "lavapipe": {
        "env": {"VK_DRIVER_FILES": "/usr/share/vulkan/icd.d/lvp_icd.json"},
        "cache_off": {"MESA_SHADER_CACHE_DISABLE": "true"},
        "cache_on": lambda d: {"MESA_SHADER_CACHE_DISABLE": "false", "MESA_SHADER_CACHE_DIR": d},
        "ncnn": "ncnn-35nets-radv-sg64.foz",
    },
    "nvidia": {
        "env": {"VK_DRIVER_FILES": "/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json"},
        "cache_off": {"__GL_SHADER_DISK_CACHE": "0"},
        "cache_on": lambda d: {"__GL_SHADER_DISK_CACHE": "1", "__GL_SHADER_DISK_CACHE_PATH": d,
                               "__GL_SHADER_DISK_CACHE_SKIP_CLEANUP": "1", "__GL_SHADER_DISK_CACHE_SIZE": "10000000000"},
        "ncnn": "ncnn-35nets-sg32.foz",
    },
}
BASELINES = ["cold", "cold, app cache", "monolithic", "driver cache"]
LAYER = "VK_LAYER_PIPEKEEP_pipeline_store"


def write_manifest(bin_dir, out):
    d = os.path.join(out, "manifest")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, LAYER + ".json"), "w") as f:
        json.dump({"file_format_version": "1.2.0", "layer": {
            "name": LAYER, "type": "GLOBAL", "library_path": os.path.abspath(os.path.join(bin_dir, "libpipekeep.so")),
            "api_version": "1.4.309", "implementation_version": "1", "description": "pipekeep (bench)",
            "disable_environment": {"PIPEKEEP_DISABLE": "1"}}}, f)
    return d


def kept_bytes(store):
    """The bytes of what a store keeps of compiled pipelines, entries and pieces (every title's
    `host-pipelines`): not the title's record or run history, which no monolithic cache holds."""
    if not os.path.isdir(store):
        return 0
    return sum(dir_bytes(os.path.join(store, t, "host-pipelines")) for t in os.listdir(store))


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def damage_tenth(store):
    """Flips the last byte of every tenth entry (by name): each then fails its data hash."""
    entries = sorted(os.path.join(r, f) for r, _, fs in os.walk(store) for f in fs if f.endswith(".entry"))
    for path in entries[::10]:
        with open(path, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            b = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([b[0] ^ 0x5A]))
    return len(entries[::10])


def run(cmd, env, timeout):
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - start
    summary = {}
    for line in reversed(proc.stdout.splitlines()):
        try:
            summary = json.loads(line)
            break
        except ValueError:
            continue
    opened = [float(tok.split("=")[1]) for line in proc.stderr.splitlines() if "store opened" in line
              for tok in line.split() if tok.startswith("took_ms=")]
    watch, end = {}, {}
    for line in proc.stderr.splitlines():
        if " built=" in line:
            watch = {k: v for k, v in (tok.split("=", 1) for tok in line.split() if "=" in tok)}
        # The device's end: the entries still queued written (the writer's debug line), where
        # the time between the last pipeline and the process's end goes.
        if "the entries still queued at the device's end written" in line:
            for tok in line.split():
                if tok.startswith(("entries=", "left_waiting=", "in_flight=", "helpers=", "leave_ms=",
                                   "together_ms=", "write_ms=", "join_ms=", "took_ms=", "under_way=",
                                   "under_way_items=", "under_way_ms=", "records=",
                                   "records_documents_ms=", "records_appended_ms=", "records_left_ms=", "moved_ms=")):
                    k, v = tok.split("=", 1)
                    end[f"end_{k}"] = v
    watch.update(end)
    if not summary:
        summary = external_summary(proc.stdout + "\n" + proc.stderr)
    if proc.returncode not in (0, 1) or not summary:
        sys.stderr.write(f"bench: {' '.join(cmd)} exited {proc.returncode}\n{proc.stderr[-3000:]}\n")
    return {"summary": summary, "open_ms": opened[0] if opened else None, "watch": watch,
            "process_wall_s": wall, "exit": proc.returncode}


def external_summary(output):
    """What an external replay tool (Valve's fossilize-replay, --replayer) said of its run: the
    pipelines' creation time, summed over its "Playing back N ... pipelines took S s (accumulated
    time)" lines, each timed around its vkCreate*Pipelines call as `pipekeep replay` times them;
    and its own time to ready, "Replayed N objects in X ms" (from its start to its last pipeline:
    what a user waits for)."""
    made, seconds, ready_ms = 0, 0.0, None
    parts = {}
    for line in output.splitlines():
        words = line.split()
        # Where the rest of its time goes: its device, and its shader modules (their time summed
        # over its threads, as the pipelines').
        if "Creating Vulkan device took:" in line:
            parts["device_ms"] = parts.get("device_ms", 0.0) + float(words[words.index("took:") + 1])
        if "Playing back" in line and "shader modules took" in line:
            parts["modules_ms"] = float(words[words.index("took") + 1]) * 1e3
        if "Playing back" in line and "pipelines took" in line and "accumulated" in line:
            at = words.index("back")
            made += int(words[at + 1])
            seconds += float(words[words.index("took") + 1])
        if "Replayed" in line and "objects in" in line:
            ready_ms = float(words[words.index("in") + 1])
    if ready_ms is None:
        return dict(parts, made=made, creation_ms=seconds * 1e3) if made else {}
    return dict(parts, made=made, creation_ms=seconds * 1e3, ready_ms=ready_ms)


def base_env(drv, scratch):
    """This process's environment for the driver, the compile watch on, and no layer or pipekeep
    setting a user's shell may hold (each mode sets its own)."""
    base = dict(os.environ)
    base.update(drv["env"])
    # The compile watch, and the writer's few lines (the device's end among them).
    log = "info,pipekeep::layer::writer=debug"
    base.update({"XDG_RUNTIME_DIR": base.get("XDG_RUNTIME_DIR") or scratch, "PIPEKEEP_LOG": log})
    for k in ("VK_INSTANCE_LAYERS", "VK_LOADER_LAYERS_ENABLE", "PIPEKEEP_DISABLE", "PIPEKEEP_SHARE_BUILDS"):
        base.pop(k, None)
    return base


def bench_workload(name, cmd_for, args, drv, threads, manifest, scratch, supports_monolithic):
    base = base_env(drv, scratch)
    off = dict(base, **drv["cache_off"], PIPEKEEP_DISABLE="1")
    store = os.path.join(scratch, f"store-{name}-{threads}")
    with_layer = dict(base, **drv["cache_off"], VK_ADD_LAYER_PATH=manifest, VK_INSTANCE_LAYERS=LAYER, PIPEKEEP_DIR=store)
    mono = os.path.join(scratch, f"mono-{name}-{threads}.bin")
    driver_dir = os.path.join(scratch, f"drivercache-{name}-{threads}")
    os.makedirs(driver_dir, exist_ok=True)
    on = dict(base, **drv["cache_on"](driver_dir), PIPEKEEP_DISABLE="1")
    results = {}
    t = args.timeout
    results["cold"] = run(cmd_for(threads, None), off, t)
    results["cold, app cache"] = run(cmd_for(threads, "memory"), off, t)
    if supports_monolithic:
        run(cmd_for(threads, "file=" + mono), off, t)  # fills the monolithic cache, not measured
        results["monolithic"] = run(cmd_for(threads, "file=" + mono), off, t)
        results["monolithic"]["store_bytes"] = os.path.getsize(mono) if os.path.exists(mono) else 0
        # Its "open": reading the file and making the driver's cache, before the first pipeline.
        results["monolithic"]["open_ms"] = results["monolithic"]["summary"].get("app_cache_load_ms")
    run(cmd_for(threads, None), on, t)  # fills the driver's cache, not measured
    results["driver cache"] = run(cmd_for(threads, None), on, t)
    results["driver cache"]["store_bytes"] = dir_bytes(driver_dir)
    backends = args.backends.split(",")
    rounds = {"monolithic": [], "driver cache": []}
    rounds.update({f"pipekeep {b} warm": [] for b in backends})
    # One store a backend (and application-cache mode): the warm rounds below reuse the first.
    layer = lambda b, label: dict(with_layer, PIPEKEEP_BACKEND=b, PIPEKEEP_DIR=f"{store}-{b}{label.replace(', ', '-').replace(' ', '')}")
    for b in backends:
        for cache, label in ((None, ""), ("memory", ", app cache")):
            env = layer(b, label)
            shutil.rmtree(env["PIPEKEEP_DIR"], ignore_errors=True)
            cold = results[f"pipekeep {b} cold{label}"] = run(cmd_for(threads, cache), env, t)
            cold["store_bytes"] = kept_bytes(env["PIPEKEEP_DIR"])
            warm = results[f"pipekeep {b} warm{label}"] = run(cmd_for(threads, cache), env, t)
            warm["store_bytes"] = kept_bytes(env["PIPEKEEP_DIR"])
    if "binary" in backends:
        # The same cold run with every miss compiled: what sharing builds within a run gives.
        env = dict(layer("binary", ", app cache, no sharing"), PIPEKEEP_SHARE_BUILDS="off")
        shutil.rmtree(env["PIPEKEEP_DIR"], ignore_errors=True)
        results["pipekeep binary cold, app cache, no sharing"] = run(cmd_for(threads, "memory"), env, t)
    for _ in range(args.rounds):
        if supports_monolithic:
            rounds["monolithic"].append(run(cmd_for(threads, "file=" + mono), off, t)["summary"])
        rounds["driver cache"].append(run(cmd_for(threads, None), on, t)["summary"])
        for b in backends:
            rounds[f"pipekeep {b} warm"].append(run(cmd_for(threads, None), layer(b, ""), t)["summary"])
    results["rounds"] = rounds
    first = layer(backends[0], "")
    damaged = damage_tenth(first["PIPEKEEP_DIR"])
    mode = f"pipekeep {backends[0]} warm, 10% damaged"
    results[mode] = run(cmd_for(threads, None), first, t)
    results[mode]["damaged"] = damaged
    results[mode]["store_bytes"] = kept_bytes(first["PIPEKEEP_DIR"])
    return results


def simulate_driver_change(store):
    """Renames every identity directory under `store` to another driver version of the same
    device (its third field): the next opening takes it for a driver change and drops it."""
    for title in os.listdir(store):
        host = os.path.join(store, title, "host-pipelines")
        if not os.path.isdir(host):
            continue
        for name in os.listdir(host):
            fields = name.split("-")
            # The present driver's directory only: not one set aside (`.dropped`), not one an
            # earlier simulated change left.
            if len(fields) != 4 or "." in name or fields[2].startswith("0000000"):
                continue
            for n in range(1, 10):
                fields[2] = f"0000000{n}"
                if not os.path.exists(os.path.join(host, "-".join(fields))):
                    os.rename(os.path.join(host, name), os.path.join(host, "-".join(fields)))
                    break


def bench_driver_change(name, cmd_for, args, drv, threads, manifest, scratch, tool):
    """Issue 18's targets, in interleaved rounds: the first launch after a driver change (its
    entries dropped, the record kept) with the background rebuild, with `pipekeep rebuild` run
    first, and a cold launch (empty store, no record) through the layer and without it."""
    base = dict(base_env(drv, scratch), **drv["cache_off"])
    off = dict(base, PIPEKEEP_DISABLE="1")
    store = os.path.join(scratch, f"change-{name}-{threads}")
    layer = dict(base, VK_ADD_LAYER_PATH=manifest, VK_INSTANCE_LAYERS=LAYER, PIPEKEEP_DIR=store)
    t = args.timeout
    rounds = {"no layer, cold": [], "pipekeep, cold": [], "after the change, background rebuild": [],
              "the launch after that": [], "the next launch": [], "pipekeep rebuild first (the command)": [],
              "after the change and the command": []}
    watches = {k: [] for k in rounds}

    def keep(mode, r):
        s = dict(r["summary"])
        s.pop("times_ms", None)
        s["process_wall_s"] = r.get("process_wall_s")
        rounds[mode].append(s)
        watches[mode].append(r["watch"])

    for _ in range(args.rounds):
        keep("no layer, cold", run(cmd_for(threads, None), off, t))
        shutil.rmtree(store, ignore_errors=True)
        keep("pipekeep, cold", run(cmd_for(threads, None), dict(layer, PIPEKEEP_REBUILD="off"), t))
        simulate_driver_change(store)
        keep("after the change, background rebuild", run(cmd_for(threads, None), layer, t))
        keep("the launch after that", run(cmd_for(threads, None), layer, t))
        keep("the next launch", run(cmd_for(threads, None), layer, t))
        simulate_driver_change(store)
        started = time.monotonic()
        cmd = [tool, "rebuild", "--json", "--threads", str(max(1, os.cpu_count() // 2))]
        done = subprocess.run(cmd, env=layer, capture_output=True, text=True, timeout=t)
        rounds["pipekeep rebuild first (the command)"].append({"process_wall_s": time.monotonic() - started, "exit": done.returncode})
        watches["pipekeep rebuild first (the command)"].append({})
        keep("after the change and the command", run(cmd_for(threads, None), layer, t))
    cold = [r.get("creation_ms") for r in rounds["pipekeep, cold"]]
    lines = [f"#### {name}: a driver change, {threads} thread(s), {args.rounds} rounds", "",
             "| mode | creation ms (each round) | wall ms | process s | / pipekeep cold (creation, each round) | found / built |",
             "| --- | --- | --- | --- | --- | --- |"]
    for mode, runs in rounds.items():
        c = [r.get("creation_ms") for r in runs]
        ratio = ", ".join(f"{x / y:.3f}" for x, y in zip(c, cold) if x and y) or "-"
        found = ", ".join(f"{w.get('found', '-')}/{w.get('built', '-')}" for w in watches[mode] if w) or "-"
        lines.append(f"| {mode} | {', '.join(fmt(x) for x in c)} | {', '.join(fmt(r.get('wall_ms')) for r in runs)} | "
                     f"{', '.join(fmt(r.get('process_wall_s'), 2) for r in runs)} | {ratio} | {found} |")
    return "\n".join(lines) + "\n", rounds


def bench_runs_in_a_row(name, cmd_for, args, drv, threads, manifest, scratch):
    """As a user runs a program: the driver's own disk cache on, the
    application's in-memory caches passed (`--app-cache memory`), --launches in a row
    from nothing (an empty disk cache and store), without the layer, through pipekeep as it is
    by default, and, with --driver-floor, the
    driver alone building each pipeline through a fresh cache read after (at later launches, through
    a cache made of the data it kept); interleaved rounds, every other one
    backwards."""
    base = base_env(drv, scratch)
    layer = dict(base, VK_ADD_LAYER_PATH=manifest, VK_INSTANCE_LAYERS=LAYER)
    alone = dict(base, PIPEKEEP_DISABLE="1")
    modes = {"no layer": (alone, "memory"), "pipekeep (default)": (layer, "memory")}
    if args.replayer and name in ("ncnn", "pygfx", "synth"):
        # The two replays' own baselines side by side: pipekeep replay (hash order, a fresh
        # in-memory cache a run of 1,024 pipelines, as Valve's) is judged against the real tool.
        if not args.no_own_replay:
            modes["no layer, pipekeep replay"] = (alone, "pipekeep replay")
        if args.app_cache_file:
            # The driver's own fastest found path: the application's own pipeline cache, saved
            # at its end and handed back whole at the next launch (Valve's replayer's
            # --on-disk-pipeline-cache), beside the driver's disk cache.
            modes[APP_CACHE_FILE] = (alone, "file")
        # The floor of every launch's time to ready and process end: the same tool making its
        # device and reading its database, with no pipeline (the same with or without the layer).
        modes[FLOOR] = (alone, "floor")
        # What the floor leaves out and no layer changes: the tool reading every pipeline and
        # module of its database (decompressing, parsing, filling create infos) on its threads.
        # Its null device reads them all and makes nothing; less the same with no pipeline, that
        # is the reading alone (each round's runs side by side).
        modes[READING] = (alone, "null")
        modes[READING_NONE] = (alone, "null-none")
    for most in [m for m in (args.found_calls or "").split(",") if m]:
        # The bound on found pipelines inside the driver at once (PIPEKEEP_FOUND_CALLS).
        modes[f"pipekeep, found calls {most}"] = (dict(layer, PIPEKEEP_FOUND_CALLS=most), "memory")
    if args.driver_floor:
        # The driver's own cost of keeping per pipeline, no layer: a fresh cache a pipeline, its
        # data read after (as the `cache` backend builds a miss).
        modes["no layer, a cache a pipeline"] = (alone, "each")
    if args.compare_share_builds:
        # What sharing builds gives: each miss through an empty cache (`cache`) or compiled
        # (`binary`), none served from its twin's data.
        modes["pipekeep, share builds off"] = (dict(layer, PIPEKEEP_SHARE_BUILDS="off"), "memory")
    launches = args.launches
    t = args.timeout
    runs = {m: [[] for _ in range(launches)] for m in modes}
    for r in range(args.rounds):
        # Every other round takes the modes backwards: a mode's place in the round (the first
        # after a start, the last after a long one) weighs on none of them more than once.
        order = list(modes.items())
        for mode, (env, cache) in order[::-1] if r % 2 else order:
            place = os.path.join(scratch, f"row-{name}-{threads}-{r}-{mode.replace(' ', '').replace(',', '').replace('(', '').replace(')', '')}")
            shutil.rmtree(place, ignore_errors=True)
            # NVIDIA's driver does not make its disk cache's directory: without one, it keeps nothing
            # and its pipeline calls slow down (found pipelines through pipekeep took 6x as long).
            os.makedirs(os.path.join(place, "driver"), exist_ok=True)
            env = dict(env, **drv["cache_on"](os.path.join(place, "driver")), PIPEKEEP_DIR=os.path.join(place, "store"))
            # A cache a pipeline, its data kept in the round's place: later launches are the
            # driver's own found path.
            launch_cache = {
                "each": f"each={os.path.join(place, 'each')}",
                "file": f"file={os.path.join(place, 'app.cache')}",
            }.get(cache, cache)
            for i in range(launches):
                res = run(cmd_for(threads, launch_cache), env, t)
                s = dict(res["summary"])
                s.pop("times_ms", None)
                s["watch"] = res["watch"]
                # The whole process, its exit included: what waits for the writer at the device's
                # end shows here, not in the creation time.
                s["process_wall_s"] = res["process_wall_s"]
                # What is on disk after the launch: pipekeep's store (entries, pieces and the
                # record) and what the driver's own disk cache holds beside it.
                s["store_bytes"] = dir_bytes(os.path.join(place, "store")) + dir_bytes(os.path.join(place, "each"))
                # Of them, the entries and pieces alone (issue 58 weighs them against the driver's
                # disk cache, the record against Fossilize's own database).
                s["kept_bytes"] = kept_bytes(os.path.join(place, "store"))
                s["driver_cache_bytes"] = dir_bytes(os.path.join(place, "driver"))
                if env.get("VK_INSTANCE_LAYERS") == LAYER and i == 0 and not os.path.isdir(os.path.join(place, "store")):
                    # A layer that did not load leaves no store: its figures would be no layer's.
                    sys.exit(f"bench: {mode} made no store at {place}: the layer did not load "
                             f"(is {os.path.join(args.bin_dir, 'libpipekeep.so')} there?)")
                runs[mode][i].append(s)
            shutil.rmtree(place, ignore_errors=True)
    plot_launches(f"{name}, {threads} thread(s)", runs, os.path.join(args.out, f"{args.driver}-users-{name}-{threads}t.svg"))
    alone = runs["no layer"]
    lines = [f"#### {name}: {launches} launch(es) in a row, the driver's disk cache on, the application's cache, "
             f"{threads} thread(s), {args.linger_ms} ms after the last pipeline, {args.rounds} rounds", ""]
    lines += clocks_table(modes, runs, launches)
    lines += ["", "| mode | launch | creation ms (each round) | / no layer, same launch | found / built | the application's cache KiB | process s |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for mode in modes:
        for i in range(launches):
            c = [x.get("creation_ms") for x in runs[mode][i]]
            base_c = [x.get("creation_ms") for x in alone[i]]
            ratio = ", ".join(f"{x / y:.3f}" for x, y in zip(c, base_c) if x and y) or "-"
            found = ", ".join(f"{x['watch'].get('found', '-')}/{x['watch'].get('built', '-')}" for x in runs[mode][i] if x["watch"]) or "-"
            kib = ", ".join(fmt((x.get("app_cache_bytes") or 0) / 1024) for x in runs[mode][i])
            med = median(x / y for x, y in zip(c, base_c) if x and y)
            wall = ", ".join(fmt(x.get("process_wall_s"), 2) for x in runs[mode][i])
            lines.append(f"| {mode} | {i + 1} | {', '.join(fmt(x) for x in c)} | {ratio} (median {fmt(med, 3)}) | {found} | {kib} | {wall} |")
    # Bytes on disk after the last launch: the store plus what the driver's disk cache holds, over
    # the driver's disk cache alone (no layer).
    last = launches - 1
    alone_bytes = [x.get("driver_cache_bytes") or 0 for x in alone[last]]
    lines += ["", "| mode | store MiB + driver's disk cache MiB, after the last launch (each round) | / no layer's disk cache |",
              "| --- | --- | --- |"]
    for mode in modes:
        cells = [(x.get("store_bytes") or 0, x.get("driver_cache_bytes") or 0) for x in runs[mode][last]]
        text = ", ".join(f"{a / 2**20:.1f} + {b / 2**20:.1f}" for a, b in cells)
        ratio = ", ".join(f"{(a + b) / y:.2f}" for (a, b), y in zip(cells, alone_bytes) if y)
        lines.append(f"| {mode} | {text} | {ratio or '-'} |")
    totals = {m: [sum(runs[m][i][r].get("creation_ms") or 0 for i in range(launches)) for r in range(args.rounds)] for m in modes}
    lines += ["", f"The {launches} launch(es) together, creation ms (each round): " + "; ".join(
        f"{m} {', '.join(fmt(x) for x in v)}" for m, v in totals.items())]
    return "\n".join(lines) + "\n", runs


FLOOR = "the floor: no pipelines, no layer"
READING = "the reading: null device, every pipeline"
READING_NONE = "the reading: null device, no pipelines"
BASELINES = ("no layer", FLOOR, READING, READING_NONE)
APP_CACHE_FILE = "no layer, the application's own cache file"


def clocks_table(modes, runs, launches):
    """The three clocks a user watches, each launch's median over the rounds and its ratio over no
    layer's same launch in the same round: the application's own time to ready (where it prints
    one), the process's end, and the creation time summed over its threads; with the floor (the
    application with no pipelines), time to ready and process end less the floor too; with the
    reading (the null device's runs), less the floor and the application's reading of its
    pipelines, which no layer changes either."""
    def med(mode, i, key):
        return median(x.get(key) for x in runs[mode][i] if x.get(key) is not None)

    def floor(i, r, key, reading):
        f = runs[FLOOR][i][r].get(key) if FLOOR in runs else None
        if f is None or not reading:
            return f
        if READING not in runs:
            return None
        every, none = runs[READING][i][r].get(key), runs[READING_NONE][i][r].get(key)
        return None if every is None or none is None else f + max(every - none, 0)

    def ratio(mode, i, key, less=False, reading=False):
        rounds = len(runs["no layer"][i])
        cells = []
        for r in range(rounds):
            x, y = runs[mode][i][r].get(key), runs["no layer"][i][r].get(key)
            if x is None or not y:
                continue
            if less:
                f = floor(i, r, key, reading)
                if f is None or y - f <= 0:
                    continue
                x, y = x - f, y - f
            cells.append(x / y)
        return median(cells) if cells else None

    def floors(i, key, reading):
        return median(floor(i, r, key, reading) for r in range(len(runs["no layer"][i])))

    out = ["| mode | launch | time to ready ms | / no layer | less the floor | less floor and reading "
           "| process end s | / no layer | less the floor | less floor and reading | creation ms | / no layer |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for mode in modes:
        for i in range(launches):
            def r(key, less=False, reading=False):
                v = ratio(mode, i, key, less, reading)
                return "-" if v is None or mode in BASELINES else fmt(v, 3)
            out.append(f"| {mode} | {i + 1} | {fmt(med(mode, i, 'ready_ms'))} | {r('ready_ms')} | {r('ready_ms', True)} "
                       f"| {r('ready_ms', True, True)} "
                       f"| {fmt(med(mode, i, 'process_wall_s'), 2)} | {r('process_wall_s')} | {r('process_wall_s', True)} "
                       f"| {r('process_wall_s', True, True)} "
                       f"| {fmt(med(mode, i, 'creation_ms'))} | {r('creation_ms')} |")
    if READING in runs:
        out.append("")
        out.append("Floors, each launch's median: " + "; ".join(
            f"launch {i + 1}: the floor {fmt(floors(i, 'ready_ms', False))} ms to ready, "
            f"with the reading {fmt(floors(i, 'ready_ms', True))} ms" for i in range(launches)))
    parts = [(m, i) for m in modes for i in range(launches) if med(m, i, "device_ms") is not None]
    if parts:
        out += ["", "| mode | launch | device ms | modules ms (summed over threads) | pipelines ms (summed) | the driver's pipeline calls ms (pipekeep's watch; a later launch's: its found calls) |",
                "| --- | --- | --- | --- | --- | --- |"]
        for m, i in parts:
            drv = median(float(x["watch"]["driver_ms"]) for x in runs[m][i] if x.get("watch", {}).get("driver_ms"))
            out.append(f"| {m} | {i + 1} | {fmt(med(m, i, 'device_ms'))} | {fmt(med(m, i, 'modules_ms'), 1)} "
                       f"| {fmt(med(m, i, 'creation_ms'), 1)} | {fmt(drv, 1)} |")
    return out


def save(out, name, report, raw):
    """The tables so far as `name`.md and the runs as `name`.json, written after every workload,
    so a run stopped early still leaves what it measured."""
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write("\n".join(report))
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(raw, f, indent=1)


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def plot_launches(title, runs, path):
    """Three launches in a row, one group a mode: the median creation time of each launch (log
    scale), drawn by matplotlib (scripts/bench.sh installs it); skipped with a line where it is
    missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("bench: matplotlib is not installed; no plot of the launches\n")
        return
    modes = list(runs)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(modes)
    for k, mode in enumerate(modes):
        medians = [median(x.get("creation_ms") for x in launch) or 0 for launch in runs[mode]]
        bars = ax.bar([i + k * width for i in range(len(medians))], medians, width, label=mode)
        ax.bar_label(bars, labels=[f"{m:,.0f}" for m in medians], fontsize=7)
    ax.set_yscale("log")
    launches = len(runs[modes[0]])
    ax.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(launches)], [f"launch {i + 1}" for i in range(launches)])
    ax.set_ylabel("pipeline creation, ms (median of rounds)")
    ax.set_title(f"{title}: {launches} launch(es) in a row, the driver's disk cache on")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def fmt(v, digits=1):
    return "-" if v is None else f"{v:,.{digits}f}"


def modes_of(results):
    return [m for m in results if m != "rounds"]


def table(title, results):
    cold = results["cold"]["summary"].get("creation_ms")
    cold_app = results.get("cold, app cache", {}).get("summary", {}).get("creation_ms")
    mono = results.get("monolithic", {}).get("summary", {}).get("creation_ms")
    mono_wall = results.get("monolithic", {}).get("summary", {}).get("wall_ms")
    mono_bytes = results.get("monolithic", {}).get("store_bytes")
    lines = [f"#### {title}", "",
             "| mode | made | creation ms | wall ms | p50 ms | p99 ms | / cold | / cold, app cache | / monolithic (wall) | found | peak RSS MiB | read MiB | written MiB | store MiB | store / monolithic | app cache KiB | open ms |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for mode in modes_of(results):
        r = results.get(mode)
        if not r:
            lines.append(f"| {mode} | n/a | | | | | | | | | | | | | | |")
            continue
        s = r["summary"]
        c, w = s.get("creation_ms"), s.get("wall_ms")
        proc = s.get("process", {})
        mib = lambda b: None if b is None else b / 2**20
        ratio_cold = f"{c / cold:.4f}" if c and cold else "-"
        ratio_app = f"{c / cold_app:.3f}" if c and cold_app else "-"
        app_kib = s.get("app_cache_bytes")
        ratio_mono = f"{c / mono:.2f} ({w / mono_wall:.2f})" if c and mono and w and mono_wall else "-"
        found = r["watch"].get("found", "-") if mode.startswith("pipekeep") else "-"
        if mode.startswith("pipekeep") and r["watch"].get("shared", "0") != "0":
            found = f"{found} ({r['watch']['shared']} shared)"
        rss = proc.get("peak_rss_kib")
        store = r.get("store_bytes")
        store_ratio = f"{store / mono_bytes:.2f}" if store and mono_bytes and mode.startswith("pipekeep") else "-"
        lines.append(f"| {mode} | {s.get('made', '-')} | {fmt(c)} | {fmt(w)} | {fmt(s.get('p50_ms'), 3)} | {fmt(s.get('p99_ms'), 3)} | "
                     f"{ratio_cold} | {ratio_app} | {ratio_mono} | {found} | {fmt(None if rss is None else rss / 1024)} | "
                     f"{fmt(mib(proc.get('read_bytes')))} | {fmt(mib(proc.get('written_bytes')))} | {fmt(mib(r.get('store_bytes')))} | {store_ratio} | "
                     f"{fmt(None if app_kib is None else app_kib / 1024)} | {fmt(r.get('open_ms'), 2)} |")
    lines += ["", "Where a pipeline's time went through the layer (microseconds a pipeline, from the compile watch):", "",
              "| mode | key | lookup (open, read, verify) | cache (marker, driver's cache from the entry) | driver's pipeline call | keep (stamp or data for the writer) | all but the pipeline call |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for mode in modes_of(results):
        w = results.get(mode, {}).get("watch", {})
        built = float(w.get("built", 0) or 0)
        if not mode.startswith("pipekeep") or not built or "key_ms" not in w:
            continue
        us = {k: float(w[k + "_ms"]) * 1e3 / built for k in ("key", "lookup", "cache", "driver", "keep")}
        own = us["key"] + us["lookup"] + us["cache"] + us["keep"]
        lines.append(f"| {mode} | {us['key']:.2f} | {us['lookup']:.2f} | {us['cache']:.2f} | {us['driver']:.2f} | {us['keep']:.2f} | {own:.2f} |")
    return "\n".join(lines) + "\n"


def rounds_table(results):
    """Medians over the interleaved rounds of the warm modes, and the median of each round's ratio."""
    import statistics
    rounds = results.get("rounds") or {}
    warm_modes = [m for m in rounds if m.startswith("pipekeep") and rounds[m]]
    if not warm_modes:
        return ""
    fig = lambda runs, k: [r.get(k) for r in runs if r.get(k)]
    lines = [f"Warm modes again, {len(rounds[warm_modes[0]])} interleaved rounds: medians of the runs, and the "
             "median over the rounds of each pipekeep warm mode's time over the baseline's.", "",
             "| mode | creation ms, median | wall ms, median | " + " | ".join(f"{w} / this, median of rounds (wall)" for w in warm_modes) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in warm_modes) + " |"]
    for mode, runs in rounds.items():
        if not runs:
            continue
        cells = []
        for w in warm_modes:
            pairs = [(a, r) for a, r in zip(rounds[w], runs) if a.get("creation_ms") and r.get("creation_ms")]
            if not pairs or w == mode:
                cells.append("-")
                continue
            acc = statistics.median(a["creation_ms"] / r["creation_ms"] for a, r in pairs)
            wall = statistics.median(a["wall_ms"] / r["wall_ms"] for a, r in pairs)
            cells.append(f"{acc:.2f} ({wall:.2f})")
        lines.append(f"| {mode} | {fmt(statistics.median(fig(runs, 'creation_ms')))} | "
                     f"{fmt(statistics.median(fig(runs, 'wall_ms')))} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


COLOURS = {"cold": "#d62728", "cold, app cache": "#e377c2", "monolithic": "#1f77b4", "driver cache": "#9467bd",
           "pipekeep binary cold": "#ff7f0e", "pipekeep binary warm": "#2ca02c", "pipekeep cache cold": "#bcbd22",
           "pipekeep cache warm": "#17becf"}


def plot(title, results, path):
    """Cumulative creation time against pipelines made, one line a mode, log scale on y."""
    import math
    w, h, left, bottom, top = 860, 460, 80, 50, 40
    series = {m: r["summary"].get("times_ms") or [] for m, r in results.items()}
    series = {m: v for m, v in series.items() if v}
    if not series:
        return
    n_max = max(len(v) for v in series.values())
    cum = {m: [sum(v[:i + 1]) for i in range(len(v))] for m, v in series.items()}
    lo = max(1e-3, min(min(c) for c in cum.values()))
    hi = max(max(c) for c in cum.values())
    y = lambda v: top + (h - top - bottom) * (1 - (math.log10(max(v, lo)) - math.log10(lo)) / max(1e-9, math.log10(hi) - math.log10(lo)))
    x = lambda i: left + (w - left - 200) * i / max(1, n_max - 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{left}" y="20" font-size="14">{title}: cumulative pipeline-creation time (ms, log scale) against pipelines made</text>']
    for k in range(int(math.floor(math.log10(lo))), int(math.ceil(math.log10(hi))) + 1):
        v = 10 ** k
        if lo <= v <= hi:
            out.append(f'<line x1="{left}" x2="{w - 200}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/><text x="5" y="{y(v) + 4:.1f}">{v:g}</text>')
    for idx, (m, c) in enumerate(cum.items()):
        step = max(1, len(c) // 400)
        pts = " ".join(f"{x(i):.1f},{y(c[i]):.1f}" for i in list(range(0, len(c), step)) + [len(c) - 1])
        out.append(f'<polyline fill="none" stroke="{COLOURS.get(m, "#000")}" stroke-width="2" points="{pts}"/>')
        out.append(f'<text x="{w - 190}" y="{top + 18 * idx}" fill="{COLOURS.get(m, "#000")}">{m}: {c[-1]:,.0f} ms</text>')
    out.append(f'<text x="{left}" y="{h - 15}">pipelines made (0 .. {n_max})</text></svg>')
    with open(path, "w") as f:
        f.write("\n".join(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--driver", choices=DRIVERS, default="radv")
    ap.add_argument("--bin-dir", default="target/release", help="holds pipekeep, pipekeep-testapp and libpipekeep.so")
    ap.add_argument("--corpus", default=os.path.join(os.path.dirname(__file__), "../tests/corpus"))
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}", help="comma-separated thread counts")
    ap.add_argument("--workloads", default="ncnn,pygfx,synth,app")
    ap.add_argument("--ncnn-threads", default=None, help="thread counts for ncnn only (it is the long one)")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--rounds", type=int, default=7, help="interleaved reruns of the warm modes, for medians")
    ap.add_argument("--backends", default="binary,cache", help="PIPEKEEP_BACKEND values to run the pipekeep modes with")
    ap.add_argument("--runs-in-a-row", action="store_true",
                    help="only the headline: launches in a row with the driver's disk cache on and the "
                         "application's cache, without the layer and through pipekeep")
    ap.add_argument("--launches", type=int, default=3, choices=range(1, 10), metavar="1-9",
                    help="launches in a row for the headline")
    ap.add_argument("--driver-floor", action="store_true",
                    help="the headline adds no layer with a fresh cache a pipeline, its data read after and "
                         "kept: what keeping per pipeline costs the driver itself, and at later launches its "
                         "own found path, a cache a pipeline made of that data (the replay workloads; the "
                         "test app's --cache-each keeps nothing)")
    ap.add_argument("--isolating-only", action="store_true",
                    help="only the modes with the driver's disk cache off (what pipekeep does alone)")
    ap.add_argument("--every-extension", action="store_true",
                    help="replays make their device as translation layers do (pipekeep replay --every-extension)")
    ap.add_argument("--linger-ms", type=int, default=0,
                    help="every launch keeps its device this long after its last pipeline, as an application that "
                         "goes on after its loading (pipekeep's background work goes on meanwhile)")
    ap.add_argument("--app-cache-file", action="store_true",
                    help="the headline adds no layer with the application's own pipeline cache saved on disk "
                         "(--replayer's --on-disk-pipeline-cache): the driver's own fastest found path")
    ap.add_argument("--found-calls", default=None,
                    help="the headline adds pipekeep with PIPEKEEP_FOUND_CALLS at each of these bounds (e.g. 2,6)")
    ap.add_argument("--no-own-replay", action="store_true",
                    help="leave out the no-layer run of pipekeep's own replayer beside --replayer")
    ap.add_argument("--compare-share-builds", action="store_true",
                    help="the headline adds pipekeep with PIPEKEEP_SHARE_BUILDS=off (misses not served from a twin's data)")
    ap.add_argument("--replayer", default=None,
                    help="a real replay tool as the application of the replay workloads in the headline (Valve's "
                         "fossilize-replay, built by the caller: the project does not need it); `pipekeep replay` "
                         "runs beside it without the layer, to show both baselines")
    ap.add_argument("--driver-change", action="store_true",
                    help="instead of the modes above: the first launch after a driver change, with the background "
                         "rebuild and with `pipekeep rebuild` run first, against a cold one (issue 18), --rounds rounds")
    args = ap.parse_args()
    drv = DRIVERS[args.driver]
    os.makedirs(args.out, exist_ok=True)
    for needed in ("libpipekeep.so", "pipekeep"):
        if not os.path.isfile(os.path.join(args.bin_dir, needed)):
            sys.exit(f"bench: no {needed} in --bin-dir {args.bin_dir}")
    manifest = write_manifest(args.bin_dir, args.out)
    scratch = tempfile.mkdtemp(prefix="pipekeep-bench-")
    tool = os.path.join(args.bin_dir, "pipekeep")
    app = os.path.join(args.bin_dir, "pipekeep-testapp")
    dbs = {"ncnn": drv["ncnn"], "pygfx": "pygfx-1008variants.foz", "synth": "saschawillems-glsl-synth.foz"}
    report = [f"### {args.driver}: " + subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip(), ""]
    raw = {}
    users = [f"### {args.driver}, as users run: " + subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip(), ""]
    users_raw = {}
    for wl in args.workloads.split(","):
        threads_list = args.ncnn_threads if wl == "ncnn" and args.ncnn_threads else args.threads
        for threads in [int(t) for t in threads_list.split(",")]:
            if wl == "app":
                def cmd_for(th, cache):
                    c = [app, "--compute", "400", "--graphics", "200", "--threads", str(th), "--batch", "10"]
                    c += ["--linger-ms", str(args.linger_ms)] if args.linger_ms else []
                    return c + {"memory": ["--app-cache"], "each": ["--cache-each"]}.get((cache or "").split("=")[0], [])
                supports = False
            else:
                db = os.path.join(args.corpus, dbs[wl])

                def cmd_for(th, cache, db=db):
                    if args.replayer and cache == "memory":
                        # The real replay tool, with the in-memory caches it passes (a fresh one each 1,024).
                        return [args.replayer, "--num-threads", str(th), db]
                    if args.replayer and cache and cache.startswith("file="):
                        # The real replay tool with a pipeline cache of its own, on disk.
                        path = cache.split("=", 1)[1]
                        return [args.replayer, "--num-threads", str(th), "--on-disk-pipeline-cache", path, db]
                    none = [a for k in ("graphics", "compute", "raytracing") for a in (f"--{k}-pipeline-range", "0", "0")]
                    if args.replayer and cache == "floor":
                        # The same tool, its device made and its database read, no pipeline made.
                        return [args.replayer, "--num-threads", str(th)] + none + [db]
                    if args.replayer and cache in ("null", "null-none"):
                        # The same tool on its null device (no driver): every pipeline read, or none.
                        return [args.replayer, "--num-threads", str(th), "--null-device"] + (none if cache == "null-none" else []) + [db]
                    if cache == "pipekeep replay":
                        cache = "memory"
                    c = [tool, "replay", "--json", "--times", "--threads", str(th), db]
                    c += ["--every-extension"] if args.every_extension else []
                    c += ["--linger-ms", str(args.linger_ms)] if args.linger_ms else []
                    return c + (["--app-cache", cache] if cache else [])
                supports = True
            started = time.monotonic()
            other = None
            if not (args.isolating_only or args.driver_change):
                # The headline, what users get: the driver's disk cache on, three launches.
                text, runs = bench_runs_in_a_row(wl, cmd_for, args, drv, threads, manifest, scratch)
                users.append(text)
                users_raw[f"{wl}-{threads}"] = runs
                print(text, flush=True)
                save(args.out, f"{args.driver}-users", users, users_raw)
                if args.runs_in_a_row:
                    continue
            if args.driver_change:
                other = ("driver-change", bench_driver_change(wl, cmd_for, args, drv, threads, manifest, scratch, tool))
            if other:
                suffix, (text, runs) = other
                report.append(text)
                raw[f"{wl}-{threads}"] = runs
                print(text, flush=True)
                save(args.out, f"{args.driver}-{suffix}", report, raw)
                continue
            results = bench_workload(wl, cmd_for, args, drv, threads, manifest, scratch, supports)
            device = next((r["summary"].get("device") for m, r in results.items() if m != "rounds" and r["summary"].get("device")), "?")
            title = f"{wl} ({dbs.get(wl, 'test app: 400 compute + 200 graphics')}), {threads} thread(s), {device}"
            report.append(table(title, results) + "\n" + rounds_table(results))
            plot(title, {m: r for m, r in results.items() if m != "rounds"}, os.path.join(args.out, f"{args.driver}-{wl}-{threads}t.svg"))
            for r in results.values():
                for summary in ([r["summary"]] if "summary" in r else [x for runs in r.values() for x in runs]):
                    summary.pop("times_ms", None)
            raw[f"{wl}-{threads}"] = results
            print(report[-1], flush=True)
            save(args.out, args.driver, report, raw)
            sys.stderr.write(f"bench: {wl} at {threads} thread(s) took {time.monotonic() - started:.0f} s\n")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
