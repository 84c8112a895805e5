# Where a cold launch's end goes: pygfx at 16 threads with the layer (at .carry/libpipekeep.so, its manifest at
# /tmp/pkm), Valve's replayer at .carry/fossilize-replay; usage: endtimes N [layer|none|disabled]. 2026-12-06.
import subprocess, sys, time, os, shutil
env = dict(os.environ)
env.update({"__GL_SHADER_DISK_CACHE": "1", "__GL_SHADER_DISK_CACHE_SKIP_CLEANUP": "1", "__GL_SHADER_DISK_CACHE_SIZE": "10000000000",
            "PIPEKEEP_LOG": "debug", "VK_ADD_LAYER_PATH": "/tmp/pkm", "VK_INSTANCE_LAYERS": "VK_LAYER_PIPEKEEP_pipeline_store"})
mode = sys.argv[2] if len(sys.argv) > 2 else "layer"
if mode == "none":
    env.pop("VK_INSTANCE_LAYERS")
if mode == "disabled":
    env["PIPEKEEP_DISABLE"] = "1"
for r in range(int(sys.argv[1])):
    for d in ("/tmp/st", "/tmp/dc"):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs("/tmp/dc")
    env["__GL_SHADER_DISK_CACHE_PATH"] = "/tmp/dc"; env["PIPEKEEP_DIR"] = "/tmp/st"
    t0 = time.monotonic()
    p = subprocess.Popen([".carry/fossilize-replay", "--num-threads", "16", "tests/corpus/pygfx-1008variants.foz"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marks = []
    for line in p.stdout:
        t = (time.monotonic() - t0) * 1e3
        if any(k in line for k in ("Replayed", "end written", "compile watch: built", "longest pipeline", "destroy", "Destroy", "order of use", "run's line", "exit")):
            marks.append(f"{t:8.1f} {line.strip()}")
    p.wait()
    end = (time.monotonic() - t0) * 1e3
    ready = [float(m.split()[0]) for m in marks if "Replayed" in m]
    endl = [float(m.split()[0]) for m in marks if "end written" in m]
    last = [m for m in marks if "compile watch: built=641" in m]
    import re
    began = None
    if last and ready:
        em = re.search(r"end_ms=([0-9.]+)", last[-1])
        if em:
            began = float(last[-1].split()[0]) - float(em.group(1)) - ready[0]
    took = [re.search(r"took_ms=([0-9.]+)", m) for m in marks if "end written" in m]
    for m in marks:
        if "end written" in m:
            print("   ", m.split("written", 1)[1])
    print(f"{mode} round {r+1}: ready {ready[0] if ready else -1:.0f} ms, vkDestroyDevice +{began if began is not None else -1:.0f}, end line +{(endl[0]-ready[0]) if endl and ready else -1:.0f} (writer {took[0].group(1) if took and took[0] else '-'} ms), process end +{end-(ready[0] if ready else 0):.0f} ms")
