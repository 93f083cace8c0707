"""The persistent compilation cache: warm starts, corrupt and foreign entries."""

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, torch, torch_tpu
x = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("tpu")
y = ((x * 3 + 1).relu() @ x.t()).sum()
v = y.item()
s = torch.tpu._get_cache_stats()
print(json.dumps({"value": v, "compiles": s["compiles"], "disk_hits": s["disk_hits"]}))
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
