"""The persistent compilation cache: warm starts, corrupt and foreign entries,
the start-up prefetch."""

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, os, time, torch, torch_tpu
torch.tpu.init()
# Tests of the prefetch give it time to finish before the program asks.
deadline = time.time() + 60
while time.time() < deadline and \
        torch.tpu._get_cache_stats()["prefetched"] < int(os.environ.get("EXPECT_PREFETCHED", "0")):
    time.sleep(0.05)
x = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("tpu")
y = ((x * 3 + 1).relu() @ x.t()).sum()
v = y.item()
xc = x.cpu()
ref = ((xc * 3 + 1).relu() @ xc.t()).sum().item()
assert abs(v - ref) <= 1e-5 * abs(ref), (v, ref)  # against CPU, whatever the cache served
s = torch.tpu._get_cache_stats()
print(json.dumps({"value": v, "compiles": s["compiles"], "disk_hits": s["disk_hits"],
                  "prefetched": s["prefetched"]}))
"""


def run(cache_dir, extra_env=None):
    env = dict(os.environ, TORCH_TPU_COMPILATION_CACHE_DIR=str(cache_dir))
    env.update(extra_env or {})
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, p.stderr
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line), p.stderr


def entries(cache_dir):
    return sorted(f for f in os.listdir(cache_dir) if f.endswith(".xlaexe"))


def test_warm_start_loads_instead_of_compiling(tmp_path):
    cold, _ = run(tmp_path)
    assert cold["compiles"] > 0 and cold["disk_hits"] == 0
    assert entries(tmp_path), "nothing was written"
    warm, _ = run(tmp_path)
    assert warm["compiles"] == 0
    assert warm["disk_hits"] == cold["compiles"]
    assert warm["value"] == cold["value"]


def test_xla_flags_are_part_of_the_key(tmp_path):
    # XLA_FLAGS changes what the plugin compiles: an executable built under
    # other flags is not loaded.
    base = {"XLA_FLAGS": ""}
    cold, _ = run(tmp_path, base)
    other, _ = run(tmp_path, {"XLA_FLAGS": "--xla_cpu_enable_fast_min_max=false"})
    assert other["compiles"] == cold["compiles"] and other["disk_hits"] == 0
    again, _ = run(tmp_path, base)
    assert again["compiles"] == 0 and again["disk_hits"] == cold["compiles"]


def test_corrupt_and_truncated_entries_are_ignored_and_rewritten(tmp_path):
    cold, _ = run(tmp_path)
    files = entries(tmp_path)
    with open(tmp_path / files[0], "wb") as f:
        f.write(b"garbage")
    with open(tmp_path / files[-1], "r+b") as f:
        f.truncate(os.path.getsize(tmp_path / files[-1]) // 2)
    again, err = run(tmp_path)
    assert "corrupt or truncated compilation cache entry" in err
    assert again["value"] == cold["value"]
    assert again["compiles"] == (2 if len(files) > 1 else 1)
    third, _ = run(tmp_path)  # rewritten: all loads now
    assert third["compiles"] == 0


def test_entry_of_another_plugin_build_is_ignored(tmp_path):
    run(tmp_path)
    f = tmp_path / entries(tmp_path)[0]
    data = bytearray(f.read_bytes())
    # The identity string follows the 8-byte magic and its 8-byte length.
    data[16] ^= 0x20
    f.write_bytes(bytes(data))
    again, err = run(tmp_path)
    assert "another plugin build" in err
    assert again["compiles"] == 1


def test_cache_can_be_disabled(tmp_path):
    off = tmp_path / "unused"
    r1, _ = run(off, {"TORCH_TPU_COMPILATION_CACHE_DIR": "off"})
    r2, _ = run(off, {"TORCH_TPU_COMPILATION_CACHE_DIR": "off"})
    assert r1["compiles"] > 0 and r2["compiles"] == r1["compiles"] and r2["disk_hits"] == 0
    assert not off.exists()


def manifests(cache_dir):
    return sorted(f for f in os.listdir(cache_dir) if f.endswith(".startup"))


def test_start_up_manifest_prefetches_the_last_runs_executables(tmp_path):
    cold, _ = run(tmp_path)
    assert len(manifests(tmp_path)) == 1
    names = (tmp_path / manifests(tmp_path)[0]).read_text().split()
    assert sorted(names) == entries(tmp_path)  # every executable this script asked for
    warm, err = run(tmp_path, {"EXPECT_PREFETCHED": str(cold["compiles"])})
    assert warm["compiles"] == 0 and warm["value"] == cold["value"]
    assert warm["prefetched"] == cold["compiles"] == warm["disk_hits"], err
    off, _ = run(tmp_path, {"TORCH_TPU_CACHE_PREFETCH": "0"})
    assert off["prefetched"] == 0 and off["disk_hits"] == cold["compiles"]
    assert off["value"] == cold["value"]


def test_damaged_manifest_and_entries_are_not_prefetched(tmp_path):
    cold, _ = run(tmp_path)
    manifest = tmp_path / manifests(tmp_path)[0]
    files = entries(tmp_path)
    with open(tmp_path / files[0], "wb") as f:
        f.write(b"garbage")
    # Lines that are not entry names (paths outside the directory, junk) are skipped.
    manifest.write_text("../../etc/passwd\n\x00junk\n" + manifest.read_text() + "deadbeef\n")
    again, err = run(tmp_path, {"EXPECT_PREFETCHED": str(len(files) - 1)})
    assert again["value"] == cold["value"]
    assert again["compiles"] == 1 and again["prefetched"] == len(files) - 1
    assert err.count("corrupt or truncated compilation cache entry") == 1  # the request warns, once
