"""The persistent compilation cache: warm starts, corrupt and foreign entries,
the start-up prefetch."""

import json
import os
import subprocess
import sys

import pytest

# What the cache stores and loads is the same whatever the eager mode.
pytestmark = pytest.mark.strict_pass("the cache is tested in processes of their own")

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
# C++ exceptions still unwind after whatever the plugin's loader did.
for _ in range(3):
    try:
        torch.ones(2, device="tpu").view(3)
        raise AssertionError("view(3) of 2 elements did not raise")
    except RuntimeError as e:
        assert "invalid for input of size 2" in str(e), e
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


def damage_executable(path):
    """Keeps the entry's framing, identity and key; garbles the executable."""
    data = bytearray(path.read_bytes())
    pos = 8
    for _ in range(2):  # identity, key
        pos += 8 + int.from_bytes(data[pos:pos + 8], "little")
    n = int.from_bytes(data[pos:pos + 8], "little")
    data[pos + 8:pos + 8 + n] = (b"\xff\x07not an executable" * n)[:n]
    path.write_bytes(bytes(data))


def test_executable_the_plugin_refuses_is_set_aside_and_recompiled(tmp_path):
    # An entry that parses but whose executable the plugin does not load:
    # reported without a C++ exception, moved aside, recompiled, and the
    # process's exceptions keep working (the script raises three after it).
    cold, _ = run(tmp_path, {"TORCH_TPU_CACHE_PREFETCH": "0"})
    files = entries(tmp_path)
    damage_executable(tmp_path / files[0])
    again, err = run(tmp_path, {"TORCH_TPU_CACHE_PREFETCH": "0"})
    assert "entry that does not load" in err and "DeserializeAndLoad" in err, err
    assert again["value"] == cold["value"]
    assert again["compiles"] == 1 and again["disk_hits"] == cold["compiles"] - 1
    assert os.path.exists(tmp_path / (files[0] + ".unloadable"))
    third, err = run(tmp_path, {"TORCH_TPU_CACHE_PREFETCH": "0"})  # rewritten
    assert third["compiles"] == 0 and "does not load" not in err


def test_executable_the_plugin_refuses_is_not_prefetched(tmp_path):
    cold, _ = run(tmp_path)
    files = entries(tmp_path)
    damage_executable(tmp_path / files[-1])
    again, err = run(tmp_path, {"EXPECT_PREFETCHED": str(len(files) - 1)})
    assert err.count("entry that does not load") == 1, err  # the prefetch warns, once
    assert again["value"] == cold["value"]
    assert again["compiles"] == 1 and again["prefetched"] == len(files) - 1
    assert os.path.exists(tmp_path / (files[-1] + ".unloadable"))


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


BOUNDED = r"""
import json, torch, torch_tpu
# Twelve shapes, each a program of its own, asked for twice in turn: with a
# bound of 4 the early ones are dropped from memory and loaded again.
for rnd in range(2):
    for n in range(1, 13):
        x = torch.arange(n * 3, dtype=torch.float32).reshape(n, 3)
        got = (x.to("tpu") * 2 + 1).sum(0).cpu()
        assert torch.equal(got, (x * 2 + 1).sum(0)), (n, got)
s = torch.tpu._get_cache_stats()
print(json.dumps({k: s[k] for k in ("cached", "evicted", "compiles", "disk_hits")}))
"""


def test_executables_in_memory_are_bounded_least_recently_used_first(tmp_path):
    env = dict(os.environ, TORCH_TPU_COMPILATION_CACHE_DIR=str(tmp_path),
               TORCH_TPU_EXECUTABLE_CACHE_SIZE="4", TORCH_TPU_CACHE_PREFETCH="0")
    p = subprocess.run([sys.executable, "-c", BOUNDED], env=env, capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout.splitlines()[-1])
    assert s["cached"] <= 5 and s["evicted"] > 0, s
    # Every program of the first round was dropped before the second asked
    # for it again, which loaded it from disk instead of compiling it.
    assert s["compiles"] > 0 and s["disk_hits"] == s["compiles"], s


HOT = r"""
import json, torch, torch_tpu
x = torch.linspace(-3, 3, 77).reshape(7, 11)
xt = x.to("tpu")
for _ in range(150):
    y = torch.sigmoid(xt) * 2
    torch_tpu.synchronize()  # the same program(s) each time, in every mode
torch.testing.assert_close(y.cpu(), torch.sigmoid(x) * 2)
s = torch.tpu._get_cache_stats()
print(json.dumps({"tier_ups": s["tier_ups"], "compiles": s["compiles"], "disk_hits": s["disk_hits"]}))
"""


def test_a_hot_quick_program_is_stored_optimized_for_the_next_start(tmp_path):
    def go():
        env = dict(os.environ, TORCH_TPU_COMPILATION_CACHE_DIR=str(tmp_path), TORCH_TPU_CACHE_PREFETCH="0")
        p = subprocess.run([sys.executable, "-c", HOT], env=env, capture_output=True, text=True, timeout=240)
        assert p.returncode == 0, p.stderr
        return json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])

    cold = go()
    assert cold["tier_ups"] >= 1  # sigmoid and the multiplication (one program in Fused Eager)
    warm = go()
    # The next process loads the optimized builds and has nothing to recompile.
    assert warm["compiles"] == 0 and warm["tier_ups"] == 0
    assert warm["disk_hits"] > 0
